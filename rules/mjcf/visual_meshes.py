"""Visual-only mesh geoms read from their files, not compiled by MuJoCo.

MuJoCo's compile of a mesh (decoding it, its bounding-volume tree, its inertia) is most of an MJCF
conversion of a robot with many visual meshes (unitree_h1: 21 STL meshes, about 20 ms each), and the
compiled model of a mesh that only a visual geom uses decides nothing the converter reads but that mesh's
triangles: such a geom collides with nothing and adds no mass. Before the compile, each such mesh asset
gets a stand-in in the spec (a small tetrahedron given as vertices: MuJoCo compiles it in microseconds),
so every element keeps its id and name; the geoms are authored from the mesh file, read by the reader
URDF meshes use (``rules.robot.meshes``: Assimp, trimesh as its fallback), with the asset's ``scale``,
and given the normals MuJoCo's compile would give them (``mujoco_normals``), so they shade alike.

Where a mesh goes: MuJoCo moves a compiled mesh's vertices into the mesh's own inertial frame F (stored as
``mesh_pos``/``mesh_quat``) and composes F into the pose of every geom using it (compiled pose = source
pose · F). The file's vertices are not moved, so a geom's file pose is its compiled pose · F⁻¹, with F
the stand-in's: the world-space triangles are MuJoCo's own (tested against a full compile to 1e-6).

A mesh asset is set aside only when all of this holds (anything else compiles as before; the choice
depends on the model's files alone, so it is part of every cache key that hashes them and this code):

- a binary STL file with finite corners (what MuJoCo's decoder reads; an ASCII STL, or one with a
  non-finite corner, is left to MuJoCo's error and the repair path, as before), a regular
  file inside the model's roots, found through ``meshdir`` of the model itself: no ``strippath``, no
  attached sub-model (``<model file>``, whose files resolve from another folder), no ``content_type``;
- ``scale`` positive, no ``refpos``/``refquat``, no plugin; at least one geom uses it;
- every geom using it: ``type="mesh"`` (a primitive fitted to a mesh needs the compiled mesh),
  ``contype`` and ``conaffinity`` 0, no ``fromto``, no plugin, not named by a ``<pair>`` or a sensor,
  and no mass contribution: ``mass="0"``, or ``inertiafromgeom="false"``, or ``inertiafromgeom="auto"``
  (the default) on a body with an explicit ``<inertial>`` (with ``fusestatic``, ``mass="0"`` only: a fused
  body's geoms move to a parent whose inertia may come from them). A zero ``density`` alone does not
  count: ``link_density`` may give such a geom a density;
- the model: no ``discardvisual`` (MuJoCo then drops these geoms itself), no flexes or skins, and no
  camera unless ``<statistic extent>`` is given (the cameras' clipping range scales with the extent
  MuJoCo computes from every geom's bounding sphere).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import mujoco
import numpy as np

#: The stand-in a set-aside mesh is compiled as (a tetrahedron 1 cm a side, in metres).
PLACEHOLDER_VERTICES = (0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01)
_MESH = int(mujoco.mjtGeom.mjGEOM_MESH)
_FALSE, _AUTO = int(mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE), int(mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_AUTO)
_GEOM_OBJECT = int(mujoco.mjtObj.mjOBJ_GEOM)


class VisualMesh(NamedTuple):
    """A mesh asset set aside: its file (absolute) and the asset's ``scale`` (3,)."""

    file: Path
    scale: tuple[float, float, float]


#: A binary STL triangle: normal, three corners (float32), attribute bytes.
_TRIANGLE = np.dtype([("normal", "<f4", 3), ("corners", "<f4", 9), ("attribute", "<u2")])


