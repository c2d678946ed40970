"""MuJoCo equality constraints.

- connect → a ``UsdPhysics.SphericalJoint`` and weld → a ``UsdPhysics.FixedJoint``, both with
  ``physics:excludeFromArticulation = 1`` (loop closures outside the articulation tree), ``jointEnabled``
  = MuJoCo's ``active``, and ``MjcEqualityConnectAPI`` / ``MjcEqualityWeldAPI`` (solref, solimp,
  torquescale). A connect keeps MuJoCo's two anchors (body1's and body2's); a weld's frames are MuJoCo's
  compiled ``relpose·anchor`` in body1 and ``anchor`` in body2, so the joint holds body2 at ``relpose`` in
  body1.
  Site-based constraints join the two site prims (guide prims in their bodies) with identity frames,
  which MuJoCo's decoder reads as site-based (the sites are pulled together even where they are apart at
  rest); otherwise the world (or a world-welded body) as MuJoCo's body2 becomes the joint's empty
  ``body0``.
- joint → a mimic coupling of the follower joint (``q1 = coef0 + coef1·q2``, exact in USD coordinates
  because both sides are measured from qpos0), given to the Robot before writing (``joint_mimics``) and
  completed here with ``MjcEqualityJointAPI`` (higher coefficients, solref, solimp).
- tendon and flex equalities have no USD physics equivalent: kept as ``mjcf:equality:*`` custom data on
  the root with a warning.
"""

from __future__ import annotations

import mujoco
import numpy as np
from pxr import Gf, Sdf, Usd

from usdforge.rules.mjcf.bodies import BodyMap, pose_matrix, translation
from usdforge.rules.mjcf.load import LoadedModel
from usdforge.rules.mjcf.slim import id2name
from usdforge.rules.mjcf.usd import MjcfUsd, set_all, set_custom
from usdforge.rules.robot.model import Mimic, Robot
from usdforge.rules.usd.stage import matrix_to_pose, schema_attribute, unique_name

_EQ = mujoco.mjtEq
CONNECT, WELD, JOINT = int(_EQ.mjEQ_CONNECT), int(_EQ.mjEQ_WELD), int(_EQ.mjEQ_JOINT)
_SITE = int(mujoco.mjtObj.mjOBJ_SITE)


def _quatf(rotation: np.ndarray) -> Gf.Quatf:
    homogeneous = np.eye(4)
    homogeneous[:3, :3] = rotation
    w, x, y, z = matrix_to_pose(homogeneous)[1]
    return Gf.Quatf(float(w), Gf.Vec3f(float(x), float(y), float(z)))


def equality_name(model: mujoco.MjModel, equality: int) -> str:
    """The equality's name, or ``equality<id>``."""
    return model.equality(equality).name or f"equality{equality}"


def joint_mimics(robot: Robot, loaded: LoadedModel, bodies: BodyMap) -> list[str]:
    """Set ``Joint.mimic`` of every joint-equality follower (the first equality per follower); return
    warnings for the joint equalities that cannot be a mimic (no second joint, a second one on the
    same follower, a joint without a prim)."""
    model = loaded.model
    joints = {joint.name: joint for joint in robot.joints}
    warnings: list[str] = []
    for equality in range(model.neq):
        if int(model.eq_type[equality]) != JOINT:
            continue
        follower, leader = int(model.eq_obj1id[equality]), int(model.eq_obj2id[equality])
        name = equality_name(model, equality)
        if leader < 0 or follower not in bodies.joint_of_jnt or leader not in bodies.joint_of_jnt:
            warnings.append(f"joint equality '{name}' fixes a joint to a constant: no USD equivalent; kept as "
                            "mjcf:equality custom data")
            continue
        joint = joints[bodies.joint_of_jnt[follower]]
        if joint.mimic is not None:
            warnings.append(f"joint equality '{name}': joint '{joint.name}' already follows another joint; "
                            "kept as mjcf:equality custom data")
            continue
        coef = model.eq_data[equality]
        joint.mimic = Mimic(joint=bodies.joint_of_jnt[leader], multiplier=float(coef[1]), offset=float(coef[0]))
    return warnings


