"""doit task generators of ``doit verify`` and ``doit report``.

- ``verify:<name>`` runs every check on one converted asset (``rules.verify.asset``), writes the JSON
  result ``<usd_dir>/<stem>.verify.json`` whatever the outcome, and fails when the asset fails, one line
  per error: asset, prim, check, message (``doit --continue verify`` verifies every asset regardless).
- ``thumbnail:<name>`` renders the asset's pictures from its USD (``pipeline.report.render``) into
  ``<build>/report/images/``, with how long that took (``<name>.timing.json``).
- ``report`` writes ``<build>/report/index.html`` and a page per asset from those results and pictures.
  It reads the results without depending on the verify tasks, so that ``doit --continue convert verify
  report`` reports failed assets too; it re-runs when a result or a picture changed.

Each re-runs only when what it reads changed: the conversion's outputs (and, for verify, the source, the
cfg, the checks' version and which engine environments are set up).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from doit.exceptions import TaskFailed
from doit.tools import config_changed

from usdforge.pipeline.atomic import write_text_atomically
from usdforge.pipeline.task_specs import task_specs
from usdforge.pipeline.tasks import DEFAULT_BUILD_DIR, DEFAULT_LIBRARY, convert_task_dep

#: Bumped when the pictures change for the same USD.
RENDER_VERSION = 3
THUMBNAIL_SIZE = (320, 240)
VIEW_SIZE = (640, 480)
ENGINES = ("newton", "mujoco-usd", "isaaclab")


def verify_result_path(spec: dict[str, Any]) -> str:
    return spec["usd_path"].rsplit(".", 1)[0] + ".verify.json"


def image_paths(name: str, build_dir: str | Path) -> dict[str, str]:
    """View → PNG path: ``thumb`` (the report's row) and one per view of the asset's page."""
    from usdforge.pipeline.report.views import VIEWS

    folder = Path(build_dir) / "report" / "images"
    return {"thumb": str(folder / f"{name}.png"), **{view: str(folder / f"{name}-{view}.png") for view in VIEWS}}


def timing_path(name: str, build_dir: str | Path) -> str:
    """The wall and CPU time of rendering the asset's pictures (``pipeline.stage_time.timed``)."""
    return str(Path(build_dir) / "report" / "images" / f"{name}.timing.json")


def _usd_files(spec: dict[str, Any]) -> list[str]:
    return [t for t in spec["targets"] if not t.endswith(".usdforge.toml")]


def run_verify(name: str, kind: str, source: str, usd_path: str, cfg_json: str, result_path: str,
               build_dir: str) -> dict[str, Any]:
    """doit action: verify one asset, write its JSON result (with the conversion's record) atomically;
    print its failures."""
    from usdforge.pipeline.conversion_record import record_path
    from usdforge.pipeline.stage_time import timed
    from usdforge.rules.verify.asset import failure_lines, verify_asset

    with timed() as timing:
        result = verify_asset(kind, source, usd_path, json.loads(cfg_json), build_dir, ENGINES)
    try:
        conversion = json.loads(record_path(Path(usd_path).parent, Path(usd_path).name).read_text())
    except (OSError, ValueError):
        conversion = {}  # converted before conversions were recorded
    result = {"name": name, **result, "verify_timing": timing,
              "conversion": {field: conversion.get(field) for field in ("seconds", "cpu_seconds", "started")}
              | {"warnings": conversion.get("warnings", []), "notes": conversion.get("notes", [])}}
    write_text_atomically(Path(result_path), json.dumps(result, indent=1, sort_keys=True) + "\n")
    lines = failure_lines(name, result)
    if lines:
        return TaskFailed("\n".join(lines))
    return {"status": result["status"]}


def engines_set_up(build_dir: str | Path) -> list[str]:
    """The engine environments present in the build folder (verify re-runs when this changes)."""
    return [e for e in ENGINES if (Path(build_dir) / f"venv-{e}" / "usdforge-requirement.txt").is_file()]


def verify_tasks(library_path: str | Path = DEFAULT_LIBRARY,
                 build_dir: str | Path = DEFAULT_BUILD_DIR) -> Iterator[dict[str, Any]]:
    """``verify:<name>`` for every configured entry."""
    # Imported here: every `doit` run imports this module (dodo.py), and rules.verify needs attrs and the
    # verify package (~80 ms of a no-op `doit convert`, which creates no verify task).
    from usdforge.rules.verify.asset import CHECKS_VERSION

    specs = [s for s in task_specs(library_path, build_dir) if "error" not in s]
    results = {spec["name"]: verify_result_path(spec) for spec in specs}
    engines = engines_set_up(build_dir)
    for spec in specs:
        name = spec["name"]
        yield {
            "name": name, "doc": f"verify {name} against {Path(spec['source']).name}",
            "file_dep": [spec["source"], *_usd_files(spec)], "task_dep": convert_task_dep(name),
            "targets": [results[name]], "clean": True,
            "uptodate": [config_changed({"digest": spec["digest"], "checks": CHECKS_VERSION, "engines": engines})],
            "actions": [(run_verify, [name, spec["kind"], spec["source"], spec["usd_path"], spec["cfg_json"],
                                      results[name], str(build_dir)])],
        }


def render_asset(usd_path: str, images: dict[str, str], timing_file: str | None = None) -> None | TaskFailed:
    """doit action: the asset's thumbnail and views, and how long they took (JSON at ``timing_file``)."""
    from usdforge.pipeline.report.render import MissingRenderer, render_views
    from usdforge.pipeline.report.views import VIEWS
    from usdforge.pipeline.stage_time import timed

    outputs = {view: path for view, path in images.items() if view != "thumb"}
    sizes = {view: VIEW_SIZE for view in outputs}
    try:
        with timed() as timing:
            render_views(usd_path, outputs, sizes)
            render_views(usd_path, {next(iter(VIEWS)): images["thumb"]}, {next(iter(VIEWS)): THUMBNAIL_SIZE})
    except MissingRenderer as exc:
        return TaskFailed(str(exc))
    if timing_file is not None:
        write_text_atomically(Path(timing_file), json.dumps(timing) + "\n")
    return None


def thumbnail_tasks(library_path: str | Path = DEFAULT_LIBRARY,
                    build_dir: str | Path = DEFAULT_BUILD_DIR) -> Iterator[dict[str, Any]]:
    """``thumbnail:<name>``: pictures of every converted asset, from its USD."""
    for spec in task_specs(library_path, build_dir):
        if "error" in spec:
            continue
        images = image_paths(spec["name"], build_dir)
        timing = timing_path(spec["name"], build_dir)
        yield {"name": spec["name"], "doc": f"render {spec['name']} from its USD",
               "file_dep": _usd_files(spec), "task_dep": convert_task_dep(spec["name"]),
               "targets": [*images.values(), timing], "clean": True,
               "uptodate": [config_changed({"render": RENDER_VERSION})],
               "actions": [(render_asset, [spec["usd_path"], images, timing])]}


def _stamps(paths: list[str]) -> dict[str, list[int]]:
    stamps = {}
    for path in paths:
        try:
            stat = os.stat(path)
            stamps[path] = [stat.st_mtime_ns, stat.st_size]
        except FileNotFoundError:
            stamps[path] = [0, -1]
    return stamps


def results_unchanged(task: Any, values: dict[str, Any]) -> bool:
    """doit uptodate check of ``report``: every verify result and picture is as the last report read it."""
    read = values.get("read")
    return read is not None and _stamps(list(read)) == read


def write_report_action(entries: list[dict[str, Any]], build_dir: str,
                        library_dir: str | None = None) -> dict[str, Any]:
    from usdforge.pipeline.report.html import write_report

    read = [entry[field] for entry in entries for field in ("result", "failure", "record") if field in entry]
    read += [path for entry in entries for path in entry.get("images", {}).values()]
    stamps = _stamps(read)
    write_report(entries, Path(build_dir) / "report", library_dir)
    return {"read": stamps}


def report_tasks(library_path: str | Path = DEFAULT_LIBRARY,
                 build_dir: str | Path = DEFAULT_BUILD_DIR) -> Iterator[dict[str, Any]]:
    """``report``: the library's HTML page and one page per asset.

    It depends on the ``thumbnail`` group (every asset's pictures, so its conversion) by name, not by a
    ``file_dep`` on every picture, which doit would match against its task_dep list one by one (quadratic
    in the library's size); the pictures it read are stamped instead (``results_unchanged``). When one of
    those tasks fails, doit does not run it, and ``UsdforgeReporter`` writes it at the end of the run
    instead (``meta["despite_failures"]``): the failed entries first, each with its one-line error
    (``tasks.failure_path``), the others as usual."""
    from usdforge.pipeline.conversion_record import record_path
    from usdforge.pipeline.tasks import failure_path

    entries = []
    for spec in task_specs(library_path, build_dir):
        if "error" in spec:
            entries.append({"name": spec["name"], "error": spec["error"]})
            continue
        images = image_paths(spec["name"], build_dir)
        usd_path = Path(spec["usd_path"])
        entries.append({"name": spec["name"], "kind": spec["kind"], "source": spec["source"],
                        "result": verify_result_path(spec), "images": images,
                        "timing": timing_path(spec["name"], build_dir),
                        "record": str(record_path(usd_path.parent, usd_path.name)),
                        "failure": str(failure_path(build_dir, spec["name"]))})
    report = Path(build_dir) / "report"
    yield {"basename": "report", "doc": f"write {report / 'index.html'}: every asset at a glance",
           "task_dep": ["thumbnail"], "targets": [str(report / "index.html")], "clean": True,
           "uptodate": [config_changed({"entries": entries}), results_unchanged],
           "actions": [(write_report_action, [entries, str(build_dir), str(Path(library_path).absolute().parent)])],
           "meta": {"despite_failures": True}}
