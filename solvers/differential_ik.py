"""Differential inverse kinematics: Isaac Lab's ``DifferentialIKController`` API on JAX arrays.

:class:`DifferentialIKControllerCfg` holds the method and its parameters; the controller keeps the
desired ee pose of N environments and turns the current ee pose, Jacobian and joint positions into
joint targets with :func:`solvers.ik_step.differential_ik_step` (the pure, jit/vmap-able step; methods
pinv, svd, trans, dls are described there). Quaternions are (w, x, y, z).
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import attrs
import jax
import jax.numpy as jnp
from jax import Array

from .device import resolve_device
from .ik_step import apply_delta_pose, differential_ik_step

CommandType = Literal["position", "pose"]
IKMethod = Literal["pinv", "svd", "trans", "dls"]

DEFAULT_IK_PARAMS: Mapping[str, Mapping[str, float]] = {
    "pinv": {"k_val": 1.0},
    "svd": {"k_val": 1.0, "min_singular_value": 1e-5},
    "trans": {"k_val": 1.0},
    "dls": {"lambda_val": 0.01},
}


def _check_command_type(_inst: Any, _attr: Any, value: str) -> None:
    if value not in ("position", "pose"):
        raise ValueError(f"Unsupported inverse-kinematics command: {value!r}; expected 'position' or 'pose'.")


def _check_ik_method(_inst: Any, _attr: Any, value: str) -> None:
    if value not in DEFAULT_IK_PARAMS:
        raise ValueError(
            f"Unsupported inverse-kinematics method: {value!r}; expected one of {list(DEFAULT_IK_PARAMS)}."
        )


@attrs.frozen(kw_only=True)
class DifferentialIKControllerCfg:
    """Configuration of :class:`DifferentialIKController` (Isaac Lab's fields and defaults).

    ``ik_params`` is merged over the method's defaults (pinv/svd/trans ``k_val=1.0``, svd
    ``min_singular_value=1e-5``, dls ``lambda_val=0.01``), so after construction it always holds every
    parameter of the method. A key the method does not use raises ValueError instead of being ignored.
    """

    command_type: CommandType = attrs.field(validator=_check_command_type)
    ik_method: IKMethod = attrs.field(validator=_check_ik_method)
    use_relative_mode: bool = attrs.field(default=False, converter=bool)
    ik_params: Mapping[str, float] | None = None

    def __attrs_post_init__(self) -> None:
        params = dict(DEFAULT_IK_PARAMS[self.ik_method])
        given = dict(self.ik_params or {})
        unknown = sorted(set(given) - set(params))
        if unknown:
            raise ValueError(
                f"ik_params {unknown} are not parameters of ik_method {self.ik_method!r}; it takes {sorted(params)}"
            )
        params.update({k: float(v) for k, v in given.items()})
        object.__setattr__(self, "ik_params", params)


_step_jit = jax.jit(differential_ik_step, static_argnames=("command_type", "ik_method"))


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
            self.ee_pos_des, self.ee_quat_des = command[:, 0:3], command[:, 3:7]
        self._command = command

    def compute(self, ee_pos: Any, ee_quat: Any, jacobian: Any, joint_pos: Any) -> Array:
        """Target joint positions (N, J) from the current ee pose (N, 3), (N, 4), the world-frame Jacobian
        (N, 6, J) (linear rows first) and joint positions (N, J)."""
        joint_pos = self._put(joint_pos)
        if joint_pos.ndim != 2:
            raise ValueError(f"joint_pos must have shape ({self.num_envs}, num_joints), got {tuple(joint_pos.shape)}")
        n_joints = joint_pos.shape[1]
        return _step_jit(
            self._check("ee_pos", ee_pos, 3),
            self._check("ee_quat", ee_quat, 4),
            self._check("jacobian", jacobian, (6, n_joints)),
            self._check("joint_pos", joint_pos, n_joints),
            self.ee_pos_des,
            self.ee_quat_des,
            command_type=self.cfg.command_type,
            ik_method=self.cfg.ik_method,
            **self.cfg.ik_params,
        )
