"""Third-party engines that read our USD, each in its own virtual environment under ``build/``.

Newton 1.8 pins usd-core < 26.9 and mujoco 3.17; MuJoCo 4.0's USD decoder (``mujoco[usd]``) pins usd-core
25.11: neither can share usdforge's environment nor each other's. The first test run creates
``build/venv-<engine>`` (``python -m venv`` + ``pip install``, a few minutes, needs the package index);
later runs reuse it (delete the folder to rebuild). Warp's kernel cache is kept in ``build/warp-cache``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[1] / "build"
WARP_CACHE = BUILD / "warp-cache"
ENGINES = {
    "newton": "newton[importers,sim]==1.8.0",
    "mujoco-usd": "mujoco[usd]==4.0.0",
}


def engine_python(name: str) -> Path:
    """The interpreter of ``build/venv-<name>``, created and installed on first use (fails the test, with
    pip's output, when that is impossible)."""
    venv = BUILD / f"venv-{name}"
    python = venv / "bin" / "python"
    marker = venv / "usdforge-requirement.txt"
    if python.is_file() and marker.is_file() and marker.read_text() == ENGINES[name]:
        return python
    for step in ([sys.executable, "-m", "venv", "--clear", str(venv)],
                 [str(python), "-m", "pip", "install", "--quiet", ENGINES[name]]):
        done = subprocess.run(step, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            pytest.fail(f"could not set up {ENGINES[name]!r} in {venv}: {' '.join(step)} failed:\n"
                        f"{(done.stdout + done.stderr)[-3000:]}")
    marker.write_text(ENGINES[name])
    return python


def run_in_engine(name: str, script: Path, *args: str, cwd: Path | None = None) -> dict:
    """Run ``script`` with the engine's interpreter (our PYTHONPATH removed); the JSON of its last line."""
    WARP_CACHE.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WARP_CACHE_PATH": str(WARP_CACHE)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(engine_python(name)), str(script), *args], capture_output=True, text=True,
                          env=env, timeout=1800, cwd=cwd)
    if done.returncode != 0:
        pytest.fail(f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
