"""Files a mesh file references (MTL and textures of OBJ, buffers/images of glTF, images of DAE).

No pxr here: doit's scan tasks run this in the parent process.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from stat import S_ISREG
from typing import Callable

from lxml import etree

from usdforge.rules.build_scope import memo
from usdforge.rules.files import MAX_FILE_BYTES
from usdforge.rules.xml import SAFE_XML

_MTL_MAPS = re.compile(r"^\s*(map_\w+|bump|disp|decal|refl|norm)\s+(.+?)\s*$", re.IGNORECASE)


def _mtl_references(mtl: Path) -> list[Path]:
    found = []
    for line in mtl.read_text(errors="replace").splitlines():
        match = _MTL_MAPS.match(line)
        if match:
            # Options like "-s 1 1 1" may precede the file name: the name is the last token.
            found.append(mtl.parent / match.group(2).split()[-1])
    return found


def obj_references(path: Path) -> list[Path]:
    """The MTL files an OBJ names and the textures those name."""
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("mtllib"):
            for name in line.split(None, 1)[1:]:
                mtl = path.parent / name.strip()
                found.append(mtl)
                if mtl.is_file() and mtl.stat().st_size <= (64 << 20):
                    found.extend(_mtl_references(mtl))
    return found


def gltf_references(path: Path) -> list[Path]:
    """The external buffers and images a .gltf names (GLB embeds its own)."""
    try:
        document = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError, OSError):
        return []
    if not isinstance(document, dict):
        return []  # not glTF: the mesh reader reports it, naming the file
    uris = [item.get("uri") for key in ("buffers", "images") if isinstance(document.get(key), list)
            for item in document[key] if isinstance(item, dict)]
    return [path.parent / uri for uri in uris if isinstance(uri, str) and uri and not uri.startswith("data:")]


#: What ``dae_references`` searches a COLLADA file for: a compiled search finds it (or not) in 60 % of the
#: time of ``bytes in bytes`` (panda's 10.5 MB: 3.1 ms instead of 4.9).
_INIT_FROM = re.compile(rb"init_from")


def dae_references(path: Path) -> list[Path]:
    """The images a COLLADA file names in ``<library_images>``.

    A file in an ASCII-compatible encoding without the bytes ``init_from`` names none and is not parsed:
    most COLLADA meshes have no images, and parsing their megabytes of vertex text was most of a URDF's
    dependency scan (10.5 MB of panda meshes: 8.5 ms)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if _INIT_FROM.search(data) is None and _ascii_compatible(data):
        return []
    try:
        root = etree.fromstring(data, SAFE_XML)
    except etree.XMLSyntaxError:
        return []
    found = []
    for element in root.iter("{*}init_from"):
        text = (element.text or "").strip()
        if text and element.getparent() is not None and etree.QName(element.getparent()).localname == "image":
            found.append(path.parent / text.removeprefix("file://"))
    return found


def _ascii_compatible(data: bytes) -> bool:
    """Whether XML ``data`` spells its markup in ASCII bytes (UTF-8, Latin-1 …), so an element name can be
    searched for as bytes: it opens with ``<`` (after an optional UTF-8 byte order mark and white space)
    followed by a byte that is not NUL (UTF-16 without a byte order mark starts ``<\\0``)."""
    head = data[:4096].removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    return head[:1] == b"<" and head[1:2] not in (b"", b"\x00")


MESH_SCANNERS: dict[str, Callable[[Path], list[Path]]] = {
    "obj": obj_references, "gltf": gltf_references, "dae": dae_references,
}


def mesh_references(path: Path) -> list[Path]:
    """Files a mesh file references (materials, textures, buffers), whether they exist or not; none for
    self-contained formats (STL, PLY, OFF, GLB), and none read from a file that is not a regular file of
    at most ``rules.files.MAX_FILE_BYTES`` (the conversion reports it).

    A file is scanned once per build (``rules.build_scope.one_build``: the dependency scan, the
    conversion's check and the mesh cache's key all ask), never once per process: the result depends on
    the files the scan read besides this one (an OBJ's MTL files), which may change between builds."""
    scanner = MESH_SCANNERS.get(path.suffix.lower().lstrip("."))
    if not scanner:
        return []
    try:
        stat = os.stat(path)
    except OSError:
        return []
    if not S_ISREG(stat.st_mode) or stat.st_size > MAX_FILE_BYTES:
        return []
    scanned = memo("mesh-references")
    if scanned is None:
        return scanner(Path(path))
    stamp = (os.path.abspath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    if stamp not in scanned:
        scanned[stamp] = scanner(Path(path))
    return list(scanned[stamp])
