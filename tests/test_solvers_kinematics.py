"""solvers.kinematics on small UsdPhysics stages authored here: forward kinematics against transforms
computed by hand, Jacobians against central finite differences of forward kinematics, mimic joints,
spherical/D6 joints, link frames, float32/float64, batching, pytree use and the errors."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_solvers_support import JointDef, Link, author_robot, quat_wxyz, rot_x, rot_y, rot_z, same_rotation, trans

from usdforge import solvers
from usdforge.solvers import Kinematics, forward_kinematics, forward_kinematics_all, jacobian

PIVOT = np.array([0.05, 0.0, 0.0])  # revolute pivot of link3, in link3's frame


def arm_links() -> list[Link]:
    base = trans(0.0, 0.0, 0.1)
    link1 = trans(0.0, 0.0, 0.5)
    link2 = trans(0.3, 0.0, 0.5) @ rot_z(math.pi / 2)
    tool = link2 @ trans(0.0, -0.1, 0.0)
    link3 = tool @ trans(0.2, 0.0, 0.0) @ rot_x(0.3)
    return [Link("base", base), Link("link1", link1), Link("link2", link2), Link("tool", tool),
            Link("link3", link3)]


def arm_joints() -> list[JointDef]:
    return [
        JointDef("fix_base", "fixed", None, "base"),
        JointDef("shoulder", "revolute", "base", "link1", axis="Z", lower=-170.0, upper=170.0),
        # The slide's frame is turned so its X axis is world X at rest, while link2 itself is turned 90°.
        JointDef("slide", "prismatic", "link1", "link2", axis="X", frame=rot_z(-math.pi / 2), lower=-0.1, upper=0.2),
        JointDef("fix_tool", "fixed", "link2", "tool"),
        JointDef("wrist", "revolute", "tool", "link3", axis="Y", frame=trans(*PIVOT), lower=-90.0, upper=90.0),
    ]


def arm_by_hand(q: np.ndarray) -> dict[str, np.ndarray]:
    """World poses of the arm's links for q = (shoulder, slide, wrist), composed by hand."""
    q1, q2, q3 = q
    link1 = trans(0, 0, 0.5) @ rot_z(q1)
    link2 = link1 @ trans(0.3 + q2, 0, 0) @ rot_z(math.pi / 2)
    tool = link2 @ trans(0, -0.1, 0)
    link3 = tool @ trans(0.2, 0, 0) @ rot_x(0.3) @ trans(*PIVOT) @ rot_y(q3) @ trans(*-PIVOT)
    return {"base": trans(0, 0, 0.1), "link1": link1, "link2": link2, "tool": tool, "link3": link3}


@pytest.fixture(scope="module")
def arm_usd(tmp_path_factory) -> str:
    return str(author_robot(tmp_path_factory.mktemp("arm") / "arm.usda", arm_links(), arm_joints()))


def x64():
    return jax.enable_x64(True)


