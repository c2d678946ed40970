"""Property-group cfgs through cattrs: tagged unions keyed on the class name, exact round trips, path errors."""

from __future__ import annotations

import json

import attrs
import pytest

from usdforge.schemas import config_digest, mujoco, newton, physics, physx
from usdforge.schemas.converter_cfgs import MeshConverterCfg
from usdforge.schemas.serialization import (ConfigError, cfg_from_json, cfg_from_toml, cfg_to_dict, cfg_to_json, cfg_to_toml,
                                   converter, structure_cfg)
from usdforge.schemas.validators import FieldValueError
from usdforge.schemas.writer import effective_rigid_props


@attrs.frozen(kw_only=True)
class AssetCfg:
    """A converter-like cfg with one slot per property group."""

    name: str = "robot"
    mass_props: physics.MassPropertiesCfg | None = None
    rigid_props: physics.RigidBodyBaseCfg | None = None
    collision_props: physics.CollisionBaseCfg | None = None
    mesh_collision_props: physics.MeshCollisionBaseCfg | None = None
    joint_drive_props: physics.JointDriveBaseCfg | None = None
    articulation_props: physics.ArticulationRootBaseCfg | None = None
    physics_material: physics.RigidBodyMaterialBaseCfg | None = None


#: (slot, cfg) with several fields set, one per concrete class of every group.
SAMPLES = [
    ("mass_props", physics.MassPropertiesCfg(mass=1.5)),
    ("rigid_props", physics.RigidBodyBaseCfg(kinematic_enabled=False)),
    ("rigid_props", physx.PhysxRigidBodyPropertiesCfg(disable_gravity=True, linear_damping=0.1,
                                                      solver_position_iteration_count=8, retain_accelerations=False)),
    ("rigid_props", newton.NewtonRigidBodyPropertiesCfg(rigid_body_enabled=True)),
    ("rigid_props", mujoco.MujocoRigidBodyPropertiesCfg(disable_gravity=False, gravcomp=0.5)),
    ("collision_props", physics.CollisionBaseCfg(contact_offset=0.02, rest_offset=-0.001)),
    ("collision_props", physx.PhysxCollisionPropertiesCfg(torsional_patch_radius=0.01, collision_enabled=False)),
    ("collision_props", newton.NewtonCollisionPropertiesCfg(contact_margin=0.001, contact_gap=0.002)),
    ("collision_props", newton.NewtonMeshCollisionPropertiesCfg(mesh_approximation_name="convexHull",
                                                                max_hull_vertices=-1, contact_gap=0.01)),
    ("mesh_collision_props", physics.MeshCollisionBaseCfg(mesh_approximation_name="boundingSphere")),
    ("mesh_collision_props", physx.PhysxConvexHullPropertiesCfg(hull_vertex_limit=32, min_thickness=0.0)),
    ("mesh_collision_props", physx.PhysxConvexDecompositionPropertiesCfg(max_convex_hulls=4, shrink_wrap=True)),
    ("mesh_collision_props", physx.PhysxTriangleMeshPropertiesCfg(weld_tolerance=0.0)),
    ("mesh_collision_props", physx.PhysxTriangleMeshSimplificationPropertiesCfg(simplification_metric=0.5)),
    ("mesh_collision_props", physx.PhysxSDFMeshPropertiesCfg(sdf_resolution=64, sdf_subgrid_resolution=0)),
    ("mesh_collision_props", newton.NewtonMeshCollisionPropertiesCfg(max_hull_vertices=24)),
    ("joint_drive_props", physics.JointDriveBaseCfg(stiffness=100.0, ensure_drives_exist=True)),
    ("joint_drive_props", physx.PhysxJointDrivePropertiesCfg(drive_type="force", max_joint_velocity=3.0)),
    ("joint_drive_props", newton.NewtonJointDrivePropertiesCfg(damping=2.0)),
    ("joint_drive_props", mujoco.MujocoJointDrivePropertiesCfg(drive_type="acceleration", actuatorgravcomp=True)),
    ("articulation_props", physics.ArticulationRootBaseCfg(fix_root_link=True)),
    ("articulation_props", physx.PhysxArticulationRootPropertiesCfg(enabled_self_collisions=False,
                                                                    solver_velocity_iteration_count=0)),
    ("articulation_props", newton.NewtonArticulationRootPropertiesCfg(self_collision_enabled=True,
                                                                      articulation_enabled=False)),
    ("physics_material", physics.RigidBodyMaterialBaseCfg(static_friction=1.0)),
    ("physics_material", physx.PhysxRigidBodyMaterialCfg(restitution_combine_mode="multiply",
                                                         compliant_contact_stiffness=0.0)),
    ("physics_material", newton.NewtonMaterialPropertiesCfg(torsional_friction=0.1, restitution=1.0)),
]


