"""Reading mesh files with Assimp (the ``assimp-py`` binding, Assimp compiled inside its wheel): the primary
reader of every format it reads, ten times cheaper to import than trimesh and several times faster on
COLLADA. No trimesh, scipy or pxr here.

Assimp runs in forked child processes (``read_in_child``: forked on first use and kept for the next files,
as a fork costs more than reading a small mesh; one for a file read alone, two for the files a robot asks
for ahead, ``READERS``): a file that crashes it (a segfault in the C++ importer) or hangs it ends that
child, never the build; the caller reads that file with trimesh instead, and a fresh child takes the
dead one's place. For the robot path a child also welds the parts of a file (``robot_part``) when the
parent is not waiting for that answer, so that both processors work (the parent welds the others itself,
with the same code: the parts are the same either way).

``read_assimp`` returns a reason instead of parts, meaning "read this file with trimesh", for the classes
of file Assimp does not read or would read differently from trimesh (each named in ``FALLBACK_CLASSES``,
each with its test in ``tests/test_assimp_reader.py``); the choice depends only on the file's bytes and
the libraries' versions, so the same file always goes through the same reader (save "crashed", which a
time or memory limit can also give).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import functools
import gc
import json
import math
import mmap
import os
import re
import select
import signal
import struct
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from usdforge.rules.native_loads import NATIVE_LOADS
from usdforge.rules.versions import distribution_version

#: Extensions Assimp reads first (lower case, no dot). glTF/GLB, OBJ, PLY, OFF, STL, COLLADA, FBX.
ASSIMP_FIRST = ("stl", "obj", "ply", "off", "glb", "gltf", "dae", "fbx")

#: Why a file that Assimp reads still goes through trimesh (the reason strings ``read_assimp`` gives).
FALLBACK_CLASSES = {
    "refused": "Assimp refuses the file (a format variant or damage it does not read; a COLLADA file it "
               "refuses for its <lines> is read again without them, from memory, before it falls back)",
    "crashed": "Assimp crashed or hung on the file in its child process",
    "embedded texture": "an image embedded in the file (GLB, data: URI): assimp-py does not expose its pixels",
    "no triangles": "Assimp found no triangle mesh (trimesh reports why, naming the file)",
    "collada unit": "a COLLADA <unit meter> that is not a positive finite number (trimesh ignores it)",
    "polygons": "faces with more than three corners, which Assimp may split along the other diagonal",
    "several meshes": "an STL, PLY, OFF or OBJ that Assimp splits into several meshes (trimesh names and "
                      "groups them its own way)",
    "texture": "a textured material other than a diffuse map of an existing file the reference checks "
               "passed, in a COLLADA file whose <transparent> colours are opaque or an OBJ whose material "
               "says its Kd (Assimp and trimesh differ on the others' colours; trimesh decodes the image)",
    "transparency": "a material with an opacity below 1 (Assimp and trimesh read COLLADA's transparency "
                    "differently)",
    "missing reference": "an OBJ whose MTL or texture file is missing (Assimp makes up a material)",
    "uv without material": "UV coordinates but no material (trimesh gives such a mesh a default grey "
                           "material and texture)",
    "not finite": "a vertex that is not a finite number (trimesh's error message names it)",
}

#: glTF is Y-up by specification; usdforge's stages are Z-up (the same matrix as trimesh's path).
Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
#: Seconds a child may read one file before it is taken for hung.
CHILD_SECONDS = 120.0
#: Address space (bytes) a child may map beyond the parent's: a hostile file cannot exhaust the memory.
CHILD_MEMORY = 8 << 30


class RawPart(NamedTuple):
    """One triangle mesh as Assimp reads it, before welding, in the file's frame (node transforms not yet
    applied), in Assimp's own types (float32 numbers, uint32 indices: half the bytes to send from the
    reading child; ``decode`` widens them to float64 and int64, exactly): points (V, 3); faces (F, 3);
    normals (V, 3) or None when the file gives none (an STL's facet normals on each corner: trimesh's unprocessed reading drops them, its processed one
    weighs them into vertex normals); uv (V, 2) or None; colors (V, 4) RGBA in [0, 1] or None; color: the material's diffuse RGBA or None;
    texture: the diffuse texture file or None; transform (4, 4): the node's place in the file's frame;
    unit: the metres per unit of a COLLADA file's ``<unit meter>``, which ``transform`` applies (1 else)."""

    name: str
    points: np.ndarray
    faces: np.ndarray
    normals: np.ndarray | None
    uv: np.ndarray | None
    colors: np.ndarray | None
    color: tuple[float, float, float, float] | None
    texture: Path | None
    transform: np.ndarray
    unit: float = 1.0
    welded: bool = False


