"""`doit convert` end to end in a temporary folder: first build, no-ops, edits, -n 2, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meshes import write_mesh
from test_lazy import textured_obj

REPO = Path(__file__).resolve().parents[1]


def doit(workdir: Path, *args: str, library: Path | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(workdir), *args]
    if library is not None:
        command.append(f"library={library}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def executed(result: subprocess.CompletedProcess) -> list[str]:
    """The convert tasks doit ran (".  convert:x"); "-- " marks an up-to-date one."""
    return sorted(line[3:].strip() for line in result.stdout.splitlines() if line.startswith(".  convert:"))


@pytest.fixture
def project(tmp_path) -> tuple[Path, Path]:
    """A work folder with a three-entry library: a textured OBJ and two STLs sharing nothing."""
    meshes = tmp_path / "lib" / "meshes"
    meshes.mkdir(parents=True)
    textured_obj(meshes)
    write_mesh(meshes, "stl")
    write_mesh(meshes, "ply")
    library = tmp_path / "lib" / "library.toml"
    library.write_text("""
[[assets]]
name = "crate"
source = "meshes/crate.obj"
[assets.cfg]
mass_props = { mass = 1.0 }

[[assets]]
name = "box"
source = "meshes/box.stl"

[[assets]]
name = "ply_box"
source = "meshes/box.ply"
[assets.cfg]
make_instanceable = false
""")
    work = tmp_path / "work"
    work.mkdir()
    return work, library


def test_build_noop_touch_and_edit_rerun_only_dependents(project):
    work, library = project
    first = doit(work, "convert", library=library)
    assert first.returncode == 0, first.stderr
    assert executed(first) == ["convert:box", "convert:crate", "convert:ply_box"]
    assert (work / "build/usd/crate/crate.usda").is_file()
    assert (work / "build/usd/box/Props/box_meshes.usd").is_file()

    noop = doit(work, "convert", library=library)
    assert noop.returncode == 0 and executed(noop) == []

    later = time.time() + 5
    for path in (library.parent / "meshes").iterdir():
        os.utime(path, (later, later))
    touched = doit(work, "convert", library=library)
    assert touched.returncode == 0 and executed(touched) == []

    (library.parent / "meshes/crate.mtl").write_text("newmtl wood\nKd 0.1 0.9 0.2\nmap_Kd wood.png\n")
    edited = doit(work, "convert", library=library)
    assert edited.returncode == 0 and executed(edited) == ["convert:crate"]

    (library.parent / "meshes/unrelated.txt").write_text("not referenced")
    assert executed(doit(work, "convert", library=library)) == []


def test_hand_edited_output_is_rebuilt(project):
    work, library = project
    assert doit(work, "convert", library=library).returncode == 0
    output = work / "build/usd/box/box.usda"
    output.write_text(output.read_text().replace("box", "bux"))
    again = doit(work, "convert", library=library)
    assert executed(again) == ["convert:box"]
    assert "bux" not in output.read_text()


def test_cfg_edit_reruns_that_entry_only(project):
    work, library = project
    assert doit(work, "convert", library=library).returncode == 0
    library.write_text(library.read_text().replace("mass = 1.0", "mass = 3.0"))
    assert executed(doit(work, "convert", library=library)) == ["convert:crate"]


def test_parallel_build_equals_serial_build_byte_for_byte(project, tmp_path):
    work, library = project
    parallel_work = tmp_path / "parallel"
    parallel_work.mkdir()
    assert doit(work, "convert", library=library).returncode == 0
    result = doit(parallel_work, "-n", "2", "convert", library=library)
    assert result.returncode == 0, result.stderr
    serial = {p.relative_to(work / "build/usd"): p.read_bytes() for p in (work / "build/usd").rglob("*")
              if p.is_file() and not p.name.endswith((".usdforge.toml", ".convert.json"))}
    parallel = {p.relative_to(parallel_work / "build/usd"): p.read_bytes()
                for p in (parallel_work / "build/usd").rglob("*")
                if p.is_file() and not p.name.endswith((".usdforge.toml", ".convert.json"))}
    assert serial.keys() == parallel.keys() and serial == parallel


def test_list_and_clean(project):
    work, library = project
    listing = doit(work, "list", library=library)
    assert listing.returncode == 0 and "convert" in listing.stdout
    assert doit(work, "convert", library=library).returncode == 0
    cleaned = doit(work, "clean", "convert", library=library)
    assert cleaned.returncode == 0
    assert not (work / "build/usd/box/box.usda").exists()


def test_bad_cfg_is_one_line_naming_the_field_and_other_entries_build_with_continue(project):
    work, library = project
    library.write_text(library.read_text().replace('source = "meshes/box.stl"',
                                                   'source = "meshes/box.stl"\n[assets.cfg]\nscale = [0.0, 1.0, 1.0]'))
    result = doit(work, "--continue", "convert", library=library)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "assets[1].cfg.scale: expected 3 finite non-zero scale factors, found (0.0, 1.0, 1.0)" in output
    assert "Traceback" not in output
    assert not (work / "build/usd/box").exists()
    assert (work / "build/usd/crate/crate.usda").is_file() and (work / "build/usd/ply_box/ply_box.usda").is_file()


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_bad_mesh_fails_its_entry_only(project, damage):
    work, library = project
    mesh = library.parent / "meshes/box.stl"
    if damage == "corrupt":
        mesh.write_bytes(b"\x00\x01 not an stl")
    else:
        mesh.unlink()
    result = doit(work, "--continue", "convert", library=library)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    assert str(mesh) in output
    assert not (work / "build/usd/box").exists()
    assert (work / "build/usd/crate/crate.usda").is_file()


def test_broken_manifest_is_one_error(tmp_path):
    library = tmp_path / "library.toml"
    library.write_text("[[assets]]\nname = 'x'\nsource = \n")
    result = doit(tmp_path, "convert", library=library)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "not valid TOML" in output and "Traceback" not in output


def test_embedded_library_builds(tmp_path):
    result = doit(tmp_path, "convert", library=REPO / "assets/library.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    built = sorted(p.name for p in (tmp_path / "build/usd").iterdir())
    assert {"mug", "plate", "ball", "cone", "crate", "table"} <= set(built)


def test_ik_study_report_is_written_and_rerun_only_on_change(tmp_path):
    arm = REPO / "assets/robots/tiny_arm"
    library = tmp_path / "library.toml"
    entry = f"""
