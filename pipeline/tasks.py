"""doit task generators: one ``convert:<name>`` subtask per library entry.

Load time (every ``doit`` run, also a no-op one) only reads the manifest and computes config digests: no
source is parsed and pxr is never imported in the doit process. A conversion is up to date when what its
outputs depend on (``pipeline.content_key``: the entry's settings and source path, ``entry_digest``;
usdforge's code and the byte-shaping libraries; the source and every file it references, found by the
conversion itself) and its outputs are as the last run left them (``built_unchanged``): paths relative to
the library and output folders, contents deciding (a stat stamp stands in for a hash only as git's index
allows, ``pipeline.fingerprint``), so a moved or cloned checkout converts nothing; when doit does run one,
the Python API's content-keyed lazy check and the build cache (``pipeline.cache``) still restore instead
of converting whatever they can. A build takes the build folder's lock (``lock_build_folder``): another
library is never built into it at the same time. Actions are module-level functions with plain
arguments, so they survive spawn-based ``doit -n``.
"""

from __future__ import annotations

import inspect
import os
import uuid
from pathlib import Path
from typing import Any, Iterator

from doit.exceptions import TaskFailed
from doit.tools import config_changed

from usdforge.pipeline.atomic import write_text_atomically
from usdforge.pipeline.fingerprint import file_digest, file_stamp, settled, stamped_digest
from usdforge.pipeline.references import absolute_location
from usdforge.pipeline.task_specs import MANIFEST_ERROR_DOC, task_specs

#: The manifest ``doit convert`` reads unless ``library=PATH`` is given on the command line.
DEFAULT_LIBRARY = Path("assets/library.toml")
#: Outputs go to ``<build>/usd/<name>/``; doit's state and caches live in the build folder too.
DEFAULT_BUILD_DIR = Path("build")


def _stamp(path: str, known: str | None = None) -> list[Any]:
    """[SHA-256 or "missing", ``fingerprint.file_stamp`` or None] of a file; the stamp only when it may be
    trusted later (``fingerprint.settled``: the file last changed before the window of the clock's tick).

    known: the file's digest, already taken of these very bytes while the file had a settled stamp (a
    conversion's ``known_digest``)."""
    if known is not None:
        stamp = file_stamp(path)
        return [known, stamp if settled(stamp) else None]
    if file_stamp(path) is None:
        return ["missing" if not os.path.lexists(path) else file_digest(path), None]
    return list(stamped_digest(path))


#: ``<build>/.usdforge-code-stamps.json``: the settled stamps of usdforge's code files (``_tools``), {absolute
#: path: [sha, stamp]}, so a no-op stats them instead of hashing them. (An entry's own files' stamps are
#: learnt into its doit values: ``_unchanged``.)
_LEARNT_NAME = ".usdforge-code-stamps.json"
#: What an older usdforge kept here, every output's learnt stamp too (megabytes at 10,000 entries): removed.
_OLD_LEARNT_NAME = ".usdforge-stamps.json"
_LEARNT: dict[str, dict[str, list[Any]]] = {}  # learnt file → its stamps
_LEARNT_CHANGED: set[str] = set()


def _learnt(build_dir: str) -> dict[str, list[Any]]:
    path = os.path.join(build_dir, _LEARNT_NAME)
    if path not in _LEARNT:
        import atexit
        import json

        try:
            with open(path, encoding="utf-8") as stream:
                _LEARNT[path] = dict(json.load(stream))
        except (OSError, ValueError, TypeError):
            _LEARNT[path] = {}
        if len(_LEARNT) == 1:
            atexit.register(_save_learnt)
    return _LEARNT[path]


def _save_learnt() -> None:
    """Write the stamps learnt by this process (at its exit; a lost write only means hashing again)."""
    import json

    for path in _LEARNT_CHANGED:
        kept = {name: value for name, value in _LEARNT[path].items() if os.path.lexists(name)}
        try:
            write_text_atomically(Path(path), json.dumps(kept))
            Path(path).with_name(_OLD_LEARNT_NAME).unlink(missing_ok=True)
        except OSError:
            pass  # a lost write only means hashing the code files again at the next run


