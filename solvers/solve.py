"""Batched iterative IK: differential IK steps with forward kinematics in one jitted ``lax.while_loop``."""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

from .chunking import map_chunks
from .differential_ik import DEFAULT_IK_PARAMS, merge_ik_params
from .forward import ee_kernel
from .ik_step import differential_ik_step_cf, pose_error_cf
from .kinematics import Kinematics


class IKInfo(NamedTuple):
    """Per-target outcome of :func:`solve_ik` (a pytree).

    ``converged`` (N,) bool: within both tolerances at the returned q. ``pos_err`` (N,) metres and
    ``rot_err`` (N,) radians: the remaining errors (rot_err is 0 for position-only targets).
    ``iterations`` (N,) int32: IK steps taken by that target (0 if q0 already met the tolerances).
    ``restarts`` (N,) int32: how often the target was re-seeded (0 unless ``restart_after`` is set).
    """

    converged: Array
    pos_err: Array
    rot_err: Array
    iterations: Array
    restarts: Array


# Per-joint increments of the restart sequence (fractional parts of square roots of primes): restart n of
# a target starts from lower + frac(u0 + n * alpha) * (upper - lower), an additive-recurrence
# low-discrepancy sequence that costs a multiply-add per joint instead of a PRNG call per iteration.
_PRIMES = np.array([2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97])


def _restart_increments(n_joints: int) -> np.ndarray:
    primes = np.resize(_PRIMES, n_joints) + 100 * (np.arange(n_joints) // len(_PRIMES))
    return np.sqrt(primes.astype(np.float64)) % 1.0


def solve_ik(
    kin: Kinematics,
    targets: Any,
    q0: Any,
    *,
    iterations: int = 50,
    pos_tol: float = 1e-3,
    rot_tol: float = 1e-3,
    method: str = "dls",
    ik_params: Mapping[str, float] | None = None,
    max_step: float | None = None,
    restart_after: int | None = None,
    seed: int = 0,
) -> tuple[Array, IKInfo]:
    """Solve IK for N targets: (N, 7) poses (x, y, z, qw, qx, qy, qz) or (N, 3) positions, world frame.

    From ``q0`` ((N, J), or (J,) for every target) each unconverged target takes differential IK steps
    (``method``: pinv | svd | trans | dls | adaptive_dls, ``ik_params`` as in :class:`DifferentialIKControllerCfg`)
    until its position error is ≤ ``pos_tol`` (m) and its rotation error ≤ ``rot_tol`` (rad), or
    ``iterations`` steps. A converged target stops moving; the loop stops once all have converged.

    Joint limits: q stays within [lower, upper]. A joint at a limit whose step would push it further out
    is held, and the step is recomputed for the other joints, so they make up for it instead of the
    clamp silently eating part of the step.

    ``max_step`` (radians or metres), if given, scales each step down so that no joint moves more than
    that per iteration. ``restart_after``, if given, re-seeds a target whose error (pos/pos_tol +
    rot/rot_tol) has not dropped by 5 % within that many iterations, from a configuration of a
    low-discrepancy sequence within the limits (offset per target from ``seed``): a local method from
    one start cannot leave a basin that joint limits close off. Returns q (N, J) and :class:`IKInfo`.
    """
    if method not in DEFAULT_IK_PARAMS:
        raise ValueError(
            f"Unsupported inverse-kinematics method: {method!r}; expected one of {list(DEFAULT_IK_PARAMS)}"
        )
    params = merge_ik_params(method, ik_params)
    if restart_after is not None and restart_after < 1:
        raise ValueError(f"restart_after must be a positive number of iterations or None, got {restart_after}")
    targets = jnp.asarray(targets, dtype=kin.dtype)
    if targets.ndim != 2 or targets.shape[1] not in (3, 7):
        raise ValueError(f"targets must have shape (N, 7) (position + quaternion wxyz) or (N, 3), got {targets.shape}")
    n = targets.shape[0]
    q0 = jnp.asarray(q0, dtype=kin.dtype)
    if q0.shape not in ((kin.num_joints,), (n, kin.num_joints)):
        raise ValueError(f"q0 must have shape ({n}, {kin.num_joints}) or ({kin.num_joints},), got {q0.shape}")
    q0 = jnp.broadcast_to(q0, (n, kin.num_joints))
    lo, hi = _sampling_box(kin)
    restart_base = jax.random.uniform(jax.random.PRNGKey(seed), (kin.num_joints, n), dtype=kin.dtype)
    return _solve_jit(
        kin, targets, q0, jnp.asarray(pos_tol, kin.dtype), jnp.asarray(rot_tol, kin.dtype),
        jnp.asarray(jnp.inf if max_step is None else max_step, kin.dtype),
        {k: jnp.asarray(v, kin.dtype) for k, v in params.items()},
        restart_base, jnp.asarray(_restart_increments(kin.num_joints), kin.dtype), jnp.asarray(lo, kin.dtype),
        jnp.asarray(hi - lo, kin.dtype),
        jnp.asarray(int(iterations), jnp.int32),
        # "Never" is a stall count no loop reaches; keeping it traced shares one compiled loop.
        jnp.asarray(np.iinfo(np.int32).max if restart_after is None else int(restart_after), jnp.int32),
        method=method,
    )


def _sampling_box(kin: Kinematics) -> tuple[np.ndarray, np.ndarray]:
    """Finite box for restart configurations: the limits, unlimited sides replaced by ±π."""
    lo, hi = np.asarray(kin.lower, np.float64), np.asarray(kin.upper, np.float64)
    return np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)


