"""The six corpus robots (panda, PR2, solo12, simple_humanoid, r2d2, cartpole) convert and behave like their
URDF: USD opens, the UsdPhysics validators find no error, the articulation is a tree, every link's pose
matches URDF forward kinematics at 20 random configurations (mimic joints following their leaders),
masses after merging, limits, effort → maxForce; plus what each robot exercises."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pxr import UsdGeom, UsdPhysics

from usdforge.rules.verify.articulation import articulation_problems
from usdforge.rules.verify.urdf import verify_urdf
from test_urdf_support import (Converted, applied_schemas, convert_urdf, corpus_entries, corpus_packages,
                               corpus_urdf, joints, mesh_prims, open_stage, physics_validation_errors,
                               prims_by_source_name)

ENTRIES = {entry["name"]: entry for entry in corpus_entries()}


def converted(name: str) -> Converted:
    """The robot converted with the default cfg (once per session)."""
    entry = ENTRIES[name]
    return convert_urdf(corpus_urdf(entry), corpus_packages(entry))


@pytest.mark.parametrize("name", list(ENTRIES))
def test_corpus_robot_converts_validates_and_matches_urdf_kinematics(name):
    entry = ENTRIES[name]
    result = converted(name)
    assert result.usd.is_file()
    assert physics_validation_errors(result.usd) == []
    assert articulation_problems(open_stage(result.usd)) == []
    report = verify_urdf(corpus_urdf(entry), result.usd, corpus_packages(entry), configurations=20, seed=7)
    assert report.ok, str(report)
    assert report.configurations == 20
    assert report.links_compared == entry["counts"]["links"]
    # Every movable joint of the URDF was compared (types, limits, effort, velocity, mimic).
    movable = sum(n for kind, n in entry["counts"]["joints_by_type"].items() if kind != "fixed")
    assert report.joints_compared == movable


@pytest.mark.parametrize("name", list(ENTRIES))
def test_articulation_is_one_tree_rooted_at_a_body(name):
    stage = open_stage(converted(name).usd)
    parsed = UsdPhysics.UsdPhysicsLoadStageFromPrimRange(stage, [stage.GetDefaultPrim().GetPath()])
    articulations = parsed[UsdPhysics.ObjectType.Articulation][0]
    assert len(articulations) == 1
    root = stage.GetPrimAtPath(articulations[0])
    # On the root body of a floating base, on the robot's Xform of a fixed one (issue 29).
    assert root.HasAPI(UsdPhysics.RigidBodyAPI) or root == stage.GetDefaultPrim(), root
    bodies = {str(p) for p in parsed[UsdPhysics.ObjectType.RigidBody][0]}
    children = {}
    for kind in (UsdPhysics.ObjectType.RevoluteJoint, UsdPhysics.ObjectType.PrismaticJoint,
                 UsdPhysics.ObjectType.FixedJoint):
        for desc in parsed.get(kind, ([], []))[1]:
            assert str(desc.body1) in bodies
            assert str(desc.body1) not in children, f"{desc.body1} has two parent joints"
            children[str(desc.body1)] = str(desc.body0)
    # Every body but the root has exactly one parent joint, and following parents reaches the root (for a
    # fixed base, the body fixed to the world).
    if root == stage.GetDefaultPrim():
        fixed = [b for b, parent in children.items() if parent not in bodies]
        assert len(fixed) == 1, fixed
        root = stage.GetPrimAtPath(fixed[0])
    assert set(bodies) - set(children) <= {str(root.GetPath())}
    for body in bodies:
        seen = set()
        while body in children and children[body] in bodies:
            assert body not in seen
            seen.add(body)
            body = children[body]
        assert body == str(root.GetPath())


def test_panda_fingers_couple_and_hand_is_findable():
    stage = open_stage(converted("panda").usd)
    named = prims_by_source_name(stage)
    # panda_hand was merged (fixed joints) into panda_link7 but is still findable as its frame.
    hand = named["panda_hand"]
    assert not hand.HasAPI(UsdPhysics.RigidBodyAPI)
    assert named["panda_link7"].HasAPI(UsdPhysics.RigidBodyAPI)
    assert hand.GetParent() == named["panda_link7"]
    follower = joints(stage)["panda_finger_joint2"]
    leader = joints(stage)["panda_finger_joint1"]
    assert follower.GetRelationship("usdforge:mimic:joint").GetTargets() == [leader.GetPath()]
    assert follower.GetAttribute("usdforge:mimic:multiplier").Get() == 1.0
    instance = next(s for s in applied_schemas(follower) if s.startswith("PhysxMimicJointAPI:"))
    axis = instance.split(":")[1]
    assert follower.GetRelationship(f"physxMimicJoint:{axis}:referenceJoint").GetTargets() == [leader.GetPath()]
    assert follower.GetAttribute(f"physxMimicJoint:{axis}:gearing").Get() == -1.0
    assert "NewtonMimicAPI" in applied_schemas(follower)
    assert follower.GetAttribute("newton:mimicCoef1").Get() == 1.0
    # A follower's drive has zero gains (PhysX rejects gains on a mimic joint) but keeps its effort limit.
    drive = UsdPhysics.DriveAPI(follower, "linear")
    assert drive.GetStiffnessAttr().Get() == 0.0 and drive.GetDampingAttr().Get() == 0.0
    assert drive.GetMaxForceAttr().Get() == 100.0  # the URDF follower's own <limit effort>


def test_panda_dae_visuals_carry_their_materials_and_are_shared_prototypes():
    stage = open_stage(converted("panda").usd)
    from pxr import Usd, UsdShade

    visual = stage.GetPrimAtPath("/panda/panda_link0/visuals")
    instance = visual.GetChildren()[0]
    assert instance.IsInstance()
    meshes = [p for p in Usd.PrimRange(instance, Usd.TraverseInstanceProxies()) if p.IsA(UsdGeom.Mesh)]
    assert len(meshes) > 1  # link0.dae holds several parts
    bound = {UsdShade.MaterialBindingAPI(m).ComputeBoundMaterial()[0].GetPath() for m in meshes}
    assert len(bound) > 1 and all(not path.isEmpty for path in bound)


def test_pr2_transmissions_and_gazebo_blocks_are_kept_as_custom_data():
    result = converted("pr2")
    stage = open_stage(result.usd)
    root = stage.GetDefaultPrim()
    names = [a.GetName() for a in root.GetAttributes()]
    transmissions = [n for n in names if n.startswith("urdf:transmission:")]
    assert len(transmissions) == ENTRIES["pr2"]["counts"]["transmissions"]
    assert "<transmission" in root.GetAttribute(transmissions[0]).Get()
    assert any(n.startswith("urdf:gazebo:") for n in names)
    assert any("<transmission>" in w and "custom data" in w for w in result.warnings)
    assert any("<gazebo>" in w for w in result.warnings)


def test_pr2_mimic_joints_are_all_coupled():
    stage = open_stage(converted("pr2").usd)
    coupled = [prim for prim in joints(stage).values() if prim.GetRelationship("usdforge:mimic:joint").GetTargets()]
    assert len(coupled) == ENTRIES["pr2"]["counts"]["mimic_joints"] == 10


def test_effort_limits_land_in_drive_max_force():
    stage = open_stage(converted("panda").usd)
    for name in ("panda_joint1", "panda_joint5"):
        drive = UsdPhysics.DriveAPI(joints(stage)[name], "angular")
        assert drive.GetMaxForceAttr().Get() == pytest.approx({"panda_joint1": 87.0, "panda_joint5": 12.0}[name])
    velocity = joints(stage)["panda_joint1"].GetAttribute("physxJoint:maxJointVelocity").Get()
    assert velocity == pytest.approx(math.degrees(2.175), rel=1e-6)


def test_solo12_binary_stl_with_solid_header_and_floating_base():
    stage = open_stage(converted("solo12").usd)
    meshes = mesh_prims(stage)
    assert meshes and all(len(UsdGeom.Mesh(p).GetPointsAttr().Get()) > 0 for p in meshes)
    fixed_to_world = [p for p in joints(stage).values() if p.IsA(UsdPhysics.FixedJoint)
                      and UsdPhysics.FixedJoint(p).GetBody0Rel().GetTargets() in ([], [stage.GetDefaultPrim().GetPath()])]
    assert fixed_to_world == []  # floating: nothing holds the base


def test_simple_humanoid_ascii_stl_and_world_link_fix_the_base():
    result = converted("simple_humanoid")
    stage = open_stage(result.usd)
    collision_meshes = [p for p in mesh_prims(stage) if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert collision_meshes, "the ASCII STL collider must be read"
    # base_link is an empty root on a fixed joint: the world. BODY is fixed to it (body0 = the robot's Xform).
    named = prims_by_source_name(stage)
    assert not named["base_link"].HasAPI(UsdPhysics.RigidBodyAPI)
    waist = UsdPhysics.FixedJoint(joints(stage)["waist"])
    assert waist.GetBody0Rel().GetTargets() == [stage.GetDefaultPrim().GetPath()]
    assert waist.GetBody1Rel().GetTargets() == [named["BODY"].GetPath()]
    assert any("collision_checking" in w for w in result.warnings)


def test_r2d2_missing_normal_maps_are_a_warning_and_textures_are_copied():
    result = converted("r2d2")
    assert any("l_finger_normals.png" in w and "missing" in w for w in result.warnings)
    textures = [f for f in result.files if f.parent.name == "textures"]
    assert textures and all(f.is_file() and f.suffix == ".png" for f in textures)


def test_cartpole_massless_root_gets_the_placeholder_mass_with_a_warning():
    result = converted("cartpole")
    stage = open_stage(result.usd)
    bar = prims_by_source_name(stage)["slideBar"]
    mass = UsdPhysics.MassAPI(bar)
    assert mass.GetMassAttr().Get() == pytest.approx(1e-3)
    assert np.allclose(mass.GetDiagonalInertiaAttr().Get(), [1e-6] * 3)
    assert any("slideBar" in w and "placeholder" in w for w in result.warnings)
