"""Mesh file → USD: the parts ``rules.mesh.read.read_parts`` reads (Assimp first, trimesh as the fallback),
authored with pxr's typed Usd API.

Output (Isaac Lab's structure): ``/<name>`` Xform carrying RigidBodyAPI (``rigid_props``) and MassAPI
(``mass_props``, whenever given as in Isaac Lab's MeshConverter: without ``rigid_props`` it acts once a
rigid body is applied at spawn time), and ``/<name>/geometry`` holding one mesh prim per part of the
file, with CollisionAPI (``collision_props``) and MeshCollisionAPI (``mesh_collision_props``, only on
colliders). ``mesh_collision_props`` without colliders is a warning, not a stray schema. With ``make_instanceable`` the geometry
lives in a separate binary layer (``Props/<stem>_meshes.usd``) that ``/<name>/geometry`` references as an
instanceable prim, by a relative path, so the folder can be moved.
"""

from __future__ import annotations

from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

from usdforge.rules.conversion_warnings import warn
from usdforge.rules.errors import ConversionError
from usdforge.rules.errors import names_the_asset
from usdforge.rules.files import (MAX_FILE_BYTES, Reference, check_model_file, check_references, decoded_texture,
                                  model_roots)
from usdforge.rules.mesh.references import mesh_references
from usdforge.rules.outputs import instanceable_meshes_path
from usdforge.rules.robot.layer_reuse import MESH_UNIT, reused, write_restored
from usdforge.rules.usd.stage import (author_mass, author_mesh, author_preview_material, bind_material, export_stage,
                                 material_of, matrix_to_pose, new_stage, relative_asset_path, save_layer,
                                 save_stage, set_local_transform, unique_name, usd_identifier)
from usdforge.schemas.converter_cfgs import MeshConverterCfg
from usdforge.schemas.writer import author_cfg

if TYPE_CHECKING:
    from usdforge.rules.mesh.read import MeshPart

# trimesh (and rules.mesh.read, which imports it) only where a file is read: a conversion whose meshes
# layer comes from the build cache imports neither (about 0.5 s of a one-off run).


def geometry_transform(cfg: MeshConverterCfg) -> np.ndarray:
    """The (4, 4) matrix of cfg's translation, rotation (x, y, z, w) and scale, applied to the geometry."""
    x, y, z, w = cfg.rotation
    matrix = _rotation_matrix(np.array([w, x, y, z], dtype=np.float64))
    matrix[:3, :3] = matrix[:3, :3] @ np.diag(cfg.scale)
    matrix[:3, 3] = cfg.translation
    return matrix


def _rotation_matrix(wxyz: np.ndarray) -> np.ndarray:
    """(4, 4) rotation of a (w, x, y, z) quaternion of any non-zero norm (identity for a zero one).

    The arithmetic is the one trimesh's ``quaternion_matrix`` does (the norm by ``np.dot``, each term of the
    scaled quaternion's outer product), so the matrix is the same to the bit and outputs keep their bytes
    (tests/test_mesh_rule.py compares the two)."""
    norm = float(np.dot(wxyz * wxyz, np.ones(4)))
    matrix = np.eye(4)
    if norm < np.finfo(float).eps * 4.0:
        return matrix
    q = wxyz * np.sqrt(2.0 / norm)
    outer = q[None, :] * q[:, None]
    matrix[0, :3] = 1.0 - outer[2, 2] - outer[3, 3], outer[1, 2] - outer[3, 0], outer[1, 3] + outer[2, 0]
    matrix[1, :3] = outer[1, 2] + outer[3, 0], 1.0 - outer[1, 1] - outer[3, 3], outer[2, 3] - outer[1, 0]
    matrix[2, :3] = outer[1, 3] - outer[2, 0], outer[2, 3] + outer[1, 0], 1.0 - outer[1, 1] - outer[2, 2]
    return matrix


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
        if cfg.mesh_collision_props is not None and cfg.collision_props is not None:
            UsdPhysics.MeshCollisionAPI.Apply(usd_mesh.GetPrim())
            author_cfg(usd_mesh.GetPrim(), cfg.mesh_collision_props)


