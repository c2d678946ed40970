"""Batched iterative IK: differential IK steps with forward kinematics in one jitted ``lax.while_loop``.

Several end-effectors are solved at once by stacking their task rows (each scaled by the square root of
its weight) into one task Jacobian; an optional posture task adds ``sqrt(w) · I`` rows pulling toward a
reference configuration, and self-collision avoidance (:mod:`solvers.collision`) adds one row per
capsule pair closer than its margin, for the closest pair of each of the 8 nearest checked link pairs. Each target can start from several seeds at once (an extra batch
axis), and keeps the first seed that converges.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

from .chunking import DEFAULT_CHUNK, map_chunks
from .differential_ik import DEFAULT_IK_PARAMS, merge_ik_params, orientation_weight_vector
from .forward import chain_kernel
from .ik_step import delta_joint_positions_cf, pose_error_cf, weight_orientation_cf
from .kinematics import Kinematics
from .rotations import matrix_to_quat


class IKInfo(NamedTuple):
    """Per-target outcome of :func:`solve_ik` (a pytree).

    ``converged`` (N,) bool: within both tolerances at the returned q, for every end-effector.
    ``pos_err`` (N,) metres and ``rot_err`` (N,) radians: the largest remaining error over the
    end-effectors (rot_err is 0 for position-only targets). ``iterations`` (N,) int32: IK steps taken by
    the returned seed (0 if q0 already met the tolerances). ``restarts`` (N,) int32: how often that seed
    was re-seeded (0 unless ``restart_after`` is set). ``seed`` (N,) int32: which of the ``num_seeds``
    starts the returned q came from (0: q0). ``clearance`` (N,) metres: with collision avoidance, the
    smallest capsule-pair distance (surface to surface) at the returned q; +inf without it.
    """

    converged: Array
    pos_err: Array
    rot_err: Array
    iterations: Array
    restarts: Array
    seed: Array
    clearance: Array


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
    num_seeds: int = 1,
    weights: Sequence[float] | None = None,
    orientation_weight: float | Sequence[float] | None = None,
    posture: Any = None,
    posture_weight: float = 0.0,
    collision: Any = None,
) -> tuple[Array, IKInfo]:
    """Solve IK for N targets, world frame: (N, 7) poses (x, y, z, qw, qx, qy, qz) or (N, 3) positions for
    a single end-effector, or (N, E, 7) / (N, E, 3) for the E = ``kin.num_ee`` end-effectors at once.

    From ``q0`` ((N, J), or (J,) for every target) each unconverged target takes differential IK steps
    (``method``: pinv | svd | trans | dls | adaptive_dls, ``ik_params`` as in
    :class:`DifferentialIKControllerCfg`) until every end-effector's position error is ≤ ``pos_tol`` (m)
    and rotation error ≤ ``rot_tol`` (rad), or ``iterations`` steps. A converged target stops moving; the
    loop stops once all have converged.

    Tasks: ``weights`` (E,) scale each end-effector's rows (default 1 each); ``orientation_weight`` (a
    scalar or per world axis, as Isaac Lab's) scales the orientation rows of pose targets. ``posture``
    ((J,) or (N, J)) with ``posture_weight`` > 0 adds a posture task toward it (rows ``sqrt(w) I``): a
    soft pull that the frame tasks outweigh; it does not enter the convergence test. ``collision`` (a
    :class:`solvers.collision.SelfCollision`) adds its penalty rows (method dls or adaptive_dls only).

    Joint limits: q stays within [lower, upper]. A joint at a limit whose step would push it further out
    is held, and the step is recomputed for the other joints, so they make up for it instead of the
    clamp silently eating part of the step.

    ``max_step`` (radians or metres), if given, scales each step down so that no joint moves more than
    that per iteration. ``num_seeds`` > 1 solves each target from that many starts in parallel: q0 and
    configurations of a low-discrepancy sequence within the limits (offset per target from ``seed``);
    the first seed to converge is returned, else the one with the smallest error (with ``collision``: of
    the seeds whose checked capsules are apart, where any are). ``restart_after``, if
    given, re-seeds a start whose error (pos/pos_tol + rot/rot_tol) has not dropped by 5 % within that
    many iterations, from the next configuration of that sequence: a local method from one start cannot
    leave a basin that joint limits close off. Returns q (N, J) and :class:`IKInfo`.
    """
    if method not in DEFAULT_IK_PARAMS:
        raise ValueError(
            f"Unsupported inverse-kinematics method: {method!r}; expected one of {list(DEFAULT_IK_PARAMS)}"
        )
    params = merge_ik_params(method, ik_params)
    if restart_after is not None and restart_after < 1:
        raise ValueError(f"restart_after must be a positive number of iterations or None, got {restart_after}")
    if int(num_seeds) < 1:
        raise ValueError(f"num_seeds must be at least 1, got {num_seeds}")
    if collision is not None and method not in ("dls", "adaptive_dls"):
        raise ValueError(f"collision avoidance needs method 'dls' or 'adaptive_dls', got {method!r}")
    targets = jnp.asarray(targets, dtype=kin.dtype)
    e = kin.num_ee
    if targets.ndim == 2 and e == 1 and not kin.multi_ee:
        targets = targets[:, None]
    if targets.ndim != 3 or targets.shape[1] != e or targets.shape[2] not in (3, 7):
        raise ValueError(
            f"targets must have shape (N, {e}, 7) (position + quaternion wxyz) or (N, {e}, 3) for the "
            f"end-effectors {list(kin.ee_bodies)}" + (" (or (N, 7) / (N, 3))" if e == 1 and not kin.multi_ee else "")
            + f", got {targets.shape}"
        )
    n = targets.shape[0]
    q0 = jnp.asarray(q0, dtype=kin.dtype)
    if q0.shape not in ((kin.num_joints,), (n, kin.num_joints)):
        raise ValueError(f"q0 must have shape ({n}, {kin.num_joints}) or ({kin.num_joints},), got {q0.shape}")
    q0 = jnp.broadcast_to(q0, (n, kin.num_joints))
    w = np.ones(e) if weights is None else np.asarray(weights, np.float64).reshape(-1)
    if w.shape != (e,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"weights must be {e} finite non-negative task weights (one per end-effector), got {weights}")
    ow = orientation_weight_vector(orientation_weight)
    ow = np.ones(3) if ow is None else np.asarray(ow, np.float64)
    if posture_weight < 0 or not np.isfinite(posture_weight):
        raise ValueError(f"posture_weight must be finite and >= 0, got {posture_weight}")
    ref = jnp.zeros((n, kin.num_joints), kin.dtype) if posture is None else \
        jnp.broadcast_to(jnp.asarray(posture, kin.dtype), (n, kin.num_joints))
    lo, hi = _sampling_box(kin)
    restart_base = jax.random.uniform(jax.random.PRNGKey(seed), (kin.num_joints, n), dtype=kin.dtype)
    return _solve_jit(
        kin, targets, q0, ref, jnp.asarray(pos_tol, kin.dtype), jnp.asarray(rot_tol, kin.dtype),
        jnp.asarray(jnp.inf if max_step is None else max_step, kin.dtype),
        {k: jnp.asarray(v, kin.dtype) for k, v in params.items()},
        jnp.asarray(np.sqrt(w), kin.dtype), jnp.asarray(ow, kin.dtype), jnp.asarray(np.sqrt(posture_weight), kin.dtype),
        restart_base, jnp.asarray(_restart_increments(kin.num_joints), kin.dtype), jnp.asarray(lo, kin.dtype),
        jnp.asarray(hi - lo, kin.dtype),
        jnp.asarray(int(iterations), jnp.int32),
        # "Never" is a stall count no loop reaches; keeping it traced shares one compiled loop.
        jnp.asarray(np.iinfo(np.int32).max if restart_after is None else int(restart_after), jnp.int32),
        collision,
        method=method, num_seeds=int(num_seeds), use_posture=posture_weight > 0,
    )


def _sampling_box(kin: Kinematics) -> tuple[np.ndarray, np.ndarray]:
    """Finite box for restart configurations: the limits, unlimited sides replaced by ±π."""
    lo, hi = np.asarray(kin.lower, np.float64), np.asarray(kin.upper, np.float64)
    return np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)


#: Starts (targets × seeds) per chunk of a solve with collision avoidance.
COLLISION_CHUNK = 512


def _solve_impl(
    kin: Kinematics,
    targets: Array,
    q0: Array,
    posture_ref: Array,
    pos_tol: Array,
    rot_tol: Array,
    max_step: Array,
    params: dict[str, Array],
    task_scale: Array,
    orientation_weight: Array,
    posture_scale: Array,
    restart_base: Array,
    restart_step: Array,
    box_lo: Array,
    box_span: Array,
    iterations: Array,
    restart_after: Array,
    collision: Any,
    *,
    method: str,
    num_seeds: int,
    use_posture: bool,
) -> tuple[Array, IKInfo]:
    # Component-first inside the loop (joints/components lead, then seeds, then targets): see
    # solvers.rotations. Arrays of a target alone carry a seeds axis of 1 and broadcast.
    position_only = targets.shape[2] == 3
    n_ee = targets.shape[1]
    t_pos = jnp.moveaxis(targets[:, :, :3], 0, -1)[:, :, None]  # (E, 3, 1, N)
    if position_only:
        t_quat = jnp.zeros((n_ee, 4, 1, targets.shape[0]), targets.dtype).at[:, 0].set(1.0)
    else:
        quat = targets[:, :, 3:7] / jnp.linalg.norm(targets[:, :, 3:7], axis=2, keepdims=True)
        t_quat = jnp.moveaxis(quat, 0, -1)[:, :, None]
    lower, upper = kin.lower[:, None, None], kin.upper[:, None, None]
    seeds = jnp.arange(num_seeds, dtype=q0.dtype)[:, None]  # (S, 1)

    def met(pe: Array, re: Array) -> Array:
        return (pe <= pos_tol) & (re <= rot_tol)

    def solve_chunk(t_pos: Array, t_quat: Array, q0: Array, ref: Array, restart_base: Array):
        """The iteration loop for one chunk of targets: t_pos (E, 3, 1, n), t_quat (E, 4, 1, n), q0 and
        ref (J, n), restart_base (J, n)."""
        n = q0.shape[-1]
        ref = ref[:, None]

        def fresh(k: Array) -> Array:
            """Configuration k (S, n) of each target's low-discrepancy sequence, within the limits."""
            u = jnp.mod(restart_base[:, None] + k[None] * restart_step[:, None, None], 1.0)
            return jnp.clip(box_lo[:, None, None] + u * box_span[:, None, None], lower, upper)

        def evaluate(q: Array):
            """Per end-effector errors (3, S, n) and Jacobians (6, J, S, n); the largest errors (S, n)."""
            pos_err, rot_err, jac = [], [], []
            for i in range(n_ee):
                rot, pos, jac_i = chain_kernel(kin, q, i)
                jac.append(jac_i)
                if position_only:
                    pos_err.append(t_pos[i] - pos)
                else:
                    p_err, r_err = pose_error_cf(pos, matrix_to_quat(rot), t_pos[i], t_quat[i])
                    pos_err.append(p_err)
                    rot_err.append(r_err)
            pe = functools.reduce(jnp.maximum, [_norm3(x) for x in pos_err])
            re = jnp.zeros_like(pe) if position_only else functools.reduce(jnp.maximum, [_norm3(x) for x in rot_err])
            ok = met(pe, re)
            near = None
            if collision is not None:
                # One value pass over every checked capsule pair, reduced per body pair: the convergence
                # test (no two checked capsules overlap) and which pairs the next step differentiates.
                near = collision.group_distances(kin, q)
                ok = ok & (jnp.min(near, axis=0) >= 0.0)
            return (pos_err, rot_err, jac, near), pe, re, ok

        def task_rows(q: Array, errs) -> tuple[Array, Array]:
            """Stacked task Jacobian (m, J, S, n) and error (m, S, n)."""
            pos_err, rot_err, jac, near = errs
            rows, delta = [], []
            for i in range(n_ee):
                scale = task_scale[i]
                rows.append(scale * jac[i][0:3])
                delta.append(scale * pos_err[i])
                if not position_only:
                    j_rot, r_err = weight_orientation_cf(jac[i], rot_err[i], orientation_weight)
                    rows.append(scale * j_rot[3:6])
                    delta.append(scale * r_err)
            if use_posture:
                eye = jnp.eye(q.shape[0], dtype=q.dtype)[:, :, None, None]
                rows.append(posture_scale * jnp.broadcast_to(eye, eye.shape[:2] + q.shape[1:]))
                delta.append(posture_scale * (ref - q))
            if collision is not None:
                c_rows, c_err = collision.rows(kin, q, collision.nearest(kin, q, near))
                rows.append(c_rows)
                delta.append(c_err)
            return jnp.concatenate(rows, axis=0), jnp.concatenate(delta, axis=0)

        def step(q: Array, errs) -> Array:
            jac, delta = task_rows(q, errs)
            def solve(j: Array) -> Array:
                return delta_joint_positions_cf(delta, j, method, **params)

            dq = solve(jac)
            # Active set: hold joints that sit at a limit and are pushed outward, re-solve with the rest.
            held = ((q <= lower) & (dq < 0)) | ((q >= upper) & (dq > 0))
            dq = solve(jnp.where(held[None], 0.0, jac))
            # Uniform scaling keeps the step's direction when it is limited.
            biggest = jnp.maximum(jnp.max(jnp.abs(dq), axis=0), jnp.finfo(q.dtype).tiny)
            return jnp.clip(q + jnp.minimum(1.0, max_step / biggest) * dq, lower, upper)

        q_init = jnp.where(seeds[None] == 0, q0[:, None], fresh(seeds + jnp.zeros((1, n), q0.dtype)))
        errs, pe, re, ok = evaluate(q_init)
        shape = (num_seeds, n)
        zeros = jnp.zeros(shape, jnp.int32)
        best = jnp.full(shape, jnp.inf, q0.dtype)
        state = (jnp.asarray(0), q_init, errs, pe, re, ok, ok | jnp.any(ok, axis=0), zeros, best, zeros, zeros)

        def cond(s):
            return (s[0] < iterations) & ~jnp.all(s[6])

        def body(s):
            it, q, errs, pe, re, _, done, count, best, stall, restarts = s
            q_new = step(q, errs)
            score = pe / pos_tol + re / rot_tol
            improved = score < 0.95 * best
            best = jnp.where(improved, score, best)
            stall = jnp.where(improved, 0, stall + 1)
            restart = (stall >= restart_after) & ~done
            restarts = restarts + restart.astype(jnp.int32)
            q_new = jnp.where(restart[None], fresh(seeds + num_seeds * restarts.astype(q.dtype)), q_new)
            best = jnp.where(restart, jnp.inf, best)
            stall = jnp.where(restart, 0, stall)
            q = jnp.where(done[None], q, q_new)
            count = count + (~done).astype(jnp.int32)
            errs, pe, re, ok = evaluate(q)
            # A target is done once any of its seeds has converged: its other seeds stop too.
            return it + 1, q, errs, pe, re, ok, done | jnp.any(ok, axis=0), count, best, stall, restarts

        _, q, errs, pe, re, ok, _, count, _, _, restarts = lax.while_loop(cond, body, state)
        # Per target: the first converged seed, else the one with the smallest error -- with collision
        # avoidance, the smallest error among the seeds whose capsules are apart, if any are.
        score = pe / pos_tol + re / rot_tol
        clear = jnp.full(score.shape, jnp.inf, q.dtype)
        if collision is not None:
            clear = jnp.min(errs[3], axis=0)  # the body pairs' distances at the final q, from evaluate
            score = score + jnp.where(clear < 0.0, 1e12, 0.0)
        pick = jnp.argmin(jnp.where(ok, -1.0, score), axis=0)  # (n,)
        take = lambda a: jnp.take_along_axis(a, pick[None], axis=0)[0]  # noqa: E731
        q_best = jnp.take_along_axis(q, pick[None, None], axis=1)[:, 0]
        clearance = take(clear)
        return q_best, take(pe), take(re), take(ok), take(count), take(restarts), pick.astype(jnp.int32), clearance

    # Chunks keep each loop's working set in cache and let a chunk stop as soon as its targets converge.
    # With collision rows an iteration costs ~100 times more, and every element of a chunk pays it until
    # the chunk's last target converges: small chunks (COLLISION_CHUNK starts) stop sooner.
    chunk = DEFAULT_CHUNK if collision is None else max(8, COLLISION_CHUNK // num_seeds)
    q, pe, re, done, count, restarts, pick, clearance = map_chunks(
        solve_chunk, t_pos, t_quat, q0.T, posture_ref.T, restart_base, chunk=chunk)
    return q.T, IKInfo(converged=done, pos_err=pe, rot_err=re, iterations=count, restarts=restarts, seed=pick,
                       clearance=clearance)


def _norm3(v: Array) -> Array:
    """Euclidean norm over the leading 3 components, written out (no reduction op on XLA:CPU)."""
    return jnp.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])


# Only the method, seed count and posture switch are static: iteration caps, tolerances, weights and
# restart settings change without recompiling.
_solve_jit = jax.jit(_solve_impl, static_argnames=("method", "num_seeds", "use_posture"))
