"""MuJoCo joint and body dynamics that UsdPhysics has no attribute for, per engine layer, and the fixes
the shared writer needs for MJCF semantics.

- mujoco layer, ``MjcJointAPI``: stiffness, springref (shifted by ``ref`` like every joint coordinate),
  margin, group, limit and friction solver parameters, actuator force range and gravity compensation, in
  SI units per radian (the scene says ``mjc:compiler:angle = "radian"``); ``mjc:gravcomp`` on bodies.
- newton layer, ``NewtonJointAPI``: armature, damping (per degree for angular joints), friction (MuJoCo's
  frictionloss) — MuJoCo 4.0's decoder reads these and calls its own ``mjc:armature``/``damping``/
  ``frictionloss`` deprecated, so they are written once, here — and the
  joint-limit spring of MuJoCo's ``solreflimit`` (stiffness ``1/(timeconst·dampratio)²``, damping
  ``2/timeconst``, per degree; or MuJoCo's direct ``(-stiffness, -damping)`` form).
- physics layer: ``usdforge:ref`` (MuJoCo's ``ref``, rad or m) on hinge and slide joints, the cone limit
  of spherical joints (MuJoCo's ball ``range[1]``, degrees) and the drive
  target at ``ctrl = 0``; world-welded bodies lose the rigid body the shared writer gives every link (they
  are static colliders in MuJoCo).
"""

from __future__ import annotations

import math

from pxr import Sdf

from usdforge.rules.usd import layer as sdf

from usdforge.rules.mjcf.bodies import BALL, HINGE, SLIDE
from usdforge.rules.native_loads import import_exclusively
from usdforge.rules.mjcf.usd import MjcfUsd, limited_token, set_all, set_custom
from usdforge.schemas.mujoco import MujocoRigidBodyPropertiesCfg
from usdforge.schemas.units import radians_to_degrees

#: Attributes of UsdPhysics.MassAPI and RigidBodyAPI that a static link must not carry.
_RIGID_ATTRIBUTES = ("physics:mass", "physics:centerOfMass", "physics:diagonalInertia", "physics:principalAxes",
                     "physics:kinematicEnabled", "physics:density")


def limit_spring(solref: tuple[float, float], angular: bool) -> tuple[float, float] | None:
    """Newton's limit stiffness and damping for MuJoCo's ``solreflimit`` (per degree when ``angular``);
    None when MuJoCo would use its defaults (a non-positive time constant)."""
    timeconst, dampratio = solref
    if timeconst < 0.0 and dampratio < 0.0:
        stiffness, damping = -timeconst, -dampratio
    elif timeconst > 0.0 and dampratio > 0.0:
        stiffness, damping = 1.0 / (timeconst * timeconst * dampratio * dampratio), 2.0 / timeconst
    else:
        return None
    scale = math.pi / 180.0 if angular else 1.0
    return stiffness * scale, damping * scale


