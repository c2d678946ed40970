"""Regenerates the embedded library's mesh files (committed; run only to change them).

    python assets/make_meshes.py

Each is a small part in a different format, so `doit convert` shows every mesh reader at work.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh

HERE = Path(__file__).resolve().parent / "meshes"


def table() -> trimesh.Trimesh:
    """A 0.8 × 0.6 × 0.75 m table: a top and four legs, one watertight mesh each, concatenated."""
    top = trimesh.creation.box(extents=[0.8, 0.6, 0.04], transform=trimesh.transformations.translation_matrix([0, 0, 0.73]))
    legs = [trimesh.creation.box(extents=[0.05, 0.05, 0.71],
                                 transform=trimesh.transformations.translation_matrix([x, y, 0.355]))
            for x in (-0.35, 0.35) for y in (-0.25, 0.25)]
    return trimesh.util.concatenate([top, *legs])


def main() -> None:
    HERE.mkdir(exist_ok=True)
    # OBJ with an MTL: the material file is a dependency the scan finds.
    mug = trimesh.creation.annulus(r_min=0.035, r_max=0.04, height=0.1, sections=48)
    mug.visual = trimesh.visual.TextureVisuals(material=trimesh.visual.material.SimpleMaterial(
        diffuse=[200, 60, 40, 255]))
    mug.export(HERE / "mug.obj", file_type="obj", mtl_name="mug.mtl")
    # Binary STL in millimetres (the library scales it to metres).
    plate = trimesh.creation.box(extents=[40.0, 20.0, 5.0])
    plate.export(HERE / "plate.stl")
    # PLY with per-vertex colours.
    ball = trimesh.creation.icosphere(subdivisions=2, radius=0.11)
    ball.visual.vertex_colors = np.column_stack([(ball.vertices - ball.vertices.min(0)) / 0.22 * 255,
                                                 np.full(len(ball.vertices), 255)]).astype(np.uint8)
    ball.export(HERE / "ball.ply")
    # OFF, the simplest format.
    trimesh.creation.cone(radius=0.15, height=0.4, sections=32).export(HERE / "cone.off")
    # GLB scene with two parts and node transforms, and a glTF colour.
    crate = trimesh.Scene()
    body = trimesh.creation.box(extents=[0.4, 0.4, 0.3])
    body.visual.face_colors = [150, 110, 60, 255]
    lid = trimesh.creation.box(extents=[0.42, 0.42, 0.03])
    lid.visual.face_colors = [90, 60, 30, 255]
    crate.add_geometry(body, node_name="body", geom_name="body")
    # glTF is Y-up: the lid sits on top along +Y in the file.
    crate.add_geometry(lid, node_name="lid", geom_name="lid",
                       transform=trimesh.transformations.translation_matrix([0, 0.165, 0]))
    (HERE / "crate.glb").write_bytes(crate.export(file_type="glb"))
    table().export(HERE / "table.stl")


if __name__ == "__main__":
    main()
