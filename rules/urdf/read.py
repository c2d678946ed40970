"""URDF → ``rules.robot.model.Robot``: every URDF element, tolerant of what can be recovered.

Read: ``<robot>`` (name), global and inline ``<material>`` (colour, texture: ``rules.urdf.materials``),
``<link>`` with ``<inertial>`` (origin, mass, full tensor) and any number of named ``<visual>``/
``<collision>`` (box, cylinder, sphere, mesh with scale, capsule: ``rules.urdf.links``), ``<joint>`` of every
type with origin, axis, limit, dynamics, mimic, safety_controller and calibration (``rules.urdf.joints``);
``<transmission>``, ``<gazebo>`` and anything unknown are kept as namespaced custom data (``urdf:*``) with a
note (``rules.conversion_warnings``: shown with ``-v``, recorded always). Mesh files are read while reading (``rules.robot.meshes``), so a missing or unreadable one is
reported with the URDF line that names it. The tree, world links and rest poses: ``rules.urdf.tree``.

URDF conventions applied:
- A root link with no inertial, visual or collision (a "world" link) is the world (``rules.urdf.tree``).
- ``<limit>`` attributes default to 0 (the URDF spec); a revolute joint without ``<limit>`` is unlimited
  (urdfdom would reject it) and a prismatic one too, each with a warning.
- A negative effort or velocity limit is read as its magnitude, and lower > upper is swapped, each with a
  warning naming the fix (``rules.urdf.joints.read_limits`` says why).
- A named material defined in any visual (or at the top level) is usable by name everywhere, as urdfdom
  does (``rules.urdf.materials``).
- A ``<mimic>`` whose leader is not a revolute, continuous or prismatic joint (or whose follower is not) is
  dropped with a warning: a fixed joint has no coordinate to follow.

Unrecoverable: no ``<robot>``, a duplicate link or joint name, a joint to an unknown link, a link with two
parents or a cycle, an unknown joint type, a malformed number, a zero axis on a movable joint. These raise ``ConversionError`` naming file, line and element.
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from usdforge.rules.conversion_warnings import warn
from usdforge.rules.errors import ConversionError
from usdforge.rules.robot.meshes import MeshLibrary
from usdforge.rules.robot.model import Joint, Link, Robot
from usdforge.rules.urdf.joints import check_mimics, read_joint
from usdforge.rules.urdf.links import read_link
from usdforge.rules.urdf.materials import read_global_materials
from usdforge.rules.urdf.source import UrdfSource, attribute_token, xml_text
from usdforge.rules.urdf.tree import order_tree, rest_poses, world_links
from usdforge.rules.urdf.xml import load_urdf_xml


def read_urdf(path: str | Path, packages: dict[str, str] | None = None,
              meshes: MeshLibrary | None = None, expanded: bytes | None = None, tree_root: str | None = None,
              missing_noted: bool = False, allowed: tuple[str, ...] = (), loaded: tuple | None = None) -> Robot:
    """The Robot a URDF file describes (SI units, rest poses, no merging). See the module docstring.

    expanded: the URDF a xacro at ``path`` expanded to (``rules.urdf.xacro``), read instead of the file;
    relative file names still resolve from ``path``'s folder. tree_root: the package search's bound
    (``rules.urdf.paths``). missing_noted: each missing file is a note, not a warning (the caller warned
    once with the count). allowed: allowed roots, which may also hold packages. loaded: what
    ``load_urdf_xml(path, expanded)`` returned, when the caller parsed it already (None: parsed here)."""
    src = UrdfSource(Path(path), packages or {}, meshes or MeshLibrary(), tree_root, missing_noted, allowed)
    root, recoveries = loaded if loaded is not None else load_urdf_xml(src.path, expanded)
    for message in recoveries:
        warn(src.path, message, "<?xml?>", 1)
    if not isinstance(root.tag, str) or root.tag != "robot":
        raise ConversionError(src.path, f"no <robot> element (the document's root is <{root.tag}>)",
                              line=root.sourceline)
    robot = Robot(root.get("name") or src.path.stem, src.path)
    if not root.get("name"):
        src.warn(f"<robot> has no name; using '{robot.name}'", root)
    read_global_materials(src, root)
    src.meshes.read_ahead(_mesh_files(src, root))
    links, link_elements = _read_links(src, root)
    joints, joint_elements = _read_joints(src, root, links)
    _robot_custom(src, root, robot)
    robot.links, robot.joints, roots = order_tree(src, links, joints, joint_elements, link_elements)
    initial_poses = world_links(robot, roots, link_elements)
    rest_poses(robot, initial_poses)
    check_mimics(src, robot, joint_elements)
    src.notes.flush()
    return robot


def _mesh_files(src: UrdfSource, root: etree._Element) -> list[Path]:
    """The existing mesh files the links' shapes name, in the order ``_read_links`` reads them (each
    shape's problems are reported there, when it is read)."""
    from usdforge.rules.urdf.paths import UnresolvedUri, resolve_uri

    files = []
    for link in root.findall("link"):
        for kind in ("visual", "collision"):
            for mesh in link.findall(f"{kind}/geometry/mesh"):
                try:
                    path = resolve_uri(mesh.get("filename") or "", src.folder, src.packages, src.tree_root,
                                       src.allowed)
                except UnresolvedUri:
                    continue
                if path.is_file():
                    files.append(path)
    return files


