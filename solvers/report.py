"""``ik_report``: a seeded IK benchmark of one asset, as a JSON-serialisable dict (for ``doit ik``)."""

from __future__ import annotations

import time
from os import PathLike
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .forward import forward_kinematics
from .kinematics import Kinematics, random_configurations
from .solve import IKInfo, solve_ik

_PERCENTILES = (50, 90, 99, 100)


def ik_report(
    usd_path: str | PathLike[str],
    ee_body: str,
    num_targets: int = 4096,
    seed: int = 0,
    *,
    iterations: int = 20,
    home_iterations: int = 200,
    perturbation: float = 0.2,
    pos_tol: float = 1e-3,
    rot_tol: float = 1e-3,
    method: str = "dls",
    ik_params: Mapping[str, float] | None = None,
    max_step: float | None = 0.5,
    home_restart_after: int | None = 10,
    dtype: str = "float32",
    device: str = "cpu",
    ee_offset: Sequence[float] | None = None,
    ee_bodies: Sequence[str] = (),
    weights: Sequence[float] | None = None,
    num_seeds: int = 1,
    collision: bool = False,
    collision_margin: float = 0.005,
    collision_pairs: Sequence[Sequence[Sequence[str]]] | None = None,
) -> dict[str, Any]:
    """Solve a fixed, seeded batch of reachable pose targets for ``ee_body`` and summarise the outcome.

    Targets are the ee poses (FK) of ``num_targets`` uniform in-limit configurations drawn from
    ``seed``. Two runs of :func:`solve_ik` solve them, both with steps of at most ``max_step`` per joint:
    ``perturbed`` starts each target from its own configuration plus uniform noise of at most
    ``perturbation`` rad (or m) per joint, clamped into the limits, for at most ``iterations`` steps;
    ``home`` starts every target from the zero (rest) pose clamped into the limits, for at most
    ``home_iterations`` steps, re-seeding targets that stall for ``home_restart_after`` steps (None: never;
    from one start, joint limits leave a local method stuck on a large share of random targets). Each run
    reports its success rate, error and iteration percentiles (p50, p90, p99, max), restarts, and timing:
    ``first_call_s`` (compile + solve), ``solve_s`` (a second, compiled call) and ``compile_s`` (their
    difference). ``dtype="float64"`` switches 64-bit JAX on for the duration of the call only.

    ``ee_bodies`` are further end-effectors solved together with ``ee_body`` (targets for all of them,
    ``weights`` one per end-effector); ``num_seeds`` starts per target from the rest pose (the home run).
    ``collision`` fits :func:`solvers.collision.fit_self_collision` to the USD's colliders and solves with
    self-collision avoidance at ``collision_margin`` (m), for the link pairs ``collision_pairs``
    (``[(links_a, links_b), ...]``: one link in each group; None: every pair with colliders). Every run reports ``limits`` (the share of
    solutions with a joint within 1e-4 of the range's ends, and the mean count of such joints) and, with
    ``collision``, ``collision`` (clearance percentiles of the capsule model, m, and the share of
    solutions whose capsules overlap); the report gives the capsule cover's error per body.
    """
    if jnp.dtype(dtype) == jnp.float64 and not jax.config.jax_enable_x64:
        with jax.enable_x64(True):
            return ik_report(
                usd_path, ee_body, num_targets, seed, iterations=iterations, home_iterations=home_iterations,
                perturbation=perturbation, pos_tol=pos_tol, rot_tol=rot_tol, method=method, ik_params=ik_params,
                max_step=max_step, home_restart_after=home_restart_after, dtype=dtype, device=device,
                ee_offset=ee_offset, ee_bodies=ee_bodies, weights=weights, num_seeds=num_seeds,
                collision=collision, collision_margin=collision_margin, collision_pairs=collision_pairs,
            )
    if ee_bodies:
        kin = Kinematics.from_usd(usd_path, ee_bodies=[ee_body, *ee_bodies],
                                  ee_offset=None if ee_offset is None else [ee_offset] + [None] * len(ee_bodies),
                                  dtype=jnp.dtype(dtype), device=device)
    else:
        kin = Kinematics.from_usd(usd_path, ee_body, ee_offset=ee_offset, dtype=jnp.dtype(dtype), device=device)
    model = None
    if collision:
        from .collision import fit_self_collision

        between = None if collision_pairs is None else [(list(a), list(b)) for a, b in collision_pairs]
        model = fit_self_collision(usd_path, kin, margin=collision_margin, between=between)
    key_q, key_noise = jax.random.split(jax.random.PRNGKey(seed))
    q_true = random_configurations(kin, key_q, (num_targets,))
    pos, quat = forward_kinematics(kin, q_true)
    targets = jnp.concatenate([pos, quat], axis=-1)
    noise = jax.random.uniform(
        key_noise, q_true.shape, dtype=kin.dtype, minval=-perturbation, maxval=perturbation
    )
    seeds = jnp.clip(q_true + noise, kin.lower, kin.upper)
    home = jnp.clip(jnp.zeros(kin.num_joints, kin.dtype), kin.lower, kin.upper)
    common = dict(pos_tol=pos_tol, rot_tol=rot_tol, method=method, ik_params=ik_params, max_step=max_step,
                  weights=weights, collision=model)
    runs = {
        "perturbed": _timed_run(kin, targets, seeds, iterations, common) | {"perturbation": float(perturbation)},
        "home": _timed_run(kin, targets, home, home_iterations,
                           common | {"restart_after": home_restart_after, "num_seeds": num_seeds})
        | {"home_pose": _floats(home), "restart_after": home_restart_after, "num_seeds": int(num_seeds)},
    }
    return {
        "usd_path": str(usd_path),
        "ee_body": kin.ee_body,
        "ee_bodies": list(kin.ee_bodies),
        "weights": None if weights is None else [float(w) for w in weights],
        "collision": None if model is None else {
            "margin_m": float(collision_margin), "capsules": model.num_capsules,
            "body_pairs": [list(p) for p in model.body_pairs],
            "cover_error_m": {b: e._asdict() for b, e in model.cover_error},
        },
        "joint_names": list(kin.joint_names),
        "num_targets": int(num_targets),
        "seed": int(seed),
        "method": method,
        "ik_params": {k: float(v) for k, v in (ik_params or {}).items()},
        "max_step": None if max_step is None else float(max_step),
        "pos_tol": float(pos_tol),
        "rot_tol": float(rot_tol),
        "dtype": str(kin.dtype),
        "device": str(kin.lower.devices().pop()),
        "jax_version": jax.__version__,
        "runs": runs,
    }


