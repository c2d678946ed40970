"""doit task generators: one ``convert:<name>`` subtask per library entry.

Load time (every ``doit`` run, also a no-op one) only reads the manifest and computes config digests: no
source is parsed and pxr is never imported in the doit process. Each conversion has a ``scan:<name>``
``calc_dep`` task that finds the files the source references; doit caches its result, and re-runs it
only when the source or a referenced file changes. Actions are module-level functions with plain
arguments, so they survive spawn-based ``doit -n``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

from doit.exceptions import TaskFailed
from doit.tools import config_changed

from usdforge.pipeline.fingerprint import file_digest
from usdforge.pipeline.task_specs import MANIFEST_ERROR_DOC, task_specs

#: The manifest ``doit convert`` reads unless ``library=PATH`` is given on the command line.
DEFAULT_LIBRARY = Path("assets/library.toml")
#: Outputs go to ``<build>/usd/<name>/``; doit's state and caches live in the build folder too.
DEFAULT_BUILD_DIR = Path("build")


def scan_references(kind: str, source: str, packages: dict[str, str]) -> dict[str, Any]:
    """doit calc_dep action: ``file_dep`` = referenced files that exist; ``scanned`` = their stamps."""
    from usdforge.pipeline.references import referenced_files
    from usdforge.rules.errors import ConversionError
    from usdforge.schemas import ConfigError

    try:
        found = referenced_files(kind, source, packages)
    except (ConversionError, ConfigError, OSError) as exc:
        return {"file_dep": [], "scanned": {}, "scan_error": str(exc)}
    return {"file_dep": [p for p in found if os.path.isfile(p)], "scanned": {p: _stamp(p) for p in found}}


def _stamp(path: str) -> list[Any]:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return [0, -1, "missing"]
    return [stat.st_mtime_ns, stat.st_size, file_digest(path)]


def references_unchanged(task: Any, values: dict[str, Any]) -> bool:
    """doit uptodate check of a scan task: every file it found (or found missing) is as it was.

    A referenced file can add references (an MJCF include, an OBJ's MTL), so the scan re-runs when one
    changes. Contents are hashed only when the modification time or size moved.
    """
    scanned = values.get("scanned")
    if scanned is None:
        return False
    for path, (mtime, size, sha) in scanned.items():
        current = _stamp_fast(path)
        if current[:2] == [mtime, size]:
            continue
        if (file_digest(path) if current[1] >= 0 else "missing") != sha:
            return False
    return True


def _stamp_fast(path: str) -> list[int]:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return [0, -1]
    return [stat.st_mtime_ns, stat.st_size]


def outputs_intact(task: Any, values: dict[str, Any]) -> bool:
    """doit uptodate check: the outputs are as the last conversion wrote them (doit itself only checks
    that targets exist, so a hand-edited or truncated output would otherwise never be rebuilt).

    The conversion saved each output's stamp in doit's state; contents are hashed only when a
    modification time or size moved, so a no-op run reads no output.
    """
    outputs = values.get("outputs")
    if not outputs:
        return False
    for path, (mtime, size, sha) in outputs.items():
        current = _stamp_fast(path)
        if current == [mtime, size]:
            continue
        if current[1] < 0 or file_digest(path) != sha:
            return False
    return True


def run_conversion(kind: str, cfg_json: str) -> dict[str, str] | TaskFailed:
    """doit action: convert one entry through the lazy Python API (same key, same digest)."""
    from usdforge.pipeline.converters import converter_for
    from usdforge.pipeline.kinds import cfg_class
    from usdforge.rules.errors import ConversionError
    from usdforge.schemas import ConfigError, cfg_from_json

    try:
        converter = converter_for(kind)(cfg_from_json(cfg_json, cfg_class(kind)))
    except (ConfigError, ConversionError, ValueError) as exc:
        return TaskFailed(str(exc))
    from usdforge.pipeline.lazy import read_key
    from usdforge.rules.outputs import key_file_name

    usd_dir = Path(converter.usd_dir)
    key_path = usd_dir / key_file_name(converter.usd_file_name)
    key = read_key(key_path)
    written = [key_path, *(usd_dir / name for name in (key.outputs if key else {}))]
    return {"usd_path": converter.usd_path, "outputs": {str(p): _stamp(str(p)) for p in written}}


def report_error(message: str) -> TaskFailed:
    """doit action for an entry that cannot even be configured: fail with its one-line message."""
    return TaskFailed(message)


def convert_tasks(library_path: str | Path = DEFAULT_LIBRARY, build_dir: str | Path = DEFAULT_BUILD_DIR,
                  options: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """The ``convert`` (and ``scan``) subtasks for every entry of the manifest at ``library_path``.

    options: from ``pipeline.distributed.build_options``: ``scheduler``/``workers`` run each conversion on
    Dask, ``shard=(i, n)`` keeps the entries of shard i of n. None: every entry, converted here.
    """
    options = options or {}
    if options.get("error"):
        yield {"basename": "convert", "name": "options", "actions": [(report_error, [options["error"]])],
               "doc": "the command line has an error", "verbosity": 2}
        return
    shard = options.get("shard")
    if shard:
        from usdforge.pipeline.distributed import shard_of
    for spec in task_specs(library_path, build_dir):
        manifest_error = "error" in spec and "kind" not in spec and spec["doc"] == MANIFEST_ERROR_DOC
        if shard and not manifest_error and shard_of(spec["name"], shard[1]) != shard[0]:
            continue  # another shard's entry (a broken manifest fails every shard)
        if "error" in spec:
            yield {"basename": "convert", "name": spec["name"], "actions": [(report_error, [spec["error"]])],
                   "doc": spec["doc"], "verbosity": 2}
            continue
        name = spec["name"]
        yield {"basename": "scan", "name": name, "file_dep": [spec["source"]],
               "actions": [(scan_references, [spec["kind"], spec["source"], spec["packages"]])],
               "uptodate": [references_unchanged], "doc": f"find the files {name}'s source references",
               "verbosity": 0}
        yield {
            "basename": "convert", "name": name, "doc": spec["doc"],
            "file_dep": [spec["source"]], "calc_dep": [f"scan:{name}"],
            "uptodate": [config_changed(spec["digest"]), outputs_intact],
            "targets": spec["targets"], "clean": True,
            "actions": [_conversion_action(name, spec, options)],
        }


def _conversion_action(name: str, spec: dict[str, Any], options: dict[str, Any]) -> tuple:
    if options.get("scheduler") or options.get("workers"):
        from usdforge.pipeline.distributed import run_on_cluster

        return (run_on_cluster, [name, spec["kind"], spec["cfg_json"], options])
    return (run_conversion, [spec["kind"], spec["cfg_json"]])


def run_ik_report(usd_path: str, ee_body: str, report_path: str, settings: dict[str, Any]) -> dict | TaskFailed:
    """doit action: solve the entry's seeded IK study and write its JSON report atomically."""
    import json

    try:
        from usdforge.solvers import ik_report

        report = ik_report(usd_path, ee_body, **settings)
    except (ValueError, KeyError) as exc:
        return TaskFailed(f"{usd_path}: IK study for ee_body {ee_body!r}: {exc}")
    report = {"usd_path": usd_path, "ee_body": ee_body, "settings": settings, **report}
    staging = Path(report_path + f".tmp-{os.getpid()}")
    staging.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    os.replace(staging, report_path)
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
            "file_dep": usd_files, "targets": [report], "clean": True,
            "uptodate": [config_changed({"ee_body": spec["ee_body"], **settings})],
            "actions": [(run_ik_report, [spec["usd_path"], spec["ee_body"], report, settings])],
        }
