"""Self-collision avoidance from the converted USD's colliders (franka from the corpus, converted by
usdforge, and a generated box/capsule/sphere fixture): capsule and sphere colliders are kept exactly,
the capsule cover of the others contains them, its distances agree with MuJoCo's geom distances, adjacent and resting-in-contact pairs are left out,
the penalty rows are the derivative of the penalty, and targets whose own configurations collide (by
MuJoCo's collision detection on the source) are reached (hand position) without collision with
avoidance on, and with it off they are not. The 1,000-target franka and h1 runs are in bench/ik_tasks.py."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from test_solvers_corpus import converted

from usdforge.solvers import Kinematics, forward_kinematics, ik_report, random_configurations, solve_ik
from usdforge.solvers.collision import fit_self_collision, segment_distance


@pytest.fixture(scope="module")
def franka(tmp_path_factory):
    usd, model = converted("franka_emika_panda", tmp_path_factory.mktemp("collision"))
    kin = Kinematics.from_usd(usd, "hand")
    return usd, model, kin, fit_self_collision(usd, kin, margin=0.005)


def mujoco_contacts(model, kin, q) -> list[set[tuple[str, str]]]:
    """Per configuration, the robot body pairs MuJoCo finds penetrating (its own exclusions applied)."""
    data = mujoco.MjData(model)
    adr = [model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)] for n in kin.joint_names]
    out = []
    for row in np.asarray(q, np.float64):
        data.qpos[:] = model.qpos0
        data.qpos[adr] = row + model.qpos0[adr]
        mujoco.mj_fwdPosition(model, data)
        pairs = set()
        for c in data.contact[: data.ncon]:
            b1, b2 = model.geom_bodyid[c.geom1], model.geom_bodyid[c.geom2]
            if b1 > 0 and b2 > 0 and c.dist < 0:
                pairs.add(tuple(sorted((model.body(b1).name, model.body(b2).name))))
        out.append(pairs)
    return out


def test_cover_contains_the_colliders_and_pairs_follow_the_conventions(franka):
    usd, model, kin, col = franka
    errors = dict(col.cover_error)
    assert set(errors) >= {"link0", "link3", "link7", "hand", "left_finger"}
    # Every sampled collider point is inside the cover; a fresh, denser sample at most a few mm out.
    assert max(e.uncovered for e in errors.values()) < 6e-3
    assert all(e.excess_mean > 0 for e in errors.values())
    pairs = {tuple(sorted(p)) for p in col.body_pairs}
    assert tuple(sorted(("link1", "link2"))) not in pairs  # adjacent
    assert tuple(sorted(("left_finger", "right_finger"))) not in pairs  # touching at rest
    assert tuple(sorted(("hand", "link5"))) not in pairs  # MuJoCo finds these hulls overlapping at rest
    assert tuple(sorted(("link0", "link6"))) in pairs and tuple(sorted(("link2", "hand"))) in pairs
    assert tuple(sorted(("link6", "link7"))) not in pairs
    # Nothing that is checked is in contact at rest (MuJoCo's own finding on the source).
    rest = mujoco_contacts(model, kin, np.zeros((1, kin.num_joints)))[0]
    assert not rest & pairs


def test_rows_are_the_derivative_of_the_nearest_pair_distances(franka):
    """The body pairs' closest distances are the minimum over every capsule pair; the rows of the K
    nearest pairs are sqrt(weight) times their distance's derivative (central differences), the errors
    sqrt(weight) (margin - d) where within the margin."""
    _, _, kin, col = franka
    q = jnp.asarray(random_configurations(kin, jax.random.PRNGKey(5), (64,)).T)  # (J, n)
    every = np.asarray(col.pair_distances(kin, q))
    np.testing.assert_allclose(np.asarray(jax.jit(col.clearance)(kin, q)), every.min(axis=0), atol=1e-6)
    cap_a, cap_b = jax.jit(col.nearest)(kin, q)
    rows, err = (np.asarray(x) for x in jax.jit(col.rows)(kin, q, (cap_a, cap_b)))

    def distance(x):
        a, b = (np.asarray(e) for e in col.capsule_ends(kin, x))  # (S, 3, n)
        ia, ib, cols = np.asarray(cap_a), np.asarray(cap_b), np.arange(q.shape[1])
        gap = segment_distance(a[ia, :, cols].transpose(0, 2, 1), b[ia, :, cols].transpose(0, 2, 1),
                               a[ib, :, cols].transpose(0, 2, 1), b[ib, :, cols].transpose(0, 2, 1), xp=np)
        return gap - np.asarray(col.radii)[ia] - np.asarray(col.radii)[ib]  # (K, n)

    d = distance(q)
    scale = np.sqrt(float(col.weight))
    active = d < float(col.margin)
    assert active.any() and (~active).any()
    assert np.allclose(d.min(axis=0), every.min(axis=0), atol=1e-6)  # the nearest pair is among them
    np.testing.assert_allclose(err, np.where(active, scale * (float(col.margin) - d), 0.0), atol=1e-5)
    eps = 1e-3
    for j in range(kin.num_joints):
        dq = jnp.zeros_like(q).at[j].set(eps)
        fd = scale * (distance(q + dq) - distance(q - dq)) / (2 * eps)
        np.testing.assert_allclose(rows[:, j][active], fd[active], rtol=0.05, atol=2e-2)
        assert np.all(rows[:, j][~active] == 0)


ARM_VS_HAND = [(["link0", "link1", "link2", "link3", "link4"], ["link7", "hand", "left_finger", "right_finger"]),
               (["link0", "link1", "link2"], ["link5", "link6"])]


def test_colliding_configurations_are_solved_without_collision(franka):
    usd, model, kin, _ = franka
    col = fit_self_collision(usd, kin, margin=0.005, between=ARM_VS_HAND)
    assert {tuple(sorted(p)) for p in col.body_pairs} <= {
        tuple(sorted((a, b))) for group_a, group_b in ARM_VS_HAND for a in group_a for b in group_b}
    q = np.asarray(random_configurations(kin, jax.random.PRNGKey(7), (400,)))
    pairs = {tuple(sorted(p)) for p in col.body_pairs}
    hits = [bool(c & pairs) for c in mujoco_contacts(model, kin, q)]
    q_hit = jnp.asarray(q[np.array(hits)][:24])
    assert len(q_hit) >= 8
    targets, _ = forward_kinematics(kin, q_hit)  # position targets: room to move the arm out of contact
    start = jnp.clip(q_hit + 0.05, kin.lower, kin.upper)
    common = dict(iterations=150, max_step=0.5, restart_after=5, num_seeds=8)
    q_off, info_off = solve_ik(kin, targets, start, **common)
    q_on, info_on = solve_ik(kin, targets, start, collision=col, **common)
    off = np.array([bool(c & pairs) for c in mujoco_contacts(model, kin, q_off)])
    on = np.array([bool(c & pairs) for c in mujoco_contacts(model, kin, q_on)])
    conv = np.asarray(info_on.converged)
    assert off[np.asarray(info_off.converged)].mean() > 0.5  # from nearby, the plain solve stays in collision
    # With avoidance, a target converges only collision-free (by the capsules, and so by MuJoCo).
    assert conv.mean() >= 0.5, conv.mean()
    assert not on[conv].any()
    assert np.all(np.asarray(info_on.clearance)[conv] >= 0)
    assert on.mean() < off.mean()


def test_ik_report_with_several_end_effectors_and_collision(franka, tmp_path):
    usd, _, _, _ = franka
    report = ik_report(usd, "hand", num_targets=16, iterations=20, home_iterations=40, ee_bodies=["link4"],
                       weights=[1.0, 0.5], num_seeds=2, collision=True, collision_pairs=[(["link0", "link1"], ["hand"])])
    json.dumps(report)
    assert report["ee_bodies"] == ["hand", "link4"] and report["collision"]["capsules"] > 10
    # Only the chosen pairs are checked (the doit ik cfg's collision_pairs; few pairs also compile fast).
    assert sorted(sorted(p) for p in report["collision"]["body_pairs"]) == [["hand", "link0"], ["hand", "link1"]]
    assert len(franka[3].body_pairs) > 2  # the default checks more
    for run in report["runs"].values():
        assert 0.0 <= run["limits"]["at_limit_rate"] <= 1.0
        assert set(run["limits"]["per_joint_rate"]) == {f"joint{i}" for i in range(1, 8)}
        assert 0.0 <= run["collision"]["in_collision_rate"] <= 1.0
    assert report["runs"]["home"]["num_seeds"] == 2


def test_segment_distance_matches_a_dense_search():
    rng = np.random.default_rng(1)
    p1, q1, p2, q2 = (rng.normal(size=(120, 3)) for _ in range(4))
    q1[:20] = p1[:20]  # points
    q2[10:30] = p2[10:30]
    q2[40:70] = p2[40:70] + (q1 - p1)[40:70] * rng.uniform(-2, 2, (30, 1))  # parallel segments
    u = np.linspace(0.0, 1.0, 201)
    dense = np.array([np.linalg.norm((p1[i] + u[:, None] * (q1 - p1)[i])[:, None]
                                     - (p2[i] + u[:, None] * (q2 - p2)[i])[None], axis=2).min() for i in range(120)])
    exact = segment_distance(p1, q1, p2, q2, xp=np)
    spacing = (np.linalg.norm(q1 - p1, axis=1) + np.linalg.norm(q2 - p2, axis=1)) / 200
    assert np.all(exact <= dense + 1e-12) and np.all(exact >= dense - spacing)
    single = np.asarray(segment_distance(*(jnp.asarray(a, jnp.float32) for a in (p1, q1, p2, q2))))
    np.testing.assert_allclose(single, exact, atol=1e-5)


BLOCK_AND_ARM = """<mujoco model="block_and_arm">
  <compiler angle="radian"/>
  <worldbody>
    <body name="base">
      <geom name="block" type="box" size="0.05 0.08 0.2" pos="0 0 0.2"/>
      <body name="arm" pos="0 0 0.45">
        <joint name="swing" type="hinge" axis="1 0 0" range="-2.5 2.5"/>
        <geom type="capsule" size="0.02" fromto="0 0 0 0 0.3 0"/>
        <body name="tip" pos="0 0.3 0">
          <joint name="twist" type="hinge" axis="0 1 0" range="-1.5 1.5"/>
          <geom name="rod" type="capsule" size="0.02" fromto="0 0 0 0 0 -0.25"/>
          <geom name="knob" type="sphere" size="0.03" pos="0 0 -0.25"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_capsule_cover_is_exact_for_capsules_and_tight_on_a_box(tmp_path):
    """The tip's capsule and sphere are kept as they are; the block (a box) is covered by capsules (a box
    is their worst case: 14 mm mean excess for this one); the cover's distance between them is never more than MuJoCo's geom distance (a safe
    over-approximation) and at most the cover's measured excess less."""
    from usdforge.pipeline import MjcfConverter
    from usdforge.schemas import MjcfConverterCfg

    (tmp_path / "arm.xml").write_text(BLOCK_AND_ARM)
    usd = MjcfConverter(MjcfConverterCfg(asset_path=str(tmp_path / "arm.xml"), usd_dir=str(tmp_path / "out"))).usd_path
    kin = Kinematics.from_usd(usd, "tip")
    col = fit_self_collision(usd, kin, margin=0.005)
    assert [tuple(sorted(p)) for p in col.body_pairs] == [("base", "tip")]  # base/arm and arm/tip are adjacent
    tip = np.asarray(col.capsule_body) == kin.body_index("tip")
    ends = sorted(tuple(np.round(np.concatenate([np.sort([a, b], axis=0).ravel(), [r]]), 6))
                  for a, b, r in zip(np.asarray(col.ends_a)[tip], np.asarray(col.ends_b)[tip], np.asarray(col.radii)[tip]))
    np.testing.assert_allclose(ends, [(0, 0, -0.25, 0, 0, -0.25, 0.03), (0, 0, -0.25, 0, 0, 0, 0.02)], atol=1e-6)
    errors = dict(col.cover_error)
    assert errors["tip"] == (0.0, 0.0, 0.0) or errors["tip"].uncovered < 1e-6
    block = errors["base"]
    assert block.uncovered < 1e-3 and block.excess_mean < 0.016, block

    model = mujoco.MjModel.from_xml_path(str(tmp_path / "arm.xml"))
    data = mujoco.MjData(model)
    geom = {n: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, n) for n in ("block", "rod", "knob")}
    q = np.asarray(random_configurations(kin, jax.random.PRNGKey(2), (200,)))
    cover = np.asarray(jax.jit(col.clearance)(kin, jnp.asarray(q.T)))
    truth = []
    for row in q:
        data.qpos[[model.joint(n).qposadr[0] for n in kin.joint_names]] = row
        mujoco.mj_kinematics(model, data)
        truth.append(min(mujoco.mj_geomDistance(model, data, geom["block"], geom[g], 1.0, None) for g in ("rod", "knob")))
    truth = np.array(truth)
    near = truth < 0.2
    assert near.sum() > 20 and (truth < 0).any()  # configurations near the block and into it
    free = truth > 0
    assert np.all(cover[free] <= truth[free] + 1e-5)
    # The cover lies within excess_max of the block, so it finds a pair at most that much closer; where
    # capsules overlap, their (negative) distance is a depth, not comparable to MuJoCo's distance.
    apart = free & (cover > 0)
    assert np.all(cover[apart] >= truth[apart] - block.excess_max - 1e-3)
    assert np.all(cover[truth > block.excess_max + 1e-3] > 0)
