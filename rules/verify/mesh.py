"""``verify_mesh``: does a converted mesh asset hold the geometry trimesh reads from its source?

The oracle is trimesh's reading of the source file, transformed by the cfg's scale, rotation and
translation (glTF turned from its Y-up to Z-up). Compared with the USD's meshes (points in the asset's
frame): the bounding box, the surface area, the enclosed volume when the source is a closed volume, and,
when the cfg asked for a mass of a rigid body (``mass_props`` with ``rigid_props``: a mass only applies to
a rigid body), ``physics:mass`` and the centre of mass trimesh computes for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from usdforge.rules.verify.findings import CheckResult, Finding

RELATIVE_TOLERANCE = 1e-4  # single-precision points


def _source_mesh(source: Path, cfg: dict[str, Any]):
    import trimesh

    scene = trimesh.load_scene(str(source))
    mesh = scene.to_mesh() if hasattr(scene, "to_mesh") else scene.dump(concatenate=True)
    matrix = np.eye(4)
    if source.suffix.lower() in (".glb", ".gltf"):
        matrix = trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0])  # Y-up → Z-up
    x, y, z, w = cfg.get("rotation", (0.0, 0.0, 0.0, 1.0))
    placement = trimesh.transformations.quaternion_matrix([w, x, y, z])
    placement[:3, :3] = placement[:3, :3] @ np.diag(cfg.get("scale", (1.0, 1.0, 1.0)))
    placement[:3, 3] = cfg.get("translation", (0.0, 0.0, 0.0))
    mesh.apply_transform(placement @ matrix)
    return mesh


def _usd_mesh(stage):
    import trimesh
    from pxr import Usd, UsdGeom

    root = stage.GetDefaultPrim()
    to_root = np.linalg.inv(np.array(UsdGeom.XformCache().GetLocalToWorldTransform(root)).T)
    cache = UsdGeom.XformCache()
    meshes = []
    for prim in Usd.PrimRange(root, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)):
        if not prim.IsA(UsdGeom.Mesh):
            continue
        mesh = UsdGeom.Mesh(prim)
        points = np.array(mesh.GetPointsAttr().Get(), dtype=float)
        counts = np.array(mesh.GetFaceVertexCountsAttr().Get(), dtype=int)
        indices = np.array(mesh.GetFaceVertexIndicesAttr().Get(), dtype=int)
        faces, start = [], 0
        for count in counts:  # fan-triangulate polygons
            faces.extend([indices[start], indices[start + k], indices[start + k + 1]] for k in range(1, count - 1))
            start += count
        part = trimesh.Trimesh(points, np.array(faces, dtype=int).reshape(-1, 3), process=False)
        part.apply_transform(to_root @ np.array(cache.GetLocalToWorldTransform(prim)).T)
        meshes.append(part)
    return trimesh.util.concatenate(meshes) if meshes else None


def verify_mesh(source: str | Path, stage, cfg: dict[str, Any] | None = None) -> CheckResult:
    """Compare ``stage`` with trimesh's reading of ``source`` (module docstring)."""
    cfg = cfg or {}
    result = CheckResult("mesh-oracle")
    root = str(stage.GetDefaultPrim().GetPath())
    expected = _source_mesh(Path(source), cfg)
    actual = _usd_mesh(stage)
    if actual is None:
        result.add(Finding("mesh-geometry", root, "the asset has no mesh"))
        return result
    size = float(np.linalg.norm(expected.extents)) or 1.0
    offset = float(np.abs(actual.bounds - expected.bounds).max())
    if offset > RELATIVE_TOLERANCE * size:
        result.add(Finding("mesh-bounds", root, f"bounds {actual.bounds.tolist()} differ from trimesh's "
                           f"{expected.bounds.tolist()} by {offset:.3g} m"))
    if abs(actual.area - expected.area) > 1e-3 * max(expected.area, 1e-12):
        result.add(Finding("mesh-area", root, f"surface area {actual.area:.6g} m², trimesh says {expected.area:.6g} m²"))
    if expected.is_volume and abs(abs(actual.volume) - expected.volume) > 1e-3 * expected.volume:
        result.add(Finding("mesh-volume", root, f"volume {abs(actual.volume):.6g} m³, trimesh says {expected.volume:.6g} m³"))
    mass_props = cfg.get("mass_props") or {}
    prim = stage.GetDefaultPrim()
    if mass_props.get("mass") is not None and cfg.get("rigid_props") is not None:
        mass = prim.GetAttribute("physics:mass").Get() if prim.HasAttribute("physics:mass") else None
        if mass is None or abs(mass - mass_props["mass"]) > 1e-6 * max(1.0, mass_props["mass"]):
            result.add(Finding("mesh-mass", root, f"physics:mass = {mass}, the cfg asks for {mass_props['mass']} kg"))
        from usdforge.rules.mesh.read import enclosed

        solid = enclosed(expected)
        center = prim.GetAttribute("physics:centerOfMass").Get() if prim.HasAttribute("physics:centerOfMass") else None
        if solid is None:
            result.add(Finding("mesh-mass", root, "the mesh encloses no volume: no centre of mass to compare"))
        elif center is None or np.abs(np.array(center) - solid.center_mass).max() > RELATIVE_TOLERANCE * size:
            result.add(Finding("mesh-mass", root, f"physics:centerOfMass = {center}, trimesh says "
                               f"{np.round(solid.center_mass, 6).tolist()}"))
    result.detail = (f"{len(expected.faces)} source triangles; bounds within {offset:.2g} m; "
                     f"volume {expected.volume:.4g} m³" if expected.is_volume else
                     f"{len(expected.faces)} source triangles; bounds within {offset:.2g} m; open surface")
    return result
