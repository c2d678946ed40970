"""Shared pieces of the MJCF rule's own USD authoring: where things are, and typed ``mjc:``/``newton:``
attributes.

usd-core does not ship MuJoCo's ``mjcPhysics`` schema nor Newton's, so their attributes are created by
name; a reader built with those schemas (MuJoCo's USD decoder, Newton) reads an attribute only when its
authored type is the schema's (a ``double`` authored as ``float`` reads as missing). The tables below
copy the types of MuJoCo 4.0's ``mjcPhysics`` and Newton's ``newton_usd_schemas`` 0.6 for the attributes
usdforge writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np
from pxr import Gf, Sdf, Usd, Vt

from usdforge.rules.usd import layer as sdf
from usdforge.rules.mjcf.bodies import BodyMap
from usdforge.rules.mjcf.geoms import GeomMap
from usdforge.rules.mjcf.load import LoadedModel
from usdforge.rules.robot.model import Robot
from usdforge.rules.robot.writer import RobotUsdContext

_T = Sdf.ValueTypeNames
#: Attribute → value type, for the ``mjc:`` attributes usdforge authors (MuJoCo 4.0 ``mjcPhysics``).
MJC_TYPES: dict[str, Sdf.ValueTypeName] = {
    # MjcSceneAPI
    "mjc:compiler:angle": _T.Token, "mjc:compiler:autoLimits": _T.Bool,
    "mjc:option:timestep": _T.Double, "mjc:option:impratio": _T.Double, "mjc:option:tolerance": _T.Double,
    "mjc:option:ls_tolerance": _T.Double, "mjc:option:noslip_tolerance": _T.Double,
    "mjc:option:ccd_tolerance": _T.Double, "mjc:option:density": _T.Double, "mjc:option:viscosity": _T.Double,
    "mjc:option:o_margin": _T.Double, "mjc:option:wind": _T.Double3, "mjc:option:magnetic": _T.Double3,
    "mjc:option:o_solref": _T.DoubleArray, "mjc:option:o_solimp": _T.DoubleArray,
    "mjc:option:o_friction": _T.DoubleArray, "mjc:option:integrator": _T.Token, "mjc:option:cone": _T.Token,
    "mjc:option:jacobian": _T.Token, "mjc:option:solver": _T.Token, "mjc:option:iterations": _T.Int,
    "mjc:option:ls_iterations": _T.Int, "mjc:option:noslip_iterations": _T.Int,
    "mjc:option:ccd_iterations": _T.Int, "mjc:option:sdf_iterations": _T.Int,
    "mjc:option:sdf_initpoints": _T.Int,
    # MjcJointAPI / MjcTendon / MjcCollisionAPI / MjcSiteAPI / MjcMeshCollisionAPI
    "mjc:actuatorfrclimited": _T.Token, "mjc:actuatorfrcrange:min": _T.Double,
    "mjc:actuatorfrcrange:max": _T.Double, "mjc:actuatorgravcomp": _T.Bool, "mjc:armature": _T.Double,
    "mjc:damping": _T.Double, "mjc:frictionloss": _T.Double, "mjc:group": _T.Int, "mjc:margin": _T.Double,
    "mjc:ref": _T.Double, "mjc:springref": _T.Double, "mjc:stiffness": _T.Double,
    "mjc:springdamper": _T.DoubleArray, "mjc:solreflimit": _T.DoubleArray, "mjc:solimplimit": _T.DoubleArray,
    "mjc:solreffriction": _T.DoubleArray, "mjc:solimpfriction": _T.DoubleArray,
    "mjc:condim": _T.Int, "mjc:gap": _T.Double, "mjc:priority": _T.Int, "mjc:shellinertia": _T.Bool,
    "mjc:solimp": _T.DoubleArray, "mjc:solmix": _T.Double, "mjc:solref": _T.DoubleArray,
    "mjc:inertia": _T.Token, "mjc:maxhullvert": _T.Int,
    "mjc:type": _T.Token, "mjc:limited": _T.Token, "mjc:range:min": _T.Double, "mjc:range:max": _T.Double,
    "mjc:rgba": _T.Color4f, "mjc:width": _T.Double, "mjc:springlength": _T.DoubleArray,
    "mjc:path:coef": _T.DoubleArray, "mjc:path:divisors": _T.DoubleArray, "mjc:path:indices": _T.IntArray,
    "mjc:path:segments": _T.IntArray, "mjc:sideSites:indices": _T.IntArray,
    # MjcActuator
    "mjc:actDim": _T.Int, "mjc:actEarly": _T.Bool, "mjc:actLimited": _T.Token, "mjc:actRange:min": _T.Double,
    "mjc:actRange:max": _T.Double, "mjc:biasPrm": _T.DoubleArray, "mjc:biasType": _T.Token,
    "mjc:crankLength": _T.Double, "mjc:ctrlLimited": _T.Token, "mjc:ctrlRange:min": _T.Double,
    "mjc:ctrlRange:max": _T.Double, "mjc:dynPrm": _T.DoubleArray, "mjc:dynType": _T.Token,
    "mjc:forceLimited": _T.Token, "mjc:forceRange:min": _T.Double, "mjc:forceRange:max": _T.Double,
    "mjc:gainPrm": _T.DoubleArray, "mjc:gainType": _T.Token, "mjc:gear": _T.DoubleArray,
    "mjc:inheritRange": _T.Double, "mjc:jointInParent": _T.Bool, "mjc:lengthRange:min": _T.Double,
    "mjc:lengthRange:max": _T.Double,
    # MjcKeyframe
    "mjc:qpos": _T.DoubleArray, "mjc:qvel": _T.DoubleArray, "mjc:act": _T.DoubleArray,
    "mjc:ctrl": _T.DoubleArray, "mjc:mpos": _T.DoubleArray, "mjc:mquat": _T.DoubleArray,
    # MjcEqualityAPI and subclasses
    "mjc:torqueScale": _T.Float, "mjc:coef2": _T.Double, "mjc:coef3": _T.Double, "mjc:coef4": _T.Double,
}
#: Newton's attributes usdforge authors (``newton_usd_schemas`` 0.6): all ``float`` but the few listed.
NEWTON_TYPES: dict[str, Sdf.ValueTypeName] = {
    "newton:armature": _T.Float, "newton:damping": _T.Float, "newton:friction": _T.Float,
    "newton:limitStiffness": _T.Float, "newton:limitDamping": _T.Float,
    "newton:torsionalFriction": _T.Float, "newton:rollingFriction": _T.Float,
    "newton:contactMargin": _T.Float, "newton:contactGap": _T.Float, "newton:maxHullVertices": _T.Int,
    "newton:massModel": _T.Token,
    "newton:timeStepsPerSecond": _T.Int, "newton:maxSolverIterations": _T.Int, "newton:gravityEnabled": _T.Bool,
    "newton:selfCollisionEnabled": _T.Bool,
}
#: Attributes MuJoCo's schema declares ``uniform``.
_VARYING = {"mjc:qpos", "mjc:qvel", "mjc:act", "mjc:ctrl", "mjc:mpos", "mjc:mquat"}


def _usd_value(type_name: Sdf.ValueTypeName, value: Any) -> Any:
    if type_name == _T.DoubleArray:
        return Vt.DoubleArray([float(v) for v in value])
    if type_name == _T.IntArray:
        return Vt.IntArray([int(v) for v in value])
    if type_name == _T.Double3:
        return Gf.Vec3d(*(float(v) for v in value))
    if type_name == _T.Color4f:
        return Gf.Vec4f(*(float(v) for v in value))
    if type_name in (_T.Double, _T.Float):
        return float(value)
    if type_name == _T.Int:
        return int(value)
    if type_name == _T.Bool:
        return bool(value)
    return value


def typed(name: str, value: Any) -> tuple[Sdf.ValueTypeName, Any, bool]:
    """A ``mjc:`` or ``newton:`` attribute's schema type, ``value`` as USD holds it, and whether it is uniform."""
    type_name = MJC_TYPES.get(name) or NEWTON_TYPES.get(name) or (_T.Bool if name.startswith("mjc:flag:") else None)
    if type_name is None:
        raise KeyError(f"no schema type known for {name}")
    uniform = name == "newton:massModel" or not (name in _VARYING or name.startswith("newton:"))
    return type_name, _usd_value(type_name, value), uniform


