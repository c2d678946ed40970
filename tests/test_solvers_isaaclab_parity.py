"""DifferentialIKController against Isaac Lab 3.0.0's own torch implementation (tests/isaaclab_env.py):
every ik_method × orientation weights × joint-limit avoidance on/off, 1,000 random inputs with
near-singular Jacobians, both float32, within 1e-3 relative; and the cfg's validation messages."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from usdforge.solvers import DifferentialIKController, DifferentialIKControllerCfg

from isaaclab_env import run_isaaclab

N, JOINTS = 1000, 7
METHODS = ["pinv", "svd", "trans", "dls", "adaptive_dls"]
WEIGHTS = [None, 0.3, (1.0, 0.5, 0.0)]
GAIN, MARGIN = 0.5, 0.3


def unit_quats(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """Jacobians with singular values in [0.1, 2]; a quarter with the smallest in [6e-3, 4e-2] (around
    adaptive_dls's sigma_thresh 0.02), a tenth with near-dependent position rows; joints spread over
    their range, a third of them within the avoidance margin of a limit.

    How near to singular is bounded by float32 itself: with the smallest singular value at 1e-3, plain
    dls (λ = 0.01) has cond(J Jᵀ + λ² I) ≈ 4e4, and Isaac Lab's float32 result is 2e-3 (relative) away
    from a float64 evaluation of its own formula, so no float32 implementation can match it to 1e-3."""
    rng = np.random.default_rng(seed)
    u, _, vh = np.linalg.svd(rng.normal(size=(N, 6, JOINTS)), full_matrices=False)
    s = rng.uniform(0.1, 2.0, size=(N, 6))
    near = rng.random(N) < 0.25
    s[near, -1] = 10 ** rng.uniform(np.log10(6e-3), np.log10(4e-2), size=near.sum())
    jac = u @ (s[:, :, None] * vh)
    flat = rng.random(N) < 0.1
    jac[flat, 2] = 0.7 * jac[flat, 0] - 0.4 * jac[flat, 1] + 1e-2 * rng.normal(size=(flat.sum(), JOINTS))
    lower = rng.uniform(-2.5, -0.5, JOINTS).astype(np.float32)
    upper = rng.uniform(0.5, 2.5, JOINTS).astype(np.float32)
    q = rng.uniform(lower, upper, size=(N, JOINTS))
    edge = rng.random((N, JOINTS)) < 0.33
    q = np.where(edge, np.where(rng.random((N, JOINTS)) < 0.5, lower + 0.3 * rng.random((N, JOINTS)),
                                upper - 0.3 * rng.random((N, JOINTS))), q)
    cur_pos = rng.normal(size=(N, 3))
    return {
        "jac": jac, "q": q, "lower": lower, "upper": upper, "cur_pos": cur_pos, "cur_quat": unit_quats(rng, N),
        "pos_des": cur_pos + 0.1 * rng.normal(size=(N, 3)), "quat_des": unit_quats(rng, N),
    }


def cases() -> list[dict]:
    out = []
    for method, weight, avoid in itertools.product(METHODS, WEIGHTS + ["position"], [False, True]):
        cfg = {"command_type": "position" if weight == "position" else "pose", "ik_method": method,
               "orientation_weight": None if weight == "position" else weight,
               "joint_limit_avoidance_gain": GAIN if avoid else 0.0, "joint_limit_avoidance_margin": MARGIN}
        out.append({"name": f"{method}-{weight}-{avoid}".replace(" ", ""), "cfg": cfg})
    return out


BAD_CFGS = [
    {"command_type": "velocity", "ik_method": "dls"},
    {"command_type": "pose", "ik_method": "lstsq"},
    {"command_type": "pose", "ik_method": "adaptive_dls", "ik_params": {"sigma_thresh": 0.0}},
    {"command_type": "pose", "ik_method": "adaptive_dls", "ik_params": {"lambda_min": 0.3}},
    {"command_type": "pose", "ik_method": "dls", "orientation_weight": [1.0, 2.0]},
    {"command_type": "pose", "ik_method": "dls", "joint_limit_avoidance_gain": -1.0},
    {"command_type": "pose", "ik_method": "dls", "joint_limit_avoidance_margin": 0.0},
]


def ours(case: dict, data: dict) -> np.ndarray:
    cfg = DifferentialIKControllerCfg(**case["cfg"])
    ctrl = DifferentialIKController(cfg, num_envs=N, device="cpu")
    ctrl.set_joint_pos_limits(data["lower"], data["upper"])
    if cfg.command_type == "position":
        ctrl.set_command(data["pos_des"], ee_quat=data["cur_quat"])
    else:
        ctrl.set_command(np.concatenate([data["pos_des"], data["quat_des"]], axis=1))
    return np.asarray(ctrl.compute(data["cur_pos"], data["cur_quat"], data["jac"], data["q"]))


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    data = inputs()
    path = tmp_path_factory.mktemp("isaaclab") / "inputs.npz"
    np.savez(path, **{k: v.astype(np.float32) for k, v in data.items()})
    result = run_isaaclab({"cases": cases(), "bad_cfgs": BAD_CFGS}, path)
    return data, dict(np.load(str(path).replace(".npz", ".out.npz"))), result


def test_compute_matches_isaaclab_3(parity):
    data, theirs, _ = parity
    data32 = {k: v.astype(np.float32) for k, v in data.items()}
    q = data32["q"]
    worst = {}
    for case in cases():
        dq_ours = ours(case, data32) - q
        dq_theirs = theirs[f"q_{case['name']}"] - q
        rel = np.linalg.norm(dq_ours - dq_theirs, axis=1) / np.maximum(np.linalg.norm(dq_theirs, axis=1), 1e-6)
        worst[case["name"]] = float(rel.max())
    bad = {k: v for k, v in worst.items() if not v <= 1e-3}
    assert not bad, f"relative difference to Isaac Lab 3.0.0 above 1e-3: {bad}"
    # The options must have changed something, or the comparison above tests nothing new.
    for method in METHODS:
        base = theirs[f"q_{method}-None-False"]
        assert np.abs(theirs[f"q_{method}-None-True"] - base).max() > 1e-3
        assert np.abs(theirs[f"q_{method}-0.3-False"] - base).max() > 1e-3


def test_validation_messages_are_isaaclabs(parity):
    *_, result = parity
    for bad, message in zip(BAD_CFGS, result["messages"]):
        assert message is not None
        with pytest.raises(ValueError) as exc:
            DifferentialIKControllerCfg(**bad)
        assert str(exc.value) == message


def test_adaptive_dls_damping_ramps_with_the_smallest_singular_value():
    """λ² = λmin² away from singularities, λmax² at rank loss: the step of a rank-deficient Jacobian
    equals plain dls with λ = lambda_max; a well-conditioned one equals dls with λ = lambda_min."""
    rng = np.random.default_rng(3)
    u, _, vh = np.linalg.svd(rng.normal(size=(2, 6, 7)), full_matrices=False)
    s = np.array([[2.0, 1.5, 1.0, 0.8, 0.5, 0.3], [2.0, 1.5, 1.0, 0.8, 0.5, 0.0]])
    jac = u @ (s[:, :, None] * vh)
    q, pos, quat = np.zeros((2, 7)), np.zeros((2, 3)), np.tile([1.0, 0, 0, 0], (2, 1))
    command = np.concatenate([rng.normal(size=(2, 3)), np.tile([0.0, 1.0, 0, 0], (2, 1))], axis=1)

    def step(method, params):
        ctrl = DifferentialIKController(DifferentialIKControllerCfg(command_type="pose", ik_method=method,
                                                                    ik_params=params), 2, "cpu")
        ctrl.set_command(command)
        return np.asarray(ctrl.compute(pos, quat, jac, q))

    adaptive = step("adaptive_dls", None)
    np.testing.assert_allclose(adaptive[0], step("dls", {"lambda_val": 0.05})[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(adaptive[1], step("dls", {"lambda_val": 0.2})[1], rtol=1e-4, atol=1e-5)


def test_limit_avoidance_keeps_the_position_task_and_pushes_off_the_limit():
    rng = np.random.default_rng(4)
    jac = rng.normal(size=(4, 6, 7))
    lower, upper = -np.ones(7), np.ones(7)
    q = np.tile([0.95, -0.9, 0.0, 0.0, 0.0, 0.0, 0.0], (4, 1))
    pos = rng.normal(size=(4, 3))
    cfgs = [DifferentialIKControllerCfg(command_type="position", ik_method="dls", joint_limit_avoidance_gain=g)
            for g in (0.0, 1.0)]
    out = []
    for cfg in cfgs:
        ctrl = DifferentialIKController(cfg, 4, "cpu")
        ctrl.set_joint_pos_limits(lower, upper)
        ctrl.set_command(pos + 0.01, ee_quat=np.tile([1.0, 0, 0, 0], (4, 1)))
        out.append(np.asarray(ctrl.compute(pos, np.tile([1.0, 0, 0, 0], (4, 1)), jac, q)))
    bias = out[1] - out[0]
    np.testing.assert_allclose(np.einsum("nij,nj->ni", jac[:, :3], bias), 0.0, atol=1e-5)  # null space
    # Centre-seeking: the bias on the joints near a limit points inward (before projection it is
    # -a (q - mid)); after projection it still has a positive inner product with that direction.
    centre = -np.array([1.0, -1.0, 0, 0, 0, 0, 0]) * np.maximum(0, 1 - (1 - np.abs(q[0])) / 0.3)
    assert np.all(np.einsum("nj,j->n", bias, centre) > 0)


def test_orientation_weight_zero_drops_the_axis():
    """Weight (1, 1, 0): the z rotation error no longer drives the joints, so a pure z error gives the
    same step as no orientation error at all."""
    rng = np.random.default_rng(5)
    jac = rng.normal(size=(3, 6, 7))
    pos, q = rng.normal(size=(3, 3)), np.zeros((3, 7))
    half = np.sqrt(0.5)
    outs = []
    for quat_des in ([half, 0, 0, half], [1.0, 0, 0, 0]):
        cfg = DifferentialIKControllerCfg(command_type="pose", ik_method="dls", orientation_weight=(1.0, 1.0, 0.0))
        ctrl = DifferentialIKController(cfg, 3, "cpu")
        ctrl.set_command(np.concatenate([pos + 0.05, np.tile(quat_des, (3, 1))], axis=1))
        outs.append(np.asarray(ctrl.compute(pos, np.tile([1.0, 0, 0, 0], (3, 1)), jac, q)))
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-6)
