"""Per-layer reuse inside one conversion: a layer whose key is in the build cache is written from there
instead of being saved from what was authored. No pxr here.

The pipeline (``pipeline.layer_keys``) computes each unit's key - the source's key (the intermediate's
inputs), the unit's declared cfg fields (``rules.robot.layer_fields``, read through a ``FieldView``) and
the code - and opens ``layer_scope`` around the conversion; ``rules.robot.writer`` and the robot rules ask
``reused`` for a unit's bytes. After the conversion the pipeline stores each unit's files under its key
(``store_units``): the objects are those of the whole output, so only a small entry is added per unit.

A unit's bytes are trusted only as far as the cache is: the store verifies each object's SHA-256, and an
entry naming other files than the unit's is a miss.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

_SCOPE: ContextVar[tuple[Any, dict[str, str], dict[str, str]] | None] = ContextVar("usdforge_layers", default=None)


@contextmanager
def layer_scope(store: Any, keys: dict[str, str], files: dict[str, str]) -> Iterator[None]:
    """Within the block, ``reused`` looks units up in ``store``: keys {unit: key}, files {unit: the
    unit's file, relative to the output folder}. store None: no reuse."""
    token = _SCOPE.set(None if store is None else (store, keys, files))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def reused(unit: str) -> bytes | None:
    """The bytes of ``unit``'s file from the build cache when its key is there, else None."""
    scope = _SCOPE.get()
    if scope is None or unit not in scope[1]:
        return None
    store, keys, files = scope
    artifact = store.get_entry(keys[unit])
    store.record(f"layer:{unit}", hit=artifact is not None)
    if artifact is None or set(artifact.files) != {files[unit]}:
        return None
    return artifact.files[files[unit]]


def store_units(store: Any, keys: dict[str, str], files: dict[str, str], written: dict[str, bytes]) -> None:
    """Keep each unit's file (``written``: relative name → bytes of the whole output) under its key."""
    for unit, key in keys.items():
        name = files[unit]
        if name in written:
            store.put_entry(key, {name: written[name]}, kind=f"layer:{unit}")
