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
from collections.abc import Callable, Collection
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
                  identifier: str | None = None) -> tuple[bytes, Sdf.Layer | None] | None:
    """``data`` (a cached usda layer) with the values of ``wanted``, or None when a prim of ``wanted`` does not
    hold exactly the patched attributes (``patched`` names) and API schemas (``api_prefix``) it lists, with
    their types and variability, or a value is not finite (authoring then raises as it should).
    approximation: the ``physics:approximation`` token every mesh collider gets (colliders not decomposed:
    the physics layer then authors that one token on each, ``rules.robot.geometry.Colliders``).
    identifier: the patched layer's (its future path, ``rules.usd.layer.new_layer``), so that it can be held
    open for the Isaac Lab cfg instead of being read back from its file. Returns (bytes, the layer), the
    layer None when the text was patched line by line (``patched_text``, tried first: no parse and no export;
    the Isaac Lab cfg, when it is rendered, then parses the file, which costs less than both)."""
    text = patched_text(data, wanted, patched, api_prefix, approximation)
    if text is not UNSUPPORTED:
        return None if text is None else (text, None)
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
        if not _fits(want, apis, present):
            return None
        if want is None:
            continue
        _, attributes = want
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


def _fits(want: Wanted, apis: list[str], present: Collection[str]) -> bool:
    """Whether a prim holding the API schemas ``apis`` (those the patch sets) and the patched attributes
    ``present`` holds exactly what ``want`` patches (``want`` None: a prim that must hold none of them)."""
    if want is None:
        return not apis and not present
    want_apis, values = want
    return apis == want_apis and set(present) == {name for name, *_ in values}


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return True
    return all(math.isfinite(float(v)) for v in value)


#: ``patched_text`` could not patch this text line by line (a form it does not follow): patch through Sdf.
UNSUPPORTED = object()

#: A prim's header line as Sdf writes it: ``<specifier> [<type>] "<name>"``, `` (`` when metadata follows.
_HEADER = re.compile(r'^( *)(?:def|over|class)(?: [\w:]+)? "([A-Za-z_][A-Za-z_0-9]*)"( \()?$')
#: An attribute's line: ``[uniform ]<type> <name> = <value>[ (]`` (`` (``: its metadata follows).
_ATTRIBUTE = re.compile(r"^ *(uniform )?(\S+) ([^\s=]+) = (.*?)( \()?$")
#: A line closing a bracket.
_CLOSERS = frozenset(("}", ")", "]"))
#: An ``apiSchemas`` list op in a prim's metadata, as ``rules.usd.layer.apply_schemas`` writes it.
_API_SCHEMAS = re.compile(r'^ *(\w+ )?apiSchemas = \[(.*)\]$')


