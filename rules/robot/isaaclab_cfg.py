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
import struct
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterable, Iterator

from pxr import Gf, Sdf, Tf, Usd

from usdforge.rules.native_loads import import_exclusively
from usdforge.rules.outputs import articulation_cfg_file_name

#: Effort limit (N·m or N) written where the asset has none or 0: without one, MuJoCo-Warp (Isaac Lab's
#: Newton solver) refuses the joint's force range ("actfrcrange[0] should be smaller than actfrcrange[1]").
_PASSIVE_EFFORT = 1.0e6


class _Walk:
    """The prims under a stage's default prim, walked once, with each prim's type name and applied API schemas:
    the facts ask five questions of every prim, and ``IsA``/``HasAPI`` cost about a microsecond each per
    prim. ``is_a`` answers ``Usd.Prim.IsA`` once per type name (it depends on the type alone); ``with_api``
    asks ``Usd.Prim.HasAPI`` of a schema no other API schema derives from (its name in the applied list).
    simple_humanoid's cfg: 4.3 -> 4.1 ms; cartpole's 1.55 -> 1.2 ms.

    Schemas are named by their C++ type (``UsdPhysicsRevoluteJoint``), as ``Tf.Type``: the USD libraries hold
    them once pxr.Usd is loaded, and the Python modules of UsdPhysics, UsdGeom and UsdShade (about 40 ms of
    a one-off ``usdforge convert``) need not be."""

    def __init__(self, stage: Usd.Stage):
        self.root = stage.GetDefaultPrim()
        self.prims = [(prim, prim.GetTypeName(), prim.GetAppliedSchemas()) for prim in Usd.PrimRange(self.root)]
        self._kinds: dict[tuple[str, str], bool] = {}

    def is_a(self, prim: Usd.Prim, type_name: str, schema: str) -> bool:
        """``prim.IsA`` the schema whose C++ type is named ``schema`` (``UsdPhysicsRevoluteJoint``)."""
        key = (type_name, schema)
        kind = self._kinds.get(key)
        if kind is None:
            kind = self._kinds[key] = prim.IsA(_schema_type(schema))
        return kind

    def of_type(self, schema: str) -> list[Usd.Prim]:
        """The prims that are a ``schema`` (its C++ type's name), in traversal order."""
        return [prim for prim, type_name, _ in self.prims if self.is_a(prim, type_name, schema)]

    def with_api(self, name: str) -> list[Usd.Prim]:
        """The prims with the API schema ``name`` (``PhysicsArticulationRootAPI``) applied, in traversal order."""
        return [prim for prim, _, applied in self.prims if name in applied]


def _schema_type(name: str) -> Tf.Type:
    """The ``Tf.Type`` of the schema whose C++ type is ``name``; ValueError for one the libraries lack."""
    found = _SCHEMA_TYPES.get(name)
    if found is None:
        found = Tf.Type.FindByName(name)
        if found.isUnknown:
            raise ValueError(f"no USD schema type {name}")
        _SCHEMA_TYPES[name] = found
    return found


_SCHEMA_TYPES: dict[str, Tf.Type] = {}


