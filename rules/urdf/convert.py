"""URDF → USD: ``UrdfConverterCfg`` applied to the robot ``rules.urdf.read`` reads, written by the shared
``rules.robot.writer`` writer (docs/usd_layout.md).

The steps, in order: a xacro source expanded (``rules.urdf.xacro``) → read (every element; recoverable
problems are ``ConversionWarning``s naming file, line and element; unrecoverable ones ``ConversionError``s
before anything is written) → inertias that break the triangle inequality balanced (``balance_inertia``)
→ colliders copied
from visuals (``collision_from_visuals``) → cylinders to capsules → mimic couplings dropped
(``convert_mimic_joints_to_normal_joints``) → fixed joints merged (``merge_fixed_joints``; ghost links on
fixed joints always become frames) → base and articulation root → masses for massless links
(``link_density``, else a placeholder) → drives (``joint_drive``) → USD.
"""

from __future__ import annotations

import os
from pathlib import Path

from usdforge.rules.build_scope import within_build
from usdforge.rules.conversion_warnings import note, warn
from usdforge.rules.errors import ConversionError, MissingFiles
from usdforge.rules.errors import names_the_asset
from usdforge.rules.files import check_references, describe_element, model_roots, quote
from usdforge.rules.outputs import resolve_usd_file_name
from usdforge.rules.robot.inertia import balance_inertia, resolve_massless
from usdforge.rules.robot.intermediate import cached_read
from usdforge.rules.robot.isaaclab_cfg import saved_layers_held, write_articulation_cfg
from usdforge.rules.robot.meshes import MeshLibrary
from usdforge.rules.robot.merge import merge_fixed_joints, owner_of
from usdforge.rules.robot.model import Geometry, Link, Robot, Shape
from usdforge.rules.robot.writer import RobotUsdOptions, unit_options, write_robot
from usdforge.rules.robot.drive_patch import urdf_patches
from usdforge.rules.urdf.drives import apply_joint_drives
from usdforge.rules.urdf.read import read_urdf
from usdforge.rules.urdf.paths import UnresolvedUri, resolve_uri
from usdforge.rules.urdf.references import FILE_ELEMENTS, urdf_file_references
from usdforge.rules.urdf.xml import load_urdf_xml
from usdforge.rules.urdf.xacro import expand_xacro, is_xacro
from usdforge.schemas.urdf_cfg import UrdfConverterCfg


#: Links named one by one in a repeated warning; more are summarised in one line.
MAX_REPEATED_WARNINGS = 5


def packages_of(cfg: UrdfConverterCfg) -> dict[str, str]:
    """ROS package name → folder, from ``cfg.ros_package_paths``."""
    return {entry["name"]: entry["path"] for entry in cfg.ros_package_paths}


def expanded_xacro(cfg: UrdfConverterCfg) -> bytes | None:
    """The URDF ``cfg.asset_path`` expands to when it is a xacro (``rules.urdf.xacro``), else None."""
    if not is_xacro(cfg.asset_path):
        return None
    expansion = expand_xacro(cfg.asset_path, packages_of(cfg), cfg.xacro_args, tree_root=cfg.tree_root,
                             env=cfg.xacro_env, allowed=tuple(cfg.allowed_roots))
    for message in expansion.warnings:
        warn(cfg.asset_path, message, "xacro")
    for unused in expansion.unused:
        name = unused.split()[-1]
        warn(cfg.asset_path, f"{unused}: the expansion never reads {name} (a misspelt name?); it changes nothing",
             "xacro")
    return expansion.urdf


def robot_from_urdf(cfg: UrdfConverterCfg, meshes: MeshLibrary | None = None) -> Robot:
    """The Robot ``cfg`` describes, every cfg rule applied, ready to write. The robot as read (before the
    rules) is the build cache's intermediate inside a ``rules.robot.intermediate.intermediate_scope``."""
    meshes = meshes or MeshLibrary()
    robot = cached_read(lambda: read_source(cfg, meshes))
    return apply_cfg(robot, cfg, meshes)


