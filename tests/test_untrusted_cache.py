"""The build cache as untrusted storage (#24): a shared cache's writer, or a Dask worker, can make a reader
rebuild, never write, read or remove a file outside the build and cache folders, nor hang it.

Each case forges what an attacker with write access to a shared cache can forge (an entry's checksum is a
SHA-256 anyone can recompute) and checks the files outside the build and cache folders are unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import pytest

import meshes


def write_mesh(folder: Path, extension: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return meshes.write_mesh(folder, extension)
from test_doit import doit
from usdforge.pipeline import MeshConverter
from usdforge.pipeline.cache import Store
from usdforge.pipeline.cli import main
from usdforge.schemas import MeshConverterCfg


class Hung(BaseException):
    """Raised by the alarm when a cache read blocks (a FIFO): the test fails instead of hanging."""


@pytest.fixture(autouse=True)
def no_hang():
    """A case that blocks (a FIFO opened for reading) fails after 60 s instead of hanging the suite."""
    def timeout(signum, frame):
        raise Hung("hung for 60 s")  # not an OSError: a reader that treats those as absent must not swallow it

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every file under ``folder`` (links as their target's name), to compare before and after."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path)] = "-> " + os.readlink(path)
        elif path.is_file():
            found[str(path)] = path.read_bytes()
    return found


def outputs(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".usdforge.toml")}


def built(tmp_path: Path) -> tuple[Path, Store, str, dict]:
    """A mesh converted once into ``out-a`` with the cache ``cache``: (asset, store, key, entry file body)."""
    asset = write_mesh(tmp_path / "src", "stl")
    store = Store(tmp_path / "cache")
    first = MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "out-a")), cache=store)
    key = first.cache_key
    return asset, store, key, json.loads(store._entry_path(key).read_text())


def forge(store: Store, key: str, body: dict) -> None:
    """Write ``body`` as the entry of ``key``, with the checksum a reader accepts."""
    body = {k: v for k, v in body.items() if k != "checksum"}
    body["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    store._entry_path(key).write_text(json.dumps(body, sort_keys=True))


def convert_again(asset: Path, tmp_path: Path, name: str = "out-b") -> MeshConverter:
    return MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / name)),
                         cache=Store(tmp_path / "cache"))


@pytest.mark.parametrize("hostile", ["../../escaped.txt", "{outside}/absolute.txt", "sub/../../escaped.txt",
                                     "./x.usd", "a\nb.usd"])
def test_an_entry_naming_a_file_outside_the_output_folder_writes_nothing_there(tmp_path, hostile):
    asset, store, key, body = built(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    some_sha = next(iter(body["files"].values()))
    body["files"][hostile.format(outside=outside)] = some_sha
    forge(store, key, body)
    before = snapshot(tmp_path / "outside") | snapshot(tmp_path / "src")
    again = convert_again(asset, tmp_path)
    assert not again.restored  # the forged entry is corrupt: converted afresh
    assert snapshot(tmp_path / "outside") | snapshot(tmp_path / "src") == before
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "out-b" / "escaped.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out-a", "out-b", "outside", "src"]
    assert outputs(tmp_path / "out-b") == outputs(tmp_path / "out-a")


def test_an_entry_naming_an_object_by_a_path_neither_reads_nor_removes_it(tmp_path):
    asset, store, key, body = built(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("secret")
    name = next(iter(body["files"]))
    body["files"][name] = "../victim.txt"  # cache/objects/<"..">/../victim.txt is tmp_path/victim.txt
    forge(store, key, body)
    again = convert_again(asset, tmp_path)
    assert not again.restored and victim.read_text() == "secret"
    assert b"secret" not in b"".join(outputs(tmp_path / "out-b").values())


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "link-outside", "folder-link"])
def test_a_non_regular_object_neither_hangs_nor_is_read(tmp_path, kind):
    asset, store, key, body = built(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    sha = max(body["files"].values(), key=lambda s: store._object_path(s).stat().st_size)
    path = store._object_path(sha)
    real = path.read_bytes()
    if kind == "folder-link":  # objects/ab -> a folder outside holding the right bytes
        (outside / sha).write_bytes(real)
        for other in path.parent.iterdir():
            if other != path:
                (outside / other.name).write_bytes(other.read_bytes())
        folder = path.parent
        for other in folder.iterdir():
            other.unlink()
        folder.rmdir()
        folder.symlink_to(outside, target_is_directory=True)
    else:
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dev-zero":
            path.symlink_to("/dev/zero")
        else:
            (outside / "object").write_bytes(real)
            path.symlink_to(outside / "object")
    before = snapshot(outside)
    again = convert_again(asset, tmp_path)
    assert not again.restored
    assert outputs(tmp_path / "out-b") == outputs(tmp_path / "out-a")
    assert snapshot(outside) == before  # nothing written into, or removed from, the linked folder


def test_prune_clear_and_stats_never_follow_a_link_out_of_the_cache(tmp_path):
    asset, store, key, body = built(tmp_path)
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    for name in ("a" * 64, "b" * 64, ".x.tmp-1"):  # old files that look like orphan objects and stray writes
        (outside / "sub" / name).write_bytes(b"precious")
        os.utime(outside / "sub" / name, (1, 1))
    (outside / "log").write_text("precious\n")
    (tmp_path / "cache" / "objects" / "zz").symlink_to(outside / "sub", target_is_directory=True)
    (tmp_path / "cache" / "entries" / "zz").symlink_to(outside / "sub", target_is_directory=True)
    (tmp_path / "cache" / "objects" / "ab").mkdir(exist_ok=True)
    (tmp_path / "cache" / "objects" / "ab" / ("ab" + "0" * 62)).symlink_to(outside / "log")
    (tmp_path / "cache" / "stats.log").unlink(missing_ok=True)
    (tmp_path / "cache" / "stats.log").symlink_to(outside / "log")
    before = snapshot(outside)
    store = Store(tmp_path / "cache")
    store.record("mesh", hit=True)  # not appended to the link's target
    stats = store.stats()
    # The conversion's entry and its meshes layer's (pipeline.layer_keys.mesh_unit_keys); nothing linked.
    assert stats["objects"] == len(set(body["files"].values())) and stats["entries"] == 2
    assert main(["cache", "stats", "--cache", str(tmp_path / "cache")]) == 0
    assert main(["cache", "prune", "--max-size", "1", "--cache", str(tmp_path / "cache")]) == 0
    assert snapshot(outside) == before
    assert not (tmp_path / "cache" / "objects" / "ab" / ("ab" + "0" * 62)).is_symlink()  # the link itself went
    assert main(["cache", "clear", "--cache", str(tmp_path / "cache")]) == 0
    assert snapshot(outside) == before
    (tmp_path / "cache" / "objects").symlink_to(outside, target_is_directory=True)  # the whole folder a link
    assert main(["cache", "prune", "--max-size", "1", "--cache", str(tmp_path / "cache")]) == 0
    assert main(["cache", "clear", "--cache", str(tmp_path / "cache")]) == 0
    assert snapshot(outside) == before


def test_a_cache_whose_folders_are_links_writes_nothing_through_them(tmp_path):
    asset = write_mesh(tmp_path / "src", "stl")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "cache" / "objects").mkdir(parents=True)
    (tmp_path / "cache" / "entries").symlink_to(outside, target_is_directory=True)
    for prefix in "0123456789abcdef":
        for second in "0123456789abcdef":
            (tmp_path / "cache" / "objects" / (prefix + second)).symlink_to(outside, target_is_directory=True)
    converter = MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "out")),
                              cache=Store(tmp_path / "cache"))
    assert converter.converted and list(outside.iterdir()) == []


def test_a_store_holding_its_top_folders_follows_a_cleared_cache_and_never_a_link_planted_since(tmp_path):
    """A store holds its top folders once opened (``Store._held_top``). Another process's ``clear`` removes
    them: the store then writes into, and reads from, the folders made again (it is not disabled, and what it
    stores is found by a fresh store). A top folder moved away and replaced by a link to a folder outside:
    the holding store, as a fresh one, refuses the link and writes nothing, there or in the moved folder."""
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    holding = Store(cache)
    first = holding.put_bytes(b"one")
    Store(cache).clear()
    second = holding.put_bytes(b"two")
    assert holding.writable and (cache / "objects" / second[:2] / second).read_bytes() == b"two"
    assert Store(cache).get_bytes(second) == b"two" and holding.get_bytes(first) is None
    (cache / "objects").rename(cache / "objects-moved")
    (cache / "objects").symlink_to(outside, target_is_directory=True)
    assert holding.get_bytes(second) is None
    assert holding.put_bytes(b"three") is None and not holding.writable
    fresh = Store(cache)
    assert fresh.put_bytes(b"four") is None and not fresh.writable
    assert list(outside.iterdir()) == []
    assert [p.name for p in (cache / "objects-moved").rglob("*") if p.is_file()] == [second]


def test_a_dask_workers_artifact_naming_a_file_outside_writes_nothing(tmp_path):
    from usdforge.pipeline.distributed import _doit_side_store, _on_doit_side
    from usdforge.pipeline.kinds import cfg_class  # noqa: F401 - the cfg class is registered
    from usdforge.schemas import cfg_to_json

    asset, store, key, body = built(tmp_path)
    honest = store.get_entry(key)
    cfg = MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "work" / "out"))
    for hostile in ("../../../escaped.txt", str(tmp_path / "absolute.txt")):
        result = {"cache_key": key, "files": {**honest.files, hostile: b"written by a worker"}, "meta": {},
                  "shared_cache": False, "restored": False, "worker": "w", "seconds": 0.1}
        failed = _on_doit_side("mesh", cfg_to_json(cfg), _doit_side_store(str(tmp_path / "work-cache"), result),
                               str(tmp_path))
        message = str(failed.message) if hasattr(failed, "message") else str(failed)
        assert "outside its output folder" in message and len(message.splitlines()) == 1, message
        assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "absolute.txt").exists()
        assert not (tmp_path / "work" / "out").exists() and not (tmp_path / "work-cache").exists()


def box_library(tmp_path: Path) -> tuple[Path, Path]:
    """(a one-entry library of a mesh ``box``, an empty work folder)."""
    lib = tmp_path / "lib"
    write_mesh(lib / "meshes", "stl")
    library = lib / "library.toml"
    library.write_text('[[assets]]\nname = "box"\nsource = "meshes/box.stl"\n')
    work = tmp_path / "work"
    work.mkdir()
    return library, work


def test_doit_clean_never_removes_a_file_a_forged_task_spec_names(tmp_path):
    library, work = box_library(tmp_path)
    assert doit(work, "convert", library=library).returncode == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    specs = list((work / "build").rglob("library-*.json"))
    assert len(specs) == 1 and "cache" not in specs[0].relative_to(work / "build").parts  # not in the shareable cache
    cached = json.loads(specs[0].read_text())
    # the cached spec names its files relative to build/usd/<name>/: forge names that climb out of it
    escape = os.path.relpath(victim, work / "build" / "usd" / "box")
    cached["specs"][0]["outputs"].append(escape)
    cached["specs"][0]["key"] = escape
    specs[0].write_text(json.dumps(cached))
    cleaned = doit(work, "clean", "convert", library=library)
    assert cleaned.returncode == 0, cleaned.stderr
    assert victim.read_text() == "precious"
    assert not (work / "build" / "usd" / "box" / "box.usd").exists()  # the real outputs were cleaned


def test_cache_off_writes_no_cache(tmp_path):
    library, work = box_library(tmp_path)
    assert doit(work, "convert", "cache=off", library=library).returncode == 0
    assert (work / "build" / "usd" / "box").is_dir() and not (work / "build" / "cache").exists()


@pytest.mark.parametrize("hostile", ["../../escaped-by-worker.txt", "{outside}/absolute-by-worker.txt"])
def test_a_real_dask_worker_returning_a_file_outside_writes_nothing(tmp_path, hostile):
    """A `dask worker` (its preload adds a hostile name to every artifact it returns) on 127.0.0.1: the
    entry fails with one line, nothing is written outside the build folder, nor into the build's cache."""
    pytest.importorskip("distributed")
    import signal as signals

    from test_distributed import cluster

    signal.alarm(0)  # a cluster's start takes its own time; the build below has doit's timeout
    signals.signal(signals.SIGALRM, signals.SIG_DFL)
    library, work = box_library(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    name = hostile.format(outside=outside)
    preload = Path(__file__).with_name("dask_hostile_preload.py")
    with cluster(workers=("w1",), preload=preload, env={"USDFORGE_TEST_HOSTILE_NAME": name}) as running:
        built = doit(work, "convert", f"library={library}", f"scheduler={running.address}", "sources=ship")
    lines = [line for line in (built.stdout + built.stderr).splitlines() if line.startswith("usdforge: error:")]
    assert built.returncode != 0 and len(lines) == 1, built.stdout + built.stderr
    assert "names a file outside its output folder" in lines[0], lines
    assert list(outside.iterdir()) == [] and not list(tmp_path.rglob("escaped-by-worker.txt"))
    assert not (work / "build" / "usd" / "box").exists()
    assert not list((work / "build" / "cache").rglob("*.json")) if (work / "build" / "cache").exists() else True


def test_cached_mesh_parts_that_name_a_texture_or_do_not_fit_are_read_again_from_the_file(tmp_path):
    """The mesh cache's parts (``rules.robot.meshes.parts_from_bytes``) are untrusted: an entry naming a
    texture file (the writer would copy it into the output, unchecked), faces past the points, a value that
    is not finite, a colour that is not four finite numbers, an offset past any index, or a header that is
    not a list of parts or nests past the recursion limit is refused, and the library reads the file."""
    import numpy as np

    from usdforge.rules.robot import meshes as robot_meshes
    from usdforge.rules.robot.meshes import MeshLibrary, parts_from_bytes, parts_to_bytes

    path = meshes.write_mesh(tmp_path, "stl")
    parts = MeshLibrary().parts(path)
    data = parts_to_bytes(parts)
    assert [p.name for p in parts_from_bytes(data)] == [p.name for p in parts]
    size = int.from_bytes(data[:8], "little")
    header, body = json.loads(data[8:8 + size]), data[8 + size:]

    def forged(meta, arrays=body) -> bytes:
        text = json.dumps(meta).encode()
        return len(text).to_bytes(8, "little") + text + arrays

    outside = [{**header[0], "texture": "../../../etc/hostname"}]
    def replaced(field: str, value) -> bytes:  # the first number of ``field`` set to ``value``
        dtype, _, offset = header[0]["arrays"][field]
        raw = np.dtype(dtype).type(value).tobytes()
        return body[:offset] + raw + body[offset + len(raw):]

    past, nan = replaced("faces", 10 ** 6), replaced("points", np.nan)
    field, (dtype, shape, _) = next(iter(header[0]["arrays"].items()))
    huge = [{**header[0], "arrays": {**header[0]["arrays"], field: [dtype, shape, 10 ** 30]}}]
    nested = b"[" * 100_000
    for bad in (forged(outside), forged(header, past), forged(header, nan), forged([1]),
                forged({"a": 1}), forged(huge), len(nested).to_bytes(8, "little") + nested,
                forged([{**header[0], "color": [1.0]}]), forged([{**header[0], "color": [1.0, float("nan"), 0, 1]}])):
        with pytest.raises(robot_meshes.BAD_PARTS):
            parts_from_bytes(bad)

    entries = [forged(outside), len(nested).to_bytes(8, "little") + nested, forged(huge)]

    class Entry:
        def __init__(self, data: bytes):
            self.files = {robot_meshes._PARTS_FILE: data}

    class Forged:
        def get_entry(self, key):
            return Entry(entries.pop())

        def record(self, *args, **kwargs) -> None:
            """No statistics in this test."""

        def put_entry(self, *args, **kwargs) -> None:
            """Nothing stored: the forged entry stays the one read."""

    token = robot_meshes._MESH_CACHE.set((Forged(), lambda file: "digest"))
    try:
        while entries:  # each forged entry a miss: the file read again, no traceback
            again = MeshLibrary().parts(path)
            assert all(part.texture is None for part in again)
            np.testing.assert_array_equal(again[0].points, parts[0].points)
    finally:
        robot_meshes._MESH_CACHE.reset(token)


def test_a_rebuild_removes_only_stale_outputs_inside_the_output_folder(tmp_path):
    """The previous build's outputs a rebuild removes come from the lazy key, a file in the output folder:
    a name leaving the folder (``..``) is not removed; one reaching through a folder made a link refuses the
    rebuild before anything is read, written or removed; a stale output inside is removed."""
    from usdforge.pipeline.atomic import build_atomically

    out, outside = tmp_path / "out", tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "victim.txt").write_text("keep")
    (outside / "x.txt").write_text("keep")
    out.mkdir()
    (out / "linked").symlink_to(outside)
    (out / "old.usda").write_text("stale")

    def build(staging: Path) -> list[Path]:
        (staging / "new.usda").write_text("new")
        return [staging / "new.usda"]

    with pytest.raises(OSError, match="linked: a folder of the output is a symbolic link"):
        build_atomically(out, build, "new.usdforge.toml", lambda written: "key",
                         ["../victim.txt", "linked/x.txt", "old.usda"])
    assert (outside / "x.txt").read_text() == "keep" and (out / "old.usda").read_text() == "stale"
    build_atomically(out, build, "new.usdforge.toml", lambda written: "key", ["../victim.txt", "old.usda"])
    assert (tmp_path / "victim.txt").read_text() == "keep" and (outside / "x.txt").read_text() == "keep"
    assert not (out / "old.usda").exists() and (out / "new.usda").read_text() == "new"


