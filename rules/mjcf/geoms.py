"""MuJoCo geoms → the Robot's shapes: geometry, pose in the body, collider or visual, material.

Geometry is MuJoCo's compiled geometry (``fromto`` resolved, fitted geoms fitted, sizes from defaults):

- plane, sphere, capsule, cylinder, box → their USD primitives (capsule/cylinder along Z);
- ellipsoid → a tessellated mesh, MuJoCo's builtin icosphere scaled (UsdPhysics ignores a non-uniform sphere scale);
- mesh → MuJoCo's compiled mesh (its reading of the file, ``scale`` applied, a mirrored one re-wound,
  in MuJoCo's mesh frame with the compiled geom pose), once per mesh asset however many geoms use it;
  a binary STL that only massless visual geoms use is not compiled (``rules.mjcf.visual_meshes``): its
  file, read as URDF meshes are, scaled, with the normals MuJoCo would give it, at the compiled pose with
  MuJoCo's stand-in frame taken out;
- hfield → a closed triangle mesh of MuJoCo's compiled elevation grid, its walls and base;
- sdf → its mesh (the one MuJoCo renders, made by the SDF plugin), visual and collider; the plugin and
  its configuration are kept as ``mjcf:sdf:*`` data (``rules.mjcf.lost``), with a warning.

A geom is a collider when MuJoCo collides with it (contype or conaffinity non-zero), or every geom with
``collision_from_visuals``. Colliders are hidden (purpose guide), so a collider MuJoCo also renders (groups
0–2) gets a visual shape too; a collider in groups 3–5, hidden in MuJoCo, is a collider only. Colours and textures come from the MuJoCo material (or the geom's ``rgba``);
a builtin (procedural) texture is written as a PNG from MuJoCo's compiled texels.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import NamedTuple

import attrs
import mujoco
import numpy as np

from usdforge.rules.mjcf.bodies import BodyMap, massless_inertial, pose_matrix
from usdforge.rules.mjcf.load import LoadedModel, model_path
from usdforge.rules.mjcf.visual_meshes import VisualMesh, file_pose, mujoco_normals
from usdforge.rules.robot.meshes import MeshLibrary, MeshPart
from usdforge.rules.robot.model import Geometry, Link, Material, Robot, Shape
from usdforge.rules.usd.stage import unique, usd_identifier

#: MuJoCo's default geom colour: a geom with a material shows the material's colour unless its own
#: ``rgba`` differs from this.
DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)
#: MuJoCo groups rendered by default (0, 1, 2); geoms in groups 3–5 are hidden unless asked for.
VISIBLE_GROUPS = (0, 1, 2)

_GEOM = mujoco.mjtGeom
PLANE, HFIELD, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH = (
    int(_GEOM.mjGEOM_PLANE), int(_GEOM.mjGEOM_HFIELD), int(_GEOM.mjGEOM_SPHERE), int(_GEOM.mjGEOM_CAPSULE),
    int(_GEOM.mjGEOM_ELLIPSOID), int(_GEOM.mjGEOM_CYLINDER), int(_GEOM.mjGEOM_BOX), int(_GEOM.mjGEOM_MESH))
SDF = int(_GEOM.mjGEOM_SDF)
_RGB_ROLE = int(mujoco.mjtTextureRole.mjTEXROLE_RGB)


@attrs.define
class GeomMap:
    """Where each MuJoCo geom went (built by ``read_geoms``).

    collider: geom id → (link name, shape name) of its collider shape.
    visual: geom id → (link name, shape name) of its visual shape.
    """

    collider: dict[int, tuple[str, str]] = attrs.field(factory=dict)
    visual: dict[int, tuple[str, str]] = attrs.field(factory=dict)




class Surface(NamedTuple):
    """An in-memory triangle surface (``Geometry.trimesh``): vertices (V, 3) m, faces (F, 3)."""

    vertices: np.ndarray
    faces: np.ndarray


@cache
def _unit_sphere() -> Surface:
    """MuJoCo's builtin icosphere of radius 1, subdivided 3 times (642 vertices, 1280 outward triangles)."""
    mesh = mujoco.MjSpec().add_mesh(name="sphere")
    mesh.make_sphere(subdivision=3)
    return Surface(np.asarray(mesh.uservert, dtype=np.float64).reshape(-1, 3),
                   np.asarray(mesh.userface, dtype=np.int64).reshape(-1, 3))


