"""MuJoCo bodies and joints → the format-neutral ``Robot``'s links and joints (no geometry here).

Everything comes from the compiled MjModel at ``qpos0`` (MuJoCo's zero: the joint ``ref`` values), so
defaults, frames, attach and ``ref`` are MuJoCo's own. The rules (docs/usd_layout.md):

- A body welded to the world (no joint on it or on an ancestor: ``body_weldid == 0``) is a *static* link:
  colliders only, no rigid body. The world body is one too when it has geoms or sites. A world-welded
  body that is the parent of a moving body is instead a *fixed base*: a rigid body with a fixed joint to
  the world, the root of that fixed-base articulation (as a URDF robot's base link). A fixed base welded
  to another fixed base (its parent) is welded to it by a fixed joint inside the same articulation, not
  to the world: bodies welded to each other are one rigid group with one articulation root.
- A ``mocap`` body, and the bodies welded to it, are kinematic rigid bodies.
- A free joint makes its body a floating root (no joint), or, with ``fix_base``, a root fixed to the world.
- A jointless body on a moving parent is welded to it by a fixed joint.
- hinge → revolute, slide → prismatic, ball → spherical. Several joints on one body (MuJoCo applies them
  in order) become a chain through massless *intermediate* links placed at the body's rest pose, one
  joint per pair of links, so the articulation stays a tree.
- Joint coordinates are MuJoCo's minus ``ref`` (``q_usd = q_mujoco - qpos0``): the rest pose is q = 0 and
  limits, spring references and keyframes are shifted to match.
"""

from __future__ import annotations

import attrs
import mujoco
import numpy as np

from usdforge.rules.mjcf.load import LoadedModel
from usdforge.rules.robot.model import Inertial, Joint, Link, Robot
from usdforge.rules.usd.stage import unique

#: Mass (kg) and principal moments (kg·m²) given to moving links MuJoCo lets be massless (intermediate links
#: of stacked joints, jointless bodies without geoms on a moving parent): engines need a positive mass
#: (Newton reads 0 as "unset", MuJoCo's decoder rejects massless moving bodies); this is far below anything
#: a real body weighs, so the dynamics do not change measurably.
MASSLESS_MASS = 1e-6
MASSLESS_INERTIA = 1e-9

#: Custom attributes on links: a moving link MuJoCo lets be massless (given MASSLESS_MASS), and the MuJoCo
#: body an intermediate link of stacked joints belongs to.
MASSLESS_ATTRIBUTE = "usdforge:massless"
INTERMEDIATE_ATTRIBUTE = "usdforge:stackedJointsOf"

#: MuJoCo joint type → the Robot joint kind.
FREE, BALL, SLIDE, HINGE = (int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL),
                            int(mujoco.mjtJoint.mjJNT_SLIDE), int(mujoco.mjtJoint.mjJNT_HINGE))
JOINT_KINDS = {HINGE: "revolute", SLIDE: "prismatic", BALL: "spherical"}


def pose_matrix(position: np.ndarray, quaternion_wxyz: np.ndarray) -> np.ndarray:
    """(4, 4) pose from a position (3,) and a MuJoCo quaternion (w, x, y, z)."""
    rotation = np.zeros(9)
    mujoco.mju_quat2Mat(rotation, np.asarray(quaternion_wxyz, dtype=np.float64))
    matrix = np.eye(4)
    matrix[:3, :3] = rotation.reshape(3, 3)
    matrix[:3, 3] = position
    return matrix


def translation(position: np.ndarray) -> np.ndarray:
    """(4, 4) pure translation."""
    matrix = np.eye(4)
    matrix[:3, 3] = position
    return matrix


def body_name(model: mujoco.MjModel, body: int) -> str:
    """The body's MJCF name, or ``body<id>`` for an unnamed one."""
    return model.body(body).name or f"body{body}"


