"""``<stem>.convert.json`` beside a conversion's output: how long the last real conversion took (wall and
CPU seconds, and when it started: ``pipeline.stage_time``), the warnings it issued and its notes (``rules.conversion_warnings``: what was kept or ignored harmlessly, how
each ROS package resolved), for ``doit report``. Written by the ``convert`` task; not one of its targets."""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from pathlib import Path
from typing import Iterator

import attrs


def record_path(usd_dir: str | Path, usd_file_name: str) -> Path:
    from usdforge.rules.outputs import usd_stem

    return Path(usd_dir) / f"{usd_stem(usd_file_name)}.convert.json"


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


@attrs.define
class Recording:
    """What ``recording`` saw: wall time (s), CPU time (s; None when it ran elsewhere, on a Dask worker),
    warning and note messages, and when it started (ns)."""

    seconds: float = 0.0
    cpu_seconds: float | None = None
    messages: list[str] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)
    started_ns: int = attrs.field(factory=time.time_ns)

    def save(self, usd_dir: str | Path, usd_file_name: str, key_path: Path) -> None:
        """Write the record, unless the converter found its outputs up to date (its lazy key older than
        this conversion) and an earlier record exists: that one describes the real conversion."""
        from usdforge.pipeline.atomic import remove_stale_writes, write_text_atomically

        record = record_path(usd_dir, usd_file_name)
        key_mtime = _mtime(key_path)
        if record.is_file() and key_mtime is not None and key_mtime < self.started_ns:
            remove_stale_writes(record)  # a build killed while rewriting it
            return
        cpu = None if self.cpu_seconds is None else round(self.cpu_seconds, 3)
        write_text_atomically(record, json.dumps({"seconds": round(self.seconds, 3), "cpu_seconds": cpu,
                                                  "started": round(self.started_ns / 1e9, 3),
                                                  "warnings": self.messages, "notes": self.notes}, indent=1) + "\n")


@contextlib.contextmanager
def recording() -> Iterator[Recording]:
    """Time the block and collect its warnings; they are shown as usual when it ends."""
    from usdforge.pipeline.stage_time import cpu_seconds

    result = Recording()
    started, cpu = time.perf_counter(), cpu_seconds()
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield result
    finally:
        result.seconds = time.perf_counter() - started
        result.cpu_seconds = cpu_seconds() - cpu
        from usdforge.rules.conversion_warnings import is_note

        result.messages = [str(w.message) for w in caught if not is_note(w.message)]
        result.notes = [str(w.message) for w in caught if is_note(w.message)]
        for warning in caught:  # also when the block failed
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
