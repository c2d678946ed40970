"""An engine's load of the USD compared with the *source* (MuJoCo's compiled model of the MJCF, the URDF's
own tree), not with the USD: what an engine simulates must be what the source describes.

Compared, in what the simulation sees: moving rigid groups (bodies joined by fixed joints count once, as
MuJoCo's weld groups do; a group welded to the world is static and not counted; usdforge's intermediate
links of stacked joints are not counted), the total mass of the moving groups, DoFs, and joints by type
(revolute, prismatic, spherical, free, d6). Each difference is an error naming the engine, its version,
what differs and by how much.

Known engine limitations are findings of their own kind (severity ``limitation``, with the engine's
version): MuJoCo 4.0's USD decoder reads no spherical joints (it welds their bodies) and makes kinematic
(mocap) bodies free: its load is compared with the source so reduced (MuJoCo recompiles it), and the
reduction is the limitation's finding. Newton counts the DoFs of the joints that close loops (MJCF
``connect`` equalities, written as spherical joints excluded from the articulation): compared without
them, and their DoFs are the limitation's finding.

Source facts (``source_facts``): ``bodies`` (moving rigid groups), ``mass`` (kg, of those), ``dofs``,
``joints`` (type → count), ``static_bodies`` and ``static_mass`` (welded to the world in the source: no
rigid body in MuJoCo's simulation either), and for MJCF ``decoder``: the same for the source as MuJoCo
4.0's decoder can read it, with ``decoder_changes`` (what that reduction took away, for the finding).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

#: Metres: how far an engine's body may end a passive rollout from MuJoCo's of the source (or ten times what
#: jittering the source by 1e-9 m moves it, if more).
ROLLOUT_TOLERANCE = 1e-3
#: The joint types compared (fixed joints are not: they are what the rigid groups are made of).
JOINT_TYPES = ("revolute", "prismatic", "spherical", "free", "d6")


def _mjcf_facts(model) -> dict[str, Any]:
    import mujoco

    names = {int(mujoco.mjtJoint.mjJNT_HINGE): "revolute", int(mujoco.mjtJoint.mjJNT_SLIDE): "prismatic",
             int(mujoco.mjtJoint.mjJNT_BALL): "spherical", int(mujoco.mjtJoint.mjJNT_FREE): "free"}
    moving = [b for b in range(1, model.nbody) if model.body_weldid[b] != 0]
    static = [b for b in range(1, model.nbody) if model.body_weldid[b] == 0]
    return {"bodies": len({int(model.body_weldid[b]) for b in moving}),
            "mass": float(sum(model.body_mass[b] for b in moving)), "dofs": int(model.nv),
            "joints": dict(Counter(names[int(t)] for t in model.jnt_type)),
            "static_bodies": len(static), "static_mass": float(sum(model.body_mass[b] for b in static))}


def mjcf_source_facts(source: str | Path, fix_base: bool = False) -> dict[str, Any]:
    """What MuJoCo simulates of ``source`` (module docstring); ``fix_base``: free roots welded to the world,
    as usdforge's ``fix_base`` writes them. Raises what MuJoCo raises when it cannot compile the source."""
    import mujoco

    def spec_of():
        spec = mujoco.MjSpec.from_file(str(source))
        frees = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_FREE] if fix_base else []
        for joint in frees:
            spec.delete(joint)
        for key in list(spec.keys) if frees else []:  # their qpos no longer fit
            spec.delete(key)
        return spec

    compiled = spec_of().compile()
    facts = _mjcf_facts(compiled)
    facts.update(path=str(source), fix_base=fix_base, timestep=float(compiled.opt.timestep))
    # The decoder's reading: ball joints welded, mocap bodies free (as rules.verify.roundtrip's reference).
    spec = spec_of()
    balls = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_BALL]
    mocaps = [b for b in spec.bodies if b.mocap]
    changes = []
    if balls:
        changes.append(f"reads no spherical joints: the source's {len(balls)} ball joint(s) welded")
    if mocaps:
        changes.append(f"makes the source's {len(mocaps)} kinematic (mocap) body(ies) free")
    for body in mocaps:
        body.mocap = False
        body.add_freejoint()
    for element in balls + (list(spec.keys) if balls or mocaps else []):
        spec.delete(element)
    facts["decoder"] = _mjcf_facts(spec.compile()) if changes else dict(facts)
    facts["decoder_changes"] = changes
    return facts