[[assets]]
name = "arm"
source = "{arm / 'urdf/tiny_arm.urdf'}"
packages = {{ tiny_arm = "{arm}" }}
ee_body = "hand"
ik = {{ num_targets = 64, home_iterations = 60, seed = 3 }}
[assets.cfg]
fix_base = true
"""
    library.write_text(entry)
    first = doit(tmp_path, "ik", library=library)
    assert first.returncode == 0, first.stdout + first.stderr
    report_path = tmp_path / "build/usd/arm/arm.ik.json"
    import json

    report = json.loads(report_path.read_text())
    assert report["ee_body"] == "hand" and report["settings"]["num_targets"] == 64
    assert 0.9 <= report["runs"]["perturbed"]["success_rate"] <= 1.0
    assert report["runs"]["home"]["max_iterations"] == 60
    again = doit(tmp_path, "ik", library=library)
    assert again.returncode == 0 and ".  ik:arm" not in again.stdout
    library.write_text(entry.replace("seed = 3", "seed = 4"))
    changed = doit(tmp_path, "ik", library=library)
    assert ".  ik:arm" in changed.stdout and ".  convert:arm" not in changed.stdout


def test_warnings_print_one_line_each_like_the_cli_and_list_describes_each_group(tmp_path):
    """Issue 11 item 9: a conversion warning in `doit convert` is `usdforge: warning: …` on one line (as the
    CLI prints it), not Python's `file:line: ConversionWarning:` plus a line of our source; in `doit list`
    no task group shows another group's description (it once showed the scan group with convert's)."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "arm.urdf").write_text("""<robot name="arm">
  <link name="base"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>
  </inertial></link>
  <link name="tip"/>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="tip"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>
