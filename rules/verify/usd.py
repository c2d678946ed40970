"""Checks of a USD asset on its own: OpenUSD's validators, and the physics mistakes they do not catch.

``validate`` runs every validator registered with ``pxr.UsdValidation`` that applies to the file (the
USDZ package validators only for ``.usdz``), physics ones included: errors fail, warnings are listed.

``check_physics`` catches what those validators and OpenUSD's lenient physics parser let through
(engineering notes): a joint whose body0/body1 names a prim that does not exist (the parser silently
makes it a joint to the world), inverted revolute/prismatic limits (engines accept them quietly), a joint
whose two local frames disagree with the bodies' poses at rest, a dynamic body with mass 0 or a
non-finite or negative mass property.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from usdforge.rules.verify.findings import CheckResult, Finding

#: Joint frames may disagree with the body poses by this much (m, rad) before it is an error; single
#: precision localPos/localRot round-trips stay far below it.
FRAME_POSITION_TOLERANCE = 1e-4
FRAME_ROTATION_TOLERANCE = 1e-3
_MISSING = object()


def open_stage(usd_path: str | Path):
    """The stage at ``usd_path`` (ValueError when it cannot be opened)."""
    from pxr import Usd

    stage = Usd.Stage.Open(str(usd_path))
    if stage is None:
        raise ValueError(f"{usd_path}: OpenUSD cannot open it")
    return stage


def applicable_validators(usd_path: str | Path) -> list[str]:
    """Names of the registered validators that apply to this file: all but the suites, and the USDZ
    package validators unless it is a ``.usdz``."""
    from pxr import UsdValidation

    registry = UsdValidation.ValidationRegistry()
    usdz = str(usd_path).lower().endswith(".usdz")
    return sorted(m.name for m in registry.GetAllValidatorMetadata()
                  if not m.isSuite and (usdz or "UsdzValidators" not in m.GetKeywords()))


def validate(stage, usd_path: str | Path) -> CheckResult:
    """Run every applicable ``pxr.UsdValidation`` validator on ``stage``: its errors as error findings,
    its warnings as warnings, each at the prim (or layer) it names."""
    from pxr import UsdValidation

    result = CheckResult("usd-validation")
    names = applicable_validators(usd_path)
    registry = UsdValidation.ValidationRegistry()
    context = UsdValidation.ValidationContext(registry.GetOrLoadValidatorsByName(names))
    default = str(stage.GetDefaultPrim().GetPath()) if stage.GetDefaultPrim() else "/"
    for error in context.Validate(stage):
        kind = error.GetType()
        if kind not in (UsdValidation.ValidationErrorType.Error, UsdValidation.ValidationErrorType.Warn):
            continue
        validator = error.GetValidator()
        check = validator.GetMetadata().name if validator else error.GetName()
        where = default
        for site in error.GetSites():
            if site.IsPrim() or site.IsProperty():
                where = str(site.GetPrim().GetPath() if site.IsPrim() else site.GetProperty().GetPath())
                break
        severity = "error" if kind == UsdValidation.ValidationErrorType.Error else "warning"
        result.add(Finding(check, where, " ".join(error.GetMessage().split()), severity))
    result.detail = f"{len(names)} validators: {len(result.errors)} errors, {len(result.warnings)} warnings"
    return result


def _pose(matrix) -> np.ndarray:
    """A Gf world matrix as a (4, 4) column-vector pose with its scale removed."""
    pose = np.array(matrix, dtype=float).T
    rotation = pose[:3, :3]
    norms = np.linalg.norm(rotation, axis=0)
    pose[:3, :3] = rotation / np.where(norms > 0, norms, 1.0)
    return pose


def _local(position, orientation) -> np.ndarray:
    from pxr import Gf

    pose = np.eye(4)
    if orientation is not None:
        pose[:3, :3] = np.array(Gf.Matrix3d(Gf.Rotation(Gf.Quatd(orientation))), dtype=float).T
    if position is not None:
        pose[:3, 3] = np.asarray(position, dtype=float)
    return pose


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    cosine = (np.trace(a[:3, :3].T @ b[:3, :3]) - 1.0) / 2.0
    return math.acos(max(-1.0, min(1.0, cosine)))


def _value(prim, name: str):
    attribute = prim.GetAttribute(name)
    return attribute.Get() if attribute and attribute.HasAuthoredValue() else None


def check_physics(stage) -> CheckResult:
    """The physics checks OpenUSD's validators miss (module docstring), one finding per prim and check."""
    from pxr import Usd, UsdGeom, UsdPhysics

    result = CheckResult("physics-structure")
    cache = UsdGeom.XformCache()
    joints = bodies = 0
    for prim in Usd.PrimRange.Stage(stage, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)):
        path = str(prim.GetPath())
        if prim.HasAPI(UsdPhysics.RigidBodyAPI):
            bodies += 1
            _check_mass(prim, path, result)
        if not prim.IsA(UsdPhysics.Joint):
            continue
        joints += 1
        joint = UsdPhysics.Joint(prim)
        ends = []
        for index, relationship in enumerate((joint.GetBody0Rel(), joint.GetBody1Rel())):
            targets = relationship.GetTargets()
            if not targets:
                ends.append(None)  # the world
                continue
            target = stage.GetPrimAtPath(targets[0])
            if not target or not target.IsValid():
                result.add(Finding("joint-target", path, f"physics:body{index} names {targets[0]}, which does "
                                   "not exist (engines would attach the joint to the world)"))
                ends.append(_MISSING)
            else:
                ends.append(target)
        _check_limits(prim, path, result)
        if any(end is _MISSING for end in ends) or not _value(prim, "physics:jointEnabled") in (None, True):
            continue
        if ends[0] is None and ends[1] is None:
            result.add(Finding("joint-target", path, "neither physics:body0 nor physics:body1 is set"))
            continue
        frames = []
        for end, (position, rotation) in zip(ends, (("physics:localPos0", "physics:localRot0"),
                                                    ("physics:localPos1", "physics:localRot1"))):
            world = _pose(cache.GetLocalToWorldTransform(end)) if end is not None else np.eye(4)
            frames.append(world @ _local(_value(prim, position), _value(prim, rotation)))
        distance = float(np.linalg.norm(frames[0][:3, 3] - frames[1][:3, 3]))
        angle = _angle(frames[0], frames[1])
        # A spherical joint's frames may be turned about its anchor at rest only if it is excluded from the
        # articulation (a loop closure); otherwise both must coincide.
        if distance > FRAME_POSITION_TOLERANCE or (angle > FRAME_ROTATION_TOLERANCE
                                                   and not prim.IsA(UsdPhysics.SphericalJoint)):
            result.add(Finding("joint-frames", path, f"its frames in body0 and body1 disagree with the bodies' "
                               f"rest poses by {distance:.3g} m / {math.degrees(angle):.3g}°"))
    result.detail = f"{bodies} bodies, {joints} joints"
    return result


