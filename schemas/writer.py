"""Authoring cfgs onto USD prims: each routed field → its attribute, its applied schema applied once.

Typed UsdPhysics APIs apply the schemas they define (``UsdPhysics.RigidBodyAPI.Apply``); schemas that
usd-core does not ship (PhysX, Newton, MuJoCo) are added by name and their attributes created with the
value's type. Fields that are None are skipped: None means "leave as authored".

On top of ``author_cfg`` (one cfg → one prim) sit functions in Isaac Lab's shape,
``define_*_properties(prim_path, cfg, stage)`` (apply the group's API to that prim, then modify it) and
``modify_*_properties(prim_path, cfg, stage)`` (author the cfg on the prim and, going down its subtree, on
every prim that has the group's API; the subtree below a prim that took the cfg is not searched further).
They raise ValueError when ``prim_path`` names no prim, and return False when no prim took the cfg.
The writer-side fields (``fix_root_link``, ``ensure_drives_exist``) are handled here, and
``effective_rigid_props`` is Isaac Lab's spawner rule for MuJoCo gravity compensation (a joint drive cfg
with ``actuatorgravcomp`` enables body ``gravcomp``), for code that applies a rigid and a joint drive cfg to
one asset; usdforge's converters take no joint drive cfg and do not call it (MJCF ``gravcomp`` is the
source's own, ``rules.mjcf.dynamics``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import attrs
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, UsdShade

from usdforge.schemas.mujoco import MujocoJointDrivePropertiesCfg, MujocoRigidBodyPropertiesCfg
from usdforge.schemas.physics import (MIN_DRIVE_STIFFNESS, ArticulationRootBaseCfg, CollisionBaseCfg, JointDriveBaseCfg,
                             MassPropertiesCfg, MeshCollisionBaseCfg, RigidBodyBaseCfg, RigidBodyMaterialBaseCfg,
                             cfg_class)
from usdforge.schemas.routing import UsdRoute, field_route
from usdforge.schemas.units import per_radian_to_per_degree, radians_to_degrees

#: Drive axes (``UsdPhysics.DriveAPI`` instance names).
DRIVE_AXES = ("angular", "linear")

#: Single-apply UsdPhysics schemas by applied-schema name.
_TYPED_SCHEMAS = {
    "PhysicsRigidBodyAPI": UsdPhysics.RigidBodyAPI,
    "PhysicsMassAPI": UsdPhysics.MassAPI,
    "PhysicsCollisionAPI": UsdPhysics.CollisionAPI,
    "PhysicsMeshCollisionAPI": UsdPhysics.MeshCollisionAPI,
    "PhysicsArticulationRootAPI": UsdPhysics.ArticulationRootAPI,
    "PhysicsMaterialAPI": UsdPhysics.MaterialAPI,
    "PhysicsFilteredPairsAPI": UsdPhysics.FilteredPairsAPI,
}
#: Multi-apply UsdPhysics schemas, written ``Name:instance``.
_TYPED_MULTI_SCHEMAS = {"PhysicsDriveAPI": UsdPhysics.DriveAPI, "PhysicsLimitAPI": UsdPhysics.LimitAPI}


def applied_schemas(prim: Usd.Prim) -> list[str]:
    """Every applied API schema of the prim, including the ones usd-core has no definition for (PhysX,
    Newton, MuJoCo), which ``Usd.Prim.GetAppliedSchemas`` leaves out."""
    return list(prim.GetPrimTypeInfo().GetAppliedAPISchemas())


def apply_schema(prim: Usd.Prim, schema: str) -> None:
    """Apply ``schema`` (``PhysicsMassAPI``, ``PhysicsDriveAPI:angular``, ``PhysxRigidBodyAPI``) once."""
    if schema in applied_schemas(prim):
        return
    name, _, instance = schema.partition(":")
    if name in _TYPED_SCHEMAS and not instance:
        _TYPED_SCHEMAS[name].Apply(prim)
    elif name in _TYPED_MULTI_SCHEMAS and instance:
        _TYPED_MULTI_SCHEMAS[name].Apply(prim, instance)
    else:
        prim.AddAppliedSchema(schema)


def _value_type(value: Any) -> Sdf.ValueTypeName:
    if isinstance(value, bool):
        return Sdf.ValueTypeNames.Bool
    if isinstance(value, int):
        return Sdf.ValueTypeNames.Int
    if isinstance(value, float):
        return Sdf.ValueTypeNames.Float
    if isinstance(value, str):
        return Sdf.ValueTypeNames.Token
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float)) for v in value):
        return {3: Sdf.ValueTypeNames.Float3}.get(len(value), Sdf.ValueTypeNames.FloatArray)
    raise TypeError(f"no USD type for {value!r}")


def set_attribute(prim: Usd.Prim, name: str, value: Any) -> Usd.Attribute:
    """Set ``name`` on ``prim``: the schema's declared type when a schema defines it, else the value's."""
    attribute = prim.GetAttribute(name)
    if not attribute or not attribute.GetTypeName():
        attribute = prim.CreateAttribute(name, _value_type(value), custom=False)
    type_name = attribute.GetTypeName()
    if type_name == Sdf.ValueTypeNames.Int and isinstance(value, float) and value.is_integer():
        value = int(value)
    attribute.Set(value)
    return attribute


def usd_value(found: UsdRoute, value: Any, axis: str | None) -> Any:
    """``value`` in the units USD wants for ``found`` on a joint with ``axis`` (conversions: schemas.units)."""
    if axis == "angular" and found.per_degree:
        return per_radian_to_per_degree(value)
    if axis == "angular" and found.degrees:
        return radians_to_degrees(value)
    return value


def author_field(prim: Usd.Prim, cls: type, field_name: str, value: Any, axis: str | None = None) -> str | None:
    """Author one field of cfg class ``cls`` with ``value`` on ``prim``; return the attribute name written
    (None for writer-side fields or a None value). See ``author_cfg`` for ``axis``."""
    if value is None:
        return None
    found = field_route(cls, field_name)
    if found is None:
        return None
    if found.needs_axis and axis not in DRIVE_AXES:
        raise ValueError(f"{cls.__name__}.{field_name} needs the joint's drive axis ('angular' or 'linear'), "
                         f"got {axis!r}")
    name = found.attribute.format(axis=axis)
    if found.schema is not None:
        apply_schema(prim, found.schema.format(axis=axis))
    set_attribute(prim, name, usd_value(found, value, axis))
    return name


def author_cfg(prim: Usd.Prim, cfg: Any, axis: str | None = None) -> list[str]:
    """Author every non-None routed field of ``cfg`` on ``prim``; return the attribute names written.

    Each field goes to the namespace of the class that declares it, or to its documented exception; its
    applied schema is added only when the field is written. Writer-side fields are skipped.
    axis: the drive axis ("angular" or "linear") for routes containing ``{axis}`` or converting angular
        units; per-radian gains become per-degree and rad/s becomes deg/s when the axis is angular.
    """
    written = []
    for field in attrs.fields(type(cfg)):
        name = author_field(prim, type(cfg), field.name, getattr(cfg, field.name), axis)
        if name is not None:
            written.append(name)
    return written


# --------------------------------------------------------------------------------------------------------
# define_* / modify_* in Isaac Lab's shape
# --------------------------------------------------------------------------------------------------------


def _prim(stage: Usd.Stage, prim_path: str | Sdf.Path) -> Usd.Prim:
    if stage is None:
        raise ValueError("a stage is required (usdforge has no current stage)")
    prim = stage.GetPrimAtPath(str(prim_path))
    if not prim or not prim.IsValid():
        raise ValueError(f"prim path {str(prim_path)!r} is not valid: no prim there on stage "
                         f"{stage.GetRootLayer().identifier!r}")
    return prim


def _apply_nested(prim_path: str | Sdf.Path, stage: Usd.Stage, apply: Callable[[Usd.Prim], bool]) -> bool:
    """Run ``apply`` on the prim and, breadth first, on its descendants; below a prim where it returned True
    the search stops. Instance prims are skipped (their content cannot be authored). True if any prim took it."""
    queue = [_prim(stage, prim_path)]
    applied = False
    while queue:
        prim = queue.pop(0)
        if prim.IsInstance():
            continue
        if apply(prim):
            applied = True
        else:
            queue.extend(prim.GetChildren())
    return applied


def _modify(prim_path: str | Sdf.Path, cfg: Any, stage: Usd.Stage, api: type, expected: type) -> bool:
    if not isinstance(cfg, expected):
        raise TypeError(f"expected a {expected.__name__} (or a subclass), got {type(cfg).__name__}")

    def apply(prim: Usd.Prim) -> bool:
        if not prim.HasAPI(api):
            return False
        author_cfg(prim, cfg)
        return True

    return _apply_nested(prim_path, stage, apply)


def _define(prim_path: str | Sdf.Path, stage: Usd.Stage, api: type) -> Usd.Prim:
    prim = _prim(stage, prim_path)
    if not prim.HasAPI(api):
        api.Apply(prim)
    return prim


def define_rigid_body_properties(prim_path: str, cfg: RigidBodyBaseCfg, stage: Usd.Stage) -> bool:
    """Apply ``UsdPhysics.RigidBodyAPI`` to the prim and author ``cfg`` (see modify_rigid_body_properties)."""
    _define(prim_path, stage, UsdPhysics.RigidBodyAPI)
    return modify_rigid_body_properties(prim_path, cfg, stage)


def modify_rigid_body_properties(prim_path: str, cfg: RigidBodyBaseCfg, stage: Usd.Stage) -> bool:
    """Author a rigid body cfg (any ``RigidBodyBaseCfg`` subclass) on every prim with ``RigidBodyAPI`` at or
    below ``prim_path``. False when there is none."""
    return _modify(prim_path, cfg, stage, UsdPhysics.RigidBodyAPI, RigidBodyBaseCfg)


def define_collision_properties(prim_path: str, cfg: CollisionBaseCfg, stage: Usd.Stage) -> bool:
    """Apply ``UsdPhysics.CollisionAPI`` to the prim and author ``cfg`` (see modify_collision_properties)."""
    _define(prim_path, stage, UsdPhysics.CollisionAPI)
    return modify_collision_properties(prim_path, cfg, stage)


def modify_collision_properties(prim_path: str, cfg: CollisionBaseCfg, stage: Usd.Stage) -> bool:
    """Author a collision cfg on every prim with ``CollisionAPI`` at or below ``prim_path``."""
    return _modify(prim_path, cfg, stage, UsdPhysics.CollisionAPI, CollisionBaseCfg)


def define_mass_properties(prim_path: str, cfg: MassPropertiesCfg, stage: Usd.Stage) -> bool:
    """Apply ``UsdPhysics.MassAPI`` to the prim and author ``cfg`` (see modify_mass_properties)."""
    _define(prim_path, stage, UsdPhysics.MassAPI)
    return modify_mass_properties(prim_path, cfg, stage)


def modify_mass_properties(prim_path: str, cfg: MassPropertiesCfg, stage: Usd.Stage) -> bool:
    """Author a mass cfg on every prim with ``MassAPI`` at or below ``prim_path``."""
    return _modify(prim_path, cfg, stage, UsdPhysics.MassAPI, MassPropertiesCfg)


def define_mesh_collision_properties(prim_path: str, cfg: MeshCollisionBaseCfg, stage: Usd.Stage) -> bool:
    """Apply ``UsdPhysics.MeshCollisionAPI`` to the prim and author ``cfg``."""
    _define(prim_path, stage, UsdPhysics.MeshCollisionAPI)
    return modify_mesh_collision_properties(prim_path, cfg, stage)


def modify_mesh_collision_properties(prim_path: str, cfg: MeshCollisionBaseCfg, stage: Usd.Stage) -> bool:
    """Author a mesh collision cfg on every prim with ``MeshCollisionAPI`` at or below ``prim_path``. A
    ``NewtonMeshCollisionPropertiesCfg`` also authors its collision fields (multi-namespace)."""
    return _modify(prim_path, cfg, stage, UsdPhysics.MeshCollisionAPI, MeshCollisionBaseCfg)


# -- joint drives ----------------------------------------------------------------------------------------


def drive_axis(prim: Usd.Prim) -> str | None:
    """The drive instance of a joint prim: "angular" (revolute), "linear" (prismatic), else None."""
    if prim.IsA(UsdPhysics.RevoluteJoint):
        return "angular"
    if prim.IsA(UsdPhysics.PrismaticJoint):
        return "linear"
    return None


def _ensure_drive(prim: Usd.Prim, axis: str, cls: type) -> None:
    """ensure_drives_exist: a drive whose stiffness and damping are both zero (or unauthored) gets
    ``MIN_DRIVE_STIFFNESS`` (cfg units, converted like the stiffness field)."""
    apply_schema(prim, f"PhysicsDriveAPI:{axis}")
    drive = UsdPhysics.DriveAPI(prim, axis)
    stiffness = drive.GetStiffnessAttr().Get()
    damping = drive.GetDampingAttr().Get()
    if not stiffness and not damping:
        author_field(prim, cls, "stiffness", MIN_DRIVE_STIFFNESS, axis)


def _author_joint_drive(prim: Usd.Prim, cfg: JointDriveBaseCfg) -> bool:
    axis = drive_axis(prim)
    if axis is None:
        return False
    author_cfg(prim, cfg, axis)
    if cfg.ensure_drives_exist:
        _ensure_drive(prim, axis, type(cfg))
    return True


def define_joint_drive_properties(prim_path: str, cfg: JointDriveBaseCfg, stage: Usd.Stage) -> bool:
    """Apply ``UsdPhysics.DriveAPI`` (instance from the joint type: revolute → "angular", prismatic →
    "linear") to the joint prim and author ``cfg``. ValueError when the prim is not such a joint."""
    prim = _prim(stage, prim_path)
    axis = drive_axis(prim)
    if axis is None:
        raise ValueError(f"prim {str(prim_path)!r} is a {prim.GetTypeName() or 'typeless prim'}, not a revolute "
                         "or prismatic joint: it cannot have a joint drive")
    apply_schema(prim, f"PhysicsDriveAPI:{axis}")
    return modify_joint_drive_properties(prim_path, cfg, stage)


def modify_joint_drive_properties(prim_path: str, cfg: JointDriveBaseCfg, stage: Usd.Stage) -> bool:
    """Author a joint drive cfg on every revolute/prismatic joint at or below ``prim_path``.

    The drive axis comes from the joint type (revolute → "angular", prismatic → "linear"): angular
    stiffness/damping are converted to per degree and max_joint_velocity to deg/s. The DriveAPI is applied
    only when a drive field is set (or ensure_drives_exist needs it). False when there is no such joint.
    """
    if not isinstance(cfg, JointDriveBaseCfg):
        raise TypeError(f"expected a JointDriveBaseCfg (or a subclass), got {type(cfg).__name__}")
    return _apply_nested(prim_path, stage, lambda prim: _author_joint_drive(prim, cfg))


# -- articulation root -----------------------------------------------------------------------------------


def world_fixed_joints(stage: Usd.Stage, body_path: str | Sdf.Path) -> list[UsdPhysics.FixedJoint]:
    """The fixed joints of the stage that tie ``body_path`` to the world (the other body empty)."""
    body_path = Sdf.Path(str(body_path))
    found = []
    for prim in stage.Traverse():
        if not prim.IsA(UsdPhysics.FixedJoint):
            continue
        joint = UsdPhysics.FixedJoint(prim)
        body0 = list(joint.GetBody0Rel().GetTargets())
        body1 = list(joint.GetBody1Rel().GetTargets())
        if (not body0 and body1 == [body_path]) or (not body1 and body0 == [body_path]):
            found.append(joint)
    return found


def _create_world_fixed_joint(stage: Usd.Stage, body: Usd.Prim) -> UsdPhysics.FixedJoint:
    """A FixedJoint with an empty body0 (the world) and body1 = ``body``, in ``<parent>/joints/``, whose
    world frame is the body's current world pose, so nothing moves."""
    parent = body.GetParent()
    folder = (Sdf.Path.absoluteRootPath if parent.IsPseudoRoot() else parent.GetPath()).AppendChild("joints")
    if not stage.GetPrimAtPath(folder):
        stage.DefinePrim(folder, "Scope")
    name, index = "FixedJoint", 0
    while stage.GetPrimAtPath(folder.AppendChild(name)):
        index += 1
        name = f"FixedJoint_{index}"
    joint = UsdPhysics.FixedJoint.Define(stage, folder.AppendChild(name))
    joint.CreateBody1Rel().SetTargets([body.GetPath()])
    pose = Gf.Transform(UsdGeom.Xformable(body).ComputeLocalToWorldTransform(Usd.TimeCode.Default()))
    joint.CreateLocalPos0Attr(Gf.Vec3f(pose.GetTranslation()))
    joint.CreateLocalRot0Attr(Gf.Quatf(pose.GetRotation().GetQuat()))
    joint.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
    joint.CreateLocalRot1Attr(Gf.Quatf(1.0, 0.0, 0.0, 0.0))
    return joint


