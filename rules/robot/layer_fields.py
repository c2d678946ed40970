"""Which converter-cfg fields each output layer of a robot reads: the declarations that key the per-layer
reuse of a rebuild (``pipeline.layer_keys``, ``rules.robot.layer_reuse``) and the cfg view that holds
only them. No pxr here.

A robot's layered output (``run_asset_transformer``) is a set of *units*, each a file (or a group of
files) reused on its own: the layers of ``rules.outputs.ROBOT_LAYER_FILES`` (base, instances, geometry,
materials, physics, physx, newton, mujoco), the interface layer ``<stem>.usda`` and Isaac Lab's
``<stem>_cfg.py``. A unit's bytes are a function of the intermediate (the robot as read from its source:
``rules.robot.intermediate``; its key holds ``READ_FIELDS``) and of the cfg fields it declares in
``FIELD_UNITS``. A unit's reuse key is built through a ``FieldView`` of the cfg that holds only its
declared fields (``UndeclaredField`` on any other): the key holds every declared field and nothing else.

Each layer's author in ``rules.robot.writer`` reads its options through the same view
(``writer.unit_options``), so an author that reads a field its layer does not declare fails with
``UndeclaredField``. MJCF's own authoring steps (``rules.mjcf.author``: drives, actuators, tendons,
contacts, the scene) read the cfg through the view of the layer they write too, and write nothing into a
layer restored from the cache (``rules.mjcf.usd.MjcfUsd.spec``). What still reads the whole cfg: the URDF
model rules (``rules.urdf.convert.apply_cfg``), which run before the authors; for them, and for every
unit, the declarations are proven by tests: tests/test_layer_fields.py changes every field of every
converter cfg to another valid value and checks that only declaring units change bytes, that each unit
keeps its bytes when every field it does not declare changes at once, and that rebuilds (one edit, or
edits accumulated in one folder) equal cold conversions; bench/differential.py edits robot cfgs among its
random steps. ``field_table`` prints the map that docs/usd_layout.md and the README show (generated, so it
cannot drift).
"""

from __future__ import annotations

import functools
from typing import Any

import attrs

#: Fields that decide what the source reads as (the intermediate), by kind: every unit depends on them.
READ_FIELDS = {
    "urdf": ("ros_package_paths", "xacro_args", "xacro_env", "allow_missing_files", "tree_root", "allowed_roots"),
    "mjcf": ("allowed_roots",),
}
#: Fields no output byte depends on: where the files are and whether to convert at all.
NO_OUTPUT_FIELDS = ("asset_path", "usd_dir", "usd_file_name", "force_usd_conversion")

#: The units of a layered robot output, in the order they are listed.
UNITS = ("base", "instances", "geometry", "materials", "physics", "physx", "newton", "mujoco", "interface",
         "articulation_cfg")

#: Fields that reshape the robot model (merged links, moved colliders, coupled joints, the base): every
#: layer that writes bodies, shapes or joints reads them.
_STRUCTURE = ("base", "instances", "materials", "physics", "physx", "newton", "mujoco", "articulation_cfg")
_JOINTS = ("physics", "physx", "newton", "mujoco", "articulation_cfg")
#: Every layer file: ``run_asset_transformer`` decides whether there are layers at all.
_ALL_LAYERS = ("base", "instances", "geometry", "materials", "physics", "physx", "newton", "mujoco")
_COMMON = {
    "make_instanceable": ("instances",),
    "collision_from_visuals": ("instances", "materials", "physics", "physx", "newton", "mujoco"),
    # "Convex Decomposition" decomposes mesh colliders into parts (geometry prototypes, the colliders).
    "collision_type": ("instances", "geometry", "physics"),
    "robot_type": ("base",),
    "run_asset_transformer": _ALL_LAYERS + ("articulation_cfg",),
    "articulation_cfg": ("articulation_cfg",),
}

#: Field → the units that read it, by kind (besides ``READ_FIELDS``, which every unit depends on through
#: the intermediate). "interface" is not listed: it holds the provenance record, whose cfg digest covers
#: every field, so it is authored again on every rebuild (a few hundred bytes).
FIELD_UNITS: dict[str, dict[str, tuple[str, ...]]] = {
    "urdf": {**_COMMON,
             "fix_base": _STRUCTURE,
             "root_link_name": _STRUCTURE,
             "link_density": ("physics",),
             "balance_inertia": ("physics",),
             "merge_fixed_joints": _STRUCTURE,
             "convert_mimic_joints_to_normal_joints": _JOINTS,
             "joint_drive": ("physics", "articulation_cfg"),
             "self_collision": ("physx",),
             "replace_cylinders_with_capsules": ("instances", "physics"),
             "merge_mesh": ("instances", "geometry", "materials")},
    "mjcf": {**_COMMON,
             "merge_mesh": ("instances", "geometry", "materials", "mujoco"),
             "self_collision": ("physics", "physx"),
             "import_physics_scene": _JOINTS,
             "fix_base": _STRUCTURE,
             "link_density": ("physics", "mujoco"),
             "override_gain_type": ("physics", "mujoco", "articulation_cfg"),
             "override_bias_type": ("physics", "mujoco", "articulation_cfg"),
             "override_gain_prm": ("physics", "mujoco", "articulation_cfg"),
             "override_bias_prm": ("physics", "mujoco", "articulation_cfg"),
             "articulation_cfg_keyframe": ("articulation_cfg",)},
}



