"""Isaac Lab's ``ArticulationCfg`` for a written robot: ``<stem>_cfg.py`` beside its USD (docs/usd_layout.md).

Read back from the composed USD (so it says what the asset says): the joints Isaac Lab drives (revolute
and prismatic, not excluded from the articulation, named by their prim names as Isaac Lab names them),
their limits, drives and velocity limits, the articulation root and whether the base is fixed. The file
imports Isaac Lab 3.0 only when it is loaded; usdforge never imports it.

- ``spawn``: ``UsdFileCfg`` with the USD path relative to the cfg file (resolved when loaded).
- ``init_state``: ``joint_pos`` = the default pose (a MuJoCo keyframe the entry names, else joint zero)
  clamped into the limits (Isaac Lab refuses a default outside them); for a floating base ``pos`` and
  ``rot`` (x, y, z, w) = the root body's rest pose in the asset (the base height), for a fixed base the
  identity (the asset's origin is the anchor: the root body sits at ``ROOT_OFFSET`` from it).
- ``actuators``: ``ImplicitActuatorCfg`` groups: ``drives`` (joints with a ``DriveAPI``: stiffness and
  damping in N·m/rad or N/m, ``effort_limit_sim`` = maxForce, ``velocity_limit_sim`` from
  ``physxJoint:maxJointVelocity`` in rad/s or m/s) and ``passive`` (spherical joints; no drive, or maxForce 0 as URDF's
  ``effort="0"``: zero gains); a joint with no effort limit, or 0, gets ``_PASSIVE_EFFORT`` (MuJoCo-Warp
  refuses an empty force range).
- ``SIM_DT``: the source's time step where the asset has a ``PhysicsScene`` (else None).
- A robot without joints (one free body) gets a ``RigidObjectCfg``, ``RIGID_OBJECT_CFG``, instead.
- ``FIXED_BASE``: the asset fixes its base itself: leave ``spawn.fix_root_link`` unset (Isaac Lab 3.0.0's
  ``fix_root_link=True`` raises "Cannot fix non-rigid articulation root" on it; see the README).
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterable, Iterator

from pxr import Sdf, Usd, UsdPhysics

from usdforge.rules.outputs import articulation_cfg_file_name

#: Effort limit (N·m or N) written where the asset has none or 0: without one, MuJoCo-Warp (Isaac Lab's
#: Newton solver) refuses the joint's force range ("actfrcrange[0] should be smaller than actfrcrange[1]").
_PASSIVE_EFFORT = 1.0e6
def _joint_facts(stage: Usd.Stage) -> list[dict]:
    """Every joint Isaac Lab drives: name, angular, limits (rad or m), drive gains (SI per radian)."""
    facts = []
    root = stage.GetDefaultPrim()
    for prim in Usd.PrimRange(root):
        angular = prim.IsA(UsdPhysics.RevoluteJoint)
        if not (angular or prim.IsA(UsdPhysics.PrismaticJoint)):
            continue
        if prim.GetAttribute("physics:excludeFromArticulation").Get():
            continue
        scale = math.pi / 180.0 if angular else 1.0  # USD degrees → radians; per degree → per radian
        lower, upper = (prim.GetAttribute(f"physics:{n}Limit").Get() for n in ("lower", "upper"))
        axis = "angular" if angular else "linear"
        drive = UsdPhysics.DriveAPI(prim, axis) if prim.HasAPI(UsdPhysics.DriveAPI, axis) else None
        fact = {"name": prim.GetName(), "angular": angular,
                "lower": lower * scale if lower is not None and abs(lower) < 1e30 else None,
                "upper": upper * scale if upper is not None and abs(upper) < 1e30 else None,
                "drive": drive is not None}
        if drive is not None:
            stiffness, damping = drive.GetStiffnessAttr().Get(), drive.GetDampingAttr().Get()
            force = drive.GetMaxForceAttr().Get()
            fact["stiffness"] = float(stiffness or 0.0) / scale
            fact["damping"] = float(damping or 0.0) / scale
            fact["effort"] = float(force) if force is not None and math.isfinite(force) and force < 1e30 else None
        velocity = prim.GetAttribute("physxJoint:maxJointVelocity").Get()
        fact["velocity"] = float(velocity) * scale if velocity is not None and velocity < 1e30 else None
        facts.append(fact)
    return facts


def _base(stage: Usd.Stage) -> tuple[bool, list[float], list[float], list[float]]:
    """(fixed, pos, rot (x, y, z, w), root offset) of the articulation in the asset's frame."""
    root = stage.GetDefaultPrim()
    carrier = next((p for p in Usd.PrimRange(root) if p.HasAPI(UsdPhysics.ArticulationRootAPI)), None)
    identity = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]
    if carrier is None or not carrier.HasAPI(UsdPhysics.RigidBodyAPI):
        # The API on the robot's Xform: a fixed base anchored at the asset's origin.
        offset = [0.0, 0.0, 0.0]
        for prim in Usd.PrimRange(root):
            if prim.IsA(UsdPhysics.FixedJoint):
                joint = UsdPhysics.FixedJoint(prim)
                if joint.GetBody0Rel().GetTargets() in ([], [root.GetPath()]) and joint.GetBody1Rel().GetTargets():
                    body = stage.GetPrimAtPath(joint.GetBody1Rel().GetTargets()[0])
                    offset = _pose(body)[0]
                    break
        return True, *identity, offset
    pos, rot = _pose(carrier)
    return False, pos, rot, [0.0, 0.0, 0.0]


