"""The build cache (#13): content keys independent of location, restores byte for byte, mesh geometry
read once, corrupt or half-written objects never accepted, concurrent builds on one cache, provenance."""

from __future__ import annotations

import collections
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from test_doit import REPO, doit, executed
from test_lazy import textured_obj
from usdforge.pipeline import MeshConverter, UrdfConverter
from usdforge.pipeline.cache import Store
from usdforge.pipeline.cli import main
from usdforge.pipeline.manifest import entry_cfg, load_library
from usdforge.schemas import MeshConverterCfg

LIBRARY = """
[[assets]]
name = "crate"
source = "meshes/crate.obj"
[assets.cfg]
mass_props = { mass = 1.0 }

[[assets]]
name = "arm"
source = "robots/tiny_arm/urdf/tiny_arm.urdf"
packages = { tiny_arm = "robots/tiny_arm" }
[assets.cfg]
fix_base = true

[[assets]]
name = "arm_free"
source = "robots/tiny_arm/urdf/tiny_arm.urdf"
packages = { tiny_arm = "robots/tiny_arm" }
[assets.cfg]
joint_drive = { gains = { stiffness = 100.0, damping = 5.0 } }
"""


def make_checkout(root: Path) -> Path:
    """A checkout-like folder: ``lib/`` (a textured OBJ and two entries sharing tiny_arm's meshes) and
    ``work/`` where doit runs. Returns the manifest."""
    lib = root / "lib"
    (lib / "meshes").mkdir(parents=True)
    textured_obj(lib / "meshes")
    shutil.copytree(REPO / "assets" / "robots" / "tiny_arm", lib / "robots" / "tiny_arm",
                    ignore=shutil.ignore_patterns("*.py"))
    (lib / "library.toml").write_text(LIBRARY)
    (root / "work").mkdir()
    return lib / "library.toml"


def outputs(usd_root: Path) -> dict[str, bytes]:
    """Every output file under ``usd_root`` but the sidecars (they name their own folder) and the
    conversion records (they hold wall times)."""
    return {p.relative_to(usd_root).as_posix(): p.read_bytes() for p in sorted(usd_root.rglob("*"))
            if p.is_file() and not p.name.endswith((".usdforge.toml", ".convert.json"))}


def last_build(cache: Path) -> dict:
    return Store(cache).stats()["last_build"]


def test_moving_a_built_checkout_converts_nothing(tmp_path):
    library = make_checkout(tmp_path / "checkout")
    first = doit(tmp_path / "checkout" / "work", "convert", library=library)
    assert first.returncode == 0, first.stderr
    assert executed(first) == ["convert:arm", "convert:arm_free", "convert:crate"]
    moved = tmp_path / "elsewhere" / "checkout"
    moved.parent.mkdir()
    shutil.move(tmp_path / "checkout", moved)
    usd = moved / "work" / "build" / "usd"
    stamps = {p: p.stat().st_mtime_ns for p in usd.rglob("*") if p.is_file()}
    again = doit(moved / "work", "convert", library=moved / "lib" / "library.toml")
    assert again.returncode == 0, again.stderr
    assert executed(again) == []  # doit's own state: up to date, nothing converted, nothing restored
    assert {p: p.stat().st_mtime_ns for p in usd.rglob("*") if p.is_file()} == stamps
    sidecar = (usd / "crate" / "crate.usdforge.toml").read_text()
    assert str(tmp_path) not in sidecar