def urdf_source_facts(source: str | Path, fix_base: bool = False) -> dict[str, Any]:
    """What the URDF describes (module docstring): links joined by fixed joints are one rigid group; a root
    link with no inertial, visual or collision is the world (``rules.urdf.tree``), as is every root with
    ``fix_base``; an unjointed root floats (6 DoFs, a free joint)."""
    from usdforge.rules.verify.urdf import _parse_urdf

    _, links, joints = _parse_urdf(Path(source))
    group = {name: name for name in links}

    def find(name: str) -> str:
        while group[name] != name:
            group[name] = group[group[name]]
            name = group[name]
        return name

    for joint in joints.values():
        if joint.kind == "fixed" and joint.parent in group and joint.child in group:
            group[find(joint.child)] = find(joint.parent)
    children = {joint.child for joint in joints.values()}
    roots = [name for name in links if name not in children]
    world = {find(name) for name in roots if links[name]["empty"] or fix_base}
    kinds = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic", "planar": "d6",
             "floating": "d6"}
    widths = {"revolute": 1, "continuous": 1, "prismatic": 1, "planar": 3, "floating": 6}
    types: Counter = Counter()
    dofs = 0
    for joint in joints.values():
        if joint.kind not in kinds:
            continue
        if joint.kind == "floating" and joint.parent in roots and links[joint.parent]["empty"]:
            if not fix_base:  # a floating world joint: a free root (rules.urdf.tree)
                types["free"] += 1
                dofs += 6
            else:
                world.add(find(joint.child))
            continue
        types[kinds[joint.kind]] += 1
        dofs += widths[joint.kind]
    for name in roots:
        if find(name) not in world:
            types["free"] += 1
            dofs += 6
    moving = [name for name in links if find(name) not in world]
    static = [name for name in links if find(name) in world]
    return {"bodies": len({find(name) for name in moving}), "mass": sum(links[n]["mass"] for n in moving),
            "dofs": dofs, "joints": dict(types), "static_bodies": len(static),
            "static_mass": sum(links[n]["mass"] for n in static), "decoder_changes": []}


def rollout_against_source(engine: str, version: str, found: dict[str, Any], source: dict[str, Any],
                           stage) -> tuple[list[tuple[str, str]], str]:
    """The engine's passive rollout (``found["positions"]``: prim path → world position after
    ``found["steps"]`` steps of the source's time step, zero control) against MuJoCo's of the MJCF source
    (its ``fix_base`` applied): each body's distance, matched by ``usdforge:sourceName``. The source is also
    rolled out with its positions jittered by 1e-9 m: a body may differ by ten times what that moves it,
    or ``ROLLOUT_TOLERANCE``. A larger distance is an error naming the engine, the body and the distance
    (measured: Newton 1.8 ends within 1e-7 m of MuJoCo on anymal_c and skydio_x2 converted with their
    scene; 3 cm off on franka converted without it, whose integrator and time step are then lost).
    Returns the findings and a summary for the check's detail."""
    import mujoco
    import numpy as np

    spec = mujoco.MjSpec.from_file(source["path"])
    frees = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_FREE] if source["fix_base"] else []
    for element in frees + (list(spec.keys) if frees else []):
        spec.delete(element)
    model = spec.compile()
    jittered = spec.compile()
    rng = np.random.default_rng(0)
    for field in (jittered.body_pos, jittered.geom_pos, jittered.site_pos):
        field += rng.normal(scale=1e-9, size=field.shape)
    data, shaken = mujoco.MjData(model), mujoco.MjData(jittered)
    for _ in range(int(found["steps"])):
        mujoco.mj_step(model, data)
        mujoco.mj_step(jittered, shaken)
    mujoco.mj_kinematics(model, data)  # mj_step leaves xpos at the pose before its last integration
    mujoco.mj_kinematics(jittered, shaken)
    sensitivity = float(np.max(np.abs(shaken.xpos - data.xpos))) if model.nbody > 1 else 0.0
    worst, body = 0.0, ""
    for label, position in found.get("positions", {}).items():
        prim = stage.GetPrimAtPath(label) if label.startswith("/") else None
        if not prim or prim.HasAttribute("usdforge:stackedJointsOf") or not prim.HasAttribute("usdforge:sourceName"):
            continue
        index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, prim.GetAttribute("usdforge:sourceName").Get())
        if index > 0:
            off = float(np.max(np.abs(np.asarray(position) - data.xpos[index])))
            if off > worst:
                worst, body = off, prim.GetAttribute("usdforge:sourceName").Get()
    tolerance = max(ROLLOUT_TOLERANCE, 10.0 * sensitivity)
    seconds = found["steps"] * model.opt.timestep
    findings = []
    if worst > tolerance:
        findings.append(("error", f"after a {seconds:g} s passive rollout (zero control) {engine} {version}'s "
                         f"body '{body}' is {worst:.3g} m from where MuJoCo puts the source's (tolerance "
                         f"{tolerance:.3g} m)"))
    return findings, f"rollout vs the source: within {worst:.2g} m"


def describe(facts: dict[str, Any]) -> str:
    """``source: 7 moving bodies, 6 DoFs, 4.3 kg (+1 welded to the world, 0.5 kg)`` for a check's detail."""
    text = f"source: {facts['bodies']} moving bodies, {facts['dofs']} DoFs, {facts['mass']:.4g} kg"
    if facts["static_bodies"]:
        text += f" (+{facts['static_bodies']} welded to the world, {facts['static_mass']:.4g} kg)"
    return text