class Request(NamedTuple):
    """A file asked of the reading child, and how its parts come back: as Assimp reads them (the mesh
    converter, which hands them to trimesh), or for the robot path (``robot_part``: an STL's facet normals
    dropped, and welded by the child unless the parent is waiting for them)."""

    path: Path
    robot: bool = False


@functools.cache
def assimp_version() -> str:
    """The version of the assimp-py binding ("absent" when it is not installed)."""
    return distribution_version("assimp-py")


def read_assimp(path: Path) -> list[RawPart] | str:
    """The parts of ``path`` read by Assimp in this process, or the ``FALLBACK_CLASSES`` key saying why
    trimesh must read it instead. Call it through ``read_in_child`` unless the file is trusted."""
    import assimp_py

    extension = path.suffix.lower().lstrip(".")
    data_head = _head(path)
    if extension in ("glb", "gltf") and _has_embedded_image(path, extension, data_head):
        return "embedded texture"
    if extension == "obj":
        if _obj_has_polygons(path):
            return "polygons"
        from usdforge.rules.mesh.references import obj_references

        if any(not reference.is_file() for reference in obj_references(path)):
            return "missing reference"
    flags = assimp_py.Process_Triangulate | assimp_py.Process_SortByPType
    # A COLLADA file with line primitives is refused as it is: its copy without them is read at once
    # rather than after a refused read of the whole file.
    scene = _without_lines(path, flags) if extension == "dae" and _has_lines(path) else None
    if scene is None:
        try:
            scene = assimp_py.import_file(str(path), flags)
        except Exception:  # noqa: BLE001 - the binding reports every failure as a generic error
            scene = _without_lines(path, flags) if extension == "dae" else None
            if scene is None:
                return "refused"
    if scene is None or not scene.meshes:
        return "no triangles"
    root_transform, unit = None, 1.0
    if extension == "dae":
        # Assimp folds <unit meter> and the up-axis rotation into the root node; robots ignore <up_axis>
        # (as RViz does, and trimesh), so only the unit's scale stays.
        root = np.asarray(scene.root_node.transformation, dtype=np.float64)
        scale = abs(float(np.linalg.det(root[:3, :3]))) ** (1.0 / 3.0)
        if not np.isfinite(scale) or scale <= 0.0:
            return "collada unit"
        root_transform, unit = np.diag([scale, scale, scale, 1.0]), scale
    up = Y_UP_TO_Z_UP if extension in ("glb", "gltf") else np.eye(4)
    parts: list[RawPart] = []
    stack = [(scene.root_node, up, True)]
    placed: list[tuple[int, str, np.ndarray]] = []
    while stack:
        node, parent, is_root = stack.pop()
        local = root_transform if (is_root and root_transform is not None) else \
            np.asarray(node.transformation, dtype=np.float64)
        matrix = parent @ local
        for index in node.mesh_indices:
            placed.append((index, node.name, matrix))
        stack.extend((child, matrix, False) for child in reversed(node.children))
    single_name = path.name if extension in ("stl", "ply", "off", "obj") else None
    if single_name is not None and len(placed) != 1:
        return "several meshes"
    counts: dict[str, int] = {}
    for index, node_name, matrix in placed:
        mesh = scene.meshes[index]
        if mesh.num_faces == 0 or mesh.num_indices != 3 * mesh.num_faces:
            continue  # points and lines (SortByPType puts them in meshes of their own)
        # Copies: the buffers are the scene's memory, freed with it.
        points = np.frombuffer(mesh.vertices, dtype=np.float32).reshape(-1, 3).copy()
        if not np.isfinite(points).all():
            return "not finite"
        faces = np.frombuffer(mesh.indices, dtype=np.uint32).reshape(-1, 3).copy()
        normals = None
        if mesh.normals is not None:  # an STL's: its facet normals, on each corner
            normals = np.frombuffer(mesh.normals, dtype=np.float32).reshape(-1, 3).copy()
        uv = None
        if mesh.texcoords:
            uv = np.frombuffer(mesh.texcoords[0], dtype=np.float32).reshape(len(points), -1)[:, :2].copy()
        colors = None
        if mesh.colors:
            colors = np.frombuffer(mesh.colors[0], dtype=np.float32).reshape(len(points), 4).copy()
        material = scene.materials[mesh.material_index] if mesh.material_index < len(scene.materials) else {}
        if _is_default(material) and uv is not None:
            return "uv without material"
        color, texture = _material(material, path)
        if texture is not None:
            if not texture.is_file() or not _named_image(path, texture, extension):
                return "texture"
            if extension == "dae":
                if not _opaque_transparent_colors(path):
                    return "texture"
                # trimesh's COLLADA material with a diffuse map: white, the map decoded from the same file.
                color = (1.0, 1.0, 1.0, 1.0)
            elif extension != "obj" or color is None or not _mtl_declares_diffuse(path, str(material.get("NAME"))):
                return "texture"  # an OBJ material without Kd: Assimp's default grey is not trimesh's
        if color is not None and color[3] < 1.0:
            return "transparency"
        # trimesh's names: the file's name for a one-mesh format, the geometry (COLLADA) or node (glTF)
        # name otherwise, "_1", "_2" … after a name seen before; parts sorted by name.
        name = single_name or (mesh.name if extension == "dae" else node_name) or mesh.name
        if extension == "obj" and node_name and node_name != "defaultobject":
            name = node_name  # an OBJ's "o" statement names its mesh
        seen = counts.get(name, 0)
        counts[name] = seen + 1
        parts.append(RawPart(name if seen == 0 else f"{name}_{seen}", points, faces, normals, uv, colors, color,
                             texture, matrix, unit))
    if not parts:
        return "no triangles"
    return sorted(parts, key=lambda part: part.name)


