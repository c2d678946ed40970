"""Reading mesh files: every triangle mesh of an OBJ, STL, PLY, OFF, GLB/GLTF or DAE through trimesh
(pycollada for DAE), FBX through the optional assimp binding; ``read_parts`` (the standalone mesh
converter's reader) reads them with Assimp first, trimesh as the fallback. No pxr here."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np
import trimesh

from usdforge.rules.errors import ConversionError
from usdforge.rules.files import regular_file_problem
from usdforge.rules.mesh.formats import ASSIMP_FORMATS, MESH_FORMATS, TRIMESH_FORMATS

#: glTF is Y-up by specification; usdforge's stages are Z-up.
_Y_UP_TO_Z_UP = trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0])


class MeshPart(NamedTuple):
    """One triangle mesh of a file, in the file's frame: ``transform`` (4, 4) places ``mesh`` in it."""

    name: str
    mesh: trimesh.Trimesh
    transform: np.ndarray


def load_parts(path: Path, units: str | None = None, process: bool = True) -> list[MeshPart]:
    """Every triangle mesh in the file at ``path``, each with its node transform (Z-up for glTF).

    units: when given (e.g. "meters"), each transform also converts the units the file declares (COLLADA's
        ``<asset><unit meter>``, as trimesh reads it) into these; a file that declares none is left as it is.
    process: trimesh's ``process`` (duplicate vertices merged); False keeps the file's vertices as they are
        (an STL's triangle soup), for a caller that welds them itself.
    Raises ConversionError when the file is missing, unreadable, or holds no triangles.
    """
    path = Path(path)
    extension = path.suffix.lower().lstrip(".")
    problem = regular_file_problem(path)
    if problem is not None:
        raise ConversionError(path, f"mesh file {problem}")
    if extension in ASSIMP_FORMATS:
        return load_parts_with_assimp(path)
    if extension not in TRIMESH_FORMATS:
        what = f"unsupported mesh format '.{extension}'" if extension else "mesh file name without an extension"
        raise ConversionError(path, f"{what} (supported: {', '.join(MESH_FORMATS)})")
    if extension == "gltf":
        _check_gltf_document(path)
    if extension == "stl":
        _check_stl(path)
    try:
        with _quiet_trimesh():
            scene = _load_scene(path, extension, process)
    except Exception as exc:  # noqa: BLE001 - trimesh raises many kinds; all mean "cannot read this file"
        raise ConversionError(path, f"cannot read {extension.upper()} mesh ({type(exc).__name__}: {exc})") from None
    up = _Y_UP_TO_Z_UP if extension in ("glb", "gltf") else np.eye(4)
    parts = []
    for node in sorted(scene.graph.nodes_geometry):
        transform, geometry_name = scene.graph[node]
        geometry = scene.geometry.get(geometry_name)
        if not isinstance(geometry, trimesh.Trimesh) or len(geometry.faces) == 0:
            continue  # lines and point clouds carry no surface
        matrix = up @ np.asarray(transform, dtype=np.float64)
        if units is not None:
            matrix = np.diag([_unit_scale(geometry.units, units)] * 3 + [1.0]) @ matrix
        parts.append(MeshPart(str(node), geometry, matrix))
    if not parts:
        raise ConversionError(path, "the file holds no triangle mesh")
    return parts


def read_parts(path: Path) -> tuple[list[MeshPart], str]:
    """``load_parts(path)`` (the file's units, trimesh's processed meshes), and which reader read them:
    Assimp first, in the reading child (``rules.mesh.assimp_read``), for the formats it reads; trimesh
    where it refuses or crashes on a file or a documented check says its result would differ
    (``FALLBACK_CLASSES``: "trimesh: <reason>"). Assimp's parts become the meshes trimesh makes of the same
    data (vertices merged alike, the file's normals and UVs, colours, material colour and diffuse map), so
    what the converter writes does not depend on the reader beyond float rounding and vertex order
    (``tests/test_mesh_rule.py`` compares them).

    Raises ConversionError when the file is missing, unreadable, or holds no triangles.
    """
    from usdforge.rules.mesh.assimp_read import ASSIMP_FIRST, assimp_version, read_in_child

    path = Path(path)
    extension = path.suffix.lower().lstrip(".")
    used = "trimesh"
    if extension in ASSIMP_FIRST and extension in TRIMESH_FORMATS and assimp_version() != "absent" \
            and regular_file_problem(path) is None:
        result = read_in_child(path)
        if not isinstance(result, str):
            return _stl_named(path, [_trimesh_part(path, raw) for raw in result]), "assimp"
        used = f"trimesh: {result}"
    return _stl_named(path, load_parts(path)), used


