"""One body in one articulation (issue 17): ``rules.verify.articulation.articulation_problems`` against
OpenUSD's reference parser, and the MJCF fixture ``fixtures/overlapping_articulations.xml`` (a jointless
body welded to the world with a jointless child welded to it, both carrying moving bodies, multi-hinge
bodies and equality loop closures). The corpus models and conformance fixtures run the same check in
test_mjcf_conversion.py, test_urdf_conformance.py and test_urdf_corpus.py; Newton loads the fixture in
test_mjcf_engines.py."""

from __future__ import annotations

from pathlib import Path

import mujoco
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

from usdforge.rules.verify.articulation import articulation_problems
from test_mjcf_support import converted, parse_physics, physics_errors, source_name

OVERLAPPING = Path(__file__).resolve().parent / "fixtures" / "overlapping_articulations.xml"


def _world_fixed_joints(stage: Usd.Stage) -> list[Usd.Prim]:
    """Fixed joints to the world: body0 empty, or the robot's Xform (anchored, issue 29)."""
    return [p for p in stage.Traverse() if p.IsA(UsdPhysics.FixedJoint)
            and UsdPhysics.FixedJoint(p).GetBody0Rel().GetTargets() in ([], [stage.GetDefaultPrim().GetPath()])]


def test_the_fixture_is_the_case_of_the_issue():
    model = mujoco.MjModel.from_xml_path(str(OVERLAPPING))
    pedestal, mount = model.body("pedestal").id, model.body("mount").id
    assert model.body_weldid[pedestal] == 0 and model.body_weldid[mount] == 0  # both welded to the world
    assert model.body_parentid[mount] == pedestal
    moving_children = {int(model.body_parentid[b]) for b in range(model.nbody) if model.body_weldid[b] != 0}
    assert {pedestal, mount} <= moving_children  # both carry moving bodies
    assert max(model.body_jntnum) == 3 and model.neq == 2


def test_welded_fixed_bases_are_one_articulation_with_one_joint_to_the_world():
    stage = Usd.Stage.Open(str(converted(OVERLAPPING).usd_path))
    assert articulation_problems(stage) == []
    assert physics_errors(stage) == []
    articulations = parse_physics(stage)[UsdPhysics.ObjectType.Articulation]
    # One fixed tree: the API on the robot's Xform (issue 29), the pedestal fixed to the world.
    assert list(articulations[0]) == [stage.GetDefaultPrim().GetPath()]
    bodies = {source_name(stage, b) for b in articulations[1][0].articulatedBodies if not b.isEmpty}
    assert {"pedestal", "mount", "side_arm", "shoulder", "wrist", "left_foot"} <= bodies
    fixed = _world_fixed_joints(stage)
    assert [str(t) for p in fixed for t in UsdPhysics.FixedJoint(p).GetBody1Rel().GetTargets()] == \
        [str(stage.GetDefaultPrim().GetPath().AppendChild("pedestal"))]
    roots = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.ArticulationRootAPI)]
    assert roots == [stage.GetDefaultPrim()]
    # The mount is welded to the pedestal, inside the articulation.
    welds = [p for p in stage.Traverse() if p.IsA(UsdPhysics.FixedJoint)
             and [source_name(stage, t) for t in UsdPhysics.FixedJoint(p).GetBody1Rel().GetTargets()] == ["mount"]]
    assert len(welds) == 1
    assert [source_name(stage, t) for t in UsdPhysics.FixedJoint(welds[0]).GetBody0Rel().GetTargets()] == ["pedestal"]
    assert not UsdPhysics.Joint(welds[0]).GetExcludeFromArticulationAttr().Get()


def test_the_check_finds_two_articulations_sharing_bodies():
    """The converter's old output for the fixture: the mount also fixed to the world and an articulation root
    (with the API on the pedestal, where the converter then put it)."""
    stage = Usd.Stage.Open(str(converted(OVERLAPPING).usd_path))
    stage.SetEditTarget(stage.GetSessionLayer())
    root = stage.GetDefaultPrim().GetPath()
    stage.GetDefaultPrim().RemoveAPI(UsdPhysics.ArticulationRootAPI)
    UsdPhysics.ArticulationRootAPI.Apply(stage.GetPrimAtPath(root.AppendChild("pedestal")))
    mount = stage.GetPrimAtPath(root.AppendChild("mount"))
    weld = next(p for p in stage.Traverse() if p.IsA(UsdPhysics.FixedJoint)
                and UsdPhysics.FixedJoint(p).GetBody1Rel().GetTargets() == [mount.GetPath()])
    UsdPhysics.FixedJoint(weld).GetBody0Rel().SetTargets([])
    UsdPhysics.FixedJoint(weld).GetLocalPos0Attr().Set(Gf.Vec3f(0.0, 0.0, 0.6))
    UsdPhysics.ArticulationRootAPI.Apply(mount)
    problems = articulation_problems(stage)
    assert any(p.startswith("body ") and "in 2 articulations" in p for p in problems), problems
    assert physics_errors(stage) == []  # what UsdValidation does not see


def test_the_check_finds_a_joint_outside_every_articulation():
    stage = Usd.Stage.CreateInMemory()
    for name in ("a", "b"):
        body = UsdGeom.Xform.Define(stage, f"/robot/{name}").GetPrim()
        UsdPhysics.RigidBodyAPI.Apply(body)
    joint = UsdPhysics.RevoluteJoint.Define(stage, "/robot/hinge")
    joint.GetBody0Rel().SetTargets([Sdf.Path("/robot/a")])
    joint.GetBody1Rel().SetTargets([Sdf.Path("/robot/b")])
    assert articulation_problems(stage) == ["articulated joint /robot/hinge is in no articulation"]
    UsdPhysics.ArticulationRootAPI.Apply(stage.GetPrimAtPath("/robot/a"))
    assert articulation_problems(stage) == []
    joint.GetExcludeFromArticulationAttr().Set(True)  # a loop closure outside the tree is fine
    assert articulation_problems(stage) == []
