"""MJCF → USD: a MuJoCo model read by MuJoCo itself (``rules.mjcf.load``, or its cached slim form,
``rules.mjcf.slim``), then written by ``rules.mjcf.author`` (the format-neutral Robot, the shared writer and
the MuJoCo-only parts: actuators, tendons, equalities, contact rules, sites, keyframes, sensors, cameras,
lights, options).

The steps, in order: parse and compile (one ``ConversionError`` with MuJoCo's message when MuJoCo cannot
parse the model; element-by-element repairs with a warning when it cannot compile it) → ``link_density``
→ bodies and joints → geoms → drives → joint equalities → USD. Every recoverable problem, and a summary of
what a physics engine will not see, is a ``rules.conversion_warnings.ConversionWarning``.

This module loads no USD library: the authoring half is imported on a thread while MuJoCo compiles
(``compile_repaired``'s ``alongside``; the compile releases the GIL), so that a one-off conversion pays
for the two at once (pal_tiago: about 0.13 s of compile beside about 0.13 s of imports), and only while
no other thread loads a native library (``rules.native_loads``).
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from usdforge.rules.errors import names_the_asset
from usdforge.rules.mjcf.load import LoadedModel, compile_repaired
from usdforge.rules.mjcf.slim import slim_or_compiled
from usdforge.rules.native_loads import import_exclusively
from usdforge.schemas.mjcf_cfg import MjcfConverterCfg

#: The module that writes a loaded model (``write_model``), imported while the model compiles.
AUTHOR = "usdforge.rules.mjcf.author"


def set_link_density(spec: mujoco.MjSpec, density: float) -> bool:
    """Set ``density`` (kg/m³, when positive) on every geom of a body without an ``<inertial>`` whose geom
    has no mass of its own; whether any geom changed (the spec must then be compiled again)."""
    changed = False
    if density <= 0.0:
        return changed
    for body in spec.bodies:
        if body.explicitinertial:
            continue
        for geom in body.geoms:
            if np.isnan(geom.mass) or geom.mass < 0:
                geom.density = density
                changed = True
    return changed


def apply_link_density(loaded: LoadedModel, density: float) -> LoadedModel:
    """Recompile with ``density`` (kg/m³) for every geom of a body without an ``<inertial>`` whose geom
    has no mass of its own: MuJoCo then infers those bodies' mass properties at that density."""
    if not set_link_density(loaded.spec, density):
        return loaded
    repaired = compile_repaired(loaded.path, loaded.spec)
    repaired.warnings[:0] = loaded.warnings
    repaired.skipped[:0] = loaded.skipped
    repaired.unknown_mass |= loaded.unknown_mass
    repaired.trimesh_meshes.update(loaded.trimesh_meshes)
    repaired.texture_files, repaired.visual_meshes = loaded.texture_files, loaded.visual_meshes
    return repaired


def _import_author() -> None:
    import_exclusively(AUTHOR)


@names_the_asset
def convert(cfg: MjcfConverterCfg, out_dir: Path) -> list[Path]:
    """Convert ``cfg.asset_path`` into ``out_dir``; return the files written (the pipeline moves them into
    place atomically). Raises ConversionError, before writing anything, when MuJoCo cannot parse it."""
    loaded = slim_or_compiled(Path(cfg.asset_path), cfg.allowed_roots, cfg.link_density, alongside=_import_author)
    return import_exclusively(AUTHOR).write_model(cfg, out_dir, loaded)
