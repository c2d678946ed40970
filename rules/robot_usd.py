"""A format-neutral ``rules.robot_model.Robot`` → USD, following docs/usd_layout.md. Shared by the URDF and
MJCF rules.

Output (``write_robot``):

- layered (``RobotUsdOptions.layered``, Isaac Lab's ``run_asset_transformer``): the interface layer
  ``<stem>.usda`` whose default prim ``/<robot>`` has payloads on the layers of
  ``rules.outputs.ROBOT_LAYER_FILES`` (strongest first: physx, newton, mujoco, physics, materials, base);
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
  rotated so the motion axis is X, Y or Z; ``DriveAPI``; ``ArticulationRootAPI`` on each tree's root body;
  fixed bases as a ``FixedJoint`` with an empty body0; mimic couplings as ``usdforge:mimic:*``,
  ``PhysxMimicJointAPI`` and ``NewtonMimicAPI``; engine attributes in their layers.

Authored at the Sdf level (``rules.sdf_authoring``): about 7× faster than the Usd API. A format's own
data is added by the ``author_extra`` callback through ``RobotUsdContext``, which offers Usd stages on the
same layers. A body without mass gets ``rules.robot_inertia``'s placeholder and a warning (readers should
resolve massless links first, with their own rules). Custom data keys are full attribute names.
"""

from __future__ import annotations

import hashlib
import io
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import trimesh
from pxr import Gf, Sdf, Usd

from rules import sdf_authoring as sdf
from rules.conversion_warnings import warn
from rules.outputs import ROBOT_LAYER_FILES
from rules.robot_inertia import placeholder_inertial
from rules.robot_meshes import MeshLibrary, MeshPart
from rules.robot_model import Frame, Joint, Link, Material, Robot, Shape
from rules.usd_authoring import relative_asset_path, unique, unique_name, usd_identifier
from schemas.converter_cfgs import COLLISION_TYPES
from schemas.units import per_radian_to_per_degree, radians_to_degrees

#: Payload order of the interface layer, strongest first.
PAYLOAD_ORDER = ("physx", "newton", "mujoco", "physics", "materials", "base")
_AXES = "XYZ"
#: Joint-frame consistency the writer checks (m and rad), far above float rounding, far below a bug.
_FRAME_TOLERANCE = 1e-6
_JOINT_TYPES = {"revolute": "PhysicsRevoluteJoint", "continuous": "PhysicsRevoluteJoint",
                "prismatic": "PhysicsPrismaticJoint", "fixed": "PhysicsFixedJoint",
                "spherical": "PhysicsSphericalJoint", "planar": "PhysicsJoint", "floating": "PhysicsJoint"}
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
        return cls(layered=cfg.run_asset_transformer, make_instanceable=cfg.make_instanceable,
                   mesh_approximation=COLLISION_TYPES[cfg.collision_type],
                   decompose=cfg.collision_type == "Convex Decomposition", self_collision=cfg.self_collision,
                   merge_mesh=cfg.merge_mesh, robot_type=cfg.robot_type)


def write_robot(robot: Robot, out_dir: Path, usd_file_name: str, options: RobotUsdOptions = RobotUsdOptions(),
                meshes: MeshLibrary | None = None,
                author_extra: Callable[[RobotUsdContext], None] | None = None) -> list[Path]:
    """Write ``robot`` into ``out_dir`` (main file ``usd_file_name``); return every file written.

    author_extra: called once everything of ``robot`` is authored and before the layers are saved, with a
        ``RobotUsdContext``: a format's own data (MJCF actuators, tendons …) goes into the same layers.
    """
    return _RobotWriter(robot, Path(out_dir), usd_file_name, options, meshes or MeshLibrary(),
                        author_extra=author_extra).write()


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

    def layer(self, role: str) -> Sdf.Layer:
        """The Sdf layer of a role, for fast ``rules.sdf_authoring`` edits."""
        return self._writer.layers.layer(role)

    def asset_path(self, role: str, file: Path) -> str:
        """``file`` as an asset path relative to ``role``'s layer."""
        return self._writer.layers.asset_path(role, file)

    def add_file(self, path: Path) -> None:
        """Report a file the callback wrote (returned with the others by ``write_robot``)."""
        if path not in self._writer._textures:
            self._writer._textures.append(path)


# ---- geometry helpers ----------------------------------------------------------------------------------

def axis_alignment(axis: np.ndarray) -> tuple[int, np.ndarray]:
    """(k, R): the USD axis index k (0 X, 1 Y, 2 Z) nearest to ``axis`` (3,) and the rotation R (3, 3) with
    R @ e_k = axis, so a joint frame rotated by R moves about/along its own k axis in the positive
    direction of ``axis`` (the joint coordinate keeps its sign)."""
    key = tuple(np.asarray(axis, dtype=float).tolist())
    cached = _ALIGNMENTS.get(key)
    if cached is not None:  # most axes are a few repeated directions: ±X, ±Y, ±Z
        return cached[0], cached[1].copy()
    result = _axis_alignment(np.asarray(axis, dtype=float))
    if len(_ALIGNMENTS) < 1024:
        _ALIGNMENTS[key] = result
    return result[0], result[1].copy()