def _decomposition_only(collision_type: str) -> str:
    """``collision_type`` as the shapes see it: "Convex Decomposition" (prototypes decomposed into convex
    parts, named ``*_convex``) or, for every other value, "Convex Hull" (the approximation token itself is
    the physics layer's)."""
    return collision_type if collision_type == "Convex Decomposition" else "Convex Hull"


#: Fields a unit sees only in part, by unit: field → the function giving what the unit sees (one
#: representative per class of values it cannot tell apart). The view hands the unit that value and its key
#: holds it, so an edit within a class (a collision approximation other than decomposition) leaves the
#: unit's key, and its bytes, alone: the shapes are not re-authored for a new ``physics:approximation``.
PROJECTIONS: dict[str, dict[str, Any]] = {"instances": {"collision_type": _decomposition_only},
                                           "geometry": {"collision_type": _decomposition_only}}

#: Unit → the cfg fields it reads (``FIELD_UNITS`` turned around), by kind; "interface": every field.
LAYER_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    kind: {unit: tuple(f for f, units in fields.items() if unit in units) for unit in UNITS if unit != "interface"}
    for kind, fields in FIELD_UNITS.items()}


class UndeclaredField(AttributeError):
    """A unit read a cfg field it does not declare (``LAYER_FIELDS``): its reuse key would be wrong."""


class FieldView:
    """A cfg seen through one unit's declaration: its declared fields (and any non-field attribute of
    the cfg class), and ``UndeclaredField`` for every other field."""

    __slots__ = ("_cfg", "_fields", "_unit", "_projections", "_undeclared")

    def __init__(self, cfg: Any, fields: tuple[str, ...], unit: str = "?"):
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "_fields", frozenset(fields))
        object.__setattr__(self, "_unit", unit)
        object.__setattr__(self, "_projections", PROJECTIONS.get(unit, {}))
        # The cfg's fields the unit may not read, found once (attrs.fields_dict makes a dict per call).
        object.__setattr__(self, "_undeclared", _field_names(type(cfg)) - self._fields)

    def __getattr__(self, name: str) -> Any:
        cfg = object.__getattribute__(self, "_cfg")
        if name in object.__getattribute__(self, "_undeclared"):
            raise UndeclaredField(f"the {object.__getattribute__(self, '_unit')} unit read the cfg field "
                                  f"'{name}', which it does not declare (rules.robot.layer_fields)")
        projection = object.__getattribute__(self, "_projections").get(name)
        return getattr(cfg, name) if projection is None else projection(getattr(cfg, name))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a cfg view is read-only")


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    """The attrs fields of the cfg class ``cls``, by name."""
    return frozenset(attrs.fields_dict(cls))


def unit_fields(kind: str, unit: str) -> tuple[str, ...]:
    """The fields ``unit`` of a ``kind`` output reads, the intermediate's included."""
    return (*READ_FIELDS[kind], *LAYER_FIELDS[kind][unit])


def view(cfg: Any, kind: str, unit: str) -> FieldView:
    """``cfg`` as ``unit`` may see it."""
    return FieldView(cfg, unit_fields(kind, unit), unit)


def field_table(kind: str) -> str:
    """The field → units map of ``kind`` as a Markdown table (docs/usd_layout.md and the README embed it)."""
    from usdforge.pipeline.kinds import cfg_class

    rows = ["| field | units that read it |", "|---|---|"]
    for field in attrs.fields(cfg_class(kind)):
        if field.name in NO_OUTPUT_FIELDS:
            units = "none (where the files are, or whether to convert)"
        elif field.name in READ_FIELDS[kind]:
            units = "every unit, through the intermediate (the robot as read)"
        else:
            units = ", ".join(unit + (f" ({PROJECTED[field.name]})" if field.name in PROJECTIONS.get(unit, {}) else "")
                              for unit in FIELD_UNITS[kind][field.name])
        rows.append(f"| `{field.name}` | {units} |")
    return "\n".join(rows)


#: How a projected field reads in the table.
PROJECTED = {"collision_type": "only whether it is Convex Decomposition"}


def documented_tables() -> str:
    """The generated section of docs/usd_layout.md: one table per robot kind."""
    return "\n\n".join(f"{kind.upper()} (`{kind}`):\n\n{field_table(kind)}" for kind in FIELD_UNITS)


if __name__ == "__main__":  # python -m usdforge.rules.robot.layer_fields: the tables for the docs
    print(documented_tables())