def finite_difference_jacobian(kin: Kinematics, q: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """(6, J) central differences of FK: position rows, then the rotation vector of R(q+) R(q-)ᵀ / 2eps."""
    from scipy.spatial.transform import Rotation

    cols = []
    for j in range(q.shape[0]):
        dq = np.zeros_like(q)
        dq[j] = eps
        p1, q1 = (np.asarray(a) for a in forward_kinematics(kin, q + dq))
        p0, q0 = (np.asarray(a) for a in forward_kinematics(kin, q - dq))
        r1 = Rotation.from_quat(q1[[1, 2, 3, 0]])
        r0 = Rotation.from_quat(q0[[1, 2, 3, 0]])
        cols.append(np.concatenate([(p1 - p0) / (2 * eps), (r1 * r0.inv()).as_rotvec() / (2 * eps)]))
    return np.stack(cols, axis=1)


def test_arm_forward_kinematics_matches_hand_composition(arm_usd):
    with x64():
        kin = Kinematics.from_usd(arm_usd, "link3", dtype=jnp.float64)
        assert kin.joint_names == ("shoulder", "slide", "wrist")
        assert kin.ee_body == "link3" and kin.chain_length == 3
        np.testing.assert_allclose(kin.lower, [-math.radians(170), -0.1, -math.pi / 2], rtol=1e-6)
        np.testing.assert_allclose(kin.upper, [math.radians(170), 0.2, math.pi / 2], rtol=1e-6)
        rng = np.random.default_rng(0)
        qs = rng.uniform(np.asarray(kin.lower), np.asarray(kin.upper), size=(20, 3))
        pos, quat = forward_kinematics(kin, qs)
        all_pos, all_quat = forward_kinematics_all(kin, qs)
        for i, q in enumerate(qs):
            expected = arm_by_hand(q)
            np.testing.assert_allclose(pos[i], expected["link3"][:3, 3], atol=1e-12)
            assert same_rotation(np.asarray(quat[i]), quat_wxyz(expected["link3"])) < 1e-12
            assert quat[i][0] >= 0
            for name, t in expected.items():
                b = kin.body_index(name)
                np.testing.assert_allclose(all_pos[i, b], t[:3, 3], atol=1e-12)
                assert same_rotation(np.asarray(all_quat[i, b]), quat_wxyz(t)) < 1e-12


def test_arm_jacobian_matches_finite_differences(arm_usd):
    with x64():
        kin = Kinematics.from_usd(arm_usd, "link3", dtype=jnp.float64)
        rng = np.random.default_rng(1)
        for q in rng.uniform(np.asarray(kin.lower), np.asarray(kin.upper), size=(10, 3)):
            jac = np.asarray(jacobian(kin, q))
            assert jac.shape == (6, 3)
            np.testing.assert_allclose(jac, finite_difference_jacobian(kin, q), atol=1e-7)
            # The prismatic joint moves the ee without turning it; the others turn it about their axes.
            np.testing.assert_allclose(jac[3:, 1], 0.0, atol=1e-15)


def test_float32_matches_float64(arm_usd):
    kin32 = Kinematics.from_usd(arm_usd, "link3")
    assert kin32.dtype == jnp.float32
    q = np.array([0.4, 0.05, -0.7])
    pos32, quat32, jac32 = solvers.forward_kinematics_and_jacobian(kin32, q)
    assert pos32.dtype == jnp.float32 and jac32.dtype == jnp.float32
    expected = arm_by_hand(q)["link3"]
    np.testing.assert_allclose(pos32, expected[:3, 3], atol=1e-6)
    assert same_rotation(np.asarray(quat32, np.float64), quat_wxyz(expected)) < 1e-6
    with x64():
        kin64 = Kinematics.from_usd(arm_usd, "link3", dtype=jnp.float64)
        jac64 = np.asarray(jacobian(kin64, q))
    np.testing.assert_allclose(jac32, jac64, atol=1e-5)


def test_float64_without_x64_is_a_clear_error(arm_usd):
    assert not jax.config.jax_enable_x64
    with pytest.raises(ValueError, match="jax_enable_x64"):
        Kinematics.from_usd(arm_usd, "link3", dtype=jnp.float64)


def test_unknown_ee_body_lists_the_bodies(arm_usd):
    with pytest.raises(ValueError, match=r"unknown body 'gripper'.*base.*link1.*link3"):
        Kinematics.from_usd(arm_usd, "gripper")


def test_ee_body_by_prim_name_and_path(arm_usd):
    by_prim = Kinematics.from_usd(arm_usd, "l_link3")
    by_path = Kinematics.from_usd(arm_usd, "/robot/l_link3")
    assert by_prim.ee_body == by_path.ee_body == "link3"


def test_ee_offset_moves_the_reported_frame_and_the_jacobian_point(arm_usd):
    offset = np.array([0.1, -0.02, 0.03])
    rot = rot_z(0.5) @ rot_x(-0.2)
    with x64():
        kin = Kinematics.from_usd(arm_usd, "link3", ee_offset=[*offset, *quat_wxyz(rot)], dtype=jnp.float64)
        plain = Kinematics.from_usd(arm_usd, "link3", dtype=jnp.float64)
        q = np.array([-0.3, 0.1, 0.6])
        pos, quat = forward_kinematics(kin, q)
        expected = arm_by_hand(q)["link3"] @ trans(*offset) @ rot
        np.testing.assert_allclose(pos, expected[:3, 3], atol=1e-12)
        assert same_rotation(np.asarray(quat), quat_wxyz(expected)) < 1e-12
        np.testing.assert_allclose(jacobian(kin, q), finite_difference_jacobian(kin, q), atol=1e-7)
        # Same angular rows; the linear rows differ by ω × (offset point − body origin).
        jo, jp = np.asarray(jacobian(kin, q)), np.asarray(jacobian(plain, q))
        np.testing.assert_allclose(jo[3:], jp[3:], atol=1e-15)
        lever = np.asarray(pos) - np.asarray(forward_kinematics(plain, q)[0])
        np.testing.assert_allclose(jo[:3], jp[:3] + np.cross(jp[3:].T, lever).T, atol=1e-12)
    with pytest.raises(ValueError, match="ee_offset"):
        Kinematics.from_usd(arm_usd, "link3", ee_offset=[1.0, 2.0])


def test_batched_shapes_and_single_configuration(arm_usd):
    kin = Kinematics.from_usd(arm_usd, "link3")
    q = np.zeros((2, 5, 3))
    pos, quat = forward_kinematics(kin, q)
    assert pos.shape == (2, 5, 3) and quat.shape == (2, 5, 4)
    assert jacobian(kin, q).shape == (2, 5, 6, 3)
    all_pos, all_quat = forward_kinematics_all(kin, q)
    assert all_pos.shape == (2, 5, 5, 3) and all_quat.shape == (2, 5, 5, 4)
    assert forward_kinematics(kin, np.zeros(3))[0].shape == (3,)
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 3\)"):
        forward_kinematics(kin, np.zeros((4, 2)))