#: COLLADA <transparent> elements, and those that are a colour (its four numbers).
_COLLADA_TRANSPARENT = re.compile(rb"<transparent\b")
_COLLADA_TRANSPARENT_COLOR = re.compile(rb"<transparent\b[^>]*>\s*<color\b[^>]*>([^<]*)</color>")


def _named_image(path: Path, texture: Path, extension: str) -> bool:
    """Whether ``texture`` (as Assimp resolved it) is an image the file names (COLLADA's
    ``<library_images>``, an OBJ's MTL files) as the reference checks resolve it: only a file those checks
    passed is opened, and a map Assimp finds elsewhere than trimesh would goes to trimesh."""
    from usdforge.rules.mesh.references import dae_references, obj_references

    named = dae_references(path) if extension == "dae" else obj_references(path) if extension == "obj" else []
    return any(os.path.normpath(texture) == os.path.normpath(image) for image in named)


#: An MTL statement: its keyword and the rest of the line.
_MTL_STATEMENT = re.compile(r"^\s*(\w+)\s*(.*?)\s*$")


def _mtl_declares_diffuse(path: Path, name: str) -> bool:
    """Whether the material ``name`` of an OBJ's MTL files says its diffuse colour (``Kd``): without it,
    Assimp's default (0.6 grey) and trimesh's (0.4) differ."""
    from usdforge.rules.mesh.references import obj_references

    for mtl in obj_references(path):
        if mtl.suffix.lower() != ".mtl" or not mtl.is_file() or mtl.stat().st_size > (64 << 20):
            continue  # an image, or an MTL obj_references does not read either
        current = None
        for line in mtl.read_text(errors="replace").splitlines():
            match = _MTL_STATEMENT.match(line)
            if not match:
                continue
            keyword, rest = match.group(1).lower(), match.group(2)
            if keyword == "newmtl":
                current = rest
            elif keyword == "kd" and current == name:
                return True
    return False


def _opaque_transparent_colors(path: Path) -> bool:
    """Whether every ``<transparent>`` of a COLLADA file is a colour whose alpha is 1: trimesh takes that
    alpha as a textured material's opacity, where Assimp weighs it with ``<transparency>`` its own way."""
    data = path.read_bytes()
    colors = _COLLADA_TRANSPARENT_COLOR.findall(data)
    if len(colors) != len(_COLLADA_TRANSPARENT.findall(data)):
        return False
    try:
        return all(float(text.split()[3]) == 1.0 for text in colors)
    except (IndexError, ValueError):
        return False


#: COLLADA line primitives: no surface (trimesh drops them), and assimp-py refuses a file holding any.
_COLLADA_LINES = re.compile(rb"<(lines|linestrips)\b[^>]*>.*?</\1>", re.DOTALL)