def author_mass_properties(root: Usd.Prim, cfg: MeshConverterCfg, parts: list[MeshPart], asset: Path) -> None:
    """MassAPI on the root: the cfg's mass (or density), with the centre of mass and inertia of the
    transformed geometry from trimesh, so every engine gets all four values."""
    mass_props = cfg.mass_props
    author_cfg(root, mass_props)
    if mass_props.mass is None:
        return  # density only: the engine integrates it over the colliders
    from usdforge.rules.mesh.read import combined_mesh, enclosed

    mesh = enclosed(combined_mesh(parts, geometry_transform(cfg)))  # an open surface: its hull
    if mesh is None or mesh.volume <= 0:
        raise ConversionError(asset, "cannot compute inertia: the mesh encloses no volume")
    mesh.density = mass_props.mass / mesh.volume
    author_mass(root, mass_props.mass, mesh.center_mass, mesh.moment_inertia)


def check_mesh_files(asset: Path, allowed_roots: tuple[str, ...] = ()) -> None:
    """ConversionError unless the mesh file and the files it references (MTL, images, glTF buffers) are
    regular files of bounded size inside its folder or ``allowed_roots`` (``rules.files``)."""
    check_model_file(asset, MAX_FILE_BYTES)
    check_references([Reference(path, "file", asset) for path in mesh_references(asset)],
                     model_roots(asset, allowed_roots))


def main_layer(path: Path, root_name: str, meshes_reference: str, translation: np.ndarray,
               orientation_wxyz: np.ndarray, scale: np.ndarray) -> Sdf.Layer:
    """The main layer of a ``make_instanceable`` output without rigid body or mass properties, authored
    through Sdf as ``new_stage``, ``DefinePrim``, ``AddReference``, ``SetInstanceable`` and
    ``set_local_transform`` author it through a stage: its text is the same (tests/test_mesh_rule.py
    compares them), without a stage composing the meshes layer it references."""
    layer = Sdf.Layer.CreateNew(str(path))
    root = Sdf.PrimSpec(layer, usd_identifier(root_name), Sdf.SpecifierDef, "Xform")
    layer.defaultPrim = root.name
    for key, value in (("upAxis", UsdGeom.Tokens.z), ("metersPerUnit", 1.0), ("kilogramsPerUnit", 1.0)):
        layer.pseudoRoot.SetInfo(key, value)
    geometry = Sdf.PrimSpec(root, "geometry", Sdf.SpecifierDef, "Xform")
    geometry.referenceList.Prepend(Sdf.Reference(meshes_reference, "/geometry"))
    geometry.instanceable = True
    w, x, y, z = map(float, orientation_wxyz)
    ops = [("xformOp:translate", Sdf.ValueTypeNames.Double3, Gf.Vec3d(*map(float, translation))),
           ("xformOp:orient", Sdf.ValueTypeNames.Quatd, Gf.Quatd(w, Gf.Vec3d(x, y, z))),
           ("xformOp:scale", Sdf.ValueTypeNames.Double3, Gf.Vec3d(*map(float, scale)))]
    for name, value_type, value in ops:
        Sdf.AttributeSpec(geometry, name, value_type).default = value
    Sdf.AttributeSpec(geometry, "xformOpOrder", Sdf.ValueTypeNames.TokenArray,
                      Sdf.VariabilityUniform).default = [name for name, _, _ in ops]
    return layer


def read_checked_parts(asset: Path) -> list[MeshPart]:
    """The parts of the mesh file (Assimp first, trimesh as the fallback), their textures decoded: before
    anything is written, as the reference checks verify a PNG, no more."""
    from usdforge.rules.mesh.read import read_parts

    parts, _ = read_parts(asset)
    for part in parts:
        image = material_of(part.mesh)[1]
        if image is not None:
            decoded_texture(image, asset)
    return parts


