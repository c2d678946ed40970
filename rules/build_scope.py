"""Memos that live for one build of one asset (its dependency scan, cache key and conversion), never
longer: a scan or an expansion is a function of the content of every file it read, and a file can change
between two builds of a long-lived process (a notebook, doit's process, a Dask worker) in ways a stat
stamp of the first file does not show (an OBJ's MTL renamed, a xacro's include edited). No pxr here."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator

_SCOPE: contextvars.ContextVar[dict[str, dict] | None] = contextvars.ContextVar("usdforge_build_scope", default=None)


@contextlib.contextmanager
def one_build() -> Iterator[None]:
    """Within the block, ``memo(name)`` is one dict per name; outside any block it is None (no memo)."""
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


@contextlib.contextmanager
def within_build() -> Iterator[None]:
    """``one_build()``, unless inside one already (the pipeline's, which spans the dependency scan too): a
    rule's ``convert`` called on its own still scans and resolves each file once."""
    if _SCOPE.get() is not None:
        yield
        return
    with one_build():
        yield


def memo(name: str) -> dict[Any, Any] | None:
    """The memo ``name`` of the enclosing ``one_build()``, or None outside one."""
    scope = _SCOPE.get()
    return None if scope is None else scope.setdefault(name, {})