def _id(sample):
    return f"{sample[0]}-{type(sample[1]).__name__}"


@pytest.mark.parametrize("slot,cfg", SAMPLES, ids=[_id(s) for s in SAMPLES])
def test_round_trip_dict_toml_json(slot, cfg):
    asset = AssetCfg(**{slot: cfg})
    data = cfg_to_dict(asset)
    if slot != "mass_props":  # MassPropertiesCfg has no subclass, so no tag
        assert data[slot]["type"] == type(cfg).__name__
    for back in (converter.structure(data, AssetCfg), cfg_from_toml(cfg_to_toml(asset), AssetCfg),
                 cfg_from_json(cfg_to_json(asset), AssetCfg)):
        assert back == asset
        assert type(getattr(back, slot)) is type(cfg)
    # The cfg alone, structured as its group's base class.
    base = next(b for b in physics.PROPERTY_GROUP_BASES if isinstance(cfg, b))
    alone = structure_cfg(json.loads(json.dumps(converter.unstructure(cfg, base))), base)
    assert alone == cfg and type(alone) is type(cfg)


def test_every_concrete_class_is_sampled():
    sampled = {type(cfg) for _, cfg in SAMPLES}
    groups = set()
    for base in physics.PROPERTY_GROUP_BASES:
        queue = [base]
        while queue:
            cls = queue.pop()
            if cls.__module__ in ("usdforge.schemas.physics", "usdforge.schemas.physx", "usdforge.schemas.newton", "usdforge.schemas.mujoco"):
                groups.add(cls)
            queue.extend(cls.__subclasses__())
    assert groups <= sampled, sorted(c.__name__ for c in groups - sampled)


def test_library_toml_picks_the_subclass():
    text = '''
asset_path = "meshes/box.obj"
rigid_props = { type = "PhysxRigidBodyPropertiesCfg", linear_damping = 0.1 }
collision_props = { type = "NewtonMeshCollisionPropertiesCfg", contact_margin = 0.002, mesh_approximation_name = "convexHull" }
mesh_collision_props = { type = "PhysxSDFMeshPropertiesCfg" }
mass_props = { mass = 2 }
'''
    cfg = cfg_from_toml(text, MeshConverterCfg, "assets[0].cfg")
    assert cfg.rigid_props == physx.PhysxRigidBodyPropertiesCfg(linear_damping=0.1)
    assert cfg.collision_props == newton.NewtonMeshCollisionPropertiesCfg(contact_margin=0.002,
                                                                          mesh_approximation_name="convexHull")
    assert cfg.mesh_collision_props.mesh_approximation_name == "sdf"
    assert cfg.mass_props.mass == 2.0 and isinstance(cfg.mass_props.mass, float)
    assert cfg_from_toml(cfg_to_toml(cfg), MeshConverterCfg) == cfg
    # A table without type is the base class.
    plain = cfg_from_toml('asset_path = "a.obj"\nrigid_props = { disable_gravity = true }\n', MeshConverterCfg)
    assert type(plain.rigid_props) is physics.RigidBodyBaseCfg


