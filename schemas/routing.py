"""Routing metadata: which USD attribute and applied schema each cfg field is written to.

The writer (`schemas.writer`) routes every field to the namespace of the class that *declares* it, so a
subclass instance authors several namespaces on one prim. The routing is data: a class decorator gives
the class's namespace and applied schema, and field metadata gives the exceptions.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

_USD_GROUP = "__usd_group__"


class UsdRoute(NamedTuple):
    """Where one cfg field lands on a prim.

    attribute: full USD attribute name; may contain ``{axis}`` for multi-apply drive schemas.
    schema: applied API schema name (``PhysicsRigidBodyAPI``, ``PhysxRigidBodyAPI``, ``PhysicsDriveAPI:{axis}``)
        or None for a raw attribute with no applied schema.
    per_degree: the value is per radian in the cfg (SI) and per degree in USD when the axis is angular
        (drive stiffness N·m/rad → N·m/deg, damping N·m·s/rad → N·m·s/deg).
    degrees: the value is in radians (or rad/s) in the cfg and in degrees (deg/s) in USD when the axis is
        angular (``physxJoint:maxJointVelocity``).
    Both conversions need the joint's axis ("angular" or "linear"); linear values are written unchanged.
    """

    attribute: str
    schema: str | None
    per_degree: bool = False
    degrees: bool = False

    @property
    def needs_axis(self) -> bool:
        """Whether authoring this route needs the drive axis (a ``{axis}`` placeholder or a unit conversion)."""
        return "{axis}" in self.attribute or "{axis}" in (self.schema or "") or self.per_degree or self.degrees


def usd_group(namespace: str | None, schema: str | None):
    """Class decorator: fields declared on this class go to ``namespace:camelCase`` under ``schema``.

    ``namespace=None`` marks a class whose own fields are not USD attributes (writer-side logic only).
    """

    def decorate(cls):
        setattr(cls, _USD_GROUP, (namespace, schema))
        return cls

    return decorate


def route(attribute: str | None = None, schema: str | None = "__class__", per_degree: bool = False,
          writer_side: bool = False, degrees: bool = False) -> dict[str, Any]:
    """Field metadata overriding the class route (the documented exceptions).

    attribute: full attribute name instead of ``namespace:camelCase``.
    schema: applied schema instead of the class's; None for a raw attribute.
    per_degree: per radian in the cfg, per degree in USD for angular axes (see ``UsdRoute``).
    degrees: radians (rad/s) in the cfg, degrees (deg/s) in USD for angular axes (see ``UsdRoute``).
    writer_side: the field is logic for the writer, never an attribute of its own.
    """
    return {"usd_route": {"attribute": attribute, "schema": schema, "per_degree": per_degree,
                          "degrees": degrees, "writer_side": writer_side}}


def camel_case(snake: str) -> str:
    """``contact_margin`` → ``contactMargin``; single tokens are unchanged (``gravcomp``)."""
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def declaring_class(cls: type, field_name: str) -> type:
    """The class in ``cls``'s MRO whose own attrs fields include ``field_name``."""
    for klass in cls.__mro__:
        own = klass.__dict__.get("__attrs_attrs__")
        if own is None:
            continue
        for attribute in own:
            if attribute.name == field_name and not attribute.inherited:
                return klass
    raise KeyError(f"{cls.__name__} has no field {field_name!r}")


def field_route(cls: type, field_name: str) -> UsdRoute | None:
    """The route of one field of an attrs cfg class, or None for writer-side fields."""
    field = attrs.fields_dict(cls)[field_name]
    override = field.metadata.get("usd_route", {})
    if override.get("writer_side"):
        return None
    owner = declaring_class(cls, field_name)
    namespace, schema = getattr(owner, _USD_GROUP, (None, None))
    # The decorator is read from the declaring class itself, not inherited from a parent.
    if _USD_GROUP not in owner.__dict__:
        namespace, schema = None, None
    attribute = override.get("attribute") or (f"{namespace}:{camel_case(field_name)}" if namespace else None)
    if attribute is None:
        return None
    if override.get("schema", "__class__") != "__class__":
        schema = override["schema"]
    return UsdRoute(attribute, schema, bool(override.get("per_degree", False)), bool(override.get("degrees", False)))


def routing_table(cls: type) -> dict[str, UsdRoute]:
    """Every routed field of ``cls`` → its route (for docs and tests)."""
    table = {}
    for field in attrs.fields(cls):
        found = field_route(cls, field.name)
        if found is not None:
            table[field.name] = found
    return table