_TOOLS: dict[tuple[str, str], str] = {}


def _tools(kind: str, build_dir: str) -> str:
    """``code_version.tools_digest(kind)``, once per process, each code file known by a settled stamp
    learnt in the build folder (as ``_unchanged`` learns outputs') instead of read at every no-op."""
    if (kind, build_dir) not in _TOOLS:
        from usdforge.pipeline.code_version import tools_digest

        learnt = _learnt(build_dir)

        def digest(path: Path) -> str:
            name = str(path)
            known = learnt.get(name)
            if isinstance(known, list) and len(known) == 2 and known[1] is not None and file_stamp(name) == known[1]:
                return known[0]
            sha, stamp = stamped_digest(name)
            if stamp is not None:
                learnt[name] = [sha, stamp]
                _LEARNT_CHANGED.add(os.path.join(build_dir, _LEARNT_NAME))
            return sha

        _TOOLS[(kind, build_dir)] = tools_digest(kind, digest)
    return _TOOLS[(kind, build_dir)]


def _unchanged(stamps: dict[str, list[Any]], base: str) -> bool | None:
    """Every file (relative to ``base``) still has the content recorded: by its stamp (size, modification
    and change times, inode, device: ``fingerprint.unchanged``) where one was recorded and still holds,
    else by hashing it (a clone, a moved checkout, a racily-clean file, a restored modification time).

    A file recorded without a stamp (racily clean: written or changed just before it was hashed) that
    hashes to its recorded content gets the stamp it has now, when settled, written into ``stamps`` (as
    git refreshes its index): later checks need not hash it again. Returns False (changed), True
    (unchanged) or None (unchanged, and ``stamps`` learnt a stamp: the caller saves them)."""
    learnt = False
    for relative, recorded in stamps.items():
        if not isinstance(recorded, list) or len(recorded) != 2:
            return False  # recorded by an older usdforge
        sha, stamp = recorded
        # os.path.join's answer (base is absolute; a relative name never starts with "/" unless the state
        # was edited), at a fraction of its cost: a no-op joins four names per entry.
        path = f"{base}/{relative}" if relative[:1] != "/" else os.path.join(base, relative)
        if sha == "missing":
            if os.path.lexists(path):
                return False
            continue
        if stamp is not None:
            if file_stamp(path) != stamp and file_digest(path) != sha:  # fingerprint.unchanged, inlined
                return False
            continue
        digest, now = stamped_digest(path)
        if digest != sha:
            return False
        if now is not None:
            stamps[relative] = [sha, now]
            learnt = True
    return None if learnt else True


def die_with_parent() -> None:
    """In a ``doit -n N`` worker process: ask Linux to kill this process when its parent dies, so a
    ``kill -9`` of doit leaves no worker writing outputs (the next build removes what it left). A no-op in
    the main process and on other systems."""
    import multiprocessing
    import sys

    if multiprocessing.parent_process() is None or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    # Ctrl-C reaches every process of the terminal's group: the parent reports it in one line and its
    # death ends this worker; a worker's own KeyboardInterrupt would print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if multiprocessing.parent_process().pid != os.getppid():  # the parent died before prctl
        os._exit(1)