def test_a_no_op_doit_convert_imports_neither_pxr_nor_cattrs(tmp_path):
    """The doit process of a no-op build only stats files: importing usdforge.schemas (cattrs and every
    cfg class) or pxr there more than doubled its time (bench/noop.py)."""
    library = make_checkout(tmp_path)
    assert doit(tmp_path / "work", "convert", library=library).returncode == 0
    script = textwrap.dedent(f"""
        import runpy, sys
        sys.argv = ["doit", "-f", {str(REPO / "dodo.py")!r}, "-d", {str(tmp_path / "work")!r}, "convert",
                    "library={library}"]
        try:
            runpy.run_module("doit", run_name="__main__")
        except SystemExit as exc:
            assert not exc.code, exc.code
        print("heavy:", sorted(m for m in ("pxr", "cattrs", "trimesh", "mujoco", "usdforge.schemas")
                               if m in sys.modules))
        """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr
    assert executed(run) == []
    assert "heavy: []" in run.stdout


def test_second_clone_with_the_first_clones_cache_converts_nothing(tmp_path):
    cache = tmp_path / "shared-cache"
    first_library = make_checkout(tmp_path / "one")
    built = doit(tmp_path / "one" / "work", "convert", f"cache={cache}", library=first_library)
    assert built.returncode == 0, built.stderr
    # A clone: same bytes, new folder, new modification times, no doit state, no outputs.
    second = tmp_path / "two"
    shutil.copytree(tmp_path / "one" / "lib", second / "lib", copy_function=shutil.copy)
    (second / "work").mkdir()
    cloned = doit(second / "work", "convert", f"cache={cache}", library=second / "lib" / "library.toml")
    assert cloned.returncode == 0, cloned.stderr
    assert last_build(cache) == {"mesh": {"hits": 1, "misses": 0}, "urdf": {"hits": 2, "misses": 0}}
    assert outputs(second / "work/build/usd") == outputs(tmp_path / "one/work/build/usd")
    assert executed(doit(second / "work", "convert", f"cache={cache}", library=second / "lib" / "library.toml")) == []


def test_a_library_reads_each_mesh_file_once(tmp_path, monkeypatch, build_cache):
    import usdforge.rules.robot.meshes as meshes  # read_file: Assimp first, trimesh as its fallback

    reads = collections.Counter()
    real = meshes.read_file

    def counting(path, *args, **kwargs):
        reads[Path(path).name] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(meshes, "read_file", counting)
    library_path = make_checkout(tmp_path)
    library = load_library(library_path)
    for index, entry in enumerate(library.assets):
        if entry.name.startswith("arm"):
            UrdfConverter(entry_cfg(library, entry, index, tmp_path / "build"), cache=build_cache)
    # tiny_arm: base.stl, segment.obj (three links) and finger.stl (two fingers), in two entries.
    assert reads == {"base.stl": 1, "segment.obj": 1, "finger.stl": 1}
    assert last_build(build_cache)["mesh-geometry"] == {"hits": 3, "misses": 3}


def test_cfg_edit_reuses_cached_geometry_and_equals_a_cold_conversion(tmp_path, build_cache):
    library_path = make_checkout(tmp_path)
    library = load_library(library_path)
    cfg = entry_cfg(library, library.assets[1], 1, tmp_path / "build")
    UrdfConverter(cfg, cache=build_cache)
    import attrs

    from usdforge.schemas.urdf_cfg import JointDriveCfg, PDGainsCfg

    edited = attrs.evolve(cfg, joint_drive=JointDriveCfg(gains=PDGainsCfg(stiffness=7.0, damping=1.0)))
    rebuilt = UrdfConverter(edited, cache=build_cache)
    assert rebuilt.converted and not rebuilt.restored
    cold = UrdfConverter(attrs.evolve(edited, usd_dir=str(tmp_path / "cold")), cache=False)
    assert outputs(Path(rebuilt.usd_dir)) == outputs(Path(cold.usd_dir))
    # No mesh file read again, nor its cached parts (the colliders' part names come from the mesh entries'
    # records: only the cold conversion's 3 misses), and the geometry layer left as the first build wrote it
    # (its unit's key unchanged: rules.robot.layer_reuse), its prototypes not even hashed; in a fresh
    # folder, copied from the cache under that key.
    lookups = last_build(build_cache)
    assert lookups["mesh-geometry"] == {"hits": 0, "misses": 3}
    assert lookups["geometry-layer"] == {"hits": 0, "misses": 1}
    assert lookups["kept:geometry"]["hits"] == 1 and lookups["layer:geometry"]["hits"] == 0
    elsewhere = UrdfConverter(attrs.evolve(edited, usd_dir=str(tmp_path / "elsewhere"),
                                           joint_drive=JointDriveCfg(gains=PDGainsCfg(stiffness=8.0, damping=1.0))),
                              cache=build_cache)
    assert elsewhere.converted and not elsewhere.restored
    assert last_build(build_cache)["layer:geometry"]["hits"] == 1


def test_a_restore_gives_the_conversions_warnings_naming_the_files_where_they_are(tmp_path, build_cache):
    from usdforge.rules.conversion_warnings import ConversionWarning
    from usdforge.schemas import UrdfConverterCfg

    urdf = '<robot name="r"><link name="base"/><link name="arm"><visual><geometry><box size="1 1 1"/>' \
           '</geometry></visual></link><joint name="j" type="revolute"><parent link="base"/><child link="arm"/>' \
           '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>'
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "r.urdf").write_text(urdf)
    with pytest.warns(ConversionWarning) as converted:
        UrdfConverter(UrdfConverterCfg(asset_path=str(tmp_path / "one/r.urdf"), usd_dir=str(tmp_path / "out1")))
    with pytest.warns(ConversionWarning) as restored:
        again = UrdfConverter(UrdfConverterCfg(asset_path=str(tmp_path / "two/r.urdf"), usd_dir=str(tmp_path / "out2")))
    assert again.restored
    first = [str(w.message) for w in converted if issubclass(w.category, ConversionWarning)]
    second = [str(w.message) for w in restored if issubclass(w.category, ConversionWarning)]
    assert first and second == [m.replace(str(tmp_path / "one"), str(tmp_path / "two")) for m in first]


@pytest.mark.parametrize("damage", ["bit flip", "truncation"])
def test_a_corrupt_cache_object_is_detected_and_rebuilt(tmp_path, caplog, damage):
    asset = textured_obj(tmp_path)
    cache = Store(tmp_path / "cache")
    first = MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "a")), cache=cache)
    objects = sorted((tmp_path / "cache" / "objects").rglob("*"), key=lambda p: -p.stat().st_size if p.is_file() else 0)
    victim = objects[0]
    data = bytearray(victim.read_bytes())
    if damage == "bit flip":
        data[len(data) // 2] ^= 0x10
    else:
        data = data[: len(data) // 2]
    victim.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="usdforge"):
        second = MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "b")), cache=cache)
    assert second.converted and not second.restored
    assert any("corrupt" in record.getMessage() for record in caplog.records)
    assert outputs(tmp_path / "b") == outputs(tmp_path / "a") and first.cache_key == second.cache_key
    import hashlib

    assert hashlib.sha256(victim.read_bytes()).hexdigest() == victim.name  # rewritten intact
    third = MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "c")), cache=cache)
    assert third.restored


