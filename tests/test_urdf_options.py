"""Every UrdfConverterCfg option does what its docstring says; outputs are deterministic and exactly the
planned files; mesh geometry shared between links is written once."""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys
import types
import warnings
from pathlib import Path

import mujoco
import numpy as np
import pytest
from pxr import Usd, UsdGeom, UsdPhysics

from usdforge.rules.outputs import articulation_cfg_file_name, key_file_name, planned_outputs
from usdforge.rules.robot.inertia import MASSLESS_MASS, joint_space_inertia
from usdforge.rules.urdf.convert import convert, robot_from_urdf
from usdforge.rules.verify.urdf import verify_urdf
from usdforge.schemas import UrdfConverterCfg
from usdforge.solvers.drive_gains import joint_space_inertia as mujoco_joint_space_inertia
from test_urdf_support import (CONFORMANCE, applied_schemas, convert_urdf, corpus_entries, corpus_packages,
                               corpus_urdf, joints, mesh_prims, open_stage, physics_validation_errors,
                               prims_by_source_name)

# Reading panda directly (not through a cached conversion) repeats its expected custom-data warnings.
pytestmark = pytest.mark.filterwarnings("ignore::usdforge.rules.conversion_warnings.ConversionWarning")

REPO = Path(__file__).resolve().parents[1]
TINY_ARM = REPO / "assets" / "robots" / "tiny_arm" / "urdf" / "tiny_arm.urdf"
TINY_ARM_PACKAGES = {"tiny_arm": str(REPO / "assets" / "robots" / "tiny_arm")}
ENTRIES = {entry["name"]: entry for entry in corpus_entries()}
Drive = UrdfConverterCfg.JointDriveCfg
PD = Drive.PDGainsCfg
NF = Drive.NaturalFrequencyGainsCfg


def corpus(name: str, **cfg):
    return convert_urdf(corpus_urdf(ENTRIES[name]), corpus_packages(ENTRIES[name]), **cfg)


def drive(stage, joint: str, axis: str = "angular") -> UsdPhysics.DriveAPI:
    return UsdPhysics.DriveAPI(joints(stage)[joint], axis)


def test_defaults_are_isaac_labs():
    cfg = UrdfConverterCfg(asset_path="robot.urdf")
    assert (cfg.fix_base, cfg.root_link_name, cfg.link_density, cfg.merge_fixed_joints) == (False, None, 0.0, True)
    assert (cfg.convert_mimic_joints_to_normal_joints, cfg.collision_from_visuals, cfg.self_collision) == (False,) * 3
    assert cfg.collision_type == "Convex Hull" and cfg.robot_type == "Default" and cfg.run_asset_transformer
    assert (cfg.replace_cylinders_with_capsules, cfg.merge_mesh, cfg.ros_package_paths) == (False, False, [])
    assert cfg.make_instanceable
    assert cfg.joint_drive == Drive(drive_type="force", target_type="position", gains=PD(stiffness=None, damping=None))
    assert NF(natural_frequency=1.0).damping_ratio == 0.005


def test_fix_base_fixes_the_root_body_to_the_world():
    result = corpus("panda", fix_base=True)
    stage = open_stage(result.usd)
    fixed = [UsdPhysics.FixedJoint(p) for p in stage.Traverse() if p.IsA(UsdPhysics.FixedJoint)]
    robot = stage.GetDefaultPrim()
    # Anchored to the robot's Xform, which carries the API (docs/usd_layout.md, issue 29).
    assert len(fixed) == 1 and fixed[0].GetBody0Rel().GetTargets() == [robot.GetPath()]
    assert fixed[0].GetBody1Rel().GetTargets()[0].name == "panda_link0"
    assert [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.ArticulationRootAPI)] == [robot]
    assert physics_validation_errors(result.usd) == []
    assert verify_urdf(corpus_urdf(ENTRIES["panda"]), result.usd, corpus_packages(ENTRIES["panda"])).ok


