"""What keeps a library of 100,000 entries linear (issue #32): `doit convert` creates no verify, thumbnail,
report or IK task; the cached task specs load without recomputing and reuse unchanged entries when the
manifest is edited, and a hand-edited cache cannot make a build write elsewhere; killed conversions'
temporary folders are found by one listing per process; `report` depends on the thumbnail group by name.
The timings themselves are in bench/library_scale.py."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONE = REPO / "assets/meshes/cone.off"


def manifest(folder: Path, scales: list[float]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONE, folder / "cone.off")
    path = folder / "library.toml"
    path.write_text("\n".join(f'[[assets]]\nname = "e{i}"\nsource = "cone.off"\n[assets.cfg]\nscale = [{s}, {s}, {s}]\n'
                              for i, s in enumerate(scales)))
    return path


def test_doit_convert_creates_no_verify_thumbnail_report_or_ik_task(tmp_path):
    """A dodo whose verify/thumbnail/report/IK generators fail when called: `doit convert` still builds
    and no-ops (they are created only when asked for, `doit.create_after`)."""
    library = manifest(tmp_path / "lib", [1.0, 2.0])
    wrapper = tmp_path / "dodo_wrapper.py"
    wrapper.write_text(f"""
import sys
sys.path.insert(0, {str(REPO)!r})
import dodo


def fail(*args, **kwargs):
    raise SystemExit("a task generator other than convert's was called")