def test_kill_9_during_a_cache_write_never_leaves_an_accepted_object(tmp_path):
    cache = tmp_path / "cache"
    script = textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        sys.path.insert(0, {str(REPO)!r})
        from usdforge.pipeline import cache
        from usdforge.pipeline.cache import Store

        def half_then_hang(fd, data):
            os.write(fd, data[: len(data) // 2])
            print("writing", flush=True)
            time.sleep(120)

        cache._write_all = half_then_hang
        Store({str(cache)!r}).put_entry("k" * 64, {{"big.usd": b"x" * (1 << 20)}})
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "writing"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    store = Store(cache)
    assert store.get_entry("k" * 64) is None
    import hashlib

    sha = hashlib.sha256(b"x" * (1 << 20)).hexdigest()
    assert store.get_bytes(sha) is None
    leftovers = [p for p in (cache / "objects").rglob("*") if p.is_file()]
    assert leftovers and all(p.name.startswith(".") for p in leftovers)  # only the writer's temporary file
    assert store.stats()["objects"] == 0
    assert store.put_entry("k" * 64, {"big.usd": b"x" * (1 << 20)}) == {"big.usd": sha}
    assert store.get_entry("k" * 64).files == {"big.usd": b"x" * (1 << 20)}


def test_an_entry_naming_its_own_objects_under_other_names_is_a_miss(tmp_path, caplog):
    """A robot's layer entry (``rules.robot.layer_reuse.store_units``) shares objects with the whole
    output's entry, so each object is also written for the whole output's key: an entry forged to name its
    layer's object as the stage passed a claim check by key alone, and a restore wrote the physics layer's
    bytes as arm.usda (bench/differential.py --seed 23, after a kill -9 left the output stale)."""
    import json

    from usdforge.pipeline.cache import sha256_bytes

    store = Store(tmp_path / "cache")
    whole = {"arm.usda": b"#usda 1.0 (stage)\n", "payloads/physics.usda": b"#usda 1.0 (physics)\n"}
    shas = store.put_entry("a" * 64, whole, kind="urdf")
    store.put_entry("b" * 64, {"payloads/physics.usda": whole["payloads/physics.usda"]}, kind="layer:physics")
    assert store.get_entry("a" * 64).files == whole
    path = tmp_path / "cache" / "entries" / "aa" / f"{'a' * 64}.json"
    body = json.loads(path.read_bytes())
    body.pop("checksum")
    body["files"]["arm.usda"] = shas["payloads/physics.usda"]  # intact, and written for this key
    body["checksum"] = sha256_bytes(json.dumps(body, sort_keys=True).encode())
    path.write_text(json.dumps(body, sort_keys=True))
    with caplog.at_level(logging.WARNING, logger="usdforge"):
        assert store.get_entry("a" * 64) is None
    assert any("not written for its key" in record.getMessage() for record in caplog.records)
    assert store.get_entry("b" * 64).files == {"payloads/physics.usda": whole["payloads/physics.usda"]}
    # An entry of an older usdforge, whose claims were lines of a file named by the object: a quiet miss,
    # then stored again and restored.
    store.put_entry("a" * 64, whole, kind="urdf")
    for path in (tmp_path / "cache" / "claims").rglob("*"):
        if path.is_file():
            path.unlink()
    for sha in shas.values():
        claims = tmp_path / "cache" / "claims" / sha[:2] / sha
        claims.parent.mkdir(parents=True, exist_ok=True)
        claims.write_text("a" * 64 + "\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="usdforge"):
        assert Store(tmp_path / "cache").get_entry("a" * 64) is None
    assert not caplog.records
    store.put_entry("a" * 64, whole, kind="urdf")
    assert store.get_entry("a" * 64).files == whole


def test_two_builds_sharing_one_cache_at_the_same_time_both_finish_correctly(tmp_path):
    cache = tmp_path / "shared-cache"
    libraries = [make_checkout(tmp_path / name) for name in ("one", "two")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    processes = [subprocess.Popen([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d",
                                   str(tmp_path / name / "work"), "convert", f"cache={cache}", f"library={library}"],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for name, library in zip(("one", "two"), libraries)]
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    reference = tmp_path / "reference"
    env_off = {**env, "USDFORGE_CACHE": "off"}
    (reference / "work").mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(reference / "work"),
                    "convert", f"library={libraries[0]}"], env=env_off, check=True, capture_output=True, timeout=300)
    expected = outputs(reference / "work/build/usd")
    assert outputs(tmp_path / "one/work/build/usd") == expected
    assert outputs(tmp_path / "two/work/build/usd") == expected
    assert Store(cache).stats()["entries"] >= 3


def test_doit_clean_keeps_the_cache_and_cache_clear_empties_it(tmp_path, capsys):
    library = make_checkout(tmp_path)
    work, cache = tmp_path / "work", tmp_path / "work" / "build" / "cache"
    saved = os.environ.pop("USDFORGE_CACHE")  # the default cache: build/cache
    try:
        assert doit(work, "convert", library=library).returncode == 0
        entries = Store(cache).stats()["entries"]
        assert entries >= 3
        assert doit(work, "clean", "convert", library=library).returncode == 0
        assert not (work / "build/usd/crate/crate.usda").exists() and Store(cache).stats()["entries"] == entries
        assert doit(work, "convert", library=library).returncode == 0
        assert last_build(cache) == {"mesh": {"hits": 1, "misses": 0}, "urdf": {"hits": 2, "misses": 0}}
        assert main(["cache", "stats", "--cache", str(cache)]) == 0
        assert "last build: 3/3 lookups hit (100 %)" in capsys.readouterr().out
        assert main(["cache", "clear", "--cache", str(cache)]) == 0
        assert Store(cache).stats()["entries"] == 0
    finally:
        os.environ["USDFORGE_CACHE"] = saved


def test_prune_drops_least_recently_used_artifacts_first(tmp_path):
    store = Store(tmp_path / "cache")
    for index, name in enumerate(("old", "middle", "new")):
        key = name.ljust(64, "0")
        store.put_entry(key, {"a": name.encode() * 1000})
        entry = tmp_path / "cache" / "entries" / key[:2] / f"{key}.json"
        os.utime(entry, (time.time() - 1000 + index * 100,) * 2)
    store.entry("old".ljust(64, "0"))  # used now: the most recent
    size = store.stats()["bytes"]
    assert main(["cache", "prune", "--max-size", str(size - 1000), "--cache", str(tmp_path / "cache")]) == 0
    assert store.entry("middle".ljust(64, "0")) is None
    assert store.entry("old".ljust(64, "0")) is not None and store.entry("new".ljust(64, "0")) is not None
    assert store.stats()["objects"] == 2
    orphan = store.put_bytes(b"written by a build whose entry is not there yet")
    store.prune(0)
    assert store.stats()["entries"] == 0 and store.get_bytes(orphan) is not None  # young orphans stay


def test_the_cache_keeps_its_size_limit_least_recently_used_first_and_stats_say_what_takes_the_room(
        tmp_path, monkeypatch, capsys):
    """A store over its limit (``USDFORGE_CACHE_MAX_SIZE``) prunes as it writes, least recently used first,
    down to 80 % of it; ``usdforge cache stats`` names the kinds of artifact taking the room."""
    monkeypatch.setenv("USDFORGE_CACHE_MAX_SIZE", "20KB")
    store = Store(tmp_path / "cache")
    assert store.max_bytes == 20_000
    now = time.time()
    for name, age in (("a", 0), ("b", 300), ("c", 200)):
        key = name.ljust(64, "0")
        store.put_entry(key, {"part": name.encode() * 6000}, kind="mesh-geometry" if name != "c" else "urdf")
        os.utime(tmp_path / "cache" / "entries" / key[:2] / f"{key}.json", (now - age,) * 2)
    assert store.size() < 20_000 and store.stats()["entries"] == 3  # under the limit: nothing pruned
    assert main(["cache", "stats", "--cache", str(tmp_path / "cache")]) == 0
    printed = capsys.readouterr().out
    assert "of 20.0 KB at most" in printed
    assert "  mesh-geometry: 12." in printed and "in 2 entries" in printed and "  urdf: 6." in printed, printed
    store.put_entry("d".ljust(64, "0"), {"part": b"d" * 6000}, kind="mjcf")  # 4 x 6 kB: over the limit
    assert store.size() <= 16_000
    assert [store.entry(n.ljust(64, "0")) is not None for n in "abcd"] == [True, False, False, True]
    assert Store(tmp_path / "cache").stats()["objects"] == 2  # the dropped entries' objects went with them


def test_a_one_off_conversion_leaves_nothing_but_its_output_folder_and_caches_in_the_users_folder(
        tmp_path, monkeypatch):
    """``usdforge convert IN out`` (and the Python API) without a cache setting use
    ``$XDG_CACHE_HOME/usdforge``: the folder it runs in holds only ``out`` afterwards."""
    (tmp_path / "src").mkdir()
    asset = textured_obj(tmp_path / "src")
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.delenv("USDFORGE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert main(["convert", "-q", str(asset), "out"]) == 0
    assert sorted(os.listdir(here)) == ["out"]
    assert (here / "out" / "crate.usd").is_file()
    user_cache = Store(tmp_path / "xdg" / "usdforge")
    assert user_cache.stats()["by_kind"]["mesh"]["entries"] == 1
    again = MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "api-out")))
    assert again.restored and sorted(os.listdir(here)) == ["out"]


def test_an_unwritable_cache_degrades_to_no_cache_with_one_warning(tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    library = load_library(make_checkout(tmp_path))
    with caplog.at_level(logging.WARNING, logger="usdforge"):
        for index, entry in enumerate(library.assets):
            converter = {"crate": MeshConverter}.get(entry.name, UrdfConverter)
            built = converter(entry_cfg(library, entry, index, tmp_path / "build"), cache=blocker / "cache")
            assert built.converted and Path(built.usd_path).is_file()
    warned = [r for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(warned) == 1


def test_a_byte_identical_copy_elsewhere_is_up_to_date_and_provenance_is_location_free(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    asset = textured_obj(tmp_path / "a")
    out = tmp_path / "out"
    first = MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(out)), cache=False)
    copy = tmp_path / "b"
    shutil.copytree(asset.parent, copy, copy_function=shutil.copy)
    again = MeshConverter(MeshConverterCfg(asset_path=str(copy / asset.name), usd_dir=str(out)), cache=False)
    assert not again.converted and again.reasons == []
    elsewhere = MeshConverter(MeshConverterCfg(asset_path=str(copy / asset.name), usd_dir=str(tmp_path / "out2")),
                              cache=False)
    assert outputs(out) == outputs(tmp_path / "out2")  # byte-identical wherever built
    assert all(str(tmp_path).encode() not in data for data in outputs(out).values())
    assert main(["info", first.usd_path]) == 0
    printed = capsys.readouterr().out
    assert f"cache_key: {first.cache_key}" in printed and "source: crate.obj" in printed
    assert elsewhere.cache_key == first.cache_key


def _without_slim_intermediate(monkeypatch) -> None:
    """No slim MJCF intermediate is stored (``rules.mjcf.slim``, which a cfg-only rebuild reads before any
    compiled model): a rebuild then loads the model, from the compiled MJB when one is stored."""
    from usdforge.rules.mjcf import slim

    monkeypatch.setattr(slim, "storable", lambda model, repaired: False)


def test_mjcf_compiled_model_is_reused_on_a_cfg_edit_and_not_after_a_mesh_edit(tmp_path, build_cache, monkeypatch):
    """MuJoCo's compiled model (MJB) comes from the cache when only the cfg changed; a mesh edit compiles
    again; either way the output is byte for byte a conversion without the cache. Storing it is opt-in
    (``USDFORGE_CACHE_COMPILED=on``): by default it is not stored, since it does not pay for its room."""
    import attrs

    from usdforge.pipeline import MjcfConverter
    from usdforge.schemas import MjcfConverterCfg

    shutil.copytree(REPO / "assets" / "robots" / "pan_tilt", tmp_path / "pan_tilt")
    source = tmp_path / "pan_tilt" / "pan_tilt.xml"
    cfg = MjcfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out"))
    monkeypatch.delenv("USDFORGE_CACHE_COMPILED", raising=False)
    _without_slim_intermediate(monkeypatch)
    MjcfConverter(attrs.evolve(cfg, usd_dir=str(tmp_path / "auto")), cache=tmp_path / "auto-cache")
    kinds = Store(tmp_path / "auto-cache").stats()["by_kind"]
    assert "mjcf" in kinds and "mjcf-compiled" not in kinds, kinds
    monkeypatch.setenv("USDFORGE_CACHE_COMPILED", "on")
    MjcfConverter(cfg, cache=build_cache)
    assert Store(build_cache).stats()["by_kind"]["mjcf-compiled"]["entries"] == 1
    edited = attrs.evolve(cfg, override_gain_prm=(321.0,))
    rebuilt = MjcfConverter(edited, cache=build_cache)
    assert rebuilt.converted and not rebuilt.restored
    assert last_build(build_cache)["mjcf-compiled"] == {"hits": 1, "misses": 1}
    cold = MjcfConverter(attrs.evolve(edited, usd_dir=str(tmp_path / "cold")), cache=False)
    assert outputs(tmp_path / "out") == outputs(tmp_path / "cold")

    hood = tmp_path / "pan_tilt" / "meshes" / "hood.obj"
    hood.write_text("\n".join(f"v {2 * float(x)} {y} {z}" if line.startswith("v ") else line
                              for line in hood.read_text().splitlines() for _, x, y, z in
                              [line.split() if line.startswith("v ") else ("", 0, 0, 0)]) + "\n")
    again = MjcfConverter(edited, cache=build_cache)
    assert again.converted and not again.restored
    assert last_build(build_cache)["mjcf-compiled"] == {"hits": 1, "misses": 2}
    cold = MjcfConverter(attrs.evolve(edited, usd_dir=str(tmp_path / "cold-edited")), cache=False)
    assert outputs(tmp_path / "out") == outputs(tmp_path / "cold-edited")
    assert outputs(tmp_path / "out") != outputs(tmp_path / "cold")


def test_mjcf_compiled_model_is_not_reused_when_compiling_changes_the_spec(tmp_path, build_cache, shared_dir):
    """fusestatic merges bodies as MuJoCo compiles: a freshly parsed spec does not match the model, which is
    therefore not stored."""
    import attrs

    from usdforge.pipeline import MjcfConverter
    from usdforge.schemas import MjcfConverterCfg

    source = shared_dir / "conformance" / "mjcf" / "scene_attributes.xml"
    cfg = MjcfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out"))
    MjcfConverter(cfg, cache=build_cache)
    rebuilt = MjcfConverter(attrs.evolve(cfg, override_gain_prm=(321.0,)), cache=build_cache)
    assert rebuilt.converted and not rebuilt.restored
    assert last_build(build_cache)["mjcf-compiled"] == {"hits": 0, "misses": 2}  # looked up, never stored
    assert last_build(build_cache)["mjcf"] == {"hits": 0, "misses": 2}


def _hashed(monkeypatch) -> collections.Counter:
    """Names of the input files the converters hash (``file_digest`` as pipeline.converters and the
    stamped hashing of pipeline.fingerprint call it)."""
    import usdforge.pipeline.converters as converters
    import usdforge.pipeline.fingerprint as fingerprint

    counts = collections.Counter()
    real = converters.file_digest

    def counting(path):
        counts[Path(path).name] += 1
        return real(path)

    monkeypatch.setattr(converters, "file_digest", counting)
    monkeypatch.setattr(fingerprint, "file_digest", counting)
    return counts


def test_a_cfg_edit_hashes_no_unchanged_input_again_and_an_edit_keeping_size_and_time_is_seen(
        tmp_path, monkeypatch, build_cache):
    """The sidecar's stamps (size, modification and change times, inode) stand for an input's digest
    while they match; an edit that restores size and modification time changes the change time."""
    import usdforge.pipeline.fingerprint as fingerprint
    import usdforge.pipeline.lazy as lazy
    from usdforge.schemas import MassPropertiesCfg

    monkeypatch.setattr(fingerprint, "RACY_SECONDS", 0.0)  # the files were written just now
    asset = textured_obj(tmp_path)
    out = tmp_path / "out"
    MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(out)))
    assert set(lazy.read_key(out / "crate.usdforge.toml").stamps) == {"crate.obj", "crate.mtl", "wood.png"}
    hashed = _hashed(monkeypatch)
    edited = MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(out), mass_props=MassPropertiesCfg(mass=2.0)))
    assert edited.converted and hashed == {}
    # Same size, same modification time, other bytes: still a change.
    mtl = tmp_path / "crate.mtl"
    stat = mtl.stat()
    mtl.write_text(mtl.read_text().replace("0.6 0.4 0.2", "0.2 0.4 0.6"))
    os.utime(mtl, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert mtl.stat().st_size == stat.st_size and mtl.stat().st_mtime_ns == stat.st_mtime_ns
    again = MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(out), mass_props=MassPropertiesCfg(mass=2.0)))
    assert again.converted and any("crate.mtl" in reason for reason in again.reasons)
    assert hashed == {"crate.mtl": 1}


