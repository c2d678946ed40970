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
      warnings: r.dataset.warnings, notes: r.dataset.notes, images: images(r), text: r.innerText,
      link: (r.querySelector('a') || {}).href || null}));
  const summary = {};
  d.querySelectorAll('#summary dd').forEach(e => { summary[e.dataset.key] = e.textContent; });
  const stages = {};
  d.querySelectorAll('#stages tr[data-stage]').forEach(r => {
    stages[r.dataset.stage] = [...r.querySelectorAll('td')].map(c => c.textContent); });
  const pages = {};
  document.querySelectorAll('iframe.page').forEach(f => {
    const doc = f.contentDocument;
    pages[f.dataset.name] = {images: images(doc), joints: doc.querySelectorAll('h2 + p + table tbody tr').length,
                             title: doc.title, html: doc.documentElement.outerHTML};
  });
  const html = d.documentElement.outerHTML;
  document.getElementById('out').textContent = JSON.stringify({rows, summary, stages, pages, html});
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
    """Also: the failed row says why, no page holds an absolute path of the build or the library, and the
    summary's figures are those of the run (its wall time against the test's clock, its CPU times against
    the CPU the run's processes used)."""
    import resource
    import time

    browser = chromium()  # skips before the slow build when there is no browser
    work = tmp_path / "work"
    work.mkdir()
    library = write_library(tmp_path / "lib", broken=True)
    children, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    built = doit(work, "--continue", "convert", "verify", "report", library=library)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
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
    assert "scale" in rows[0]["text"], rows[0]  # the failed row says why
    from usdforge.pipeline.report.html import notes_of, warnings_of

    run_seconds = float(found["summary"].pop("run_seconds"))
    expected = {"assets": "5", "passed": "4", "failed": "1",
                "limited": str(sum(any(c["status"] == "limited" for c in r["checks"]) for r in results.values())),
                "warnings": str(sum(len(warnings_of(r)) for r in results.values())),
                "notes": str(sum(len(notes_of(r)) for r in results.values()))}
    assert found["summary"] == expected
    assert int(expected["notes"]) > 0  # pan_tilt's MuJoCo data: a note, not a warning
    assert {row["name"]: (int(row["warnings"]), int(row["notes"])) for row in rows[1:]} == \
        {name: (len(warnings_of(r)), len(notes_of(r))) for name, r in results.items()}
    # The run's wall time: from the doit process's start to the report's writing, within the test's clock.
    assert 0.5 * wall < run_seconds <= wall, (run_seconds, wall)
    stages = {stage: [float(v) if v != "–" else None for v in cells[1:]] for stage, cells in found["stages"].items()}
    assert {stage: values[:2] for stage, values in stages.items()} == {s: [4, 4] for s in ("convert", "verify",
                                                                                           "thumbnails")}
    spent = sum(values[3] for values in stages.values())
    assert 0 < spent <= cpu, (spent, cpu)  # the rest: doit's processes, their imports, the report
    convert = sum(r["conversion"]["cpu_seconds"] for r in results.values())
    assert stages["convert"][3] == pytest.approx(convert, abs=0.15)
    for page in [found["html"], *(page["html"] for page in found["pages"].values())]:
        for folder in (work / "build", tmp_path / "lib", REPO):
            assert str(folder) not in page
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
    import vtk  # noqa: F401  (the test extra installs VTK: a missing one fails here instead of skipping)
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
    import vtk  # noqa: F401  (the test extra installs VTK: a missing one fails here instead of skipping)
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


def test_a_row_that_failed_verification_names_its_check_and_the_page_shows_the_engines_log(tmp_path):
    """The index row of an asset that failed a check carries that check's first error; its page shows the
    finding's full log (``Finding.log``) with no absolute path of the build or the library; the source column
    tells two sources of one name apart."""
    from usdforge.pipeline.report.html import write_report

    build, library = tmp_path / "work" / "build", tmp_path / "lib"
    facts = {"bodies": 1, "joints": {}, "meshes": 1, "actuators": 0, "mass": 1.0, "joint_table": [], "body_table": []}
    log = (f'Traceback (most recent call last):\n  File "{build}/venv-newton/lib/load.py", line 3\n'
           "ValueError: bad inertia")
    entries = []
    for name, folder, status in (("left", "a", "failed"), ("right", "b", "passed")):
        source = library / folder / "hand.xml"
        usd = build / "usd" / name / "hand.usda"
        result = {"name": name, "status": status, "kind": "mjcf", "source": str(source), "usd_path": str(usd),
                  "facts": facts, "output_bytes": 10, "conversion": {"warnings": [], "notes": []}, "checks": [
                      {"name": "newton-load", "status": status, "detail": f"loaded {usd}", "seconds": 0.5,
                       "findings": [{"check": "newton-load", "prim": "/hand/palm", "severity": "error",
                                     "message": f"Newton loads 0 bodies, {source} has 1", "log": log}]
                       if status == "failed" else []}]}
        path = tmp_path / f"{name}.verify.json"
        path.write_text(json.dumps(result))
        entries.append({"name": name, "kind": "mjcf", "source": str(source), "result": str(path),
                        "images": {"thumb": str(build / "report/images" / f"{name}.png")}})
    index = write_report(entries, build / "report", library).read_text()
    failed_row = index.split('data-name="left"')[1].split("</tr>")[0]
    assert "newton-load: /hand/palm: Newton loads 0 bodies, a/hand.xml has 1" in failed_row
    assert ">a/hand.xml<" in failed_row and ">b/hand.xml<" in index.split('data-name="right"')[1]
    page = (build / "report" / "assets" / "left.html").read_text()
    assert "full log" in page and "ValueError: bad inertia" in page and "../venv-newton/lib/load.py" in page
    for text in (index, page):
        assert str(build) not in text and str(library) not in text


def test_invisible_geoms_are_not_drawn_and_a_black_robot_reads_as_a_shaded_shape(tmp_path):
    """MJCF ``rgba`` alpha 0 (an invisible helper) draws nothing; a black material is drawn as a shaded
    grey shape, not a black silhouette: its pixels are lit and differ from one face to the next."""
    import vtk  # noqa: F401  (the test extra installs VTK: a missing one fails here instead of skipping)
    import numpy as np
    from PIL import Image

    from usdforge.pipeline import MjcfConverter
    from usdforge.pipeline.report.render import render_views
    from usdforge.schemas import MjcfConverterCfg

    source = tmp_path / "dark.xml"
    source.write_text("""<mujoco><worldbody><body name="b"><freejoint/>
      <geom type="box" size="0.1 0.1 0.1" rgba="0.02 0.02 0.02 1"/>
      <geom type="box" size="2 2 0.01" pos="0 0 0.5" rgba="1 0 0 0"/></body></worldbody></mujoco>""")
    usd = MjcfConverter(MjcfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out")), cache=False).usd_path
    picture = tmp_path / "dark.png"
    assert render_views(usd, {"iso": picture}, {"iso": (160, 120)}) == 1  # the alpha-0 plate is not drawn
    pixels = np.asarray(Image.open(picture).convert("L"), dtype=float)
    shape = pixels[pixels < 200]  # the background is a light gradient
    assert shape.size > 500, "the box is framed and fills part of the picture"
    assert shape.mean() > 40 and shape.std() > 8, (shape.mean(), shape.std())