def test_large_batch_runs_in_chunks_with_the_same_result(arm_usd):
    kin = Kinematics.from_usd(arm_usd, "link3")
    rng = np.random.default_rng(2)
    q = rng.uniform(np.asarray(kin.lower), np.asarray(kin.upper), size=(5000, 3)).astype(np.float32)
    pos, quat, jac = solvers.forward_kinematics_and_jacobian(kin, q)
    for i in (0, 2047, 2048, 4999):  # both sides of a chunk boundary, and the padded last chunk
        p1, q1, j1 = solvers.forward_kinematics_and_jacobian(kin, q[i])
        np.testing.assert_allclose(pos[i], p1, atol=1e-6)
        np.testing.assert_allclose(jac[i], j1, atol=1e-6)
        np.testing.assert_allclose(pos[i], arm_by_hand(q[i].astype(np.float64))["link3"][:3, 3], atol=1e-5)


def test_kinematics_is_a_pytree_for_jit_and_closures(arm_usd):
    kin = Kinematics.from_usd(arm_usd, "link3")
    leaves, treedef = jax.tree_util.tree_flatten(kin)
    assert all(isinstance(leaf, jax.Array) for leaf in leaves)
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert rebuilt.joint_names == kin.joint_names
    q = jnp.array([0.1, 0.05, 0.2])

    @jax.jit
    def as_argument(k, q):
        return solvers.ee_kernel(k, q)[0]

    closed = jax.jit(lambda q: solvers.ee_kernel(kin, q)[0])
    batched = jax.vmap(lambda q: solvers.ee_kernel(kin, q)[0])
    expected = forward_kinematics(kin, q)[0]
    np.testing.assert_allclose(as_argument(kin, q), expected, atol=1e-6)
    np.testing.assert_allclose(closed(q), expected, atol=1e-6)
    np.testing.assert_allclose(batched(jnp.stack([q, q]))[1], expected, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# Mimic joints


def mimic_robot(path) -> str:
    """base → a (revolute Z, leader) → b (revolute Y, follows a: 0.5·a + 0.1) → hand; hand carries two
    prismatic fingers, the second following the first with multiplier -1 and offset 0.01."""
    links = [
        Link("base", np.eye(4)), Link("a", trans(0, 0, 0.2)), Link("b", trans(0.25, 0, 0.2)),
        Link("hand", trans(0.45, 0, 0.2)), Link("finger_l", trans(0.5, 0.02, 0.2)),
        Link("finger_r", trans(0.5, -0.02, 0.2)),
    ]
    joints = [
        JointDef("fix", "fixed", None, "base"),
        JointDef("a_joint", "revolute", "base", "a", axis="Z"),
        JointDef("b_joint", "revolute", "a", "b", axis="Y", mimic=("a_joint", 0.5, 0.1)),
        JointDef("c_joint", "revolute", "b", "hand", axis="X"),
        JointDef("finger_l_joint", "prismatic", "hand", "finger_l", axis="Y", lower=0.0, upper=0.04),
        JointDef("finger_r_joint", "prismatic", "hand", "finger_r", axis="Y", lower=-0.04, upper=0.0,
                 mimic=("finger_l_joint", -1.0, 0.01)),
    ]
    return str(author_robot(path, links, joints))


def mimic_by_hand(q: np.ndarray) -> dict[str, np.ndarray]:
    a, c, f = q
    b = 0.5 * a + 0.1
    link_a = trans(0, 0, 0.2) @ rot_z(a)
    link_b = link_a @ trans(0.25, 0, 0) @ rot_y(b)
    hand = link_b @ trans(0.2, 0, 0) @ rot_x(c)
    finger_l = hand @ trans(0.05, 0.02 + f, 0)
    finger_r = hand @ trans(0.05, -0.02 + (-f + 0.01), 0)
    return {"a": link_a, "b": link_b, "hand": hand, "finger_l": finger_l, "finger_r": finger_r}


def test_mimic_followers_are_not_coordinates_and_follow_their_leaders(tmp_path):
    usd = mimic_robot(tmp_path / "mimic.usda")
    with x64():
        kin = Kinematics.from_usd(usd, "finger_r", dtype=jnp.float64)
        assert kin.joint_names == ("a_joint", "c_joint", "finger_l_joint")
        assert {m.name: (m.leader, m.multiplier, m.offset) for m in kin.mimic} == {
            "b_joint": ("a_joint", 0.5, pytest.approx(0.1)),
            "finger_r_joint": ("finger_l_joint", -1.0, pytest.approx(0.01)),
        }
        rng = np.random.default_rng(3)
        for q in rng.uniform([-2, -2, 0], [2, 2, 0.04], size=(10, 3)):
            expected = mimic_by_hand(q)
            all_pos, all_quat = forward_kinematics_all(kin, q)
            for name, t in expected.items():
                b = kin.body_index(name)
                np.testing.assert_allclose(all_pos[b], t[:3, 3], atol=2e-8)  # float32 mimic attributes
                assert same_rotation(np.asarray(all_quat[b]), quat_wxyz(t)) < 2e-8
            # The chain rule: the leader's column carries the follower's motion.
            np.testing.assert_allclose(jacobian(kin, q), finite_difference_jacobian(kin, q), atol=1e-7)


def test_finger_jacobian_column_sums_leader_and_follower(tmp_path):
    usd = mimic_robot(tmp_path / "mimic.usda")
    with x64():
        right = Kinematics.from_usd(usd, "finger_r", dtype=jnp.float64)
        q = np.array([0.3, -0.4, 0.02])
        jac = np.asarray(jacobian(right, q))
        # finger_r moves along -(hand's Y) when finger_l_joint grows (multiplier -1).
        hand_y = mimic_by_hand(q)["hand"][:3, 1]
        np.testing.assert_allclose(jac[:3, 2], -hand_y, atol=1e-12)
        np.testing.assert_allclose(jac[3:, 2], 0.0, atol=1e-15)


# ---------------------------------------------------------------------------------------------------------
# Spherical and D6 joints, frames, floating roots, loops, units


def test_spherical_and_d6_joints_are_elementary_motions(tmp_path):
    links = [Link("base", np.eye(4)), Link("ball", trans(0, 0, 0.3)), Link("slider", trans(0.2, 0, 0.3))]
    joints = [
        JointDef("fix", "fixed", None, "base"),
        JointDef("ball", "spherical", "base", "ball", axis="X", cone=(30.0, 45.0)),
        # A planar joint: D6 with z translation and x/y rotations locked.
        JointDef("planar", "d6", "ball", "slider", locked=("transZ", "rotX", "rotY"),
                 d6_limits={"transX": (-0.1, 0.1)}),
    ]
    usd = author_robot(tmp_path / "d6.usda", links, joints)
    with x64():
        kin = Kinematics.from_usd(usd, "slider", dtype=jnp.float64)
        assert kin.joint_names == ("ball:rotX", "ball:rotY", "ball:rotZ", "planar:transX", "planar:transY",
                                   "planar:rotZ")
        # Cone limits bound the swings: cone0 (toward Y) is a rotation about Z, cone1 about Y.
        np.testing.assert_allclose(kin.lower[:3], [-np.inf, -math.radians(45), -math.radians(30)])
        np.testing.assert_allclose(kin.lower[3], -0.1, rtol=1e-6)
        q = np.array([0.3, -0.2, 0.4, 0.05, -0.03, 0.7])
        expected = (trans(0, 0, 0.3) @ rot_x(q[0]) @ rot_y(q[1]) @ rot_z(q[2]) @ trans(0.2, 0, 0)
                    @ trans(q[3], q[4], 0) @ rot_z(q[5]))
        pos, quat = forward_kinematics(kin, q)
        np.testing.assert_allclose(pos, expected[:3, 3], atol=1e-12)
        assert same_rotation(np.asarray(quat), quat_wxyz(expected)) < 1e-12
        np.testing.assert_allclose(jacobian(kin, q), finite_difference_jacobian(kin, q), atol=1e-7)


def test_link_frames_below_bodies_are_links_and_end_effectors(tmp_path):
    links = arm_links()
    # A merged link: "tcp" is an Xform below link3 (no rigid body), and a ghost world frame at the root.
    tcp_world = links[-1].world @ trans(0.1, 0, 0.02) @ rot_y(0.4)
    links.append(Link("tcp", tcp_world, frame_of="link3"))
    usd = author_robot(tmp_path / "frames.usda", links, arm_joints())
    with x64():
        kin = Kinematics.from_usd(usd, "tcp", dtype=jnp.float64)
        assert "tcp" in kin.body_names and kin.joint_names == ("shoulder", "slide", "wrist")
        q = np.array([0.5, 0.1, -0.4])
        expected = arm_by_hand(q)["link3"] @ trans(0.1, 0, 0.02) @ rot_y(0.4)
        pos, quat = forward_kinematics(kin, q)
        np.testing.assert_allclose(pos, expected[:3, 3], atol=1e-12)
        assert same_rotation(np.asarray(quat), quat_wxyz(expected)) < 1e-12
        all_pos, _ = forward_kinematics_all(kin, q)
        np.testing.assert_allclose(all_pos[kin.body_index("tcp")], expected[:3, 3], atol=1e-12)


def test_floating_root_stays_at_its_rest_pose(tmp_path):
    rest = trans(0.1, 0.2, 0.9) @ rot_z(0.3)
    links = [Link("pelvis", rest), Link("thigh", rest @ trans(0, 0.1, -0.2))]
    joints = [JointDef("hip", "revolute", "pelvis", "thigh", axis="Y")]
    usd = author_robot(tmp_path / "float.usda", links, joints)
    with x64():
        kin = Kinematics.from_usd(usd, "thigh", dtype=jnp.float64)
        q = np.array([0.8])
        all_pos, _ = forward_kinematics_all(kin, q)
        np.testing.assert_allclose(all_pos[kin.body_index("pelvis")], rest[:3, 3], atol=1e-12)
        np.testing.assert_allclose(forward_kinematics(kin, q)[0], (rest @ trans(0, 0.1, -0.2))[:3, 3], atol=1e-12)


def test_loop_closing_joints_are_left_out_and_unmarked_loops_are_errors(tmp_path):
    links = arm_links()
    closing = JointDef("closing", "revolute", "base", "link3", axis="Z", exclude=True)
    usd = author_robot(tmp_path / "loop.usda", links, [*arm_joints(), closing])
    assert Kinematics.from_usd(usd, "link3").joint_names == ("shoulder", "slide", "wrist")
    closing.exclude = False
    bad = author_robot(tmp_path / "bad_loop.usda", links, [*arm_joints(), closing])
    with pytest.raises(ValueError, match="two parent joints.*excludeFromArticulation"):
        Kinematics.from_usd(bad, "link3")


def test_stage_units_are_converted_to_metres(tmp_path):
    links = [Link("base", np.eye(4)), Link("arm", trans(0, 0, 0.5))]
    joints = [JointDef("fix", "fixed", None, "base"),
              JointDef("lift", "prismatic", "base", "arm", axis="Z", lower=-10.0, upper=20.0)]
    usd = author_robot(tmp_path / "cm.usda", links, joints, meters_per_unit=0.01)  # centimetres
    kin = Kinematics.from_usd(usd, "arm")
    np.testing.assert_allclose([kin.lower[0], kin.upper[0]], [-0.1, 0.2], rtol=1e-6)
    np.testing.assert_allclose(forward_kinematics(kin, np.array([0.05]))[0], [0, 0, 0.55], atol=1e-6)


def test_random_configurations_respect_limits(arm_usd):
    kin = Kinematics.from_usd(arm_usd, "link3")
    q = np.asarray(solvers.random_configurations(kin, jax.random.PRNGKey(0), (1000,)))
    assert q.shape == (1000, 3)
    assert np.all(q >= np.asarray(kin.lower)) and np.all(q <= np.asarray(kin.upper))
    assert np.ptp(q, axis=0).min() > 0.5 * np.min(np.asarray(kin.upper) - np.asarray(kin.lower))