def test_inputs_modified_just_now_are_not_stamped(tmp_path, monkeypatch):
    """A file changed within the racy window could be edited again within its time stamp's tick: no
    stamp, so the next build hashes it. Whole-second times (a coarse file system) get the longer window."""
    import usdforge.pipeline.fingerprint as fingerprint
    import usdforge.pipeline.lazy as lazy

    monkeypatch.setattr(fingerprint, "RACY_SECONDS_FINE", 60.0)
    asset = textured_obj(tmp_path)
    MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "out")))
    assert lazy.read_key(tmp_path / "out" / "crate.usdforge.toml").stamps == {}
    now = time.time_ns()
    assert fingerprint.settled([1, now - 500_000_000, now - 500_000_001, 1]) is False  # fine times, 0.5 s < 60 s
    monkeypatch.setattr(fingerprint, "RACY_SECONDS_FINE", 0.1)
    assert fingerprint.settled([1, now - 500_000_000, now - 500_000_001, 1]) is True
    # Judged when hashing started, not when the stamp is written: changed 50 ms before the hash began.
    assert fingerprint.settled([1, now - 500_000_000, now - 500_000_001, 1], hashed_at=now - 450_000_000) is False
    whole = (now // 1_000_000_000 - 1) * 1_000_000_000  # a coarse file system's times, 1 s ago
    assert fingerprint.settled([1, whole, whole, 1]) is False
    assert fingerprint.settled([1, whole - 2_000_000_000, whole - 2_000_000_000, 1]) is True


def test_a_corrupt_compiled_model_is_detected_and_compiled_again(tmp_path, build_cache, caplog, monkeypatch):
    """The MJB is hashed before MuJoCo reads it: a flipped bit is a miss with a warning, never a model."""
    import json

    import attrs

    from usdforge.pipeline import MjcfConverter
    from usdforge.schemas import MjcfConverterCfg

    monkeypatch.setenv("USDFORGE_CACHE_COMPILED", "on")
    _without_slim_intermediate(monkeypatch)
    shutil.copytree(REPO / "assets" / "robots" / "pan_tilt", tmp_path / "pan_tilt")
    cfg = MjcfConverterCfg(asset_path=str(tmp_path / "pan_tilt" / "pan_tilt.xml"), usd_dir=str(tmp_path / "out"))
    MjcfConverter(cfg, cache=build_cache)
    shas = [json.loads(p.read_text())["files"].get("model.mjb.zlib") for p in (build_cache / "entries").rglob("*.json")]
    (sha,) = [s for s in shas if s]
    mjb = build_cache / "objects" / sha[:2] / sha
    data = bytearray(mjb.read_bytes())
    data[len(data) // 2] ^= 0x01
    mjb.write_bytes(bytes(data))
    edited = attrs.evolve(cfg, override_gain_prm=(321.0,))
    with caplog.at_level(logging.WARNING, logger="usdforge"):
        MjcfConverter(edited, cache=build_cache)
    assert any("corrupt" in r.getMessage() and sha in r.getMessage() for r in caplog.records)
    assert last_build(build_cache)["mjcf-compiled"] == {"hits": 0, "misses": 2}
    MjcfConverter(attrs.evolve(edited, usd_dir=str(tmp_path / "cold")), cache=False)
    assert outputs(tmp_path / "out") == outputs(tmp_path / "cold")


def test_a_stored_compiled_model_that_is_not_zlib_or_expands_past_the_bound_is_absent(monkeypatch):
    """The cache is untrusted: a forged MJB object cannot make a reader inflate gigabytes."""
    import zlib

    from usdforge.rules.mjcf import compiled

    monkeypatch.setattr(compiled, "MAX_MJB_BYTES", 1000)
    assert compiled._decompressed(zlib.compress(b"m" * 999)) == b"m" * 999
    assert compiled._decompressed(zlib.compress(b"\0" * 5000)) is None
    assert compiled._decompressed(b"not zlib data") is None
    assert compiled._decompressed(zlib.compress(b"m" * 10)[:-3]) is None  # truncated


def test_a_texture_decoded_once_is_not_decoded_again_until_its_bytes_change(tmp_path, build_cache, monkeypatch):
    """The "decodes as an image" verdict is cached by the texture's content: a cfg edit does not decode the
    texture again; a texture whose bytes changed into a non-image is decoded again and refused."""
    import attrs
    from PIL import Image

    from usdforge.pipeline import MjcfConverter
    from usdforge.rules.errors import ConversionError
    from usdforge.schemas import MjcfConverterCfg

    Image.new("RGB", (64, 32), (200, 40, 10)).save(tmp_path / "t.png")
    source = tmp_path / "textured.xml"
    source.write_text(textwrap.dedent("""\
        <mujoco>
          <asset><texture name="t" type="2d" file="t.png"/><material name="m" texture="t"/></asset>
          <worldbody><body name="b"><freejoint/><geom type="box" size=".1 .1 .1" material="m"/></body></worldbody>
        </mujoco>
        """))
    from usdforge.rules import files

    decoded = []
    decode = files._image_problem  # a PNG's pixels are checked without Pillow's ``load`` (rules.png_pixels)
    monkeypatch.setattr(files, "_image_problem", lambda path, **options: decoded.append(str(path)) or decode(path, **options))
    cfg = MjcfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out"))
    MjcfConverter(cfg, cache=build_cache)
    assert decoded == [str(tmp_path / "t.png")]
    rebuilt = MjcfConverter(attrs.evolve(cfg, override_gain_prm=(321.0,)), cache=build_cache)
    assert rebuilt.converted and not rebuilt.restored
    assert decoded == [str(tmp_path / "t.png")]  # not decoded again
    assert last_build(build_cache)["texture-decoded"] == {"hits": 1, "misses": 1}  # this process: one build
    (tmp_path / "t.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"not an image" * 10)
    with pytest.raises(ConversionError, match="t.png is not an image"):
        MjcfConverter(attrs.evolve(cfg, override_gain_prm=(322.0,)), cache=build_cache)
    assert len(decoded) == 1  # Pillow failed on its header, before the pixels: the verdict was not reused


def test_the_doit_action_hashes_each_settled_input_and_written_output_once(tmp_path, monkeypatch):
    """doit's stamps reuse the digests the conversion took (inputs unchanged since, outputs it wrote), and
    they are the files' true digests."""
    import usdforge.pipeline.converters as converters
    import usdforge.pipeline.fingerprint as fingerprint
    import usdforge.pipeline.lazy as lazy
    import usdforge.pipeline.tasks as tasks
    from usdforge.pipeline.fingerprint import file_digest
    from usdforge.schemas import cfg_to_json

    monkeypatch.setattr(fingerprint, "RACY_SECONDS", 0.0)  # the files were written just now
    asset = textured_obj(tmp_path)
    counts = collections.Counter()
    real = file_digest

    def counting(path):
        counts[os.path.abspath(path)] += 1
        return real(path)

    monkeypatch.setattr(converters, "file_digest", counting)
    monkeypatch.setattr(fingerprint, "file_digest", counting)
    monkeypatch.setattr(tasks, "file_digest", counting)
    cfg = MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "out"))
    result = tasks._run_conversion("mesh", cfg_to_json(cfg), None, str(tmp_path))
    assert result["converted"] and counts and max(counts.values()) == 1, counts
    for relative, (sha, _) in result["inputs"].items():
        assert sha == real(tmp_path / relative)
    for name, (sha, _) in result["outputs"].items():
        assert sha == real(tmp_path / "out" / name)


def test_inputs_hashed_and_objects_verified_side_by_side_give_what_one_thread_gives(tmp_path, monkeypatch, caplog):
    """A restore hashes a fresh clone's inputs and verifies the cache's objects in threads (forced here for
    a small robot): the key, the sidecar's digests and stamps, the outputs and a corrupt object's rejection
    are those of hashing one file after another."""
    import threading

    import usdforge.pipeline.converters as converters
    import usdforge.pipeline.fingerprint as fingerprint
    import usdforge.pipeline.lazy as lazy
    from usdforge.schemas import UrdfConverterCfg

    monkeypatch.setattr(fingerprint, "RACY_SECONDS", 0.0)
    monkeypatch.setattr(fingerprint, "RACY_SECONDS_FINE", 0.0)
    store = Store(tmp_path / "cache")

    def clone(name: str) -> Path:
        package = tmp_path / name / "tiny_arm"
        shutil.copytree(REPO / "assets" / "robots" / "tiny_arm", package, ignore=shutil.ignore_patterns("*.py"))
        return package

    def cfg(package: Path, out: str) -> UrdfConverterCfg:
        return UrdfConverterCfg(asset_path=str(package / "urdf" / "tiny_arm.urdf"), usd_dir=str(tmp_path / out),
                                ros_package_paths=[{"name": "tiny_arm", "path": str(package)}])

    first = UrdfConverter(cfg(clone("a"), "out-a"), cache=store)
    assert first.converted and not first.restored
    monkeypatch.setattr(fingerprint, "THREADED_MIN_BYTES", 0)
    threads: set[tuple[str, int]] = set()  # (what, thread): set.add is atomic under the GIL
    real_digest, real_get = converters.file_digest, Store.get_bytes
    monkeypatch.setattr(fingerprint, "file_digest",  # the stamped hashing of pipeline.fingerprint
                        lambda path: (threads.add(("hash", threading.get_ident())), real_digest(path))[1])
    monkeypatch.setattr(Store, "get_bytes",
                        lambda self, sha: (threads.add(("verify", threading.get_ident())), real_get(self, sha))[1])
    package = clone("b")
    restored = UrdfConverter(cfg(package, "out-b"), cache=store)
    assert restored.restored and restored.cache_key == first.cache_key
    cores = min(2, fingerprint.usable_cores())  # one core: one thread; more: one thread per core, up to 8
    assert len({ident for kind, ident in threads if kind == "hash"}) >= cores
    assert len({ident for kind, ident in threads if kind == "verify"}) >= cores
    assert outputs(tmp_path / "out-b") == outputs(tmp_path / "out-a")
    key = lazy.read_key(tmp_path / "out-b" / "tiny_arm.usdforge.toml")
    files = {"tiny_arm.urdf": package / "urdf" / "tiny_arm.urdf",
             **{name: package / name.removeprefix("package://tiny_arm/") for name in key.references}}
    assert len(files) == 4
    assert key.asset == {"tiny_arm.urdf": real_digest(files["tiny_arm.urdf"])}
    assert key.references == {name: real_digest(path) for name, path in files.items() if name != "tiny_arm.urdf"}
    assert key.stamps == {name: fingerprint.file_stamp(path) for name, path in files.items()}
    # One object of the entry bit-flipped: rejected while verified beside the others, then rebuilt.
    victim = store._object_path(lazy.read_key(tmp_path / "out-a" / "tiny_arm.usdforge.toml").outputs["tiny_arm.usd"])
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x10
    victim.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="usdforge"):
        rebuilt = UrdfConverter(cfg(clone("c"), "out-c"), cache=store)
    assert rebuilt.converted and not rebuilt.restored
    assert any("corrupt" in record.getMessage() for record in caplog.records)
    assert outputs(tmp_path / "out-c") == outputs(tmp_path / "out-a")


