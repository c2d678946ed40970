"""Joint drive gains from the robot's physics: Isaac Lab's ``NaturalFrequencyGainsCfg`` computation.

For a joint with equivalent inertia ``m`` (the diagonal entry of the joint-space mass matrix at the rest
configuration), a natural frequency ``f`` and a damping ratio ``r``:

    stiffness P = m · f²        damping D = 2 · r · f · m

so that the joint, alone, behaves as a damped oscillator with ω_n = f (``f`` is an angular frequency,
rad/s) and ζ = r (1 critically damped, < 1 underdamped, > 1 overdamped). For a revolute joint ``m`` is in
kg·m² and the gains come out in N·m/rad and N·m·s/rad; for a prismatic joint in kg, N/m and N·s/m (SI
per radian, like ``JointDriveBaseCfg``; ``schemas.units`` converts to USD's per-degree units).

The mass matrix comes from MuJoCo (``mj_fullM``) on a compiled ``MjModel``; it includes the joints'
armature (rotor inertia), which is part of the inertia a drive moves. numpy and mujoco only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import mujoco
import numpy as np

#: Default damping ratio of Isaac Lab's NaturalFrequencyGainsCfg.
DEFAULT_DAMPING_RATIO = 0.005

_ONE_DOF = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


def joint_name(model: mujoco.MjModel, joint_id: int) -> str:
    """The joint's MJCF/URDF name, or ``joint<id>`` for an unnamed joint."""
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, joint_id) or f"joint{joint_id}"


def mass_matrix(model: mujoco.MjModel, qpos: np.ndarray | None = None) -> np.ndarray:
    """The dense joint-space mass matrix (nv × nv) at ``qpos`` (default: the rest configuration ``qpos0``)."""
    data = mujoco.MjData(model)
    if qpos is None:
        data.qpos[:] = model.qpos0
    else:
        qpos = np.asarray(qpos, dtype=float)
        if qpos.shape != (model.nq,):
            raise ValueError(f"qpos: expected {model.nq} values, found shape {qpos.shape}")
        data.qpos[:] = qpos
    mujoco.mj_fwdPosition(model, data)
    dense = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, dense)
    return dense


def joint_space_inertia(model: mujoco.MjModel, qpos: np.ndarray | None = None) -> dict[str, float]:
    """Joint name → diagonal entry of the mass matrix at its dof, for every 1-dof (hinge/slide) joint.

    qpos: the configuration (length ``model.nq``); None = the rest configuration ``model.qpos0`` (the MJCF
        ``ref`` values, which is where usdforge's joint coordinates are zero).
    """
    dense = mass_matrix(model, qpos)
    inertia = {}
    for joint_id in range(model.njnt):
        if int(model.jnt_type[joint_id]) in _ONE_DOF:
            dof = model.jnt_dofadr[joint_id]
            inertia[joint_name(model, joint_id)] = float(dense[dof, dof])
    return inertia


def natural_frequency_gains(inertia: float, natural_frequency: float,
                            damping_ratio: float = DEFAULT_DAMPING_RATIO) -> tuple[float, float]:
    """(stiffness, damping) = (m·f², 2·r·f·m) for inertia ``m``, natural frequency ``f`` (rad/s) and damping
    ratio ``r``. ValueError for a non-positive inertia or frequency or a negative damping ratio."""
    for name, value, positive in (("inertia", inertia, True), ("natural_frequency", natural_frequency, True),
                                  ("damping_ratio", damping_ratio, False)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
                (value <= 0 if positive else value < 0):
            raise ValueError(f"{name}: expected a finite number {'> 0' if positive else '>= 0'}, found {value!r}")
    stiffness = inertia * natural_frequency ** 2
    damping = 2.0 * damping_ratio * natural_frequency * inertia
    return float(stiffness), float(damping)


def _per_joint(value: float | Mapping[str, float], name: str) -> float | None:
    """``value`` itself, or for a mapping the value of the first regex key that fully matches ``name``."""
    if not isinstance(value, Mapping):
        return value
    for pattern, item in value.items():
        if re.fullmatch(pattern, name):
            return item
    return None


def model_natural_frequency_gains(model: mujoco.MjModel, natural_frequency: float | Mapping[str, float],
                                  damping_ratio: float | Mapping[str, float] = DEFAULT_DAMPING_RATIO,
                                  qpos: np.ndarray | None = None) -> dict[str, tuple[float, float]]:
    """Joint name → (stiffness, damping) for every 1-dof joint of ``model``.

    natural_frequency / damping_ratio: one value for every joint, or a mapping of joint-name regular
        expressions (full match, first match wins) to values, as in Isaac Lab's cfgs; joints that no
        natural_frequency key matches are left out; a joint that no damping_ratio key matches gets
        ``DEFAULT_DAMPING_RATIO``.
    """
    gains = {}
    for name, inertia in joint_space_inertia(model, qpos).items():
        frequency = _per_joint(natural_frequency, name)
        if frequency is None:
            continue
        ratio = _per_joint(damping_ratio, name)
        gains[name] = natural_frequency_gains(inertia, frequency,
                                              DEFAULT_DAMPING_RATIO if ratio is None else ratio)
    return gains
