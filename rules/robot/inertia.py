"""Mass properties of a format-neutral robot: shapes at a density, combining and moving inertials, the
placeholder for massless bodies, and the joint-space inertia that natural-frequency gains need. No pxr.

All inertia tensors are (3, 3) in kg·m² about the centre of mass, in the frame the inertial lives in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from usdforge.rules.robot.meshes import MeshLibrary, VolumeProperties
from usdforge.rules.robot.model import Inertial, Link, Robot, Shape

#: Mass (kg) given to a dynamic body that has none (UsdPhysics forbids 0; Newton reads 0 as "unset" and
#: MuJoCo as massless): small next to a robot's links, large enough to keep solvers well conditioned.
MASSLESS_MASS = 1e-3
#: Principal moments (kg·m²) of that placeholder: a 1 g body with a 3 cm radius of gyration.
MASSLESS_INERTIA = 1e-6


def placeholder_inertial() -> Inertial:
    """The documented placeholder for a body without mass: MASSLESS_MASS at its origin."""
    return Inertial(MASSLESS_MASS, np.zeros(3), np.eye(3) * MASSLESS_INERTIA)


def primitive_volume(shape: Shape) -> VolumeProperties:
    """Volume properties of a box, sphere, cylinder, capsule (along Z) or ellipsoid, in the shape frame."""
    g = shape.geometry
    if g.kind == "box":
        a, b, c = g.size
        v = a * b * c
        return VolumeProperties(v, np.zeros(3), np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * v / 12.0)
    if g.kind == "sphere":
        v = 4.0 / 3.0 * math.pi * g.radius ** 3
        return VolumeProperties(v, np.zeros(3), np.eye(3) * 0.4 * v * g.radius ** 2)
    if g.kind == "ellipsoid":
        a, b, c = g.size
        v = 4.0 / 3.0 * math.pi * a * b * c
        return VolumeProperties(v, np.zeros(3), np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * v / 5.0)
    r, h = g.radius, g.length
    cylinder = math.pi * r * r * h
    if g.kind == "cylinder":
        side = cylinder * (3 * r * r + h * h) / 12.0
        return VolumeProperties(cylinder, np.zeros(3), np.diag([side, side, cylinder * r * r / 2.0]))
    if g.kind == "capsule":
        caps = 4.0 / 3.0 * math.pi * r ** 3  # the two hemispheres together
        axial = cylinder * r * r / 2.0 + caps * 0.4 * r * r
        side = cylinder * (h * h / 12.0 + r * r / 4.0) + caps * (0.4 * r * r + h * h / 4.0 + 3.0 * h * r / 8.0)
        return VolumeProperties(cylinder + caps, np.zeros(3), np.diag([side, side, axial]))
    raise ValueError(f"no volume for a {g.kind}")


def shape_volume(shape: Shape, meshes: MeshLibrary) -> VolumeProperties:
    """Volume properties of ``shape`` in its link's frame (its pose applied). ConversionError for a mesh
    that cannot be read."""
    g = shape.geometry
    if g.kind == "mesh":
        local = meshes.volume(g.mesh, g.scale)
    elif g.kind == "plane":
        local = VolumeProperties(0.0, np.zeros(3), np.zeros((3, 3)))
    else:
        local = primitive_volume(shape)
    rotation, translation = shape.pose[:3, :3], shape.pose[:3, 3]
    return VolumeProperties(local.volume, rotation @ local.center + translation,
                            rotation @ local.inertia @ rotation.T)


def combine(inertials: Iterable[Inertial]) -> Inertial | None:
    """One inertial for rigidly joined parts in one frame (parallel-axis theorem); None when massless."""
    items = [item for item in inertials if item.mass > 0.0]
    if not items:
        return None
    mass = sum(item.mass for item in items)
    center = sum(item.mass * np.asarray(item.center_of_mass, float) for item in items) / mass
    inertia = np.zeros((3, 3))
    for item in items:
        d = np.asarray(item.center_of_mass, float) - center
        inertia += np.asarray(item.inertia, float) + item.mass * (d @ d * np.eye(3) - np.outer(d, d))
    return Inertial(mass, center, 0.5 * (inertia + inertia.T))


def moved(inertial: Inertial, pose: np.ndarray) -> Inertial:
    """``inertial`` expressed in the frame in which ``pose`` (4, 4) places its current frame."""
    rotation = pose[:3, :3]
    return Inertial(inertial.mass, rotation @ np.asarray(inertial.center_of_mass, float) + pose[:3, 3],
                    rotation @ np.asarray(inertial.inertia, float) @ rotation.T)


def shapes_inertial(shapes: list[Shape], meshes: MeshLibrary, density: float | None = None,
                    mass: float | None = None) -> Inertial | None:
    """Inertial of ``shapes`` (link frame) at ``density`` kg/m³, or scaled to total ``mass`` kg; None when
    they enclose no volume."""
    parts = [shape_volume(shape, meshes) for shape in shapes]
    volume = sum(part.volume for part in parts)
    if volume <= 0.0:
        return None
    rho = density if density is not None else mass / volume
    return combine(Inertial(rho * p.volume, p.center, rho * p.inertia) for p in parts)


def resolve_massless(robot: Robot, density: float, meshes: MeshLibrary,
                     warn: Callable[[Link, str], None]) -> None:
    """Give every link without mass one: its collision shapes at ``density`` (kg/m³, when > 0), else the
    placeholder (MASSLESS_MASS). Calls ``warn(link, message)`` for each link that gets a placeholder."""
    for link in robot.links:
        if link.inertial is not None and link.inertial.mass > 0.0:
            continue
        colliders = [shape for shape in link.shapes if shape.collision]
        if density > 0.0 and colliders:
            inertial = shapes_inertial(colliders, meshes, density=density)
            if inertial is not None:
                link.inertial = inertial
                continue
        link.inertial = placeholder_inertial()
        why = "link_density is 0" if density <= 0.0 else "it has no collision volume for link_density"
        warn(link, f"no mass; given the placeholder mass {MASSLESS_MASS:g} kg ({why})")


def joint_space_inertia(robot: Robot) -> dict[str, float]:
    """Joint name → diagonal entry of the joint-space mass matrix at the rest pose, for revolute, continuous
    and prismatic joints: the subtree's inertia about the joint axis (kg·m²) or its mass (kg).

    This is exactly what the composite-rigid-body algorithm puts on the diagonal (no armature: URDF has
    none). Every link needs an inertial (``resolve_massless`` first).
    """
    children: dict[str, list[str]] = {}
    for joint in robot.joints:
        if joint.parent is not None:
            children.setdefault(joint.parent, []).append(joint.child)
    world = {link.name: moved(link.inertial, link.pose) for link in robot.links if link.inertial is not None}

    def subtree(name: str) -> list[str]:
        out, stack = [], [name]
        while stack:
            current = stack.pop()
            out.append(current)
            stack.extend(children.get(current, []))
        return out

    links = {link.name: link for link in robot.links}
    result: dict[str, float] = {}
    for joint in robot.joints:
        if joint.kind not in ("revolute", "continuous", "prismatic"):
            continue
        frame = links[joint.child].pose @ joint.frame_in_child
        axis = frame[:3, :3] @ np.asarray(joint.axis, float)
        axis /= np.linalg.norm(axis)
        point = frame[:3, 3]
        total = 0.0
        for name in subtree(joint.child):
            inertial = world.get(name)
            if inertial is None:
                continue
            if joint.kind == "prismatic":
                total += inertial.mass
            else:
                arm = np.cross(axis, np.asarray(inertial.center_of_mass) - point)
                total += float(axis @ inertial.inertia @ axis) + inertial.mass * float(arm @ arm)
        result[joint.name] = total
    return result


#: Relative slack of the triangle-inequality test, far above rounding in a source's printed moments.
TRIANGLE_TOLERANCE = 1e-6


def triangle_violation(inertia: np.ndarray, moments: np.ndarray | None = None) -> np.ndarray | None:
    """The principal moments (3,), ascending, when those of ``inertia`` (3, 3) break the triangle
    inequality A + B >= C (no rigid body has them: MuJoCo refuses them unless ``balanceinertia``), else None.
    moments: ``np.linalg.eigvalsh(inertia)`` when the caller has it."""
    if moments is None:
        moments = np.linalg.eigvalsh(np.asarray(inertia, dtype=float))
    return moments if moments[0] + moments[1] < moments[2] * (1.0 - TRIANGLE_TOLERANCE) else None


def triangle_message(moments: np.ndarray, link: str | None) -> str:
    """The warning for a link whose principal ``moments`` break the triangle inequality."""
    where = f"link '{link}': " if link else ""
    shown = [float(f"{m:.6g}") for m in moments]
    return (f"{where}principal moments {shown} break the triangle inequality (A + B >= C); written as given"
            " (MuJoCo's USD decoder rejects them; balance_inertia=true repairs them)")


def balance_inertia(inertial: Inertial) -> Inertial:
    """MuJoCo's ``balanceinertia``: an inertia that breaks the triangle inequality gets all three principal
    moments set to their mean (an isotropic tensor); a valid one, mass and centre of mass are kept."""
    moments = triangle_violation(inertial.inertia)
    if moments is None:
        return inertial
    return Inertial(inertial.mass, np.array(inertial.center_of_mass, dtype=float),
                    np.eye(3) * float(np.mean(moments)))
