"""``verify_urdf``: does a converted USD behave like its URDF? Masses, joint types, limits, effort and
velocity limits, mimic couplings, the tree, and forward kinematics of every link at random joint values.

Independent of the converter on purpose: the URDF side is parsed here from the raw XML (lxml) with its
own forward kinematics (``world(child) = world(parent) · origin · motion(q)``), and the USD side is read
with OpenUSD's reference physics parser (``UsdPhysics.UsdPhysicsLoadStageFromPrimRange``), bodies at their
authored rest poses and joint motion applied through the joints' local frames
(``world(body1) = world(body0) · local0 · motion(q) · local1⁻¹``). Links merged into a body are found as
frames (prims with ``usdforge:sourceName`` without ``RigidBodyAPI``). Only the file-name resolution is
shared with the converter (``rules.urdf.paths``), for the collider count.

Random configurations: revolute joints within their limits (±π when unlimited), continuous ±π,
prismatic within limits (±0.5 m when unlimited), planar joints a random in-plane motion, floating joints
between links a random rigid motion; mimic followers follow their leaders (URDF side from ``<mimic>``,
USD side from ``usdforge:mimic:*``); floating joints to a world link stay at rest.
"""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import numpy as np
from lxml import etree

from usdforge.rules.mesh.formats import MESH_FORMATS
from usdforge.rules.urdf.paths import UnresolvedUri, resolve_uri
from usdforge.rules.xml import SAFE_XML

_ONE_DOF = ("revolute", "continuous", "prismatic")


@attrs.define
class VerifyReport:
    """What ``verify_urdf`` found. ``ok`` when ``problems`` is empty; ``str()`` summarises."""

    urdf: str
    usd: str
    problems: list[str] = attrs.field(factory=list)
    links_compared: int = 0
    joints_compared: int = 0
    configurations: int = 0
    max_position_error: float = 0.0
    max_rotation_error: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        head = (f"{self.usd} vs {self.urdf}: {self.links_compared} links, {self.joints_compared} joints, "
                f"{self.configurations} configurations, max FK error {self.max_position_error:.3g} m / "
                f"{self.max_rotation_error:.3g} rad")
        return head + ("; OK" if self.ok else "\n  " + "\n  ".join(self.problems))


# ---- the URDF side ---------------------------------------------------------------------------------------

def _floats(element, attribute: str, default: tuple[float, ...]) -> np.ndarray:
    text = element.get(attribute) if element is not None else None
    return np.array(default if text is None else [float(t) for t in text.split()], dtype=float)


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    axis = axis / np.linalg.norm(axis)
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + s * k + (1 - c) * k @ k


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    return _rotation(np.array([0, 0, 1.0]), y) @ _rotation(np.array([0, 1.0, 0]), p) @ _rotation(np.array([1.0, 0, 0]), r)


def _pose(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, :3] = rotation
    pose[:3, 3] = translation
    return pose


@attrs.define
class _UrdfJoint:
    name: str
    kind: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    lower: float | None
    upper: float | None
    effort: float | None
    velocity: float | None
    mimic: tuple[str, float, float] | None


def _parse_urdf(path: Path):
    data = path.read_bytes()
    try:
        root = etree.fromstring(data, SAFE_XML)
    except etree.XMLSyntaxError:
        # A broken XML declaration is the one thing the converter recovers from.
        root = etree.fromstring(data[data.index(b"?>") + 2:], SAFE_XML)
    links: dict[str, dict] = {}
    for element in root.findall("link"):
        inertial = element.find("inertial")
        mass_element = inertial.find("mass") if inertial is not None else None
        mass = float(mass_element.get("value", "0")) if mass_element is not None else 0.0
        links[element.get("name")] = {"mass": mass, "element": element,
                                      "empty": mass == 0.0 and element.find("visual") is None
                                      and element.find("collision") is None}
    joints: dict[str, _UrdfJoint] = {}
    for element in root.findall("joint"):
        origin_element = element.find("origin")
        origin = _pose(_rpy(*_floats(origin_element, "rpy", (0, 0, 0))), _floats(origin_element, "xyz", (0, 0, 0)))
        axis = _floats(element.find("axis"), "xyz", (1, 0, 0))
        limit = element.find("limit")
        kind = element.get("type")
        lower = upper = None
        if kind in ("revolute", "prismatic") and limit is not None:
            lower, upper = float(limit.get("lower", 0)), float(limit.get("upper", 0))
        effort = float(limit.get("effort")) if limit is not None and limit.get("effort") else None
        velocity = float(limit.get("velocity")) if limit is not None and limit.get("velocity") else None
        mimic_element = element.find("mimic")
        mimic = None
        if mimic_element is not None and mimic_element.get("joint"):
            mimic = (mimic_element.get("joint"), float(mimic_element.get("multiplier", 1)),
                     float(mimic_element.get("offset", 0)))
        joints[element.get("name")] = _UrdfJoint(
            element.get("name"), kind, element.find("parent").get("link"), element.find("child").get("link"),
            origin, axis / max(np.linalg.norm(axis), 1e-300), lower, upper, effort if effort else None, velocity,
            mimic)
    # A mimic is a coupling only between two 1-DoF joints (the converter drops the others, with a warning).
    for joint in joints.values():
        if joint.mimic is not None and (joint.kind not in _ONE_DOF or joints.get(joint.mimic[0]) is None
                                        or joints[joint.mimic[0]].kind not in _ONE_DOF):
            joint.mimic = None
    return root, links, joints


