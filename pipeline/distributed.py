"""Scale-out: conversions on a Dask cluster (``scheduler=``/``workers=``), and sharded builds (``shard=i/n``).

doit still decides what is out of date; a ``convert:<name>`` action then submits the whole conversion to
Dask and waits for it, so doit runs in thread mode with many actions in flight (one thread per waiting
conversion, no CPU work on the doit side but writing files).

Where the sources are: with ``sources=ship`` (the default for ``scheduler=``) the source and every file
the reference scan finds travel with the task and the worker rebuilds them in a scratch folder (relative
paths keep working; absolute paths written inside a source need ``sources=shared``). With
``sources=shared`` (the default for ``workers=N``, a local cluster) the worker reads the paths as they are
and first checks that each file has the content the doit side hashed.

Where the outputs go: the worker converts through the normal converter API into a scratch folder and
returns the files' bytes; the doit side writes them with ``build_atomically`` and writes the lazy key
itself from its own paths, so the build folder is byte-identical to a local ``doit convert`` and nothing
of usdforge's state lives only on a worker.

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
    """The entry's cfg as ``AssetConverterBase`` resolves it (absolute asset and usd_dir, file name set),
    so the key the doit side writes is the one a local conversion writes."""
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


def run_on_cluster(name: str, kind: str, cfg_json: str, options: dict[str, Any]) -> Any:
    """doit action: convert one entry on a Dask worker and write its outputs here, atomically.

    Returns what the local action returns (the outputs' stamps, for doit's ``outputs_intact`` check), or
    a ``TaskFailed`` with one line.
    """
    from doit.exceptions import TaskFailed

    from usdforge.pipeline.converters import packages_of
    from usdforge.pipeline.fingerprint import digests
    from usdforge.pipeline.lazy import read_key, stale_reasons
    from usdforge.pipeline.references import referenced_files
    from usdforge.rules.errors import ConversionError
    from usdforge.rules.outputs import key_file_name
    from usdforge.schemas import ConfigError, cfg_to_json, config_digest

    try:
        cfg = resolved_cfg(kind, cfg_json)
        asset, usd_dir = Path(cfg.asset_path), Path(cfg.usd_dir)
        key_path = usd_dir / key_file_name(cfg.usd_file_name)
        previous = read_key(key_path)
        if not cfg.force_usd_conversion and not stale_reasons(previous, config_digest(cfg, kind), asset, usd_dir):
            return _done(cfg, key_path, previous.outputs)  # built already (doit's state was lost): resume
        references = referenced_files(kind, asset, packages_of(cfg))
    except (ConfigError, ConversionError, ValueError) as exc:
        return TaskFailed(str(exc))
    sources = [str(asset), *(p for p in references if os.path.isfile(p))]
    files = {path: Path(path).read_bytes() for path in sources} if options["sources"] == "ship" else None
    expected = digests(sources)
    try:
        client = _client(options)
        future = client.submit(convert_remote, kind, cfg_to_json(cfg), files, expected, pure=False,
                               key=f"convert-{name}-{uuid.uuid4().hex[:8]}")
        result = future.result()
    except _ClusterUnusable as exc:
        return TaskFailed(str(exc))
    except Exception as exc:  # noqa: BLE001 - Dask's errors, each turned into one line below
        return TaskFailed(_cluster_failure(name, options, exc))
    if "error" in result:
        return TaskFailed(result["error"])
    outputs = _write(kind, cfg, references, result["outputs"], previous, expected)
    _say(*(f"{name}: warning: {message}" for message in result["warnings"]),
         f"convert:{name} built on {result['worker']} in {result['seconds']:.2f} s")
    return _done(cfg, key_path, outputs)


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


def _write(kind: str, cfg: Any, references: list[str], outputs: dict[str, bytes], previous: Any,
           known: dict[str, str] | None = None) -> list[str]:
    """Write the worker's files into ``cfg.usd_dir`` atomically, with the lazy key a local conversion writes.

    known: {normalised path: sha256} of the sources as sent to (or checked by) the worker: the key records
    exactly what was converted, and the sources are not hashed twice.
    """
    known = known or {}

    def sources_digests(paths: list[str]) -> dict[str, str]:  # as fingerprint.digests
        return {path: known.get(path) or file_digest(path) for path in sorted({normalise(p) for p in paths})}

    from usdforge.pipeline.atomic import build_atomically
    from usdforge.pipeline.fingerprint import file_digest, normalise
    from usdforge.pipeline.lazy import LazyKey, key_to_toml
    from usdforge.rules.outputs import key_file_name
    from usdforge.schemas import cfg_to_dict, config_digest

    def build(staging: Path) -> list[Path]:
        written = []
        for relative, data in outputs.items():
            target = staging.joinpath(*PurePath(relative).parts)
            if ".." in PurePath(relative).parts or PurePath(relative).is_absolute():
                raise ValueError(f"a worker returned an output outside the output folder: {relative}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written.append(target)
        return written

    def make_key(files: dict[str, Path]) -> str:  # as AssetConverterBase._convert makes it
        return key_to_toml(LazyKey(
            kind=kind, config_digest=config_digest(cfg, kind), asset=sources_digests([cfg.asset_path]),
            references=sources_digests(references),
            outputs={name: file_digest(path) for name, path in files.items()},
            cfg=cfg_to_dict(cfg)))

    return build_atomically(Path(cfg.usd_dir), build, key_file_name(cfg.usd_file_name), make_key,
                            list(previous.outputs) if previous is not None else [])


def _done(cfg: Any, key_path: Path, outputs: Any) -> dict[str, Any]:
    from usdforge.pipeline.tasks import _stamp

    written = [key_path, *(Path(cfg.usd_dir) / name for name in outputs)]
    return {"usd_path": str(Path(cfg.usd_dir) / cfg.usd_file_name),
            "outputs": {str(p): _stamp(str(p)) for p in written}}


# --- the worker side ---------------------------------------------------------------------------------

def convert_remote(kind: str, cfg_json: str, files: dict[str, bytes] | None,
                   expected: dict[str, str]) -> dict[str, Any]:
    """Run on a Dask worker: convert through the converter API into a scratch folder, return the bytes.

    files: {absolute path on the doit machine: bytes} of the source and its referenced files, rebuilt
        under a scratch root (so relative references resolve); None when the worker shares the file system.
    expected: {path: sha256} the doit side saw; with a shared file system each is checked first.
    Returns {"outputs": {relative path: bytes}, "warnings" (the ConversionWarnings' lines, with the doit
    machine's paths), "worker", "seconds"} or {"error": one line}.
    User errors come back as data (no retry, no traceback); anything else raises and Dask reports it.
    """
    import shutil
    import tempfile
    import warnings

    import attrs

    from usdforge.pipeline.converters import converter_for
    from usdforge.pipeline.fingerprint import file_digest
    from usdforge.pipeline.kinds import cfg_class
    from usdforge.pipeline.lazy import read_key
    from usdforge.rules.conversion_warnings import ConversionWarning
    from usdforge.rules.errors import ConversionError
    from usdforge.rules.outputs import key_file_name
    from usdforge.schemas import ConfigError, cfg_from_json

    start = time.perf_counter()
    worker = _worker_name()
    scratch = Path(tempfile.mkdtemp(prefix="usdforge-task-"))
    root = scratch / "src"

    def unroot(text: str) -> str:
        return text.replace(str(root), "")

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
        cfg = attrs.evolve(cfg, usd_dir=str(scratch / "out"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                converter = converter_for(kind)(cfg)
            except (ConfigError, ConversionError, ValueError) as exc:
                return {"error": unroot(str(exc)), "worker": worker}
        for other in caught:  # not a conversion's: as the worker's Python would have shown it
            if not issubclass(other.category, ConversionWarning):
                warnings.warn_explicit(other.message, other.category, other.filename, other.lineno)
        out = Path(converter.usd_dir)
        key = read_key(out / key_file_name(converter.usd_file_name))
        if key is None:
            raise RuntimeError(f"the conversion wrote no lazy key in {out}")
        return {"outputs": {name: (out / name).read_bytes() for name in key.outputs},
                "warnings": list(dict.fromkeys(unroot(str(w.message)) for w in caught
                                               if issubclass(w.category, ConversionWarning))),
                "worker": worker, "seconds": time.perf_counter() - start}
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
    """The cfg with its source and ROS package folders moved under ``root``."""
    import attrs

    changes: dict[str, Any] = {"asset_path": str(_reroot(root, cfg.asset_path))}
    if getattr(cfg, "ros_package_paths", None):
        changes["ros_package_paths"] = []
        for item in cfg.ros_package_paths:
            folder = _reroot(root, os.path.abspath(item["path"]))
            folder.mkdir(parents=True, exist_ok=True)  # a package none of whose files are referenced
            changes["ros_package_paths"].append({"name": item["name"], "path": str(folder)})
    return attrs.evolve(cfg, **changes)
