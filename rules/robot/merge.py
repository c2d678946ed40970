"""Merging links joined by fixed joints into one body (format-neutral; no pxr).

Each merged child's shapes and frames move into the link that absorbs it with the composed transform, its
inertial is combined with the parallel-axis theorem, it stays findable as a ``Frame`` (its name, its pose
in the body), and joints below it are re-parented with composed origins. Chains of fixed joints merge
into their first movable ancestor. Fixed joints to the world are never merged (they fix the base).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from usdforge.rules.robot.inertia import combine, moved
from usdforge.rules.robot.model import Frame, Joint, Robot


def merge_fixed_joints(robot: Robot, mergeable: Callable[[Joint], bool]) -> Robot:
    """Merge (in place) the child of every fixed joint with a parent link for which ``mergeable(joint)``
    holds; return ``robot``. Links must be ordered parents first."""
    parent_joint = {joint.child: joint for joint in robot.joints}
    # owner[link] = (the link that absorbs it, its pose in that link's frame)
    owner: dict[str, tuple[str, np.ndarray]] = {}
    for link in robot.links:
        joint = parent_joint.get(link.name)
        if joint is not None and joint.kind == "fixed" and joint.parent is not None and mergeable(joint):
            base, base_pose = owner[joint.parent]
            owner[link.name] = (base, base_pose @ joint.frame_in_parent @ np.linalg.inv(joint.frame_in_child))
        else:
            owner[link.name] = (link.name, np.eye(4))

    links = {link.name: link for link in robot.links}
    absorbed: dict[str, list] = {}
    for link in robot.links:
        base, pose = owner[link.name]
        if base == link.name:
            continue
        target = links[base]
        for shape in link.shapes:
            shape.pose = pose @ shape.pose
            # Which source link a collider or visual came from, for people reading the USD.
            shape.custom.setdefault("usdforge:sourceLink", link.name)
            target.shapes.append(shape)
        target.frames.append(Frame(link.name, pose.copy(), custom=dict(link.custom)))
        for frame in link.frames:
            target.frames.append(Frame(frame.name, pose @ frame.pose, custom=frame.custom))
        if link.inertial is not None:
            absorbed.setdefault(base, []).append(moved(link.inertial, pose))

    for base, inertials in absorbed.items():
        own = [links[base].inertial] if links[base].inertial is not None else []
        links[base].inertial = combine(own + inertials)

    kept_joints = []
    for joint in robot.joints:
        if owner[joint.child][0] != joint.child:
            continue  # merged away
        if joint.parent is not None:
            base, pose = owner[joint.parent]
            joint.frame_in_parent = pose @ joint.frame_in_parent
            joint.parent = base
        kept_joints.append(joint)
    robot.joints = kept_joints
    robot.links = [link for link in robot.links if owner[link.name][0] == link.name]
    return robot


def owner_of(robot: Robot, name: str) -> str | None:
    """The body a link (or frame) name ended up in: itself, the link whose frame it became, or None."""
    for link in robot.links:
        if link.name == name or any(frame.name == name for frame in link.frames):
            return link.name
    return None