def _timed_run(kin: Kinematics, targets: jax.Array, q0: jax.Array, iterations: int, common: dict) -> dict[str, Any]:
    t0 = time.perf_counter()
    jax.block_until_ready(solve_ik(kin, targets, q0, iterations=iterations, **common))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    q, info = jax.block_until_ready(solve_ik(kin, targets, q0, iterations=iterations, **common))
    solve_s = time.perf_counter() - t0
    return {"max_iterations": int(iterations)} | _summary(info) | _limit_stats(kin, q) \
        | _collision_stats(common.get("collision"), kin, q) | {
        "first_call_s": first,
        "solve_s": solve_s,
        "compile_s": max(first - solve_s, 0.0),
        "targets_per_s": float(targets.shape[0] / solve_s) if solve_s > 0 else None,
    }


def _summary(info: IKInfo) -> dict[str, Any]:
    conv = np.asarray(info.converged)
    return {
        "success_rate": float(conv.mean()) if conv.size else 0.0,
        "converged": int(conv.sum()),
        "pos_err_m": _percentiles(info.pos_err),
        "rot_err_rad": _percentiles(info.rot_err),
        "iterations": _percentiles(info.iterations),
        "mean_iterations": float(np.mean(np.asarray(info.iterations))) if conv.size else 0.0,
        "restarts": _percentiles(info.restarts),
    }


def _limit_stats(kin: Kinematics, q: jax.Array) -> dict[str, Any]:
    """Solutions with joints at their limits (within 1e-4 rad or m of a finite end)."""
    q = np.asarray(q, np.float64)
    lo, hi = np.asarray(kin.lower, np.float64), np.asarray(kin.upper, np.float64)
    at = (q <= lo + 1e-4) | (q >= hi - 1e-4)
    per_joint = at.mean(axis=0) if len(q) else np.zeros(kin.num_joints)
    return {"limits": {
        "at_limit_rate": float(at.any(axis=1).mean()) if len(q) else 0.0,
        "mean_joints_at_limit": float(at.sum(axis=1).mean()) if len(q) else 0.0,
        "per_joint_rate": {n: float(r) for n, r in zip(kin.joint_names, per_joint)},
    }}


def _collision_stats(model: Any, kin: Kinematics, q: jax.Array) -> dict[str, Any]:
    """Capsule-model clearance of the solutions (only when solving with collision avoidance)."""
    if model is None:
        return {}
    clearance = np.asarray(jax.jit(model.clearance)(kin, jnp.asarray(q).T), np.float64)
    return {"collision": {"in_collision_rate": float(np.mean(clearance < 0)), "clearance_m": _percentiles(clearance),
                          "clearance_min_m": float(clearance.min()) if clearance.size else None}}


def _percentiles(x: jax.Array) -> dict[str, float]:
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0:
        return {}
    return {("max" if p == 100 else f"p{p}"): float(np.percentile(a, p)) for p in _PERCENTILES}


def _floats(x: jax.Array) -> list[float]:
    return [float(v) for v in np.asarray(x)]
