"""A format-neutral ``rules.robot.model.Robot`` → USD, following docs/usd_layout.md. Shared by the URDF and
MJCF rules.

Output (``write_robot``):

- layered (``RobotUsdOptions.layered``, Isaac Lab's ``run_asset_transformer``): the interface layer
  ``<stem>.usda`` whose default prim ``/<robot>`` has payloads on the layers of
  ``rules.outputs.ROBOT_LAYER_FILES`` (strongest first: physx, newton, mujoco, physics, materials,
  instances, base);
  every layer authors the same prim paths, so its opinions land on the right prims. Otherwise one file.
- ``/<robot>/<link>``: an Xform per body at its rest world pose (translate + orient), with
  ``usdforge:sourceName`` and source custom data; ``visuals/`` and ``collisions/`` (purpose guide) hold
  its shapes; ``Frame``s (merged and ghost links) are child Xforms with ``usdforge:sourceName``.
- Mesh geometry lives once per (file, scale) in ``/Prototypes/<mesh>`` (class prims, in the geometry
  layer or the single file) with its parts' own materials; shapes reference it, visuals as instanceable
  prims when ``make_instanceable``. Materials are defined once in ``/Materials`` (class) and referenced
  by ``/<robot>/Looks`` (bound to shapes) and by the prototypes. Texture files go to ``textures/``.
- Physics: ``RigidBodyAPI`` + ``MassAPI`` (mass, centerOfMass, diagonalInertia, principalAxes) on every
  body; ``CollisionAPI`` (+ ``MeshCollisionAPI``) on colliders; joints in ``/<robot>/joints`` with frames
  rotated so the motion axis is X, Y or Z; ``DriveAPI``; ``ArticulationRootAPI`` on the robot's Xform for
  a robot whose one jointed tree is fixed to the world, else on each tree's root body; joints to the world
  (fixed bases) with body0 = the robot's Xform; mimic couplings as ``usdforge:mimic:*``,
  ``PhysxMimicJointAPI`` and ``NewtonMimicAPI``; engine attributes in their layers.

Authored at the Sdf level (``rules.usd.layer``): about 7× faster than the Usd API. The pieces, one module
each: ``layers`` (the files), ``geometry`` (shapes, prototypes, colliders), ``materials`` (materials,
looks, textures), ``joints`` and ``articulation``; this module writes the bodies and puts them
together. A format's own data is added by the ``author_extra`` callback through ``RobotUsdContext``, which offers Usd stages on the
same layers. A body without mass gets ``rules.robot.inertia``'s placeholder and a warning (readers should
resolve massless links first, with their own rules). Custom data keys are full attribute names.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from pxr import Sdf, Usd

from usdforge.rules.conversion_warnings import warn
from usdforge.rules.robot.articulation import author_articulations, author_robot_schema
from usdforge.rules.robot.geometry import Colliders, Shapes
from usdforge.rules.robot.joints import Joints, joint_paths
from usdforge.rules.robot.drive_patch import ROLES, Patches, patched_layer
from usdforge.rules.robot.isaaclab_cfg import hold_saved, note_patched_drives
from usdforge.rules.robot.layer_reuse import PATCH_BASES, derived, not_reused, reused, write_restored, written_anew
from usdforge.rules.robot.layers import RobotLayers, source_name
from usdforge.rules.robot.self_collision import supply_physx_layer
from usdforge.rules.robot.materials import Materials
from usdforge.rules.robot.inertia import placeholder_inertial
from usdforge.rules.robot.meshes import MeshLibrary
from usdforge.rules.robot.model import Frame, Link, Robot
from usdforge.rules.usd import layer as sdf
from usdforge.rules.usd.stage import unique_name, usd_identifier
from usdforge.rules.outputs import ROBOT_LAYER_FILES
from usdforge.schemas.converter_cfgs import COLLISION_TYPES

T = Sdf.ValueTypeNames


@attrs.frozen(kw_only=True)
class RobotUsdOptions:
    """How ``write_robot`` writes a robot.

    layered: interface layer + payload layers (True) or one file (False).
    make_instanceable: visual meshes as instanceable references to their prototype.
    mesh_approximation: ``physics:approximation`` token of mesh colliders (convexHull, convexDecomposition,
        boundingSphere, boundingCube, none, meshSimplification).
    decompose: with "convexDecomposition", decompose mesh colliders with CoACD when it is installed (each
        part a convex-hull collider); without CoACD a warning, and the token is left to the engine.
    self_collision: whether links of one articulation collide with each other.
    merge_mesh: merge each body's visual meshes into one mesh per material.
    robot_type: Isaac Sim robot type for ``IsaacRobotAPI`` on the root prim; None: no robot schema.
    """

    layered: bool = True
    make_instanceable: bool = True
    mesh_approximation: str = "convexHull"
    decompose: bool = False
    self_collision: bool = False
    merge_mesh: bool = False
    robot_type: str | None = None

    @classmethod
    def from_cfg(cls, cfg: Any) -> "RobotUsdOptions":
        """The options a URDF or MJCF converter cfg asks for (Isaac Lab's field names)."""
        seen = UnitOptions(cfg)
        return cls(**{field.name: getattr(seen, field.name) for field in attrs.fields(cls)})


class UnitOptions:
    """``RobotUsdOptions`` read from a converter cfg as one layer's author sees it: given a
    ``rules.robot.layer_fields.FieldView``, reading an option whose cfg field the layer does not declare
    raises ``UndeclaredField``, so an author can only depend on what keys its layer's reuse."""

    def __init__(self, cfg: Any):
        self._cfg = cfg

    layered = property(lambda self: self._cfg.run_asset_transformer)
    make_instanceable = property(lambda self: self._cfg.make_instanceable)
    mesh_approximation = property(lambda self: COLLISION_TYPES[self._cfg.collision_type])
    decompose = property(lambda self: self._cfg.collision_type == "Convex Decomposition")
    self_collision = property(lambda self: self._cfg.self_collision)
    merge_mesh = property(lambda self: self._cfg.merge_mesh)
    robot_type = property(lambda self: self._cfg.robot_type)


def unit_options(cfg: Any, kind: str) -> Callable[[str], UnitOptions]:
    """Role → the options its author sees: ``cfg`` through that layer's ``FieldView``."""
    from usdforge.rules.robot.layer_fields import view

    return lambda role: UnitOptions(view(cfg, kind, role))


def write_robot(robot: Robot, out_dir: Path, usd_file_name: str, options: RobotUsdOptions = RobotUsdOptions(),
                meshes: MeshLibrary | None = None,
                author_extra: Callable[[RobotUsdContext], None] | None = None,
                views: Callable[[str], UnitOptions] | None = None, patches: Patches | None = None) -> list[Path]:
    """Write ``robot`` into ``out_dir`` (main file ``usd_file_name``); return every file written.

    author_extra: called once everything of ``robot`` is authored and before the layers are saved, with a
        ``RobotUsdContext``: a format's own data (MJCF actuators, tendons …) goes into the same layers.
    views: role → the options that layer's author sees (``unit_options``: the cfg through the layer's
        declared fields); None: every author sees ``options``.
    patches: what a drive-gain edit changes in the physics (and mujoco) layer (``rules.robot.drive_patch``):
        with it, such a layer is patched from the build cache's copy without the drive fields when it can be.
    """
    return _RobotWriter(robot, Path(out_dir), usd_file_name, options, meshes or MeshLibrary(),
                        author_extra=author_extra, views=views, patches=patches).write()


class RobotUsdContext:
    """The layers being written, for ``write_robot``'s ``author_extra`` callback.

    root: the robot's root prim path. link_paths / joint_paths: link or joint name → prim path.
    """

    def __init__(self, writer: _RobotWriter):
        self._writer = writer
        self.root: Sdf.Path = writer.root
        self.link_paths: dict[str, Sdf.Path] = writer.link_paths
        self.joint_paths: dict[str, Sdf.Path] = writer.joint_paths

    def stage(self, role: str) -> Usd.Stage:
        """The stage of a layer role (``rules.outputs.ROBOT_LAYER_FILES``); one stage for all in one file."""
        return self._writer.layers.stage(role)

    def prim(self, role: str, path: Sdf.Path) -> Usd.Prim:
        """The prim at ``path`` in ``role``'s layer (an ``over`` unless that layer defines it)."""
        return self._writer.layers.stage(role).OverridePrim(path)

    def authored(self, role: str) -> bool:
        """Whether ``role``'s layer is authored in this conversion (False: restored from the build cache; what
        lands in its layer here is dropped, so a callback should not spend time writing it)."""
        return self._writer.layers.authored(role)

    def layer(self, role: str) -> Sdf.Layer:
        """The Sdf layer of a role, for fast ``rules.usd.layer`` edits."""
        return self._writer.layers.layer(role)

    def asset_path(self, role: str, file: Path) -> str:
        """``file`` as an asset path relative to ``role``'s layer."""
        return self._writer.layers.asset_path(role, file)

    def add_file(self, path: Path) -> None:
        """Report a file the callback wrote (returned with the others by ``write_robot``)."""
        if path not in self._writer.materials.files:
            self._writer.materials.files.append(path)


class _RobotWriter:
    """One robot being written, one author per layer into the same ``RobotLayers``: base (bodies, frames,
    robot schema), the shapes (instances, with the materials and geometry they name), physics (bodies'
    mass, colliders, joints, articulation roots), physx, newton and mujoco (the joints' engine attributes,
    PhysX's articulation settings). Each author sees the options through its own layer's view (``views``).

    Inside a conversion with layer reuse (``rules.robot.layer_reuse``), a layer whose key is in the build
    cache is restored and its author is not called; what a still-called author writes into it (the joint
    pass writes every engine layer) goes to a scratch layer. Names and paths that several layers share
    (bodies, joints) come from the robot model, never from another layer."""

    def __init__(self, robot: Robot, out_dir: Path, usd_file_name: str, options: RobotUsdOptions,
                 meshes: MeshLibrary, author_extra: Callable[[RobotUsdContext], None] | None = None,
                 views: Callable[[str], UnitOptions] | None = None, patches: Patches | None = None):
        self.author_extra = author_extra
        self.robot = robot
        self.options = options
        self.views: Callable[[str], Any] = views or (lambda role: options)
        if options.layered:  # a self_collision edit: the physx layer patched from the cache, when it can be
            supply_physx_layer(self.views("physx").self_collision)
        self.restored = _restored(options.layered)
        #: Layers patched from the build cache (``rules.robot.drive_patch``), held open for the Isaac Lab cfg.
        self.patched: list[Sdf.Layer] = []
        if options.layered and patches is not None:
            self.patched = _patch_drives(self.restored, robot, patches, self.views("physics"), Path(out_dir))
        self.layers = RobotLayers(usd_identifier(robot.name), out_dir, usd_file_name, options.layered,
                                  {role: files[name] for role, (name, files) in self.restored.items()})
        self.root = self.layers.root
        self.materials = Materials(self.layers, out_dir)
        self.shapes = Shapes(self.layers, self.views("instances"), meshes, self.materials, robot.source,
                             geometry=not self.layers.authored("geometry"), collider_options=self.views("physics"))
        self.link_paths: dict[str, Sdf.Path] = {}
        self.joint_paths: dict[str, Sdf.Path] = {}
        self._root_children: set[str] = set(_ROOT_CHILDREN)
        self._colliders_author: Colliders | None = None

    def write(self) -> list[Path]:
        authored = self.layers.authored
        taken_frames = self._root_children
        self.link_paths.update(link_paths(self.root, self.robot, taken_frames))
        if authored("base"):
            self._base(taken_frames)
        # A collider decomposed into convex parts is named by the decomposition (and CoACD missing is
        # warned about where the shapes meet it): the shapes author runs.
        shapes = any(authored(role) for role in ("instances", "materials", "geometry")) or \
            (authored("physics") and self.views("physics").decompose)
        for link in self.robot.links:
            if shapes:
                self._shapes(link)
            elif authored("physics") or self.author_extra is not None:
                # The callback finds the colliders' prims in the physics layer (MJCF's contacts), a scratch
                # one when physics is restored.
                self._colliders(link)
            self._body(link, authored("physics"))
        if any(authored(role) for role in ("physics", "physx", "newton", "mujoco")):
            self.joint_paths.update(Joints(self.layers, self.robot, self.link_paths,
                                           physics=self.author_extra is not None).write())
        else:
            self.joint_paths.update(joint_paths(self.root, self.robot))
        if authored("physics") or authored("physx"):
            author_articulations(self.layers, self.robot, self.link_paths,
                                 lambda: self.views("physx").self_collision)
        if authored("base") and self.views("base").robot_type is not None:
            author_robot_schema(self.layers.layer("base").GetPrimAtPath(self.root), self.views("base").robot_type,
                                self.robot, self.link_paths, self.joint_paths)
        if self.author_extra is not None:
            self.author_extra(RobotUsdContext(self))
        cached_geometry, store_geometry = self.shapes.geometry_layer()
        geometry_file = self.layers.files["geometry"]
        contents = {geometry_file: cached_geometry} if cached_geometry else {}
        written = self.layers.save(self.robot.name, contents or None)
        hold_saved(self.patched)  # the same bytes as their files: the Isaac Lab cfg reads them from memory
        if store_geometry is not None:
            store_geometry(geometry_file.read_bytes())
        if "materials" in self.restored:  # the textures the restored materials layer names
            name, files = self.restored["materials"]
            out_dir = self.layers.main_file.parent
            for other, data in files.items():
                path = out_dir / other
                if other != name and path not in self.materials.files:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    write_restored(path, other, data)
                    self.materials.files.append(path)
                elif other != name:  # written by the shapes author of this conversion
                    written_anew(other)
        return written + self.materials.files

    def _base(self, taken_frames: set[str]) -> None:
        """The base layer's author: the robot's Xform, its frames and every body at its rest pose."""
        base_root = self.layers.spec("base", self.root, "Xform")
        source_name(base_root, self.robot.name)
        sdf.custom_attributes(base_root, self.robot.custom)
        for frame in self.robot.frames:
            self._frame(self.root, frame, taken_frames)
        for link in self.robot.links:
            path = self.link_paths[link.name]
            spec = self.layers.spec("base", path, "Xform")
            sdf.xform(spec, link.pose)
            source_name(spec, link.name)
            sdf.custom_attributes(spec, link.custom)
            taken = {"visuals", "collisions"}
            for frame in link.frames:
                self._frame(path, frame, taken)

    def _frame(self, parent: Sdf.Path, frame: Frame, taken: set[str]) -> None:
        spec = self.layers.spec("base", parent.AppendChild(unique_name(frame.name, taken)), "Xform")
        sdf.xform(spec, frame.pose)
        source_name(spec, frame.name)
        sdf.custom_attributes(spec, frame.custom)

    def _shapes(self, link: Link) -> None:
        """The shapes author (instances, and the materials and prototypes they name; colliders'
        ``CollisionAPI`` into physics) for one link."""
        path = self.link_paths[link.name]
        visuals = [s for s in link.shapes if not s.collision]
        collisions = [s for s in link.shapes if s.collision]
        if visuals:
            scope = path.AppendChild("visuals")
            self.layers.spec("instances", scope, "Xform")
            if self.shapes.options.merge_mesh:
                self.shapes.merged_visuals(scope, link, visuals)
            else:
                names: set[str] = set()
                for shape in visuals:
                    self.shapes.shape(scope.AppendChild(unique_name(shape.name, names)), shape)
        if collisions:
            scope = path.AppendChild("collisions")
            sdf.attribute(self.layers.spec("instances", scope, "Xform"), "purpose", T.Token, "guide", uniform=True)
            names = set()
            for shape in collisions:
                self.shapes.shape(scope.AppendChild(unique_name(shape.name, names)), shape)

    def _colliders(self, link: Link) -> None:
        """The physics author's part of one link's shapes, when the shapes are restored: ``CollisionAPI``
        on each collider, at the paths the shapes author gives them."""
        scope = self.link_paths[link.name].AppendChild("collisions")
        names: set[str] = set()
        if self._colliders_author is None:
            self._colliders_author = Colliders(self.layers, self.views("physics"), self.shapes.meshes)
        for shape in (s for s in link.shapes if s.collision):
            self._colliders_author.collider(scope.AppendChild(unique_name(shape.name, names)), shape)

    def _body(self, link: Link, physics: bool) -> None:
        """The physics author's rigid body and mass of one link (a massless one warned about either way)."""
        inertial = link.inertial
        if inertial is None or inertial.mass <= 0.0:
            warn(self.robot.source, "body without mass given the placeholder mass "
                 f"{placeholder_inertial().mass:g} kg (UsdPhysics forbids 0)", f"link '{link.name}'")
            inertial = placeholder_inertial()
        if not physics:
            return
        spec = self.layers.over("physics", self.link_paths[link.name])
        if link.kinematic:
            sdf.attribute(spec, "physics:kinematicEnabled", T.Bool, True)
        sdf.mass(spec, inertial.mass, inertial.center_of_mass, inertial.inertia, schemas=("PhysicsRigidBodyAPI",))


#: The robot root's own children, whose names links and frames do not take.
_ROOT_CHILDREN = ("joints", "Looks")


def link_paths(root: Sdf.Path, robot: Robot, taken: set[str] | None = None) -> dict[str, Sdf.Path]:
    """Link name → its prim path under ``root`` (names made unique in ``taken``, which keeps them; by default
    the root's own children, ``joints`` and ``Looks``), from the robot model alone."""
    taken = set(_ROOT_CHILDREN) if taken is None else taken
    return {link.name: root.AppendChild(unique_name(link.name, taken)) for link in robot.links}


def _patch_drives(restored: dict[str, tuple[str, dict[str, bytes]]], robot: Robot, patches: Patches,
                  physics: UnitOptions, out_dir: Path) -> list[Sdf.Layer]:
    """Each layer a drive-gain or collision-approximation edit changes (physics, MJCF's mujoco) as the edit
    makes it, from the one the build cache holds without those fields (``rules.robot.drive_patch``), added
    to ``restored`` when the edit changed values only: its authors are then not called. ``physics``: the
    physics layer's options (the approximation token, unless colliders are decomposed: parts then carry
    their own)."""
    root = Sdf.Path.absoluteRootPath.AppendChild(usd_identifier(robot.name))
    paths = None
    layers = []
    for role in ROLES:
        name = ROBOT_LAYER_FILES[role]
        cached = reused(PATCH_BASES[role]) if role not in restored else None
        if cached is None or name not in cached:
            continue
        if paths is None:
            paths = joint_paths(root, robot)
        wanted = patches(role, root, paths)
        approximation = None if role != "physics" or physics.decompose else physics.mesh_approximation
        patched = patched_layer(cached[name], *wanted, approximation, str(out_dir / name)) \
            if wanted is not None else None
        if patched is not None:
            restored[role] = (name, {name: patched[0]})
            derived(role)
            if role == "physics":
                note_patched_drives(wanted[0])
            if patched[1] is not None:  # patched through Sdf: held for the Isaac Lab cfg
                layers.append(patched[1])
        else:
            not_reused(PATCH_BASES[role])
    return layers


def _restored(layered: bool) -> dict[str, tuple[str, dict[str, bytes]]]:
    """Role → (its file's relative name, the unit's files) for each layer the build cache holds under
    its key (``rules.robot.layer_reuse``); empty outside a conversion with layer reuse."""
    if not layered:
        return {}
    found = {}
    for role, name in ROBOT_LAYER_FILES.items():
        files = reused(role)
        if files is not None:
            found[role] = (name, files)
    return found