def read_source(cfg: UrdfConverterCfg, meshes: MeshLibrary) -> Robot:
    """The robot as read from ``cfg``'s source, before any cfg rule: it depends on the source, the files
    it references and ``rules.robot.layer_fields.READ_FIELDS["urdf"]`` only."""
    asset = Path(cfg.asset_path)
    expanded = expanded_xacro(cfg)
    loaded = load_urdf_xml(asset, expanded)  # parsed once: checked, then read
    missing = check_urdf_files(asset, packages_of(cfg), cfg.allowed_roots, expanded, cfg.tree_root, loaded[0])
    if missing and not cfg.allow_missing_files:
        raise MissingFiles(missing)
    if missing:
        warn(asset, f"{len(missing)} referenced file(s) missing; converted without them (allow_missing_files; "
                    "the conversion record lists each)")
    return read_urdf(asset, packages_of(cfg), meshes, expanded, cfg.tree_root, missing_noted=bool(missing),
                     allowed=tuple(cfg.allowed_roots), loaded=loaded)


def apply_cfg(robot: Robot, cfg: UrdfConverterCfg, meshes: MeshLibrary) -> Robot:
    """``robot`` (as read; changed in place) with the model rules of ``cfg`` applied, ready to write."""
    asset = Path(cfg.asset_path)
    if cfg.balance_inertia:
        for link in robot.links:
            if link.inertial is not None:
                link.inertial = balance_inertia(link.inertial)
    if cfg.collision_from_visuals:
        for link in robot.links:
            if not any(shape.collision for shape in link.shapes):
                link.shapes += [_as_collider(shape) for shape in link.shapes]
    if cfg.replace_cylinders_with_capsules:
        for link in robot.links:
            for shape in link.shapes:
                if shape.collision and shape.geometry.kind == "cylinder":
                    g = shape.geometry
                    shape.geometry = Geometry("capsule", radius=g.radius, length=g.length)
    if cfg.convert_mimic_joints_to_normal_joints:
        for joint in robot.joints:
            if joint.mimic is not None:
                # The source's coupling stays readable; no engine couples the joints any more.
                joint.custom.update({"urdf:mimic:joint": joint.mimic.joint, "urdf:mimic:multiplier":
                                     joint.mimic.multiplier, "urdf:mimic:offset": joint.mimic.offset})
                joint.mimic = None
    links = {link.name: link for link in robot.links}
    merge_fixed_joints(robot, (lambda joint: True) if cfg.merge_fixed_joints
                       else (lambda joint: _is_ghost(links[joint.child])))
    robot.fixed_base = cfg.fix_base
    if cfg.root_link_name is not None:
        body = owner_of(robot, cfg.root_link_name)
        if body is None:
            raise ConversionError(asset, f"root_link_name '{cfg.root_link_name}' is not a link of the robot "
                                         "(or is its world link)")
        robot.articulation_root = body
    massless: dict[str, list[str]] = {}
    resolve_massless(robot, cfg.link_density, meshes,
                     lambda link, message: massless.setdefault(message, []).append(link.name))
    for message, names in massless.items():
        if len(names) <= MAX_REPEATED_WARNINGS:
            for name in names:
                warn(asset, message, f"<link name=\"{name}\">")
        else:  # one line for a 3000-link chain, not 3000
            shown = ", ".join(names[:MAX_REPEATED_WARNINGS])
            warn(asset, f"{len(names)} links: {message} ({shown}, …)")
    apply_joint_drives(robot, cfg.joint_drive, asset)
    return robot


