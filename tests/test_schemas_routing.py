"""Every physics cfg class: each field lands on the exact USD attribute and applied schema (read back with pxr)."""

from __future__ import annotations

import math

import attrs
import pytest
from pxr import Sdf, Usd, UsdGeom, UsdPhysics

from usdforge.schemas import physics, physx, newton, mujoco
from usdforge.schemas.routing import routing_table
from usdforge.schemas.writer import applied_schemas, author_cfg

RB, PRB = "PhysicsRigidBodyAPI", "PhysxRigidBodyAPI"
COL, PCOL, NCOL = "PhysicsCollisionAPI", "PhysxCollisionAPI", "NewtonCollisionAPI"
MESH = "PhysicsMeshCollisionAPI"
ART, PART = "PhysicsArticulationRootAPI", "PhysxArticulationAPI"
MAT = "PhysicsMaterialAPI"

RIGID_BASE = {
    "rigid_body_enabled": ("physics:rigidBodyEnabled", RB),
    "kinematic_enabled": ("physics:kinematicEnabled", RB),
    "disable_gravity": ("physxRigidBody:disableGravity", PRB),
}
PHYSX_RIGID = {
    name: (f"physxRigidBody:{attr}", PRB) for name, attr in [
        ("linear_damping", "linearDamping"), ("angular_damping", "angularDamping"),
        ("max_linear_velocity", "maxLinearVelocity"), ("max_angular_velocity", "maxAngularVelocity"),
        ("max_depenetration_velocity", "maxDepenetrationVelocity"),
        ("solver_position_iteration_count", "solverPositionIterationCount"),
        ("solver_velocity_iteration_count", "solverVelocityIterationCount"),
        ("sleep_threshold", "sleepThreshold"), ("stabilization_threshold", "stabilizationThreshold"),
        ("enable_gyroscopic_forces", "enableGyroscopicForces"), ("retain_accelerations", "retainAccelerations"),
        ("max_contact_impulse", "maxContactImpulse")]
}
COLLISION_BASE = {
    "collision_enabled": ("physics:collisionEnabled", COL),
    "contact_offset": ("physxCollision:contactOffset", PCOL),
    "rest_offset": ("physxCollision:restOffset", PCOL),
}
NEWTON_COLLISION = {"contact_margin": ("newton:contactMargin", NCOL), "contact_gap": ("newton:contactGap", NCOL)}
MESH_BASE = {"mesh_approximation_name": ("physics:approximation", MESH)}
ARTICULATION_BASE = {"articulation_enabled": ("physxArticulation:articulationEnabled", PART)}
MATERIAL_BASE = {
    "static_friction": ("physics:staticFriction", MAT),
    "dynamic_friction": ("physics:dynamicFriction", MAT),
    "restitution": ("physics:restitution", MAT),
}


def _cooking(namespace: str, schema: str, **fields: str) -> dict:
    return {**MESH_BASE, **{name: (f"{namespace}:{attr}", schema) for name, attr in fields.items()}}


