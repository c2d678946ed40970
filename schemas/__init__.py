"""Cfg classes (attrs), their cattrs converter, the config digest and the USD writer."""

from schemas.converter_cfgs import LOCATION_FIELDS, AssetConverterBaseCfg, MeshConverterCfg
from schemas.physics import (MESH_APPROXIMATIONS, CollisionBaseCfg, MassPropertiesCfg, MeshCollisionBaseCfg,
                             RigidBodyBaseCfg)
from schemas.serialization import (ConfigError, cfg_from_json, cfg_from_toml, cfg_to_dict, cfg_to_json,
                                   cfg_to_toml, converter, structure_cfg)
from schemas._version import __version__
from schemas.digest import DIGEST_EXCLUDED_FIELDS, config_digest
from schemas.mjcf_cfg import MjcfConverterCfg
from schemas.urdf_cfg import UrdfConverterCfg
from schemas.physics import (DRIVE_TYPES, MIN_DRIVE_STIFFNESS, PROPERTY_GROUP_BASES, ArticulationRootBaseCfg,
                             JointDriveBaseCfg, RigidBodyMaterialBaseCfg)
from schemas.physx import (PHYSX_MESH_APPROXIMATIONS, PhysxArticulationRootPropertiesCfg, PhysxCollisionPropertiesCfg,
                           PhysxConvexDecompositionPropertiesCfg, PhysxConvexHullPropertiesCfg,
                           PhysxJointDrivePropertiesCfg, PhysxRigidBodyMaterialCfg, PhysxRigidBodyPropertiesCfg,
                           PhysxSDFMeshPropertiesCfg, PhysxTriangleMeshPropertiesCfg,
                           PhysxTriangleMeshSimplificationPropertiesCfg)
from schemas.newton import (NewtonArticulationRootPropertiesCfg, NewtonCollisionPropertiesCfg,
                            NewtonJointDrivePropertiesCfg, NewtonMaterialPropertiesCfg,
                            NewtonMeshCollisionPropertiesCfg, NewtonRigidBodyPropertiesCfg)
from schemas.mujoco import MujocoJointDrivePropertiesCfg, MujocoRigidBodyPropertiesCfg

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


def __getattr__(name):
    if name in _WRITER_EXPORTS:
        from schemas import writer

        return getattr(writer, name)
    raise AttributeError(f"module 'schemas' has no attribute {name!r}")
