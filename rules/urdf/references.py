"""Files a URDF references: meshes and textures, and the files those meshes reference (MTL, images),
missing ones included; for a xacro, also every file its expansion read. Paths are resolved with
``rules.urdf.paths.resolve_uri``, the converter's own function, from the same elements the converter reads.

No pxr here: doit's scan tasks run this in the parent process.
"""

from __future__ import annotations

from pathlib import Path

from usdforge.rules.errors import ConversionError
from usdforge.rules.files import Reference, describe_element
from usdforge.rules.mesh.references import mesh_references
from usdforge.rules.urdf.paths import Resolution, UnresolvedUri, resolve_package_uri, resolve_uri
from usdforge.rules.urdf.xacro import XacroError, expand_xacro, is_xacro
from usdforge.rules.urdf.xml import load_urdf_xml

#: Where the converter reads file names: (XPath from <robot>, attribute).
FILE_ELEMENTS = (
    ("link/visual/geometry/mesh", "filename"),
    ("link/collision/geometry/mesh", "filename"),
    ("material/texture", "filename"),
    ("link/visual/material/texture", "filename"),
)


def urdf_file_references(path: Path, root, packages: dict[str, str], tree_root: str | None = None,
                         allowed: tuple[str, ...] = (),
                         ) -> tuple[list[Reference], list[Path], dict[str, Resolution]]:
    """(every file the parsed URDF ``root`` references, with the element naming it; the package folders
    its ``package://`` URIs resolve to; how each ``package://`` URI resolved, by URI). Files a mesh
    references (MTL, images) are listed under the URDF element that names the mesh. URIs that name no
    local file are left out (the reader reports them)."""
    found: dict[Path, Reference] = {}
    package_roots: list[Path] = [Path(folder).absolute() for folder in packages.values()]
    resolutions: dict[str, Resolution] = {}
    # A robot names most mesh files several times (pr2: 76 mesh elements, 26 files): a URI seen before
    # under the same tag adds nothing, and resolving it again was most of the scan.
    seen: set[tuple[str, str]] = set()
    for xpath, attribute in FILE_ELEMENTS:
        for element in root.iterfind(xpath):
            uri = (element.get(attribute) or "").strip()
            if not uri or (uri, element.tag) in seen:
                continue
            seen.add((uri, element.tag))
            try:
                if uri.startswith("package://"):
                    resolution = resolutions[uri] = resolve_package_uri(uri, path.parent, packages, tree_root,
                                                                        allowed)
                    file = resolution.path
                    package_roots.append(resolution.root)
                else:
                    file = resolve_uri(uri, path.parent, packages, tree_root, allowed)
            except UnresolvedUri:
                continue
            where = describe_element(element), element.sourceline
            found.setdefault(file, Reference(file, element.tag, path, *where))
            if element.tag == "mesh":
                for part in mesh_references(file):
                    found.setdefault(part, Reference(part, f"file referenced by mesh {file.name}", path, *where))
    return list(found.values()), list(dict.fromkeys(package_roots)), resolutions


def urdf_references(path: str | Path, packages: dict[str, str], xacro_args: dict[str, str] | None = None,
                    tree_root: str | None = None, xacro_env: dict[str, str] | None = None,
                    allowed: tuple[str, ...] = ()) -> list[Path]:
    """Every file the URDF at ``path`` references, recursively, in document order (duplicates removed).

    A URDF that cannot be parsed references nothing here (the conversion reports its error); a URI that
    names no local file (an unknown package, http://) is left out: there is no file to watch.

    A xacro (``rules.urdf.xacro``) is expanded with ``xacro_args``: every file the expansion read
    (includes, YAML files; missing ones too) is a reference, and so is every file its URDF names. One that
    does not expand references the files it had read when it failed (a missing include among them).
    A ``package://`` file found past candidates that were missing (``Resolution.shadowed``) references
    those too: creating one changes which file the URI names.
    """
    path = Path(path)
    found: list[Path] = []
    expanded = None
    if is_xacro(path):
        try:
            expansion = expand_xacro(path, packages, xacro_args, tree_root=tree_root, env=xacro_env,
                                     allowed=allowed)
        except XacroError as exc:
            return [Path(f) for f in exc.files]
        found = [Path(f) for f in expansion.files]
        expanded = expansion.urdf
    try:
        root, _ = load_urdf_xml(path, expanded)
    except ConversionError:
        return found
    seen = set(found)  # membership by hash: a robot names hundreds of mesh files
    references, _, resolutions = urdf_file_references(path, root, packages, tree_root, allowed)
    # A package:// file found past missing candidates (an explicit package folder without it, so the model's
    # own tree gave it) depends on those staying missing: they are references too, recorded as missing.
    shadowed = [file for resolution in resolutions.values() for file in resolution.shadowed]
    for file in [reference.path for reference in references] + shadowed:
        if file not in seen:
            seen.add(file)
            found.append(file)
    return found
