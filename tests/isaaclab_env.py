"""Isaac Lab 3.0.0's differential IK controller, its own torch code, for the parity tests.

Isaac Lab 3.0.0 needs Python 3.12 and Isaac Sim to import as a package, but its controller files only
need torch: ``build/venv-torch-ik`` (``python -m venv`` + ``pip install torch==2.13.0 numpy``; not ``build/venv-isaaclab``, the whole Isaac Lab 3.0 of ``rules.verify.engines``) runs
``isaaclab/controllers/differential_ik.py``, ``differential_ik_cfg.py`` and ``utils/math.py`` taken from
the registry's wheel (``pip download isaaclab==3.0.0 --no-deps``) into ``build/isaaclab-3.0.0``, loaded
as bare modules by ``isaaclab_controller.py``. Both are made on first use and reused after; a test
skips with the reason when either cannot be made (no registry, no torch wheel for this Python).
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[1] / "build"
TORCH = "torch==2.13.0"
ISAACLAB = "isaaclab==3.0.0"
FILES = ("isaaclab/controllers/differential_ik.py", "isaaclab/controllers/differential_ik_cfg.py",
         "isaaclab/utils/math.py")
SCRIPT = Path(__file__).with_name("isaaclab_controller.py")


def _run(step: list[str]) -> None:
    done = subprocess.run(step, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        pytest.skip(f"Isaac Lab 3.0.0 parity needs {' '.join(step[-4:])}, which failed: "
                    f"{(done.stdout + done.stderr).strip().splitlines()[-1:]}")


def isaaclab_python() -> tuple[Path, Path]:
    """(interpreter with torch, folder holding Isaac Lab 3.0.0's controller files); skips when impossible."""
    venv = BUILD / "venv-torch-ik"
    python = venv / "bin" / "python"
    marker = venv / "usdforge-requirement.txt"
    if not (python.is_file() and marker.is_file() and marker.read_text() == TORCH):
        _run([sys.executable, "-m", "venv", "--clear", str(venv)])
        _run([str(python), "-m", "pip", "install", "--quiet", TORCH, "numpy"])
        marker.write_text(TORCH)
    root = BUILD / "isaaclab-3.0.0"
    if not all((root / f).is_file() for f in FILES):
        wheels = BUILD / "wheels"
        # Isaac Lab 3.0.0 declares Python >= 3.12: fetch its (pure-Python) wheel for that version.
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
              "--python-version", "3.12", "-d", str(wheels), ISAACLAB])
        wheel = next(wheels.glob("isaaclab-3.0.0-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            for f in FILES:
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).write_bytes(zf.read(f))
    return python, root


def run_isaaclab(request: dict, arrays_path: Path) -> dict:
    """Run the cases of ``request`` with Isaac Lab's controller on the arrays in ``arrays_path`` (npz);
    the results come back in ``arrays_path`` with an ``.out.npz`` suffix and as the returned JSON."""
    python, root = isaaclab_python()
    req = arrays_path.with_suffix(".json")
    req.write_text(json.dumps(request))
    done = subprocess.run([str(python), str(SCRIPT), str(root), str(req), str(arrays_path)],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        pytest.fail(f"Isaac Lab's controller failed:\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