_ALIGNMENTS: dict[tuple, tuple[int, np.ndarray]] = {}


def _axis_alignment(axis: np.ndarray) -> tuple[int, np.ndarray]:
    axis = axis / np.linalg.norm(axis)
    k = int(np.argmax(np.abs(axis)))
    e = np.zeros(3)
    e[k] = 1.0
    cross = np.cross(e, axis)
    sine, cosine = float(np.linalg.norm(cross)), float(e @ axis)
    if sine < 1e-12:
        if cosine > 0:
            return k, np.eye(3)
        # Exactly opposite: half a turn about the next axis.
        other = np.zeros(3)
        other[(k + 1) % 3] = 1.0
        return k, trimesh.transformations.rotation_matrix(math.pi, other)[:3, :3]
    return k, trimesh.transformations.rotation_matrix(math.atan2(sine, cosine), cross / sine)[:3, :3]


def _source_name(spec: Sdf.PrimSpec, name: str) -> None:
    sdf.attribute(spec, "usdforge:sourceName", T.String, name, custom=True)


def _vec3f(values) -> Gf.Vec3f:
    return Gf.Vec3f(*map(float, values))


# ---- layers ----------------------------------------------------------------------------------------------

class _Layers:
    """The layers being written, by role; one layer for every role in single-file mode.

    Every layer is an ``Sdf.Layer`` whose identifier is its final path (``rules.sdf_authoring.new_layer``),
    so that relative references between the layers resolve while authoring (for the Usd stages a
    callback opens on them); ``save`` writes each in its file's format (usda, or crate for ``.usd``) and,
    when layered, the interface layer.
    """

    def __init__(self, root_name: str, out_dir: Path, usd_file_name: str, layered: bool):
        self.root = Sdf.Path.absoluteRootPath.AppendChild(root_name)
        self.layered = layered
        self.main_file = out_dir / usd_file_name
        self.files = {role: (out_dir / relative if layered else self.main_file)
                      for role, relative in ROBOT_LAYER_FILES.items()}
        self.layers: dict[str, Sdf.Layer] = {}
        self._stages: dict[str, Usd.Stage] = {}
        for role, file in self.files.items():
            existing = next((layer for r, layer in self.layers.items() if self.files[r] == file), None)
            if existing is None:
                file.parent.mkdir(parents=True, exist_ok=True)
                existing = sdf.new_layer(str(file))
                if role != "geometry":
                    existing.defaultPrim = root_name
                    sdf.prim(existing, self.root, "Xform" if role == "base" else "",
                             Sdf.SpecifierDef if role == "base" else Sdf.SpecifierOver)
            self.layers[role] = existing

    def layer(self, role: str) -> Sdf.Layer:
        """The layer of a role."""
        return self.layers[role]

    def stage(self, role: str) -> Usd.Stage:
        """A Usd stage on ``role``'s layer (opened once, for callbacks that use the Usd API)."""
        layer = self.layers[role]
        key = layer.identifier
        if key not in self._stages:
            self._stages[key] = Usd.Stage.Open(layer, Usd.Stage.LoadNone)
        return self._stages[key]

    def spec(self, role: str, path: Sdf.Path, type_name: str = "") -> Sdf.PrimSpec:
        """A ``def`` prim spec in ``role``'s layer."""
        return sdf.prim(self.layers[role], path, type_name)

    def over(self, role: str, path: Sdf.Path) -> Sdf.PrimSpec:
        """An ``over`` in ``role``'s layer, or the spec already there (one layer in single-file mode)."""
        return sdf.over(self.layers[role], path)

    def reference(self, spec: Sdf.PrimSpec, from_role: str, to_role: str, target: Sdf.Path) -> None:
        """Reference ``target`` of ``to_role``'s layer from ``spec`` in ``from_role``'s layer."""
        same = self.files[from_role] == self.files[to_role]
        sdf.add_reference(spec, "" if same else relative_asset_path(self.files[to_role], self.files[from_role].parent),
                          target)

    def asset_path(self, role: str, file: Path) -> str:
        """``file`` as an asset path relative to ``role``'s layer."""
        return relative_asset_path(file, self.files[role].parent)

    def save(self, name: str) -> list[Path]:
        """Write every layer (and, when layered, the interface layer); return the files, main file last."""
        self._stages.clear()
        self.layers["base"].GetPrimAtPath(self.root).SetInfo("assetInfo", {"name": name})
        layers = {self.files[role]: layer for role, layer in self.layers.items()}  # one layer per file
        if self.layered:
            layers[self.main_file] = self._interface(name)
        for file, layer in layers.items():
            if not layer.Save(force=True):
                raise OSError(f"could not write {file}")
        return list(layers)

    def _interface(self, name: str) -> Sdf.Layer:
        """The interface layer: ``/<robot>`` with payloads on the layers, strongest first."""
        interface = sdf.new_layer(str(self.main_file))
        interface.defaultPrim = self.root.name
        root = sdf.prim(interface, self.root, "Xform")
        root.SetInfo("assetInfo", {"name": name})
        root.payloadList.prependedItems = [
            Sdf.Payload(relative_asset_path(self.files[role], self.main_file.parent), self.root)
            for role in PAYLOAD_ORDER]
        return interface


