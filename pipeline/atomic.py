"""Atomic output: build into a temporary sibling folder, then rename it into place (a first build) or
rename each file into place.

A failed conversion leaves the previous output untouched and no partial files; files an earlier run wrote
that this run does not write are removed; the lazy key is written last, so an interrupted move is seen
as stale next time. The temporary folder of a killed conversion (its process gone) is removed by the next
build of the same output.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path
from typing import Callable

from usdforge.pipeline.cache import unsafe_file_name


def _host() -> str:
    """This machine's host name, as ``socket.gethostname()`` gives it (without importing socket and
    selectors: a first conversion's imports are most of its time)."""
    return os.uname().nodename

#: A temporary folder of unknown origin (no host and process in its name) older than this is stale, in s.
STALE_AFTER_S = 3600.0


def staging_prefix(usd_dir: Path) -> str:
    """``.<name>.tmp-`` : every temporary folder of ``usd_dir`` starts so (``clean`` removes them)."""
    return f".{usd_dir.name}.tmp-"


def _owner_alive(name: str, prefix: str) -> bool:
    """Whether the process that made the temporary folder ``name`` (``<prefix><host>-<pid>-<random>``)
    may still be writing it: a process on another host, or a live one here; folders of unknown origin
    count as alive until ``STALE_AFTER_S`` old (the caller checks the age)."""
    parts = name[len(prefix):].split("-")
    if len(parts) < 3 or not parts[-2].isdigit():
        return True
    host, pid = "-".join(parts[:-2]), int(parts[-2])
    if host != _host():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited but not been reaped (a worker of a killed build whose new parent, e.g. a
    container's init, does not reap): it answers signals but writes nothing any more. Linux's /proc; False
    where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            # "pid (comm) state ...": the command may hold spaces and parentheses; the state follows the last ')'.
            return stat_file.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


#: How long a listing of the output folders' parent serves ``remove_stale_staging`` in one process.
RESCAN_AFTER_S = 60.0
_STAGING_SEEN: dict[str, tuple[float, list[str]]] = {}  # parent → (when listed, its temporary folders' names)


def remove_stale_staging(usd_dir: Path) -> list[Path]:
    """Remove the temporary folders of ``usd_dir`` left by conversions that were killed (their process
    is gone, or, of unknown origin, older than ``STALE_AFTER_S``); return them. A concurrent build's
    folder is left alone.

    They lie beside every entry's output folder (``<build>/usd/``, one rename from their place): the
    folder is listed once a minute per process, not once per conversion, which for a library of N
    entries would list N names N times. A conversion killed meanwhile by another process leaves its
    folder to the next listing."""
    parent = str(usd_dir.parent)
    seen = _STAGING_SEEN.get(parent)
    if seen is None or time.monotonic() - seen[0] > RESCAN_AFTER_S:
        try:
            with os.scandir(parent) as listing:
                names = [item.name for item in listing if ".tmp-" in item.name]
        except OSError:
            return []
        seen = _STAGING_SEEN[parent] = (time.monotonic(), names)
    prefix = staging_prefix(usd_dir)
    return _remove_stale(usd_dir.parent, prefix, folders=True,
                         names=[name for name in seen[1] if name.startswith(prefix)])


def _remove_stale(parent: Path, prefix: str, folders: bool, names: list[str] | None = None) -> list[Path]:
    """Remove the temporary folders (or files) in ``parent`` named ``<prefix><host>-<pid>-<random>`` whose
    writer is gone, and those of unknown origin older than ``STALE_AFTER_S``; return them. names: the
    candidates' names, known from a listing of ``parent``; None: list it."""
    removed: list[Path] = []
    try:
        candidates = [p for p in (parent.iterdir() if names is None else (parent / n for n in names))
                      if p.name.startswith(prefix) and (p.is_dir() if folders else p.is_file())]
    except OSError:
        return removed
    for stale in candidates:
        parts = stale.name[len(prefix):].split("-")
        known = len(parts) >= 3 and parts[-2].isdigit()
        try:
            old = time.time() - stale.stat().st_mtime > STALE_AFTER_S
        except OSError:
            continue
        if (known and not _owner_alive(stale.name, prefix)) or (not known and old):
            if folders:
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
            removed.append(stale)
    return removed


def remove_stale_writes(path: Path) -> list[Path]:
    """Remove the temporary siblings of ``path`` that ``write_text_atomically`` calls of killed processes
    left; return them."""
    return _remove_stale(path.parent, f".{path.name}.tmp-", folders=False)


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling (``.<name>.tmp-<host>-<pid>-<random>``) renamed
    into place. The temporary siblings that killed writers left (their process gone) are removed first: a
    kill between writing and renaming leaves a stray file only until the next write of the same file."""
    remove_stale_writes(path)
    staging = path.with_name(f".{path.name}.tmp-{_host()}-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        staging.write_text(text, encoding="utf-8")
        os.replace(staging, path)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise


def build_atomically(usd_dir: Path, build: Callable[[Path], list[Path]], key_name: str,
                     make_key: Callable[[dict[str, Path]], str], previous_outputs: list[str],
                     unchanged: Callable[[str, Path], bool] | None = None) -> list[str]:
    """Run ``build(tmp_dir)`` and move what it wrote into ``usd_dir``; return the relative paths written.

    build: writes into the folder it is given and returns the files it wrote.
    key_name: file name of the lazy key, written last from ``make_key({relative: final path})``.
    previous_outputs: relative paths the previous build wrote (from its key), removed if not rewritten.
    unchanged: ``unchanged(name, destination)``: whether the file at ``destination`` holds the bytes this
        build wrote as ``name`` already; it is then left as it is, not replaced (on ext4 replacing a file
        frees its blocks: most of a cfg-only rebuild of a small robot where the disk is slow).
    """
    usd_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(usd_dir)
    # Host and process in the name: a later build can tell a killed conversion's folder from a live one.
    # Not mkdtemp: its 0700 would stay on usd_dir when the staging folder is renamed into place whole.
    staging = usd_dir.parent / f"{staging_prefix(usd_dir)}{_host()}-{os.getpid()}-{os.urandom(4).hex()}"
    # Before the build too: it reads the previous outputs (layers taken unchanged, outputs compared), which
    # must not be read through a folder made a link since either.
    _refuse_linked_folder(usd_dir, [name for name in previous_outputs if unsafe_file_name(name) is None],
                          links_only=True)
    staging.mkdir()
    try:
        written = build(staging)
        relative = sorted(relative_names(written, staging))
        key_text = make_key({name: staging / name for name in relative})
        (staging / key_name).write_text(key_text)
        if not usd_dir.exists():
            # A first build (a fresh clone restoring from the cache): one rename moves everything, key
            # included; a folder created meanwhile by a concurrent build makes it fail, then file by file.
            try:
                os.rename(staging, usd_dir)
                return relative
            except OSError:
                pass
        usd_dir.mkdir(parents=True, exist_ok=True)
        _refuse_linked_folder(usd_dir, relative)  # before any file moves: a refused build publishes nothing
        folders = {usd_dir}
        for name in relative:
            destination = usd_dir / name
            if destination.parent not in folders:
                destination.parent.mkdir(parents=True, exist_ok=True)
                folders.add(destination.parent)
            if unchanged is None or not unchanged(name, destination):
                os.replace(staging / name, destination)
        for name in set(previous_outputs) - set(relative) - {key_name}:
            # The names come from the previous lazy key, a file in the output folder: only a plain relative
            # path whose folder is inside the output folder (no ``..``, no linked folder) is removed.
            stale = usd_dir / name
            if unsafe_file_name(name) is not None or \
                    not Path(os.path.realpath(stale.parent)).is_relative_to(os.path.realpath(usd_dir)):
                continue
            if stale.is_file():
                stale.unlink()
                _remove_empty_parents(stale.parent, usd_dir)
        os.replace(staging / key_name, usd_dir / key_name)
        return relative
    except OSError as exc:  # a write failed (a full disk): named as the output, not the temporary folder
        text = str(exc).replace(str(staging), str(usd_dir))
        if text == str(exc):
            raise
        error = OSError(text)
        error.errno = exc.errno
        raise error from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def relative_names(paths: list[Path], staging: Path) -> set[str]:
    """POSIX names of ``paths`` (files written under ``staging``) relative to ``staging``: lexically for
    paths spelled under it, as the builders give them (``Path.resolve`` costs a stat per component of
    every path, most of a restore's system calls); resolved for any other spelling (a link to it)."""
    prefix = str(staging) + os.sep
    names, real = set(), None
    for path in paths:
        text = str(path)
        name = os.path.normpath(text[len(prefix):]) if text.startswith(prefix) else None
        if name is None or name == os.pardir or name.startswith(os.pardir + os.sep):
            real = real or staging.resolve()
            name = str(Path(path).resolve().relative_to(real))
        names.add(Path(name).as_posix())
    return names


def _refuse_linked_folder(usd_dir: Path, names: list[str], links_only: bool = False) -> None:
    """OSError naming the first folder ``_linked_folder`` finds on the way to ``names`` in ``usd_dir``."""
    linked = _linked_folder(usd_dir, names, links_only)
    if linked is not None:
        raise OSError(f"{usd_dir / linked}: a folder of the output is a symbolic link or no folder: nothing is "
                      "read or written through it (remove it and build again)")


def _linked_folder(usd_dir: Path, names: list[str], links_only: bool = False) -> str | None:
    """The first folder on the way to a file of ``names`` (relative to ``usd_dir``) that is there but is no
    folder, a symbolic link included (not followed), or None. Publishing moves files into those folders:
    one made a link (by hand, or by a tool that swapped it) would take the output's files wherever it
    points. links_only: only a symbolic link counts (the previous outputs' names, from the lazy key: a
    folder since replaced by a file is left to the publish)."""
    seen: set[str] = set()
    for name in names:
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            if folder in seen:
                continue
            seen.add(folder)
            try:
                info = os.lstat(usd_dir / folder)
            except FileNotFoundError:
                break  # made by the publish, as a folder
            if stat.S_ISLNK(info.st_mode) or not (links_only or stat.S_ISDIR(info.st_mode)):
                return folder
            if not stat.S_ISDIR(info.st_mode):
                break
    return None


def _remove_empty_parents(folder: Path, stop: Path) -> None:
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