def test_an_object_shared_by_many_entries_is_claimed_once_per_entry_and_pruned_with_them(tmp_path, caplog):
    """One object claimed by many entries (one mesh layer at many scales: every entry of a library claims
    its meshes layer) is accepted for each of them through one empty claim file each, so a store or lookup
    reads nothing that grows with the library; an entry forged to name it is a miss; pruning drops the
    claims of the entries it removes (once an hour old) and keeps the others'."""
    import json

    from usdforge.pipeline.cache import sha256_bytes

    store = Store(tmp_path / "cache", max_bytes=None)
    data = b"the shared meshes layer"
    keys = [f"{index:064x}" for index in range(1, 301)]
    for key in keys:
        assert store.put_entry(key, {f"Props/{key[-6:]}_meshes.usd": data}) is not None
    claims = [p for p in (tmp_path / "cache" / "claims").rglob("*") if p.is_file()]
    assert len(claims) == len(keys) and {p.stat().st_size for p in claims} == {0}
    assert all(store.get_entry(key).files == {f"Props/{key[-6:]}_meshes.usd": data} for key in keys)
    forged = "c" * 64
    body = {"key": forged, "files": {"Props/c_meshes.usd": sha256_bytes(data)}, "meta": None}
    body["checksum"] = sha256_bytes(json.dumps(body, sort_keys=True).encode())
    (tmp_path / "cache" / "entries" / "cc").mkdir(parents=True)
    (tmp_path / "cache" / "entries" / "cc" / f"{forged}.json").write_text(json.dumps(body, sort_keys=True))
    with caplog.at_level(logging.WARNING, logger="usdforge"):
        assert store.get_entry(forged) is None
    assert any("not written for its key" in record.getMessage() for record in caplog.records)
    # Prune to half of the entries: the oldest go, with their claims (aged past the hour), the rest stay valid.
    (tmp_path / "cache" / "entries" / "cc" / f"{forged}.json").unlink()
    for index, key in enumerate(keys):
        entry = tmp_path / "cache" / "entries" / key[:2] / f"{key}.json"
        os.utime(entry, (1_000_000 + index, 1_000_000 + index))
    for path in claims:
        os.utime(path, (1_000_000, 1_000_000))
    entry_bytes = sum(p.stat().st_size for p in (tmp_path / "cache" / "entries").rglob("*.json"))
    store.prune(entry_bytes // 2 + len(data))
    left = [key for key in keys if store.get_entry(key) is not None]
    assert 0 < len(left) < len(keys) and left == keys[-len(left):]
    assert len([p for p in (tmp_path / "cache" / "claims").rglob("*") if p.is_file()]) == len(left)


def test_claims_where_an_older_usdforge_kept_them_are_found(tmp_path, caplog):
    """An entry is claimed by one file (not one per object), in the folder of its key's first two
    characters; the claims an older usdforge kept, one per object in the folder of their own name's first
    two characters, still count (a hit, no warning); a claim of other names does not."""
    from usdforge.pipeline.cache import _claim_name, _entry_claim_name, sha256_bytes

    store = Store(tmp_path / "cache")
    files = {"a.usda": b"one", "b/c.usda": b"two"}
    key = "ab" + "c" * 62
    shas = store.put_entry(key, files, kind="urdf")
    claims = [p for p in (tmp_path / "cache" / "claims").rglob("*") if p.is_file()]
    assert [(p.parent.name, p.name) for p in claims] == [("ab", _entry_claim_name(key, shas))]
    claims[0].unlink()
    swapped = {"a.usda": shas["b/c.usda"], "b/c.usda": shas["a.usda"]}
    (claims[0].parent / _entry_claim_name(key, swapped)).touch()  # the same objects under other names
    with caplog.at_level(logging.WARNING, logger="usdforge"):
        assert Store(tmp_path / "cache").get_entry(key) is None
    caplog.clear()
    older = [tmp_path / "cache" / "claims" / claim[:2] / claim
             for claim in (_claim_name(sha, key, name) for name, sha in sorted(shas.items()))]
    older[0].parent.mkdir(exist_ok=True)
    older[0].touch()
    assert Store(tmp_path / "cache").get_entry(key) is None  # one object of two claimed
    older[1].parent.mkdir(exist_ok=True)
    older[1].touch()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="usdforge"):
        assert Store(tmp_path / "cache").get_entry(key).files == files
    assert not caplog.records
    assert sha256_bytes(b"one") == shas["a.usda"]
    for claim in (tmp_path / "cache" / "claims").rglob("*"):
        if claim.is_file():
            claim.unlink()
    assert Store(tmp_path / "cache").get_entry(key) is None


