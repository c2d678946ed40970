"""usdforge solvers: JAX kinematics and batched differential IK on converted (UsdPhysics) assets.

Quick use::

    from usdforge import solvers
    kin = solvers.Kinematics.from_usd("build/usd/panda/panda.usda", ee_body="hand")
    pos, quat = solvers.forward_kinematics(kin, q)          # q (..., J)
    J = solvers.jacobian(kin, q)                             # (..., 6, J)
    q, info = solvers.solve_ik(kin, targets, q0, iterations=50)

Everything runs in float32 unless asked otherwise; float64 needs 64-bit JAX, which this package never
switches on at import: call ``jax.config.update("jax_enable_x64", True)`` at program start (or work
inside ``with jax.enable_x64(True):``) and pass ``dtype=jax.numpy.float64``.
"""

if __name__ != "usdforge.solvers":   # one importable name per module: never both solvers.x and usdforge.solvers.x
    raise ImportError(f"import usdforge.solvers, not {__name__}: the repository's top-level folders are the "
                      "subpackages of usdforge")


from .collision import CoverError, SelfCollision, SphereCoverError, fit_self_collision
from .device import GpuUnavailableError, resolve_device
from .differential_ik import DEFAULT_IK_PARAMS, DifferentialIKController, DifferentialIKControllerCfg
from .forward import (
    ee_kernel,
    ee_kernel_all,
    forward_kinematics,
    forward_kinematics_all,
    forward_kinematics_and_jacobian,
    jacobian,
)
from .ik_step import apply_delta_pose, compute_pose_error, delta_joint_positions, differential_ik_step, dls_solve
from .kinematics import Chain, Kinematics, MimicJoint, random_configurations
from .report import ik_report
from .solve import IKInfo, solve_ik
from .usd_tree import KinematicTree, read_kinematic_tree

__all__ = [
    "Chain",
    "DEFAULT_IK_PARAMS",
    "DifferentialIKController",
    "DifferentialIKControllerCfg",
    "GpuUnavailableError",
    "IKInfo",
    "KinematicTree",
    "Kinematics",
    "MimicJoint",
    "SelfCollision",
    "CoverError",
    "SphereCoverError",
    "apply_delta_pose",
    "compute_pose_error",
    "delta_joint_positions",
    "differential_ik_step",
    "dls_solve",
    "ee_kernel",
    "ee_kernel_all",
    "fit_self_collision",
    "forward_kinematics",
    "forward_kinematics_all",
    "forward_kinematics_and_jacobian",
    "ik_report",
    "jacobian",
    "random_configurations",
    "read_kinematic_tree",
    "resolve_device",
    "solve_ik",
]