def test_unknown_class_is_a_one_line_path_error():
    text = 'asset_path = "a.obj"\nrigid_props = { type = "Nope", linear_damping = 0.1 }\n'
    with pytest.raises(ConfigError) as info:
        cfg_from_toml(text, MeshConverterCfg, "assets[3].cfg")
    assert str(info.value) == ("assets[3].cfg.rigid_props.type: unknown class 'Nope'; expected one of "
                               "MujocoRigidBodyPropertiesCfg, NewtonRigidBodyPropertiesCfg, "
                               "PhysxRigidBodyPropertiesCfg, RigidBodyBaseCfg")
    # A class of another group is unknown here too.
    with pytest.raises(ConfigError, match=r"^joint_drive_props\.type: unknown class 'PhysxRigidBodyPropertiesCfg'"):
        structure_cfg({"joint_drive_props": {"type": "PhysxRigidBodyPropertiesCfg"}}, AssetCfg)
    with pytest.raises(ConfigError, match=r"^rigid_props\.type: unknown class 3"):
        structure_cfg({"rigid_props": {"type": 3}}, AssetCfg)


def test_unknown_field_and_bad_value_are_path_errors():
    with pytest.raises(ConfigError) as info:
        structure_cfg({"joint_drive_props": {"type": "PhysxJointDrivePropertiesCfg", "stifness": 1.0}}, AssetCfg,
                      "assets[3].cfg")
    assert str(info.value) == "assets[3].cfg.joint_drive_props: unknown field(s) stifness for PhysxJointDrivePropertiesCfg"
    # A field of a sibling class is unknown on this one.
    with pytest.raises(ConfigError, match=r"^rigid_props: unknown field\(s\) gravcomp for PhysxRigidBodyPropertiesCfg$"):
        structure_cfg({"rigid_props": {"type": "PhysxRigidBodyPropertiesCfg", "gravcomp": 1.0}}, AssetCfg)
    with pytest.raises(ConfigError, match=r"^assets\[1\]\.cfg\.mesh_collision_props\.hull_vertex_limit: expected an integer"):
        structure_cfg({"mesh_collision_props": {"type": "PhysxConvexHullPropertiesCfg", "hull_vertex_limit": 1000}},
                      AssetCfg, "assets[1].cfg")
    with pytest.raises(ConfigError, match=r"^physics_material: expected a table of RigidBodyMaterialBaseCfg fields"):
        structure_cfg({"physics_material": "rubber"}, AssetCfg)
    with pytest.raises(ConfigError, match=r"^collision_props\.rest_offset: expected a value below contact_offset"):
        structure_cfg({"collision_props": {"contact_offset": 0.01, "rest_offset": 0.02}}, AssetCfg)


