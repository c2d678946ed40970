"""What a converted asset holds, read back from its USD for people: counts, total mass, the joint table
(limits and drive gains) and the body table (masses). ``doit report`` shows these."""

from __future__ import annotations

import math
from typing import Any

_JOINT_TYPES = {"PhysicsRevoluteJoint": "revolute", "PhysicsPrismaticJoint": "prismatic",
                "PhysicsSphericalJoint": "spherical", "PhysicsFixedJoint": "fixed", "PhysicsJoint": "d6",
                "PhysicsDistanceJoint": "distance"}


def _get(prim, name: str):
    attribute = prim.GetAttribute(name)
    value = attribute.Get() if attribute and attribute.HasAuthoredValue() else None
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no infinity: unlimited
    return value


def _number(value) -> float | None:
    return None if value is None else float(value)


def asset_facts(stage) -> dict[str, Any]:
    """Counts (bodies, joints by type, meshes, actuators), total mass (kg), and one row per joint and
    per rigid body. Joint limits and gains are as authored (degrees and per-degree gains for angular)."""
    from pxr import Usd, UsdGeom, UsdPhysics

    root = stage.GetDefaultPrim()
    bodies, joints, meshes, actuators = [], [], set(), 0
    predicate = Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)
    for prim in Usd.PrimRange.Stage(stage, predicate):
        if prim.IsA(UsdGeom.Mesh):
            meshes.add(str(prim.GetPrimInPrototype().GetPath() if prim.IsInstanceProxy() else prim.GetPath()))
        if prim.GetTypeName() == "MjcActuator":
            actuators += 1
        if prim.HasAPI(UsdPhysics.RigidBodyAPI):
            bodies.append({"path": str(prim.GetPath()), "name": _get(prim, "usdforge:sourceName") or prim.GetName(),
                           "mass": _number(_get(prim, "physics:mass")),
                           "center_of_mass": [float(v) for v in _get(prim, "physics:centerOfMass") or []],
                           "inertia": [float(v) for v in _get(prim, "physics:diagonalInertia") or []]})
        if prim.IsA(UsdPhysics.Joint):
            joint = UsdPhysics.Joint(prim)
            kind = _JOINT_TYPES.get(prim.GetTypeName(), prim.GetTypeName())
            axis = "angular" if kind == "revolute" else "linear"
            drive = {}
            if prim.HasAPI(UsdPhysics.DriveAPI, axis):
                drive = {key: _number(_get(prim, f"drive:{axis}:physics:{key}"))
                         for key in ("stiffness", "damping", "maxForce")}
            targets = [[str(t) for t in rel.GetTargets()] for rel in (joint.GetBody0Rel(), joint.GetBody1Rel())]
            joints.append({"path": str(prim.GetPath()), "name": _get(prim, "usdforge:sourceName") or prim.GetName(),
                           "type": kind, "body0": targets[0][0] if targets[0] else "", "body1": targets[1][0]
                           if targets[1] else "", "lower": _number(_get(prim, "physics:lowerLimit")),
                           "upper": _number(_get(prim, "physics:upperLimit")),
                           "unit": "deg" if kind == "revolute" else "m", "drive": drive,
                           "loop": bool(_get(prim, "physics:excludeFromArticulation"))})
    by_type: dict[str, int] = {}
    for joint in joints:
        by_type[joint["type"]] = by_type.get(joint["type"], 0) + 1
    if not actuators:
        actuators = sum(1 for joint in joints if joint["drive"])
    return {"root": str(root.GetPath()) if root else "/", "bodies": len(bodies), "joints": by_type,
            "meshes": len(meshes), "actuators": actuators,
            "mass": sum(body["mass"] or 0.0 for body in bodies), "joint_table": joints, "body_table": bodies}
