"""``verify_mjcf``: does a converted USD describe what MuJoCo compiles from its MJCF?

The oracle is MuJoCo's own compiled ``MjModel`` of the source. Compared: every moving body's mass and
principal inertia, every joint's type and limits (USD limits are the source range minus ``ref``, MuJoCo's
``qpos0``), the rest pose of every body, forward kinematics at random in-range configurations (USD side
from UsdPhysics joints alone, ``rules.verify.kinematics``), and each actuator's gains and biases (as the
``mjc:`` actuator prim carries them, unless the cfg overrides them).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from usdforge.rules.verify.findings import CheckResult, Finding
from usdforge.rules.verify.kinematics import UsdKinematics, pose, rotation_angle

POSITION_TOLERANCE = 1e-5  # m
ROTATION_TOLERANCE = 1e-4  # rad
RELATIVE_TOLERANCE = 1e-5  # masses, inertias, gains (single precision in USD)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RELATIVE_TOLERANCE * max(1.0, abs(a), abs(b))


def _value(prim, name: str):
    attribute = prim.GetAttribute(name)
    return attribute.Get() if attribute and attribute.HasAuthoredValue() else None


def verify_mjcf(source: str | Path, stage, cfg: dict[str, Any] | None = None, *, configurations: int = 10,
                seed: int = 0) -> CheckResult:
    """Compare ``stage`` (the converted USD) with MuJoCo's compiled model of ``source`` (module docstring).

    cfg: the conversion's cfg as plain data (``fix_base`` keeps free roots at rest; ``override_*`` skip
    the actuator comparison).
    """
    import mujoco
    from pxr import Usd, UsdPhysics

    from usdforge.rules.mjcf.bodies import body_name, joint_name

    cfg = cfg or {}
    result = CheckResult("mjcf-oracle")
    model = mujoco.MjModel.from_xml_path(str(source))
    root = stage.GetDefaultPrim()
    root_path = str(root.GetPath())
    bodies: dict[str, Any] = {}
    joints: dict[str, Any] = {}
    actuators: dict[str, Any] = {}
    for prim in Usd.PrimRange(root, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)):
        name = _value(prim, "usdforge:sourceName")
        if name is None:
            continue
        if prim.IsA(UsdPhysics.Joint):
            if not _value(prim, "physics:excludeFromArticulation"):
                joints[name] = prim
        elif prim.GetTypeName() == "MjcActuator":
            actuators[name] = prim
        elif prim.GetParent() == root and not prim.HasAttribute("usdforge:stackedJointsOf"):
            bodies[name] = prim

    # Bodies: every moving MuJoCo body is a rigid body with MuJoCo's mass and principal inertia.
    for b in range(1, model.nbody):
        name = body_name(model, b)
        prim = bodies.get(name)
        moving = model.body_weldid[b] != 0
        if prim is None:
            result.add(Finding("mjcf-bodies", root_path, f"MuJoCo body '{name}' has no prim"))
            continue
        if not moving or not prim.HasAPI(UsdPhysics.RigidBodyAPI):
            if moving:
                result.add(Finding("mjcf-bodies", str(prim.GetPath()), f"body '{name}' moves in MuJoCo but "
                                   "is not a rigid body"))
            continue
        mass, expected = _value(prim, "physics:mass"), float(model.body_mass[b])
        if expected > 0 and (mass is None or not _close(mass, expected)):
            result.add(Finding("mjcf-mass", str(prim.GetPath()), f"mass {mass} kg, MuJoCo says {expected:.6g} kg"))
        inertia = _value(prim, "physics:diagonalInertia")
        reference = np.sort(model.body_inertia[b])
        if expected > 0 and (inertia is None or not all(_close(a, e) for a, e in zip(np.sort(inertia), reference))):
            result.add(Finding("mjcf-inertia", str(prim.GetPath()), f"principal inertia {tuple(inertia or ())}, "
                               f"MuJoCo says {tuple(np.round(reference, 9))}"))

    # Joints: types and limits (range minus ref).
    kinds = {mujoco.mjtJoint.mjJNT_HINGE: UsdPhysics.RevoluteJoint, mujoco.mjtJoint.mjJNT_SLIDE:
             UsdPhysics.PrismaticJoint, mujoco.mjtJoint.mjJNT_BALL: UsdPhysics.SphericalJoint}
    for j in range(model.njnt):
        kind = int(model.jnt_type[j])
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            continue
        name = joint_name(model, j)
        prim = joints.get(name)
        if prim is None:
            result.add(Finding("mjcf-joints", root_path, f"MuJoCo joint '{name}' has no joint prim"))
            continue
        path = str(prim.GetPath())
        if not prim.IsA(kinds[kind]):
            result.add(Finding("mjcf-joints", path, f"joint '{name}' is a {prim.GetTypeName()}, MuJoCo's is "
                               f"{mujoco.mjtJoint(kind).name}"))
            continue
        if kind == mujoco.mjtJoint.mjJNT_BALL:
            continue
        scale = 180.0 / math.pi if kind == mujoco.mjtJoint.mjJNT_HINGE else 1.0
        ref = float(model.qpos0[model.jnt_qposadr[j]])
        lower, upper = _value(prim, "physics:lowerLimit"), _value(prim, "physics:upperLimit")
        if model.jnt_limited[j]:
            want = [(model.jnt_range[j][0] - ref) * scale, (model.jnt_range[j][1] - ref) * scale]
            if lower is None or upper is None or not (_close(lower, want[0]) and _close(upper, want[1])):
                result.add(Finding("mjcf-limits", path, f"limits [{lower}, {upper}], MuJoCo's range minus ref "
                                   f"gives [{want[0]:.6g}, {want[1]:.6g}]"))
        elif any(v is not None and math.isfinite(v) and abs(v) < 1e30 for v in (lower, upper)):
            result.add(Finding("mjcf-limits", path, f"limits [{lower}, {upper}] on a joint MuJoCo leaves unlimited"))

    worst = _check_kinematics(model, stage, bodies, cfg, result, configurations, seed)
    if not any(cfg.get(f"override_{k}") is not None for k in ("gain_type", "bias_type", "gain_prm", "bias_prm")):
        _check_actuators(model, actuators, root_path, result)
    result.detail = (f"{model.nbody - 1} bodies, {model.njnt} joints, {model.nu} actuators, "
                     f"FK at rest and {configurations} configurations: max error {worst[0]:.2g} m / {worst[1]:.2g} rad")
    return result


def _check_actuators(model, actuators: dict, root_path: str, result: CheckResult) -> None:
    import mujoco

    for a in range(model.nu):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or f"actuator{a}"
        prim = actuators.get(name)
        if prim is None:
            result.add(Finding("mjcf-actuators", root_path, f"MuJoCo actuator '{name}' has no MjcActuator prim"))
            continue
        bias = model.actuator_biasprm[a].copy()
        if int(model.actuator_trntype[a]) == mujoco.mjtTrn.mjTRN_JOINT:
            # The joint's ref is folded into its coordinate, so into the bias's constant term.
            joint = int(model.actuator_trnid[a][0])
            if int(model.jnt_type[joint]) in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
                bias[0] += bias[1] * model.actuator_gear[a][0] * model.qpos0[model.jnt_qposadr[joint]]
        for attribute, reference in (("mjc:gainPrm", model.actuator_gainprm[a]), ("mjc:biasPrm", bias),
                                     ("mjc:gear", model.actuator_gear[a])):
            value = _value(prim, attribute)
            if value is None or not all(_close(float(v), float(r)) for v, r in zip(value, reference)):
                result.add(Finding("mjcf-actuators", str(prim.GetPath()), f"{attribute} = "
                                   f"{None if value is None else [float(v) for v in value]}, MuJoCo says "
                                   f"{[round(float(r), 9) for r in reference]}"))


def _check_kinematics(model, stage, bodies: dict, cfg: dict, result: CheckResult, configurations: int,
                      seed: int) -> tuple[float, float]:
    import mujoco

    from usdforge.rules.mjcf.bodies import body_name, joint_name

    kinematics = UsdKinematics(stage)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(seed)
    paths = {b: str(bodies[body_name(model, b)].GetPath()) for b in range(1, model.nbody)
             if body_name(model, b) in bodies and str(bodies[body_name(model, b)].GetPath()) in kinematics.rest}
    worst = (0.0, 0.0)
    for index in range(configurations + 1):
        qpos = model.qpos0.copy()
        coordinates: dict[str, object] = {}
        free: dict[str, np.ndarray] = {}
        for j in range(model.njnt):
            address, kind = int(model.jnt_qposadr[j]), int(model.jnt_type[j])
            if kind == mujoco.mjtJoint.mjJNT_FREE:
                if index and not cfg.get("fix_base"):
                    qpos[address:address + 3] = rng.uniform(-1, 1, 3)
                    quaternion = rng.normal(size=4)
                    qpos[address + 3:address + 7] = quaternion / np.linalg.norm(quaternion)
                body = body_name(model, int(model.jnt_bodyid[j]))
                if body in bodies:
                    free[str(bodies[body].GetPath())] = pose(qpos[address:address + 3], qpos[address + 3:address + 7])
            elif kind == mujoco.mjtJoint.mjJNT_BALL:
                if index:
                    quaternion = rng.normal(size=4)
                    qpos[address:address + 4] = quaternion / np.linalg.norm(quaternion)
                coordinates[joint_name(model, j)] = qpos[address:address + 4]
            else:
                if index:
                    low, high = model.jnt_range[j] if model.jnt_limited[j] else (qpos[address] - 1, qpos[address] + 1)
                    qpos[address] = rng.uniform(low, high)
                delta = qpos[address] - model.qpos0[address]
                coordinates[joint_name(model, j)] = math.degrees(delta) if kind == mujoco.mjtJoint.mjJNT_HINGE else delta
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        world = kinematics.poses(coordinates, free)
        for b, path in paths.items():
            expected = pose(data.xpos[b], data.xquat[b])
            distance = float(np.linalg.norm(world[path][:3, 3] - expected[:3, 3]))
            angle = rotation_angle(world[path], expected)
            worst = (max(worst[0], distance), max(worst[1], angle))
            if distance > POSITION_TOLERANCE or angle > ROTATION_TOLERANCE:
                where = "at rest" if index == 0 else f"in random configuration {index}"
                result.add(Finding("mjcf-kinematics", path, f"body '{body_name(model, b)}' {where}: off MuJoCo's "
                                   f"forward kinematics by {distance:.3g} m / {angle:.3g} rad"))
                return worst
    return worst
