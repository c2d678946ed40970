"""A robot's joints: UsdPhysics joints in ``/<robot>/joints`` with frames rotated so the motion axis is X, Y
or Z, limits, ``DriveAPI``, fixed-base joints, mimic couplings (``usdforge:mimic:*``, ``PhysxMimicJointAPI``,
``NewtonMimicAPI``) and the joint data UsdPhysics has no attribute for, per engine layer: velocity limit,
damping, friction and armature as ``physxJoint:*`` (PhysX), ``newton:*`` (``NewtonJointAPI``, what Newton's
default ``add_usd`` reads) and ``mjc:*`` (MuJoCo)."""

from __future__ import annotations

import numpy as np
from pxr import Gf, Sdf

from usdforge.rules.robot.articulation import tree_roots
from usdforge.rules.robot.layers import RobotLayers, source_name
from usdforge.rules.robot.model import Joint, Link, Robot
from usdforge.rules.usd import layer as sdf
from usdforge.rules.usd.stage import unique_name
from usdforge.schemas.units import per_radian_to_per_degree, radians_to_degrees

_AXES = "XYZ"
#: Joint-frame consistency the writer checks (m and rad), far above float rounding, far below a bug.
_FRAME_TOLERANCE = 1e-6
_JOINT_TYPES = {"revolute": "PhysicsRevoluteJoint", "continuous": "PhysicsRevoluteJoint",
                "prismatic": "PhysicsPrismaticJoint", "fixed": "PhysicsFixedJoint",
                "spherical": "PhysicsSphericalJoint", "planar": "PhysicsJoint", "floating": "PhysicsJoint"}
T = Sdf.ValueTypeNames


def axis_alignment(axis: np.ndarray) -> tuple[int, np.ndarray]:
    """(k, R): the USD axis index k (0 X, 1 Y, 2 Z) nearest to ``axis`` (3,) and the rotation R (3, 3) with
    R @ e_k = axis, so a joint frame rotated by R moves about/along its own k axis in the positive
    direction of ``axis`` (the joint coordinate keeps its sign)."""
    key = tuple(np.asarray(axis, dtype=float).tolist())
    cached = _ALIGNMENTS.get(key)
    if cached is not None:  # most axes are a few repeated directions: ±X, ±Y, ±Z
        return cached[0], cached[1].copy()
    result = _axis_alignment(np.asarray(axis, dtype=float))
    if len(_ALIGNMENTS) < 1024:
        _ALIGNMENTS[key] = result
    return result[0], result[1].copy()


_ALIGNMENTS: dict[tuple, tuple[int, np.ndarray]] = {}


def _axis_alignment(axis: np.ndarray) -> tuple[int, np.ndarray]:
    axis = axis / np.linalg.norm(axis)
    k = int(np.argmax(np.abs(axis)))
    e = np.zeros(3)
    e[k] = 1.0
    cross = np.cross(e, axis)
    sine, cosine = float(np.linalg.norm(cross)), float(e @ axis)
    if sine < 1e-12:
        if cosine > 0:
            return k, np.eye(3)
        # Exactly opposite: half a turn about the next axis.
        other = np.zeros(3)
        other[(k + 1) % 3] = 1.0
        return k, 2.0 * np.outer(other, other) - np.eye(3)
    return k, _rotation(cross / sine, sine, cosine)


def _rotation(unit: np.ndarray, sine: float, cosine: float) -> np.ndarray:
    """(3, 3) rotation about the unit axis ``unit`` (3,) by the angle of the given sine and cosine
    (Rodrigues' formula, as pxr's Gf.Rotation and trimesh compute it)."""
    x, y, z = unit
    cross = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return cosine * np.eye(3) + sine * cross + (1.0 - cosine) * np.outer(unit, unit)


def _vec3f(values: np.ndarray) -> Gf.Vec3f:
    return Gf.Vec3f(*values.tolist())  # the same floats as float() of each, in one call


def joint_paths(root: Sdf.Path, robot: Robot, taken: set[str] | None = None) -> dict[str, Sdf.Path]:
    """Joint name → its prim path under ``<root>/joints`` (names made unique in ``taken``, which keeps
    them), from the robot model alone: what other layers (robot schema, MuJoCo's data) name."""
    scope = root.AppendChild("joints")
    taken = set() if taken is None else taken
    return {joint.name: scope.AppendChild(unique_name(joint.name, taken)) for joint in robot.joints}


