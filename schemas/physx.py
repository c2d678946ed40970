"""PhysX subclasses of the physics property groups (Isaac Lab 3.0's ``isaaclab_physx.sim.schemas``).

Fields declared here are written under the ``physx*:`` namespace of their class with its ``Physx*API``
applied schema (applied only when one of those fields is not None); inherited base fields keep their
``physics:*`` routes. usd-core ships no PhysxSchema, so the schemas are added by name and the attributes are
created with the value's type (bool, int, float, token), which is what PhysxSchema declares for them.
"""

from __future__ import annotations

from usdforge.schemas.physics import (MESH_APPROXIMATIONS, ArticulationRootBaseCfg, CollisionBaseCfg, JointDriveBaseCfg,
                             MeshCollisionBaseCfg, RigidBodyBaseCfg, RigidBodyMaterialBaseCfg, approximation_field,
                             bool_field, cfg_class, float_field, int_field, token_field)
from usdforge.schemas.routing import usd_group

#: ``physics:approximation`` tokens PhysX understands: UsdPhysics' plus "sdf" (signed distance field).
PHYSX_MESH_APPROXIMATIONS = (*MESH_APPROXIMATIONS, "sdf")

#: ``physxMaterial:frictionCombineMode`` / ``restitutionCombineMode`` tokens.
COMBINE_MODES = ("average", "min", "multiply", "max")


@usd_group("physxRigidBody", "PhysxRigidBodyAPI")
@cfg_class
class PhysxRigidBodyPropertiesCfg(RigidBodyBaseCfg):
    """PhysX rigid body properties: ``RigidBodyBaseCfg`` plus ``physxRigidBody:*`` (``PhysxRigidBodyAPI``).

    Every field below defaults to None, which leaves the attribute as authored (PhysX's default applies).

    linear_damping: Linear damping in 1/s, float >= 0. → ``physxRigidBody:linearDamping``.
    angular_damping: Angular damping in 1/s, float >= 0. → ``physxRigidBody:angularDamping``.
    max_linear_velocity: Maximum linear velocity in m/s, float >= 0. → ``physxRigidBody:maxLinearVelocity``.
    max_angular_velocity: Maximum angular velocity in deg/s (PhysX's unit, as in Isaac Lab), float >= 0.
        → ``physxRigidBody:maxAngularVelocity``.
    max_depenetration_velocity: Maximum velocity in m/s the solver may introduce to separate
        penetrating bodies, float >= 0. → ``physxRigidBody:maxDepenetrationVelocity``.
    solver_position_iteration_count: Position iterations, int in [1, 255].
        → ``physxRigidBody:solverPositionIterationCount``.
    solver_velocity_iteration_count: Velocity iterations, int in [0, 255].
        → ``physxRigidBody:solverVelocityIterationCount``.
    sleep_threshold: Mass-normalised kinetic energy in m²/s² below which the body may sleep, float >= 0.
        → ``physxRigidBody:sleepThreshold``.
    stabilization_threshold: Mass-normalised kinetic energy in m²/s² below which the body may take part in
        stabilisation, float >= 0. → ``physxRigidBody:stabilizationThreshold``.
    enable_gyroscopic_forces: bool. Compute gyroscopic forces. → ``physxRigidBody:enableGyroscopicForces``.
    retain_accelerations: bool. Carry forces/accelerations over sub-steps.
        → ``physxRigidBody:retainAccelerations``.
    max_contact_impulse: Limit on the impulse of one contact in N·s, float >= 0.
        → ``physxRigidBody:maxContactImpulse``.
    """

    linear_damping: float | None = float_field()
    angular_damping: float | None = float_field()
    max_linear_velocity: float | None = float_field()
    max_angular_velocity: float | None = float_field()
    max_depenetration_velocity: float | None = float_field()
    solver_position_iteration_count: int | None = int_field(1, 255)
    solver_velocity_iteration_count: int | None = int_field(0, 255)
    sleep_threshold: float | None = float_field()
    stabilization_threshold: float | None = float_field()
    enable_gyroscopic_forces: bool | None = bool_field()
    retain_accelerations: bool | None = bool_field()
    max_contact_impulse: float | None = float_field()


@usd_group("physxJoint", "PhysxJointAPI")
@cfg_class
class PhysxJointDrivePropertiesCfg(JointDriveBaseCfg):
    """PhysX joint drive properties: ``JointDriveBaseCfg``; reserves ``physxJoint:*`` (``PhysxJointAPI``)
    for PhysX-only drive fields. It declares none today (max_joint_velocity is universal and lives on the
    base, routed to ``physxJoint:maxJointVelocity``)."""


