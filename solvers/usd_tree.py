"""Read the kinematic tree of a converted asset from its UsdPhysics joints (host side, NumPy float64).

The layout is the one docs/usd_layout.md fixes: links are flat rigid-body prims authored at their rest
(all joints zero) world pose, joints live under ``/<name>/joints`` with ``body0`` = parent and
``body1`` = child, and source names are kept in ``usdforge:sourceName``.

Two choices here matter for accuracy:

* Rest transforms between bodies come from the bodies' authored world poses (``UsdGeom.XformCache``,
  double precision), not from the joints' ``localPos0/localRot0``, which the UsdPhysics schema stores as
  float32 (``point3f``/``quatf``).
* The joint frame is taken from the child side (``localPos1/localRot1``). For MJCF joints that is the
  joint's ``pos``/``axis`` in the child body, for URDF joints the child link frame itself, so it is
  usually exactly representable (zero offset, axis-aligned rotation) even in float32.

Every joint is expanded into elementary motions (:class:`Dof`) about or along one axis of the joint
frame: revolute and prismatic joints give one, a spherical joint three rotations (intrinsic X, Y, Z), a
generic D6 joint its unlocked translations then rotations. Fixed joints give none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from os import PathLike
from typing import Literal

import numpy as np

DofKind = Literal["revolute", "prismatic"]
JointKind = Literal["revolute", "prismatic", "fixed", "spherical", "d6", "frame"]

_AXES = {"X": 0, "Y": 1, "Z": 2}
_D6_DOFS = (
    ("transX", "prismatic", 0),
    ("transY", "prismatic", 1),
    ("transZ", "prismatic", 2),
    ("rotX", "revolute", 0),
    ("rotY", "revolute", 1),
    ("rotZ", "revolute", 2),
)


@dataclass(frozen=True)
class Mimic:
    """``q_follower = multiplier * q_leader + offset`` (radians or metres)."""

    leader: str
    multiplier: float
    offset: float


@dataclass(frozen=True)
class Dof:
    """One elementary motion of a joint about (revolute) or along (prismatic) a joint-frame axis.

    ``name`` is the joint's source name for 1-DoF joints and ``"<joint>:<rotX|transY|...>"`` for the
    elementary motions of spherical and D6 joints. Limits are in radians or metres (±inf: unlimited).
    """

    name: str
    kind: DofKind
    axis: int
    lower: float
    upper: float
    mimic: Mimic | None = None


@dataclass(frozen=True, eq=False)
class JointSpec:
    """A tree joint: ``world(child) = world(parent) @ rest_rel @ frame @ M(dofs) @ inv(frame)``.

    ``rest_rel = inv(rest_world[parent]) @ rest_world[child]`` is the child's rest pose in the parent
    body frame; ``frame`` (4×4, metres) is the joint frame in the child body frame
    (``localPos1/localRot1``); ``M`` applies the elementary motions in order. Kind ``"frame"`` is not a
    USD joint: it attaches a link frame (a merged link, an Xform below its body) rigidly to its body.
    """

    name: str
    prim_path: str
    kind: JointKind
    parent: int  # body index, -1 for the world
    child: int
    frame: np.ndarray
    dofs: tuple[Dof, ...]


@dataclass(frozen=True, eq=False)
class KinematicTree:
    """Links (rest world poses, 4×4, metres) and the joints of a tree, in topological order.

    Links are the rigid bodies and the link *frames*: prims below a body (or directly below the root
    prim, for the world) that carry ``usdforge:sourceName`` but no ``RigidBodyAPI``, i.e. source links
    the converter merged into a body (docs/usd_layout.md, "Frames"). ``is_frame`` tells them apart.
    Links are ordered so that every parent comes before its children. ``parent_joint[b]`` indexes
    ``joints`` (or is -1 for a root body, which stays at its rest pose: a floating base is not a
    coordinate here). USD joints come first, in authored order, then the frame attachments.
    """

    body_names: tuple[str, ...]
    body_paths: tuple[str, ...]
    rest_world: np.ndarray  # (B, 4, 4)
    joints: tuple[JointSpec, ...]
    parent_joint: tuple[int, ...]
    is_frame: tuple[bool, ...] = ()
    source: str = ""
    body_lookup: dict[str, list[int]] = field(default_factory=dict)

    def body_index(self, name: str) -> int:
        """Index of the body whose source name (or prim name, or prim path) is ``name``."""
        hits = self.body_lookup.get(name, [])
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            paths = ", ".join(self.body_paths[i] for i in hits)
            raise ValueError(f"body name {name!r} is ambiguous in {self.source}: {paths}; pass a prim path")
        raise ValueError(
            f"unknown body {name!r} in {self.source}; available bodies: {', '.join(self.body_names)}"
        )

    def path_to(self, body: int) -> list[int]:
        """Joint indices from the root of ``body``'s tree down to ``body``."""
        out: list[int] = []
        while self.parent_joint[body] >= 0:
            j = self.parent_joint[body]
            out.append(j)
            body = self.joints[j].parent
            if body < 0:
                break
        return out[::-1]


