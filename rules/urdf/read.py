"""URDF → ``rules.robot.model.Robot``: every URDF element, tolerant of what can be recovered.

Read here: ``<robot>`` (name), global and inline ``<material>`` (colour, texture), ``<link>`` with
``<inertial>`` (origin, mass, full tensor), any number of named ``<visual>``/``<collision>`` (box, cylinder,
sphere, mesh with scale, capsule), ``<joint>`` of every type with origin, axis, limit, dynamics, mimic,
safety_controller and calibration; ``<transmission>``, ``<gazebo>`` and anything unknown are kept as
namespaced custom data (``urdf:*``) with a warning. Mesh files are read here (``robot_meshes``), so a
missing or unreadable one is reported with the URDF line that names it.

URDF conventions applied:
- A root link with no inertial, visual or collision (a "world" link) is the world: it becomes a world frame,
  its fixed child joints fix the robot to the world, floating ones leave it free, and any other joint type
  joins the world to the child.
- ``<limit>`` attributes default to 0 (the URDF spec); a revolute joint without ``<limit>`` is unlimited
  (urdfdom would reject it) and a prismatic one too, each with a warning.
- A ``<mimic>`` whose leader is not a revolute, continuous or prismatic joint (or whose follower is not) is
  dropped with a warning: a fixed joint has no coordinate to follow.

Unrecoverable: no ``<robot>``, a duplicate link or joint name, a joint to an unknown link, a link with two
parents or a cycle, an unknown joint type, a malformed number, a zero axis on a movable joint, lower >
upper. These raise ``ConversionError`` naming file, line and element.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import trimesh
from lxml import etree

from usdforge.rules.conversion_warnings import warn
from usdforge.rules.errors import ConversionError
from usdforge.rules.mesh.formats import MESH_FORMATS
from usdforge.rules.robot.inertia import MASSLESS_INERTIA, MASSLESS_MASS, shapes_inertial
from usdforge.rules.robot.meshes import MeshLibrary
from usdforge.rules.robot.model import Frame, Geometry, Inertial, Joint, Link, Material, Mimic, Robot, Shape
from usdforge.rules.urdf.paths import UnresolvedUri, resolve_uri
from usdforge.rules.urdf.xml import describe, load_urdf_xml, number, numbers

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
#: Joint types with one coordinate (what a mimic can couple, what a drive can drive).
ONE_DOF = ("revolute", "continuous", "prismatic")
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


def attribute_token(text: str) -> str:
    """A USD namespace component for ``text``: other characters become ``_``; a leading digit gets ``_``."""
    cleaned = _NOT_IDENTIFIER.sub("_", text) or "_"
    return "_" + cleaned if cleaned[0].isdigit() else cleaned


def rpy_matrix(rpy: tuple[float, float, float]) -> np.ndarray:
    """URDF's roll-pitch-yaw (fixed axes X, then Y, then Z) as a (3, 3) rotation: Rz(y) Ry(p) Rx(r)."""
    return trimesh.transformations.euler_matrix(*rpy, axes="sxyz")[:3, :3]


def xml_text(element: etree._Element) -> str:
    """An element as compact XML text (for custom data)."""
    return etree.tostring(element, encoding="unicode", with_tail=False).strip()


class _Notes:
    """Warnings about kinds of things (an unknown tag, kept data), one per kind with a count."""

    def __init__(self, file: Path):
        self.file = file
        self._first: dict[str, tuple[str, int | None, int]] = {}

    def add(self, key: str, element: etree._Element) -> None:
        desc, line, count = self._first.get(key, (describe(element), element.sourceline, 0))
        self._first[key] = (desc, line, count + 1)

    def flush(self) -> None:
        for key, (desc, line, count) in self._first.items():
            times = f" ({count} occurrences; the first is here)" if count > 1 else ""
            warn(self.file, f"{key}{times}", desc, line)


