"""What caching MuJoCo's compiled model (``rules.mjcf.compiled``) saves on a rebuild against the room it
takes, for each MJCF model of ``../shared/corpus``: compiling it again (what a cfg edit costs without the
cache) against reading it back from the cache (zlib-decompressing the stored MJB and loading it through
MuJoCo's virtual file system), and the MJB's size raw and compressed.

    python bench/compiled_cache.py [--repeat 3]

Times are CPU seconds of this process (median of ``--repeat`` runs), steadier than wall time on a shared
machine; the decision they back is in ``rules.mjcf.compiled``'s docstring.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import zlib
from pathlib import Path

import mujoco
import numpy as np

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def _cpu(action) -> tuple[float, object]:
    started = time.process_time()
    value = action()
    return time.process_time() - started, value


def measure(path: Path, repeat: int) -> dict[str, float]:
    mujoco.mj_setCacheCapacity(mujoco.mj_getCache(), 0)  # every compile decodes the meshes, as a doit worker does
    compiles, loads = [], []
    for _ in range(repeat):
        seconds, model = _cpu(lambda: mujoco.MjSpec.from_file(str(path)).compile())
        compiles.append(seconds)
    buffer = np.empty(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    packed = zlib.compress(buffer, 1)
    for _ in range(repeat):
        seconds, _ = _cpu(lambda: mujoco.MjModel.from_binary_path("m.mjb", {"m.mjb": zlib.decompress(packed)}))
        loads.append(seconds)
    compile_s, load_s = statistics.median(compiles), statistics.median(loads)
    return {"compile_s": round(compile_s, 3), "cached_load_s": round(load_s, 3),
            "saved_s": round(compile_s - load_s, 3), "mjb_mb": round(buffer.size / 1e6, 1),
            "stored_mb": round(len(packed) / 1e6, 1),
            "saved_s_per_stored_gb": round((compile_s - load_s) / (len(packed) / 1e9), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    totals = {"saved_s": 0.0, "stored_mb": 0.0, "mjb_mb": 0.0}
    for entry in manifest:
        if entry["format"] != "mjcf":
            continue
        row = measure(CORPUS / entry["path"], args.repeat)
        for key in totals:
            totals[key] += row[key]
        print(json.dumps({"model": entry["name"], **row}), flush=True)
    print(json.dumps({"model": "total", **{k: round(v, 2) for k, v in totals.items()}}))


if __name__ == "__main__":
    main()
