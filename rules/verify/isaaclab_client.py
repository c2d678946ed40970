"""Isaac Lab 3.0 client check, run by the interpreter of ``build/venv-isaaclab`` (never imported by usdforge).

``python isaaclab_client.py JOBS_JSON``: JOBS_JSON is a list of ``{"cfg": <generated <stem>_cfg.py>,
"name": label, "fix_root_link": null|true|false}``. For each job, as a user would: load the module, take its
``ARTICULATION_CFG`` (``RIGID_OBJECT_CFG`` for a robot without joints), spawn it in 2 environments 2.5 m apart (kit-less, Newton with the MuJoCo-Warp solver
on the CPU), reset, hold the default joint pose for ``SECONDS`` and report, per robot: the articulation
count, DOF, joint and body names, fixed base, joint limits (rad or m), where each env's root
link is against its env origin + ``init_state.pos``, how far a fixed root moved, and whether every state
stayed finite. One JSON object on the last line of stdout: ``{label: report}``; a job that raises reports
``{"error": "<last line>"}``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback

SECONDS = 1.0
#: Seconds per step unless the cfg module gives the source's own (``SIM_DT``).
DT = 1.0 / 200.0
SPACING = 2.5
NUM_ENVS = 2


def _load_cfg(path: str):
    spec = importlib.util.spec_from_file_location(f"usdforge_cfg_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(job: dict) -> dict:
    import numpy as np
    import torch
    from isaaclab.cloner import CloneCfg, clone_plan_from_env_0, replicate
    from isaaclab.utils import clone, replace

    import isaaclab.sim as sim_utils
    from isaaclab.assets import Articulation, RigidObject
    from isaaclab.sim import build_simulation_context

    module = _load_cfg(job["cfg"])
    dt = getattr(module, "SIM_DT", None) or DT
    rigid = hasattr(module, "RIGID_OBJECT_CFG")  # a robot without joints
    cfg = clone(module.RIGID_OBJECT_CFG if rigid else module.ARTICULATION_CFG)
    if job.get("fix_root_link") is not None:
        cfg.spawn.fix_root_link = job["fix_root_link"]
    with build_simulation_context(device="cpu", sim_cfg=_sim_cfg(dt), add_ground_plane=False) as sim:
        sim._app_control_on_stop_handle = None
        origins = np.zeros((NUM_ENVS, 3), dtype=np.float32)
        origins[:, 0] = np.arange(NUM_ENVS) * SPACING
        origins[:, 1] = 0.5  # off both axes: a robot pinned to the world origin shows
        sim_utils.create_prim("/World/Env_0", "Xform", translation=origins[0])
        cfg = replace(cfg, prim_path="/World/Env_[^/]*/Robot")
        # No ground: Isaac Lab's ground plane is a download. A floating base falls; its placement is read
        # right after the reset, before the first step.
        clone_plan_from_env_0(CloneCfg(clone_template="/World/Env_{}"), [cfg], NUM_ENVS, SPACING, positions=origins)
        robot = RigidObject(cfg) if rigid else Articulation(cfg)
        replicate(sim.get_clone_plan())
        sim.reset()
        if rigid:
            return _hold_rigid(sim, robot, origins, dt)
        data = robot.data
        pos = torch.tensor(cfg.init_state.pos, dtype=torch.float32)
        expected = torch.as_tensor(origins) + pos + torch.tensor(getattr(module, "ROOT_OFFSET", (0.0, 0.0, 0.0)))
        default = data.default_joint_pos.torch.clone()
        if not robot.is_fixed_base:  # as an env's reset does: the default root pose at each env origin
            pose = data.default_root_pose.torch.clone()
            pose[:, :3] += torch.as_tensor(origins)
            robot.write_root_pose_to_sim_index(root_pose=pose)
            robot.write_root_velocity_to_sim_index(root_velocity=torch.zeros((NUM_ENVS, 6)))
        robot.write_joint_position_to_sim_index(position=default)
        robot.write_joint_velocity_to_sim_index(velocity=torch.zeros_like(default))
        robot.set_joint_position_target_index(target=default)
        robot.write_data_to_sim()
        start = data.root_link_pose_w.torch[:, :3].clone()  # where the reset put it, before gravity acts
        finite = True
        steps = int(round(SECONDS / dt))
        for _ in range(steps):
            robot.set_joint_position_target_index(target=default)
            robot.write_data_to_sim()
            sim.step()
            robot.update(dt)
            finite = finite and bool(torch.isfinite(data.joint_pos.torch).all()) and bool(
                torch.isfinite(data.body_link_pose_w.torch).all())
        end = data.root_link_pose_w.torch[:, :3]
        limits = data.joint_pos_limits.torch[0]
        return {
            "num_instances": int(robot.num_instances),
            "dofs": int(robot.num_joints),
            "joint_names": list(robot.joint_names),
            "num_bodies": int(robot.num_bodies),
            "body_names": list(robot.body_names),
            "fixed_base": bool(robot.is_fixed_base),
            "limits": {n: [float(limits[i, 0]), float(limits[i, 1])] for i, n in enumerate(robot.joint_names)},
            "default_joint_pos": [float(v) for v in default[0]],
            "root_placement_error": float((start - expected).norm(dim=1).max()),
            "root_start": start.tolist(),
            "root_expected": expected.tolist(),
            "root_motion": float((end - start).norm(dim=1).max()),
            "joint_drift": float((data.joint_pos.torch - default).abs().max()),
            "finite": finite,
            "steps": steps,
        }


def _hold_rigid(sim, body, origins, dt: float) -> dict:
    """The report of a rigid object (no joints): placed at reset as an env does, then 1 s of falling."""
    import torch

    data = body.data
    pose = data.default_root_pose.torch.clone()
    pose[:, :3] += torch.as_tensor(origins)
    expected = pose[:, :3].clone()
    body.write_root_pose_to_sim_index(root_pose=pose)
    body.write_root_velocity_to_sim_index(root_velocity=torch.zeros((NUM_ENVS, 6)))
    body.write_data_to_sim()
    start = data.root_link_pose_w.torch[:, :3].clone()  # where the reset put it, before gravity acts
    finite = True
    steps = int(round(SECONDS / dt))
    for _ in range(steps):
        sim.step()
        body.update(dt)
        finite = finite and bool(torch.isfinite(data.root_link_pose_w.torch).all())
    return {"num_instances": int(body.num_instances), "dofs": 0, "joint_names": [], "num_bodies": 1,
            "body_names": list(body.body_names), "fixed_base": False, "limits": {}, "default_joint_pos": [],
            "root_placement_error": float((start - expected).norm(dim=1).max()), "root_start": start.tolist(),
            "root_expected": expected.tolist(),
            "root_motion": float((data.root_link_pose_w.torch[:, :3] - start).norm(dim=1).max()),
            "joint_drift": 0.0, "finite": finite, "steps": steps}


def _sim_cfg(dt: float = DT):
    from isaaclab_newton.physics import MJWarpSolverCfg, NewtonCfg

    from isaaclab.sim import SimulationCfg

    return SimulationCfg(dt=dt, device="cpu", physics=NewtonCfg(
        solver_cfg=MJWarpSolverCfg(njmax=200, nconmax=200, ls_iterations=20, cone="pyramidal",
                                   integrator="implicitfast"), use_cuda_graph=False))


def main() -> None:
    jobs = json.loads(sys.argv[1])
    from isaaclab.app import launch_simulation

    out = {}
    with launch_simulation(_sim_cfg(), {"headless": True, "device": "cpu"}):
        for job in jobs:
            try:
                out[job["name"]] = _check(job)
            except Exception as exc:  # a robot Isaac Lab refuses is a finding, not the end of the run
                traceback.print_exc(file=sys.stderr)
                last = [line for line in str(exc).splitlines() if line.strip()]
                out[job["name"]] = {"error": f"{type(exc).__name__}: {last[-1] if last else ''}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
