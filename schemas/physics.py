"""Physics property cfgs: one universal base class per property group (Isaac Lab 3.0's ``isaaclab.sim.schemas``).

Field names and defaults follow Isaac Lab. Optional fields default to None, which means "leave as authored":
the writer authors a field, and applies the schema it belongs to, only when it is not None. Backend
subclasses live in ``schemas.physx`` (PhysX), ``schemas.newton`` (Newton) and ``schemas.mujoco`` (Newton's
MuJoCo solver); see ``schemas.routing`` for how each field reaches its USD attribute: under the namespace of
the class that *declares* it (``physics:*`` here), except for the documented exceptions, which carry a
``route(...)`` in their field metadata.

Units are SI with radians in every cfg; ``schemas.units`` converts to USD's degrees in one place.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar, dataclass_transform

import attrs

from usdforge.schemas.routing import route, usd_group
from usdforge.schemas.validators import (FieldValueError, bool_or_none, bool_value, float_or_none, int_in_range,
                                non_negative_or_none, number_in_range, one_of, one_of_or_none)

#: The ``physics:approximation`` tokens of UsdPhysics.MeshCollisionAPI.
MESH_APPROXIMATIONS = ("none", "convexDecomposition", "convexHull", "boundingSphere", "boundingCube",
                       "meshSimplification")

#: ``drive:<axis>:physics:type`` tokens of UsdPhysics.DriveAPI.
DRIVE_TYPES = ("force", "acceleration")

#: Minimal drive stiffness written by ``ensure_drives_exist`` (cfg units: N·m/rad or N/m).
MIN_DRIVE_STIFFNESS = 1e-3

_Cfg = TypeVar("_Cfg", bound=type)


# dataclass_transform tells type checkers and editors that the decorated class gets an __init__ from its
# annotated fields (attrs.frozen bound to a name is not recognised by their attrs support): without it,
# every cfg constructor call looks like a call with unexpected keyword arguments.
@dataclass_transform(frozen_default=True, field_specifiers=(attrs.field,))
def cfg_class(cls: _Cfg) -> _Cfg:
    """Every cfg class is frozen (attrs); slots are off so that multi-namespace classes can inherit from two
    property groups (NewtonMeshCollisionPropertiesCfg) without a slot layout conflict."""
    return attrs.frozen(cls, slots=False)


def float_field(lo: float | None = 0.0, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False,
                default: float | None = None, optional: bool = True, **route_kw: Any) -> Any:
    """An optional float field in [lo, hi] (ints are converted, so USD gets a float attribute).

    ``route_kw`` are passed to ``schemas.routing.route`` (a documented exception); none = the class route.
    """
    metadata = route(**route_kw) if route_kw else {}
    return attrs.field(default=default, converter=float_or_none,
                       validator=number_in_range(lo, hi, lo_open=lo_open, hi_open=hi_open, optional=optional),
                       metadata=metadata)


def int_field(lo: int | None = 0, hi: int | None = None, **route_kw: Any) -> Any:
    """An optional integer field in [lo, hi]."""
    metadata = route(**route_kw) if route_kw else {}
    return attrs.field(default=None, validator=int_in_range(lo, hi), metadata=metadata)


def bool_field(**route_kw: Any) -> Any:
    """An optional bool field."""
    metadata = route(**route_kw) if route_kw else {}
    return attrs.field(default=None, validator=bool_or_none, metadata=metadata)


def token_field(allowed: tuple[str, ...], **route_kw: Any) -> Any:
    """An optional token field: one of ``allowed``."""
    metadata = route(**route_kw) if route_kw else {}
    return attrs.field(default=None, validator=one_of_or_none(allowed), metadata=metadata)


def approximation_field(default: str, allowed: tuple[str, ...] = MESH_APPROXIMATIONS) -> Any:
    """``mesh_approximation_name`` redeclared by a cooking subclass with that subclass's token as default.

    The route is explicit: it stays ``physics:approximation`` on ``PhysicsMeshCollisionAPI`` although the
    subclass declaring it has a cooking namespace of its own.
    """
    return attrs.field(default=default, validator=one_of(allowed),
                       metadata=route("physics:approximation", schema="PhysicsMeshCollisionAPI"))


def deprecate_field_alias(cfg: Any, alias: str, canonical: str) -> None:
    """Forward a deprecated field to its canonical replacement (call from ``__attrs_post_init__``).

    When only ``alias`` is set: one ``DeprecationWarning`` and the value is copied into ``canonical``. When
    both are set the canonical value wins, silently (as Isaac Lab does). Either way the alias is then reset
    to None so that writers and serialization only ever see the canonical name.
    """
    value = getattr(cfg, alias)
    if value is None:
        return
    if getattr(cfg, canonical) is None:
        warnings.warn(f"{type(cfg).__name__}.{alias} is deprecated; use {canonical!r} instead", DeprecationWarning,
                      stacklevel=4)
        object.__setattr__(cfg, canonical, value)
    object.__setattr__(cfg, alias, None)


@usd_group("physics", "PhysicsMassAPI")
@cfg_class
class MassPropertiesCfg:
    """Mass of a rigid body (``UsdPhysics.MassAPI``).

    mass: Total mass in kg (float >= 0). Default None (leave as authored, or computed by the engine from
        density). Mass has precedence over density. Written to ``physics:mass``.
    density: Density in kg/m³ (float >= 0), used by the engine to compute the mass from the collision
        shapes. Default None (leave as authored). 0 means "ignored" in UsdPhysics. Written to
        ``physics:density``.
    """

    mass: float | None = attrs.field(default=None, converter=float_or_none, validator=non_negative_or_none)
    density: float | None = attrs.field(default=None, converter=float_or_none, validator=non_negative_or_none)


@usd_group("physics", "PhysicsRigidBodyAPI")
@cfg_class
class RigidBodyBaseCfg:
    """Universal rigid body properties (``UsdPhysics.RigidBodyAPI``).

    rigid_body_enabled: bool. Whether the prim takes part in rigid body simulation. Default None (leave as
        authored; UsdPhysics' fallback is True). Written to ``physics:rigidBodyEnabled``.
    kinematic_enabled: bool. Whether the body is moved by its animated transform instead of the solver.
        Default None (leave as authored; fallback False). Written to ``physics:kinematicEnabled``.
    disable_gravity: bool. Whether gravity is ignored for this body. Default None (leave as authored).
        Exception: written to ``physxRigidBody:disableGravity`` (applies ``PhysxRigidBodyAPI``) because that
        is the attribute PhysX and Newton both read.
    """

    rigid_body_enabled: bool | None = bool_field()
    kinematic_enabled: bool | None = bool_field()
    disable_gravity: bool | None = bool_field(attribute="physxRigidBody:disableGravity", schema="PhysxRigidBodyAPI")


@usd_group("physics", "PhysicsCollisionAPI")
@cfg_class
class CollisionBaseCfg:
    """Universal collision properties (``UsdPhysics.CollisionAPI``).

    collision_enabled: bool. Whether the shape collides. Default None (leave as authored; fallback True).
        Written to ``physics:collisionEnabled``.
    contact_offset: Distance in m (float >= 0) at which contacts start being generated. Default None (leave
        as authored; the engine picks one). Exception: written to ``physxCollision:contactOffset``
        (``PhysxCollisionAPI``); Newton reads it through its PhysX bridge.
    rest_offset: Distance in m (finite float, may be negative) at which two shapes come to rest; must be
        below contact_offset when both are set. Default None (leave as authored). Exception: written to
        ``physxCollision:restOffset`` (``PhysxCollisionAPI``).
    """

    collision_enabled: bool | None = bool_field()
    contact_offset: float | None = float_field(0.0, attribute="physxCollision:contactOffset",
                                               schema="PhysxCollisionAPI")
    rest_offset: float | None = float_field(None, attribute="physxCollision:restOffset", schema="PhysxCollisionAPI")

    def __attrs_post_init__(self) -> None:
        if self.contact_offset is not None and self.rest_offset is not None and not self.rest_offset < self.contact_offset:
            raise FieldValueError("rest_offset", f"expected a value below contact_offset ({self.contact_offset!r}), "
                                                 f"found {self.rest_offset!r}")


@usd_group("physics", "PhysicsMeshCollisionAPI")
@cfg_class
class MeshCollisionBaseCfg:
    """How a mesh collider is approximated (``UsdPhysics.MeshCollisionAPI``).

    mesh_approximation_name: str, one of the UsdPhysics ``physics:approximation`` tokens: "none" (the
        triangle mesh itself), "convexDecomposition", "convexHull", "boundingSphere", "boundingCube",
        "meshSimplification". Default None (leave as authored; fallback "none"). Written to
        ``physics:approximation``. The PhysX cooking subclasses (``schemas.physx``) default it to the
        token their cooking schema implies.
    """

    mesh_approximation_name: str | None = attrs.field(
        default=None, validator=one_of_or_none(MESH_APPROXIMATIONS),
        metadata=route("physics:approximation"))


@usd_group("drive:{axis}:physics", "PhysicsDriveAPI:{axis}")
@cfg_class
class JointDriveBaseCfg:
    """Universal joint drive properties (``UsdPhysics.DriveAPI``, instance ``angular`` or ``linear``).

    The drive instance (``<axis>``) comes from the joint: "angular" for a revolute joint, "linear" for a
    prismatic one. Angular values are SI per radian here and converted to USD's per-degree units.

    drive_type: str, "force" (effort through forces, subject to the body inertia) or "acceleration"
        (inertia-normalised, an ideal damped oscillator). Default None (leave as authored; fallback
        "force"). Written to ``drive:<axis>:physics:type``.
    max_force: Maximum drive force in N (linear) or torque in N·m (angular), float >= 0. Default None
        (leave as authored; fallback unlimited). Written to ``drive:<axis>:physics:maxForce``.
    max_effort: Deprecated alias of max_force (alone: DeprecationWarning, copied into max_force; with
        max_force set: discarded silently; always None after construction).
    stiffness: Drive stiffness, float >= 0, in N/m (linear) or N·m/rad (angular). Default None (leave as
        authored). Written to ``drive:<axis>:physics:stiffness``, per degree for angular drives.
    damping: Drive damping, float >= 0, in N·s/m (linear) or N·m·s/rad (angular). Default None (leave as
        authored). Written to ``drive:<axis>:physics:damping``, per degree for angular drives.
    ensure_drives_exist: bool. Writer-side, no attribute of its own: when True, a drive whose stiffness and
        damping both end up zero (or unauthored) gets stiffness ``MIN_DRIVE_STIFFNESS`` (1e-3 N·m/rad or
        N/m) so that backends such as Newton treat the joint as actuated. Default False.
    max_joint_velocity: Maximum joint velocity, float >= 0, in m/s (linear) or rad/s (angular). Default
        None (leave as authored). Exception: written to ``physxJoint:maxJointVelocity`` (``PhysxJointAPI``,
        the only USD home; Newton reads it through its PhysX bridge), in deg/s for angular joints.
    max_velocity: Deprecated alias of max_joint_velocity (same rules as max_effort).
    """

    drive_type: str | None = token_field(DRIVE_TYPES, attribute="drive:{axis}:physics:type")
    max_force: float | None = float_field()
    max_effort: float | None = float_field(writer_side=True)
    stiffness: float | None = float_field(per_degree=True)
    damping: float | None = float_field(per_degree=True)
    ensure_drives_exist: bool = attrs.field(default=False, validator=bool_value, metadata=route(writer_side=True))
    max_joint_velocity: float | None = float_field(attribute="physxJoint:maxJointVelocity", schema="PhysxJointAPI",
                                                   degrees=True)
    max_velocity: float | None = float_field(writer_side=True)

    def __attrs_post_init__(self) -> None:
        deprecate_field_alias(self, "max_velocity", "max_joint_velocity")
        deprecate_field_alias(self, "max_effort", "max_force")


@usd_group("physics", "PhysicsArticulationRootAPI")
@cfg_class
class ArticulationRootBaseCfg:
    """Universal articulation root properties (``UsdPhysics.ArticulationRootAPI`` on the root rigid body).

    articulation_enabled: bool. Whether the articulation is simulated. Default None (leave as authored).
        Exception: written to ``physxArticulation:articulationEnabled`` (``PhysxArticulationAPI``).
    fix_root_link: bool. Writer-side, no attribute of its own. True: the root body is fixed to the world
        by a ``UsdPhysics.FixedJoint`` with an empty body0 (created next to the other joints, in
        ``<parent>/joints/``, unless one exists; an existing one is enabled). False: an existing world
        fixed joint of the root body is disabled (``physics:jointEnabled = false``). Default None (leave the
        root as it is).
    """

    articulation_enabled: bool | None = bool_field(attribute="physxArticulation:articulationEnabled",
                                                   schema="PhysxArticulationAPI")
    fix_root_link: bool | None = bool_field(writer_side=True)


@usd_group("physics", "PhysicsMaterialAPI")
@cfg_class
class RigidBodyMaterialBaseCfg:
    """Universal physics material (``UsdPhysics.MaterialAPI``), bound to colliders with purpose "physics".

    static_friction: Static friction coefficient, float >= 0. Default 0.5 (Isaac Lab's). Written to
        ``physics:staticFriction``.
    dynamic_friction: Dynamic (kinetic) friction coefficient, float >= 0. Default 0.5. Written to
        ``physics:dynamicFriction``.
    restitution: Coefficient of restitution, float in [0, 1]. Default 0.0. Written to
        ``physics:restitution``.
    The defaults make a complete material when one is spawned; set a field to None to leave the authored
    value alone when modifying an existing material (in TOML, where there is no null, ``false`` means None
    for these three fields).
    """

    static_friction: float | None = float_field(0.0, default=0.5)
    dynamic_friction: float | None = float_field(0.0, default=0.5)
    restitution: float | None = float_field(0.0, 1.0, default=0.0)


#: Base class of each property group; a cfg field typed with one accepts any of its subclasses.
PROPERTY_GROUP_BASES = (MassPropertiesCfg, RigidBodyBaseCfg, CollisionBaseCfg, MeshCollisionBaseCfg,
                        JointDriveBaseCfg, ArticulationRootBaseCfg, RigidBodyMaterialBaseCfg)