def quat_to_matrix(wxyz: np.ndarray) -> np.ndarray:
    """Rotation matrix (3×3) of a quaternion (w, x, y, z); normalises first."""
    w, x, y, z = np.asarray(wxyz, dtype=np.float64) / np.linalg.norm(wxyz)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def make_transform(pos: np.ndarray, rot: np.ndarray) -> np.ndarray:
    """4×4 homogeneous transform (column convention) from a position (3,) and a rotation (3, 3)."""
    t = np.eye(4)
    t[:3, :3] = rot
    t[:3, 3] = pos
    return t


def invert_transform(t: np.ndarray) -> np.ndarray:
    """Inverse of a rigid 4×4 transform."""
    r = t[:3, :3].T
    return make_transform(-r @ t[:3, 3], r)


def _gf_to_transform(m, meters_per_unit: float) -> np.ndarray:
    # Gf matrices are row-vector convention (p' = p M): the rotation is the transposed upper block.
    a = np.array(m, dtype=np.float64)
    rot = a[:3, :3].T
    if not np.allclose(rot @ rot.T, np.eye(3), atol=1e-6):
        raise ValueError("a body's world transform is scaled or sheared; usdforge bodies carry no scale")
    return make_transform(a[3, :3] * meters_per_unit, rot)


def _source_name(prim) -> str:
    attr = prim.GetAttribute("usdforge:sourceName")
    if attr and attr.HasAuthoredValue():
        value = attr.Get()
        if value:
            return str(value)
    return prim.GetName()


def _get(attr, default):
    value = attr.Get() if attr else None
    return default if value is None else value