def _binary_stl(path: Path) -> bool:
    """Whether ``path`` is a binary STL that MuJoCo's decoder reads as it is: at least one triangle, 84 +
    50 bytes per triangle (the count its header gives), every corner finite (MuJoCo refuses a file with
    one that is not, and the repair path reads it; the file is in the page cache, hashed for the keys)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            header = handle.read(84)
            count = int.from_bytes(header[80:84], "little") if len(header) == 84 else 0
            if count <= 0 or size != 84 + 50 * count:
                return False
            triangles = np.fromfile(handle, dtype=_TRIANGLE, count=count)
    except OSError:
        return False
    return len(triangles) == count and bool(np.isfinite(triangles["corners"]).all())


def _massless(geom: Any, mode: int, fused: bool) -> bool:
    """Whether MuJoCo's inertia leaves ``geom`` out of its body's mass (see the module docstring); fused
    (``fusestatic``): only a zero ``mass`` says so (its body may be fused into one whose mass its geoms give)."""
    if geom.mass == 0.0:
        return True
    return not fused and (mode == _FALSE or (mode == _AUTO and bool(geom.parent.explicitinertial)))


def _named_geoms(spec: mujoco.MjSpec) -> set[str]:
    """Geom names a contact pair or a sensor refers to."""
    names = {name for pair in spec.pairs for name in (pair.geomname1, pair.geomname2)}
    for sensor in spec.sensors:
        if int(sensor.objtype) == _GEOM_OBJECT:
            names.add(sensor.objname)
        if int(sensor.reftype) == _GEOM_OBJECT:
            names.add(sensor.refname)
    return names - {""}


def visual_only_meshes(spec: mujoco.MjSpec, model_dir: Path, roots: list[Path],
                       attached: bool) -> dict[str, VisualMesh]:
    """Mesh asset name → ``VisualMesh`` for each mesh asset of ``spec`` that only visual-only geoms use
    (the rules in the module docstring). attached: the model attaches a sub-model (``<model file>``)."""
    from usdforge.rules.files import inside, regular_file_problem
    from usdforge.rules.mjcf.load import compiler_dir

    compiler = spec.compiler
    extent_given = np.isfinite(spec.stat.extent)
    if (attached or compiler.discardvisual or spec.strippath or len(spec.flexes)
            or len(spec.skins) or (len(spec.cameras) and not extent_given)):
        return {}
    meshdir = compiler_dir(spec, "meshdir", model_dir)
    mode = int(compiler.inertiafromgeom)
    named = _named_geoms(spec)
    users: dict[str, bool] = {}  # mesh name → every geom using it is visual-only
    for geom in spec.geoms:
        if not geom.meshname:
            continue
        visual = (int(geom.type) == _MESH and geom.contype == 0 and geom.conaffinity == 0
                  and np.isnan(geom.fromto[0]) and not geom.plugin.active and geom.name not in named
                  and _massless(geom, mode, bool(compiler.fusestatic)))
        users[geom.meshname] = users.get(geom.meshname, True) and visual
    found: dict[str, VisualMesh] = {}
    for mesh in spec.meshes:
        scale = tuple(float(v) for v in mesh.scale)
        if not (mesh.name and users.get(mesh.name) and mesh.file and Path(mesh.file).suffix.lower() == ".stl"
                and not mesh.content_type and mesh.compiler.meshdir == spec.meshdir and not mesh.plugin.active
                and all(np.isfinite(v) and v > 0.0 for v in scale) and not np.any(np.asarray(mesh.refpos))
                and np.array_equal(np.asarray(mesh.refquat), [1.0, 0.0, 0.0, 0.0])):
            continue
        file = Path(mesh.file)
        file = (file if file.is_absolute() else model_dir / (meshdir or "") / file).absolute()
        if inside(file, roots) and regular_file_problem(file) is None and _binary_stl(file):
            found[mesh.name] = VisualMesh(file, scale)  # type: ignore[arg-type]
    return found


def set_aside_visual_meshes(spec: mujoco.MjSpec, model_dir: Path, roots: list[Path],
                            attached: bool) -> dict[str, VisualMesh]:
    """Give each mesh of ``visual_only_meshes`` the stand-in in ``spec`` (file cleared, scale 1; its
    inertia mode kept); return them by name."""
    found = visual_only_meshes(spec, model_dir, roots, attached)
    for mesh in spec.meshes:
        if mesh.name in found:
            mesh.file = ""
            mesh.uservert = list(PLACEHOLDER_VERTICES)
            mesh.scale = [1.0, 1.0, 1.0]
    return found


#: MuJoCo's compiler's mjEPS: a vector whose squared length is below it is not normalised (length 0).
_EPS = 1e-14


def mujoco_normals(points: np.ndarray, faces: np.ndarray, smooth: bool,
                   scale: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> np.ndarray:
    """The vertex normals (V, 3) MuJoCo's compile gives a mesh without normals in its file (an STL), for
    ``points`` (V, 3, the asset's ``scale`` applied) and ``faces`` (F, 3) as it reads them. In the file's
    own (unscaled) frame: at each vertex the sum of its faces' normals weighted by their area, and, unless
    ``smooth`` (the asset's ``smoothnormal``), without the faces whose normal is more than about 37° (dot
    < 0.8) from that sum, so that hard edges stay hard; (0, 0, 1) where nothing is left; then carried
    through the scale (divided by it) to unit length. The USD then shades a set-aside mesh as MuJoCo's
    compiled one is shaded (``mujoco_mesh_part``: its normals, indexed corner by corner)."""
    scale_array = np.asarray(scale, dtype=np.float64)
    scaled = bool(np.any(scale_array != 1.0))
    # Column by column (x, y, z of each face's corners 0, 1, 2): gathers and sums of 1-D arrays, several
    # times faster than of (F, 3) rows on a 20 000-triangle mesh.
    x, y, z = np.ascontiguousarray((points / scale_array if scaled else points).T)
    corner = [np.ascontiguousarray(column) for column in faces.T]
    count = len(points)
    first = [c[corner[0]] for c in (x, y, z)]  # each face's corner 0, gathered once for both edges
    ax, ay, az = (c[corner[1]] - origin for c, origin in zip((x, y, z), first))
    bx, by, bz = (c[corner[2]] - origin for c, origin in zip((x, y, z), first))
    weighted = [ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx]  # unit normal · 2 area
    squared = weighted[0] ** 2 + weighted[1] ** 2 + weighted[2] ** 2
    tiny = squared < _EPS  # MuJoCo gives a face this small no weight (mjuu_normvec: length 0)
    for component in weighted:
        component[tiny] = 0.0
    normals = [sum(np.bincount(at, component, count) for at in corner) for component in weighted]
    if not smooth:
        length = np.sqrt(squared)
        length[tiny] = 1.0
        unit = [component / length for component in weighted]
        total = normals[0] ** 2 + normals[1] ** 2 + normals[2] ** 2
        # A sum too short to normalise stays as it is in MuJoCo: every face is then "far" from it.
        inverse = np.divide(1.0, np.sqrt(total), out=np.zeros_like(total), where=total >= _EPS)
        removed = [np.zeros(count) for _ in range(3)]
        for at in corner:
            far = (unit[0] * normals[0][at] + unit[1] * normals[1][at] + unit[2] * normals[2][at]) * inverse[at] < 0.8
            for k in range(3):
                removed[k] += np.bincount(at, weighted[k] * far, count)
        normals = [n - r for n, r in zip(normals, removed)]
    result = np.stack(normals, axis=1)
    norm = np.sqrt(np.einsum("ij,ij->i", result, result))
    flat = norm <= 1e-15  # MuJoCo's mjMINVAL
    result /= np.where(flat, 1.0, norm)[:, None]
    result[flat] = (0.0, 0.0, 1.0)
    if scaled:
        result /= scale_array
        result /= np.abs(result).max(axis=1)[:, None]  # no overflow below for a scale of 1e-200
        result /= np.linalg.norm(result, axis=1)[:, None]
    return result.astype(np.float32)


def file_pose(compiled_pose: np.ndarray, mesh_pos: np.ndarray, mesh_quat: np.ndarray) -> np.ndarray:
    """The (4, 4) pose of a set-aside mesh file's vertices in the geom's body: the geom's compiled pose
    (4, 4) with the stand-in's frame (``mesh_pos`` (3,) m, ``mesh_quat`` (4,) wxyz) taken back out."""
    from usdforge.rules.mjcf.bodies import pose_matrix

    pose = compiled_pose @ np.linalg.inv(pose_matrix(mesh_pos, mesh_quat))
    # Composing and taking out the frame leaves residues of 1e-17 where the source's pose is exact (an
    # identity pose came out as orient (1, 4.7e-17, -2.1e-17, …)): entries within 1e-15 of 0 or ±1 are those.
    snapped = np.round(pose)
    close = (np.abs(pose - snapped) < 1e-15) & (np.abs(snapped) <= 1.0)
    pose[close] = snapped[close] + 0.0  # no negative zeros
    return pose
