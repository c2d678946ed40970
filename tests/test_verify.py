"""``doit verify``: every check on converted assets, against the sources' own oracles, and deliberately
broken USDs that must fail naming the prim and the check.

The broken USDs are made by editing a converted asset's physics layer with pxr's Sdf API; ``doit -s
verify:<name>`` verifies the edited output as it is (without ``-s`` doit would first rebuild the
hand-edited output, as it should).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pxr import Gf, Sdf, Usd

from test_doit import REPO, doit
from usdforge.rules.verify.mesh import verify_mesh
from usdforge.rules.verify.mjcf import verify_mjcf
from usdforge.rules.verify.usd import check_physics, validate

TINY_ARM = REPO / "assets" / "robots" / "tiny_arm"
PHYSICS_LAYER = "build/usd/tiny_arm/payloads/Physics/physics.usda"


@pytest.fixture(scope="module")
def arm_project(tmp_path_factory) -> tuple[Path, Path, bytes]:
    """tiny_arm converted by ``doit convert`` in a work folder (no engine environments there, so the
    engine loads are skipped); the pristine physics layer's bytes."""
    work = tmp_path_factory.mktemp("verify")
    library = work / "library.toml"
    library.write_text(f"""
[[assets]]
name = "tiny_arm"
source = "{TINY_ARM / 'urdf' / 'tiny_arm.urdf'}"
packages = {{ tiny_arm = "{TINY_ARM}" }}
[assets.cfg]
fix_base = true
""")
    result = doit(work, "convert", library=library)
    assert result.returncode == 0, result.stdout + result.stderr
    return work, library, (work / PHYSICS_LAYER).read_bytes()


def test_a_faithful_conversion_passes_every_check_and_writes_its_json(arm_project):
    work, library, _ = arm_project
    result = doit(work, "verify", library=library)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((work / "build/usd/tiny_arm/tiny_arm.verify.json").read_text())
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert report["status"] == "passed"
    assert statuses == {"usd-validation": "passed", "physics-structure": "passed", "urdf-oracle": "passed",
                        "newton-load": "skipped", "mujoco-usd-load": "skipped", "isaaclab-load": "skipped"}
    skipped = [c["detail"] for c in report["checks"] if c["status"] == "skipped"]
    assert all("is not set up" in detail for detail in skipped)
    assert report["facts"]["bodies"] == 7 and report["facts"]["joints"]["revolute"] == 4
    assert report["conversion"]["seconds"] > 0 and report["output_bytes"] > 0
    again = doit(work, "verify", library=library)
    assert ".  verify:tiny_arm" not in again.stdout  # unchanged: not re-verified


def _break(layer: Sdf.Layer, case: str) -> None:
    joint = "/tiny_arm/joints/shoulder_pan"
    if case == "inverted limit":
        layer.GetAttributeAtPath(f"{joint}.physics:lowerLimit").default = 120.0
        layer.GetAttributeAtPath(f"{joint}.physics:upperLimit").default = -120.0
    elif case == "joint frame off the body poses":
        layer.GetAttributeAtPath(f"{joint}.physics:localPos0").default = Gf.Vec3f(0.0, 0.05, 0.06)
    elif case == "joint to a missing prim":
        layer.GetRelationshipAtPath("/tiny_arm/joints/shoulder_lift.physics:body1").targetPathList.explicitItems = \
            [Sdf.Path("/tiny_arm/no_such_link")]
    elif case == "mass 0":
        layer.GetAttributeAtPath("/tiny_arm/forearm.physics:mass").default = 0.0


