"""Natural-frequency drive gains (solvers/drive_gains.py) on the corpus Franka Panda MJCF."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

from usdforge.solvers.drive_gains import (DEFAULT_DAMPING_RATIO, joint_space_inertia, model_natural_frequency_gains,
                                 natural_frequency_gains)

SHARED = Path(__file__).resolve().parents[2] / "shared"
PANDA = SHARED / "corpus" / "mjcf" / "franka_emika_panda" / "panda.xml"


@pytest.fixture(scope="module")
def panda() -> mujoco.MjModel:
    if not PANDA.is_file():
        pytest.fail(f"test material missing: expected the corpus Panda MJCF at {PANDA} (../shared beside the checkout)")
    return mujoco.MjModel.from_xml_path(str(PANDA))


def hand_mass_matrix(model: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray:
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    dense = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, dense)
    return dense


def subtree_inertia_about_axis(model: mujoco.MjModel, qpos: np.ndarray, joint_id: int) -> float:
    """Independent of mj_fullM: armature + Σ over the joint's subtree of the bodies' inertia about the joint
    axis (parallel-axis theorem) for a hinge, or of their masses for a slide."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    first = model.jnt_bodyid[joint_id]

    def in_subtree(body: int) -> bool:
        while body != 0:
            if body == first:
                return True
            body = model.body_parentid[body]
        return False

    axis, anchor = data.xaxis[joint_id], data.xanchor[joint_id]
    total = float(model.dof_armature[model.jnt_dofadr[joint_id]])
    for body in filter(in_subtree, range(1, model.nbody)):
        if model.jnt_type[joint_id] == mujoco.mjtJoint.mjJNT_SLIDE:
            total += model.body_mass[body]
            continue
        rotation = data.ximat[body].reshape(3, 3)
        inertia = rotation @ np.diag(model.body_inertia[body]) @ rotation.T
        arm = np.cross(axis, data.xipos[body] - anchor)
        total += axis @ inertia @ axis + model.body_mass[body] * arm @ arm
    return total


def test_inertia_is_the_mass_matrix_diagonal_at_rest(panda):
    inertia = joint_space_inertia(panda)
    names = [mujoco.mj_id2name(panda, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(panda.njnt)]
    assert list(inertia) == names == [f"joint{i}" for i in range(1, 8)] + ["finger_joint1", "finger_joint2"]
    dense = hand_mass_matrix(panda, panda.qpos0)
    for joint_id, name in enumerate(names):
        dof = panda.jnt_dofadr[joint_id]
        assert inertia[name] == pytest.approx(dense[dof, dof], rel=1e-9)
        assert inertia[name] == pytest.approx(subtree_inertia_about_axis(panda, panda.qpos0, joint_id), rel=1e-9)
    # The shoulder (joint2) carries the whole outstretched arm: the largest inertia.
    assert max(inertia, key=inertia.get) == "joint2"


def test_gains_equal_the_hand_computation(panda):
    dense = hand_mass_matrix(panda, panda.qpos0)
    frequency, ratio = 20.0, 0.7
    gains = model_natural_frequency_gains(panda, frequency, ratio)
    assert len(gains) == panda.njnt
    for joint_id in range(panda.njnt):
        name = mujoco.mj_id2name(panda, mujoco.mjtObj.mjOBJ_JOINT, joint_id)
        m = dense[panda.jnt_dofadr[joint_id], panda.jnt_dofadr[joint_id]]
        stiffness, damping = gains[name]
        assert stiffness == pytest.approx(m * frequency ** 2, rel=1e-9)
        assert damping == pytest.approx(2.0 * ratio * frequency * m, rel=1e-9)
        # P and D give a damped oscillator with ω_n = f and ζ = r on that inertia.
        assert math.sqrt(stiffness / m) == pytest.approx(frequency, rel=1e-9)
        assert damping / (2.0 * math.sqrt(stiffness * m)) == pytest.approx(ratio, rel=1e-9)


def test_other_configuration_and_per_joint_values(panda):
    qpos = panda.qpos0.copy()
    qpos[3] = -2.0  # bend the elbow: joint1 sees a shorter arm
    bent = joint_space_inertia(panda, qpos)
    dense = hand_mass_matrix(panda, qpos)
    assert bent["joint1"] == pytest.approx(dense[0, 0], rel=1e-9)
    assert bent["joint1"] != pytest.approx(joint_space_inertia(panda)["joint1"], rel=1e-3)
    gains = model_natural_frequency_gains(panda, {"joint[1-4]": 10.0, "joint[5-7]": 30.0}, {"joint1": 1.0})
    assert set(gains) == {f"joint{i}" for i in range(1, 8)}  # fingers: no frequency given
    inertia = joint_space_inertia(panda)
    assert gains["joint1"] == pytest.approx(natural_frequency_gains(inertia["joint1"], 10.0, 1.0), rel=1e-12)
    assert gains["joint6"] == pytest.approx(natural_frequency_gains(inertia["joint6"], 30.0, DEFAULT_DAMPING_RATIO),
                                            rel=1e-12)
    with pytest.raises(ValueError, match="qpos"):
        joint_space_inertia(panda, np.zeros(3))


def test_natural_frequency_gains_formula_and_errors():
    assert natural_frequency_gains(2.0, 3.0, 0.5) == (18.0, 6.0)
    assert natural_frequency_gains(2.0, 3.0) == (18.0, pytest.approx(2 * 0.005 * 3.0 * 2.0))
    for bad in ((0.0, 1.0, 0.1), (1.0, -1.0, 0.1), (1.0, 1.0, -0.1), (float("nan"), 1.0, 0.1), (1.0, True, 0.1)):
        with pytest.raises(ValueError):
            natural_frequency_gains(*bad)