def _stl_named(path: Path, parts: list[MeshPart]) -> list[MeshPart]:
    """An STL's part named after its file, whichever reader read it: trimesh names it after the text of
    the file's header (``solid NAME``, or a binary STL's 80 bytes, which exporters fill with their own
    name: "Exported from Blender-2.78"), Assimp after the file."""
    if path.suffix.lower() != ".stl":
        return parts
    return [part._replace(name=path.name) for part in parts]


def _trimesh_part(path: Path, raw) -> MeshPart:
    """A part Assimp read (``assimp_read.RawPart``) as trimesh's loaders make one: a processed mesh (vertices
    merged where position, normal and UV agree) with the file's normals, per-vertex colours or a material
    (colour in 0-255, diffuse map decoded), in the file's units (a COLLADA unit taken back out)."""
    visual = None
    if raw.colors is not None:
        visual = trimesh.visual.ColorVisuals(vertex_colors=np.round(raw.colors * 255.0).astype(np.uint8))
    elif raw.color is not None or raw.texture is not None or raw.uv is not None:
        image = None
        if raw.texture is not None:
            from usdforge.rules.files import open_texture

            image = open_texture(raw.texture)
        diffuse = None if raw.color is None else np.round(np.asarray(raw.color) * 255.0).astype(np.uint8)
        visual = trimesh.visual.TextureVisuals(uv=raw.uv, material=trimesh.visual.material.SimpleMaterial(
            image=image, diffuse=diffuse))
    if path.suffix.lower() == ".stl":  # trimesh's STL loader: the facet normals, weighed into vertex normals
        normals = {"face_normals": None if raw.normals is None else raw.normals[raw.faces[:, 0]]}
    else:
        normals = {"vertex_normals": raw.normals}
    mesh = trimesh.Trimesh(raw.points, raw.faces, visual=visual, process=True, **normals)
    transform = np.diag([1.0 / raw.unit] * 3 + [1.0]) @ raw.transform
    return MeshPart(raw.name, mesh, transform)


@contextmanager
def _quiet_trimesh() -> Iterator[None]:
    """trimesh logs a traceback for each texture or material it cannot read (a missing file, a colour
    where it expects a texture): usdforge reports missing files itself, and a user sees no traceback."""
    logger = logging.getLogger("trimesh")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _check_stl(path: Path) -> None:
    """ConversionError for an STL that is neither a binary STL of the size its triangle count gives
    (84 + 50 × count bytes) nor ASCII text starting with ``solid``: trimesh would parse a truncated or
    padded binary file as ASCII and fail on its bytes (without the optional ``charset_normalizer``,
    with "No module named 'charset_normalizer'")."""
    import struct

    size = path.stat().st_size
    with open(path, "rb") as stream:
        head = stream.read(1024)
    if len(head) >= 84:
        count = struct.unpack_from("<I", head, 80)[0]
        if size == 84 + 50 * count:
            return
    text = head.lstrip()
    if text[:5].lower() == b"solid":
        try:
            head.decode("utf-8")
            return
        except UnicodeDecodeError as exc:
            if exc.start >= len(head) - 3:  # a character cut by the 1024-byte read
                return
    if len(head) < 84:
        raise ConversionError(path, f"not an STL file: {size} bytes, shorter than a binary STL's 84-byte "
                                    "header, and not ASCII STL text")
    raise ConversionError(path, f"binary STL whose header counts {count} triangles ({84 + 50 * count} bytes) "
                                f"but the file has {size} bytes (truncated or corrupt)")


