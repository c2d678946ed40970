"""MuJoCo actuators → joint drives (``UsdPhysics.DriveAPI``) and MuJoCo's own ``MjcActuator`` prims.

MuJoCo's actuator force is ``gain·ctrl + b0 + b1·L + b2·L'`` with ``L = gear·q`` for a joint transmission.
On a hinge or slide joint that is a PD drive on the joint: stiffness ``-b1·gear²``, damping
``-b2·gear²`` (SI, per radian; ``schemas.units`` turns angular gains per degree), target position
``-(gain·ctrl + b0)/(b1·gear)`` at rest control (``ctrl = 0`` clamped into ``ctrlrange``), and ``maxForce = |gear|·max|forcerange|`` when the force is limited.
A motor (no bias) is a force drive with zero gains. Several actuators on one joint add up.

Every actuator is also an ``MjcActuator`` prim under ``/<robot>/Actuators`` (MuJoCo's USD decoder reads
actuation only from these): transmission target (joint, tendon, site, body, slider-crank), gains, biases,
dynamics, ranges, with the cfg's ``override_*`` fields applied. Joint coordinates in USD are MuJoCo's minus
``ref`` (docs/usd_layout.md), so a joint transmission's ``b0`` and ``lengthrange`` are shifted to keep what
``ctrl`` means; ``ctrlrange`` is MuJoCo's compiled one, with ``inheritrange`` spent.
"""

from __future__ import annotations

from typing import Any

import attrs
import mujoco
import numpy as np
from pxr import Sdf

from usdforge.rules.mjcf.bodies import BodyMap, joint_ref
from usdforge.rules.mjcf.load import LoadedModel
from usdforge.rules.mjcf.usd import MjcfUsd, limited_token, relationship, set_all, set_custom, typed
from usdforge.rules.robot.model import Drive, Robot
from usdforge.rules.usd.stage import unique_name
from usdforge.schemas.mjcf_cfg import ACTUATOR_PRM_SIZE, MjcfConverterCfg

GAIN_TOKENS = {int(v): v.name.removeprefix("mjGAIN_").lower() for v in mujoco.mjtGain.__members__.values()}
BIAS_TOKENS = {int(v): v.name.removeprefix("mjBIAS_").lower() for v in mujoco.mjtBias.__members__.values()}
DYN_TOKENS = {int(v): v.name.removeprefix("mjDYN_").lower() for v in mujoco.mjtDyn.__members__.values()}
_TRN = mujoco.mjtTrn
TRN_JOINT, TRN_JOINTINPARENT, TRN_SLIDERCRANK, TRN_TENDON, TRN_SITE, TRN_BODY = (
    int(_TRN.mjTRN_JOINT), int(_TRN.mjTRN_JOINTINPARENT), int(_TRN.mjTRN_SLIDERCRANK), int(_TRN.mjTRN_TENDON),
    int(_TRN.mjTRN_SITE), int(_TRN.mjTRN_BODY))
_HINGE, _SLIDE = int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)


@attrs.frozen
class ActuatorParams:
    """An actuator's gain and bias after the cfg overrides, ``biasprm`` in USD joint coordinates.

    gaintype / biastype: MuJoCo keywords. gainprm / biasprm: 10 numbers each (MuJoCo's units).
    """

    gaintype: str
    gainprm: tuple[float, ...]
    biastype: str
    biasprm: tuple[float, ...]


