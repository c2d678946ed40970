"""bench/fuzz.py for about a minute: mutated corpus and conformance files (URDF, MJCF, meshes), and
hostile build-cache entries, give a converted asset without nan/inf or one clean error line, never a crash,
a hang, a traceback or a file touched outside the build and cache folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_minute_of_fuzzing_finds_no_crash_hang_or_non_finite_output(shared_dir):
    result = subprocess.run([sys.executable, str(REPO / "bench/fuzz.py"), "--minutes", "1", "--seed", "12",
                             "--timeout", "60", "--shared", str(shared_dir), "--json"],
                            capture_output=True, text=True, timeout=400)
    summary = json.loads(result.stdout)
    assert summary["tried"] >= 50, summary
    assert summary["clean"] > 0 and summary["converted"] > 0
    assert summary["cache_cases"] >= 10, summary  # hostile cache entries, objects and folders (#24)
    assert (summary["crash"], summary["hang"], summary["nonfinite"], summary["outside"]) == (0, 0, 0, 0), \
        summary["problems"]
    assert result.returncode == 0
