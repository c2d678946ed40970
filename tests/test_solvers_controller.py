"""DifferentialIKController against an independent NumPy/SciPy reference on random Jacobians (singular ones
included): every ik_method and command type, relative modes, reset, shapes, the documented ValueErrors,
svd on position-only commands and on arms with fewer than six joints, and the device argument."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from usdforge import solvers
from usdforge.solvers import DifferentialIKController, DifferentialIKControllerCfg

N = 48


def x64():
    return jax.enable_x64(True)


# ---------------------------------------------------------------------------------------------------------
# Reference (NumPy + SciPy; quaternions (w, x, y, z) converted to SciPy's (x, y, z, w)).


def scipy_rot(q: np.ndarray) -> Rotation:
    return Rotation.from_quat(np.asarray(q)[..., [1, 2, 3, 0]])


def ref_delta(method: str, jac: np.ndarray, err: np.ndarray, params: dict) -> np.ndarray:
    """Δq per environment: jac (N, m, n), err (N, m)."""
    out = []
    for j, e in zip(jac, err):
        m, n = j.shape
        if method == "pinv":
            dq = params["k_val"] * np.linalg.pinv(j, rcond=max(m, n) * np.finfo(j.dtype).eps) @ e
        elif method == "svd":
            u, s, vh = np.linalg.svd(j, full_matrices=False)
            s_inv = np.array([1.0 / x if x > params["min_singular_value"] else 0.0 for x in s])
            dq = params["k_val"] * vh.T @ (s_inv * (u.T @ e))
        elif method == "trans":
            dq = params["k_val"] * j.T @ e
        else:
            dq = j.T @ np.linalg.solve(j @ j.T + params["lambda_val"] ** 2 * np.eye(m), e)
        out.append(dq)
    return np.array(out)


def ref_target(cfg: DifferentialIKControllerCfg, command, ee_pos, ee_quat):
    """Desired (position, rotation) of Isaac Lab's set_command semantics."""
    if cfg.command_type == "position":
        pos = ee_pos + command if cfg.use_relative_mode else command
        return pos, scipy_rot(ee_quat)
    if cfg.use_relative_mode:
        return ee_pos + command[:, :3], Rotation.from_rotvec(command[:, 3:6]) * scipy_rot(ee_quat)
    return command[:, :3], scipy_rot(command[:, 3:7])


def ref_compute(cfg, command, ee_pos, ee_quat, cur_pos, cur_quat, jac, q):
    pos_des, rot_des = ref_target(cfg, command, ee_pos, ee_quat)
    if cfg.command_type == "position":
        return q + ref_delta(cfg.ik_method, jac[:, :3], pos_des - cur_pos, cfg.ik_params)
    rot_err = (rot_des * scipy_rot(cur_quat).inv()).as_rotvec()
    err = np.concatenate([pos_des - cur_pos, rot_err], axis=1)
    return q + ref_delta(cfg.ik_method, jac, err, cfg.ik_params)


# ---------------------------------------------------------------------------------------------------------
# Random data