def _padded(values: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(float(v) for v in values) + (0.0,) * (ACTUATOR_PRM_SIZE - len(values))


def joint_of(model: mujoco.MjModel, actuator: int) -> int | None:
    """The hinge or slide joint a joint-transmission actuator drives, else None."""
    if int(model.actuator_trntype[actuator]) != TRN_JOINT:
        return None
    joint = int(model.actuator_trnid[actuator, 0])
    return joint if int(model.jnt_type[joint]) in (_HINGE, _SLIDE) else None


def actuator_params(model: mujoco.MjModel, actuator: int, cfg: MjcfConverterCfg) -> ActuatorParams:
    """Gain and bias of ``actuator`` with ``cfg.override_*`` applied; for a joint transmission, ``b0``
    absorbs the joint's ``ref`` (``b0 + b1·gear·ref``) so the force is unchanged in USD coordinates."""
    gaintype = cfg.override_gain_type or GAIN_TOKENS[int(model.actuator_gaintype[actuator])]
    biastype = cfg.override_bias_type or BIAS_TOKENS[int(model.actuator_biastype[actuator])]
    gainprm = _padded(cfg.override_gain_prm) if cfg.override_gain_prm is not None else \
        _padded(tuple(model.actuator_gainprm[actuator]))
    biasprm = list(_padded(cfg.override_bias_prm) if cfg.override_bias_prm is not None else
                   _padded(tuple(model.actuator_biasprm[actuator])))
    joint = joint_of(model, actuator)
    if joint is not None and biastype == "affine":
        biasprm[0] += biasprm[1] * float(model.actuator_gear[actuator, 0]) * joint_ref(model, joint)
    return ActuatorParams(gaintype, gainprm, biastype, tuple(biasprm))


def apply_drives(robot: Robot, loaded: LoadedModel, bodies: BodyMap, cfg: MjcfConverterCfg) -> dict[str, float]:
    """Give each hinge/slide joint driven by joint-transmission actuators its drive and maxForce; return
    joint name → the drive's target position (rad or m, USD coordinates) at rest control (``ctrl = 0``
    clamped into ``ctrlrange``), for every joint with a stiffness."""
    model = loaded.model
    joints = {joint.name: joint for joint in robot.joints}
    gains: dict[int, list[tuple[float, float, float, float | None]]] = {}
    for actuator in range(model.nu):
        joint = joint_of(model, actuator)
        if joint is None or joint not in bodies.joint_of_jnt:
            continue
        params = actuator_params(model, actuator, cfg)
        gear = float(model.actuator_gear[actuator, 0])
        b0, b1, b2 = params.biasprm[:3]
        affine = params.biastype == "affine"
        stiffness = max(0.0, -b1) * gear * gear if affine else 0.0
        damping = max(0.0, -b2) * gear * gear if affine else 0.0
        # The target at rest control: ctrl = 0, clamped into ctrlrange as MuJoCo clamps it.
        ctrl = 0.0
        if model.actuator_ctrllimited[actuator]:
            ctrl = float(np.clip(0.0, *model.actuator_ctrlrange[actuator]))
        gain = params.gainprm[0] if params.gaintype == "fixed" else 0.0
        target = -(gain * ctrl + b0) / (b1 * gear) if affine and b1 != 0.0 and gear != 0.0 else 0.0
        effort = None
        if model.actuator_forcelimited[actuator]:
            effort = abs(gear) * float(np.max(np.abs(model.actuator_forcerange[actuator])))
        gains.setdefault(joint, []).append((stiffness, damping, target, effort))
    targets: dict[str, float] = {}
    for joint, items in gains.items():
        robot_joint = joints[bodies.joint_of_jnt[joint]]
        stiffness = sum(item[0] for item in items)
        damping = sum(item[1] for item in items)
        target = sum(item[0] * item[2] for item in items) / stiffness if stiffness > 0 else 0.0
        efforts = [item[3] for item in items]
        robot_joint.effort = None if any(e is None for e in efforts) else float(sum(efforts))
        kind = "position" if stiffness > 0 else ("velocity" if damping > 0 else "none")
        robot_joint.drive = Drive(kind="force", stiffness=stiffness, damping=damping, target=kind)
        if stiffness > 0:
            targets[robot_joint.name] = float(target)
    return targets


def _target(usd: MjcfUsd, actuator: int) -> tuple[Sdf.Path | None, str]:
    """The prim an actuator acts through, and a description for warnings."""
    model = usd.loaded.model
    kind = int(model.actuator_trntype[actuator])
    target = int(model.actuator_trnid[actuator, 0])
    if kind in (TRN_JOINT, TRN_JOINTINPARENT):
        return usd.joint_path(target), f"joint '{model.joint(target).name}'"
    if kind == TRN_TENDON:
        return usd.tendon_paths.get(target), f"tendon '{model.tendon(target).name}'"
    if kind in (TRN_SITE, TRN_SLIDERCRANK):
        return usd.site_paths.get(target), f"site '{model.site(target).name}'"
    if kind == TRN_BODY:
        return usd.body_path(target), f"body '{model.body(target).name}'"
    return None, f"transmission type {kind}"


def actuator_prim_paths(model: mujoco.MjModel, scope: Sdf.Path) -> list[Sdf.Path]:
    """Each actuator's prim path in ``scope`` (``/<robot>/Actuators``), by actuator id."""
    taken: set[str] = set()
    return [scope.AppendChild(unique_name(model.actuator(a).name or f"actuator{a}", taken)) for a in range(model.nu)]


#: The actuator attributes the cfg's ``override_*`` fields decide, in the order they are authored.
GAIN_BIAS = ("mjc:gainType", "mjc:gainPrm", "mjc:biasType", "mjc:biasPrm")


def gain_bias(params: ActuatorParams) -> dict[str, Any]:
    """``GAIN_BIAS`` → its value for an actuator."""
    return dict(zip(GAIN_BIAS, (params.gaintype, params.gainprm, params.biastype, params.biasprm)))


def actuator_patches(model: mujoco.MjModel, root: Sdf.Path, cfg: MjcfConverterCfg) -> dict[Sdf.Path, Any]:
    """Actuator prim → its gain and bias attributes as the mujoco layer holds them (``rules.robot.drive_patch``)."""
    paths = actuator_prim_paths(model, root.AppendChild("Actuators"))
    return {paths[a]: ([], [(name, *typed(name, value)) for name, value in gain_bias(actuator_params(model, a, cfg)).items()])
            for a in range(model.nu)}


def author_actuators(usd: MjcfUsd, cfg: MjcfConverterCfg) -> None:
    """One ``MjcActuator`` prim per actuator in the mujoco layer (see the module docstring)."""
    model = usd.loaded.model
    if model.nu == 0:
        return
    scope = usd.mujoco_scope("Actuators")
    paths = actuator_prim_paths(model, scope)
    for actuator in range(model.nu):
        source = model.actuator(actuator).name
        target, what = _target(usd, actuator)
        if target is None:
            usd.warnings.append(f"actuator '{source or actuator}' acts on {what}, which has no USD prim "
                                f"(a free joint); kept without a target")
        path = paths[actuator]
        prim = usd.define("mujoco", path, "MjcActuator")
        usd.actuator_paths[actuator] = path
        set_custom(prim, "usdforge:sourceName", source or f"actuator{actuator}")
        kind = int(model.actuator_trntype[actuator])
        if target is not None:
            relationship(prim, "mjc:target", [target])
        if kind == TRN_SLIDERCRANK:
            slider = usd.site_paths.get(int(model.actuator_trnid[actuator, 1]))
            if slider is not None:
                relationship(prim, "mjc:sliderSite", [slider])
        elif kind == TRN_SITE and model.actuator_trnid[actuator, 1] >= 0:
            refsite = usd.site_paths.get(int(model.actuator_trnid[actuator, 1]))
            if refsite is not None:
                relationship(prim, "mjc:refSite", [refsite])
        params = actuator_params(model, actuator, cfg)
        gear = [float(v) for v in model.actuator_gear[actuator]]
        length_range = [float(v) for v in model.actuator_lengthrange[actuator]]
        joint = joint_of(model, actuator)
        if joint is not None:
            shift = gear[0] * joint_ref(model, joint)
            length_range = [length_range[0] - shift, length_range[1] - shift]
        set_all(prim, {
            "mjc:group": int(model.actuator_group[actuator]),
            "mjc:ctrlLimited": limited_token(model.actuator_ctrllimited[actuator]),
            "mjc:ctrlRange:min": model.actuator_ctrlrange[actuator, 0],
            "mjc:ctrlRange:max": model.actuator_ctrlrange[actuator, 1],
            "mjc:forceLimited": limited_token(model.actuator_forcelimited[actuator]),
            "mjc:forceRange:min": model.actuator_forcerange[actuator, 0],
            "mjc:forceRange:max": model.actuator_forcerange[actuator, 1],
            "mjc:actLimited": limited_token(model.actuator_actlimited[actuator]),
            "mjc:actRange:min": model.actuator_actrange[actuator, 0],
            "mjc:actRange:max": model.actuator_actrange[actuator, 1],
            "mjc:lengthRange:min": length_range[0], "mjc:lengthRange:max": length_range[1],
            "mjc:gear": gear, "mjc:crankLength": model.actuator_cranklength[actuator],
            "mjc:jointInParent": kind == TRN_JOINTINPARENT,
            "mjc:dynType": DYN_TOKENS[int(model.actuator_dyntype[actuator])],
            "mjc:dynPrm": model.actuator_dynprm[actuator],
            **gain_bias(params),
            # A plugin actuator's activations are the plugin's (rules.mjcf.lost): none without it.
            "mjc:actDim": int(model.actuator_actnum[actuator]) if model.actuator_plugin[actuator] < 0 else 0,
            "mjc:actEarly": bool(model.actuator_actearly[actuator]),
            # The compiled ctrlrange already holds what inheritrange asked for (in MuJoCo's coordinates).
            "mjc:inheritRange": 0.0,
        })
