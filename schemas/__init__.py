"""Cfg classes (attrs), their cattrs converter, the config digest and the USD writer."""

if __name__ != "usdforge.schemas":   # one importable name per module: never both schemas.x and usdforge.schemas.x
    raise ImportError(f"import usdforge.schemas, not {__name__}: the repository's top-level folders are the "
                      "subpackages of usdforge")


import importlib

from usdforge.schemas.converter_cfgs import LOCATION_FIELDS, AssetConverterBaseCfg, MeshConverterCfg
from usdforge.schemas.physics import (MESH_APPROXIMATIONS, CollisionBaseCfg, MassPropertiesCfg, MeshCollisionBaseCfg,
                             RigidBodyBaseCfg)
from usdforge.schemas.serialization import (ConfigError, cfg_from_json, cfg_from_toml, cfg_to_dict, cfg_to_json,
                                   cfg_to_toml, get_converter, structure_cfg)
from usdforge.schemas._version import __version__
from usdforge.schemas.digest import DIGEST_EXCLUDED_FIELDS, config_digest
from usdforge.schemas.mjcf_cfg import MjcfConverterCfg
from usdforge.schemas.urdf_cfg import UrdfConverterCfg
from usdforge.schemas.physics import (DRIVE_TYPES, MIN_DRIVE_STIFFNESS, PROPERTY_GROUP_BASES, ArticulationRootBaseCfg,
                             JointDriveBaseCfg, RigidBodyMaterialBaseCfg)
#: Names served from the backends' cfg modules on first use (name → module): a conversion whose cfg holds
#: no PhysX, Newton or MuJoCo property group never builds those ~20 classes (``schemas.serialization``
#: lists a group's classes when a table of it is first read).
_BACKEND_EXPORTS = {
    **dict.fromkeys(("PHYSX_MESH_APPROXIMATIONS", "PhysxArticulationRootPropertiesCfg", "PhysxCollisionPropertiesCfg",
                     "PhysxConvexDecompositionPropertiesCfg", "PhysxConvexHullPropertiesCfg",
                     "PhysxJointDrivePropertiesCfg", "PhysxRigidBodyMaterialCfg", "PhysxRigidBodyPropertiesCfg",
                     "PhysxSDFMeshPropertiesCfg", "PhysxTriangleMeshPropertiesCfg",
                     "PhysxTriangleMeshSimplificationPropertiesCfg"), "physx"),
    **dict.fromkeys(("NewtonArticulationRootPropertiesCfg", "NewtonCollisionPropertiesCfg",
                     "NewtonJointDrivePropertiesCfg", "NewtonMaterialPropertiesCfg",
                     "NewtonMeshCollisionPropertiesCfg", "NewtonRigidBodyPropertiesCfg"), "newton"),
    **dict.fromkeys(("MujocoJointDrivePropertiesCfg", "MujocoRigidBodyPropertiesCfg"), "mujoco"),
}

#: Names served from schemas.writer on first use, so that ``import schemas`` does not import pxr.
_WRITER_EXPORTS = (
    "author_cfg", "apply_schema", "set_attribute", "applied_schemas", "effective_rigid_props", "drive_axis",
    "world_fixed_joints", "bind_physics_material", "spawn_rigid_body_material",
    "define_rigid_body_properties", "modify_rigid_body_properties", "define_collision_properties",
    "modify_collision_properties", "define_mass_properties", "modify_mass_properties",
    "define_joint_drive_properties", "modify_joint_drive_properties", "define_articulation_root_properties",
    "modify_articulation_root_properties", "define_mesh_collision_properties", "modify_mesh_collision_properties",
    "define_material_properties", "modify_material_properties",
)

#: The public names: the cfg classes, converter and digest above, and the writer's functions.
__all__ = sorted([name for name, value in list(globals().items())
                  if not name.startswith("_") and not isinstance(value, type(importlib))]
                 + list(_BACKEND_EXPORTS) + list(_WRITER_EXPORTS) + ["converter"])


def __getattr__(name):
    if name == "converter":  # built on first use (schemas.serialization)
        return get_converter()
    if name in _BACKEND_EXPORTS:
        return getattr(importlib.import_module(f"usdforge.schemas.{_BACKEND_EXPORTS[name]}"), name)
    if name in _WRITER_EXPORTS:
        from usdforge.schemas import writer

        return getattr(writer, name)
    raise AttributeError(f"module 'usdforge.schemas' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