def ellipsoid_surface(radii: tuple[float, ...]) -> Surface:
    """An ellipsoid with semi-axes ``radii`` (3,) m: the unit icosphere scaled (UsdPhysics ignores a
    non-uniform scale on a sphere, so the writer gets triangles)."""
    sphere = _unit_sphere()
    return Surface(sphere.vertices * np.asarray(radii, dtype=np.float64), sphere.faces.copy())


def hfield_mesh(model: mujoco.MjModel, hfield: int) -> Surface:
    """The height field as MuJoCo's solid: the top surface (MuJoCo's grid, x across columns and y across
    rows, spanning ±size[0] × ±size[1] m, heights = elevation (0..1) × size[2] m), walls down to the base
    at -size[3] m and the base, all outward. A closed surface has a volume, so MuJoCo's USD decoder accepts
    it even where the terrain is flat (an open sheet has none: "mesh volume is too small")."""
    rows, cols = int(model.hfield_nrow[hfield]), int(model.hfield_ncol[hfield])
    sx, sy, sz, base = (float(v) for v in model.hfield_size[hfield])
    start = model.hfield_adr[hfield]
    heights = np.asarray(model.hfield_data[start:start + rows * cols], dtype=np.float64).reshape(rows, cols)
    x = np.linspace(-sx, sx, cols)
    y = np.linspace(-sy, sy, rows)
    grid_x, grid_y = np.meshgrid(x, y)
    top = np.stack([grid_x, grid_y, heights * sz], axis=-1).reshape(-1, 3)
    index = np.arange(rows * cols).reshape(rows, cols)
    a, b, c, d = index[:-1, :-1], index[:-1, 1:], index[1:, :-1], index[1:, 1:]
    faces = [np.stack([a, b, d], -1).reshape(-1, 3), np.stack([a, d, c], -1).reshape(-1, 3)]
    # The boundary, counter-clockwise seen from above, and a base vertex under each of its vertices.
    ring = np.concatenate([index[0, :-1], index[:-1, -1], index[-1, :0:-1], index[:0:-1, 0]])
    below = top[ring] * np.array([1.0, 1.0, 0.0]) - np.array([0.0, 0.0, base])
    under = rows * cols + np.arange(len(ring))
    centre = rows * cols + len(ring)
    p, q = ring, np.roll(ring, -1)
    p_, q_ = under, np.roll(under, -1)
    faces += [np.stack([p, p_, q_], -1), np.stack([p, q_, q], -1),
              np.stack([np.full_like(p_, centre), q_, p_], -1)]
    vertices = np.concatenate([top, below, [[0.0, 0.0, -base]]])
    return Surface(vertices, np.concatenate(faces).astype(np.int64))


def texture_png(model: mujoco.MjModel, texture: int, path: Path) -> Path:
    """Write MuJoCo's compiled texels of ``texture`` (builtin or file) as a PNG at ``path``."""
    from PIL import Image

    width, height, channels = (int(model.tex_width[texture]), int(model.tex_height[texture]),
                               int(model.tex_nchannel[texture]))
    start = model.tex_adr[texture]
    texels = np.asarray(model.tex_data[start:start + width * height * channels], dtype=np.uint8)
    mode = {1: "L", 3: "RGB", 4: "RGBA"}[channels]
    image = Image.fromarray(texels.reshape(height, width, channels).squeeze(), mode)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG")
    return path


