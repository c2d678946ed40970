"""bench/differential.py for about a minute (500 steps): random edit sequences (file bytes with and without their size
and modification time, manifest fields, removed and renamed files, a moved or cloned checkout, switched
libraries, a corrupt or lying cache) never leave an output that differs from a clean build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_minute_of_random_steps_never_diverges_from_a_clean_build(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TMPDIR": str(tmp_path)}
    env.pop("USDFORGE_CACHE", None)
    result = subprocess.run([sys.executable, str(REPO / "bench" / "differential.py"), "--steps", "500",
                             "--seed", "23", "--example-steps", "25", "--json", "--no-cfg-edits"],
                            capture_output=True, text=True, timeout=900, env=env)
    summary = json.loads(result.stdout)
    assert summary["steps"] >= 500 and summary["clean_builds"] > 0, summary
    assert summary["divergences"] == 0, (summary["divergence"], result.stderr[-3000:])
    assert result.returncode == 0