# ---- the writer -------------------------------------------------------------------------------------------

class _RobotWriter:
    def __init__(self, robot: Robot, out_dir: Path, usd_file_name: str, options: RobotUsdOptions,
                 meshes: MeshLibrary, author_extra: Callable[[RobotUsdContext], None] | None = None):
        self.author_extra = author_extra
        self.robot = robot
        self.options = options
        self.meshes = meshes
        self.out_dir = out_dir
        self.layers = _Layers(usd_identifier(robot.name), out_dir, usd_file_name, options.layered)
        self.root = self.layers.root
        self.link_paths: dict[str, Sdf.Path] = {}
        self.joint_paths: dict[str, Sdf.Path] = {}
        self._root_children: set[str] = {"joints", "Looks"}
        self._materials: dict[tuple, str] = {}
        self._material_names: set[str] = set()
        self._robot_looks: dict[str, Sdf.Path] = {}
        self._prototypes: dict[tuple, tuple[Sdf.Path, list[str]]] = {}
        self._prototype_names: set[str] = set()
        self._textures: list[Path] = []
        self._texture_files: dict[str, Path] = {}
        self._source_textures: dict[Path, tuple[Path, str]] = {}
        self._texture_names: set[str] = set()
        self._decomposer_missing_warned = False

    def write(self) -> list[Path]:
        base_root = self.layers.spec("base", self.root, "Xform")
        _source_name(base_root, self.robot.name)
        sdf.custom_attributes(base_root, self.robot.custom)
        taken_frames = self._root_children
        for link in self.robot.links:
            self.link_paths[link.name] = self.root.AppendChild(unique_name(link.name, taken_frames))
        for frame in self.robot.frames:
            self._frame(self.root, frame, taken_frames)
        for link in self.robot.links:
            self._link(link)
        self._joints()
        self._articulations()
        if self.options.robot_type is not None:
            self._robot_schema(base_root)
        if self.author_extra is not None:
            self.author_extra(RobotUsdContext(self))
        written = self.layers.save(self.robot.name)
        return written + self._textures

    # ---- bodies -------------------------------------------------------------------------------------------

    def _frame(self, parent: Sdf.Path, frame: Frame, taken: set[str]) -> None:
        spec = self.layers.spec("base", parent.AppendChild(unique_name(frame.name, taken)), "Xform")
        sdf.xform(spec, frame.pose)
        _source_name(spec, frame.name)
        sdf.custom_attributes(spec, frame.custom)

    def _link(self, link: Link) -> None:
        path = self.link_paths[link.name]
        spec = self.layers.spec("base", path, "Xform")
        sdf.xform(spec, link.pose)
        _source_name(spec, link.name)
        sdf.custom_attributes(spec, link.custom)
        taken = {"visuals", "collisions"}
        for frame in link.frames:
            self._frame(path, frame, taken)
        visuals = [s for s in link.shapes if not s.collision]
        collisions = [s for s in link.shapes if s.collision]
        if visuals:
            scope = path.AppendChild("visuals")
            self.layers.spec("base", scope, "Xform")
            if self.options.merge_mesh:
                self._merged_visuals(scope, link, visuals)
            else:
                names: set[str] = set()
                for shape in visuals:
                    self._shape(scope.AppendChild(unique_name(shape.name, names)), shape)
        if collisions:
            scope = path.AppendChild("collisions")
            sdf.attribute(self.layers.spec("base", scope, "Xform"), "purpose", T.Token, "guide", uniform=True)
            names = set()
            for shape in collisions:
                self._shape(scope.AppendChild(unique_name(shape.name, names)), shape)
        physics = self.layers.over("physics", path)
        sdf.apply_schemas(physics, "PhysicsRigidBodyAPI")
        if link.kinematic:
            sdf.attribute(physics, "physics:kinematicEnabled", T.Bool, True)
        inertial = link.inertial
        if inertial is None or inertial.mass <= 0.0:
            warn(self.robot.source, "body without mass given the placeholder mass "
                 f"{placeholder_inertial().mass:g} kg (UsdPhysics forbids 0)", f"link '{link.name}'")
            inertial = placeholder_inertial()
        sdf.mass(physics, inertial.mass, inertial.center_of_mass, inertial.inertia)

    # ---- shapes ---------------------------------------------------------------------------------------------

    def _shape(self, path: Sdf.Path, shape: Shape) -> None:
        g = shape.geometry
        if g.kind == "mesh":
            self._mesh_shape(path, shape)
            return
        if g.kind == "box":
            spec = self.layers.spec("base", path, "Cube")
            sdf.attribute(spec, "size", T.Double, 1.0)
            sdf.xform(spec, shape.pose, g.size)
        elif g.kind == "sphere":
            spec = self.layers.spec("base", path, "Sphere")
            sdf.attribute(spec, "radius", T.Double, float(g.radius))
            sdf.xform(spec, shape.pose)
        elif g.kind in ("cylinder", "capsule"):
            spec = self.layers.spec("base", path, "Cylinder" if g.kind == "cylinder" else "Capsule")
            sdf.attribute(spec, "radius", T.Double, float(g.radius))
            sdf.attribute(spec, "height", T.Double, float(g.length))
            sdf.attribute(spec, "axis", T.Token, "Z", uniform=True)
            sdf.xform(spec, shape.pose)
        elif g.kind == "plane":
            spec = self.layers.spec("base", path, "Plane")
            # MJCF: size = half extents, 0 for infinite (a large finite plane stands in).
            width, length = (2.0 * s if s > 0 else 1000.0 for s in (tuple(g.size) + (0.0, 0.0))[:2])
            sdf.attribute(spec, "width", T.Double, float(width))
            sdf.attribute(spec, "length", T.Double, float(length))
            sdf.attribute(spec, "axis", T.Token, "Z", uniform=True)
            sdf.xform(spec, shape.pose)
        elif g.kind == "ellipsoid" or g.trimesh is not None:
            mesh = g.trimesh if g.trimesh is not None else \
                trimesh.creation.icosphere(subdivisions=3).apply_scale(np.asarray(g.size, float))
            spec = sdf.mesh(self.layers.layer("base"), path, np.asarray(mesh.vertices), np.asarray(mesh.faces))
            sdf.xform(spec, shape.pose)
        else:
            raise ValueError(f"unknown geometry kind {g.kind!r}")
        sdf.custom_attributes(spec, shape.custom)
        self._bind_shape_material(spec, shape)
        if shape.collision:
            inline_mesh = g.kind == "ellipsoid" or g.trimesh is not None
            self._collider(path, mesh_parts=["."] if inline_mesh else None)

    def _mesh_shape(self, path: Sdf.Path, shape: Shape) -> None:
        g = shape.geometry
        decompose = shape.collision and self.options.mesh_approximation == "convexDecomposition" \
            and self.options.decompose and self._decomposer() is not None
        prototype, parts = self._prototype(g.mesh, g.scale, decompose)
        spec = self.layers.spec("base", path, "Xform")
        sdf.xform(spec, shape.pose)
        self.layers.reference(spec, "base", "geometry", prototype)
        if not shape.collision and self.options.make_instanceable:
            sdf.set_instanceable(spec)
        sdf.custom_attributes(spec, shape.custom)
        self._bind_shape_material(spec, shape)
        if shape.collision:
            self._collider(path, mesh_parts=parts, approximation="convexHull" if decompose else None)

    def _collider(self, path: Sdf.Path, mesh_parts: list[str] | None = None,
                  approximation: str | None = None) -> None:
        """CollisionAPI on a primitive, or on each mesh part (+ MeshCollisionAPI approximation)."""
        if mesh_parts is None:
            sdf.apply_schemas(self.layers.over("physics", path), "PhysicsCollisionAPI")
            return
        for part in mesh_parts:
            spec = self.layers.over("physics", path if part == "." else path.AppendChild(part))
            sdf.apply_schemas(spec, "PhysicsCollisionAPI", "PhysicsMeshCollisionAPI")
            sdf.attribute(spec, "physics:approximation", T.Token, approximation or self.options.mesh_approximation,
                          uniform=True)

    def _merged_visuals(self, scope: Sdf.Path, link: Link, visuals: list[Shape]) -> None:
        """merge_mesh: one mesh per (shape material, part material) of the link's visual meshes."""
        groups: dict[tuple, list[tuple[Material | None, MeshPart]]] = {}
        names: set[str] = set()
        for shape in visuals:
            if shape.geometry.kind != "mesh":
                self._shape(scope.AppendChild(unique_name(shape.name, names)), shape)
                continue
            for part in self.meshes.parts(shape.geometry.mesh, shape.geometry.scale):
                key = (_material_key(shape.material), _color_key(part.color), str(part.texture), _image_key(part.image))
                moved = part._replace(points=part.points @ shape.pose[:3, :3].T + shape.pose[:3, 3],
                                      normals=None if part.normals is None else part.normals @ shape.pose[:3, :3].T)
                groups.setdefault(key, []).append((shape.material, moved))
        for index, items in enumerate(groups.values()):
            material, parts = items[0][0], [part for _, part in items]
            merged = _concatenate(parts)
            spec = sdf.mesh(self.layers.layer("base"), scope.AppendChild(unique_name(f"merged_{index}", names)),
                            merged.points, merged.faces, normals=merged.normals, normal_indices=merged.normal_indices,
                            uv=merged.uv, colors=merged.colors)
            if material is not None:
                sdf.bind_material(spec, self._robot_look(material))
            elif merged.color is not None or merged.texture is not None or merged.image is not None:
                sdf.bind_material(spec, self._robot_look_for(merged.color, merged.image, f"{link.name}_material",
                                                             merged.texture))

    # ---- prototypes and materials --------------------------------------------------------------------------

    def _decomposer(self):
        try:
            import coacd  # noqa: PLC0415 - optional extra
        except ImportError:
            if not self._decomposer_missing_warned:
                self._decomposer_missing_warned = True
                warn(self.robot.source, "convex decomposition asked for but CoACD is not installed (pip install "
                     "'usdforge[decomposition]'): physics:approximation = convexDecomposition is authored for the "
                     "engine to decompose")
            return None
        return coacd

    def _prototype(self, mesh: Path, scale: tuple[float, float, float], decompose: bool) -> tuple[Sdf.Path, list[str]]:
        """The ``/Prototypes/<name>`` prim of (file, scale[, decomposed]) and its part prim names."""
        key = (str(mesh), tuple(scale), decompose)
        if key in self._prototypes:
            return self._prototypes[key]
        layer = self.layers.layer("geometry")
        prototypes = Sdf.Path("/Prototypes")
        sdf.prim(layer, prototypes, specifier=Sdf.SpecifierClass)
        name = unique_name(f"{Path(mesh).stem}_{Path(mesh).suffix.lstrip('.').lower()}"
                           + ("_convex" if decompose else ""), self._prototype_names)
        path = prototypes.AppendChild(name)
        sdf.prim(layer, path, "Xform")
        parts = self.meshes.parts(mesh, scale)
        if decompose:
            parts = self._decompose(parts)
        part_names: list[str] = []
        taken = {"Looks"}
        for part in parts:
            part_name = unique_name(part.name, taken)
            part_names.append(part_name)
            spec = sdf.mesh(layer, path.AppendChild(part_name), part.points, part.faces, normals=part.normals,
                            normal_indices=part.normal_indices, uv=part.uv, colors=part.colors)
            if part.color is not None or part.texture is not None or part.image is not None:
                material = self._material(part.color, part.texture, part.image, f"{Path(mesh).stem}_{part_name}")
                look = path.AppendChild("Looks").AppendChild(material)
                if layer.GetPrimAtPath(look) is None:
                    sdf.prim(layer, look.GetParentPath(), "Scope")
                    self.layers.reference(sdf.prim(layer, look, "Material"), "geometry", "materials",
                                          Sdf.Path("/Materials").AppendChild(material))
                sdf.bind_material(spec, look)
        self._prototypes[key] = (path, part_names)
        return self._prototypes[key]

    def _decompose(self, parts: list[MeshPart]) -> list[MeshPart]:
        coacd = self._decomposer()
        whole = _concatenate(parts)
        hulls = coacd.run_coacd(coacd.Mesh(np.asarray(whole.points), np.asarray(whole.faces)), seed=0)
        return [MeshPart(f"hull_{i}", np.asarray(vertices, float), np.asarray(faces, np.int64))
                for i, (vertices, faces) in enumerate(hulls)]

    def _material(self, color: tuple | None, texture: Path | None = None, image: Any = None,
                  hint: str = "material") -> str:
        """The name of a ``/Materials/<name>`` material with this colour and texture (file or image)."""
        texture_file, texture_key = None, None
        if texture is not None and Path(texture).is_file():
            texture_file, texture_key = self._texture_from_file(Path(texture))
        elif image is not None:
            buffer = io.BytesIO()
            image.save(buffer, format="PNG", compress_level=1)  # zlib's fastest: 5x faster to encode
            data = buffer.getvalue()
            texture_key = hashlib.sha256(data).hexdigest()
            texture_file = self._texture(f"{usd_identifier(hint)}_{texture_key[:8]}.png", data, texture_key)
        key = (_color_key(color), texture_key)
        if key in self._materials:
            return self._materials[key]
        name = unique_name(hint, self._material_names)
        self._materials[key] = name
        layer = self.layers.layer("materials")
        materials = Sdf.Path("/Materials")
        sdf.prim(layer, materials, specifier=Sdf.SpecifierClass)
        sdf.preview_material(layer, materials.AppendChild(name), color,
                             self.layers.asset_path("materials", texture_file) if texture_file else None)
        return name

    def _texture_from_file(self, texture: Path) -> tuple[Path, str]:
        """(copy in ``textures/``, key) of a texture file, copied once per source file (many materials share
        one atlas) under the source's name, made unique among the copies (``<stem>_1.png`` …); the key is
        the source path."""
        if texture not in self._source_textures:
            stem = unique(texture.stem, self._texture_names)
            copy = self.out_dir / "textures" / f"{stem}{texture.suffix.lower()}"
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(texture, copy)  # in the kernel: textures are megabytes, read by nothing here
            self._textures.append(copy)
            self._source_textures[texture] = (copy, f"file:{texture}")
        return self._source_textures[texture]

    def _texture(self, file_name: str, data: bytes, digest: str) -> Path:
        """Write an in-memory texture once per content into ``textures/``."""
        if digest not in self._texture_files:
            path = self.out_dir / "textures" / file_name
            self._texture_names.add(Path(file_name).stem)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            self._textures.append(path)
            self._texture_files[digest] = path
        return self._texture_files[digest]

    def _robot_look(self, material: Material) -> Sdf.Path:
        """``/<robot>/Looks/<name>`` for a source material (defined once, referencing /Materials)."""
        return self._robot_look_for(material.color, None, material.name or "material", material.texture)

    def _robot_look_for(self, color: tuple | None, image: Any, hint: str, texture: Path | None = None) -> Sdf.Path:
        name = self._material(color, texture=texture, image=image, hint=hint)
        if name not in self._robot_looks:
            path = self.root.AppendChild("Looks").AppendChild(name)
            layer = self.layers.layer("materials")
            sdf.prim(layer, path.GetParentPath(), "Scope")
            self.layers.reference(sdf.prim(layer, path, "Material"), "materials", "materials",
                                  Sdf.Path("/Materials").AppendChild(name))
            self._robot_looks[name] = path
        return self._robot_looks[name]

    def _bind_shape_material(self, spec: Sdf.PrimSpec, shape: Shape) -> None:
        # A source material on the shape overrides the mesh file's own materials (strongerThanDescendants).
        if shape.material is not None and not shape.collision:
            sdf.bind_material(spec, self._robot_look(shape.material), stronger=True)

    # ---- joints ---------------------------------------------------------------------------------------------

    def _joints(self) -> None:
        scope = self.root.AppendChild("joints")
        self.layers.spec("physics", scope, "Scope")
        taken: set[str] = set()
        links = {link.name: link for link in self.robot.links}
        for joint in self.robot.joints:
            self.joint_paths[joint.name] = scope.AppendChild(unique_name(joint.name, taken))
        for joint in self.robot.joints:
            self._joint(self.joint_paths[joint.name], joint, links)
        if self.robot.fixed_base:
            jointed_to_world = {joint.child for joint in self.robot.joints if joint.parent is None}
            roots = self._tree_roots()
            for root in roots:
                if root in jointed_to_world:
                    continue
                name = "fixed_base" if root == roots[0] else f"fixed_base_{root}"
                spec = self.layers.spec("physics", scope.AppendChild(unique_name(name, taken)), "PhysicsFixedJoint")
                sdf.relationship(spec, "physics:body1", [self.link_paths[root]])
                pose = links[root].pose
                sdf.attribute(spec, "physics:localPos0", T.Point3f, _vec3f(pose[:3, 3]))
                sdf.attribute(spec, "physics:localRot0", T.Quatf, sdf.quatf(pose[:3, :3]))
                sdf.attribute(spec, "physics:localPos1", T.Point3f, Gf.Vec3f(0.0, 0.0, 0.0))
                sdf.attribute(spec, "physics:localRot1", T.Quatf, Gf.Quatf(1.0))

    def _joint(self, path: Sdf.Path, joint: Joint, links: dict[str, Link]) -> None:
        child = links[joint.child]
        alignment = np.eye(4)
        k = 0
        if joint.kind in ("revolute", "continuous", "prismatic", "planar", "spherical"):
            k, rotation = axis_alignment(joint.axis)
            alignment[:3, :3] = rotation
        spec = self.layers.spec("physics", path, _JOINT_TYPES[joint.kind])
        _source_name(spec, joint.name)
        frame1 = joint.frame_in_child @ alignment
        world = child.pose @ frame1
        if joint.parent is not None:
            frame0 = joint.frame_in_parent @ alignment
            drift = np.abs(links[joint.parent].pose @ frame0 - world).max()
            if drift > _FRAME_TOLERANCE * max(1.0, np.abs(world[:3, 3]).max()):
                raise ValueError(f"joint {joint.name}: the frames in parent and child disagree at rest by {drift:g}")
            sdf.relationship(spec, "physics:body0", [self.link_paths[joint.parent]])
        else:
            frame0 = world
        sdf.relationship(spec, "physics:body1", [self.link_paths[joint.child]])
        sdf.attribute(spec, "physics:localPos0", T.Point3f, _vec3f(frame0[:3, 3]))
        sdf.attribute(spec, "physics:localRot0", T.Quatf, sdf.quatf(frame0[:3, :3]))
        sdf.attribute(spec, "physics:localPos1", T.Point3f, _vec3f(frame1[:3, 3]))
        sdf.attribute(spec, "physics:localRot1", T.Quatf, sdf.quatf(frame1[:3, :3]))
        if joint.exclude_from_articulation:
            sdf.attribute(spec, "physics:excludeFromArticulation", T.Bool, True, uniform=True)
        angular = joint.kind in ("revolute", "continuous")
        if joint.kind in ("revolute", "continuous", "prismatic", "spherical"):
            sdf.attribute(spec, "physics:axis", T.Token, _AXES[k], uniform=True)
        if joint.kind in ("revolute", "prismatic"):
            convert = radians_to_degrees if angular else float
            if joint.lower is not None:
                sdf.attribute(spec, "physics:lowerLimit", T.Float, float(convert(joint.lower)))
            if joint.upper is not None:
                sdf.attribute(spec, "physics:upperLimit", T.Float, float(convert(joint.upper)))
        if joint.kind == "planar":
            # Free: the two in-plane translations and the rotation about the normal (axis k).
            locked = [f"trans{_AXES[k]}"] + [f"rot{_AXES[i]}" for i in range(3) if i != k]
            sdf.apply_schemas(spec, *(f"PhysicsLimitAPI:{dof}" for dof in locked))
            for dof in locked:  # low > high locks the DoF
                sdf.attribute(spec, f"limit:{dof}:physics:low", T.Float, 1.0)
                sdf.attribute(spec, f"limit:{dof}:physics:high", T.Float, -1.0)
        if joint.kind in ("revolute", "continuous", "prismatic"):
            self._drive(spec, joint, "angular" if angular else "linear")
            self._engine_joint_attributes(path, joint, angular, k)
        sdf.custom_attributes(spec, joint.custom)

    def _drive(self, spec: Sdf.PrimSpec, joint: Joint, axis: str) -> None:
        drive = joint.drive
        if drive is None and joint.effort is None:
            return
        sdf.apply_schemas(spec, f"PhysicsDriveAPI:{axis}")
        prefix = f"drive:{axis}:physics:"
        gain = per_radian_to_per_degree if axis == "angular" else float
        if drive is not None:
            if drive.kind is not None:
                sdf.attribute(spec, prefix + "type", T.Token, drive.kind, uniform=True)
            if drive.stiffness is not None:
                sdf.attribute(spec, prefix + "stiffness", T.Float, float(gain(drive.stiffness)))
            if drive.damping is not None:
                sdf.attribute(spec, prefix + "damping", T.Float, float(gain(drive.damping)))
        if joint.effort is not None:
            sdf.attribute(spec, prefix + "maxForce", T.Float, float(joint.effort))

    def _engine_joint_attributes(self, path: Sdf.Path, joint: Joint, angular: bool, k: int) -> None:
        """Mimic couplings and the joint data UsdPhysics has no attribute for, per engine layer."""
        if joint.mimic is not None and joint.mimic.joint in self.joint_paths:
            leader = self.joint_paths[joint.mimic.joint]
            physics = self.layers.over("physics", path)
            sdf.relationship(physics, "usdforge:mimic:joint", [leader], custom=True)
            sdf.attribute(physics, "usdforge:mimic:multiplier", T.Double, float(joint.mimic.multiplier), custom=True)
            sdf.attribute(physics, "usdforge:mimic:offset", T.Double, float(joint.mimic.offset), custom=True)
            leader_joint = next(j for j in self.robot.joints if j.name == joint.mimic.joint)
            instance = ("rot" if angular else "trans") + _AXES[k]
            leader_instance = ("rot" if leader_joint.kind in ("revolute", "continuous") else "trans") + \
                _AXES[axis_alignment(leader_joint.axis)[0]]
            physx = self.layers.over("physx", path)
            sdf.apply_schemas(physx, f"PhysxMimicJointAPI:{instance}")
            # PhysX: q + gearing * q_reference + offset = 0.
            sdf.relationship(physx, f"physxMimicJoint:{instance}:referenceJoint", [leader])
            sdf.attribute(physx, f"physxMimicJoint:{instance}:referenceJointAxis", T.Token, leader_instance,
                          uniform=True)
            sdf.attribute(physx, f"physxMimicJoint:{instance}:gearing", T.Float, float(-joint.mimic.multiplier))
            sdf.attribute(physx, f"physxMimicJoint:{instance}:offset", T.Float, float(-joint.mimic.offset))
            newton = self.layers.over("newton", path)
            sdf.apply_schemas(newton, "NewtonMimicAPI")
            # Newton: q = coef0 + coef1 * q_leader, coef0 in the follower's USD units (degrees if angular).
            sdf.relationship(newton, "newton:mimicJoint", [leader])
            sdf.attribute(newton, "newton:mimicCoef0", T.Float,
                          float(radians_to_degrees(joint.mimic.offset) if angular else joint.mimic.offset))
            sdf.attribute(newton, "newton:mimicCoef1", T.Float, float(joint.mimic.multiplier))
            sdf.attribute(newton, "newton:mimicEnabled", T.Bool, True)
        physx_values = {}
        if joint.velocity is not None:
            physx_values["physxJoint:maxJointVelocity"] = float(radians_to_degrees(joint.velocity) if angular
                                                                else joint.velocity)
        if joint.friction is not None:
            physx_values["physxJoint:jointFriction"] = float(joint.friction)
        if joint.armature is not None:
            physx_values["physxJoint:armature"] = float(joint.armature)
        if physx_values:
            physx = self.layers.over("physx", path)
            sdf.apply_schemas(physx, "PhysxJointAPI")
            for name, value in physx_values.items():
                sdf.attribute(physx, name, T.Float, value)
        mujoco = {}
        if joint.damping is not None:
            mujoco["mjc:damping"] = float(joint.damping)
        if joint.friction is not None:
            mujoco["mjc:frictionloss"] = float(joint.friction)
        if joint.armature is not None:
            mujoco["mjc:armature"] = float(joint.armature)
        if joint.stiffness is not None:
            mujoco["mjc:stiffness"] = float(joint.stiffness)
        if joint.effort is not None:
            mujoco["mjc:actuatorfrcrange:min"] = -float(joint.effort)
            mujoco["mjc:actuatorfrcrange:max"] = float(joint.effort)
        if mujoco:
            spec = self.layers.over("mujoco", path)
            sdf.apply_schemas(spec, "MjcJointAPI")
            for name, value in mujoco.items():
                sdf.attribute(spec, name, T.Double, value)
            if joint.effort is not None:
                sdf.attribute(spec, "mjc:actuatorfrclimited", T.Token, "true", uniform=True)

    # ---- articulations ------------------------------------------------------------------------------------------

    def _trees(self) -> list[list[str]]:
        """The bodies of each tree (connected by joints), in link order; each list starts with its root."""
        parent_of = {j.child: j.parent for j in self.robot.joints if j.parent is not None}

        def root_of(name: str) -> str:
            while name in parent_of:
                name = parent_of[name]
            return name

        trees: dict[str, list[str]] = {}
        for link in self.robot.links:
            trees.setdefault(root_of(link.name), []).append(link.name)
        return list(trees.values())

    def _tree_roots(self) -> list[str]:
        """Each tree's articulation root: ``robot.articulation_root`` in its tree, else the tree's root."""
        return [self.robot.articulation_root if self.robot.articulation_root in tree else tree[0]
                for tree in self._trees()]

    def _articulations(self) -> None:
        jointed = {j.child for j in self.robot.joints} | {j.parent for j in self.robot.joints if j.parent}
        for root, tree in zip(self._tree_roots(), self._trees()):
            if not (self.robot.fixed_base or any(name in jointed for name in tree)):
                continue  # a lone free body is no articulation
            sdf.apply_schemas(self.layers.over("physics", self.link_paths[root]), "PhysicsArticulationRootAPI")
            physx = self.layers.over("physx", self.link_paths[root])
            sdf.apply_schemas(physx, "PhysxArticulationAPI")
            sdf.attribute(physx, "physxArticulation:enabledSelfCollisions", T.Bool, bool(self.options.self_collision))

    def _robot_schema(self, root: Sdf.PrimSpec) -> None:
        """Isaac Sim's robot schema: type, namespace, and every link and joint of the robot."""
        sdf.apply_schemas(root, "IsaacRobotAPI")
        sdf.attribute(root, "isaac:robotType", T.Token, self.options.robot_type)
        sdf.attribute(root, "isaac:namespace", T.String, self.robot.name)
        sdf.relationship(root, "isaac:physics:robotLinks", list(self.link_paths.values()))
        sdf.relationship(root, "isaac:physics:robotJoints", list(self.joint_paths.values()))