class MaterialLibrary:
    """One ``Material`` per distinct (MuJoCo material, colour): shapes sharing one share the object."""

    def __init__(self, loaded: LoadedModel, texture_dir: Callable[[], Path]):
        self.loaded = loaded
        self.texture_dir = texture_dir
        self._materials: dict[tuple[int, tuple[float, ...]], Material] = {}
        self._textures: dict[int, Path | None] = {}

    def texture(self, texture: int) -> Path | None:
        """The image file of a MuJoCo texture: its own file for a 2D file texture, else a PNG of MuJoCo's
        texels written under ``texture_dir()`` (a scratch folder, made on its first call)."""
        if texture not in self._textures:
            model = self.loaded.model
            file = self.loaded.texture_files.get(texture) or model_path(model, int(model.tex_pathadr[texture]))
            if file is not None and int(model.tex_type[texture]) == int(mujoco.mjtTexture.mjTEXTURE_2D):
                self._textures[texture] = file
            else:
                name = model.texture(texture).name or f"texture{texture}"
                self._textures[texture] = texture_png(model, texture, self.texture_dir() / f"{name}.png")
        return self._textures[texture]

    def material(self, geom: int) -> Material | None:
        """The material of a geom: MuJoCo's material (colour and 2D texture) or the geom's own ``rgba``."""
        model = self.loaded.model
        material = int(model.geom_matid[geom])
        rgba = tuple(float(v) for v in model.geom_rgba[geom])
        if material >= 0 and np.allclose(rgba, DEFAULT_RGBA):
            rgba = tuple(float(v) for v in model.mat_rgba[material])
        key = (material, tuple(round(v, 6) for v in rgba))
        if key not in self._materials:
            texture_id = int(model.mat_texid[material, _RGB_ROLE]) if material >= 0 else -1
            texture = self.texture(texture_id) if texture_id >= 0 else None
            if material >= 0:
                name = model.material(material).name or f"material{material}"
            else:
                name = "rgba_" + "_".join(f"{round(v * 255):d}" for v in rgba)
            self._materials[key] = Material(name=name, color=rgba, texture=texture)
        return self._materials[key]


def mesh_part_name(model: mujoco.MjModel, mesh: int) -> str:
    """The name of ``mujoco_mesh_part``'s part (no array read)."""
    return model.mesh(mesh).name or f"mesh{mesh}"


def mujoco_mesh_part(model: mujoco.MjModel, mesh: int) -> MeshPart:
    """MuJoCo's compiled mesh as a mesh part: vertices (scale applied, mirrored ones re-wound) in MuJoCo's
    mesh frame, triangles, MuJoCo's normals with its per-corner indices, and face-varying texture
    coordinates (MuJoCo stores v flipped; USD's ``st`` has v up, as OBJ files do)."""
    vertices = slice(model.mesh_vertadr[mesh], model.mesh_vertadr[mesh] + model.mesh_vertnum[mesh])
    faces = slice(model.mesh_faceadr[mesh], model.mesh_faceadr[mesh] + model.mesh_facenum[mesh])
    normals = model.mesh_normal[model.mesh_normaladr[mesh]:model.mesh_normaladr[mesh] + model.mesh_normalnum[mesh]]
    part_normals, normal_indices = None, None
    if len(normals):
        part_normals = np.asarray(normals, dtype=np.float64)
        normal_indices = np.asarray(model.mesh_facenormal[faces], dtype=np.int64).reshape(-1)
    uv = None
    if model.mesh_texcoordnum[mesh] > 0:
        coordinates = np.asarray(model.mesh_texcoord[model.mesh_texcoordadr[mesh]:
                                                     model.mesh_texcoordadr[mesh] + model.mesh_texcoordnum[mesh]],
                                 dtype=np.float64)
        uv = coordinates[model.mesh_facetexcoord[faces].reshape(-1)]
        uv[:, 1] = 1.0 - uv[:, 1]
    name = mesh_part_name(model, mesh)
    return MeshPart(name, np.asarray(model.mesh_vert[vertices], dtype=np.float64),
                    np.asarray(model.mesh_face[faces], dtype=np.int64), normals=part_normals, uv=uv,
                    normal_indices=normal_indices)


