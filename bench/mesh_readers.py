"""The standalone mesh converter's two readers side by side on every mesh of the shared corpus, the
conformance fixtures and the embedded library: Assimp first (``rules.mesh.read.read_parts``) against
trimesh (``load_parts``), as ``tests/test_mesh_rule.py`` compares them on generated fixtures.

    python bench/mesh_readers.py [SUBSTRING ...]

Per file: which reader ``read_parts`` took (or the fallback reason), and where Assimp read it, whether its
parts are trimesh's (``tests/meshes.py``: ``assert_parts_read_alike``). Prints the counts, every mismatch
(there should be none) and the seconds each reader took over all files (whole reads, in this process;
Assimp's in its reading child)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from meshes import assert_parts_read_alike  # noqa: E402

from usdforge.rules.errors import ConversionError  # noqa: E402
from usdforge.rules.mesh.read import load_parts, read_parts  # noqa: E402

EXTENSIONS = {".stl", ".obj", ".ply", ".off", ".glb", ".gltf", ".dae"}


def main(argv: list[str]) -> int:
    shared = REPO.parent / "shared"
    roots = [shared / "corpus", shared / "conformance", REPO / "assets"]
    missing = [str(root) for root in roots if not root.is_dir()]
    if missing:
        sys.exit(f"bench: missing test data: {', '.join(missing)}")
    files = sorted(p for root in roots for p in root.rglob("*") if p.suffix.lower() in EXTENSIONS and p.is_file())
    files = [f for f in files if not argv or any(s in str(f) for s in argv)]
    used_counts: Counter = Counter()
    mismatches = []
    seconds = {"assimp first": 0.0, "trimesh": 0.0}
    for path in files:
        start = time.perf_counter()
        try:
            ours, used = read_parts(path)
        except ConversionError as exc:
            ours, used = None, f"refused by both: {exc}"
        seconds["assimp first"] += time.perf_counter() - start
        start = time.perf_counter()
        try:
            theirs = load_parts(path)
        except ConversionError:
            theirs = None
        seconds["trimesh"] += time.perf_counter() - start
        used_counts[used if not used.startswith("refused") else "refused by both"] += 1
        if used != "assimp":
            continue
        if theirs is None:
            mismatches.append(f"{path}: Assimp reads a file trimesh refuses")
            continue
        if path.suffix.lower() == ".stl":
            theirs = [part._replace(name=path.name) for part in theirs]
        try:
            assert_parts_read_alike(path, ours, theirs)
        except AssertionError as exc:
            mismatches.append(f"{path}: {str(exc).splitlines()[0]}")
    for line in mismatches:
        print(line)
    print(f"{len(files)} files: " + ", ".join(f"{name} {count}" for name, count in used_counts.most_common()))
    print(f"mismatches where Assimp read: {len(mismatches)}; seconds over all files: "
          + ", ".join(f"{name} {value:.1f}" for name, value in seconds.items()))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