def _planar_motion(rng: np.random.Generator, normal: np.ndarray) -> np.ndarray:
    normal = normal / np.linalg.norm(normal)
    helper = np.array([1.0, 0, 0]) if abs(normal[0]) < 0.9 else np.array([0, 1.0, 0])
    u = np.cross(normal, helper)
    u /= np.linalg.norm(u)
    v = np.cross(normal, u)
    translation = rng.uniform(-0.5, 0.5) * u + rng.uniform(-0.5, 0.5) * v
    return _pose(_rotation(normal, rng.uniform(-math.pi, math.pi)), translation)


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _sample(rng: np.random.Generator, joints: dict[str, _UrdfJoint], links: dict) -> tuple[dict, dict]:
    """(q by joint name for 1-DoF joints, motion (4, 4) by joint name for planar/floating)."""
    q, motion = {}, {}
    for joint in joints.values():
        if joint.kind in _ONE_DOF and joint.mimic is None:
            if joint.lower is not None:
                q[joint.name] = rng.uniform(joint.lower, joint.upper)
            else:
                span = 0.5 if joint.kind == "prismatic" else math.pi
                q[joint.name] = rng.uniform(-span, span)
        elif joint.kind == "planar":
            motion[joint.name] = _planar_motion(rng, joint.axis)
        elif joint.kind == "floating" and not links[joint.parent]["empty"]:
            motion[joint.name] = _pose(_random_rotation(rng), rng.uniform(-0.5, 0.5, size=3))
    for _ in range(len(joints)):
        for joint in joints.values():
            if joint.mimic is not None and joint.mimic[0] in q:
                q[joint.name] = joint.mimic[1] * q[joint.mimic[0]] + joint.mimic[2]
    return q, motion


def _urdf_fk(joints: dict[str, _UrdfJoint], links: dict, q: dict, motion: dict) -> dict[str, np.ndarray]:
    by_child = {joint.child: joint for joint in joints.values()}
    world: dict[str, np.ndarray] = {}

    def pose(link: str) -> np.ndarray:
        if link not in world:
            joint = by_child.get(link)
            if joint is None:
                world[link] = np.eye(4)
            else:
                if joint.kind in ("revolute", "continuous"):
                    m = _pose(_rotation(joint.axis, q[joint.name]), np.zeros(3))
                elif joint.kind == "prismatic":
                    m = _pose(np.eye(3), joint.axis * q[joint.name])
                else:
                    m = motion.get(joint.name, np.eye(4))
                world[link] = pose(joint.parent) @ joint.origin @ m
        return world[link]

    for name in links:
        pose(name)
    return world


# ---- the USD side ------------------------------------------------------------------------------------------

@attrs.define
class _UsdJoint:
    path: str
    name: str
    kind: str
    body0: str
    body1: str
    local0: np.ndarray
    local1: np.ndarray
    axis: int
    locked: set[str]
    prim: object


