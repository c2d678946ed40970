"""``mujoco-roundtrip``: what MuJoCo's own USD decoder reads back from a USD converted from MJCF, compared
with MuJoCo's compiled model of the source.

In the decoder's environment (``rules.verify.engines``: ``mujoco[usd]==4.0.0``) the USD is decoded
(``MjSpec.from_file``) and compiled; its elements are matched to the source's by the prims'
``usdforge:sourceName``. Compared:

- counts: joints (free ones apart), DoFs, tendons, actuators, equality constraints, sensors, colliding
  geoms, moving bodies;
- every matched body's mass and principal inertia (relative 1e-5), every joint's limits (the source's
  range minus ``ref``: USD joint coordinates, docs/usd_layout.md), damping, armature and frictionloss
  (relative 1e-5: Newton's attributes are single precision), the colliders' margins and gaps, the time
  step and solver iterations;
- at ``configurations`` random configurations (within joint ranges): every tendon's length (1e-6 m) and
  every actuator's moment on every DoF (1e-6 relative);
- a short passive rollout (``ROLLOUT_SECONDS``, zero control): every matched body's position (1e-4 m).

Each difference is an error naming the element and the size of the difference. What MuJoCo 4.0's decoder
cannot read by design (``DECODER_LIMITS``) is handled as the decoder would: the reference drops it too, and
each such element is a warning naming the limit and the decoder's version. Deprecation warnings the decoder
prints while reading are errors (the writer must use the attributes it reads without them).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

from usdforge.rules.verify.engines import DECODER_ADAPTATION

#: The decoder this check runs (the ``mujoco-usd`` engine environment).
DECODER = "mujoco[usd]==4.0.0"
#: What that decoder cannot read, by design (its schema has no form for it): key → text of the warning.
DECODER_LIMITS = {
    "ball": f"{DECODER}'s decoder reads no spherical joints (it welds the bodies); the reference welds them too",
    "sensor": f"{DECODER}'s schema has no sensors (usdforge keeps them as mjcf: data)",
    "mocap": f"{DECODER}'s decoder reads no kinematic bodies (MuJoCo's mocap bodies): it makes them free "
             "bodies; the reference does too",
    "flex": f"{DECODER}'s schema has no flex (deformable) elements",
    "skin": f"{DECODER}'s schema has no skins",
    # Not the decoder's: MuJoCo cannot compile the source, so only decoding, compiling and a finite
    # rollout of the (repaired) conversion are checked.
    "uncompilable": "MuJoCo cannot compile the source (usdforge converted it repaired, with warnings); "
                    "nothing to compare the decoded model with",
}
ROLLOUT_SECONDS = 0.2
TENDON_TOLERANCE = 1e-6  # m (or rad for fixed tendons of hinges)
MOMENT_TOLERANCE = 1e-6  # relative to max(1, |moment|)
MASS_TOLERANCE = 1e-5  # relative
LIMIT_TOLERANCE = 1e-6  # rad or m
POSITION_TOLERANCE = 1e-4  # m, after the rollout

# Runs in the decoder's environment: argv = source, usd, configurations, seed, rollout seconds. Prints one
# JSON line: {"errors": [[element, message]], "limits": [[element, key]], "deprecations": [...], "summary"}.
SCRIPT = r'''
import copy, json, os, sys, tempfile, traceback
import numpy as np, mujoco
from pxr import Usd
''' + DECODER_ADAPTATION + r'''

def decode(path):
    """MjSpec.from_file with the decoder's stderr (USD's TF warnings) captured."""
    with tempfile.TemporaryFile(mode="w+b") as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            spec = mujoco.MjSpec.from_file(path)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        return spec, capture.read().decode("utf-8", "replace")

def rollout_causes(src, dec, contacts_src, contacts_dec):
    """What makes the decoded model move otherwise than the source, so that a rollout finding names its
    cause: simulation options that differ (the USD was written without the source's <option>:
    import_physics_scene=false) and contacts during the rollout (self_collision=false, or a floor dropped)."""
    causes = []
    if dec.opt.integrator != src.opt.integrator:
        causes.append(f"integrator {mujoco.mjtIntegrator(dec.opt.integrator).name} decoded, "
                      f"{mujoco.mjtIntegrator(src.opt.integrator).name} in the source")
    for label in ("timestep", "gravity", "density", "viscosity", "wind", "cone", "impratio"):
        mine, theirs = np.atleast_1d(getattr(dec.opt, label)), np.atleast_1d(getattr(src.opt, label))
        mine_f, theirs_f = np.asarray(mine, float), np.asarray(theirs, float)
        # relative 1e-6: USD keeps float32, so gravity -9.81 reads back as -9.8100004
        if float(np.max(np.abs(mine_f - theirs_f) / np.maximum(1.0, np.abs(theirs_f)))) > 1e-6:
            causes.append(f"{label} {np.asarray(mine).tolist()} decoded, {np.asarray(theirs).tolist()} in the source")
    if contacts_dec != contacts_src:
        causes.append(f"contacts: at most {contacts_dec} at once decoded, {contacts_src} in the source "
                      "(self-collision or a floor not written)")
    return causes


def compare(source, usd, configurations, seed, seconds, TENDON, MOMENT, MASS, LIMIT, POSITION):
    errors, limits = [], []
    J = mujoco.mjtJoint

    spec, printed = decode(adapt_for_decoder(usd)[0])  # a fixed base's root moved as the decoder needs
    deprecations = sorted({line.strip() for line in printed.splitlines() if "deprecat" in line.lower()})
    dec = spec.compile()

    try:
        full = mujoco.MjModel.from_xml_path(source)
    except Exception as exc:  # usdforge converted a repaired model (its warnings say what it left out)
        data = mujoco.MjData(dec)
        for _ in range(int(round(seconds / dec.opt.timestep))):
            mujoco.mj_step(dec, data)
        if not np.isfinite(data.qpos).all():
            errors.append(["rollout", f"the decoded model's {seconds} s passive rollout went non-finite"])
        for line in deprecations:
            errors.append(["decoder", f"deprecation warning while decoding: {line}"])
        reason = " ".join(str(exc).split())
        return {"errors": errors, "limits": [["source", "uncompilable"]], "deprecations": deprecations,
                          "uncompilable": reason, "summary": {"bodies": 0, "joints": 0, "dofs": int(dec.nv),
                          "tendons": int(dec.ntendon), "actuators": int(dec.nu), "configurations": 0, "tendon_error": 0.0,
                          "moment_error": 0.0, "switching": 0, "rollout_steps": 0, "rollout_error": 0.0,
                          "rollout_sensitivity": 0.0}}
    reference = mujoco.MjSpec.from_file(source)
    balls = [j for j in reference.joints if j.type == J.mjJNT_BALL]
    for j in balls:
        limits.append([f"joint '{j.name}'", "ball"])
    mocaps = [b for b in reference.bodies if b.mocap]
    for body in mocaps:  # the decoder makes a kinematic (mocap) body a free one: so does the reference
        limits.append([f"body '{body.name}'", "mocap"])
        body.mocap = False
        body.add_freejoint()
    for element in balls + (list(reference.keys) if balls or mocaps else []):
        reference.delete(element)
    src = reference.compile()
    O = mujoco.mjtObj
    for s in range(full.nsensor):
        limits.append([f"sensor '{full.sensor(s).name or s}'", "sensor"])
    for f in range(full.nflex):
        limits.append([f"flex '{mujoco.mj_id2name(full, O.mjOBJ_FLEX, f) or f}'", "flex"])
    for k in range(full.nskin):
        limits.append([f"skin '{mujoco.mj_id2name(full, O.mjOBJ_SKIN, k) or k}'", "skin"])

    stage = Usd.Stage.Open(usd)
    def source_name(path):
        prim = stage.GetPrimAtPath(path) if path.startswith("/") else None
        attribute = prim.GetAttribute("usdforge:sourceName") if prim else None
        return attribute.Get() if attribute and attribute.HasAuthoredValue() else None

    # usdforge's names for source elements (rules.mjcf.bodies and the authoring steps): unnamed ones generated.
    def body_name(m, b):
        return m.body(b).name or f"body{b}"
    def joint_name(m, j):
        body = int(m.jnt_bodyid[j])
        return m.joint(j).name or f"{body_name(m, body)}_joint{j - int(m.body_jntadr[body])}"
    names = {
        "body": {body_name(src, b): b for b in range(src.nbody)},
        "joint": {joint_name(src, j): j for j in range(src.njnt)},
        "tendon": {src.tendon(t).name or f"tendon{t}": t for t in range(src.ntendon)},
        "actuator": {src.actuator(a).name or f"actuator{a}": a for a in range(src.nu)},
    }

    def matched(kind, count, name_of):
        """decoded id -> source id, by the prim's usdforge:sourceName."""
        found = {}
        for d in range(count(dec)):
            s = names[kind].get(source_name(name_of(dec, d)) or "", -1)
            if s >= 0:
                found[d] = s
        return found

    bodies = matched("body", lambda m: m.nbody, lambda m, i: m.body(i).name)
    joints = matched("joint", lambda m: m.njnt, lambda m, i: m.joint(i).name)
    tendons = matched("tendon", lambda m: m.ntendon, lambda m, i: m.tendon(i).name)
    actuators = matched("actuator", lambda m: m.nu, lambda m, i: m.actuator(i).name)
    # Free joints have no prim: matched through their bodies.
    for d in range(dec.njnt):
        if dec.jnt_type[d] == J.mjJNT_FREE and int(dec.jnt_bodyid[d]) in bodies:
            s_body = bodies[int(dec.jnt_bodyid[d])]
            free_joints = [j for j in range(src.njnt) if src.jnt_bodyid[j] == s_body and src.jnt_type[j] == J.mjJNT_FREE]
            if free_joints:
                joints[d] = free_joints[0]

    def count(label, a, b):
        if a != b:
            errors.append([label, f"the source compiles {a}, the decoded USD {b} (difference {b - a:+d})"])

    free = lambda m: int((m.jnt_type == J.mjJNT_FREE).sum())
    count("joints", src.njnt - free(src), dec.njnt - free(dec))
    count("free joints", free(src), free(dec))
    count("DoFs", src.nv, dec.nv)
    count("tendons", src.ntendon, dec.ntendon)
    count("actuators", src.nu, dec.nu)
    flex_equalities = int((src.eq_type == mujoco.mjtEq.mjEQ_FLEX).sum()) if src.neq else 0
    count("equality constraints", src.neq - flex_equalities, dec.neq)  # a flex's own: part of the flex limit
    count("sensors", src.nsensor - full.nsensor, dec.nsensor)
    colliding = lambda m: int(((m.geom_contype != 0) | (m.geom_conaffinity != 0)).sum())
    count("colliding geoms", colliding(src), colliding(dec))
    moving = {body_name(src, b) for b in range(1, src.nbody) if src.body_weldid[b] != 0}
    decoded_moving = {body_name(src, s) for d, s in bodies.items() if dec.body_weldid[d] != 0}
    for name in sorted(moving - decoded_moving):
        errors.append([f"body '{name}'", "moves in the source but is not a moving body of the decoded USD"])

    for d, s in bodies.items():
        if src.body_weldid[s] == 0:
            continue
        name = f"body '{body_name(src, s)}'"
        m_src, m_dec = float(src.body_mass[s]), float(dec.body_mass[d])
        if m_src == 0.0 and m_dec <= 1e-3:
            continue  # a massless body gets a placeholder mass (docs/usd_layout.md: mass 0 is never authored)
        if abs(m_dec - m_src) > MASS * max(m_src, 1e-9):
            errors.append([name, f"mass {m_dec:.9g} kg decoded, {m_src:.9g} kg in the source (off by {m_dec - m_src:+.3g} kg)"])
        i_src, i_dec = np.sort(src.body_inertia[s]), np.sort(dec.body_inertia[d])
        worst = float(np.max(np.abs(i_dec - i_src) / np.maximum(i_src, 1e-12)))
        if worst > MASS and float(np.max(np.abs(i_dec - i_src))) > 1e-12:
            errors.append([name, f"principal inertia {i_dec.tolist()} decoded, {i_src.tolist()} in the source "
                                 f"(relative difference {worst:.3g})"])

    for d, s in joints.items():
        name = f"joint '{joint_name(src, s)}'"
        kind = int(src.jnt_type[s])
        if int(dec.jnt_type[d]) != kind:
            errors.append([name, f"type {int(dec.jnt_type[d])} decoded, {kind} in the source"])
            continue
        if kind not in (J.mjJNT_HINGE, J.mjJNT_SLIDE):
            continue
        if bool(dec.jnt_limited[d]) != bool(src.jnt_limited[s]):
            errors.append([name, f"limited={bool(dec.jnt_limited[d])} decoded, {bool(src.jnt_limited[s])} in the source"])
        elif src.jnt_limited[s]:
            want = src.jnt_range[s] - src.qpos0[src.jnt_qposadr[s]]
            off = float(np.max(np.abs(dec.jnt_range[d] - want)))
            if off > LIMIT:
                errors.append([name, f"range {dec.jnt_range[d].tolist()} decoded, {want.tolist()} expected (source "
                                     f"range minus ref; off by {off:.3g})"])

    for d, s in joints.items():
        name = f"joint '{joint_name(src, s)}'"
        a, b = int(dec.jnt_dofadr[d]), int(src.jnt_dofadr[s])
        for label, field in (("damping", "dof_damping"), ("armature", "dof_armature"), ("frictionloss", "dof_frictionloss")):
            mine, theirs = float(getattr(dec, field)[a]), float(getattr(src, field)[b])
            if abs(mine - theirs) > MASS * max(abs(theirs), 1e-9) and abs(mine - theirs) > 1e-12:
                errors.append([name, f"{label} {mine:.9g} decoded, {theirs:.9g} in the source"])
    for label, field in (("margin", "geom_margin"), ("gap", "geom_gap")):
        ours = np.sort(getattr(dec, field)[(dec.geom_contype != 0) | (dec.geom_conaffinity != 0)])
        theirs = np.sort(getattr(src, field)[(src.geom_contype != 0) | (src.geom_conaffinity != 0)])
        if len(ours) == len(theirs) and len(ours) and float(np.max(np.abs(ours - theirs))) > 1e-6:
            errors.append([f"colliding geoms' {label}", f"differ by up to {float(np.max(np.abs(ours - theirs))):.3g} m "
                           f"(decoded {ours.tolist()[:8]}, source {theirs.tolist()[:8]})"])
    for label, mine, theirs in (("time step", dec.opt.timestep, src.opt.timestep),
                                ("solver iterations", dec.opt.iterations, src.opt.iterations)):
        if abs(float(mine) - float(theirs)) > 1e-12:
            errors.append(["option", f"{label} {mine} decoded, {theirs} in the source"])

    # Random configurations: source qpos -> decoded qpos through the matched joints.
    def to_decoded(qpos_src):
        q = dec.qpos0.copy()
        for d, s in joints.items():
            a, b, kind = int(dec.jnt_qposadr[d]), int(src.jnt_qposadr[s]), int(src.jnt_type[s])
            if kind == J.mjJNT_FREE:
                q[a:a + 7] = qpos_src[b:b + 7]
            elif kind == J.mjJNT_BALL:
                q[a:a + 4] = qpos_src[b:b + 4]
            else:
                q[a] = qpos_src[b] - src.qpos0[b]
        return q

    dofs = {}  # decoded dof -> source dof
    for d, s in joints.items():
        width = {J.mjJNT_FREE: 6, J.mjJNT_BALL: 3}.get(int(src.jnt_type[s]), 1)
        for k in range(width):
            dofs[int(dec.jnt_dofadr[d]) + k] = int(src.jnt_dofadr[s]) + k

    def dense_moment(model, data):
        out = np.zeros((model.nu, model.nv))
        mujoco.mju_sparse2dense(out, data.actuator_moment, data.moment_rownnz, data.moment_rowadr, data.moment_colind)
        return out

    rng = np.random.default_rng(seed)
    ds, dd = mujoco.MjData(src), mujoco.MjData(dec)
    jittered = copy.deepcopy(src)
    for field in (jittered.site_pos, jittered.geom_pos, jittered.body_pos):
        field += rng.normal(scale=1e-9, size=field.shape)
    jittered_data = mujoco.MjData(jittered)
    worst_tendon, worst_moment, ambiguous = 0.0, 0.0, 0
    reported = set()
    for index in range(configurations):
        qpos = src.qpos0.copy()
        for j in range(src.njnt):
            a, kind = int(src.jnt_qposadr[j]), int(src.jnt_type[j])
            if kind == J.mjJNT_FREE:
                qpos[a:a + 3] = rng.uniform(-1, 1, 3)
                quat = rng.normal(size=4)
                qpos[a + 3:a + 7] = quat / np.linalg.norm(quat)
            elif kind == J.mjJNT_BALL:
                quat = rng.normal(size=4)
                qpos[a:a + 4] = quat / np.linalg.norm(quat)
            else:
                low, high = src.jnt_range[j] if src.jnt_limited[j] else (qpos[a] - 1.0, qpos[a] + 1.0)
                qpos[a] = rng.uniform(low, high)
        # Where a tendon's wrapping is ill-conditioned (its length jumps when sites, geoms and joints move by
        # 1e-9), the rounding of values in USD may pick the other side: that tendon is not compared there.
        jittered_data.qpos[:] = qpos + rng.normal(scale=1e-9, size=qpos.shape)
        mujoco.mj_kinematics(jittered, jittered_data)
        mujoco.mj_comPos(jittered, jittered_data)
        mujoco.mj_tendon(jittered, jittered_data)
        lengths = jittered_data.ten_length.copy()
        ds.qpos[:] = qpos
        dd.qpos[:] = to_decoded(qpos)
        mujoco.mj_forward(src, ds)
        mujoco.mj_forward(dec, dd)
        switching = {s for s in range(src.ntendon) if abs(lengths[s] - ds.ten_length[s]) > 1e-5}
        ambiguous += len(switching)
        for d, s in tendons.items():
            if s in switching:
                continue
            off = abs(float(dd.ten_length[d]) - float(ds.ten_length[s]))
            worst_tendon = max(worst_tendon, off)
            if off > TENDON and ("tendon", s) not in reported:
                reported.add(("tendon", s))
                errors.append([f"tendon '{src.tendon(s).name or s}'", f"length {dd.ten_length[d]:.9g} decoded, "
                               f"{ds.ten_length[s]:.9g} in the source at random configuration {index} (off by {off:.3g})"])
        if actuators and not switching:
            m_src, m_dec = dense_moment(src, ds), dense_moment(dec, dd)
            for d, s in actuators.items():
                mapped = np.zeros(src.nv)
                for dof_d, dof_s in dofs.items():
                    mapped[dof_s] = m_dec[d, dof_d]
                off = float(np.max(np.abs(mapped - m_src[s]) / np.maximum(1.0, np.abs(m_src[s])))) if src.nv else 0.0
                worst_moment = max(worst_moment, off)
                if off > MOMENT and ("actuator", s) not in reported:
                    reported.add(("actuator", s))
                    errors.append([f"actuator '{src.actuator(s).name or s}'", f"moment arms differ by up to {off:.3g} "
                                   f"at random configuration {index}"])

    # A short passive rollout from the rest pose, zero control. The jittered source shows how much the source
    # itself moves for 1e-9 changes (an ill-conditioned tendon wrap, a contact on an edge): the decoded model
    # may differ by up to ten times that.
    ds, dd, dj = mujoco.MjData(src), mujoco.MjData(dec), mujoco.MjData(jittered)
    steps = int(round(seconds / src.opt.timestep))
    contacts_src = contacts_dec = 0  # the most contacts at one step: self-collision or a floor kept or lost
    for _ in range(steps):
        mujoco.mj_step(src, ds)
        mujoco.mj_step(jittered, dj)
        contacts_src = max(contacts_src, int(ds.ncon))
    for _ in range(int(round(seconds / dec.opt.timestep))):
        mujoco.mj_step(dec, dd)
        contacts_dec = max(contacts_dec, int(dd.ncon))
    finite = bool(np.isfinite(dd.qpos).all())
    worst_position, worst_body = 0.0, ""
    sensitivity = float(np.max(np.abs(dj.xpos - ds.xpos))) if src.nbody > 1 else 0.0
    if not finite:
        errors.append(["rollout", f"the decoded model's {seconds} s passive rollout went non-finite"])
    else:
        for d, s in bodies.items():
            off = float(np.max(np.abs(dd.xpos[d] - ds.xpos[s])))
            if off > worst_position:
                worst_position, worst_body = off, body_name(src, s)
        if worst_position > max(POSITION, 10.0 * sensitivity):
            causes = rollout_causes(src, dec, contacts_src, contacts_dec)
            errors.append([f"body '{worst_body}'", f"after a {seconds} s passive rollout it is {worst_position:.3g} m "
                           "from where the source's is" + (f" (the decoded model differs in: {'; '.join(causes)})"
                                                           if causes else "")])
    for line in deprecations:
        errors.append(["decoder", f"deprecation warning while decoding: {line}"])
    return {"errors": errors, "limits": limits, "deprecations": deprecations, "summary": {
        "bodies": len(bodies), "joints": len(joints), "dofs": int(dec.nv), "tendons": int(dec.ntendon),
        "actuators": int(dec.nu), "configurations": configurations, "tendon_error": worst_tendon,
        "moment_error": worst_moment, "switching": ambiguous, "rollout_steps": steps, "rollout_error": worst_position, "rollout_sensitivity": sensitivity}}