def test_root_link_name_moves_the_articulation_root_and_the_fixed_joint():
    floating = open_stage(corpus("solo12", root_link_name="FL_UPPER_LEG").usd)
    roots = [p for p in floating.Traverse() if p.HasAPI(UsdPhysics.ArticulationRootAPI)]
    assert roots == [prims_by_source_name(floating)["FL_UPPER_LEG"]]
    # Fixed: the API on the robot's Xform (issue 29), the world joint on the named link.
    stage = open_stage(corpus("solo12", root_link_name="FL_UPPER_LEG", fix_base=True).usd)
    named = prims_by_source_name(stage)
    roots = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.ArticulationRootAPI)]
    assert roots == [stage.GetDefaultPrim()]
    fixed = next(UsdPhysics.FixedJoint(p) for p in stage.Traverse() if p.IsA(UsdPhysics.FixedJoint)
                 and UsdPhysics.FixedJoint(p).GetBody0Rel().GetTargets() == [stage.GetDefaultPrim().GetPath()])
    assert fixed.GetBody1Rel().GetTargets() == [named["FL_UPPER_LEG"].GetPath()]


def test_link_density_gives_massless_links_the_mass_of_their_colliders():
    result = convert_urdf(CONFORMANCE / "link_first_ghost_link_fixed.urdf", link_density=1000.0)
    mass = UsdPhysics.MassAPI(prims_by_source_name(open_stage(result.usd))["link1"])
    # link1 (a 1 m cube) and link_box (0.5 m cube, merged 0.8 m above) at 1000 kg/m³.
    assert mass.GetMassAttr().Get() == pytest.approx(1125.0)
    assert mass.GetCenterOfMassAttr().Get()[2] == pytest.approx(125 * 0.8 / 1125, rel=1e-6)
    placeholder = convert_urdf(CONFORMANCE / "link_first_ghost_link_fixed.urdf")
    mass = UsdPhysics.MassAPI(prims_by_source_name(open_stage(placeholder.usd))["link1"])
    assert mass.GetMassAttr().Get() == pytest.approx(MASSLESS_MASS)


def test_merge_fixed_joints_off_keeps_every_massive_link_a_body():
    result = corpus("panda", merge_fixed_joints=False)
    stage = open_stage(result.usd)
    bodies = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI)]
    # Every link but panda_link8 and panda_hand_tcp: links with no inertial, visual or collision on fixed
    # joints are frames even when fixed joints are kept.
    assert len(bodies) == 11
    assert prims_by_source_name(stage)["panda_hand"].HasAPI(UsdPhysics.RigidBodyAPI)
    assert UsdPhysics.FixedJoint(joints(stage)["panda_hand_joint"])
    assert physics_validation_errors(result.usd) == []
    assert verify_urdf(corpus_urdf(ENTRIES["panda"]), result.usd, corpus_packages(ENTRIES["panda"])).ok


def test_merged_inertia_is_the_parallel_axis_sum():
    from usdforge.rules.urdf.read import read_urdf

    stage = open_stage(corpus("panda").usd)
    mass = UsdPhysics.MassAPI(prims_by_source_name(stage)["panda_link7"])
    source = {link.name: link for link in read_urdf(corpus_urdf(ENTRIES["panda"]), corpus_packages(ENTRIES["panda"])).links}
    base = np.linalg.inv(source["panda_link7"].pose)
    parts = []  # (mass, centre, inertia about the centre) of each link, in panda_link7's frame
    for name in ("panda_link7", "panda_link8", "panda_hand", "panda_hand_tcp"):
        if source[name].inertial is None:
            continue
        pose = base @ source[name].pose
        inertial = source[name].inertial
        parts.append((inertial.mass, pose[:3, :3] @ inertial.center_of_mass + pose[:3, 3],
                      pose[:3, :3] @ inertial.inertia @ pose[:3, :3].T))
    total = sum(m for m, _, _ in parts)
    centre = sum(m * c for m, c, _ in parts) / total
    tensor = sum(i + m * ((c - centre) @ (c - centre) * np.eye(3) - np.outer(c - centre, c - centre))
                 for m, c, i in parts)
    assert mass.GetMassAttr().Get() == pytest.approx(total, rel=1e-6)
    assert np.allclose(mass.GetCenterOfMassAttr().Get(), centre, atol=1e-6)
    q = mass.GetPrincipalAxesAttr().Get()
    from pxr import Gf

    axes = np.array(Gf.Matrix3d(Gf.Rotation(Gf.Quatd(q.GetReal(), Gf.Vec3d(q.GetImaginary())))).GetTranspose())
    assert np.allclose(axes @ np.diag(mass.GetDiagonalInertiaAttr().Get()) @ axes.T, tensor, atol=1e-6)