def set_typed(target: Usd.Prim | Sdf.PrimSpec | None, name: str, value: Any) -> None:
    """Author a ``mjc:`` or ``newton:`` attribute with its schema type (see the tables), on a prim or, much
    faster, on a prim spec of a layer; None (``MjcfUsd.spec`` of a restored layer): nothing."""
    if target is None:
        return
    type_name, value, uniform = typed(name, value)
    if isinstance(target, Sdf.PrimSpec):
        sdf.attribute(target, name, type_name, value, uniform=uniform)
        return
    variability = Sdf.VariabilityUniform if uniform else Sdf.VariabilityVarying
    target.CreateAttribute(name, type_name, custom=False, variability=variability).Set(value)


def apply_schemas(target: Usd.Prim | Sdf.PrimSpec | None, schemas: Iterable[str]) -> None:
    """Apply API schemas by name, each once (None: nothing)."""
    schemas = list(schemas)
    if not schemas or target is None:
        return
    if isinstance(target, Sdf.PrimSpec):
        sdf.apply_schemas(target, *schemas)
        return
    for schema in schemas:
        target.AddAppliedSchema(schema)


def set_all(target: Usd.Prim | Sdf.PrimSpec | None, values: dict[str, Any], schemas: Iterable[str] = ()) -> None:
    """Apply ``schemas`` and author every attribute of ``values`` with its type (None: nothing)."""
    if target is None:
        return
    apply_schemas(target, schemas)
    for name, value in values.items():
        set_typed(target, name, value)


