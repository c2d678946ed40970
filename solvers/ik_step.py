"""The differential IK step: pose error, the four inverses of the Jacobian, and q + Δq.

One step maps a task-space error ``Δx`` to ``q_target = q + Δq`` with ``Δq = J⁺ Δx`` for a choice of
inverse ``J⁺``:

* ``pinv``  Moore-Penrose pseudo-inverse, ``Δq = k · pinv(J) Δx`` (singular values below
  ``max(m, n) · eps · σ_max`` are dropped, as ``torch.linalg.pinv`` does);
* ``svd``   adaptive SVD, ``Δq = k · V diag(1/σ if σ > min_singular_value else 0) Uᵀ Δx``; any m × n
  shape, so position-only commands and arms with fewer than 6 joints work;
* ``trans`` Jacobian transpose, ``Δq = k · Jᵀ Δx``;
* ``dls``   damped least squares, ``Δq = Jᵀ (J Jᵀ + λ² I)⁻¹ Δx``, solved with a Cholesky factorisation
  written out element by element (m = 3 or 6): on XLA:CPU this fuses into loops over the batch, where a
  per-matrix ``linalg.solve`` is a library call per problem;
* ``adaptive_dls`` (Isaac Lab 3.0) damped least squares whose damping grows as the task Jacobian nears a
  singularity (Maciejewski-Klein): with σ the smallest singular value of the task Jacobian and
  r = min(σ / sigma_thresh, 1), ``λ² = lambda_min² + (1 − r²)(lambda_max² − lambda_min²)``.

Two Isaac Lab 3.0 options shape the task: ``orientation_weight`` (w, or (wx, wy, wz)) scales the three
orientation rows of the Jacobian and of the error (0 drops that rotation axis from the solve), and
joint-limit avoidance adds ``(I − J_p⁺ J_p) · (−gain · a · (q − q_mid))``, a centre-seeking motion that
is active within ``margin`` of a limit (a = 1 − clip(dist / margin, 0, 1)) and projected into the null
space of the position rows J_p, so it never moves the ee position to first order.

The pose error is the position difference plus the rotation vector of ``q_des · q⁻¹`` taken with
w >= 0, in the world frame. Quaternions are (w, x, y, z).

The ``*_cf`` functions are component-first (see :mod:`solvers.rotations`) and are what ``solve_ik``
runs; the others are the batch-first public form (..., 3), (..., 6, J) and move axes at the boundary.
All are pure and broadcast over batch dimensions, so they work under ``jit`` and ``vmap``.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import Array

from .rotations import axis_angle_from_quat, from_components, quat_from_rotvec, quat_inverse, quat_mul, to_components


def pose_error_cf(ee_pos: Array, ee_quat: Array, pos_des: Array, quat_des: Array) -> tuple[Array, Array]:
    """Position error (3, ...) and rotation error (3, ...) of ``quat_des * ee_quat⁻¹`` (w >= 0)."""
    return pos_des - ee_pos, axis_angle_from_quat(quat_mul(quat_des, quat_inverse(ee_quat)))


def _cholesky_solve(a: list[list[Array]], b: list[Array]) -> list[Array]:
    """Solve A x = b for a symmetric positive definite A given by its lower triangle ``a[i][j]`` (j ≤ i),
    each entry an array over the batch; unrolled over the k ≤ 12 rows when tracing."""
    k = len(b)
    chol: list[list[Any]] = [[None] * (i + 1) for i in range(k)]
    inv_diag: list[Array] = []
    for j in range(k):
        d = a[j][j] - sum(chol[j][i] * chol[j][i] for i in range(j))
        chol[j][j] = jnp.sqrt(d)
        inv_diag.append(1.0 / chol[j][j])
        for i in range(j + 1, k):
            chol[i][j] = (a[i][j] - sum(chol[i][t] * chol[j][t] for t in range(j))) * inv_diag[j]
    y: list[Array] = []
    for i in range(k):  # L y = b
        y.append((b[i] - sum(chol[i][t] * y[t] for t in range(i))) * inv_diag[i])
    x: list[Any] = [None] * k
    for i in reversed(range(k)):  # Lᵀ x = y
        x[i] = (y[i] - sum(chol[t][i] * x[t] for t in range(i + 1, k))) * inv_diag[i]
    return x


def dls_solve_cf(jacobian: Array, delta: Array, lambda_val: Array | float) -> Array:
    """``Jᵀ (J Jᵀ + λ² I)⁻¹ delta`` for J (m, n, ...) and delta (m, ...); returns (n, ...).

    J Jᵀ + λ² I is symmetric positive definite for λ > 0, so Cholesky needs no pivoting; the
    factorisation and both triangular solves are unrolled over the m ≤ 6 rows when tracing.
    """
    m = jacobian.shape[0]
    rows = [jacobian[i] for i in range(m)]  # (n, ...)
    lam2 = jnp.asarray(lambda_val, dtype=jacobian.dtype) ** 2
    a = [[jnp.sum(rows[i] * rows[j], axis=0) + (lam2 if i == j else 0.0) for j in range(i + 1)] for i in range(m)]
    x = _cholesky_solve(a, [delta[i] for i in range(m)])
    return sum(rows[i] * x[i][None] for i in range(m))


def dls_normal_solve_cf(jacobian: Array, delta: Array, lambda_val: Array | float) -> Array:
    """The same step as :func:`dls_solve_cf` through the joint-space normal equations,
    ``(Jᵀ J + λ² I)⁻¹ Jᵀ delta``: an n × n Cholesky, for many task rows (m > n) and few joints."""
    n = jacobian.shape[1]
    cols = [jacobian[:, j] for j in range(n)]  # (m, ...)
    lam2 = jnp.asarray(lambda_val, dtype=jacobian.dtype) ** 2
    a = [[jnp.sum(cols[i] * cols[j], axis=0) + (lam2 if i == j else 0.0) for j in range(i + 1)] for i in range(n)]
    return jnp.stack(_cholesky_solve(a, [jnp.sum(cols[i] * delta, axis=0) for i in range(n)]))


def adaptive_damping_sq(sigma_min: Array, lambda_min: Array | float, lambda_max: Array | float,
                        sigma_thresh: Array | float) -> Array:
    """Isaac Lab 3.0's ``adaptive_dls`` damping λ² for the smallest task-Jacobian singular value."""
    ratio = jnp.minimum(sigma_min / sigma_thresh, 1.0)
    return lambda_min**2 + (1.0 - ratio**2) * (lambda_max**2 - lambda_min**2)