#: class → {field: (attribute, applied schema or None)}; writer-side fields are absent on purpose.
EXPECTED = {
    physics.MassPropertiesCfg: {"mass": ("physics:mass", "PhysicsMassAPI"),
                                "density": ("physics:density", "PhysicsMassAPI")},
    physics.RigidBodyBaseCfg: RIGID_BASE,
    physx.PhysxRigidBodyPropertiesCfg: {**RIGID_BASE, **PHYSX_RIGID},
    newton.NewtonRigidBodyPropertiesCfg: RIGID_BASE,
    mujoco.MujocoRigidBodyPropertiesCfg: {**RIGID_BASE, "gravcomp": ("mjc:gravcomp", None)},
    physics.CollisionBaseCfg: COLLISION_BASE,
    physx.PhysxCollisionPropertiesCfg: {**COLLISION_BASE,
                                        "torsional_patch_radius": ("physxCollision:torsionalPatchRadius", PCOL),
                                        "min_torsional_patch_radius": ("physxCollision:minTorsionalPatchRadius", PCOL)},
    newton.NewtonCollisionPropertiesCfg: {**COLLISION_BASE, **NEWTON_COLLISION},
    physics.MeshCollisionBaseCfg: MESH_BASE,
    physx.PhysxConvexHullPropertiesCfg: _cooking("physxConvexHullCollision", "PhysxConvexHullCollisionAPI",
                                                 hull_vertex_limit="hullVertexLimit", min_thickness="minThickness"),
    physx.PhysxConvexDecompositionPropertiesCfg: _cooking(
        "physxConvexDecompositionCollision", "PhysxConvexDecompositionCollisionAPI",
        hull_vertex_limit="hullVertexLimit", max_convex_hulls="maxConvexHulls", min_thickness="minThickness",
        voxel_resolution="voxelResolution", error_percentage="errorPercentage", shrink_wrap="shrinkWrap"),
    physx.PhysxTriangleMeshPropertiesCfg: _cooking("physxTriangleMeshCollision", "PhysxTriangleMeshCollisionAPI",
                                                   weld_tolerance="weldTolerance"),
    physx.PhysxTriangleMeshSimplificationPropertiesCfg: _cooking(
        "physxTriangleMeshSimplificationCollision", "PhysxTriangleMeshSimplificationCollisionAPI",
        simplification_metric="simplificationMetric", weld_tolerance="weldTolerance"),
    physx.PhysxSDFMeshPropertiesCfg: _cooking(
        "physxSDFMeshCollision", "PhysxSDFMeshCollisionAPI", sdf_margin="sdfMargin",
        sdf_narrow_band_thickness="sdfNarrowBandThickness", sdf_resolution="sdfResolution",
        sdf_subgrid_resolution="sdfSubgridResolution"),
    newton.NewtonMeshCollisionPropertiesCfg: {**MESH_BASE, **COLLISION_BASE, **NEWTON_COLLISION,
                                              "max_hull_vertices": ("newton:maxHullVertices", "NewtonMeshCollisionAPI")},
    physics.ArticulationRootBaseCfg: ARTICULATION_BASE,
    physx.PhysxArticulationRootPropertiesCfg: {
        **ARTICULATION_BASE, **{name: (f"physxArticulation:{attr}", PART) for name, attr in [
            ("enabled_self_collisions", "enabledSelfCollisions"),
            ("solver_position_iteration_count", "solverPositionIterationCount"),
            ("solver_velocity_iteration_count", "solverVelocityIterationCount"),
            ("sleep_threshold", "sleepThreshold"), ("stabilization_threshold", "stabilizationThreshold")]}},
    newton.NewtonArticulationRootPropertiesCfg: {
        **ARTICULATION_BASE, "self_collision_enabled": ("newton:selfCollisionEnabled", "NewtonArticulationRootAPI")},
    physics.RigidBodyMaterialBaseCfg: MATERIAL_BASE,
    physx.PhysxRigidBodyMaterialCfg: {**MATERIAL_BASE, **{name: (f"physxMaterial:{attr}", "PhysxMaterialAPI") for name, attr in [
        ("compliant_contact_stiffness", "compliantContactStiffness"),
        ("compliant_contact_damping", "compliantContactDamping"),
        ("friction_combine_mode", "frictionCombineMode"), ("restitution_combine_mode", "restitutionCombineMode")]}},
    newton.NewtonMaterialPropertiesCfg: {**MATERIAL_BASE,
                                         "torsional_friction": ("newton:torsionalFriction", "NewtonMaterialAPI"),
                                         "rolling_friction": ("newton:rollingFriction", "NewtonMaterialAPI")},
}

DRIVE_BASE = {"drive_type": "type", "max_force": "maxForce", "stiffness": "stiffness", "damping": "damping"}
DRIVE_CLASSES = {
    physics.JointDriveBaseCfg: {},
    physx.PhysxJointDrivePropertiesCfg: {},
    newton.NewtonJointDrivePropertiesCfg: {},
    mujoco.MujocoJointDrivePropertiesCfg: {"actuatorgravcomp": ("mjc:actuatorgravcomp", "MjcJointAPI")},
}