def limited_token(flag: int | bool) -> str:
    """MuJoCo's compiled ``*limited`` flag → the ``mjc`` token ("true"/"false"): compiled models decided
    ``auto`` already, and readers of the USD must not decide it again differently."""
    return "true" if flag else "false"


def _custom_value(value: Any) -> tuple[Sdf.ValueTypeName, Any]:
    if isinstance(value, (bool, np.bool_)):
        return _T.Bool, bool(value)
    if isinstance(value, (int, np.integer)):
        return _T.Int, int(value)
    if isinstance(value, (float, np.floating)):
        return _T.Double, float(value)
    if isinstance(value, str):
        return _T.String, value
    return _T.DoubleArray, Vt.DoubleArray([float(v) for v in value])


def set_custom(target: Usd.Prim | Sdf.PrimSpec | None, name: str, value: Any) -> None:
    """A namespaced custom attribute (source data without a schema): str, bool, int, float, number lists
    (None: nothing)."""
    if target is None:
        return
    type_name, value = _custom_value(value)
    if isinstance(target, Sdf.PrimSpec):
        sdf.attribute(target, name, type_name, value, custom=True)
    else:
        target.CreateAttribute(name, type_name, custom=True).Set(value)


def relationship(target: Usd.Prim | Sdf.PrimSpec | None, name: str, targets: Iterable[Sdf.Path],
                 custom: bool = False) -> None:
    """A relationship with these targets (None: nothing)."""
    if target is None:
        return
    if isinstance(target, Sdf.PrimSpec):
        sdf.relationship(target, name, targets, custom=custom)
    else:
        target.CreateRelationship(name, custom=custom).SetTargets(list(targets))


@attrs.define
class MjcfUsd:
    """Everything the MJCF authoring steps share: the loaded model, where its elements went in the Robot,
    and the writer's layers (``ctx``). ``site_paths``/``tendon_paths``/``actuator_paths`` are filled as they are authored."""

    loaded: LoadedModel
    robot: Robot
    bodies: BodyMap
    geoms: GeomMap
    ctx: RobotUsdContext
    site_paths: dict[int, Sdf.Path] = attrs.field(factory=dict)
    tendon_paths: dict[int, Sdf.Path] = attrs.field(factory=dict)
    actuator_paths: dict[int, Sdf.Path] = attrs.field(factory=dict)
    warnings: list[str] = attrs.field(factory=list)

    @property
    def root(self) -> Sdf.Path:
        return self.ctx.root

    def body_path(self, body: int) -> Sdf.Path | None:
        """Prim path of a MuJoCo body's link (None for the world without a link)."""
        link = self.bodies.link_of_body.get(body)
        return self.ctx.link_paths.get(link) if link is not None else None

    def joint_path(self, joint: int) -> Sdf.Path | None:
        """Prim path of a MuJoCo joint (None for free joints)."""
        name = self.bodies.joint_of_jnt.get(joint)
        return self.ctx.joint_paths.get(name) if name is not None else None

    def scope(self, name: str) -> Sdf.Path:
        """``/<robot>/<name>``."""
        return self.root.AppendChild(name)

    def mujoco_scope(self, name: str) -> Sdf.Path:
        """``/<robot>/<name>`` defined as a Scope in the mujoco layer (where MuJoCo-only records live)."""
        path = self.scope(name)
        self.define("mujoco", path, "Scope")
        return path

    def authored(self, role: str) -> bool:
        """Whether ``role``'s layer is authored in this conversion (False: its bytes are restored from the
        build cache, ``rules.robot.layer_reuse``, and nothing may be spent writing it)."""
        return self.ctx.authored(role)

    def spec(self, role: str, path: Sdf.Path) -> Sdf.PrimSpec | None:
        """The prim spec at ``path`` in ``role``'s layer (an ``over`` unless the layer defines it); None when
        that layer is restored: the ``set_*`` helpers above write nothing to None, and a step that writes
        with ``rules.usd.layer`` itself asks ``authored`` first. So each step writes only the layers being
        authored, and a cfg edit pays only for its layers."""
        return sdf.over(self.ctx.layer(role), path) if self.authored(role) else None

    def prim(self, role: str, path: Sdf.Path) -> Usd.Prim | None:
        """The Usd prim at ``path`` on ``role``'s stage (an ``over`` unless defined); None when restored."""
        return self.ctx.prim(role, path) if self.authored(role) else None

    def define(self, role: str, path: Sdf.Path, type_name: str = "") -> Sdf.PrimSpec | None:
        """A ``def`` prim spec of ``type_name`` at ``path`` in ``role``'s layer (None when it is restored)."""
        return sdf.prim(self.ctx.layer(role), path, type_name) if self.authored(role) else None
