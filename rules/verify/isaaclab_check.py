"""The verify check ``isaaclab-load``: Isaac Lab 3.0 spawns the robot with its generated ``<stem>_cfg.py``.

Runs ``rules/verify/isaaclab_client.py`` with the interpreter of ``<build>/venv-isaaclab`` (made by
``python -m usdforge.rules.verify.engines isaaclab``; skipped when absent, or when the entry wrote no cfg):
2 envs, kit-less, Newton on the CPU, 1 s holding the default pose. Compared with OpenUSD's own reading of
the asset: one articulation per env, DOF, joint names and limits, body count, fixed base; each env's root
at its origin + ``init_state.pos`` (+ the root body's offset from a fixed base's anchor) within 1 mm; a
fixed base moving less than 1 mm; every state finite.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path

from pxr import Usd, UsdPhysics

from usdforge.rules.outputs import articulation_cfg_file_name
from usdforge.rules.verify.engines import (ENGINES, EngineError, _usd_facts, engine_python, failure_finding,
                                            run_in_engine)

#: Metres: how far a root may lie from where the cfg puts it, and how far a fixed base may move in 1 s.
PLACEMENT_TOLERANCE = 1e-3
CLIENT = Path(__file__).with_name("isaaclab_client.py")


def spawn(cfg_paths: dict[str, Path], build_dir: str | Path = "build",
          fix_root_link: dict[str, bool | None] | None = None, create: bool = False, timeout: float = 1800) -> dict:
    """Label → the client's report for each generated cfg (``isaaclab_client.py``'s docstring), in one
    Isaac Lab process; ``fix_root_link``: label → ``spawn.fix_root_link`` to set (unset by default)."""
    jobs = [{"name": name, "cfg": str(Path(path).resolve()), "fix_root_link": (fix_root_link or {}).get(name)}
            for name, path in cfg_paths.items()]
    return run_in_engine("isaaclab", CLIENT, json.dumps(jobs), build_dir=build_dir, create=create,
                         timeout=timeout, cwd=Path(build_dir).resolve())


def expected_facts(stage: Usd.Stage) -> dict:
    """What Isaac Lab should find, from OpenUSD: DOF names (a spherical joint's three as ``<name>:0..2``),
    limits (rad or m), bodies, fixed base."""
    facts = _usd_facts(stage)
    root = stage.GetDefaultPrim()
    names = []
    for prim in Usd.PrimRange(root):
        if prim.GetAttribute("physics:excludeFromArticulation").Get():
            continue
        if prim.IsA(UsdPhysics.RevoluteJoint) or prim.IsA(UsdPhysics.PrismaticJoint):
            names.append(prim.GetName())
        elif prim.IsA(UsdPhysics.SphericalJoint):  # three DoF, named as Isaac Lab's Newton backend names them
            names.extend(f"{prim.GetName()}:{axis}" for axis in range(3))
    carrier = next((p for p in Usd.PrimRange(root) if p.HasAPI(UsdPhysics.ArticulationRootAPI)), None)
    facts["joint_names"] = names
    facts["fixed_base"] = carrier is not None and not carrier.HasAPI(UsdPhysics.RigidBodyAPI)
    return facts


def compare(report: dict, expected: dict) -> list[str]:
    """Problems in one client report against ``expected_facts``; empty when Isaac Lab agrees."""
    if "error" in report:
        return [f"Isaac Lab cannot spawn it: {report['error']}"]
    problems = []
    if report["num_instances"] != 2:
        problems.append(f"{report['num_instances']} articulations in 2 envs")
    if sorted(report["joint_names"]) != sorted(expected["joint_names"]):
        problems.append(f"joints {report['joint_names']}, the USD has {expected['joint_names']}")
    if report["num_bodies"] != expected["bodies"]:
        problems.append(f"{report['num_bodies']} bodies, the USD has {expected['bodies']}")
    if report["fixed_base"] != expected["fixed_base"]:
        problems.append(f"fixed base {report['fixed_base']}, the USD says {expected['fixed_base']}")
    for joint, (lower, upper) in expected["limits"].items():
        theirs = report["limits"].get(joint)
        if theirs is not None and (abs(theirs[0] - lower) > 1e-4 or abs(theirs[1] - upper) > 1e-4):
            problems.append(f"joint {joint}: limits {theirs}, the USD authors {[lower, upper]}")
    if not report["root_placement_error"] <= PLACEMENT_TOLERANCE:
        problems.append(f"a root lies {report['root_placement_error']:.4g} m from its env origin + init_state.pos")
    if report["fixed_base"] and not report["root_motion"] <= PLACEMENT_TOLERANCE:
        problems.append(f"the fixed base moved {report['root_motion']:.4g} m in 1 s")
    if not report["finite"] or not all(math.isfinite(v) for v in report["default_joint_pos"]):
        problems.append("a state went non-finite within 1 s")
    return problems


def against_source(report: dict, source: dict) -> list[str]:
    """Problems of a client report against the source's facts (``rules.verify.against_source``): the
    articulation's DoFs (Isaac Lab counts a spherical joint's three, not a floating base's six) and, with
    the engine's version, how many differ."""
    expected = source["dofs"] - 6 * source["joints"].get("free", 0)
    if "error" in report or report["dofs"] == expected:
        return []
    return [f"{ENGINES['isaaclab']} spawns {report['dofs']} joint DoFs, the source has {expected} "
            f"({report['dofs'] - expected:+d}; a floating base's 6 not counted)"]


def isaaclab_check(usd_path: str | Path, stage, build_dir: str | Path = "build", source: dict | None = None):
    """The verify check ``isaaclab-load`` (module docstring); ``source``: the source's facts
    (``rules.verify.against_source.source_facts``), compared with the spawned articulation's DoFs."""
    from usdforge.rules.verify.findings import CheckResult, Finding, skipped

    name = "isaaclab-load"
    cfg = Path(usd_path).with_name(articulation_cfg_file_name(Path(usd_path).name))
    if engine_python("isaaclab", build_dir) is None:
        return skipped(name, f"skipped: isaaclab is not set up (no {Path(build_dir) / 'venv-isaaclab'}; "
                             "`python -m usdforge.rules.verify.engines isaaclab` makes it, about 8 GB)")
    if not cfg.is_file():
        return skipped(name, f"skipped: no {cfg.name} (the entry's articulation_cfg is false)")
    started = time.perf_counter()
    result = CheckResult(name)
    root = str(stage.GetDefaultPrim().GetPath())
    try:
        report = spawn({"asset": cfg}, build_dir)["asset"]
    except (EngineError, subprocess.TimeoutExpired) as exc:
        result.add(failure_finding(name, root, "Isaac Lab cannot spawn it", exc, build_dir))
        result.seconds = time.perf_counter() - started
        return result
    for problem in compare(report, expected_facts(stage)) + (against_source(report, source) if source else []):
        result.add(Finding(name, root, problem))
    if "error" not in report:
        result.detail = (f"2 envs: {report['dofs']} DoFs, {report['num_bodies']} bodies, "
                         f"{'fixed' if report['fixed_base'] else 'floating'} base, root within "
                         f"{report['root_placement_error'] * 1000:.3g} mm of its place, {report['steps']} steps "
                         f"{'finite' if report['finite'] else 'NON-FINITE'}")
    result.seconds = time.perf_counter() - started
    return result
