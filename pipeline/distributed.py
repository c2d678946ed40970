"""Scale-out: conversions on a Dask cluster (``scheduler=``/``workers=``), and sharded builds (``shard=i/n``).

doit still decides what is out of date; a ``convert:<name>`` action then asks the build cache first (the
converter's own lazy check and cache lookup, on the doit side): outputs up to date or a cache hit finish
there, as in a local build, without Dask. Only a miss is submitted to Dask, and the action waits for it, so
doit runs in thread mode with many actions in flight (one thread per waiting conversion).

Where the sources are: with ``sources=ship`` (the default for ``scheduler=``) the source and every file
the reference scan finds (xacro arguments included) travel with the task and the worker rebuilds them in a
scratch folder (relative paths keep working; absolute paths written inside a source need
``sources=shared``). With ``sources=shared`` (the default for ``workers=N``, a local cluster) the worker
reads the paths as they are and first checks that each file has the content the doit side hashed.

Where the outputs go: the worker converts through the normal converter API (into a scratch folder) with
an explicit cache: with ``sources=shared`` the build's own cache folder (``cache=``, shared like the
sources), otherwise the worker's ``USDFORGE_CACHE`` if set, else none. It returns the cache artifact of
the conversion (the files and the conversion's warnings, under its cache key), or, when it stored it in the
shared cache, only the key. The doit side then restores that artifact through the converter's cache-restore
path, as a local cache hit does: the build folder (lazy key included) is byte-identical to a local
``doit convert``, the warnings name this machine's files, the artifact lands in this build's cache too, and
nothing of usdforge's state lives only on a worker. A worker whose cache key differs from the doit side's
(another usdforge or library version) fails the entry rather than writing outputs its key would misdescribe.

Failures: a user error (bad cfg, bad source) comes back as data and fails that entry with its one line; a
worker that dies mid-conversion has its task rerun elsewhere by the scheduler (up to Dask's
``distributed.scheduler.allowed-failures``); a lost scheduler fails every waiting entry with one line, and
a re-run resumes (finished entries are up to date).

Dask is imported only inside the functions that use it: ``doit convert`` without ``scheduler=``/``workers=``
never imports it.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import sys
import threading
import time
import uuid
from pathlib import Path, PurePath
from typing import Any

#: The extra that installs Dask, named in the error when it is missing.
MISSING_DASK = ("scheduler=/workers= run conversions on Dask, which is not installed: "
                "pip install 'usdforge[cluster]'")
#: doit actions in flight against a remote scheduler unless ``-n`` says otherwise (each is a waiting
#: thread; Dask queues what its workers cannot start yet).
REMOTE_IN_FLIGHT = 32
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def shard_of(name: str, count: int) -> int:
    """The shard (1..count) of an entry: a stable function of its name only (SHA-256), so every machine of
    a job array agrees, and adding an entry never moves the others."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % count + 1


def build_options(scheduler: str | None = None, workers: str | None = None, sources: str | None = None,
                  shard: str | None = None) -> tuple[dict[str, Any], str | None]:
    """Options of ``doit convert`` from its command-line variables, and a one-line error (or None).

    scheduler: address of a running Dask scheduler (``tcp://host:8786``).
    workers: number of local Dask worker processes (a ``LocalCluster`` started for the build) when there
        is no scheduler.
    sources: "ship" (send sources with each task) or "shared" (workers read the paths as they are).
    shard: "i/n": build only the entries whose ``shard_of(name, n) == i`` (1 ≤ i ≤ n).
    """
    options: dict[str, Any] = {"scheduler": scheduler or None, "workers": None, "sources": None, "shard": None}
    if workers:
        if not workers.isdigit() or int(workers) < 1:
            return options, f"workers={workers}: expected a number of local Dask workers ≥ 1"
        options["workers"] = int(workers)
    if sources:
        if sources not in ("ship", "shared"):
            return options, f"sources={sources}: expected 'ship' or 'shared'"
        if not (scheduler or workers):
            return options, f"sources={sources} needs scheduler= or workers="
        options["sources"] = sources
    if scheduler or workers:
        options["sources"] = options["sources"] or ("ship" if scheduler else "shared")
        if not dask_installed():
            return options, MISSING_DASK
    if shard:
        match = _SHARD.match(shard)
        if not match or not 1 <= int(match[1]) <= int(match[2]):
            return options, f"shard={shard}: expected i/n with 1 ≤ i ≤ n, e.g. shard=3/16"
        options["shard"] = (int(match[1]), int(match[2]))
    return options, None