def _has_lines(path: Path) -> bool:
    """Whether a COLLADA file holds ``<lines>`` or ``<linestrips>``."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return b"<lines" in data and _COLLADA_LINES.search(data) is not None


def _without_lines(path: Path, flags: int) -> Any:
    """Assimp's scene of a COLLADA file read from an in-memory copy without its ``<lines>`` and
    ``<linestrips>`` (a memfd: nothing is written to disk), or None when the file holds none, names
    images (a copy has no folder to find them in), or Assimp refuses the copy too."""
    import assimp_py

    from usdforge.rules.mesh.references import dae_references

    data = path.read_bytes()
    stripped = _COLLADA_LINES.sub(b"", data)
    if stripped == data or dae_references(path) or not hasattr(os, "memfd_create"):
        return None
    descriptor = os.memfd_create("usdforge-collada")
    try:
        os.write(descriptor, stripped)
        return assimp_py.import_file(f"/proc/self/fd/{descriptor}", flags)
    except Exception:  # noqa: BLE001 - the binding reports every failure as a generic error
        return None
    finally:
        os.close(descriptor)


def _is_default(material: dict) -> bool:
    """Whether an Assimp material is the one it makes up for a file without any."""
    return material.get("NAME") in ("DefaultMaterial", "", None)


def _material(material: dict, path: Path) -> tuple[tuple[float, float, float, float] | None, Path | None]:
    """(diffuse RGBA or None, diffuse texture file or None) of an Assimp material; Assimp's own default
    material (a file without one) gives neither."""
    if _is_default(material):
        return None, None
    diffuse = material.get("COLOR_DIFFUSE")
    color = None
    if diffuse is not None:
        rgba = [float(c) for c in diffuse][:3]
        color = (rgba[0], rgba[1], rgba[2], float(material.get("OPACITY", 1.0)))
    texture = None
    textures = material.get("TEXTURES") or {}
    import assimp_py

    for name in textures.get(assimp_py.TextureType_DIFFUSE, []) or []:
        if isinstance(name, str) and name and not name.startswith("*"):
            texture = path.parent / name.removeprefix("file://")
            break
    return color, texture


def _head(path: Path) -> bytes:
    with open(path, "rb") as stream:
        return stream.read(64)


def _has_embedded_image(path: Path, extension: str, head: bytes) -> bool:
    """Whether a glTF/GLB file carries an image in its own bytes (a bufferView image or a data: URI)."""
    try:
        if extension == "glb":
            data = path.read_bytes()
            if len(data) < 20 or data[:4] != b"glTF":
                return False
            length = struct.unpack_from("<I", data, 12)[0]
            document = json.loads(data[20:20 + length])
        else:
            document = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError, OSError, struct.error):
        return False
    images = document.get("images") if isinstance(document, dict) else None
    if not isinstance(images, list):
        return False
    return any(isinstance(image, dict) and ("bufferView" in image or str(image.get("uri", "")).startswith("data:"))
               for image in images)


def _obj_has_polygons(path: Path) -> bool:
    """Whether an OBJ has a face with more than three corners."""
    with open(path, "rb") as stream:
        for line in stream:
            if line.startswith(b"f ") and len(line.split()) > 4:
                return True
    return False


def read_in_child(path: Path, timeout: float = CHILD_SECONDS, robot: bool = False) -> list[RawPart] | str:
    """``read_assimp`` in one of this process's reading children (forked on first use, kept for the next
    files): the one ``request_ahead`` asked for ``path``, else the first. Its parts (``robot``: as
    ``robot_part`` makes them), its fallback reason, or "crashed" when the child died on the file (a
    signal, an abort) or ran past ``timeout`` seconds (it is killed; the next file it was to read gets a
    fresh child in its place, which is sent again the files ``request_ahead`` asked of the dead one that
    it had not answered)."""
    path = Path(path)
    request = Request(path, robot)
    with _LOCK:
        slot = _slot_of(request)
        while True:
            reader = _reader(slot)
            try:
                result = reader.read(request, timeout)
            except BaseException:  # interrupted mid-answer: the next answer would be this one's; start afresh
                _drop_reader(slot)
                raise
            if not reader.dead:
                return _textures_checked(path, result)
            _drop_reader(slot)
            if reader.pending or reader.queue or reader.ready:  # else the next read starts a child
                _reader(slot).carry(reader)
            if result is not None:  # None: another file, asked for ahead, crashed first; ask again
                return _textures_checked(path, result)


def _textures_checked(path: Path, result: list[RawPart] | str) -> list[RawPart] | str:
    """``result`` when every texture it names is a file ``path`` references (``mesh_references``: the files
    the conversion's reference check kept inside the allowed roots), else the "texture" fallback: the
    parent opens no file on the child's word alone (its answer comes from Assimp reading untrusted bytes)."""
    if isinstance(result, str) or all(part.texture is None for part in result):
        return result
    from usdforge.rules.mesh.references import mesh_references

    named = {os.path.normpath(os.path.abspath(reference)) for reference in mesh_references(path)}
    if all(part.texture is None or os.path.normpath(os.path.abspath(part.texture)) in named for part in result):
        return result
    return "texture"


def request_ahead(paths: list[Path], robot: bool = False) -> None:
    """Queue ``paths`` for this process's reading children: each read by the child that has the fewest
    files still to answer (the first on a tie, so files alternate between two idle children, in this
    order), one after another in each child (at most ``AHEAD`` sent at a time) while this process works
    on the answers before, and ``read_in_child`` takes each answer (asked for alike: the same ``robot``),
    so that reading overlaps processing. One file uses one child; more fork the second (``READERS``). A
    file asked for out of this order is read first by its child; an answer whose file changed since it was
    asked for (its size, time or inode) is read again."""
    with _LOCK:
        slots = range(READERS if len(paths) > 1 else 1)
        readers = {slot: _reader(slot) for slot in slots}
        for path in paths:
            slot = min(slots, key=lambda s: len(readers[s].pending) + len(readers[s].queue))
            readers[slot].queue.append(Request(Path(path), robot))
        for reader in readers.values():
            reader.fill()


def stop_reader() -> None:
    """End this process's reading children (the next read starts a fresh one, forked from the process as
    it is then)."""
    with _LOCK:
        for slot in list(_READERS):
            _drop_reader(slot)


#: Reading children at most: two processors' worth (the parent welds and authors beside them). A robot's
#: files alternate between them; while this process waits for one child's answer, the other reads and welds
#: (solo12's ten STL files: the parent waited 9.6 ms of 40 on one child).
READERS = 2


def _slot_of(request: Request) -> int:
    """The child that was asked for ``request`` (or answered it early), else the first."""
    for slot, reader in _READERS.items():
        if reader.owner == os.getpid() and (request in reader.ready or request in reader.queue or
                                            any(sent == request for sent, _ in reader.pending)):
            return slot
    return 0


def _reader(slot: int = 0) -> _ReaderProcess:
    """This process's reading child in ``slot``, started now if there is none (or only one a forked
    parent started)."""
    reader = _READERS.get(slot)
    if reader is None or reader.owner != os.getpid():
        reader = _READERS[slot] = _ReaderProcess()
    return reader


def _drop_reader(slot: int = 0) -> None:
    reader = _READERS.pop(slot, None)
    if reader is not None and reader.owner == os.getpid():
        reader.stop()


#: Most requests sent to the reading child and not answered yet, and most bytes they may take: well within
#: a pipe's buffer (64 KiB), so the parent never blocks on sending while the child blocks on answering.
AHEAD = 64
REQUEST_BYTES = 32 << 10


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns, info.st_ino


class _ReaderProcess:
    """A forked child that reads the files it is sent, one framed request (``_request_bytes``) and one
    framed answer (``encode``) at a time, in order; it exits when its request pipe closes (the parent
    ended). The parent keeps the requests sent and not answered (``pending``), those still to send
    (``queue``) and answers received before they were asked for (``ready``)."""

    def __init__(self) -> None:
        request_read, self.requests = os.pipe()
        self.answers, answer_write = os.pipe()
        # A mesh's arrays in a few large writes rather than many 64 KiB ones, each a switch between the two
        # (Linux only). Above this system's limit for pipes (fs.pipe-max-size) the default size works, slower.
        if hasattr(fcntl, "F_SETPIPE_SZ"):
            with contextlib.suppress(OSError):
                fcntl.fcntl(answer_write, fcntl.F_SETPIPE_SZ, 1 << 20)
        self.owner = os.getpid()
        self.pending: collections.deque[tuple[Request, tuple | None]] = collections.deque()
        self.queue: collections.deque[Request] = collections.deque()
        self.ready: dict[Request, tuple[tuple | None, list[RawPart] | str]] = {}
        self.dead = False
        # Which answer this process waits for (its number from 1; 0: none), shared with the child, which
        # welds a robot part only while that is not this one (``robot_part``). Only the child reads it, so
        # what a subverted child writes there changes nothing here.
        self.waiting = mmap.mmap(-1, 8)
        self.answered = 0
        with NATIVE_LOADS:  # no other thread inside the dynamic loader (its lock held in the child)
            self.pid = os.fork()
        if self.pid == 0:
            status = 0
            try:
                _close_inherited(keep=(request_read, answer_write))
                _serve(request_read, answer_write, self.waiting)
            except BaseException:  # noqa: BLE001 - any failure in the child is a crash to the parent
                status = 1
            finally:
                os._exit(status)
        os.close(request_read)
        os.close(answer_write)
        os.set_inheritable(self.requests, False)
        os.set_inheritable(self.answers, False)

    def fill(self) -> None:
        """Send queued requests while fewer than ``AHEAD`` are unanswered and their bytes fit in
        ``REQUEST_BYTES``, in one write: each write wakes the child, which costs the parent its processor
        for a while on a busy machine."""
        budget = REQUEST_BYTES - sum(len(_request_bytes(request)) for request, _ in self.pending)
        batch: list[bytes] = []
        sending: list[Request] = []
        while self.queue and len(self.pending) + len(sending) < AHEAD and not self.dead:
            request = _request_bytes(self.queue[0])
            if len(request) > budget and (sending or self.pending):
                break
            budget -= len(request)
            batch.append(request)
            sending.append(self.queue.popleft())
        if not sending:
            return
        data = memoryview(b"".join(batch))
        try:
            while data:
                data = data[os.write(self.requests, data):]
        except OSError:  # the child is gone
            self.dead = True
            self.queue.extendleft(reversed(sending))
            return
        self.pending.extend((request, _stamp(request.path)) for request in sending)

    def read(self, request: Request, timeout: float) -> list[RawPart] | str | None:
        """The child's answer for ``request`` ("crashed" when the child died on it or ran past ``timeout``
        seconds on it); None when it died on another file first (``dead`` is set)."""
        stamp = _stamp(request.path)
        if request in self.ready:
            was, result = self.ready.pop(request)
            if was == stamp:
                return result
        if not any(sent == request and was == stamp for sent, was in self.pending):
            self.queue.appendleft(request)  # not asked for (or changed since): next after those in flight
        while True:
            self.fill()
            if not self.pending:  # could not even send it: the child is gone
                self.queue.remove(request)
                return "crashed"
            head, was = self.pending.popleft()
            result = self._answer(time.monotonic() + timeout, head.robot)
            if result == "crashed":
                self.dead = True
                if head == request:
                    return "crashed"
                self.ready[head] = (was, "crashed")
                return None
            if head == request and was == stamp:
                return result
            if head != request:
                self.ready[head] = (was, result)

    def carry(self, dead: _ReaderProcess) -> None:
        """Take over what a dead child had been asked for and not answered, and its early answers."""
        self.ready.update(dead.ready)
        self.queue.extend(request for request, _ in dead.pending)
        self.queue.extend(dead.queue)

    def _answer(self, deadline: float, robot: bool) -> list[RawPart] | str:
        self.answered += 1
        self.waiting[:] = self.answered.to_bytes(8, "little")
        try:
            header = self._receive(8, deadline)
            size = None if header is None else int.from_bytes(header, "little")
            # A size past what the child may hold is a garbled answer: not a buffer to allocate at once.
            message = None if size is None or size > CHILD_MEMORY else self._receive(size, deadline)
        finally:
            self.waiting[:] = bytes(8)
        if message is None:
            return "crashed"
        try:
            return decode(message, robot)
        except (ValueError, KeyError, TypeError, IndexError, OverflowError, RecursionError):  # garbled: a crash too
            return "crashed"

    def _receive(self, size: int, deadline: float) -> bytearray | None:
        """``size`` bytes from the child (read into one buffer), or None when it ends or ``deadline`` passes
        first."""
        buffer = bytearray(size)
        view, received = memoryview(buffer), 0
        while received < size:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not select.select([self.answers], [], [], left)[0]:
                continue
            count = os.readv(self.answers, [view[received:received + (1 << 22)]])
            if not count:
                return None
            received += count
        return buffer

    def forget(self) -> None:
        """Close this process's ends of the pipes and the shared word, leaving the child alone: in a
        process forked from the child's parent, which must not keep it alive (it ends when every
        holder of its request pipe has closed it)."""
        for descriptor in (self.requests, self.answers):
            try:
                os.close(descriptor)
            except OSError:
                pass  # already closed (a crashed child's pipe): nothing left to release
        self.waiting.close()

    def stop(self) -> None:
        for descriptor in (self.requests, self.answers):
            try:
                os.close(descriptor)
            except OSError:
                pass  # already closed (a crashed child's pipe): nothing left to release
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the child already exited (or crashed): nothing to kill
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass  # already reaped: no zombie left
        self.waiting.close()


def _request_bytes(request: Request) -> bytes:
    """A request as the child reads it: its size (8 bytes), then ``robot`` (1 byte) and the path."""
    data = bytes([request.robot]) + os.fsencode(request.path)
    return len(data).to_bytes(8, "little") + data


def _close_inherited(keep: tuple[int, ...]) -> None:
    """Close every file descriptor the child inherited but ``keep`` (standard streams to /dev/null): a
    pipe, socket or locked file of the parent held open by the child would keep the parent's peers
    waiting for an end of file or a lock as long as the child lives."""
    null = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):
        if stream not in keep:
            os.dup2(null, stream)
    os.close(null)
    top = max(keep) + 1
    try:
        limit = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        limit = 4096
    start = 3
    for descriptor in sorted(keep):
        if descriptor >= start:
            os.closerange(start, descriptor)
            start = descriptor + 1
    os.closerange(max(start, top), limit)


