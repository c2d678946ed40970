"""Where the files a URDF names are: ``package://``, ``file://``, relative and absolute paths.

One resolver, used by the converter, by ``rules.urdf.references`` (doit's dependency scan), by the
verifier and, loaded on its own (stdlib only), by the xacro sandbox for ``$(find NAME)``: all agree.
No pxr here.

**The boundary.** A package given explicitly (``packages``: a library entry's ``packages``,
``--package NAME=DIR``) resolves to its folder. Any other package is looked for *inside the model's own
tree* only: from the model's folder up to the nearest enclosing folder that marks a tree
(``tree_boundary``: a folder holding ``.git``, a ROS workspace's ``src/``, or the library manifest's
folder when given), never above it, and never the file system root, a top-level system folder (``/tmp``,
``/usr`` …: ``_NEVER_TREES``) or a home folder. Without any marker
the tree is the highest enclosing ROS package (a folder holding ``package.xml``), else the model
folder's parent.

**The rules**, in order; the first candidate whose file exists wins (``resolve_package_uri``):

1. ``explicit``: ``packages[NAME] / rest``; then, for each allowed root (``--allow-root``, ``allowed_roots``),
   the root itself or a child of it called NAME (or declaring NAME): ``folder / rest``.
2. ``folder``: a folder called NAME (or whose ``package.xml`` declares NAME; those are preferred) that is
   the model's folder, an ancestor or an ancestor's child, inside the tree: ``folder / rest``.
3. ``walk-up``: urdf-usd-converter's rule: ``ancestor / rest`` for the model's folder and its ancestors,
   inside the tree (a package named ``abb_irb140_support`` whose meshes are in ``abb_irb140/meshes``).
4. ``package:///a/b/c`` (no package name): rules 1-3 with NAME ``a`` and rest ``b/c``, then ``ancestor /
   a/b/c``.

When no candidate's file exists, the first candidate is returned (its file is then reported missing);
when there is none, ``UnresolvedUri`` says where the package was looked for.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote

from usdforge.rules.build_scope import memo

#: URI schemes that would need the network or a simulator's model database: never fetched.
UNSUPPORTED_SCHEMES = ("http://", "https://", "ftp://", "model://")
#: Folders that are never a tree's root for the package search (besides a home folder).
_NEVER_TREES = ("/", "/home", "/Users", "/root", "/tmp", "/var", "/usr", "/opt", "/mnt", "/media", "/srv")
#: Files whose presence beside a workspace's ``src/`` marks a ROS workspace (catkin, catkin_tools, colcon).
_WORKSPACE_MARKS = (".catkin_workspace", ".catkin_tools", "devel", "install", "log", "build")
_PACKAGE_NAME = re.compile(rb"<name>\s*([^<\s]+)\s*</name>")


class UnresolvedUri(ValueError):
    """A URI that names no local file (unknown package, remote scheme); ``str()`` says why."""


class Resolution(NamedTuple):
    """Where a ``package://`` URI led: the file, the folder that was its package root, the rule
    (``explicit``, ``folder``, ``walk-up``, ``three-slash``) that chose it, and the candidates tried before
    it whose file was missing (``shadowed``): creating one of those would change where the URI leads, so
    the dependency scan records them as missing files."""

    path: Path
    root: Path
    rule: str
    shadowed: tuple[Path, ...] = ()


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


def _is_home(folder: str) -> bool:
    home = os.path.expanduser("~")
    return folder == _real(home) or folder == home or os.path.dirname(folder) in ("/home", "/Users")


def _never_tree(folder: str) -> bool:
    return folder in _NEVER_TREES or _is_home(folder)


def _is_workspace_src(folder: str) -> bool:
    if os.path.basename(folder) != "src":
        return False
    parent = os.path.dirname(folder)
    return (os.path.isfile(os.path.join(folder, "CMakeLists.txt"))  # catkin's top-level CMakeLists link
            or any(os.path.exists(os.path.join(parent, mark)) for mark in _WORKSPACE_MARKS))


def tree_boundary(model_dir: str, tree_root: str | None = None) -> str:
    """The folder the package search by convention may not leave, for a model in ``model_dir`` (real
    path, see the module docstring). ``tree_root``: the library manifest's folder, a marker when it
    encloses the model. Found once per build (``rules.build_scope``), not once per URI: the walk up
    stats every folder to the root."""
    known = memo("tree_boundary")
    if known is None:
        return _tree_boundary(model_dir, tree_root)
    if (model_dir, tree_root) not in known:
        known[model_dir, tree_root] = _tree_boundary(model_dir, tree_root)
    return known[model_dir, tree_root]


def _tree_boundary(model_dir: str, tree_root: str | None) -> str:
    start = _real(model_dir)
    chain = [start]
    while chain[-1] != os.path.dirname(chain[-1]):
        chain.append(os.path.dirname(chain[-1]))
    root = _real(tree_root) if tree_root else None
    found = None
    for folder in chain:
        if _never_tree(folder):
            break
        if folder == root or os.path.lexists(os.path.join(folder, ".git")) or _is_workspace_src(folder):
            found = folder
            break
    if found is None:
        packages = [f for f in chain if not _never_tree(f) and os.path.isfile(os.path.join(f, "package.xml"))]
        found = packages[-1] if packages else os.path.dirname(start)
    # Never the root or a home folder: then the child of it on the way to the model (or the model's folder).
    index = chain.index(found) if found in chain else 1
    while index > 0 and _never_tree(chain[index]):
        index -= 1
    return chain[index]


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


# Folder facts are remembered per process under the stat of what they read (a package.xml edited, a
# folder added: another key), so a long-running build never resolves from a stale view.

def declared_name(folder: str) -> str | None:
    """The package name ``folder/package.xml`` declares, or None (no such file, or no ``<name>``)."""
    path = os.path.join(folder, "package.xml")
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return _declared_name(path, info.st_mtime_ns, info.st_size, info.st_ino)


@functools.lru_cache(maxsize=4096)
def _declared_name(path: str, *stamp: int) -> str | None:
    try:
        with open(path, "rb") as stream:
            head = stream.read(65536)
    except OSError:
        return None
    match = _PACKAGE_NAME.search(head)
    return match.group(1).decode("utf-8", "replace") if match else None


def _children(folder: str) -> tuple[str, ...]:
    try:
        info = os.stat(folder)
    except (OSError, ValueError):
        return ()
    return _listed_children(folder, info.st_mtime_ns, info.st_ino)


@functools.lru_cache(maxsize=1024)
def _listed_children(folder: str, *stamp: int) -> tuple[str, ...]:
    try:
        return tuple(sorted(entry.path for entry in os.scandir(folder) if entry.is_dir(follow_symlinks=False)))
    except OSError:
        return ()


def package_folders(name: str, model_dir: str | Path, boundary: str) -> list[str]:
    """Folders that may be package ``name`` by convention, nearest first: the model's folder, each
    ancestor and each ancestor's child up to ``boundary``, called ``name`` or declaring ``name`` in
    their ``package.xml``; those whose ``package.xml`` declares ``name`` first."""
    if not name or name in (".", "..") or "/" in name:
        return []
    declared, named = [], []
    folder = _real(model_dir)
    while True:
        for candidate in (folder, *_children(folder)):
            is_named = os.path.basename(candidate) == name
            is_declared = declared_name(candidate) == name
            if is_declared and candidate not in declared:
                declared.append(candidate)
            elif is_named and not is_declared and candidate not in named:
                named.append(candidate)
        if folder == boundary or not _within(folder, boundary):
            break
        folder = os.path.dirname(folder)
    return declared + named


def _ancestors(model_dir: str, boundary: str) -> list[str]:
    folder, found = _real(model_dir), []
    while True:
        found.append(folder)
        if folder == boundary or not _within(folder, boundary) or folder == os.path.dirname(folder):
            return found
        folder = os.path.dirname(folder)


def _allowed_folders(name: str, allowed: tuple[str, ...]) -> list[str]:
    """Folders of package ``name`` among the allowed roots: a root called (or declaring) ``name``, or such
    a child of a root."""
    found = []
    for root in allowed:
        top = _real(root)
        for candidate in (top, *_children(top)):
            if (os.path.basename(candidate) == name or declared_name(candidate) == name) and candidate not in found:
                found.append(candidate)
    return found


def find_package(name: str, urdf_dir: Path, packages: dict[str, str], tree_root: str | None = None,
                 allowed: tuple[str, ...] = ()) -> Path:
    """The folder of ROS package ``name`` (``$(find name)``): ``packages[name]``, else one in the
    ``allowed`` roots, else the first of ``package_folders`` inside the model's tree. Raises
    UnresolvedUri."""
    if name in packages:
        return Path(packages[name])
    boundary = tree_boundary(str(urdf_dir), tree_root)
    folders = _allowed_folders(name, tuple(allowed)) + package_folders(name, urdf_dir, boundary)
    if folders:
        return Path(folders[0])
    raise UnresolvedUri(_not_found(name, boundary, packages))


def _not_found(name: str, boundary: str, packages: dict[str, str]) -> str:
    known = f"; given: {', '.join(sorted(packages))}" if packages else ""
    return (f"ROS package '{name}' not found in the model's tree ({boundary}{known}): give its folder "
            f"(--package {name}=DIR, or a library entry's packages)")


def resolve_package_uri(uri: str, urdf_dir: Path, packages: dict[str, str], tree_root: str | None = None,
                        allowed: tuple[str, ...] = ()) -> Resolution:
    """Where ``package://NAME/rest`` (or ``package:///a/b``) leads, by the rules of the module docstring.
    Raises UnresolvedUri when no rule gives a candidate. Resolved once per build (``rules.build_scope``):
    the file check, the mesh read-ahead and the reader all ask, and each answer stats several folders."""
    known = memo("package-uri")
    if known is None:
        return _resolve_package_uri(uri, urdf_dir, packages, tree_root, allowed)
    key = (uri.strip(), str(urdf_dir), tuple(sorted(packages.items())), tree_root, tuple(allowed))
    if key not in known:
        try:
            known[key] = _resolve_package_uri(uri, urdf_dir, packages, tree_root, allowed)
        except UnresolvedUri as exc:
            known[key] = exc
    found = known[key]
    if isinstance(found, UnresolvedUri):
        raise UnresolvedUri(str(found))
    return found


def _resolve_package_uri(uri: str, urdf_dir: Path, packages: dict[str, str], tree_root: str | None,
                         allowed: tuple[str, ...]) -> Resolution:
    text = uri.strip()[len("package://"):]
    three_slash = text.startswith("/")
    name, _, rest = text.lstrip("/").partition("/")
    rest = unquote(rest)
    if not name:
        raise UnresolvedUri(f"'{uri}' names no package")
    candidates: list[tuple[str, str, str]] = []  # (file, root, rule)

    def first_found(start: int) -> Resolution | None:
        for index, (file, root, rule) in enumerate(candidates[start:], start):
            # A file that climbs out of its root (package://pkg/../../x) is never "found" here: it is
            # reported outside the roots (rules.files.check_references).
            if _within(_real(file), _real(root)) and os.path.isfile(file):
                # Every candidate before this one was tried (a search from `explicit` follows the explicit
                # ones, all missing); those inside their roots are where the file would come from if created.
                shadowed = tuple(Path(f) for f, r, _ in candidates[:index] if _within(_real(f), _real(r)))
                return Resolution(Path(file), Path(root), "three-slash" if three_slash else rule, shadowed)
        return None

    if name in packages:
        candidates.append((os.path.abspath(os.path.join(packages[name], rest)), os.path.abspath(packages[name]),
                           "explicit"))
    for folder in _allowed_folders(name, tuple(allowed)):
        candidates.append((os.path.abspath(os.path.join(folder, rest)), folder, "explicit"))
    # Candidates are tried in order, so a file found in an explicit folder ends the search before the
    # model's tree is looked at (its boundary and package folders are most of the cost of a URI).
    found = first_found(0)
    if found is not None:
        return found
    explicit = len(candidates)
    boundary = tree_boundary(str(urdf_dir), tree_root)
    for folder in package_folders(name, urdf_dir, boundary):
        candidates.append((os.path.abspath(os.path.join(folder, rest)), folder, "folder"))
    named = len(candidates)  # candidates of a package found by name: the file reported missing is theirs
    whole = f"{name}/{rest}" if three_slash else rest
    if whole:
        for ancestor in _ancestors(str(urdf_dir), boundary):
            candidates.append((os.path.abspath(os.path.join(ancestor, whole)), ancestor, "walk-up"))
    found = first_found(explicit)
    if found is not None:
        return found
    if named:
        file, root, rule = candidates[0]
        return Resolution(Path(file), Path(root), "three-slash" if three_slash else rule)
    raise UnresolvedUri(_not_found(name, boundary, packages))


def resolve_uri(uri: str, urdf_dir: Path, packages: dict[str, str], tree_root: str | None = None,
                allowed: tuple[str, ...] = ()) -> Path:
    """The local file ``uri`` names, as an absolute path (the file may not exist). Raises UnresolvedUri.

    ``package://`` → ``resolve_package_uri``; ``file:///abs`` → /abs; ``file://rel`` and plain relative
    paths → relative to the URDF's folder; absolute paths as they are.
    """
    text = uri.strip()
    if text.startswith("package://"):
        return resolve_package_uri(text, urdf_dir, packages, tree_root, allowed).path
    if text.startswith(UNSUPPORTED_SCHEMES):
        raise UnresolvedUri(f"'{uri}' is not a local file (usdforge never downloads)")
    if text.startswith("file://"):
        text = unquote(text[len("file://"):])
    if not text:
        raise UnresolvedUri("empty file name")
    path = Path(text)
    return Path(os.path.abspath(path if path.is_absolute() else urdf_dir / path))