def _gf_pose(position, orientation) -> np.ndarray:
    w, (x, y, z) = orientation.GetReal(), orientation.GetImaginary()
    norm = math.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / norm, x / norm, y / norm, z / norm
    rotation = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                         [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                         [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return _pose(rotation, np.array(position, dtype=float))


def _read_usd(usd_path: Path):
    from pxr import Usd, UsdGeom, UsdPhysics  # deferred: pxr costs a second to import

    stage = Usd.Stage.Open(str(usd_path))
    if stage is None:
        raise ValueError(f"cannot open {usd_path}")
    root = stage.GetDefaultPrim()
    parsed = UsdPhysics.UsdPhysicsLoadStageFromPrimRange(stage, [root.GetPath()])
    cache = UsdGeom.XformCache()

    def matrix(prim) -> np.ndarray:
        gf = np.array(cache.GetLocalToWorldTransform(prim), dtype=float)
        return gf.T  # Gf is row-vector convention

    bodies = {str(path): matrix(stage.GetPrimAtPath(path))
              for path in parsed.get(UsdPhysics.ObjectType.RigidBody, ([], []))[0]}
    masses = {}
    for path in bodies:
        attribute = stage.GetPrimAtPath(path).GetAttribute("physics:mass")
        masses[path] = float(attribute.Get()) if attribute and attribute.HasAuthoredValue() else None
    kinds = {UsdPhysics.ObjectType.RevoluteJoint: "revolute", UsdPhysics.ObjectType.PrismaticJoint: "prismatic",
             UsdPhysics.ObjectType.FixedJoint: "fixed", UsdPhysics.ObjectType.D6Joint: "d6",
             UsdPhysics.ObjectType.SphericalJoint: "spherical"}
    joints: dict[str, _UsdJoint] = {}
    for object_type, kind in kinds.items():
        for path, desc in zip(*parsed.get(object_type, ([], []))):
            prim = stage.GetPrimAtPath(path)
            name_attribute = prim.GetAttribute("usdforge:sourceName")
            name = name_attribute.Get() if name_attribute and name_attribute.HasAuthoredValue() else prim.GetName()
            axis = "XYZ".index(str(getattr(desc, "axis", "X")).split(".")[-1][-1]) if kind in ("revolute", "prismatic") else 0
            locked = set()
            if kind == "d6":
                for pair in desc.jointLimits:
                    if pair.second.enabled and pair.second.lower > pair.second.upper:
                        locked.add(str(pair.first).split(".")[-1])
            joints[name] = _UsdJoint(str(path), name, kind, str(desc.body0), str(desc.body1),
                                     _gf_pose(desc.localPose0Position, desc.localPose0Orientation),
                                     _gf_pose(desc.localPose1Position, desc.localPose1Orientation), axis, locked, prim)
    # Named things: bodies and frames (prims with a source name, no rigid body) and their rest poses.
    named: dict[str, tuple[str | None, np.ndarray]] = {}  # source name -> (owning body or None, rest world)
    for prim in Usd.PrimRange(root, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)):
        attribute = prim.GetAttribute("usdforge:sourceName")
        if not attribute or not attribute.HasAuthoredValue() or prim.IsA(UsdPhysics.Joint) or prim == root:
            continue
        owner = prim
        while owner and owner != root and str(owner.GetPath()) not in bodies:
            owner = owner.GetParent()
        named[attribute.Get()] = (str(owner.GetPath()) if owner and owner != root else None, matrix(prim))
    return stage, bodies, masses, joints, named


def _decompose_xyz(rotation: np.ndarray) -> np.ndarray:
    """Angles (a, b, c) with rotation = Rx(a) Ry(b) Rz(c)."""
    b = math.asin(max(-1.0, min(1.0, rotation[0, 2])))
    a = math.atan2(-rotation[1, 2], rotation[2, 2])
    c = math.atan2(-rotation[0, 1], rotation[0, 0])
    return np.array([a, b, c])


def _d6_motion(joint: _UsdJoint, urdf_motion: np.ndarray) -> np.ndarray:
    """The URDF motion (in the child link frame) as the USD D6 joint can express it: its free DoFs only."""
    frame = joint.local1  # the USD joint frame in the child body frame (= the URDF child link frame)
    local = np.linalg.inv(frame) @ urdf_motion @ frame
    translation = local[:3, 3].copy()
    free_rotations = [i for i, letter in enumerate("XYZ") if f"Rot{letter}" not in joint.locked]
    if len(free_rotations) == 1:
        # One rotation DoF (a planar joint): its angle over the whole circle, whatever else is in ``local``.
        k = free_rotations[0]
        i, j = (k + 1) % 3, (k + 2) % 3
        angles = np.zeros(3)
        angles[k] = math.atan2(local[j, i] - local[i, j], local[i, i] + local[j, j])
    else:
        angles = _decompose_xyz(local[:3, :3])
    for i, letter in enumerate("XYZ"):
        if f"Trans{letter}" in joint.locked:
            translation[i] = 0.0
        if f"Rot{letter}" in joint.locked:
            angles[i] = 0.0
    rotation = _rotation(np.array([1.0, 0, 0]), angles[0]) @ _rotation(np.array([0, 1.0, 0]), angles[1]) @ \
        _rotation(np.array([0, 0, 1.0]), angles[2])
    return _pose(rotation, translation)


def _usd_q(joints: dict[str, _UsdJoint], urdf_q: dict, mimic: bool = True) -> dict[str, float]:
    """Joint values on the USD side: independent joints from ``urdf_q``, followers from usdforge:mimic
    (unless ``mimic`` is False: the authored rest pose has every coordinate at 0, followers included)."""
    q: dict[str, float] = {}
    path_to_name = {joint.path: joint.name for joint in joints.values()}
    mimics = {}
    for joint in joints.values():
        relationship = joint.prim.GetRelationship("usdforge:mimic:joint")
        if mimic and relationship and relationship.GetTargets():
            leader = path_to_name.get(str(relationship.GetTargets()[0]))
            mimics[joint.name] = (leader, float(joint.prim.GetAttribute("usdforge:mimic:multiplier").Get()),
                                  float(joint.prim.GetAttribute("usdforge:mimic:offset").Get()))
        elif joint.name in urdf_q:
            q[joint.name] = urdf_q[joint.name]
    for _ in range(len(mimics) + 1):
        for name, (leader, multiplier, offset) in mimics.items():
            if leader in q:
                q[name] = multiplier * q[leader] + offset
    return q


def _usd_fk(joints: dict[str, _UsdJoint], bodies: dict[str, np.ndarray], q: dict, motion: dict) -> dict[str, np.ndarray]:
    by_child = {joint.body1: joint for joint in joints.values() if joint.body1 in bodies}
    world: dict[str, np.ndarray] = {}

    def pose(body: str) -> np.ndarray:
        if body not in world:
            joint = by_child.get(body)
            if joint is None:
                world[body] = bodies[body]
            else:
                if joint.kind in ("revolute", "prismatic"):
                    e = np.zeros(3)
                    e[joint.axis] = 1.0
                    value = q.get(joint.name, 0.0)
                    m = _pose(_rotation(e, value), np.zeros(3)) if joint.kind == "revolute" else _pose(np.eye(3), e * value)
                elif joint.kind == "d6":
                    m = _d6_motion(joint, motion.get(joint.name, np.eye(4)))
                else:
                    m = np.eye(4)
                parent = pose(joint.body0) if joint.body0 in bodies else np.eye(4)
                world[body] = parent @ joint.local0 @ m @ np.linalg.inv(joint.local1)
        return world[body]

    for body in bodies:
        pose(body)
    return world


# ---- the checks ------------------------------------------------------------------------------------------------

def verify_urdf(urdf_path: str | Path, usd_path: str | Path, packages: dict[str, str] | None = None, *,
                configurations: int = 20, seed: int = 0, position_tolerance: float = 1e-5,
                rotation_tolerance: float = 1e-4, expect_mimic: bool = True,
                collision_from_visuals: bool = False, tree_root: str | None = None,
                allowed: tuple[str, ...] = ()) -> VerifyReport:
    """Compare the USD at ``usd_path`` with the URDF at ``urdf_path`` (see the module docstring).

    packages: ROS package name → folder, to tell which collision meshes exist (their count is compared).
    expect_mimic: whether every URDF mimic coupling must be authored (False after
        ``convert_mimic_joints_to_normal_joints``).
    collision_from_visuals: links without <collision> are expected to collide with their visuals.
    tree_root, allowed: the cfg's ``tree_root`` and ``allowed_roots`` (where packages are looked for, as the
        converter did).
    """
    urdf_path, usd_path = Path(urdf_path), Path(usd_path)
    report = VerifyReport(str(urdf_path), str(usd_path))
    problems = report.problems
    root, links, urdf_joints = _parse_urdf(urdf_path)
    stage, bodies, masses, usd_joints, named = _read_usd(usd_path)

    # The tree: one parent joint per body, no cycles.
    parents: dict[str, list[str]] = {}
    for joint in usd_joints.values():
        if not joint.prim.GetAttribute("physics:excludeFromArticulation").Get():
            parents.setdefault(joint.body1, []).append(joint.name)
    for body, names in parents.items():
        if len(names) > 1:
            problems.append(f"body {body} has several parent joints: {', '.join(names)}")
    for body in bodies:
        seen, current = {body}, body
        while current in parents:
            current = usd_joints[parents[current][0]].body0
            if current in seen:
                problems.append(f"the joints form a cycle through {body}")
                break
            seen.add(current)

    # Masses: every body carries the URDF masses of the links it holds (itself and the links merged in).
    holdings: dict[str, list[str]] = {body: [] for body in bodies}
    for name in links:
        if name not in named:
            problems.append(f"link '{name}' is neither a body nor a frame in the USD")
            continue
        owner = named[name][0]
        if owner is None:
            if links[name]["mass"] > 0:
                problems.append(f"link '{name}' has mass {links[name]['mass']} kg but became a world frame")
            continue
        holdings[owner].append(name)
    for body, held in holdings.items():
        expected = sum(links[name]["mass"] for name in held)
        actual = masses[body]
        if actual is None or actual <= 0:
            problems.append(f"body {body} has no positive mass ({actual})")
        elif expected > 0 and abs(actual - expected) > 1e-6 * max(1.0, expected):
            problems.append(f"body {body} ({', '.join(held)}): mass {actual} kg, URDF says {expected} kg")

    # Joints: types, limits, effort, velocity, mimic.
    for joint in urdf_joints.values():
        if joint.kind == "fixed":
            child, parent = named.get(joint.child), named.get(joint.parent)
            if joint.name in usd_joints:
                continue
            if child is not None and parent is not None and child[0] != parent[0] and child[0] is not None \
                    and parent[0] is not None:
                problems.append(f"fixed joint '{joint.name}' is neither authored nor merged")
            continue
        if joint.kind == "floating" and links[joint.parent]["empty"]:
            continue  # a floating base: no joint
        usd = usd_joints.get(joint.name)
        expected_kind = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic",
                         "planar": "d6", "floating": "d6"}[joint.kind]
        if usd is None:
            problems.append(f"joint '{joint.name}' ({joint.kind}) is missing")
            continue
        report.joints_compared += 1
        if usd.kind != expected_kind:
            problems.append(f"joint '{joint.name}': {usd.kind} in USD, {joint.kind} in URDF")
            continue
        _check_limits(joint, usd, problems)
        if expect_mimic and joint.mimic is not None:
            relationship = usd.prim.GetRelationship("usdforge:mimic:joint")
            leader = usd_joints.get(joint.mimic[0])
            if not relationship or leader is None or [str(t) for t in relationship.GetTargets()] != [leader.path]:
                problems.append(f"joint '{joint.name}': mimic of '{joint.mimic[0]}' is not authored")
            else:
                multiplier = usd.prim.GetAttribute("usdforge:mimic:multiplier").Get()
                offset = usd.prim.GetAttribute("usdforge:mimic:offset").Get()
                if abs(multiplier - joint.mimic[1]) > 1e-9 or abs(offset - joint.mimic[2]) > 1e-9:
                    problems.append(f"joint '{joint.name}': mimic {multiplier}·q + {offset}, URDF says "
                                    f"{joint.mimic[1]}·q + {joint.mimic[2]}")

    _check_colliders(root, urdf_path, packages or {}, stage, bodies, holdings, problems, collision_from_visuals,
                     tree_root, tuple(allowed))

    # Forward kinematics at rest and at random configurations.
    rng = np.random.default_rng(seed)
    rest_world = {name: pose for name, (owner, pose) in named.items()}
    for index in range(configurations + 1):
        q, motion = ({}, {}) if index == 0 else _sample(rng, urdf_joints, links)
        if index == 0:
            q = {j.name: 0.0 for j in urdf_joints.values() if j.kind in _ONE_DOF}
        urdf_world = _urdf_fk(urdf_joints, links, q, motion)
        usd_world = _usd_fk(usd_joints, bodies, _usd_q(usd_joints, q, mimic=index > 0), motion)
        for name, (owner, rest) in named.items():
            if name not in urdf_world:
                continue
            if owner is None:
                actual = rest
            else:
                actual = usd_world[owner] @ np.linalg.inv(bodies[owner]) @ rest_world[name]
            expected = urdf_world[name]
            position = float(np.linalg.norm(actual[:3, 3] - expected[:3, 3]))
            cosine = (np.trace(actual[:3, :3].T @ expected[:3, :3]) - 1.0) / 2.0
            rotation = float(math.acos(max(-1.0, min(1.0, cosine))))
            report.max_position_error = max(report.max_position_error, position)
            report.max_rotation_error = max(report.max_rotation_error, rotation)
            if position > position_tolerance or rotation > rotation_tolerance:
                where = "at rest" if index == 0 else f"in configuration {index}"
                problems.append(f"link '{name}' {where}: off by {position:.3g} m / {rotation:.3g} rad")
                if len(problems) > 50:
                    problems.append("... (stopped after 50 problems)")
                    return report
        report.configurations = index
    report.links_compared = sum(1 for name in named if name in links)
    return report


