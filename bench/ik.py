"""Benchmark one differential-IK iteration (FK + Jacobian + pose error + DLS step) in JAX and NumPy.

Usage::

    python bench/ik.py                       # converts the corpus panda MJCF with the pipeline, ee "hand"
    python bench/ik.py --usd build/usd/panda/panda.usda --ee hand [--batches 1 1024 65536] [--float64]
    python bench/ik.py --versus [--targets 1000] [--mink-targets 200]   # against PyRoKi and mink

``--versus`` solves the same Franka pose targets with usdforge, PyRoKi and mink side by side, collision
avoidance off and on, and prints throughput, success and self-collision rates (bench/ik_versus.py).

Prints, per batch size, iterations per second (targets × iterations / s) of

* ``jax 1/call``: one jitted iteration per call (dispatch included; the conservative figure);
* ``jax 10/call``: ten iterations in one jitted loop per call, chunk by chunk, as ``solve_ik`` runs;
* ``numpy``: the same algorithm vectorised over the batch in NumPy (``np.linalg.solve`` for the 6×6
  systems), one iteration per call;

their ratios and the JAX compile time. Each rate is the best of several interleaved rounds, so that
other load on the machine affects both sides alike. The timing core (:func:`bench_kinematics`) only
needs a :class:`solvers.Kinematics`.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from usdforge.solvers import Kinematics, ee_kernel, forward_kinematics  # noqa: E402
from usdforge.solvers.chunking import map_chunks  # noqa: E402
from usdforge.solvers.ik_step import dls_solve_cf, pose_error_cf  # noqa: E402
from usdforge.solvers.kinematics import random_configurations  # noqa: E402

LAMBDA = 0.01
LOOP = 10


# ---------------------------------------------------------------------------------------------------------
# JAX: component-first state (q (J, N), targets (3, N), (4, N)), the layout solve_ik iterates in.


def _jax_step(kin: Kinematics, q: jax.Array, t_pos: jax.Array, t_quat: jax.Array) -> jax.Array:
    pos, quat, jac = ee_kernel(kin, q)
    pos_err, rot_err = pose_error_cf(pos, quat, t_pos, t_quat)
    dq = dls_solve_cf(jac, jnp.concatenate([pos_err, rot_err]), LAMBDA)
    limits = (-1,) + (1,) * (q.ndim - 1)  # broadcast (J,) limits over any trailing batch shape
    return jnp.clip(q + dq, kin.lower.reshape(limits), kin.upper.reshape(limits))


@jax.jit
def jax_step(kin: Kinematics, q: jax.Array, t_pos: jax.Array, t_quat: jax.Array) -> jax.Array:
    """One iteration over any batch, in cache-sized chunks (solvers.chunking)."""
    return map_chunks(functools.partial(_jax_step, kin), q, t_pos, t_quat)


@jax.jit
def jax_loop(kin: Kinematics, q: jax.Array, t_pos: jax.Array, t_quat: jax.Array) -> jax.Array:
    """LOOP iterations per chunk inside one call."""

    def chunk(q, t_pos, t_quat):
        return lax.fori_loop(0, LOOP, lambda _, q: _jax_step(kin, q, t_pos, t_quat), q)

    return map_chunks(chunk, q, t_pos, t_quat)


# ---------------------------------------------------------------------------------------------------------
# NumPy: the same algorithm (chain of constant transforms and z motions, geometric Jacobian, quaternion
# pose error, DLS) with the batch as the leading axis.


class NumpyChain:
    """The ee chain of a Kinematics as NumPy arrays, and one IK iteration on them."""

    def __init__(self, kin: Kinematics) -> None:
        self.rot, self.pos = np.asarray(kin.chain_rot), np.asarray(kin.chain_pos)
        self.rev = np.asarray(kin.chain_revolute)
        self.lower, self.upper = np.asarray(kin.lower), np.asarray(kin.upper)
        dtype = self.rev.dtype
        # (C, J) coupling matrix and (C,) offsets from the static (index, multiplier, offset) triples.
        self.coupling = np.zeros((len(kin.chain_coords), kin.num_joints), dtype)
        self.offset = np.zeros(len(kin.chain_coords), dtype)
        for k, (j, m, o) in enumerate(kin.chain_coords):
            self.coupling[k, j], self.offset[k] = m, o

    def fk_jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ee position (N, 3), rotation (N, 3, 3), Jacobian (N, 6, J)."""
        n = q.shape[0]
        qc = q @ self.coupling.T + self.offset
        rot = np.broadcast_to(np.eye(3, dtype=q.dtype), (n, 3, 3))
        pos = np.zeros((n, 3), q.dtype)
        axes, origins = [], []
        for k in range(len(self.rev)):
            pos = pos + rot @ self.pos[k]
            rot = rot @ self.rot[k]
            c, s = np.cos(self.rev[k] * qc[:, k])[:, None], np.sin(self.rev[k] * qc[:, k])[:, None]
            x, y, z = rot[:, :, 0], rot[:, :, 1], rot[:, :, 2]
            rot = np.stack([c * x + s * y, c * y - s * x, z], axis=2)
            pos = pos + z * ((1.0 - self.rev[k]) * qc[:, k])[:, None]
            axes.append(z)
            origins.append(pos)
        ee_pos = pos + rot @ self.pos[-1]
        ee_rot = rot @ self.rot[-1]
        ax = np.stack(axes, axis=1)  # (N, C, 3)
        org = np.stack(origins, axis=1)
        rev = self.rev[None, :, None]
        lin = rev * np.cross(ax, ee_pos[:, None, :] - org) + (1.0 - rev) * ax
        cols = np.concatenate([lin, rev * ax], axis=2)  # (N, C, 6)
        return ee_pos, ee_rot, np.swapaxes(cols, 1, 2) @ self.coupling

    def step(self, q: np.ndarray, t_pos: np.ndarray, t_quat: np.ndarray) -> np.ndarray:
        pos, rot, jac = self.fk_jacobian(q)
        rot_err = _rotvec(_quat_mul(t_quat, _quat_conj(_matrix_to_quat(rot))))
        err = np.concatenate([t_pos - pos, rot_err], axis=1)
        a = jac @ np.swapaxes(jac, 1, 2) + (LAMBDA**2) * np.eye(6, dtype=q.dtype)
        y = np.linalg.solve(a, err[:, :, None])
        return np.clip(q + (np.swapaxes(jac, 1, 2) @ y)[:, :, 0], self.lower, self.upper)


