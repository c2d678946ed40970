"""Proof that setting visual-only meshes aside (``rules.mjcf.visual_meshes``) changes nothing the MJCF rule
reads but where those meshes' triangles come from, on every MJCF model of the corpus, the conformance suite
and the embedded library.

    python bench/visual_meshes.py [--time N]

Per model, the model compiled in full (as before: file textures set aside only) beside the model compiled
with its visual-only meshes set aside (``rules.mjcf.load.checked_spec``):

- every array of the slim intermediate's ``FIELDS`` (bodies, joints, inertias, geoms, actuators, tendons,
  sensors …) and the rest pose's body frames are identical, except the set-aside meshes' own slices and
  the compiled pose of the geoms using them;
- every geom on a set-aside mesh: its world-space triangles from the file (``rules.robot.meshes`` reader,
  the asset's scale, ``file_pose``) equal the full compile's (MuJoCo's re-centred float32 vertices in the
  compiled geom pose) as sets of oriented triangles, within 1e-6 of the mesh's size;
- every set-aside mesh: the normals the converter gives its file's vertices (``mujoco_normals``) equal the
  full compile's at the same vertex, within 1e-5.

``--time N``: also the median CPU time of N compiles each way per model with meshes set aside.
Exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "src"))

from usdforge.rules.mjcf.bodies import pose_matrix  # noqa: E402
from usdforge.rules.mjcf.load import (checked_spec, compile_repaired, model_path, parse_spec,  # noqa: E402
                                      set_aside_file_textures)
from usdforge.rules.mjcf.slim import FIELDS  # noqa: E402
from usdforge.rules.mjcf.visual_meshes import file_pose, mujoco_normals  # noqa: E402
from usdforge.rules.robot.meshes import MeshLibrary  # noqa: E402

#: Arrays indexed by mesh (sliced per mesh below) and the geom poses (compared in world space).
_MESH_ARRAYS = {"mesh_vert": ("mesh_vertadr", "mesh_vertnum"), "mesh_normal": ("mesh_normaladr", "mesh_normalnum"),
                "mesh_texcoord": ("mesh_texcoordadr", "mesh_texcoordnum"),
                "mesh_face": ("mesh_faceadr", "mesh_facenum"), "mesh_facenormal": ("mesh_faceadr", "mesh_facenum"),
                "mesh_facetexcoord": ("mesh_faceadr", "mesh_facenum")}
#: Addresses into the mesh arrays (shifted by a stand-in's smaller arrays: compared as slices).
_PER_MESH = ("mesh_vertadr", "mesh_vertnum", "mesh_normaladr", "mesh_normalnum", "mesh_texcoordadr",
             "mesh_texcoordnum", "mesh_faceadr", "mesh_facenum", "mesh_pathadr", "mesh_pos", "mesh_quat")


def models() -> list[Path]:
    """Every MJCF model: corpus (MANIFEST.json), conformance fixtures, embedded library."""
    corpus = SHARED / "corpus"
    found = [corpus / entry["path"] for entry in json.loads((corpus / "MANIFEST.json").read_text())
             if entry["format"] == "mjcf"]
    found += sorted((SHARED / "conformance" / "mjcf").glob("*.xml"))
    found += sorted((REPO / "assets" / "robots").glob("*/*.xml"))
    return found


def _full(path: Path):
    spec = parse_spec(path)
    set_aside_file_textures(spec, path.parent)
    return compile_repaired(path, spec)


def _set_aside(path: Path):
    path, spec, _, visual = checked_spec(path)
    loaded = compile_repaired(path, spec)
    loaded.visual_meshes = visual
    return loaded


def _triangles(points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Oriented triangles (F, 3, 3): corners in the file's order (its orientation), any rotation of it."""
    return points[np.asarray(faces).reshape(-1, 3)]


def _distance(got: np.ndarray, expected: np.ndarray) -> float:
    """The largest distance (m) from a triangle of either set to the nearest of the other, triangles
    compared as 9-vectors over the three rotations of their corners (orientation kept)."""
    from scipy.spatial import cKDTree

    rotations = [np.roll(expected, -k, axis=1).reshape(-1, 9) for k in range(3)]
    tree = cKDTree(np.concatenate(rotations))
    forward = tree.query(got.reshape(-1, 9))[0].max()
    back = cKDTree(np.concatenate([np.roll(got, -k, axis=1).reshape(-1, 9) for k in range(3)]))
    return float(max(forward, back.query(expected.reshape(-1, 9))[0].max()))