def _serve(requests: int, answers: int, waiting: mmap.mmap) -> None:
    """The reading child's loop: each request's file read by ``read_assimp`` (for the robot path:
    ``robot_part``, welded unless ``waiting`` says the parent waits for this answer), answered in order."""
    gc.disable()  # a collection would touch every object the parent made: copies of all their pages
    import faulthandler

    faulthandler.disable()  # a crash here is expected and handled: no traceback dump on stderr
    _limit_memory(CHILD_MEMORY)
    served = 0
    with os.fdopen(requests, "rb") as incoming, os.fdopen(answers, "wb") as outgoing:
        while header := incoming.read(8):
            request = incoming.read(int.from_bytes(header, "little"))
            path = Path(os.fsdecode(request[1:]))
            result = read_assimp(path)
            served += 1
            if request[:1] == b"\x01" and not isinstance(result, str):
                # Welded here while the parent works on the answers before (both processors busy); when it
                # is waiting for this one, it welds it itself while this process reads the next file.
                # Only a part small enough that its weld adds little to the parent's deadline (CHILD_SECONDS)
                # and to this process's memory: which process welds never decides the reader.
                weld = int.from_bytes(waiting[:8], "little") < served and \
                    sum(len(part.faces) for part in result) <= WELD_IN_CHILD_FACES
                try:
                    result = [robot_part(path, part, weld) for part in result]
                except MemoryError:  # the parent welds it instead
                    result = [robot_part(path, part, False) for part in result]
            chunks = encode_chunks(result)  # written as they are: no joined copy of the arrays
            outgoing.write(sum(memoryview(chunk).nbytes for chunk in chunks).to_bytes(8, "little"))
            for chunk in chunks:
                outgoing.write(chunk)
            outgoing.flush()


