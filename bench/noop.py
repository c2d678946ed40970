"""No-op cost of `doit convert`: a generated 100-entry library vs a bare dodo with 100 trivial tasks.

    python bench/noop.py [--entries 100] [--repeat 5] [--embedded]

Prints, side by side, the first-build time, the median no-op time of `doit convert` on the library, and
the median no-op time of a bare dodo whose 100 tasks each have one file_dep and one target (the floor
doit itself sets). Target: usdforge's no-op ≤ 1.5× the bare dodo's and < 0.5 s. ``--embedded``: the
embedded library (assets/library.toml, 8 entries: meshes, a URDF and an MJCF) beside a bare dodo with as
many tasks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trimesh

REPO = Path(__file__).resolve().parents[1]

BARE_DODO = '''
from pathlib import Path

DOIT_CONFIG = {"backend": "json", "dep_file": "bare.doit.db", "default_tasks": ["copy"]}


def copy(source, target):
    Path(target).write_bytes(Path(source).read_bytes())


def task_copy():
    for source in sorted(Path("meshes").glob("*.stl")):
        target = Path("bare_out") / (source.stem + ".out")
        yield {"name": source.stem, "file_dep": [str(source)], "targets": [str(target)],
               "actions": [(copy, [str(source), str(target)])]}
'''


def make_library(folder: Path, entries: int) -> Path:
    """``entries`` small STL meshes and a manifest converting each with mass and collision settings."""
    meshes = folder / "meshes"
    meshes.mkdir(parents=True)
    lines = []
    for index in range(entries):
        mesh = trimesh.creation.box(extents=[0.1 + 0.001 * index, 0.2, 0.3])
        mesh.export(meshes / f"part_{index:03d}.stl")
        lines.append(f'[[assets]]\nname = "part_{index:03d}"\nsource = "meshes/part_{index:03d}.stl"\n'
                     f'[assets.cfg]\nmass_props = {{ mass = {1 + index * 0.01:.2f} }}\n'
                     'rigid_props = { rigid_body_enabled = true }\ncollision_props = { collision_enabled = true }\n')
    library = folder / "library.toml"
    library.write_text("\n".join(lines))
    (folder / "bare_dodo.py").write_text(BARE_DODO)
    (folder / "bare_out").mkdir()
    return library


def timed(command: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--embedded", action="store_true", help="the embedded library, not a generated one")
    args = parser.parse_args()
    os.environ.pop("USDFORGE_CACHE", None)  # the build cache in the temporary folder's build/
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.embedded:
            import tomllib

            library = REPO / "assets" / "library.toml"
            args.entries = len(tomllib.loads(library.read_text())["assets"])
            make_library(folder, args.entries)  # the bare dodo's files
        else:
            library = make_library(folder, args.entries)
        ours = [sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(folder), "convert",
                f"library={library}"]
        bare = [sys.executable, "-m", "doit", "-f", str(folder / "bare_dodo.py"), "-d", str(folder)]
        first_build = timed(ours, folder)
        bare_first = timed(bare, folder)
        ours_noop = statistics.median(timed(ours, folder) for _ in range(args.repeat))
        bare_noop = statistics.median(timed(bare, folder) for _ in range(args.repeat))
    print(f"{args.entries} entries; wall-clock of a whole doit process, median of {args.repeat} no-op runs")
    print(f"{'':28s}{'usdforge doit convert':>24s}{'bare dodo (copy tasks)':>26s}")
    print(f"{'first build [s]':28s}{first_build:24.3f}{bare_first:26.3f}")
    print(f"{'no-op [s]':28s}{ours_noop:24.3f}{bare_noop:26.3f}")
    print(f"no-op ratio usdforge / bare: {ours_noop / bare_noop:.2f}× (target ≤ 1.5× and < 0.5 s)")


if __name__ == "__main__":
    main()