def damped_svd_solve_cf(jacobian: Array, delta: Array, lambda_val: Array | float | None = None,
                        adaptive: tuple[Any, Any, Any] | None = None) -> Array:
    """``Jᵀ (J Jᵀ + λ² I)⁻¹ delta = V diag(σ / (σ² + λ²)) Uᵀ delta`` for J (m, n, ...), delta (m, ...).

    λ is ``lambda_val``, or with ``adaptive = (lambda_min, lambda_max, sigma_thresh)`` it follows the
    smallest singular value (:func:`adaptive_damping_sq`). Through the SVD, float32 keeps about
    eps · σ_max / σ_min of relative accuracy where forming J Jᵀ squares that condition number: near a
    singularity with λ = 0.01 the Cholesky form is 1e-3 off a float64 evaluation, this one 1e-6.
    """
    u, s, vh = jnp.linalg.svd(from_components(jacobian, 2), full_matrices=False)
    lam2 = adaptive_damping_sq(s[..., -1], *adaptive)[..., None] if adaptive is not None else lambda_val**2
    coeff = s / (s * s + lam2) * jnp.einsum("...mr,...m->...r", u, from_components(delta))
    return jnp.moveaxis(jnp.einsum("...rn,...r->...n", vh, coeff), -1, 0)


def null_space_project_cf(jacobian: Array, v: Array) -> Array:
    """``(I − pinv(J) J) v`` for J (m, n, ...) and v (n, ...): v less its part in J's row space, with
    ``torch.linalg.pinv``'s cut (singular values below ``max(m, n) · eps · σ_max`` count as zero)."""
    m, n = jacobian.shape[:2]
    _, s, vh = jnp.linalg.svd(from_components(jacobian, 2), full_matrices=False)  # vh (..., r, n)
    keep = s > max(m, n) * jnp.finfo(jacobian.dtype).eps * jnp.max(s, axis=-1, keepdims=True)
    coeff = jnp.where(keep, jnp.einsum("...rn,...n->...r", vh, from_components(v)), 0.0)
    return v - jnp.moveaxis(jnp.einsum("...rn,...r->...n", vh, coeff), -1, 0)


