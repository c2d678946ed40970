"""Helpers for the solvers tests: small UsdPhysics stages written here with pxr, plain-NumPy rigid
transforms for hand-computed references, and the corpus conversions (one per session).

Nothing here uses solvers' own math, so the tests compare against independent code.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

SHARED = Path(__file__).resolve().parents[2] / "shared"


# ---------------------------------------------------------------------------------------------------------
# Rigid transforms (4×4, column convention) written out by hand.


def rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])


def rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s, 0], [0, 1, 0, 0], [-s, 0, c, 0], [0, 0, 0, 1.0]])


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def trans(x: float, y: float, z: float) -> np.ndarray:
    t = np.eye(4)
    t[:3, 3] = (x, y, z)
    return t


def quat_wxyz(t: np.ndarray) -> np.ndarray:
    """Quaternion (w, x, y, z) with w >= 0 of a transform's rotation (scipy)."""
    x, y, z, w = Rotation.from_matrix(t[:3, :3]).as_quat()
    q = np.array([w, x, y, z])
    return -q if q[0] < 0 else q


def same_rotation(q1: np.ndarray, q2: np.ndarray) -> float:
    """Distance between two unit quaternions as rotations (q and -q are the same rotation)."""
    return float(min(np.abs(q1 - q2).max(), np.abs(q1 + q2).max()))


# ---------------------------------------------------------------------------------------------------------
# Authoring small robots by the docs/usd_layout.md contract.


@dataclass
class Link:
    name: str
    world: np.ndarray  # rest pose (4×4)
    frame_of: str | None = None  # author as a link frame (Xform, no RigidBodyAPI) below this link


@dataclass
class JointDef:
    name: str
    kind: str  # revolute | prismatic | fixed | spherical | d6
    parent: str | None  # None: the world
    child: str
    axis: str = "X"
    frame: np.ndarray = field(default_factory=lambda: np.eye(4))  # joint frame in the child (local1)
    lower: float | None = None  # USD units: degrees for revolute
    upper: float | None = None
    mimic: tuple[str, float, float] | None = None  # (leader joint name, multiplier, offset)
    exclude: bool = False
    cone: tuple[float, float] | None = None  # spherical cone limits, degrees
    locked: Sequence[str] = ()  # d6: LimitAPI tokens locked with low > high
    d6_limits: dict[str, tuple[float, float]] = field(default_factory=dict)


def author_robot(path: Path, links: Sequence[Link], joints: Sequence[JointDef], name: str = "robot",
                 meters_per_unit: float = 1.0) -> Path:
    """Write a stage: links flat under /<name> at their rest world poses (frames below their link),
    joints under /<name>/joints with both local frames consistent with the rest poses."""
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, "Z")
    UsdGeom.SetStageMetersPerUnit(stage, meters_per_unit)
    root = UsdGeom.Xform.Define(stage, f"/{name}")
    stage.SetDefaultPrim(root.GetPrim())
    stage.DefinePrim(f"/{name}/joints", "Scope")
    world = {link.name: link.world for link in links}
    paths: dict[str, str] = {}

    def set_pose(xform, t: np.ndarray) -> None:
        xform.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*(t[:3, 3] / meters_per_unit)))
        w, x, y, z = quat_wxyz(t)
        xform.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(w, Gf.Vec3d(x, y, z)))

    for link in links:
        prim_name = "l_" + re.sub(r"\W", "_", link.name)
        if link.frame_of is None:
            path_ = f"/{name}/{prim_name}"
            xform = UsdGeom.Xform.Define(stage, path_)
            set_pose(xform, link.world)
            UsdPhysics.RigidBodyAPI.Apply(xform.GetPrim())
        else:
            path_ = f"{paths[link.frame_of]}/{prim_name}"
            xform = UsdGeom.Xform.Define(stage, path_)
            set_pose(xform, np.linalg.inv(world[link.frame_of]) @ link.world)
        xform.GetPrim().CreateAttribute("usdforge:sourceName", Sdf.ValueTypeNames.String).Set(link.name)
        paths[link.name] = path_

    joint_paths: dict[str, str] = {}
    for j in joints:
        schema = {
            "revolute": UsdPhysics.RevoluteJoint, "prismatic": UsdPhysics.PrismaticJoint,
            "fixed": UsdPhysics.FixedJoint, "spherical": UsdPhysics.SphericalJoint, "d6": UsdPhysics.Joint,
        }[j.kind]
        jp = f"/{name}/joints/j_" + re.sub(r"\W", "_", j.name)
        joint = schema.Define(stage, jp)
        prim = joint.GetPrim()
        prim.CreateAttribute("usdforge:sourceName", Sdf.ValueTypeNames.String).Set(j.name)
        if j.parent is not None:
            joint.CreateBody0Rel().SetTargets([paths[j.parent]])
        joint.CreateBody1Rel().SetTargets([paths[j.child]])
        local1 = j.frame
        parent_world = world[j.parent] if j.parent is not None else np.eye(4)
        local0 = np.linalg.inv(parent_world) @ world[j.child] @ local1
        for attr, t in ((joint.CreateLocalPos0Attr, local0), (joint.CreateLocalPos1Attr, local1)):
            attr(Gf.Vec3f(*(t[:3, 3] / meters_per_unit)))
        for attr, t in ((joint.CreateLocalRot0Attr, local0), (joint.CreateLocalRot1Attr, local1)):
            w, x, y, z = quat_wxyz(t)
            attr(Gf.Quatf(float(w), float(x), float(y), float(z)))
        if j.kind in ("revolute", "prismatic", "spherical"):
            prim.CreateAttribute("physics:axis", Sdf.ValueTypeNames.Token).Set(j.axis)
        if j.lower is not None:
            prim.CreateAttribute("physics:lowerLimit", Sdf.ValueTypeNames.Float).Set(j.lower)
        if j.upper is not None:
            prim.CreateAttribute("physics:upperLimit", Sdf.ValueTypeNames.Float).Set(j.upper)
        if j.cone is not None:
            prim.CreateAttribute("physics:coneAngle0Limit", Sdf.ValueTypeNames.Float).Set(j.cone[0])
            prim.CreateAttribute("physics:coneAngle1Limit", Sdf.ValueTypeNames.Float).Set(j.cone[1])
        for token in j.locked:
            limit = UsdPhysics.LimitAPI.Apply(prim, token)
            limit.CreateLowAttr(1.0)
            limit.CreateHighAttr(-1.0)
        for token, (lo, hi) in j.d6_limits.items():
            limit = UsdPhysics.LimitAPI.Apply(prim, token)
            limit.CreateLowAttr(lo)
            limit.CreateHighAttr(hi)
        if j.exclude:
            joint.CreateExcludeFromArticulationAttr(True)
        joint_paths[j.name] = jp
    for j in joints:
        if j.mimic is not None:
            leader, mult, off = j.mimic
            prim = stage.GetPrimAtPath(joint_paths[j.name])
            prim.CreateRelationship("usdforge:mimic:joint").SetTargets([joint_paths[leader]])
            prim.CreateAttribute("usdforge:mimic:multiplier", Sdf.ValueTypeNames.Float).Set(mult)
            prim.CreateAttribute("usdforge:mimic:offset", Sdf.ValueTypeNames.Float).Set(off)
    stage.GetRootLayer().Save()
    return path


