"""Mesh files of a robot, each read once per conversion: parts baked into the robot's metres, with
materials, and their volume properties. No pxr here.

Every format is read by Assimp first (``rules.mesh.assimp_read``, in a child process), and by
``rules.mesh.read.load_parts`` (trimesh; pycollada for COLLADA; binary and ASCII STL, binary ones whose header
begins with "solid" included) where Assimp refuses or crashes on a file or would read it differently
(``read_file``); both give the same parts, tested on every shared mesh. For robots, COLLADA's ``<unit meter>`` is applied
(a file in centimetres comes out in metres, as RViz and Gazebo show it); its ``<up_axis>`` is not (RViz
ignores it too, and robot descriptions are authored for RViz). A part's node transform and the robot's
per-shape ``scale`` are baked into the vertices, so every mesh prim sits at identity in its shape frame
and physics engines never see a scaled collider. Points are welded (one per position); the normals a file
gives (COLLADA, OBJ) and its UVs are kept, face-varying.

Inside ``mesh_cache(store)`` (the pipeline opens it around a conversion), the parts of a file are an
artifact of the build cache, keyed by the content of the file and of the files it references, and by
the code and library versions that read it: a file used by several conversions is read once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import queue
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple

import numpy as np

from usdforge.rules.errors import ConversionError
from usdforge.rules.mesh.references import mesh_references
from usdforge.rules.versions import distribution_version

if TYPE_CHECKING:  # trimesh (and the scipy it imports) only when a mesh file is read or measured
    import trimesh


class MeshPart(NamedTuple):
    """One triangle mesh of a file, in the file's frame until baked (then in the shape's frame).

    points (V, 3) m; faces (F, 3); normals: face-varying (F·3, 3) or None, or, with normal_indices (F·3,),
    the distinct normals (N, 3) those index corner by corner (MuJoCo's compiled meshes, about half the
    data); uv: face-varying (F·3, 2) or per-vertex (V, 2) or None; colors: per-vertex RGBA (V, 4) in [0, 1]
    or None; color: the part's material colour (RGBA) or None; texture: its texture file, or image: an
    in-memory (PIL) texture; mass_model: ``"shell"`` when the source computes the mesh's inertia from its
    surface (MuJoCo's ``inertia="shell"``: thin meshes, which MuJoCo's USD decoder refuses as solids), on
    the prototype's mesh as ``newton:massModel``; None: solid, unsaid.
    """

    name: str
    points: np.ndarray
    faces: np.ndarray
    normals: np.ndarray | None = None
    uv: np.ndarray | None = None
    colors: np.ndarray | None = None
    color: tuple[float, float, float, float] | None = None
    texture: Path | None = None
    image: Any = None
    normal_indices: np.ndarray | None = None
    mass_model: str | None = None

    def face_varying_normals(self) -> np.ndarray | None:
        """The normals corner by corner (F·3, 3), indexed or not; None when the part has none."""
        if self.normals is None or self.normal_indices is None:
            return self.normals
        return self.normals[self.normal_indices]

    def trimesh(self) -> trimesh.Trimesh:
        import trimesh

        return trimesh.Trimesh(self.points, self.faces, process=False)


class VolumeProperties(NamedTuple):
    """Volume (m³), centre of volume (3,) m and inertia (3, 3) kg·m² per kg/m³ about it, in the shape frame."""

    volume: float
    center: np.ndarray
    inertia: np.ndarray


def _bake(part: MeshPart, matrix: np.ndarray) -> MeshPart:
    """``part`` with the affine ``matrix`` (4, 4) applied; a mirroring matrix flips the winding."""
    linear = matrix[:3, :3]
    points = part.points @ linear.T + matrix[:3, 3]
    faces, normals, normal_indices, uv = part.faces, part.normals, part.normal_indices, part.uv
    key = np.ascontiguousarray(linear, dtype=np.float64).tobytes()
    if normals is not None:
        normals = normals @ _inverse(key)
        square = normals * normals  # the row norms as np.linalg.norm sums them: (x² + y²) + z²
        norms = square[:, 0] + square[:, 1]
        norms += square[:, 2]
        np.maximum(np.sqrt(norms, out=norms), 1e-300, out=norms)
        for column in range(3):  # in place, column by column: 25 % faster than dividing by norms[:, None]
            normals[:, column] /= norms
    if _mirrors(key):
        faces = faces[:, ::-1]
        if normal_indices is not None:
            normal_indices = normal_indices.reshape(-1, 3)[:, ::-1].reshape(-1)
        elif normals is not None:
            normals = normals.reshape(-1, 3, 3)[:, ::-1].reshape(-1, 3)
        if uv is not None and len(uv) == 3 * len(part.faces):
            uv = uv.reshape(-1, 3, 2)[:, ::-1].reshape(-1, 2)
    return part._replace(points=points, faces=np.ascontiguousarray(faces), normals=normals,
                         normal_indices=normal_indices, uv=uv)


@lru_cache(maxsize=256)
def _inverse(linear: bytes) -> np.ndarray:
    """The inverse of the (3, 3) float64 matrix whose bytes are ``linear`` (read-only): a file's parts share
    a few (panda: 66 parts, 2 matrices), and each ``np.linalg.inv`` costs tens of µs."""
    inverse = np.linalg.inv(np.frombuffer(linear, dtype=np.float64).reshape(3, 3))
    inverse.flags.writeable = False
    return inverse


@lru_cache(maxsize=256)
def _mirrors(linear: bytes) -> bool:
    """Whether the (3, 3) float64 matrix whose bytes are ``linear`` mirrors (a negative determinant)."""
    return bool(np.linalg.det(np.frombuffer(linear, dtype=np.float64).reshape(3, 3)) < 0)


def _from_trimesh(name: str, mesh: trimesh.Trimesh, transform: np.ndarray, source: Path) -> MeshPart:
    """A part of a mesh as trimesh reads it from ``source`` without processing, welded to one point per
    position: the file's normals and UVs become face-varying, so welding loses none of them. Per-vertex
    colours keep the vertices as they are."""
    from usdforge.rules.usd.stage import material_of

    color, image = material_of(mesh)
    if image is not None:
        from usdforge.rules.files import decoded_texture

        image = decoded_texture(image, source)
    points = np.asarray(mesh.vertices, dtype=float)
    if points.ndim != 2 or points.shape[1] != 3:  # an OBJ whose "v" lines hold fewer than three numbers
        raise ConversionError(source, f"mesh vertices with {points.shape[-1] if points.ndim else 0} "
                                      "coordinates instead of 3 (a vertex line holds too few numbers)")
    faces = np.asarray(mesh.faces, dtype=np.int64)
    normals = None
    if "vertex_normals" in mesh._cache:  # given by the file (else trimesh computes them); its exporters check so
        normals = np.asarray(mesh.vertex_normals, dtype=float)
    uv = getattr(mesh.visual, "uv", None)
    uv = np.asarray(uv, dtype=float) if uv is not None and len(uv) == len(points) else None
    colors = None
    if getattr(mesh.visual, "kind", None) in ("vertex", "face"):
        rgba = np.asarray(mesh.visual.vertex_colors, dtype=float) / 255.0
        colors = rgba if len(rgba) == len(points) else None
    points, faces, normals, uv = corners_welded(points, faces, normals, uv, weld=colors is None)
    part = MeshPart(name, points, faces, normals=normals, uv=uv, colors=colors, color=color, image=image)
    return _bake(part, transform)


#: Odd 64-bit factors (SplitMix64's) of ``_weld``'s row hash, linear in the columns so that rows that differ
#: by structure (a mirrored coordinate, a shared column) still differ: two rows share a hash only when their
#: difference is one of a sparse lattice's vectors. The hash only groups: every group is checked.
_ROW_HASH = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _weld(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique, inverse) of ``points`` (V, 3) rounded to 1e-8: exactly trimesh's ``grouping.unique_rows``
    (the same rows in the same order, so both readers' parts weld alike) without importing trimesh.

    trimesh packs a row into one 64-bit integer when every coordinate is within ±2**20 (about 1 cm), else
    takes ``np.unique`` of the rows' 24 bytes, whose order is that of ``memcmp``. Here equal rows are
    grouped first by one sort of a 64-bit hash of each row (checked: rows sharing a hash must be equal),
    and only the distinct rows (about a sixth of a triangle soup's) are put in ``memcmp`` order
    (``_memcmp_order``); the first index of each group is the smallest, as ``np.unique``'s."""
    scaled = points * 1e8  # in place below: np.round(points * 1e8 - 1e-6) without two more (V, 3) arrays
    scaled -= 1e-6
    as_int = np.round(scaled, out=scaled).astype(np.int64)
    threshold = (2 ** 20) - 1  # 21 bits per column: a row packs into one 64-bit integer
    if not len(as_int):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if as_int.max() < threshold and as_int.min() > -threshold:
        key = np.zeros(len(as_int), dtype=np.uint64)
        for offset, column in enumerate((as_int.T + (threshold + 1)).astype(np.uint64)):
            np.bitwise_xor(key, column << np.uint64(offset * 21), out=key)
        return _groups(key)
    columns = as_int.view(np.uint64).T
    with np.errstate(over="ignore"):  # wrapping arithmetic is the hash: a sum of the columns, each times a factor
        hashed = columns[0] * _ROW_HASH[0]
        hashed += columns[1] * _ROW_HASH[1]
        hashed += columns[2] * _ROW_HASH[2]
    first, group = _hash_groups(hashed)
    distinct = np.take(as_int, first, axis=0)
    if not all(np.array_equal(distinct[:, axis][group], as_int[:, axis]) for axis in range(3)):
        return _memcmp_order(as_int)  # two different rows share a hash: order all rows
    order, rank = _distinct_memcmp_order(distinct)
    return first[order], rank[group]