def _check_gltf_document(path: Path) -> None:
    """ConversionError unless the .gltf file is a JSON object (trimesh fails with a traceback otherwise)."""
    import json

    try:
        document = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConversionError(path, f"not a glTF document: not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise ConversionError(path, f"not a glTF document: the JSON is {type(document).__name__}, not an object")


def _load_scene(path: Path, extension: str, process: bool) -> trimesh.Scene:
    """trimesh's scene of a file. trimesh hands ``process`` to a single-mesh file's mesh but not to the
    meshes of a COLLADA scene, which it always processes (merging vertices is most of a DAE's load time):
    unprocessed, a DAE's mesh arguments are read with trimesh's COLLADA loader and built with process off."""
    if process or extension != "dae":
        return trimesh.load_scene(str(path), file_type=extension, process=process)
    with open(path, "rb") as file:
        loaded = trimesh.exchange.dae.load_collada(file, resolver=trimesh.resolvers.FilePathResolver(str(path)))
    for geometry in loaded["geometry"].values():
        geometry["process"] = False
    return trimesh.load_scene(loaded)


def _unit_scale(declared: str | None, desired: str) -> float:
    """The factor from a file's declared units (trimesh's unit string) to ``desired``; 1 when the file
    declares none or an unusable value."""
    if not declared:
        return 1.0
    try:
        factor = trimesh.units.unit_conversion(declared, desired)
    except (ValueError, KeyError):
        return 1.0
    return factor if np.isfinite(factor) and factor > 0 else 1.0


def load_parts_with_assimp(path: Path) -> list[MeshPart]:
    """Every mesh of a file read by assimp (FBX), node transforms baked in, with its diffuse colour.

    Raises ConversionError naming the ``fbx`` extra when the assimp binding is not installed.
    """
    try:
        import assimp_py
    except ImportError:
        raise ConversionError(path, "FBX needs an assimp binding: install usdforge with the 'fbx' extra "
                                    "(pip install 'usdforge[fbx]') or convert the file to GLB/OBJ") from None
    flags = (assimp_py.Process_Triangulate | assimp_py.Process_JoinIdenticalVertices
             | assimp_py.Process_PreTransformVertices)
    try:
        scene = assimp_py.import_file(str(path), flags)
    except Exception as exc:  # noqa: BLE001 - assimp reports every failure as a generic error
        raise ConversionError(path, f"cannot read mesh with assimp ({exc})") from None
    parts = []
    for index, mesh in enumerate(scene.meshes):
        vertices = np.asarray(mesh.vertices, dtype=np.float64).reshape(-1, 3)
        faces = np.asarray(mesh.indices, dtype=np.int64).reshape(-1, 3)
        if len(faces) == 0:
            continue
        part = trimesh.Trimesh(vertices, faces, process=False)
        material = scene.materials[mesh.material_index] if mesh.material_index < len(scene.materials) else {}
        diffuse = material.get("COLOR_DIFFUSE")
        if diffuse is not None:
            rgba = [*diffuse[:3], material.get("OPACITY", 1.0)]
            part.visual = trimesh.visual.ColorVisuals(part, face_colors=np.round(np.array(rgba) * 255).astype(np.uint8))
        parts.append(MeshPart(mesh.name or f"mesh_{index}", part, np.eye(4)))
    if not parts:
        raise ConversionError(path, "the file holds no triangle mesh")
    return parts


def enclosed(mesh: trimesh.Trimesh) -> trimesh.Trimesh | None:
    """What a mesh's volume, centre of mass and inertia are taken from: ``mesh`` itself when it is a closed,
    consistently wound surface, else its convex hull (an open surface encloses no meaningful volume); None
    when its points span no volume (fewer than four, or all in one plane: qhull refuses them)."""
    if mesh.is_volume:
        return mesh
    try:
        return mesh.convex_hull
    except Exception:  # noqa: BLE001 - scipy's QhullError, trimesh's ValueError on no points: no volume
        return None


def combined_mesh(parts: list[MeshPart], transform: np.ndarray | None = None) -> trimesh.Trimesh:
    """All parts in one mesh, in the frame ``transform`` maps the file's frame into."""
    meshes = [part.mesh.copy().apply_transform((transform if transform is not None else np.eye(4))
                                               @ part.transform) for part in parts]
    return trimesh.util.concatenate(meshes)


