"""Atomic output: build into a temporary sibling folder, then rename it into place (a first build) or
rename each file into place.

A failed conversion leaves the previous output untouched and no partial files; files an earlier run wrote
that this run does not write are removed; the lazy key is written last, so an interrupted move is seen
as stale next time.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Callable


def build_atomically(usd_dir: Path, build: Callable[[Path], list[Path]], key_name: str,
                     make_key: Callable[[dict[str, Path]], str], previous_outputs: list[str]) -> list[str]:
    """Run ``build(tmp_dir)`` and move what it wrote into ``usd_dir``; return the relative paths written.

    build: writes into the folder it is given and returns the files it wrote.
    key_name: file name of the lazy key, written last from ``make_key({relative: final path})``.
    previous_outputs: relative paths the previous build wrote (from its key), removed if not rewritten.
    """
    usd_dir.parent.mkdir(parents=True, exist_ok=True)
    # Not mkdtemp: its 0700 would stay on usd_dir when the staging folder is renamed into place whole.
    staging = usd_dir.parent / f".{usd_dir.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
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
        folders = {usd_dir}
        for name in relative:
            destination = usd_dir / name
            if destination.parent not in folders:
                destination.parent.mkdir(parents=True, exist_ok=True)
                folders.add(destination.parent)
            os.replace(staging / name, destination)
        for name in set(previous_outputs) - set(relative) - {key_name}:
            stale = usd_dir / name
            if stale.is_file():
                stale.unlink()
                _remove_empty_parents(stale.parent, usd_dir)
        os.replace(staging / key_name, usd_dir / key_name)
        return relative
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


def _remove_empty_parents(folder: Path, stop: Path) -> None:
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
