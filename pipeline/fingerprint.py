"""Content hashes of files: what "changed" means for usdforge (never modification times)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def file_digest(path: str | Path) -> str:
    """SHA-256 (hex) of the file's bytes; ``"missing"`` when there is no such file."""
    try:
        with open(path, "rb") as stream:
            # hashlib.file_digest reads into one reused buffer (no allocation per chunk).
            return hashlib.file_digest(stream, "sha256").hexdigest()
    except FileNotFoundError:
        return "missing"


def digests(paths: list[str | Path]) -> dict[str, str]:
    """``{normalised path: digest}`` for each path (sorted, so the dict's order is stable)."""
    return {normalise(p): file_digest(p) for p in sorted({normalise(p) for p in paths})}


def normalise(path: str | Path) -> str:
    """One spelling per file (absolute, no ``..``, no symlink resolution): doit matches paths as strings."""
    return os.path.abspath(os.fspath(path))
