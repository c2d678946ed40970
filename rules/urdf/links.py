"""URDF ``<link>``: its ``<visual>`` and ``<collision>`` shapes (geometry, origin, material) and its
``<inertial>`` (mass, centre of mass, inertia tensor in the link frame, kg and kg·m²)."""

from __future__ import annotations

import numpy as np
from lxml import etree

from usdforge.rules.errors import ConversionError
from usdforge.rules.mesh.formats import MESH_FORMATS
from usdforge.rules.robot.inertia import MASSLESS_INERTIA, MASSLESS_MASS, shapes_inertial
from usdforge.rules.robot.inertia import triangle_message, triangle_violation
from usdforge.rules.robot.model import Geometry, Inertial, Link, Shape
from usdforge.rules.urdf.materials import read_material
from usdforge.rules.urdf.source import UrdfSource
from usdforge.rules.urdf.xml import number, numbers


def read_geometry(src: UrdfSource, parent: etree._Element) -> Geometry | None:
    """A shape's ``<geometry>`` (box, sphere, cylinder, capsule, mesh); None, with a warning, when it
    cannot be used."""
    element = parent.find("geometry")
    shape = None if element is None else next((c for c in element if isinstance(c.tag, str)), None)
    if shape is None:
        src.warn("no geometry; the shape is ignored", parent)
        return None
    tag = shape.tag
    if tag == "box":
        size = numbers(shape, "size", 3, src.path)
        if size is None or min(size) <= 0:
            src.warn("box needs a size of 3 positive numbers; the shape is ignored", shape)
            return None
        return Geometry("box", size=size)
    if tag == "sphere":
        radius = number(shape, "radius", src.path)
        if radius is None or radius <= 0:
            src.warn("sphere needs a positive radius; the shape is ignored", shape)
            return None
        return Geometry("sphere", radius=radius)
    if tag in ("cylinder", "capsule"):
        radius, length = number(shape, "radius", src.path), number(shape, "length", src.path)
        if radius is None or length is None or radius <= 0 or length < 0:
            src.warn(f"{tag} needs a positive radius and a length >= 0; the shape is ignored", shape)
            return None
        return Geometry(tag, radius=radius, length=length)
    if tag == "mesh":
        return read_mesh_geometry(src, shape)
    src.warn(f"unknown geometry <{tag}>; the shape is ignored", shape)
    return None


def read_mesh_geometry(src: UrdfSource, element: etree._Element) -> Geometry | None:
    """A ``<mesh filename scale>``, read now (``src.meshes``) so a bad file is reported at its line."""
    path = src.file(element, "filename", "mesh")
    if path is None:
        return None
    scale = numbers(element, "scale", (1, 3), src.path, (1.0, 1.0, 1.0))
    scale = scale * 3 if len(scale) == 1 else scale
    if any(s == 0 for s in scale):
        src.warn(f"mesh scale {scale} collapses the mesh; the shape is ignored", element)
        return None
    extension = path.suffix.lower().lstrip(".")
    if extension not in MESH_FORMATS:
        what = f"unsupported mesh format '.{extension}'" if extension else "mesh file name without an extension"
        src.warn(f"{what} (supported: {', '.join(MESH_FORMATS)}); the shape is ignored", element)
        return None
    try:
        src.meshes.parts(path, scale)
    except ConversionError as exc:
        src.warn(f"mesh ignored: {exc}", element)
        return None
    if path not in src.checked_references:
        src.checked_references.add(path)
        missing = sorted(str(p) for p in src.meshes.missing_references(path))
        if missing:
            src.warn(f"mesh {path.name} references missing file(s) {', '.join(missing)}; converted "
                     "without them", element)
    return Geometry("mesh", mesh=path, scale=tuple(float(s) for s in scale))


