"""bench/differential.py for about a minute (500 steps): random edit sequences (file bytes with and without their size
and modification time, manifest fields, removed and renamed files, a moved or cloned checkout, switched
libraries, a corrupt or lying cache) never leave an output that differs from a clean build; a run during which
the checkout's code changes is void, not a divergence."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_a_code_edit_during_a_run_voids_it(tmp_path, monkeypatch):
    """The tester's clean builds run the code it imported and its fresh-process builds the code on disk: an
    edit of the checkout mid-run made every output's conversion record differ (its cache_key hashes the
    code), reported as a divergence of the first entry (crate.usda) or as Hypothesis's
    FlakyStrategyDefinition. The edit is caught instead, even one that keeps size and modification time."""
    monkeypatch.setattr(sys, "path", [str(REPO / "bench"), *sys.path])  # not syspath_prepend: it imports pkg_resources (1 s)
    differential = importlib.import_module("differential")  # bench/ is outside the type-checked files

    code = tmp_path / "writer.py"
    code.write_text("x = 1\n")
    monkeypatch.setattr(differential, "_code_files", lambda: [code])
    monkeypatch.setattr(differential, "_CODE_AT_START", [differential.code_on_disk()])
    differential.check_code_unchanged()
    before = code.stat()
    code.write_text("x = 2\n")
    os.utime(code, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(differential.CodeChanged):
        differential.check_code_unchanged()
