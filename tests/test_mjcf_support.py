"""Shared helpers of the MJCF tests (and tests of the helpers themselves): where the shared material is,
converting each model once per session, reading the USD back through OpenUSD's UsdPhysics parser, and
forward kinematics from UsdPhysics joint data alone, compared with MuJoCo's.
"""

from __future__ import annotations

import json
import math
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import mujoco
import numpy as np
import pytest
from pxr import Gf, Usd, UsdGeom, UsdPhysics, UsdValidation

from usdforge.rules.mjcf.convert import convert
# Forward kinematics from the UsdPhysics joints alone: the package's, which `doit verify` uses too
# (tested below against MuJoCo on a hand-written model).
from usdforge.rules.verify.kinematics import UsdKinematics, parse_physics  # noqa: F401 - re-exported to tests
from usdforge.rules.mjcf.bodies import body_name, joint_name
from usdforge.schemas.mjcf_cfg import MjcfConverterCfg

SHARED = Path(__file__).resolve().parents[2] / "shared"
#: The four conformance fixtures MuJoCo 4.0 parses but cannot compile.
UNCOMPILABLE = ("actuator_edge_cases.xml", "invalid names.xml", "mass_bake_uncompilable.xml", "meshes.xml")
PHYSICS_VALIDATORS = ("usdPhysicsValidators:RigidBodyChecker", "usdPhysicsValidators:ColliderChecker",
                      "usdPhysicsValidators:PhysicsJointChecker", "usdPhysicsValidators:ArticulationChecker")


def shared() -> Path:
    """``../shared`` beside the checkout; fails (never skips) the calling test when it is missing."""
    if not (SHARED / "corpus" / "MANIFEST.json").is_file() or not (SHARED / "conformance" / "mjcf").is_dir():
        pytest.fail(f"test material missing: expected the MJCF corpus and conformance fixtures under {SHARED}")
    return SHARED


def corpus_models() -> dict[str, Path]:
    """The corpus MJCF models by name (MANIFEST.json), absolute paths."""
    root = shared() / "corpus"
    manifest = json.loads((root / "MANIFEST.json").read_text())
    return {entry["name"]: root / entry["path"] for entry in manifest if entry["format"] == "mjcf"}


def conformance_fixtures() -> dict[str, Path]:
    """The MJCF conformance fixtures by file name."""
    return {path.name: path for path in sorted((shared() / "conformance" / "mjcf").glob("*.xml"))}


#: Conversion settings of the corpus: the scene, and MuJoCo's own contact rules (self collisions on), so the
#: engines' rollouts can be compared with the source.
CORPUS_CFG = {"import_physics_scene": True, "self_collision": True}


class Converted(NamedTuple):
    """One conversion: the main USD file, every file written, and the warnings' texts."""

    usd_path: Path
    files: list[Path]
    warnings: list[str]


_OUTPUT = tempfile.TemporaryDirectory(prefix="usdforge_mjcf_tests_")


@lru_cache(maxsize=None)
def _convert(path: str, settings: tuple) -> Converted:
    cfg_fields = dict(settings)
    out = Path(_OUTPUT.name) / f"{len(list(Path(_OUTPUT.name).iterdir()))}_{Path(path).stem.replace(' ', '_')}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files = convert(MjcfConverterCfg(asset_path=path, usd_file_name="model.usda", **cfg_fields), out)
    return Converted(out / "model.usda", files, [str(w.message) for w in caught])


def converted(path: Path, **cfg_fields) -> Converted:
    """``path`` converted with ``cfg_fields`` — once per test session for each (path, cfg)."""
    return _convert(str(path), tuple(sorted(cfg_fields.items())))


def compiled(path: Path) -> mujoco.MjModel:
    """MuJoCo's own compiled model of ``path`` (the reference)."""
    return mujoco.MjModel.from_xml_path(str(path))


def physics_errors(stage: Usd.Stage) -> list[str]:
    """Errors of OpenUSD's four UsdPhysics validators."""
    registry = UsdValidation.ValidationRegistry()
    context = UsdValidation.ValidationContext([registry.GetOrLoadValidatorByName(n) for n in PHYSICS_VALIDATORS])
    return [error.GetMessage() for error in context.Validate(stage)
            if error.GetType() == UsdValidation.ValidationErrorType.Error]


def source_name(stage: Usd.Stage, path) -> str | None:
    """``usdforge:sourceName`` of the prim at ``path``."""
    attribute = stage.GetPrimAtPath(str(path)).GetAttribute("usdforge:sourceName")
    return attribute.Get() if attribute else None


def pose(position, rotation) -> np.ndarray:
    """(4, 4) from a position and a Gf quaternion (or MuJoCo's (w, x, y, z) array)."""
    if isinstance(rotation, (Gf.Quatf, Gf.Quatd)):
        rotation = [rotation.GetReal(), *rotation.GetImaginary()]
    matrix3 = np.zeros(9)
    mujoco.mju_quat2Mat(matrix3, np.asarray(rotation, dtype=np.float64))
    matrix = np.eye(4)
    matrix[:3, :3] = matrix3.reshape(3, 3)
    matrix[:3, 3] = np.asarray(position, dtype=np.float64)
    return matrix


