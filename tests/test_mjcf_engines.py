"""The converted corpus models in two engines that read USD, each in its own virtual environment (their
usd-core and mujoco pins clash with each other and with usdforge's):

- Newton 1.8 (``pip install "newton[importers,sim]==1.8.0"``): ``add_usd`` with its MuJoCo and Newton
  schema resolvers against ``add_mjcf`` of the source;
- MuJoCo 4.0's USD decoder (``pip install "mujoco[usd]==4.0.0"``): ``MjSpec.from_file(usd)`` against
  ``MjModel.from_xml_path(source)``.

``tests/engines.py`` creates each environment on the first run, under ``build/``, and reuses it after. Every model is compared on counts, masses, joint limits
and a 0.5 s passive rollout (zero control), body positions within 1e-4 m. Known gap, asserted as such:
MuJoCo 4.0's decoder does not read spherical joints (it warns and welds the bodies), so Cassie's two ball
joints are missing there and its reference drops them too.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import mujoco
import pytest
from pxr import Usd, UsdPhysics

from engines import run_in_engine
from usdforge.rules.usd.stage import usd_identifier
from usdforge.rules.verify.engines import DECODER_ADAPTATION
from test_mjcf_support import CORPUS_CFG, converted, corpus_models, source_name

ROLLOUT_SECONDS = 0.5
POSITION_TOLERANCE = 1e-4
MASS_TOLERANCE = 1e-5


def run_engine(name: str, script: str, cases: dict[str, tuple[Path, Path]], folder: Path) -> dict:
    """Run ``script`` in the engine's environment on every (source, usd) pair; its JSON answer."""
    payload = json.dumps({k: [str(s), str(u)] for k, (s, u) in cases.items()})
    path = folder / f"check_{name.replace('-', '_')}.py"  # not newton.py: it would shadow the package
    path.write_text(textwrap.dedent(script))
    return run_in_engine(name, path, payload)


@pytest.fixture(scope="module")
def corpus() -> dict[str, tuple[Path, Path]]:
    return {name: (path, converted(path, **CORPUS_CFG).usd_path) for name, path in sorted(corpus_models().items())}


