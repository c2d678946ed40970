"""IK on real tasks, checked by MuJoCo on the source model: several end-effectors and self-collision.

Usage::

    python bench/ik_tasks.py                 # every study below, 1,000 targets each
    python bench/ik_tasks.py --only h1-arms-pose --targets 200 --seeds 32 --iterations 300

Studies (corpus robots converted by usdforge into build/bench-ik/; targets are the FK of uniform
configurations within the limits, solved from q0 = 0 clamped into the limits):

* ``h1-arm``: unitree_h1 left elbow link (torso + 4 joints), position targets;
* ``h1-arms`` / ``h1-arms-pose``: both elbow links at once (9 joints), position / pose targets;
* ``franka-collision`` / ``h1-collision``: pose (franka hand) / position (h1 both arms) targets with
  self-collision avoidance off and on (capsules from the USD colliders, 5 mm margin; the checked pairs
  are ``FRANKA_PAIRS`` / ``H1_PAIRS``: arm vs hand and fingers, arms vs torso and legs and left arm vs
  right arm).

Every solution is checked with MuJoCo's own model of the source: ``mj_kinematics`` for the end-effector
poses (success = within 1 mm and 1e-3 rad), and ``mj_fwdPosition``'s contacts for self-collision (a
contact with penetration between two robot bodies; MuJoCo's own exclusions: parent/child, <exclude>,
contype/conaffinity). Prints one block per study and the capsule cover's error per body.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402

from usdforge.solvers import Kinematics, forward_kinematics, random_configurations, solve_ik  # noqa: E402
from usdforge.solvers.collision import fit_self_collision  # noqa: E402

SHARED = ROOT.parent / "shared" / "corpus"
SOURCES = {"unitree_h1": "mjcf/unitree_h1/h1.xml", "franka_emika_panda": "mjcf/franka_emika_panda/panda.xml"}
# The pairs of the studies: franka's hand and fingers (and the wrist links) against the arm's base links;
# h1's arm links against the torso and legs (its pelvis has no collider).
_FINGERS = ["hand", "left_finger", "right_finger"]
FRANKA_PAIRS = [(["link0", "link1", "link2", "link3", "link4"], ["link7", *_FINGERS]),
                (["link0", "link1", "link2"], ["link5", "link6"])]
_H1_ARM = {s: [f"{s}_{p}_link" for p in ("shoulder_roll", "shoulder_yaw", "elbow")] for s in ("left", "right")}
_H1_ARMS = _H1_ARM["left"] + _H1_ARM["right"]
# Arms against torso and legs, and the left arm against the right (MuJoCo counts those contacts too).
H1_PAIRS = [(_H1_ARMS, ["torso_link"] + [f"{s}_{p}_link" for s in ("left", "right")
                                                  for p in ("hip_yaw", "hip_roll", "hip_pitch", "knee", "ankle")]),
            (_H1_ARM["left"], _H1_ARM["right"])]
# Solved to half the checked tolerance: float32 FK differs from MuJoCo's float64 by up to ~1e-5 rad, and a
# solution right at 1e-3 would be judged by that rounding.
SOLVE = dict(iterations=200, pos_tol=5e-4, rot_tol=5e-4, max_step=0.5, restart_after=5, num_seeds=16)


def convert(name: str) -> Path:
    from usdforge.pipeline import MjcfConverter
    from usdforge.schemas import MjcfConverterCfg

    out = ROOT / "build" / "bench-ik" / name
    cfg = MjcfConverterCfg(asset_path=str(SHARED / SOURCES[name]), usd_dir=str(out), usd_file_name=f"{name}.usda")
    return Path(MjcfConverter(cfg).usd_path)


class MujocoCheck:
    """MuJoCo's model of the source: ee poses and self-contacts at usdforge coordinates q."""

    def __init__(self, name: str, kin: Kinematics) -> None:
        self.model = mujoco.MjModel.from_xml_path(str(SHARED / SOURCES[name]))
        self.data = mujoco.MjData(self.model)
        self.kin = kin
        self.adr = [self.model.jnt_qposadr[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, n)]
                    for n in kin.joint_names]
        self.ee = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, b) for b in kin.ee_bodies]
        # Pairs already in contact at the rest pose (franka: link5/hand hulls, the closed fingers) are
        # how the robot is built, as the capsule model treats them: left out of the count.
        self.at_rest = self._contacts(np.zeros(kin.num_joints))

    def _contacts(self, q: np.ndarray) -> set[tuple[int, int]]:
        self._set(q)
        mujoco.mj_fwdPosition(self.model, self.data)
        pairs = set()
        for c in self.data.contact[: self.data.ncon]:
            b1, b2 = self.model.geom_bodyid[c.geom1], self.model.geom_bodyid[c.geom2]
            if b1 > 0 and b2 > 0 and c.dist < 0:
                pairs.add((min(b1, b2), max(b1, b2)))
        return pairs

    def _set(self, q: np.ndarray) -> None:
        self.data.qpos[:] = self.model.qpos0
        for a, v in zip(self.adr, q):
            self.data.qpos[a] = v + self.model.qpos0[a]

    def ee_poses(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos, quat = [], []
        for row in np.asarray(q, np.float64):
            self._set(row)
            mujoco.mj_kinematics(self.model, self.data)
            pos.append(self.data.xpos[self.ee].copy())
            quat.append(self.data.xquat[self.ee].copy())
        return np.array(pos), np.array(quat)

    def self_collisions(self, q: np.ndarray) -> np.ndarray:
        """Per configuration: a penetrating contact between two robot bodies not in contact at rest."""
        return np.array([bool(self._contacts(row) - self.at_rest) for row in np.asarray(q, np.float64)])


def check(mj: MujocoCheck, q, targets: np.ndarray) -> np.ndarray:
    """Success per target by MuJoCo's FK: every ee within 1 mm (and 1e-3 rad for pose targets)."""
    pos, quat = mj.ee_poses(q)
    targets = targets.reshape(len(q), len(mj.ee), -1)
    ok = np.linalg.norm(pos - targets[..., :3], axis=-1).max(axis=1) <= 1e-3
    if targets.shape[-1] == 7:
        dot = np.clip(np.abs(np.sum(quat * targets[..., 3:7], axis=-1)), 0.0, 1.0)
        ok &= (2 * np.arccos(dot)).max(axis=1) <= 1e-3 + 1e-6
    return ok


def study(name: str, ee: list[str], n: int, pose: bool, seed: int = 0, collision: dict | None = None,
          **solve_kwargs) -> dict:
    usd = convert(name)
    kin = Kinematics.from_usd(usd, ee_bodies=ee)
    mj = MujocoCheck(name, kin)
    # Reachable targets: configurations within the limits that MuJoCo finds free of self-collision.
    q_true = np.asarray(random_configurations(kin, jax.random.PRNGKey(seed), (3 * n,)))
    q_true = jnp.asarray(q_true[~mj.self_collisions(q_true)][:n])
    pos, quat = forward_kinematics(kin, q_true)
    targets = jnp.concatenate([pos, quat], axis=-1) if pose else pos
    q0 = jnp.clip(jnp.zeros(kin.num_joints), kin.lower, kin.upper)
    model = fit_self_collision(usd, kin, **collision) if collision is not None else None
    settings = SOLVE | solve_kwargs
    jax.block_until_ready(solve_ik(kin, targets[:8], q0, collision=model, **settings))  # compile
    t0 = time.perf_counter()
    q, info = jax.block_until_ready(solve_ik(kin, targets, q0, collision=model, **settings))
    dt = time.perf_counter() - t0
    ok = check(mj, np.asarray(q), np.asarray(targets))
    hits = mj.self_collisions(np.asarray(q))
    return {"study": name, "ee": ee, "targets": n, "pose": pose, "collision": collision is not None,
            "success_mujoco": float(ok.mean()), "converged_solver": float(np.mean(info.converged)),
            "self_collision_rate": float(hits.mean()), "self_collision_rate_of_successes":
            float(hits[ok].mean()) if ok.any() else 0.0, "solve_s": dt, "targets_per_s": n / dt,
            "model": model}


def show(r: dict) -> None:
    kind = "pose" if r["pose"] else "position"
    print(f"{r['study']:20s} {','.join(r['ee']):40s} {kind:8s} collision={'on ' if r['collision'] else 'off'} "
          f"n={r['targets']}: success (MuJoCo FK, 1 mm{' / 1e-3 rad' if r['pose'] else ''}) "
          f"{100 * r['success_mujoco']:.1f} % (solver: {100 * r['converged_solver']:.1f} %), self-collision (MuJoCo) {100 * r['self_collision_rate']:.1f} % "
          f"of solutions ({100 * r['self_collision_rate_of_successes']:.1f} % of successes), "
          f"{r['solve_s']:.2f} s ({r['targets_per_s']:.0f} targets/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--only", default=None,
                        help="h1-arm, h1-arms, h1-arms-pose, franka-collision or h1-collision")
    parser.add_argument("--seeds", type=int, default=SOLVE["num_seeds"], help="starts per target")
    parser.add_argument("--iterations", type=int, default=SOLVE["iterations"])
    args = parser.parse_args()
    SOLVE.update(num_seeds=args.seeds, iterations=args.iterations)
    arms = ["left_elbow_link", "right_elbow_link"]
    studies = {
        "h1-arm": lambda: [study("unitree_h1", arms[:1], args.targets, False)],
        "h1-arms": lambda: [study("unitree_h1", arms, args.targets, False)],
        "h1-arms-pose": lambda: [study("unitree_h1", arms, args.targets, True)],
        "franka-collision": lambda: [study("franka_emika_panda", ["hand"], args.targets, True, collision=c)
                                     for c in (None, {"margin": 0.005, "between": FRANKA_PAIRS})],
        "h1-collision": lambda: [study("unitree_h1", arms, args.targets, False, collision=c)
                                 for c in (None, {"margin": 0.005, "between": H1_PAIRS})],
    }
    print(f"# jax {jax.__version__} on {jax.devices()[0].platform}; solve_ik {SOLVE}")
    for key, run in studies.items():
        if args.only not in (None, key):
            continue
        for r in run():
            show(r)
            if r["model"] is not None:
                m = r["model"]
                print(f"    {m.num_capsules} capsules, {len(m.body_pairs)} body pairs checked; cover error per body "
                      "(uncovered / excess max / excess mean, mm):")
                for body, e in m.cover_error:
                    print(f"      {body:28s} {1e3 * e.uncovered:6.2f} {1e3 * e.excess_max:7.1f} {1e3 * e.excess_mean:6.1f}")


if __name__ == "__main__":
    main()
