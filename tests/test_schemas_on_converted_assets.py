"""Issue 3's acceptance on real output: a PhysX-targeted and a MuJoCo-targeted cfg set applied to the same
converted assets (a URDF arm and an MJCF head from the embedded library) give USD that OpenUSD's physics
validators accept, with the fields where the routing table says."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pxr import Usd, UsdPhysics

from usdforge.pipeline import MjcfConverter, UrdfConverter
from usdforge.schemas import MjcfConverterCfg, UrdfConverterCfg, mujoco, newton, physics, physx
from usdforge.schemas.writer import (effective_rigid_props, modify_articulation_root_properties, modify_collision_properties,
                            modify_joint_drive_properties, modify_rigid_body_properties)
from test_schemas_physics_validation import validation_errors

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "robots"


@pytest.fixture(scope="module", params=["urdf", "mjcf"])
def converted(request, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp(request.param)
    if request.param == "urdf":
        cfg = UrdfConverterCfg(asset_path=str(ASSETS / "tiny_arm/urdf/tiny_arm.urdf"), usd_dir=str(out),
                               ros_package_paths=[{"name": "tiny_arm", "path": str(ASSETS / "tiny_arm")}])
        return UrdfConverter(cfg).usd_path
    return MjcfConverter(MjcfConverterCfg(asset_path=str(ASSETS / "pan_tilt/pan_tilt.xml"), usd_dir=str(out))).usd_path


def apply_physx(stage: Usd.Stage, root: str) -> None:
    modify_rigid_body_properties(root, physx.PhysxRigidBodyPropertiesCfg(
        linear_damping=0.05, angular_damping=0.05, solver_position_iteration_count=8), stage)
    modify_collision_properties(root, physx.PhysxCollisionPropertiesCfg(contact_offset=0.005, rest_offset=0.0), stage)
    modify_articulation_root_properties(root, physx.PhysxArticulationRootPropertiesCfg(
        enabled_self_collisions=False, solver_position_iteration_count=16), stage)
    modify_joint_drive_properties(root, physx.PhysxJointDrivePropertiesCfg(
        stiffness=400.0, damping=40.0, max_force=87.0, max_joint_velocity=2.6), stage)


def apply_mujoco(stage: Usd.Stage, root: str) -> mujoco.MujocoJointDrivePropertiesCfg:
    drive = mujoco.MujocoJointDrivePropertiesCfg(stiffness=10.0, damping=0.1, actuatorgravcomp=True)
    modify_rigid_body_properties(root, effective_rigid_props(physics.RigidBodyBaseCfg(), drive), stage)
    modify_collision_properties(root, newton.NewtonCollisionPropertiesCfg(contact_margin=0.001), stage)
    modify_joint_drive_properties(root, drive, stage)
    return drive


def revolute_joints(stage: Usd.Stage) -> list[Usd.Prim]:
    return [p for p in stage.Traverse() if p.IsA(UsdPhysics.RevoluteJoint)]


def test_physx_and_mujoco_cfgs_on_one_converted_asset_validate(converted):
    stage = Usd.Stage.Open(converted)
    root = str(stage.GetDefaultPrim().GetPath())
    assert validation_errors(stage) == []
    apply_physx(stage, root)
    assert validation_errors(stage) == []
    apply_mujoco(stage, root)
    assert validation_errors(stage) == []

    bodies = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI)]
    assert bodies and all(b.GetAttribute("mjc:gravcomp").Get() == 1.0 for b in bodies)
    assert all(b.GetAttribute("physxRigidBody:linearDamping").Get() == pytest.approx(0.05) for b in bodies)
    joints = revolute_joints(stage)
    assert joints
    for joint in joints:
        drive = UsdPhysics.DriveAPI(joint, "angular")
        assert drive.GetStiffnessAttr().Get() == pytest.approx(10.0 * math.pi / 180.0)  # the later cfg, per degree
        assert drive.GetMaxForceAttr().Get() == pytest.approx(87.0)  # left as the PhysX cfg authored it
        assert joint.GetAttribute("physxJoint:maxJointVelocity").Get() == pytest.approx(math.degrees(2.6))
        assert joint.GetAttribute("mjc:actuatorgravcomp").Get() is True
    parsed = UsdPhysics.UsdPhysicsLoadStageFromPrimRange(stage, ["/"])
    assert len(parsed[UsdPhysics.ObjectType.Articulation][0]) == 1
