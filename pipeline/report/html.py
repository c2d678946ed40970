"""The report's static HTML: ``index.html`` (summary and one row per asset, failures first) and
``assets/<name>.html`` (larger pictures, checks, joint and body tables). Plain HTML and CSS, no script,
no server; every figure comes from the assets' verify results (``<stem>.verify.json``)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from usdforge.pipeline.atomic import write_text_atomically

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
.skipped{background:#ececec;color:#555}.warning{background:#fff2cc;color:#6a5000}
#summary{display:flex;gap:28px;margin:0 0 18px;padding:0}#summary div{background:#fff;border:1px solid #e3e3e0;
padding:8px 14px}#summary dt{font-size:12px;color:#666}#summary dd{margin:0;font-size:20px;font-weight:600}
.num{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px}ul{margin:4px 0;padding-left:18px}
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


def load_rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per entry: its verify result (or the error that kept it from being converted)."""
    rows = []
    for entry in entries:
        row = {"name": entry["name"], "entry": entry}
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


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures at the top of the report."""
    results = [r["result"] for r in rows if "result" in r]
    return {"assets": len(rows), "passed": sum(r["status"] == "passed" for r in rows),
            "failed": sum(r["status"] == "failed" for r in rows),
            "warnings": sum(len(warnings_of(r)) for r in results),
            "build_seconds": round(sum((r.get("conversion") or {}).get("seconds") or 0.0 for r in results), 2)}


def _badges(result: dict[str, Any]) -> str:
    parts = []
    for check in result["checks"]:
        errors = sum(f["severity"] == "error" for f in check["findings"])
        title = check["detail"] if not errors else "; ".join(
            f"{f['prim']}: {f['message']}" for f in check["findings"] if f["severity"] == "error")[:600]
        parts.append(f"<span class=\"badge {check['status']}\" data-check=\"{escape(check['name'])}\" "
                     f"data-status=\"{check['status']}\" title=\"{escape(title)}\">{escape(check['name'])}</span>")
    return " ".join(parts)


def _joints_text(joints: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(joints.items())) or "none"


def _index(rows: list[dict[str, Any]]) -> str:
    figures = summary(rows)
    cells = "".join(f"<div><dt>{label}</dt><dd data-key=\"{key}\">{escape(str(figures[key]))}</dd></div>"
                    for key, label in (("assets", "assets"), ("passed", "passed"), ("failed", "failed"),
                                       ("warnings", "warnings"), ("build_seconds", "total build time (s)")))
    lines = [f"<h1>usdforge library report</h1><dl id=\"summary\">{cells}</dl>",
             "<table id=\"assets\"><thead><tr><th>picture</th><th>asset</th><th>source</th><th>bodies</th>"
             "<th>joints</th><th>meshes</th><th>actuators</th><th>mass (kg)</th><th>warnings</th>"
             "<th>verification</th><th>convert (s)</th><th>output</th></tr></thead><tbody>"]
    for row in rows:
        name, status = escape(row["name"]), row["status"]
        link = f"assets/{name}.html"
        if "result" not in row:
            lines.append(f"<tr class=\"asset {status}\" data-name=\"{name}\" data-status=\"{status}\"><td></td>"
                         f"<td><b>{name}</b></td><td colspan=\"10\"><span class=\"badge failed\">failed</span> "
                         f"{escape(row['error'])}</td></tr>")
            continue
        result, facts = row["result"], row["result"]["facts"]
        warnings = warnings_of(result)
        warning_cell = (f"<span class=\"badge warning\" title=\"{escape(chr(10).join(warnings))}\">"
                        f"{len(warnings)}</span>" if warnings else "0")
        image = row["entry"]["images"]["thumb"]
        thumb = f"images/{Path(image).name}"
        seconds = (result.get("conversion") or {}).get("seconds")
        lines.append(
            f"<tr class=\"asset {status}\" data-name=\"{name}\" data-status=\"{status}\" "
            f"data-warnings=\"{len(warnings)}\"><td><a href=\"{link}\"><img class=\"thumb\" src=\"{escape(thumb)}\" "
            f"alt=\"{name}\"></a></td><td><a href=\"{link}\"><b>{name}</b></a><br><span class=\"badge "
            f"{status}\">{status}</span></td><td>{escape(Path(result['source']).name)}<br><small>"
            f"{escape(result['kind'])}</small></td><td class=\"num\">{facts['bodies']}</td><td>"
            f"{escape(_joints_text(facts['joints']))}</td><td class=\"num\">{facts['meshes']}</td>"
            f"<td class=\"num\">{facts['actuators']}</td><td class=\"num\">{_num(facts['mass'])}</td>"
            f"<td>{warning_cell}</td><td>{_badges(result)}</td><td class=\"num\">{_num(seconds, 3)}</td>"
            f"<td class=\"num\">{_size(result.get('output_bytes'))}</td></tr>")
    lines.append("</tbody></table>")
    return _page("usdforge library report", "\n".join(lines))


def _asset_page(row: dict[str, Any]) -> str:
    name = escape(row["name"])
    result, facts = row["result"], row["result"]["facts"]
    images = "".join(f"<img src=\"../images/{escape(Path(path).name)}\" alt=\"{name} {escape(view)} view\" "
                     f"title=\"{escape(view)}\">" for view, path in row["entry"]["images"].items() if view != "thumb")
    checks = []
    for check in result["checks"]:
        findings = "".join(f"<li><code>{escape(f['prim'])}</code> <b>{escape(f['check'])}</b> ({f['severity']}): "
                           f"{escape(f['message'])}</li>" for f in check["findings"])
        checks.append(f"<tr><td>{escape(check['name'])}</td><td><span class=\"badge {check['status']}\">"
                      f"{check['status']}</span></td><td>{escape(check['detail'])}{'<ul>' + findings + '</ul>' if findings else ''}"
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
    warnings = "".join(f"<li>{escape(w)}</li>" for w in warnings_of(result))
    notes = "".join(f"<li>{escape(n)}</li>" for n in (result.get("conversion") or {}).get("notes") or [])
    seconds = (result.get("conversion") or {}).get("seconds")
    body = (f"<p><a href=\"../index.html\">← library</a></p><h1>{name} <span class=\"badge {result['status']}\">"
            f"{result['status']}</span></h1><p>{escape(result['source'])} → <code>{escape(result['usd_path'])}</code>"
            f"<br>{facts['bodies']} bodies, joints: {escape(_joints_text(facts['joints']))}, {facts['meshes']} meshes, "
            f"{facts['actuators']} actuators, {_num(facts['mass'])} kg; converted in {_num(seconds, 3)} s, "
            f"{_size(result.get('output_bytes'))}, verified in {_num(result.get('verify_seconds'), 3)} s</p>"
            f"<div class=\"views\">{images}</div><h2>Verification</h2><table><thead><tr><th>check</th><th>result</th>"
            f"<th>detail</th><th>s</th></tr></thead><tbody>{''.join(checks)}</tbody></table>"
            f"<h2>Warnings</h2>{'<ul>' + warnings + '</ul>' if warnings else '<p>none</p>'}"
            f"<h2>Notes</h2><p>Kept or ignored without changing the simulation or the picture.</p>"
            f"{'<ul>' + notes + '</ul>' if notes else '<p>none</p>'}"
            f"<h2>Joints</h2><p>Angular limits in degrees, angular gains per degree (USD units).</p><table><thead><tr>"
            f"<th>joint</th><th>type</th><th>bodies</th><th>lower</th><th>upper</th><th>unit</th><th>stiffness</th>"
            f"<th>damping</th><th>max force</th></tr></thead><tbody>{''.join(joints)}</tbody></table>"
            f"<h2>Bodies</h2><table><thead><tr><th>body</th><th>prim</th><th>mass (kg)</th><th>centre of mass (m)</th>"
            f"<th>principal inertia (kg·m²)</th></tr></thead><tbody>{bodies}</tbody></table>")
    return _page(f"{row['name']} · usdforge", body)


def write_report(entries: list[dict[str, Any]], folder: str | Path) -> Path:
    """Write ``folder/index.html`` and ``folder/assets/<name>.html``; the index's path."""
    folder = Path(folder)
    rows = load_rows(entries)
    for row in rows:
        if "result" in row:
            _write(folder / "assets" / f"{row['name']}.html", _asset_page(row))
    _write(folder / "summary.json", json.dumps(summary(rows), indent=1) + "\n")
    _write(folder / "index.html", _index(rows))
    return folder / "index.html"