def _distinct_memcmp_order(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, rank) of distinct ``rows`` (U, 3) int64 in ``memcmp`` order (``_memcmp_order``): one sort by
    the first column's key, then only the rows that share a first key (a few percent) sorted by all three
    keys, in the places their group holds."""
    keys = np.ascontiguousarray(rows).byteswap().view(np.uint64)
    order = np.argsort(keys[:, 0])
    first = keys[order, 0]
    same = first[1:] == first[:-1]
    if same.any():
        tied = np.zeros(len(rows), dtype=bool)
        tied[1:] = same
        tied[:-1] |= same
        places = np.flatnonzero(tied)  # each group's places, the groups in first-key order
        members = order[places]
        if len(rows) < 2 ** 21:  # one sort of the three keys' dense ranks packed into 21 bits each: 3× lexsort's speed
            tied_keys = keys[members]
            packed = np.zeros(len(members), dtype=np.uint64)
            packed[1:] = tied_keys[1:, 0] != tied_keys[:-1, 0]
            np.cumsum(packed, out=packed)  # the first key's rank (its groups are in order already)
            for column in (1, 2):
                packed <<= np.uint64(21)
                packed |= _groups(np.ascontiguousarray(tied_keys[:, column]))[1].astype(np.uint64)
            order[places] = members[np.argsort(packed)]
        else:
            order[places] = members[np.lexsort(keys[members].T[::-1])]
    rank = np.empty(len(rows), dtype=np.int64)
    rank[order] = np.arange(len(rows))
    return order, rank


def _memcmp_order(as_int: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique`` of the rows of ``as_int`` (V, 3) int64 as 24-byte strings (``memcmp`` order: the
    byte-swapped columns compared as unsigned integers, first column first), with return_index and
    return_inverse. That order is kept by packing each column's dense rank into 21 bits of one integer
    (up to 2**21 distinct values per column, else the bytes as trimesh does): sorting integers is 2×
    faster than sorting 24-byte rows."""
    swapped = np.ascontiguousarray(as_int).byteswap().view(np.uint64)
    ranks = [_groups(np.ascontiguousarray(column))[1] for column in swapped.T]  # each value's dense rank
    if max(int(rank.max()) for rank in ranks) < 2 ** 21:
        key = np.zeros(len(as_int), dtype=np.uint64)
        for offset, rank in zip((42, 21, 0), ranks):
            key |= rank.astype(np.uint64) << np.uint64(offset)
        return _groups(key)
    rows = np.ascontiguousarray(as_int).view(np.dtype((np.void, 24))).reshape(-1)
    _, unique, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return unique, inverse.reshape(-1)