def joint_limit_avoidance_cf(
    joint_pos: Array, position_jacobian: Array, lower: Array, upper: Array, gain: Array | float,
    margin: Array | float,
) -> Array:
    """Isaac Lab 3.0's null-space joint-centring bias (J, ...): joint_pos (J, ...), position rows of the
    task Jacobian (3, J, ...), limits (J,) or (J, ...) (finite), gain ≥ 0, margin > 0 (rad or m)."""
    mid = 0.5 * (lower + upper)
    dist = jnp.minimum(joint_pos - lower, upper - joint_pos)
    activation = 1.0 - jnp.clip(dist / margin, 0.0, 1.0)
    return null_space_project_cf(position_jacobian, -gain * activation * (joint_pos - mid))


def weight_orientation_cf(jacobian: Array, rot_err: Array, weight: Array) -> tuple[Array, Array]:
    """Scale the orientation rows 3:6 of J (6, J, ...) and the rotation error (3, ...) by weight (3,)."""
    w = jnp.asarray(weight, jacobian.dtype).reshape((3,) + (1,) * (rot_err.ndim - 1))
    return jnp.concatenate([jacobian[:3], jacobian[3:6] * w[:, None]], axis=0), rot_err * w


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
    lambda_min: Array | float = 0.05,
    lambda_max: Array | float = 0.2,
    sigma_thresh: Array | float = 0.02,
    precise: bool = False,
) -> Array:
    """Joint change (n, ...) for a task-space error (m, ...) and Jacobian (m, n, ...) by ``ik_method``.

    ``precise`` (static) solves dls through the SVD (:func:`damped_svd_solve_cf`) instead of the fused
    Cholesky of J Jᵀ + λ² I: one controller step then matches a float64 evaluation near singularities;
    an iterative solve corrects a step's rounding at the next step and keeps the faster form."""
    if ik_method == "pinv":
        m, n = jacobian.shape[:2]
        rtol = max(m, n) * jnp.finfo(jacobian.dtype).eps
        return k_val * _svd_solve_cf(jacobian, delta_pose, lambda s: s > rtol * jnp.max(s, axis=-1, keepdims=True))
    if ik_method == "svd":
        return k_val * _svd_solve_cf(jacobian, delta_pose, lambda s: s > min_singular_value)
    if ik_method == "trans":
        return k_val * jnp.sum(jacobian * delta_pose[:, None], axis=0)
    if ik_method == "dls":
        m, n = jacobian.shape[:2]
        if precise or min(m, n) > 12:
            return damped_svd_solve_cf(jacobian, delta_pose, lambda_val)
        # The Cholesky is unrolled over the smaller side: task rows, or joints when the rows are many.
        return dls_solve_cf(jacobian, delta_pose, lambda_val) if m <= n or m <= 6 else \
            dls_normal_solve_cf(jacobian, delta_pose, lambda_val)
    if ik_method == "adaptive_dls":
        return damped_svd_solve_cf(jacobian, delta_pose, adaptive=(lambda_min, lambda_max, sigma_thresh))
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
    orientation_weight: Array | None = None,
    limit_avoidance: tuple[Array, Array, Array | float, Array | float] | None = None,
    **ik_params: Array | float,
) -> Array:
    """Component-first :func:`differential_ik_step`: ee_pos (3, ...), ee_quat (4, ...), jacobian (6, J, ...),
    joint_pos (J, ...), pos_des (3, ...), quat_des (4, ...) → joint targets (J, ...).

    ``orientation_weight`` (3,) scales the orientation rows (pose commands only); ``limit_avoidance`` is
    ``(lower, upper, gain, margin)`` for the null-space joint-limit bias (None: off)."""
    if command_type == "position":
        delta = pos_des - ee_pos
        jac = jacobian[0:3]
    else:
        pos_err, rot_err = pose_error_cf(ee_pos, ee_quat, pos_des, quat_des)
        jac = jacobian
        if orientation_weight is not None:
            jac, rot_err = weight_orientation_cf(jacobian, rot_err, orientation_weight)
        delta = jnp.concatenate([pos_err, rot_err], axis=0)
    dq = delta_joint_positions_cf(delta, jac, ik_method, **ik_params)
    if limit_avoidance is not None:
        lower, upper, gain, margin = limit_avoidance
        dq = dq + joint_limit_avoidance_cf(joint_pos, jac[0:3], lower, upper, gain, margin)
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
    jac, err = to_components(jnp.asarray(jacobian), 2), to_components(jnp.asarray(delta))
    return from_components(dls_solve_cf(jac, err, lambda_val))