def _author_articulation_root(prim: Usd.Prim, cfg: ArticulationRootBaseCfg) -> bool:
    if not prim.HasAPI(UsdPhysics.ArticulationRootAPI):
        return False
    author_cfg(prim, cfg)
    if cfg.fix_root_link is not None:
        stage = prim.GetStage()
        existing = world_fixed_joints(stage, prim.GetPath())
        for joint in existing:
            joint.CreateJointEnabledAttr().Set(bool(cfg.fix_root_link))
        if not existing and cfg.fix_root_link:
            if not prim.HasAPI(UsdPhysics.RigidBodyAPI):
                raise ValueError(f"fix_root_link: the articulation root {str(prim.GetPath())!r} is not a rigid body; "
                                 "put ArticulationRootAPI on the root link to fix it to the world")
            _create_world_fixed_joint(stage, prim)
    return True


def define_articulation_root_properties(prim_path: str, cfg: ArticulationRootBaseCfg, stage: Usd.Stage) -> bool:
    """Apply ``UsdPhysics.ArticulationRootAPI`` to the prim (the root rigid body) and author ``cfg``."""
    _define(prim_path, stage, UsdPhysics.ArticulationRootAPI)
    return modify_articulation_root_properties(prim_path, cfg, stage)


def modify_articulation_root_properties(prim_path: str, cfg: ArticulationRootBaseCfg, stage: Usd.Stage) -> bool:
    """Author an articulation root cfg on every prim with ``ArticulationRootAPI`` at or below ``prim_path``.

    fix_root_link=True ties the root body to the world with a ``UsdPhysics.FixedJoint`` (body0 empty) unless
    one exists, which is then enabled; False disables an existing one. ValueError when the root to fix is
    not a rigid body.
    """
    if not isinstance(cfg, ArticulationRootBaseCfg):
        raise TypeError(f"expected an ArticulationRootBaseCfg (or a subclass), got {type(cfg).__name__}")
    return _apply_nested(prim_path, stage, lambda prim: _author_articulation_root(prim, cfg))


