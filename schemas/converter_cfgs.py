"""Cfgs of the asset converters, with Isaac Lab's field names and defaults (``isaaclab.sim.converters``)."""

from __future__ import annotations

import attrs

from usdforge.schemas.physics import CollisionBaseCfg, MassPropertiesCfg, MeshCollisionBaseCfg, RigidBodyBaseCfg
from usdforge.schemas.validators import (file_name_or_none, finite_vector, folder_list, non_zero_scale,
                                        tuple_of_floats, unit_quaternion)

#: Isaac Lab's robot ``collision_type`` values → the ``physics:approximation`` token of mesh colliders.
COLLISION_TYPES = {
    "Convex Hull": "convexHull",
    "Convex Decomposition": "convexDecomposition",
    "Bounding Sphere": "boundingSphere",
    "Bounding Cube": "boundingCube",
}
#: ``robot_type`` values of Isaac Sim's robot schema.
ROBOT_TYPES = ("Default", "End Effector", "Manipulator", "Humanoid", "Wheeled", "Holonomic", "Quadruped",
               "Mobile Manipulators", "Aerial")

#: Fields that name where the asset is and where it goes; they never trigger a re-conversion.
LOCATION_FIELDS = ("asset_path", "usd_dir", "usd_file_name")


@attrs.frozen(kw_only=True)
class AssetConverterBaseCfg:
    """What every converter takes.

    asset_path: Path of the asset file to convert (relative paths are taken from the working directory).
        Required.
    usd_dir: Output folder. Default None: a fresh ``<tempdir>/usdforge/usd_{YYYYmmdd}_{HHMMSS}_{random}``
        is made, and conversion is not lazy.
    usd_file_name: Name of the USD file written in ``usd_dir``. Default None: the asset's file name with
        its extension replaced by ``.usd``. A name not ending in ``.usd`` or ``.usda`` gets ``.usd`` appended.
        A file name only, without a folder (a robot's layers are in ``payloads/``: a name there would be
        one of them; usdforge extension, not checked in Isaac Lab).
    force_usd_conversion: Convert even when the output is up to date. Default False.
    make_instanceable: Put geometry in a separate meshes layer referenced through instanceable prims, so
        many copies of the asset share it. Default True.
    allowed_roots: Folders (besides the asset's own folder and its ROS package roots) whose files the
        asset may reference: meshes, textures, includes. Relative paths are taken from the working
        directory. Default (): a file outside those folders is refused (usdforge extension, not in Isaac Lab).
    """

    asset_path: str = attrs.field(converter=str)
    usd_dir: str | None = None
    usd_file_name: str | None = attrs.field(default=None, validator=file_name_or_none)
    force_usd_conversion: bool = False
    make_instanceable: bool = True
    allowed_roots: tuple[str, ...] = attrs.field(default=(), validator=folder_list)


@attrs.frozen(kw_only=True)
class MeshConverterCfg(AssetConverterBaseCfg):
    """Converting one mesh file (OBJ, STL, PLY, GLB/GLTF, OFF, DAE; FBX with the ``fbx`` extra) to USD.

    mass_props: Mass properties for the root prim, a rigid body: needs rigid_props (without it a warning,
        and no ``MassAPI``). Default None: no ``MassAPI``.
    rigid_props: Rigid body properties for the root prim. Default None: no ``RigidBodyAPI`` (a static
        collider or plain geometry).
    collision_props: Collision properties for the mesh prims. Default None: no ``CollisionAPI``.
    mesh_collision_props: Collision approximation for the mesh prims. Default None: no
        ``MeshCollisionAPI``. Applies to collision meshes only: without collision_props a warning, and
        nothing authored.
    translation: Translation of the geometry in m, (x, y, z). Default (0, 0, 0).
    rotation: Rotation of the geometry as a unit quaternion (x, y, z, w). Default (0, 0, 0, 1).
    scale: Scale of the geometry per axis, (x, y, z); non-zero. Default (1, 1, 1). Mesh files carry no
        unit, so a file in millimetres needs scale (0.001, 0.001, 0.001).
    """

    mass_props: MassPropertiesCfg | None = None
    rigid_props: RigidBodyBaseCfg | None = None
    collision_props: CollisionBaseCfg | None = None
    mesh_collision_props: MeshCollisionBaseCfg | None = None
    translation: tuple[float, float, float] = attrs.field(
        default=(0.0, 0.0, 0.0), converter=tuple_of_floats, validator=finite_vector(3))
    rotation: tuple[float, float, float, float] = attrs.field(
        default=(0.0, 0.0, 0.0, 1.0), converter=tuple_of_floats, validator=unit_quaternion())
    scale: tuple[float, float, float] = attrs.field(
        default=(1.0, 1.0, 1.0), converter=tuple_of_floats, validator=non_zero_scale)
