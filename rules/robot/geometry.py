"""A robot's shapes: primitives, mesh shapes referencing ``/Prototypes/<mesh>`` (geometry layer, one per
mesh file and scale, with its parts' own materials), colliders (``CollisionAPI``, ``MeshCollisionAPI``),
merged visual meshes, and convex decomposition with CoACD when asked for.

With a build cache (``meshes.mesh_cache``) and layered output, the geometry layer is an artifact of its
own: a cfg edit that leaves the prototypes alone copies the cached layer in instead of authoring it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pxr import Sdf

from usdforge.rules.conversion_warnings import warn
from usdforge.rules.robot.layers import RobotLayers
from usdforge.rules.robot.materials import Materials, color_key, image_key, material_key
from usdforge.rules.robot.meshes import MeshLibrary, MeshPart, active_mesh_cache
from usdforge.rules.robot.model import Link, Material, Shape
from usdforge.rules.usd import layer as sdf
from usdforge.rules.usd.stage import unique_name
from usdforge.rules.versions import distribution_version

if TYPE_CHECKING:
    import trimesh

T = Sdf.ValueTypeNames
_GEOMETRY_FILE = "geometry.usd"


@cache
def _geometry_code_stamp() -> str:
    """The code and library that turn prototypes into the geometry layer's bytes."""
    rules = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(distribution_version("usd-core").encode())
    for path in sorted([*(rules / "robot").glob("*.py"), *(rules / "usd").glob("*.py"), rules / "outputs.py"]):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def _ellipsoid(size) -> trimesh.Trimesh:
    """An icosphere (subdivided 3 times) scaled to the semi-axes ``size`` (3,) m."""
    import trimesh  # only robots with ellipsoids pay for it here

    return trimesh.creation.icosphere(subdivisions=3).apply_scale(np.asarray(size, float))


