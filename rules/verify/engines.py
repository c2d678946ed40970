"""Third-party engines that read our USD, each in its own virtual environment under the build folder.

Newton 1.8 pins usd-core < 26.9 and mujoco 3.17; MuJoCo 4.0's USD decoder (``mujoco[usd]``) pins usd-core
25.11: neither can share usdforge's environment nor each other's, so no extra of usdforge can install
them. ``<build>/venv-<engine>`` is made by ``python -m usdforge.rules.verify.engines [ENGINE ...]`` (or by
the engine tests on their first run: ``python -m venv`` + ``pip install``, a few minutes, needs the
package index) and reused after (delete the folder to rebuild). Warp's kernel cache is kept in
``<build>/warp-cache``. ``doit verify`` uses an environment when it exists and skips that check otherwise.

``load_check`` is the verify check: the engine loads the asset (Newton: ``ModelBuilder.add_usd`` with its
MuJoCo and Newton schema resolvers; MuJoCo: ``MjSpec.from_file``, on a flattened copy with a fixed base's
``ArticulationRootAPI`` moved from the robot's Xform to its root body, which its decoder needs; the check's
detail says so), its counts, joint limits and total
mass are compared with OpenUSD's own reading, its moving bodies, DoFs, mass and joint types with the source
(``rules.verify.against_source``: known engine limitations are findings of severity ``limitation``), and a
short passive rollout must stay finite. An engine that fails leaves its whole output in the finding's
``log`` and names its first real error (``rules.verify.logs``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Engine name → the pip requirement of its environment.
ENGINES = {
    "newton": "newton[importers,sim]==1.8.0",
    "mujoco-usd": "mujoco[usd]==4.0.0",
    # Isaac Lab 3.0.0 (kit-less, Newton 1.6 backend, torch 2.11 with its CUDA wheels: PyPI has no CPU
    # build of that torch; about 8 GB); ``bench/isaaclab_client.py`` runs in it.
    "isaaclab": "isaaclab==3.0.0",
}
#: Engines whose package needs another Python than the one running usdforge: name → interpreter version.
ENGINE_PYTHON = {"isaaclab": "3.12"}
#: Seconds of passive simulation the load check runs.
ROLLOUT_SECONDS = 0.2


class EngineError(RuntimeError):
    """An engine environment could not be made, or a script run in it failed. log: the engine's whole
    output (stdout then stderr), empty where nothing ran."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


def engine_python(name: str, build_dir: str | Path = "build", create: bool = False) -> Path | None:
    """The interpreter of ``<build_dir>/venv-<name>``; None when it is not set up (unless ``create``:
    then it is created and installed, EngineError with pip's output when that is impossible)."""
    venv = Path(build_dir).resolve() / f"venv-{name}"
    python = venv / "bin" / "python"
    marker = venv / "usdforge-requirement.txt"
    if python.is_file() and marker.is_file() and marker.read_text() == ENGINES[name]:
        return python
    if not create:
        return None
    for step in ([_base_python(name), "-m", "venv", "--clear", str(venv)],
                 [str(python), "-m", "pip", "install", "--quiet", ENGINES[name]]):
        done = subprocess.run(step, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise EngineError(f"could not set up {ENGINES[name]!r} in {venv}: {' '.join(step)} failed:\n"
                              f"{(done.stdout + done.stderr)[-3000:]}")
    marker.write_text(ENGINES[name])
    return python


def _base_python(name: str) -> str:
    """The interpreter an engine's environment is made from: this one, or ``python<version>`` from PATH
    or pyenv where ``ENGINE_PYTHON`` asks for another version (EngineError naming it when there is none)."""
    version = ENGINE_PYTHON.get(name)
    if version is None or f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    import glob
    import shutil

    # pyenv's installs first: its shim on PATH answers "command not found" unless that version is selected
    pyenv = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python")), reverse=True)
    found = pyenv[0] if pyenv else shutil.which(f"python{version}")
    if found is None:
        raise EngineError(f"{ENGINES[name]!r} needs Python {version}: no python{version} on PATH or in ~/.pyenv")
    return found


def run_in_engine(name: str, script: Path, *args: str, build_dir: str | Path = "build", cwd: Path | None = None,
                  create: bool = True, timeout: float = 1800) -> dict:
    """Run ``script`` with the engine's interpreter (our PYTHONPATH removed); the JSON of its last line."""
    python = engine_python(name, build_dir, create=create)
    if python is None:
        raise EngineError(f"{name} is not set up: no {Path(build_dir) / f'venv-{name}'}")
    cache = Path(build_dir).resolve() / "warp-cache"
    cache.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WARP_CACHE_PATH": str(cache)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(python), str(script), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=cwd)
    if done.returncode != 0:
        raise EngineError(f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}",
                          f"{done.stdout}\n{done.stderr}".strip())
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise EngineError(f"{name} printed no JSON result: {done.stdout[-2000:]}",
                          f"{done.stdout}\n{done.stderr}".strip()) from exc


