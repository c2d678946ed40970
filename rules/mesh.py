"""Mesh file → USD: OBJ, STL, PLY, OFF, GLB/GLTF and DAE through trimesh (pycollada for DAE).

Output (Isaac Lab's structure): ``/<name>`` Xform carrying RigidBodyAPI / MassAPI when configured, and
``/<name>/geometry`` holding one mesh prim per part of the file. With ``make_instanceable`` the geometry
lives in a separate binary layer (``Props/<stem>_meshes.usd``) that ``/<name>/geometry`` references as an
instanceable prim, by a relative path, so the folder can be moved.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import trimesh
from pxr import Sdf, Usd, UsdGeom, UsdPhysics

from rules.errors import ConversionError
from rules.outputs import instanceable_meshes_path
from rules.usd_authoring import (author_mass, author_mesh, author_preview_material, bind_material, export_stage,
                                 material_of, matrix_to_pose, new_stage, relative_asset_path, save_stage,
                                 set_local_transform, unique_name)
from schemas.converter_cfgs import MeshConverterCfg
from schemas.writer import author_cfg

#: File extensions trimesh reads here (lower case, without the dot).
TRIMESH_FORMATS = ("obj", "stl", "ply", "off", "glb", "gltf", "dae")
#: Formats read through the optional assimp binding.
ASSIMP_FORMATS = ("fbx",)
MESH_FORMATS = TRIMESH_FORMATS + ASSIMP_FORMATS

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
    if not path.is_file():
        raise ConversionError(path, "mesh file not found")
    if extension in ASSIMP_FORMATS:
        return load_parts_with_assimp(path)
    if extension not in TRIMESH_FORMATS:
        raise ConversionError(path, f"unsupported mesh format '.{extension}' (supported: "
                                    f"{', '.join(MESH_FORMATS)})")
    try:
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


def geometry_transform(cfg: MeshConverterCfg) -> np.ndarray:
    """The (4, 4) matrix of cfg's translation, rotation (x, y, z, w) and scale, applied to the geometry."""
    x, y, z, w = cfg.rotation
    matrix = trimesh.transformations.quaternion_matrix([w, x, y, z])
    matrix[:3, :3] = matrix[:3, :3] @ np.diag(cfg.scale)
    matrix[:3, 3] = cfg.translation
    return matrix


def combined_mesh(parts: list[MeshPart], transform: np.ndarray | None = None) -> trimesh.Trimesh:
    """All parts in one mesh, in the frame ``transform`` maps the file's frame into."""
    meshes = [part.mesh.copy().apply_transform((transform if transform is not None else np.eye(4))
                                               @ part.transform) for part in parts]
    return trimesh.util.concatenate(meshes)


def author_parts(stage: Usd.Stage, parent: Sdf.Path, parts: list[MeshPart], cfg: MeshConverterCfg,
                 layer_dir: Path, out_dir: Path, texture_prefix: str) -> None:
    """Author each part as a mesh prim under ``parent`` (with its node transform, material, collision).

    layer_dir: the folder of the layer being authored (texture paths are relative to it).
    out_dir: the output root; textures are written to ``out_dir/textures``.
    """
    taken: set[str] = set()
    looks = parent.AppendChild("Looks")
    for index, part in enumerate(parts):
        name = unique_name(part.name, taken | {"Looks"})
        usd_mesh = author_mesh(stage, parent.AppendChild(name), part.mesh)
        translation, orientation, scale = matrix_to_pose(part.transform)
        set_local_transform(usd_mesh.GetPrim(), translation, orientation, scale)
        color, image = material_of(part.mesh)
        if color is not None or image is not None:
            texture_file = None
            if image is not None:
                texture_path = out_dir / "textures" / f"{texture_prefix}_{index}.png"
                texture_path.parent.mkdir(parents=True, exist_ok=True)
                image.save(texture_path, format="PNG")
                texture_file = relative_asset_path(texture_path, layer_dir)
            material = author_preview_material(stage, looks.AppendChild(f"{name}_material"), color, texture_file)
            bind_material(usd_mesh.GetPrim(), material)
        if cfg.collision_props is not None:
            UsdPhysics.CollisionAPI.Apply(usd_mesh.GetPrim())
            author_cfg(usd_mesh.GetPrim(), cfg.collision_props)
        if cfg.mesh_collision_props is not None:
            UsdPhysics.MeshCollisionAPI.Apply(usd_mesh.GetPrim())
            author_cfg(usd_mesh.GetPrim(), cfg.mesh_collision_props)


def author_mass_properties(root: Usd.Prim, cfg: MeshConverterCfg, parts: list[MeshPart], asset: Path) -> None:
    """MassAPI on the root: the cfg's mass (or density), with the centre of mass and inertia of the
    transformed geometry from trimesh, so every engine gets all four values."""
    mass_props = cfg.mass_props
    author_cfg(root, mass_props)
    if mass_props.mass is None:
        return  # density only: the engine integrates it over the colliders
    mesh = combined_mesh(parts, geometry_transform(cfg))
    if not mesh.is_volume:
        # An open or inconsistent surface has no meaningful volume: its convex hull does.
        mesh = mesh.convex_hull
    if mesh.volume <= 0:
        raise ConversionError(asset, "cannot compute inertia: the mesh encloses no volume")
    mesh.density = mass_props.mass / mesh.volume
    author_mass(root, mass_props.mass, mesh.center_mass, mesh.moment_inertia)


def convert(cfg: MeshConverterCfg, out_dir: Path) -> list[Path]:
    """Convert ``cfg.asset_path`` into ``out_dir``; return the files written.

    cfg.usd_file_name must be resolved (the pipeline does it). Raises ConversionError on bad input.
    """
    asset = Path(cfg.asset_path)
    parts = load_parts(asset)
    usd_path = out_dir / cfg.usd_file_name
    usd_path.parent.mkdir(parents=True, exist_ok=True)
    stage, root = new_stage(asset.stem, usd_path)
    written = [usd_path]
    if cfg.rigid_props is not None:
        UsdPhysics.RigidBodyAPI.Apply(root)
        author_cfg(root, cfg.rigid_props)
    if cfg.mass_props is not None:
        author_mass_properties(root, cfg, parts, asset)
    geometry = root.GetPath().AppendChild("geometry")
    translation, orientation, scale = matrix_to_pose(geometry_transform(cfg))
    if cfg.make_instanceable:
        meshes_relative = instanceable_meshes_path(cfg.usd_file_name)
        meshes_path = out_dir / meshes_relative
        mesh_stage, _ = new_stage("geometry")
        author_parts(mesh_stage, Sdf.Path("/geometry"), parts, cfg, meshes_path.parent, out_dir, asset.stem)
        export_stage(mesh_stage, meshes_path)
        written.append(meshes_path)
        geometry_prim = stage.DefinePrim(geometry, "Xform")
        geometry_prim.GetReferences().AddReference(relative_asset_path(meshes_path, usd_path.parent), "/geometry")
        geometry_prim.SetInstanceable(True)
    else:
        geometry_prim = UsdGeom.Xform.Define(stage, geometry).GetPrim()
        author_parts(stage, geometry, parts, cfg, usd_path.parent, out_dir, asset.stem)
    set_local_transform(geometry_prim, translation, orientation, scale)
    save_stage(stage)
    written.extend(sorted((out_dir / "textures").glob("*.png")) if (out_dir / "textures").is_dir() else [])
    return written