def clean_outputs(usd_dir: str, key_path: str, targets: list[str]) -> None:
    """doit clean action: remove every file the last conversion wrote (as its lazy key lists them: copied
    textures included), the key, ``targets`` (the planned outputs and the entry's failure record),
    temporary folders of killed conversions, and the folders left empty."""
    import shutil

    from usdforge.pipeline.atomic import staging_prefix
    from usdforge.pipeline.lazy import read_key

    folder = Path(usd_dir)
    key = read_key(Path(key_path))
    # The record of the last conversion (<stem>.convert.json) is named after the key's stem.
    record = Path(key_path).with_name(Path(key_path).name.removesuffix(".usdforge.toml") + ".convert.json")
    from usdforge.pipeline.cache import unsafe_file_name

    # Only names inside the output folder: the key is a file on disk, not a list of paths to trust.
    for path in [*(folder / name for name in (key.outputs if key else {}) if unsafe_file_name(name) is None),
                 Path(key_path), record, *map(Path, targets)]:
        if path.is_file() or path.is_symlink():
            path.unlink()
            print(f"removed {path}")
    if folder.parent.is_dir():
        for stale in folder.parent.glob(f"{staging_prefix(folder)}*"):
            shutil.rmtree(stale, ignore_errors=True)
    if folder.is_dir():
        for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            if not any(sub.iterdir()):
                sub.rmdir()
        if not any(folder.iterdir()):
            folder.rmdir()


def built_unchanged(task: Any, values: dict[str, Any], root: str, usd_dir: str, kind: str, source: str,
                    packages: dict[str, str]) -> bool:
    """doit uptodate check of a conversion, beside ``config_changed(content_key.entry_digest)`` (the
    entry's settings and source path): the code and byte-shaping libraries are those of the last run
    (``code_version.tools_digest``), its inputs (the source and every file it references, relative to
    the library's folder ``root``) and its outputs (relative to ``usd_dir``) are as the last run left
    them, and, when its outputs name where the source is (a xacro's ``$(cwd)``), the source has not moved.
    The same definition as the cache key's (``pipeline.content_key``). doit itself only checks that
    targets exist, so a hand-edited or truncated output would otherwise never be rebuilt; and doit's own
    file_dep would key them by absolute path, so a moved checkout would re-run. Paths are relative and
    contents decide, so a moved or cloned checkout is up to date.

    A referenced file can add references (an MJCF include, an OBJ's MTL): it changed, so the conversion
    runs and finds them. Values saved by an older usdforge (no inputs) are out of date.
    """
    inputs, outputs = values.get("inputs"), values.get("outputs")
    if not inputs or not outputs:
        return False
    build_dir = usd_dir.rsplit("/", 2)[0]  # usd_dir: <build>/usd/<name>, absolute and normal (task_specs)
    if values.get("tools") != _tools(kind, build_dir):
        return False
    if values.get("location") and values["location"] != absolute_location(source, packages):
        return False
    same_inputs = _unchanged(inputs, root)
    if same_inputs is False:
        return False
    same_outputs = _unchanged(outputs, usd_dir)
    if same_outputs is False:
        return False
    if None in (same_inputs, same_outputs) and task is not None:
        _save_values(task.name, values)
    return True


def _save_values(task_name: str, values: dict[str, Any]) -> None:
    """Keep the stamps an up-to-date check learnt (``_unchanged``) in the task's doit values: doit saves
    values only for tasks it runs, so they are set in its state directly (the run's dependency manager,
    written once at the run's end)."""
    from doit.globals import Globals

    if Globals.dep_manager is not None:
        Globals.dep_manager._set(task_name, "_values_:", values)


def convert_up_to_date(task: Any, values: dict[str, Any], digest: str, root: str, usd_dir: str, kind: str,
                       source: str, packages: dict[str, str]) -> bool:
    """doit uptodate check of a conversion: ``doit.tools.config_changed(digest)`` (the entry's settings and
    source path, ``content_key.entry_digest``; saved under the same name, so a build folder of an older
    usdforge stays up to date) and ``built_unchanged``, in one call (doit inspects each uptodate
    callable's signature per task: this one's is computed once, below)."""
    task.value_savers.append(lambda: {"_config_changed": digest})
    if values.get("_config_changed") != digest:
        return False
    return built_unchanged(task, values, root, usd_dir, kind, source, packages)