#: A valid, distinctive value for every field name (bools True, so they differ from the fallbacks).
SAMPLE = {
    "mass": 2.5, "density": 800.0, "rigid_body_enabled": True, "kinematic_enabled": True, "disable_gravity": True,
    "linear_damping": 0.1, "angular_damping": 0.2, "max_linear_velocity": 30.0, "max_angular_velocity": 700.0,
    "max_depenetration_velocity": 5.0, "solver_position_iteration_count": 12, "solver_velocity_iteration_count": 3,
    "sleep_threshold": 0.005, "stabilization_threshold": 0.001, "enable_gyroscopic_forces": True,
    "retain_accelerations": True, "max_contact_impulse": 1000.0, "gravcomp": 0.75,
    "collision_enabled": True, "contact_offset": 0.02, "rest_offset": 0.001, "torsional_patch_radius": 0.01,
    "min_torsional_patch_radius": 0.002, "contact_margin": 0.003, "contact_gap": 0.004,
    "mesh_approximation_name": "convexHull", "hull_vertex_limit": 48, "min_thickness": 0.002,
    "max_convex_hulls": 16, "voxel_resolution": 100000, "error_percentage": 5.0, "shrink_wrap": True,
    "weld_tolerance": 0.0005, "simplification_metric": 0.6, "sdf_margin": 0.02, "sdf_narrow_band_thickness": 0.05,
    "sdf_resolution": 128, "sdf_subgrid_resolution": 4, "max_hull_vertices": 32,
    "articulation_enabled": True, "enabled_self_collisions": True, "self_collision_enabled": True,
    "static_friction": 0.9, "dynamic_friction": 0.7, "restitution": 0.3, "compliant_contact_stiffness": 1e4,
    "compliant_contact_damping": 50.0, "friction_combine_mode": "max", "restitution_combine_mode": "min",
    "torsional_friction": 0.05, "rolling_friction": 0.01,
    "drive_type": "acceleration", "max_force": 87.0, "stiffness": 400.0, "damping": 40.0,
    "max_joint_velocity": 2.5, "actuatorgravcomp": True,
}


def new_stage() -> Usd.Stage:
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, "Z")
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    return stage


def _same(found, expected) -> bool:
    if isinstance(expected, float):
        return math.isclose(found, expected, rel_tol=1e-6, abs_tol=1e-12)
    return found == expected and type(found) is type(expected)


def _check_prim(prim: Usd.Prim, expected_values: dict[str, object], expected_schemas: set[str]) -> None:
    authored = {attribute.GetName() for attribute in prim.GetAuthoredAttributes()}
    assert authored == set(expected_values), f"authored {sorted(authored)}, expected {sorted(expected_values)}"
    for name, value in expected_values.items():
        found = prim.GetAttribute(name).Get()
        assert _same(found, value), f"{name}: {found!r} != {value!r}"
    assert set(applied_schemas(prim)) == expected_schemas


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.__name__)
def test_routing_table_and_authoring(cls):
    expected = EXPECTED[cls]
    # The declared routing table, as data.
    table = {name: (r.attribute, r.schema) for name, r in routing_table(cls).items()}
    assert table == expected
    # Every field of the class is either routed or writer-side.
    cfg = cls(**{name: SAMPLE[name] for name in expected})
    stage = new_stage()
    prim = stage.DefinePrim("/thing", "Xform")
    written = author_cfg(prim, cfg)
    assert sorted(written) == sorted(attribute for attribute, _ in expected.values())
    # Read back from a re-opened copy of the layer: the values are in the USD, not only in memory.
    reopened = Usd.Stage.Open(Sdf.Layer.CreateAnonymous(".usda"))
    reopened.GetRootLayer().ImportFromString(stage.GetRootLayer().ExportToString())
    _check_prim(reopened.GetPrimAtPath("/thing"), {attribute: SAMPLE[name] for name, (attribute, _) in expected.items()},
                {schema for _, schema in expected.values() if schema is not None})


