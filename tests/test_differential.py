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


def test_a_clean_build_is_not_memoised_past_a_file_outside_the_entrys_folders(tmp_path, monkeypatch):
    """The oracle memoised a clean build by the content of the folders the entry may read, but a conversion
    also sees whether a file it names elsewhere exists: crate.mtl naming ../shared/wood.png (no allowed
    root) fails while the file exists and converts without the texture once it is renamed. The memoised
    failure outlived the rename and was reported as a divergence (``--seed 7``, step 193)."""
    monkeypatch.setattr(sys, "path", [str(REPO / "bench"), *sys.path])
    differential = importlib.import_module("differential")

    manifests = differential.make_checkout(tmp_path)
    lib = tmp_path / "lib"
    (lib / "library.toml").write_text(differential.manifest_text({"crate": manifests["library.toml"]["crate"]}))
    mtl = lib / "crate" / "crate.mtl"
    mtl.write_text("".join("map_Kd ../shared/wood.png\n" if line.startswith("map_Kd") else line
                           for line in mtl.read_text().splitlines(keepends=True)))
    oracle = differential.Oracle(tmp_path / "scratch")
    assert "outside the model's folder" in oracle.clean(lib, "library.toml", "crate")
    (lib / "shared" / "wood.png").rename(lib / "shared" / "wood.png.renamed")
    converted = oracle.clean(lib, "library.toml", "crate")
    assert isinstance(converted, dict) and "crate.usda" in converted, converted
    assert oracle.runs == 2


def test_a_divergence_that_a_replay_does_not_meet_again_is_reported_not_hypothesis_flaky_error(tmp_path, monkeypatch):
    """A divergence that depends on a kill's timing may not recur when Hypothesis replays the failing example:
    the tester reported Hypothesis's Flaky error (or FlakyStrategyDefinition) and the replay's steps instead
    of the divergence it met and its steps."""
    monkeypatch.setattr(sys, "path", [str(REPO / "bench"), *sys.path])
    differential = importlib.import_module("differential")

    calls = []

    def diverges_once(self, fresh_process=False):
        differential.IncrementalBuilds.steps += 1
        calls.append(len(calls))
        if len(calls) == 2:
            raise differential.Divergence("arm: outputs differ from a clean build: arm.usda")

    monkeypatch.setattr(differential.IncrementalBuilds, "build_and_compare", diverges_once)
    monkeypatch.setattr(differential, "_doit_process", lambda *args: subprocess.Popen(
        [sys.executable, "-c", ""], start_new_session=True))  # kill_a_build, two_builds_at_once: no real build
    summary = differential.run(6, 5, 3, tmp_path, cfg_edits=False)
    assert summary["divergences"] == 1, summary
    assert summary["divergence"]["error"].startswith("Divergence: arm: outputs differ"), summary["divergence"]
    assert summary["divergence"]["steps"][0] == "fresh checkout" and len(summary["divergence"]["steps"]) == 2
