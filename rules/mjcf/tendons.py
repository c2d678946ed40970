"""MuJoCo tendons → ``MjcTendon`` prims under ``/<robot>/Tendons`` (mujoco layer): no USD physics engine
models tendons, MuJoCo's USD decoder reads these.

A fixed tendon's path lists joints with their coefficients; its length is measured in USD joint
coordinates (MuJoCo's minus ``ref``), so its range and spring length are shifted by ``-Σ coef·ref``. A
spatial tendon's path lists sites and wrapping geoms, ``mjc:path:segments``/``divisors`` carry the
pulleys, ``mjc:sideSites`` the side sites of wrapping geoms with ``mjc:sideSites:indices`` one per path
element (-1 where it has none: a site, or a geom wrapped on either side). A relationship lists each prim
once, so a path visiting one twice (a pulley's shared site, a repeated site) also gets
``mjc:path:indices``, its order as indices into ``mjc:path``; a path that visits each once needs none.
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
        targets: list[Sdf.Path] = []  # each prim once (a relationship cannot repeat a target)
        indices: list[int] = []  # per wrap element (pulleys aside): its target's index in ``targets``
        coefs: list[float] = []
        segments: list[int] = []
        divisors: list[float] = [1.0]
        side_sites: list[Sdf.Path] = []
        side_indices: list[int] = []  # per wrap element: its side site's index in ``side_sites``, -1: none
        shift = 0.0
        missing = []
        for wrap in range(start, start + count):
            kind, obj, prm = int(model.wrap_type[wrap]), int(model.wrap_objid[wrap]), float(model.wrap_prm[wrap])
            if kind == WRAP_PULLEY:
                divisors.append(prm)
                continue
            side = -1
            if kind == WRAP_JOINT:
                target = usd.joint_path(obj)
            elif kind == WRAP_SITE:
                target = usd.site_paths.get(obj)
            else:
                found = colliders.get(obj) or []
                target = found[0] if found else visuals.get(obj)
                side_path = usd.site_paths.get(int(prm)) if int(prm) >= 0 else None
                if side_path is not None:
                    if side_path not in side_sites:
                        side_sites.append(side_path)
                    side = side_sites.index(side_path)
            if target is None:
                missing.append(f"{kind}:{obj}")
                continue
            if kind == WRAP_JOINT:
                coefs.append(prm)
                shift += prm * joint_ref(model, obj)
            if target not in targets:
                targets.append(target)
            indices.append(targets.index(target))
            segments.append(len(divisors) - 1)
            side_indices.append(side)
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
        if indices != list(range(len(targets))):  # a target visited twice: the order needs saying
            values["mjc:path:indices"] = indices
        if fixed:
            values["mjc:path:coef"] = coefs
        else:
            if len(divisors) > 1:
                values["mjc:path:segments"] = segments
                values["mjc:path:divisors"] = divisors
            if side_sites:
                relationship(prim, "mjc:sideSites", side_sites)
                values["mjc:sideSites:indices"] = side_indices
        set_all(prim, values)