def _check_limits(joint: _UrdfJoint, usd: _UsdJoint, problems: list[str]) -> None:
    from pxr import UsdPhysics

    prim = usd.prim
    angular = joint.kind in ("revolute", "continuous")
    scale = 180.0 / math.pi if angular else 1.0
    lower, upper = prim.GetAttribute("physics:lowerLimit"), prim.GetAttribute("physics:upperLimit")
    if joint.kind in ("revolute", "prismatic") and joint.lower is not None:
        for attribute, value in ((lower, joint.lower), (upper, joint.upper)):
            authored = attribute.Get() if attribute and attribute.HasAuthoredValue() else None
            if authored is None or abs(authored - value * scale) > 1e-5 * max(1.0, abs(value * scale)):
                problems.append(f"joint '{joint.name}': {attribute.GetName() if attribute else 'limit'} = "
                                f"{authored}, URDF says {value * scale:g}")
    elif usd.kind in ("revolute", "prismatic"):
        for attribute in (lower, upper):
            value = attribute.Get() if attribute and attribute.HasAuthoredValue() else None
            if value is not None and math.isfinite(value) and abs(value) < 1e30:
                problems.append(f"joint '{joint.name}' is unlimited in the URDF but {attribute.GetName()} = {value}")
    axis = "angular" if angular else "linear"
    if joint.effort is not None:
        drive = UsdPhysics.DriveAPI.Get(prim, axis)
        force = drive.GetMaxForceAttr().Get() if drive and drive.GetMaxForceAttr().HasAuthoredValue() else None
        if force is None or abs(force - joint.effort) > 1e-6 * max(1.0, joint.effort):
            problems.append(f"joint '{joint.name}': DriveAPI maxForce = {force}, URDF effort = {joint.effort}")
    if joint.velocity is not None:
        attribute = prim.GetAttribute("physxJoint:maxJointVelocity")
        velocity = attribute.Get() if attribute and attribute.HasAuthoredValue() else None
        if velocity is None or abs(velocity - joint.velocity * scale) > 1e-5 * max(1.0, joint.velocity * scale):
            problems.append(f"joint '{joint.name}': maxJointVelocity = {velocity}, URDF says {joint.velocity * scale:g}")