def test_storing_known_objects_reads_and_hashes_nothing_and_an_unchanged_entry_is_not_rewritten(tmp_path):
    """Files restored as they are in the cache are stored by the object they name (``KnownFiles``): not read
    while the store holds the object, read when it does not; an entry stored again with the same content
    keeps its file."""
    from usdforge.pipeline.cache import KnownFiles, sha256_bytes

    store = Store(tmp_path / "cache")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.usda").write_bytes(b"restored")
    (tmp_path / "out" / "b.usda").write_bytes(b"authored")
    store.put_entry("1" * 64, {"a.usda": b"restored"})
    known = {"a.usda": (sha256_bytes(b"restored"), 8)}
    files = KnownFiles(tmp_path / "out", ["a.usda", "b.usda"], known)
    assert store.put_entry("2" * 64, files) == {"a.usda": known["a.usda"][0], "b.usda": sha256_bytes(b"authored")}
    assert set(files._read) == {"b.usda"}
    entry = next((tmp_path / "cache" / "entries").rglob("2*.json"))
    before = entry.stat().st_ino
    store.put_entry("2" * 64, KnownFiles(tmp_path / "out", ["a.usda", "b.usda"], known))
    assert entry.stat().st_ino == before
    for path in (tmp_path / "cache" / "objects").rglob("*"):
        if path.is_file():
            path.unlink()
    again = KnownFiles(tmp_path / "out", ["a.usda", "b.usda"], known)
    store.put_entry("3" * 64, again)
    assert set(again._read) == {"a.usda", "b.usda"}
    assert store.get_entry("3" * 64).files == {"a.usda": b"restored", "b.usda": b"authored"}