def geom_geometry(loaded: LoadedModel, geom: int, meshes: dict[int, Geometry],
                  library: MeshLibrary, files: MeshLibrary) -> tuple[Geometry, np.ndarray]:
    """The Robot geometry of a geom and the (4, 4) pose that places it in its body. Mesh and height-field
    geometry is handed to ``library`` (the shared writer's) under a key path per MuJoCo asset; ``files``
    reads the files of set-aside meshes (``rules.mjcf.visual_meshes``)."""
    model = loaded.model
    kind = int(model.geom_type[geom])
    size = np.asarray(model.geom_size[geom], dtype=np.float64)
    pose = pose_matrix(model.geom_pos[geom], model.geom_quat[geom])
    if kind == PLANE:
        return Geometry(kind="plane", size=(float(size[0]), float(size[1]))), pose
    if kind == SPHERE:
        return Geometry(kind="sphere", radius=float(size[0])), pose
    if kind == CAPSULE:
        return Geometry(kind="capsule", radius=float(size[0]), length=2.0 * float(size[1])), pose
    if kind == CYLINDER:
        return Geometry(kind="cylinder", radius=float(size[0]), length=2.0 * float(size[1])), pose
    if kind == BOX:
        return Geometry(kind="box", size=tuple(2.0 * float(v) for v in size)), pose
    if kind == ELLIPSOID:
        radii = tuple(float(v) for v in size)
        return Geometry(kind="ellipsoid", size=radii, trimesh=ellipsoid_surface(radii)), pose
    if kind == HFIELD:
        hfield = int(model.geom_dataid[geom])
        if -1 - hfield not in meshes:  # height fields keyed apart from meshes: -1, -2, …
            name = usd_identifier(model.hfield(hfield).name or f"hfield{hfield}")
            key = Path(loaded.path).parent / f"{name}.hfield"
            surface = hfield_mesh(model, hfield)
            library.provide(key, [MeshPart(name, np.asarray(surface.vertices), np.asarray(surface.faces))])
            meshes[-1 - hfield] = Geometry(kind="mesh", mesh=key)
        return meshes[-1 - hfield], pose
    if kind == SDF and int(model.geom_dataid[geom]) < 0:
        from usdforge.rules.errors import ConversionError
        name = model.geom(geom).name or f"geom {geom} of body '{model.body(int(model.geom_bodyid[geom])).name}'"
        raise ConversionError(loaded.path, f"SDF geom '{name}' has no mesh to write it as (USD has no signed "
                              "distance field geometry): give it mesh=\"...\"", f"<geom name=\"{name}\">")
    if kind in (MESH, SDF):  # an SDF geom is written as its (plugin-made) mesh
        mesh = int(model.geom_dataid[geom])
        visual = loaded.visual_meshes.get(model.mesh(mesh).name)
        if visual is not None:  # compiled as a stand-in: the file, read as URDF meshes are
            return _visual_mesh(loaded, mesh, visual, meshes, library, files), \
                file_pose(pose, model.mesh_pos[mesh], model.mesh_quat[mesh])
        if mesh not in meshes:
            # MuJoCo's own reading of the file (or of the MJCF's vertices): what it simulates, and read
            # once already. Its vertices sit in the mesh's inertial frame, as the compiled geom pose expects.
            file = loaded.trimesh_meshes.get(model.mesh(mesh).name) or model_path(model, int(model.mesh_pathadr[mesh]))
            name = usd_identifier(mesh_part_name(model, mesh))
            key = (file.parent / f"{name}{file.suffix}") if file is not None else \
                Path(loaded.path).parent / f"{name}.mesh"
            shell = int(loaded.spec.meshes[mesh].inertia) == int(mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL)

            def parts(mesh: int = mesh, shell: bool = shell) -> list[MeshPart]:
                part = mujoco_mesh_part(model, mesh)  # the arrays are read only when the shapes are authored
                return [part._replace(mass_model="shell") if shell else part]  # on every geom using it

            library.provide_lazy(key, [mesh_part_name(model, mesh)], parts)
            meshes[mesh] = Geometry(kind="mesh", mesh=key)
        return meshes[mesh], pose
    raise ValueError(f"geom type {kind} has no USD geometry")