""")
    library = tmp_path / "lib" / "library.toml"
    library.write_text('[[assets]]\nname = "arm"\nsource = "arm.urdf"\n')
    work = tmp_path / "work"
    work.mkdir()
    result = doit(work, "convert", library=library)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "placeholder mass" in line]
    assert len(lines) == 1 and lines[0].startswith("usdforge: warning: "), result.stderr
    assert "arm.urdf" in lines[0] and '<link name="tip">' in lines[0]
    assert "ConversionWarning" not in result.stderr and "warn(" not in result.stderr
    listing = doit(work, "list", library=library)
    described = dict(line.split(None, 1) for line in listing.stdout.splitlines() if line.strip())
    assert described["convert"].startswith("Convert every library entry")
    assert len(set(described.values())) == len(described), described  # no group borrows another's


def test_ik_study_settings_for_several_end_effectors_and_collision(tmp_path):
    arm = REPO / "assets/robots/tiny_arm"
    library = tmp_path / "library.toml"
    library.write_text(f"""
[[assets]]
name = "arm"
source = "{arm / 'urdf/tiny_arm.urdf'}"
packages = {{ tiny_arm = "{arm}" }}
ee_body = "hand"
ik = {{ num_targets = 32, home_iterations = 40, ee_bodies = ["forearm"], weights = [1.0, 0.5], num_seeds = 2, collision = true, collision_pairs = [[["base_link", "shoulder"], ["hand", "left_finger", "right_finger"]]] }}
[assets.cfg]
fix_base = true
""")
    done = doit(tmp_path, "ik", library=library)
    assert done.returncode == 0, done.stdout + done.stderr
    import json

    report = json.loads((tmp_path / "build/usd/arm/arm.ik.json").read_text())
    assert report["ee_bodies"] == ["hand", "forearm"] and report["weights"] == [1.0, 0.5]
    assert report["collision"]["capsules"] > 0 and report["runs"]["home"]["num_seeds"] == 2
    assert "in_collision_rate" in report["runs"]["home"]["collision"]
    assert "at_limit_rate" in report["runs"]["perturbed"]["limits"]
    # Only the named link pairs are checked.
    wanted = {frozenset((a, b)) for a in ("base_link", "shoulder") for b in ("hand", "left_finger", "right_finger")}
    checked = {frozenset(p) for p in report["collision"]["body_pairs"]}
    assert checked and checked <= wanted, checked


def test_doits_state_is_never_left_torn_and_a_torn_one_is_checked_again(tmp_path, capsys):
    """doit's JsonDB.dump truncated the state, then wrote it: a build killed in between, or two builds of one
    library ending together (bench/differential.py --seed 23: the shorter state over the longer one's head,
    'Extra data'), left a state every later build died loading, with a traceback and nothing rebuilt."""
    from doit.dependency import JsonDB

    from usdforge.pipeline.tasks import CompactJSONCodec

    path = tmp_path / ".doit.db"
    db = JsonDB(str(path), CompactJSONCodec())
    db.set("convert:a", "_values_:", {"tools": "t"})
    db.dump()
    text = path.read_text()

    def killed(data):
        raise KeyboardInterrupt  # the process ends while the state is being written

    db.set("convert:b", "_values_:", {"tools": "u"})
    db.codec.encode = killed
    with pytest.raises(KeyboardInterrupt):
        db.dump()
    assert JsonDB(str(path), CompactJSONCodec()).get("convert:a", "_values_:") == {"tools": "t"}
    assert [p.name for p in tmp_path.iterdir()] == [".doit.db"]
    path.write_text(text + text[-12:])  # as two writers left it
    torn = JsonDB(str(path), CompactJSONCodec())
    assert torn.get("convert:a", "_values_:") is None and "state (.doit.db) is damaged" in capsys.readouterr().err
    torn.dump()
    assert path.read_text() == "{}"