def _concatenate(parts: list[MeshPart]) -> MeshPart:
    """Parts as one mesh (normals and UVs kept only when every part has them in the same layout)."""
    offsets = np.cumsum([0] + [len(p.points) for p in parts])
    faces = np.concatenate([p.faces + offset for p, offset in zip(parts, offsets)])
    normals, normal_indices = None, None
    if all(p.normals is not None and p.normal_indices is not None for p in parts):
        normal_offsets = np.cumsum([0] + [len(p.normals) for p in parts])
        normals = np.concatenate([p.normals for p in parts])
        normal_indices = np.concatenate([p.normal_indices + offset for p, offset in zip(parts, normal_offsets)])
    elif all(p.normals is not None for p in parts):
        normals = np.concatenate([p.face_varying_normals() for p in parts])
    uv = None
    if all(p.uv is not None and len(p.uv) == 3 * len(p.faces) for p in parts):
        uv = np.concatenate([p.uv for p in parts])
    colors = np.concatenate([p.colors for p in parts]) if all(p.colors is not None for p in parts) else None
    first = parts[0]
    return MeshPart(first.name, np.concatenate([p.points for p in parts]), faces, normals, uv, colors,
                    first.color, first.texture, first.image, normal_indices)


def _color_key(color: tuple | None) -> tuple | None:
    return None if color is None else tuple(round(float(c), 6) for c in color)


def _image_key(image: Any) -> str | None:
    if image is None:
        return None
    return hashlib.sha256(image.tobytes()).hexdigest()


def _material_key(material: Material | None) -> tuple | None:
    if material is None:
        return None
    return (material.name, _color_key(material.color), str(material.texture) if material.texture else None)