class Shapes:
    """Writes the shapes of a robot's links; ``options`` is the writer's ``RobotUsdOptions``."""

    def __init__(self, layers: RobotLayers, options, meshes: MeshLibrary, materials: Materials, source: Path,
                 geometry: bool = False, collider_options=None):
        """geometry: the geometry layer is restored (``RobotLayers.restored``): prototypes are named, not
        authored. collider_options: the options the colliders (physics layer) are authored with (default
        ``options``): the physics layer's view, which alone sees the approximation token."""
        self.layers = layers
        self.options = options
        self.meshes = meshes
        self.materials = materials
        self.source = source
        self.colliders = Colliders(layers, options if collider_options is None else collider_options, meshes)
        self._prototypes: dict[tuple, tuple[Sdf.Path, list[str]]] = {}
        self._prototype_names: set[str] = set()
        self._decomposer_missing_warned = False
        self._restored_geometry = geometry
        #: Prototypes whose geometry-layer authoring waits for ``geometry_layer`` (layered output with a
        #: build cache: the layer may come from the cache), else None: authored at once.
        self._deferred: list[tuple] | None = [] if layers.layered and active_mesh_cache() is not None else None

    def shape(self, path: Sdf.Path, shape: Shape) -> None:
        g = shape.geometry
        if g.kind == "mesh":
            self._mesh_shape(path, shape)
            return
        if g.kind == "box":
            spec = self.layers.spec("instances", path, "Cube")
            sdf.attribute(spec, "size", T.Double, 1.0)
            sdf.xform(spec, shape.pose, g.size)
        elif g.kind == "sphere":
            spec = self.layers.spec("instances", path, "Sphere")
            sdf.attribute(spec, "radius", T.Double, float(g.radius))
            sdf.xform(spec, shape.pose)
        elif g.kind in ("cylinder", "capsule"):
            spec = self.layers.spec("instances", path, "Cylinder" if g.kind == "cylinder" else "Capsule")
            sdf.attribute(spec, "radius", T.Double, float(g.radius))
            sdf.attribute(spec, "height", T.Double, float(g.length))
            sdf.attribute(spec, "axis", T.Token, "Z", uniform=True)
            sdf.xform(spec, shape.pose)
        elif g.kind == "plane":
            spec = self.layers.spec("instances", path, "Plane")
            # MJCF: size = half extents, 0 for infinite (a large finite plane stands in).
            width, length = (2.0 * s if s > 0 else 1000.0 for s in (tuple(g.size) + (0.0, 0.0))[:2])
            sdf.attribute(spec, "width", T.Double, float(width))
            sdf.attribute(spec, "length", T.Double, float(length))
            sdf.attribute(spec, "axis", T.Token, "Z", uniform=True)
            sdf.xform(spec, shape.pose)
        elif g.kind == "ellipsoid" or g.trimesh is not None:
            mesh = g.trimesh if g.trimesh is not None else _ellipsoid(g.size)
            spec = sdf.mesh(self.layers.layer("instances"), path, np.asarray(mesh.vertices), np.asarray(mesh.faces))
            sdf.xform(spec, shape.pose)
        else:
            raise ValueError(f"unknown geometry kind {g.kind!r}")
        sdf.custom_attributes(spec, shape.custom)
        self.materials.bind(spec, shape)
        if shape.collision:
            self.colliders.collider(path, shape)

    def _mesh_shape(self, path: Sdf.Path, shape: Shape) -> None:
        g = shape.geometry
        decompose = shape.collision and self.options.mesh_approximation == "convexDecomposition" \
            and self.options.decompose and self._decomposer() is not None
        prototype, parts = self._prototype(g.mesh, g.scale, decompose)
        spec = self.layers.spec("instances", path, "Xform")
        sdf.xform(spec, shape.pose)
        self.layers.reference(spec, "instances", "geometry", prototype)
        if not shape.collision and self.options.make_instanceable:
            sdf.set_instanceable(spec)
        sdf.custom_attributes(spec, shape.custom)
        self.materials.bind(spec, shape)
        if shape.collision:
            self.colliders.author(path, parts, "convexHull" if decompose else None)

    def merged_visuals(self, scope: Sdf.Path, link: Link, visuals: list[Shape]) -> None:
        """merge_mesh: one mesh per (shape material, part material) of the link's visual meshes."""
        groups: dict[tuple, list[tuple[Material | None, MeshPart]]] = {}
        names: set[str] = set()
        for shape in visuals:
            if shape.geometry.kind != "mesh":
                self.shape(scope.AppendChild(unique_name(shape.name, names)), shape)
                continue
            for part in self.meshes.parts(shape.geometry.mesh, shape.geometry.scale):
                key = (material_key(shape.material), color_key(part.color), str(part.texture), image_key(part.image))
                moved = part._replace(points=part.points @ shape.pose[:3, :3].T + shape.pose[:3, 3],
                                      normals=None if part.normals is None else part.normals @ shape.pose[:3, :3].T)
                groups.setdefault(key, []).append((shape.material, moved))
        for index, items in enumerate(groups.values()):
            material, parts = items[0][0], [part for _, part in items]
            merged = concatenate(parts)
            spec = sdf.mesh(self.layers.layer("instances"), scope.AppendChild(unique_name(f"merged_{index}", names)),
                            merged.points, merged.faces, normals=merged.normals, normal_indices=merged.normal_indices,
                            uv=merged.uv, colors=merged.colors)
            if material is not None:
                sdf.bind_material(spec, self.materials.look(material))
            elif merged.color is not None or merged.texture is not None or merged.image is not None:
                sdf.bind_material(spec, self.materials.look_for(merged.color, merged.image, f"{link.name}_material",
                                                             merged.texture))

    def _decomposer(self):
        try:
            import coacd  # noqa: PLC0415 - optional extra
        except ImportError:
            if not self._decomposer_missing_warned:
                self._decomposer_missing_warned = True
                warn(self.source, "convex decomposition asked for but CoACD is not installed (pip install "
                     "'usdforge[decomposition]'): physics:approximation = convexDecomposition is authored for the "
                     "engine to decompose")
            return None
        return coacd

    def _prototype(self, mesh: Path, scale: tuple[float, float, float], decompose: bool) -> tuple[Sdf.Path, list[str]]:
        """The ``/Prototypes/<name>`` prim of (file, scale[, decomposed]) and its part prim names."""
        key = (str(mesh), tuple(scale), decompose)
        if key in self._prototypes:
            return self._prototypes[key]
        name = unique_name(f"{Path(mesh).stem}_{Path(mesh).suffix.lstrip('.').lower()}"
                           + ("_convex" if decompose else ""), self._prototype_names)
        path = Sdf.Path("/Prototypes").AppendChild(name)
        parts = self.meshes.parts(mesh, scale)
        if decompose:
            parts = self._decompose(parts)
        part_names = prototype_part_names(parts)
        materials: list[str | None] = []
        for part, part_name in zip(parts, part_names):
            has_material = part.color is not None or part.texture is not None or part.image is not None
            materials.append(self.materials.material(part.color, part.texture, part.image,
                                                     f"{Path(mesh).stem}_{part_name}") if has_material else None)
        if self._restored_geometry:  # named only: the geometry layer's bytes come from the build cache
            self._prototypes[key] = (path, part_names)
            return self._prototypes[key]
        if self._deferred is None:
            self._author_prototype(path, parts, part_names, materials)
        else:
            self._deferred.append((path, parts, part_names, materials))
        self._prototypes[key] = (path, part_names)
        return self._prototypes[key]

    def _author_prototype(self, path: Sdf.Path, parts: list[MeshPart], part_names: list[str],
                          materials: list[str | None]) -> None:
        """Everything of one prototype in the geometry layer (the only writer of that layer)."""
        layer = self.layers.layer("geometry")
        sdf.prim(layer, Sdf.Path("/Prototypes"), specifier=Sdf.SpecifierClass)
        sdf.prim(layer, path, "Xform")
        for part, part_name, material in zip(parts, part_names, materials):
            spec = sdf.mesh(layer, path.AppendChild(part_name), part.points, part.faces, normals=part.normals,
                            normal_indices=part.normal_indices, uv=part.uv, colors=part.colors)
            if part.mass_model is not None:
                sdf.apply_schemas(spec, "NewtonMassAPI")
                sdf.attribute(spec, "newton:massModel", T.Token, part.mass_model, uniform=True)
            if material is not None:
                look = path.AppendChild("Looks").AppendChild(material)
                if layer.GetPrimAtPath(look) is None:
                    sdf.prim(layer, look.GetParentPath(), "Scope")
                    self.layers.reference(sdf.prim(layer, look, "Material"), "geometry", "materials",
                                          Sdf.Path("/Materials").AppendChild(material))
                sdf.bind_material(spec, look)

    def geometry_layer(self) -> tuple[bytes | None, Callable[[bytes], None] | None]:
        """The geometry layer, when its authoring was deferred (layered output inside ``mesh_cache``):
        (its bytes from the build cache, None) when the cache holds a layer authored from the same
        prototypes (names, materials and every array, hashed); else every prototype is authored now and
        (None, store) is returned, ``store(bytes)`` to be called with the saved file's bytes."""
        deferred, self._deferred = self._deferred, None
        active = active_mesh_cache()
        if not deferred or active is None:
            for item in deferred or []:
                self._author_prototype(*item)
            return None, None
        store = active[0]
        digest = hashlib.sha256(_geometry_code_stamp().encode())
        for path, parts, part_names, materials in deferred:
            digest.update(json.dumps([str(path), part_names, materials]).encode())
            for part in parts:
                for field in ("points", "faces", "normals", "normal_indices", "uv", "colors"):
                    value = getattr(part, field)
                    if value is None:
                        digest.update(f"{field}:none;".encode())
                    else:
                        value = np.ascontiguousarray(value)
                        digest.update(f"{field}:{value.dtype.str}:{value.shape};".encode())
                        digest.update(memoryview(value).cast("B"))
                if part.mass_model is not None:
                    digest.update(f"mass_model:{part.mass_model};".encode())
        key = digest.hexdigest()
        cached = store.get_entry(key)
        store.record("geometry-layer", hit=cached is not None)
        if cached is not None and _GEOMETRY_FILE in cached.files:
            return cached.files[_GEOMETRY_FILE], None
        for item in deferred:
            self._author_prototype(*item)
        return None, lambda data: store.put_entry(key, {_GEOMETRY_FILE: data}, kind="geometry-layer")

    def _decompose(self, parts: list[MeshPart]) -> list[MeshPart]:
        coacd = self._decomposer()
        whole = concatenate(parts)
        hulls = coacd.run_coacd(coacd.Mesh(np.asarray(whole.points), np.asarray(whole.faces)), seed=0)
        return [MeshPart(f"hull_{i}", np.asarray(vertices, float), np.asarray(faces, np.int64))
                for i, (vertices, faces) in enumerate(hulls)]