BROKEN = {  # case → (prim, check) the failure must name
    "inverted limit": ("/tiny_arm/joints/shoulder_pan", "joint-limits"),
    "joint frame off the body poses": ("/tiny_arm/joints/shoulder_pan", "joint-frames"),
    "joint to a missing prim": ("/tiny_arm/joints/shoulder_lift", "joint-target"),
    "mass 0": ("/tiny_arm/forearm", "mass"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_usd_fails_verify_naming_the_prim_and_the_check(arm_project, case):
    work, library, pristine = arm_project
    path = work / PHYSICS_LAYER
    path.write_bytes(pristine)
    layer = Sdf.Layer.FindOrOpen(str(path))
    layer.Reload(force=True)
    _break(layer, case)
    layer.Save()
    try:
        result = doit(work, "-s", "verify:tiny_arm", library=library)
    finally:
        path.write_bytes(pristine)
    assert result.returncode != 0
    prim, check = BROKEN[case]
    lines = (result.stdout + result.stderr).splitlines()
    assert any(line.startswith(f"usdforge: error: tiny_arm: {prim}: {check}: ") for line in lines), "\n".join(lines)
    # Every failure line carries the prefix (issue 30: a failed asset's findings were printed without it).
    assert not [line for line in lines if line.startswith("tiny_arm:")], "\n".join(lines)
    report = json.loads((work / "build/usd/tiny_arm/tiny_arm.verify.json").read_text())
    assert report["status"] == "failed"


def test_the_structure_checks_pass_the_pristine_stage_and_catch_each_edit_in_memory():
    """The same four mistakes on an in-memory stage, without doit: nothing else is reported."""
    from test_urdf_support import convert_urdf

    converted = convert_urdf(TINY_ARM / "urdf" / "tiny_arm.urdf", {"tiny_arm": str(TINY_ARM)}, fix_base=True)
    stage = Usd.Stage.Open(str(converted.usd))
    assert check_physics(stage).findings == [] and validate(stage, converted.usd).errors == []
    stage.SetEditTarget(stage.GetSessionLayer())  # edits in memory only: the files' layers stay clean
    stage.GetPrimAtPath("/tiny_arm/forearm").GetAttribute("physics:mass").Set(0.0)
    found = check_physics(stage).findings
    assert [(f.prim, f.check) for f in found] == [("/tiny_arm/forearm", "mass")]


def test_mjcf_oracle_catches_a_wrong_mass_limit_and_gain(tmp_path):
    from test_mjcf_support import CORPUS_CFG, converted, corpus_models

    source = corpus_models()["franka_emika_panda"]
    result = converted(source, **CORPUS_CFG)
    stage = Usd.Stage.Open(str(result.usd_path))
    assert verify_mjcf(source, stage, CORPUS_CFG).findings == []
    stage.SetEditTarget(stage.GetSessionLayer())  # edits in memory only: the files' layers stay clean
    body = next(p for p in stage.Traverse() if p.HasAttribute("physics:mass") and p.GetName() == "link3")
    body.GetAttribute("physics:mass").Set(body.GetAttribute("physics:mass").Get() * 1.5)
    joint = next(p for p in stage.Traverse() if p.HasAttribute("physics:upperLimit"))
    joint.GetAttribute("physics:upperLimit").Set(joint.GetAttribute("physics:upperLimit").Get() + 10.0)
    actuator = next(p for p in stage.Traverse() if p.GetTypeName() == "MjcActuator")
    actuator.GetAttribute("mjc:gainPrm").Set([v * 2 for v in actuator.GetAttribute("mjc:gainPrm").Get()])
    checks = {(f.check, f.prim) for f in verify_mjcf(source, stage, CORPUS_CFG).findings}
    assert ("mjcf-mass", str(body.GetPath())) in checks
    assert ("mjcf-limits", str(joint.GetPath())) in checks
    assert ("mjcf-actuators", str(actuator.GetPath())) in checks


@pytest.mark.parametrize("name", ["franka_emika_panda", "robotiq_2f85", "anybotics_anymal_c", "shadow_hand",
                                  "unitree_h1", "pal_tiago", "agility_cassie", "skydio_x2"])
def test_corpus_mjcf_passes_the_structure_checks_and_mujocos_oracle(name):
    from test_mjcf_support import CORPUS_CFG, converted, corpus_models

    source = corpus_models()[name]
    stage = Usd.Stage.Open(str(converted(source, **CORPUS_CFG).usd_path))
    assert [str(f) for f in check_physics(stage).findings] == []
    oracle = verify_mjcf(source, stage, CORPUS_CFG)
    assert [f.line(name) for f in oracle.findings] == []


def test_mesh_oracle_passes_a_faithful_mesh_and_catches_wrong_geometry_and_mass(tmp_path):
    from meshes import write_mesh
    from usdforge import MassPropertiesCfg, MeshConverter, MeshConverterCfg, RigidBodyBaseCfg

    source = write_mesh(tmp_path, "stl")
    cfg = {"scale": (2.0, 1.0, 1.0), "mass_props": {"mass": 3.0}, "rigid_props": {}}
    usd = MeshConverter(MeshConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out"), scale=(2.0, 1.0, 1.0),
                                         mass_props=MassPropertiesCfg(mass=3.0), rigid_props=RigidBodyBaseCfg(),
                                         make_instanceable=False)).usd_path
    stage = Usd.Stage.Open(usd)
    assert verify_mesh(source, stage, cfg).findings == []
    checks = {f.check for f in verify_mesh(source, stage, {**cfg, "scale": (1.0, 1.0, 1.0),
                                                           "mass_props": {"mass": 2.0}}).findings}
    assert {"mesh-bounds", "mesh-volume", "mesh-mass"} <= checks


def test_engine_loads_pass_a_faithful_asset_and_fail_one_newton_rejects(tmp_path):
    """The third-party loads through the tests' engine environments (``build/venv-*``, made on first use):
    tiny_arm loads in both with its bodies, limits and mass, and rolls out finite; without its
    ArticulationRootAPI Newton refuses the jointed bodies (engineering notes), a failed ``newton-load``."""
    from engines import BUILD, engine_python
    from test_urdf_support import convert_urdf
    from usdforge.rules.verify.engines import load_check

    for engine in ("newton", "mujoco-usd"):
        engine_python(engine)
    converted = convert_urdf(TINY_ARM / "urdf" / "tiny_arm.urdf", {"tiny_arm": str(TINY_ARM)}, fix_base=True,
                             run_asset_transformer=False)
    stage = Usd.Stage.Open(str(converted.usd))
    for engine in ("newton", "mujoco-usd"):
        result = load_check(engine, converted.usd, stage, BUILD)
        assert result.status == "passed", [str(f) for f in result.findings]
        assert result.detail.startswith("7 bodies, 6 DoFs, 4.3 kg")
    broken = tmp_path / "tiny_arm_no_root.usda"
    shutil.copy(converted.usd, broken)
    copy = Usd.Stage.Open(str(broken))
    from pxr import UsdPhysics

    for prim in copy.Traverse():
        if prim.HasAPI(UsdPhysics.ArticulationRootAPI):
            prim.RemoveAPI(UsdPhysics.ArticulationRootAPI)
    copy.Save()
    result = load_check("newton", broken, copy, BUILD)
    assert result.status == "failed" and result.findings[0].check == "newton-load", result.detail
    # Actionable (issue 30): the whole log in the finding, paths relative; the message names the exception.
    finding = result.findings[0]
    assert "Traceback (most recent call last)" in finding.log and str(BUILD) not in finding.log
    exception = [line for line in finding.log.splitlines() if line and not line[0].isspace()
                 and "Error" in line.split(":")[0]][0]
    assert finding.message.startswith(f"newton cannot load the asset: {exception}"), (finding.message, finding.log)


LOOPED = """<mujoco model="looped">
  <worldbody>
    <body name="base">
      <inertial pos="0 0 0" mass="2" diaginertia="0.01 0.01 0.01"/>
      <geom type="box" size="0.05 0.05 0.05"/>
      <body name="upper" pos="0 0 0.1">
        <joint name="shoulder" axis="0 1 0" range="-1 1" damping="1"/>
        <geom type="capsule" size="0.02" fromto="0 0 0 0 0 0.2" mass="0.5"/>
        <body name="lower" pos="0 0 0.2">
          <joint name="elbow" type="ball" damping="1"/>
          <geom type="capsule" size="0.02" fromto="0 0 0 0 0 0.2" mass="0.4"/>
          <body name="tip" pos="0 0 0.2">
            <joint name="wrist" axis="1 0 0" range="-1 1" damping="1"/>
            <geom type="sphere" size="0.03" mass="0.1"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <equality><connect body1="tip" body2="base" anchor="0 0 0"/></equality>
</mujoco>
"""


@pytest.fixture(scope="module")
def looped(tmp_path_factory):
    """A fixed-base arm with a ball joint and a ``connect`` loop, converted; a flattened copy whose wrist
    is welded (one DoF, one moving body and a revolute joint fewer) and whose forearm lost half its mass;
    the source's facts."""
    from test_mjcf_support import converted
    from usdforge.rules.verify.against_source import source_facts

    folder = tmp_path_factory.mktemp("looped")
    source = folder / "looped.xml"
    source.write_text(LOOPED)
    usd = converted(source).usd_path
    broken = folder / "broken.usda"
    Usd.Stage.Open(str(usd)).Export(str(broken))
    stage = Usd.Stage.Open(str(broken))
    for prim in stage.Traverse():
        name = prim.GetAttribute("usdforge:sourceName").Get() if prim.HasAttribute("usdforge:sourceName") else None
        if name == "wrist" and prim.GetTypeName() == "PhysicsRevoluteJoint":
            prim.SetTypeName("PhysicsFixedJoint")
        if name == "lower" and prim.HasAttribute("physics:mass"):
            prim.GetAttribute("physics:mass").Set(0.2)
    stage.Save()
    return usd, broken, source_facts("mjcf", source, {})


@pytest.mark.parametrize("engine", ["newton", "mujoco-usd"])
def test_engine_loads_are_compared_with_the_source_and_name_engine_limits(looped, engine):
    """Issue 30: the engine loads were compared with the USD only, so a USD that lost a DoF, a body or
    mass passed wherever the engine read it faithfully. Against MuJoCo's compiled source: the faithful
    conversion is ``limited`` by each engine's known limitation (the decoder welds ball joints, Newton
    counts the loop's 3 DoFs), named with the engine's version; the broken copy fails naming the engine
    and the counts."""
    from engines import BUILD, engine_python
    from usdforge.rules.verify.engines import load_check

    engine_python(engine)
    usd, broken, facts = looped
    assert (facts["dofs"], facts["bodies"], facts["joints"]) == (5, 3, {"revolute": 2, "spherical": 1})
    faithful = load_check(engine, usd, Usd.Stage.Open(str(usd)), BUILD, facts, "mjcf")
    assert faithful.status == "limited", [f.message for f in faithful.findings]
    assert ("rollout vs the source: within" in faithful.detail) == (engine == "newton"), faithful.detail
    [limit] = faithful.limitations
    version = "newton 1.8.0" if engine == "newton" else "mujoco-usd 4.0.0"
    assert version in limit.message
    assert ("counts 3 DoFs for the 1 joint(s) that close loops" if engine == "newton"
            else "reads no spherical joints") in limit.message
    result = load_check(engine, broken, Usd.Stage.Open(str(broken)), BUILD, facts, "mjcf")
    errors = [f.message for f in result.errors]
    assert result.status == "failed", errors
    dofs = 5 if engine == "newton" else 2  # the decoder's source: the ball joint welded
    bodies = 3 if engine == "newton" else 2
    assert f"{version} loads {dofs - 1} DoFs, the source has {dofs} (-1)" in errors, errors
    assert f"{version} loads {bodies - 1} moving bodies (rigid groups), the source has {bodies} (-1)" in errors
    assert any(m.startswith(f"{version} loads ") and "kg of moving bodies" in m and "(-0.2 kg)" in m
               for m in errors), errors


def test_the_first_real_error_of_an_engine_log_and_its_paths_made_relative(tmp_path, monkeypatch):
    """Issue 30: a failed engine check kept the log's last line (``Element name '…', id 1``), not its
    cause; the whole log goes to the finding, without the build machine's absolute paths."""
    from usdforge.rules.verify.logs import first_error, relative_log

    monkeypatch.chdir(tmp_path)
    build = tmp_path / "build"
    log = (f"Warp 1.9 initialized\nWarning: a deprecated attribute\nTraceback (most recent call last):\n"
           f'  File "{build}/venv-mujoco-usd/lib/python3.11/site-packages/mujoco/usd.py", line 3, in decode\n'
           "    spec.compile()\nValueError: Error: mass and inertia of moving bodies must be larger than "
           "mjMINVAL\nElement name 'link_base', id 1\n")
    assert first_error(log) == ("ValueError: Error: mass and inertia of moving bodies must be larger than "
                                "mjMINVAL Element name 'link_base', id 1")
    assert first_error("loading\nerror: no such prim /robot/base\nexit 1\n") == "error: no such prim /robot/base"
    relative = relative_log(log, build)
    assert str(tmp_path) not in relative and 'File "build/venv-mujoco-usd/lib/' in relative


def test_isaac_labs_spawn_is_compared_with_the_sources_dofs(looped):
    """Isaac Lab 3.0's report (rules/verify/isaaclab_client.py) against the source: the looped arm has 5
    joint DoFs (2 hinges, a ball's 3); a spawn with 4 is a failure naming the engine and the counts.
    (The spawn itself needs build/venv-isaaclab: tests/test_isaaclab_asset.py.)"""
    from usdforge.rules.verify.isaaclab_check import against_source

    facts = looped[2]
    assert against_source({"dofs": 5}, facts) == []
    assert against_source({"dofs": 4}, facts) == [
        "isaaclab==3.0.0 spawns 4 joint DoFs, the source has 5 (-1; a floating base's 6 not counted)"]