#: (class, kwargs, field named in the error)
IMPOSSIBLE = [
    (physics.MassPropertiesCfg, {"mass": -1.0}, "mass"),
    (physics.MassPropertiesCfg, {"density": float("inf")}, "density"),
    (physics.RigidBodyBaseCfg, {"disable_gravity": "yes"}, "disable_gravity"),
    (physx.PhysxRigidBodyPropertiesCfg, {"linear_damping": -0.1}, "linear_damping"),
    (physx.PhysxRigidBodyPropertiesCfg, {"solver_position_iteration_count": 0}, "solver_position_iteration_count"),
    (physx.PhysxRigidBodyPropertiesCfg, {"solver_velocity_iteration_count": 256}, "solver_velocity_iteration_count"),
    (physx.PhysxRigidBodyPropertiesCfg, {"max_linear_velocity": float("nan")}, "max_linear_velocity"),
    (mujoco.MujocoRigidBodyPropertiesCfg, {"gravcomp": 1.5}, "gravcomp"),
    (physics.CollisionBaseCfg, {"contact_offset": -0.01}, "contact_offset"),
    (physics.CollisionBaseCfg, {"contact_offset": 0.01, "rest_offset": 0.01}, "rest_offset"),
    (physx.PhysxCollisionPropertiesCfg, {"torsional_patch_radius": -1.0}, "torsional_patch_radius"),
    (newton.NewtonCollisionPropertiesCfg, {"contact_margin": -0.001}, "contact_margin"),
    (physics.MeshCollisionBaseCfg, {"mesh_approximation_name": "sdf"}, "mesh_approximation_name"),
    (physx.PhysxConvexHullPropertiesCfg, {"mesh_approximation_name": "convexHul"}, "mesh_approximation_name"),
    (physx.PhysxConvexHullPropertiesCfg, {"hull_vertex_limit": 3}, "hull_vertex_limit"),
    (physx.PhysxConvexDecompositionPropertiesCfg, {"error_percentage": 150.0}, "error_percentage"),
    (physx.PhysxConvexDecompositionPropertiesCfg, {"max_convex_hulls": 0}, "max_convex_hulls"),
    (physx.PhysxTriangleMeshSimplificationPropertiesCfg, {"simplification_metric": 2.0}, "simplification_metric"),
    (physx.PhysxSDFMeshPropertiesCfg, {"sdf_narrow_band_thickness": 1.5}, "sdf_narrow_band_thickness"),
    (physx.PhysxSDFMeshPropertiesCfg, {"sdf_resolution": 1}, "sdf_resolution"),
    (newton.NewtonMeshCollisionPropertiesCfg, {"max_hull_vertices": 3}, "max_hull_vertices"),
    (newton.NewtonMeshCollisionPropertiesCfg, {"max_hull_vertices": -2}, "max_hull_vertices"),
    (physics.JointDriveBaseCfg, {"drive_type": "velocity"}, "drive_type"),
    (physics.JointDriveBaseCfg, {"stiffness": -5.0}, "stiffness"),
    (physics.JointDriveBaseCfg, {"damping": float("inf")}, "damping"),
    (physics.JointDriveBaseCfg, {"max_joint_velocity": -1.0}, "max_joint_velocity"),
    (physics.JointDriveBaseCfg, {"ensure_drives_exist": None}, "ensure_drives_exist"),
    (mujoco.MujocoJointDrivePropertiesCfg, {"actuatorgravcomp": 1}, "actuatorgravcomp"),
    (physx.PhysxArticulationRootPropertiesCfg, {"solver_position_iteration_count": 1.5},
     "solver_position_iteration_count"),
    (physics.RigidBodyMaterialBaseCfg, {"restitution": 1.2}, "restitution"),
    (physics.RigidBodyMaterialBaseCfg, {"static_friction": -0.1}, "static_friction"),
    (physx.PhysxRigidBodyMaterialCfg, {"friction_combine_mode": "sum"}, "friction_combine_mode"),
    (newton.NewtonMaterialPropertiesCfg, {"rolling_friction": -0.1}, "rolling_friction"),
]


@pytest.mark.parametrize("cls,kwargs,field", IMPOSSIBLE, ids=[f"{c.__name__}-{f}" for c, _, f in IMPOSSIBLE])
def test_validators_reject_impossible_values(cls, kwargs, field):
    with pytest.raises(FieldValueError) as info:
        cls(**kwargs)
    assert info.value.field == field


def test_digest_sees_the_class_and_its_fields():
    physx_cfg = MeshConverterCfg(asset_path="a.obj", rigid_props=physx.PhysxRigidBodyPropertiesCfg(disable_gravity=True))
    base_cfg = MeshConverterCfg(asset_path="a.obj", rigid_props=physics.RigidBodyBaseCfg(disable_gravity=True))
    tuned = MeshConverterCfg(asset_path="a.obj", rigid_props=physx.PhysxRigidBodyPropertiesCfg(
        disable_gravity=True, linear_damping=0.5))
    assert len({config_digest(physx_cfg), config_digest(base_cfg), config_digest(tuned)}) == 3
    assert config_digest(physx_cfg) == config_digest(cfg_from_toml(cfg_to_toml(physx_cfg), MeshConverterCfg))