def _pose(prim: Usd.Prim) -> tuple[list[float], list[float]]:
    """A body's rest pose in the asset (bodies are authored flat under the root): pos, rot (x, y, z, w)."""
    from pxr import UsdGeom

    matrix = UsdGeom.Xformable(prim).GetLocalTransformation()
    t, q = matrix.ExtractTranslation(), matrix.ExtractRotationQuat()
    return [round(float(v), 9) for v in t], [round(float(v), 9) for v in (*q.GetImaginary(), q.GetReal())]


def source_time_step(stage: Usd.Stage) -> float | None:
    """Seconds per step of the asset's own ``PhysicsScene`` (``import_physics_scene``: MuJoCo's
    ``<option timestep>``), or None when it has none."""
    for prim in Usd.PrimRange(stage.GetDefaultPrim()):
        if prim.IsA(UsdPhysics.Scene):
            for name in ("newton:timeStepsPerSecond", "physxScene:timeStepsPerSecond"):
                steps = prim.GetAttribute(name).Get()
                if steps:
                    return 1.0 / float(steps)
    return None


def default_joint_pos(joints: list[dict], pose: dict[str, float] | None = None) -> dict[str, float]:
    """The default pose: ``pose`` (joint prim name → rad or m) where given, else 0, clamped into the limits."""
    out = {}
    for joint in joints:
        value = float((pose or {}).get(joint["name"], 0.0))
        lower, upper = joint["lower"], joint["upper"]
        if lower is not None and upper is not None and upper - lower < 2 * _INSIDE:
            value = 0.5 * (lower + upper)
        else:
            if lower is not None:
                value = max(value, lower + _INSIDE)
            if upper is not None:
                value = min(value, upper - _INSIDE)
        out[joint["name"]] = value
    return out


#: How far inside a limit a clamped default lies (rad or m): Isaac Lab compares in float32 against limits
#: it converts from degrees itself, so a default exactly at a limit can read as outside.
_INSIDE = 1e-5


def _literal(value) -> str:
    """A Python literal of ``value`` (dicts and lists keep their order; floats to 7 significant digits)."""
    if isinstance(value, float):  # 7 significant digits: the asset's values are float32
        return repr(float(f"{value:.7g}") + 0.0)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


#: Payload layers no fact of the cfg comes from (shapes, their materials and prototypes): left out of the
#: stage it is read from (anymal_c: the stage opens in a third of the time).
_UNREAD_LAYERS = ("instances", "materials", "geometry")


def _facts_stage(usd_path: Path) -> Usd.Stage:
    """The robot at ``usd_path`` as the cfg reads it: for a layered asset, a stage on the payload layers
    but ``_UNREAD_LAYERS``, as sublayers in the payloads' order (strongest first) - the same opinions on the
    same paths for every prim the cfg reads (bodies, joints, the scene); a single file as it is."""
    from usdforge.rules.outputs import ROBOT_LAYER_FILES

    interface = Sdf.Layer.FindOrOpen(str(usd_path))
    root = interface.GetPrimAtPath(Sdf.Path.absoluteRootPath.AppendChild(interface.defaultPrim)) \
        if interface is not None and interface.defaultPrim else None
    payloads = list(root.payloadList.prependedItems) if root is not None else []
    unread = {ROBOT_LAYER_FILES[role] for role in _UNREAD_LAYERS}
    if not payloads or any(p.primPath != root.path for p in payloads):
        return Usd.Stage.Open(str(usd_path))
    stage_root = Sdf.Layer.CreateAnonymous("facts.usda")
    stage_root.subLayerPaths = [os.path.normpath(usd_path.parent / p.assetPath) for p in payloads
                                if p.assetPath not in unread]
    stage_root.defaultPrim = interface.defaultPrim
    return Usd.Stage.Open(stage_root)