def _matrix_to_quat(r: np.ndarray) -> np.ndarray:
    """(N, 4) quaternions (w, x, y, z) of (N, 3, 3) rotations (Shepperd's method)."""
    m = r
    t = np.stack([1 + m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2], 1 + m[:, 0, 0] - m[:, 1, 1] - m[:, 2, 2],
                  1 - m[:, 0, 0] + m[:, 1, 1] - m[:, 2, 2], 1 - m[:, 0, 0] - m[:, 1, 1] + m[:, 2, 2]], axis=1)
    cand = np.stack([
        np.stack([t[:, 0], m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1]], 1),
        np.stack([m[:, 2, 1] - m[:, 1, 2], t[:, 1], m[:, 0, 1] + m[:, 1, 0], m[:, 0, 2] + m[:, 2, 0]], 1),
        np.stack([m[:, 0, 2] - m[:, 2, 0], m[:, 0, 1] + m[:, 1, 0], t[:, 2], m[:, 1, 2] + m[:, 2, 1]], 1),
        np.stack([m[:, 1, 0] - m[:, 0, 1], m[:, 0, 2] + m[:, 2, 0], m[:, 1, 2] + m[:, 2, 1], t[:, 3]], 1),
    ], axis=1)
    best = np.argmax(t, axis=1)
    q = cand[np.arange(len(r)), best] * (0.5 / np.sqrt(t[np.arange(len(r)), best]))[:, None]
    return q


def _quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1, -1, -1, -1], q.dtype)


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=1)


def _rotvec(q: np.ndarray) -> np.ndarray:
    """Rotation vectors (N, 3) of unit quaternions (N, 4), taken with w >= 0."""
    q = np.where(q[:, :1] < 0, -q, q)
    mag = np.linalg.norm(q[:, 1:], axis=1)
    angle = 2 * np.arctan2(mag, q[:, 0])
    factor = np.where(mag > 1e-7, angle / np.where(mag > 1e-7, mag, 1.0), 2.0)
    return q[:, 1:] * factor[:, None]


# ---------------------------------------------------------------------------------------------------------


def _calls_per_s(fn: Callable[[], Any], seconds: float) -> float:
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and calls >= 2:
            return calls / elapsed


def bench_kinematics(kin: Kinematics, batches: tuple[int, ...] = (1, 1024, 65536), seconds: float = 0.5,
                     rounds: int = 5, seed: int = 0) -> list[dict[str, float]]:
    """Time an IK iteration in JAX (1 and LOOP per call) and NumPy at each batch size; one row per batch.

    Rates are targets × iterations per second, best of ``rounds`` interleaved measurements of
    ``seconds`` each.
    """
    chain = NumpyChain(kin)
    return [_bench_batch(kin, chain, batch, seconds, rounds, seed) for batch in batches]


