"""Acceptance: batched DLS IK on the converted Franka Panda (MJCF), float32, 4096 reachable targets (FK of
random in-limit configurations). From starts within 0.2 rad of a solution ≥ 98 % converge to ≤ 1 mm and
≤ 1e-3 rad within 20 iterations; from the rest pose (clamped into the limits) ≥ 95 % within 200. Solutions
are checked against MuJoCo's forward kinematics, not only against the solver's own error report.
Also: solve_ik's limits, info and errors, and ik_report's JSON report."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from test_solvers_support import convert_mjcf, corpus_entry, shared_dir

from usdforge import solvers
from usdforge.solvers import Kinematics, solve_ik

TARGETS = 4096


@pytest.fixture(scope="module")
def panda(tmp_path_factory) -> Path:
    return convert_mjcf("franka_emika_panda", tmp_path_factory.mktemp("panda_ik"))


@pytest.fixture(scope="module")
def problem(panda):
    kin = Kinematics.from_usd(panda, "hand")
    key_q, key_noise = jax.random.split(jax.random.PRNGKey(42))
    q_true = solvers.random_configurations(kin, key_q, (TARGETS,))
    pos, quat = solvers.forward_kinematics(kin, q_true)
    noise = jax.random.uniform(key_noise, q_true.shape, minval=-0.2, maxval=0.2)
    seeds = jnp.clip(q_true + noise, kin.lower, kin.upper)
    return kin, jnp.concatenate([pos, quat], axis=1), seeds


def mujoco_check(kin: Kinematics, q: np.ndarray, targets: np.ndarray, sample: int = 300) -> None:
    """Pose of MuJoCo's "hand" at the solutions (a sample) is within 1 mm / 1e-3 rad of the targets."""
    model = mujoco.MjModel.from_xml_path(str(shared_dir() / "corpus" / corpus_entry("franka_emika_panda")["path"]))
    data = mujoco.MjData(model)
    hand = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "hand")
    rng = np.random.default_rng(0)
    for i in rng.choice(len(q), size=min(sample, len(q)), replace=False):
        data.qpos[:] = model.qpos0
        values = dict(zip(kin.joint_names, q[i]))
        for m in kin.mimic:
            values[m.name] = m.multiplier * values[m.leader] + m.offset
        for name, value in values.items():
            adr = model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)]
            data.qpos[adr] = value + model.qpos0[adr]
        mujoco.mj_kinematics(model, data)
        # float32 solutions, float64 check: allow the solver's float32 rounding on top of the tolerance.
        assert np.linalg.norm(data.xpos[hand] - targets[i, :3]) <= 1e-3 + 1e-5
        reached = Rotation.from_quat(data.xquat[hand][[1, 2, 3, 0]])
        wanted = Rotation.from_quat(targets[i, [4, 5, 6, 3]])
        assert (wanted * reached.inv()).magnitude() <= 1e-3 + 1e-5


def test_from_nearby_starts_98_percent_within_20_iterations(problem):
    kin, targets, seeds = problem
    q, info = solve_ik(kin, targets, seeds, iterations=20)
    assert kin.dtype == jnp.float32 and q.dtype == jnp.float32
    converged = np.asarray(info.converged)
    assert converged.mean() >= 0.98, f"success {converged.mean():.4f}"
    assert np.asarray(info.iterations).max() <= 20
    q = np.asarray(q)
    assert np.all(q >= np.asarray(kin.lower)) and np.all(q <= np.asarray(kin.upper))
    assert np.all(np.asarray(info.pos_err)[converged] <= 1e-3)
    assert np.all(np.asarray(info.rot_err)[converged] <= 1e-3)
    mujoco_check(kin, q[converged], np.asarray(targets)[converged])