def source_facts(kind: str, source: str | Path, cfg: dict[str, Any]) -> dict[str, Any] | None:
    """``mjcf_source_facts`` or ``urdf_source_facts`` with the cfg's ``fix_base``; None for meshes."""
    fix_base = bool(cfg.get("fix_base", False))
    if Path(source).suffix == ".xacro":
        raise ValueError("a xacro source: its URDF expansion is not kept to compare with")
    if kind == "mjcf":
        return mjcf_source_facts(source, fix_base)
    if kind == "urdf":
        return urdf_source_facts(source, fix_base)
    return None


def engine_facts(found: dict[str, Any], stage) -> dict[str, Any]:
    """The same facts from an engine script's answer (``rules.verify.engines``: ``joint_list`` rows
    [prim path, type, DoFs, parent body, child body], ``body_list`` rows [prim path, mass(, weld root)]):
    joints whose prim is excluded from the articulation (loop closures) apart, as ``loop_dofs``."""
    def attribute(path: str, name: str):
        prim = stage.GetPrimAtPath(path) if path.startswith("/") else None
        value = prim.GetAttribute(name) if prim else None
        return value.Get() if value and value.HasAuthoredValue() else None

    loops = [row for row in found["joint_list"] if attribute(row[0], "physics:excludeFromArticulation")]
    tree = [row for row in found["joint_list"] if row not in loops]
    bodies = found["body_list"]
    if bodies and len(bodies[0]) == 3:  # the engine's own weld groups (MuJoCo)
        roots = [row[2] for row in bodies]
    else:  # Newton: up the fixed joints of the tree to the first moving joint (its child) or the world
        joint_of = {row[4]: row for row in tree}
        roots = []
        for body in range(len(bodies)):
            current = body
            while current >= 0 and current in joint_of and joint_of[current][1] == "fixed":
                current = joint_of[current][3]
            roots.append(None if current < 0 else bodies[current][0])
    moving = [b for b, root in enumerate(roots) if root is not None]
    groups = {roots[b] for b in moving if attribute(roots[b], "usdforge:stackedJointsOf") is None}
    types = Counter(row[1] for row in tree if row[1] in JOINT_TYPES)
    return {"bodies": len(groups), "mass": float(sum(bodies[b][1] for b in moving)),
            "dofs": int(sum(row[2] for row in tree)), "joints": dict(types),
            "loop_dofs": int(sum(row[2] for row in loops)), "loops": len(loops)}


def compare_with_source(engine: str, version: str, found: dict[str, Any], source: dict[str, Any], kind: str,
                        stage) -> list[tuple[str, str]]:
    """(severity, message) for each difference between the engine's load and the source (module
    docstring); ``kind``: ``mjcf`` or ``urdf``."""
    label = f"{engine} {version}"
    theirs = engine_facts(found, stage)
    ours = source
    out: list[tuple[str, str]] = []
    if engine == "mujoco-usd" and source.get("decoder_changes"):
        ours = source["decoder"]
        out.append(("limitation", f"known limitation of {label}'s USD decoder: it "
                    f"{'; it '.join(source['decoder_changes'])}: the source's {source['dofs']} DoFs and "
                    f"{source['bodies']} moving bodies read as {ours['dofs']} and {ours['bodies']}; compared with "
                    "the source so reduced"))
    if theirs["loop_dofs"]:
        out.append(("limitation", f"known limitation of {label}: it counts {theirs['loop_dofs']} DoFs for the "
                    f"{theirs['loops']} joint(s) that close loops (the source's equality constraints, excluded "
                    "from the articulation); compared without them"))
    if theirs["dofs"] != ours["dofs"]:
        out.append(("error", f"{label} loads {theirs['dofs']} DoFs, the source has {ours['dofs']} "
                    f"({theirs['dofs'] - ours['dofs']:+d})"))
    if theirs["bodies"] != ours["bodies"]:
        out.append(("error", f"{label} loads {theirs['bodies']} moving bodies (rigid groups), the source has "
                    f"{ours['bodies']} ({theirs['bodies'] - ours['bodies']:+d})"))
    off = theirs["mass"] - ours["mass"]
    tolerance = 1e-5 * max(1.0, ours["mass"]) + 1e-6 * max(1, theirs["bodies"])
    # A URDF link without mass gets one from its shapes or a placeholder (a conversion warning says so):
    # only less mass than the URDF's is a loss there.
    if off < -tolerance or (off > tolerance and kind == "mjcf"):
        out.append(("error", f"{label} loads {theirs['mass']:.6g} kg of moving bodies, the source has "
                    f"{ours['mass']:.6g} kg ({off:+.3g} kg)"))
    differ = {t: (theirs["joints"].get(t, 0), ours["joints"].get(t, 0)) for t in JOINT_TYPES
              if theirs["joints"].get(t, 0) != ours["joints"].get(t, 0)}
    if differ:
        out.append(("error", f"{label} loads joints of other types than the source's: " + ", ".join(
            f"{t} {a} (source {b})" for t, (a, b) in differ.items())))
    return out
