"""``verify_asset``: every check that applies to one converted asset, as one JSON-ready result.

Checks: ``usd-validation`` (every applicable OpenUSD validator), ``physics-structure`` (what those miss),
the source's own oracle (``mjcf-oracle``: MuJoCo's compiled model; ``urdf-oracle``: the URDF's forward
kinematics; ``mesh-oracle``: trimesh), the third-party loads ``newton-load`` and ``mujoco-usd-load``,
and for MJCF sources ``mujoco-roundtrip`` (``rules.verify.roundtrip``: what MuJoCo's USD decoder reads back
against the source's compiled model; skipped, as the loads are, when the environment is not set up).
The result also carries the asset's facts
(``rules.verify.facts``) for the report.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from usdforge.rules.verify.findings import CheckResult, Finding

#: Bumped when a check changes what it accepts, so that ``doit verify`` re-verifies every asset (the doit
#: process reads it: nothing heavy is imported at this module's top).
CHECKS_VERSION = 3


def _timed(function, *args, **kwargs) -> CheckResult:
    started = time.perf_counter()
    result = function(*args, **kwargs)
    result.seconds = time.perf_counter() - started
    return result


def _urdf_oracle(source: str, usd_path: str, cfg: dict[str, Any], stage) -> CheckResult:
    from usdforge.rules.verify.urdf import verify_urdf

    packages = {item["name"]: item["path"] for item in cfg.get("ros_package_paths") or []}
    report = verify_urdf(source, usd_path, packages, configurations=10,
                         expect_mimic=not cfg.get("convert_mimic_joints_to_normal_joints", False),
                         collision_from_visuals=bool(cfg.get("collision_from_visuals", False)),
                         tree_root=cfg.get("tree_root"), allowed=tuple(cfg.get("allowed_roots") or ()))
    result = CheckResult("urdf-oracle", detail=f"{report.links_compared} links, {report.joints_compared} joints, "
                         f"FK at rest and {report.configurations} configurations: max error "
                         f"{report.max_position_error:.2g} m / {report.max_rotation_error:.2g} rad")
    root = str(stage.GetDefaultPrim().GetPath())
    for problem in report.problems:
        # verify_urdf names bodies by path and joints by source name: point at the prim when it can.
        match = re.search(r"(/[\w/]+)", problem)
        prim = match.group(1) if match and stage.GetPrimAtPath(match.group(1)) else root
        joint = re.match(r"joint '([^']+)'", problem)
        if joint:
            found = [p for p in stage.Traverse() if p.GetName() == joint.group(1) or
                     (p.HasAttribute("usdforge:sourceName") and p.GetAttribute("usdforge:sourceName").Get() == joint.group(1)
                      and p.GetTypeName().endswith("Joint"))]
            prim = str(found[0].GetPath()) if found else prim
        result.add(Finding("urdf-oracle", prim, problem))
    return result


def verify_asset(kind: str, source: str, usd_path: str, cfg: dict[str, Any], build_dir: str | Path = "build",
                 engines: tuple[str, ...] = ("newton", "mujoco-usd")) -> dict[str, Any]:
    """Run every check on the asset at ``usd_path`` converted from ``source`` with ``cfg`` (plain data);
    the JSON-ready result: ``status`` (``passed``/``failed``), ``checks``, ``facts``, output bytes."""
    from usdforge.rules.verify.engines import load_check
    from usdforge.rules.verify.facts import asset_facts
    from usdforge.rules.verify.usd import check_physics, open_stage, validate

    started = time.perf_counter()
    stage = open_stage(usd_path)
    checks = [_timed(validate, stage, usd_path), _timed(check_physics, stage)]
    try:
        if kind == "mjcf":
            from usdforge.rules.verify.mjcf import verify_mjcf
            checks.append(_timed(verify_mjcf, source, stage, cfg))
        elif kind == "urdf":
            checks.append(_timed(_urdf_oracle, source, usd_path, cfg, stage))
        else:
            from usdforge.rules.verify.mesh import verify_mesh
            checks.append(_timed(verify_mesh, source, stage, cfg))
    except Exception as exc:  # an oracle that cannot read its source is a failed check, not a crash
        failed = CheckResult(f"{kind}-oracle")
        failed.add(Finding(f"{kind}-oracle", str(stage.GetDefaultPrim().GetPath()),
                           f"the source's oracle could not run: {type(exc).__name__}: {exc}"))
        checks.append(failed)
    # The engines' loads are compared with the source too (rules.verify.against_source), where MuJoCo can
    # compile it (usdforge converts some uncompilable models repaired, with warnings).
    source_facts, unread = None, ""
    from usdforge.rules.verify.engines import engine_python
    if kind in ("mjcf", "urdf") and any(engine_python(engine, build_dir) for engine in engines):
        from usdforge.rules.verify.against_source import source_facts as read_source_facts
        try:
            source_facts = read_source_facts(kind, source, cfg)
        except Exception as exc:  # noqa: BLE001 - the source's oracle reports it; the loads say why not compared
            from usdforge.rules.verify.logs import relative_log
            unread = "; not compared with the source: " + relative_log(f"{type(exc).__name__}: "
                                                                      f"{' '.join(str(exc).split())}", build_dir)
    # Isaac Lab spawns robots (articulations with their generated cfg), not meshes.
    for engine in engines:
        if engine != "isaaclab" or kind != "mesh":
            checks.append(load_check(engine, usd_path, stage, build_dir, source_facts, kind))
            if unread and checks[-1].status != "skipped":
                checks[-1].detail += unread
    if kind == "mjcf" and "mujoco-usd" in engines:
        from usdforge.rules.verify.roundtrip import roundtrip_check
        checks.append(roundtrip_check(source, usd_path, stage, build_dir))
    folder = Path(usd_path).parent
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".verify.json"))
    return {"usd_path": str(usd_path), "source": str(source), "kind": kind,
            "status": "failed" if any(c.status == "failed" for c in checks) else "passed",
            "checks": [c.to_json() for c in checks], "facts": asset_facts(stage), "output_bytes": size,
            "verify_seconds": round(time.perf_counter() - started, 3), "checks_version": CHECKS_VERSION}


def failure_lines(name: str, result: dict[str, Any], per_check: int = 12) -> list[str]:
    """One line per error of a verify result: ``<asset>: <prim>: <check>: <message>`` (at most
    ``per_check`` per check, then how many more the JSON result holds)."""
    lines = []
    for check in result.get("checks", []):
        errors = [f for f in check["findings"] if f["severity"] == "error"]
        lines.extend(f"{name}: {f['prim']}: {f['check']}: {f['message']}" for f in errors[:per_check])
        if len(errors) > per_check:
            lines.append(f"{name}: {check['name']}: {len(errors) - per_check} more errors in the JSON result")
    return lines