# doit calls inspect.signature on every uptodate callable of every task (to pass `task` and `values`): with
# the signature stored, that is an attribute read instead of ~30 µs per task of a no-op.
convert_up_to_date.__signature__ = inspect.signature(convert_up_to_date)  # type: ignore[attr-defined]


def in_output_folder(usd_dir: str, cfg_json: str, action: Any, args: list[Any]) -> Any:
    """doit action: ``action(*args)`` when the cfg writes into ``usd_dir`` (the entry's own folder, as
    ``task_specs`` names it): a hand-edited spec cache cannot make a conversion write elsewhere."""
    import json

    try:
        folder = json.loads(cfg_json)["usd_dir"]
    except (ValueError, KeyError, TypeError):
        folder = None
    if not isinstance(folder, str) or os.path.abspath(folder) != usd_dir:
        return TaskFailed(f"{usd_dir}: the cached task spec names another output folder ({folder!r}); "
                          f"delete the build folder's task-specs/ and build again")
    result = action(*args)
    if isinstance(result, dict):  # doit keeps these values of every entry: only what built_unchanged reads
        return {key: result[key] for key in STATE_KEYS if key in result}
    return result


#: What doit keeps of a conversion's result (its values, read by ``built_unchanged``), and loads and writes
#: back at every run.
STATE_KEYS = ("tools", "location", "inputs", "outputs")


def run_conversion(kind: str, cfg_json: str, cache: str | None, root: str) -> dict[str, Any] | TaskFailed:
    """doit action: convert one entry through the lazy Python API (same key, same digest, same cache);
    save the stamps of its inputs and outputs for ``built_unchanged``. Warnings are printed as the CLI
    prints them (``usdforge: warning: …``, one line each).

    cache: the cache folder, or None for no cache. root: the library's folder.
    """
    import warnings

    from usdforge.pipeline.cli import show_warning

    die_with_parent()
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show_warning
        return _run_conversion(kind, cfg_json, cache, root)


def _run_conversion(kind: str, cfg_json: str, cache: Any, root: str,
                    seconds: float | None = None) -> dict[str, Any] | TaskFailed:
    """``run_conversion`` without its warning set-up. cache: a folder, a ``pipeline.cache.Store`` (a cluster
    build's, serving what a Dask worker converted) or None. seconds: the conversion's wall time for the
    record when it ran elsewhere (a Dask worker); None: this call's."""
    from usdforge.pipeline.converters import converter_for
    from usdforge.pipeline.kinds import cfg_class
    from usdforge.rules.errors import ConversionError
    from usdforge.schemas import ConfigError, cfg_from_json

    from usdforge.pipeline.conversion_record import recording

    if kind == "mjcf":  # workers compile each model once: MuJoCo's asset cache would only hold memory
        from usdforge.rules.mjcf.load import disable_asset_cache

        disable_asset_cache()
    try:
        with recording() as record:  # wall time and warnings, for `doit report`
            converter = converter_for(kind)(cfg_from_json(cfg_json, cfg_class(kind)),
                                            cache=cache if cache is not None else False)
    except (ConfigError, ConversionError, ValueError) as exc:
        return TaskFailed(str(exc))
    from usdforge.rules.outputs import key_file_name

    usd_dir = Path(converter.usd_dir)
    key_name = key_file_name(converter.usd_file_name)
    key = converter.lazy_key  # the key file's contents: not read back
    outputs = [key_name, *(key.outputs if key else {})]
    if seconds is not None:
        record.seconds, record.cpu_seconds = seconds, None  # converted on a worker: its CPU time is not known here
    record.save(usd_dir, converter.usd_file_name, usd_dir / key_name)
    # Digests already taken are not taken again: the inputs' when unchanged since the conversion hashed
    # them, the outputs' when this call wrote them (the key records their digests).
    written = dict(key.outputs) if key is not None and converter.converted else {}
    from usdforge.pipeline.code_version import tools_digest

    return {"usd_path": converter.usd_path, "converted": converter.converted and not converter.restored,
            "restored": converter.restored, "tools": tools_digest(kind),
            "location": key.location if key is not None else {},
            "inputs": {os.path.relpath(p, root): _stamp(str(p), converter.known_digest(p)) for p in converter.inputs},
            "outputs": {name: _stamp(str(usd_dir / name), written.get(name)) for name in outputs}}