def _groups(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_index=True, return_inverse=True)`` without its stable sort (uint64 keys,
    at least one): the first index of each value is the smallest index of its group."""
    order = np.argsort(key)
    ordered = key[order]
    starts = np.empty(len(key), dtype=bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    unique = np.minimum.reduceat(order, np.flatnonzero(starts)).astype(np.int64)
    inverse = np.empty(len(key), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return unique, inverse


def _hash_groups(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_groups`` of row hashes, grouped by their high bits only (``_weld`` checks every group): each hash's
    low bits replaced by its index, so that one sort of the values (no argsort: about 2.5× faster) gives
    both the groups and, first in each, its smallest index."""
    count = len(key)
    bits = max(1, (count - 1).bit_length())
    if bits > 20:  # keep 44 bits of hash: with fewer, two of a few million distinct rows likely share them,
        return _groups(key)  # and a shared hash sends the whole mesh to the slower ``_memcmp_order``
    low = np.uint64((1 << bits) - 1)
    packed = key & ~low
    packed |= np.arange(count, dtype=np.uint64)
    packed.sort()
    order = (packed & low).astype(np.int64)
    packed >>= np.uint64(bits)
    starts = np.empty(count, dtype=bool)
    starts[0] = True
    np.not_equal(packed[1:], packed[:-1], out=starts[1:])
    inverse = np.empty(count, dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return order[starts], inverse


def corners_welded(points: np.ndarray, faces: np.ndarray, normals: np.ndarray | None, uv: np.ndarray | None,
                   weld: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(points, faces, normals, uv) of a part whose normals and UVs are per vertex (V, 3|2): those made
    per corner (F·3, 3|2), so welding loses none of them, and with ``weld`` the points welded (``_weld`` of
    their float64 values; rows of ``points``, in its type) and the faces indexing them. ``np.take``: the
    same rows as fancy indexing, 4× faster on (N, 3) rows."""
    corners = faces.reshape(-1)
    normals = None if normals is None else np.take(normals, corners, axis=0)
    uv = None if uv is None else np.take(uv, corners, axis=0)
    if weld:
        unique, inverse = _weld(np.asarray(points, dtype=np.float64))
        points, faces = np.take(points, unique, axis=0), np.take(inverse, faces)
    return points, faces, normals, uv


def _from_assimp(name: str, raw: Any) -> MeshPart:
    """A part as ``rules.mesh.assimp_read`` reads it, made as ``_from_trimesh`` makes trimesh's: normals
    and UVs face-varying, welded to one point per position unless it has per-vertex colours. A PNG or JPEG
    texture stays a file (``_copied_as_is``), where trimesh's part holds the same pixels decoded."""
    points, faces, normals, uv, colors = raw.points, raw.faces, raw.normals, raw.uv, raw.colors
    if not raw.welded:  # else the reading child welded it alike (``assimp_read.robot_part``)
        points, faces, normals, uv = corners_welded(points, faces, normals, uv, weld=colors is None)
    texture, image = None, None
    if raw.texture is not None and _copied_as_is(Path(raw.texture)):
        from usdforge.rules.files import check_texture

        check_texture(raw.texture)
        texture = Path(raw.texture)
    elif raw.texture is not None:  # another format: decoded as trimesh decodes it, written as PNG
        from usdforge.rules.files import open_texture

        image = open_texture(raw.texture)
    part = MeshPart(name, points, faces, normals=normals, uv=uv, colors=colors, color=raw.color, texture=texture,
                    image=image)
    return _bake(part, raw.transform)


#: Texture files a part names rather than holds decoded: the first bytes each format starts with, by suffix.
_AS_IS = {".png": b"\x89PNG\r\n\x1a\n", ".jpg": b"\xff\xd8\xff", ".jpeg": b"\xff\xd8\xff"}


def _copied_as_is(texture: Path) -> bool:
    """Whether an Assimp part names its texture file (copied into the output byte for byte) rather than
    holding it decoded (re-encoded as PNG, as trimesh's in-memory images are): a PNG or JPEG whose bytes
    begin as its suffix says, the formats every USD renderer reads by that suffix. Such a file is checked
    as a model's ``<texture>`` files are (``rules.files.check_texture``: a PNG's pixel data inflated and
    checked, without Pillow's full decode) instead of decoded by Pillow and encoded again as PNG, which
    was r2d2's largest cost (20 of 45 ms). The child names only files the mesh references, inside the
    allowed roots (``assimp_read._textures_checked``)."""
    magic = _AS_IS.get(texture.suffix.lower())
    if magic is None:
        return False
    try:
        with open(texture, "rb") as stream:
            return stream.read(len(magic)) == magic
    except OSError:
        return False


def read_file(path: Path, reader: str = "auto") -> tuple[list[MeshPart], str]:
    """The parts of the mesh file at ``path`` in metres, and which reader read them: Assimp first for the
    formats it reads (in a child process), else, or when it refuses the file, crashes, or a documented
    check says its result would differ (``rules.mesh.assimp_read.FALLBACK_CLASSES``), trimesh.

    reader: "auto"; "trimesh" or "assimp" force one (the equivalence test compares them; "assimp"
    returns no parts, only the reason, where Assimp would fall back).
    Raises ConversionError when the file is missing, unreadable, or holds no triangles.
    """
    from usdforge.rules.mesh.assimp_read import read_in_child

    stl = path.suffix.lower() == ".stl"
    used = "trimesh"
    if reader != "trimesh" and _assimp_reads(path):
        result = read_in_child(path, robot=True)
        if not isinstance(result, str):
            # STL has no node names (trimesh names a part after the file or its header): the file's stem.
            # (The child dropped an STL's facet normals, as trimesh's unprocessed reading drops them.)
            return [_from_assimp(path.stem if stl else raw.name, raw) for raw in result], "assimp"
        used = f"trimesh: {result}"
        if reader == "assimp":
            return [], used
    from usdforge.rules.mesh.read import load_parts

    loaded = load_parts(path, units="meters", process=False)  # welded once, by _from_trimesh
    return [_from_trimesh(path.stem if stl else part.name, part.mesh, part.transform, path)
            for part in loaded], used


def _assimp_reads(path: Path) -> bool:
    """Whether ``read_file`` asks Assimp (the reading child) for ``path`` first."""
    from usdforge.rules.files import regular_file_problem
    from usdforge.rules.mesh.assimp_read import ASSIMP_FIRST, assimp_version

    return path.suffix.lower().lstrip(".") in ASSIMP_FIRST and assimp_version() != "absent" \
        and regular_file_problem(path) is None


#: The build cache meshes are read through (``pipeline.cache.Store``: get_entry, put_entry, record) and the
#: caller's file hashing (path → sha256), or None.
_MESH_CACHE: ContextVar[tuple[Any, Callable[[Path], str]] | None] = ContextVar("usdforge_mesh_cache", default=None)
#: The files whose code decides the parts read from a mesh file (their bytes are part of the cache key).
_READER_CODE = (Path(__file__), Path(__file__).parents[1] / "mesh" / "read.py",
                Path(__file__).parents[1] / "mesh" / "assimp_read.py")
class _Writer:
    """A conversion's background cache writes (``write_in_background``), run in order on one thread started
    at the first: a fresh cache and a model of hundreds of meshes would otherwise start a thread per mesh.
    ``join`` waits for every write submitted."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, write: Callable[[], None]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="usdforge-cache-write")
            self._thread.start()
        self._queue.put(write)

    def _run(self) -> None:
        while (write := self._queue.get()) is not None:
            try:
                write()
            except Exception as exc:  # noqa: BLE001 - a cache write never fails a build
                logging.getLogger("usdforge").warning("warning: a build cache write failed (%s: %s): not stored",
                                                      type(exc).__name__, exc)

    def join(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()


#: The writer of the enclosing ``mesh_cache`` (``write_in_background``).
_PENDING_WRITES: ContextVar[_Writer | None] = ContextVar("usdforge_cache_writes", default=None)
_PARTS_FILE = "parts.bin"


@contextmanager
def mesh_cache(store: Any, digest: Callable[[Path], str] | None = None) -> Iterator[None]:
    """Read mesh files through ``store`` (None: no cache) within the block; ``digest`` hashes a file
    (default: SHA-256 of its bytes; a caller that hashed the files already passes its memo)."""
    token = _MESH_CACHE.set(None if store is None else (store, digest or _file_sha))
    pending = _PENDING_WRITES.set(_Writer())
    try:
        yield
    finally:
        _PENDING_WRITES.get().join()  # every write is in the cache when the block ends (the next build may need it)
        _PENDING_WRITES.reset(pending)
        _MESH_CACHE.reset(token)


def write_in_background(write: Callable[[], None]) -> None:
    """Run ``write`` (a build-cache write: hashing and writing files) on the enclosing ``mesh_cache``'s
    writer thread, beside the rest of the conversion; the block waits for it as it ends. Outside one: now."""
    pending = _PENDING_WRITES.get()
    if pending is None:
        write()
        return
    pending.submit(write)


def active_mesh_cache() -> tuple[Any, Callable[[Path], str]] | None:
    """(store, file hashing) of the enclosing ``mesh_cache``, or None."""
    return _MESH_CACHE.get()


@cache
def _reader_stamp() -> str:
    digest = hashlib.sha256()
    for path in _READER_CODE:
        digest.update(path.read_bytes())
    for name in ("trimesh", "numpy", "pycollada", "pillow", "assimp-py"):
        digest.update(f"{name}={distribution_version(name)};".encode())
    return digest.hexdigest()


def _file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return "missing"
    return digest.hexdigest()


def mesh_key(path: Path, digest: Callable[[Path], str] = _file_sha) -> str:
    """The cache key of a mesh file's parts: its content, its name (STL parts are named after it), the
    content of the files it references (MTL, textures, buffers; by path relative to it) and the reading
    code and libraries."""
    references = {os.path.relpath(ref, path.parent): digest(ref) for ref in mesh_references(path)}
    payload = {"mesh": digest(path), "name": path.name, "references": dict(sorted(references.items())),
               "reader": _reader_stamp(), "units": "meters"}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


_ARRAYS = ("points", "faces", "normals", "uv", "colors", "normal_indices")


def parts_to_bytes(parts: list[MeshPart]) -> bytes:
    """The parts (none with a texture) as bytes: a JSON header (names, colours, and each array's dtype, shape
    and offset) then the arrays' raw bytes, exactly as they are."""
    meta, chunks, offset = [], [], 0
    for part in parts:
        arrays = {}
        for field in _ARRAYS:
            value = getattr(part, field)
            if value is not None:
                value = np.ascontiguousarray(value)
                arrays[field] = [value.dtype.str, list(value.shape), offset]
                chunks.append(value.tobytes())
                offset += value.nbytes
        meta.append({"name": part.name, "color": None if part.color is None else [float(c) for c in part.color],
                     "texture": None, "arrays": arrays})  # the key kept: entries made before read alike
    header = json.dumps(meta).encode()
    return len(header).to_bytes(8, "little") + header + b"".join(chunks)


def parts_from_bytes(data: bytes) -> list[MeshPart]:
    """``parts_to_bytes`` reversed (arrays in one writable buffer, no copy per array). The build cache is
    untrusted: ValueError for bytes it did not write, a part naming a texture file (the store keeps none:
    the file would be copied into the output without the reference check), or arrays that are not finite
    numbers or do not fit the part's points and faces (the writer indexes them)."""
    size = int.from_bytes(data[:8], "little")
    meta = json.loads(data[8:8 + size])
    buffer = bytearray(data[8 + size:])
    if not isinstance(meta, list):
        raise ValueError("not a list of parts")
    parts = []
    for item in meta:
        if item.get("texture") is not None:
            raise ValueError("a cached part names a texture file")
        fields = {}
        for field, (dtype, shape, offset) in item["arrays"].items():
            dtype = np.dtype(dtype)
            if field not in _ARRAYS or dtype.kind not in "fiu":
                raise ValueError(f"unexpected array {field} of {dtype}")
            count = int(np.prod(shape)) if shape else 1
            fields[field] = np.frombuffer(buffer, dtype, count, offset).reshape(shape)
        _check_fits(fields)
        color = None if item["color"] is None else tuple(float(c) for c in item["color"])
        if color is not None and (len(color) != 4 or not all(math.isfinite(c) for c in color)):
            raise ValueError("a colour that is not four finite numbers (RGBA)")
        parts.append(MeshPart(str(item["name"]), fields.pop("points"), fields.pop("faces"), **fields, color=color))
    return parts


#: What ``parts_from_bytes`` raises for bytes usdforge did not write: besides its own ValueErrors, what JSON
#: and NumPy raise for a malformed header (nested past the recursion limit, a shape or offset past an index).
BAD_PARTS = (KeyError, ValueError, TypeError, AttributeError, IndexError, RecursionError, OverflowError)


def _check_fits(fields: dict[str, np.ndarray]) -> None:
    """ValueError unless ``fields`` are a part's arrays as ``MeshPart`` describes them: finite points (V, 3),
    integer faces (F, 3) indexing them, and normals, normal indices, UVs and colours of the sizes they
    must have."""
    points, faces = fields["points"], fields["faces"]
    if points.ndim != 2 or points.shape[1] != 3 or faces.ndim != 2 or faces.shape[1] != 3 or faces.dtype.kind == "f":
        raise ValueError("points or faces of the wrong shape")
    if faces.size and (int(faces.min()) < 0 or int(faces.max()) >= len(points)):
        raise ValueError("faces past the points")
    corners, indices, normals = 3 * len(faces), fields.get("normal_indices"), fields.get("normals")
    if indices is not None and (normals is None or indices.shape != (corners,) or indices.dtype.kind == "f"
                                or (indices.size and (int(indices.min()) < 0 or int(indices.max()) >= len(normals)))):
        raise ValueError("normal indices that do not fit")
    sizes = {"normals": (None if indices is not None else (corners,), 3), "uv": ((corners, len(points)), 2),
             "colors": ((len(points),), 4)}
    for field, (lengths, width) in sizes.items():
        value = fields.get(field)
        if value is not None and (value.ndim != 2 or value.shape[1] != width
                                  or (lengths is not None and len(value) not in lengths)):
            raise ValueError(f"{field} that do not fit the part")
    for value in fields.values():
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise ValueError("a value that is not a finite number")


class MeshLibrary:
    """Reads each mesh file once and bakes each (file, scale) once; failures are cached too."""

    def __init__(self) -> None:
        self._files: dict[Path, list[MeshPart] | ConversionError] = {}
        self._baked: dict[tuple[Path, tuple[float, float, float]], list[MeshPart]] = {}
        self._volumes: dict[tuple[Path, tuple[float, float, float]], VolumeProperties] = {}
        self._names: dict[Path, list[str]] = {}  # part names from the build cache's records (``part_names``)
        self._lazy: dict[Path, Callable[[], list[MeshPart]]] = {}  # ``provide_lazy``

    def _read(self, path: Path) -> list[MeshPart]:
        active = _MESH_CACHE.get()
        if active is None:
            return self._read_file(path)
        store, digest = active
        key = mesh_key(path, digest)
        cached = store.get_entry(key)
        store.record("mesh-geometry", hit=cached is not None)
        if cached is not None:
            try:
                return parts_from_bytes(cached.files[_PARTS_FILE])
            except (*BAD_PARTS, OSError):
                pass  # another layout's entry, or bytes usdforge did not write: read the file
        parts = self._read_file(path)
        # Textures are not stored: in-memory ones have no file, and a texture file named by an entry (untrusted)
        # would be copied into the output without the reference check.
        if all(part.image is None and part.texture is None for part in parts):
            # Encoded here, written beside the rest of the conversion (a fresh cache: a folder and two
            # files per mesh; unitree_h1's 21 meshes: about 40 ms on this machine's disk).
            files, meta = {_PARTS_FILE: parts_to_bytes(parts)}, {"parts": [part.name for part in parts]}
            write_in_background(lambda: store.put_entry(key, files, meta, kind="mesh-geometry"))
        return parts

    def part_names(self, path: Path) -> list[str]:
        """The names of the file's parts, as ``parts`` gives them (what a collider on the file names). When
        the parts were not read in this conversion, from the build cache entry's record of them, without
        reading or decoding the arrays (a rebuild that re-authors the physics layer but restores the
        shapes). The record is untrusted: anything but a non-empty list of strings reads the parts."""
        path = Path(path)
        known = self._names.get(path)
        if known is not None:  # a file named by several colliders: looked up once
            return list(known)
        active = _MESH_CACHE.get()
        if path not in self._files and active is not None:
            entry = active[0].entry(mesh_key(path, active[1]))
            # Only an entry of this layout (its parts file) vouches for its record of the parts' names.
            meta = entry.get("meta") if entry is not None and _PARTS_FILE in entry.get("files", {}) else None
            names = meta.get("parts") if isinstance(meta, dict) else None
            if isinstance(names, list) and names and all(type(name) is str for name in names):
                self._names[path] = list(names)
                return list(names)
        return [part.name for part in self._file_parts(path)]

    def _read_file(self, path: Path) -> list[MeshPart]:
        return read_file(path)[0]

    def read_ahead(self, paths: Iterable[Path]) -> None:
        """Ask the reading child now for the files of ``paths`` (in this order) that ``parts`` will have
        Assimp read (not read yet, not in the build cache), so that it reads each while this process
        welds and authors the ones before (``rules.mesh.assimp_read.request_ahead``). Reading them
        later gives the same parts; a file not read later costs the child a read and its answer is kept
        until it is (a changed file is read again)."""
        from usdforge.rules.mesh.assimp_read import request_ahead

        active = _MESH_CACHE.get()
        wanted = []
        for path in dict.fromkeys(Path(p) for p in paths):
            if path in self._files or not _assimp_reads(path):
                continue
            if active is not None and active[0].entry(mesh_key(path, active[1])) is not None:
                continue  # restored from the build cache, not read
            wanted.append(path)
        if wanted:
            request_ahead(wanted, robot=True)

    def _file_parts(self, path: Path) -> list[MeshPart]:
        if path in self._lazy and path not in self._files:
            self._files[path] = list(self._lazy.pop(path)())
        cached = self._files.get(path)
        if cached is None:
            try:
                cached = self._read(path)
            except ConversionError as exc:
                cached = exc
            self._files[path] = cached
        if isinstance(cached, ConversionError):
            raise cached
        return cached

    def parts(self, path: Path, scale: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> list[MeshPart]:
        """The file's parts in the shape frame, scaled by ``scale`` (3,). Raises ConversionError when the
        file is missing, unreadable, of an unsupported format, or holds no triangles."""
        key = (Path(path), tuple(float(s) for s in scale))
        if key not in self._baked:
            parts = self._file_parts(key[0])
            self._baked[key] = parts if key[1] == (1.0, 1.0, 1.0) else \
                [_bake(part, np.diag([*key[1], 1.0])) for part in parts]
        return self._baked[key]

    def provide(self, path: Path, parts: list[MeshPart]) -> None:
        """Use ``parts`` (in the file's frame) for ``path`` instead of reading it: for a source reader that
        already holds the geometry (MJCF: MuJoCo's compiled meshes). ``path`` need not exist."""
        self._files[Path(path)] = list(parts)

    def provide_lazy(self, path: Path, names: list[str], parts: Callable[[], list[MeshPart]]) -> None:
        """``provide`` the parts ``parts()`` makes, made on first use: ``part_names`` gives ``names`` (which
        must be theirs) without making them (MJCF: a rebuild that restores the shapes reads no mesh array)."""
        self._names[Path(path)] = list(names)
        self._lazy[Path(path)] = parts

    def missing_references(self, path: Path) -> list[Path]:
        """Files the mesh file names (textures, MTL) that do not exist."""
        return [p for p in mesh_references(Path(path)) if not p.is_file()]

    def volume(self, path: Path, scale: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> VolumeProperties:
        """Volume properties of the scaled file, of its convex hull when the surface is not closed."""
        key = (Path(path), tuple(float(s) for s in scale))
        if key not in self._volumes:
            import trimesh

            from usdforge.rules.mesh.read import enclosed

            mesh = trimesh.util.concatenate([part.trimesh() for part in self.parts(*key)])
            mesh.merge_vertices()
            mesh = enclosed(mesh)  # an open surface: its hull; a flat one: None
            volume = 0.0 if mesh is None else float(abs(mesh.volume))
            if volume <= 0.0:
                self._volumes[key] = VolumeProperties(0.0, np.zeros(3), np.zeros((3, 3)))
            else:
                mesh.density = 1.0
                self._volumes[key] = VolumeProperties(volume, np.asarray(mesh.center_mass, dtype=float),
                                                      np.asarray(mesh.moment_inertia, dtype=float))
        return self._volumes[key]