dodo.verify_tasks = dodo.thumbnail_tasks = dodo.report_tasks = dodo.ik_tasks = fail
from dodo import *  # noqa: F401,F403 - the project's tasks and DOIT_CONFIG
""")
    work = tmp_path / "work"
    work.mkdir()
    command = [sys.executable, "-m", "doit", "-f", str(wrapper), "-d", str(work), "convert", f"library={library}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert sorted(line for line in first.stdout.splitlines() if line.startswith(".  ")) == \
        [".  convert:e0", ".  convert:e1"]
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0 and ".  convert:" not in again.stdout, again.stdout + again.stderr


@pytest.fixture
def specs_module(monkeypatch):
    from usdforge.pipeline import task_specs

    monkeypatch.setattr(task_specs, "_LOADED", {})  # each call reads the cache file, as a new process does
    return task_specs


def test_an_edited_manifest_recomputes_the_edited_entry_only(tmp_path, specs_module, monkeypatch):
    library = manifest(tmp_path / "lib", [1.0, 2.0, 3.0])
    build = tmp_path / "build"
    first = specs_module.task_specs(library, build)
    computed = []
    original = specs_module._entry_spec
    monkeypatch.setattr(specs_module, "_entry_spec", lambda *args: computed.append(args[1].name) or original(*args))
    monkeypatch.setattr(specs_module, "_LOADED", {})
    assert specs_module.task_specs(library, build) == first and computed == []
    library.write_text(library.read_text().replace("scale = [2.0, 2.0, 2.0]", "scale = [2.5, 2.5, 2.5]"))
    monkeypatch.setattr(specs_module, "_LOADED", {})
    edited = specs_module.task_specs(library, build)
    assert computed == ["e1"]
    assert [s["digest"] for s in edited] != [s["digest"] for s in first]
    assert edited[0] == first[0] and edited[2] == first[2]
    assert edited == specs_module.compute_specs(library, build)  # the same as computed from scratch


ENTRY = '[[assets]]\nname = "{name}"\nsource = "cone.off"\n[assets.cfg]\nscale = [{s}, {s}, {s}]\n'
#: Manifests whose text does not split into entries at ``[[assets]]`` lines, or splits wrongly: each must
#: give the specs of the manifest read as a whole.
AWKWARD = {
    "header first": 'allowed_roots = []\n' + ENTRY.format(name="a", s=1.0) + ENTRY.format(name="b", s=2.0),
    "string holding an entry line": ENTRY.format(name="a", s=1.0).replace(
        '[assets.cfg]', 'ee_body = """\n[[assets]]\nname = "c"\n"""\n[assets.cfg]') + ENTRY.format(name="b", s=2.0),
    "indented header": ENTRY.format(name="a", s=1.0) + "  " + ENTRY.format(name="b", s=2.0),
    "table after the entries": ENTRY.format(name="a", s=1.0) + '[ik]\nseed = 1\n',
    "entries given twice": 'assets = [{name = "z", source = "cone.off"}]\n' + ENTRY.format(name="a", s=1.0),
    "crlf": (ENTRY.format(name="a", s=1.0) + ENTRY.format(name="b", s=2.0)).replace("\n", "\r\n"),
    "names equal but for case": ENTRY.format(name="a", s=1.0) + ENTRY.format(name="A", s=2.0),
    "an entry's syntax error": ENTRY.format(name="a", s=1.0) + ENTRY.format(name="b", s=2.0).replace("]\n", "\n"),
    "comments and blank lines": "# lib\n\n" + ENTRY.format(name="a", s=1.0) + "\n# between\n\n"
                                + ENTRY.format(name="b", s=2.0) + "\n# end",
}


@pytest.mark.parametrize("case", sorted(AWKWARD))
def test_specs_read_entry_by_entry_equal_the_manifest_read_as_a_whole(tmp_path, specs_module, monkeypatch, case):
    """An edit re-parses only the entries whose text changed (``_entry_texts``): a manifest that does not
    split into entries cleanly gives, cold and after an edit, what reading it as a whole gives."""
    folder = tmp_path / "lib"
    library = manifest(folder, [])
    library.write_text(AWKWARD[case])
    build = tmp_path / "build"
    split = specs_module.task_specs(library, build)
    library.write_text(AWKWARD[case] + "\n" + ENTRY.format(name="late", s=3.0))
    monkeypatch.setattr(specs_module, "_LOADED", {})
    edited = specs_module.task_specs(library, build)
    monkeypatch.setattr(specs_module, "_entry_texts", lambda text: None)
    assert edited == specs_module.compute_specs(library, build)
    library.write_text(AWKWARD[case])
    assert split == specs_module.compute_specs(library, build)
    assert split and split[0].get("doc") != specs_module.MANIFEST_ERROR_DOC or case in (
        "an entry's syntax error", "names equal but for case", "entries given twice", "table after the entries")


@pytest.mark.parametrize("tamper", ["outputs", "key", "cfg_usd_dir", "cfg_escaped_key"])
def test_a_hand_edited_spec_cache_is_recomputed(tmp_path, specs_module, tamper):
    """The cache names outputs relative to the entry's own folder, and its cfg must write there: an edit
    pointing elsewhere makes the specs be computed again instead of used."""
    library = manifest(tmp_path / "lib", [1.0])
    build = tmp_path / "build"
    expected = specs_module.task_specs(library, build)
    (cache,) = (build / "task-specs").glob("*.json")
    data = json.loads(cache.read_text())
    spec = data["specs"][0]
    outside = str(tmp_path / "outside")
    if tamper == "outputs":
        spec["outputs"].append("../../../outside/x.usda")
    elif tamper == "key":
        spec["key"] = "/etc/passwd"
    elif tamper == "cfg_usd_dir":
        spec["cfg_json"] = spec["cfg_json"].replace(json.dumps(expected[0]["usd_dir"]), json.dumps(outside))
    else:  # a second usd_dir key spelt with an escape: json.loads keeps the last one
        spec["cfg_json"] = spec["cfg_json"][:-1] + ',"usd\\u005fdir":' + json.dumps(outside) + "}"
    cache.write_text(json.dumps(data))
    specs_module._LOADED.clear()
    assert specs_module.task_specs(library, build) == expected
    assert outside not in cache.read_text() and "passwd" not in cache.read_text()


def test_killed_conversions_folders_are_found_by_one_listing(tmp_path, monkeypatch):
    from usdforge.pipeline import atomic

    usd = tmp_path / "usd"
    usd.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = [usd / f".e{i}.tmp-{socket.gethostname()}-{int(dead.stdout)}-abcd" for i in range(3)]
    live = usd / f".e0.tmp-{socket.gethostname()}-{os.getpid()}-efgh"
    for folder in (*killed, live, *(usd / f"e{i}" for i in range(50))):
        folder.mkdir()
    listings = []
    scandir = os.scandir
    monkeypatch.setattr(atomic, "_STAGING_SEEN", {})
    monkeypatch.setattr(atomic.os, "scandir", lambda path: listings.append(path) or scandir(path))
    removed = [atomic.remove_stale_staging(usd / f"e{i}") for i in range(50)]
    assert removed[:3] == [[k] for k in killed] and not any(removed[3:])
    assert not any(k.exists() for k in killed) and live.exists()
    assert listings.count(str(usd)) == 1  # not one per entry: N entries would list N names N times


def test_report_depends_on_the_thumbnail_group_and_stamps_the_pictures(tmp_path, specs_module):
    from usdforge.pipeline.verify_tasks import _stamps, report_tasks, results_unchanged

    library = manifest(tmp_path / "lib", [1.0, 2.0])
    (task,) = report_tasks(library, tmp_path / "build")
    assert task["task_dep"] == ["thumbnail"] and not task.get("file_dep")  # doit matches no file pairwise
    picture = Path(task["actions"][0][1][0][0]["images"]["thumb"])
    picture.parent.mkdir(parents=True)
    picture.write_bytes(b"png")
    values = {"read": _stamps([str(picture)])}
    assert results_unchanged(None, values)
    picture.write_bytes(b"another png")
    assert not results_unchanged(None, values)


def test_the_state_is_written_only_when_doit_changed_it(tmp_path):
    """A no-op does not encode doit's whole state again (at 100,000 entries, ~1 s), nor write it (86 MB):
    the file holds it already. Every change doit's json backend makes (set, remove, remove_all) is still
    written: read back through doit's own backend."""
    from doit.dependency import JsonDB

    from usdforge.pipeline.tasks import CompactJSONCodec

    path = str(tmp_path / "state")
    first = JsonDB(path, CompactJSONCodec())
    first.set("convert:a", "_values_:", {"outputs": {"a.usda": ["0" * 64, [1, 2, 3, 4, 5]]}})
    first.set("convert:b", "_values_:", {})
    first.set("convert", "deps:", ())  # the group task: doit saves it at every run
    first.dump()
    text = Path(path).read_text()
    codec = CompactJSONCodec()
    unchanged = JsonDB(path, codec)
    assert unchanged.get("convert:a", "_values_:")["outputs"]["a.usda"][1] == [1, 2, 3, 4, 5]
    unchanged.set("convert", "deps:", ())  # equal, as JSON, to what it holds
    assert codec.encode(unchanged._db) is codec._read[1]  # not encoded again
    before = os.stat(path)
    unchanged.dump()
    assert (os.stat(path).st_ino, os.stat(path).st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not written
    changes = {"set": lambda db: db.set("convert:a", "_values_:", {"tools": "t"}),
               "set in place": lambda db: db.get("convert:a", "_values_:").update(tools="t")
               or db.set("convert:a", "_values_:", db.get("convert:a", "_values_:")),
               "new task": lambda db: db.set("convert:c", "deps:", []),
               "remove": lambda db: db.remove("convert:b"), "remove_all": lambda db: db.remove_all()}
    for name, change in changes.items():
        Path(path).write_text(text)
        db = JsonDB(path, CompactJSONCodec())
        change(db)
        expected = json.loads(json.dumps(db._db))
        db.dump()
        assert json.loads(Path(path).read_text()) == expected != json.loads(text), name


def test_stamps_recorded_without_one_are_learnt_before_the_state_is_written(tmp_path, monkeypatch):
    """A conversion records the files it just wrote without a stamp (racily clean): the build learns the
    stamps that have settled when it writes doit's state, hashing each file once more, so the first no-op
    after a cold build stats them instead of hashing them. A file changed since it was recorded keeps no
    stamp, and the next up-to-date check finds the change."""
    import time

    from doit.dependency import JsonDB

    from usdforge.pipeline import tasks
    from usdforge.pipeline.fingerprint import file_digest

    library, out = tmp_path / "lib", tmp_path / "build/usd/e"
    library.mkdir()
    out.mkdir(parents=True)
    (library / "cone.off").write_bytes(CONE.read_bytes())
    (out / "e.usda").write_text("#usda 1.0\n")
    (out / "e_meshes.usd").write_text("meshes")
    values = {"inputs": {"cone.off": [file_digest(library / "cone.off"), None]},
              "outputs": {name: [file_digest(out / name), None] for name in ("e.usda", "e_meshes.usd")}}
    monkeypatch.setattr(tasks, "_BASES", {"convert:e": (str(library), str(out))})
    path = str(tmp_path / "state")
    db = JsonDB(path, tasks.CompactJSONCodec())
    db.set("convert:e", "_values_:", values)
    (out / "e_meshes.usd").write_text("edited")  # after the conversion recorded it
    time.sleep(0.15)  # past the racy window of a file system with sub-second times
    db.dump()
    saved = json.loads(Path(path).read_text())["convert:e"]["_values_:"]
    assert saved["inputs"]["cone.off"][1] is not None and saved["outputs"]["e.usda"][1] is not None
    assert saved["outputs"]["e_meshes.usd"][1] is None
    assert tasks._unchanged(saved["outputs"], str(out)) is False


def test_convert_tasks_name_no_targets_and_readers_of_their_outputs_depend_on_them_by_name(tmp_path, monkeypatch):
    """doit stats every target of every task at a no-op, and built_unchanged already checks each output:
    convert tasks have none, so verify and thumbnail name convert:<name> in task_dep (else they could run
    before, or without, the conversion they read)."""
    from usdforge.pipeline import tasks
    from usdforge.pipeline.verify_tasks import thumbnail_tasks, verify_tasks

    library = manifest(tmp_path / "lib", [1.0, 2.0])
    build = tmp_path / "build"
    try:
        from usdforge.pipeline.cache import BUILD_ENV

        monkeypatch.setenv(BUILD_ENV, "listing")  # convert_tasks sets it for its run: undone for later tests
        converts = list(tasks.convert_tasks(library, build, cache="off"))
    finally:
        os.close(tasks._HELD.pop(os.path.abspath(build)))  # the build folder's lock, as at a doit run's end
    assert [t["name"] for t in converts] == ["e0", "e1"] and not any(t.get("targets") for t in converts)
    for reader in (*verify_tasks(library, build), *thumbnail_tasks(library, build)):
        assert reader["task_dep"] == [f"convert:{reader['name']}"], reader["name"]