# A fixed base's ArticulationRootAPI moves from the robot's Xform to its root body in a copy, as `doit
# verify` does for this decoder (rules.verify.engines.DECODER_ADAPTATION).
DECODER_SCRIPT = DECODER_ADAPTATION + textwrap.dedent("""
    import json, sys, numpy as np, mujoco, mujoco._usd
    from pxr import Usd
    out = {}
    for name, (source, usd) in json.loads(sys.argv[1]).items():
        reference_spec = mujoco.MjSpec.from_file(source)
        # The documented decoder gap: no spherical joints. The reference welds them too.
        balls = [j for j in reference_spec.joints if j.type == mujoco.mjtJoint.mjJNT_BALL]
        for element in balls + (list(reference_spec.keys) if balls else []):
            reference_spec.delete(element)  # keyframes would no longer fit the joints
        usd = adapt_for_decoder(usd)[0]
        src, dec = reference_spec.compile(), mujoco.MjSpec.from_file(usd).compile()
        full = mujoco.MjModel.from_xml_path(source)
        stage = Usd.Stage.Open(usd)
        def named(path):
            prim = stage.GetPrimAtPath(path)
            attribute = prim.GetAttribute("usdforge:sourceName") if prim else None
            return attribute.Get() if attribute else None
        bodies = {b: mujoco.mj_name2id(src, mujoco.mjtObj.mjOBJ_BODY, named(dec.body(b).name) or "")
                  for b in range(1, dec.nbody)}
        joints = {j: mujoco.mj_name2id(src, mujoco.mjtObj.mjOBJ_JOINT, named(dec.joint(j).name) or "")
                  for j in range(dec.njnt) if dec.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE}
        mass = max([abs(dec.body_mass[b] - src.body_mass[s]) / max(src.body_mass[s], 1e-9)
                    for b, s in bodies.items() if s >= 0] or [0.0])
        limits = 0.0
        for j, s in joints.items():
            ref = src.qpos0[src.jnt_qposadr[s]]
            limited = bool(src.jnt_limited[s])
            if bool(dec.jnt_limited[j]) != limited:
                limits = float("inf")
            elif limited:
                limits = max(limits, float(np.abs(dec.jnt_range[j] - (src.jnt_range[s] - ref)).max()))
        ds, dd = mujoco.MjData(src), mujoco.MjData(dec)
        for _ in range(int(round(0.5 / src.opt.timestep))):
            mujoco.mj_step(src, ds)
        for _ in range(int(round(0.5 / dec.opt.timestep))):
            mujoco.mj_step(dec, dd)
        errors = {src.body(s).name: float(np.abs(dd.xpos[b] - ds.xpos[s]).max()) for b, s in bodies.items() if s >= 0}
        out[name] = {
            "moving_bodies": sorted(named(dec.body(b).name) for b in range(1, dec.nbody)),
            "joints": sorted(src.joint(s).name for s in joints.values() if s >= 0),
            "unmapped": [dec.joint(j).name for j, s in joints.items() if s < 0],
            "source_joints": sorted(full.joint(j).name for j in range(full.njnt)
                                    if full.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE),
            "ball_joints": sorted(full.joint(j).name for j in range(full.njnt) if full.jnt_type[j] == mujoco.mjtJoint.mjJNT_BALL),
            "free": [int((m.jnt_type == 0).sum()) for m in (full, dec)],
            "counts": [[int(m.nu), int(m.ntendon), int(m.neq)] for m in (full, dec)],
            "mass": mass, "limits": limits, "timestep": [src.opt.timestep, dec.opt.timestep],
            "rollout": max(errors.values()), "worst": max(errors, key=errors.get),
        }
    print(json.dumps(out))
""")

