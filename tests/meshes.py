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


def textured_obj(folder: Path, material: str = "Kd 0.8 0.5 0.2\n") -> Path:
    """A triangulated tetrahedron with UVs and normals whose MTL material has a diffuse map (and
    ``material``'s statements)."""
    from PIL import Image

    Image.new("RGB", (8, 4), (30, 120, 220)).save(folder / "grid.png")
    (folder / "part.mtl").write_text("newmtl painted\nNs 250\n" + material + "d 1.0\nmap_Kd grid.png\n")
    path = folder / "part.obj"
    path.write_text("mtllib part.mtl\no tetra\n" + "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\n"
                    + "vt 0 0\nvt 1 0\nvt 0 1\nvt 1 1\nvn 0 0 -1\nvn 0 -1 0\nvn -1 0 0\nvn 0.577 0.577 0.577\n"
                    + "usemtl painted\nf 1/1/1 3/3/1 2/2/1\nf 1/1/2 2/2/2 4/4/2\nf 1/1/3 4/4/3 3/3/3\n"
                    + "f 2/2/4 3/3/4 4/4/4\n")
    return path


def assert_parts_read_alike(path: Path, ours: list, theirs: list) -> None:
    """The standalone converter's parts of two readers alike: names, node transforms, and triangle by
    triangle (as sets: vertex and triangle order may differ) each corner's position, UV and colour, and its
    normal within 0.01 (trimesh merges vertices whose normals agree to two decimals, keeping the first
    one it meets: the readers' different vertex orders keep different ones); material colour and image."""
    from usdforge.rules.usd.stage import _vertex_colors, material_of

    assert [p.name for p in ours] == [p.name for p in theirs], path
    for a, b in zip(ours, theirs):
        where = f"{path} {a.name}"
        np.testing.assert_allclose(a.transform, b.transform, atol=1e-12, err_msg=where)
        tables = []
        for mesh in (a.mesh, b.mesh):
            faces = np.asarray(mesh.faces)
            fields = {"points": np.asarray(mesh.vertices), "normals": np.asarray(mesh.vertex_normals)}
            for name, extra in (("uv", getattr(mesh.visual, "uv", None)), ("colors", _vertex_colors(mesh))):
                if extra is not None:
                    fields[name] = np.asarray(extra, dtype=float)
            corners = {name: values[faces] for name, values in fields.items()}  # (F, 3, k)
            # each triangle from its smallest corner (winding kept), the triangles sorted by position
            flat = corners["points"].reshape(-1, 3)  # unrounded: a rounding edge would split a tie
            rank = np.empty(len(flat), dtype=np.int64)
            rank[np.lexsort(flat.T[::-1])] = np.arange(len(flat))
            first = rank.reshape(-1, 3).argmin(axis=1)
            turn = (first[:, None] + np.arange(3)) % 3
            rolled = {name: np.take_along_axis(values, turn[:, :, None], axis=1) for name, values in corners.items()}
            key = rolled["points"].reshape(len(faces), -1)
            order = np.lexsort(key.T[::-1])
            tables.append({name: values[order] for name, values in rolled.items()})
        mine, other = tables
        assert sorted(mine) == sorted(other), f"{where}: {sorted(mine)} vs {sorted(other)}"
        scale = max(float(np.abs(other["points"]).max()), 1e-12)
        for name, tolerance in (("points", 1e-6 * scale), ("normals", 1e-2), ("uv", 1e-4), ("colors", 1e-3)):
            if name in mine:
                assert mine[name].shape == other[name].shape, f"{where}: {name}"
                np.testing.assert_allclose(mine[name], other[name], rtol=0, atol=tolerance, err_msg=f"{where}: {name}")
        (color, image), (their_color, their_image) = material_of(a.mesh), material_of(b.mesh)
        assert (color is None) == (their_color is None), f"{where}: material colour"
        if color is not None:
            np.testing.assert_allclose(color, their_color, atol=0.5 / 255 + 1e-6)
        assert (image is None) == (their_image is None), f"{where}: texture"
        if image is not None:
            assert (image.mode, image.size, image.tobytes()) == \
                (their_image.mode, their_image.size, their_image.tobytes())