def test_an_entry_handed_to_the_background_is_read_and_hashed_first_and_stored_when_its_write_runs(tmp_path):
    """``put_entry(..., background=)``: the files are read and hashed in the call and their SHA-256s given
    back; the folder they were read from may be gone before the write runs (a rebuild publishes its output
    meanwhile); nothing is in the cache until the write handed on runs, then the entry gives those bytes."""
    from usdforge.pipeline.cache import KnownFiles, sha256_bytes

    store = Store(tmp_path / "cache")
    (tmp_path / "out" / "payloads").mkdir(parents=True)
    (tmp_path / "out" / "a.usda").write_bytes(b"authored")
    (tmp_path / "out" / "payloads" / "b.usda").write_bytes(b"payload")
    handed = []
    shas = store.put_entry("4" * 64, KnownFiles(tmp_path / "out", ["a.usda", "payloads/b.usda"]), kind="urdf",
                           background=handed.append)
    assert shas == {"a.usda": sha256_bytes(b"authored"), "payloads/b.usda": sha256_bytes(b"payload")}
    assert len(handed) == 1 and not (tmp_path / "cache" / "entries").exists()
    shutil.rmtree(tmp_path / "out")
    assert handed[0]() == shas
    assert store.get_entry("4" * 64).files == {"a.usda": b"authored", "payloads/b.usda": b"payload"}