def test_pd_gains_are_per_degree_in_usd_with_regex_tables():
    cfg = Drive(drive_type={"panda_finger_joint.*": "acceleration"},
                gains=PD(stiffness={"panda_joint[1-4]": 800.0, "panda_joint[5-7]": 400.0, "panda_finger.*": 1e3},
                         damping=40.0))
    stage = open_stage(corpus("panda", joint_drive=cfg).usd)
    assert drive(stage, "panda_joint2").GetStiffnessAttr().Get() == pytest.approx(800.0 * math.pi / 180, rel=1e-6)
    assert drive(stage, "panda_joint6").GetStiffnessAttr().Get() == pytest.approx(400.0 * math.pi / 180, rel=1e-6)
    assert drive(stage, "panda_joint6").GetDampingAttr().Get() == pytest.approx(40.0 * math.pi / 180, rel=1e-6)
    assert drive(stage, "panda_joint6").GetTypeAttr().Get() == "force"
    finger = drive(stage, "panda_finger_joint1", "linear")
    assert finger.GetStiffnessAttr().Get() == pytest.approx(1e3)  # linear: N/m, no conversion
    assert finger.GetTypeAttr().Get() == "acceleration"


def test_unset_gains_are_zero_stiffness_and_urdf_damping():
    stage = open_stage(corpus("panda").usd)
    assert drive(stage, "panda_joint1").GetStiffnessAttr().Get() == 0.0
    assert drive(stage, "panda_joint1").GetDampingAttr().Get() == pytest.approx(0.003 * math.pi / 180, rel=1e-6)


def test_velocity_and_none_targets():
    stage = open_stage(corpus("panda", joint_drive=Drive(target_type="velocity", gains=PD(stiffness=50.0, damping=3.0))).usd)
    velocity = drive(stage, "panda_joint1")
    assert velocity.GetStiffnessAttr().Get() == 0.0
    assert velocity.GetDampingAttr().Get() == pytest.approx(50.0 * math.pi / 180, rel=1e-6)
    stage = open_stage(corpus("panda", joint_drive=Drive(target_type="none", gains=PD(stiffness=50.0))).usd)
    passive = drive(stage, "panda_joint1")
    assert (passive.GetStiffnessAttr().Get(), passive.GetDampingAttr().Get()) == (0.0, 0.0)
    assert passive.GetMaxForceAttr().Get() == 87.0


def test_no_joint_drive_keeps_only_the_effort_limit():
    stage = open_stage(corpus("panda", joint_drive=None).usd)
    api = drive(stage, "panda_joint1")
    assert api.GetMaxForceAttr().Get() == 87.0
    assert not api.GetStiffnessAttr().HasAuthoredValue() and not api.GetTypeAttr().HasAuthoredValue()


def _package_paths(entry) -> list[dict[str, str]]:
    """The corpus copy has no package.xml or .git: its packages are given, as its MANIFEST says."""
    return [{"name": name, "path": path} for name, path in corpus_packages(entry).items()]


def test_natural_frequency_gains_use_the_joint_space_inertia():
    cfg = Drive(gains=NF(natural_frequency={"panda_joint.*": 20.0}, damping_ratio=1.0))
    stage = open_stage(corpus("panda", joint_drive=cfg).usd)
    robot = robot_from_urdf(UrdfConverterCfg(asset_path=str(corpus_urdf(ENTRIES["panda"])),
                                             ros_package_paths=_package_paths(ENTRIES["panda"])))
    inertia = joint_space_inertia(robot)["panda_joint2"]
    api = drive(stage, "panda_joint2")
    assert api.GetStiffnessAttr().Get() == pytest.approx(inertia * 400.0 * math.pi / 180, rel=1e-5)
    assert api.GetDampingAttr().Get() == pytest.approx(2 * 20.0 * inertia * math.pi / 180, rel=1e-5)
    # The finger joints match no natural_frequency pattern: default gains.
    assert drive(stage, "panda_finger_joint1", "linear").GetStiffnessAttr().Get() == 0.0