def read_kinematic_tree(usd_path: str | PathLike[str]) -> KinematicTree:
    """Parse the UsdPhysics joints and rigid bodies of the stage at ``usd_path`` into a tree.

    Joints with ``physics:excludeFromArticulation`` (closed-loop constraints) or ``jointEnabled = 0``
    are left out. Raises ValueError for a child with two parents, a joint whose ``body1`` is empty, a
    mimic leader that is not a 1-DoF joint, or a kinematic loop.
    """
    from pxr import Usd, UsdGeom, UsdPhysics  # deferred: importing pxr costs about a second

    path = str(usd_path)
    stage = Usd.Stage.Open(path)
    if stage is None:
        raise ValueError(f"cannot open USD stage {path}")
    mpu = float(UsdGeom.GetStageMetersPerUnit(stage))
    root = stage.GetDefaultPrim() or stage.GetPseudoRoot()
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())

    prims = list(Usd.PrimRange(root))
    body_prims = [p for p in prims if p.HasAPI(UsdPhysics.RigidBodyAPI)]
    joint_prims = [p for p in prims if p.IsA(UsdPhysics.Joint)]

    body_index: dict[str, int] = {}
    body_list: list = []

    def add_body(prim) -> int:
        key = str(prim.GetPath())
        if key not in body_index:
            body_index[key] = len(body_list)
            body_list.append(prim)
        return body_index[key]

    for prim in body_prims:
        add_body(prim)

    def target(rel, joint_prim) -> int:
        targets = rel.GetTargets() if rel else []
        if not targets:
            return -1
        prim = stage.GetPrimAtPath(targets[0])
        if not prim or not prim.IsValid():
            raise ValueError(f"joint {joint_prim.GetPath()} targets missing prim {targets[0]}")
        if prim == root:  # a joint to the world anchored to the robot's Xform (docs/usd_layout.md)
            return -1
        return add_body(prim)

    raw_joints = []
    for jp in joint_prims:
        joint = UsdPhysics.Joint(jp)
        if _get(joint.GetExcludeFromArticulationAttr(), False) or not _get(joint.GetJointEnabledAttr(), True):
            continue
        parent = target(joint.GetBody0Rel(), jp)
        child = target(joint.GetBody1Rel(), jp)
        if child < 0:
            raise ValueError(f"joint {jp.GetPath()} has no body1 (child); usdforge joints point parent -> child")
        raw_joints.append((jp, parent, child))

    # Link frames: named Xforms directly below a body or a frame (merged links), or directly below the
    # root prim (a ghost world link). Shapes live under unnamed visuals/collisions scopes, so the walk
    # never reaches them.
    n_rigid = len(body_list)
    frame_links: list[tuple[int, object]] = []  # (parent link index or -1, prim)
    pending = [(i, p) for i, p in enumerate(list(body_list))] + [(-1, root)]
    while pending:
        parent_index, prim = pending.pop()
        for child in prim.GetChildren():
            if str(child.GetPath()) in body_index or child.IsA(UsdPhysics.Joint) or not child.IsA(UsdGeom.Xform):
                continue
            attr = child.GetAttribute("usdforge:sourceName")
            if not (attr and attr.HasAuthoredValue()):
                continue
            index = add_body(child)
            frame_links.append((parent_index, child))
            pending.append((index, child))

    rest_world = np.stack([_gf_to_transform(cache.GetLocalToWorldTransform(p), mpu) for p in body_list]) \
        if body_list else np.zeros((0, 4, 4))

    # Joint kinds, frames and elementary motions, in authored order.
    joints: list[JointSpec] = []
    mimic_targets: dict[str, tuple[str, float, float]] = {}
    name_of_path: dict[str, str] = {}
    for jp, parent, child in raw_joints:
        name = _source_name(jp)
        name_of_path[str(jp.GetPath())] = name
        pos = np.array(_get(jp.GetAttribute("physics:localPos1"), (0.0, 0.0, 0.0)), dtype=np.float64) * mpu
        q = _get(jp.GetAttribute("physics:localRot1"), None)
        rot = np.eye(3) if q is None else quat_to_matrix(np.array([q.GetReal(), *q.GetImaginary()]))
        frame = make_transform(pos, rot)
        kind, dofs = _joint_dofs(jp, name, mpu)
        joints.append(JointSpec(name, str(jp.GetPath()), kind, parent, child, frame, dofs))
        rel = jp.GetRelationship("usdforge:mimic:joint")
        if rel and rel.GetTargets():
            if len(dofs) != 1:
                raise ValueError(f"mimic follower {jp.GetPath()} must be a revolute or prismatic joint")
            mult = float(_get(jp.GetAttribute("usdforge:mimic:multiplier"), 1.0))
            off = float(_get(jp.GetAttribute("usdforge:mimic:offset"), 0.0))
            mimic_targets[name] = (str(rel.GetTargets()[0]), mult, off)

    joints = _attach_mimics(joints, mimic_targets, name_of_path, path)
    for parent_index, prim in frame_links:
        joints.append(JointSpec(_source_name(prim), str(prim.GetPath()), "frame", parent_index,
                                body_index[str(prim.GetPath())], np.eye(4), ()))

    # Tree structure: one parent joint per body, no loops; order bodies parents-first.
    parent_joint = [-1] * len(body_list)
    for j, spec in enumerate(joints):
        if parent_joint[spec.child] >= 0:
            other = joints[parent_joint[spec.child]].prim_path
            raise ValueError(
                f"body {body_list[spec.child].GetPath()} has two parent joints ({other}, {spec.prim_path}); "
                "mark loop-closing joints with physics:excludeFromArticulation"
            )
        parent_joint[spec.child] = j
    order = _topological_order(parent_joint, joints, body_list)

    new_index = {old: new for new, old in enumerate(order)}
    joints = [
        JointSpec(s.name, s.prim_path, s.kind, new_index.get(s.parent, -1), new_index[s.child], s.frame, s.dofs)
        for s in joints
    ]
    names = tuple(_source_name(body_list[i]) for i in order)
    paths = tuple(str(body_list[i].GetPath()) for i in order)
    lookup: dict[str, list[int]] = {}
    for i, (n, p) in enumerate(zip(names, paths)):
        for key in {n, p, body_list[order[i]].GetName()}:
            lookup.setdefault(key, []).append(i)
    return KinematicTree(
        body_names=names,
        body_paths=paths,
        rest_world=rest_world[order] if len(order) else rest_world,
        joints=tuple(joints),
        parent_joint=tuple(parent_joint[i] for i in order),
        is_frame=tuple(i >= n_rigid for i in order),
        source=path,
        body_lookup=lookup,
    )