def render_articulation_cfg(usd_path: Path, pose: dict[str, float] | None = None) -> str:
    """The text of ``<stem>_cfg.py`` for the robot at ``usd_path`` (module docstring)."""
    stage = _facts_stage(usd_path)
    root = stage.GetDefaultPrim()
    if not any(p.HasAPI(UsdPhysics.ArticulationRootAPI) for p in Usd.PrimRange(root)):
        return _render_rigid_object(usd_path, stage)
    joints = _joint_facts(stage)
    fixed, pos, rot, offset = _base(stage)
    # A drive whose maxForce is 0 (URDF effort="0": an unactuated joint) is passive: MuJoCo refuses a
    # zero actuator force range, so its group lifts the limit, harmless with zero gains.
    driven = [j for j in joints if j["drive"] and j.get("effort") != 0.0]
    passive = [j for j in joints if j not in driven]
    groups = []
    if driven:
        fields = [f"joint_names_expr={_literal([j['name'] for j in driven])}",
                  f"stiffness={_literal({j['name']: j['stiffness'] for j in driven})}",
                  f"damping={_literal({j['name']: j['damping'] for j in driven})}"]
        efforts = {j["name"]: j["effort"] if j["effort"] else _PASSIVE_EFFORT for j in driven}
        fields.append(f"effort_limit_sim={_literal(efforts)}")
        velocities = {j["name"]: j["velocity"] for j in driven if j["velocity"] is not None}
        if velocities:
            fields.append(f"velocity_limit_sim={_literal(velocities)}")
        groups.append(("drives", fields))
    # Spherical joints are three DoF to Isaac Lab, named <name>:0..2 by its Newton backend; the pattern
    # also matches the bare name, so it never goes unmatched (Isaac Lab raises on an unmatched pattern).
    spherical = [f"{p.GetName()}(:[0-2])?" for p in Usd.PrimRange(root) if p.IsA(UsdPhysics.SphericalJoint)
                 and not p.GetAttribute("physics:excludeFromArticulation").Get()]
    if passive or spherical:
        fields = [f"joint_names_expr={_literal([j['name'] for j in passive] + spherical)}", "stiffness=0.0",
                  "damping=0.0"]
        fields.append(f"effort_limit_sim={_PASSIVE_EFFORT!r}")
        groups.append(("passive", fields))
    actuators = "".join(f"        {name!r}: ImplicitActuatorCfg(\n" + "".join(f"            {f},\n" for f in fields)
                        + "        ),\n" for name, fields in groups)
    name = stage.GetDefaultPrim().GetName()
    fix_note = ("The asset fixes its base to the world itself (anchored at its origin): leave\n"
                "``spawn.fix_root_link`` unset; Isaac Lab 3.0.0's ``fix_root_link=True`` raises \"Cannot fix\n"
                "non-rigid articulation root\" on it." if fixed else
                "A floating base; ``spawn.fix_root_link=True`` fixes it at ``init_state.pos``.")
    return f'''"""Isaac Lab 3.0 ``ArticulationCfg`` of ``{usd_path.name}`` ({name}), generated by usdforge: do not edit.

{fix_note}
Units: rad, m, N·m/rad (N/m), N·m·s/rad (N·s/m), N·m (N), rad/s (m/s); ``rot`` is (x, y, z, w).
"""

from pathlib import Path

import isaaclab.sim as sim_utils
from isaaclab.actuators import ImplicitActuatorCfg
from isaaclab.assets import ArticulationCfg

USD_PATH = str(Path(__file__).resolve().parent / {usd_path.name!r})
#: Whether the asset's base is fixed to the world (by the asset itself).
FIXED_BASE = {fixed!r}
#: The root body's position in the asset's frame (a fixed base: from the anchor at the asset's origin).
ROOT_OFFSET = {_literal(offset)}
#: Seconds per physics step of the source (its PhysicsScene), for ``SimulationCfg(dt=...)``; None: it gives
#: none. Stiff models (agility_cassie: 0.0005 s) go unstable at Isaac Lab's usual 0.005 s.
SIM_DT = {_literal(source_time_step(stage))}

ARTICULATION_CFG = ArticulationCfg(
    spawn=sim_utils.UsdFileCfg(usd_path=USD_PATH),
    init_state=ArticulationCfg.InitialStateCfg(
        pos={_literal(pos)},
        rot={_literal(rot)},
        joint_pos={_literal(default_joint_pos(joints, pose))},
    ),
    actuators={{
{actuators}    }},
)
'''