def test_joint_space_inertia_equals_mujocos_mass_matrix_diagonal(tmp_path):
    entry = ENTRIES["panda"]
    urdf = corpus_urdf(entry)
    resolved = tmp_path / "panda.urdf"
    # MuJoCo cannot resolve package:// URIs: the same file with absolute paths.
    resolved.write_text(urdf.read_text().replace("package://example-robot-data/",
                                                 corpus_packages(entry)["example-robot-data"] + "/"))
    expected = mujoco_joint_space_inertia(mujoco.MjModel.from_xml_path(str(resolved)))
    ours = joint_space_inertia(robot_from_urdf(UrdfConverterCfg(asset_path=str(urdf),
                                                                ros_package_paths=_package_paths(entry))))
    assert set(expected) == set(ours)
    for name, value in expected.items():
        assert ours[name] == pytest.approx(value, rel=1e-9), name


def test_collision_from_visuals_copies_visual_geometry_when_a_link_has_none():
    path = CONFORMANCE / "mimic_joint.urdf"
    result = convert_urdf(path, collision_from_visuals=True)
    stage = open_stage(result.usd)
    assert stage.GetPrimAtPath(prims_by_source_name(stage)["linkA"].GetPath().AppendChild("collisions"))
    assert physics_validation_errors(result.usd) == []
    assert verify_urdf(path, result.usd, collision_from_visuals=True).ok


@pytest.mark.parametrize("collision_type,token", [("Convex Hull", "convexHull"), ("Bounding Sphere", "boundingSphere"),
                                                   ("Bounding Cube", "boundingCube")])