# Each script takes the USD path and the rollout length; prints one JSON line: counts, limits by joint prim
# name (radians or metres), total mass, and whether the rollout stayed finite.
NEWTON_SCRIPT = """
import json, logging, math, sys, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
import numpy as np, warp as wp
wp.config.quiet = True
import newton
from newton.solvers import SolverMuJoCo
from newton._src.usd.schemas import SchemaResolverMjc, SchemaResolverNewton
usd, seconds = sys.argv[1], float(sys.argv[2])
dt = float(sys.argv[3]) if len(sys.argv) > 3 else 0.002  # the source's time step where it has one
builder = newton.ModelBuilder()
SolverMuJoCo.register_custom_attributes(builder)
builder.add_usd(usd, schema_resolvers=[SchemaResolverMjc(), SchemaResolverNewton()])
limits = {}
starts = list(builder.joint_qd_start) + [builder.joint_dof_count]
for j, label in enumerate(builder.joint_label):
    if builder.joint_type[j] in (newton.JointType.REVOLUTE, newton.JointType.PRISMATIC):
        d = starts[j]
        limits[label.rsplit("/", 1)[-1]] = [float(builder.joint_limit_lower[d]), float(builder.joint_limit_upper[d])]
names = {int(newton.JointType.REVOLUTE): "revolute", int(newton.JointType.PRISMATIC): "prismatic",
         int(newton.JointType.BALL): "spherical", int(newton.JointType.FREE): "free",
         int(newton.JointType.FIXED): "fixed", int(newton.JointType.D6): "d6", int(newton.JointType.DISTANCE): "distance"}
joint_list = [[builder.joint_label[j], names.get(int(builder.joint_type[j]), str(int(builder.joint_type[j]))),
               starts[j + 1] - starts[j], int(builder.joint_parent[j]), int(builder.joint_child[j])]
              for j in range(builder.joint_count)]
out = {"bodies": builder.body_count, "joints": builder.joint_count, "dofs": builder.joint_dof_count,
       "mass": float(sum(builder.body_mass)), "limits": limits, "finite": True, "steps": 0,
       "version": newton.__version__, "joint_list": joint_list,
       "body_list": [[builder.body_label[b], float(builder.body_mass[b])] for b in range(builder.body_count)]}
if builder.body_count:
    model = builder.finalize(device="cpu")
    solver = SolverMuJoCo(model, use_mujoco_cpu=True)
    state, nxt, control = model.state(), model.state(), model.control()
    newton.eval_fk(model, model.joint_q, model.joint_qd, state)
    for _ in range(int(round(seconds / dt))):
        solver.step(state, nxt, control, None, dt)
        state, nxt = nxt, state
        out["steps"] += 1
    poses = state.body_q.numpy()
    out["finite"] = bool(np.isfinite(poses).all())
    out["positions"] = {label: [float(v) for v in poses[b, :3]] for b, label in enumerate(builder.body_label)}
print(json.dumps(out))
"""

#: Run in the MuJoCo decoder's environment by the load check and the round trip (rules.verify.roundtrip):
#: ``adapt_for_decoder(usd)`` gives (the file the decoder reads, the prims adapted). The adaptation
#: (docs/usd_layout.md): MuJoCo 4.0's decoder makes the prim carrying ArticulationRootAPI a moving body, so
#: an API on the robot's Xform (usdforge's fixed bases, as Isaac Lab prescribes) moves to the body each world
#: joint anchored to that Xform holds, in a flattened copy.
DECODER_ADAPTATION = """
def adapt_for_decoder(usd):
    import os, tempfile
    from pxr import Usd, UsdPhysics
    stage = Usd.Stage.Open(usd)
    adapted = []
    for prim in [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.ArticulationRootAPI) and not p.HasAPI(UsdPhysics.RigidBodyAPI)]:
        bodies = [UsdPhysics.Joint(j).GetBody1Rel().GetTargets()[0] for j in Usd.PrimRange(prim)
                  if j.IsA(UsdPhysics.Joint) and UsdPhysics.Joint(j).GetBody0Rel().GetTargets() in ([], [prim.GetPath()])
                  and UsdPhysics.Joint(j).GetBody1Rel().GetTargets()]
        if bodies:
            adapted.append(str(prim.GetPath()))
    if not adapted:
        return usd, adapted
    flat = Usd.Stage.Open(stage.Flatten())
    for path in adapted:
        prim = flat.GetPrimAtPath(path)
        prim.RemoveAppliedSchema("PhysicsArticulationRootAPI")
        for j in Usd.PrimRange(prim):
            joint = UsdPhysics.Joint(j)
            if j.IsA(UsdPhysics.Joint) and joint.GetBody0Rel().GetTargets() == [prim.GetPath()]:
                flat.GetPrimAtPath(joint.GetBody1Rel().GetTargets()[0]).AddAppliedSchema("PhysicsArticulationRootAPI")
    copy = os.path.join(tempfile.mkdtemp(prefix="usdforge-decoder-"), os.path.basename(usd).rsplit(".", 1)[0] + ".usdc")
    flat.GetRootLayer().Export(copy)
    return copy, adapted
"""