def joint_name(model: mujoco.MjModel, joint: int) -> str:
    """The joint's MJCF name, or ``<body>_joint<k>`` for an unnamed one."""
    name = model.joint(joint).name
    if name:
        return name
    body = model.jnt_bodyid[joint]
    return f"{body_name(model, body)}_joint{joint - model.body_jntadr[body]}"


@attrs.define
class BodyMap:
    """Where each MuJoCo element went in the Robot.

    link_of_body: MuJoCo body id → link name (the body's own link, the last of a stacked chain).
    joint_of_jnt: MuJoCo joint id → Robot joint name (free joints have none).
    static: link names of world-welded bodies (no rigid body). kinematic: mocap link names.
    intermediate: intermediate link name → (body name, joint name) of a stacked joint.
    free_roots: link names of bodies with a MuJoCo free joint.
    fixed_bases: link names of world-welded bodies that carry moving bodies: rigid bodies fixed to the
        world, the roots of fixed-base articulations.
    """

    link_of_body: dict[int, str] = attrs.field(factory=dict)
    joint_of_jnt: dict[int, str] = attrs.field(factory=dict)
    static: set[str] = attrs.field(factory=set)
    kinematic: set[str] = attrs.field(factory=set)
    intermediate: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    free_roots: set[str] = attrs.field(factory=set)
    fixed_bases: set[str] = attrs.field(factory=set)


def body_inertial(model: mujoco.MjModel, body: int) -> Inertial:
    """The compiled mass, centre of mass and inertia tensor of a body, in its frame."""
    frame = pose_matrix(model.body_ipos[body], model.body_iquat[body])
    rotation = frame[:3, :3]
    tensor = rotation @ np.diag(model.body_inertia[body]) @ rotation.T
    return Inertial(mass=float(model.body_mass[body]), center_of_mass=model.body_ipos[body].copy(),
                    inertia=tensor)


def _floored(model: mujoco.MjModel, body: int, custom: dict) -> Inertial:
    """The body's compiled inertial; a point mass (a principal moment below ``mjMINVAL``, which MuJoCo
    allows on a welded body) gets its moments raised to ``MASSLESS_INERTIA`` and ``MASSLESS_ATTRIBUTE`` in
    ``custom``: engines and UsdValidation's RigidBodyChecker need positive principal moments."""
    inertial = body_inertial(model, body)
    if np.min(model.body_inertia[body]) < mujoco.mjMINVAL:
        moments = np.maximum(model.body_inertia[body], MASSLESS_INERTIA)
        rotation = pose_matrix(np.zeros(3), model.body_iquat[body])[:3, :3]
        inertial.inertia = rotation @ np.diag(moments) @ rotation.T
        custom[MASSLESS_ATTRIBUTE] = True
    return inertial


def massless_inertial() -> Inertial:
    """The token mass properties of a moving link MuJoCo lets be massless (see MASSLESS_MASS)."""
    return Inertial(mass=MASSLESS_MASS, center_of_mass=np.zeros(3), inertia=np.eye(3) * MASSLESS_INERTIA)


def _is_kinematic(model: mujoco.MjModel, body: int) -> bool:
    weld = model.body_weldid[body]
    return weld != 0 and model.body_mocapid[weld] >= 0


def _shifted_limits(model: mujoco.MjModel, joint: int) -> tuple[float | None, float | None]:
    """Limits in USD joint coordinates (``q - qpos0``) for hinge/slide; the cone angle for ball joints."""
    if not model.jnt_limited[joint]:
        return None, None
    low, high = (float(v) for v in model.jnt_range[joint])
    if int(model.jnt_type[joint]) == BALL:
        return 0.0, high  # MuJoCo bounds the ball joint's total rotation angle by range[1]
    ref = float(model.qpos0[model.jnt_qposadr[joint]])
    return low - ref, high - ref


def joint_ref(model: mujoco.MjModel, joint: int) -> float:
    """MuJoCo's ``ref`` of a hinge/slide joint (its qpos0), 0 for other joints."""
    if int(model.jnt_type[joint]) in (HINGE, SLIDE):
        return float(model.qpos0[model.jnt_qposadr[joint]])
    return 0.0


