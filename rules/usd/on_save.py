"""Custom layer data to set as a layer is saved (the provenance record): held in a context variable, with
no pxr import, so that a build enters the block before the USD libraries are loaded (an MJCF conversion
loads them on a thread while MuJoCo compiles; see ``rules.mjcf.load``)."""

from __future__ import annotations

import contextlib
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

_ON_SAVE: ContextVar[tuple[str, str, dict, set[str]] | None] = ContextVar("usdforge_on_save", default=None)


@contextlib.contextmanager
def custom_data_on_save(path: Path, key: str, value: dict) -> Iterator[set[str]]:
    """Within the block, ``save_stage`` (or ``RobotLayers.save``) of the layer at ``path`` sets its
    ``customLayerData[key]`` to ``value`` before writing it, in the one save. Yields a set that holds
    ``path`` once that happened. A text layer's bytes are those of adding the data to the saved file and
    saving it again; a crate layer's are smaller than those (a second crate save appends the changed
    sections to the file), and it is written once instead of twice."""
    done: set[str] = set()
    token = _ON_SAVE.set((os.path.realpath(path), key, value, done))
    try:
        yield done
    finally:
        _ON_SAVE.reset(token)


def pending_custom_data(path: Path) -> tuple[str, dict, set[str]] | None:
    """(key, value, done) of the enclosing ``custom_data_on_save`` when it names ``path``, else None."""
    pending = _ON_SAVE.get()
    if pending is None or pending[0] != os.path.realpath(path):
        return None
    return pending[1], pending[2], pending[3]
