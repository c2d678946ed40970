"""The report's static HTML: ``index.html`` (summary and one row per asset, failures first) and
``assets/<name>.html`` (larger pictures, checks, joint and body tables). Plain HTML and CSS, no script,
no server; every figure comes from the assets' verify results (``<stem>.verify.json``), conversion
records (``<stem>.convert.json``) and rendering times (``images/<name>.timing.json``).

What the summary counts:

- **wall time of this run**: from the start of the doit process that wrote the report to its writing
  (``pipeline.stage_time``); None when written outside a doit run;
- **per stage** (convert, verify, thumbnails): wall and CPU seconds summed over the assets' last real
  runs of that stage, and how many of them ran in this run (an up-to-date asset keeps its earlier figures);
- **warnings**: what changes the simulation or the picture (the conversion's warnings and the checks'
  warning findings); **notes**: routine lines (kept as MuJoCo data, ignored harmlessly), counted apart.

No page holds an absolute path (``pipeline.report.paths``): build outputs are shown relative to the
report's folder, sources relative to the library's folder.
"""

from __future__ import annotations

import json
import time
from html import escape
from pathlib import Path
from typing import Any

from usdforge.pipeline.atomic import write_text_atomically
from usdforge.pipeline.report.paths import Relative, distinct_names

#: The stages whose time the summary shows (``stage_timing``).
STAGES = ("convert", "verify", "thumbnails")

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fafaf8}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:22px 0 8px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #e3e3e0;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f0f0ec;font-weight:600;position:sticky;top:0}
tr.asset{background:#fff}tr.asset.failed{background:#fff0f0}tr:hover{background:#f4f8ff}
img.thumb{width:160px;height:120px;object-fit:contain;border:1px solid #ddd;background:#eee}
.views img{width:320px;height:240px;border:1px solid #ddd;margin:0 8px 8px 0;background:#eee}
.badge{display:inline-block;border-radius:3px;padding:1px 6px;margin:1px;font-size:12px;white-space:nowrap}
.passed{background:#dff3df;color:#185c18}.failed>.badge.status,.badge.failed{background:#f8d4d4;color:#8a1010}
.skipped{background:#ececec;color:#555}.limited{background:#fde7c8;color:#7a4300}
.warning{background:#fff2cc;color:#6a5000}
#summary{display:flex;gap:28px;margin:0 0 18px;padding:0}#summary div{background:#fff;border:1px solid #e3e3e0;
padding:8px 14px}#summary dt{font-size:12px;color:#666}#summary dd{margin:0;font-size:20px;font-weight:600}
.num{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px}ul{margin:4px 0;padding-left:18px}
.reason{font-size:12px;color:#8a1010;margin-top:4px;max-width:28em}table.stages{width:auto;margin:0 0 18px}
pre.log{max-height:24em;overflow:auto;background:#f4f4f0;padding:8px;font-size:11px;white-space:pre-wrap}
small.where{color:#666}
"""


def _size(n: int | None) -> str:
    if n is None:
        return "–"
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def _num(value, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>\n{body}\n</body></html>\n")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, text)


def _json(path: str | None) -> dict[str, Any] | None:
    """The JSON object in the file at ``path``; None when absent or unreadable."""
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per entry: its verify result (or the error that kept it from being converted), its
    conversion record and the time its pictures took."""
    rows = []
    for entry in entries:
        row = {"name": entry["name"], "entry": entry, "record": _json(entry.get("record")),
               "timing": _json(entry.get("timing"))}
        failure = _failure(entry.get("failure"))
        if "error" in entry:
            row.update(status="failed", error=entry["error"])
        elif failure is not None:  # its conversion failed: any result is of an older output
            row.update(status="failed", error=failure)
        else:
            try:
                row["result"] = json.loads(Path(entry["result"]).read_text())
                row["status"] = row["result"]["status"]
            except (OSError, ValueError, KeyError) as exc:
                row.update(status="failed", error=f"no verify result: {exc}")
        rows.append(row)
    rows.sort(key=lambda r: (r["status"] != "failed", r["name"]))
    return rows


def _failure(path: str | None) -> str | None:
    """The one-line error the entry's last conversion left (``tasks.failure_path``), if it failed."""
    if path is None:
        return None
    try:
        with open(path, "rb") as stream:
            text = stream.read(4096).decode("utf-8", "replace")
    except OSError:
        return None
    return " ".join(text.split()) or "the conversion failed"


def warnings_of(result: dict[str, Any]) -> list[str]:
    """The conversion's warnings and every check's warning findings."""
    found = list(result.get("conversion", {}).get("warnings") or [])
    for check in result.get("checks", []):
        found.extend(f"{check['name']}: {f['prim']}: {f['message']}" for f in check["findings"]
                     if f["severity"] == "warning")
    return found


def notes_of(result: dict[str, Any]) -> list[str]:
    """The conversion's notes: routine lines that change neither the simulation nor the picture."""
    return list((result.get("conversion") or {}).get("notes") or [])


def stage_timing(row: dict[str, Any], stage: str) -> dict[str, Any] | None:
    """The row's last real run of ``stage``: {"seconds", "cpu_seconds", "started"} (None: never ran, or
    ran before such figures were kept). The conversion's comes from its record, else its verify result."""
    result = row.get("result") or {}
    if stage == "convert":
        return row.get("record") or result.get("conversion")
    if stage == "verify":
        return result.get("verify_timing")
    return row.get("timing")


def summary(rows: list[dict[str, Any]], run_started: float | None = None,
            now: float | None = None) -> dict[str, Any]:
    """The figures at the top of the report (module docstring). run_started: when this doit run began (s
    since the epoch; None: not in a run); now: when the report is written (default: now)."""
    results = [r["result"] for r in rows if "result" in r]
    now = time.time() if now is None else now
    stages = {}
    for stage in STAGES:
        timings = [t for t in (stage_timing(row, stage) for row in rows) if t and t.get("seconds") is not None]
        cpu = [t["cpu_seconds"] for t in timings if t.get("cpu_seconds") is not None]
        stages[stage] = {"assets": len(timings),
                         "this_run": sum(run_started is not None and (t.get("started") or 0) >= run_started
                                         for t in timings),
                         "seconds": round(sum(t["seconds"] for t in timings), 2),
                         "cpu_seconds": round(sum(cpu), 2) if len(cpu) == len(timings) else None}
    return {"assets": len(rows), "passed": sum(r["status"] == "passed" for r in rows),
            "failed": sum(r["status"] == "failed" for r in rows),
            # passed, but an engine check met a known engine limitation (listed, not called a pass)
            "limited": sum(r["status"] == "passed" and any(c["status"] == "limited" for c in r["checks"])
                           for r in results),
            "warnings": sum(len(warnings_of(r)) for r in results),
            "notes": sum(len(notes_of(r)) for r in results),
            "run_seconds": None if run_started is None else round(now - run_started, 2),
            "stages": stages}


def failure_reasons(result: dict[str, Any], most: int = 3) -> list[str]:
    """The first error of each failed check, ``check: prim: message`` (at most ``most``, then a count)."""
    reasons = []
    for check in result.get("checks", []):
        errors = [f for f in check["findings"] if f["severity"] == "error"]
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            reasons.append(f"{check['name']}: {first['prim']}: {first['message']}{more}")
    if len(reasons) > most:
        reasons = reasons[:most] + [f"… {len(reasons) - most} more failed checks"]
    return reasons


def _badges(result: dict[str, Any], rel: Relative) -> str:
    parts = []
    for check in result["checks"]:
        # a failed check's title is its errors; a limited one's the engine limitations it met (#30)
        shown = [f for f in check["findings"] if f["severity"] == "error"] or [
            f for f in check["findings"] if f["severity"] == "limitation"]
        title = check["detail"] if not shown else "; ".join(f"{f['prim']}: {f['message']}" for f in shown)[:600]
        parts.append(f"<span class=\"badge {check['status']}\" data-check=\"{escape(check['name'])}\" "
                     f"data-status=\"{check['status']}\" title=\"{escape(rel.text(title))}\">"
                     f"{escape(check['name'])}</span>")
    return " ".join(parts)


def _joints_text(joints: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(joints.items())) or "none"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _summary_html(figures: dict[str, Any]) -> str:
    cells = "".join(f"<div><dt>{label}</dt><dd data-key=\"{key}\">{escape(str(figures[key]))}</dd></div>"
                    for key, label in (("assets", "assets"), ("passed", "passed"), ("failed", "failed"),
                                       ("limited", "passed with engine limitations"),
                                       ("warnings", "warnings (change the simulation)"),
                                       ("notes", "notes (routine)")))
    cells += (f"<div title=\"the doit run that wrote this report, from its start to the writing\"><dt>wall time "
              f"of the run (s)</dt><dd data-key=\"run_seconds\">{_seconds(figures['run_seconds'])}</dd></div>")
    stages = "".join(
        f"<tr data-stage=\"{stage}\"><td>{stage}</td><td class=\"num\">{t['assets']}</td><td class=\"num\">"
        f"{t['this_run']}</td><td class=\"num\" data-key=\"seconds\">{_seconds(t['seconds'])}</td>"
        f"<td class=\"num\" data-key=\"cpu_seconds\">{_seconds(t['cpu_seconds'])}</td></tr>"
        for stage, t in figures["stages"].items())
    return (f"<dl id=\"summary\">{cells}</dl><table class=\"stages\" id=\"stages\"><thead><tr><th>stage</th>"
            "<th>assets</th><th>run in this run</th><th>wall (s, summed)</th><th>CPU (s, summed)</th></tr></thead>"
            f"<tbody>{stages}</tbody></table><p><small class=\"where\">The run: the doit run that wrote this report, "
            "from its start to the writing. Each asset's stage figures are from its last real run of the stage "
            "(this run or an earlier one); the wall times of parallel workers add up to more than the run's. "
            "Paths: build outputs relative to this report, sources relative to the library.</small></p>")


def _index(rows: list[dict[str, Any]], figures: dict[str, Any], rel: Relative) -> str:
    sources = distinct_names([row["entry"]["source"] for row in rows if "source" in row["entry"]])
    lines = ["<h1>usdforge library report</h1>", _summary_html(figures),
             "<table id=\"assets\"><thead><tr><th>picture</th><th>asset</th><th>source</th><th>bodies</th>"
             "<th>joints</th><th>meshes</th><th>actuators</th><th>mass (kg)</th><th>warnings</th>"
             "<th>verification</th><th>convert (s)</th><th>output</th></tr></thead><tbody>"]
    for row in rows:
        name, status = escape(row["name"]), row["status"]
        link = f"assets/{name}.html"
        if "result" not in row:
            lines.append(f"<tr class=\"asset {status}\" data-name=\"{name}\" data-status=\"{status}\"><td></td>"
                         f"<td><b>{name}</b></td><td colspan=\"10\"><span class=\"badge failed\">failed</span> "
                         f"<span class=\"reason\">{escape(rel.text(row['error']))}</span></td></tr>")
            continue
        result, facts = row["result"], row["result"]["facts"]
        warnings, notes = warnings_of(result), notes_of(result)
        warning_cell = (f"<span class=\"badge warning\" title=\"{escape(rel.text(chr(10).join(warnings)))}\">"
                        f"{len(warnings)}</span>" if warnings else "0")
        if notes:
            plural = "s" if len(notes) > 1 else ""
            warning_cell += (f"<br><small title=\"{escape(rel.text(chr(10).join(notes)))}\">{len(notes)} "
                             f"note{plural}</small>")
        reasons = "".join(f"<div class=\"reason\">{escape(rel.text(r))}</div>" for r in failure_reasons(result))
        image = row["entry"]["images"]["thumb"]
        thumb = f"images/{Path(image).name}"
        seconds = (stage_timing(row, "convert") or {}).get("seconds")
        source = row["entry"].get("source", result["source"])
        lines.append(
            f"<tr class=\"asset {status}\" data-name=\"{name}\" data-status=\"{status}\" "
            f"data-warnings=\"{len(warnings)}\" data-notes=\"{len(notes)}\"><td><a href=\"{link}\">"
            f"<img class=\"thumb\" src=\"{escape(thumb)}\" alt=\"{name}\"></a></td><td><a href=\"{link}\"><b>{name}"
            f"</b></a><br><span class=\"badge {status}\">{status}</span>{reasons}</td><td title=\""
            f"{escape(rel.path(source))}\">{escape(sources.get(source, Path(source).name))}<br><small>"
            f"{escape(result['kind'])}</small></td><td class=\"num\">{facts['bodies']}</td><td>"
            f"{escape(_joints_text(facts['joints']))}</td><td class=\"num\">{facts['meshes']}</td>"
            f"<td class=\"num\">{facts['actuators']}</td><td class=\"num\">{_num(facts['mass'])}</td>"
            f"<td>{warning_cell}</td><td>{_badges(result, rel)}</td><td class=\"num\">{_num(seconds, 3)}</td>"
            f"<td class=\"num\">{_size(result.get('output_bytes'))}</td></tr>")
    lines.append("</tbody></table>")
    return _page("usdforge library report", "\n".join(lines))


def _finding_html(finding: dict[str, Any], rel: Relative) -> str:
    """One finding: prim, check, severity, message, and the engine's full log when it kept one (``log``)."""
    log = finding.get("log")
    details = (f"<details><summary>full log</summary><pre class=\"log\">{escape(rel.text(str(log)))}</pre>"
               "</details>" if log else "")
    return (f"<li><code>{escape(finding['prim'])}</code> <b>{escape(finding['check'])}</b> ({finding['severity']}): "
            f"{escape(rel.text(finding['message']))}{details}</li>")


def _stage_line(row: dict[str, Any]) -> str:
    parts = []
    for stage in STAGES:
        timing = stage_timing(row, stage) or {}
        if timing.get("seconds") is not None:
            cpu = timing.get("cpu_seconds")
            cpu_text = f" ({_num(cpu, 3)} s CPU)" if cpu is not None else ""
            parts.append(f"{stage} {_num(timing['seconds'], 3)} s{cpu_text}")
    return ", ".join(parts) or "no timings recorded"


def _asset_page(row: dict[str, Any], rel: Relative) -> str:
    name = escape(row["name"])
    result, facts = row["result"], row["result"]["facts"]
    images = "".join(f"<img src=\"../images/{escape(Path(path).name)}\" alt=\"{name} {escape(view)} view\" "
                     f"title=\"{escape(view)}\">" for view, path in row["entry"]["images"].items() if view != "thumb")
    checks = []
    for check in result["checks"]:
        findings = "".join(_finding_html(f, rel) for f in check["findings"])
        checks.append(f"<tr><td>{escape(check['name'])}</td><td><span class=\"badge {check['status']}\">"
                      f"{check['status']}</span></td><td>{escape(rel.text(check['detail']))}"
                      f"{'<ul>' + findings + '</ul>' if findings else ''}"
                      f"</td><td class=\"num\">{_num(check.get('seconds'), 3)}</td></tr>")
    joints = []
    for joint in facts["joint_table"]:
        drive = joint["drive"] or {}
        unit = joint["unit"]
        joints.append(f"<tr><td>{escape(joint['name'])}</td><td>{escape(joint['type'])}{' (loop)' if joint['loop'] else ''}"
                      f"</td><td><code>{escape(joint['body0'] or 'world')}</code> → <code>{escape(joint['body1'])}</code>"
                      f"</td><td class=\"num\">{_num(joint['lower'])}</td><td class=\"num\">{_num(joint['upper'])}</td>"
                      f"<td>{unit}</td><td class=\"num\">{_num(drive.get('stiffness'))}</td><td class=\"num\">"
                      f"{_num(drive.get('damping'))}</td><td class=\"num\">{_num(drive.get('maxForce'))}</td></tr>")
    bodies = "".join(f"<tr><td>{escape(b['name'])}</td><td><code>{escape(b['path'])}</code></td><td class=\"num\">"
                     f"{_num(b['mass'])}</td><td>{', '.join(_num(v, 3) for v in b['center_of_mass'])}</td><td>"
                     f"{', '.join(_num(v, 3) for v in b['inertia'])}</td></tr>" for b in facts["body_table"])
    warnings = "".join(f"<li>{escape(rel.text(w))}</li>" for w in warnings_of(result))
    notes = "".join(f"<li>{escape(rel.text(n))}</li>" for n in notes_of(result))
    source = row["entry"].get("source", result["source"])
    body = (f"<p><a href=\"../index.html\">← library</a></p><h1>{name} <span class=\"badge {result['status']}\">"
            f"{result['status']}</span></h1><p><code>{escape(rel.path(source))}</code> → "
            f"<code>{escape(rel.path(result['usd_path']))}</code><br>{facts['bodies']} bodies, joints: "
            f"{escape(_joints_text(facts['joints']))}, {facts['meshes']} meshes, {facts['actuators']} actuators, "
            f"{_num(facts['mass'])} kg; {_size(result.get('output_bytes'))}; {escape(_stage_line(row))}</p>"
            f"<div class=\"views\">{images}</div><h2>Verification</h2><table><thead><tr><th>check</th><th>result</th>"
            f"<th>detail</th><th>s</th></tr></thead><tbody>{''.join(checks)}</tbody></table>"
            f"<h2>Warnings</h2><p>What changes the simulation or the picture.</p>"
            f"{'<ul>' + warnings + '</ul>' if warnings else '<p>none</p>'}"
            f"<h2>Notes</h2><p>Kept or ignored without changing the simulation or the picture.</p>"
            f"{'<ul>' + notes + '</ul>' if notes else '<p>none</p>'}"
            f"<h2>Joints</h2><p>Angular limits in degrees, angular gains per degree (USD units).</p><table><thead><tr>"
            f"<th>joint</th><th>type</th><th>bodies</th><th>lower</th><th>upper</th><th>unit</th><th>stiffness</th>"
            f"<th>damping</th><th>max force</th></tr></thead><tbody>{''.join(joints)}</tbody></table>"
            f"<h2>Bodies</h2><table><thead><tr><th>body</th><th>prim</th><th>mass (kg)</th><th>centre of mass (m)</th>"
            f"<th>principal inertia (kg·m²)</th></tr></thead><tbody>{bodies}</tbody></table>"
            f"<p><small class=\"where\">Paths: build outputs relative to the report's folder, sources relative to "
            f"the library's folder.</small></p>")
    return _page(f"{row['name']} · usdforge", body)


def write_report(entries: list[dict[str, Any]], folder: str | Path, library_dir: str | Path | None = None) -> Path:
    """Write ``folder/index.html``, ``folder/assets/<name>.html`` and ``folder/summary.json`` (the summary's
    figures); the index's path. library_dir: the library manifest's folder (paths are shown relative to it)."""
    from usdforge.pipeline.stage_time import run_started

    folder = Path(folder)
    rows = load_rows(entries)
    roots = {str(Path(entry["source"]).parent) for entry in entries if "source" in entry}
    rel = Relative(folder, library_dir, sorted(roots))
    for row in rows:
        if "result" in row:
            _write(folder / "assets" / f"{row['name']}.html", _asset_page(row, rel))
    figures = summary(rows, run_started())
    _write(folder / "summary.json", json.dumps(figures, indent=1) + "\n")
    _write(folder / "index.html", _index(rows, figures, rel))
    return folder / "index.html"
