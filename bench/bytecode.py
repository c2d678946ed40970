"""Compile a usdforge checkout's modules as ``pip install`` does, before a bench times whole processes.

Python would not write the bytecode itself where ``PYTHONDONTWRITEBYTECODE`` is set or the checkout is
read-only, and ``compileall`` skips usdforge's subpackages, which are symbolic links (``usdforge/pipeline``
→ ``../pipeline``), unless each is named. Without this every timed run compiles ~70 modules from source
(about 0.1 s of CPU), which no user's install does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def compile_package(where: str | Path, *files: str | Path) -> None:
    """Compile the package folder ``where``, each symlinked subpackage in it and ``files`` (a dodo.py, which
    doit imports as a module) (a warning on failure)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    folders = [str(where), *(str(Path(where, name).resolve()) for name in sorted(os.listdir(where))
                             if Path(where, name).is_symlink() and Path(where, name).is_dir()), *map(str, files)]
    done = subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        print(f"bench: warning: compileall {where} failed; usdforge runs compile from source:\n"
              f"{done.stdout[-500:]}", file=sys.stderr)