def drive_axis(joint: Joint) -> str | None:
    """The axis of a joint's drive (``DriveAPI:angular`` or ``:linear``): its one degree of freedom's; None
    for a joint that gets no drive (fixed, floating, planar, spherical)."""
    return {"revolute": "angular", "continuous": "angular", "prismatic": "linear"}.get(joint.kind)


def drive_attributes(joint: Joint, axis: str) -> tuple[str, list[tuple[str, Sdf.ValueTypeName, object, bool]]] | None:
    """What the physics layer says of a 1-DoF joint's drive (``axis``: "angular" or "linear"): the
    ``DriveAPI`` instance applied and its attributes in order, each (name, type, value in USD units, uniform);
    None: no drive and no effort limit. The one place drive values are turned into USD (the joint author
    and ``rules.robot.drive_patch`` use it)."""
    drive = joint.drive
    if drive is None and joint.effort is None:
        return None
    prefix = f"drive:{axis}:physics:"
    gain = per_radian_to_per_degree if axis == "angular" else float
    attributes: list[tuple[str, Sdf.ValueTypeName, object, bool]] = []
    if drive is not None:
        if drive.kind is not None:
            attributes.append((prefix + "type", T.Token, drive.kind, True))
        if drive.stiffness is not None:
            attributes.append((prefix + "stiffness", T.Float, float(gain(drive.stiffness)), False))
        if drive.damping is not None:
            attributes.append((prefix + "damping", T.Float, float(gain(drive.damping)), False))
    if joint.effort is not None:
        attributes.append((prefix + "maxForce", T.Float, float(joint.effort), False))
    return f"PhysicsDriveAPI:{axis}", attributes