def rotation_angle(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (rad) of the rotation between two (4, 4) poses, robust near zero."""
    quaternion = np.zeros(4)
    mujoco.mju_mat2Quat(quaternion, (a[:3, :3].T @ b[:3, :3]).reshape(-1))
    return 2.0 * math.atan2(float(np.linalg.norm(quaternion[1:])), abs(float(quaternion[0])))


def mujoco_configuration(model: mujoco.MjModel, rng: np.random.Generator) -> np.ndarray:
    """A random qpos: hinge/slide inside their limits (±1 around qpos0 when unlimited), random unit
    quaternions for ball and free joints, free positions in ±1 m."""
    qpos = model.qpos0.copy()
    for joint in range(model.njnt):
        address, kind = int(model.jnt_qposadr[joint]), int(model.jnt_type[joint])
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            qpos[address:address + 3] = rng.uniform(-1.0, 1.0, 3)
            quaternion = rng.normal(size=4)
            qpos[address + 3:address + 7] = quaternion / np.linalg.norm(quaternion)
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            quaternion = rng.normal(size=4)
            qpos[address:address + 4] = quaternion / np.linalg.norm(quaternion)
        else:
            low, high = model.jnt_range[joint] if model.jnt_limited[joint] else (qpos[address] - 1, qpos[address] + 1)
            qpos[address] = rng.uniform(low, high)
    return qpos


def usd_coordinates(model: mujoco.MjModel, qpos: np.ndarray) -> tuple[dict[str, object], dict[str, np.ndarray]]:
    """MuJoCo qpos → USD joint coordinates by joint name (degrees for hinges, metres for slides, both minus
    MuJoCo's qpos0; quaternions for balls) and free root poses by body name."""
    coordinates: dict[str, object] = {}
    free: dict[str, np.ndarray] = {}
    for joint in range(model.njnt):
        address, kind = int(model.jnt_qposadr[joint]), int(model.jnt_type[joint])
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            free[body_name(model, int(model.jnt_bodyid[joint]))] = pose(qpos[address:address + 3],
                                                                          qpos[address + 3:address + 7])
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            coordinates[joint_name(model, joint)] = qpos[address:address + 4]
        elif kind == mujoco.mjtJoint.mjJNT_HINGE:
            coordinates[joint_name(model, joint)] = math.degrees(qpos[address] - model.qpos0[address])
        else:
            coordinates[joint_name(model, joint)] = qpos[address] - model.qpos0[address]
    return coordinates, free


def body_prims(stage: Usd.Stage) -> dict[str, str]:
    """MuJoCo body name → prim path of its link (rigid bodies and static links; intermediate links of
    stacked joints are not MuJoCo bodies)."""
    found = {}
    for prim in stage.Traverse():
        name = prim.GetAttribute("usdforge:sourceName")
        if not name or prim.GetParent() != stage.GetDefaultPrim() or prim.HasAttribute("usdforge:stackedJointsOf"):
            continue
        if prim.IsA(UsdGeom.Xform) and (prim.HasAPI(UsdPhysics.RigidBodyAPI) or prim.GetChildren()):
            found[name.Get()] = str(prim.GetPath())
    return found


# ---- tests of the helpers ------------------------------------------------------------------------------

def test_kinematics_helper_moves_a_hinge_like_mujoco(tmp_path):
    """The test FK itself: a hand-written two-link MJCF (hinge with ref, offset anchor) at random angles."""
    source = tmp_path / "arm.xml"
    source.write_text("""<mujoco model="arm"><compiler angle="radian"/><worldbody>
      <body name="a" pos="0 0 1"><freejoint/><geom type="box" size=".1 .1 .1"/>
        <body name="b" pos="0.3 0 0" euler="0.2 0.1 0"><joint name="h" axis="0 1 1" pos="0.05 0 0" ref="0.4"
          range="-1 1"/><geom type="capsule" size=".02 .1"/></body></body></worldbody></mujoco>""")
    result = converted(source)
    stage = Usd.Stage.Open(str(result.usd_path))
    model = compiled(source)
    data = mujoco.MjData(model)
    kinematics = UsdKinematics(stage)
    bodies = body_prims(stage)
    rng = np.random.default_rng(1)
    for _ in range(5):
        data.qpos[:] = mujoco_configuration(model, rng)
        mujoco.mj_kinematics(model, data)
        coordinates, free = usd_coordinates(model, data.qpos)
        world = kinematics.poses(coordinates, {bodies[k]: v for k, v in free.items()})
        for body in ("a", "b"):
            index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
            expected = pose(data.xpos[index], data.xquat[index])
            assert np.abs(world[bodies[body]][:3, 3] - expected[:3, 3]).max() < 1e-6
            assert rotation_angle(world[bodies[body]], expected) < 1e-6
    # And it notices a wrong angle: the helper can fail.
    coordinates["h"] += 5.0
    world = kinematics.poses(coordinates, {bodies[k]: v for k, v in free.items()})
    index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "b")
    assert rotation_angle(world[bodies["b"]], pose(data.xpos[index], data.xquat[index])) > 0.05
    assert kinematics.multiple_parents == []
    # A second parent joint of b (a loop the tree cannot hold) is reported.
    extra = UsdPhysics.FixedJoint.Define(stage, stage.GetDefaultPrim().GetPath().AppendChild("extra_parent"))
    extra.CreateBody0Rel().SetTargets([bodies["a"]])
    extra.CreateBody1Rel().SetTargets([bodies["b"]])
    assert UsdKinematics(stage).multiple_parents == [bodies["b"]]
