"""Content hashes of files: what "changed" means for usdforge, and when a file's stat stamp may stand in for
its hash (as git's index does: ``file_stamp``, ``settled``, ``unchanged``)."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Below this many bytes in all, files are read in one thread: starting threads would cost more than
#: sharing the reading saves (measured: 27 small URDF meshes hash in 1.0 ms in one thread, 3.3 ms in two).
THREADED_MIN_BYTES = 4 << 20


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


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity: a CI job or container may get fewer than the
    machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def by_size_in_threads(function: Callable[[T], R], items: Sequence[T], sizes: Sequence[int]) -> list[R]:
    """``[function(item) for item in items]``, shared out over the usable cores when the items (files of
    ``sizes`` bytes) are large enough in all: one thread per core, each given items of about the same total
    size, the calling thread one of them. For functions that spend their time in file reads and hashlib,
    which release the GIL."""
    workers = min(len(items), usable_cores(), 8)
    if workers < 2 or sum(sizes) < THREADED_MIN_BYTES:
        return [function(item) for item in items]
    shares: list[list[int]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for index in sorted(range(len(items)), key=lambda i: -sizes[i]):  # largest first, to the lightest share
        lightest = loads.index(min(loads))
        shares[lightest].append(index)
        loads[lightest] += sizes[index]
    results: list[R | None] = [None] * len(items)

    def run(share: list[int]) -> None:
        for index in share:
            results[index] = function(items[index])

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers - 1) as pool:
        pending = [pool.submit(run, share) for share in shares[1:]]
        run(shares[0])
        for future in pending:
            future.result()  # re-raises what a share raised
    return results  # type: ignore[return-value]


def file_size(path: str | Path) -> int:
    """The size of the file in bytes; 0 when it cannot be stat'ed (missing, no permission)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


#: A file changed this recently (s) before it was hashed is not trusted by its stamp: a later same-size edit
#: within the same tick of the file system's clock would keep the stamp (git's "racily clean" files). Times
#: in whole seconds may come from a coarse file system (FAT: 2 s ticks); finer times tick at the kernel's
#: coarse clock (milliseconds).
RACY_SECONDS = 2.0
RACY_SECONDS_FINE = 0.1


def file_stamp(path: str | Path) -> list[int] | None:
    """[size, mtime_ns, ctime_ns, inode, device] of a regular file, or None (missing, not a file). The
    change time cannot be set by tools that restore modification times (``cp -p``, ``rsync -t``, ``tar
    x``), and any write, rename or copy moves it; the inode and device change when the file is replaced or
    the checkout is cloned or moved to another file system."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    # & (2**63 - 1): TOML and JSON readers hold 64-bit signed integers.
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino & (2 ** 63 - 1),
            info.st_dev & (2 ** 63 - 1)]


def settled(stamp: list[int] | None, hashed_at: int | None = None) -> bool:
    """Whether a stamp may be trusted later: its file last changed more than ``RACY_SECONDS`` (or
    ``RACY_SECONDS_FINE`` when its times have a sub-second part) before ``hashed_at`` (ns since the
    epoch; default now), when its content started being read: any later change gets a later time."""
    if stamp is None:
        return False
    fine = stamp[1] % 1_000_000_000 != 0 or stamp[2] % 1_000_000_000 != 0
    window = min(RACY_SECONDS_FINE, RACY_SECONDS) if fine else RACY_SECONDS
    start = time.time_ns() if hashed_at is None else hashed_at
    return start - max(stamp[1], stamp[2]) > window * 1e9


def stamped_digest(path: str | Path) -> tuple[str, list[int] | None]:
    """(``file_digest`` of the file, its stamp when it was settled and did not change while hashed, else
    None): a stamp is only worth trusting later when the content hashed is the content it describes."""
    started = time.time_ns()
    before = file_stamp(path)
    digest = file_digest(path)
    return digest, (before if settled(before, started) and file_stamp(path) == before else None)


def unchanged(path: str | Path, stamp: list[int] | None, sha: str) -> bool:
    """Whether the file still has the content ``sha``: by its stamp when one was recorded (settled when it
    was hashed, see ``stamped_digest``) and is unchanged in every field, else by hashing it again."""
    if stamp is not None and file_stamp(path) == stamp:
        return True
    return file_digest(path) == sha
