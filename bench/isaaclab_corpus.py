"""Isaac Lab 3.0 on every corpus robot and the embedded library's robots (issue 29), in one Isaac Lab process.

    python bench/isaaclab_corpus.py [OUT_DIR] [NAME ...]

Converts each robot of ``bench/corpus_library.py``'s library (MJCF with MuJoCo's scene and contact rules,
URDF as configured there) into OUT_DIR (default ``build/isaaclab-corpus``), then:

- Isaac Lab 3.0 (``build/venv-isaaclab``) spawns each with its generated ``<stem>_cfg.py`` in 2 envs on the
  CPU (``rules/verify/isaaclab_client.py``), compared with OpenUSD's reading (``rules.verify.isaaclab_check``);
- Newton 1.8 (``build/venv-newton``) loads each as written and with the previous layout (API on the root
  body, world joints with an empty body0, rebuilt from the written asset) and reports bodies, DOF,
  articulations and joints fixed to the world for both.

Prints one line per robot and the seconds each stage took.
"""

from __future__ import annotations

import json
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from corpus_library import corpus_library  # noqa: E402

NEWTON = """
    import json, sys, warp as wp
    wp.config.quiet = True
    import newton
    out = {}
    for key, path in json.loads(open(sys.argv[1]).read()).items():
        try:
            builder = newton.ModelBuilder()
            builder.add_usd(path)
            fixed = [i for i in range(builder.joint_count)
                     if builder.joint_parent[i] == -1 and int(builder.joint_type[i]) == int(newton.JointType.FIXED)]
            out[key] = {"bodies": builder.body_count, "dofs": builder.joint_dof_count,
                        "articulations": builder.articulation_count, "fixed_to_world": len(fixed)}
        except Exception as exc:
            out[key] = {"error": str(exc).splitlines()[0]}
    print(json.dumps(out))
"""


def previous_layout(usd_path: Path, out: Path) -> Path:
    """The asset flattened with the layout before issue 29: the API on each world-anchored root body,
    world joints with an empty body0."""
    from pxr import Usd, UsdPhysics

    flat = Usd.Stage.Open(Usd.Stage.Open(str(usd_path)).Flatten())
    robot = flat.GetDefaultPrim()
    moved = robot.HasAPI(UsdPhysics.ArticulationRootAPI)
    if moved:
        robot.RemoveAppliedSchema("PhysicsArticulationRootAPI")
    for prim in flat.Traverse():
        joint = UsdPhysics.Joint(prim)
        if joint and joint.GetBody0Rel().GetTargets() == [robot.GetPath()]:
            joint.GetBody0Rel().ClearTargets(True)
            if moved and prim.IsA(UsdPhysics.FixedJoint):
                flat.GetPrimAtPath(joint.GetBody1Rel().GetTargets()[0]).AddAppliedSchema("PhysicsArticulationRootAPI")
    flat.GetRootLayer().Export(str(out))
    return out


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "isaaclab-corpus"
    wanted = set(sys.argv[2:])
    from pxr import Usd

    from usdforge.pipeline import MjcfConverter, UrdfConverter
    from usdforge.rules.outputs import articulation_cfg_file_name
    from usdforge.rules.verify import isaaclab_check as isaaclab
    from usdforge.rules.verify.engines import run_in_engine
    from usdforge.schemas import MjcfConverterCfg, UrdfConverterCfg
    from usdforge.schemas.serialization import structure_cfg

    build = ROOT / "build"
    converted = {}
    started = time.perf_counter()
    for item in corpus_library()["assets"]:
        source = item["source"]
        if not source.endswith((".xml", ".urdf", ".xacro")) or (wanted and item["name"] not in wanted):
            continue
        fields = {"asset_path": source, **item.get("cfg", {})}
        if not source.endswith(".xml"):
            fields["ros_package_paths"] = [{"name": k, "path": v} for k, v in item.get("packages", {}).items()]
        variants = {item["name"]: fields}
        if item["name"] == "panda_urdf":  # the arm as users fix it, besides the library's floating entry
            variants["panda_urdf_fixed"] = {**fields, "fix_base": True}
        for name, data in variants.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if source.endswith(".xml"):
                    converter = MjcfConverter(structure_cfg({**data, "usd_dir": str(out / name)}, MjcfConverterCfg))
                else:
                    converter = UrdfConverter(structure_cfg({**data, "usd_dir": str(out / name)}, UrdfConverterCfg))
            converted[name] = Path(converter.usd_path)
    print(f"converted {len(converted)} robots in {time.perf_counter() - started:.0f} s")

    started = time.perf_counter()
    cfgs = {name: usd.with_name(articulation_cfg_file_name(usd.name)) for name, usd in converted.items()}
    reports = isaaclab.spawn(cfgs, build, create=False, timeout=3600)
    print(f"Isaac Lab 3.0: {time.perf_counter() - started:.0f} s for {len(cfgs)} robots (one process)")
    for name, usd in converted.items():
        report = reports[name]
        problems = isaaclab.compare(report, isaaclab.expected_facts(Usd.Stage.Open(str(usd))))
        summary = ("ERROR " + report["error"]) if "error" in report else (
            f"{report['dofs']} DoF, {report['num_bodies']} bodies, {'fixed' if report['fixed_base'] else 'floating'}, "
            f"root {report['root_placement_error'] * 1000:.2f} mm from its place, fixed base moved "
            f"{report['root_motion'] * 1000 if report['fixed_base'] else float('nan'):.2f} mm, "
            f"{'finite' if report['finite'] else 'NON-FINITE'}")
        print(f"  {name:22s} {'ok ' if not problems else 'BAD'} {summary}" + (f" — {'; '.join(problems)}" if problems else ""))

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="usdforge-newton-") as folder:
        cases = {}
        for name, usd in converted.items():
            cases[f"{name}/now"] = str(usd)
            cases[f"{name}/before"] = str(previous_layout(usd, Path(folder) / f"{name}_before.usda"))
        (Path(folder) / "cases.json").write_text(json.dumps(cases))
        script = Path(folder) / "newton_counts.py"
        script.write_text(textwrap.dedent(NEWTON))
        newton = run_in_engine("newton", script, str(Path(folder) / "cases.json"), build_dir=build, create=False,
                               cwd=Path(folder), timeout=3600)
    print(f"Newton 1.8 add_usd, now vs before: {time.perf_counter() - started:.0f} s")
    for name in converted:
        now, before = newton[f"{name}/now"], newton[f"{name}/before"]
        print(f"  {name:22s} {'same' if now == before else 'DIFFERENT'} now {now} before {before}")


if __name__ == "__main__":
    main()