@usd_group("physxCollision", "PhysxCollisionAPI")
@cfg_class
class PhysxCollisionPropertiesCfg(CollisionBaseCfg):
    """PhysX collision properties: ``CollisionBaseCfg`` plus ``physxCollision:*`` (``PhysxCollisionAPI``).

    torsional_patch_radius: Radius in m of the contact patch used for torsional friction, float >= 0;
        0 means no torsional friction. Default None (leave as authored).
        → ``physxCollision:torsionalPatchRadius``.
    min_torsional_patch_radius: Minimum radius in m of that patch, float >= 0. Default None (leave as
        authored). → ``physxCollision:minTorsionalPatchRadius``.
    """

    torsional_patch_radius: float | None = float_field()
    min_torsional_patch_radius: float | None = float_field()


@usd_group("physxArticulation", "PhysxArticulationAPI")
@cfg_class
class PhysxArticulationRootPropertiesCfg(ArticulationRootBaseCfg):
    """PhysX articulation root properties: ``ArticulationRootBaseCfg`` plus ``physxArticulation:*``.

    Every field below defaults to None (leave as authored).

    enabled_self_collisions: bool. Collisions between links of the same articulation.
        → ``physxArticulation:enabledSelfCollisions``.
    solver_position_iteration_count: int in [1, 255]. → ``physxArticulation:solverPositionIterationCount``.
    solver_velocity_iteration_count: int in [0, 255]. → ``physxArticulation:solverVelocityIterationCount``.
    sleep_threshold: Mass-normalised kinetic energy in m²/s², float >= 0.
        → ``physxArticulation:sleepThreshold``.
    stabilization_threshold: Mass-normalised kinetic energy in m²/s², float >= 0.
        → ``physxArticulation:stabilizationThreshold``.
    """

    enabled_self_collisions: bool | None = bool_field()
    solver_position_iteration_count: int | None = int_field(1, 255)
    solver_velocity_iteration_count: int | None = int_field(0, 255)
    sleep_threshold: float | None = float_field()
    stabilization_threshold: float | None = float_field()


@usd_group("physxMaterial", "PhysxMaterialAPI")
@cfg_class
class PhysxRigidBodyMaterialCfg(RigidBodyMaterialBaseCfg):
    """PhysX material properties: ``RigidBodyMaterialBaseCfg`` plus ``physxMaterial:*`` (``PhysxMaterialAPI``).

    Every field below defaults to None (leave as authored).

    compliant_contact_stiffness: Spring stiffness of the compliant contact model in N/m, float >= 0; the
        compliant model is used only when it is > 0. → ``physxMaterial:compliantContactStiffness``.
    compliant_contact_damping: Damping of that spring in N·s/m, float >= 0.
        → ``physxMaterial:compliantContactDamping``.
    friction_combine_mode: "average", "min", "multiply" or "max": how the friction of two materials is
        combined. → ``physxMaterial:frictionCombineMode``.
    restitution_combine_mode: same tokens, for restitution. → ``physxMaterial:restitutionCombineMode``.
    """

    compliant_contact_stiffness: float | None = float_field()
    compliant_contact_damping: float | None = float_field()
    friction_combine_mode: str | None = token_field(COMBINE_MODES)
    restitution_combine_mode: str | None = token_field(COMBINE_MODES)


# Mesh cooking. Each class sets ``mesh_approximation_name`` (``physics:approximation`` on
# ``PhysicsMeshCollisionAPI``) to the token its cooking schema implies; its own tuning fields go to its
# ``physx*Collision:*`` namespace, whose schema is applied only when one of them is set.


@usd_group("physxConvexHullCollision", "PhysxConvexHullCollisionAPI")
@cfg_class
class PhysxConvexHullPropertiesCfg(MeshCollisionBaseCfg):
    """PhysX convex hull cooking (``PhysxConvexHullCollisionAPI``).

    mesh_approximation_name: str, one of ``PHYSX_MESH_APPROXIMATIONS``. Default "convexHull".
        → ``physics:approximation``.
    hull_vertex_limit: Maximum number of hull vertices, int in [4, 255]. Default None (leave as authored;
        PhysX: 64). → ``physxConvexHullCollision:hullVertexLimit``.
    min_thickness: Minimum hull thickness in m, float >= 0. Default None (leave as authored; PhysX: 0.001).
        → ``physxConvexHullCollision:minThickness``.
    """

    mesh_approximation_name: str = approximation_field("convexHull", PHYSX_MESH_APPROXIMATIONS)
    hull_vertex_limit: int | None = int_field(4, 255)
    min_thickness: float | None = float_field()


