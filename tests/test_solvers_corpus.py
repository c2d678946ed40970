"""Acceptance: forward kinematics and Jacobians of converted corpus robots equal MuJoCo's (``mj_kinematics``,
``mj_jacBody`` on the source model) at 100 random configurations: every link pose and the Jacobians of
a few end-effectors, ≤ 1e-9 in float64 and ≤ 1e-5 in float32.

The robots are converted by the pipeline (MJCF: panda, shadow hand, H1; URDF: panda). MuJoCo's joint
coordinate is ``q_usd + ref``; mimic followers are set from their leaders, and the leader's Jacobian
column adds multiplier × the follower's. The UsdPhysics schema stores a joint frame's rotation as a
float32 quaternion (``physics:localRot1``), so an axis that is not along a body axis (shadow hand's
rh_LFJ5) is stored to ~3e-8 rad: each test first checks every stored axis against the source within
float32 precision, then gives MuJoCo the stored axis, so the 1e-9 comparison measures the solver and
not the file format.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from test_solvers_support import convert_mjcf, convert_urdf, corpus_entry, mujoco_urdf_model, shared_dir

from usdforge.solvers import Kinematics, forward_kinematics_all, forward_kinematics_and_jacobian
from usdforge.solvers.usd_tree import read_kinematic_tree

CONFIGURATIONS = 100
ROBOTS = {
    # name: (format, end-effectors whose Jacobian is compared)
    "franka_emika_panda": ("mjcf", ["hand", "left_finger", "link4"]),
    "shadow_hand": ("mjcf", ["rh_ffdistal", "rh_lfdistal", "rh_thdistal", "rh_palm"]),
    "unitree_h1": ("mjcf", ["left_ankle_link", "right_ankle_link", "left_elbow_link", "right_elbow_link"]),
    "panda": ("urdf", ["panda_hand", "panda_hand_tcp", "panda_rightfinger"]),
}
_CACHE: dict[str, tuple[Path, mujoco.MjModel]] = {}
HINGE_SLIDE = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("solvers_corpus")


def converted(name: str, workdir: Path) -> tuple[Path, mujoco.MjModel]:
    """(USD path, MuJoCo model of the same source), converted once per session."""
    if name not in _CACHE:
        shared_dir()
        fmt, _ = ROBOTS[name]
        if fmt == "mjcf":
            usd = convert_mjcf(name, workdir / name)
            model = mujoco.MjModel.from_xml_path(str(shared_dir() / "corpus" / corpus_entry(name)["path"]))
        else:
            usd = convert_urdf(name, workdir / name)
            model = mujoco_urdf_model(name, workdir / f"{name}_mujoco")
        _CACHE[name] = (usd, model)
    return _CACHE[name]


def stored_joint_frames(usd: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per source joint name: (pivot in the child body, unit axis in the child body), read with pxr."""
    from pxr import Usd, UsdPhysics

    stage = Usd.Stage.Open(str(usd))
    out = {}
    for prim in stage.Traverse():
        if not (prim.IsA(UsdPhysics.RevoluteJoint) or prim.IsA(UsdPhysics.PrismaticJoint)):
            continue
        name = prim.GetAttribute("usdforge:sourceName").Get() or prim.GetName()
        pos = np.array(prim.GetAttribute("physics:localPos1").Get() or (0, 0, 0), dtype=np.float64)
        q = prim.GetAttribute("physics:localRot1").Get()
        rot = np.eye(3) if q is None else Rotation.from_quat([*q.GetImaginary(), q.GetReal()]).as_matrix()
        axis = rot[:, "XYZ".index(prim.GetAttribute("physics:axis").Get())]
        out[name] = (pos, axis)
    return out


def align_axes_to_usd(model: mujoco.MjModel, usd: Path) -> None:
    """Give MuJoCo the joint axes and pivots as stored in USD, after checking they are the source's."""
    frames = stored_joint_frames(usd)
    for j in range(model.njnt):
        if int(model.jnt_type[j]) not in HINGE_SLIDE:
            continue
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        assert name in frames, f"joint {name} missing from {usd}"
        pos, axis = frames[name]
        np.testing.assert_allclose(axis, model.jnt_axis[j], atol=2e-7, err_msg=f"axis of {name}")
        np.testing.assert_allclose(pos, model.jnt_pos[j], atol=2e-7, err_msg=f"pivot of {name}")
        model.jnt_axis[j] = axis / np.linalg.norm(axis)
        model.jnt_pos[j] = pos