def _joint_dofs(jp, name: str, mpu: float) -> tuple[JointKind, tuple[Dof, ...]]:
    from pxr import UsdPhysics

    def limit(attr, default: float, scale: float) -> float:
        v = _get(attr, default)
        return float(v) * scale

    deg = math.pi / 180.0
    if jp.IsA(UsdPhysics.RevoluteJoint):
        axis = _AXES[str(_get(jp.GetAttribute("physics:axis"), "X"))]
        lo = limit(jp.GetAttribute("physics:lowerLimit"), -math.inf, deg)
        hi = limit(jp.GetAttribute("physics:upperLimit"), math.inf, deg)
        return "revolute", (Dof(name, "revolute", axis, lo, hi),)
    if jp.IsA(UsdPhysics.PrismaticJoint):
        axis = _AXES[str(_get(jp.GetAttribute("physics:axis"), "X"))]
        lo = limit(jp.GetAttribute("physics:lowerLimit"), -math.inf, mpu)
        hi = limit(jp.GetAttribute("physics:upperLimit"), math.inf, mpu)
        return "prismatic", (Dof(name, "prismatic", axis, lo, hi),)
    if jp.IsA(UsdPhysics.FixedJoint):
        return "fixed", ()
    if jp.IsA(UsdPhysics.SphericalJoint):
        # Coordinates: intrinsic rotations about X, Y, Z of the joint frame. The cone limits bound the
        # two swing rotations (cone0 tilts the cone axis toward the next axis, i.e. rotates about the
        # second-next one); twist about the cone axis is free.
        a = _AXES[str(_get(jp.GetAttribute("physics:axis"), "X"))]
        bounds = [(-math.inf, math.inf)] * 3
        for attr_name, about in (("physics:coneAngle0Limit", (a + 2) % 3), ("physics:coneAngle1Limit", (a + 1) % 3)):
            v = float(_get(jp.GetAttribute(attr_name), -1.0))
            if v >= 0:
                bounds[about] = (-v * deg, v * deg)
        dofs = tuple(
            Dof(f"{name}:rot{'XYZ'[i]}", "revolute", i, bounds[i][0], bounds[i][1]) for i in range(3)
        )
        return "spherical", dofs
    if jp.GetTypeName() == "PhysicsJoint":  # generic D6 joint: free unless a LimitAPI locks an axis
        dofs = []
        for token, kind, axis in _D6_DOFS:
            scale = deg if kind == "revolute" else mpu
            lo, hi = -math.inf, math.inf
            if jp.HasAPI(UsdPhysics.LimitAPI, token):
                lim = UsdPhysics.LimitAPI(jp, token)
                lo = limit(lim.GetLowAttr(), -math.inf, scale)
                hi = limit(lim.GetHighAttr(), math.inf, scale)
                if lo > hi:  # low > high locks the axis (UsdPhysics LimitAPI)
                    continue
            dofs.append(Dof(f"{name}:{token}", kind, axis, lo, hi))
        return "d6", tuple(dofs)
    raise ValueError(f"joint {jp.GetPath()} has unsupported type {jp.GetTypeName()}")


def _attach_mimics(
    joints: list[JointSpec],
    targets: dict[str, tuple[str, float, float]],
    name_of_path: dict[str, str],
    source: str,
) -> list[JointSpec]:
    """Resolve ``usdforge:mimic:*`` to independent leaders (chains of mimics are composed)."""
    direct: dict[str, Mimic] = {}
    dofs_by_name = {d.name: d for s in joints for d in s.dofs}
    for follower, (leader_path, mult, off) in targets.items():
        leader = name_of_path.get(leader_path)
        if leader is None or leader not in dofs_by_name:
            raise ValueError(
                f"{source}: mimic joint {follower!r} follows {leader_path}, which is not a revolute or "
                "prismatic joint of this articulation"
            )
        direct[follower] = Mimic(leader, mult, off)

    def resolve(name: str, seen: tuple[str, ...]) -> Mimic:
        m = direct[name]
        if m.leader in seen:
            raise ValueError(f"{source}: mimic joints form a cycle: {' -> '.join(seen + (m.leader,))}")
        if m.leader not in direct:
            return m
        up = resolve(m.leader, seen + (m.leader,))
        return Mimic(up.leader, m.multiplier * up.multiplier, m.multiplier * up.offset + m.offset)

    out = []
    for s in joints:
        if s.dofs and s.dofs[0].name in direct:
            d = s.dofs[0]
            s = JointSpec(
                s.name, s.prim_path, s.kind, s.parent, s.child, s.frame,
                (Dof(d.name, d.kind, d.axis, d.lower, d.upper, resolve(d.name, (d.name,))),),
            )
        out.append(s)
    return out


def _topological_order(parent_joint: list[int], joints: list[JointSpec], body_list: list) -> list[int]:
    children: dict[int, list[int]] = {}
    for b, j in enumerate(parent_joint):
        p = joints[j].parent if j >= 0 else -1
        children.setdefault(p, []).append(b)
    order: list[int] = []
    stack = list(reversed(children.get(-1, [])))
    # Roots are bodies with no parent joint and bodies jointed to the world (parent -1).
    while stack:
        b = stack.pop()
        order.append(b)
        stack.extend(reversed(children.get(b, [])))
    if len(order) != len(body_list):
        stuck = sorted(set(range(len(body_list))) - set(order))
        raise ValueError(
            "kinematic loop through bodies " + ", ".join(str(body_list[i].GetPath()) for i in stuck)
            + "; mark loop-closing joints with physics:excludeFromArticulation"
        )
    return order
