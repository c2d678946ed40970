"""URDF ``<joint>``: type, parent and child, origin, axis, ``<limit>``, ``<dynamics>``, ``<mimic>``, and
``<safety_controller>``/``<calibration>`` kept as custom data; mimic couplings checked once every joint
is known."""

from __future__ import annotations

import numpy as np
from lxml import etree

from usdforge.rules.conversion_warnings import warn
from usdforge.rules.errors import ConversionError
from usdforge.rules.files import quote
from usdforge.rules.robot.model import Joint, Link, Mimic, Robot
from usdforge.rules.urdf.source import UrdfSource, attribute_token, float_or_text
from usdforge.rules.urdf.xml import describe, number, numbers

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
#: Joint types with one coordinate (what a mimic can couple, what a drive can drive).
ONE_DOF = ("revolute", "continuous", "prismatic")


def read_joint(src: UrdfSource, element: etree._Element, links: dict[str, Link]) -> Joint:
    """A ``<joint>`` between two of ``links`` (frame in the parent link, unit axis, limits in rad or m)."""
    name = element.get("name")
    kind = element.get("type")
    if kind is None:
        raise src.fail(f"joint has no type (one of {', '.join(JOINT_TYPES)})", element)
    if kind not in JOINT_TYPES:
        raise src.fail(f"joint type '{quote(kind)}' is not one of {', '.join(JOINT_TYPES)}", element)
    ends = {}
    for end in ("parent", "child"):
        end_element = element.find(end)
        link_name = end_element.get("link") if end_element is not None else None
        if not link_name:
            raise src.fail(f"no <{end} link=...>", element)
        if link_name not in links:
            raise src.fail(f"{end} link '{link_name}' is not a link of this robot", end_element)
        ends[end] = link_name
    if ends["parent"] == ends["child"]:
        raise src.fail(f"joins link '{ends['child']}' to itself", element)
    joint = Joint(name, kind, ends["parent"], ends["child"], frame_in_parent=src.origin(element))
    axis_element = element.find("axis")
    axis = np.array(numbers(axis_element, "xyz", 3, src.path, (1.0, 0.0, 0.0)) if axis_element is not None
                    else (1.0, 0.0, 0.0))
    norm = float(np.linalg.norm(axis))
    if kind in ("revolute", "continuous", "prismatic", "planar"):
        if norm < 1e-12:
            raise src.fail("zero axis: a movable joint needs a direction", axis_element)
        joint.axis = axis / norm
    read_limits(src, element, joint)
    dynamics = element.find("dynamics")
    if dynamics is not None:
        joint.damping = number(dynamics, "damping", src.path)
        joint.friction = number(dynamics, "friction", src.path)
        extra = {k: v for k, v in dynamics.attrib.items() if k not in ("damping", "friction")}
        if extra:
            for key, value in extra.items():
                joint.custom[f"urdf:dynamics:{attribute_token(key)}"] = float_or_text(value)
            src.notes.add(f"non-standard <dynamics> attribute(s) {', '.join(sorted(extra))} kept as custom "
                          "data urdf:dynamics:*", dynamics)
    for tag in ("safety_controller", "calibration"):
        for item in element.findall(tag):
            src.keep_attributes(item, f"urdf:{tag}", joint.custom)
            src.notes.add(f"<{tag}> has no USD physics equivalent; kept as custom data urdf:{tag}:*", item)
    mimic = element.find("mimic")
    if mimic is not None:
        leader = mimic.get("joint")
        if not leader:
            raise src.fail("<mimic> names no joint to follow: its coupling cannot be honoured", mimic)
        else:
            joint.mimic = Mimic(leader, number(mimic, "multiplier", src.path, 1.0),
                                number(mimic, "offset", src.path, 0.0))
            joint.custom["urdf:mimic:line"] = mimic.sourceline or 0
    src.keep_unknown(element, ("origin", "parent", "child", "axis", "limit", "dynamics", "mimic",
                               "safety_controller", "calibration"), ("name", "type"), joint.custom, "joint")
    return joint


