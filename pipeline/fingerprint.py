"""Content hashes of files: what "changed" means for usdforge (never modification times)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def file_digest(path: str | Path) -> str:
    """SHA-256 (hex) of the file's bytes; ``"missing"`` when there is no such file, ``"not-a-file"`` when it
    is not a regular file (a device such as /dev/zero or a FIFO would never end: conversion reports it)."""
    try:
        # Non-blocking open, then fstat: a FIFO put in the file's place never blocks the hash.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            return "not-a-file"
        with open(descriptor, "rb") as stream:
            # hashlib.file_digest reads into one reused buffer (no allocation per chunk).
            return hashlib.file_digest(stream, "sha256").hexdigest()
    except FileNotFoundError:
        return "missing"
    except OSError:  # a symlink loop, a permission: the conversion reports it, with the element naming it
        return "unreadable"


def digests(paths: list[str | Path]) -> dict[str, str]:
    """``{normalised path: digest}`` for each path (sorted, so the dict's order is stable)."""
    return {normalise(p): file_digest(p) for p in sorted({normalise(p) for p in paths})}


def normalise(path: str | Path) -> str:
    """One spelling per file (absolute, no ``..``, no symlink resolution): doit matches paths as strings."""
    return os.path.abspath(os.fspath(path))