def _joint_frame(model: mujoco.MjModel, joint: int) -> tuple[np.ndarray, np.ndarray]:
    """The joint frame in its body's frame (anchor at ``jnt_pos``, axes of the body) and the unit axis."""
    axis = np.asarray(model.jnt_axis[joint], dtype=np.float64)
    norm = np.linalg.norm(axis)
    axis = axis / norm if norm > 0 else np.array([0.0, 0.0, 1.0])
    return translation(model.jnt_pos[joint]), axis


def _robot_joint(model: mujoco.MjModel, joint: int, name: str, parent: str | None, child: str,
                 parent_pose: np.ndarray | None, child_pose: np.ndarray) -> Joint:
    """A Robot joint for MuJoCo joint ``joint`` between two links posed at rest (``parent_pose`` None: world)."""
    frame_in_child, axis = _joint_frame(model, joint)
    world_frame = child_pose @ frame_in_child
    frame_in_parent = world_frame if parent_pose is None else np.linalg.inv(parent_pose) @ world_frame
    lower, upper = _shifted_limits(model, joint)
    dof = model.jnt_dofadr[joint]
    stiffness = float(model.jnt_stiffness[joint])
    return Joint(
        name=name, kind=JOINT_KINDS[int(model.jnt_type[joint])], parent=parent, child=child,
        frame_in_parent=frame_in_parent, frame_in_child=frame_in_child, axis=axis, lower=lower, upper=upper,
        damping=float(model.dof_damping[dof]), friction=float(model.dof_frictionloss[dof]),
        armature=float(model.dof_armature[dof]), stiffness=stiffness if stiffness else None,
        ref=joint_ref(model, joint))


def _fixed_joint(name: str, parent: str | None, child: str, parent_pose: np.ndarray | None,
                 child_pose: np.ndarray) -> Joint:
    frame_in_parent = child_pose if parent_pose is None else np.linalg.inv(parent_pose) @ child_pose
    return Joint(name=name, kind="fixed", parent=parent, child=child, frame_in_parent=frame_in_parent,
                 frame_in_child=np.eye(4))


