"""usdforge's batched IK side by side with PyRoKi (JAX, batched) and mink (MuJoCo, serial), in one run.

Usage::

    python bench/ik.py --versus                     # 1,000 targets; mink on the first 200
    python bench/ik.py --versus --targets 200 --mink-targets 50 --rounds 3
    python bench/ik.py --versus --only-usdforge "50 it."    # only usdforge's rows with that label

PyRoKi (the registry's ``almond-pyroki`` 0.1.1, module ``pyroki``) and mink 1.3.0 are not usdforge
dependencies: the first run makes ``build/venv-ik-bench`` (a venv over the system site-packages, so it
shares usdforge's jax) and installs them there, and the bench re-runs itself in it.

The task: single end-effector Franka (the hand), pose targets, batch ``--targets``. Targets are the
hand poses (MuJoCo FK, float64) of uniform configurations within the limits that MuJoCo finds free of
self-collision; every solver starts from q0 = 0 clamped into the limits. Success is judged for every
solver alike by MuJoCo's FK of the corpus MJCF: within 1 mm and 1e-3 rad. Self-collision is judged by
MuJoCo's contacts on the same model (pairs in contact at rest excluded), for the pairs ``FRANKA_PAIRS``.

* **usdforge**: the corpus MJCF converted to USD, ``solve_ik`` (dls, 200 iterations, solved to 5e-4 as
  ``bench/ik_tasks.py``), once from q0 alone and once with 16 starts and restarts (its default for these
  tasks), and with collision on also 16 and 4 starts capped at 50 iterations; collision: capsules fitted to the USD's colliders, 5 mm margin, the pairs ``FRANKA_PAIRS``.
* **PyRoKi**: the corpus Franka URDF (example-robot-data's ``panda.urdf``, the same kinematics: the bench
  prints the largest FK difference), its documented IK recipe (``pose_cost_analytic_jac`` with position
  weight 50 and orientation weight 10, ``limit_cost`` 100, Levenberg–Marquardt with a dense Cholesky, up
  to 100 iterations), ``jax.vmap`` over the batch, from q0 (a vmapped 16-start variant took minutes to
  compile on 2 cores and is left out). Collision: its own model (one capsule per link fitted to the URDF's
  collision meshes, ``RobotCollision.from_urdf``) with ``self_collision_cost`` (margin 5 mm, weight 5),
  every link pair outside ``FRANKA_PAIRS`` ignored.
* **mink**: the corpus MJCF itself, ``FrameTask`` on the hand, ``ConfigurationLimit``, daqp, steps of
  dt = 1 until 5e-4 or 200 steps, one target after another; collision: ``CollisionAvoidanceLimit`` on the
  collision geoms of ``FRANKA_PAIRS`` (5 mm minimum distance) -- MuJoCo's own geometry, exact.

Throughput is targets per second of the compiled solve: the median of ``--rounds`` calls after the first
(compile + solve, printed as "first s"); mink's is its one pass over ``--mink-targets`` of the targets.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "build" / "venv-ik-bench"
PINS = ["almond-pyroki==0.1.1", "mink==1.3.0"]
URDF_ROOT = ROOT.parent / "shared" / "corpus" / "urdf" / "panda"
URDF = URDF_ROOT / "example-robot-data" / "robots" / "panda_description" / "urdf" / "panda.urdf"
NUM_SEEDS = 16


def ensure_venv(argv: list[str]) -> None:
    """Re-run this bench in build/venv-ik-bench (made on first use) unless pyroki and mink import here."""
    try:
        import mink  # noqa: F401
        import pyroki  # noqa: F401
        return
    except ImportError:
        pass  # not installed in this interpreter: use (or make) the bench venv
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"# making {VENV} with {' '.join(PINS)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PINS], check=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    sys.exit(subprocess.run([str(python), str(ROOT / "bench" / "ik.py"), *argv], env=env).returncode)


def _median_time(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


# ---------------------------------------------------------------------------------------------------------
# usdforge


def usdforge_runs(kin, targets, q0, collision_model):
    import jax

    from usdforge.solvers import solve_ik

    from ik_tasks import SOLVE

    runs = {}
    for label, extra, cols in (
            ("usdforge q0", {"num_seeds": 1, "restart_after": None}, (None, collision_model)),
            (f"usdforge {NUM_SEEDS} starts", {"num_seeds": NUM_SEEDS}, (None, collision_model)),
            # Collision on, capped at 50 iterations: a target that has not converged by then rarely does,
            # and with collision rows its chunk pays for all 200.
            (f"usdforge {NUM_SEEDS} st. 50 it.", {"num_seeds": NUM_SEEDS, "iterations": 50}, (collision_model,)),
            # Fewer starts for throughput: 4 starts, 50 iterations, collision on.
            ("usdforge 4 st. 50 it.", {"num_seeds": 4, "iterations": 50}, (collision_model,))):
        for col in cols:
            settings = SOLVE | extra
            runs[(label, col is not None)] = {"solve": lambda settings=settings, col=col: np.asarray(
                jax.block_until_ready(solve_ik(kin, targets, q0, collision=col, **settings))[0])}
    return runs


# ---------------------------------------------------------------------------------------------------------
# PyRoKi


def _ignored_pairs(names: list[str], wanted: set[frozenset[str]]) -> tuple[tuple[str, str], ...]:
    return tuple((a, b) for i, a in enumerate(names) for b in names[i + 1:] if frozenset((a, b)) not in wanted)


def pyroki_runs(targets: np.ndarray, q0_arm: np.ndarray, pairs):
    import jax
    import jax.numpy as jnp
    import jaxlie
    import jaxls
    import pyroki as pk
    import yourdfpy

    handler = lambda fname: fname.replace("package://", str(URDF_ROOT) + "/")  # noqa: E731 - the corpus is the package root
    urdf = yourdfpy.URDF.load(str(URDF), filename_handler=handler, load_meshes=False,
                              load_collision_meshes=True, build_collision_scene_graph=True)
    robot = pk.Robot.from_urdf(urdf)
    names = list(robot.links.names)
    to_urdf = {"hand": "panda_hand", "left_finger": "panda_leftfinger", "right_finger": "panda_rightfinger",
               **{f"link{i}": f"panda_link{i}" for i in range(8)}}
    wanted = {frozenset((to_urdf[a], to_urdf[b])) for ga, gb in pairs for a in ga for b in gb}
    coll = pk.collision.RobotCollision.from_urdf(urdf, user_ignore_pairs=_ignored_pairs(names, wanted))
    hand = jnp.asarray(names.index("panda_hand"), jnp.int32)
    n_act = robot.joints.num_actuated_joints
    lo, hi = np.asarray(robot.joints.lower_limits), np.asarray(robot.joints.upper_limits)
    q0 = np.clip(np.concatenate([q0_arm, np.zeros(n_act - len(q0_arm))]), lo, hi)

    @functools.partial(jax.jit, static_argnames=("collision",))
    def solve_one(robot, coll, pose, start, collision: bool):
        var = robot.joint_var_cls(0)
        target = jaxlie.SE3.from_rotation_and_translation(jaxlie.SO3(pose[3:]), pose[:3])
        costs = [pk.costs.pose_cost_analytic_jac(robot, var, target, hand, pos_weight=50.0, ori_weight=10.0),
                 pk.costs.limit_cost(robot, var, weight=100.0)]
        if collision:
            costs.append(pk.costs.self_collision_cost(robot, coll, var, margin=0.005, weight=5.0))
        sol = jaxls.LeastSquaresProblem(costs, [var]).analyze().solve(
            initial_vals=jaxls.VarValues.make([var.with_value(start)]), verbose=False,
            linear_solver="dense_cholesky", trust_region=jaxls.TrustRegionConfig(lambda_initial=1.0))
        return sol[var]

    runs = {}
    for collision in (False, True):
        one = jax.jit(jax.vmap(lambda pose, c=collision: solve_one(robot, coll, pose, jnp.asarray(q0, jnp.float32), c)))
        poses = jnp.asarray(targets, jnp.float32)
        runs[("PyRoKi q0", collision)] = {"solve": lambda one=one: np.asarray(jax.block_until_ready(one(poses)))[:, :7]}
    fk = lambda q: np.asarray(robot.forward_kinematics(jnp.asarray(  # noqa: E731
        np.concatenate([q, np.zeros((len(q), n_act - 7))], axis=1), jnp.float32))[:, int(hand)])
    return runs, fk


# ---------------------------------------------------------------------------------------------------------
# mink


def mink_runs(model_path: Path, joint_names, targets: np.ndarray, pairs):
    import mink
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(model_path))
    adr = [model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)] for n in joint_names]

    def geoms(bodies):
        out = []
        for b in bodies:
            bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, b)
            out += [g for g in range(model.ngeom) if model.geom_bodyid[g] == bid
                    and (model.geom_contype[g] or model.geom_conaffinity[g])]
        return out

    geom_pairs = [(geoms(ga), geoms(gb)) for ga, gb in pairs]
    q_start = np.clip(model.qpos0.copy(), model.jnt_range[:, 0], model.jnt_range[:, 1])

    def solve(collision: bool) -> np.ndarray:
        config = mink.Configuration(model)
        task = mink.FrameTask("hand", "body", position_cost=1.0, orientation_cost=1.0, lm_damping=1e-6)
        limits = [mink.ConfigurationLimit(model)]
        if collision:
            limits.append(mink.CollisionAvoidanceLimit(model, geom_pairs, minimum_distance_from_collisions=0.005,
                                                       collision_detection_distance=0.05))
        out = np.zeros((len(targets), len(adr)))
        for i, t in enumerate(targets):
            config.update(q_start)
            task.set_target(mink.SE3.from_rotation_and_translation(mink.SO3(t[3:]), t[:3]))
            for _ in range(200):
                err = task.compute_error(config)
                if np.linalg.norm(err[:3]) <= 5e-4 and np.linalg.norm(err[3:]) <= 5e-4:
                    break
                vel = mink.solve_ik(config, [task], 1.0, "daqp", damping=1e-6, limits=limits)
                config.integrate_inplace(vel, 1.0)
            out[i] = config.q[adr] - model.qpos0[adr]
        return out

    return {("mink (serial)", c): {"solve": lambda c=c: solve(c)} for c in (False, True)}


# ---------------------------------------------------------------------------------------------------------


def main(args) -> None:
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(ROOT / "bench"))
    from ik_tasks import FRANKA_PAIRS, SHARED, SOURCES, MujocoCheck, check, convert

    from usdforge.solvers import Kinematics, random_configurations
    from usdforge.solvers.collision import fit_self_collision

    usd = convert("franka_emika_panda")
    kin = Kinematics.from_usd(usd, "hand")
    mj = MujocoCheck("franka_emika_panda", kin)
    n = args.targets
    q_all = np.asarray(random_configurations(kin, jax.random.PRNGKey(args.seed), (3 * n,)))
    q_true = q_all[~mj.self_collisions(q_all)][:n]
    pos, quat = mj.ee_poses(q_true)
    targets = np.concatenate([pos[:, 0], quat[:, 0]], axis=1)  # (n, 7) float64, MuJoCo's own FK
    q0 = np.clip(np.zeros(kin.num_joints), np.asarray(kin.lower), np.asarray(kin.upper))
    model = fit_self_collision(usd, kin, margin=0.005, between=FRANKA_PAIRS)

    # usdforge's rows first (the cheap ones), then PyRoKi's, then mink's: a run cut short keeps the most.
    runs = usdforge_runs(kin, jnp.asarray(targets, jnp.float32), jnp.asarray(q0, jnp.float32), model)
    if args.only_usdforge:
        runs = {k: v for k, v in runs.items() if args.only_usdforge in k[0]}
    else:
        pk_runs, pk_fk = pyroki_runs(targets, q0, FRANKA_PAIRS)
        runs |= pk_runs
    m = min(args.mink_targets, n)
    if not args.only_usdforge:
        runs |= mink_runs(SHARED / SOURCES["franka_emika_panda"], kin.joint_names, targets[:m], FRANKA_PAIRS)
        # Same kinematics? PyRoKi's URDF hand against MuJoCo's MJCF hand at the true configurations.
        fk = pk_fk(q_true)
        fk_diff = np.abs(fk[:, 4:] - targets[:, :3]).max()
        rot_diff = np.abs(np.abs(np.sum(fk[:, :4] * targets[:, 3:], axis=1)) - 1).max()
        print(f"# PyRoKi's URDF vs the MJCF: hand position differs by at most {fk_diff:.1e} m, |<q1,q2>|-1 {rot_diff:.1e}")

    print(f"# jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} cpus; {n} Franka hand pose "
          f"targets (mink: first {m}), from q0; success = MuJoCo FK within 1 mm and 1e-3 rad; collision = "
          "a MuJoCo contact between robot bodies not in contact at rest; solve s = median of the timed calls after the first")
    print(f"{'solver':22s} {'collision':9s} {'targets/s':>10s} {'solve s':>8s} {'first s':>8s} {'success':>8s} "
          f"{'in coll.':>8s} {'ok+free':>8s} {'load':>5s}", flush=True)
    rows = []
    for (label, collision), r in runs.items():
        t0 = time.perf_counter()
        q = np.asarray(r["solve"](), np.float64)
        first = time.perf_counter() - t0
        times = []
        for _ in range(args.rounds if label != "mink (serial)" else 0):
            t0 = time.perf_counter()
            r["solve"]()
            times.append(time.perf_counter() - t0)
        dt = float(np.median(times)) if times else first  # mink compiles nothing: its first call is its time
        count = len(q)
        ok = check(mj, q, targets[:count])
        hit = mj.self_collisions(q)
        row = {"solver": label, "collision": collision, "targets_per_s": count / dt, "solve_s": dt,
               "first_s": first, "success": float(ok.mean()), "in_collision": float(hit.mean()),
               "success_collision_free": float((ok & ~hit).mean()), "targets": count}
        rows.append(row)
        print(f"{label:22s} {'on' if collision else 'off':9s} {row['targets_per_s']:>10.0f} {dt:>8.2f} "
              f"{first:>8.1f} {100 * row['success']:>7.1f}% {100 * row['in_collision']:>7.1f}% "
              f"{100 * row['success_collision_free']:>7.1f}% {os.getloadavg()[0]:>5.1f}", flush=True)
    return rows