#: The lock file of a build folder (``lock_build_folder``), and the descriptor holding it in this process.
LOCK_NAME = ".usdforge.lock"
_HELD: dict[str, int] = {}


def lock_build_folder(build_dir: str | Path, library_path: str | Path) -> str | None:
    """Take the build folder for the library at ``library_path`` until this process ends: one build
    folder holds one library's state (doit's, the conversion records, the outputs). Builds of the same
    library may share it (their outputs are written atomically and are the same); a build of another
    library is refused while one runs. Returns None, or the one-line refusal naming the other library.

    A shared advisory lock (``fcntl.flock``) on ``<build_dir>/.usdforge.lock``, which names the library of
    its holders, taken under a short exclusive lock on ``.usdforge.lock.meta``; the kernel releases both
    when a holder ends, however it ends (``kill -9`` too). One after the other, two libraries may use the
    folder: each entry's up-to-date check compares its own source path, settings and contents, so
    switching rebuilds what differs."""
    try:
        import fcntl
    except ImportError:  # not on a POSIX system: no lock
        return None
    folder = os.path.abspath(build_dir)
    manifest = os.path.abspath(library_path)
    if folder in _HELD:
        return None
    os.makedirs(folder, exist_ok=True)
    meta = os.open(os.path.join(folder, LOCK_NAME + ".meta"), os.O_RDWR | os.O_CREAT, 0o644)
    descriptor = os.open(os.path.join(folder, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(meta, fcntl.LOCK_EX)  # one process at a time decides, for a moment
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(descriptor, 0)  # no build runs: the folder is this library's
            os.pwrite(descriptor, manifest.encode(), 0)
        except BlockingIOError:
            holder = os.pread(descriptor, 4096, 0).decode(errors="replace").strip()
            if holder != manifest:
                os.close(descriptor)
                return (f"{folder}: a build of the library {holder} is running in this build folder; wait for "
                        f"it to end, or build {manifest} into another folder (doit -d DIR)")
        fcntl.flock(descriptor, fcntl.LOCK_SH)
    finally:
        os.close(meta)  # releases the exclusive lock on it
    _HELD[folder] = descriptor
    return None


def report_error(message: str) -> TaskFailed:
    """doit action for an entry that cannot even be configured: fail with its one-line message."""
    return TaskFailed(message)


def failure_path(build_dir: str | Path, name: str) -> Path:
    """``<build>/failed/<name>.txt``: the one-line error of the entry's last conversion, while it fails
    (``doit report`` shows it)."""
    return Path(build_dir) / "failed" / f"{name}.txt"


def recording_failure(failure: str, action: Any, args: list[Any]) -> Any:
    """doit action: ``action(*args)``, keeping its failure's one line in ``failure`` (removed once it
    succeeds), so the report names why an entry is missing even though doit does not run it again."""
    try:
        result = action(*args)
    except Exception as exc:
        _write_failure(failure, f"{type(exc).__name__}: {exc}")
        raise
    if isinstance(result, TaskFailed):
        _write_failure(failure, str(result.message))
    else:
        Path(failure).unlink(missing_ok=True)
    return result


def _write_failure(failure: str, message: str) -> None:
    path = Path(failure)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, " ".join(message.split()) + "\n")


#: The entries that have a ``convert:<name>`` task in this run (``convert_tasks`` fills it).
_CONVERT_TASKS: set[str] = set()


def convert_task_dep(name: str) -> list[str]:
    """The ``task_dep`` of a task that reads entry ``name``'s outputs: ``convert:<name>`` when this run has
    that task (not: another shard's entry, a build folder in use, a command-line error; doit would refuse
    a task_dep on a task that does not exist). Convert tasks name no doit targets (``built_unchanged``
    checks them), so the dependency is stated, not found through a file_dep."""
    return [f"convert:{name}"] if name in _CONVERT_TASKS else []


def convert_tasks(library_path: str | Path = DEFAULT_LIBRARY, build_dir: str | Path = DEFAULT_BUILD_DIR,
                  cache: str | None = None, options: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """The ``convert`` subtasks for every entry of the manifest at ``library_path``.

    cache: the build cache folder; None: ``$USDFORGE_CACHE``, else ``<build_dir>/cache`` ("off": none).
    options: from ``pipeline.distributed.build_options``: ``scheduler``/``workers`` run each conversion on
    Dask, ``shard=(i, n)`` keeps the entries of shard i of n. None: every entry, converted here.
    """
    from usdforge.pipeline.cache import BUILD_ENV, default_cache_dir

    options = options or {}
    _CONVERT_TASKS.clear()
    _BASES.clear()
    if options.get("error"):
        yield {"basename": "convert", "name": "options", "actions": [(report_error, [options["error"]])],
               "doc": "the command line has an error", "verbosity": 2}
        return
    refused = lock_build_folder(build_dir, library_path)
    if refused:
        yield {"basename": "convert", "name": "lock", "actions": [(report_error, [refused])],
               "doc": "the build folder is in use by another library", "verbosity": 2}
        return
    shard = options.get("shard")
    if shard:
        from usdforge.pipeline.distributed import shard_of
    os.environ.setdefault(BUILD_ENV, uuid.uuid4().hex[:12])  # one build for the cache's statistics
    if cache is None:
        folder = default_cache_dir(build_dir)
        cache = None if folder is None else str(folder)
    elif cache.strip().lower() in ("", "off", "none", "0"):
        cache = None
    else:
        cache = str(Path(cache).absolute())
    failed = os.path.join(build_dir, "failed", "")  # failure_path, without a Path per entry
    sources: dict[str, bool] = {}  # source → a regular file (many entries may share one)
    for spec in task_specs(library_path, build_dir):
        manifest_error = "error" in spec and "kind" not in spec and spec["doc"] == MANIFEST_ERROR_DOC
        if shard and not manifest_error and shard_of(spec["name"], shard[1]) != shard[0]:
            continue  # another shard's entry (a broken manifest fails every shard)
        failure = f"{failed}{spec['name']}.txt"
        if "error" in spec:
            yield {"basename": "convert", "name": spec["name"], "doc": spec["doc"], "verbosity": 2,
                   "actions": [(recording_failure, [failure, report_error, [spec["error"]]])]}
            continue
        name = spec["name"]
        source = spec["source"]
        if source not in sources:
            sources[source] = os.path.isfile(source)
        if not sources[source]:  # one usdforge line naming the entry, nothing converted
            yield {"basename": "convert", "name": name, "doc": spec["doc"], "verbosity": 2,
                   "actions": [(recording_failure, [failure, report_error, [
                       f"{spec['source']}: source of library entry '{name}' not found"
                       if not os.path.lexists(spec["source"]) else
                       f"{spec['source']}: source of library entry '{name}' is not a regular file"]])]}
            continue
        _CONVERT_TASKS.add(name)
        _BASES[f"convert:{name}"] = (spec["root"], spec["usd_dir"])
        yield {
            "basename": "convert", "name": name, "doc": spec["doc"],
            "uptodate": [(convert_up_to_date, [spec["digest"], spec["root"], spec["usd_dir"], spec["kind"],
                                               source, spec["packages"]], {})],
            # No doit targets: built_unchanged checks every output (doit would stat each again), and the
            # tasks that read them (verify, thumbnail, ik) name convert:<name> in their task_dep.
            "clean": [(clean_outputs, [spec["usd_dir"], spec["key_path"], [*spec["targets"], failure]])],
            "actions": [(recording_failure, [failure, in_output_folder, [spec["usd_dir"], spec["cfg_json"],
                                                                         *_conversion_action(spec, cache, options)]]),
                        (no_result, [])],
        }


def no_result() -> None:
    """doit action after a conversion: the task's result is this action's (None), so doit keeps the
    conversion's dict once, as the task's values (``built_unchanged`` reads them), and not a second time
    as its ``result:`` (which nothing reads: half the state a no-op loads and writes)."""


def _conversion_action(spec: dict[str, Any], cache: str | None, options: dict[str, Any]) -> tuple:
    if options.get("scheduler") or options.get("workers"):
        from usdforge.pipeline.distributed import run_on_cluster

        return (run_on_cluster, [spec["name"], spec["kind"], spec["cfg_json"], cache, spec["root"], options])
    return (run_conversion, [spec["kind"], spec["cfg_json"], cache, spec["root"]])


def run_ik_report(usd_path: str, ee_body: str, report_path: str, settings: dict[str, Any]) -> dict | TaskFailed:
    """doit action: solve the entry's seeded IK study and write its JSON report atomically."""
    import json

    try:
        from usdforge.solvers import ik_report

        report = ik_report(usd_path, ee_body, **settings)
    except (ValueError, KeyError) as exc:
        return TaskFailed(f"{usd_path}: IK study for ee_body {ee_body!r}: {exc}")
    report = {"usd_path": usd_path, "ee_body": ee_body, "settings": settings, **report}
    write_text_atomically(Path(report_path), json.dumps(report, indent=2, sort_keys=True) + "\n")
    return {}


def ik_tasks(library_path: str | Path = DEFAULT_LIBRARY,
             build_dir: str | Path = DEFAULT_BUILD_DIR) -> Iterator[dict[str, Any]]:
    """One ``ik:<name>`` subtask per entry that names an ``ee_body``: the report ``<stem>.ik.json`` next
    to the USD, re-run only when the USD or the study's settings change."""
    for spec in task_specs(library_path, build_dir):
        if "error" in spec or not spec.get("ee_body"):
            continue
        usd_files = [t for t in spec["targets"] if not t.endswith(".usdforge.toml")]
        report = spec["usd_path"].rsplit(".", 1)[0] + ".ik.json"
        settings = spec["ik"]
        yield {
            "basename": "ik", "name": spec["name"], "doc": f"IK study of {spec['name']} ({spec['ee_body']})",
            "file_dep": usd_files, "task_dep": convert_task_dep(spec["name"]), "targets": [report], "clean": True,
            "uptodate": [config_changed({"ee_body": spec["ee_body"], **settings})],
            "actions": [(run_ik_report, [spec["usd_path"], spec["ee_body"], report, settings])],
        }


class CompactJSONCodec:
    """doit's codec of its state (``DOIT_CONFIG["codec_cls"]``): JSON, as doit's own ``JSONCodec`` writes it
    but without spaces after separators (the state of 10,000 entries is 10 % smaller), and a run that
    changed nothing (a no-op) writes back the text it read instead of encoding the whole state again.

    doit's json backend holds the state as {task: {key: value}} and changes it only through its
    ``set``/``remove``/``remove_all`` (``d[task] = {}``, ``d[task][key] = value``, ``del d[task]``, a new
    dict): the dicts ``decode`` returns note any such change that is one (doit sets the group task's
    values at every run, equal to those it holds)."""

    def __init__(self) -> None:
        import json

        from doit.dependency import JsonDB

        # doit's JsonDB.dump truncates the state file, then writes it: a build killed meanwhile, or two
        # builds of one library ending together (the shorter state written over the longer one's head),
        # left a state that no later build could load (a traceback, nothing built). Written atomically.
        JsonDB.dump = _dump_atomically  # type: ignore[method-assign]
        self.encoder = json.JSONEncoder(separators=(",", ":"), check_circular=False)
        self.decoder = json.JSONDecoder()
        self._read: tuple[dict[str, Any], str] | None = None  # (the state decoded, its text)
        self._changed: list[bool] = []  # one item once the state decoded has changed

    def unchanged(self, data: Any) -> bool:
        """Whether ``data`` is the state this codec decoded, unchanged since (its text is what was read)."""
        return self._read is not None and data is self._read[0] and not self._changed

    def encode(self, data: Any) -> str:
        if self.unchanged(data):
            return self._read[1]
        return self.encoder.encode(data)

    def decode(self, data: str) -> Any:
        try:
            value = self.decoder.decode(data)
        except ValueError:  # written by an older usdforge (not atomically) and torn: start afresh
            import sys

            sys.stderr.write("usdforge: warning: doit's state (.doit.db) is damaged: every entry is "
                             "checked again\n")
            value, data = {}, "{}"
            self._changed.append(True)  # the damaged file is replaced, even by a run that changes nothing
        if type(value) is not dict:
            return value
        changed = self._changed

        class Noting(dict):
            """A dict that notes any change made to it (the ones doit's backends make)."""

            def __setitem__(self, key: Any, item: Any) -> None:
                # Another object equal to the one held, as JSON, changes nothing (doit saves the `convert`
                # group task's empty values and file_dep tuple at every run); the very object held may
                # have been changed in place.
                if key not in self or self[key] is item or \
                        self[key] != (list(item) if type(item) is tuple else item):
                    changed.append(True)
                super().__setitem__(key, item)

            def __delitem__(self, key: Any) -> None:
                changed.append(True)
                super().__delitem__(key)

            def _note(name: str) -> Any:  # type: ignore[misc]
                def method(self: dict, *args: Any, **kwargs: Any) -> Any:
                    changed.append(True)
                    return getattr(dict, name)(self, *args, **kwargs)
                return method

            pop, popitem, clear, update, setdefault = map(_note, ("pop", "popitem", "clear", "update", "setdefault"))

        state = Noting((task, Noting(entry) if type(entry) is dict else entry) for task, entry in value.items())
        self._read = (state, data)
        return state


def _dump_atomically(db: Any) -> None:
    """doit's ``JsonDB.dump`` (``db``: the backend, its state ``_db`` and file ``name``), through a temporary
    sibling renamed into place: a reader sees the whole of one writer's state, never a torn one. A run that
    changed nothing in the state it read (a no-op) writes nothing: the file holds that state already."""
    codec = db.codec
    if isinstance(codec, CompactJSONCodec) and codec.unchanged(db._db) and os.path.isfile(db.name):
        return
    _settle_stamps(db._db)
    write_text_atomically(Path(db.name), codec.encode(db._db))


#: {``convert:<name>``: (library folder, output folder)} of this run's convert tasks (``_settle_stamps``).
_BASES: dict[str, tuple[str, str]] = {}


def _settle_stamps(state: dict[str, Any]) -> None:
    """Before doit's state is written: the stamps of the files this run's conversions recorded without one
    (written, or changed, just before they were hashed: every output a conversion writes) that have
    settled since, learnt as an up-to-date check learns them (``_unchanged``: hashed once more), so the
    next no-op stats those files instead of hashing them: 300,000 files after a cold build of 100,000
    entries, about three times a no-op's time. A file changed since it was recorded keeps no stamp (the
    next check finds the change)."""
    for name, (root, usd_dir) in _BASES.items():
        entry = state.get(name)
        values = entry.get("_values_:") if isinstance(entry, dict) else None
        if type(values) is not dict:
            continue
        for stamps, base in ((values.get("inputs"), root), (values.get("outputs"), usd_dir)):
            if type(stamps) is dict and any(type(item) is list and len(item) == 2 and item[1] is None
                                            for item in stamps.values()):
                _unchanged(stamps, base)
