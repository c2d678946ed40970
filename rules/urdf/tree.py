"""The URDF's kinematic tree: links and joints in depth-first order, world links, rest poses.

URDF conventions applied here: a root link with no inertial, visual or collision (a "world" link) is the
world: it becomes a world frame, its fixed child joints fix the robot to the world, floating ones leave it
free (the child starts at the joint's origin), and any other joint type joins the world to the child.
"""

from __future__ import annotations

import numpy as np
from lxml import etree

from usdforge.rules.robot.model import Frame, Joint, Link, Robot
from usdforge.rules.urdf.source import UrdfSource


def order_tree(src: UrdfSource, links: dict[str, Link], joints: list[Joint],
               joint_elements: dict[str, etree._Element],
               link_elements: dict[str, etree._Element]) -> tuple[list[Link], list[Joint], list[str]]:
    """Links and joints in depth-first order from the roots (document order); the roots. A link with two
    parents or a cycle is an error."""
    parent_joint: dict[str, Joint] = {}
    for joint in joints:
        if joint.child in parent_joint:
            other = parent_joint[joint.child].name
            raise src.fail(f"link '{joint.child}' is the child of two joints ('{other}' and '{joint.name}'): "
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
        # Every unreached link has one parent: walking up from one ends on a loop. Its last joint in the
        # document is the one that closes it.
        walked, name = [], unreached[0]
        while name not in walked:
            walked.append(name)
            name = parent_joint[name].parent
        loop = walked[walked.index(name):]
        order_of = {joint.name: index for index, joint in enumerate(joints)}
        closing = max((parent_joint[link] for link in loop), key=lambda joint: order_of[joint.name])
        path = " -> ".join([*reversed(loop), loop[-1]])
        raise src.fail(f"joint '{closing.name}' closes a cycle (links {path}): URDF describes a tree",
                       joint_elements[closing.name])
    if len(roots) > 1:
        src.warn(f"{len(roots)} links have no parent joint ({', '.join(roots)}); each starts a separate tree",
                 link_elements[roots[1]])
    return order, sorted(joints, key=lambda j: joint_rank[j.name]), roots


def world_links(robot: Robot, roots: list[str], link_elements: dict[str, etree._Element]) -> dict[str, np.ndarray]:
    """Turn each empty root link into a world frame (see the module docstring); the (4, 4) initial world
    poses of the links a floating world joint left free."""
    initial_poses: dict[str, np.ndarray] = {}
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
                initial_poses[joint.child] = joint.frame_in_parent
            else:
                joint.parent = None
    return initial_poses


def rest_poses(robot: Robot, initial_poses: dict[str, np.ndarray]) -> None:
    """Set each link's world pose with every joint at 0 (joint frame = child link frame in URDF); a root
    link starts at ``initial_poses`` (identity when absent)."""
    by_child = {joint.child: joint for joint in robot.joints}
    poses: dict[str, np.ndarray] = {}
    for link in robot.links:  # parents come first
        joint = by_child.get(link.name)
        if joint is None:
            poses[link.name] = initial_poses.get(link.name, np.eye(4))
        elif joint.parent is None:
            poses[link.name] = joint.frame_in_parent.copy()
        else:
            poses[link.name] = poses[joint.parent] @ joint.frame_in_parent
        link.pose = poses[link.name]
