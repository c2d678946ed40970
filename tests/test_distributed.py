"""`doit convert` on a real Dask cluster on 127.0.0.1 (a `dask scheduler` and two `dask worker` processes):
the embedded library plus four corpus robots, byte-identical to a local build; no-op re-runs; a worker
killed mid-build; a broken entry; a lost scheduler; `shard=i/n`; the missing-extra error."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Iterator

import pytest
import tomli_w

from test_doit import executed
from xacro_package import write_bot

REPO = Path(__file__).resolve().parents[1]
CORPUS_ROBOTS = ("cartpole", "simple_humanoid", "skydio_x2", "robotiq_2f85")
SLOW_PRELOAD = Path(__file__).with_name("dask_slow_preload.py")
TIMEOUT = 240


def write_library(shared: Path, folder: Path, extra: list[dict] | None = None) -> Path:
    """The embedded library (absolute paths) plus four small corpus robots, as one manifest in ``folder``."""
    embedded = tomllib.loads((REPO / "assets/library.toml").read_text())["assets"]
    entries = []
    for entry in embedded:
        entry = {**entry, "source": str(REPO / "assets" / entry["source"])}
        if "packages" in entry:
            entry["packages"] = {k: str(REPO / "assets" / v) for k, v in entry["packages"].items()}
        entries.append(entry)
    manifest = {item["name"]: item for item in json.loads((shared / "corpus/MANIFEST.json").read_text())}
    for name in CORPUS_ROBOTS:
        item = manifest[name]
        entry = {"name": name, "source": str(shared / "corpus" / item["path"])}
        if item.get("package_paths"):
            entry["packages"] = {k: str(shared / "corpus" / v) for k, v in item["package_paths"].items()}
        entries.append(entry)
    folder.mkdir(parents=True, exist_ok=True)
    library = folder / "library.toml"
    library.write_text(tomli_w.dumps({"assets": entries + (extra or [])}))
    return library


def entry_names(library: Path) -> list[str]:
    return sorted(entry["name"] for entry in tomllib.loads(library.read_text())["assets"])


def doit_env(extra: dict | None = None) -> dict[str, str]:
    """This process's environment for a `doit` run: its own build id (for the cache's statistics)."""
    env = {k: v for k, v in os.environ.items() if k != "USDFORGE_BUILD_ID"}
    return {**env, "PYTHONPATH": str(REPO), **(extra or {})}


def doit(workdir: Path, *args: str, env: dict | None = None, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(workdir), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=doit_env(env))


def doit_background(workdir: Path, *args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(workdir), *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=doit_env())


def built_on(result_stderr: str) -> dict[str, str]:
    """{entry: worker} from the progress lines 'convert:NAME built on WORKER in S s'."""
    found = {}
    for line in result_stderr.splitlines():
        if line.startswith("convert:") and " built on " in line:
            name, rest = line[len("convert:"):].split(" built on ", 1)
            found[name] = rest.rsplit(" in ", 1)[0]
    return found


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every output file's bytes (lazy keys included), without the conversion records (wall times)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".convert.json")}


def last_build(cache: Path) -> dict[str, dict[str, int]]:
    """The build cache's hits and misses of the last build, per kind (conversions and mesh geometry)."""
    from usdforge.pipeline.cache import Store

    return Store(cache).stats()["last_build"]


