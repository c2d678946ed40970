"""``verify_urdf`` catches what it claims to: a damaged USD fails it, one problem per kind of damage."""

from __future__ import annotations

import shutil

import pytest
from pxr import Gf, Usd, UsdPhysics

from usdforge.rules.verify.urdf import verify_urdf
from test_urdf_support import CONFORMANCE, convert_urdf, corpus_entries, corpus_packages, corpus_urdf

PANDA = next(entry for entry in corpus_entries() if entry["name"] == "panda")


@pytest.fixture
def damaged(tmp_path):
    """(urdf, usd, edit): a writable single-file copy of converted panda; ``edit(fn)`` changes and saves it."""
    source = convert_urdf(corpus_urdf(PANDA), corpus_packages(PANDA), run_asset_transformer=False)
    copy = tmp_path / "panda"
    shutil.copytree(source.usd.parent, copy)
    usd = copy / source.usd.name

    def edit(change):
        stage = Usd.Stage.Open(str(usd))
        change(stage)
        stage.GetRootLayer().Save()

    return corpus_urdf(PANDA), usd, edit


def problems(urdf, usd) -> list[str]:
    report = verify_urdf(urdf, usd, corpus_packages(PANDA), configurations=5)
    assert not report.ok
    return report.problems


def test_the_undamaged_copy_passes(damaged):
    urdf, usd, _ = damaged
    assert verify_urdf(urdf, usd, corpus_packages(PANDA)).ok


def test_a_joint_frame_off_by_a_centimetre_fails_forward_kinematics(damaged):
    urdf, usd, edit = damaged

    def shift(stage):
        attribute = stage.GetPrimAtPath("/panda/joints/panda_joint4").GetAttribute("physics:localPos0")
        attribute.Set(attribute.Get() + Gf.Vec3f(0.01, 0, 0))

    edit(shift)
    found = problems(urdf, usd)
    assert any("link 'panda_link4'" in p and "at rest" in p for p in found)
    assert not any("panda_link3" in p for p in found)


def test_a_joint_axis_flipped_fails_only_away_from_rest(damaged):
    urdf, usd, edit = damaged
    edit(lambda stage: stage.GetPrimAtPath("/panda/joints/panda_joint2").GetAttribute("physics:axis").Set("Y"))
    found = problems(urdf, usd)
    assert found and all("configuration" in p for p in found if "link" in p)


def test_wrong_mass_limit_effort_and_mimic_are_each_reported(damaged):
    urdf, usd, edit = damaged

    def damage(stage):
        UsdPhysics.MassAPI(stage.GetPrimAtPath("/panda/panda_link3")).GetMassAttr().Set(3.0)
        stage.GetPrimAtPath("/panda/joints/panda_joint1").GetAttribute("physics:upperLimit").Set(100.0)
        UsdPhysics.DriveAPI(stage.GetPrimAtPath("/panda/joints/panda_joint5"), "angular").GetMaxForceAttr().Set(1.0)
        stage.GetPrimAtPath("/panda/joints/panda_finger_joint2").GetAttribute("usdforge:mimic:multiplier").Set(-1.0)

    edit(damage)
    found = problems(urdf, usd)
    assert any("panda_link3" in p and "mass 3.0 kg" in p for p in found)
    assert any("'panda_joint1': physics:upperLimit" in p for p in found)
    assert any("'panda_joint5': DriveAPI maxForce = 1.0" in p for p in found)
    assert any("'panda_finger_joint2': mimic" in p for p in found)


def test_a_second_parent_joint_breaks_the_tree(damaged):
    urdf, usd, edit = damaged

    def loop(stage):
        joint = UsdPhysics.FixedJoint.Define(stage, "/panda/joints/extra")
        joint.CreateBody0Rel().SetTargets(["/panda/panda_link0"])
        joint.CreateBody1Rel().SetTargets(["/panda/panda_link5"])

    edit(loop)
    assert any("several parent joints" in p for p in problems(urdf, usd))


def test_a_lost_collider_is_reported(tmp_path):
    result = convert_urdf(CONFORMANCE / "meshes.urdf")
    assert verify_urdf(CONFORMANCE / "meshes.urdf", result.usd).ok
    copy = tmp_path / "meshes"
    shutil.copytree(result.usd.parent, copy)
    # The shapes live in the instances layer (over the bodies that the base layer defines).
    instances = Usd.Stage.Open(str(copy / "payloads" / "instances.usda"))
    collisions = next(p for p in instances.TraverseAll() if p.GetName() == "collisions")
    instances.RemovePrim(collisions.GetAllChildren()[0].GetPath())
    instances.GetRootLayer().Save()
    report = verify_urdf(CONFORMANCE / "meshes.urdf", copy / result.usd.name)
    assert any("colliders, the URDF gives" in p for p in report.problems), str(report)


def test_a_link_name_with_a_quote_is_verified(tmp_path):
    """The collider check looked links up with an XPath built from the name: ``it's`` broke it."""
    urdf = tmp_path / "quote.urdf"
    urdf.write_text("""<robot name="q">
  <link name="it's"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>
  </inertial><collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link>
  <link name="b&quot;c"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>
  </inertial><collision><geometry><sphere radius="0.1"/></geometry></collision></link>
  <joint name="j" type="revolute"><parent link="it's"/><child link="b&quot;c"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>""")
    result = convert_urdf(urdf)
    report = verify_urdf(urdf, result.usd)
    assert report.ok, str(report)
