"""MuJoCo tendons → ``MjcTendon`` prims under ``/<robot>/Tendons`` (mujoco layer): no USD physics engine
models tendons, MuJoCo's USD decoder reads these.

A fixed tendon's path lists joints with their coefficients; its length is measured in USD joint
coordinates (MuJoCo's minus ``ref``), so its range and spring length are shifted by ``-Σ coef·ref``. A
spatial tendon's path lists sites and wrapping geoms, ``mjc:path:segments``/``divisors`` carry the
pulleys, ``mjc:sideSites`` the side sites of wrapping geoms.
"""

from __future__ import annotations

import mujoco
import numpy as np
from pxr import Sdf

from usdforge.rules.mjcf.bodies import joint_ref
from usdforge.rules.mjcf.contacts import collider_paths
from usdforge.rules.mjcf.usd import MjcfUsd, limited_token, relationship, set_all, set_custom
from usdforge.rules.usd.stage import unique_name

_WRAP = mujoco.mjtWrap
WRAP_JOINT, WRAP_PULLEY, WRAP_SITE = int(_WRAP.mjWRAP_JOINT), int(_WRAP.mjWRAP_PULLEY), int(_WRAP.mjWRAP_SITE)
WRAP_GEOMS = (int(_WRAP.mjWRAP_SPHERE), int(_WRAP.mjWRAP_CYLINDER))


def visual_paths(usd: MjcfUsd, merge_mesh: bool) -> dict[int, Sdf.Path]:
    """MuJoCo geom id → its visual shape prim, named as the shared writer names them (merged meshes
    have none)."""
    shape_paths: dict[tuple[str, str], Sdf.Path] = {}
    for link in usd.robot.links:
        taken: set[str] = set()
        scope = usd.ctx.link_paths[link.name].AppendChild("visuals")
        for shape in link.shapes:
            if shape.collision or (merge_mesh and shape.geometry.kind == "mesh"):
                continue
            shape_paths[(link.name, shape.name)] = scope.AppendChild(unique_name(shape.name, taken))
    return {geom: shape_paths[key] for geom, key in usd.geoms.visual.items() if key in shape_paths}


def author_tendons(usd: MjcfUsd, merge_mesh: bool) -> None:
    """One MjcTendon per tendon (see the module docstring); fills ``usd.tendon_paths``."""
    model = usd.loaded.model
    if model.ntendon == 0:
        return
    scope = usd.mujoco_scope("Tendons")
    colliders = collider_paths(usd)
    visuals = visual_paths(usd, merge_mesh)
    taken: set[str] = set()
    for tendon in range(model.ntendon):
        source = model.tendon(tendon).name or f"tendon{tendon}"
        path = scope.AppendChild(unique_name(source, taken))
        prim = usd.define("mujoco", path, "MjcTendon")
        usd.tendon_paths[tendon] = path
        set_custom(prim, "usdforge:sourceName", source)
        start, count = int(model.tendon_adr[tendon]), int(model.tendon_num[tendon])
        kinds = [int(model.wrap_type[w]) for w in range(start, start + count)]
        fixed = all(kind == WRAP_JOINT for kind in kinds)
        targets: list[Sdf.Path] = []
        coefs: list[float] = []
        segments: list[int] = []
        divisors: list[float] = [1.0]
        side_sites: list[Sdf.Path] = []
        side_indices: list[int] = []  # per wrapping geom
        shift = 0.0
        missing = []
        for wrap in range(start, start + count):
            kind, obj, prm = int(model.wrap_type[wrap]), int(model.wrap_objid[wrap]), float(model.wrap_prm[wrap])
            if kind == WRAP_PULLEY:
                divisors.append(prm)
                continue
            if kind == WRAP_JOINT:
                target = usd.joint_path(obj)
                coefs.append(prm)
                shift += prm * joint_ref(model, obj)
            elif kind == WRAP_SITE:
                target = usd.site_paths.get(obj)
            else:
                found = colliders.get(obj) or []
                target = found[0] if found else visuals.get(obj)
                side = int(prm)
                if side >= 0 and side in usd.site_paths:
                    if usd.site_paths[side] not in side_sites:
                        side_sites.append(usd.site_paths[side])
                    side_indices.append(side_sites.index(usd.site_paths[side]))
                else:
                    side_indices.append(-1)  # one entry per wrapping geom, -1: no side site
            if target is None:
                missing.append(f"{kind}:{obj}")
                continue
            targets.append(target)
            segments.append(len(divisors) - 1)
        if missing:
            usd.warnings.append(f"tendon '{source}' wraps elements without a USD prim ({', '.join(missing)})")
        relationship(prim, "mjc:path", targets)
        length_range = np.asarray(model.tendon_range[tendon], dtype=np.float64) - (shift if fixed else 0.0)
        spring = np.asarray(model.tendon_lengthspring[tendon], dtype=np.float64) - (shift if fixed else 0.0)
        values = {
            "mjc:type": "fixed" if fixed else "spatial",
            "mjc:group": int(model.tendon_group[tendon]),
            "mjc:limited": limited_token(model.tendon_limited[tendon]),
            "mjc:range:min": length_range[0], "mjc:range:max": length_range[1],
            "mjc:actuatorfrclimited": limited_token(model.tendon_actfrclimited[tendon]),
            "mjc:actuatorfrcrange:min": model.tendon_actfrcrange[tendon, 0],
            "mjc:actuatorfrcrange:max": model.tendon_actfrcrange[tendon, 1],
            "mjc:solreflimit": model.tendon_solref_lim[tendon], "mjc:solimplimit": model.tendon_solimp_lim[tendon],
            "mjc:solreffriction": model.tendon_solref_fri[tendon],
            "mjc:solimpfriction": model.tendon_solimp_fri[tendon],
            "mjc:margin": model.tendon_margin[tendon], "mjc:frictionloss": model.tendon_frictionloss[tendon],
            "mjc:width": model.tendon_width[tendon], "mjc:rgba": model.tendon_rgba[tendon],
            "mjc:springlength": spring, "mjc:stiffness": model.tendon_stiffness[tendon],
            "mjc:damping": model.tendon_damping[tendon], "mjc:armature": model.tendon_armature[tendon],
        }
        if fixed:
            values["mjc:path:coef"] = coefs
        else:
            if len(divisors) > 1:
                values["mjc:path:segments"] = segments
                values["mjc:path:divisors"] = divisors
            geoms = [i for i, kind in enumerate(k for k in kinds if k != WRAP_PULLEY) if kind in WRAP_GEOMS]
            indices = _side_site_indices(kinds, side_indices)
            if side_sites and all(indices[i] >= 0 for i in geoms):
                relationship(prim, "mjc:sideSites", side_sites)
                values["mjc:sideSites:indices"] = [max(i, 0) for i in indices]
            elif side_sites:
                usd.warnings.append(f"tendon '{source}': only some wrapping geoms have side sites, which "
                                    "MjcTendon cannot say; side sites left out")
        set_all(prim, values)


def _side_site_indices(kinds: list[int], geom_sides: list[int]) -> list[int]:
    """One side-site index per non-pulley wrap (-1 where none), from the geoms' own indices."""
    out, geoms = [], iter(geom_sides)
    for kind in kinds:
        if kind == WRAP_PULLEY:
            continue
        out.append(next(geoms) if kind in WRAP_GEOMS else -1)
    return out