def test_a_rebuild_writes_nothing_through_a_folder_of_the_output_made_a_link(tmp_path):
    """A folder of the output made a symbolic link since the last build (by hand, or a tool swapping it):
    the rebuild publishes nothing, none of its files lands where the link points, and the error names the
    folder; the previous output stays as it was."""
    from usdforge.pipeline.atomic import build_atomically

    out, outside = tmp_path / "out", tmp_path / "outside"
    outside.mkdir()
    out.mkdir()
    (out / "main.usda").write_text("previous")
    (out / "payloads").symlink_to(outside, target_is_directory=True)

    def build(staging: Path) -> list[Path]:
        (staging / "payloads" / "Physics").mkdir(parents=True)
        for name in ("main.usda", "payloads/base.usda", "payloads/Physics/physics.usda"):
            (staging / name).write_text("new")
        return [staging / "main.usda", staging / "payloads/base.usda", staging / "payloads/Physics/physics.usda"]

    with pytest.raises(OSError, match="payloads: a folder of the output is a symbolic link"):
        build_atomically(out, build, "main.usdforge.toml", lambda written: "key", ["main.usda"])
    assert list(outside.iterdir()) == [] and (out / "main.usda").read_text() == "previous"
    assert not (out / "main.usdforge.toml").exists() and not list(tmp_path.glob(".out.tmp-*"))
    # The previous outputs behind the link (as its lazy key names them): refused before the build, which
    # reads previous outputs (layers taken unchanged, comparisons), so nothing is read through the link either.
    (outside / "base.usda").write_text("elsewhere")
    built = []
    with pytest.raises(OSError, match="payloads: a folder of the output is a symbolic link"):
        build_atomically(out, lambda staging: built.append(staging) or build(staging), "main.usdforge.toml",
                         lambda written: "key", ["main.usda", "payloads/base.usda"])
    assert built == [] and (outside / "base.usda").read_text() == "elsewhere"
    # A forged or stale name in the lazy key through a file refuses nothing: the build goes on.
    (outside / "base.usda").unlink()
    (out / "payloads").unlink()
    assert build_atomically(out, build, "main.usdforge.toml", lambda written: "key",
                            ["main.usda", "main.usda/x", "../y/z"]) == sorted(
        ["main.usda", "payloads/base.usda", "payloads/Physics/physics.usda"])