def unit_quats(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def random_jacobians(rng, n, joints=7):
    """Mixed: generic, rank-deficient (rank 4), duplicated columns, a zero row, all zeros."""
    jac = rng.normal(size=(n, 6, joints))
    k = n // 5
    jac[:k] = rng.normal(size=(k, 6, 4)) @ rng.normal(size=(k, 4, joints))
    jac[k:2 * k, :, 1] = jac[k:2 * k, :, 0]
    jac[2 * k:3 * k, 4, :] = 0.0
    jac[3 * k] = 0.0
    return jac


def random_case(seed, cfg, joints=7):
    rng = np.random.default_rng(seed)
    ee_pos = rng.normal(size=(N, 3))
    ee_quat = unit_quats(rng, N)
    cur_pos = ee_pos + 0.1 * rng.normal(size=(N, 3))
    cur_quat = unit_quats(rng, N)
    if cfg.command_type == "position":
        command = 0.1 * rng.normal(size=(N, 3)) if cfg.use_relative_mode else rng.normal(size=(N, 3))
    elif cfg.use_relative_mode:
        command = np.concatenate([0.1 * rng.normal(size=(N, 3)), 0.5 * rng.normal(size=(N, 3))], axis=1)
    else:
        command = np.concatenate([rng.normal(size=(N, 3)), unit_quats(rng, N)], axis=1)
    return command, ee_pos, ee_quat, cur_pos, cur_quat, random_jacobians(rng, N, joints), rng.normal(size=(N, joints))


CASES = list(itertools.product(["pinv", "svd", "trans", "dls"], ["position", "pose"], [False, True]))


@pytest.mark.parametrize("method,command_type,relative", CASES)
def test_compute_matches_numpy_reference(method, command_type, relative):
    cfg = DifferentialIKControllerCfg(command_type=command_type, ik_method=method, use_relative_mode=relative)
    seed = CASES.index((method, command_type, relative))
    command, ee_pos, ee_quat, cur_pos, cur_quat, jac, q = random_case(seed, cfg)
    with x64():
        ctrl = DifferentialIKController(cfg, num_envs=N, device="cpu", dtype=jnp.float64)
        ctrl.set_command(command, ee_pos=ee_pos, ee_quat=ee_quat)
        out = np.asarray(ctrl.compute(cur_pos, cur_quat, jac, q))
    assert out.shape == (N, 7)
    expected = ref_compute(cfg, command, ee_pos, ee_quat, cur_pos, cur_quat, jac, q)
    np.testing.assert_allclose(out, expected, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("method", ["pinv", "svd", "trans", "dls"])
def test_float32_controller_agrees_on_well_conditioned_jacobians(method):
    cfg = DifferentialIKControllerCfg(command_type="pose", ik_method=method)
    command, ee_pos, ee_quat, cur_pos, cur_quat, _, q = random_case(7, cfg)
    rng = np.random.default_rng(8)
    u, _, vh = np.linalg.svd(rng.normal(size=(N, 6, 7)), full_matrices=False)
    jac = u @ (np.linspace(1.0, 2.0, 6)[:, None] * vh)  # singular values in [1, 2]
    ctrl = DifferentialIKController(cfg, num_envs=N, device="cpu")
    ctrl.set_command(command.astype(np.float32))
    out = ctrl.compute(cur_pos, cur_quat, jac, q)
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, ref_compute(cfg, command, ee_pos, ee_quat, cur_pos, cur_quat, jac, q),
                               rtol=1e-4, atol=1e-4)


def test_svd_position_only_three_joint_arm_and_two_joint_pose():
    rng = np.random.default_rng(11)
    with x64():
        for command_type, joints in (("position", 3), ("pose", 2), ("position", 2)):
            cfg = DifferentialIKControllerCfg(command_type=command_type, ik_method="svd")
            command, ee_pos, ee_quat, cur_pos, cur_quat, _, q = random_case(12, cfg, joints=joints)
            jac = rng.normal(size=(N, 6, joints))
            jac[:5, :, 1] = 2.0 * jac[:5, :, 0]  # singular arms too
            ctrl = DifferentialIKController(cfg, num_envs=N, device="cpu", dtype=jnp.float64)
            ctrl.set_command(command, ee_pos=ee_pos, ee_quat=ee_quat)
            out = np.asarray(ctrl.compute(cur_pos, cur_quat, jac, q))
            assert out.shape == (N, joints)
            expected = ref_compute(cfg, command, ee_pos, ee_quat, cur_pos, cur_quat, jac, q)
            np.testing.assert_allclose(out, expected, rtol=1e-8, atol=1e-8)


def test_singular_values_below_threshold_are_dropped():
    # J = diag(2, 1e-6) in the first two rows: svd ignores the 1e-6 direction, pinv inverts it.
    jac = np.zeros((1, 6, 2))
    jac[0, 0, 0], jac[0, 1, 1] = 2.0, 1e-6
    err = np.array([[1.0, 1.0, 0, 0, 0, 0]])
    with x64():
        svd = np.asarray(solvers.delta_joint_positions(err, jac, "svd", min_singular_value=1e-5))
        pinv = np.asarray(solvers.delta_joint_positions(err, jac, "pinv"))
    np.testing.assert_allclose(svd, [[0.5, 0.0]])
    np.testing.assert_allclose(pinv, [[0.5, 1e6]])


def test_pose_error_convention_quaternion_order_and_sign():
    with x64():
        identity = jnp.array([1.0, 0.0, 0.0, 0.0])
        about_z = jnp.array([np.cos(0.15), 0.0, 0.0, np.sin(0.15)])  # (w, x, y, z): 0.3 rad about z
        pos_err, rot_err = solvers.compute_pose_error(jnp.zeros(3), identity, jnp.ones(3), about_z)
        np.testing.assert_allclose(pos_err, [1, 1, 1])
        np.testing.assert_allclose(rot_err, [0, 0, 0.3], atol=1e-15)
        # -q is the same rotation: the error is taken with w >= 0, never the 2π - 0.3 way round.
        np.testing.assert_allclose(solvers.compute_pose_error(jnp.zeros(3), identity, jnp.zeros(3), -about_z)[1],
                                   [0, 0, 0.3], atol=1e-15)
        # World frame: q_des * q⁻¹ (not q⁻¹ * q_des) for non-commuting rotations.
        rng = np.random.default_rng(5)
        q, q_des = unit_quats(rng, 20), unit_quats(rng, 20)
        _, err = solvers.compute_pose_error(jnp.zeros((20, 3)), q, jnp.zeros((20, 3)), q_des)
        np.testing.assert_allclose(err, (scipy_rot(q_des) * scipy_rot(q).inv()).as_rotvec(), atol=1e-12)


def test_pure_step_function_under_jit_and_vmap():
    cfg = DifferentialIKControllerCfg(command_type="pose", ik_method="dls")
    command, ee_pos, ee_quat, cur_pos, cur_quat, jac, q = random_case(3, cfg)
    with x64():
        args = [jnp.asarray(a, jnp.float64) for a in (cur_pos, cur_quat, jac, q, command[:, :3], command[:, 3:])]
        step = jax.jit(solvers.differential_ik_step, static_argnames=("command_type", "ik_method"))
        batched = step(*args, command_type="pose", ik_method="dls", lambda_val=0.01)
        mapped = jax.vmap(lambda *a: solvers.differential_ik_step(*a, command_type="pose", ik_method="dls"))(*args)
        np.testing.assert_allclose(batched, mapped, rtol=1e-9, atol=1e-9)
        ctrl = DifferentialIKController(cfg, num_envs=N, device="cpu", dtype=jnp.float64)
        ctrl.set_command(command)
        np.testing.assert_allclose(ctrl.compute(cur_pos, cur_quat, jac, q), batched, rtol=1e-9, atol=1e-9)


def test_cfg_defaults_merge_and_validation():
    assert DifferentialIKControllerCfg(command_type="pose", ik_method="pinv").ik_params == {"k_val": 1.0}
    assert DifferentialIKControllerCfg(command_type="pose", ik_method="dls").ik_params == {"lambda_val": 0.01}
    svd = DifferentialIKControllerCfg(command_type="position", ik_method="svd", ik_params={"k_val": 0.5})
    assert svd.ik_params == {"k_val": 0.5, "min_singular_value": 1e-5}
    assert DifferentialIKControllerCfg(command_type="pose", ik_method="trans").use_relative_mode is False
    with pytest.raises(ValueError, match="command"):
        DifferentialIKControllerCfg(command_type="velocity", ik_method="dls")
    with pytest.raises(ValueError, match="method"):
        DifferentialIKControllerCfg(command_type="pose", ik_method="lstsq")
    with pytest.raises(ValueError, match="lambda_val"):
        DifferentialIKControllerCfg(command_type="pose", ik_method="pinv", ik_params={"lambda_val": 0.1})


def test_k_val_scales_the_step():
    cfg_half = DifferentialIKControllerCfg(command_type="position", ik_method="trans", ik_params={"k_val": 0.5})
    cfg_one = DifferentialIKControllerCfg(command_type="position", ik_method="trans")
    command, ee_pos, ee_quat, cur_pos, cur_quat, jac, q = random_case(4, cfg_one)
    outs = []
    for cfg in (cfg_half, cfg_one):
        ctrl = DifferentialIKController(cfg, num_envs=N, device="cpu")
        ctrl.set_command(command, ee_quat=ee_quat)
        outs.append(np.asarray(ctrl.compute(cur_pos, cur_quat, jac, q)) - q)
    np.testing.assert_allclose(outs[0], 0.5 * outs[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("command_type,relative,dim", [("position", False, 3), ("position", True, 3),
                                                       ("pose", False, 7), ("pose", True, 6)])
def test_action_dim(command_type, relative, dim):
    cfg = DifferentialIKControllerCfg(command_type=command_type, ik_method="dls", use_relative_mode=relative)
    assert DifferentialIKController(cfg, num_envs=2, device="cpu").action_dim == dim


def test_set_command_errors_as_documented():
    ee_pos, ee_quat = np.zeros((2, 3)), np.tile([1.0, 0, 0, 0], (2, 1))
    position = DifferentialIKController(DifferentialIKControllerCfg(command_type="position", ik_method="dls"), 2, "cpu")
    with pytest.raises(ValueError, match="position_"):
        position.set_command(np.zeros((2, 3)))
    position_rel = DifferentialIKController(
        DifferentialIKControllerCfg(command_type="position", ik_method="dls", use_relative_mode=True), 2, "cpu")
    with pytest.raises(ValueError, match="position_rel"):
        position_rel.set_command(np.zeros((2, 3)), ee_quat=ee_quat)
    with pytest.raises(ValueError, match="position_"):
        position_rel.set_command(np.zeros((2, 3)), ee_pos=ee_pos)
    pose_rel = DifferentialIKController(
        DifferentialIKControllerCfg(command_type="pose", ik_method="dls", use_relative_mode=True), 2, "cpu")
    for kwargs in ({"ee_pos": ee_pos}, {"ee_quat": ee_quat}, {}):
        with pytest.raises(ValueError, match="pose_rel"):
            pose_rel.set_command(np.zeros((2, 6)), **kwargs)
    pose = DifferentialIKController(DifferentialIKControllerCfg(command_type="pose", ik_method="dls"), 2, "cpu")
    pose.set_command(np.tile([0.1, 0.2, 0.3, 1.0, 0, 0, 0], (2, 1)))  # absolute pose needs neither
    with pytest.raises(ValueError, match=r"command must have shape \(2, 7\)"):
        pose.set_command(np.zeros((2, 6)))
    with pytest.raises(ValueError, match=r"jacobian must have shape \(2, 6, 7\)"):
        pose.compute(ee_pos, ee_quat, np.zeros((2, 3, 7)), np.zeros((2, 7)))


def test_reset_clears_the_given_environments():
    cfg = DifferentialIKControllerCfg(command_type="pose", ik_method="dls")
    ctrl = DifferentialIKController(cfg, num_envs=4, device="cpu")
    np.testing.assert_allclose(ctrl.ee_quat_des, np.tile([1.0, 0, 0, 0], (4, 1)))
    command = np.tile([0.5, 0.2, 0.1, 0.0, 1.0, 0.0, 0.0], (4, 1))
    ctrl.set_command(command)
    ctrl.reset(env_ids=[1, 3])
    pos_des, quat_des = np.asarray(ctrl.ee_pos_des), np.asarray(ctrl.ee_quat_des)
    np.testing.assert_allclose(pos_des[[0, 2]], command[[0, 2], :3])
    np.testing.assert_allclose(quat_des[[0, 2]], command[[0, 2], 3:])
    np.testing.assert_allclose(pos_des[[1, 3]], 0.0)
    np.testing.assert_allclose(quat_des[[1, 3]], np.tile([1.0, 0, 0, 0], (2, 1)))
    ctrl.reset()
    np.testing.assert_allclose(ctrl.ee_pos_des, 0.0)
    # After a reset the controller holds the current pose's joints still: zero error at the origin.
    q = np.arange(28, dtype=np.float32).reshape(4, 7)
    out = ctrl.compute(np.zeros((4, 3)), np.tile([1.0, 0, 0, 0], (4, 1)), np.ones((4, 6, 7)), q)
    np.testing.assert_allclose(out, q)


def test_device_cpu_and_missing_gpu():
    cfg = DifferentialIKControllerCfg(command_type="pose", ik_method="dls")
    ctrl = DifferentialIKController(cfg, num_envs=2, device="cpu")
    assert ctrl.ee_pos_des.devices() == {jax.devices("cpu")[0]}
    with pytest.raises(ValueError, match="unknown device"):
        DifferentialIKController(cfg, num_envs=2, device="tpu-ish")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if gpus:
        on_gpu = DifferentialIKController(cfg, num_envs=2, device="cuda")
        assert on_gpu.ee_pos_des.devices() == {gpus[0]}
    else:
        for name in ("gpu", "cuda", "cuda:0"):
            with pytest.raises(solvers.GpuUnavailableError, match=r"usdforge\[gpu\]"):
                DifferentialIKController(cfg, num_envs=2, device=name)
        assert issubclass(solvers.GpuUnavailableError, RuntimeError)
