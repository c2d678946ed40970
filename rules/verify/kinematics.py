"""Forward kinematics of a converted USD read through OpenUSD's reference physics parser alone.

Bodies move by their tree's joints from the world: ``T_child = T_parent · local0 · M(q) · local1⁻¹``,
``M`` a rotation about (revolute, q in degrees) or a translation along (prismatic, q in metres) the
joint's axis, a rotation for spherical joints (a (w, x, y, z) quaternion), identity otherwise. Bodies with
no joint to a parent keep their authored rest pose unless given a free pose.
"""

from __future__ import annotations

import math
import warnings

import numpy as np


def quaternion_matrix(wxyz) -> np.ndarray:
    """(3, 3) rotation of a (w, x, y, z) quaternion (normalised here)."""
    w, x, y, z = np.asarray(wxyz, dtype=float) / np.linalg.norm(wxyz)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def pose(position, wxyz) -> np.ndarray:
    """(4, 4) pose from a position (m) and a (w, x, y, z) quaternion."""
    matrix = np.eye(4)
    matrix[:3, :3] = quaternion_matrix(wxyz)
    matrix[:3, 3] = np.asarray(position, dtype=float)
    return matrix


def gf_pose(position, orientation) -> np.ndarray:
    """(4, 4) pose from a Gf vector and a Gf quaternion."""
    return pose(position, [orientation.GetReal(), *orientation.GetImaginary()])


def rotation_angle(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (rad) of the rotation between the orientations of two (4, 4) poses."""
    cosine = (np.trace(a[:3, :3].T @ b[:3, :3]) - 1.0) / 2.0
    return math.acos(max(-1.0, min(1.0, cosine)))


def parse_physics(stage) -> dict:
    """OpenUSD's reference UsdPhysics parser on the whole stage: ObjectType → (paths, descriptors)."""
    from pxr import UsdPhysics

    load = getattr(UsdPhysics, "UsdPhysicsLoadStageFromPrimRange", None) or UsdPhysics.LoadUsdPhysicsFromRange
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return load(stage, ["/"])


class UsdKinematics:
    """The joint tree of a stage (articulated joints only; loop closures are excluded from it)."""

    def __init__(self, stage):
        from pxr import UsdGeom, UsdPhysics

        self.stage = stage
        self._axes = {UsdPhysics.Axis.X: 0, UsdPhysics.Axis.Y: 1, UsdPhysics.Axis.Z: 2}
        cache = UsdGeom.XformCache()
        self.rest: dict[str, np.ndarray] = {}
        self.joints: dict[str, tuple[str, object]] = {}  # child body path → (kind, descriptor)
        #: Bodies that are the child of more than one articulated joint (the first one moves them).
        self.multiple_parents: list[str] = []
        for object_type, (paths, descs) in parse_physics(stage).items():
            kind = str(object_type).split(".")[-1]
            if kind == "RigidBody":
                for path in paths:
                    self.rest[str(path)] = np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(path))).T
            elif kind.endswith("Joint"):
                for desc in descs:
                    if desc.excludeFromArticulation:
                        continue
                    child = str(desc.body1)
                    if child in self.joints:
                        self.multiple_parents.append(child)
                    else:
                        self.joints[child] = (kind, desc)

    def source_name(self, path) -> str | None:
        prim = self.stage.GetPrimAtPath(str(path))
        attribute = prim.GetAttribute("usdforge:sourceName") if prim else None
        return attribute.Get() if attribute and attribute.HasAuthoredValue() else None

    def poses(self, coordinates: dict[str, object], free: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """World pose (4, 4) of every rigid body for joint coordinates by joint source name (degrees or
        metres; a (w, x, y, z) quaternion for spherical joints) and free root poses by body prim path."""
        world: dict[str, np.ndarray] = {}

        def body(path: str, depth: int = 0) -> np.ndarray:
            if path in world:
                return world[path]
            if path not in self.joints or depth > len(self.joints):
                world[path] = free.get(path, self.rest.get(path, np.eye(4)))
                return world[path]
            kind, desc = self.joints[path]
            parent = str(desc.body0)
            parent_pose = body(parent, depth + 1) if parent in self.rest else np.eye(4)
            motion = np.eye(4)
            value = coordinates.get(self.source_name(desc.primPath))
            if kind == "RevoluteJoint" and value is not None:
                axis = self._axes[desc.axis]
                angle = math.radians(float(value))
                half = np.zeros(4)
                half[0], half[1 + axis] = math.cos(angle / 2), math.sin(angle / 2)
                motion[:3, :3] = quaternion_matrix(half)
            elif kind == "PrismaticJoint" and value is not None:
                motion[self._axes[desc.axis], 3] = float(value)
            elif kind == "SphericalJoint" and value is not None:
                motion[:3, :3] = quaternion_matrix(value)
            local0 = gf_pose(desc.localPose0Position, desc.localPose0Orientation)
            local1 = gf_pose(desc.localPose1Position, desc.localPose1Orientation)
            world[path] = parent_pose @ local0 @ motion @ np.linalg.inv(local1)
            return world[path]

        for path in self.rest:
            body(path)
        return world