def _bench_batch(kin: Kinematics, chain: NumpyChain, batch: int, seconds: float, rounds: int,
                 seed: int) -> dict[str, float]:
    key_t, key_q = jax.random.split(jax.random.PRNGKey(seed + batch))
    t_pos, t_quat = forward_kinematics(kin, random_configurations(kin, key_t, (batch,)))
    q = random_configurations(kin, key_q, (batch,))
    args = (kin, q.T, t_pos.T, t_quat.T)  # component-first, the layout solve_ik iterates in
    t0 = time.perf_counter()
    step = jax_step.lower(*args).compile()
    compile_s = time.perf_counter() - t0
    loop = jax_loop.lower(*args).compile()
    qn, tp, tq = np.asarray(q), np.asarray(t_pos), np.asarray(t_quat)
    # The implementations must agree, or the comparison means nothing: same step from the same q
    # (DLS amplifies float32 rounding near singular poses, hence the median as well as the max).
    diff = np.abs(np.asarray(step(*args)).T - chain.step(qn, tp, tq))
    runs = {
        "jax": (batch, lambda: step(*args).block_until_ready()),
        "loop": (LOOP * batch, lambda: loop(*args).block_until_ready()),
        "numpy": (batch, lambda: chain.step(qn, tp, tq)),
    }
    best = dict.fromkeys(runs, 0.0)
    for _ in range(rounds):
        for name, (work, fn) in runs.items():
            best[name] = max(best[name], work * _calls_per_s(fn, seconds))
    return {"batch": batch, "jax_per_s": best["jax"], "jax_loop_per_s": best["loop"],
            "numpy_per_s": best["numpy"], "speedup": best["jax"] / best["numpy"],
            "loop_speedup": best["loop"] / best["numpy"], "compile_s": compile_s,
            "median_abs_diff": float(np.median(diff)), "max_abs_diff": float(diff.max())}


def _convert_panda(out_dir: str) -> str:
    from usdforge.pipeline import MjcfConverter  # noqa: PLC0415 - only this default needs the converters
    from usdforge.schemas import MjcfConverterCfg  # noqa: PLC0415

    corpus = ROOT.parent / "shared" / "corpus" / "mjcf" / "franka_emika_panda" / "panda.xml"
    cfg = MjcfConverterCfg(asset_path=str(corpus), usd_dir=out_dir, usd_file_name="panda.usda")
    return str(MjcfConverter(cfg).usd_path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--usd", help="converted asset (default: convert the corpus panda MJCF)")
    parser.add_argument("--ee", default="hand", help="end-effector body source name (default: hand)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 1024, 65536])
    parser.add_argument("--seconds", type=float, default=0.5, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved measurements; the best counts")
    parser.add_argument("--float64", action="store_true", help="time float64 (enables jax_enable_x64)")
    parser.add_argument("--versus", action="store_true",
                        help="usdforge vs PyRoKi vs mink on the same Franka targets (bench/ik_versus.py)")
    parser.add_argument("--targets", type=int, default=1000, help="--versus: batch of pose targets")
    parser.add_argument("--mink-targets", type=int, default=200, help="--versus: targets mink solves (serial)")
    parser.add_argument("--seed", type=int, default=0, help="--versus: targets and PyRoKi's extra starts")
    parser.add_argument("--only-usdforge", default=None, metavar="LABEL",
                        help="--versus: only usdforge's runs whose label contains LABEL (e.g. '50 it.')")
    args = parser.parse_args(argv)
    if args.versus:
        import ik_versus  # noqa: PLC0415 - needs pyroki and mink, from its own venv

        ik_versus.ensure_venv(sys.argv[1:] if argv is None else argv)
        ik_versus.main(args)
        return
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    with tempfile.TemporaryDirectory() as tmp:
        usd = args.usd or _convert_panda(tmp)
        kin = Kinematics.from_usd(usd, args.ee, dtype=jnp.float64 if args.float64 else jnp.float32)
        rows = bench_kinematics(kin, tuple(args.batches), args.seconds, args.rounds)
    print(f"# {Path(usd).name} ee={kin.ee_body} J={kin.num_joints} chain={kin.chain_length} dtype={kin.dtype} "
          f"jax={jax.__version__} numpy={np.__version__} cpus={os.cpu_count()} "
          f"{platform.processor() or platform.machine()}")
    print("# iteration = FK + Jacobian + pose error + DLS step (lambda 0.01) + clamp; "
          "rates in targets*iterations/s, best of interleaved rounds")
    print(f"{'batch':>7} {'jax 1/call':>12} {f'jax {LOOP}/call':>12} {'numpy':>11} {'x(1/call)':>10} "
          f"{f'x({LOOP}/call)':>11} {'compile s':>10} {'|dq| diff med/max':>19}")
    for r in rows:
        print(f"{r['batch']:>7} {r['jax_per_s']:>12,.0f} {r['jax_loop_per_s']:>12,.0f} {r['numpy_per_s']:>11,.0f} "
              f"{r['speedup']:>9.1f}x {r['loop_speedup']:>10.1f}x {r['compile_s']:>10.2f} "
              f"{r['median_abs_diff']:>9.1e}/{r['max_abs_diff']:.1e}")


if __name__ == "__main__":
    main()
