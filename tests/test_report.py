"""``doit report`` end to end: a small library converted, verified and reported, the report opened in a
real headless browser (Debian's ``chromium``), and the build's incrementality across all three steps.

The browser loads a harness page that frames the report (and each asset's page) and writes what it finds
into its own DOM, which ``--dump-dom`` prints: every row, each image's natural size (0 = broken), and
the summary figures, compared here with the assets' JSON results. A screenshot of the report is saved as
``build/test-report/report.png`` in the checkout.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from meshes import write_mesh
from test_doit import REPO, doit

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ASSETS = REPO / "assets"


def ran(result: subprocess.CompletedProcess, basename: str) -> list[str]:
    """The ``basename:*`` (or ``basename``) tasks doit executed ("-- " marks an up-to-date one)."""
    return sorted(line[3:].strip() for line in result.stdout.splitlines()
                  if line.startswith(".  ") and line[3:].strip().split(":")[0] == basename)


def write_library(folder: Path, broken: bool = False) -> Path:
    """Two robots of the embedded library, a box and a plate (separate meshes), and optionally an entry
    whose cfg is wrong (it cannot be converted: a failed row)."""
    meshes = folder / "meshes"
    meshes.mkdir(parents=True, exist_ok=True)
    write_mesh(meshes, "stl")
    shutil.copy(ASSETS / "meshes" / "plate.stl", meshes / "plate.stl")
    text = f"""
[[assets]]
name = "tiny_arm"
source = "{ASSETS / 'robots/tiny_arm/urdf/tiny_arm.urdf'}"
packages = {{ tiny_arm = "{ASSETS / 'robots/tiny_arm'}" }}
[assets.cfg]
fix_base = true

[[assets]]
name = "pan_tilt"
source = "{ASSETS / 'robots/pan_tilt/pan_tilt.xml'}"
[assets.cfg]
import_physics_scene = true

[[assets]]
name = "box"
source = "meshes/box.stl"
[assets.cfg]
mass_props = {{ mass = 2.0 }}
rigid_props = {{ rigid_body_enabled = true }}
collision_props = {{ collision_enabled = true }}