def delta_joint_positions(delta_pose: Array, jacobian: Array, ik_method: str, **ik_params: Array | float) -> Array:
    """Joint change (..., n) for a task-space error (..., m) and Jacobian (..., m, n) by ``ik_method``
    (parameters as in :class:`~solvers.differential_ik.DifferentialIKControllerCfg`)."""
    dq = delta_joint_positions_cf(
        to_components(jnp.asarray(delta_pose)), to_components(jnp.asarray(jacobian), 2), ik_method, **ik_params
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
    orientation_weight: Array | None = None,
    joint_pos_limits: tuple[Array, Array] | None = None,
    joint_limit_avoidance_gain: float = 0.0,
    joint_limit_avoidance_margin: float = 0.3,
    **ik_params: Array | float,
) -> Array:
    """Target joint positions (..., J) that move the ee from (ee_pos (..., 3), ee_quat (..., 4)) toward
    (pos_des, quat_des), given the world-frame Jacobian (..., 6, J) and joint positions (..., J).

    ``command_type="position"`` uses the first three Jacobian rows and the position error only.
    ``orientation_weight`` (3,) scales the orientation rows of pose commands. With ``joint_pos_limits``
    ((J,) lower, (J,) upper) and a positive ``joint_limit_avoidance_gain``, the null-space centring bias is
    added (see the module docstring). ``ik_params`` are the method's (``k_val``, ``min_singular_value``,
    ``lambda_val``, ``lambda_min``, ``lambda_max``, ``sigma_thresh``). ``command_type`` and ``ik_method``
    must be static under ``jit``; the rest may be traced. Pure: use it under ``jit``/``vmap`` (with no
    batch dimensions it is the single-environment step).
    """
    cf = lambda x: to_components(jnp.asarray(x))  # noqa: E731
    avoid = None
    if joint_pos_limits is not None:
        lower, upper = (jnp.asarray(x)[(...,) + (None,) * (jnp.ndim(joint_pos) - 1)] for x in joint_pos_limits)
        avoid = (lower, upper, joint_limit_avoidance_gain, joint_limit_avoidance_margin)
    q = differential_ik_step_cf(
        cf(ee_pos), cf(ee_quat), to_components(jnp.asarray(jacobian), 2), cf(joint_pos), cf(pos_des), cf(quat_des),
        command_type=command_type, ik_method=ik_method, orientation_weight=orientation_weight,
        limit_avoidance=avoid, **ik_params,
    )
    return from_components(q)