@usd_group("physxConvexDecompositionCollision", "PhysxConvexDecompositionCollisionAPI")
@cfg_class
class PhysxConvexDecompositionPropertiesCfg(MeshCollisionBaseCfg):
    """PhysX convex decomposition cooking (``PhysxConvexDecompositionCollisionAPI``).

    mesh_approximation_name: str, one of ``PHYSX_MESH_APPROXIMATIONS``. Default "convexDecomposition".
        → ``physics:approximation``.
    Every field below defaults to None (leave as authored; PhysX's default in brackets).
    hull_vertex_limit: Vertex limit per hull, int in [4, 255] [64].
        → ``physxConvexDecompositionCollision:hullVertexLimit``.
    max_convex_hulls: Maximum number of hulls, int >= 1 [32]. → ``...:maxConvexHulls``.
    min_thickness: Minimum hull thickness in m, float >= 0 [0.001]. → ``...:minThickness``.
    voxel_resolution: Voxel count of the decomposition, int >= 1 [500000]. → ``...:voxelResolution``.
    error_percentage: Allowed decomposition error in percent, float in [0, 100] [10].
        → ``...:errorPercentage``.
    shrink_wrap: bool. Project hull points onto the original mesh surface [False]. → ``...:shrinkWrap``.
    """

    mesh_approximation_name: str = approximation_field("convexDecomposition", PHYSX_MESH_APPROXIMATIONS)
    hull_vertex_limit: int | None = int_field(4, 255)
    max_convex_hulls: int | None = int_field(1)
    min_thickness: float | None = float_field()
    voxel_resolution: int | None = int_field(1)
    error_percentage: float | None = float_field(0.0, 100.0)
    shrink_wrap: bool | None = bool_field()


@usd_group("physxTriangleMeshCollision", "PhysxTriangleMeshCollisionAPI")
@cfg_class
class PhysxTriangleMeshPropertiesCfg(MeshCollisionBaseCfg):
    """PhysX triangle mesh cooking (``PhysxTriangleMeshCollisionAPI``; triangle colliders are PhysX-only
    and static).

    mesh_approximation_name: str, one of ``PHYSX_MESH_APPROXIMATIONS``. Default "none" (the triangle mesh).
        → ``physics:approximation``.
    weld_tolerance: Distance in m under which vertices are welded, float >= 0; 0 disables welding.
        Default None (leave as authored; PhysX computes one from the mesh size).
        → ``physxTriangleMeshCollision:weldTolerance``.
    """

    mesh_approximation_name: str = approximation_field("none", PHYSX_MESH_APPROXIMATIONS)
    weld_tolerance: float | None = float_field()


@usd_group("physxTriangleMeshSimplificationCollision", "PhysxTriangleMeshSimplificationCollisionAPI")
@cfg_class
class PhysxTriangleMeshSimplificationPropertiesCfg(MeshCollisionBaseCfg):
    """PhysX mesh simplification cooking (``PhysxTriangleMeshSimplificationCollisionAPI``).

    mesh_approximation_name: str, one of ``PHYSX_MESH_APPROXIMATIONS``. Default "meshSimplification".
        → ``physics:approximation``.
    simplification_metric: Simplification accuracy, float in [0, 1]. Default None (leave as authored;
        PhysX: 0.55). → ``physxTriangleMeshSimplificationCollision:simplificationMetric``.
    weld_tolerance: Welding distance in m, float >= 0. Default None (leave as authored).
        → ``physxTriangleMeshSimplificationCollision:weldTolerance``.
    """

    mesh_approximation_name: str = approximation_field("meshSimplification", PHYSX_MESH_APPROXIMATIONS)
    simplification_metric: float | None = float_field(0.0, 1.0)
    weld_tolerance: float | None = float_field()


@usd_group("physxSDFMeshCollision", "PhysxSDFMeshCollisionAPI")
@cfg_class
class PhysxSDFMeshPropertiesCfg(MeshCollisionBaseCfg):
    """PhysX signed-distance-field cooking (``PhysxSDFMeshCollisionAPI``; PhysX-only).

    mesh_approximation_name: str, one of ``PHYSX_MESH_APPROXIMATIONS``. Default "sdf".
        → ``physics:approximation``.
    Every field below defaults to None (leave as authored; PhysX's default in brackets).
    sdf_margin: Margin around the mesh as a fraction of its bounding-box diagonal, float >= 0 [0.01].
        → ``physxSDFMeshCollision:sdfMargin``.
    sdf_narrow_band_thickness: Width of the high-resolution band as a fraction of the bounding-box
        diagonal, float in [0, 1] [0.01]. → ``physxSDFMeshCollision:sdfNarrowBandThickness``.
    sdf_resolution: Samples along the largest bounding-box extent, int >= 2 [256].
        → ``physxSDFMeshCollision:sdfResolution``.
    sdf_subgrid_resolution: Subgrid size of the sparse SDF, int >= 0; 0 = dense [6].
        → ``physxSDFMeshCollision:sdfSubgridResolution``.
    """

    mesh_approximation_name: str = approximation_field("sdf", PHYSX_MESH_APPROXIMATIONS)
    sdf_margin: float | None = float_field()
    sdf_narrow_band_thickness: float | None = float_field(0.0, 1.0)
    sdf_resolution: int | None = int_field(2)
    sdf_subgrid_resolution: int | None = int_field(0)


PHYSX_MESH_COLLISION_CFGS = (PhysxConvexHullPropertiesCfg, PhysxConvexDecompositionPropertiesCfg,
                             PhysxTriangleMeshPropertiesCfg, PhysxTriangleMeshSimplificationPropertiesCfg,
                             PhysxSDFMeshPropertiesCfg)