def _check_colliders(root, urdf_path: Path, packages: dict, stage, bodies: dict, holdings: dict,
                     problems: list[str], from_visuals: bool, tree_root: str | None = None,
                     allowed: tuple[str, ...] = ()) -> None:
    """Each body has as many collider prims as its links have readable <collision> elements (or
    <visual> elements, for links without collisions, when ``from_visuals``)."""
    from pxr import Usd, UsdPhysics

    # Looked up by name, not with a path expression: a name holding a quote (') would break one.
    links: dict[str, object] = {}
    for link in root.iterfind("link"):
        links.setdefault(link.get("name"), link)
    for body, held in holdings.items():
        expected = 0
        for name in held:
            link = links.get(name)
            if link is None:
                continue
            kind = "collision"
            if from_visuals and link.find("collision") is None:
                kind = "visual"
            for collision in link.iterfind(f"{kind}/geometry/*"):
                if collision.tag != "mesh":
                    expected += 1
                    continue
                try:
                    path = resolve_uri(collision.get("filename", ""), urdf_path.parent, packages, tree_root, allowed)
                except UnresolvedUri:
                    continue
                if path.is_file() and path.suffix.lower().lstrip(".") in MESH_FORMATS:
                    expected += 1
        scope = stage.GetPrimAtPath(f"{body}/collisions")
        actual = 0
        if scope:
            for shape in scope.GetChildren():
                has_collider = any(p.HasAPI(UsdPhysics.CollisionAPI) for p in Usd.PrimRange(shape))
                actual += 1 if has_collider else 0
        if actual != expected:
            problems.append(f"body {body}: {actual} colliders, the URDF gives {expected}")