def _joint_facts(walk: _Walk) -> list[dict]:
    """Every joint Isaac Lab drives: name, angular, limits (rad or m), drive gains (SI per radian)."""
    facts = []
    for prim, type_name, applied in walk.prims:
        angular = walk.is_a(prim, type_name, "UsdPhysicsRevoluteJoint")
        if not (angular or walk.is_a(prim, type_name, "UsdPhysicsPrismaticJoint")):
            continue
        if prim.GetAttribute("physics:excludeFromArticulation").Get():
            continue
        scale = math.pi / 180.0 if angular else 1.0  # USD degrees → radians; per degree → per radian
        lower, upper = (prim.GetAttribute(f"physics:{n}Limit").Get() for n in ("lower", "upper"))
        axis = "angular" if angular else "linear"
        drive = f"PhysicsDriveAPI:{axis}" in applied
        fact = {"name": prim.GetName(), "path": str(prim.GetPath()), "angular": angular,
                "lower": lower * scale if lower is not None and abs(lower) < 1e30 else None,
                "upper": upper * scale if upper is not None and abs(upper) < 1e30 else None,
                "drive": drive}
        if drive:  # the DriveAPI's attributes (their schema fallbacks where not authored)
            stiffness, damping, force = (prim.GetAttribute(f"drive:{axis}:physics:{name}").Get()
                                         for name in ("stiffness", "damping", "maxForce"))
            fact["stiffness"] = float(stiffness or 0.0) / scale
            fact["damping"] = float(damping or 0.0) / scale
            fact["effort"] = float(force) if force is not None and math.isfinite(force) and force < 1e30 else None
        velocity = prim.GetAttribute("physxJoint:maxJointVelocity").Get()
        fact["velocity"] = float(velocity) * scale if velocity is not None and velocity < 1e30 else None
        facts.append(fact)
    return facts


def _base(walk: _Walk) -> tuple[bool, list[float], list[float], list[float]]:
    """(fixed, pos, rot (x, y, z, w), root offset) of the articulation in the asset's frame."""
    root = walk.root
    carriers = walk.with_api("PhysicsArticulationRootAPI")
    carrier = carriers[0] if carriers else None
    identity = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]
    if carrier is None or not carrier.HasAPI(_schema_type("UsdPhysicsRigidBodyAPI")):
        # The API on the robot's Xform: a fixed base anchored at the asset's origin.
        offset = [0.0, 0.0, 0.0]
        for prim in walk.of_type("UsdPhysicsFixedJoint"):
            body0, body1 = (prim.GetRelationship(f"physics:body{n}").GetTargets() for n in (0, 1))
            if body0 in ([], [root.GetPath()]) and body1:
                body = prim.GetStage().GetPrimAtPath(body1[0])
                offset = _pose(body)[0]
                break
        return True, *identity, offset
    pos, rot = _pose(carrier)
    return False, pos, rot, [0.0, 0.0, 0.0]


def _pose(prim: Usd.Prim) -> tuple[list[float], list[float]]:
    """A body's rest pose in the asset (bodies are authored flat under the root): pos, rot (x, y, z, w)."""
    matrix = _local_matrix(prim)
    if matrix is None:  # UsdGeom, never beside another thread's native load (rules.native_loads)
        matrix = import_exclusively("pxr.UsdGeom").Xformable(prim).GetLocalTransformation()
    t, q = matrix.ExtractTranslation(), matrix.ExtractRotationQuat()
    return [round(float(v), 9) for v in t], [round(float(v), 9) for v in (*q.GetImaginary(), q.GetReal())]


def _local_matrix(prim: Usd.Prim) -> Any:
    """The local transformation of a prim whose ops are a translate and an orient (how the writer authors a
    body), composed as UsdGeom composes them but without its Python module; None for any other op order
    (UsdGeom's ``GetLocalTransformation`` then)."""
    order = prim.GetAttribute("xformOpOrder").Get()
    if order is None or list(order) != ["xformOp:translate", "xformOp:orient"]:
        return None
    translate, orient = (prim.GetAttribute(name).Get() for name in order)
    if translate is None or orient is None:
        return None
    # UsdGeom's matrix to the last bit (the orient through a Gf.Rotation: a quaternion set directly differs
    # in the last bits on two thirds of the corpus's bodies).
    return Gf.Matrix4d(Gf.Rotation(Gf.Quatd(orient)), Gf.Vec3d(translate))


