"""Authoring cfgs onto USD prims: each routed field → its attribute, its applied schema applied once.

Typed UsdPhysics APIs apply the schemas they define (``UsdPhysics.RigidBodyAPI.Apply``); schemas that
usd-core does not ship (PhysX, Newton, MuJoCo) are added by name and their attributes created with the
value's type. Fields that are None are skipped: None means "leave as authored".
"""

from __future__ import annotations

from typing import Any

import attrs
from pxr import Sdf, Usd, UsdPhysics

from schemas.routing import field_route
from schemas.units import per_radian_to_per_degree

#: Single-apply UsdPhysics schemas by applied-schema name.
_TYPED_SCHEMAS = {
    "PhysicsRigidBodyAPI": UsdPhysics.RigidBodyAPI,
    "PhysicsMassAPI": UsdPhysics.MassAPI,
    "PhysicsCollisionAPI": UsdPhysics.CollisionAPI,
    "PhysicsMeshCollisionAPI": UsdPhysics.MeshCollisionAPI,
    "PhysicsArticulationRootAPI": UsdPhysics.ArticulationRootAPI,
    "PhysicsMaterialAPI": UsdPhysics.MaterialAPI,
    "PhysicsFilteredPairsAPI": UsdPhysics.FilteredPairsAPI,
}
#: Multi-apply UsdPhysics schemas, written ``Name:instance``.
_TYPED_MULTI_SCHEMAS = {"PhysicsDriveAPI": UsdPhysics.DriveAPI, "PhysicsLimitAPI": UsdPhysics.LimitAPI}


def apply_schema(prim: Usd.Prim, schema: str) -> None:
    """Apply ``schema`` (``PhysicsMassAPI``, ``PhysicsDriveAPI:angular``, ``PhysxRigidBodyAPI``) once."""
    if schema in prim.GetAppliedSchemas():
        return
    name, _, instance = schema.partition(":")
    if name in _TYPED_SCHEMAS and not instance:
        _TYPED_SCHEMAS[name].Apply(prim)
    elif name in _TYPED_MULTI_SCHEMAS and instance:
        _TYPED_MULTI_SCHEMAS[name].Apply(prim, instance)
    else:
        prim.AddAppliedSchema(schema)


def _value_type(value: Any) -> Sdf.ValueTypeName:
    if isinstance(value, bool):
        return Sdf.ValueTypeNames.Bool
    if isinstance(value, int):
        return Sdf.ValueTypeNames.Int
    if isinstance(value, float):
        return Sdf.ValueTypeNames.Float
    if isinstance(value, str):
        return Sdf.ValueTypeNames.Token
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float)) for v in value):
        return {3: Sdf.ValueTypeNames.Float3}.get(len(value), Sdf.ValueTypeNames.FloatArray)
    raise TypeError(f"no USD type for {value!r}")


def set_attribute(prim: Usd.Prim, name: str, value: Any) -> Usd.Attribute:
    """Set ``name`` on ``prim``: the schema's declared type when a schema defines it, else the value's."""
    attribute = prim.GetAttribute(name)
    if not attribute or not attribute.GetTypeName():
        attribute = prim.CreateAttribute(name, _value_type(value), custom=False)
    type_name = attribute.GetTypeName()
    if type_name == Sdf.ValueTypeNames.Int and isinstance(value, float) and value.is_integer():
        value = int(value)
    attribute.Set(value)
    return attribute


def author_cfg(prim: Usd.Prim, cfg: Any, axis: str | None = None) -> list[str]:
    """Author every non-None routed field of ``cfg`` on ``prim``; return the attribute names written.

    axis: the drive axis ("angular" or "linear") for routes containing ``{axis}``; per-degree fields
        are converted from per radian when the axis is angular.
    """
    written = []
    for field in attrs.fields(type(cfg)):
        value = getattr(cfg, field.name)
        if value is None:
            continue
        found = field_route(type(cfg), field.name)
        if found is None:
            continue
        if "{axis}" in found.attribute and axis is None:
            raise ValueError(f"{type(cfg).__name__}.{field.name} needs a drive axis (angular or linear)")
        name = found.attribute.format(axis=axis)
        if found.per_degree and axis == "angular":
            value = per_radian_to_per_degree(value)
        if found.schema is not None:
            apply_schema(prim, found.schema.format(axis=axis))
        set_attribute(prim, name, value)
        written.append(name)
    return written