def _frames(usd: MjcfUsd, equality: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """MuJoCo body ids of object 1 and 2 and the joint frame in each, (4, 4)."""
    model = usd.loaded.model
    kind = int(model.eq_type[equality])
    o1, o2 = int(model.eq_obj1id[equality]), int(model.eq_obj2id[equality])
    data = np.asarray(model.eq_data[equality], dtype=np.float64)
    if int(model.eq_objtype[equality]) == _SITE:
        b1, b2 = int(model.site_bodyid[o1]), int(model.site_bodyid[o2])
        f1 = pose_matrix(model.site_pos[o1], model.site_quat[o1])
        f2 = pose_matrix(model.site_pos[o2], model.site_quat[o2])
        if kind == CONNECT:
            f1, f2 = translation(f1[:3, 3]), translation(f2[:3, 3])
        return b1, b2, f1, f2
    if kind == CONNECT:
        return o1, o2, translation(data[0:3]), translation(data[3:6])
    # A compiled weld holds body1's point data[3:6] (MuJoCo's relpose already applied to the anchor,
    # relpose from qpos0 where the source gave none), turned by data[6:10], on body2's point data[0:3].
    return o1, o2, pose_matrix(data[3:6], data[6:10]), translation(data[0:3])


def _world_frame(usd: MjcfUsd, body: int, frame: np.ndarray) -> tuple[Sdf.Path | None, np.ndarray]:
    """(prim of the body's moving link or None for the world, the frame in that link or the world)."""
    link = usd.bodies.link_of_body.get(body)
    if body == 0 or link is None or link in usd.bodies.static:
        data = usd.loaded.data
        return None, pose_matrix(data.xpos[body], data.xquat[body]) @ frame
    return usd.ctx.link_paths[link], frame


def author_loop_closures(usd: MjcfUsd) -> None:
    """connect and weld equalities as excluded joints (see the module docstring)."""
    model = usd.loaded.model
    # A rebuild that restores the physics layer opens no stage on its stand-in.
    physics = usd.ctx.stage("physics") if usd.authored("physics") else None
    scope = usd.scope("joints")
    taken = {path.name for path in usd.ctx.joint_paths.values()}
    for equality in range(model.neq):
        kind = int(model.eq_type[equality])
        if kind not in (CONNECT, WELD):
            continue
        b1, b2, f1, f2 = _frames(usd, equality)
        path1, frame1 = _world_frame(usd, b1, f1)
        path2, frame2 = _world_frame(usd, b2, f2)
        if path2 is None:  # the world must be body0: MuJoCo's decoder needs a body1
            path1, frame1, path2, frame2 = path2, frame2, path1, frame1
        sites = [usd.site_paths.get(int(o)) for o in (model.eq_obj1id[equality], model.eq_obj2id[equality])]
        site_based = int(model.eq_objtype[equality]) == _SITE and None not in sites
        name = equality_name(model, equality)
        path = scope.AppendChild(unique_name(name, taken))
        if physics is not None:  # else physics is restored from the build cache: only the mujoco values
            _author_loop_joint(physics, path, kind, name, bool(model.eq_active0[equality]), path1, frame1, path2,
                               frame2, sites if site_based else None, usd)
        values = {"mjc:solref": model.eq_solref[equality], "mjc:solimp": model.eq_solimp[equality]}
        schema = "MjcEqualityConnectAPI"
        if kind == WELD:
            values["mjc:torqueScale"] = float(model.eq_data[equality, 10])
            schema = "MjcEqualityWeldAPI"
        set_all(usd.prim("mujoco", path), values, ["MjcEqualityAPI", schema])


def _author_loop_joint(physics: Usd.Stage, path: Sdf.Path, kind: int, name: str, enabled: bool,
                       path1: Sdf.Path | None, frame1: np.ndarray, path2: Sdf.Path | None, frame2: np.ndarray,
                       sites: list[Sdf.Path] | None, usd: MjcfUsd) -> None:
    """One connect or weld equality's excluded joint in the physics stage (``author_loop_closures``):
    frames (4, 4) in each body; sites: the two sites of a site-based one, else None."""
    # UsdPhysics' joint and its properties, as its module authors them (not loaded: ``schema_attribute``).
    joint = physics.DefinePrim(path, "PhysicsSphericalJoint" if kind == CONNECT else "PhysicsFixedJoint")

    def body(n: int) -> Usd.Relationship:  # created where the schema's Create<Body>Rel would be
        return joint.CreateRelationship(f"physics:body{n}", False)

    if path1 is not None:
        body(0).SetTargets([path1])
    if path2 is not None:
        body(1).SetTargets([path2])
    if sites is not None:
        # The joint between the two sites themselves, frames at the sites: MuJoCo's decoder reads that
        # as MuJoCo's site-based constraint (the sites pulled together, whatever their rest poses);
        # read as body anchors it would hold the bodies as they are at rest.
        body(0).SetTargets([sites[1]])
        body(1).SetTargets([sites[0]])
        frame1, frame2 = np.eye(4), np.eye(4)
    elif kind == CONNECT:
        # Only the anchors matter; orient both frames as the world so they agree at rest.
        rotation0 = _body_rotation(usd, path1)
        rotation1 = _body_rotation(usd, path2)
        frame1 = frame1.copy()
        frame2 = frame2.copy()
        frame1[:3, :3] = rotation0.T
        frame2[:3, :3] = rotation1.T
    schema_attribute(joint, "physics:localPos0", Gf.Vec3f(*map(float, frame1[:3, 3])))
    schema_attribute(joint, "physics:localRot0", _quatf(frame1[:3, :3]))
    schema_attribute(joint, "physics:localPos1", Gf.Vec3f(*map(float, frame2[:3, 3])))
    schema_attribute(joint, "physics:localRot1", _quatf(frame2[:3, :3]))
    schema_attribute(joint, "physics:excludeFromArticulation", True)
    schema_attribute(joint, "physics:jointEnabled", enabled)
    set_custom(joint, "usdforge:sourceName", name)


def _body_rotation(usd: MjcfUsd, path: Sdf.Path | None) -> np.ndarray:
    """The rest-pose rotation (3, 3) of the link at ``path``; identity for the world."""
    if path is None:
        return np.eye(3)
    name = next(name for name, p in usd.ctx.link_paths.items() if p == path)
    return usd.robot.link(name).pose[:3, :3]


def author_joint_equalities(usd: MjcfUsd) -> None:
    """``MjcEqualityJointAPI`` on mimic followers; other equalities as custom data on the root."""
    model = usd.loaded.model
    root = usd.prim("mujoco", usd.root)
    mimics = {joint.name for joint in usd.robot.joints if joint.mimic is not None}
    used: set[str] = set()
    for equality in range(model.neq):
        kind = int(model.eq_type[equality])
        name = equality_name(model, equality)
        follower = usd.bodies.joint_of_jnt.get(int(model.eq_obj1id[equality])) if kind == JOINT else None
        if kind == JOINT and follower in mimics and follower not in used:
            used.add(follower)
            path = usd.ctx.joint_paths[follower]
            coef = model.eq_data[equality]
            set_all(usd.prim("mujoco", path), {
                "mjc:coef2": coef[2], "mjc:coef3": coef[3], "mjc:coef4": coef[4],
                "mjc:solref": model.eq_solref[equality], "mjc:solimp": model.eq_solimp[equality]},
                ["MjcEqualityJointAPI"])
            newton = usd.prim("newton", path)
            if newton is not None:
                newton.CreateAttribute("newton:mimicEnabled", Sdf.ValueTypeNames.Bool, custom=False).Set(
                    bool(model.eq_active0[equality]))
            if np.any(coef[2:5]):
                usd.warnings.append(f"joint equality '{name}': its polynomial terms of order 2–4 are kept in "
                                    "MjcEqualityJointAPI only (mimic couplings are linear)")
            continue
        if kind in (CONNECT, WELD):
            continue
        what = {JOINT: "joint", int(_EQ.mjEQ_TENDON): "tendon"}.get(kind, f"type {kind}")
        prefix = f"mjcf:equality:{unique_name(name, set())}"
        set_custom(root, f"{prefix}:type", what)
        set_custom(root, f"{prefix}:object1", _object_name(model, equality, 1))
        set_custom(root, f"{prefix}:object2", _object_name(model, equality, 2))
        set_custom(root, f"{prefix}:data", model.eq_data[equality])
        set_custom(root, f"{prefix}:active", bool(model.eq_active0[equality]))
        usd.warnings.append(f"{what} equality '{name}' has no USD physics equivalent; kept as {prefix}:*")


def _object_name(model: mujoco.MjModel, equality: int, which: int) -> str:
    objtype = int(model.eq_objtype[equality])
    index = int(model.eq_obj1id[equality] if which == 1 else model.eq_obj2id[equality])
    if index < 0:
        return ""
    return id2name(model, objtype, index) or f"{objtype}:{index}"