# -- materials -------------------------------------------------------------------------------------------


def spawn_rigid_body_material(prim_path: str, cfg: RigidBodyMaterialBaseCfg, stage: Usd.Stage) -> UsdShade.Material:
    """Define a ``UsdShade.Material`` at ``prim_path`` (if none is there) carrying the physics material ``cfg``."""
    material = UsdShade.Material.Define(stage, prim_path)
    define_material_properties(prim_path, cfg, stage)
    return material


def define_material_properties(prim_path: str, cfg: RigidBodyMaterialBaseCfg, stage: Usd.Stage) -> bool:
    """Apply ``UsdPhysics.MaterialAPI`` to the prim (normally a ``UsdShade.Material``) and author ``cfg``."""
    _define(prim_path, stage, UsdPhysics.MaterialAPI)
    return modify_material_properties(prim_path, cfg, stage)


def modify_material_properties(prim_path: str, cfg: RigidBodyMaterialBaseCfg, stage: Usd.Stage) -> bool:
    """Author a material cfg on every prim with ``MaterialAPI`` at or below ``prim_path``."""
    return _modify(prim_path, cfg, stage, UsdPhysics.MaterialAPI, RigidBodyMaterialBaseCfg)


def bind_physics_material(prim_path: str, material_path: str, stage: Usd.Stage) -> None:
    """Bind the material at ``material_path`` to the prim (and its descendants, weaker than their own
    bindings) for the "physics" purpose."""
    prim = _prim(stage, prim_path)
    material = UsdShade.Material(_prim(stage, material_path))
    if not material:
        raise ValueError(f"prim {material_path!r} is not a UsdShade.Material")
    UsdShade.MaterialBindingAPI.Apply(prim).Bind(material, UsdShade.Tokens.weakerThanDescendants, "physics")