def test_from_the_rest_pose_95_percent_within_200_iterations(problem):
    kin, targets, _ = problem
    home = jnp.clip(jnp.zeros(kin.num_joints), kin.lower, kin.upper)
    q, info = solve_ik(kin, targets, home, iterations=200, max_step=0.5, restart_after=10)
    converged = np.asarray(info.converged)
    assert converged.mean() >= 0.95, f"success {converged.mean():.4f}"
    assert np.asarray(info.iterations).max() <= 200
    q = np.asarray(q)
    assert np.all(q >= np.asarray(kin.lower)) and np.all(q <= np.asarray(kin.upper))
    mujoco_check(kin, q[converged], np.asarray(targets)[converged])


def test_solve_ik_info_position_targets_and_errors(problem):
    kin, targets, seeds = problem  # full batch: the loop compiled by the tests above is reused
    # A target already met takes no step; a converged target stops moving.
    q, info = solve_ik(kin, targets, seeds, iterations=30)
    q2, info2 = solve_ik(kin, targets, q, iterations=30)
    done = np.asarray(info.converged)
    assert np.all(np.asarray(info2.iterations)[done] == 0)
    np.testing.assert_array_equal(np.asarray(q2)[done], np.asarray(q)[done])
    assert np.all(np.asarray(info.restarts) == 0)
    # Position-only targets: (N, 3), rotation error reported as 0.
    n = 256
    qp, infop = solve_ik(kin, targets[:n, :3], seeds[:n], iterations=30, method="svd")
    assert np.asarray(infop.converged).mean() > 0.9
    np.testing.assert_array_equal(np.asarray(infop.rot_err), 0.0)
    pos, _ = solvers.forward_kinematics(kin, qp)
    ok = np.asarray(infop.converged)
    assert np.all(np.linalg.norm(np.asarray(pos - targets[:n, :3]), axis=1)[ok] <= 1.0001e-3)
    # One q0 (J,) for every target.
    q_home, _ = solve_ik(kin, targets, np.zeros(kin.num_joints), iterations=1)
    assert q_home.shape == (TARGETS, kin.num_joints)
    with pytest.raises(ValueError, match="targets must have shape"):
        solve_ik(kin, targets[:, :6], seeds)
    with pytest.raises(ValueError, match="q0 must have shape"):
        solve_ik(kin, targets, seeds[:10])
    with pytest.raises(ValueError, match="Unsupported"):
        solve_ik(kin, targets, seeds, method="newton")
    with pytest.raises(ValueError, match="k_val"):
        solve_ik(kin, targets, seeds, ik_params={"k_val": 1.0})


def test_ik_report_is_seeded_json_and_meets_the_targets(panda):
    report = solvers.ik_report(panda, "hand", num_targets=512, seed=3)
    again = solvers.ik_report(panda, "hand", num_targets=512, seed=3)
    text = json.dumps(report)  # JSON-serialisable as is
    assert json.loads(text)["ee_body"] == "hand"
    assert report["dtype"] == "float32" and report["jax_version"] == jax.__version__
    assert report["joint_names"][:7] == [f"joint{i}" for i in range(1, 8)]
    for run in ("perturbed", "home"):
        r, r2 = report["runs"][run], again["runs"][run]
        assert r["success_rate"] == r2["success_rate"] and r["pos_err_m"] == r2["pos_err_m"]  # same seed
        assert set(r["pos_err_m"]) == {"p50", "p90", "p99", "max"}
        assert r["solve_s"] > 0 and r["compile_s"] >= 0 and r["targets_per_s"] > 0
    assert report["runs"]["perturbed"]["success_rate"] >= 0.98
    assert report["runs"]["home"]["success_rate"] >= 0.95
    assert report["runs"]["perturbed"]["iterations"]["max"] <= 20
    other = solvers.ik_report(panda, "hand", num_targets=512, seed=4)
    assert other["runs"]["home"]["pos_err_m"] != report["runs"]["home"]["pos_err_m"]
    with pytest.raises(ValueError, match="unknown body"):
        solvers.ik_report(panda, "flange", num_targets=8)
