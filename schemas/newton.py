"""Newton subclasses of the physics property groups (Isaac Lab 3.0's ``isaaclab_newton.sim.schemas``).

Fields declared here are written under ``newton:*`` with their class's ``Newton*API`` applied schema (only
when one of them is not None). The empty classes reserve the ``newton:`` namespace and are the parents of
the MuJoCo-solver classes in ``schemas.mujoco``.
"""

from __future__ import annotations

from usdforge.schemas.physics import (ArticulationRootBaseCfg, CollisionBaseCfg, JointDriveBaseCfg, MeshCollisionBaseCfg,
                             RigidBodyBaseCfg, RigidBodyMaterialBaseCfg, bool_field, cfg_class, float_field,
                             int_field)
from usdforge.schemas.routing import usd_group
from usdforge.schemas.validators import FieldValueError


@usd_group("newton", None)
@cfg_class
class NewtonRigidBodyPropertiesCfg(RigidBodyBaseCfg):
    """Newton rigid body properties: ``RigidBodyBaseCfg``; reserves ``newton:*`` (no native field yet)."""


@usd_group("newton", None)
@cfg_class
class NewtonJointDrivePropertiesCfg(JointDriveBaseCfg):
    """Newton joint drive properties: ``JointDriveBaseCfg``; reserves ``newton:*`` (no native field yet)."""


@usd_group("newton", "NewtonCollisionAPI")
@cfg_class
class NewtonCollisionPropertiesCfg(CollisionBaseCfg):
    """Newton collision properties: ``CollisionBaseCfg`` plus ``newton:*`` (``NewtonCollisionAPI``).

    contact_margin: Outward inflation of the collision surface in m, float >= 0 (the two shapes' margins
        add up). Default None (leave as authored). → ``newton:contactMargin``.
    contact_gap: Extra detection distance in m (AABBs grow by it, contacts are found earlier), float >= 0.
        Default None (leave as authored; Newton's builder default). → ``newton:contactGap``.
    """

    contact_margin: float | None = float_field()
    contact_gap: float | None = float_field()


@usd_group("newton", "NewtonMeshCollisionAPI")
@cfg_class
class NewtonMeshCollisionPropertiesCfg(NewtonCollisionPropertiesCfg, MeshCollisionBaseCfg):
    """Newton mesh collision properties; a multi-namespace class.

    Inherits ``NewtonCollisionPropertiesCfg`` (collision_enabled → ``physics:*``, contact/rest offset →
    ``physxCollision:*``, contact_margin/contact_gap → ``newton:*`` on ``NewtonCollisionAPI``) and
    ``MeshCollisionBaseCfg`` (mesh_approximation_name → ``physics:approximation``), each field routed by
    the class that declares it.

    max_hull_vertices: Maximum vertices of the convex hull approximation, int >= 4, or -1 for as many as
        a perfect hull needs. Only used with ``physics:approximation = "convexHull"``. Default None (leave
        as authored). → ``newton:maxHullVertices`` (``NewtonMeshCollisionAPI``).
    """

    max_hull_vertices: int | None = int_field(-1)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.max_hull_vertices is not None and 0 <= self.max_hull_vertices < 4:
            raise FieldValueError("max_hull_vertices", f"expected -1 or an integer >= 4 (or None), found "
                                                       f"{self.max_hull_vertices!r}")


@usd_group("newton", "NewtonArticulationRootAPI")
@cfg_class
class NewtonArticulationRootPropertiesCfg(ArticulationRootBaseCfg):
    """Newton articulation root properties: ``ArticulationRootBaseCfg`` plus ``newton:*``.

    self_collision_enabled: bool. Collisions between bodies of this articulation. Default None (leave as
        authored; Newton then falls back to ``physxArticulation:enabledSelfCollisions``).
        → ``newton:selfCollisionEnabled`` (``NewtonArticulationRootAPI``).
    """

    self_collision_enabled: bool | None = bool_field()


@usd_group("newton", "NewtonMaterialAPI")
@cfg_class
class NewtonMaterialPropertiesCfg(RigidBodyMaterialBaseCfg):
    """Newton material properties: ``RigidBodyMaterialBaseCfg`` plus ``newton:*`` (``NewtonMaterialAPI``).

    torsional_friction: Torsional friction coefficient (resistance to spinning at a contact), float >= 0,
        dimensionless. Default None (leave as authored). → ``newton:torsionalFriction``.
    rolling_friction: Rolling friction coefficient, float >= 0, dimensionless. Default None (leave as
        authored). → ``newton:rollingFriction``.
    """

    torsional_friction: float | None = float_field()
    rolling_friction: float | None = float_field()
