"""The cfg of the MJCF converter, with Isaac Lab's ``MjcfConverterCfg`` field names and defaults."""

from __future__ import annotations

from typing import Any

import attrs

from usdforge.schemas.converter_cfgs import COLLISION_TYPES, ROBOT_TYPES, AssetConverterBaseCfg
from usdforge.schemas.validators import (FieldValueError, bool_value, float_or_none, number_in_range, one_of,
                                one_of_or_none)

#: MuJoCo's ``gaintype`` and ``biastype`` keywords (``mjtGain``, ``mjtBias``).
GAIN_TYPES = ("fixed", "affine", "muscle", "user")
BIAS_TYPES = ("none", "affine", "muscle", "user")

#: MuJoCo's actuator parameter arrays hold at most this many numbers (``mjNGAIN`` = ``mjNBIAS`` = 10).
ACTUATOR_PRM_SIZE = 10

def prm_or_none(value: Any) -> Any:
    """attrs converter: a list of numbers (TOML/JSON) → tuple of floats; None and anything else pass through
    (the validator rejects what is not numbers)."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                for v in value):
        return tuple(float(v) for v in value)
    return value

def actuator_prm(instance: Any, attribute: Any, value: Any) -> None:
    """None, or 1 to ``ACTUATOR_PRM_SIZE`` finite numbers."""
    if value is None:
        return
    ok = isinstance(value, tuple) and 1 <= len(value) <= ACTUATOR_PRM_SIZE
    ok = ok and all(isinstance(v, float) and v == v and abs(v) != float("inf") for v in value)
    if not ok:
        raise FieldValueError(attribute.name, f"expected 1 to {ACTUATOR_PRM_SIZE} finite numbers (or None), "
                                              f"found {value!r}")

@attrs.frozen(kw_only=True)
class MjcfConverterCfg(AssetConverterBaseCfg):
    """Converting a MuJoCo MJCF model (``.xml``) to an articulated USD asset.

    Inherited: asset_path, usd_dir, usd_file_name, force_usd_conversion, make_instanceable (bool, default
    True: geometry goes to a separate layer that bodies reference through instanceable prims; Isaac Lab's
    MJCF importer ignores it, usdforge honours it).

    merge_mesh: bool. Merge the visual-only mesh geoms of each body that share a material into one mesh
        (fewer prims; colliders are never merged, they keep MuJoCo's per-geom convex hulls). Default False.
    collision_from_visuals: bool. Also make the visual-only geoms (contype = conaffinity = 0) colliders.
        Default False: only geoms MuJoCo collides with are colliders.
    collision_type: str, how mesh colliders are approximated: "Convex Hull" (MuJoCo's own behaviour),
        "Convex Decomposition", "Bounding Sphere" or "Bounding Cube". Default "Convex Hull". Written to
        ``physics:approximation`` of every mesh collider.
    self_collision: bool. Contacts between bodies of the same articulation. Default False: every pair of
        bodies in one articulation is filtered (``UsdPhysics.FilteredPairsAPI`` and
        ``physxArticulation:enabledSelfCollisions = false``); True keeps MuJoCo's contype/conaffinity rules.
    import_physics_scene: bool. Author a ``PhysicsScene`` with the model's gravity (m/s²) and time step
        (s), and MuJoCo's ``<option>`` under ``mjc:option:*``. Default False.
    fix_base: bool. Fix every floating root body (MuJoCo free joint) to the world with a
        ``UsdPhysics.FixedJoint``. Default False.
    link_density: Density in kg/m³ (float >= 0) for bodies that carry no mass data at all (no inertial
        and no mass-bearing geom); their mass properties are computed from their geoms at this density.
        Default 0.0: such bodies keep what MuJoCo infers (MuJoCo's own default density, 1000 kg/m³).
    robot_type: str, the robot type of Isaac Sim's robot schema, one of ``ROBOT_TYPES``. Default
        "Default". Written to ``isaac:robotType`` on the root prim.
    override_gain_type: str or None, MuJoCo ``gaintype`` for every actuator ("fixed", "affine", "muscle",
        "user"). Default None: as in the MJCF.
    override_bias_type: str or None, MuJoCo ``biastype`` for every actuator ("none", "affine", "muscle",
        "user"). Default None: as in the MJCF.
    override_gain_prm: None or 1–10 numbers, MuJoCo ``gainprm`` for every actuator (missing entries are
        0), in the actuator's units (e.g. N·m/rad for kp of a hinge). Default None: as in the MJCF.
        Example for position control: ``[kp, 0, 0, 0, 0, 0, 0, 0, 0, 0]``.
    override_bias_prm: None or 1–10 numbers, MuJoCo ``biasprm`` for every actuator. Default None: as in the
        MJCF. Example for position control: ``[0, -kp, -kd, 0, 0, 0, 0, 0, 0, 0]``.
    run_asset_transformer: bool. Write Isaac Lab's layered asset: the interface layer ``<stem>.usda`` with
        payloads ``payloads/base.usda``, ``geometry.usd``, ``materials.usda`` and
        ``Physics/{physics,physx,mujoco}.usda`` (see ``rules.outputs.ROBOT_PAYLOAD_LAYERS``). Default True.
        False: one USD file (plus the meshes layer with make_instanceable).
    articulation_cfg: bool. Write Isaac Lab 3's ``ArticulationCfg`` for the asset beside it, ``<stem>_cfg.py``
        (``rules.robot.isaaclab_cfg``: spawn, default joint pose inside the limits, base pose, implicit
        actuators from the drives). Default True; False writes none.
    articulation_cfg_keyframe: str or None. The MJCF keyframe whose joint positions are the cfg's default
        pose (clamped into the limits). Default None: joint zero (MuJoCo's ``qpos0``) clamped.
    """

    merge_mesh: bool = attrs.field(default=False, validator=bool_value)
    collision_from_visuals: bool = attrs.field(default=False, validator=bool_value)
    collision_type: str = attrs.field(default="Convex Hull", validator=one_of(tuple(COLLISION_TYPES)))
    self_collision: bool = attrs.field(default=False, validator=bool_value)
    import_physics_scene: bool = attrs.field(default=False, validator=bool_value)
    fix_base: bool = attrs.field(default=False, validator=bool_value)
    link_density: float = attrs.field(default=0.0, converter=float_or_none,
                                      validator=number_in_range(0.0, optional=False))
    robot_type: str = attrs.field(default="Default", validator=one_of(ROBOT_TYPES))
    override_gain_type: str | None = attrs.field(default=None, validator=one_of_or_none(GAIN_TYPES))
    override_bias_type: str | None = attrs.field(default=None, validator=one_of_or_none(BIAS_TYPES))
    override_gain_prm: tuple[float, ...] | None = attrs.field(default=None, converter=prm_or_none,
                                                              validator=actuator_prm)
    override_bias_prm: tuple[float, ...] | None = attrs.field(default=None, converter=prm_or_none,
                                                              validator=actuator_prm)
    run_asset_transformer: bool = attrs.field(default=True, validator=bool_value)
    articulation_cfg: bool = attrs.field(default=True, validator=bool_value)
    articulation_cfg_keyframe: str | None = None
