"""Physics property cfgs: the universal (``physics:*``) base classes.

Field names and defaults follow Isaac Lab's ``isaaclab.sim.schemas``. Every field defaults to None, which
means "leave as authored": the writer authors a field, and applies its schema, only when it is not None.
Backend subclasses (PhysX, Newton, MuJoCo) extend these classes; see ``schemas.routing`` for how each
field reaches its USD attribute.
"""

from __future__ import annotations

import attrs

from schemas.routing import route, usd_group
from schemas.validators import non_negative_or_none, one_of_or_none

#: The ``physics:approximation`` tokens of UsdPhysics.MeshCollisionAPI.
MESH_APPROXIMATIONS = ("none", "convexDecomposition", "convexHull", "boundingSphere", "boundingCube",
                       "meshSimplification")


@usd_group("physics", "PhysicsMassAPI")
@attrs.frozen
class MassPropertiesCfg:
    """Mass of a rigid body (``UsdPhysics.MassAPI``).

    mass: Total mass in kg. Default None (leave as authored, or computed by the engine from density).
        Mass has precedence over density.
    density: Density in kg/m³, used by the engine to compute the mass from the collision shapes.
        Default None (leave as authored). 0 means "ignored" in UsdPhysics.
    """

    mass: float | None = attrs.field(default=None, validator=non_negative_or_none)
    density: float | None = attrs.field(default=None, validator=non_negative_or_none)


@usd_group("physics", "PhysicsRigidBodyAPI")
@attrs.frozen
class RigidBodyBaseCfg:
    """Universal rigid body properties (``UsdPhysics.RigidBodyAPI``).

    rigid_body_enabled: Whether the prim takes part in rigid body simulation. Default None (leave as
        authored; UsdPhysics' fallback is True).
    kinematic_enabled: Whether the body is moved by its animated transform instead of the solver.
        Default None (leave as authored; fallback False).
    disable_gravity: Whether gravity is ignored for this body. Default None (leave as authored). Written to
        ``physxRigidBody:disableGravity`` because that is the attribute PhysX and Newton both read.
    """

    rigid_body_enabled: bool | None = None
    kinematic_enabled: bool | None = None
    disable_gravity: bool | None = attrs.field(
        default=None, metadata=route("physxRigidBody:disableGravity", schema="PhysxRigidBodyAPI"))


@usd_group("physics", "PhysicsCollisionAPI")
@attrs.frozen
class CollisionBaseCfg:
    """Universal collision properties (``UsdPhysics.CollisionAPI``).

    collision_enabled: Whether the shape collides. Default None (leave as authored; fallback True).
    contact_offset: Distance in m at which contacts start being generated. Default None (leave as
        authored; the engine picks one). Written to ``physxCollision:contactOffset``.
    rest_offset: Distance in m at which two shapes come to rest. Default None (leave as authored).
        Written to ``physxCollision:restOffset``.
    """

    collision_enabled: bool | None = None
    contact_offset: float | None = attrs.field(
        default=None, metadata=route("physxCollision:contactOffset", schema="PhysxCollisionAPI"))
    rest_offset: float | None = attrs.field(
        default=None, metadata=route("physxCollision:restOffset", schema="PhysxCollisionAPI"))


@usd_group("physics", "PhysicsMeshCollisionAPI")
@attrs.frozen
class MeshCollisionBaseCfg:
    """How a mesh collider is approximated (``UsdPhysics.MeshCollisionAPI``).

    mesh_approximation_name: One of the UsdPhysics ``physics:approximation`` tokens: "none" (the
        triangle mesh itself), "convexDecomposition", "convexHull", "boundingSphere", "boundingCube",
        "meshSimplification". Default None (leave as authored; fallback "none").
    """

    mesh_approximation_name: str | None = attrs.field(
        default=None, validator=one_of_or_none(MESH_APPROXIMATIONS),
        metadata=route("physics:approximation"))
