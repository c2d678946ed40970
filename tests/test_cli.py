"""`usdforge convert`: one-off conversions, laziness, and one-line errors with a non-zero exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pxr import Usd

from meshes import write_mesh


def usdforge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "usdforge.pipeline.cli", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=120)


def test_convert_writes_the_usd_and_is_lazy_then_force_converts(tmp_path):
    source = write_mesh(tmp_path, "stl")
    first = usdforge("convert", str(source), str(tmp_path / "out"))
    assert first.returncode == 0, first.stderr
    usd = tmp_path / "out" / "box.usd"
    assert first.stdout.strip() == str(usd) and Usd.Stage.Open(str(usd)).GetDefaultPrim()
    second = usdforge("convert", str(source), str(tmp_path / "out"))
    assert second.returncode == 0 and "converting" not in second.stderr
    forced = usdforge("convert", str(source), str(tmp_path / "out"), "--force")
    assert forced.returncode == 0 and "force_usd_conversion" in forced.stderr


def test_config_file_sets_cfg_fields(tmp_path):
    source = write_mesh(tmp_path, "stl")
    config = tmp_path / "cfg.toml"
    config.write_text('make_instanceable = false\nmass_props = { mass = 3.0 }\nrigid_props = { rigid_body_enabled = true }\n')
    result = usdforge("convert", str(source), str(tmp_path / "out"), "--config", str(config))
    assert result.returncode == 0, result.stderr
    stage = Usd.Stage.Open(str(tmp_path / "out" / "box.usd"))
    assert stage.GetDefaultPrim().GetAttribute("physics:mass").Get() == 3.0
    assert not (tmp_path / "out" / "Props").exists()


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("usdforge: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    return errors[0]


def test_user_errors_are_one_line_and_write_nothing(tmp_path):
    source = write_mesh(tmp_path, "stl")
    bad_config = tmp_path / "bad.toml"
    bad_config.write_text("scale = [0, 1, 1]\n")
    assert "does not exist" in one_line_error(usdforge("convert", str(tmp_path / "nope.stl"), str(tmp_path / "o1")))
    assert f"{bad_config}: scale: expected 3 finite non-zero" in one_line_error(
        usdforge("convert", str(source), str(tmp_path / "o2"), "--config", str(bad_config)))
    corrupt = tmp_path / "corrupt.stl"
    corrupt.write_bytes(b"\x00\x01")
    assert str(corrupt) in one_line_error(usdforge("convert", str(corrupt), str(tmp_path / "o3")))
    assert "extension" in one_line_error(usdforge("convert", str(tmp_path / "x.xyz"), str(tmp_path / "o4")))
    assert "only URDF" in one_line_error(usdforge("convert", str(source), str(tmp_path / "o5"), "--package", "a=b"))
    for name in ("o1", "o2", "o3", "o4", "o5"):
        assert not (tmp_path / name).exists()
    usage = usdforge("convert", str(source))
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_help_names_every_option():
    text = usdforge("convert", "--help").stdout
    for option in ("--package", "--config", "--force", "IN", "OUT_DIR"):
        assert option in text


def test_warnings_are_one_line_each_and_quiet_silences_them(tmp_path):
    urdf = tmp_path / "odd.urdf"
    urdf.write_text('<robot name="odd"><link name="base"><inertial><mass value="1"/>'
                    '<inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>'
                    '<sparkle colour="pink"/></robot>')
    default = usdforge("convert", str(urdf), str(tmp_path / "a"))
    assert default.returncode == 0 and "sparkle" not in default.stderr, "kept data is a note: only with -v"
    loud = usdforge("convert", str(urdf), str(tmp_path / "c"), "-v")
    assert loud.returncode == 0, loud.stderr
    note_lines = [line for line in loud.stderr.splitlines() if "sparkle" in line]
    assert note_lines and all(line.startswith("usdforge: note: ") and f"{urdf}:1" in line for line in note_lines)
    assert "warn(" not in loud.stderr
    quiet = usdforge("convert", str(urdf), str(tmp_path / "b"), "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_the_console_entry_ends_without_teardown_but_joins_threads_runs_atexit_and_flushes(tmp_path):
    """``console`` (the ``usdforge`` script) ends the process with ``os._exit`` after ``main``, skipping the
    interpreter's teardown, but still waits for a thread that is not a daemon, runs the ``atexit``
    functions, flushes what was printed and exits with ``main``'s status."""
    script = (
        "import atexit, sys, threading, time\n"
        "from pathlib import Path\n"
        "out = Path(sys.argv[1])\n"
        "atexit.register(lambda: (out / 'atexit').write_text('ran'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), (out / 'thread').write_text('done'))).start()\n"
        "sys.argv = ['usdforge', 'cache', 'stats', '--cache', str(out / 'cache')]\n"
        "from usdforge.pipeline.cli import console\n"
        "console()\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the command's output was not flushed"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "done"
    failed = subprocess.run([sys.executable, "-c", script.replace("'stats'", "'nonsense'"), str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode == 2 and "invalid choice" in failed.stderr  # argparse's usage error, as before