def _solve_impl(
    kin: Kinematics,
    targets: Array,
    q0: Array,
    pos_tol: Array,
    rot_tol: Array,
    max_step: Array,
    params: dict[str, Array],
    restart_base: Array,
    restart_step: Array,
    box_lo: Array,
    box_span: Array,
    iterations: Array,
    restart_after: Array,
    *,
    method: str,
) -> tuple[Array, IKInfo]:
    # Component-first inside the loop (joints/components lead, targets trail): see solvers.rotations.
    position_only = targets.shape[1] == 3
    command_type = "position" if position_only else "pose"
    t_pos = targets[:, :3].T
    if position_only:
        t_quat = jnp.zeros((4, targets.shape[0]), targets.dtype).at[0].set(1.0)
    else:
        t_quat = (targets[:, 3:7] / jnp.linalg.norm(targets[:, 3:7], axis=1, keepdims=True)).T
    lower, upper = kin.lower[:, None], kin.upper[:, None]

    def met(pe: Array, re: Array) -> Array:
        return (pe <= pos_tol) & (re <= rot_tol)

    def solve_chunk(t_pos: Array, t_quat: Array, q0: Array, restart_base: Array):
        """The iteration loop for one chunk of targets: t_pos (3, n), t_quat (4, n), q0 (J, n)."""

        def evaluate(q: Array):
            pos, quat, jac = ee_kernel(kin, q)
            pos_err, rot_err = pose_error_cf(pos, quat, t_pos, t_quat)
            pe = _norm3(pos_err)
            return pos, quat, jac, pe, jnp.zeros_like(pe) if position_only else _norm3(rot_err)

        def step(q: Array, pos: Array, quat: Array, jac: Array) -> Array:
            def delta(j: Array) -> Array:
                q_new = differential_ik_step_cf(
                    pos, quat, j, q, t_pos, t_quat, command_type=command_type, ik_method=method, **params
                )
                return q_new - q

            dq = delta(jac)
            # Active set: hold joints that sit at a limit and are pushed outward, re-solve with the rest.
            held = ((q <= lower) & (dq < 0)) | ((q >= upper) & (dq > 0))
            dq = delta(jnp.where(held[None], 0.0, jac))
            # Uniform scaling keeps the step's direction when it is limited.
            biggest = jnp.maximum(jnp.max(jnp.abs(dq), axis=0), jnp.finfo(q.dtype).tiny)
            return jnp.clip(q + jnp.minimum(1.0, max_step / biggest) * dq, lower, upper)

        n = q0.shape[1]
        pos, quat, jac, pe, re = evaluate(q0)
        zeros = jnp.zeros(n, jnp.int32)
        best = jnp.full(n, jnp.inf, q0.dtype)
        state = (jnp.asarray(0), q0, pos, quat, jac, pe, re, met(pe, re), zeros, best, zeros, zeros)

        def cond(s):
            return (s[0] < iterations) & ~jnp.all(s[7])

        def body(s):
            it, q, pos, quat, jac, pe, re, done, count, best, stall, restarts = s
            q_new = step(q, pos, quat, jac)
            score = pe / pos_tol + re / rot_tol
            improved = score < 0.95 * best
            best = jnp.where(improved, score, best)
            stall = jnp.where(improved, 0, stall + 1)
            restart = (stall >= restart_after) & ~done
            k = (restarts + 1).astype(q.dtype)
            fresh = box_lo[:, None] + jnp.mod(restart_base + k * restart_step[:, None], 1.0) * box_span[:, None]
            q_new = jnp.where(restart, jnp.clip(fresh, lower, upper), q_new)
            best = jnp.where(restart, jnp.inf, best)
            stall = jnp.where(restart, 0, stall)
            restarts = restarts + restart.astype(jnp.int32)
            q = jnp.where(done, q, q_new)
            count = count + (~done).astype(jnp.int32)
            pos, quat, jac, pe, re = evaluate(q)
            return it + 1, q, pos, quat, jac, pe, re, done | met(pe, re), count, best, stall, restarts

        _, q, _, _, _, pe, re, done, count, _, _, restarts = lax.while_loop(cond, body, state)
        return q, pe, re, done, count, restarts

    # Chunks keep each loop's working set in cache and let a chunk stop as soon as its targets converge.
    q, pe, re, done, count, restarts = map_chunks(solve_chunk, t_pos, t_quat, q0.T, restart_base)
    return q.T, IKInfo(converged=done, pos_err=pe, rot_err=re, iterations=count, restarts=restarts)


def _norm3(v: Array) -> Array:
    """Euclidean norm over the leading 3 components, written out (no reduction op on XLA:CPU)."""
    return jnp.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])


# Only the method is static: iteration caps, tolerances and restart settings change without recompiling.
_solve_jit = jax.jit(_solve_impl, static_argnames=("method",))