def read_bodies(loaded: LoadedModel, name: str, fix_base: bool = False) -> tuple[Robot, BodyMap]:
    """Links and joints of every MuJoCo body (geometry is added by ``rules.mjcf.geoms``).

    Links come parents first (MuJoCo's body order). Bodies in ``loaded.unknown_mass`` get no inertial.
    """
    model, data = loaded.model, loaded.data
    robot = Robot(name=name, source=loaded.path)
    bodies = BodyMap()
    taken: set[str] = set()  # link names
    joint_names: set[str] = set()
    poses: dict[str, np.ndarray] = {}

    def new_link(link_name: str, pose: np.ndarray, **kw) -> Link:
        link = Link(name=link_name, pose=pose, **kw)
        robot.links.append(link)
        taken.add(link_name)
        poses[link_name] = pose
        return link

    # The world body is a static link only when something is attached to it directly.
    if model.body_geomnum[0] or np.any(model.site_bodyid == 0) or np.any(model.cam_bodyid == 0) \
            or np.any(model.light_bodyid == 0):
        new_link("world", np.eye(4), inertial=massless_inertial())
        bodies.link_of_body[0] = "world"
        bodies.static.add("world")

    # World-welded bodies that are the parent of a moving (jointed or mocap-free) body: fixed bases.
    anchors = {int(model.body_parentid[b]) for b in range(1, model.nbody)
               if model.body_weldid[b] != 0 and model.body_mocapid[b] < 0
               and model.body_weldid[model.body_parentid[b]] == 0 and model.body_parentid[b] != 0}
    for body in range(1, model.nbody):
        link_name = unique(body_name(model, body), taken)
        pose = pose_matrix(data.xpos[body], data.xquat[body])
        parent = int(model.body_parentid[body])
        parent_link = bodies.link_of_body.get(parent)
        parent_static = parent == 0 or parent_link in bodies.static
        parent_pose = None if parent_static else poses[parent_link]
        parent_name = None if parent_static else parent_link
        custom: dict = {}
        if model.body_weldid[body] == 0:
            # A static link gets no rigid body in the end (rules.mjcf.dynamics); its compiled mass is kept
            # here only so the shared writer has no massless body to complain about. A world-welded body
            # that carries moving bodies is the fixed base of their articulation instead.
            # A fixed base with mass but zero principal moments (ufactory_lite6's link_base, diaginertia 0):
            # floored as a moving point mass is, so that UsdValidation's RigidBodyChecker accepts it (welded
            # to the world, its inertia does not change the simulation).
            static_inertial = (massless_inertial() if model.body_mass[body] <= 0 else
                               _floored(model, body, custom) if body in anchors else body_inertial(model, body))
            if model.body_mass[body] <= 0 and body in anchors:
                custom[MASSLESS_ATTRIBUTE] = True
            new_link(link_name, pose, inertial=static_inertial, custom=custom)
            bodies.link_of_body[body] = link_name
            if body in anchors and parent_link in bodies.fixed_bases:
                # Welded to a fixed base that is itself welded to the world: one rigid group, one
                # articulation; a second joint to the world would root a second, overlapping one.
                bodies.fixed_bases.add(link_name)
                robot.joints.append(_fixed_joint(unique(f"{link_name}_fixed", joint_names), parent_link,
                                                 link_name, poses[parent_link], pose))
            elif body in anchors:
                bodies.fixed_bases.add(link_name)
                robot.joints.append(_fixed_joint(unique(f"{link_name}_fixed_base", joint_names), None,
                                                 link_name, None, pose))
            else:
                bodies.static.add(link_name)
            continue
        kinematic = _is_kinematic(model, body)
        inertial = None if model.body(body).name in loaded.unknown_mass else body_inertial(model, body)
        if inertial is not None and inertial.mass < mujoco.mjMINVAL:
            inertial = massless_inertial()
            custom[MASSLESS_ATTRIBUTE] = True
        elif inertial is not None:
            inertial = _floored(model, body, custom)
        joints = list(range(model.body_jntadr[body], model.body_jntadr[body] + model.body_jntnum[body]))
        if kinematic:
            bodies.kinematic.add(link_name)
        if joints and int(model.jnt_type[joints[0]]) == FREE:
            new_link(link_name, pose, inertial=inertial, custom=custom)
            bodies.free_roots.add(link_name)
            if fix_base:
                robot.joints.append(_fixed_joint(unique(f"{link_name}_fixed_base", joint_names), None, link_name,
                                                 None, pose))
        elif not joints:
            new_link(link_name, pose, inertial=inertial, kinematic=kinematic, custom=custom)
            if not kinematic or model.body_mocapid[body] < 0:
                robot.joints.append(_fixed_joint(unique(f"{link_name}_fixed", joint_names), parent_name, link_name,
                                                 parent_pose, pose))
        else:
            # One link per joint: intermediate links for all but the last joint, then the body's own link.
            previous_name, previous_pose = parent_name, parent_pose
            for index, joint in enumerate(joints):
                jname = unique(joint_name(model, joint), joint_names)
                last = index == len(joints) - 1
                if last:
                    new_link(link_name, pose, inertial=inertial, kinematic=kinematic, custom=custom)
                    child = link_name
                else:
                    child = unique(f"{link_name}__{jname}", taken)
                    new_link(child, pose, inertial=massless_inertial(), kinematic=kinematic,
                             custom={MASSLESS_ATTRIBUTE: True, INTERMEDIATE_ATTRIBUTE: body_name(model, body)})
                    bodies.intermediate[child] = (body_name(model, body), jname)
                robot.joints.append(_robot_joint(model, joint, jname, previous_name, child, previous_pose, pose))
                bodies.joint_of_jnt[joint] = jname
                previous_name, previous_pose = child, pose
        bodies.link_of_body[body] = link_name
    return robot, bodies

