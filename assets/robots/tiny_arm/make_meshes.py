"""Regenerates tiny_arm's mesh files (committed; run only to change them).

    python assets/robots/tiny_arm/make_meshes.py

A binary STL base and finger, and an OBJ arm segment that the URDF uses twice at different scales, so the
converted asset shows shared prototypes (the two fingers) and per-scale prototypes (upper arm, forearm).
"""

from __future__ import annotations

from pathlib import Path

import trimesh

HERE = Path(__file__).resolve().parent / "meshes"


def main() -> None:
    HERE.mkdir(exist_ok=True)
    # A round base, 0.16 m across and 0.06 m tall, standing on z = 0.
    base = trimesh.creation.cylinder(radius=0.08, height=0.06, sections=48)
    base.apply_translation([0.0, 0.0, 0.03])
    base.export(HERE / "base.stl")
    # An arm segment along +z from its joint: a rounded bar 0.3 m long.
    segment = trimesh.creation.capsule(radius=0.03, height=0.24, count=[24, 12])
    segment.apply_translation([0.0, 0.0, 0.15])
    segment.export(HERE / "segment.obj", include_normals=True)
    # A finger: a small block 0.02 x 0.01 x 0.06 m rising from its joint.
    finger = trimesh.creation.box(extents=[0.02, 0.01, 0.06])
    finger.apply_translation([0.0, 0.0, 0.03])
    finger.export(HERE / "finger.stl")


if __name__ == "__main__":
    main()