_LOCK = threading.Lock()
#: This process's reading children by slot (``READERS``), each started on first use.
_READERS: dict[int, _ReaderProcess] = {}


def _forget_inherited() -> None:
    """In a process just forked (a ``doit -n`` or multiprocessing worker, or a reading child itself): its
    parent's reading children are not its own. Their pipe ends are closed (held here, they would keep
    those children alive after the parent exits) and they are forgotten; this process forks its own when it
    reads. The lock is made anew: another thread of the parent may have held it at the fork."""
    global _LOCK
    _LOCK = threading.Lock()
    for reader in _READERS.values():
        reader.forget()
    _READERS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited)


def _limit_memory(extra: int) -> None:
    """Cap this process's address space at what it maps now (the parent's, inherited) plus ``extra``
    bytes: the cap does not depend on how much the parent had mapped, so the same file is read alike."""
    try:
        import resource

        with open("/proc/self/statm") as stream:
            mapped = int(stream.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = mapped + extra
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, ValueError, OSError):
        pass  # no /proc or no limits here: the time limit still bounds the child


#: Most faces of a file the reading child welds (``_serve``): about 0.3 s of welding; larger files the parent welds.
WELD_IN_CHILD_FACES = 1 << 20


def robot_part(path: Path, part: RawPart, weld: bool) -> RawPart:
    """``part`` for the robot path (``rules.robot.meshes._from_assimp``): an STL's facet normals dropped
    (the robot path drops them, as trimesh's unprocessed reading does: a third of the answer); with
    ``weld`` and no per-vertex colours, welded as the robot path welds (``meshes._weld``: the same rows in
    the same order in either process, on the same float64 values), the faces indexing the welded points,
    the normals and UVs corner by corner (F·3, 3|2). The points stay float32 (rows of the file's): the
    answer holds about a sixth of a triangle soup's points (an STL's, a fifth of its bytes)."""
    from usdforge.rules.robot.meshes import corners_welded  # forked from the robot path: imported already

    normals = None if path.suffix.lower() == ".stl" else part.normals
    if part.colors is not None or not weld:
        return part._replace(normals=normals)
    points, faces, normals, uv = corners_welded(part.points, part.faces, normals, part.uv)
    return part._replace(points=points, faces=faces, normals=normals, uv=uv, welded=True)


