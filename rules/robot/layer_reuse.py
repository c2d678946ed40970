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

_SCOPE: ContextVar[tuple[Any, dict[str, str], dict[str, str], set[str]] | None] = \
    ContextVar("usdforge_layers", default=None)


@contextmanager
def layer_scope(store: Any, keys: dict[str, str], files: dict[str, str]) -> Iterator[set[str]]:
    """Within the block, ``reused`` looks units up in ``store``: keys {unit: key}, files {unit: the
    unit's file, relative to the output folder}. store None: no reuse. Yields the set of units restored
    from the cache (filled as the block runs: ``store_units`` need not store them again)."""
    restored: set[str] = set()
    token = _SCOPE.set(None if store is None else (store, keys, files, restored))
    try:
        yield restored
    finally:
        _SCOPE.reset(token)


#: Files a unit carries besides its own, by unit: the materials layer's textures (written by the same
#: authoring pass and named by it), restored with it.
_COMPANIONS = {"materials": "textures/"}


def reused(unit: str) -> dict[str, bytes] | None:
    """The files of ``unit`` (relative name → bytes: its file, and for materials the texture files it
    names) from the build cache when its key is there, else None."""
    scope = _SCOPE.get()
    if scope is None or unit not in scope[1]:
        return None
    store, keys, files, restored = scope
    artifact = store.get_entry(keys[unit])
    store.record(f"layer:{unit}", hit=artifact is not None)
    if artifact is None or files[unit] not in artifact.files or \
            any(name != files[unit] and not _companion(unit, name) for name in artifact.files):
        return None
    restored.add(unit)
    return dict(artifact.files)


def _companion(unit: str, name: str) -> bool:
    prefix = _COMPANIONS.get(unit)
    return prefix is not None and name.startswith(prefix)


def store_units(store: Any, keys: dict[str, str], files: dict[str, str], written: dict[str, bytes],
                restored: set[str] = frozenset()) -> None:
    """Keep each unit's files (``written``: relative name → bytes of the whole output) under its key;
    units in ``restored`` came from there."""
    for unit, key in keys.items():
        name = files[unit]
        if name in written and unit not in restored:
            own = {other: data for other, data in written.items() if other == name or _companion(unit, other)}
            store.put_entry(key, own, kind=f"layer:{unit}")
