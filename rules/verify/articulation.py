"""``articulation_problems``: is every body in at most one articulation, and every articulated joint in
exactly one? What OpenUSD's reference physics parser (``UsdPhysics.UsdPhysicsLoadStageFromPrimRange``)
reports, checked because ``pxr.UsdValidation`` does not: two ``ArticulationRootAPI`` prims whose trees
meet (two fixed joints to the world in one rigid group, for instance) give two articulations that share
bodies, which Newton's ``add_usd`` refuses, and a joint that no articulation holds is one that reduced-
coordinate engines cannot simulate.

An *articulated joint* is an enabled joint without ``physics:excludeFromArticulation`` (loop closures are
excluded) that moves at least one rigid body. The parser lists a loop closure under the articulation
whose bodies it touches; that is not counted against it.
"""

from __future__ import annotations

from collections import Counter

from pxr import Sdf, Usd, UsdPhysics


def _parse(stage: Usd.Stage, root: Sdf.Path) -> dict:
    load = getattr(UsdPhysics, "UsdPhysicsLoadStageFromPrimRange", None) or UsdPhysics.LoadUsdPhysicsFromRange
    return load(stage, [root])


def articulation_problems(stage: Usd.Stage, root: Sdf.Path | str = "/") -> list[str]:
    """One line per problem (empty when the articulations are sound) for the physics at or below ``root``.

    Problems: a body in two or more articulations; an articulated joint in none (its bodies are in no
    articulation) or in two or more.
    """
    parsed = _parse(stage, Sdf.Path(str(root)))
    articulations = parsed.get(UsdPhysics.ObjectType.Articulation, ([], []))
    bodies: Counter[str] = Counter()
    joints: dict[str, list[str]] = {}
    for path, desc in zip(*articulations):
        for body in {str(b) for b in desc.articulatedBodies if not b.isEmpty}:
            bodies[body] += 1
        for joint in {str(j) for j in desc.articulatedJoints}:
            joints.setdefault(joint, []).append(str(path))
    problems = [f"body {body} is in {count} articulations" for body, count in sorted(bodies.items()) if count > 1]
    rigid = {str(p) for p in parsed.get(UsdPhysics.ObjectType.RigidBody, ([], []))[0]}
    for kind, (paths, descs) in parsed.items():
        if not paths or not hasattr(descs[0], "excludeFromArticulation"):
            continue  # not joints
        for path, desc in zip(paths, descs):
            if desc.excludeFromArticulation or not desc.jointEnabled:
                continue
            if not ({str(desc.body0), str(desc.body1)} & rigid):
                continue  # joins static prims only: nothing for an articulation to move
            holders = joints.get(str(path), [])
            if len(holders) != 1:
                where = "no articulation" if not holders else f"{len(holders)} articulations ({', '.join(holders)})"
                problems.append(f"articulated joint {path} is in {where}")
    return problems