MUJOCO_SCRIPT = """
import json, os, sys, tempfile, numpy as np, mujoco
from pxr import Usd, UsdPhysics
""" + DECODER_ADAPTATION + """
usd, seconds = sys.argv[1], float(sys.argv[2])
usd, adapted = adapt_for_decoder(usd)
model = mujoco.MjSpec.from_file(usd).compile()
limits = {}
for j in range(model.njnt):
    if model.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE) and model.jnt_limited[j]:
        limits[model.joint(j).name.rsplit("/", 1)[-1]] = [float(v) for v in model.jnt_range[j]]
data = mujoco.MjData(model)
steps = int(round(seconds / model.opt.timestep))
for _ in range(steps):
    mujoco.mj_step(model, data)
names = {0: "free", 1: "spherical", 2: "prismatic", 3: "revolute"}
widths = {0: 6, 1: 3, 2: 1, 3: 1}
joint_list = [[model.joint(j).name, names[int(model.jnt_type[j])], widths[int(model.jnt_type[j])], -1, -1]
              for j in range(model.njnt)]
# A body's rigid group: MuJoCo's weld root (None: welded to the world), by prim path.
body_list = [[model.body(b).name, float(model.body_mass[b]),
              model.body(int(model.body_weldid[b])).name if model.body_weldid[b] else None] for b in range(1, model.nbody)]
print(json.dumps({"adapted": adapted, "bodies": int(model.nbody - 1), "joints": int(model.njnt), "dofs": int(model.nv),
                  "actuators": int(model.nu), "mass": float(model.body_mass[1:].sum()), "limits": limits,
                  "finite": bool(np.isfinite(data.qpos).all() and np.isfinite(data.xpos).all()), "steps": steps,
                  "version": mujoco.__version__, "joint_list": joint_list, "body_list": body_list}))
"""


def _usd_facts(stage) -> dict:
    """What the engines should find, from OpenUSD's own reading: rigid bodies, total authored mass, and
    revolute/prismatic limits by joint prim name (radians or metres; unlimited ones left out)."""
    from pxr import Usd, UsdPhysics

    bodies, mass, limits = 0, 0.0, {}
    for prim in Usd.PrimRange.Stage(stage, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)):
        if prim.HasAPI(UsdPhysics.RigidBodyAPI):
            bodies += 1
            attribute = prim.GetAttribute("physics:mass")
            mass += float(attribute.Get()) if attribute and attribute.HasAuthoredValue() else 0.0
        angular = prim.IsA(UsdPhysics.RevoluteJoint)
        if (angular or prim.IsA(UsdPhysics.PrismaticJoint)) and not prim.GetAttribute("physics:excludeFromArticulation").Get():
            lower, upper = prim.GetAttribute("physics:lowerLimit").Get(), prim.GetAttribute("physics:upperLimit").Get()
            if lower is not None and upper is not None and abs(lower) < 1e30 and abs(upper) < 1e30:
                scale = math.pi / 180.0 if angular else 1.0
                limits[prim.GetName()] = [lower * scale, upper * scale]
    return {"bodies": bodies, "mass": mass, "limits": limits}


def failure_finding(check: str, prim: str, what: str, exc: Exception, build_dir: str | Path = "build"):
    """The finding of an engine that failed: ``<what>: <the first real error of its output>``, its whole
    output as the finding's ``log`` (``rules.verify.logs``: paths relative, bounded)."""
    from usdforge.rules.verify.findings import Finding
    from usdforge.rules.verify.logs import first_error, relative_log

    if isinstance(exc, subprocess.TimeoutExpired):
        output = [part.decode("utf-8", "replace") if isinstance(part, bytes) else part or ""
                  for part in (exc.stdout, exc.stderr)]
        log = relative_log("\n".join(output).strip() + f"\ntimed out after {exc.timeout:g} s", build_dir)
        return Finding(check, prim, f"{what}: timed out after {exc.timeout:g} s", log=log)
    log = relative_log(getattr(exc, "log", "") or str(exc), build_dir)
    return Finding(check, prim, f"{what}: {first_error(log) or type(exc).__name__}", log=log)


