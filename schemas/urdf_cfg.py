"""``UrdfConverterCfg``: Isaac Lab's URDF converter cfg (``isaaclab.sim.converters.UrdfConverterCfg``).

Field names and defaults are Isaac Lab's. Fields Isaac Lab deprecated when its importer stopped supporting
them (``root_link_name``, ``convert_mimic_joints_to_normal_joints``, ``replace_cylinders_with_capsules``,
``NaturalFrequencyGainsCfg``) are implemented here. The only default that differs is ``fix_base``, which
Isaac Lab leaves required (``MISSING``); here it defaults to False so ``usdforge convert robot.urdf out/``
works without a config.

Gains and drive settings take either one value for every joint or a table ``{joint-name regex: value}``;
a regex must match a whole joint name (``re.fullmatch``), joints no pattern matches keep the default
behaviour, and a joint matched by two patterns is an error at conversion time.

Serialization: the gains field is a union of two attrs classes; its TOML/JSON form carries a ``type`` tag
(``gains = { type = "PDGainsCfg", stiffness = 100.0 }``), and without a tag a table with
``natural_frequency`` or ``damping_ratio`` is a ``NaturalFrequencyGainsCfg``, anything else a
``PDGainsCfg``. ``joint_drive = false`` in TOML means None (TOML has no null).
"""

from __future__ import annotations

import math
import re
import typing
from typing import Any

import attrs

from usdforge.schemas.converter_cfgs import COLLISION_TYPES, ROBOT_TYPES, AssetConverterBaseCfg
from usdforge.schemas.serialization import get_converter, register_hooks
from usdforge.schemas.validators import FieldValueError, bool_value

DRIVE_TYPES = ("acceleration", "force")
TARGET_TYPES = ("none", "position", "velocity")