def prototype_part_names(parts: list[MeshPart]) -> list[str]:
    """The prim names of a prototype's parts (beside its ``Looks``)."""
    return unique_part_names([part.name for part in parts])


def unique_part_names(names: list[str]) -> list[str]:
    """The prim names of parts named ``names``, in a prototype beside its ``Looks``."""
    taken = {"Looks"}
    return [unique_name(name, taken) for name in names]


class Colliders:
    """``CollisionAPI`` (+ ``MeshCollisionAPI``) in the physics layer on the collider prims the shapes
    author makes: the physics layer's part of the shapes, which needs only the mesh parts' names."""

    def __init__(self, layers: RobotLayers, options, meshes: MeshLibrary):
        self.layers = layers
        self.options = options
        self.meshes = meshes

    def collider(self, path: Sdf.Path, shape: Shape) -> None:
        """The collider of ``shape`` at ``path`` (a mesh: one per part of its prototype, not decomposed;
        a decomposed one goes through ``Shapes``)."""
        g = shape.geometry
        if g.kind == "mesh":  # the parts' names alone (scale and arrays change none)
            self.author(path, unique_part_names(self.meshes.part_names(g.mesh)))
        else:
            self.author(path, ["."] if g.kind == "ellipsoid" or g.trimesh is not None else None)

    def author(self, path: Sdf.Path, mesh_parts: list[str] | None = None, approximation: str | None = None) -> None:
        """CollisionAPI on a primitive, or on each mesh part (+ MeshCollisionAPI approximation)."""
        if mesh_parts is None:
            sdf.apply_schemas(self.layers.over("physics", path), "PhysicsCollisionAPI")
            return
        for part in mesh_parts:
            spec = self.layers.over("physics", path if part == "." else path.AppendChild(part))
            sdf.apply_schemas(spec, "PhysicsCollisionAPI", "PhysicsMeshCollisionAPI")
            sdf.attribute(spec, "physics:approximation", T.Token, approximation or self.options.mesh_approximation,
                          uniform=True)


def concatenate(parts: list[MeshPart]) -> MeshPart:
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
