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
    assert any(line.startswith(f"tiny_arm: {prim}: {check}: ") for line in lines), "\n".join(lines)
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