def check_urdf_files(asset: Path, packages: dict[str, str], allowed_roots: tuple[str, ...],
                     expanded: bytes | None = None, tree_root: str | None = None, root=None,
                     ) -> list[tuple[Path, str, str, int | None]]:
    """ConversionError, naming the element, for a file the URDF references that lies outside its folder,
    its package roots and ``allowed_roots``, that is not a regular file of bounded size, or a texture that
    is not an image (``rules.files``): nothing else reads a file before this check. root: the URDF's root
    element as ``load_urdf_xml`` parsed it (None: parsed here).

    Returns the missing files, each as (file, problem, element, line) for a located line; notes how each
    ROS package resolved (``rules.urdf.paths``: the folder and the rule)."""
    if root is None:
        root, _ = load_urdf_xml(asset, expanded)  # a xacro: the URDF it expanded to
    references, package_roots, resolutions = urdf_file_references(asset, root, packages, tree_root,
                                                                  tuple(allowed_roots))
    check_references(references, model_roots(asset, [*package_roots, *allowed_roots]))
    by_package: dict[tuple[str, str, str], int] = {}
    for uri, resolution in resolutions.items():
        if resolution.path.is_file():
            name = uri[len("package://"):].lstrip("/").partition("/")[0]
            key = (name, str(resolution.root), resolution.rule)
            by_package[key] = by_package.get(key, 0) + 1
    for (name, folder, rule), count in by_package.items():
        # Named relative to the source's folder: the record (and a cache restore of it in another checkout or
        # on another machine) never holds where the build ran.
        where = Path(os.path.relpath(folder, Path(asset).absolute().parent)).as_posix()
        note(asset, f"package '{name}' resolved to {where} ({_RULES[rule]}; {count} file(s))")
    return missing_files(asset, root, packages, tree_root, tuple(allowed_roots))


#: How each package rule of ``rules.urdf.paths`` reads in a note.
_RULES = {"explicit": "given explicitly", "folder": "the folder of that name (or package.xml) in the model's tree",
          "walk-up": "the model's folder or an ancestor holding the named files",
          "three-slash": "a package:/// URI, found from the model's folder up"}


def missing_files(asset: Path, root, packages: dict[str, str], tree_root: str | None = None,
                  allowed: tuple[str, ...] = ()) -> list[tuple[Path, str, str, int | None]]:
    """(file, problem, element, line) of every mesh or texture the URDF ``root`` names that is not a
    file: not there, or a ``package://`` URI whose package cannot be found."""
    found = []
    for xpath, attribute in FILE_ELEMENTS:
        for element in root.iterfind(xpath):
            uri = (element.get(attribute) or "").strip()
            if not uri:
                continue  # no file named: the reader warns
            what = "mesh" if element.tag == "mesh" else "texture"
            try:
                path = resolve_uri(uri, asset.parent, packages, tree_root, allowed)
            except UnresolvedUri as exc:
                found.append((asset, f"{what} '{quote(uri)}' is missing: {exc}", describe_element(element),
                              element.sourceline))
                continue
            if not path.is_file():
                found.append((asset, f"{what} file {quote(str(path))} not found", describe_element(element),
                              element.sourceline))
    return sorted(found, key=lambda item: item[3] or 0)


@names_the_asset
def convert(cfg: UrdfConverterCfg, out_dir: Path) -> list[Path]:
    """Convert ``cfg.asset_path`` into ``out_dir``; return the files written (the pipeline moves them into
    place atomically). Raises ConversionError on bad input, before writing anything."""
    with within_build():  # each package URI resolved and each mesh scanned once (rules.build_scope)
        meshes = MeshLibrary()
        robot = robot_from_urdf(cfg, meshes)
    usd_file_name = cfg.usd_file_name or resolve_usd_file_name(cfg.asset_path, None)
    options = RobotUsdOptions.from_cfg(cfg)
    with saved_layers_held(cfg.articulation_cfg):
        written = write_robot(robot, Path(out_dir), usd_file_name, options, meshes, views=unit_options(cfg, "urdf"),
                              patches=urdf_patches(robot))
        if cfg.articulation_cfg:
            written.append(write_articulation_cfg(Path(out_dir) / usd_file_name))
    return written


def _is_ghost(link: Link) -> bool:
    """No shapes and no mass: a frame, not a body."""
    return not link.shapes and link.inertial is None


def _as_collider(shape: Shape) -> Shape:
    return Shape(f"{shape.name}_collision", shape.geometry, shape.pose.copy(), True,
                 custom={**shape.custom, "usdforge:fromVisual": shape.name})

