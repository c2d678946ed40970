"""PhysX- and MuJoCo-targeted cfgs on one small articulated stage give USD that OpenUSD's physics validators
(``pxr.UsdValidation``) accept, and that OpenUSD's reference physics parser reads as intended."""

from __future__ import annotations

import math

import pytest
from pxr import Gf, Usd, UsdGeom, UsdPhysics, UsdValidation

from usdforge.schemas import mujoco, newton, physics, physx
from usdforge.schemas.writer import (bind_physics_material, define_mesh_collision_properties, effective_rigid_props,
                            modify_articulation_root_properties, modify_collision_properties,
                            modify_joint_drive_properties, modify_mass_properties, modify_rigid_body_properties,
                            spawn_rigid_body_material)

#: The box collider of the link as a mesh (8 corners, 12 triangles), half-size 0.05 m.
_CORNERS = [Gf.Vec3f(x, y, z) for x in (-0.05, 0.05) for y in (-0.05, 0.05) for z in (-0.05, 0.05)]
_TRIANGLES = [0, 1, 3, 0, 3, 2, 4, 6, 7, 4, 7, 5, 0, 4, 5, 0, 5, 1, 2, 3, 7, 2, 7, 6, 0, 2, 6, 0, 6, 4, 1, 5, 7, 1, 7, 3]


def two_link_stage() -> Usd.Stage:
    """/robot: base —revolute (Z)→ link; both rigid bodies with full mass properties and a collider;
    ArticulationRootAPI on the root body; the joint in /robot/joints."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, "Z")
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    stage.SetDefaultPrim(UsdGeom.Xform.Define(stage, "/robot").GetPrim())
    for name, z in (("base", 0.05), ("link", 0.55)):
        body = UsdGeom.Xform.Define(stage, f"/robot/{name}")
        body.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, z))
        body.AddOrientOp().Set(Gf.Quatf(1.0))
        UsdPhysics.RigidBodyAPI.Apply(body.GetPrim())
        mass = UsdPhysics.MassAPI.Apply(body.GetPrim())
        mass.CreateMassAttr(1.0)
        mass.CreateCenterOfMassAttr(Gf.Vec3f(0.0))
        mass.CreateDiagonalInertiaAttr(Gf.Vec3f(1.0 / 600.0))
        mass.CreatePrincipalAxesAttr(Gf.Quatf(1.0))
    base_box = UsdGeom.Cube.Define(stage, "/robot/base/collision")
    base_box.CreateSizeAttr(0.1)
    UsdPhysics.CollisionAPI.Apply(base_box.GetPrim())
    link_mesh = UsdGeom.Mesh.Define(stage, "/robot/link/collision")
    link_mesh.CreatePointsAttr(_CORNERS)
    link_mesh.CreateFaceVertexCountsAttr([3] * 12)
    link_mesh.CreateFaceVertexIndicesAttr(_TRIANGLES)
    UsdPhysics.CollisionAPI.Apply(link_mesh.GetPrim())
    UsdPhysics.ArticulationRootAPI.Apply(stage.GetPrimAtPath("/robot/base"))
    stage.DefinePrim("/robot/joints", "Scope")
    joint = UsdPhysics.RevoluteJoint.Define(stage, "/robot/joints/hinge")
    joint.CreateBody0Rel().SetTargets(["/robot/base"])
    joint.CreateBody1Rel().SetTargets(["/robot/link"])
    joint.CreateAxisAttr("Z")
    joint.CreateLocalPos0Attr(Gf.Vec3f(0.0, 0.0, 0.5))
    joint.CreateLocalRot0Attr(Gf.Quatf(1.0))
    joint.CreateLocalPos1Attr(Gf.Vec3f(0.0))
    joint.CreateLocalRot1Attr(Gf.Quatf(1.0))
    joint.CreateLowerLimitAttr(-90.0)
    joint.CreateUpperLimitAttr(90.0)
    return stage


def apply_physx(stage: Usd.Stage) -> None:
    modify_rigid_body_properties("/robot", physx.PhysxRigidBodyPropertiesCfg(
        disable_gravity=False, linear_damping=0.05, angular_damping=0.05, max_depenetration_velocity=5.0,
        solver_position_iteration_count=8, solver_velocity_iteration_count=1, enable_gyroscopic_forces=True), stage)
    modify_mass_properties("/robot/link", physics.MassPropertiesCfg(mass=1.5), stage)
    modify_collision_properties("/robot", physx.PhysxCollisionPropertiesCfg(
        contact_offset=0.005, rest_offset=0.0, torsional_patch_radius=0.01), stage)
    define_mesh_collision_properties("/robot/link/collision", physx.PhysxConvexHullPropertiesCfg(hull_vertex_limit=32),
                                     stage)
    modify_articulation_root_properties("/robot", physx.PhysxArticulationRootPropertiesCfg(
        fix_root_link=True, enabled_self_collisions=False, solver_position_iteration_count=16), stage)
    modify_joint_drive_properties("/robot", physx.PhysxJointDrivePropertiesCfg(
        drive_type="force", stiffness=400.0, damping=40.0, max_force=87.0, max_joint_velocity=2.6), stage)
    spawn_rigid_body_material("/robot/Looks/physx_material", physx.PhysxRigidBodyMaterialCfg(
        static_friction=0.8, dynamic_friction=0.6, friction_combine_mode="average"), stage)
    bind_physics_material("/robot", "/robot/Looks/physx_material", stage)


def apply_mujoco(stage: Usd.Stage) -> None:
    drive = mujoco.MujocoJointDrivePropertiesCfg(drive_type="force", stiffness=10.0, damping=0.1,
                                                 actuatorgravcomp=True, ensure_drives_exist=True)
    rigid = effective_rigid_props(physics.RigidBodyBaseCfg(disable_gravity=False), drive)
    assert isinstance(rigid, mujoco.MujocoRigidBodyPropertiesCfg) and rigid.gravcomp == 1.0
    modify_rigid_body_properties("/robot", rigid, stage)
    modify_collision_properties("/robot", newton.NewtonCollisionPropertiesCfg(contact_margin=0.001, contact_gap=0.002),
                                stage)
    define_mesh_collision_properties("/robot/link/collision", newton.NewtonMeshCollisionPropertiesCfg(
        mesh_approximation_name="convexHull", max_hull_vertices=32), stage)
    modify_articulation_root_properties("/robot", newton.NewtonArticulationRootPropertiesCfg(
        fix_root_link=True, self_collision_enabled=False), stage)
    modify_joint_drive_properties("/robot", drive, stage)
    spawn_rigid_body_material("/robot/Looks/newton_material", newton.NewtonMaterialPropertiesCfg(
        torsional_friction=0.01, rolling_friction=0.001), stage)
    bind_physics_material("/robot", "/robot/Looks/newton_material", stage)


def validation_errors(stage: Usd.Stage) -> list[str]:
    """Errors (not warnings) of the UsdPhysics validators plus the attribute-type check."""
    registry = UsdValidation.ValidationRegistry()
    names = [meta.name for meta in registry.GetValidatorMetadataForKeyword("UsdPhysicsValidators")]
    assert sorted(names) == ["usdPhysicsValidators:ArticulationChecker", "usdPhysicsValidators:ColliderChecker",
                             "usdPhysicsValidators:PhysicsJointChecker", "usdPhysicsValidators:RigidBodyChecker"]
    validators = registry.GetOrLoadValidatorsByName([*names, "usdValidation:AttributeTypeMismatch",
                                                     "usdGeomValidators:StageMetadataChecker"])
    errors = UsdValidation.ValidationContext(validators).Validate(stage)
    return [f"{e.GetName()}: {e.GetMessage()}" for e in errors if e.GetType() == UsdValidation.ValidationErrorType.Error]


def parsed(stage: Usd.Stage) -> dict:
    """OpenUSD's reference physics parser (Newton uses it): object type → (paths, descs)."""
    return UsdPhysics.UsdPhysicsLoadStageFromPrimRange(stage, ["/"])


