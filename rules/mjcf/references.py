"""Files an MJCF model references: includes (recursively), meshes, textures, height fields, skins, and
attached sub-models (``<model file>``) with what they reference; missing files included.

Paths are resolved as MuJoCo resolves them: ``<include file>`` relative to the folder of the main model
file (also inside included files); asset files relative to ``<compiler meshdir>`` (meshes, height fields,
skins) or ``texturedir`` (textures), each relative to the main file's folder unless absolute, with
``assetdir`` setting both; the last ``<compiler>`` that sets a directory wins, as MuJoCo's parser
overwrites it; ``strippath`` keeps only the file name. A sub-model is its own model with its own folder.

No pxr here: doit's scan tasks run this in the parent process.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

from lxml import etree

from usdforge.rules.errors import ConversionError
from usdforge.rules.files import MAX_ELEMENTS, Reference, check_model_file, check_references, describe_element

#: rules.xml.SAFE_XML's settings (no entities, DTD or network), but recovering from what MuJoCo's lenient
#: parser (tinyxml2) accepts and libxml2 does not, such as attributes without a space between them.
LENIENT_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, remove_comments=True,
                              recover=True)

#: Elements (tag → file attributes) whose files live in meshdir.
MESHDIR_FILES = {"mesh": ("file",), "hfield": ("file",), "skin": ("file",)}
#: Elements whose files live in texturedir (a cube texture may give one file per face).
TEXTUREDIR_FILES = {"texture": ("file", "fileright", "fileleft", "fileup", "filedown", "filefront", "fileback")}


def _parse(path: Path) -> etree._ElementTree:
    """Parse one MJCF file leniently; ConversionError when nothing of it can be read as XML, or when it is
    not a regular file, is too large or holds too many elements."""
    check_model_file(path)
    try:
        tree = etree.parse(str(path), LENIENT_XML)
    except etree.XMLSyntaxError as exc:
        raise ConversionError(path, f"not well-formed XML: {exc.msg}", line=exc.lineno) from None
    except OSError as exc:
        raise ConversionError(path, f"cannot read the file ({exc})") from None
    if tree.getroot() is None:
        raise ConversionError(path, "not an XML document")
    if sum(1 for _ in tree.getroot().iter()) > MAX_ELEMENTS:
        raise ConversionError(path, f"more than {MAX_ELEMENTS} XML elements: too large to convert")
    return tree


def _expanded_elements(path: Path, root_dir: Path, includes: list[Reference], seen: set[Path],
                       roots: list[Path] | None = None) -> list[tuple[Path, etree._Element]]:
    """(file, element) of every element of ``path`` in document order, with each ``<include>`` replaced by
    the included file's elements (recursively); the include files themselves (found or not) are appended
    to ``includes``."""
    elements: list[tuple[Path, etree._Element]] = []
    tree = _parse(path)
    for element in tree.getroot().iter(etree.Element):
        if element.tag != "include":
            elements.append((path, element))
            continue
        name = element.get("file")
        if not name:
            continue
        included = _resolve(root_dir, None, name, strip=False)
        reference = Reference(included, "include", path, describe_element(element), element.sourceline)
        includes.append(reference)
        if roots is not None:
            check_references([reference], roots)  # before parsing it
        if included.is_file() and included not in seen:
            seen.add(included)
            try:
                elements.extend(_expanded_elements(included, root_dir, includes, seen, roots))
            except ConversionError:
                if roots is not None:
                    raise
                # Dependency scan only: the conversion reports it, naming the <include> (after checking
                # that the file may be read at all).
    return elements


def _is_absolute(name: str) -> bool:
    return PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute()


def _resolve(root_dir: Path, directory: str | None, name: str, strip: bool) -> Path:
    """MuJoCo's file rule: ``name`` (its base name with strippath) under ``directory`` (itself relative to
    the model folder unless absolute), unless ``name`` is absolute."""
    if strip:
        name = PurePosixPath(name.replace("\\", "/")).name
    if _is_absolute(name):
        return Path(name)
    base = root_dir
    if directory:
        base = Path(directory) if _is_absolute(directory) else root_dir / directory
    return base / name


def _model_references(path: Path, seen: set[Path], roots: list[Path] | None = None) -> list[Reference]:
    """References of one model file (main model or attached sub-model), recursively; with ``roots``, each
    include or sub-model is checked (``rules.files.check_references``) before it is parsed."""
    root_dir = path.parent
    found: list[Reference] = []
    elements = _expanded_elements(path, root_dir, found, {path}, roots)
    meshdir = texturedir = None
    strip = False
    # MuJoCo applies <compiler> attributes as it parses; the directories are used when assets load, after
    # parsing, so the last value set anywhere in the model wins.
    for _, element in elements:
        if element.tag != "compiler":
            continue
        if element.get("assetdir") is not None:
            meshdir = texturedir = element.get("assetdir")
        if element.get("meshdir") is not None:
            meshdir = element.get("meshdir")
        if element.get("texturedir") is not None:
            texturedir = element.get("texturedir")
        if element.get("strippath") is not None:
            strip = element.get("strippath") == "true"
    for file, element in elements:
        tag = element.tag
        for directory, table in ((meshdir, MESHDIR_FILES), (texturedir, TEXTUREDIR_FILES)):
            for attribute in table.get(tag, ()):
                name = element.get(attribute)
                if name:
                    found.append(Reference(_resolve(root_dir, directory, name, strip), tag, file,
                                           describe_element(element), element.sourceline))
        if tag == "model" and element.get("file"):
            # <asset><model file=...>: a whole MJCF model attached by <attach>; it resolves its own paths.
            model = _resolve(root_dir, None, element.get("file"), strip=False)
            found.append(Reference(model, "model", file, describe_element(element), element.sourceline))
            if roots is not None:
                check_references(found[-1:], roots)
            if model.is_file() and model not in seen:
                seen.add(model)
                found.extend(_model_references(model, seen, roots))
    return found


def mjcf_file_references(path: str | Path, roots: list[Path] | None = None) -> list[Reference]:
    """Every file the MJCF model at ``path`` references, recursively, whether it exists or not, each with
    the file, line and element that names it (first mention of each file).

    roots: when given, an include or attached model outside them (or not a regular file) is a
        ConversionError before it is parsed (``rules.files.check_references``).
    Raises ConversionError when the model file or an existing included file cannot be read as XML at all.
    """
    path = Path(path).absolute()
    unique: dict[Path, Reference] = {}
    for found in _model_references(path, {path}, roots):
        unique.setdefault(Path(found.path), found)
    return list(unique.values())


def mjcf_references(path: str | Path) -> list[Path]:
    """Every file the MJCF model at ``path`` references, recursively, whether it exists or not.

    Raises ConversionError when the model file or an existing included file cannot be read as XML at all.
    """
    return [reference.path for reference in mjcf_file_references(path)]