def conversions(cache: Path) -> dict[str, int]:
    """{"hits": restored, "misses": converted} of the last build's conversions (not mesh geometry)."""
    counts = [v for kind, v in last_build(cache).items() if kind in ("mesh", "urdf", "mjcf")]
    return {"hits": sum(c["hits"] for c in counts), "misses": sum(c["misses"] for c in counts)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _log(name: str):
    folder = os.environ.get("USDFORGE_TEST_DASK_LOGS")
    return open(Path(folder) / f"{name}.log", "w") if folder else subprocess.DEVNULL


class Cluster:
    """A `dask scheduler` and named `dask worker` processes (no nanny: killing one kills the worker)."""

    def __init__(self, workers: tuple[str, ...] = ("w1", "w2"), slow: float | None = None,
                 preload: Path | None = None, env: dict[str, str] | None = None):
        self.address = f"tcp://127.0.0.1:{free_port()}"
        env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        dask = [sys.executable, "-m", "dask"]
        self.scheduler = subprocess.Popen(
            [*dask, "scheduler", "--host", "127.0.0.1", "--port", self.address.rsplit(":", 1)[1], "--no-dashboard"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        preload = ["--preload", str(SLOW_PRELOAD)] if slow else ["--preload", str(preload)] if preload else []
        if slow:
            env["USDFORGE_TEST_SLOW_S"] = str(slow)
        self.workers = {name: subprocess.Popen(
            [*dask, "worker", self.address, "--name", name, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
             "--no-dashboard", *preload], stdout=subprocess.DEVNULL, stderr=_log(name), env=env)
            for name in workers}
        from distributed import Client

        self.client = Client(self.address, timeout="60s")
        self.client.wait_for_workers(len(workers), timeout=120)

    def processing(self) -> dict[str, list[str]]:
        """{worker name: task keys it is running}."""
        names = {address: info["name"] for address, info in self.client.scheduler_info()["workers"].items()}
        return {names.get(address, address): list(keys) for address, keys in self.client.processing().items()}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close(timeout=5)
        for process in self.workers.values():  # no graceful close needed: the tests are over
            if process.poll() is None:
                process.kill()
        for process in [*self.workers.values(), self.scheduler]:
            if process.poll() is None:
                process.terminate()
        for process in [*self.workers.values(), self.scheduler]:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def cluster(**kwargs) -> Iterator[Cluster]:
    started = Cluster(**kwargs)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[Cluster]:
    with cluster() as running:
        yield running


def test_cluster_builds_are_byte_identical_to_local_and_reruns_are_noops(shared_dir, tmp_path, dask_cluster,
                                                                          build_cache):
    # A xacro whose argument picks the YAML it reads: the shipped sources must be the ones it reads then.
    bot = write_bot(tmp_path / "lib" / "src")
    library = write_library(shared_dir, tmp_path / "lib", [{
        "name": "bot", "source": str(bot / "urdf/bot.urdf.xacro"), "packages": {"bot_description": str(bot)},
        "xacro_args": {"variant": "long"}}])
    names = entry_names(library)
    work = tmp_path / "work"
    work.mkdir()
    local = doit(work, "convert", f"library={library}")
    assert local.returncode == 0, local.stdout + local.stderr
    assert executed(local) == [f"convert:{n}" for n in names]
    reference = snapshot(work / "build/usd")
    shutil.rmtree(work / "build")
    shutil.rmtree(build_cache)  # the build cache ($USDFORGE_CACHE, the test's own): empty, so Dask converts

    remote = doit(work, "convert", f"library={library}", f"scheduler={dask_cluster.address}")
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert executed(remote) == [f"convert:{n}" for n in names]
    workers = built_on(remote.stderr)
    assert sorted(workers) == names  # one progress line per finished entry
    assert set(workers.values()) == {"w1", "w2"}  # both workers converted (sources shipped to them)
    # The conversion's warnings, restored here as a cache hit gives them: naming this machine's files.
    cartpole = f"{shared_dir}/corpus/urdf/cartpole/cartpole.urdf"
    relayed = [line for line in remote.stderr.splitlines() if line.startswith("usdforge: warning: ")]
    assert [line for line in relayed if cartpole in line], remote.stderr
    assert not [line for line in relayed if "usdforge-task-" in line]  # no worker scratch path leaks
    assert conversions(build_cache) == {"hits": 0, "misses": len(names)}
    built = snapshot(work / "build/usd")
    assert sorted(built) == sorted(reference)
    differing = [name for name in reference if built[name] != reference[name]]
    assert differing == []  # lazy keys included: they name the local paths, as a local build writes them

    again = doit(work, "convert", f"library={library}", f"scheduler={dask_cluster.address}")
    assert again.returncode == 0 and executed(again) == [] and built_on(again.stderr) == {}
    local_again = doit(work, "convert", f"library={library}")
    assert local_again.returncode == 0 and executed(local_again) == []

    # The workers' artifacts landed in this build's cache: with the outputs gone, a cluster build restores
    # every entry here, from the cache, and submits nothing to Dask.
    shutil.rmtree(work / "build/usd")
    (work / "build/.doit.db").unlink()
    warm = doit(work, "convert", f"library={library}", f"scheduler={dask_cluster.address}")
    assert warm.returncode == 0, warm.stdout + warm.stderr
    assert executed(warm) == [f"convert:{n}" for n in names] and built_on(warm.stderr) == {}
    assert conversions(build_cache) == {"hits": len(names), "misses": 0}
    assert snapshot(work / "build/usd") == reference

    shutil.rmtree(work / "build")  # workers=N: a local cluster started by the build, sharing the files
    shutil.rmtree(build_cache)  # and the cache: the workers store into it, the doit side restores from it
    local_cluster = doit(work, "convert", f"library={library}", "workers=2")
    assert local_cluster.returncode == 0, local_cluster.stdout + local_cluster.stderr
    assert sorted(built_on(local_cluster.stderr)) == names
    assert snapshot(work / "build/usd") == reference
    # The local workers stored into the build's (shared) cache themselves, under this build's id.
    assert conversions(build_cache) == {"hits": 0, "misses": len(names)}


def test_broken_entry_fails_alone_with_one_line(shared_dir, tmp_path, dask_cluster):
    broken = tmp_path / "lib" / "broken.urdf"
    broken.parent.mkdir(parents=True)
    broken.write_text('<robot name="broken"><link name="base"><inertial><mass value="oops"/></inertial></link></robot>')
    library = write_library(shared_dir, tmp_path / "lib", [{"name": "broken", "source": str(broken)}])
    work = tmp_path / "work"
    work.mkdir()
    result = doit(work, "--continue", "convert", f"library={library}", f"scheduler={dask_cluster.address}",
                  "sources=shared")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if str(broken) in line and "oops" in line]
    assert len(errors) == 1, output
    assert sorted(built_on(result.stderr)) == [n for n in entry_names(library) if n != "broken"]
    assert not (work / "build/usd/broken").exists()


def test_worker_killed_mid_build_still_completes(shared_dir, tmp_path):
    library = write_library(shared_dir, tmp_path / "lib")
    work = tmp_path / "work"
    work.mkdir()
    with cluster(slow=0.6) as running:
        build = doit_background(work, "convert", f"library={library}", f"scheduler={running.address}")
        try:
            victim_task = None
            deadline = time.monotonic() + 120
            while victim_task is None and time.monotonic() < deadline and build.poll() is None:
                victim_task = next(iter(running.processing().get("w1", [])), None)
                time.sleep(0.05)
            assert victim_task is not None, "w1 never ran a conversion"
            running.workers["w1"].send_signal(signal.SIGKILL)  # mid-conversion: each one sleeps 0.6 s first
            stdout, stderr = build.communicate(timeout=TIMEOUT)
        finally:
            if build.poll() is None:
                build.kill()
    assert build.returncode == 0, stdout + stderr
    workers = built_on(stderr)
    assert sorted(workers) == entry_names(library)
    victim = victim_task.split("-", 1)[1].rsplit("-", 1)[0]  # key "convert-<name>-<token>"
    assert workers[victim] == "w2"  # the killed worker's conversion was rerun on the other one
    assert all((work / "build/usd" / name).is_dir() for name in entry_names(library))


def test_lost_scheduler_fails_with_one_line_and_rerun_resumes(shared_dir, tmp_path):
    library = write_library(shared_dir, tmp_path / "lib")
    names = entry_names(library)
    work = tmp_path / "work"
    work.mkdir()
    with cluster(slow=0.5) as running:
        build = doit_background(work, "convert", f"library={library}", f"scheduler={running.address}")
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and build.poll() is None:
                if sum(len(keys) for keys in running.processing().values()):
                    break
                time.sleep(0.05)
            running.scheduler.send_signal(signal.SIGKILL)
            stdout, stderr = build.communicate(timeout=TIMEOUT)
        finally:
            if build.poll() is None:
                build.kill()
    output = stdout + stderr
    assert build.returncode != 0, output
    assert "Traceback" not in output
    assert "lost the Dask scheduler at tcp://127.0.0.1" in output
    finished = sorted(built_on(stderr))
    assert len(finished) < len(names)
    resumed = doit(work, "convert", f"library={library}")  # here, without Dask
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert executed(resumed) == [f"convert:{n}" for n in names if n not in finished]


def test_shards_cover_every_entry_once_and_a_final_build_elsewhere_restores_all(shared_dir, tmp_path, monkeypatch):
    from usdforge.pipeline.distributed import shard_of
    from usdforge.pipeline.tasks import convert_tasks

    monkeypatch.setenv("USDFORGE_BUILD_ID", "listing")  # convert_tasks sets one for its process: not ours

    library = write_library(shared_dir, tmp_path / "lib")
    names = entry_names(library)
    shards = [sorted(task["name"] for task in convert_tasks(library, tmp_path / "build", options={"shard": (i, 3)})
                     if task["basename"] == "convert") for i in (1, 2, 3)]
    assert sorted(sum(shards, [])) == names  # each entry in exactly one shard
    assert all(shards)
    # A function of the name alone, pinned: every job of an array (any process, any release) must agree.
    assert {n: shard_of(n, 3) for n in names} == {
        "ball": 3, "cartpole": 3, "cone": 2, "crate": 1, "mug": 2, "pan_tilt": 3, "plate": 3, "robotiq_2f85": 2,
        "simple_humanoid": 3, "skydio_x2": 2, "table": 1, "tiny_arm": 3}

    # Three jobs of an array, each in its own checkout/build folder, sharing one cache (cache=PATH).
    cache = tmp_path / "shared-cache"
    built: dict[str, bytes] = {}
    ran = []
    for i in (1, 2, 3):
        job = tmp_path / f"job{i}"
        job.mkdir()
        result = doit(job, "convert", f"library={library}", f"shard={i}/3", f"cache={cache}")
        assert result.returncode == 0, result.stdout + result.stderr
        assert executed(result) == [f"convert:{n}" for n in shards[i - 1]]
        assert conversions(cache) == {"hits": 0, "misses": len(shards[i - 1])}
        assert sorted(p.name for p in (job / "build/usd").iterdir()) == shards[i - 1]
        built.update(snapshot(job / "build/usd"))
        ran += executed(result)
    assert sorted(ran) == [f"convert:{n}" for n in names]

    # The final `doit convert` anywhere: every entry restored from the shared cache, none converted.
    final_dir = tmp_path / "final"
    final_dir.mkdir()
    final = doit(final_dir, "convert", f"library={library}", f"cache={cache}")
    assert final.returncode == 0, final.stdout + final.stderr
    assert executed(final) == [f"convert:{n}" for n in names]
    assert conversions(cache) == {"hits": len(names), "misses": 0}
    assert "mesh-geometry" not in last_build(cache)  # nothing was even read for a conversion
    assert snapshot(final_dir / "build/usd") == built  # byte for byte what the shards built
    again = doit(final_dir, "convert", f"library={library}", f"cache={cache}")
    assert again.returncode == 0 and executed(again) == []


def test_cluster_options_without_dask_or_malformed_fail_with_one_line(tmp_path):
    no_dask = ("import sys; sys.modules['distributed'] = sys.modules['dask'] = None; "
               "from doit.doit_cmd import DoitMain; sys.exit(DoitMain().run(sys.argv[1:]))")
    library = REPO / "assets/library.toml"
    for args, message in ((["workers=2"], "pip install 'usdforge[cluster]'"),
                          (["scheduler=tcp://127.0.0.1:1"], "pip install 'usdforge[cluster]'")):
        result = subprocess.run([sys.executable, "-c", no_dask, "-f", str(REPO / "dodo.py"), "-d", str(tmp_path),
                                 "convert", f"library={library}", *args], capture_output=True, text=True,
                                timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert result.returncode != 0
        assert [line for line in (result.stdout + result.stderr).splitlines() if message in line], result.stdout
        assert "Traceback" not in result.stdout + result.stderr
        assert not (tmp_path / "build/usd").exists()
    for arg, message in (("shard=4/3", "shard=4/3: expected i/n"), ("workers=many", "workers=many: expected"),
                         ("sources=ship", "sources=ship needs scheduler= or workers=")):
        result = doit(tmp_path, "convert", f"library={library}", arg)
        assert result.returncode != 0 and message in result.stdout + result.stderr
        assert "Traceback" not in result.stdout + result.stderr
    unreachable = doit(tmp_path, "convert", f"library={library}", f"scheduler=tcp://127.0.0.1:{free_port()}",
                       env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"})
    assert unreachable.returncode != 0 and "Traceback" not in unreachable.stdout + unreachable.stderr
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:" in unreachable.stdout + unreachable.stderr


def test_a_workers_artifact_is_restored_as_a_cache_hit_and_a_foreign_key_writes_nothing(tmp_path):
    """In-process, no cluster: the doit side's lookup misses before anything converts; what a worker's
    ``convert_remote`` returns (sources shipped, no cache), restored on the doit side, equals a local
    conversion byte for byte, lazy key included; under another cache key (a worker with another usdforge
    or library versions) nothing is written."""
    import attrs

    from usdforge.pipeline.distributed import (_doit_side_store, _KeyMismatch, _on_doit_side, _Submit,
                                               convert_remote, resolved_cfg, task_sources)
    from usdforge.pipeline.task_specs import compute_specs
    from usdforge.pipeline.tasks import _run_conversion
    from usdforge.schemas import cfg_to_json

    spec = next(s for s in compute_specs(REPO / "assets/library.toml", tmp_path / "build") if s["name"] == "tiny_arm")
    cfg = resolved_cfg(spec["kind"], spec["cfg_json"])
    local, remote = tmp_path / "local", tmp_path / "remote"
    local_json, remote_json = (cfg_to_json(attrs.evolve(cfg, usd_dir=str(folder))) for folder in (local, remote))
    assert "outputs" in _run_conversion(spec["kind"], local_json, None, spec["root"])

    with pytest.raises(_Submit) as miss:
        _on_doit_side(spec["kind"], remote_json, _doit_side_store(None), spec["root"])
    assert not remote.exists()
    files, expected = task_sources(spec["kind"], cfg, ship=True)
    assert any(path.endswith(".stl") for path in files)  # the meshes travel with the source
    result = convert_remote(spec["kind"], remote_json, files, expected, "off", "test-build")
    assert result["cache_key"] == miss.value.key and not result["restored"] and not result["shared_cache"]

    foreign = {**result, "cache_key": "0" * 64}
    with pytest.raises(_KeyMismatch):
        _on_doit_side(spec["kind"], remote_json, _doit_side_store(None, foreign), spec["root"])
    assert not remote.exists()

    done = _on_doit_side(spec["kind"], remote_json, _doit_side_store(None, result), spec["root"], result["seconds"])
    assert Path(done["usd_path"]).is_file()
    assert snapshot(remote) == snapshot(local)
