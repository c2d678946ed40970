"""Differential inverse kinematics: Isaac Lab's ``DifferentialIKController`` API on JAX arrays.

One step maps a task-space error ``Δx`` to ``q_target = q + Δq`` with ``Δq = J⁺ Δx`` for a choice of
inverse ``J⁺``:

* ``pinv``  Moore-Penrose pseudo-inverse, ``Δq = k · pinv(J) Δx`` (singular values below
  ``max(m, n) · eps · σ_max`` are dropped, as ``torch.linalg.pinv`` does);
* ``svd``   adaptive SVD, ``Δq = k · V diag(1/σ if σ > min_singular_value else 0) Uᵀ Δx``; any m × n
  shape, so position-only commands and arms with fewer than 6 joints work;
* ``trans`` Jacobian transpose, ``Δq = k · Jᵀ Δx``;
* ``dls``   damped least squares, ``Δq = Jᵀ (J Jᵀ + λ² I)⁻¹ Δx``, solved with a Cholesky factorisation
  written out element by element (m = 3 or 6): on XLA:CPU this fuses into one loop over the batch,
  where a per-matrix ``linalg.solve`` is a library call per problem.

The pose error is the position difference plus the rotation vector of ``q_des · q⁻¹`` taken with
w >= 0, in the world frame. Quaternions are (w, x, y, z). :func:`differential_ik_step` is the pure,
jit/vmap-able step; :class:`DifferentialIKController` keeps the command state for N environments.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import attrs
import jax
import jax.numpy as jnp
from jax import Array

from .device import resolve_device
from .rotations import axis_angle_from_quat, from_components, quat_from_rotvec, quat_inverse, quat_mul, to_components

CommandType = Literal["position", "pose"]
IKMethod = Literal["pinv", "svd", "trans", "dls"]

DEFAULT_IK_PARAMS: Mapping[str, Mapping[str, float]] = {
    "pinv": {"k_val": 1.0},
    "svd": {"k_val": 1.0, "min_singular_value": 1e-5},
    "trans": {"k_val": 1.0},
    "dls": {"lambda_val": 0.01},
}


def _check_command_type(_inst: Any, _attr: Any, value: str) -> None:
    if value not in ("position", "pose"):
        raise ValueError(f"Unsupported inverse-kinematics command: {value!r}; expected 'position' or 'pose'.")


def _check_ik_method(_inst: Any, _attr: Any, value: str) -> None:
    if value not in DEFAULT_IK_PARAMS:
        raise ValueError(f"Unsupported inverse-kinematics method: {value!r}; expected one of {list(DEFAULT_IK_PARAMS)}.")


@attrs.frozen(kw_only=True)
class DifferentialIKControllerCfg:
    """Configuration of :class:`DifferentialIKController` (Isaac Lab's fields and defaults).

    ``ik_params`` is merged over the method's defaults (pinv/svd/trans ``k_val=1.0``, svd
    ``min_singular_value=1e-5``, dls ``lambda_val=0.01``), so after construction it always holds every
    parameter of the method. A key the method does not use raises ValueError instead of being ignored.
    """

    command_type: CommandType = attrs.field(validator=_check_command_type)
    ik_method: IKMethod = attrs.field(validator=_check_ik_method)
    use_relative_mode: bool = attrs.field(default=False, converter=bool)
    ik_params: Mapping[str, float] | None = None

    def __attrs_post_init__(self) -> None:
        params = dict(DEFAULT_IK_PARAMS[self.ik_method])
        given = dict(self.ik_params or {})
        unknown = sorted(set(given) - set(params))
        if unknown:
            raise ValueError(
                f"ik_params {unknown} are not parameters of ik_method {self.ik_method!r}; it takes {sorted(params)}"
            )
        params.update({k: float(v) for k, v in given.items()})
        object.__setattr__(self, "ik_params", params)


# ---------------------------------------------------------------------------------------------------------
# Pure per-step math, component-first (components lead, batch trails: see solvers.rotations). These are
# what solve_ik runs; the batch-first functions after them are the public, Isaac-Lab-shaped API.


def pose_error_cf(ee_pos: Array, ee_quat: Array, pos_des: Array, quat_des: Array) -> tuple[Array, Array]:
    """Position error (3, ...) and rotation error (3, ...) of ``quat_des * ee_quat⁻¹`` (w >= 0)."""
    return pos_des - ee_pos, axis_angle_from_quat(quat_mul(quat_des, quat_inverse(ee_quat)))


def dls_solve_cf(jacobian: Array, delta: Array, lambda_val: Array | float) -> Array:
    """``Jᵀ (J Jᵀ + λ² I)⁻¹ delta`` for J (m, n, ...) and delta (m, ...); returns (n, ...).

    J Jᵀ + λ² I is symmetric positive definite for λ > 0, so Cholesky needs no pivoting; the
    factorisation and both triangular solves are unrolled over the m ≤ 6 rows when tracing.
    """
    m = jacobian.shape[0]
    rows = [jacobian[i] for i in range(m)]  # (n, ...)
    lam2 = jnp.asarray(lambda_val, dtype=jacobian.dtype) ** 2
    a = [[jnp.sum(rows[i] * rows[j], axis=0) for j in range(i + 1)] for i in range(m)]  # lower triangle
    chol: list[list[Any]] = [[None] * (i + 1) for i in range(m)]
    inv_diag: list[Array] = []
    for j in range(m):
        d = a[j][j] + lam2 - sum(chol[j][k] * chol[j][k] for k in range(j))
        chol[j][j] = jnp.sqrt(d)
        inv_diag.append(1.0 / chol[j][j])
        for i in range(j + 1, m):
            chol[i][j] = (a[i][j] - sum(chol[i][k] * chol[j][k] for k in range(j))) * inv_diag[j]
    y: list[Array] = []
    for i in range(m):  # L y = delta
        y.append((delta[i] - sum(chol[i][k] * y[k] for k in range(i))) * inv_diag[i])
    x: list[Any] = [None] * m
    for i in reversed(range(m)):  # Lᵀ x = y
        x[i] = (y[i] - sum(chol[k][i] * x[k] for k in range(i + 1, m))) * inv_diag[i]
    return sum(rows[i] * x[i][None] for i in range(m))


def _svd_solve_cf(jacobian: Array, delta: Array, keep: Any) -> Array:
    jac = from_components(jacobian, 2)  # (..., m, n): batched SVD wants the matrix axes last
    u, s, vh = jnp.linalg.svd(jac, full_matrices=False)  # u (..., m, r), s (..., r), vh (..., r, n)
    s_inv = jnp.where(keep(s), 1.0 / jnp.where(s > 0, s, 1.0), 0.0)
    coeff = s_inv * jnp.einsum("...mr,...m->...r", u, from_components(delta))
    return jnp.moveaxis(jnp.einsum("...rn,...r->...n", vh, coeff), -1, 0)


def delta_joint_positions_cf(
    delta_pose: Array,
    jacobian: Array,
    ik_method: str,
    *,
    k_val: Array | float = 1.0,
    min_singular_value: Array | float = 1e-5,
    lambda_val: Array | float = 0.01,
) -> Array:
    """Joint change (n, ...) for a task-space error (m, ...) and Jacobian (m, n, ...) by ``ik_method``."""
    if ik_method == "pinv":
        m, n = jacobian.shape[:2]
        rtol = max(m, n) * jnp.finfo(jacobian.dtype).eps
        return k_val * _svd_solve_cf(jacobian, delta_pose, lambda s: s > rtol * jnp.max(s, axis=-1, keepdims=True))
    if ik_method == "svd":
        return k_val * _svd_solve_cf(jacobian, delta_pose, lambda s: s > min_singular_value)
    if ik_method == "trans":
        return k_val * jnp.sum(jacobian * delta_pose[:, None], axis=0)
    if ik_method == "dls":
        return dls_solve_cf(jacobian, delta_pose, lambda_val)
    raise ValueError(f"Unsupported inverse-kinematics method: {ik_method!r}")


def differential_ik_step_cf(
    ee_pos: Array,
    ee_quat: Array,
    jacobian: Array,
    joint_pos: Array,
    pos_des: Array,
    quat_des: Array,
    *,
    command_type: str,
    ik_method: str,
    k_val: Array | float = 1.0,
    min_singular_value: Array | float = 1e-5,
    lambda_val: Array | float = 0.01,
) -> Array:
    """Component-first :func:`differential_ik_step`: ee_pos (3, ...), ee_quat (4, ...), jacobian (6, J, ...),
    joint_pos (J, ...), pos_des (3, ...), quat_des (4, ...) → joint targets (J, ...)."""
    if command_type == "position":
        delta = pos_des - ee_pos
        jac = jacobian[0:3]
    else:
        pos_err, rot_err = pose_error_cf(ee_pos, ee_quat, pos_des, quat_des)
        delta = jnp.concatenate([pos_err, rot_err], axis=0)
        jac = jacobian
    dq = delta_joint_positions_cf(
        delta, jac, ik_method, k_val=k_val, min_singular_value=min_singular_value, lambda_val=lambda_val
    )
    return joint_pos + dq


def compute_pose_error(ee_pos: Array, ee_quat: Array, pos_des: Array, quat_des: Array) -> tuple[Array, Array]:
    """Position error (..., 3) ``pos_des - ee_pos`` and rotation error (..., 3), the rotation vector
    (radians, world frame) of ``quat_des * ee_quat⁻¹`` flipped to w >= 0. Quaternions (..., 4) (w, x, y, z)."""
    pos_err, rot_err = pose_error_cf(*(to_components(jnp.asarray(x)) for x in (ee_pos, ee_quat, pos_des, quat_des)))
    return from_components(pos_err), from_components(rot_err)


def apply_delta_pose(ee_pos: Array, ee_quat: Array, delta: Array) -> tuple[Array, Array]:
    """Target pose from a relative command (..., 6): position + delta[..., :3], and the world-frame rotation
    vector delta[..., 3:6] applied before ``ee_quat`` (rotations below 1e-6 rad count as none)."""
    delta = jnp.asarray(delta)
    rot = quat_mul(quat_from_rotvec(to_components(delta[..., 3:6])), to_components(jnp.asarray(ee_quat)))
    return ee_pos + delta[..., :3], from_components(rot)


def dls_solve(jacobian: Array, delta: Array, lambda_val: Array | float) -> Array:
    """``Jᵀ (J Jᵀ + λ² I)⁻¹ delta`` for J (..., m, n) and delta (..., m); returns (..., n)."""
    return from_components(dls_solve_cf(to_components(jnp.asarray(jacobian), 2), to_components(jnp.asarray(delta)), lambda_val))


def delta_joint_positions(
    delta_pose: Array,
    jacobian: Array,
    ik_method: str,
    *,
    k_val: Array | float = 1.0,
    min_singular_value: Array | float = 1e-5,
    lambda_val: Array | float = 0.01,
) -> Array:
    """Joint change (..., n) for a task-space error (..., m) and Jacobian (..., m, n) by ``ik_method``."""
    dq = delta_joint_positions_cf(
        to_components(jnp.asarray(delta_pose)), to_components(jnp.asarray(jacobian), 2), ik_method,
        k_val=k_val, min_singular_value=min_singular_value, lambda_val=lambda_val,
    )
    return from_components(dq)


def differential_ik_step(
    ee_pos: Array,
    ee_quat: Array,
    jacobian: Array,
    joint_pos: Array,
    pos_des: Array,
    quat_des: Array,
    *,
    command_type: str,
    ik_method: str,
    k_val: Array | float = 1.0,
    min_singular_value: Array | float = 1e-5,
    lambda_val: Array | float = 0.01,
) -> Array:
    """Target joint positions (..., J) that move the ee from (ee_pos (..., 3), ee_quat (..., 4)) toward
    (pos_des, quat_des), given the world-frame Jacobian (..., 6, J) and joint positions (..., J).

    ``command_type="position"`` uses the first three Jacobian rows and the position error only.
    ``command_type`` and ``ik_method`` must be static under ``jit``; the gains may be traced. Pure: use
    it under ``jit``/``vmap`` (with no batch dimensions it is the single-environment step).
    """
    cf = lambda x: to_components(jnp.asarray(x))  # noqa: E731
    q = differential_ik_step_cf(
        cf(ee_pos), cf(ee_quat), to_components(jnp.asarray(jacobian), 2), cf(joint_pos), cf(pos_des), cf(quat_des),
        command_type=command_type, ik_method=ik_method,
        k_val=k_val, min_singular_value=min_singular_value, lambda_val=lambda_val,
    )
    return from_components(q)


_step_jit = jax.jit(differential_ik_step, static_argnames=("command_type", "ik_method"))


class DifferentialIKController:
    """Differential IK for ``num_envs`` environments (Isaac Lab's controller, on JAX arrays).

    ``set_command`` stores the desired ee pose per environment, ``compute`` returns target joint
    positions. ``device`` is "cpu", "gpu"/"cuda" or "cuda:N"; a missing GPU raises
    :class:`solvers.device.GpuUnavailableError`. Buffers are float32 unless ``dtype`` says otherwise
    (float64 needs ``jax_enable_x64``).
    """

    def __init__(self, cfg: DifferentialIKControllerCfg, num_envs: int, device: str | jax.Device = "cpu",
                 dtype: Any = jnp.float32) -> None:
        self.cfg = cfg
        self.num_envs = int(num_envs)
        self.device = resolve_device(device)
        self.dtype = jnp.dtype(dtype)
        if self.dtype == jnp.float64 and not jax.config.jax_enable_x64:
            raise ValueError("dtype float64 needs jax.config.update('jax_enable_x64', True) (or jax.enable_x64(True))")
        self.ee_pos_des = self._put(jnp.zeros((self.num_envs, 3)))
        self.ee_quat_des = self._put(jnp.tile(jnp.array([1.0, 0.0, 0.0, 0.0]), (self.num_envs, 1)))
        self._command = self._put(jnp.zeros((self.num_envs, self.action_dim)))

    @property
    def action_dim(self) -> int:
        """Command width: 3 (position), 6 (relative pose: dx, dy, dz, rotation vector) or 7 (pose: x, y, z, qw, qx, qy, qz)."""
        if self.cfg.command_type == "position":
            return 3
        if self.cfg.use_relative_mode:
            return 6
        return 7

    def _put(self, x: Any) -> Array:
        return jax.device_put(jnp.asarray(x, dtype=self.dtype), self.device)

    def _check(self, name: str, x: Any, width: int | tuple[int, ...]) -> Array:
        x = self._put(x)
        tail = (width,) if isinstance(width, int) else width
        if x.shape != (self.num_envs, *tail):
            raise ValueError(f"{name} must have shape {(self.num_envs, *tail)}, got {tuple(x.shape)}")
        return x

    def reset(self, env_ids: Any = None) -> None:
        """Clear the command of ``env_ids`` (all when None): zero command, desired pose (0, identity)."""
        ids = slice(None) if env_ids is None else jnp.asarray(env_ids)
        self._command = self._command.at[ids].set(0.0)
        self.ee_pos_des = self.ee_pos_des.at[ids].set(0.0)
        self.ee_quat_des = self.ee_quat_des.at[ids].set(jnp.array([1.0, 0.0, 0.0, 0.0], dtype=self.dtype))

    def set_command(self, command: Any, ee_pos: Any = None, ee_quat: Any = None) -> None:
        """Set the desired ee pose from ``command`` (N, action_dim).

        position: command is the target position; ``ee_quat`` (N, 4) is required and kept as the desired
        orientation. position + relative: target = ``ee_pos`` + command. pose: command is (x, y, z, qw,
        qx, qy, qz). pose + relative: command is (dx, dy, dz, rotation vector), applied to (ee_pos, ee_quat).

        Raises:
            ValueError: command type ``position_*`` and ``ee_quat`` is None.
            ValueError: command type ``position_rel`` and ``ee_pos`` is None.
            ValueError: command type ``pose_rel`` and either ``ee_pos`` or ``ee_quat`` is None.
            ValueError: an array has the wrong shape.
        """
        command = self._check("command", command, self.action_dim)
        if self.cfg.command_type == "position":
            if ee_quat is None:
                raise ValueError("End-effector orientation can not be None for `position_*` command type!")
            ee_quat = self._check("ee_quat", ee_quat, 4)
            if self.cfg.use_relative_mode:
                if ee_pos is None:
                    raise ValueError("End-effector position can not be None for `position_rel` command type!")
                self.ee_pos_des = self._check("ee_pos", ee_pos, 3) + command
            else:
                self.ee_pos_des = command
            self.ee_quat_des = ee_quat
        elif self.cfg.use_relative_mode:
            if ee_pos is None or ee_quat is None:
                raise ValueError(
                    "Neither end-effector position nor orientation can be None for `pose_rel` command type!"
                )
            self.ee_pos_des, self.ee_quat_des = apply_delta_pose(
                self._check("ee_pos", ee_pos, 3), self._check("ee_quat", ee_quat, 4), command
            )
        else:
            self.ee_pos_des, self.ee_quat_des = command[:, 0:3], command[:, 3:7]
        self._command = command

    def compute(self, ee_pos: Any, ee_quat: Any, jacobian: Any, joint_pos: Any) -> Array:
        """Target joint positions (N, J) from the current ee pose (N, 3), (N, 4), the world-frame Jacobian
        (N, 6, J) (linear rows first) and joint positions (N, J)."""
        joint_pos = self._put(joint_pos)
        if joint_pos.ndim != 2:
            raise ValueError(f"joint_pos must have shape ({self.num_envs}, num_joints), got {tuple(joint_pos.shape)}")
        n_joints = joint_pos.shape[1]
        return _step_jit(
            self._check("ee_pos", ee_pos, 3),
            self._check("ee_quat", ee_quat, 4),
            self._check("jacobian", jacobian, (6, n_joints)),
            self._check("joint_pos", joint_pos, n_joints),
            self.ee_pos_des,
            self.ee_quat_des,
            command_type=self.cfg.command_type,
            ik_method=self.cfg.ik_method,
            **self.cfg.ik_params,
        )