def test_effective_cfg_unstructures_with_its_own_name():
    merged = effective_rigid_props(physx.PhysxRigidBodyPropertiesCfg(linear_damping=0.2),
                                   mujoco.MujocoJointDrivePropertiesCfg(actuatorgravcomp=True))
    data = converter.unstructure(merged, physics.RigidBodyBaseCfg)
    assert data["type"] == type(merged).__name__ and data["gravcomp"] == 1.0 and data["linear_damping"] == 0.2


def test_a_class_structures_its_own_tagged_dict():
    cfg = physx.PhysxConvexHullPropertiesCfg(hull_vertex_limit=16)
    data = cfg_to_dict(cfg)
    assert data["type"] == "PhysxConvexHullPropertiesCfg"
    assert structure_cfg(data, physx.PhysxConvexHullPropertiesCfg) == cfg
    # A subclass's tag is accepted where the class or a parent is expected, not elsewhere.
    assert type(structure_cfg({"type": "MujocoRigidBodyPropertiesCfg"}, newton.NewtonRigidBodyPropertiesCfg)) is \
        mujoco.MujocoRigidBodyPropertiesCfg
    with pytest.raises(ConfigError, match=r"^type: unknown class 'RigidBodyBaseCfg'; expected one of "
                                          r"MujocoRigidBodyPropertiesCfg, NewtonRigidBodyPropertiesCfg$"):
        structure_cfg({"type": "RigidBodyBaseCfg"}, newton.NewtonRigidBodyPropertiesCfg)
    with pytest.raises(ConfigError, match=r"^type: unknown class 'PhysxSDFMeshPropertiesCfg'; expected one of "
                                          r"PhysxConvexHullPropertiesCfg$"):
        structure_cfg({"type": "PhysxSDFMeshPropertiesCfg"}, physx.PhysxConvexHullPropertiesCfg)
    assert structure_cfg({"type": "MassPropertiesCfg", "mass": 1}, physics.MassPropertiesCfg).mass == 1.0


def test_material_none_is_false_in_toml():
    """A material friction of None (leave as authored) has a non-None default: TOML writes it as false."""
    asset = AssetCfg(physics_material=newton.NewtonMaterialPropertiesCfg(static_friction=None, dynamic_friction=None,
                                                                         rolling_friction=0.01))
    text = cfg_to_toml(asset)
    assert "static_friction = false" in text and "restitution = 0.0" in text
    assert cfg_from_toml(text, AssetCfg) == asset
    with pytest.raises(ConfigError, match=r"^physics_material\.static_friction: invalid value \(expected a number"):
        structure_cfg({"physics_material": {"static_friction": True}}, AssetCfg)
    with pytest.raises(ConfigError, match=r"^rigid_props\.linear_damping: invalid value"):
        structure_cfg({"rigid_props": {"type": "PhysxRigidBodyPropertiesCfg", "linear_damping": "0.1"}}, AssetCfg)


def test_a_class_made_for_authoring_is_no_member_of_its_group():
    # effective_rigid_props makes a class at run time (authored, not serialised): a cfg file naming it is
    # refused, whether the groups were listed before it was made or after.
    from usdforge.schemas import MeshConverterCfg, cfg_from_toml, cfg_to_toml

    text = cfg_to_toml(MeshConverterCfg(asset_path="a.obj"))
    merged = effective_rigid_props(physx.PhysxRigidBodyPropertiesCfg(linear_damping=0.2),
                                   mujoco.MujocoJointDrivePropertiesCfg(actuatorgravcomp=True))
    name = type(merged).__name__
    with pytest.raises(ConfigError, match=f"unknown class '{name}'"):
        cfg_from_toml(text + f'\n[rigid_props]\ntype = "{name}"\n', MeshConverterCfg)
