"""Shared fixtures: the ../shared test material (fails loudly when missing) and small mesh fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the checkout; the tests that need it fail (not skip) without it."""
    if not (SHARED / "corpus" / "MANIFEST.json").is_file():
        pytest.fail(f"test material missing: expected {SHARED}/corpus (the ../shared folder beside the checkout)")
    return SHARED


@pytest.fixture(autouse=True)
def build_cache(tmp_path_factory, monkeypatch) -> Path:
    """A build cache of each test's own (``USDFORGE_CACHE``), so no test restores what another converted
    and none writes into the checkout's build/cache."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("USDFORGE_CACHE", str(folder))
    return folder