def source_time_step(walk: _Walk) -> float | None:
    """Seconds per step of the asset's own ``PhysicsScene`` (``import_physics_scene``: MuJoCo's
    ``<option timestep>``), or None when it has none."""
    for prim in walk.of_type("UsdPhysicsScene"):
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
    # Compared normalised: the payloads' asset paths are written "./payloads/...", which as given matched
    # none of these (every layer was read: simple_humanoid's cfg 3.3 -> 2.4 ms).
    unread = {os.path.normpath(ROBOT_LAYER_FILES[role]) for role in _UNREAD_LAYERS}
    if not payloads or any(p.primPath != root.path for p in payloads):
        return Usd.Stage.Open(str(usd_path))
    stage_root = Sdf.Layer.CreateAnonymous("facts.usda")
    folder = str(usd_path.parent)  # os.path on strings: pathlib's joins cost more than the rest of this
    stage_root.subLayerPaths = [os.path.normpath(os.path.join(folder, asset)) for asset in
                                (p.assetPath for p in payloads) if os.path.normpath(asset) not in unread]
    stage_root.defaultPrim = interface.defaultPrim
    return Usd.Stage.Open(stage_root)


def render_articulation_cfg(usd_path: Path, pose: dict[str, float] | None = None) -> str:
    """The text of ``<stem>_cfg.py`` for the robot at ``usd_path`` (module docstring)."""
    return render_facts(articulation_facts(_facts_stage(usd_path)), usd_path.name, pose)


def articulation_facts(stage: Usd.Stage) -> dict:
    """What the cfg says of the robot on ``stage`` (plain data; ``render_facts`` writes it): whether it is a
    rigid object, its name, the time step, and for an articulation its joints (``_joint_facts``), the base
    and the spherical joints' name patterns; for a rigid object its body's pose."""
    walk = _Walk(stage)  # one walk for every question below
    facts = {"name": walk.root.GetName(), "sim_dt": source_time_step(walk)}
    if not walk.with_api("PhysicsArticulationRootAPI"):
        bodies = walk.with_api("PhysicsRigidBodyAPI")
        pos, rot = _pose(bodies[0]) if bodies else ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
        return {**facts, "rigid": True, "pos": pos, "rot": rot}
    fixed, pos, rot, offset = _base(walk)
    # Spherical joints are three DoF to Isaac Lab, named <name>:0..2 by its Newton backend; the pattern
    # also matches the bare name, so it never goes unmatched (Isaac Lab raises on an unmatched pattern).
    spherical = [f"{p.GetName()}(:[0-2])?" for p in walk.of_type("UsdPhysicsSphericalJoint")
                 if not p.GetAttribute("physics:excludeFromArticulation").Get()]
    return {**facts, "rigid": False, "joints": _joint_facts(walk), "fixed": fixed, "pos": pos, "rot": rot,
            "offset": offset, "spherical": spherical}