NEWTON_SCRIPT = """
    import json, math, sys, numpy as np, warp as wp
    wp.config.quiet = True
    import mujoco, newton
    from newton.solvers import SolverMuJoCo
    from newton._src.usd.schemas import SchemaResolverMjc, SchemaResolverNewton
    out = {}
    for name, (source, usd) in json.loads(sys.argv[1]).items():
        native = mujoco.MjModel.from_xml_path(source)
        def build(kind):
            builder = newton.ModelBuilder()
            SolverMuJoCo.register_custom_attributes(builder)
            if kind == "mjcf":
                builder.add_mjcf(source)
            else:
                builder.add_usd(usd, schema_resolvers=[SchemaResolverMjc(), SchemaResolverNewton()])
            return builder
        builders = {kind: build(kind) for kind in ("mjcf", "usd")}
        labels = {kind: [label.split("/")[-1] for label in b.body_label] for kind, b in builders.items()}
        joint_labels = {kind: [label.split("/")[-1] for label in b.joint_label] for kind, b in builders.items()}
        models = {kind: b.finalize(device="cpu") for kind, b in builders.items()}
        option = native.opt
        settings = dict(integrator=int(option.integrator), cone=int(option.cone), solver=int(option.solver),
                        iterations=int(option.iterations), ls_iterations=int(option.ls_iterations),
                        impratio=float(option.impratio), tolerance=float(option.tolerance),
                        density=float(option.density), viscosity=float(option.viscosity),
                        enable_multiccd=False)
        final = {}
        for kind, model in models.items():
            solver = SolverMuJoCo(model, use_mujoco_cpu=True, **settings)
            state, nxt, control = model.state(), model.state(), model.control()
            newton.eval_fk(model, model.joint_q, model.joint_qd, state)
            for _ in range(int(round(0.5 / option.timestep))):
                solver.step(state, nxt, control, None, option.timestep)
                state, nxt = nxt, state
            final[kind] = state.body_q.numpy()
        index = {kind: {label: i for i, label in enumerate(labels[kind])} for kind in labels}
        common = sorted(set(index["mjcf"]) & set(index["usd"]))
        masses = {kind: models[kind].body_mass.numpy() for kind in models}
        mass = max(abs(masses["usd"][index["usd"][b]] - masses["mjcf"][index["mjcf"][b]])
                   / max(masses["mjcf"][index["mjcf"][b]], 1e-9) for b in common)
        errors = {b: float(np.abs(final["usd"][index["usd"][b], :3] - final["mjcf"][index["mjcf"][b], :3]).max())
                  for b in common}
        def limits(kind):
            model, q0 = models[kind], models[kind].joint_q.numpy()
            lower, upper = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
            starts, types = model.joint_q_start.numpy(), model.joint_type.numpy()
            found = {}
            for j, label in enumerate(joint_labels[kind]):
                if types[j] in (newton.JointType.REVOLUTE, newton.JointType.PRISMATIC):
                    dof = model.joint_qd_start.numpy()[j]
                    found[label] = (float(lower[dof]), float(upper[dof]))
            return found
        lim = {kind: limits(kind) for kind in models}
        ref = {native.joint(j).name: float(native.qpos0[native.jnt_qposadr[j]]) for j in range(native.njnt)}
        limit_error = 0.0
        for label, (low, high) in lim["usd"].items():
            if label in lim["mjcf"]:
                shift = ref.get(label, 0.0) if abs(lim["mjcf"][label][0]) < 1e5 else 0.0
                limit_error = max(limit_error, abs(low - (lim["mjcf"][label][0] - shift)),
                                  abs(high - (lim["mjcf"][label][1] - shift)))
        out[name] = {"bodies": [labels["mjcf"], labels["usd"]],
                     "dofs": [int(models["mjcf"].joint_dof_count), int(models["usd"].joint_dof_count)],
                     "limited_joints": [len(lim["mjcf"]), len(lim["usd"])],
                     "mass": float(mass), "limits": limit_error,
                     "rollout": max(errors.values()), "worst": max(errors, key=errors.get)}
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def decoder(corpus, tmp_path_factory) -> dict:
    return run_engine("mujoco-usd", DECODER_SCRIPT, corpus, tmp_path_factory.mktemp("decoder"))


@pytest.fixture(scope="module")
def newton(corpus, tmp_path_factory) -> dict:
    return run_engine("newton", NEWTON_SCRIPT, corpus, tmp_path_factory.mktemp("newton"))


def rigid_bodies(usd: Path) -> list[str]:
    stage = Usd.Stage.Open(str(usd))
    return sorted(source_name(stage, p.GetPath()) for p in stage.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI))


def moving_source_bodies(source: Path) -> set[str]:
    model = mujoco.MjModel.from_xml_path(str(source))
    return {model.body(b).name for b in range(1, model.nbody) if model.body_weldid[b] != 0}


@pytest.mark.parametrize("name", sorted(corpus_models()))
def test_mujoco_usd_decoder_loads_and_simulates_like_the_source(name, corpus, decoder):
    result, (source, usd) = decoder[name], corpus[name]
    assert result["moving_bodies"] == rigid_bodies(usd)
    assert moving_source_bodies(source) <= set(result["moving_bodies"])
    assert result["unmapped"] == []
    assert result["joints"] == sorted(set(result["source_joints"]) - set(result["ball_joints"]))
    assert result["free"][0] == result["free"][1]
    assert result["counts"][0] == result["counts"][1]  # actuators, tendons, equalities
    assert result["mass"] < MASS_TOLERANCE and result["limits"] < 1e-5
    assert result["timestep"][0] == pytest.approx(result["timestep"][1])
    assert result["rollout"] < POSITION_TOLERANCE, f"{result['worst']} off by {result['rollout']:.2e} m"


@pytest.mark.parametrize("name", sorted(corpus_models()))
def test_newton_loads_and_simulates_like_its_mjcf_import(name, corpus, newton):
    result, (source, usd) = newton[name], corpus[name]
    from_mjcf, from_usd = result["bodies"]
    # Newton's MJCF import also makes bodies of MuJoCo's world-welded scenery, which the USD keeps as
    # static colliders (docs/usd_layout.md); every moving body is in both (Newton labels bodies by their
    # sanitised names, as USD prims are named).
    stage = Usd.Stage.Open(str(usd))
    static = {p.GetName() for p in stage.GetDefaultPrim().GetChildren()
              if p.HasAttribute("usdforge:sourceName") and not p.HasAPI(UsdPhysics.RigidBodyAPI)}
    assert len(from_usd) == len(rigid_bodies(usd))
    assert set(from_usd) <= set(from_mjcf) and set(from_mjcf) - set(from_usd) <= static
    assert {usd_identifier(b) for b in moving_source_bodies(source)} <= set(from_usd)
    assert result["dofs"][0] == result["dofs"][1] and result["limited_joints"][0] == result["limited_joints"][1]
    assert result["mass"] < MASS_TOLERANCE and result["limits"] < 1e-5
    assert result["rollout"] < POSITION_TOLERANCE, f"{result['worst']} off by {result['rollout']:.2e} m"


OVERLAPPING_SCRIPT = """
    import json, sys, numpy as np, warp as wp
    wp.config.quiet = True
    import newton
    from newton.solvers import SolverMuJoCo
    source, usd = json.loads(sys.argv[1])["overlapping"]
    out = {}
    for kind in ("mjcf", "usd"):
        builder = newton.ModelBuilder()
        builder.add_mjcf(source) if kind == "mjcf" else builder.add_usd(usd)  # default settings
        model = builder.finalize(device="cpu")
        solver = SolverMuJoCo(model, use_mujoco_cpu=True)
        state, nxt, control = model.state(), model.state(), model.control()
        newton.eval_fk(model, model.joint_q, model.joint_qd, state)
        for _ in range(250):
            solver.step(state, nxt, control, None, 0.002)
            state, nxt = nxt, state
        out[kind] = {"bodies": sorted(label.split("/")[-1] for label in builder.body_label),
                     "joints": builder.joint_count, "dofs": builder.joint_dof_count,
                     "articulations": builder.articulation_count,
                     "finite": bool(np.isfinite(state.body_q.numpy()).all())}
    print(json.dumps(out))