# -- MuJoCo gravity compensation -------------------------------------------------------------------------


@functools.cache
def _with_mujoco_gravcomp(cls: type) -> type:
    """A rigid cfg class with every field of ``cls`` plus ``gravcomp`` (each routed by its declaring class)."""
    if issubclass(cls, MujocoRigidBodyPropertiesCfg):
        return cls
    if issubclass(MujocoRigidBodyPropertiesCfg, cls):
        return MujocoRigidBodyPropertiesCfg
    merged = type(f"{cls.__name__}WithMujocoGravcomp", (cls, MujocoRigidBodyPropertiesCfg),
                  {"__doc__": f"{cls.__name__} plus MujocoRigidBodyPropertiesCfg.gravcomp (made by "
                              "schemas.writer.effective_rigid_props; authored, not serialised).",
                   "__module__": __name__, "__usdforge_internal__": True})
    return cfg_class(merged)


def effective_rigid_props(rigid_props: RigidBodyBaseCfg | None, joint_drive_props: JointDriveBaseCfg | None
                          ) -> RigidBodyBaseCfg | None:
    """The rigid body cfg to author, given the asset's rigid and joint drive cfgs.

    ``actuatorgravcomp=True`` alone is a no-op in MuJoCo (no body-level gravcomp, no force to route), so
    when ``joint_drive_props`` is a ``MujocoJointDrivePropertiesCfg`` with ``actuatorgravcomp=True`` and
    ``rigid_props`` is not a ``MujocoRigidBodyPropertiesCfg``, the result is ``rigid_props`` with
    ``gravcomp=1.0`` added: ``MujocoRigidBodyPropertiesCfg(gravcomp=1.0)`` for None, the same fields in a
    ``MujocoRigidBodyPropertiesCfg`` for a base or Newton cfg, and for another backend's cfg (PhysX) a cfg
    that keeps its fields and adds ``gravcomp`` (both namespaces authored). An explicit Mujoco rigid cfg is
    returned unchanged (that is how to choose another gravcomp or to opt out). Otherwise ``rigid_props``.
    """
    wants = isinstance(joint_drive_props, MujocoJointDrivePropertiesCfg) and joint_drive_props.actuatorgravcomp is True
    if not wants or isinstance(rigid_props, MujocoRigidBodyPropertiesCfg):
        return rigid_props
    if rigid_props is None:
        return MujocoRigidBodyPropertiesCfg(gravcomp=1.0)
    values = {field.name: getattr(rigid_props, field.name) for field in attrs.fields(type(rigid_props)) if field.init}
    return _with_mujoco_gravcomp(type(rigid_props))(**values, gravcomp=1.0)