def render_facts(facts: dict, usd_name: str, pose: dict[str, float] | None = None) -> str:
    """The text of ``<stem>_cfg.py`` (for the USD file ``usd_name``) from ``articulation_facts``."""
    if facts["rigid"]:
        return _render_rigid_object(usd_name, facts)
    joints, fixed, pos, rot, offset = facts["joints"], facts["fixed"], facts["pos"], facts["rot"], facts["offset"]
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
    spherical = facts["spherical"]
    if passive or spherical:
        fields = [f"joint_names_expr={_literal([j['name'] for j in passive] + spherical)}", "stiffness=0.0",
                  "damping=0.0"]
        fields.append(f"effort_limit_sim={_PASSIVE_EFFORT!r}")
        groups.append(("passive", fields))
    actuators = "".join(f"        {name!r}: ImplicitActuatorCfg(\n" + "".join(f"            {f},\n" for f in fields)
                        + "        ),\n" for name, fields in groups)
    name = facts["name"]
    fix_note = ("The asset fixes its base to the world itself (anchored at its origin): leave\n"
                "``spawn.fix_root_link`` unset; Isaac Lab 3.0.0's ``fix_root_link=True`` raises \"Cannot fix\n"
                "non-rigid articulation root\" on it." if fixed else
                "A floating base; ``spawn.fix_root_link=True`` fixes it at ``init_state.pos``.")
    return f'''"""Isaac Lab 3.0 ``ArticulationCfg`` of ``{usd_name}`` ({name}), generated by usdforge: do not edit.

{fix_note}
Units: rad, m, N·m/rad (N/m), N·m·s/rad (N·s/m), N·m (N), rad/s (m/s); ``rot`` is (x, y, z, w).
"""

from pathlib import Path

import isaaclab.sim as sim_utils
from isaaclab.actuators import ImplicitActuatorCfg
from isaaclab.assets import ArticulationCfg

USD_PATH = str(Path(__file__).resolve().parent / {usd_name!r})
#: Whether the asset's base is fixed to the world (by the asset itself).
FIXED_BASE = {fixed!r}
#: The root body's position in the asset's frame (a fixed base: from the anchor at the asset's origin).
ROOT_OFFSET = {_literal(offset)}
#: Seconds per physics step of the source (its PhysicsScene), for ``SimulationCfg(dt=...)``; None: it gives
#: none. Stiff models (agility_cassie: 0.0005 s) go unstable at Isaac Lab's usual 0.005 s.
SIM_DT = {_literal(facts["sim_dt"])}

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


def _render_rigid_object(usd_name: str, facts: dict) -> str:
    """A robot without joints (one free body, such as a drone) is no articulation to Isaac Lab: its
    ``RigidObjectCfg`` (``RIGID_OBJECT_CFG``), with the body's rest pose as ``init_state``."""
    pos, rot = facts["pos"], facts["rot"]
    return f'''"""Isaac Lab 3.0 ``RigidObjectCfg`` of ``{usd_name}`` ({facts["name"]}), generated by usdforge: do not edit.

The asset has no joints, so Isaac Lab spawns it as a rigid object, not an articulation.
Units: m; ``rot`` is (x, y, z, w).
"""

from pathlib import Path

import isaaclab.sim as sim_utils
from isaaclab.assets import RigidObjectCfg

USD_PATH = str(Path(__file__).resolve().parent / {usd_name!r})
#: Whether the asset's base is fixed to the world (by the asset itself).
FIXED_BASE = False
#: The root body's position in the asset's frame (a fixed base: from the anchor at the asset's origin).
ROOT_OFFSET = (0.0, 0.0, 0.0)
#: Seconds per physics step of the source (its PhysicsScene), for ``SimulationCfg(dt=...)``; None: it gives
#: none. Stiff models (agility_cassie: 0.0005 s) go unstable at Isaac Lab's usual 0.005 s.
SIM_DT = {_literal(facts["sim_dt"])}