# ---------------------------------------------------------------------------------------------------------
# Corpus conversions (through the pipeline; other developers' converters).


def shared_dir() -> Path:
    """``../shared`` beside the checkout; tests that need it fail loudly without it."""
    if not (SHARED / "corpus" / "MANIFEST.json").is_file():
        pytest.fail(f"test material missing: expected {SHARED}/corpus (the ../shared folder beside the checkout)")
    return SHARED


def corpus_entry(name: str) -> dict:
    entries = json.loads((shared_dir() / "corpus" / "MANIFEST.json").read_text())
    return next(e for e in entries if e["name"] == name)


def convert_mjcf(corpus_name: str, out_dir: Path) -> Path:
    """The corpus MJCF converted with the default cfg into ``out_dir``."""
    from usdforge.pipeline import MjcfConverter
    from usdforge.schemas import MjcfConverterCfg

    source = shared_dir() / "corpus" / corpus_entry(corpus_name)["path"]
    cfg = MjcfConverterCfg(asset_path=str(source), usd_dir=str(out_dir), usd_file_name=f"{corpus_name}.usda")
    return Path(MjcfConverter(cfg).usd_path)


def convert_urdf(corpus_name: str, out_dir: Path, **cfg_fields) -> Path:
    """The corpus URDF converted (package:// resolved from the manifest) into ``out_dir``."""
    from usdforge.pipeline import UrdfConverter
    from usdforge.schemas import UrdfConverterCfg

    entry = corpus_entry(corpus_name)
    corpus = shared_dir() / "corpus"
    packages = [{"name": k, "path": str(corpus / v)} for k, v in entry["package_paths"].items()]
    cfg = UrdfConverterCfg(asset_path=str(corpus / entry["path"]), usd_dir=str(out_dir),
                           usd_file_name=f"{corpus_name}.usda", ros_package_paths=packages, **cfg_fields)
    return Path(UrdfConverter(cfg).usd_path)


def mujoco_urdf_model(corpus_name: str, out_dir: Path):
    """MuJoCo's model of a corpus URDF: package:// replaced by absolute paths in a temporary copy, and
    ``fusestatic`` off so every link (fixed-joint children included) stays a body to compare."""
    import mujoco

    entry = corpus_entry(corpus_name)
    corpus = shared_dir() / "corpus"
    packages = {k: str(corpus / v) for k, v in entry["package_paths"].items()}
    text = (corpus / entry["path"]).read_text()
    text = re.sub(r"package://([^/]+)/", lambda m: packages[m.group(1)] + "/", text)
    text = re.sub(r"(<robot[^>]*>)", r'\1<mujoco><compiler fusestatic="false" discardvisual="true"/></mujoco>',
                  text, count=1)
    out_dir.mkdir(parents=True, exist_ok=True)
    copy = out_dir / Path(entry["path"]).name
    copy.write_text(text)
    return mujoco.MjModel.from_xml_path(str(copy))