def test_a_conversion_waits_for_its_entry_write_and_raises_what_it_raised(tmp_path, monkeypatch):
    """The converter returns once its entry is in the cache (written on a thread beside the publishing: a
    slow write is waited for, and a fresh folder is restored from it); an error the write raised (no cache
    problem: those only warn) is raised by the converter."""
    import attrs
    import threading

    library = load_library(make_checkout(tmp_path))
    cfg = entry_cfg(library, library.assets[1], 1, tmp_path / "build")
    real = Store._write_entry
    threads = []

    def slow(self, key, objects, unstored, meta, kind):
        if kind == "urdf":  # the output's entry (the units' and meshes' entries are written as before)
            threads.append(threading.current_thread().name)
            time.sleep(0.3)
        return real(self, key, objects, unstored, meta, kind)

    monkeypatch.setattr(Store, "_write_entry", slow)
    built = UrdfConverter(cfg, cache=tmp_path / "cache")
    assert threads == ["usdforge-entry-write"]
    assert Store(tmp_path / "cache").get_entry(built.cache_key) is not None
    restored = UrdfConverter(attrs.evolve(cfg, usd_dir=str(tmp_path / "again")), cache=tmp_path / "cache")
    assert restored.restored and outputs(tmp_path / "again") == outputs(Path(built.usd_dir))

    def broken(self, key, objects, unstored, meta, kind):
        if kind == "urdf":
            raise RuntimeError("a bug in the entry write")
        return real(self, key, objects, unstored, meta, kind)

    monkeypatch.setattr(Store, "_write_entry", broken)
    with pytest.raises(RuntimeError, match="a bug in the entry write"):
        UrdfConverter(attrs.evolve(cfg, usd_dir=str(tmp_path / "third"), force_usd_conversion=True),
                      cache=tmp_path / "cache")


def test_background_cache_writes_run_in_order_on_one_thread_and_are_joined():
    """``write_in_background`` inside ``mesh_cache``: every write on one writer thread (a fresh cache and
    hundreds of meshes started a thread each), in order, all done when the block ends; a failing write
    logs a warning naming its error and the others still run."""
    import threading

    from usdforge.rules.robot.meshes import mesh_cache, write_in_background

    ran: list[tuple[int, str]] = []
    gate = threading.Event()

    def write(n: int) -> None:
        if n == 0:
            gate.wait(5)  # the later writes queue behind this one
        if n == 2:
            raise OSError("disk full")
        ran.append((n, threading.current_thread().name))

    before = threading.active_count()
    with mesh_cache(None):
        for n in range(5):
            write_in_background(lambda n=n: write(n))
        assert threading.active_count() == before + 1 and ran == []
        gate.set()
    assert [n for n, _ in ran] == [0, 1, 3, 4]
    assert {name for _, name in ran} == {"usdforge-cache-write"}
    write_in_background(lambda: write(9))  # outside a block: now, in this thread
    assert ran[-1] == (9, threading.current_thread().name)