def read_shape(src: UrdfSource, element: etree._Element, collision: bool, index: int) -> Shape | None:
    """A ``<visual>`` or ``<collision>`` (the ``index``-th of its kind in the link)."""
    geometry = read_geometry(src, element)
    if geometry is None:
        return None
    kind = "collision" if collision else "visual"
    custom: dict = {}
    known = ("origin", "geometry") if collision else ("origin", "geometry", "material")
    src.keep_unknown(element, known, ("name",), custom, kind)
    material = None
    if not collision and element.find("material") is not None:
        material = read_material(src, element.find("material"))
    name = element.get("name") or f"{kind}_{index}"
    if element.get("name"):
        custom["usdforge:sourceName"] = name  # the prim name is a sanitised identifier
    return Shape(name, geometry, src.origin(element), collision, material, custom=custom)


def read_inertial(src: UrdfSource, element: etree._Element, shapes: list[Shape]) -> Inertial | None:
    """The link's inertial in the link frame; None when it has no mass. Without ``<inertia>`` the tensor
    comes from the link's shapes at the given mass (or a small isotropic one)."""
    mass_element = element.find("mass")
    mass = 0.0 if mass_element is None else number(mass_element, "value", src.path, 0.0)
    if mass < 0:
        raise src.fail(f"negative mass {mass}", mass_element)
    if mass == 0.0:
        return None
    pose = src.origin(element)
    tensor_element = element.find("inertia")
    keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    values = {key: number(tensor_element, key, src.path, 0.0) for key in keys} if tensor_element is not None else {}
    if values and not any(values.values()):
        src.warn("<inertia> is all zeros for a body with mass: treated as missing", tensor_element)
        tensor_element = None
    if tensor_element is None:
        colliders = [s for s in shapes if s.collision] or shapes
        inertial = shapes_inertial(colliders, src.meshes, mass=mass) if colliders else None
        if inertial is None:
            inertial = Inertial(mass, pose[:3, 3].copy(), np.eye(3) * MASSLESS_INERTIA * mass / MASSLESS_MASS)
            src.warn("<inertial> has no <inertia>: a small isotropic inertia is used", element)
        else:
            inertial = Inertial(mass, pose[:3, 3].copy(), inertial.inertia)
            src.warn("<inertial> has no <inertia>: it is computed from the link's shapes at the given mass",
                     element)
        return inertial
    tensor = np.array([[values["ixx"], values["ixy"], values["ixz"]],
                       [values["ixy"], values["iyy"], values["iyz"]],
                       [values["ixz"], values["iyz"], values["izz"]]])
    rotation = pose[:3, :3]
    inertia = rotation @ tensor @ rotation.T
    moments = np.linalg.eigvalsh(inertia)
    scale = max(abs(moments).max(), 1e-300)
    if moments.min() < -1e-9 * scale:
        src.warn(f"inertia tensor is not positive semi-definite (principal moments {moments.tolist()}); "
                 "negative moments are written as 0", tensor_element)
    elif (broken := triangle_violation(inertia, moments)) is not None:
        src.warn(triangle_message(broken, element.getparent().get("name")), tensor_element)
    return Inertial(mass, pose[:3, 3].copy(), inertia)


def read_link(src: UrdfSource, element: etree._Element) -> Link:
    """A ``<link>`` (its pose is set later, from the joints: ``rules.urdf.tree.rest_poses``)."""
    link = Link(element.get("name"))
    visuals = [s for i, e in enumerate(element.findall("visual")) if (s := read_shape(src, e, False, i))]
    collisions = [s for i, e in enumerate(element.findall("collision")) if (s := read_shape(src, e, True, i))]
    link.shapes = visuals + collisions
    inertials = element.findall("inertial")
    if len(inertials) > 1:
        src.warn("several <inertial> elements; the first is used", inertials[1])
    link.inertial = read_inertial(src, inertials[0], link.shapes) if inertials else None
    src.keep_unknown(element, ("inertial", "visual", "collision"), ("name",), link.custom, "link")
    return link