_ARRAYS = ("points", "faces", "normals", "uv", "colors", "transform")
#: Each array's type in the child's message: Assimp's own (the transform is usdforge's, float64).
_WIRE_TYPES = {**{field: np.dtype(np.float32) for field in ("points", "normals", "uv", "colors")},
               "faces": np.dtype(np.uint32), "transform": np.dtype(np.float64)}


def encode(result: list[RawPart] | str) -> bytes:
    """``read_assimp``'s result as bytes (a JSON header, then the arrays' raw bytes): no pickle, so what a
    child that Assimp's bugs may have subverted sends is data, never code to run."""
    return b"".join(encode_chunks(result))


def encode_chunks(result: list[RawPart] | str) -> list[Any]:
    """``encode``'s bytes as consecutive buffers (the header, then each array's own memory)."""
    if isinstance(result, str):
        header, chunks = {"fallback": result}, []
    else:
        meta, chunks, offset = [], [], 0
        for part in result:
            arrays = {}
            for field in _ARRAYS:
                value = getattr(part, field)
                if value is not None:
                    value = np.ascontiguousarray(value, dtype=_WIRE_TYPES[field])
                    arrays[field] = [value.dtype.str, list(value.shape), offset]
                    chunks.append(value.reshape(-1).view(np.uint8))
                    offset += value.nbytes
            meta.append({"name": part.name, "color": part.color, "unit": part.unit, "welded": part.welded,
                         "texture": None if part.texture is None else str(part.texture), "arrays": arrays})
        header = {"parts": meta}
    data = json.dumps(header).encode()
    return [len(data).to_bytes(8, "little") + data, *chunks]


