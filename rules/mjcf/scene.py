"""``import_physics_scene``: MuJoCo's ``<option>`` as a ``UsdPhysics.Scene`` at ``/<robot>/PhysicsScene``.

physics layer: gravity direction and magnitude (m/s²). mujoco layer, ``MjcSceneAPI``: solver, integrator,
tolerances, global contact overrides, medium (density, viscosity, wind, magnetic field), every ``<flag>``
but gravity, the time step (s) only when a whole number of steps per second cannot say it, plus
``mjc:compiler:angle = "radian"``: every angle-valued ``mjc:`` attribute usdforge writes is in radians.
newton layer, ``NewtonSceneAPI``: steps per second, solver iterations, gravity on/off (MuJoCo 4.0's
decoder reads these and calls ``mjc:option:timestep``, ``mjc:option:iterations`` and ``mjc:flag:gravity``
deprecated). physx layer, ``PhysxSceneAPI``: steps per second."""

from __future__ import annotations

import mujoco
import numpy as np
from pxr import Gf, Sdf

from usdforge.rules.native_loads import import_exclusively

from usdforge.rules.mjcf.usd import MjcfUsd, set_all

#: ``mjc:flag:*`` names of MuJoCo 4.0's ``MjcSceneAPI``.
SCHEMA_FLAGS = ("actuation", "autoreset", "clampctrl", "constraint", "contact", "damper", "energy", "equality",
                "eulerdamp", "filterparent", "frictionloss", "fwdinv", "gravity", "invdiscrete", "island",
                "limit", "midphase", "multiccd", "nativeccd", "override", "refsafe", "sensor", "sleep", "spring",
                "warmstart")


def _token(enum: type, value: int, prefix: str) -> str:
    for name, member in enum.__members__.items():
        if int(member) == int(value):
            return name.removeprefix(prefix).lower()
    raise ValueError(f"{enum.__name__} has no value {value}")


def scene_flags(option: mujoco.MjOption) -> dict[str, bool]:
    """``mjc:flag:<name>`` → on/off: disable bits are on when not set, enable bits when set."""
    flags: dict[str, bool] = {}
    for name, bit in mujoco.mjtDisableBit.__members__.items():
        flag = name.removeprefix("mjDSBL_").lower()
        if flag in SCHEMA_FLAGS:
            flags[f"mjc:flag:{flag}"] = not option.disableflags & int(bit)
    for name, bit in mujoco.mjtEnableBit.__members__.items():
        flag = name.removeprefix("mjENBL_").lower()
        if flag in SCHEMA_FLAGS:
            flags[f"mjc:flag:{flag}"] = bool(option.enableflags & int(bit))
    return flags


def author_scene(usd: MjcfUsd) -> Sdf.Path:
    """The PhysicsScene of the model's options; returns its path."""
    option = usd.loaded.model.opt
    path = usd.scope("PhysicsScene")
    if usd.authored("physics"):  # else restored: no stage opened on its stand-in
        # Here: only with import_physics_scene; never beside another thread's native load (rules.native_loads).
        UsdPhysics = import_exclusively("pxr.UsdPhysics")
        scene = UsdPhysics.Scene.Define(usd.ctx.stage("physics"), path)
        gravity = np.asarray(option.gravity, dtype=np.float64)
        magnitude = float(np.linalg.norm(gravity))
        direction = gravity / magnitude if magnitude > 0 else np.array([0.0, 0.0, -1.0])
        scene.CreateGravityDirectionAttr(Gf.Vec3f(*map(float, direction)))
        scene.CreateGravityMagnitudeAttr(magnitude)
    values = {
        "mjc:compiler:angle": "radian",
        "mjc:option:timestep": option.timestep, "mjc:option:impratio": option.impratio,
        "mjc:option:tolerance": option.tolerance, "mjc:option:ls_tolerance": option.ls_tolerance,
        "mjc:option:noslip_tolerance": option.noslip_tolerance, "mjc:option:ccd_tolerance": option.ccd_tolerance,
        "mjc:option:density": option.density, "mjc:option:viscosity": option.viscosity,
        "mjc:option:o_margin": option.o_margin, "mjc:option:wind": option.wind,
        "mjc:option:magnetic": option.magnetic, "mjc:option:o_solref": option.o_solref,
        "mjc:option:o_solimp": option.o_solimp, "mjc:option:o_friction": option.o_friction,
        "mjc:option:integrator": _token(mujoco.mjtIntegrator, option.integrator, "mjINT_"),
        "mjc:option:cone": _token(mujoco.mjtCone, option.cone, "mjCONE_"),
        "mjc:option:jacobian": _token(mujoco.mjtJacobian, option.jacobian, "mjJAC_"),
        "mjc:option:solver": _token(mujoco.mjtSolver, option.solver, "mjSOL_"),
        "mjc:option:iterations": option.iterations, "mjc:option:ls_iterations": option.ls_iterations,
        "mjc:option:noslip_iterations": option.noslip_iterations,
        "mjc:option:ccd_iterations": option.ccd_iterations, "mjc:option:sdf_iterations": option.sdf_iterations,
        "mjc:option:sdf_initpoints": option.sdf_initpoints,
        **scene_flags(option),
    }
    steps = int(round(1.0 / option.timestep)) if option.timestep > 0 else 500
    # MuJoCo 4.0's decoder reads these from the newton layer and calls its own deprecated; the time step
    # stays here only when a whole number of steps per second cannot say it.
    del values["mjc:option:iterations"], values["mjc:flag:gravity"]
    if 1.0 / steps == option.timestep:
        del values["mjc:option:timestep"]
    set_all(usd.prim("mujoco", path), values, ["MjcSceneAPI"])
    set_all(usd.prim("newton", path), {
        "newton:timeStepsPerSecond": steps, "newton:maxSolverIterations": int(option.iterations),
        "newton:gravityEnabled": not option.disableflags & int(mujoco.mjtDisableBit.mjDSBL_GRAVITY)},
        ["NewtonSceneAPI"])
    physx = usd.prim("physx", path)
    if physx is not None:
        physx.AddAppliedSchema("PhysxSceneAPI")
        physx.CreateAttribute("physxScene:timeStepsPerSecond", Sdf.ValueTypeNames.UInt, custom=False).Set(steps)
    return path
