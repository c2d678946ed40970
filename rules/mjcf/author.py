"""MJCF → USD, the authoring half: a loaded MuJoCo model (``rules.mjcf.load``, ``rules.mjcf.slim``) turned into
the format-neutral Robot (bodies and joints, geoms, drives, mimic couplings) and written by the shared
``rules.robot.writer``; the MuJoCo-only parts (actuators, tendons, equalities, contact rules, sites,
keyframes, sensors, cameras, lights, options) are authored into the same layers through its
``author_extra`` hook.

A module of its own, apart from ``rules.mjcf.convert``, because it loads the USD libraries (pxr, about
0.1 s): ``convert`` imports it on a thread while MuJoCo compiles the model, which releases the GIL.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
from pxr import Sdf

from usdforge.rules.conversion_warnings import note, warn
from usdforge.rules.errors import ConversionError
from usdforge.rules.mjcf.actuators import GAIN_BIAS, TRN_JOINT, actuator_patches, apply_drives, author_actuators
from usdforge.rules.mjcf.bodies import read_bodies
from usdforge.rules.mjcf.contacts import author_contacts, collider_paths
from usdforge.rules.mjcf.dynamics import author_body_dynamics, author_joint_dynamics
from usdforge.rules.mjcf.equality import author_joint_equalities, author_loop_closures, joint_mimics
from usdforge.rules.mjcf.geoms import read_geoms
from usdforge.rules.mjcf.load import LoadedModel
from usdforge.rules.mjcf.lost import author_plugin_data, lost_elements
from usdforge.rules.mjcf.records import HINGE, SLIDE, author_records, author_sites, usd_qpos
from usdforge.rules.mjcf.scene import author_scene
from usdforge.rules.mjcf.self_collision import supply_self_collision_layers
from usdforge.rules.mjcf.slim import empty_model
from usdforge.rules.mjcf.tendons import author_tendons
from usdforge.rules.mjcf.usd import MjcfUsd
from usdforge.rules.outputs import resolve_usd_file_name
from usdforge.rules.robot.drive_patch import DRIVE_API, Patches, is_drive_attribute, joint_drives
from usdforge.rules.robot.layer_fields import view
from usdforge.rules.robot.model import Robot
from usdforge.schemas.units import radians_to_degrees
from usdforge.rules.robot.isaaclab_cfg import saved_layers_held, write_articulation_cfg
from usdforge.rules.robot.meshes import MeshLibrary
from usdforge.rules.robot.writer import RobotUsdContext, RobotUsdOptions, unit_options, write_robot
from usdforge.schemas.mjcf_cfg import MjcfConverterCfg


def unseen_by_engines(model: mujoco.MjModel) -> tuple[list[str], list[str]]:
    """What the USD keeps in MuJoCo's own terms only: (what changes the dynamics, which engines reading
    UsdPhysics will not simulate: tendons, actuators not on a joint; what does not: sensors, keyframes,
    cameras, lights)."""
    parts = []
    if model.ntendon:
        parts.append(f"{model.ntendon} tendon(s)")
    indirect = sum(1 for a in range(model.nu) if int(model.actuator_trntype[a]) != TRN_JOINT)
    if indirect:
        parts.append(f"{indirect} actuator(s) acting through tendons, sites or bodies")
    dynamics, parts = parts, []
    if model.nsensor:
        parts.append(f"{model.nsensor} sensor(s)")
    if model.nkey:
        parts.append(f"{model.nkey} keyframe(s)")
    if model.ncam:
        parts.append(f"{model.ncam} camera(s)")
    if model.nlight:
        parts.append(f"{model.nlight} light(s)")
    return dynamics, parts


def unwritten_options(model: mujoco.MjModel) -> list[str]:
    """The model's ``<option>`` values that change the simulation and differ from MuJoCo's defaults
    (time step, gravity, integrator, the medium's density, viscosity and wind), as ``name value`` texts:
    without ``import_physics_scene`` no scene carries them and engines use their own."""
    default = empty_model().opt
    ours = model.opt
    out = []
    for field in ("timestep", "gravity", "density", "viscosity", "wind"):
        mine, theirs = np.atleast_1d(getattr(ours, field)), np.atleast_1d(getattr(default, field))
        if not np.allclose(mine, theirs, rtol=0.0, atol=1e-12):
            value = " ".join(f"{v:g}" for v in mine)
            out.append(f"{field} {value}")
    if int(ours.integrator) != int(default.integrator):
        out.append(f"integrator {mujoco.mjtIntegrator(int(ours.integrator)).name}")
    return out


def _keyframe(model: mujoco.MjModel, cfg: MjcfConverterCfg, asset: Path) -> int | None:
    """The id of the keyframe ``cfg.articulation_cfg_keyframe`` names (None when it names none);
    ConversionError, before anything is written, when the model has no such keyframe."""
    name = cfg.articulation_cfg_keyframe
    if name is None or not cfg.articulation_cfg:
        return None
    names = [model.key(k).name for k in range(model.nkey)]
    if name not in names:
        raise ConversionError(asset, f"articulation_cfg_keyframe '{name}' is not a keyframe of the model "
                                     f"(it has {', '.join(repr(n) for n in names if n) or 'none'})")
    return names.index(name)


def _drive_patches(robot: Robot, model: mujoco.MjModel, targets: dict[str, float], cfg: Any) -> Patches:
    """What the ``override_*`` fields decide in the layers (``rules.robot.drive_patch``): the physics layer's
    drives with their target positions (``author_joint_dynamics``), the mujoco layer's actuator gains and
    biases (``author_actuators``; ``cfg``: the mujoco layer's view)."""
    def target(joint, axis: str) -> list:
        if joint.name not in targets:
            return []
        value = targets[joint.name]
        return [(f"drive:{axis}:physics:targetPosition", Sdf.ValueTypeNames.Float,
                 float(radians_to_degrees(value) if axis == "angular" else value), False)]

    def patches(role: str, root: Sdf.Path, joint_paths: dict[str, Sdf.Path]):
        if role == "physics":
            return joint_drives(robot, joint_paths, target), is_drive_attribute, DRIVE_API
        if role == "mujoco":
            return actuator_patches(model, root, cfg), lambda name: name in GAIN_BIAS, ""
        return None

    return patches


@contextlib.contextmanager
def _scratch_folder() -> Iterator[Callable[[], Path]]:
    """Within the block, a function giving a private temporary folder, made on its first call and removed
    when the block ends: most models render no builtin texture, and making and removing a folder costs a
    cfg-only rebuild about 0.3 ms (more when the disk is busy)."""
    made: list[Path] = []

    def folder() -> Path:
        if not made:
            made.append(Path(tempfile.mkdtemp(prefix="usdforge_mjcf_")))
        return made[0]

    try:
        yield folder
    finally:
        if made:
            shutil.rmtree(made[0], ignore_errors=True)


def write_model(cfg: MjcfConverterCfg, out_dir: Path, loaded: LoadedModel) -> list[Path]:
    """Write the USD asset of the loaded model ``loaded`` of ``cfg.asset_path`` into ``out_dir``; return the
    files written. Raises ConversionError, before writing anything, for a keyframe the model lacks."""
    asset = Path(cfg.asset_path)
    model = loaded.model
    name = loaded.spec.modelname or asset.stem
    robot, bodies = read_bodies(loaded, name, fix_base=cfg.fix_base)
    keyframe = _keyframe(model, cfg, asset)
    with _scratch_folder() as scratch:
        # Builtin textures are rendered to PNGs here; the writer copies each into textures/.
        meshes = MeshLibrary()
        geoms = read_geoms(loaded, robot, bodies, scratch, meshes, cfg.collision_from_visuals)
        # Each step below reads the cfg through the view of the layer it writes (rules.robot.layer_fields):
        # a field the layer does not declare raises UndeclaredField, so its reuse key cannot miss one.
        physics_cfg, mujoco_cfg = view(cfg, "mjcf", "physics"), view(cfg, "mjcf", "mujoco")
        targets = apply_drives(robot, loaded, bodies, physics_cfg)
        messages = list(loaded.warnings) + joint_mimics(robot, loaded, bodies) + lost_elements(model)
        usd_file_name = cfg.usd_file_name or resolve_usd_file_name(cfg.asset_path, None)
        options = RobotUsdOptions.from_cfg(cfg)

        joint_prims: dict[str, str] = {}

        def author_mujoco(ctx: RobotUsdContext) -> None:
            joint_prims.update({name: path.name for name, path in ctx.joint_paths.items()})
            usd = MjcfUsd(loaded, robot, bodies, geoms, ctx)
            author_sites(usd)
            author_tendons(usd, mujoco_cfg.merge_mesh)
            author_actuators(usd, mujoco_cfg)
            author_records(usd)
            author_joint_dynamics(usd, targets)
            author_body_dynamics(usd)
            author_contacts(usd, physics_cfg.self_collision)
            author_plugin_data(usd, collider_paths(usd), usd.actuator_paths)
            author_loop_closures(usd)
            author_joint_equalities(usd)
            if physics_cfg.import_physics_scene:
                author_scene(usd)
            messages.extend(usd.warnings)

        # A self_collision edit: the physics layer patched from the cache, when it can be (physx: the writer).
        supply_self_collision_layers(loaded, robot, bodies, geoms, physics_cfg.self_collision)
        with saved_layers_held(cfg.articulation_cfg):
            written = write_robot(robot, Path(out_dir), usd_file_name, options, meshes,
                                  author_extra=author_mujoco, views=unit_options(cfg, "mjcf"),
                                  patches=_drive_patches(robot, model, targets, mujoco_cfg))
            if cfg.articulation_cfg:
                pose = None
                if keyframe is not None:  # the keyframe's hinge and slide positions, in USD joint coordinates
                    qpos = usd_qpos(model, model.key_qpos[keyframe])
                    pose = {joint_prims[bodies.joint_of_jnt[j]]: float(qpos[model.jnt_qposadr[j]])
                            for j in range(model.njnt) if int(model.jnt_type[j]) in (HINGE, SLIDE)
                            and bodies.joint_of_jnt.get(j) in joint_prims}
                written.append(write_articulation_cfg(Path(out_dir) / usd_file_name, pose))
    for message in messages:
        warn(asset, message)
    dynamics, kept = unseen_by_engines(model)
    unwritten = unwritten_options(model) if not cfg.import_physics_scene else []
    if unwritten:  # a warning: each of these changes how the model moves
        warn(asset, f"the model's <option> {', '.join(unwritten)} is not written (import_physics_scene is false): "
                    "engines simulate with their own; import_physics_scene = true writes it")
    if dynamics:
        warn(asset, "kept as MuJoCo data (mjc:/mjcf: attributes) that physics engines reading UsdPhysics will "
                    "not simulate: " + ", ".join(dynamics))
    if kept:  # a note (rules.conversion_warnings): no effect on the dynamics
        note(asset, "kept as MuJoCo data (mjcf: attributes, cameras and lights as USD prims), no effect on the "
                    "dynamics: " + ", ".join(kept))
    return written
