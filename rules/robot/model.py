"""A format-neutral robot: what the URDF and MJCF readers produce and ``rules.robot.writer`` writes.

All values are SI (m, kg, rad, N, N·m, s); poses are (4, 4) homogeneous matrices (column vectors).
No pxr here. Readers fill it; the writer turns it into UsdPhysics prims following docs/usd_layout.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import attrs
import numpy as np

GeometryKind = Literal["box", "sphere", "cylinder", "capsule", "ellipsoid", "plane", "mesh"]
JointKind = Literal["revolute", "continuous", "prismatic", "fixed", "floating", "planar", "spherical"]


def identity() -> np.ndarray:
    """A fresh (4, 4) identity pose."""
    return np.eye(4)


@attrs.define
class Material:
    """A visual material: RGBA colour in [0, 1] and/or a texture file."""

    name: str
    color: tuple[float, float, float, float] | None = None
    texture: Path | None = None


@attrs.define
class Geometry:
    """One shape's geometry, in its own frame.

    kind: box (size = full extents (3,)), sphere (radius), cylinder / capsule (radius, length along Z,
        capsule length without the caps), ellipsoid (size = radii (3,)), plane (size = half extents (2,),
        0 for infinite), mesh (mesh = file, scale (3,); or trimesh = an in-memory triangle mesh: any object
        with vertices (V, 3) and faces (F, 3), such as a trimesh.Trimesh). An ellipsoid without one is
        tessellated by the writer.
    """

    kind: GeometryKind
    size: tuple[float, ...] = ()
    radius: float = 0.0
    length: float = 0.0
    mesh: Path | None = None
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    trimesh: Any = None


@attrs.define
class Shape:
    """A visual or collision shape attached to a link.

    pose: the shape's frame in the link frame, (4, 4).
    collision: True for a collider, False for a visual-only shape.
    physics: backend-neutral contact data (friction, restitution …) for the physics material.
    custom: source data with no USD equivalent, authored as namespaced custom attributes.
    """

    name: str
    geometry: Geometry
    pose: np.ndarray = attrs.field(factory=identity)
    collision: bool = False
    material: Material | None = None
    physics: dict[str, float] = attrs.field(factory=dict)
    custom: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class Inertial:
    """Mass properties in the link frame: mass (kg), centre of mass (3,) m, inertia (3, 3) kg·m² about
    the centre of mass, expressed in the link frame's axes."""

    mass: float
    center_of_mass: np.ndarray = attrs.field(factory=lambda: np.zeros(3))
    inertia: np.ndarray = attrs.field(factory=lambda: np.zeros((3, 3)))


@attrs.define
class Frame:
    """A named frame with no body of its own: a link merged into another, or a massless "ghost" link.

    pose: the frame in its owner's frame (a link's, or the world's for ``Robot.frames``), (4, 4).
    custom: source data with no USD equivalent, authored as namespaced custom attributes.
    """

    name: str
    pose: np.ndarray = attrs.field(factory=identity)
    custom: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class Link:
    """A rigid body.

    pose: the link frame in the world at the rest pose (every joint at 0), (4, 4).
    inertial: None when the source gives none (the writer uses link_density or a ghost frame).
    kinematic: moved by its transform, not simulated (MuJoCo mocap bodies).
    frames: named frames rigidly attached to this body (links merged into it, ghost links).
    custom: source data with no USD equivalent: full attribute name (``urdf:...``) → value.
    """

    name: str
    pose: np.ndarray = attrs.field(factory=identity)
    inertial: Inertial | None = None
    shapes: list[Shape] = attrs.field(factory=list)
    kinematic: bool = False
    custom: dict[str, Any] = attrs.field(factory=dict)
    frames: list[Frame] = attrs.field(factory=list)


@attrs.define
class Mimic:
    """``q_self = multiplier * q_leader + offset`` (rad or m)."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@attrs.define
class Drive:
    """A joint drive (``UsdPhysics.DriveAPI``), SI units per radian for angular joints.

    kind: "force" or "acceleration"; None leaves ``physics:type`` unauthored.
    stiffness / damping: N·m/rad and N·m·s/rad (angular) or N/m and N·s/m (linear); None = unauthored.
    target: "position", "velocity" or "none" (documentation of intent; gains already reflect it).
    The drive's maxForce is the joint's ``effort``.
    """

    kind: str | None = None
    stiffness: float | None = None
    damping: float | None = None
    target: str = "position"


@attrs.define
class Joint:
    """A joint between two links.

    parent / child: link names; parent None means the world (a fixed or floating base).
    frame_in_parent / frame_in_child: the joint frame in each link's frame, (4, 4); they agree at rest.
    axis: unit motion axis (3,) in the joint frame.
    lower / upper: limits in rad (angular) or m (linear); None = unlimited.
    effort: max force/torque (N or N·m), None = unlimited. velocity: max speed (rad/s or m/s).
    damping / friction / armature / stiffness: joint dynamics in SI.
    ref: MuJoCo's zero offset already folded into the rest pose (rad or m).
    drive: the joint's drive; None = a drive only when ``effort`` is given (maxForce alone).
    kind "planar": motion in the plane normal to ``axis`` and rotation about it; "floating": 6 DoF.
    """

    name: str
    kind: JointKind
    parent: str | None
    child: str
    frame_in_parent: np.ndarray = attrs.field(factory=identity)
    frame_in_child: np.ndarray = attrs.field(factory=identity)
    axis: np.ndarray = attrs.field(factory=lambda: np.array([1.0, 0.0, 0.0]))
    lower: float | None = None
    upper: float | None = None
    effort: float | None = None
    velocity: float | None = None
    damping: float | None = None
    friction: float | None = None
    armature: float | None = None
    stiffness: float | None = None
    ref: float = 0.0
    mimic: Mimic | None = None
    exclude_from_articulation: bool = False
    custom: dict[str, Any] = attrs.field(factory=dict)
    drive: Drive | None = None


@attrs.define
class Robot:
    """A whole robot: links (parents before children), joints, materials, and where it came from.

    fixed_base: a fixed joint to the world is authored at each root link that has no joint to the world.
    custom: robot-level source data (transmissions, gazebo blocks, keyframes …) kept as custom data.
    frames: named frames fixed in the world (a URDF "world" link), poses in the world.
    articulation_root: link that carries ArticulationRootAPI (and the fixed-base joint) in its tree;
        None = each tree's root link.
    """

    name: str
    source: Path
    links: list[Link] = attrs.field(factory=list)
    joints: list[Joint] = attrs.field(factory=list)
    fixed_base: bool = False
    custom: dict[str, Any] = attrs.field(factory=dict)
    frames: list[Frame] = attrs.field(factory=list)
    articulation_root: str | None = None

    def link(self, name: str) -> Link:
        """The link called ``name``."""
        for link in self.links:
            if link.name == name:
                return link
        raise KeyError(name)