#: Each array's width (its second dimension) in the child's message; the transform is (4, 4).
_WIDTHS = {"points": 3, "faces": 3, "normals": 3, "uv": 2, "colors": 4, "transform": 4}


def decode(data: bytes, robot: bool = True) -> list[RawPart] | str:
    """``encode`` reversed; ValueError (or KeyError, TypeError) on bytes it did not write: arrays of
    another type or shape than ``encode`` writes, or welded parts (``robot_part``) answering a request
    that did not ask for them (``robot`` False: the mesh converter takes normals and UVs per vertex)."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    if "fallback" in header:
        reason = header["fallback"]
        if reason not in FALLBACK_CLASSES:
            raise ValueError(f"unknown fallback {reason!r}")
        return reason
    body = memoryview(data)[8 + size:]
    parts = []
    for item in header["parts"]:
        fields = {}
        for field, (dtype, shape, offset) in item["arrays"].items():
            if field not in _ARRAYS or np.dtype(dtype) != _WIRE_TYPES[field]:
                raise ValueError(f"unexpected array {field} of {dtype}")
            if not (isinstance(shape, list) and len(shape) == 2 and all(type(n) is int and n >= 0 for n in shape)
                    and shape[1] == _WIDTHS[field] and (field != "transform" or shape[0] == 4)):
                raise ValueError(f"array {field} of shape {shape!r}")
            count = shape[0] * shape[1]
            wide = np.int64 if field == "faces" else np.float64  # exact: every uint32 and float32 fits
            fields[field] = np.frombuffer(body, np.dtype(dtype), count, offset).reshape(shape).astype(wide)
        points, faces, welded = fields["points"], fields["faces"], item["welded"] is True
        if welded and not robot:
            raise ValueError("welded parts answering a request for parts as read")
        # Per vertex, or (welded) the normals and UVs per corner and no colours.
        per_vertex = [fields[field] for field in ("normals", "uv", "colors") if field in fields]
        size = 3 * len(faces) if welded else len(points)
        if any(len(values) != size for values in per_vertex) or (welded and "colors" in fields) or \
                (faces.size and int(faces.max()) >= len(points)):
            raise ValueError("faces or per-vertex arrays that do not fit the points")  # the parent indexes them
        color = None if item["color"] is None else tuple(float(c) for c in item["color"])
        if color is not None and (len(color) != 4 or not all(-math.inf < c < math.inf for c in color)):
            raise ValueError("a colour that is not four finite numbers (RGBA)")
        parts.append(RawPart(str(item["name"]), fields["points"], fields["faces"], fields.get("normals"),
                             fields.get("uv"), fields.get("colors"),
                             color,
                             None if item["texture"] is None else Path(item["texture"]), fields["transform"],
                             float(item["unit"]), welded))
    return parts
