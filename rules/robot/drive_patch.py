"""A drive-gain or collision-approximation edit patched into cached layers instead of re-authoring them.

A robot's physics layer depends on the drive fields of its cfg (``pipeline.layer_keys.DRIVE_FIELDS``:
URDF's ``joint_drive``, MJCF's ``override_*``) only through the values of a few attributes: each 1-DoF
joint's ``DriveAPI`` attributes (``rules.robot.joints.drive_attributes``; MJCF adds the drive's target
position), and for MJCF the mujoco layer's through each actuator's gain and bias. So a layer built from the
same intermediate with the same other fields - the build cache keeps it under the unit ``PATCH_BASES[role]``,
whose key is the layer's key without the drive fields - differs from the one this cfg asks for in those
values only, *when the same attributes are authored* (and the layer reads back as it was written):
``patched_layer`` then sets them on the cached layer
(Sdf edits: no spec is created or removed, so the order of everything stays) and returns its bytes, which
equal a cold conversion's (tests/test_layer_fields.py and bench/rebuild.py check it byte for byte).
Otherwise (a drive added or removed, an attribute authored or not, another type) it returns None and the
layer is authored as usual. Likewise ``collision_type`` within one class of
``rules.robot.layer_fields.PROJECTIONS`` (any approximation but decomposition) changes only the one
``physics:approximation`` token of every mesh collider: the key of ``PATCH_BASES`` holds the class, and
the patch sets the token.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from pxr import Sdf

from usdforge.rules.robot.joints import drive_attributes, drive_axis
from usdforge.rules.robot.layer_reuse import PATCH_BASES
from usdforge.rules.robot.model import Robot
from usdforge.rules.usd import layer as sdf

#: One prim's patched part: the API schemas applied among the patched ones, and the attributes in order,
#: each (name, type, value in USD units, uniform); None: the prim holds none of them.
Wanted = tuple[list[str], list[tuple[str, Sdf.ValueTypeName, Any, bool]]] | None
#: What a format's rule says of the layers it can patch: role → (prim path → what it must hold, whether an
#: attribute name is one that is patched, the prefix of the API schemas that are); None: not patchable.
#: Called with the role, the robot's root prim path and joint name → prim path.
Patches = Callable[[str, Sdf.Path, dict[str, Sdf.Path]],
                   tuple[dict[Sdf.Path, Wanted], Callable[[str], bool], str] | None]

ROLES = tuple(PATCH_BASES)
#: The prefix of the drive API schemas the physics layer's patch sets.
DRIVE_API = "PhysicsDriveAPI:"


def is_drive_attribute(name: str) -> bool:
    """Whether an attribute of a joint prim is one of its drive's (the ones the physics layer's patch sets)."""
    return name.startswith("drive:")


def joint_drives(robot: Robot, joint_paths: dict[str, Sdf.Path],
                 extra: Callable[[Any, str], list[tuple[str, Sdf.ValueTypeName, Any, bool]]] | None = None,
                 ) -> dict[Sdf.Path, Wanted]:
    """Joint prim → the drive the physics layer gives it (``extra(joint, axis)``: attributes a format's rule
    authors after them, such as MJCF's target position)."""
    wanted: dict[Sdf.Path, Wanted] = {}
    for joint in robot.joints:
        path = joint_paths.get(joint.name)
        if path is None:
            continue
        axis = drive_axis(joint)
        drive = drive_attributes(joint, axis) if axis is not None else None
        more = extra(joint, axis) if extra is not None and axis is not None else []
        if drive is None and not more:
            wanted[path] = None
            continue
        api, attributes = drive if drive is not None else (f"PhysicsDriveAPI:{axis}", [])
        wanted[path] = ([api], attributes + more)
    return wanted


def urdf_patches(robot: Robot) -> Patches:
    """The physics layer's drives, for a rule whose drive fields change nothing else (URDF)."""

    def patches(role: str, root: Sdf.Path, joint_paths: dict[str, Sdf.Path]):
        if role != "physics":
            return None
        return joint_drives(robot, joint_paths), is_drive_attribute, DRIVE_API

    return patches


def patched_layer(data: bytes, wanted: dict[Sdf.Path, Wanted], patched: Callable[[str], bool],
                  api_prefix: str, approximation: str | None = None,
                  identifier: str | None = None) -> tuple[bytes, Sdf.Layer] | None:
    """``data`` (a cached usda layer) with the values of ``wanted``, or None when a prim of ``wanted`` does not
    hold exactly the patched attributes (``patched`` names) and API schemas (``api_prefix``) it lists, with
    their types and variability, or a value is not finite (authoring then raises as it should).
    approximation: the ``physics:approximation`` token every mesh collider gets (colliders not decomposed:
    the physics layer then authors that one token on each, ``rules.robot.geometry.Colliders``).
    identifier: the patched layer's (its future path, ``rules.usd.layer.new_layer``), so that it can be held
    open for the Isaac Lab cfg instead of being read back from its file. Returns (bytes, the layer)."""
    layer = sdf.new_layer(identifier) if identifier is not None else Sdf.Layer.CreateAnonymous("patch.usda")
    try:
        text = data.decode("utf-8")
        if not layer.ImportFromString(text):
            return None
    except (UnicodeDecodeError, RuntimeError):  # pxr raises Tf errors as RuntimeError subclasses
        return None
    names: set[str] = set()  # the attributes given values
    for path, want in wanted.items():
        spec = layer.GetPrimAtPath(path)
        if spec is None:
            if want is not None:
                return None
            continue
        apis = [name for name in sdf.applied(spec) if api_prefix and name.startswith(api_prefix)]
        present = {attribute.name: attribute for attribute in spec.attributes if patched(attribute.name)}
        if want is None:
            if apis or present:
                return None
            continue
        want_apis, attributes = want
        if apis != want_apis or set(present) != {name for name, *_ in attributes}:
            return None
        for name, type_name, value, uniform in attributes:
            attribute = present[name]
            if attribute.typeName != type_name or (attribute.variability == Sdf.VariabilityUniform) != uniform \
                    or not _finite(value):
                return None
            attribute.default = value
            names.add(name)
    if approximation is not None:
        stack = list(layer.pseudoRoot.nameChildren)
        while stack:
            spec = stack.pop()
            attribute = spec.attributes.get("physics:approximation")
            if attribute is not None:
                if attribute.typeName != Sdf.ValueTypeNames.Token or attribute.variability != Sdf.VariabilityUniform:
                    return None
                attribute.default = approximation
                names.add("physics:approximation")
            stack.extend(spec.nameChildren)
    out = layer.ExportToString()
    return (out.encode("utf-8"), layer) if _only_values_differ(text, out, names) else None


def _only_values_differ(before: str, after: str, names: set[str]) -> bool:
    """Whether ``after`` is ``before`` but for the value lines of attributes in ``names``: the layer read back
    as it was written (some authored states do not: an emptied ``apiSchemas`` list op is written "( )" and
    reads back as no metadata at all), so the patched bytes are what authoring the new values writes."""
    old, new = before.splitlines(), after.splitlines()
    if len(old) != len(new):
        return False
    for a, b in zip(old, new):
        if a != b:
            match = _VALUE_LINE.match(b)
            if match is None or match.group(1) not in names or _VALUE_LINE.match(a) is None \
                    or _VALUE_LINE.match(a).group(1) != match.group(1):
                return False
    return True


#: An attribute's value line in usda: ``[uniform] <type> <name> = <value>``.
_VALUE_LINE = re.compile(r"^\s*(?:uniform\s+)?\S+\s+(\S+)\s+=\s")


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return True
    return all(math.isfinite(float(v)) for v in value)