def test_bare_stage_is_valid():
    assert validation_errors(two_link_stage()) == []


def test_validators_do_catch_errors():
    """The check is live: a static articulation root and a joint to a missing body are reported."""
    stage = two_link_stage()
    modify_rigid_body_properties("/robot/base", physics.RigidBodyBaseCfg(rigid_body_enabled=False), stage)
    UsdPhysics.RevoluteJoint(stage.GetPrimAtPath("/robot/joints/hinge")).GetBody1Rel().SetTargets(["/robot/nope"])
    names = {error.split(":")[0] for error in validation_errors(stage)}
    assert {"ArticulationOnStaticBody", "JointInvalidPrimRel"} <= names


def test_physx_targeted_cfgs_validate():
    stage = two_link_stage()
    apply_physx(stage)
    assert validation_errors(stage) == []
    result = parsed(stage)
    revolute_paths, revolute = result[UsdPhysics.ObjectType.RevoluteJoint]
    drive = revolute[0].drive
    assert drive.enabled and drive.stiffness == pytest.approx(400.0 * math.pi / 180.0)  # per degree in USD
    assert drive.forceLimit == pytest.approx(87.0)
    fixed_paths, _ = result[UsdPhysics.ObjectType.FixedJoint]
    assert [str(p) for p in fixed_paths] == ["/robot/joints/FixedJoint"]
    articulation_paths, _ = result[UsdPhysics.ObjectType.Articulation]
    assert [str(p) for p in articulation_paths] == ["/robot/base"]
    link = stage.GetPrimAtPath("/robot/link")
    assert link.GetAttribute("physxRigidBody:solverPositionIterationCount").Get() == 8
    assert UsdPhysics.MassAPI(link).GetMassAttr().Get() == 1.5


def test_mujoco_targeted_cfgs_validate():
    stage = two_link_stage()
    apply_mujoco(stage)
    assert validation_errors(stage) == []
    for body in ("/robot/base", "/robot/link"):
        assert stage.GetPrimAtPath(body).GetAttribute("mjc:gravcomp").Get() == 1.0
    hinge = stage.GetPrimAtPath("/robot/joints/hinge")
    assert hinge.GetAttribute("mjc:actuatorgravcomp").Get() is True
    _, revolute = parsed(stage)[UsdPhysics.ObjectType.RevoluteJoint]
    assert revolute[0].drive.stiffness == pytest.approx(10.0 * math.pi / 180.0)


def test_one_asset_cfg_targets_both_backends():
    stage = two_link_stage()
    apply_physx(stage)
    apply_mujoco(stage)
    assert validation_errors(stage) == []
    base = stage.GetPrimAtPath("/robot/base")
    assert base.GetAttribute("physxArticulation:enabledSelfCollisions").Get() is False
    assert base.GetAttribute("newton:selfCollisionEnabled").Get() is False
    fixed_paths, _ = parsed(stage)[UsdPhysics.ObjectType.FixedJoint]
    assert len(fixed_paths) == 1  # the second fix_root_link reused the first joint
    # the later MuJoCo drive gains replaced the PhysX ones; the PhysX velocity limit stays
    hinge = stage.GetPrimAtPath("/robot/joints/hinge")
    assert UsdPhysics.DriveAPI(hinge, "angular").GetStiffnessAttr().Get() == pytest.approx(10.0 * math.pi / 180.0)
    assert hinge.GetAttribute("physxJoint:maxJointVelocity").Get() == pytest.approx(math.degrees(2.6))