"""


def test_newton_loads_welded_fixed_bases_with_default_settings(tmp_path):
    """Issue 17: the fixture with two welded fixed bases made Newton's add_usd fail (two articulations
    sharing bodies). With default settings it now loads: one articulation, a finite 0.5 s rollout, and the
    counts of add_mjcf, except the intermediate links (and their joints) of multi-hinge bodies, which the
    USD has and Newton's MJCF import does not (docs/usd_layout.md)."""
    from test_articulations import OVERLAPPING

    usd = converted(OVERLAPPING).usd_path
    result = run_engine("newton", OVERLAPPING_SCRIPT, {"overlapping": (OVERLAPPING, usd)}, tmp_path)
    mjcf, ours = result["mjcf"], result["usd"]
    assert ours["finite"] and mjcf["finite"]
    assert ours["articulations"] == mjcf["articulations"] == 1
    assert ours["dofs"] == mjcf["dofs"]
    model = mujoco.MjModel.from_xml_path(str(OVERLAPPING))
    intermediate = int(sum(max(int(n) - 1, 0) for n in model.body_jntnum))
    assert [b for b in ours["bodies"] if "__" not in b] == mjcf["bodies"]
    assert len(ours["bodies"]) == len(mjcf["bodies"]) + intermediate
    assert ours["joints"] == mjcf["joints"] + intermediate