def test_collision_type_is_the_mesh_approximation(collision_type, token):
    stage = open_stage(corpus("panda", collision_type=collision_type).usd)
    colliders = [p for p in mesh_prims(stage) if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert colliders
    assert {UsdPhysics.MeshCollisionAPI(p).GetApproximationAttr().Get() for p in colliders} == {token}
    boxes = [p for p in stage.Traverse() if p.IsA(UsdGeom.Cube) and p.HasAPI(UsdPhysics.CollisionAPI)]
    assert boxes and not any(p.HasAPI(UsdPhysics.MeshCollisionAPI) for p in boxes)  # primitives stay exact


def test_convex_decomposition_without_coacd_says_so_and_leaves_it_to_the_engine(monkeypatch):
    monkeypatch.setitem(sys.modules, "coacd", None)  # as if not installed
    result = convert_urdf(TINY_ARM, TINY_ARM_PACKAGES, collision_type="Convex Decomposition", merge_mesh=False,
                          robot_type="Manipulator")
    assert any("CoACD is not installed" in w for w in result.warnings)
    stage = open_stage(result.usd)
    colliders = [p for p in mesh_prims(stage) if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert {UsdPhysics.MeshCollisionAPI(p).GetApproximationAttr().Get() for p in colliders} == {"convexDecomposition"}


def test_convex_decomposition_with_coacd_writes_convex_parts(monkeypatch, tmp_path):
    calls = []

    def run_coacd(mesh, seed=0):
        calls.append(seed)
        box = __import__("trimesh").creation.box(extents=[0.01, 0.01, 0.01])
        return [(box.vertices, box.faces), (box.vertices + 0.02, box.faces)]

    fake = types.SimpleNamespace(Mesh=lambda vertices, faces: (vertices, faces), run_coacd=run_coacd)
    monkeypatch.setitem(sys.modules, "coacd", fake)
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(UrdfConverterCfg(asset_path=str(TINY_ARM), usd_dir=str(out), usd_file_name="a.usda",
                                 collision_type="Convex Decomposition",
                                 ros_package_paths=[{"name": "tiny_arm", "path": TINY_ARM_PACKAGES["tiny_arm"]}]), out)
    stage = open_stage(out / "a.usda")
    hulls = [p for p in mesh_prims(stage) if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert calls and len(hulls) == 2 * 5  # two parts for each of the five mesh colliders
    assert {UsdPhysics.MeshCollisionAPI(p).GetApproximationAttr().Get() for p in hulls} == {"convexHull"}


def test_self_collision_flag_on_the_articulation_root():
    for value in (False, True):
        stage = open_stage(corpus("solo12", self_collision=value).usd)
        root = next(p for p in stage.Traverse() if p.HasAPI(UsdPhysics.ArticulationRootAPI))
        assert "PhysxArticulationAPI" in applied_schemas(root)
        assert root.GetAttribute("physxArticulation:enabledSelfCollisions").Get() is value


def test_replace_cylinders_with_capsules_applies_to_colliders_only():
    stage = open_stage(convert_urdf(CONFORMANCE / "simple-primitives.urdf", replace_cylinders_with_capsules=True,
                                    merge_fixed_joints=False).usd)
    body = prims_by_source_name(stage)["link_cylinder"]
    assert [p.GetTypeName() for p in body.GetChild("collisions").GetChildren()] == ["Capsule"]
    assert [p.GetTypeName() for p in body.GetChild("visuals").GetChildren()] == ["Cylinder"]
    capsule = UsdGeom.Capsule(body.GetChild("collisions").GetChildren()[0])
    assert (capsule.GetRadiusAttr().Get(), capsule.GetHeightAttr().Get()) == (0.3, 1.0)


def test_merge_mesh_merges_a_links_visual_meshes_per_material():
    result = convert_urdf(CONFORMANCE / "meshes.urdf", merge_mesh=True)
    stage = open_stage(result.usd)
    visuals = prims_by_source_name(stage)["link_mesh_stl"].GetChild("visuals")
    children = visuals.GetChildren()
    assert children and all(p.IsA(UsdGeom.Mesh) and p.GetName().startswith("merged_") for p in children)
    separate = open_stage(convert_urdf(CONFORMANCE / "meshes.urdf").usd)
    parts = [p for p in mesh_prims(separate) if "/visuals/" in str(p.GetPath())]
    assert len(children) < len(parts)
    assert verify_urdf(CONFORMANCE / "meshes.urdf", result.usd).ok


def test_robot_type_is_isaacs_robot_schema():
    stage = open_stage(convert_urdf(TINY_ARM, TINY_ARM_PACKAGES, robot_type="Manipulator").usd)
    root = stage.GetDefaultPrim()
    assert "IsaacRobotAPI" in applied_schemas(root)
    assert root.GetAttribute("isaac:robotType").Get() == "Manipulator"
    assert len(root.GetRelationship("isaac:physics:robotJoints").GetTargets()) == 6


def test_single_file_output_without_the_asset_transformer_and_without_instancing():
    result = corpus("r2d2", run_asset_transformer=False, make_instanceable=False)
    assert [f for f in result.files if f.parent.name != "textures"] == [result.usd, result.usd.with_name(
        articulation_cfg_file_name(result.usd.name))]
    stage = open_stage(result.usd)
    assert all(r.startswith("./textures/") for r in stage.GetRootLayer().GetExternalReferences() if r)
    assert not [p for p in stage.Traverse() if p.IsInstance()]
    assert physics_validation_errors(result.usd) == []
    assert verify_urdf(corpus_urdf(ENTRIES["r2d2"]), result.usd, corpus_packages(ENTRIES["r2d2"])).ok


def test_layered_output_is_exactly_the_planned_files_with_relative_paths():
    result = corpus("r2d2")
    out = result.usd.parent
    written = {f.relative_to(out).as_posix() for f in result.files if f.parent.name != "textures"}
    planned = set(planned_outputs("urdf", result.usd.name, True, True, True)) - {key_file_name(result.usd.name)}
    assert written == planned
    stage = open_stage(result.usd)
    for layer in stage.GetUsedLayers():
        for reference in filter(None, layer.GetExternalReferences()):  # "" is an internal reference
            assert reference.startswith(("./", "../")), f"{layer.identifier} references {reference}"
    # The physics lives in the physics layer, not in base.
    base = Usd.Stage.Open(str(out / "payloads" / "base.usda"))
    assert not [p for p in base.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI)]


def test_mesh_geometry_shared_between_links_is_written_once():
    stage = open_stage(convert_urdf(TINY_ARM, TINY_ARM_PACKAGES).usd)
    geometry = Usd.Stage.Open(str(stage.GetRootLayer().realPath.replace("tiny_arm.usda", "payloads/geometry.usd")))
    prototypes = sorted(p.GetName() for p in geometry.GetPrimAtPath("/Prototypes").GetAllChildren())
    # base, finger (used by both fingers, visual and collision), segment at scale 1 and at scale 0.8.
    assert prototypes == ["base_stl", "finger_stl", "segment_obj", "segment_obj_1"]
    users = [p for p in Usd.PrimRange(stage.GetDefaultPrim()) if any(
        "finger_stl" in str(r.primPath) for spec in p.GetPrimStack() for r in spec.referenceList.GetAddedOrExplicitItems())]
    assert len(users) == 4


def _digests(files, root: Path) -> dict[str, str]:
    return {f.relative_to(root).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def test_conversion_is_byte_identical_in_the_same_and_in_another_process(tmp_path):
    urdf, packages = corpus_urdf(ENTRIES["r2d2"]), corpus_packages(ENTRIES["r2d2"])
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        cfg = UrdfConverterCfg(asset_path=str(urdf), usd_dir=str(out), usd_file_name="r2d2.usda",
                               ros_package_paths=[{"name": k, "path": v} for k, v in packages.items()])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs.append(_digests(convert(cfg, out), out))
    assert runs[0] == runs[1]
    out = tmp_path / "c"
    script = ("import sys, warnings; warnings.simplefilter('ignore'); from pathlib import Path; "
              "from usdforge.schemas import UrdfConverterCfg; from usdforge.rules.urdf.convert import convert; "
              f"convert(UrdfConverterCfg(asset_path={str(urdf)!r}, usd_dir={str(out)!r}, usd_file_name='r2d2.usda', "
              f"ros_package_paths={[{'name': k, 'path': v} for k, v in packages.items()]!r}), Path({str(out)!r}))")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, capture_output=True)
    assert _digests([p for p in out.rglob("*") if p.is_file()], out) == runs[0]


_LOPSIDED = """<?xml version="1.0"?>
<robot name="lopsided">
  <link name="base">
    <inertial><mass value="2.0"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>
  </link>
  <link name="arm">
    <inertial>
      <origin xyz="0 0 0.1" rpy="0.3 0 0"/>
      <mass value="1.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.05"/>
    </inertial>
  </link>
  <joint name="hinge" type="revolute">
    <parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
</robot>
"""


def _diagonal_inertia(usd: Path, link: str) -> list[float]:
    mass = UsdPhysics.MassAPI(prims_by_source_name(open_stage(usd))[link])
    return sorted(mass.GetDiagonalInertiaAttr().Get())


def test_inertia_breaking_the_triangle_inequality_warns_with_file_line_and_link(tmp_path):
    urdf = tmp_path / "lopsided.urdf"
    urdf.write_text(_LOPSIDED)
    result = convert_urdf(urdf)
    line = next(i for i, text in enumerate(_LOPSIDED.splitlines(), 1) if 'izz="0.05"' in text)
    [message] = [w for w in result.warnings if "triangle inequality" in w]
    assert message.startswith(f"{urdf}:{line}:") and "link 'arm'" in message, message
    # Off by default: the USD says what the source says.
    assert _diagonal_inertia(result.usd, "arm") == pytest.approx([0.01, 0.01, 0.05], rel=1e-6)


def test_balance_inertia_repairs_like_mujocos_balanceinertia(tmp_path):
    urdf = tmp_path / "lopsided.urdf"
    urdf.write_text(_LOPSIDED)
    result = convert_urdf(urdf, balance_inertia=True)
    # The reference: MuJoCo's own compiler with balanceinertia on the same principal moments.
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><compiler balanceinertia="true"/><worldbody><body name="arm"><joint/>'
        '<inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.05"/></body></worldbody></mujoco>')
    assert _diagonal_inertia(result.usd, "arm") == pytest.approx(sorted(model.body_inertia[1]), rel=1e-6)
    assert _diagonal_inertia(result.usd, "base") == pytest.approx([0.1, 0.1, 0.1], rel=1e-6)  # valid: kept
    mass = UsdPhysics.MassAPI(prims_by_source_name(open_stage(result.usd))["arm"])
    assert mass.GetMassAttr().Get() == pytest.approx(1.0)
    assert tuple(mass.GetCenterOfMassAttr().Get()) == pytest.approx((0.0, 0.0, 0.1), abs=1e-7)