def mujoco_reference(model, kin: Kinematics, q: np.ndarray, ee_names: list[str]):
    """MuJoCo's body poses {name: (pos, quat)} and ee Jacobians {name: (6, J)} at USD coordinates q."""
    data = mujoco.MjData(model)
    data.qpos[:] = model.qpos0  # floating bases at their initial pose; ref folded in below
    values = dict(zip(kin.joint_names, q))
    for m in kin.mimic:
        values[m.name] = m.multiplier * values[m.leader] + m.offset
    for name, value in values.items():
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        adr = model.jnt_qposadr[j]
        data.qpos[adr] = value + model.qpos0[adr]  # q_mujoco = q_usd + ref
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    poses = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b): (data.xpos[b].copy(), data.xquat[b].copy())
             for b in range(1, model.nbody)}
    jacobians = {}
    for ee in ee_names:
        jp, jr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jacBody(model, data, jp, jr, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, ee))
        full = np.concatenate([jp, jr])
        dof = lambda n: model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)]  # noqa: E731
        jac = np.stack([full[:, dof(n)] for n in kin.joint_names], axis=1)
        for m in kin.mimic:
            jac[:, kin.joint_index(m.leader)] += m.multiplier * full[:, dof(m.name)]
        jacobians[ee] = jac
    return poses, jacobians


def chain_joints(model: mujoco.MjModel, ee: str) -> set[str]:
    """MuJoCo's hinge and slide joints on the way from the root to body ``ee``."""
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, ee)
    names = set()
    while body > 0:
        names |= {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt)
                  if model.jnt_bodyid[j] == body and int(model.jnt_type[j]) in HINGE_SLIDE}
        body = model.body_parentid[body]
    return names


def compare(name: str, workdir: Path, dtype, tol: float) -> None:
    """Per end-effector: its chain's coordinates at random values (every other joint at rest), every body's
    pose and the end-effector's pose and Jacobian against MuJoCo's."""
    usd, model = converted(name, workdir)
    align_axes_to_usd(model, usd)
    tree = read_kinematic_tree(usd)
    for ee_name in ROBOTS[name][1]:
        kin = Kinematics.from_tree(tree, ee_name, dtype=dtype)
        # The coordinates are exactly the joints on the chain (besides leaders that chain joints mimic);
        # followers of chain joints are listed as mimics.
        on_chain = chain_joints(model, ee_name)
        leaders = {m.leader for m in kin.mimic if m.name in on_chain}
        assert set(kin.joint_names) - leaders == on_chain - {m.name for m in kin.mimic}
        rng = np.random.default_rng(2024)
        lo, hi = np.asarray(kin.lower, np.float64), np.asarray(kin.upper, np.float64)
        q = rng.uniform(np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi),
                        size=(CONFIGURATIONS, kin.num_joints))
        q_in = q.astype(np.dtype(dtype))
        all_pos, all_quat = (np.asarray(a, np.float64) for a in forward_kinematics_all(kin, q_in))
        ee_pos, _, ee_jac = (np.asarray(a, np.float64) for a in forward_kinematics_and_jacobian(kin, q_in))
        compared = 0
        for i in range(CONFIGURATIONS):
            poses, jacobians = mujoco_reference(model, kin, q_in[i].astype(np.float64), [ee_name])
            for b, body in enumerate(kin.body_names):
                if body not in poses:  # a USD-only frame (none expected for these robots)
                    continue
                ref_pos, ref_quat = poses[body]
                np.testing.assert_allclose(all_pos[i, b], ref_pos, atol=tol, err_msg=f"{name} {body} position")
                quat_err = min(np.abs(all_quat[i, b] - ref_quat).max(), np.abs(all_quat[i, b] + ref_quat).max())
                assert quat_err <= tol, f"{name} {body} orientation off by {quat_err}"
                compared += 1
            np.testing.assert_allclose(ee_pos[i], poses[ee_name][0], atol=tol, err_msg=f"{name} ee {ee_name}")
            np.testing.assert_allclose(ee_jac[i], jacobians[ee_name], atol=tol,
                                       err_msg=f"{name} Jacobian of {ee_name}")
        # Every MuJoCo body (world aside) was compared in every configuration.
        assert compared == CONFIGURATIONS * (model.nbody - 1)


@pytest.mark.parametrize("name", list(ROBOTS))
def test_float64_equals_mujoco(name, workdir):
    with jax.enable_x64(True):
        compare(name, workdir, jnp.float64, 1e-9)


@pytest.mark.parametrize("name", list(ROBOTS))
def test_float32_equals_mujoco(name, workdir):
    compare(name, workdir, jnp.float32, 1e-5)