def load_check(engine: str, usd_path: str | Path, stage, build_dir: str | Path = "build",
               source: dict | None = None, kind: str = ""):
    """The verify check ``<engine>-load`` (module docstring); skipped when the engine is not set up.
    source, kind: ``rules.verify.against_source.source_facts`` of the asset's source and its kind
    (``mjcf``/``urdf``): the load is also compared with the source (None: with the USD only)."""
    from usdforge.rules.verify.findings import CheckResult, Finding, skipped

    if engine == "isaaclab":
        from usdforge.rules.verify.isaaclab_check import isaaclab_check

        return isaaclab_check(usd_path, stage, build_dir, source)
    name = f"{engine}-load"
    if engine_python(engine, build_dir) is None:
        return skipped(name, f"skipped: {engine} is not set up (no {Path(build_dir) / f'venv-{engine}'}; "
                             f"`python -m usdforge.rules.verify.engines {engine}` makes it)")
    started = time.perf_counter()
    result = CheckResult(name)
    root = str(stage.GetDefaultPrim().GetPath())
    script = NEWTON_SCRIPT if engine == "newton" else MUJOCO_SCRIPT
    with tempfile.TemporaryDirectory(prefix="usdforge-engine-") as folder:
        path = Path(folder) / f"check_{engine.replace('-', '_')}.py"  # never newton.py: it would shadow newton
        path.write_text(script)
        try:
            timestep = [str(source["timestep"])] if engine == "newton" and source and "timestep" in source else []
            found = run_in_engine(engine, path, str(Path(usd_path).resolve()), str(ROLLOUT_SECONDS), *timestep,
                                  build_dir=build_dir, cwd=Path(folder), create=False, timeout=900)
        except (EngineError, subprocess.TimeoutExpired) as exc:
            result.add(failure_finding(name, root, f"{engine} cannot load the asset", exc, build_dir))
            result.seconds = time.perf_counter() - started
            return result
    expected = _usd_facts(stage)
    if found["bodies"] != expected["bodies"]:
        result.add(Finding(name, root, f"{engine} finds {found['bodies']} bodies, the USD has {expected['bodies']}"))
    if abs(found["mass"] - expected["mass"]) > 1e-5 * max(1.0, expected["mass"]) and expected["mass"] > 0:
        result.add(Finding(name, root, f"{engine} reads a total mass of {found['mass']:.6g} kg, the USD "
                           f"authors {expected['mass']:.6g} kg"))
    for joint, (lower, upper) in expected["limits"].items():
        theirs = found["limits"].get(joint)
        if theirs is not None and (abs(theirs[0] - lower) > 1e-4 or abs(theirs[1] - upper) > 1e-4):
            result.add(Finding(name, f"{root}/joints/{joint}", f"{engine} reads limits {theirs}, the USD "
                               f"authors {[lower, upper]}"))
    if not found["finite"]:
        result.add(Finding(name, root, f"a {ROLLOUT_SECONDS} s passive rollout in {engine} went non-finite"))
    result.detail = (f"{found['bodies']} bodies, {found['dofs']} DoFs, {found['mass']:.4g} kg, "
                     f"{found['steps']} passive steps {'finite' if found['finite'] else 'NON-FINITE'}")
    if source is not None:
        from usdforge.rules.verify.against_source import compare_with_source, describe

        for severity, message in compare_with_source(engine, found["version"], found, source, kind, stage):
            result.add(Finding(name, root, message, severity))
        result.detail += f"; {describe(source)}"
        if "positions" in found and "timestep" in source and found["finite"]:
            # The decoder's rollout is compared with the source's by mujoco-roundtrip, body by body.
            from usdforge.rules.verify.against_source import rollout_against_source

            findings, summary = rollout_against_source(engine, found["version"], found, source, stage)
            for severity, message in findings:
                result.add(Finding(name, root, message, severity))
            result.detail += f"; {summary}"
    if found.get("adapted"):
        result.detail += (f"; adapted: ArticulationRootAPI moved from {', '.join(found['adapted'])} to the fixed "
                          "base's root body (MuJoCo 4.0's USD decoder refuses it on the robot's Xform)")
    result.seconds = time.perf_counter() - started
    return result


if __name__ == "__main__":
    for engine in sys.argv[1:] or list(ENGINES):
        print(engine, engine_python(engine, "build", create=True))