def _render_rigid_object(usd_path: Path, stage: Usd.Stage) -> str:
    """A robot without joints (one free body, such as a drone) is no articulation to Isaac Lab: its
    ``RigidObjectCfg`` (``RIGID_OBJECT_CFG``), with the body's rest pose as ``init_state``."""
    root = stage.GetDefaultPrim()
    body = next((p for p in Usd.PrimRange(root) if p.HasAPI(UsdPhysics.RigidBodyAPI)), None)
    pos, rot = _pose(body) if body is not None else ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    return f'''"""Isaac Lab 3.0 ``RigidObjectCfg`` of ``{usd_path.name}`` ({root.GetName()}), generated by usdforge: do not edit.

The asset has no joints, so Isaac Lab spawns it as a rigid object, not an articulation.
Units: m; ``rot`` is (x, y, z, w).
"""

from pathlib import Path

import isaaclab.sim as sim_utils
from isaaclab.assets import RigidObjectCfg

USD_PATH = str(Path(__file__).resolve().parent / {usd_path.name!r})
#: Whether the asset's base is fixed to the world (by the asset itself).
FIXED_BASE = False
#: The root body's position in the asset's frame (a fixed base: from the anchor at the asset's origin).
ROOT_OFFSET = (0.0, 0.0, 0.0)
#: Seconds per physics step of the source (its PhysicsScene), for ``SimulationCfg(dt=...)``; None: it gives
#: none. Stiff models (agility_cassie: 0.0005 s) go unstable at Isaac Lab's usual 0.005 s.
SIM_DT = {_literal(source_time_step(stage))}

RIGID_OBJECT_CFG = RigidObjectCfg(
    spawn=sim_utils.UsdFileCfg(usd_path=USD_PATH),
    init_state=RigidObjectCfg.InitialStateCfg(pos={_literal(pos)}, rot={_literal(rot)}),
)
'''


#: The layers saved inside ``saved_layers_held`` (None outside it).
_HELD: ContextVar[list[Sdf.Layer] | None] = ContextVar("usdforge_saved_layers", default=None)


@contextmanager
def saved_layers_held(hold: bool = True) -> Iterator[None]:
    """Within (``hold``): the layers a writer saves (``hold_saved``) stay open, so that
    ``render_articulation_cfg``'s ``Usd.Stage.Open`` finds them in Sdf's layer registry instead of reading
    the files just written back (simple_humanoid: 12 -> 6 ms, cartpole 5.5 -> 0.6 ms). Released on leaving."""
    token = _HELD.set([] if hold else None)
    try:
        yield
    finally:
        _HELD.reset(token)


def hold_saved(layers: Iterable[Sdf.Layer]) -> None:
    """Keep ``layers`` open until the enclosing ``saved_layers_held`` ends (nothing outside one). Only
    layers saved from their contents: one whose file was written from other bytes (a layer restored from
    the build cache, left empty) must be read from its file."""
    held = _HELD.get()
    if held is not None:
        held.extend(layers)


def write_articulation_cfg(usd_path: Path, pose: dict[str, float] | None = None) -> Path:
    """Write ``<stem>_cfg.py`` beside ``usd_path``; return its path. Inside a conversion whose build cache
    holds this unit under its key (``rules.robot.layer_reuse``), its bytes come from there."""
    from usdforge.rules.robot.layer_reuse import reused

    path = usd_path.with_name(articulation_cfg_file_name(usd_path.name))
    data = reused("articulation_cfg")
    if data is not None:
        path.write_bytes(data[path.name])
    else:
        path.write_text(render_articulation_cfg(usd_path, pose))
    return path