@pytest.mark.parametrize("cls", list(DRIVE_CLASSES), ids=lambda c: c.__name__)
@pytest.mark.parametrize("joint_type,axis", [("PhysicsRevoluteJoint", "angular"), ("PhysicsPrismaticJoint", "linear")])
def test_joint_drive_routing_and_units(cls, joint_type, axis):
    extra = DRIVE_CLASSES[cls]
    fields = [*DRIVE_BASE, "max_joint_velocity", *extra]
    cfg = cls(**{name: SAMPLE[name] for name in fields})
    stage = new_stage()
    joint = stage.DefinePrim("/joint", joint_type)
    author_cfg(joint, cfg, axis)
    per_degree = math.pi / 180.0 if axis == "angular" else 1.0
    expected = {
        f"drive:{axis}:physics:type": "acceleration",
        f"drive:{axis}:physics:maxForce": 87.0,  # N or N·m: no angle in the unit
        f"drive:{axis}:physics:stiffness": 400.0 * per_degree,  # N·m/rad → N·m/deg
        f"drive:{axis}:physics:damping": 40.0 * per_degree,
        "physxJoint:maxJointVelocity": 2.5 / per_degree,  # rad/s → deg/s; m/s unchanged
        **{attribute: SAMPLE[name] for name, (attribute, _) in extra.items()},
    }
    _check_prim(joint, expected, {f"PhysicsDriveAPI:{axis}", "PhysxJointAPI",
                                  *(schema for _, schema in extra.values())})
    # The typed UsdPhysics API sees the same values.
    drive = UsdPhysics.DriveAPI(joint, axis)
    assert math.isclose(drive.GetStiffnessAttr().Get(), 400.0 * per_degree, rel_tol=1e-6)
    assert drive.GetTypeAttr().Get() == "acceleration"


def test_angular_gain_conversion_uses_degrees():
    # 1 N·m/rad is pi/180 N·m/deg; a revolute drive of 180/pi N·m/rad is 1 N·m/deg.
    stage = new_stage()
    joint = stage.DefinePrim("/joint", "PhysicsRevoluteJoint")
    author_cfg(joint, physics.JointDriveBaseCfg(stiffness=180.0 / math.pi, max_joint_velocity=math.pi), "angular")
    assert math.isclose(joint.GetAttribute("drive:angular:physics:stiffness").Get(), 1.0, rel_tol=1e-6)
    assert math.isclose(joint.GetAttribute("physxJoint:maxJointVelocity").Get(), 180.0, rel_tol=1e-6)


def test_drive_fields_need_an_axis():
    stage = new_stage()
    prim = stage.DefinePrim("/joint", "PhysicsRevoluteJoint")
    with pytest.raises(ValueError, match="drive axis"):
        author_cfg(prim, physics.JointDriveBaseCfg(stiffness=1.0))
    with pytest.raises(ValueError, match="drive axis"):
        author_cfg(prim, physics.JointDriveBaseCfg(max_joint_velocity=1.0), "sideways")


def test_writer_side_and_alias_fields_have_no_route():
    assert set(routing_table(physics.JointDriveBaseCfg)) == set(DRIVE_BASE) | {"max_joint_velocity"}
    assert "fix_root_link" not in routing_table(physx.PhysxArticulationRootPropertiesCfg)
    all_fields = {f.name for f in attrs.fields(physics.JointDriveBaseCfg)}
    assert all_fields - set(routing_table(physics.JointDriveBaseCfg)) == {"ensure_drives_exist", "max_effort",
                                                                          "max_velocity"}


def test_mixed_namespaces_on_one_prim():
    """One MuJoCo instance authors physics:*, physxRigidBody:* and mjc:* on the same prim; schemas only for
    the namespaces it touched."""
    stage = new_stage()
    prim = stage.DefinePrim("/body", "Xform")
    UsdPhysics.RigidBodyAPI.Apply(prim)
    author_cfg(prim, mujoco.MujocoRigidBodyPropertiesCfg(rigid_body_enabled=True, disable_gravity=True, gravcomp=1.0))
    assert prim.GetAttribute("physics:rigidBodyEnabled").Get() is True
    assert prim.GetAttribute("physxRigidBody:disableGravity").Get() is True
    assert prim.GetAttribute("mjc:gravcomp").Get() == 1.0
    assert set(applied_schemas(prim)) == {"PhysicsRigidBodyAPI", "PhysxRigidBodyAPI"}  # mjc:gravcomp is raw

    # A Newton mesh collision cfg: physics:approximation, physics:collisionEnabled, newton:* under two schemas.
    mesh = UsdGeom.Mesh.Define(stage, "/mesh").GetPrim()
    author_cfg(mesh, newton.NewtonMeshCollisionPropertiesCfg(mesh_approximation_name="convexHull",
                                                               collision_enabled=True, contact_margin=0.001,
                                                               max_hull_vertices=64))
    assert set(applied_schemas(mesh)) == {"PhysicsMeshCollisionAPI", "PhysicsCollisionAPI", "NewtonCollisionAPI",
                                             "NewtonMeshCollisionAPI"}
    assert UsdPhysics.MeshCollisionAPI(mesh).GetApproximationAttr().Get() == "convexHull"


