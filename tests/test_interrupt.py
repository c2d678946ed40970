"""Ctrl-C (#24): ``usdforge convert`` and ``doit convert`` stop with one line and no traceback, write
nothing, and leave no process of theirs running (the xacro expansion's included)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_doit import REPO

SLOW = ('<?xml version="1.0"?>\n<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro">\n'
        '  <link name="a${python.sum(python.range(10**10))}"/>\n</robot>\n')  # minutes of arithmetic


def interrupted(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run ``command`` in a process group of its own, Ctrl-C the group (as a terminal does) once the
    expansion runs, and return what it printed; assert no process of the group is left."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # A terminal's foreground job takes Ctrl-C with the default action; a suite started in the background
    # of a non-interactive shell inherits SIGINT ignored, and its children with it: restore the default.
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _expanding(process.pid):
            time.sleep(0.2)
        assert _expanding(process.pid), "the expansion never started"
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
        time.sleep(0.5)
        assert not _expanding(process.pid), "an expansion was left running"
        return subprocess.CompletedProcess(command, process.returncode, out, err)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # whatever the test found, nothing of it runs on
        except ProcessLookupError:
            pass


def _expanding(group: int) -> bool:
    listing = subprocess.run(["ps", "-ww", "-e", "-o", "pgid=,args="], capture_output=True, text=True).stdout
    return any(line.split(None, 1)[0] == str(group) and "xacro_process.py" in line
               for line in listing.splitlines() if line.strip())


def test_ctrl_c_during_usdforge_convert_is_one_line(tmp_path):
    (tmp_path / "slow.urdf.xacro").write_text(SLOW)
    done = interrupted([sys.executable, "-m", "usdforge.pipeline.cli", "convert", "-q", "slow.urdf.xacro", "out"],
                       tmp_path)
    assert "Traceback" not in done.stderr and done.stderr.strip().splitlines() == [
        "usdforge: interrupted: nothing written"], done.stderr
    assert done.returncode == 130 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("processes", ["0", "2"])
def test_ctrl_c_during_doit_convert_is_one_line(tmp_path, processes):
    (tmp_path / "slow.urdf.xacro").write_text(SLOW)
    (tmp_path / "library.toml").write_text('[[assets]]\nname = "slow"\nsource = "slow.urdf.xacro"\n')
    work = tmp_path / "work"
    work.mkdir()
    done = interrupted([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(work), "-n", processes,
                        "convert", f"library={tmp_path / 'library.toml'}"], tmp_path)
    assert "Traceback" not in done.stderr and done.stderr.strip().splitlines() == [
        "usdforge: interrupted: finished entries are kept, the others are converted by the next run"], done.stderr
    assert not (work / "build" / "usd" / "slow").exists()