class UrdfReader:
    """One URDF file read into a Robot. ``read()`` does the work; see the module docstring."""

    def __init__(self, path: Path, packages: dict[str, str], meshes: MeshLibrary):
        self.path = Path(path)
        self.folder = self.path.parent
        self.packages = packages
        self.meshes = meshes
        self.notes = _Notes(self.path)
        self.materials: dict[str, Material] = {}
        self._checked_references: set[Path] = set()
        self._initial_poses: dict[str, np.ndarray] = {}

    # ---- small parsers -------------------------------------------------------------------------------

    def fail(self, problem: str, element: etree._Element | None = None) -> ConversionError:
        return ConversionError(self.path, problem, describe(element) if element is not None else None,
                               element.sourceline if element is not None else None)

    def warn(self, problem: str, element: etree._Element | None = None) -> None:
        warn(self.path, problem, describe(element) if element is not None else None,
             element.sourceline if element is not None else None)

    def origin(self, parent: etree._Element) -> np.ndarray:
        """The (4, 4) pose of a parent's ``<origin xyz rpy>`` (identity when absent)."""
        pose = np.eye(4)
        element = parent.find("origin")
        if element is None:
            return pose
        pose[:3, 3] = numbers(element, "xyz", 3, self.path, (0.0, 0.0, 0.0))
        pose[:3, :3] = rpy_matrix(numbers(element, "rpy", 3, self.path, (0.0, 0.0, 0.0)))
        return pose

    def keep_unknown(self, element: etree._Element, known_children: tuple[str, ...],
                     known_attributes: tuple[str, ...], custom: dict, what: str) -> None:
        """Unknown child elements and attributes → ``custom`` (``urdf:<tag>`` XML text,
        ``urdf:attributes:<name>``), each kind warned about once."""
        for name, value in element.attrib.items():
            if name not in known_attributes:
                custom[f"urdf:attributes:{attribute_token(name)}"] = value
                self.notes.add(f"unknown attribute '{name}' on <{what}> kept as custom data "
                               f"urdf:attributes:{attribute_token(name)}", element)
        for child in element:
            if not isinstance(child.tag, str) or child.tag in known_children:
                continue
            key = f"urdf:{attribute_token(child.tag)}"
            custom[key] = f"{custom[key]}\n{xml_text(child)}" if key in custom else xml_text(child)
            self.notes.add(f"unknown element <{child.tag}> in <{what}> kept as custom data {key}", child)

    def keep_attributes(self, element: etree._Element, prefix: str, custom: dict) -> None:
        """Every attribute of ``element`` → ``custom[prefix:<name>]`` (a float when numeric)."""
        for name, value in element.attrib.items():
            try:
                item: float | str = float(value)
            except ValueError:
                item = value
            custom[f"{prefix}:{attribute_token(name)}"] = item

    # ---- materials --------------------------------------------------------------------------------------

    def material(self, element: etree._Element) -> Material | None:
        """A ``<material>``: its own colour/texture, else the global material it names."""
        name = element.get("name")
        color_element, texture_element = element.find("color"), element.find("texture")
        if color_element is None and texture_element is None:
            if name is None:
                self.warn("material with no name, colour or texture ignored", element)
                return None
            if name not in self.materials:
                self.warn(f"material '{name}' is not defined; ignored", element)
                return None
            return self.materials[name]
        color = None
        if color_element is not None:
            rgba = numbers(color_element, "rgba", 4, self.path)
            if rgba is None:
                self.warn("<color> without rgba ignored", color_element)
            else:
                color = tuple(float(np.clip(v, 0.0, 1.0)) for v in rgba)
        texture = None
        if texture_element is not None:
            texture = self.file(texture_element, "filename", "texture")
        return Material(name or "", color, texture)

    def global_materials(self, root: etree._Element) -> None:
        for element in root.findall("material"):
            name = element.get("name")
            if not name:
                self.warn("material without a name ignored (nothing can refer to it)", element)
                continue
            if name in self.materials:
                self.warn(f"material '{name}' is defined twice; the first definition is used", element)
                continue
            material = self.material(element)
            if material is not None:
                self.materials[name] = material

    # ---- files and geometry -----------------------------------------------------------------------------

    def file(self, element: etree._Element, attribute: str, what: str) -> Path | None:
        """The existing local file an attribute names, or None with a warning."""
        uri = element.get(attribute)
        if not uri:
            self.warn(f"{what} without a {attribute} ignored", element)
            return None
        try:
            path = resolve_uri(uri, self.folder, self.packages)
        except UnresolvedUri as exc:
            self.warn(f"{what} '{uri}' ignored: {exc}", element)
            return None
        if not path.is_file():
            self.warn(f"{what} file {path} not found; ignored", element)
            return None
        return path

    def geometry(self, parent: etree._Element) -> Geometry | None:
        element = parent.find("geometry")
        shape = None if element is None else next((c for c in element if isinstance(c.tag, str)), None)
        if shape is None:
            self.warn("no geometry; the shape is ignored", parent)
            return None
        tag = shape.tag
        if tag == "box":
            size = numbers(shape, "size", 3, self.path)
            if size is None or min(size) <= 0:
                self.warn("box needs a size of 3 positive numbers; the shape is ignored", shape)
                return None
            return Geometry("box", size=size)
        if tag == "sphere":
            radius = number(shape, "radius", self.path)
            if radius is None or radius <= 0:
                self.warn("sphere needs a positive radius; the shape is ignored", shape)
                return None
            return Geometry("sphere", radius=radius)
        if tag in ("cylinder", "capsule"):
            radius, length = number(shape, "radius", self.path), number(shape, "length", self.path)
            if radius is None or length is None or radius <= 0 or length < 0:
                self.warn(f"{tag} needs a positive radius and a length >= 0; the shape is ignored", shape)
                return None
            return Geometry(tag, radius=radius, length=length)
        if tag == "mesh":
            return self.mesh_geometry(shape)
        self.warn(f"unknown geometry <{tag}>; the shape is ignored", shape)
        return None

    def mesh_geometry(self, element: etree._Element) -> Geometry | None:
        path = self.file(element, "filename", "mesh")
        if path is None:
            return None
        scale = numbers(element, "scale", (1, 3), self.path, (1.0, 1.0, 1.0))
        scale = scale * 3 if len(scale) == 1 else scale
        if any(s == 0 for s in scale):
            self.warn(f"mesh scale {scale} collapses the mesh; the shape is ignored", element)
            return None
        extension = path.suffix.lower().lstrip(".")
        if extension not in MESH_FORMATS:
            self.warn(f"unsupported mesh format '.{extension}' (supported: {', '.join(MESH_FORMATS)}); "
                      "the shape is ignored", element)
            return None
        try:
            self.meshes.parts(path, scale)
        except ConversionError as exc:
            self.warn(f"mesh ignored: {exc}", element)
            return None
        if path not in self._checked_references:
            self._checked_references.add(path)
            missing = sorted(str(p) for p in self.meshes.missing_references(path))
            if missing:
                self.warn(f"mesh {path.name} references missing file(s) {', '.join(missing)}; converted "
                          "without them", element)
        return Geometry("mesh", mesh=path, scale=tuple(float(s) for s in scale))

    def shape(self, element: etree._Element, collision: bool, index: int) -> Shape | None:
        geometry = self.geometry(element)
        if geometry is None:
            return None
        kind = "collision" if collision else "visual"
        custom: dict = {}
        known = ("origin", "geometry") if collision else ("origin", "geometry", "material")
        self.keep_unknown(element, known, ("name",), custom, kind)
        material = None
        if not collision and element.find("material") is not None:
            material = self.material(element.find("material"))
        name = element.get("name") or f"{kind}_{index}"
        if element.get("name"):
            custom["usdforge:sourceName"] = name  # the prim name is a sanitised identifier
        return Shape(name, geometry, self.origin(element), collision, material, custom=custom)

    # ---- links ---------------------------------------------------------------------------------------------

    def inertial(self, element: etree._Element, shapes: list[Shape], link: etree._Element) -> Inertial | None:
        """The link's inertial in the link frame; None when it has no mass."""
        mass_element = element.find("mass")
        mass = 0.0 if mass_element is None else number(mass_element, "value", self.path, 0.0)
        if mass < 0:
            raise self.fail(f"negative mass {mass}", mass_element)
        if mass == 0.0:
            return None
        pose = self.origin(element)
        tensor_element = element.find("inertia")
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        values = {key: number(tensor_element, key, self.path, 0.0) for key in keys} if tensor_element is not None else {}
        if values and not any(values.values()):
            self.warn("<inertia> is all zeros for a body with mass: treated as missing", tensor_element)
            tensor_element = None
        if tensor_element is None:
            colliders = [s for s in shapes if s.collision] or shapes
            inertial = shapes_inertial(colliders, self.meshes, mass=mass) if colliders else None
            if inertial is None:
                inertial = Inertial(mass, pose[:3, 3].copy(), np.eye(3) * MASSLESS_INERTIA * mass / MASSLESS_MASS)
                self.warn("<inertial> has no <inertia>: a small isotropic inertia is used", element)
            else:
                inertial = Inertial(mass, pose[:3, 3].copy(), inertial.inertia)
                self.warn("<inertial> has no <inertia>: it is computed from the link's shapes at the given mass",
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
            self.warn(f"inertia tensor is not positive semi-definite (principal moments {moments.tolist()}); "
                      "negative moments are written as 0", tensor_element)
        elif moments[0] + moments[1] < moments[2] * (1 - 1e-6):
            self.warn(f"principal moments {moments.tolist()} break the triangle inequality (A + B >= C); "
                      "written as given (some engines reject or rebalance them)", tensor_element)
        return Inertial(mass, pose[:3, 3].copy(), inertia)

    def link(self, element: etree._Element) -> Link:
        name = element.get("name")
        link = Link(name)
        visuals = [s for i, e in enumerate(element.findall("visual")) if (s := self.shape(e, False, i))]
        collisions = [s for i, e in enumerate(element.findall("collision")) if (s := self.shape(e, True, i))]
        link.shapes = visuals + collisions
        inertials = element.findall("inertial")
        if len(inertials) > 1:
            self.warn("several <inertial> elements; the first is used", inertials[1])
        link.inertial = self.inertial(inertials[0], link.shapes, element) if inertials else None
        self.keep_unknown(element, ("inertial", "visual", "collision"), ("name",), link.custom, "link")
        return link

    # ---- joints ---------------------------------------------------------------------------------------------

    def joint(self, element: etree._Element, links: dict[str, Link]) -> Joint:
        name = element.get("name")
        kind = element.get("type")
        if kind not in JOINT_TYPES:
            raise self.fail(f"joint type '{kind}' is not one of {', '.join(JOINT_TYPES)}", element)
        ends = {}
        for end in ("parent", "child"):
            end_element = element.find(end)
            link_name = end_element.get("link") if end_element is not None else None
            if not link_name:
                raise self.fail(f"no <{end} link=...>", element)
            if link_name not in links:
                raise self.fail(f"{end} link '{link_name}' is not a link of this robot", end_element)
            ends[end] = link_name
        if ends["parent"] == ends["child"]:
            raise self.fail(f"joins link '{ends['child']}' to itself", element)
        joint = Joint(name, kind, ends["parent"], ends["child"], frame_in_parent=self.origin(element))
        axis_element = element.find("axis")
        axis = np.array(numbers(axis_element, "xyz", 3, self.path, (1.0, 0.0, 0.0)) if axis_element is not None
                        else (1.0, 0.0, 0.0))
        norm = float(np.linalg.norm(axis))
        if kind in ("revolute", "continuous", "prismatic", "planar"):
            if norm < 1e-12:
                raise self.fail("zero axis: a movable joint needs a direction", axis_element)
            joint.axis = axis / norm
        self.limits(element, joint)
        dynamics = element.find("dynamics")
        if dynamics is not None:
            joint.damping = number(dynamics, "damping", self.path)
            joint.friction = number(dynamics, "friction", self.path)
            extra = {k: v for k, v in dynamics.attrib.items() if k not in ("damping", "friction")}
            if extra:
                for key, value in extra.items():
                    joint.custom[f"urdf:dynamics:{attribute_token(key)}"] = _float_or_text(value)
                self.notes.add(f"non-standard <dynamics> attribute(s) {', '.join(sorted(extra))} kept as custom "
                               "data urdf:dynamics:*", dynamics)
        for tag in ("safety_controller", "calibration"):
            for item in element.findall(tag):
                self.keep_attributes(item, f"urdf:{tag}", joint.custom)
                self.notes.add(f"<{tag}> has no USD physics equivalent; kept as custom data urdf:{tag}:*", item)
        mimic = element.find("mimic")
        if mimic is not None:
            leader = mimic.get("joint")
            if not leader:
                self.warn("<mimic> without a joint ignored", mimic)
            else:
                joint.mimic = Mimic(leader, number(mimic, "multiplier", self.path, 1.0),
                                    number(mimic, "offset", self.path, 0.0))
                joint.custom["urdf:mimic:line"] = mimic.sourceline or 0
        self.keep_unknown(element, ("origin", "parent", "child", "axis", "limit", "dynamics", "mimic",
                                    "safety_controller", "calibration"), ("name", "type"), joint.custom, "joint")
        return joint

    def limits(self, element: etree._Element, joint: Joint) -> None:
        limit = element.find("limit")
        if limit is not None:
            joint.effort = number(limit, "effort", self.path)
            joint.velocity = number(limit, "velocity", self.path)
            for value, what in ((joint.effort, "effort"), (joint.velocity, "velocity")):
                if value is not None and value < 0:
                    raise self.fail(f"negative {what} limit {value}", limit)
            if joint.effort == 0.0:
                self.notes.add("effort=\"0\" read as unlimited (no maxForce)", limit)
                joint.effort = None
        if joint.kind in ("revolute", "prismatic"):
            if limit is None:
                self.warn(f"{joint.kind} joint without <limit>: converted without position limits", element)
                return
            # The URDF spec: lower and upper default to 0.
            joint.lower = number(limit, "lower", self.path, 0.0)
            joint.upper = number(limit, "upper", self.path, 0.0)
            if joint.lower > joint.upper:
                raise self.fail(f"lower limit {joint.lower} is above upper limit {joint.upper}", limit)

    # ---- the robot -------------------------------------------------------------------------------------------

    def read(self) -> Robot:
        root, recoveries = load_urdf_xml(self.path)
        for message in recoveries:
            warn(self.path, message, "<?xml?>", 1)
        if not isinstance(root.tag, str) or root.tag != "robot":
            raise ConversionError(self.path, f"no <robot> element (the document's root is <{root.tag}>)",
                                  line=root.sourceline)
        robot = Robot(root.get("name") or self.path.stem, self.path)
        if not root.get("name"):
            self.warn(f"<robot> has no name; using '{robot.name}'", root)
        self.global_materials(root)

        link_elements: dict[str, etree._Element] = {}
        links: dict[str, Link] = {}
        for element in root.findall("link"):
            name = element.get("name")
            if not name:
                raise self.fail("link without a name", element)
            if name in link_elements:
                raise self.fail(f"link name '{name}' is used twice (first on line {link_elements[name].sourceline})",
                                element)
            link_elements[name] = element
            links[name] = self.link(element)
        if not links:
            raise self.fail("the robot has no <link>", root)

        joint_elements: dict[str, etree._Element] = {}
        joints: list[Joint] = []
        for element in root.findall("joint"):
            name = element.get("name")
            if not name:
                raise self.fail("joint without a name", element)
            if name in joint_elements:
                raise self.fail(f"joint name '{name}' is used twice (first on line "
                                f"{joint_elements[name].sourceline})", element)
            joint_elements[name] = element
            joints.append(self.joint(element, links))

        self.robot_custom(root, robot)
        ordered_links, ordered_joints, roots = self.tree(links, joints, joint_elements, link_elements)
        robot.links, robot.joints = ordered_links, ordered_joints
        self.world_links(robot, roots, link_elements)
        self.rest_poses(robot)
        self.check_mimics(robot, joint_elements)
        self.notes.flush()
        return robot

    def robot_custom(self, root: etree._Element, robot: Robot) -> None:
        """Transmissions, gazebo blocks and unknown top-level elements → custom data on the robot."""
        counts: dict[str, int] = {}
        for element in root:
            if not isinstance(element.tag, str) or element.tag in ("link", "joint", "material"):
                continue
            tag = element.tag
            index = counts.get(tag, 0)
            counts[tag] = index + 1
            if tag == "transmission":
                key = f"urdf:transmission:{attribute_token(element.get('name') or f'transmission_{index}')}"
                if key in robot.custom:
                    key = f"{key}_{index}"
                self.notes.add("<transmission> has no USD physics equivalent; kept as custom data "
                               "urdf:transmission:<name> on the robot prim", element)
            elif tag == "gazebo":
                reference = element.get("reference")
                key = f"urdf:gazebo:{attribute_token(reference) if reference else 'robot'}_{index}"
                self.notes.add("<gazebo> is simulator-specific; kept as custom data urdf:gazebo:* on the robot "
                               "prim", element)
            else:
                key = f"urdf:{attribute_token(tag)}_{index}"
                self.notes.add(f"unknown element <{tag}> kept as custom data {key.rsplit('_', 1)[0]}_<n> on "
                               "the robot prim", element)
            robot.custom[key] = xml_text(element)
        for name, value in root.attrib.items():
            if name not in ("name", "version"):
                robot.custom[f"urdf:attributes:{attribute_token(name)}"] = value

    def tree(self, links: dict[str, Link], joints: list[Joint], joint_elements: dict,
             link_elements: dict) -> tuple[list[Link], list[Joint], list[str]]:
        """Links and joints in depth-first order from the roots (document order); the roots."""
        parent_joint: dict[str, Joint] = {}
        for joint in joints:
            if joint.child in parent_joint:
                other = parent_joint[joint.child].name
                raise self.fail(f"link '{joint.child}' is the child of two joints ('{other}' and '{joint.name}'): "
                                "URDF describes a tree", joint_elements[joint.name])
            parent_joint[joint.child] = joint
        children: dict[str, list[Joint]] = {}
        for joint in joints:
            children.setdefault(joint.parent, []).append(joint)
        roots = [name for name in links if name not in parent_joint]
        order, seen = [], set()
        for root in roots:
            stack = [root]
            while stack:
                name = stack.pop()
                seen.add(name)
                order.append(links[name])
                for joint in reversed(children.get(name, [])):
                    stack.append(joint.child)
        joint_rank = {}
        for link in order:
            for joint in children.get(link.name, []):
                joint_rank[joint.name] = len(joint_rank)
        unreached = [name for name in links if name not in seen]
        if unreached:
            raise self.fail(f"the joints form a cycle through link(s) {', '.join(unreached)}",
                            link_elements[unreached[0]])
        if len(roots) > 1:
            self.warn(f"{len(roots)} links have no parent joint ({', '.join(roots)}); each starts a separate tree",
                      link_elements[roots[1]])
        return order, sorted(joints, key=lambda j: joint_rank[j.name]), roots

    def world_links(self, robot: Robot, roots: list[str], link_elements: dict) -> None:
        """A root link with nothing in it is the world: its joints attach their children to the world."""
        for root in roots:
            link, element = robot.link(root), link_elements[root]
            # Judged on the XML: a link whose only mesh failed to load is not a world link.
            if link.inertial is not None or element.find("visual") is not None \
                    or element.find("collision") is not None:
                continue
            robot.frames.append(Frame(root, np.eye(4), custom=dict(link.custom)))
            robot.links.remove(link)
            for joint in [j for j in robot.joints if j.parent == root]:
                if joint.kind == "floating":
                    # A floating base: no joint; the child starts where the joint's origin puts it.
                    robot.joints.remove(joint)
                    robot.link(joint.child).custom["urdf:floatingJoint"] = joint.name
                    self._initial_poses[joint.child] = joint.frame_in_parent
                else:
                    joint.parent = None

    def rest_poses(self, robot: Robot) -> None:
        """Each link's world pose with every joint at 0 (joint frame = child link frame in URDF)."""
        by_child = {joint.child: joint for joint in robot.joints}
        poses: dict[str, np.ndarray] = {}
        for link in robot.links:  # parents come first
            joint = by_child.get(link.name)
            if joint is None:
                poses[link.name] = self._initial_poses.get(link.name, np.eye(4))
            elif joint.parent is None:
                poses[link.name] = joint.frame_in_parent.copy()
            else:
                poses[link.name] = poses[joint.parent] @ joint.frame_in_parent
            link.pose = poses[link.name]

    def check_mimics(self, robot: Robot, joint_elements: dict) -> None:
        by_name = {joint.name: joint for joint in robot.joints}
        for joint in robot.joints:
            if joint.mimic is None:
                continue
            line = joint.custom.pop("urdf:mimic:line", None)
            leader = by_name.get(joint.mimic.joint)
            problem = None
            if joint.kind not in ONE_DOF:
                problem = f"a {joint.kind} joint cannot follow another joint"
            elif leader is None:
                problem = f"leader joint '{joint.mimic.joint}' is not a joint of this robot (or was a floating " \
                          "world joint)"
            elif leader.kind not in ONE_DOF:
                problem = f"leader joint '{leader.name}' is {leader.kind}: it has no coordinate to follow"
            if problem is not None:
                for key, value in (("joint", joint.mimic.joint), ("multiplier", joint.mimic.multiplier),
                                   ("offset", joint.mimic.offset)):
                    joint.custom[f"urdf:mimic:{key}"] = value
                joint.mimic = None
                warn(self.path, f"<mimic> dropped ({problem}); kept as custom data urdf:mimic:*",
                     describe(joint_elements[joint.name]), line)
        # Chains are fine (a follower of a follower); a cycle has no solution.
        for joint in robot.joints:
            seen, current = [joint.name], joint
            while current.mimic is not None and current.mimic.joint in by_name:
                current = by_name[current.mimic.joint]
                if current.name in seen:
                    warn(self.path, f"<mimic> dropped: the mimic joints form a cycle ({' -> '.join(seen)})",
                         describe(joint_elements[joint.name]))
                    joint.mimic = None
                    break
                seen.append(current.name)


def _float_or_text(value: str) -> float | str:
    try:
        return float(value)
    except ValueError:
        return value


def read_urdf(path: str | Path, packages: dict[str, str] | None = None,
              meshes: MeshLibrary | None = None) -> Robot:
    """The Robot a URDF file describes (SI units, rest poses, no merging). See the module docstring."""
    return UrdfReader(Path(path), packages or {}, meshes or MeshLibrary()).read()

