"""The engine environments for the tests: ``usdforge.rules.verify.engines`` (the same implementation
``doit verify`` uses), made under the checkout's ``build/`` on the first run and reused after; a failure
to make or run one fails the test with the engine's output."""

from __future__ import annotations

from pathlib import Path

import pytest

from usdforge.rules.verify import engines

BUILD = Path(__file__).resolve().parents[1] / "build"
ENGINES = engines.ENGINES


def engine_python(name: str) -> Path:
    """The interpreter of ``build/venv-<name>``, created and installed on first use."""
    try:
        return engines.engine_python(name, BUILD, create=True)
    except engines.EngineError as exc:
        pytest.fail(str(exc))


def run_in_engine(name: str, script: Path, *args: str, cwd: Path | None = None) -> dict:
    """Run ``script`` with the engine's interpreter (our PYTHONPATH removed); the JSON of its last line."""
    try:
        return engines.run_in_engine(name, script, *args, build_dir=BUILD, cwd=cwd, create=True)
    except engines.EngineError as exc:
        pytest.fail(str(exc))