def patched_text(data: bytes, wanted: dict[Sdf.Path, Wanted], patched: Callable[[str], bool], api_prefix: str,
                 approximation: str | None = None) -> bytes | None | object:
    """``patched_layer``'s bytes, found line by line in the usda text Sdf wrote (each value line replaced by
    the one Sdf writes for the new value: ``_value_texts``), without parsing the layer and exporting it
    again; None when the patch is refused (the same checks as ``patched_layer``); ``UNSUPPORTED`` when the
    text holds a form this reading does not follow (a multi-line string, a variant, a list op other than
    ``prepend apiSchemas``, a bracket it cannot place): the caller patches through Sdf then.

    The lines of an Sdf-written usda file nest by brackets that end their lines (``(``, ``{``, ``[``) and
    lines that are a closing bracket alone; without a multi-line string (``\"\"\"``) no value spans lines,
    so each prim's attributes are the lines directly inside its ``{`` block."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if '"""' in text or "\r" in text or "variantSet" in text:
        return UNSUPPORTED
    lines = text.split("\n")
    # Prims by their path's text (a path made for each of a layer's prims cost most of the reading).
    wanted_at = {path.pathString: path for path in wanted}
    # Each prim's attribute lines (name → line index) and its apiSchemas op, for the prims to patch.
    attributes: dict[Sdf.Path, dict[str, int]] = {}
    schemas: dict[Sdf.Path, list[str]] = {}
    approximations: list[int] = []
    # ("prim" | "meta" | "other", its prim's path text, that prim's path when it is in wanted, else None)
    stack: list[tuple[str, str | None, Sdf.Path | None]] = []
    top: tuple[str, str | None, Sdf.Path | None] = ("top", None, None)  # stack[-1], or the file's top
    pending: str | None = None  # a prim whose "{" comes next
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped in _CLOSERS:
            if not stack:
                return UNSUPPORTED
            kind, path, _ = stack.pop()
            top = stack[-1] if stack else ("top", None, None)
            if kind == "meta":
                pending = path
            continue
        if stripped == "{":
            if pending is None:
                return UNSUPPORTED
            top = ("prim", pending, wanted_at.get(pending))
            stack.append(top)
            pending = None
            continue
        if pending is not None:
            return UNSUPPORTED
        kind, path, in_wanted = top
        if stripped.startswith(("def ", "over ", "class ")):
            header = _HEADER.match(line)
            if header is not None:
                if stack and kind != "prim":
                    return UNSUPPORTED
                child = f"{path if kind == 'prim' else ''}/{header.group(2)}"
                if header.group(3):
                    top = ("meta", child, wanted_at.get(child))
                    stack.append(top)
                else:
                    pending = child
                continue
        if in_wanted is not None and kind == "meta" and "apiSchemas" in stripped:
            match = _API_SCHEMAS.match(line)
            if match is None or match.group(1) != "prepend " or in_wanted in schemas:
                return UNSUPPORTED
            schemas[in_wanted] = re.findall(r'"([^"]*)"', match.group(2))
        elif kind == "prim" and (in_wanted is not None or "physics:approximation" in stripped):
            # The name _ATTRIBUTE would give (the word before the first " = ": neither of the two words before
            # it holds a space), told before matching: most lines of a prim to patch are other attributes.
            head, equals, _ = line.partition(" = ")
            name = head.rpartition(" ")[2]
            if (equals and (name == "physics:approximation" or (in_wanted is not None and patched(name)))) \
                    or " physics:approximation " in line:
                match = _ATTRIBUTE.match(line)
                if match is not None:
                    name = match.group(3)
                    if name == "physics:approximation":
                        approximations.append(index)
                    if in_wanted is not None and patched(name):
                        attributes.setdefault(in_wanted, {})[name] = index
                elif " physics:approximation " in line:  # an attribute in a form not read here
                    return UNSUPPORTED
        if stripped.endswith(("(", "{", "[")):
            top = ("other", path if kind != "top" else None, None)
            stack.append(top)
    if stack or pending is not None:
        return UNSUPPORTED
    changes: list[tuple[int, Sdf.ValueTypeName, Any, bool]] = []  # line, type, value, uniform
    for path, want in wanted.items():
        present = attributes.get(path, {})
        apis = [name for name in schemas.get(path, []) if api_prefix and name.startswith(api_prefix)]
        if not _fits(want, apis, present):
            return None  # also a prim that is not there (it holds none of them)
        if want is None:
            continue
        _, values = want
        for name, type_name, value, uniform in values:
            if not _finite(value):
                return None
            changes.append((present[name], type_name, value, uniform))
    if approximation is not None:
        changes.extend((index, Sdf.ValueTypeNames.Token, approximation, True) for index in approximations)
    texts = _value_texts([(type_name, value, uniform) for _, type_name, value, uniform in changes])
    for (index, type_name, value, uniform), new in zip(changes, texts):
        match = _ATTRIBUTE.match(lines[index])
        if bool(match.group(1)) != uniform or match.group(2) != str(type_name):
            # Another type or variability: refused by patched_layer (an approximation that is not a uniform
            # token included); confirmed there, where the types are compared as Sdf reads them.
            return UNSUPPORTED
        if match.group(5):  # the attribute has metadata: the value's end is not the line's
            return UNSUPPORTED
        lines[index] = lines[index][:match.start(4)] + new
    return "\n".join(lines).encode("utf-8")


def _value_texts(values: list[tuple[Sdf.ValueTypeName, Any, bool]]) -> list[str]:
    """How Sdf writes each value (type, value, uniform) in a usda attribute line: read from one small layer
    holding each distinct value once, so that every number is written by Sdf's own formatting."""
    # Each value's key made once (a Vt array's repr: 3 µs; MJCF's mujoco layer patches a dozen of them).
    keys = [(str(type_name), repr(value)) for type_name, value, _ in values]
    distinct: dict[tuple[str, str], int] = {}
    for key in keys:
        distinct.setdefault(key, len(distinct))
    layer = Sdf.Layer.CreateAnonymous("values.usda")
    spec = Sdf.PrimSpec(layer, "v", Sdf.SpecifierDef)
    done = set()
    for key, (type_name, value, _) in zip(keys, values):
        number = distinct[key]
        if number not in done:
            done.add(number)
            Sdf.AttributeSpec(spec, f"v{number}", type_name).default = value
    found = {}
    for line in layer.ExportToString().split("\n"):
        match = _ATTRIBUTE.match(line)
        if match is not None and match.group(3).startswith("v"):
            found[int(match.group(3)[1:])] = match.group(4)
    return [found[distinct[key]] for key in keys]