def _world(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    return points @ matrix[:3, :3].T + matrix[:3, 3]


def compare(path: Path) -> list[str]:
    """Differences between the two compiles of ``path`` (empty: none)."""
    try:
        full = _full(path)
    except Exception as exc:  # noqa: BLE001 - a model MuJoCo refuses either way is no comparison
        return [] if "cannot" in str(exc) else [f"full compile: {exc}"]
    new = _set_aside(path)
    fm, nm = full.model, new.model
    names = {nm.mesh(m).name: m for m in range(nm.nmesh)}
    aside = {names[name] for name in new.visual_meshes}
    aside_geoms = {g for g in range(nm.ngeom) if int(nm.geom_dataid[g]) in aside and int(nm.geom_type[g]) == 7}
    problems = []
    for field in FIELDS:
        a, b = getattr(fm, field, None), getattr(nm, field, None)
        if field in _MESH_ARRAYS or field in _PER_MESH or a is None:
            continue
        a, b = np.asarray(a), np.asarray(b)
        if field in ("geom_pos", "geom_quat", "geom_size"):  # a mesh geom's size: its mesh's box
            keep = [g for g in range(nm.ngeom) if g not in aside_geoms]
            a, b = a[keep], b[keep]
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            problems.append(f"{field} differs")
    for field in ("xpos", "xquat"):
        if not np.array_equal(getattr(full.data, field), getattr(new.data, field)):
            problems.append(f"data.{field} differs")
    for m in range(nm.nmesh):
        if m in aside:
            continue
        for field in ("mesh_vertnum", "mesh_normalnum", "mesh_texcoordnum", "mesh_facenum", "mesh_pos", "mesh_quat"):
            if not np.array_equal(getattr(fm, field)[m], getattr(nm, field)[m]):
                problems.append(f"mesh {m} {field} differs")
        if model_path(fm, int(fm.mesh_pathadr[m])) != model_path(nm, int(nm.mesh_pathadr[m])):
            problems.append(f"mesh {m} file differs")
        for field, (adr, num) in _MESH_ARRAYS.items():
            sa = slice(getattr(fm, adr)[m], getattr(fm, adr)[m] + getattr(fm, num)[m])
            sb = slice(getattr(nm, adr)[m], getattr(nm, adr)[m] + getattr(nm, num)[m])
            if not np.array_equal(getattr(fm, field)[sa], getattr(nm, field)[sb]):
                problems.append(f"mesh {m} {field} differs")
    library = MeshLibrary()
    worst = 0.0
    for g in sorted(aside_geoms):
        m = int(nm.geom_dataid[g])
        body = int(nm.geom_bodyid[g])
        body_pose = pose_matrix(full.data.xpos[body], full.data.xquat[body])
        verts = fm.mesh_vert[fm.mesh_vertadr[m]:fm.mesh_vertadr[m] + fm.mesh_vertnum[m]].astype(np.float64)
        faces = fm.mesh_face[fm.mesh_faceadr[m]:fm.mesh_faceadr[m] + fm.mesh_facenum[m]]
        expected = _triangles(_world(verts, body_pose @ pose_matrix(fm.geom_pos[g], fm.geom_quat[g])), faces)
        visual = new.visual_meshes[nm.mesh(m).name]
        parts = library.parts(visual.file, visual.scale)
        pose = body_pose @ file_pose(pose_matrix(nm.geom_pos[g], nm.geom_quat[g]), nm.mesh_pos[m], nm.mesh_quat[m])
        got = np.concatenate([_triangles(_world(p.points, pose), p.faces) for p in parts])
        size = float(np.ptp(expected.reshape(-1, 3), axis=0).max()) or 1.0  # the mesh's extent in the world
        distance = _distance(got, expected)
        if got.shape != expected.shape:
            problems.append(f"geom {g}: {len(got)} triangles from the file, {len(expected)} compiled")
        if distance > 1e-6 * size:
            problems.append(f"geom {g}: triangles differ by {distance / size:.2e} of the mesh's size")
        worst = max(worst, distance / size)
    normal_worst = 0.0
    for name in new.visual_meshes:  # each set-aside mesh's normals against the full compile's, vertex by vertex
        m = names[name]
        visual = new.visual_meshes[name]
        part = library.parts(visual.file, visual.scale)[0]
        normals = mujoco_normals(part.points, part.faces, bool(new.spec.meshes[m].smoothnormal), visual.scale)
        frame = pose_matrix(fm.mesh_pos[m], fm.mesh_quat[m])  # the compiled arrays are in the mesh's frame
        verts = _world(fm.mesh_vert[fm.mesh_vertadr[m]:fm.mesh_vertadr[m] + fm.mesh_vertnum[m]].astype(np.float64), frame)
        faces = fm.mesh_face[fm.mesh_faceadr[m]:fm.mesh_faceadr[m] + fm.mesh_facenum[m]].reshape(-1)
        corner_normal = fm.mesh_facenormal[fm.mesh_faceadr[m]:fm.mesh_faceadr[m] + fm.mesh_facenum[m]].reshape(-1)
        compiled = fm.mesh_normal[fm.mesh_normaladr[m]:fm.mesh_normaladr[m] + fm.mesh_normalnum[m]] @ frame[:3, :3].T
        at_vertex = np.zeros((len(verts), 3))
        at_vertex[faces] = compiled[corner_normal]
        from scipy.spatial import cKDTree

        distance, nearest = cKDTree(verts).query(part.points)
        if len(part.points) != len(verts) or distance.max() > 1e-6 * (float(np.ptp(verts, axis=0).max()) or 1.0):
            problems.append(f"mesh {name}: its file's vertices are not the compiled ones")
            continue
        error = float(np.abs(normals - at_vertex[nearest]).max())
        if error > 1e-5:
            problems.append(f"mesh {name}: normals differ by {error:.2e}")
        normal_worst = max(normal_worst, error)
    if aside_geoms:
        print(f"  {len(aside_geoms)} geoms: largest triangle distance {worst:.2e} of the mesh's size; "
              f"largest normal difference {normal_worst:.2e}")
    return problems


def _cpu(load, path: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        load(path)
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time", type=int, default=0, help="median CPU time of N compiles each way")
    args = parser.parse_args()
    import mujoco

    mujoco.mj_setCacheCapacity(mujoco.mj_getCache(), 0)  # every compile decodes its meshes
    failed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in models():
            problems = compare(path)
            _, _, _, visual = checked_spec(path)
            line = f"{path.relative_to(path.parents[1])}: {len(visual)} mesh(es) set aside"
            if args.time and visual:
                line += f", compile {_cpu(_full, path, args.time):.3f} -> {_cpu(_set_aside, path, args.time):.3f} s CPU"
            print(line + ("" if not problems else "; DIFFERS: " + "; ".join(problems[:5])))
            failed += bool(problems)
    print(f"{failed} model(s) differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