#: A gain: one value for every joint, or ``{joint-name regex: value}``.
GainValue = dict[str, float] | float
#: A drive or target type: one token for every joint, or ``{joint-name regex: token}``.
TokenValue = dict[str, str] | str


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_patterns(name: str, table: dict) -> None:
    for pattern in table:
        if not isinstance(pattern, str):
            raise FieldValueError(name, f"expected joint-name patterns (strings) as keys, found {pattern!r}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise FieldValueError(name, f"{pattern!r} is not a valid regular expression ({exc})") from None


def gain_value(lo: float, *, lo_open: bool = False, optional: bool = True):
    """Validator: a finite number >= lo (> lo when lo_open), a table of patterns → such numbers, or None."""
    where = f"{'>' if lo_open else '>='} {lo:g}"

    def ok(number: Any) -> bool:
        return _number(number) and (number > lo if lo_open else number >= lo)

    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value is None and optional:
            return
        if isinstance(value, dict):
            _check_patterns(attribute.name, value)
            bad = {k: v for k, v in value.items() if not ok(v)}
            if bad:
                raise FieldValueError(attribute.name, f"expected numbers {where} per joint pattern, found {bad!r}")
            return
        if not ok(value):
            tail = " (or None)" if optional else ""
            raise FieldValueError(attribute.name, f"expected a number {where} or a table of joint-name pattern "
                                                  f"→ number{tail}, found {value!r}")

    return check


def token_value(allowed: tuple[str, ...]):
    """Validator: one of ``allowed``, or a table of joint-name patterns → one of ``allowed``."""

    def check(instance: Any, attribute: Any, value: Any) -> None:
        if isinstance(value, dict):
            _check_patterns(attribute.name, value)
            bad = {k: v for k, v in value.items() if v not in allowed}
            if not bad:
                return
        elif value in allowed:
            return
        raise FieldValueError(attribute.name, f"expected one of {', '.join(map(repr, allowed))} or a table of "
                                              f"joint-name pattern → one of them, found {value!r}")

    return check


def _gain_converter(value: Any) -> Any:
    """attrs converter: ints become floats (in tables too), so USD gets float attributes."""
    if isinstance(value, dict):
        return {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@attrs.frozen(kw_only=True)
class PDGainsCfg:
    """PD gains of the joint drives.

    stiffness: Drive stiffness in N·m/rad (revolute) or N/m (prismatic), float >= 0, or a table
        ``{joint-name regex: value}``. Default None: no stiffness from usdforge (URDF has none), i.e. 0.
        With ``target_type = "velocity"`` this is the drive's strength in joint-velocity space and is
        written as the drive's damping (stiffness then 0). Written per degree for angular drives.
    damping: Drive damping in N·m·s/rad or N·s/m, float >= 0, or a table. Default None: the joint's URDF
        ``<dynamics damping>`` (0 when absent). Ignored (0) when ``target_type = "velocity"``.
    """

    stiffness: GainValue | None = attrs.field(default=None, converter=_gain_converter, validator=gain_value(0.0))
    damping: GainValue | None = attrs.field(default=None, converter=_gain_converter, validator=gain_value(0.0))


@attrs.frozen(kw_only=True)
class NaturalFrequencyGainsCfg:
    r"""Gains from a natural frequency: ``stiffness = m·ω²``, ``damping = 2·r·ω·m``.

    ``m`` is the joint's equivalent inertia at the rest pose: the diagonal entry of the joint-space mass
    matrix (kg·m² for revolute, kg for prismatic joints), computed by ``rules.urdf.drives``.

    natural_frequency: ω in rad/s, float > 0, or a table ``{joint-name regex: value}``. Required. With
        ``target_type = "velocity"`` it is the velocity loop's bandwidth: damping = m·ω, stiffness 0.
    damping_ratio: r, float >= 0, or a table. Default 0.005 (Isaac Lab's). 1 is critically damped, below 1
        under-, above 1 over-damped. Ignored for ``target_type = "velocity"``.
    """

    natural_frequency: GainValue = attrs.field(converter=_gain_converter,
                                               validator=gain_value(0.0, lo_open=True, optional=False))
    damping_ratio: GainValue = attrs.field(default=0.005, converter=_gain_converter,
                                           validator=gain_value(0.0, optional=False))


@attrs.frozen(kw_only=True)
class JointDriveCfg:
    """Drives (``UsdPhysics.DriveAPI``) for every revolute, continuous and prismatic joint.

    drive_type: "force" (effort through forces, subject to the body inertia) or "acceleration"
        (inertia-normalised, an ideal damped oscillator), or a table ``{joint-name regex: token}``.
        Default "force".
    target_type: "position", "velocity" or "none" (stiffness and damping 0: a passive joint that still
        has its effort limit), or a table. Default "position".
    gains: ``PDGainsCfg`` (default: ``PDGainsCfg()``, no stiffness, URDF damping) or
        ``NaturalFrequencyGainsCfg``.

    Every drive also gets ``maxForce`` = the URDF ``<limit effort>`` (N or N·m; unlimited when absent).
    """

    PDGainsCfg: typing.ClassVar[type] = PDGainsCfg
    NaturalFrequencyGainsCfg: typing.ClassVar[type] = NaturalFrequencyGainsCfg

    drive_type: TokenValue = attrs.field(default="force", validator=token_value(DRIVE_TYPES))
    target_type: TokenValue = attrs.field(default="position", validator=token_value(TARGET_TYPES))
    gains: PDGainsCfg | NaturalFrequencyGainsCfg = attrs.field(factory=PDGainsCfg)

    @gains.validator
    def _check_gains(self, attribute: Any, value: Any) -> None:
        if not isinstance(value, (PDGainsCfg, NaturalFrequencyGainsCfg)):
            raise FieldValueError("gains", f"expected PDGainsCfg or NaturalFrequencyGainsCfg, found {value!r}")


def _one_of(allowed: tuple[str, ...]):
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value not in allowed:
            raise FieldValueError(attribute.name, f"expected one of {', '.join(map(repr, allowed))}, found {value!r}")

    return check


def _package_paths(instance: Any, attribute: Any, value: Any) -> None:
    for index, entry in enumerate(value):
        if not (isinstance(entry, dict) and set(entry) == {"name", "path"}
                and all(isinstance(v, str) and v for v in entry.values())):
            raise FieldValueError(attribute.name, f"expected {{name, path}} tables of non-empty strings, found "
                                                  f"{entry!r} at [{index}]")


_XACRO_ARG_NAME = re.compile(r"^[^\s:=$(){}]+$")


def _xacro_args(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, dict):
        raise FieldValueError(attribute.name, f"expected a table of argument name → string value, found {value!r}")
    for name, text in value.items():
        if not (isinstance(name, str) and _XACRO_ARG_NAME.match(name)):
            raise FieldValueError(attribute.name, f"{name!r} is not a xacro argument name")
        if not isinstance(text, str):
            raise FieldValueError(attribute.name, f"{name}: expected a string (xacro arguments are text), "
                                                  f"found {text!r}")
    if value and not str(instance.asset_path).lower().endswith(".xacro"):
        raise FieldValueError(attribute.name, f"only a xacro source (a file named *.xacro) takes xacro arguments, "
                                              f"and {instance.asset_path} is not one")


def _non_negative(instance: Any, attribute: Any, value: Any) -> None:
    if not (_number(value) and value >= 0.0):
        raise FieldValueError(attribute.name, f"expected a number >= 0, found {value!r}")


@attrs.frozen(kw_only=True)
class UrdfConverterCfg(AssetConverterBaseCfg):
    """Converting a URDF robot to an articulated USD asset (see docs/usd_layout.md for the output).

    fix_base: bool. Fix every root link to the world with a ``UsdPhysics.FixedJoint`` (body0 = the robot's Xform).
        Default False: floating, unless the URDF itself fixes it (a root link with no inertial, visual or
        collision - a "world" link - attached to the robot by a fixed joint).
    root_link_name: str or None. Link (URDF name; a link merged into another names that body) that gets
        ``ArticulationRootAPI`` and, with fix_base, the fixed joint to the world. Default None: the root
        of the URDF tree. Joints keep pointing parent → child from the URDF root; engines re-root.
    link_density: Density in kg/m³, float >= 0, for links without mass (no ``<inertial>``, or mass 0):
        their mass and inertia come from their collision shapes at this density. Default 0.0: such links
        get usdforge's small placeholder mass (``rules.robot.inertia.MASSLESS_MASS``) and a warning,
        because a dynamic body with mass 0 is invalid in UsdPhysics.
    balance_inertia: bool. Repair link inertias whose principal moments break the triangle inequality
        (A + B >= C) as MuJoCo's ``balanceinertia`` does: all three moments become their mean. Default
        False: the source's inertia is written as given, with a warning naming the file, line and link
        (MuJoCo's USD decoder then refuses the whole asset).
    merge_fixed_joints: bool. Remove fixed joints and merge each child link's visuals, collisions and
        inertial (parallel-axis theorem) into its parent, chains included; merged links stay findable as
        frames (child Xforms with ``usdforge:sourceName``) of the body they merged into. Default True.
        When False, only links with no inertial, visual or collision ("ghost" links) on fixed joints
        become frames.
    convert_mimic_joints_to_normal_joints: bool. Write ``<mimic>`` followers as independent joints (no
        coupling). Default False: the coupling is authored (``usdforge:mimic:*``, ``PhysxMimicJointAPI``,
        ``NewtonMimicAPI``).
    joint_drive: ``JointDriveCfg`` or None. Drives of the movable joints. Default ``JointDriveCfg()``
        (force drives, position targets, no stiffness, URDF damping). None: drives carry only the effort
        limit (``maxForce``) - no type, gains or targets from usdforge.
    collision_from_visuals: bool. Links with no ``<collision>`` get colliders copied from their visuals.
        Default False.
    collision_type: "Convex Hull", "Convex Decomposition", "Bounding Sphere" or "Bounding Cube": the
        ``physics:approximation`` of mesh colliders (primitives stay exact). Default "Convex Hull".
        "Convex Decomposition" decomposes with CoACD when it is installed (``pip install
        'usdforge[decomposition]'``: each part becomes a convex-hull collider); without it a warning says
        so and ``convexDecomposition`` is authored for the engine to do.
    self_collision: bool. Whether links of one articulation collide with each other. Default False:
        ``physxArticulation:enabledSelfCollisions = false`` on the articulation root (PhysX, Newton).
    replace_cylinders_with_capsules: bool. Collision cylinders become capsules of the same radius and
        cylinder length. Default False.
    merge_mesh: bool. Merge each link's visual meshes into one mesh per material. Default False.
    ros_package_paths: list of ``{name, path}`` tables: ROS package folders for ``package://NAME/...``
        (and a xacro's ``$(find NAME)``).
        Default empty: a package NAME is then looked for inside the model's own tree only (a folder named
        NAME, or declaring NAME in its ``package.xml``, or the ancestor holding the named file: the rules
        and the boundary are in ``rules.urdf.paths``). The pipeline fills it from a library entry's
        ``packages`` and ``--package``.
    xacro_args: dict of str → str: arguments of a xacro source (``asset_path`` ending in ``.xacro``), as
        ``name:=value`` on xacro's command line: ``{"ur_type": "ur5e", "name": "ur5e"}``. Default empty:
        every ``<xacro:arg>`` takes its default. A xacro is expanded before reading (``rules.urdf.xacro``);
        ``$(find pkg)`` resolves through ``ros_package_paths``, every file it reads re-converts the asset
        when edited, and the arguments are recorded with the cfg in the output's ``<name>.usdforge.toml``.
        Not an Isaac Lab field (its importer takes URDF only). Giving arguments for a non-xacro asset is
        an error.
    xacro_env: dict of str → str: what ``$(optenv NAME default)`` gives for NAME in a xacro source
        (``{"JACKAL_FRONT_ACCESSORY_FENDER": "1"}``). Default empty: every ``$(optenv)`` gives its default,
        with a warning. The process environment is never read; the values are part of the cfg (and of
        the cache key), so a build stays reproducible. A value the expansion never reads is a warning.
    allow_missing_files: bool. Convert a robot whose mesh or texture files are missing (or name a ROS
        package that cannot be found) without them, with one warning giving the count. Default False: a
        missing file fails the conversion (one located line per file) and nothing is written - a missing
        collision mesh changes the physics, a missing visual mesh the picture.
    tree_root: folder or None. The library manifest's folder (the pipeline sets it): it bounds the search
        for a ROS package not given in ``ros_package_paths`` when it encloses the asset
        (``rules.urdf.paths``). Default None: the nearest enclosing folder holding ``.git`` or a ROS
        workspace's ``src/`` bounds it. A location: not part of the config digest.
    robot_type: One of Isaac Sim's robot types (Default, End Effector, Manipulator, Humanoid, Wheeled,
        Holonomic, Quadruped, Mobile Manipulators, Aerial), written as ``isaac:robotType`` with
        ``IsaacRobotAPI`` on the root prim. Default "Default".
    run_asset_transformer: bool. Write the layered asset: the interface layer ``<name>.usda`` plus
        payload layers (``rules.outputs.ROBOT_PAYLOAD_LAYERS``). Default True (Isaac Lab's). False: one
        file.
    make_instanceable: bool (from AssetConverterBaseCfg). Visual meshes become instanceable references
        to shared prototypes. Default True.
    articulation_cfg: bool. Write Isaac Lab 3's ``ArticulationCfg`` for the asset beside it, ``<stem>_cfg.py``
        (``rules.robot.isaaclab_cfg``: spawn, default joint pose inside the limits, base pose, implicit
        actuators from the drives). Default True; False writes none.
    """

    JointDriveCfg: typing.ClassVar[type] = JointDriveCfg

    fix_base: bool = attrs.field(default=False, validator=bool_value)
    root_link_name: str | None = None
    link_density: float = attrs.field(default=0.0, converter=_gain_converter, validator=_non_negative)
    balance_inertia: bool = attrs.field(default=False, validator=bool_value)
    merge_fixed_joints: bool = attrs.field(default=True, validator=bool_value)
    convert_mimic_joints_to_normal_joints: bool = attrs.field(default=False, validator=bool_value)
    joint_drive: JointDriveCfg | None = attrs.field(factory=JointDriveCfg)
    collision_from_visuals: bool = attrs.field(default=False, validator=bool_value)
    collision_type: str = attrs.field(default="Convex Hull", validator=_one_of(tuple(COLLISION_TYPES)))
    self_collision: bool = attrs.field(default=False, validator=bool_value)
    replace_cylinders_with_capsules: bool = attrs.field(default=False, validator=bool_value)
    merge_mesh: bool = attrs.field(default=False, validator=bool_value)
    ros_package_paths: list[dict[str, str]] = attrs.field(factory=list, validator=_package_paths)
    xacro_args: dict[str, str] = attrs.field(factory=dict, validator=_xacro_args)
    xacro_env: dict[str, str] = attrs.field(factory=dict, validator=_xacro_args)
    allow_missing_files: bool = attrs.field(default=False, validator=bool_value)
    tree_root: str | None = None
    robot_type: str = attrs.field(default="Default", validator=_one_of(ROBOT_TYPES))
    run_asset_transformer: bool = attrs.field(default=True, validator=bool_value)
    articulation_cfg: bool = attrs.field(default=True, validator=bool_value)


# ---- cattrs hooks for the unions (plain union hooks would be shadowed; see engineering_notes.md) ----

def _union_args(tp: Any) -> set:
    origin = typing.get_origin(tp)
    if origin is typing.Union or (origin is not None and origin.__name__ == "UnionType"):
        return set(typing.get_args(tp))
    return set(typing.get_args(tp)) if type(tp).__name__ == "UnionType" else set()


_GAINS_UNION = {PDGainsCfg, NaturalFrequencyGainsCfg}
_GAINS_CLASSES = {cls.__name__: cls for cls in _GAINS_UNION}
_GAIN_TYPES = {dict[str, float], float}
_TOKEN_TYPES = {dict[str, str], str}


def _structure_gains(value: Any, _: Any) -> Any:
    if isinstance(value, tuple(_GAINS_UNION)):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"expected a table of PDGainsCfg or NaturalFrequencyGainsCfg fields, found {value!r}")
    data = dict(value)
    tag = data.pop("type", None)
    if tag is not None and tag not in _GAINS_CLASSES:
        raise ValueError(f"not a valid gains type {tag!r} (expected PDGainsCfg or NaturalFrequencyGainsCfg)")
    cls = _GAINS_CLASSES[tag] if tag else (
        NaturalFrequencyGainsCfg if {"natural_frequency", "damping_ratio"} & set(data) else PDGainsCfg)
    return get_converter().structure(data, cls)


def _unstructure_gains(value: Any) -> dict[str, Any]:
    return {"type": type(value).__name__, **get_converter().unstructure(value, type(value))}


def _structure_number_or_table(value: Any, tp: Any) -> Any:
    """A number or a table of numbers stays as it is; attrs validators give the readable errors."""
    if value is None and type(None) in _union_args(tp):
        return None
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    return value


def _install_hooks(converter) -> None:
    converter.register_structure_hook_func(lambda tp: _union_args(tp) == _GAINS_UNION, _structure_gains)
    converter.register_unstructure_hook_func(lambda tp: _union_args(tp) == _GAINS_UNION, _unstructure_gains)
    converter.register_structure_hook_func(
        lambda tp: (_union_args(tp) - {type(None)}) in (_GAIN_TYPES, _TOKEN_TYPES), _structure_number_or_table)


register_hooks(_install_hooks)