[[assets]]
name = "plate"
source = "meshes/plate.stl"
[assets.cfg]
scale = [0.001, 0.001, 0.001]
"""
    if broken:
        text += '\n[[assets]]\nname = "bent"\nsource = "meshes/box.stl"\n[assets.cfg]\nscale = [0.0, 1.0, 1.0]\n'
    library = folder / "library.toml"
    library.write_text(text)
    return library


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
    return found


def browse(page: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.glob('chromium-profile-*')))}"
    command = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--allow-file-access-from-files",
               *extra, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


HARNESS = """<!DOCTYPE html><html><body>
<iframe id="index" src="%(index)s" style="width:1400px;height:900px"></iframe>
%(pages)s
<pre id="out">pending</pre>
<script>
function images(doc) {
  return [...doc.querySelectorAll('img')].map(i => ({src: i.getAttribute('src'), width: i.naturalWidth,
                                                     ok: i.complete && i.naturalWidth > 0}));
}
window.addEventListener('load', () => {
  const d = document.getElementById('index').contentDocument;
  const rows = [...d.querySelectorAll('tr.asset')].map(r => ({name: r.dataset.name, status: r.dataset.status,
      warnings: r.dataset.warnings, images: images(r), link: (r.querySelector('a') || {}).href || null}));
  const summary = {};
  d.querySelectorAll('#summary dd').forEach(e => { summary[e.dataset.key] = e.textContent; });
  const pages = {};
  document.querySelectorAll('iframe.page').forEach(f => {
    const doc = f.contentDocument;
    pages[f.dataset.name] = {images: images(doc), joints: doc.querySelectorAll('h2 + p + table tbody tr').length,
                             title: doc.title};
  });
  document.getElementById('out').textContent = JSON.stringify({rows, summary, pages});
});
</script></body></html>
"""


def read_harness(report: Path, names: list[str], tmp_path: Path) -> dict:
    pages = "\n".join(f'<iframe class="page" data-name="{n}" src="{(report / "assets" / f"{n}.html").as_uri()}">'
                      "</iframe>" for n in names)
    harness = tmp_path / "harness.html"
    harness.write_text(HARNESS % {"index": (report / "index.html").as_uri(), "pages": pages})
    result = browse(harness, tmp_path, "--virtual-time-budget=10000", "--dump-dom")
    assert result.returncode == 0, result.stderr[-3000:]
    start = result.stdout.index('<pre id="out">') + len('<pre id="out">')
    text = result.stdout[start:result.stdout.index("</pre>", start)]
    assert text != "pending", "the harness's script did not run"
    import html

    return json.loads(html.unescape(text))


def test_report_opens_in_headless_chromium_with_every_row_image_and_figure(tmp_path):
    browser = chromium()  # skips before the slow build when there is no browser
    work = tmp_path / "work"
    work.mkdir()
    library = write_library(tmp_path / "lib", broken=True)
    built = doit(work, "--continue", "convert", "verify", "report", library=library)
    # The misconfigured entry fails its conversion; everything else builds and the report still appears.
    assert built.returncode != 0 and "bent" in built.stdout + built.stderr
    assert ran(built, "verify") == ["verify:box", "verify:pan_tilt", "verify:plate", "verify:tiny_arm"]
    report = work / "build" / "report"
    good = ["box", "pan_tilt", "plate", "tiny_arm"]
    results = {name: json.loads(next((work / "build/usd" / name).glob("*.verify.json")).read_text()) for name in good}
    assert all(r["status"] == "passed" for r in results.values()), {n: r["status"] for n, r in results.items()}

    found = read_harness(report, good, tmp_path)
    rows = found["rows"]
    assert [row["name"] for row in rows] == ["bent", *good]  # failures first, then by name
    assert rows[0]["status"] == "failed" and all(row["status"] == "passed" for row in rows[1:])
    for row in rows[1:]:
        assert len(row["images"]) == 1 and row["images"][0]["ok"], row
        assert row["images"][0]["width"] == 320
        assert row["link"].endswith(f"assets/{row['name']}.html")
    from usdforge.pipeline.report.html import warnings_of

    expected = {"assets": "5", "passed": "4", "failed": "1",
                "warnings": str(sum(len(warnings_of(r)) for r in results.values())),
                "build_seconds": str(round(sum(r["conversion"]["seconds"] for r in results.values()), 2))}
    assert found["summary"] == expected
    assert {row["name"]: int(row["warnings"]) for row in rows[1:]} == \
        {name: len(warnings_of(r)) for name, r in results.items()}
    for name in good:
        page = found["pages"][name]
        assert len(page["images"]) == 4 and all(image["ok"] and image["width"] == 640 for image in page["images"])
        joints = sum(results[name]["facts"]["joints"].values())
        assert page["joints"] == joints

    screenshot = REPO / "build" / "test-report" / "report.png"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    shot = browse(report / "index.html", tmp_path, f"--screenshot={screenshot}", "--window-size=1400,1100",
                  "--hide-scrollbars")
    assert shot.returncode == 0 and screenshot.stat().st_size > 10_000, shot.stderr[-2000:]
    assert browser


def test_convert_verify_report_is_incremental(tmp_path):
    pytest.importorskip("vtk", reason="the report's pictures need VTK: pip install 'usdforge[report]'")
    work = tmp_path / "work"
    work.mkdir()
    library = write_library(tmp_path / "lib")
    first = doit(work, "convert", "verify", "report", library=library)
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(ran(first, "thumbnail")) == 4 and ran(first, "report") == ["report"]
    assert (work / "build/report/index.html").is_file()

    again = doit(work, "convert", "verify", "report", library=library)
    assert again.returncode == 0
    assert [line for line in again.stdout.splitlines() if line.startswith(".  ")] == []  # no task executed

    mesh = tmp_path / "lib" / "meshes" / "box.stl"
    import trimesh

    write_mesh(mesh.parent, "stl", trimesh.creation.box(extents=[0.3, 0.3, 0.3]))
    edited = doit(work, "convert", "verify", "report", library=library)
    assert edited.returncode == 0, edited.stdout + edited.stderr
    assert ran(edited, "convert") == ["convert:box"]
    assert ran(edited, "verify") == ["verify:box"]
    assert ran(edited, "thumbnail") == ["thumbnail:box"]
    assert ran(edited, "report") == ["report"]


def test_the_report_is_written_when_an_entry_fails_to_convert(tmp_path):
    """One entry whose source fails to convert (not a misconfigured one: doit runs its conversion): the
    report is still written, that entry first with its one-line error; fixed, it reports as usual."""
    pytest.importorskip("vtk", reason="the report's pictures need VTK: pip install 'usdforge[report]'")
    work = tmp_path / "work"
    work.mkdir()
    library = write_library(tmp_path / "lib")
    text = library.read_text().split("[[assets]]")
    broken = tmp_path / "lib" / "broken.urdf"
    broken.write_text('<robot name="r"><link name="a"/><joint name="j" type="fixed"><parent link="a"/>'
                      '<child link="nowhere"/></joint></robot>')
    library.write_text("[[assets]]".join(text[:2]) + '\n[[assets]]\nname = "broken"\nsource = "broken.urdf"\n')
    built = doit(work, "convert", "verify", "report", library=library)
    assert built.returncode != 0
    index = work / "build" / "report" / "index.html"
    assert index.is_file(), built.stdout + built.stderr
    html = index.read_text()
    rows = [line for line in html.split("<tr class=\"asset")[1:]]
    assert 'data-name="broken" data-status="failed"' in rows[0]
    assert "child link &#x27;nowhere&#x27; is not a link of this robot" in rows[0] and "broken.urdf:1" in rows[0]
    assert 'data-name="tiny_arm" data-status="passed"' in rows[1]
    closing = [line for line in (built.stdout + built.stderr).splitlines() if "task(s) failed:" in line]
    assert closing and "convert:broken" in closing[0] and "report" not in closing[0]
    broken.write_text('<robot name="r"><link name="a"/></robot>')
    fixed = doit(work, "convert", "verify", "report", library=library)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert 'data-name="broken" data-status="passed"' in index.read_text()