def _visual_mesh(loaded: LoadedModel, mesh: int, visual: VisualMesh, meshes: dict[int, Geometry],
                 library: MeshLibrary, files: MeshLibrary) -> Geometry:
    """The geometry of a set-aside mesh asset (``rules.mjcf.visual_meshes``): its file's parts as ``files``
    reads them (the build cache's, or the reading child's), scaled, named and keyed in ``library`` as
    MuJoCo's compiled mesh of that asset is (``mujoco_mesh_part``), so the USD names do not change."""
    if mesh not in meshes:
        part_name = mesh_part_name(loaded.model, mesh)
        key = visual.file.parent / f"{usd_identifier(part_name)}{visual.file.suffix}"
        asset = loaded.spec.meshes[mesh]
        shell = int(asset.inertia) == int(mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL)
        smooth = bool(asset.smoothnormal)

        def parts(file: Path = visual.file, scale: tuple = visual.scale, shell: bool = shell) -> list[MeshPart]:
            # A binary STL is one part (``rules.robot.meshes.read_file``); read only when the shapes are
            # authored, so a rebuild that restores them reads nothing. Its normals are those MuJoCo's
            # compile would give it, indexed by the corners as ``mujoco_mesh_part``'s are.
            return [part._replace(name=part_name if index == 0 else f"{part_name}_{index}",
                                  mass_model="shell" if shell else part.mass_model,
                                  normals=mujoco_normals(part.points, part.faces, smooth, scale),
                                  normal_indices=part.faces.reshape(-1))
                    for index, part in enumerate(files.parts(file, scale))]

        library.provide_lazy(key, [part_name], parts)
        meshes[mesh] = Geometry(kind="mesh", mesh=key)
    return meshes[mesh]


def is_collider(model: mujoco.MjModel, geom: int, collision_from_visuals: bool) -> bool:
    """Whether MuJoCo collides with the geom (contype or conaffinity non-zero), or all with the flag."""
    return collision_from_visuals or bool(model.geom_contype[geom] or model.geom_conaffinity[geom])


def read_geoms(loaded: LoadedModel, robot: Robot, bodies: BodyMap, texture_dir: Callable[[], Path],
               library: MeshLibrary, collision_from_visuals: bool = False) -> GeomMap:
    """Add a shape for every geom to the link of its body; return where each geom went.

    Mesh geometry is MuJoCo's compiled meshes, given to ``library`` (the writer's MeshLibrary). Builtin
    textures are written as PNGs under ``texture_dir()``, a scratch folder the writer copies from (made on
    the first call: most models have no builtin texture).
    """
    model = loaded.model
    links = {link.name: link for link in robot.links}
    materials = MaterialLibrary(loaded, texture_dir)
    meshes: dict[int, Geometry] = {}
    files = MeshLibrary()  # reads the set-aside meshes' files (each once, baked once per scale)
    geoms = GeomMap()
    taken: dict[str, set[str]] = {}
    for geom in range(model.ngeom):
        body = int(model.geom_bodyid[geom])
        link_name = bodies.link_of_body.get(body)
        if link_name is None:
            continue
        geometry, pose = geom_geometry(loaded, geom, meshes, library, files)
        # A geom's visual and collider shapes share its name: they live in separate scopes.
        name = unique(model.geom(geom).name or f"geom{geom - model.body_geomadr[body]}",
                       taken.setdefault(link_name, set()))
        material = materials.material(geom)
        collider = is_collider(model, geom, collision_from_visuals)
        if not collider or int(model.geom_group[geom]) in VISIBLE_GROUPS:
            links[link_name].shapes.append(Shape(name=name, geometry=geometry, pose=pose, material=material))
            geoms.visual[geom] = (link_name, name)
        if collider and geometry.kind == "plane" and link_name not in bodies.static:
            # A plane collider cannot sit on a rigid body in UsdPhysics; MuJoCo puts planes on world-welded
            # bodies only, so on a fixed base it moves, unchanged in the world, to the static world link.
            world = _world_link(robot, bodies, links)
            pose = links[link_name].pose @ pose
            link_name = world.name
            name = unique(name, taken.setdefault(link_name, set()))
        if collider:
            links[link_name].shapes.append(Shape(name=name, geometry=geometry, pose=pose, collision=True,
                                                 material=material))
            geoms.collider[geom] = (link_name, name)
    return geoms


def _world_link(robot: Robot, bodies: BodyMap, links: dict[str, Link]) -> Link:
    """The static world link, added (first) when the model had none."""
    if 0 not in bodies.link_of_body:
        taken = set(links)
        name = unique("world", taken)
        link = Link(name=name, pose=np.eye(4), inertial=massless_inertial())
        robot.links.insert(0, link)
        links[name] = link
        bodies.link_of_body[0] = name
        bodies.static.add(name)
    return links[bodies.link_of_body[0]]