# argv: a JSON list of [source, usd] pairs, then configurations, seed, rollout seconds and the tolerances.
pairs = json.loads(sys.argv[1])
numbers = [int(sys.argv[2]), int(sys.argv[3])] + [float(v) for v in sys.argv[4:10]]
results = {}
for source, usd in pairs:
    try:
        results[usd] = compare(source, usd, *numbers)
    except Exception as exc:
        results[usd] = {"failed": " ".join(str(exc).split()), "log": traceback.format_exc()}
print(json.dumps(results))
'''


def decode_and_compare_many(pairs: list[tuple[str | Path, str | Path]], build_dir: str | Path = "build", *,
                            configurations: int = 10, seed: int = 0, create: bool = False) -> dict[str, dict]:
    """Run the comparison (module docstring) for each (source, usd) pair in one process of the decoder's
    environment; usd path (resolved, as a string) → its answer, or ``{"failed": message}`` where the
    decoder or MuJoCo raised. Raises ``engines.EngineError`` when the environment is missing (unless
    ``create``)."""
    from usdforge.rules.verify.engines import run_in_engine

    resolved = [[str(Path(source).resolve()), str(Path(usd).resolve())] for source, usd in pairs]
    with tempfile.TemporaryDirectory(prefix="usdforge-roundtrip-") as folder:
        script = Path(folder) / "roundtrip_check.py"
        script.write_text(SCRIPT)
        return run_in_engine("mujoco-usd", script, json.dumps(resolved), str(configurations), str(seed),
                             str(ROLLOUT_SECONDS), str(TENDON_TOLERANCE), str(MOMENT_TOLERANCE),
                             str(MASS_TOLERANCE), str(LIMIT_TOLERANCE), str(POSITION_TOLERANCE),
                             build_dir=build_dir, cwd=Path(folder), create=create, timeout=900 + 60 * len(pairs))


def decode_and_compare(source: str | Path, usd_path: str | Path, build_dir: str | Path = "build", *,
                       configurations: int = 10, seed: int = 0, create: bool = False) -> dict:
    """``decode_and_compare_many`` for one pair; ``engines.EngineError`` when the decoder fails on it."""
    from usdforge.rules.verify.engines import EngineError

    found = decode_and_compare_many([(source, usd_path)], build_dir, configurations=configurations, seed=seed,
                                    create=create)
    result = next(iter(found.values()))
    if "failed" in result:
        raise EngineError(f"mujoco-usd failed:\n{result['failed']}", result.get("log", result["failed"]))
    return result


def roundtrip_check(source: str | Path, usd_path: str | Path, stage, build_dir: str | Path = "build",
                    configurations: int = 10):
    """The verify check ``mujoco-roundtrip`` (module docstring); skipped when the decoder's environment is
    not set up."""
    from usdforge.rules.verify.engines import EngineError, engine_python, failure_finding
    from usdforge.rules.verify.findings import CheckResult, Finding, skipped

    name = "mujoco-roundtrip"
    if engine_python("mujoco-usd", build_dir) is None:
        return skipped(name, f"skipped: mujoco-usd is not set up (no {Path(build_dir) / 'venv-mujoco-usd'}; "
                             "`python -m usdforge.rules.verify.engines mujoco-usd` makes it)")
    started = time.perf_counter()
    result = CheckResult(name)
    root = str(stage.GetDefaultPrim().GetPath())
    try:
        found = decode_and_compare(source, usd_path, build_dir, configurations=configurations)
    except (EngineError, subprocess.TimeoutExpired) as exc:
        result.add(failure_finding(name, root, "MuJoCo's decoder cannot read the asset back", exc, build_dir))
        result.seconds = time.perf_counter() - started
        return result
    for element, message in found["errors"]:
        result.add(Finding(name, root, f"{element}: {message}"))
    for element, key in found["limits"]:
        result.add(Finding(name, root, f"{element}: known decoder limit: {DECODER_LIMITS[key]}", "warning"))
    summary = found["summary"]
    result.detail = (f"{summary['bodies']} bodies, {summary['joints']} joints, {summary['tendons']} tendons, "
                     f"{summary['actuators']} actuators matched; at {summary['configurations']} configurations "
                     f"tendon lengths within {summary['tendon_error']:.2g}, moments within "
                     f"{summary['moment_error']:.2g}; {summary['rollout_steps']} passive steps within "
                     f"{summary['rollout_error']:.2g} m")
    result.seconds = time.perf_counter() - started
    return result