class Joints:
    """Writes the joints of ``robot`` between the bodies at ``link_paths`` (link name → prim path).

    Only into the layers ``layers`` authors (``RobotLayers.authored``): a layer restored from the build
    cache gets nothing (what would land in its scratch layer is dropped anyway). physics: whether the
    joints' physics prims are written even when the physics layer is restored (a callback that looks
    them up in the scratch layer)."""

    def __init__(self, layers: RobotLayers, robot: Robot, link_paths: dict[str, Sdf.Path], physics: bool = False):
        self.layers = layers
        self.robot = robot
        self.root = layers.root
        self.link_paths = link_paths
        self.joint_paths: dict[str, Sdf.Path] = {}
        self._writes = {role: layers.authored(role) for role in ("physx", "newton", "mujoco")}
        self._writes["physics"] = physics or layers.authored("physics")

    def write(self) -> dict[str, Sdf.Path]:
        """Author every joint (and the fixed-base joints); return joint name → prim path."""
        scope = self.root.AppendChild("joints")
        taken: set[str] = set()
        links = {link.name: link for link in self.robot.links}
        self.joint_paths.update(joint_paths(self.root, self.robot, taken))
        if self._writes["physics"]:
            self.layers.spec("physics", scope, "Scope")
        for joint in self.robot.joints:
            if self._writes["physics"]:
                self._joint(self.joint_paths[joint.name], joint, links)
            elif joint.kind in ("revolute", "continuous", "prismatic"):
                self._engine_joint_attributes(self.joint_paths[joint.name], joint,
                                              joint.kind in ("revolute", "continuous"),
                                              axis_alignment(joint.axis)[0])
        if self.robot.fixed_base and self._writes["physics"]:
            jointed_to_world = {joint.child for joint in self.robot.joints if joint.parent is None}
            roots = tree_roots(self.robot)
            for root in roots:
                if root in jointed_to_world:
                    continue
                name = "fixed_base" if root == roots[0] else f"fixed_base_{root}"
                spec = self.layers.spec("physics", scope.AppendChild(unique_name(name, taken)), "PhysicsFixedJoint")
                sdf.relationship(spec, "physics:body0", [self.root])  # the world, placed with the asset
                sdf.relationship(spec, "physics:body1", [self.link_paths[root]])
                pose = links[root].pose
                sdf.attribute(spec, "physics:localPos0", T.Point3f, _vec3f(pose[:3, 3]))
                sdf.attribute(spec, "physics:localRot0", T.Quatf, sdf.quatf(pose[:3, :3]))
                sdf.attribute(spec, "physics:localPos1", T.Point3f, Gf.Vec3f(0.0, 0.0, 0.0))
                sdf.attribute(spec, "physics:localRot1", T.Quatf, Gf.Quatf(1.0))
        return self.joint_paths

    def _joint(self, path: Sdf.Path, joint: Joint, links: dict[str, Link]) -> None:
        child = links[joint.child]
        alignment = np.eye(4)
        k = 0
        if joint.kind in ("revolute", "continuous", "prismatic", "planar", "spherical"):
            k, rotation = axis_alignment(joint.axis)
            alignment[:3, :3] = rotation
        spec = self.layers.spec("physics", path, _JOINT_TYPES[joint.kind])
        source_name(spec, joint.name)
        frame1 = joint.frame_in_child @ alignment
        world = child.pose @ frame1
        if joint.parent is not None:
            frame0 = joint.frame_in_parent @ alignment
            drift = np.abs(links[joint.parent].pose @ frame0 - world).max()
            if drift > _FRAME_TOLERANCE * max(1.0, np.abs(world[:3, 3]).max()):
                raise ValueError(f"joint {joint.name}: the frames in parent and child disagree at rest by {drift:g}")
            sdf.relationship(spec, "physics:body0", [self.link_paths[joint.parent]])
        else:
            # A joint to the world: body0 is the robot's Xform (no rigid body, so the world to engines),
            # and localPos0 is in its frame: the anchor moves with the asset wherever it is placed.
            frame0 = world
            sdf.relationship(spec, "physics:body0", [self.root])
        sdf.relationship(spec, "physics:body1", [self.link_paths[joint.child]])
        sdf.attribute(spec, "physics:localPos0", T.Point3f, _vec3f(frame0[:3, 3]))
        sdf.attribute(spec, "physics:localRot0", T.Quatf, sdf.quatf(frame0[:3, :3]))
        sdf.attribute(spec, "physics:localPos1", T.Point3f, _vec3f(frame1[:3, 3]))
        sdf.attribute(spec, "physics:localRot1", T.Quatf, sdf.quatf(frame1[:3, :3]))
        if joint.exclude_from_articulation:
            sdf.attribute(spec, "physics:excludeFromArticulation", T.Bool, True, uniform=True)
        angular = joint.kind in ("revolute", "continuous")
        if joint.kind in ("revolute", "continuous", "prismatic", "spherical"):
            sdf.attribute(spec, "physics:axis", T.Token, _AXES[k], uniform=True)
        if joint.kind in ("revolute", "prismatic"):
            convert = radians_to_degrees if angular else float
            if joint.lower is not None:
                sdf.attribute(spec, "physics:lowerLimit", T.Float, float(convert(joint.lower)))
            if joint.upper is not None:
                sdf.attribute(spec, "physics:upperLimit", T.Float, float(convert(joint.upper)))
        if joint.kind == "planar":
            # Free: the two in-plane translations and the rotation about the normal (axis k).
            locked = [f"trans{_AXES[k]}"] + [f"rot{_AXES[i]}" for i in range(3) if i != k]
            sdf.apply_schemas(spec, *(f"PhysicsLimitAPI:{dof}" for dof in locked))
            for dof in locked:  # low > high locks the DoF
                sdf.attribute(spec, f"limit:{dof}:physics:low", T.Float, 1.0)
                sdf.attribute(spec, f"limit:{dof}:physics:high", T.Float, -1.0)
        axis = drive_axis(joint)
        if axis is not None:
            self._drive(spec, joint, axis)
            self._engine_joint_attributes(path, joint, angular, k)
        sdf.custom_attributes(spec, joint.custom)

    def _drive(self, spec: Sdf.PrimSpec, joint: Joint, axis: str) -> None:
        authored = drive_attributes(joint, axis)
        if authored is None:
            return
        api, attributes = authored
        sdf.apply_schemas(spec, api)
        for name, type_name, value, uniform in attributes:
            sdf.attribute(spec, name, type_name, value, uniform=uniform)

    def _engine_joint_attributes(self, path: Sdf.Path, joint: Joint, angular: bool, k: int) -> None:
        """Mimic couplings and the joint data UsdPhysics has no attribute for, per engine layer."""
        if joint.mimic is not None and joint.mimic.joint in self.joint_paths:
            leader = self.joint_paths[joint.mimic.joint]
            if self._writes["physics"]:
                physics = self.layers.over("physics", path)
                sdf.relationship(physics, "usdforge:mimic:joint", [leader], custom=True)
                sdf.attribute(physics, "usdforge:mimic:multiplier", T.Double, float(joint.mimic.multiplier),
                              custom=True)
                sdf.attribute(physics, "usdforge:mimic:offset", T.Double, float(joint.mimic.offset), custom=True)
            leader_joint = next(j for j in self.robot.joints if j.name == joint.mimic.joint)
            instance = ("rot" if angular else "trans") + _AXES[k]
            leader_instance = ("rot" if leader_joint.kind in ("revolute", "continuous") else "trans") + \
                _AXES[axis_alignment(leader_joint.axis)[0]]
            physx = self.layers.over("physx", path) if self._writes["physx"] else None
            if physx is not None:
                sdf.apply_schemas(physx, f"PhysxMimicJointAPI:{instance}")
                # PhysX: q + gearing * q_reference + offset = 0.
                sdf.relationship(physx, f"physxMimicJoint:{instance}:referenceJoint", [leader])
                sdf.attribute(physx, f"physxMimicJoint:{instance}:referenceJointAxis", T.Token, leader_instance,
                              uniform=True)
                sdf.attribute(physx, f"physxMimicJoint:{instance}:gearing", T.Float, float(-joint.mimic.multiplier))
                sdf.attribute(physx, f"physxMimicJoint:{instance}:offset", T.Float, float(-joint.mimic.offset))
            if self._writes["newton"]:
                newton = self.layers.over("newton", path)
                sdf.apply_schemas(newton, "NewtonMimicAPI")
                # Newton: q = coef0 + coef1 * q_leader, coef0 in the follower's USD units (degrees if angular).
                sdf.relationship(newton, "newton:mimicJoint", [leader])
                sdf.attribute(newton, "newton:mimicCoef0", T.Float,
                              float(radians_to_degrees(joint.mimic.offset) if angular else joint.mimic.offset))
                sdf.attribute(newton, "newton:mimicCoef1", T.Float, float(joint.mimic.multiplier))
                sdf.attribute(newton, "newton:mimicEnabled", T.Bool, True)
        physx_values = {}
        if joint.velocity is not None:
            physx_values["physxJoint:maxJointVelocity"] = float(radians_to_degrees(joint.velocity) if angular
                                                                else joint.velocity)
        if joint.friction is not None:
            physx_values["physxJoint:jointFriction"] = float(joint.friction)
        if joint.armature is not None:
            physx_values["physxJoint:armature"] = float(joint.armature)
        self._engine_attributes("physx", path, "PhysxJointAPI", physx_values, T.Float)
        # Newton's default reader (its Newton schema resolver alone) sees only NewtonJointAPI's attributes:
        # per degree for angular joints, as USD angles are.
        newton_values = {}
        if joint.velocity is not None:
            newton_values["newton:velocityLimit"] = physx_values["physxJoint:maxJointVelocity"]
        if joint.damping is not None:
            newton_values["newton:damping"] = float(per_radian_to_per_degree(joint.damping) if angular
                                                    else joint.damping)
        if joint.friction is not None:
            newton_values["newton:friction"] = float(joint.friction)
        if joint.armature is not None:
            newton_values["newton:armature"] = float(joint.armature)
        self._engine_attributes("newton", path, "NewtonJointAPI", newton_values, T.Float)
        # MuJoCo 4.0's decoder reads damping, friction and armature from the newton attributes above (and
        # calls mjc:damping/frictionloss/armature deprecated): they are not repeated in the mujoco layer.
        mujoco = {}
        if joint.stiffness is not None:
            mujoco["mjc:stiffness"] = float(joint.stiffness)
        if joint.effort is not None:
            mujoco["mjc:actuatorfrcrange:min"] = -float(joint.effort)
            mujoco["mjc:actuatorfrcrange:max"] = float(joint.effort)
        spec = self._engine_attributes("mujoco", path, "MjcJointAPI", mujoco, T.Double)
        if spec is not None and joint.effort is not None:
            sdf.attribute(spec, "mjc:actuatorfrclimited", T.Token, "true", uniform=True)

    def _engine_attributes(self, layer: str, path: Sdf.Path, api: str, values: dict[str, float],
                           value_type: Sdf.ValueTypeName) -> Sdf.PrimSpec | None:
        """``values`` (attribute name → value, already in USD units) with ``api`` applied, as an over in the
        engine's ``layer``; the spec, or None when there is nothing to author."""
        if not values or not self._writes[layer]:
            return None
        spec = self.layers.over(layer, path)
        sdf.apply_schemas(spec, api)
        for name, value in values.items():
            sdf.attribute(spec, name, value_type, value)
        return spec
