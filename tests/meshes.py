"""Mesh fixtures generated in the tests: one small file per format, with trimesh (pycollada for DAE)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh


def box_mesh() -> trimesh.Trimesh:
    """A 0.2 × 0.4 × 0.6 m box, off the origin so centre-of-mass errors show."""
    return trimesh.creation.box(extents=[0.2, 0.4, 0.6],
                                transform=trimesh.transformations.translation_matrix([0.1, -0.2, 0.3]))


def write_dae(path: Path, mesh: trimesh.Trimesh) -> Path:
    """A COLLADA file holding ``mesh`` (trimesh cannot export DAE; pycollada can)."""
    import collada
    from collada import geometry as cgeometry, scene as cscene, source as csource

    document = collada.Collada()
    vertices = csource.FloatSource("verts", np.asarray(mesh.vertices, dtype=np.float64).ravel(), ("X", "Y", "Z"))
    geom = cgeometry.Geometry(document, "geom0", "part", [vertices])
    inputs = csource.InputList()
    inputs.addInput(0, "VERTEX", "#verts")
    triangles = geom.createTriangleSet(np.asarray(mesh.faces, dtype=np.int64).ravel(), inputs, "")
    geom.primitives.append(triangles)
    document.geometries.append(geom)
    node = cscene.Node("part", children=[cscene.GeometryNode(geom, [])])
    document.scenes.append(cscene.Scene("scene", [node]))
    document.scene = document.scenes[0]
    document.write(str(path))
    return path


def write_mesh(folder: Path, extension: str, mesh: trimesh.Trimesh | None = None) -> Path:
    """Write ``mesh`` (default: ``box_mesh()``) as ``folder/box.<extension>``."""
    mesh = box_mesh() if mesh is None else mesh
    path = folder / f"box.{extension}"
    if extension == "dae":
        return write_dae(path, mesh)
    if extension == "stl_ascii":
        path = folder / "box_ascii.stl"
        path.write_text(trimesh.exchange.stl.export_stl_ascii(mesh))
        return path
    if extension == "gltf":
        files = trimesh.Scene(mesh).export(file_type="gltf")
        for name, data in files.items():
            (folder / ("box.gltf" if name.endswith(".gltf") else name)).write_bytes(data)
        return path
    if extension == "obj":
        mesh.export(path, file_type="obj", mtl_name="box.mtl")
        return path
    exported = mesh.export(file_type=extension)
    path.write_bytes(exported if isinstance(exported, bytes) else exported.encode())
    return path