def read_limits(src: UrdfSource, element: etree._Element, joint: Joint) -> None:
    """``<limit>``: effort and velocity (0 effort = unlimited); lower/upper of revolute and prismatic
    joints (the URDF spec's default 0; none at all: unlimited, with a warning).

    Lenient where the intent is clear, with one warning naming the fix:
    - a negative effort or velocity is read as its magnitude: a limit is a bound on |effort| and
      |velocity| (urdfdom stores the sign as given and controllers use the magnitude); reading it as
      unlimited would instead drop a bound the author wrote down.
    - lower > upper is swapped: the author wrote down a range in the wrong order. Written as given, USD
      would read the axis as locked (UsdPhysics: low > high means no motion), which no author intends
      for a revolute or prismatic joint; a locked joint is written as type fixed, or lower == upper."""
    limit = element.find("limit")
    if limit is not None:
        joint.effort = number(limit, "effort", src.path)
        joint.velocity = number(limit, "velocity", src.path)
        for value, what in ((joint.effort, "effort"), (joint.velocity, "velocity")):
            if value is not None and value < 0:
                src.warn(f"negative {what} limit {value} read as its magnitude {-value} (fix: {what}="
                         f"\"{-value:g}\")", limit)
        joint.effort = abs(joint.effort) if joint.effort is not None else None
        joint.velocity = abs(joint.velocity) if joint.velocity is not None else None
        if joint.effort == 0.0:
            src.notes.add("effort=\"0\" read as unlimited (no maxForce)", limit)
            joint.effort = None
    if joint.kind in ("revolute", "prismatic"):
        if limit is None:
            src.warn(f"{joint.kind} joint without <limit>: converted without position limits", element)
            return
        # The URDF spec: lower and upper default to 0.
        joint.lower = number(limit, "lower", src.path, 0.0)
        joint.upper = number(limit, "upper", src.path, 0.0)
        if joint.lower > joint.upper:
            src.warn(f"lower limit {joint.lower:g} is above upper limit {joint.upper:g}: swapped (written as "
                     f"given, the joint would be locked; fix: lower=\"{joint.upper:g}\" upper=\"{joint.lower:g}\")",
                     limit)
            joint.lower, joint.upper = joint.upper, joint.lower


def check_mimics(src: UrdfSource, robot: Robot, joint_elements: dict[str, etree._Element]) -> None:
    """Drop (with a warning, keeping the data as ``urdf:mimic:*``) each mimic between joints without one
    coordinate. A mimic whose leader is not a joint of the robot, or mimics that form a cycle, cannot be
    honoured at all: a ConversionError, as in urdfdom-based importers."""
    by_name = {joint.name: joint for joint in robot.joints}
    for joint in robot.joints:
        if joint.mimic is None:
            continue
        line = joint.custom.pop("urdf:mimic:line", None)
        leader = by_name.get(joint.mimic.joint)
        problem = None
        if leader is None:  # whatever the follower's type (urdfdom rejects a fixed one's unknown leader too)
            raise ConversionError(src.path, f"<mimic joint=\"{joint.mimic.joint}\">: the joint to follow is not a "
                                            "joint of this robot (or was a floating world joint)",
                                  describe(joint_elements[joint.name]), line)
        if joint.kind not in ONE_DOF:
            problem = f"a {joint.kind} joint cannot follow another joint"
        elif leader.kind not in ONE_DOF:
            problem = f"leader joint '{leader.name}' is {leader.kind}: it has no coordinate to follow"
        if problem is not None:
            for key, value in (("joint", joint.mimic.joint), ("multiplier", joint.mimic.multiplier),
                               ("offset", joint.mimic.offset)):
                joint.custom[f"urdf:mimic:{key}"] = value
            joint.mimic = None
            warn(src.path, f"<mimic> dropped ({problem}); kept as custom data urdf:mimic:*",
                 describe(joint_elements[joint.name]), line)
    # Chains are fine (a follower of a follower); a cycle has no solution.
    for joint in robot.joints:
        seen, current = [joint.name], joint
        while current.mimic is not None and current.mimic.joint in by_name:
            current = by_name[current.mimic.joint]
            if current.name in seen:
                raise ConversionError(src.path, f"the mimic joints form a cycle ({' -> '.join([*seen, current.name])}): "
                                                "no joint position satisfies them", describe(joint_elements[joint.name]),
                                      joint_elements[joint.name].sourceline)
            seen.append(current.name)
