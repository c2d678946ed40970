"""Regenerates the pan-tilt head's mesh (committed; run only to change it).

    python assets/robots/pan_tilt/make_meshes.py
"""

from __future__ import annotations

from pathlib import Path

import trimesh

HERE = Path(__file__).resolve().parent / "meshes"


def main() -> None:
    HERE.mkdir(exist_ok=True)
    # The camera's lens hood: a short cylinder along Z, 2 cm radius, 3 cm long, in metres.
    hood = trimesh.creation.cylinder(radius=0.02, height=0.03, sections=24)
    hood.export(HERE / "hood.obj", file_type="obj", include_texture=False)


if __name__ == "__main__":
    main()
