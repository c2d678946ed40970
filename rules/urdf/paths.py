"""Where the files a URDF names are: ``package://``, ``file://``, relative and absolute paths.

One function, used both by the converter and by ``rules.urdf.references`` (doit's dependency scan), so
the two always agree. No pxr here.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote

#: URI schemes that would need the network or a simulator's model database: never fetched.
UNSUPPORTED_SCHEMES = ("http://", "https://", "ftp://", "model://")


class UnresolvedUri(ValueError):
    """A URI that names no local file (unknown package, remote scheme); ``str()`` says why."""


def find_package(name: str, urdf_dir: Path, packages: dict[str, str]) -> Path:
    """The folder of ROS package ``name``: from ``packages`` (name → folder), else the nearest folder called
    ``name`` in the URDF's folder, an ancestor, or an ancestor's child. Raises UnresolvedUri."""
    if name in packages:
        return Path(packages[name])
    for folder in (urdf_dir, *urdf_dir.parents):
        if folder.name == name:
            return folder
        if (folder / name).is_dir():
            return folder / name
    known = f" (given: {', '.join(sorted(packages))})" if packages else ""
    raise UnresolvedUri(f"ROS package '{name}' not found: give its folder (--package {name}=DIR, or a "
                        f"library entry's packages){known}")


def resolve_uri(uri: str, urdf_dir: Path, packages: dict[str, str]) -> Path:
    """The local file ``uri`` names, as an absolute path (the file may not exist). Raises UnresolvedUri.

    ``package://NAME/rel`` → package folder / rel; ``file:///abs`` → /abs; ``file://rel`` and plain
    relative paths → relative to the URDF's folder; absolute paths as they are.
    """
    text = uri.strip()
    if text.startswith("package://"):
        name, _, rest = text[len("package://"):].partition("/")
        if not name:
            raise UnresolvedUri(f"'{uri}' names no package")
        return Path(os.path.abspath(find_package(name, urdf_dir, packages) / unquote(rest)))
    if text.startswith(UNSUPPORTED_SCHEMES):
        raise UnresolvedUri(f"'{uri}' is not a local file (usdforge never downloads)")
    if text.startswith("file://"):
        text = unquote(text[len("file://"):])
    if not text:
        raise UnresolvedUri("empty file name")
    path = Path(text)
    return Path(os.path.abspath(path if path.is_absolute() else urdf_dir / path))