def dask_installed() -> bool:
    """Whether ``distributed`` can be imported, found without importing it (a no-op run stays fast)."""
    from importlib.util import find_spec

    try:
        return find_spec("distributed") is not None and find_spec("dask") is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        return False


def doit_config(options: dict[str, Any]) -> dict[str, Any]:
    """DOIT_CONFIG entries for a cluster build: doit's thread runner, with enough actions in flight to
    keep every worker busy (``doit -n K`` on the command line overrides)."""
    if not (options.get("scheduler") or options.get("workers")):
        return {}
    in_flight = 2 * options["workers"] if options.get("workers") and not options.get("scheduler") else REMOTE_IN_FLIGHT
    return {"num_process": in_flight, "par_type": "thread"}


# --- the doit side -----------------------------------------------------------------------------------

_lock = threading.Lock()
_session: dict[str, Any] = {}


def _where(options: dict[str, Any]) -> str:
    return options["scheduler"] or f"a local cluster of {options['workers']} workers"


def _client(options: dict[str, Any]) -> Any:
    """The process's Dask client (one per doit run, shared by the action threads); started on first use."""
    with _lock:
        if "failure" in _session:
            raise _ClusterUnusable(_session["failure"])
        if "client" in _session:
            return _session["client"]
        # Dask's own log lines (tracebacks while it reconnects, "event loop unresponsive" while a
        # conversion holds the GIL) would bury the one-line results; failures are reported by this module.
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")  # read by Dask and by local workers
        from distributed import Client, LocalCluster

        for logger in [name for name in logging.root.manager.loggerDict if name.split(".")[0] == "distributed"]:
            logging.getLogger(logger).setLevel(logging.CRITICAL)  # Dask's config sets some child levels

        try:
            if options["scheduler"]:
                client = Client(options["scheduler"], set_as_default=False)  # connect timeout: Dask config
            else:
                # One thread per worker: pxr, MuJoCo and trimesh hold the GIL for most of a conversion.
                cluster = LocalCluster(n_workers=options["workers"], threads_per_worker=1, processes=True,
                                       dashboard_address=None, host="127.0.0.1")
                _session["cluster"] = cluster
                client = Client(cluster, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            _session["failure"] = f"cannot reach the Dask scheduler at {_where(options)}: {_one_line(exc)}"
            raise _ClusterUnusable(_session["failure"]) from None
        _session["client"] = client
        atexit.register(_shutdown)
        return client


def _shutdown() -> None:
    client, cluster = _session.pop("client", None), _session.pop("cluster", None)
    for closable in (client, cluster):
        if closable is not None:
            try:
                closable.close()
            except Exception:  # noqa: BLE001 - best effort at exit; the build's result is already decided
                pass


class _ClusterUnusable(Exception):
    """The scheduler cannot be reached or was lost: every waiting entry fails with this one line."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def resolved_cfg(kind: str, cfg_json: str) -> Any:
    """The entry's cfg as ``AssetConverterBase`` resolves it (absolute asset and usd_dir, file name set):
    what the worker converts, named as on this machine."""
    import attrs

    from usdforge.pipeline.kinds import cfg_class
    from usdforge.rules.outputs import resolve_usd_file_name
    from usdforge.schemas import cfg_from_json

    cfg = cfg_from_json(cfg_json, cfg_class(kind))
    asset = Path(cfg.asset_path).absolute()
    if not asset.is_file():
        raise ValueError(f"The asset path does not exist: {cfg.asset_path}")
    return attrs.evolve(cfg, asset_path=str(asset), usd_dir=str(Path(cfg.usd_dir).absolute()),
                        usd_file_name=resolve_usd_file_name(str(asset), cfg.usd_file_name))


#: Serialises the doit side's converter work (the lazy check, the cache lookup, the restore): Python's
#: warnings filters are process-wide, and the converter records warnings. The waits on Dask run outside it.
_doit_side = threading.Lock()


class _Submit(Exception):
    """Raised by ``_DoitSideStore`` on a cache miss, before anything is converted here: run it on Dask."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


class _KeyMismatch(Exception):
    """The worker converted under another cache key than this machine computes (other inputs, usdforge
    code or library versions), so its files are not the outputs this machine's lazy key would describe."""


def _doit_side_store(cache: str | None, result: dict[str, Any] | None = None, kind: str | None = None) -> Any:
    """The build cache as the doit side of a cluster build sees it, a ``pipeline.cache.Store`` handed to the
    converter (so the outputs are written, and the lazy key made, exactly as on a local cache hit):

    - without ``result``: a hit in the local (or shared) cache ``cache`` restores as usual; a miss raises
      ``_Submit`` (the converter never converts on the doit side);
    - with ``result`` (a worker's ``convert_remote`` reply): the worker's artifact is served under its key,
      stored into ``cache`` too when the worker did not already store it there.
    """
    from usdforge.pipeline.cache import Artifact, Store, open_store, sha256_bytes, unsafe_file_names

    real = open_store(cache) if cache is not None else None

    class _DoitSideStore(Store):
        def get_entry(self, key: str) -> Artifact | None:
            if result is None:
                found = real.get_entry(key) if real is not None else None
                if found is None:
                    raise _Submit(key)
                return found
            if key != result["cache_key"]:
                raise _KeyMismatch(key)
            if result["files"] is None:  # stored by the worker in the shared cache: read it from there
                found = real.get_entry(key) if real is not None else None
                if found is None:
                    raise _KeyMismatch(f"{key} is not in the shared build cache {cache}")
                return found
            files = result["files"]
            problem = (unsafe_file_names(files) if isinstance(files, dict)
                       and all(isinstance(data, bytes) for data in files.values()) else "not a set of files")
            if problem is not None:  # checked before anything is stored or written
                raise ValueError(f"the artifact of the Dask worker for {key} names a file outside its output "
                                 f"folder ({problem}): nothing written")
            if real is not None and not result["shared_cache"] and real.entry(key) is None:
                real.put_entry(key, result["files"], result["meta"], kind=kind)
            return Artifact(result["files"], result["meta"],
                            {name: sha256_bytes(data) for name, data in result["files"].items()})

        def record(self, kind: str, hit: bool) -> None:
            if real is None:
                return
            if result is None:
                real.record(kind, hit)
            elif not result["shared_cache"]:  # the worker recorded its lookup there itself otherwise
                real.record(kind, hit=bool(result["restored"]))

        def put_entry(self, key: str, files: dict[str, bytes], meta: Any = None, kind: str | None = None,
                      background: Any = None) -> dict[str, str] | None:
            raise RuntimeError("the doit side of a cluster build never converts")

        put_bytes = put_entry

    return _DoitSideStore(real.root if real is not None else os.devnull)


def run_on_cluster(name: str, kind: str, cfg_json: str, cache: str | None, root: str,
                   options: dict[str, Any]) -> Any:
    """doit action: convert one entry on a Dask worker and write its outputs here, atomically.

    First, here: the converter's lazy check and the build cache (``cache``: the local or shared folder, or
    None); outputs already up to date, or a cache hit, finish without Dask. Otherwise the whole conversion
    runs on a worker (``convert_remote``); its artifact (files and the conversion's warnings) then goes
    through the converter's cache-restore path here, so the build folder, the lazy key and the warnings are
    those of a local cache hit. Returns what ``run_conversion`` returns, or a ``TaskFailed`` with one line.
    """
    import attrs
    from doit.exceptions import TaskFailed

    from usdforge.pipeline.cache import build_id
    from usdforge.rules.errors import ConversionError
    from usdforge.schemas import ConfigError, cfg_to_json

    try:
        cfg = resolved_cfg(kind, cfg_json)
    except (ConfigError, ConversionError, ValueError) as exc:
        return TaskFailed(str(exc))
    if not cfg.force_usd_conversion:  # forced: never restored, so straight to a worker
        try:
            return _on_doit_side(kind, cfg_json, _doit_side_store(cache), root)
        except _Submit as submit:
            key = submit.key
    else:
        key = None
    try:
        files, expected = task_sources(kind, cfg, ship=options["sources"] == "ship")
    except (ConfigError, ConversionError, ValueError) as exc:
        return TaskFailed(str(exc))
    # The worker's cache: the build's own folder when it shares our files ("off" when the build has none),
    # else its own USDFORGE_CACHE, if any.
    worker_cache = (cache or "off") if options["sources"] == "shared" else None
    try:
        client = _client(options)
        future = client.submit(convert_remote, kind, cfg_to_json(cfg), files, expected, worker_cache,
                               build_id(), pure=False, key=f"convert-{name}-{uuid.uuid4().hex[:8]}")
        result = future.result()
    except _ClusterUnusable as exc:
        return TaskFailed(str(exc))
    except Exception as exc:  # noqa: BLE001 - Dask's errors, each turned into one line below
        return TaskFailed(_cluster_failure(name, options, exc))
    if "error" in result:
        return TaskFailed(result["error"])
    if key is not None and result["cache_key"] != key:
        return TaskFailed(_mismatch(name, result["worker"]))
    # Restored here through the cache path, not forced (force_usd_conversion is not part of any key).
    restore_json = cfg_json if not cfg.force_usd_conversion else cfg_to_json(
        attrs.evolve(cfg, force_usd_conversion=False))
    try:
        done = _on_doit_side(kind, restore_json, _doit_side_store(cache, result, kind), root, result["seconds"])
    except _KeyMismatch:
        return TaskFailed(_mismatch(name, result["worker"]))
    if isinstance(done, TaskFailed):
        return done
    origin = " (from its build cache)" if result["restored"] else ""
    _say(f"convert:{name} built on {result['worker']} in {result['seconds']:.2f} s{origin}")
    return {**done, "converted": not result["restored"], "restored": bool(result["restored"]),
            "worker": result["worker"]}


def task_sources(kind: str, cfg: Any, ship: bool) -> tuple[dict[str, bytes] | None, dict[str, str]]:
    """What travels with a conversion: ({path: bytes} of the source and every existing file it references
    when ``ship``, else None; {path: sha256} of those files). The scan is the converter's own
    (``referenced_files`` with the entry's packages and xacro arguments). cfg: as ``resolved_cfg`` gives it."""
    from usdforge.pipeline.converters import packages_of
    from usdforge.pipeline.fingerprint import digests
    from usdforge.pipeline.references import referenced_files

    references = referenced_files(kind, cfg.asset_path, packages_of(cfg), getattr(cfg, "xacro_args", None),
                                  tree_root=getattr(cfg, "tree_root", None), xacro_env=getattr(cfg, "xacro_env", None),
                                  allowed_roots=getattr(cfg, "allowed_roots", ()))
    sources = [cfg.asset_path, *(p for p in references if os.path.isfile(p))]
    return ({path: Path(path).read_bytes() for path in sources} if ship else None), digests(sources)


def _mismatch(name: str, worker: str) -> str:
    return (f"{name}: worker {worker} converted other inputs than this machine has (a source changed while "
            f"it converted, or its usdforge or libraries differ): nothing written; re-run, or install the "
            f"same usdforge on the workers")


def _on_doit_side(kind: str, cfg_json: str, store: Any, root: str, seconds: float | None = None) -> Any:
    """``tasks.run_conversion`` with ``store``, serialised, its warnings written as whole lines to the real
    stderr (doit's thread runner swaps ``sys.stderr`` per action)."""
    import warnings

    from usdforge.pipeline.tasks import _run_conversion

    from usdforge.pipeline.cli import terminal_line

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = terminal_line(message)
        if text is not None:
            _say(text)

    with _doit_side, warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        return _run_conversion(kind, cfg_json, store, root, seconds)


def _say(*lines: str) -> None:
    """Write whole lines to the process's stderr. doit's thread runner swaps ``sys.stderr`` per action
    (to capture it), which threads interleave, so the real stream is written directly."""
    with _lock:
        stream = sys.__stderr__ or sys.stderr
        stream.write("".join(line + "\n" for line in lines))
        stream.flush()


def _cluster_failure(name: str, options: dict[str, Any], exc: BaseException) -> str:
    """One line for a failure of the cluster rather than of the entry."""
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return (f"{name}: the conversion killed every Dask worker that tried it (crash or out of memory); "
                f"see the workers' logs")
    client = _session.get("client")
    if client is None or client.status != "running" or "connection" in str(exc).lower():
        with _lock:
            reason = getattr(exc, "reason", None) or _one_line(exc)
            _session["failure"] = (f"lost the Dask scheduler at {_where(options)} ({reason}); "
                                   f"re-run the build to resume: finished entries are up to date")
        return _session["failure"]
    return f"{name}: the Dask task failed: {type(exc).__name__}: {_one_line(exc)}"


# --- the worker side ---------------------------------------------------------------------------------

def convert_remote(kind: str, cfg_json: str, files: dict[str, bytes] | None, expected: dict[str, str],
                   cache: str | None, build: str) -> dict[str, Any]:
    """Run on a Dask worker: convert through the converter API into a scratch folder; return the artifact
    the converter stores in the build cache (its files and its warnings, with the cache key).

    files: {absolute path on the doit machine: bytes} of the source and its referenced files, rebuilt
        under a scratch root (so relative references resolve); None when the worker shares the file system.
    expected: {path: sha256} the doit side saw; with a shared file system each is checked first.
    cache: the shared build cache folder (with a shared file system), used as is; "off": none; None: the
        worker's own ``USDFORGE_CACHE`` if set, else none. build: the doit side's build id, for the cache's
        statistics.
    Returns {"cache_key", "files" ({relative name: bytes}; None when stored in the shared cache ``cache``),
    "meta" (the warnings, as the cache stores them), "shared_cache", "restored" (a hit in the worker's
    cache), "worker", "seconds"} or {"error": one line}. User errors come back as data (no retry, no
    traceback); anything else raises and Dask reports it.
    """
    import shutil
    import tempfile
    import warnings

    import attrs

    from usdforge.pipeline.cache import CACHE_ENV, Store, default_cache_dir
    from usdforge.pipeline.converters import converter_for
    from usdforge.pipeline.fingerprint import file_digest
    from usdforge.pipeline.kinds import cfg_class
    from usdforge.rules.conversion_warnings import ConversionNote, ConversionWarning
    from usdforge.rules.errors import ConversionError
    from usdforge.schemas import ConfigError, cfg_from_json

    start = time.perf_counter()
    worker = _worker_name()
    scratch = Path(tempfile.mkdtemp(prefix="usdforge-task-"))
    root = scratch / "src"

    def unroot(text: str) -> str:
        return text.replace(str(root), "")

    class Capturing(Store):
        """The worker's cache (or a scratch one), remembering every artifact it stores or serves."""

        def __init__(self, folder: Path, build: str):
            super().__init__(folder, build=build)
            self.captured: dict[str, tuple[dict[str, bytes], Any]] = {}  # key → (files, meta)
            self.stored: dict[str, bool] = {}  # key → whether the cache folder holds it

        def put_entry(self, key: str, files: dict[str, bytes], meta: Any = None, kind: str | None = None,
                      background: Any = None) -> dict[str, str] | None:
            """Stores now (``background`` unused): whether the cache folder holds the artifact is known on return."""
            self.captured[key] = (dict(files), meta)
            stored = super().put_entry(key, files, meta, kind)
            self.stored[key] = stored is not None
            return stored

        def get_entry(self, key: str) -> Any:
            found = super().get_entry(key)
            if found is not None:
                self.captured[key] = (found.files, found.meta)
                self.stored[key] = True
            return found

    try:
        cfg = cfg_from_json(cfg_json, cfg_class(kind))
        if files is not None:
            for path, data in files.items():
                target = _reroot(root, path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            cfg = _rerooted_cfg(cfg, root)
        else:
            for path, sha in expected.items():
                if file_digest(path) != sha:
                    return {"error": f"{path}: not the file the doit machine has (worker {worker}); without a "
                                     f"shared file system use sources=ship", "worker": worker}
        if cache is None:
            folder = default_cache_dir() if os.environ.get(CACHE_ENV) else None
        else:
            folder = None if cache == "off" else Path(cache)
        store = Capturing(folder if folder is not None else scratch / "cache", build)
        cfg = attrs.evolve(cfg, usd_dir=str(scratch / "out"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                converter = converter_for(kind)(cfg, cache=store)
            except (ConfigError, ConversionError, ValueError) as exc:
                return {"error": unroot(str(exc)), "worker": worker}
        for other in caught:  # not a conversion's (those travel in the artifact): as the worker would show it
            if not issubclass(other.category, (ConversionWarning, ConversionNote)):
                warnings.warn_explicit(other.message, other.category, other.filename, other.lineno)
        key = converter.cache_key
        if key not in store.captured:
            raise RuntimeError(f"the conversion of {unroot(cfg.asset_path)} stored no artifact under its key")
        outputs, meta = store.captured[key]
        shared = folder is not None and cache not in (None, "off") and store.stored.get(key, False)
        return {"cache_key": key, "files": None if shared else outputs, "meta": meta, "shared_cache": shared,
                "restored": converter.restored, "worker": worker, "seconds": time.perf_counter() - start}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _worker_name() -> str:
    try:
        from distributed import get_worker

        worker = get_worker()  # `dask worker --name` if given; a LocalCluster numbers them: the address then
        return worker.name if isinstance(worker.name, str) and worker.name else worker.address
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


def _reroot(root: Path, path: str) -> Path:
    """``path`` (absolute on the doit machine) under ``root``, keeping every folder so relative paths hold."""
    parts = PurePath(path).parts
    return root.joinpath(*(part.replace(":", "") for part in parts[1:]))


def _rerooted_cfg(cfg: Any, root: Path) -> Any:
    """The cfg with its source, ROS package folders, allowed roots and package-search tree root moved under
    ``root`` (every folder the conversion's key names relative to the source: ``content_key.folder_layout``)."""
    import attrs

    changes: dict[str, Any] = {"asset_path": str(_reroot(root, cfg.asset_path))}
    if getattr(cfg, "tree_root", None):
        changes["tree_root"] = str(_reroot(root, os.path.abspath(cfg.tree_root)))
    if getattr(cfg, "allowed_roots", None):
        changes["allowed_roots"] = type(cfg.allowed_roots)(str(_reroot(root, os.path.abspath(folder)))
                                                           for folder in cfg.allowed_roots)
    if getattr(cfg, "ros_package_paths", None):
        changes["ros_package_paths"] = []
        for item in cfg.ros_package_paths:
            folder = _reroot(root, os.path.abspath(item["path"]))
            folder.mkdir(parents=True, exist_ok=True)  # a package none of whose files are referenced
            changes["ros_package_paths"].append({"name": item["name"], "path": str(folder)})
    return attrs.evolve(cfg, **changes)