RIGID_OBJECT_CFG = RigidObjectCfg(
    spawn=sim_utils.UsdFileCfg(usd_path=USD_PATH),
    init_state=RigidObjectCfg.InitialStateCfg(pos={_literal(pos)}, rot={_literal(rot)}),
)
'''


#: The layers saved inside ``saved_layers_held`` (None outside it), and the drives patched into the physics
#: layer there (``note_patched_drives``).
_HELD: ContextVar[tuple[list[Sdf.Layer], dict] | None] = ContextVar("usdforge_saved_layers", default=None)


@contextmanager
def saved_layers_held(hold: bool = True) -> Iterator[None]:
    """Within (``hold``): the layers a writer saves (``hold_saved``) stay open, so that
    ``render_articulation_cfg``'s ``Usd.Stage.Open`` finds them in Sdf's layer registry instead of reading
    the files just written back (simple_humanoid: 12 -> 6 ms, cartpole 5.5 -> 0.6 ms). Released on leaving."""
    token = _HELD.set(([], {}) if hold else None)
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
        held[0].extend(layers)


def note_patched_drives(drives: dict[Sdf.Path, Any]) -> None:
    """Record, inside ``saved_layers_held``, that the physics layer was patched (``rules.robot.drive_patch``)
    to hold exactly ``drives`` (joint prim → its drive API schemas and attributes, ``drive_patch.Wanted``):
    the cfg then takes the drives from there and the rest from the cached facts
    (``rules.robot.layer_reuse.FACTS_UNIT``)."""
    held = _HELD.get()
    if held is not None:
        held[1]["physics"] = drives


#: The drive attributes the cfg reads, by fact: joint fact key → attribute name (``drive:<axis>:physics:*``).
_DRIVE_VALUES = {"stiffness": "stiffness", "damping": "damping", "effort": "maxForce"}


def write_articulation_cfg(usd_path: Path, pose: dict[str, float] | None = None) -> Path:
    """Write ``<stem>_cfg.py`` beside ``usd_path``; return its path. Inside a conversion whose build cache
    holds this unit under its key (``rules.robot.layer_reuse``), its bytes come from there. After a drive
    edit patched into the physics layer (which changes only its drives' values), the facts come from the
    ``layer_reuse.FACTS_UNIT`` of an earlier conversion with the same other fields and the drives from the
    patch: no stage is composed. Facts read from a stage are kept there when the drives the cfg reads are the physics
    layer's alone (no other layer holds an opinion on them)."""
    from usdforge.rules.robot.layer_reuse import (FACTS_UNIT, cached_unit, derived, keep_unit, keyed, reused,
                                                  write_restored)

    path = usd_path.with_name(articulation_cfg_file_name(usd_path.name))
    data = reused("articulation_cfg")
    if data is not None:
        write_restored(path, path.name, data[path.name])
        return path
    held = _HELD.get()
    drives = held[1].get("physics") if held is not None else None
    facts = None
    if drives is not None:
        facts = _with_drives(cached_unit(FACTS_UNIT), drives)
        if facts is not None:
            derived("articulation_cfg")
    if facts is None:
        stage = _facts_stage(usd_path)
        facts = articulation_facts(stage)
        if keyed(FACTS_UNIT) and _drives_from_physics_alone(stage, facts):
            keep_unit(FACTS_UNIT, _without_drives(facts))
    path.write_text(render_facts(facts, usd_path.name, pose))
    return path


def _without_drives(facts: dict) -> dict:
    """``facts`` without its joints' drive values (``_DRIVE_VALUES``)."""
    if facts["rigid"]:
        return facts
    return {**facts, "joints": [{k: v for k, v in joint.items() if k not in _DRIVE_VALUES}
                                for joint in facts["joints"]]}


def _drives_from_physics_alone(stage: Usd.Stage, facts: dict) -> bool:
    """Whether every drive the cfg read on ``stage`` (its API schema and ``_DRIVE_VALUES``' attributes) is
    the physics layer's opinion alone: no other layer of the stage names a drive schema or attribute on a
    joint the facts list (a rigid object's facts read none). False without a physics layer."""
    from usdforge.rules.outputs import ROBOT_LAYER_FILES

    if facts["rigid"]:  # no joint: nothing of the drives is read
        return True
    physics_name = os.path.normpath(ROBOT_LAYER_FILES["physics"])
    layers = stage.GetLayerStack(includeSessionLayers=False)
    physics = [layer for layer in layers if os.path.normpath(layer.realPath or "").endswith(physics_name)]
    if len(physics) != 1:
        return False
    others = [layer for layer in layers if layer is not physics[0] and layer != physics[0]]
    for joint in facts["joints"]:
        prim = Sdf.Path(joint["path"])
        axis = "angular" if joint["angular"] else "linear"
        for layer in others:
            spec = layer.GetPrimAtPath(prim)
            if spec is None:
                continue
            if spec.HasInfo("apiSchemas") and any(str(name).startswith("PhysicsDriveAPI:")
                                                  for name in spec.GetInfo("apiSchemas").GetAddedOrExplicitItems()):
                return False
            if any(spec.attributes.get(f"drive:{axis}:physics:{name}") is not None for name in _DRIVE_VALUES.values()):
                return False
    return True


def _with_drives(data: Any, drives: dict[Sdf.Path, Any]) -> dict | None:
    """The cached facts ``data`` (``layer_reuse.FACTS_UNIT``'s) with each joint's drive from ``drives`` (the
    patched physics layer's, as ``_joint_facts`` reads it), or None when ``data`` is not such facts (a cache
    is untrusted) or a joint's drive schema is not what the facts say."""
    facts = _checked_facts(data)
    if facts is None:
        return None
    if facts["rigid"]:
        return facts
    joints = []
    for joint in facts["joints"]:
        axis = "angular" if joint["angular"] else "linear"
        prim = Sdf.Path(joint["path"]) if Sdf.Path.IsValidPathString(joint["path"]) else None
        if prim not in drives:  # a joint the patch did not check
            return None
        want = drives[prim]
        has_drive = want is not None and f"PhysicsDriveAPI:{axis}" in want[0]
        if has_drive != joint["drive"]:
            return None
        if has_drive:
            values = {name: (type_name, value) for name, type_name, value, _ in want[1]}
            scale = math.pi / 180.0 if joint["angular"] else 1.0
            read = {}
            for key, attribute in _DRIVE_VALUES.items():
                typed = values.get(f"drive:{axis}:physics:{attribute}")
                read[key] = None if typed is None else _as_authored(*typed)
                if typed is not None and read[key] is None:
                    return None
            joint = {**joint, "stiffness": float(read["stiffness"] or 0.0) / scale,
                     "damping": float(read["damping"] or 0.0) / scale}
            force = read["effort"]
            joint["effort"] = float(force) if force is not None and math.isfinite(force) and force < 1e30 else None
        joints.append(joint)
    return {**facts, "joints": joints}


def _as_authored(type_name: Sdf.ValueTypeName, value: Any) -> float | None:
    """A scalar drive value as reading it back from the layer gives it (a float rounded to 32 bits, a
    double as it is); None for any other type or a value a float cannot hold."""
    if type_name == Sdf.ValueTypeNames.Double and type(value) is float:
        return value
    if type_name != Sdf.ValueTypeNames.Float or not isinstance(value, (float, int)):
        return None
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return None


#: The keys of a joint's cached facts (``_joint_facts`` without the drive values).
_JOINT_FACTS = frozenset(("name", "path", "angular", "lower", "upper", "drive", "velocity"))


def _checked_facts(facts: Any) -> dict | None:
    """``facts`` (``_without_drives``' form, from JSON) when every field has its type, else None."""
    def floats(value: Any, n: int) -> bool:
        return isinstance(value, list) and len(value) == n and all(type(v) is float for v in value)

    def maybe_float(value: Any) -> bool:
        return value is None or type(value) is float

    if not isinstance(facts, dict) or type(facts.get("rigid")) is not bool or not isinstance(facts.get("name"), str) \
            or not maybe_float(facts.get("sim_dt")) or not floats(facts.get("pos"), 3) \
            or not floats(facts.get("rot"), 4):
        return None
    if facts["rigid"]:
        return facts if set(facts) == {"name", "sim_dt", "rigid", "pos", "rot"} else None
    if set(facts) != {"name", "sim_dt", "rigid", "pos", "rot", "joints", "fixed", "offset", "spherical"} \
            or type(facts.get("fixed")) is not bool \
            or not all(floats(facts.get(k), n) for k, n in (("pos", 3), ("rot", 4), ("offset", 3))) \
            or not isinstance(facts.get("spherical"), list) or not all(isinstance(v, str) for v in facts["spherical"]) \
            or not isinstance(facts.get("joints"), list):
        return None
    for joint in facts["joints"]:
        if not isinstance(joint, dict) or set(joint) != _JOINT_FACTS \
                or not isinstance(joint["name"], str) or not isinstance(joint["path"], str) \
                or type(joint["angular"]) is not bool or type(joint["drive"]) is not bool \
                or not all(maybe_float(joint[k]) for k in ("lower", "upper", "velocity")):
            return None
    return facts
