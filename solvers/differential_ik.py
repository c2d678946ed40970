"""Differential inverse kinematics: Isaac Lab's ``DifferentialIKController`` API on JAX arrays.

:class:`DifferentialIKControllerCfg` holds the method and its parameters; the controller keeps the
desired ee pose of N environments and turns the current ee pose, Jacobian and joint positions into
joint targets with :func:`solvers.ik_step.differential_ik_step` (the pure, jit/vmap-able step; methods
pinv, svd, trans, dls, adaptive_dls are described there).

The names, defaults, validation messages and semantics are Isaac Lab 3.0.0's
(``isaaclab.controllers.differential_ik``), including its 3.0 options ``adaptive_dls``,
``orientation_weight``, ``joint_limit_avoidance_gain``/``_margin`` and ``set_joint_pos_limits``;
tests/test_solvers_isaaclab_parity.py runs Isaac Lab's own torch code on the same inputs. One deliberate
difference: quaternions here are (w, x, y, z), as everywhere in usdforge and in USD, where Isaac Lab 3.0
uses (x, y, z, w). Isaac Lab 3.0.0's ``compute`` has no ``out=`` argument, and JAX arrays are immutable,
so neither has this one.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, Sequence

import attrs
import jax
import jax.numpy as jnp
from jax import Array

from .device import resolve_device
from .ik_step import apply_delta_pose, differential_ik_step_cf
from .rotations import to_components

CommandType = Literal["position", "pose"]
IKMethod = Literal["pinv", "svd", "trans", "dls", "adaptive_dls"]

DEFAULT_IK_PARAMS: Mapping[str, Mapping[str, float]] = {
    "pinv": {"k_val": 1.0},
    "svd": {"k_val": 1.0, "min_singular_value": 1e-5},
    "trans": {"k_val": 1.0},
    "dls": {"lambda_val": 0.01},
    "adaptive_dls": {"lambda_min": 0.05, "lambda_max": 0.2, "sigma_thresh": 0.02},
}


def _check_command_type(_inst: Any, _attr: Any, value: str) -> None:
    if value not in ("position", "pose"):
        raise ValueError(f"Unsupported inverse-kinematics command: {value}.")


def _check_ik_method(_inst: Any, _attr: Any, value: str) -> None:
    if value not in DEFAULT_IK_PARAMS:
        raise ValueError(f"Unsupported inverse-kinematics method: {value}.")


def _check_orientation_weight(_inst: Any, _attr: Any, value: Any) -> None:
    if value is not None and not isinstance(value, (int, float)) and len(value) != 3:
        raise ValueError(f"orientation_weight must be a scalar or a length-3 (wx, wy, wz) tuple, got {value}.")


def _check_gain(_inst: Any, _attr: Any, value: float) -> None:
    if value < 0.0:
        raise ValueError(f"joint_limit_avoidance_gain must be >= 0, got {value}.")


def _check_margin(_inst: Any, _attr: Any, value: float) -> None:
    if value <= 0.0:
        raise ValueError(f"joint_limit_avoidance_margin must be > 0, got {value}.")


def merge_ik_params(ik_method: str, ik_params: Mapping[str, float] | None) -> dict[str, float]:
    """The method's defaults with ``ik_params`` merged over them, validated as Isaac Lab 3.0 does
    (adaptive_dls: ``sigma_thresh > 0``, ``lambda_min <= lambda_max``); a key the method does not use
    raises ValueError instead of being ignored."""
    params = dict(DEFAULT_IK_PARAMS[ik_method])
    given = dict(ik_params or {})
    unknown = sorted(set(given) - set(params))
    if unknown:
        raise ValueError(f"ik_params {unknown} are not parameters of ik_method {ik_method!r}; it takes {sorted(params)}")
    params.update({k: float(v) for k, v in given.items()})
    if ik_method == "adaptive_dls":
        if params["sigma_thresh"] <= 0.0:
            raise ValueError(f"adaptive_dls sigma_thresh must be > 0, got {params['sigma_thresh']}.")
        if params["lambda_min"] > params["lambda_max"]:
            raise ValueError(
                f"adaptive_dls lambda_min ({params['lambda_min']}) must be <= lambda_max ({params['lambda_max']})."
            )
    return params


def orientation_weight_vector(weight: float | Sequence[float] | None) -> tuple[float, float, float] | None:
    """``orientation_weight`` as (wx, wy, wz), or None when unset."""
    if weight is None:
        return None
    if isinstance(weight, (int, float)):
        return (float(weight),) * 3
    return tuple(float(v) for v in weight)  # type: ignore[return-value]


@attrs.frozen(kw_only=True)
class DifferentialIKControllerCfg:
    """Configuration of :class:`DifferentialIKController` (Isaac Lab 3.0.0's fields and defaults).

    Fields:
        command_type: "position" (3 rows of the task) or "pose" (6 rows). Required.
        ik_method: "pinv", "svd", "trans", "dls" or "adaptive_dls". Required.
        use_relative_mode: Commands are deltas from the current ee pose. Default False.
        ik_params: Merged over the method's defaults (pinv/svd/trans ``k_val=1.0``, svd
            ``min_singular_value=1e-5``, dls ``lambda_val=0.01``, adaptive_dls ``lambda_min=0.05``,
            ``lambda_max=0.2``, ``sigma_thresh=0.02``), so after construction it always holds every
            parameter of the method. A key the method does not use raises ValueError instead of being
            ignored (Isaac Lab ignores it). Default None: the defaults.
        orientation_weight: Soft weight on the three orientation rows of "pose" commands: a scalar, or
            (wx, wy, wz) per world axis; 0 drops that rotation axis from the solve. Default None: weight
            1. Ignored for "position" commands.
        joint_limit_avoidance_gain: Gain (1/step) of the null-space centre-seeking bias; 0 disables it.
            Active only after :meth:`DifferentialIKController.set_joint_pos_limits`. Default 0.0.
        joint_limit_avoidance_margin: Distance from a limit (rad or m) within which the bias acts (1 at
            the limit, 0 at the margin). Default 0.3.
    """

    command_type: CommandType = attrs.field(validator=_check_command_type)
    ik_method: IKMethod = attrs.field(validator=_check_ik_method)
    use_relative_mode: bool = attrs.field(default=False, converter=bool)
    ik_params: Mapping[str, float] | None = None
    orientation_weight: float | tuple[float, float, float] | None = attrs.field(
        default=None, validator=_check_orientation_weight
    )
    joint_limit_avoidance_gain: float = attrs.field(default=0.0, converter=float, validator=_check_gain)
    joint_limit_avoidance_margin: float = attrs.field(default=0.3, converter=float, validator=_check_margin)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "ik_params", merge_ik_params(self.ik_method, self.ik_params))


_step_jit = jax.jit(differential_ik_step_cf, static_argnames=("command_type", "ik_method", "precise"))


class DifferentialIKController:
    """Differential IK for ``num_envs`` environments (Isaac Lab's controller, on JAX arrays).

    ``set_command`` stores the desired ee pose per environment, ``compute`` returns target joint
    positions. ``device`` is "cpu", "gpu"/"cuda" or "cuda:N"; a missing GPU raises
    :class:`solvers.device.GpuUnavailableError`. Buffers are float32 unless ``dtype`` says otherwise
    (float64 needs ``jax_enable_x64``).
    """

    def __init__(self, cfg: DifferentialIKControllerCfg, num_envs: int, device: str | jax.Device = "cpu",
                 dtype: Any = jnp.float32) -> None:
        self.cfg = cfg
        self.num_envs = int(num_envs)
        self.device = resolve_device(device)
        self.dtype = jnp.dtype(dtype)
        if self.dtype == jnp.float64 and not jax.config.jax_enable_x64:
            raise ValueError("dtype float64 needs jax.config.update('jax_enable_x64', True) (or jax.enable_x64(True))")
        self.ee_pos_des = self._put(jnp.zeros((self.num_envs, 3)))
        self.ee_quat_des = self._put(jnp.tile(jnp.array([1.0, 0.0, 0.0, 0.0]), (self.num_envs, 1)))
        self._command = self._put(jnp.zeros((self.num_envs, self.action_dim)))
        weight = orientation_weight_vector(cfg.orientation_weight)
        self._orientation_weight = None if weight is None else self._put(weight)
        self._joint_pos_lower: Array | None = None
        self._joint_pos_upper: Array | None = None

    @property
    def action_dim(self) -> int:
        """Command width: 3 (position), 6 (relative pose: dx, dy, dz, rotation vector) or 7 (pose: x, y,
        z, qw, qx, qy, qz)."""
        if self.cfg.command_type == "position":
            return 3
        if self.cfg.use_relative_mode:
            return 6
        return 7

    def _put(self, x: Any) -> Array:
        return jax.device_put(jnp.asarray(x, dtype=self.dtype), self.device)

    def _check(self, name: str, x: Any, width: int | tuple[int, ...]) -> Array:
        x = self._put(x)
        tail = (width,) if isinstance(width, int) else width
        if x.shape != (self.num_envs, *tail):
            raise ValueError(f"{name} must have shape {(self.num_envs, *tail)}, got {tuple(x.shape)}")
        return x

    def reset(self, env_ids: Any = None) -> None:
        """Clear the command of ``env_ids`` (all when None): zero command, desired pose (0, identity)."""
        ids = slice(None) if env_ids is None else jnp.asarray(env_ids)
        self._command = self._command.at[ids].set(0.0)
        self.ee_pos_des = self.ee_pos_des.at[ids].set(0.0)
        self.ee_quat_des = self.ee_quat_des.at[ids].set(jnp.array([1.0, 0.0, 0.0, 0.0], dtype=self.dtype))

    def set_command(self, command: Any, ee_pos: Any = None, ee_quat: Any = None) -> None:
        """Set the desired ee pose from ``command`` (N, action_dim).

        position: command is the target position; ``ee_quat`` (N, 4) is required and kept as the desired
        orientation. position + relative: target = ``ee_pos`` + command. pose: command is (x, y, z, qw,
        qx, qy, qz). pose + relative: command is (dx, dy, dz, rotation vector), applied to (ee_pos, ee_quat).

        Raises:
            ValueError: command type ``position_*`` and ``ee_quat`` is None.
            ValueError: command type ``position_rel`` and ``ee_pos`` is None.
            ValueError: command type ``pose_rel`` and either ``ee_pos`` or ``ee_quat`` is None.
            ValueError: an array has the wrong shape.
        """
        command = self._check("command", command, self.action_dim)
        if self.cfg.command_type == "position":
            if ee_quat is None:
                raise ValueError("End-effector orientation can not be None for `position_*` command type!")
            ee_quat = self._check("ee_quat", ee_quat, 4)
            if self.cfg.use_relative_mode:
                if ee_pos is None:
                    raise ValueError("End-effector position can not be None for `position_rel` command type!")
                self.ee_pos_des = self._check("ee_pos", ee_pos, 3) + command
            else:
                self.ee_pos_des = command
            self.ee_quat_des = ee_quat
        elif self.cfg.use_relative_mode:
            if ee_pos is None or ee_quat is None:
                raise ValueError(
                    "Neither end-effector position nor orientation can be None for `pose_rel` command type!"
                )
            self.ee_pos_des, self.ee_quat_des = apply_delta_pose(
                self._check("ee_pos", ee_pos, 3), self._check("ee_quat", ee_quat, 4), command
            )
        else:
            # As Isaac Lab 3.0: finite quaternions are normalised; one that cannot be (zero, non-finite)
            # is replaced by ee_quat when given, else by the identity.
            quat = command[:, 3:7] / jnp.linalg.norm(command[:, 3:7], axis=1, keepdims=True)
            valid = jnp.all(jnp.isfinite(quat), axis=1, keepdims=True)
            fallback = jnp.array([1.0, 0.0, 0.0, 0.0], self.dtype) if ee_quat is None else self._check("ee_quat", ee_quat, 4)
            self.ee_pos_des, self.ee_quat_des = command[:, 0:3], jnp.where(valid, quat, fallback)
        self._command = command

    def set_joint_pos_limits(self, lower: Any, upper: Any) -> None:
        """Joint position limits (J,) each, rad or m, for the null-space joint-limit avoidance (used only
        when ``cfg.joint_limit_avoidance_gain > 0``)."""
        lower, upper = self._put(lower), self._put(upper)
        if lower.ndim != 1 or lower.shape != upper.shape:
            raise ValueError(f"lower and upper must both have shape (num_joints,), got {lower.shape} and {upper.shape}")
        self._joint_pos_lower, self._joint_pos_upper = lower, upper

    def compute(self, ee_pos: Any, ee_quat: Any, jacobian: Any, joint_pos: Any) -> Array:
        """Target joint positions (N, J) from the current ee pose (N, 3), (N, 4) (w, x, y, z), the
        world-frame Jacobian (N, 6, J) (linear rows first) and joint positions (N, J)."""
        joint_pos = self._put(joint_pos)
        if joint_pos.ndim != 2:
            raise ValueError(f"joint_pos must have shape ({self.num_envs}, num_joints), got {tuple(joint_pos.shape)}")
        n_joints = joint_pos.shape[1]
        avoid = None
        if self.cfg.joint_limit_avoidance_gain > 0.0 and self._joint_pos_lower is not None:
            if self._joint_pos_lower.shape != (n_joints,):
                raise ValueError(f"joint position limits have shape {self._joint_pos_lower.shape}, joint_pos has "
                                 f"{n_joints} joints")
            avoid = (self._joint_pos_lower[:, None], self._joint_pos_upper[:, None],
                     self.cfg.joint_limit_avoidance_gain, self.cfg.joint_limit_avoidance_margin)
        cf = to_components
        q = _step_jit(
            cf(self._check("ee_pos", ee_pos, 3)),
            cf(self._check("ee_quat", ee_quat, 4)),
            cf(self._check("jacobian", jacobian, (6, n_joints)), 2),
            cf(self._check("joint_pos", joint_pos, n_joints)),
            cf(self.ee_pos_des),
            cf(self.ee_quat_des),
            command_type=self.cfg.command_type,
            ik_method=self.cfg.ik_method,
            orientation_weight=self._orientation_weight,
            limit_avoidance=avoid,
            precise=True,
            **self.cfg.ik_params,
        )
        return q.T
