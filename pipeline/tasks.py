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

from pipeline.fingerprint import file_digest, normalise
from pipeline.manifest import DEFAULT_BUILD_DIR, entry_cfg, entry_kind, entry_source, load_library
from pipeline.references import referenced_files
from rules.errors import ConversionError
from rules.outputs import key_file_name, planned_outputs
from schemas import ConfigError, cfg_to_json, config_digest

#: The manifest ``doit convert`` reads unless ``library=PATH`` is given on the command line.
DEFAULT_LIBRARY = Path("assets/library.toml")


def scan_references(kind: str, source: str, packages: dict[str, str]) -> dict[str, Any]:
    """doit calc_dep action: ``file_dep`` = referenced files that exist; ``scanned`` = their stamps."""
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


def outputs_intact(key_path: str) -> bool:
    """doit uptodate check: the outputs are as the last conversion wrote them (doit itself only checks
    that targets exist, so a hand-edited or truncated output would otherwise never be rebuilt)."""
    from pipeline.lazy import read_key

    key = read_key(Path(key_path))
    if key is None:
        return False
    usd_dir = Path(key_path).parent
    return all(file_digest(usd_dir / name) == sha for name, sha in key.outputs.items())


def run_conversion(kind: str, cfg_json: str) -> dict[str, str] | TaskFailed:
    """doit action: convert one entry through the lazy Python API (same key, same digest)."""
    from pipeline.converters import converter_for
    from pipeline.kinds import cfg_class
    from schemas import cfg_from_json

    try:
        converter = converter_for(kind)(cfg_from_json(cfg_json, cfg_class(kind)))
    except (ConfigError, ConversionError, ValueError) as exc:
        return TaskFailed(str(exc))
    return {"usd_path": converter.usd_path}


def report_error(message: str) -> TaskFailed:
    """doit action for an entry that cannot even be configured: fail with its one-line message."""
    return TaskFailed(message)


def convert_tasks(library_path: str | Path = DEFAULT_LIBRARY,
                  build_dir: str | Path = DEFAULT_BUILD_DIR) -> Iterator[dict[str, Any]]:
    """The ``convert`` (and ``scan``) subtasks for every entry of the manifest at ``library_path``."""
    build_dir = Path(build_dir)
    try:
        library = load_library(library_path)
    except ConfigError as exc:
        yield {"basename": "convert", "name": "library", "actions": [(report_error, [str(exc)])],
               "doc": "the library manifest has an error", "verbosity": 2}
        return
    for index, entry in enumerate(library.assets):
        try:
            kind = entry_kind(library, entry)
            cfg = entry_cfg(library, entry, index, build_dir, library_path)
        except (ConfigError, ConversionError) as exc:
            yield {"basename": "convert", "name": entry.name, "actions": [(report_error, [str(exc)])],
                   "doc": f"{entry.source} (misconfigured)"}
            continue
        source = normalise(entry_source(library, entry))
        packages = {item["name"]: item["path"] for item in getattr(cfg, "ros_package_paths", None) or []}
        usd_dir = Path(cfg.usd_dir)
        targets = [normalise(usd_dir / name) for name in planned_outputs(
            kind, cfg.usd_file_name, cfg.make_instanceable, getattr(cfg, "run_asset_transformer", False))]
        yield {"basename": "scan", "name": entry.name, "file_dep": [source],
               "actions": [(scan_references, [kind, source, packages])],
               "uptodate": [references_unchanged], "doc": f"find the files {entry.source} references",
               "verbosity": 0}
        yield {
            "basename": "convert", "name": entry.name,
            "doc": f"{entry.source} → {usd_dir / cfg.usd_file_name}",
            "file_dep": [source], "calc_dep": [f"scan:{entry.name}"],
            "uptodate": [config_changed(config_digest(cfg, kind)),
                         (outputs_intact, [normalise(usd_dir / key_file_name(cfg.usd_file_name))])],
            "targets": targets, "clean": True,
            "actions": [(run_conversion, [kind, cfg_to_json(cfg)])],
        }
