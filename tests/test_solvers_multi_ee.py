"""Several end-effectors on one tree (unitree_h1 from the corpus, converted by usdforge): FK and Jacobians
of both elbows against MuJoCo's own model of the source, and solve_ik with (N, E, 3) / (N, E, 7)
targets, several seeds per target, task weights and a posture task, every solution checked by MuJoCo's
FK. The 1,000-target acceptance runs are in bench/ik_tasks.py; these batches are small."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_solvers_corpus import converted, mujoco_reference

from usdforge.solvers import (
    Kinematics,
    forward_kinematics,
    forward_kinematics_and_jacobian,
    random_configurations,
    solve_ik,
)

ARMS = ["left_elbow_link", "right_elbow_link"]


@pytest.fixture(scope="module")
def h1(tmp_path_factory):
    usd, model = converted("unitree_h1", tmp_path_factory.mktemp("multi_ee"))
    return usd, model


def mujoco_ee(model, kin: Kinematics, q: np.ndarray) -> np.ndarray:
    """MuJoCo's world positions (N, E, 3) and quaternions (N, E, 4) of kin's end-effectors."""
    pos, quat = [], []
    for row in np.asarray(q, np.float64):
        poses, _ = mujoco_reference(model, kin, row, [])
        pos.append([poses[b][0] for b in kin.ee_bodies])
        quat.append([poses[b][1] for b in kin.ee_bodies])
    return np.array(pos), np.array(quat)


def rot_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return 2 * np.arccos(np.clip(np.abs(np.sum(a * b, axis=-1)), 0.0, 1.0))


def test_fk_and_jacobians_of_both_arms_match_mujoco(h1):
    usd, model = h1
    kin = Kinematics.from_usd(usd, ee_bodies=ARMS)
    assert kin.ee_bodies == tuple(ARMS) and kin.num_ee == 2
    # One tree, shared joints: the torso and both arms' joints, once each.
    assert kin.joint_names[0] == "torso" and len(kin.joint_names) == 9
    q = np.asarray(random_configurations(kin, jax.random.PRNGKey(0), (8,)), np.float64)
    pos, quat, jac = (np.asarray(a, np.float64) for a in forward_kinematics_and_jacobian(kin, q))
    assert pos.shape == (8, 2, 3) and quat.shape == (8, 2, 4) and jac.shape == (8, 2, 6, 9)
    for i in range(8):
        poses, jacs = mujoco_reference(model, kin, q[i], ARMS)
        for e, body in enumerate(ARMS):
            np.testing.assert_allclose(pos[i, e], poses[body][0], atol=2e-5)
            np.testing.assert_allclose(jac[i, e], jacs[body], atol=2e-5)
    # The single-end-effector form still works and is the first chain.
    left = Kinematics.from_usd(usd, "left_elbow_link")
    assert left.num_joints == 5 and not left.multi_ee
    lp, _ = forward_kinematics(left, q[:, [kin.joint_index(n) for n in left.joint_names]])
    np.testing.assert_allclose(lp, pos[:, 0], atol=1e-5)


def test_both_arms_position_and_pose_targets_from_rest_converge_by_mujoco_fk(h1):
    usd, model = h1
    kin = Kinematics.from_usd(usd, ee_bodies=ARMS)
    q_true = random_configurations(kin, jax.random.PRNGKey(1), (48,))
    pos, quat = forward_kinematics(kin, q_true)
    q0 = jnp.clip(jnp.zeros(kin.num_joints), kin.lower, kin.upper)
    common = dict(iterations=200, pos_tol=1e-3, rot_tol=1e-3, max_step=0.5, restart_after=5, num_seeds=16)
    q, info = solve_ik(kin, pos, q0, **common)
    ref_pos, _ = mujoco_ee(model, kin, q)
    err = np.linalg.norm(ref_pos - np.asarray(pos), axis=-1).max(axis=1)
    assert np.mean(err <= 1e-3) >= 0.95, np.sort(err)[-5:]
    assert np.all(np.asarray(info.converged) == (np.asarray(info.pos_err) <= 1e-3))
    assert np.asarray(info.seed).max() > 0  # the extra seeds were used
    q, info = solve_ik(kin, jnp.concatenate([pos, quat], axis=-1), q0, **common)
    ref_pos, ref_quat = mujoco_ee(model, kin, q)
    ok = (np.linalg.norm(ref_pos - np.asarray(pos), axis=-1).max(axis=1) <= 1e-3) & \
         (rot_dist(ref_quat, np.asarray(quat)).max(axis=1) <= 1.1e-3)
    assert ok.mean() >= 0.95


def test_one_seed_from_rest_is_weaker_than_sixteen(h1):
    usd, _ = h1
    kin = Kinematics.from_usd(usd, ee_bodies=ARMS)
    q_true = random_configurations(kin, jax.random.PRNGKey(2), (48,))
    pos, _ = forward_kinematics(kin, q_true)
    q0 = jnp.clip(jnp.zeros(kin.num_joints), kin.lower, kin.upper)
    rates = [float(solve_ik(kin, pos, q0, iterations=100, num_seeds=s)[1].converged.mean()) for s in (1, 16)]
    assert rates[1] > rates[0] + 0.05, rates


def test_task_weights_and_posture(h1):
    usd, _ = h1
    kin = Kinematics.from_usd(usd, ee_bodies=ARMS)
    q_true = random_configurations(kin, jax.random.PRNGKey(3), (48,))
    pos, _ = forward_kinematics(kin, q_true)
    q0 = jnp.clip(jnp.zeros(kin.num_joints), kin.lower, kin.upper)
    # Weight 0 on the right arm: only the left arm's target is pursued (same compiled loop as above).
    q, _ = solve_ik(kin, pos, q0, iterations=100, weights=[1.0, 0.0], num_seeds=16)
    got, _ = forward_kinematics(kin, q)
    left_err = np.linalg.norm(np.asarray(got - pos)[:, 0], axis=-1)
    right_err = np.linalg.norm(np.asarray(got - pos)[:, 1], axis=-1)
    assert np.median(left_err) < 1e-3 < np.median(right_err)
    # A posture task keeps a redundant single-arm solution (5 joints, 3 position rows) nearer the posture.
    arm = Kinematics.from_usd(usd, "left_elbow_link")
    qa = random_configurations(arm, jax.random.PRNGKey(4), (32,))
    target, _ = forward_kinematics(arm, qa)
    start = qa + 0.1
    free, _ = solve_ik(arm, target, start, iterations=100, pos_tol=1e-3)
    held, info = solve_ik(arm, target, start, iterations=200, pos_tol=1e-3, posture=start, posture_weight=1e-4)
    assert float(info.converged.mean()) >= 0.9
    assert np.linalg.norm(held - start, axis=1).mean() < np.linalg.norm(free - start, axis=1).mean()


def test_target_shapes_and_settings_are_checked(h1):
    usd, _ = h1
    kin = Kinematics.from_usd(usd, ee_bodies=ARMS)
    with pytest.raises(ValueError, match=r"\(N, 2, 7\)"):
        solve_ik(kin, np.zeros((4, 3)), np.zeros(9))
    with pytest.raises(ValueError, match="weights"):
        solve_ik(kin, np.zeros((4, 2, 3)), np.zeros(9), weights=[1.0])
    with pytest.raises(ValueError, match="num_seeds"):
        solve_ik(kin, np.zeros((4, 2, 3)), np.zeros(9), num_seeds=0)
    with pytest.raises(ValueError, match="either ee_body"):
        Kinematics.from_usd(usd, "left_elbow_link", ee_bodies=ARMS)
    with pytest.raises(ValueError, match="unknown body"):
        Kinematics.from_usd(usd, ee_bodies=["left_elbow_link", "hand_of_god"])