@names_the_asset
def convert(cfg: MeshConverterCfg, out_dir: Path) -> list[Path]:
    """Convert ``cfg.asset_path`` into ``out_dir``; return the files written.

    cfg.usd_file_name must be resolved (the pipeline does it). Raises ConversionError on bad input.
    """
    asset = Path(cfg.asset_path)
    check_mesh_files(asset, cfg.allowed_roots)
    # The meshes layer and its textures from the build cache (``pipeline.layer_keys.mesh_unit_keys``): the
    # file is then read only for the mass properties.
    meshes_files = reused(MESH_UNIT) if cfg.make_instanceable else None
    needs_parts = meshes_files is None or (cfg.mass_props is not None and cfg.mass_props.mass is not None)
    parts = read_checked_parts(asset) if needs_parts else []
    usd_path = out_dir / cfg.usd_file_name
    usd_path.parent.mkdir(parents=True, exist_ok=True)
    # A text main layer holding only the pose and the reference to the meshes layer is authored through
    # Sdf (``main_layer``: the same text, without a stage that composes the meshes layer).
    plain = cfg.make_instanceable and cfg.rigid_props is None and cfg.mass_props is None and \
        cfg.usd_file_name.endswith(".usda")
    stage, root = (None, None) if plain else new_stage(asset.stem, usd_path)
    written = [usd_path]
    if cfg.rigid_props is not None:
        UsdPhysics.RigidBodyAPI.Apply(root)
        author_cfg(root, cfg.rigid_props)
    # What each field means (Isaac Lab's reference): mesh_collision_props is the approximation of the
    # collision meshes, so there is none without collision_props. mass_props is authored on the top prim
    # whenever given, as Isaac Lab's MeshConverter does: without rigid_props it acts once a rigid body is
    # applied at spawn time (``UsdFileCfg(rigid_props=...)``), which users of the reference rely on.
    if cfg.mass_props is not None:
        author_mass_properties(root, cfg, parts, asset)
    if cfg.mesh_collision_props is not None and cfg.collision_props is None:
        warn(asset, "mesh_collision_props without collision_props: there are no collision meshes to "
             "approximate; not authored")
    geometry = root.GetPath().AppendChild("geometry") if root is not None else None
    translation, orientation, scale = matrix_to_pose(geometry_transform(cfg))
    if cfg.make_instanceable:
        meshes_relative = instanceable_meshes_path(cfg.usd_file_name)
        meshes_path = out_dir / meshes_relative
        if meshes_files is not None:
            for name, data in meshes_files.items():  # names checked by the cache and layer_reuse.reused
                (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
                write_restored(out_dir / name, name, data)
        else:
            mesh_stage, _ = new_stage("geometry")
            author_parts(mesh_stage, Sdf.Path("/geometry"), parts, cfg, meshes_path.parent, out_dir, asset.stem)
            export_stage(mesh_stage, meshes_path)
        written.append(meshes_path)
    if stage is None:
        save_layer(main_layer(usd_path, asset.stem, relative_asset_path(meshes_path, usd_path.parent),
                              translation, orientation, scale))
    else:
        if cfg.make_instanceable:
            geometry_prim = stage.DefinePrim(geometry, "Xform")
            geometry_prim.GetReferences().AddReference(relative_asset_path(meshes_path, usd_path.parent),
                                                       "/geometry")
            geometry_prim.SetInstanceable(True)
        else:
            geometry_prim = UsdGeom.Xform.Define(stage, geometry).GetPrim()
            author_parts(stage, geometry, parts, cfg, usd_path.parent, out_dir, asset.stem)
        set_local_transform(geometry_prim, translation, orientation, scale)
        save_stage(stage)
    written.extend(sorted((out_dir / "textures").glob("*.png")) if (out_dir / "textures").is_dir() else [])
    return written