def _read_links(src: UrdfSource, root: etree._Element) -> tuple[dict[str, Link], dict[str, etree._Element]]:
    """Every ``<link>`` by name, in document order, and its element; a nameless or repeated name fails."""
    link_elements: dict[str, etree._Element] = {}
    links: dict[str, Link] = {}
    for element in root.findall("link"):
        name = element.get("name")
        if not name:
            raise src.fail("link without a name", element)
        if name in link_elements:
            raise src.fail(f"link name '{name}' is used twice (first on line {link_elements[name].sourceline})",
                           element)
        link_elements[name] = element
        links[name] = read_link(src, element)
    if not links:
        raise src.fail("the robot has no <link>", root)
    return links, link_elements


def _read_joints(src: UrdfSource, root: etree._Element,
                 links: dict[str, Link]) -> tuple[list[Joint], dict[str, etree._Element]]:
    """Every ``<joint>`` in document order, and its element by name; a nameless or repeated name fails."""
    joint_elements: dict[str, etree._Element] = {}
    joints: list[Joint] = []
    for element in root.findall("joint"):
        name = element.get("name")
        if not name:
            raise src.fail("joint without a name", element)
        if name in joint_elements:
            raise src.fail(f"joint name '{name}' is used twice (first on line "
                           f"{joint_elements[name].sourceline})", element)
        joint_elements[name] = element
        joints.append(read_joint(src, element, links))
    return joints, joint_elements


def _robot_custom(src: UrdfSource, root: etree._Element, robot: Robot) -> None:
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
            src.notes.add("<transmission> has no USD physics equivalent; kept as custom data "
                          "urdf:transmission:<name> on the robot prim", element)
        elif tag == "gazebo":
            reference = element.get("reference")
            key = f"urdf:gazebo:{attribute_token(reference) if reference else 'robot'}_{index}"
            src.notes.add("<gazebo> is simulator-specific; kept as custom data urdf:gazebo:* on the robot "
                          "prim", element)
        else:
            key = f"urdf:{attribute_token(tag)}_{index}"
            src.notes.add(f"unknown element <{tag}> kept as custom data {key.rsplit('_', 1)[0]}_<n> on "
                          "the robot prim", element)
        robot.custom[key] = xml_text(element)
    for name, value in root.attrib.items():
        if name not in ("name", "version"):
            robot.custom[f"urdf:attributes:{attribute_token(name)}"] = value