def _check_mass(prim, path: str, result: CheckResult) -> None:
    from pxr import UsdPhysics

    if _value(prim, "physics:kinematicEnabled") or _value(prim, "physics:rigidBodyEnabled") is False:
        return
    if not prim.HasAPI(UsdPhysics.MassAPI):
        return  # mass from the colliders' density: nothing authored to check
    mass = _value(prim, "physics:mass")
    if mass is not None and (not math.isfinite(mass) or mass <= 0):
        result.add(Finding("mass", path, f"a dynamic body with physics:mass = {mass} (engines read 0 literally "
                           "or reject it)"))
    inertia = _value(prim, "physics:diagonalInertia")
    if inertia is not None and (not all(math.isfinite(v) for v in inertia) or min(inertia) < 0):
        result.add(Finding("mass", path, f"physics:diagonalInertia = {tuple(inertia)} is not finite and ≥ 0"))
    center = _value(prim, "physics:centerOfMass")
    if center is not None and not all(math.isfinite(v) for v in center):
        result.add(Finding("mass", path, f"physics:centerOfMass = {tuple(center)} is not finite"))


def _check_limits(prim, path: str, result: CheckResult) -> None:
    from pxr import UsdPhysics

    if not (prim.IsA(UsdPhysics.RevoluteJoint) or prim.IsA(UsdPhysics.PrismaticJoint)):
        return  # D6 joints lock a DoF with low > high on purpose
    lower, upper = _value(prim, "physics:lowerLimit"), _value(prim, "physics:upperLimit")
    for name, value in (("lowerLimit", lower), ("upperLimit", upper)):
        if value is not None and math.isnan(value):
            result.add(Finding("joint-limits", path, f"physics:{name} is NaN"))
    if lower is not None and upper is not None and lower > upper:
        result.add(Finding("joint-limits", path, f"inverted limits: physics:lowerLimit {lower:g} > "
                           f"physics:upperLimit {upper:g}"))
