"""define_* / modify_* functions, the writer-side fields and the deprecated aliases, on small pxr stages."""

from __future__ import annotations

import math
import warnings

import pytest
from pxr import Gf, Usd, UsdGeom, UsdPhysics, UsdShade

from usdforge.schemas import mujoco, newton, physics, physx
from usdforge.schemas.physics import MIN_DRIVE_STIFFNESS, JointDriveBaseCfg
from usdforge.schemas.serialization import structure_cfg
from usdforge.schemas.writer import (applied_schemas, author_cfg, bind_physics_material, define_articulation_root_properties,
                            define_collision_properties, define_joint_drive_properties, define_mass_properties,
                            define_material_properties, define_mesh_collision_properties,
                            define_rigid_body_properties, drive_axis, effective_rigid_props,
                            modify_articulation_root_properties, modify_collision_properties,
                            modify_joint_drive_properties, modify_mass_properties, modify_material_properties,
                            modify_mesh_collision_properties, modify_rigid_body_properties,
                            spawn_rigid_body_material, world_fixed_joints)


def robot_stage() -> Usd.Stage:
    """/robot: base (articulation root) —revolute→ arm —prismatic→ slider; each body has a cube collider."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, "Z")
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    stage.SetDefaultPrim(UsdGeom.Xform.Define(stage, "/robot").GetPrim())
    for name, z in (("base", 0.1), ("arm", 0.6), ("slider", 1.1)):
        body = UsdGeom.Xform.Define(stage, f"/robot/{name}")
        body.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, z))
        UsdPhysics.RigidBodyAPI.Apply(body.GetPrim())
        mass = UsdPhysics.MassAPI.Apply(body.GetPrim())
        mass.CreateMassAttr(1.0)
        mass.CreateCenterOfMassAttr(Gf.Vec3f(0.0))
        mass.CreateDiagonalInertiaAttr(Gf.Vec3f(0.01))
        mass.CreatePrincipalAxesAttr(Gf.Quatf(1.0))
        cube = UsdGeom.Cube.Define(stage, f"/robot/{name}/collision")
        cube.CreateSizeAttr(0.1)
        UsdPhysics.CollisionAPI.Apply(cube.GetPrim())
    UsdPhysics.ArticulationRootAPI.Apply(stage.GetPrimAtPath("/robot/base"))
    stage.DefinePrim("/robot/joints", "Scope")
    for name, kind, body0, body1 in (("hinge", UsdPhysics.RevoluteJoint, "base", "arm"),
                                     ("slide", UsdPhysics.PrismaticJoint, "arm", "slider")):
        joint = kind.Define(stage, f"/robot/joints/{name}")
        joint.CreateBody0Rel().SetTargets([f"/robot/{body0}"])
        joint.CreateBody1Rel().SetTargets([f"/robot/{body1}"])
        joint.CreateAxisAttr("Z")
        joint.CreateLocalPos0Attr(Gf.Vec3f(0.0, 0.0, 0.5))
        joint.CreateLocalPos1Attr(Gf.Vec3f(0.0))
    return stage


# -- define / modify --------------------------------------------------------------------------------------


def test_modify_rigid_body_walks_the_subtree():
    stage = robot_stage()
    cfg = physx.PhysxRigidBodyPropertiesCfg(linear_damping=0.3)
    assert modify_rigid_body_properties("/robot", cfg, stage) is True
    for name in ("base", "arm", "slider"):
        assert stage.GetPrimAtPath(f"/robot/{name}").GetAttribute("physxRigidBody:linearDamping").Get() == pytest.approx(0.3)
    assert not stage.GetPrimAtPath("/robot").GetAttribute("physxRigidBody:linearDamping")
    # No prim with RigidBodyAPI below: False, nothing authored.
    assert modify_rigid_body_properties("/robot/joints", cfg, stage) is False
    assert not stage.GetPrimAtPath("/robot/joints/hinge").GetAttribute("physxRigidBody:linearDamping")


def test_missing_prim_raises_value_error():
    stage = robot_stage()
    for function, cfg in ((modify_rigid_body_properties, physics.RigidBodyBaseCfg()),
                          (define_rigid_body_properties, physics.RigidBodyBaseCfg()),
                          (modify_joint_drive_properties, JointDriveBaseCfg()),
                          (modify_articulation_root_properties, physics.ArticulationRootBaseCfg()),
                          (modify_collision_properties, physics.CollisionBaseCfg()),
                          (modify_mass_properties, physics.MassPropertiesCfg()),
                          (modify_mesh_collision_properties, physics.MeshCollisionBaseCfg()),
                          (modify_material_properties, physics.RigidBodyMaterialBaseCfg())):
        with pytest.raises(ValueError, match="'/robot/nope' is not valid"):
            function("/robot/nope", cfg, stage)


def test_define_applies_the_api_to_the_given_prim():
    stage = robot_stage()
    prim = UsdGeom.Xform.Define(stage, "/robot/extra").GetPrim()
    assert define_rigid_body_properties("/robot/extra", mujoco.MujocoRigidBodyPropertiesCfg(gravcomp=0.5), stage)
    assert prim.HasAPI(UsdPhysics.RigidBodyAPI)
    assert prim.GetAttribute("mjc:gravcomp").Get() == 0.5
    assert define_mass_properties("/robot/extra", physics.MassPropertiesCfg(mass=3.0), stage)
    assert UsdPhysics.MassAPI(prim).GetMassAttr().Get() == 3.0
    mesh = UsdGeom.Mesh.Define(stage, "/robot/extra/mesh").GetPrim()
    assert define_collision_properties("/robot/extra/mesh", physx.PhysxCollisionPropertiesCfg(contact_offset=0.02), stage)
    assert mesh.HasAPI(UsdPhysics.CollisionAPI)
    assert mesh.GetAttribute("physxCollision:contactOffset").Get() == pytest.approx(0.02)
    assert define_mesh_collision_properties("/robot/extra/mesh", physx.PhysxConvexDecompositionPropertiesCfg(
        max_convex_hulls=8), stage)
    assert UsdPhysics.MeshCollisionAPI(mesh).GetApproximationAttr().Get() == "convexDecomposition"
    assert mesh.GetAttribute("physxConvexDecompositionCollision:maxConvexHulls").Get() == 8
    assert "PhysxConvexDecompositionCollisionAPI" in applied_schemas(mesh)


def test_modify_returns_false_without_the_api():
    stage = robot_stage()
    mesh = UsdGeom.Mesh.Define(stage, "/loose").GetPrim()
    assert modify_rigid_body_properties("/loose", physics.RigidBodyBaseCfg(rigid_body_enabled=True), stage) is False
    assert modify_mass_properties("/loose", physics.MassPropertiesCfg(mass=1.0), stage) is False
    assert modify_collision_properties("/loose", physics.CollisionBaseCfg(collision_enabled=True), stage) is False
    assert modify_mesh_collision_properties("/loose", physx.PhysxConvexHullPropertiesCfg(), stage) is False
    assert modify_articulation_root_properties("/loose", physics.ArticulationRootBaseCfg(fix_root_link=True), stage) is False
    assert modify_joint_drive_properties("/loose", JointDriveBaseCfg(stiffness=1.0), stage) is False
    assert modify_material_properties("/loose", physics.RigidBodyMaterialBaseCfg(), stage) is False
    assert list(mesh.GetAuthoredAttributes()) == [] and applied_schemas(mesh) == []


def test_modify_collision_and_mass_reach_nested_prims():
    stage = robot_stage()
    assert modify_collision_properties("/robot", newton.NewtonCollisionPropertiesCfg(contact_margin=0.004), stage)
    for name in ("base", "arm", "slider"):
        collider = stage.GetPrimAtPath(f"/robot/{name}/collision")
        assert collider.GetAttribute("newton:contactMargin").Get() == pytest.approx(0.004)
        assert "NewtonCollisionAPI" in applied_schemas(collider)
    assert modify_mass_properties("/robot", physics.MassPropertiesCfg(mass=2.0), stage)
    assert [UsdPhysics.MassAPI(stage.GetPrimAtPath(f"/robot/{n}")).GetMassAttr().Get()
            for n in ("base", "arm", "slider")] == [2.0, 2.0, 2.0]


def test_wrong_cfg_group_is_a_type_error():
    stage = robot_stage()
    with pytest.raises(TypeError, match="RigidBodyBaseCfg"):
        modify_rigid_body_properties("/robot", physics.CollisionBaseCfg(), stage)


# -- joint drives -----------------------------------------------------------------------------------------


def test_joint_drive_axis_from_joint_type():
    stage = robot_stage()
    assert drive_axis(stage.GetPrimAtPath("/robot/joints/hinge")) == "angular"
    assert drive_axis(stage.GetPrimAtPath("/robot/joints/slide")) == "linear"
    assert drive_axis(stage.GetPrimAtPath("/robot/base")) is None
    cfg = physx.PhysxJointDrivePropertiesCfg(stiffness=100.0, damping=10.0, max_force=50.0, max_joint_velocity=1.0)
    assert modify_joint_drive_properties("/robot", cfg, stage) is True
    hinge = UsdPhysics.DriveAPI(stage.GetPrimAtPath("/robot/joints/hinge"), "angular")
    slide = UsdPhysics.DriveAPI(stage.GetPrimAtPath("/robot/joints/slide"), "linear")
    assert hinge.GetStiffnessAttr().Get() == pytest.approx(100.0 * math.pi / 180.0)
    assert hinge.GetDampingAttr().Get() == pytest.approx(10.0 * math.pi / 180.0)
    assert hinge.GetMaxForceAttr().Get() == pytest.approx(50.0)
    assert slide.GetStiffnessAttr().Get() == pytest.approx(100.0)
    assert slide.GetDampingAttr().Get() == pytest.approx(10.0)
    assert stage.GetPrimAtPath("/robot/joints/hinge").GetAttribute("physxJoint:maxJointVelocity").Get() == \
        pytest.approx(180.0 / math.pi)
    assert stage.GetPrimAtPath("/robot/joints/slide").GetAttribute("physxJoint:maxJointVelocity").Get() == pytest.approx(1.0)
    # the revolute joint has no linear drive and vice versa
    assert not UsdPhysics.DriveAPI(stage.GetPrimAtPath("/robot/joints/hinge"), "linear")
    assert modify_joint_drive_properties("/robot/base", cfg, stage) is False


def test_define_joint_drive_needs_a_joint():
    stage = robot_stage()
    assert define_joint_drive_properties("/robot/joints/hinge", JointDriveBaseCfg(), stage)
    assert UsdPhysics.DriveAPI(stage.GetPrimAtPath("/robot/joints/hinge"), "angular")
    with pytest.raises(ValueError, match="not a revolute or prismatic joint"):
        define_joint_drive_properties("/robot/base", JointDriveBaseCfg(), stage)


def test_ensure_drives_exist_gives_passive_drives_a_minimal_stiffness():
    stage = robot_stage()
    hinge = stage.GetPrimAtPath("/robot/joints/hinge")
    slide = stage.GetPrimAtPath("/robot/joints/slide")
    # A passive hinge drive (0/0) and a damped slider drive.
    UsdPhysics.DriveAPI.Apply(hinge, "angular").CreateStiffnessAttr(0.0)
    UsdPhysics.DriveAPI.Apply(slide, "linear").CreateDampingAttr(5.0)
    # ensure_drives_exist=False: nothing changes.
    modify_joint_drive_properties("/robot", JointDriveBaseCfg(max_force=10.0), stage)
    assert UsdPhysics.DriveAPI(hinge, "angular").GetStiffnessAttr().Get() == 0.0
    modify_joint_drive_properties("/robot", JointDriveBaseCfg(ensure_drives_exist=True), stage)
    assert UsdPhysics.DriveAPI(hinge, "angular").GetStiffnessAttr().Get() == pytest.approx(
        MIN_DRIVE_STIFFNESS * math.pi / 180.0)  # 1e-3 N·m/rad, in N·m/deg
    assert not UsdPhysics.DriveAPI(slide, "linear").GetStiffnessAttr().HasAuthoredValue()  # damped: left alone
    # A joint without any drive gets one; linear stiffness is not converted.
    stage2 = robot_stage()
    modify_joint_drive_properties("/robot", JointDriveBaseCfg(ensure_drives_exist=True), stage2)
    assert UsdPhysics.DriveAPI(stage2.GetPrimAtPath("/robot/joints/slide"), "linear").GetStiffnessAttr().Get() == \
        pytest.approx(MIN_DRIVE_STIFFNESS)
    # Explicit gains win.
    modify_joint_drive_properties("/robot", JointDriveBaseCfg(stiffness=20.0, ensure_drives_exist=True), stage2)
    assert UsdPhysics.DriveAPI(stage2.GetPrimAtPath("/robot/joints/slide"), "linear").GetStiffnessAttr().Get() == 20.0


def test_without_drive_fields_no_drive_api_is_applied():
    stage = robot_stage()
    hinge = stage.GetPrimAtPath("/robot/joints/hinge")
    assert modify_joint_drive_properties("/robot", mujoco.MujocoJointDrivePropertiesCfg(actuatorgravcomp=True), stage)
    assert applied_schemas(hinge) == ["MjcJointAPI"]
    assert hinge.GetAttribute("mjc:actuatorgravcomp").Get() is True


# -- deprecated aliases -----------------------------------------------------------------------------------


@pytest.mark.parametrize("alias,canonical", [("max_velocity", "max_joint_velocity"), ("max_effort", "max_force")])
def test_alias_warns_once_and_forwards(alias, canonical):
    with pytest.warns(DeprecationWarning, match=alias) as record:
        cfg = mujoco.MujocoJointDrivePropertiesCfg(**{alias: 2.0})
    assert len([w for w in record if issubclass(w.category, DeprecationWarning)]) == 1
    assert getattr(cfg, canonical) == 2.0 and getattr(cfg, alias) is None
    # Both set: the canonical value is kept, the alias discarded, silently (Isaac Lab's schema-cfg page).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = JointDriveBaseCfg(**{alias: 2.0, canonical: 3.0})
    assert getattr(both, canonical) == 3.0 and getattr(both, alias) is None
    # Canonical only: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(JointDriveBaseCfg(**{canonical: 4.0}), canonical) == 4.0
    # From a table (TOML/JSON) too.
    with pytest.warns(DeprecationWarning):
        loaded = structure_cfg({"type": "PhysxJointDrivePropertiesCfg", alias: 5.0}, JointDriveBaseCfg)
    assert type(loaded) is physx.PhysxJointDrivePropertiesCfg and getattr(loaded, canonical) == 5.0


def test_alias_reaches_the_usd_attribute():
    stage = robot_stage()
    with pytest.warns(DeprecationWarning):
        cfg = JointDriveBaseCfg(max_velocity=math.pi, max_effort=12.0)
    modify_joint_drive_properties("/robot/joints/hinge", cfg, stage)
    hinge = stage.GetPrimAtPath("/robot/joints/hinge")
    assert hinge.GetAttribute("physxJoint:maxJointVelocity").Get() == pytest.approx(180.0)
    assert UsdPhysics.DriveAPI(hinge, "angular").GetMaxForceAttr().Get() == 12.0
    assert not any("maxVelocity" in a.GetName() or "maxEffort" in a.GetName() for a in hinge.GetAttributes())


# -- articulation root ------------------------------------------------------------------------------------


def test_fix_root_link_creates_then_toggles_a_world_fixed_joint():
    stage = robot_stage()
    cfg = physx.PhysxArticulationRootPropertiesCfg(fix_root_link=True, enabled_self_collisions=False)
    assert modify_articulation_root_properties("/robot", cfg, stage) is True
    joints = world_fixed_joints(stage, "/robot/base")
    assert [j.GetPath().pathString for j in joints] == ["/robot/joints/FixedJoint"]
    joint = joints[0]
    assert joint.GetBody0Rel().GetTargets() == []
    assert [str(p) for p in joint.GetBody1Rel().GetTargets()] == ["/robot/base"]
    assert tuple(joint.GetLocalPos0Attr().Get()) == pytest.approx((0.0, 0.0, 0.1))  # the base's world pose
    assert stage.GetPrimAtPath("/robot/base").GetAttribute("physxArticulation:enabledSelfCollisions").Get() is False
    # The articulation root stays on the root body.
    assert stage.GetPrimAtPath("/robot/base").HasAPI(UsdPhysics.ArticulationRootAPI)
    assert not stage.GetPrimAtPath("/robot").HasAPI(UsdPhysics.ArticulationRootAPI)
    # Again: no second joint.
    modify_articulation_root_properties("/robot", cfg, stage)
    assert len(world_fixed_joints(stage, "/robot/base")) == 1
    # False disables it; True enables it again.
    modify_articulation_root_properties("/robot", physics.ArticulationRootBaseCfg(fix_root_link=False), stage)
    assert joint.GetJointEnabledAttr().Get() is False
    modify_articulation_root_properties("/robot", physics.ArticulationRootBaseCfg(fix_root_link=True), stage)
    assert joint.GetJointEnabledAttr().Get() is True
    # None leaves it as it is.
    modify_articulation_root_properties("/robot", physics.ArticulationRootBaseCfg(articulation_enabled=True), stage)
    assert joint.GetJointEnabledAttr().Get() is True


def test_fix_root_link_false_without_joint_creates_nothing():
    stage = robot_stage()
    modify_articulation_root_properties("/robot", newton.NewtonArticulationRootPropertiesCfg(
        fix_root_link=False, self_collision_enabled=True), stage)
    assert world_fixed_joints(stage, "/robot/base") == []
    assert stage.GetPrimAtPath("/robot/base").GetAttribute("newton:selfCollisionEnabled").Get() is True


def test_fix_root_link_needs_a_rigid_root():
    stage = robot_stage()
    UsdGeom.Xform.Define(stage, "/other")
    define_articulation_root_properties("/other", physics.ArticulationRootBaseCfg(), stage)
    with pytest.raises(ValueError, match="not a rigid body"):
        modify_articulation_root_properties("/other", physics.ArticulationRootBaseCfg(fix_root_link=True), stage)


# -- gravity compensation ---------------------------------------------------------------------------------


def test_actuatorgravcomp_auto_enables_body_gravcomp():
    drive = mujoco.MujocoJointDrivePropertiesCfg(actuatorgravcomp=True)
    assert effective_rigid_props(None, drive) == mujoco.MujocoRigidBodyPropertiesCfg(gravcomp=1.0)
    base = effective_rigid_props(physics.RigidBodyBaseCfg(disable_gravity=False), drive)
    assert base == mujoco.MujocoRigidBodyPropertiesCfg(disable_gravity=False, gravcomp=1.0)
    newton_cfg = effective_rigid_props(newton.NewtonRigidBodyPropertiesCfg(kinematic_enabled=False), drive)
    assert type(newton_cfg) is mujoco.MujocoRigidBodyPropertiesCfg and newton_cfg.kinematic_enabled is False
    # A PhysX cfg keeps its PhysX fields and gains gravcomp.
    merged = effective_rigid_props(physx.PhysxRigidBodyPropertiesCfg(linear_damping=0.1), drive)
    assert isinstance(merged, physx.PhysxRigidBodyPropertiesCfg) and isinstance(merged, mujoco.MujocoRigidBodyPropertiesCfg)
    assert merged.linear_damping == 0.1 and merged.gravcomp == 1.0
    stage = robot_stage()
    modify_rigid_body_properties("/robot", merged, stage)
    for name in ("base", "arm", "slider"):
        body = stage.GetPrimAtPath(f"/robot/{name}")
        assert body.GetAttribute("mjc:gravcomp").Get() == 1.0
        assert body.GetAttribute("physxRigidBody:linearDamping").Get() == pytest.approx(0.1)
    # An explicit MuJoCo rigid cfg is kept (another value, or opting out).
    explicit = mujoco.MujocoRigidBodyPropertiesCfg(gravcomp=0.25)
    assert effective_rigid_props(explicit, drive) is explicit
    opt_out = mujoco.MujocoRigidBodyPropertiesCfg()
    assert effective_rigid_props(opt_out, drive) is opt_out


def test_no_auto_gravcomp_without_actuatorgravcomp():
    rigid = physx.PhysxRigidBodyPropertiesCfg(linear_damping=0.1)
    for drive in (None, JointDriveBaseCfg(stiffness=1.0), mujoco.MujocoJointDrivePropertiesCfg(),
                  mujoco.MujocoJointDrivePropertiesCfg(actuatorgravcomp=False)):
        assert effective_rigid_props(rigid, drive) is rigid
        assert effective_rigid_props(None, drive) is None


# -- materials --------------------------------------------------------------------------------------------


def test_material_spawn_modify_and_bind():
    stage = robot_stage()
    spawn_rigid_body_material("/robot/Looks/rubber", physx.PhysxRigidBodyMaterialCfg(
        static_friction=1.1, friction_combine_mode="max"), stage)
    material = stage.GetPrimAtPath("/robot/Looks/rubber")
    assert material.IsA(UsdShade.Material) and material.HasAPI(UsdPhysics.MaterialAPI)
    api = UsdPhysics.MaterialAPI(material)
    assert api.GetStaticFrictionAttr().Get() == pytest.approx(1.1)
    assert api.GetDynamicFrictionAttr().Get() == pytest.approx(0.5)  # Isaac Lab's default
    assert material.GetAttribute("physxMaterial:frictionCombineMode").Get() == "max"
    assert modify_material_properties("/robot", newton.NewtonMaterialPropertiesCfg(rolling_friction=0.02), stage)
    assert material.GetAttribute("newton:rollingFriction").Get() == pytest.approx(0.02)
    bind_physics_material("/robot/base/collision", "/robot/Looks/rubber", stage)
    collider = stage.GetPrimAtPath("/robot/base/collision")
    bound, _ = UsdShade.MaterialBindingAPI(collider).ComputeBoundMaterial("physics")
    assert bound.GetPath().pathString == "/robot/Looks/rubber"
    plain = UsdGeom.Xform.Define(stage, "/robot/Looks/plain").GetPrim()
    define_material_properties("/robot/Looks/plain", physics.RigidBodyMaterialBaseCfg(restitution=0.5), stage)
    assert UsdPhysics.MaterialAPI(plain).GetRestitutionAttr().Get() == 0.5


def test_mesh_collision_cfg_on_collider_keeps_other_values():
    stage = robot_stage()
    collider = stage.GetPrimAtPath("/robot/base/collision")
    UsdPhysics.MeshCollisionAPI.Apply(collider).CreateApproximationAttr("boundingCube")
    author_cfg(collider, physx.PhysxConvexHullPropertiesCfg(hull_vertex_limit=16))
    assert collider.GetAttribute("physics:approximation").Get() == "convexHull"
    modify_mesh_collision_properties("/robot", newton.NewtonMeshCollisionPropertiesCfg(max_hull_vertices=16), stage)
    # mesh_approximation_name None: the token authored before stays.
    assert collider.GetAttribute("physics:approximation").Get() == "convexHull"
    assert collider.GetAttribute("newton:maxHullVertices").Get() == 16
    assert collider.GetAttribute("physxConvexHullCollision:hullVertexLimit").Get() == 16


# -- the package surface ----------------------------------------------------------------------------------


def test_user_example_through_the_package():
    from usdforge import schemas
    stage = robot_stage()
    assert schemas.modify_rigid_body_properties(
        "/robot/base", schemas.MujocoRigidBodyPropertiesCfg(disable_gravity=True, gravcomp=1.0), stage)
    base = stage.GetPrimAtPath("/robot/base")
    assert base.GetAttribute("physxRigidBody:disableGravity").Get() is True
    assert base.GetAttribute("mjc:gravcomp").Get() == 1.0
    assert schemas.modify_joint_drive_properties(
        "/robot", schemas.MujocoJointDrivePropertiesCfg(actuatorgravcomp=True), stage)
    with pytest.raises(AttributeError):
        schemas.no_such_name  # noqa: B018


def test_importing_schemas_does_not_import_pxr():
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys; from usdforge import schemas\n"
            "assert 'pxr' not in sys.modules, 'import schemas imported pxr'\n"
            "cfg = schemas.structure_cfg({'type': 'MujocoRigidBodyPropertiesCfg', 'gravcomp': 1.0}, schemas.RigidBodyBaseCfg)\n"
            "assert 'pxr' not in sys.modules\n"
            "schemas.modify_rigid_body_properties\n"
            "assert 'pxr' in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_material_none_leaves_friction_alone():
    stage = robot_stage()
    spawn_rigid_body_material("/robot/Looks/rubber", physics.RigidBodyMaterialBaseCfg(static_friction=1.2), stage)
    modify_material_properties("/robot/Looks", newton.NewtonMaterialPropertiesCfg(
        static_friction=None, dynamic_friction=None, restitution=None, torsional_friction=0.3), stage)
    api = UsdPhysics.MaterialAPI(stage.GetPrimAtPath("/robot/Looks/rubber"))
    assert api.GetStaticFrictionAttr().Get() == pytest.approx(1.2)
    assert stage.GetPrimAtPath("/robot/Looks/rubber").GetAttribute("newton:torsionalFriction").Get() == pytest.approx(0.3)