def test_schema_applied_only_for_set_fields():
    stage = new_stage()
    prim = stage.DefinePrim("/body", "Xform")
    author_cfg(prim, physx.PhysxRigidBodyPropertiesCfg(kinematic_enabled=False))
    assert applied_schemas(prim) == ["PhysicsRigidBodyAPI"]
    assert [a.GetName() for a in prim.GetAuthoredAttributes()] == ["physics:kinematicEnabled"]
    other = stage.DefinePrim("/other", "Xform")
    assert author_cfg(other, physx.PhysxRigidBodyPropertiesCfg()) == []
    assert applied_schemas(other) == [] and list(other.GetAuthoredAttributes()) == []
    hull = stage.DefinePrim("/hull", "Mesh")
    author_cfg(hull, physx.PhysxConvexHullPropertiesCfg())  # only the approximation token: no cooking schema
    assert applied_schemas(hull) == ["PhysicsMeshCollisionAPI"]
    assert hull.GetAttribute("physics:approximation").Get() == "convexHull"


def test_none_leaves_existing_values_alone():
    stage = new_stage()
    prim = stage.DefinePrim("/body", "Xform")
    author_cfg(prim, physx.PhysxRigidBodyPropertiesCfg(linear_damping=0.5, disable_gravity=True, kinematic_enabled=True))
    author_cfg(prim, physx.PhysxRigidBodyPropertiesCfg(angular_damping=0.25))
    assert prim.GetAttribute("physxRigidBody:linearDamping").Get() == 0.5
    assert prim.GetAttribute("physxRigidBody:disableGravity").Get() is True
    assert prim.GetAttribute("physics:kinematicEnabled").Get() is True
    assert prim.GetAttribute("physxRigidBody:angularDamping").Get() == 0.25
    # A later value replaces an earlier one.
    author_cfg(prim, physx.PhysxRigidBodyPropertiesCfg(linear_damping=0.0))
    assert prim.GetAttribute("physxRigidBody:linearDamping").Get() == 0.0


def test_cooking_subclasses_set_their_approximation():
    defaults = {physx.PhysxConvexHullPropertiesCfg: "convexHull",
                physx.PhysxConvexDecompositionPropertiesCfg: "convexDecomposition",
                physx.PhysxTriangleMeshPropertiesCfg: "none",
                physx.PhysxTriangleMeshSimplificationPropertiesCfg: "meshSimplification",
                physx.PhysxSDFMeshPropertiesCfg: "sdf"}
    assert set(defaults) == set(physx.PHYSX_MESH_COLLISION_CFGS)
    for cls, token in defaults.items():
        assert cls().mesh_approximation_name == token
    assert physics.MeshCollisionBaseCfg().mesh_approximation_name is None
    assert newton.NewtonMeshCollisionPropertiesCfg().mesh_approximation_name is None


def test_float_fields_author_float_attributes():
    stage = new_stage()
    prim = stage.DefinePrim("/body", "Xform")
    author_cfg(prim, physx.PhysxRigidBodyPropertiesCfg(linear_damping=1, solver_position_iteration_count=4))
    assert prim.GetAttribute("physxRigidBody:linearDamping").GetTypeName() == Sdf.ValueTypeNames.Float
    assert prim.GetAttribute("physxRigidBody:solverPositionIterationCount").GetTypeName() == Sdf.ValueTypeNames.Int