def author_joint_dynamics(usd: MjcfUsd, drive_targets: dict[str, float]) -> None:
    """The per-engine joint attributes of every hinge, slide and ball joint (see the module docstring)."""
    model = usd.loaded.model
    for joint in range(model.njnt):
        path = usd.joint_path(joint)
        kind = int(model.jnt_type[joint])
        if path is None or kind not in (HINGE, SLIDE, BALL):
            continue
        dof = int(model.jnt_dofadr[joint])
        angular = kind != SLIDE
        qpos = int(model.jnt_qposadr[joint])
        values = {
            "mjc:stiffness": model.jnt_stiffness[joint],
            "mjc:margin": model.jnt_margin[joint], "mjc:group": int(model.jnt_group[joint]),
            "mjc:solreflimit": model.jnt_solref[joint], "mjc:solimplimit": model.jnt_solimp[joint],
            "mjc:solreffriction": model.dof_solref[dof], "mjc:solimpfriction": model.dof_solimp[dof],
            "mjc:actuatorfrclimited": limited_token(model.jnt_actfrclimited[joint]),
            "mjc:actuatorfrcrange:min": model.jnt_actfrcrange[joint, 0],
            "mjc:actuatorfrcrange:max": model.jnt_actfrcrange[joint, 1],
            "mjc:actuatorgravcomp": bool(model.jnt_actgravcomp[joint]),
        }
        if kind != BALL:
            # The spring rest position, in USD joint coordinates (MuJoCo's minus its qpos0).
            values["mjc:springref"] = float(model.qpos_spring[qpos] - model.qpos0[qpos])
        set_all(usd.spec("mujoco", path), values, ["MjcJointAPI"])
        per_degree = math.pi / 180.0 if angular else 1.0
        newton = {"newton:armature": model.dof_armature[dof],
                  "newton:damping": model.dof_damping[dof] * per_degree,
                  "newton:friction": model.dof_frictionloss[dof]}
        spring = limit_spring(tuple(model.jnt_solref[joint]), angular) if model.jnt_limited[joint] else None
        if spring is not None:
            newton["newton:limitStiffness"], newton["newton:limitDamping"] = spring
        set_all(usd.spec("newton", path), newton, ["NewtonJointAPI"])
        physics = usd.spec("physics", path)
        if physics is None:
            continue
        if kind != BALL:
            # MuJoCo's zero, folded into the rest pose (docs/usd_layout.md): q_usd = q_mujoco - ref.
            set_custom(physics, "usdforge:ref", float(model.qpos0[qpos]))
        if kind == BALL and model.jnt_limited[joint]:
            cone = float(radians_to_degrees(model.jnt_range[joint, 1]))
            sdf.attribute(physics, "physics:coneAngle0Limit", Sdf.ValueTypeNames.Float, cone)
            sdf.attribute(physics, "physics:coneAngle1Limit", Sdf.ValueTypeNames.Float, cone)
        robot_name = usd.bodies.joint_of_jnt[joint]
        if robot_name in drive_targets:
            target = drive_targets[robot_name]
            axis = "angular" if angular else "linear"
            sdf.apply_schemas(physics, f"PhysicsDriveAPI:{axis}")
            sdf.attribute(physics, f"drive:{axis}:physics:targetPosition", Sdf.ValueTypeNames.Float,
                          float(radians_to_degrees(target) if angular else target))


def author_body_dynamics(usd: MjcfUsd) -> None:
    """Gravity compensation of moving bodies; static links stripped of their rigid body."""
    model = usd.loaded.model
    for body, link in usd.bodies.link_of_body.items():
        path = usd.ctx.link_paths[link]
        if link in usd.bodies.static:
            physics = usd.spec("physics", path)
            if physics is None:
                continue
            if physics.HasInfo("apiSchemas"):
                kept = [n for n in physics.GetInfo("apiSchemas").prependedItems
                        if n not in ("PhysicsRigidBodyAPI", "PhysicsMassAPI")]
                if kept:
                    physics.SetInfo("apiSchemas", Sdf.TokenListOp.Create(prependedItems=kept))
                else:  # no list op at all: an empty one is written as "( )", which reads back as nothing
                    physics.ClearInfo("apiSchemas")
            for name in _RIGID_ATTRIBUTES:
                if name in physics.attributes:
                    physics.RemoveProperty(physics.attributes[name])
            continue
        gravcomp = float(model.body_gravcomp[body]) if body > 0 else 0.0
        if gravcomp == 0.0 or not usd.authored("mujoco"):
            continue
        if 0.0 <= gravcomp <= 1.0:
            # The Usd-level writer (it loads UsdPhysics, UsdGeom, UsdShade), for gravcomp only; never
            # beside another thread's native load (rules.native_loads).
            author_cfg = import_exclusively("usdforge.schemas.writer").author_cfg
            author_cfg(usd.ctx.prim("mujoco", path), MujocoRigidBodyPropertiesCfg(gravcomp=gravcomp))
        else:
            # MuJoCo allows over-compensation (buoyancy); the cfg covers [0, 1] only.
            set_custom(usd.spec("mujoco", path), "mjc:gravcomp", gravcomp)

