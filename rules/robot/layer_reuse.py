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

import hashlib
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from usdforge.rules.outputs import ROBOT_LAYER_FILES

#: A unit's files as the previous build left them in the output folder (``layer_scope``'s ``left``).
Left = Callable[[str, str], "dict[str, tuple[bytes, str]] | None"]

#: (store, {unit: key}, {unit: file}, units restored, {file: (sha, size)} restored as they are, {unit: its files
#: as ``supply`` gave them, or None when looked up and missed}, ``layer_scope``'s keep, its left), or None
#: outside one.
_SCOPE: ContextVar[tuple[Any, dict[str, str], dict[str, str], set[str], dict[str, tuple[str, int]],
                         dict[str, dict[str, bytes] | None], Callable[[str, str, Path, bytes], bool],
                         Left | None] | None] = ContextVar("usdforge_layers", default=None)


@contextmanager
def layer_scope(store: Any, keys: dict[str, str], files: dict[str, str],
                keep: Callable[[str, str, Path, bytes], bool], left: Left | None = None) -> Iterator[set[str]]:
    """Within the block, ``reused`` looks units up in ``store``: keys {unit: key}, files {unit: the
    unit's file, relative to the output folder}. store None: no reuse. Yields the set of units restored
    from the cache (filled as the block runs: ``store_units`` need not store them again).

    keep: ``keep(name, sha256, path, data)`` puts the output file ``name`` with those bytes at ``path`` without
    writing them (the output the previous build left holds them: ``pipeline.converters``), True, or
    leaves it to ``write_restored``, False.
    left: ``left(unit, key)``: the unit's files (relative name → (bytes, SHA-256)) as the previous build
    left them in the output folder, when it built them under the same key and they are still those bytes
    (``pipeline.converters``), else None. ``reused`` takes them without a cache lookup: a cfg-only rebuild
    leaves most layers as they are, and reading a unit's entry, claim and object cost more than reading
    and hashing the file it names (most of a small robot's rebuild was a dozen such lookups)."""
    restored: set[str] = set()
    token = _SCOPE.set(None if store is None else (store, keys, files, restored, {}, {}, keep, left))
    try:
        yield restored
    finally:
        _SCOPE.reset(token)


def restored_objects() -> dict[str, tuple[str, int]]:
    """Relative name → (SHA-256, size) of each output file a unit restored in the enclosing ``layer_scope``
    gave as it is in the cache (verified there when read): what storing the output need not read or hash
    again (``pipeline.cache.KnownFiles``). Patch bases are not among them: their bytes are edited."""
    scope = _SCOPE.get()
    return {} if scope is None else dict(scope[4])


def write_restored(path: Path, name: str, data: bytes) -> None:
    """Write the output file ``name`` (relative; at ``path`` in the folder being built) that a unit restored
    in the enclosing ``layer_scope`` gave (``reused``), or that this conversion made from cached parts (a
    layer patched from its base: ``supply``, ``PATCH_BASES``): when the scope's ``keep`` finds those bytes
    in the output already, nothing is written (a new file costs more than the rest of a restored layer);
    else ``data``. Bytes the unit gave as they are in the cache carry their SHA-256 from there; others are
    hashed here (a patched layer the previous build wrote the same: skydio_x2's PhysX-only edit wrote two
    such files, then found them unchanged and left them). Nothing may write ``path`` after this call."""
    scope = _SCOPE.get()
    if scope is None:  # a rule run outside the pipeline
        path.write_bytes(data)
        return
    known = scope[4].get(name)
    sha = known[0] if known is not None and known[1] == len(data) else hashlib.sha256(data).hexdigest()
    if not scope[6](name, sha, path, data):
        with open(path, "xb") as stream:  # a new file in the temporary folder: never through a link made there
            stream.write(data)


#: The Isaac Lab cfg's facts without the drive values (``rules.robot.isaaclab_cfg``), keyed as the cfg without
#: the drive fields: a unit that is no output file (``cached_unit``, ``keep_unit``).
FACTS_UNIT = "articulation_cfg_facts"
#: The mesh rule's unit: the meshes layer of a ``make_instanceable`` output (``pipeline.layer_keys``).
MESH_UNIT = "meshes"
#: Layer → the unit holding it under its key without the drive fields (``rules.robot.drive_patch``).
PATCH_BASES = {"physics": "physics_patch_base", "mujoco": "mujoco_patch_base"}
#: Layer → the unit holding it under its key without ``self_collision``, by kind: the layers a
#: ``self_collision`` edit patches instead of re-authoring (``rules.robot.self_collision``: physx;
#: ``rules.mjcf.self_collision``: MJCF's physics).
SELF_COLLISION_BASES = {"urdf": {"physx": "physx_self_collision_base"},
                        "mjcf": {"physics": "physics_self_collision_base", "physx": "physx_self_collision_base"}}

#: Base unit → the layer it keeps under another key (``PATCH_BASES``, ``SELF_COLLISION_BASES``).
_BASE_ROLES = {**{unit: role for role, unit in PATCH_BASES.items()},
               **{unit: role for bases in SELF_COLLISION_BASES.values() for role, unit in bases.items()}}
#: Units whose bytes are edited after they are restored (the bases): not written as they are in the cache.
_PATCH_BASE_UNITS = frozenset(_BASE_ROLES)

#: Files a unit carries besides its own, by unit: the textures of a robot's materials layer and of the mesh
#: rule's meshes layer (written by the same authoring pass and named by it), restored with it.
_COMPANIONS = {"materials": "textures/", MESH_UNIT: "textures/"}


def reused(unit: str) -> dict[str, bytes] | None:
    """The files of ``unit`` (relative name → bytes: its file, and for materials the texture files it
    names) from the build cache when its key is there, else None."""
    scope = _SCOPE.get()
    if scope is None or unit not in scope[1]:
        return None
    store, keys, files, restored, objects, supplied, _, left = scope
    if unit in supplied:  # given by ``supply``, or looked up and missed before
        return supplied[unit]
    kept = left(unit, keys[unit]) if left is not None and unit not in _PATCH_BASE_UNITS else None
    if kept is not None:  # the output holds what the cache would give: as verified as a cache object
        store.record(f"kept:{unit}", hit=True)
        restored.add(unit)
        objects.update((name, (sha, len(data))) for name, (data, sha) in kept.items())
        supplied[unit] = {name: data for name, (data, _) in kept.items()}
        return supplied[unit]
    artifact = store.get_entry(keys[unit])
    store.record(f"layer:{unit}", hit=artifact is not None)
    own = [] if artifact is None else [name for name in artifact.files if not _companion(unit, name)]
    if len(own) != 1 or (own[0] != files[unit] and unit not in _ANY_NAME):
        supplied[unit] = None
        return None
    restored.add(unit)
    # Under this output's name: a mesh's meshes layer is the same whatever the output is called.
    named = {(files[unit] if name == own[0] else name): name for name in artifact.files}
    if unit not in _PATCH_BASE_UNITS:  # written as they are
        objects.update((name, (artifact.shas[cached], len(artifact.files[cached]))) for name, cached in named.items())
    return {name: artifact.files[cached] for name, cached in named.items()}


def cached_unit(unit: str) -> Any:
    """The data the build cache holds under ``unit``'s key (a unit that is no output file, such as the Isaac
    Lab cfg's facts: ``FACTS_UNIT``), or None. Untrusted: the caller checks its form."""
    scope = _SCOPE.get()
    if scope is None or unit not in scope[1]:
        return None
    body = scope[0].entry(scope[1][unit])
    scope[0].record(f"layer:{unit}", hit=body is not None)
    return None if body is None else body.get("meta")


def keyed(unit: str) -> bool:
    """Whether the enclosing conversion reuses ``unit`` (its key is known): else ``keep_unit`` keeps nothing."""
    scope = _SCOPE.get()
    return scope is not None and unit in scope[1]


def keep_unit(unit: str, data: Any) -> None:
    """Store ``data`` (plain JSON data) under ``unit``'s key (a unit that is no output file: ``cached_unit``):
    in the entry itself, no object written."""
    if keyed(unit):
        scope = _SCOPE.get()
        scope[0].put_entry(scope[1][unit], {}, meta=data, kind=f"layer:{unit}")


def written_anew(name: str) -> None:
    """The output file ``name`` (relative) that a restored unit carries was written by this conversion's
    authors instead (``restored_objects`` no longer names it: its bytes are read and hashed when stored)."""
    scope = _SCOPE.get()
    if scope is not None:
        scope[4].pop(name, None)


def supply(unit: str, files: dict[str, bytes]) -> None:
    """``unit``'s files (relative name → bytes) as this conversion made them from cached parts (a layer
    patched from a base, restored or patched before the writer asks): ``reused`` gives them from now on,
    and ``store_units`` does not store the unit under its own key (``derived``)."""
    scope = _SCOPE.get()
    if scope is not None and unit in scope[1]:
        scope[5][unit] = files
        scope[3].add(unit)


def supply_patched(role: str, base_unit: str, patch: Callable[[str], str | None]) -> None:
    """Give the writer ``role``'s layer when the build cache holds it under its own key, or under
    ``base_unit`` (its key without one cfg field: ``SELF_COLLISION_BASES``) patched by ``patch`` (the base's
    text → the layer's, None when it cannot be patched); otherwise nothing: the layer is authored. Outside
    a conversion with layer reuse, nothing."""
    if not keyed(role) or not keyed(base_unit):
        return
    own = reused(role)
    if own is not None:  # the writer asks again: given, not looked up twice
        supply(role, own)
        return
    name = ROBOT_LAYER_FILES[role]
    base = reused(base_unit)
    if base is None or set(base) != {name}:
        return
    try:
        patched = patch(base[name].decode("utf-8"))
    except UnicodeDecodeError:
        patched = None
    if patched is None:  # this conversion's layer is stored as the base instead: the likelier fit next time
        not_reused(base_unit)
        return
    supply(role, {name: patched.encode("utf-8")})


def derived(unit: str) -> None:
    """``unit`` was made cheaply from cached parts (a layer patched from its patch base, the Isaac Lab cfg
    from cached facts): ``store_units`` does not store it under its own key, as making it again costs less
    than storing it (its files are stored with the whole output all the same)."""
    scope = _SCOPE.get()
    if scope is not None:
        scope[3].add(unit)


def not_reused(unit: str) -> None:
    """``unit``'s files from the cache were not used after all (a patch base that did not fit the edit):
    ``store_units`` stores this conversion's in their place, the likelier base for the next edit."""
    scope = _SCOPE.get()
    if scope is not None:
        scope[3].discard(unit)


#: Units whose bytes do not depend on their file's name (their key holds no file name): stored under
#: one output's name, restored under another's.
_ANY_NAME = {MESH_UNIT}


def _companion(unit: str, name: str) -> bool:
    prefix = _COMPANIONS.get(unit)
    return prefix is not None and name.startswith(prefix)


#: Units whose file is an output as it is: a robot's layers and its Isaac Lab cfg (not the bases, which are
#: edited, nor the mesh rule's meshes layer, kept under another output's name).
_OUTPUT_UNITS = frozenset({*ROBOT_LAYER_FILES, "articulation_cfg"})


def output_units(keys: dict[str, str], files: dict[str, str], written: Iterable[str]) -> dict[str, str]:
    """{unit: key} of the units among ``keys`` whose file (``files``) is among ``written`` (the relative names
    of an output) as that unit's bytes, each one file: what the output's lazy key records for
    ``layer_scope``'s ``left`` (a materials layer that names textures is left out: its unit is several files)."""
    names = set(written)
    companions = {unit for unit, prefix in _COMPANIONS.items() if any(name.startswith(prefix) for name in names)}
    return {unit: key for unit, key in keys.items()
            if unit in _OUTPUT_UNITS and unit not in companions and files.get(unit) in names}


def store_units(store: Any, keys: dict[str, str], files: dict[str, str], written: Mapping[str, bytes],
                restored: set[str] = frozenset()) -> None:
    """Keep each unit's files (``written``: relative name → bytes of the whole output, read as needed)
    under its key; units in ``restored`` came from there."""
    for unit, key in keys.items():
        name = files.get(unit)  # None: a unit that is no output file (FACTS_UNIT), kept by its author
        if _BASE_ROLES.get(unit) in restored:
            continue  # a base is kept with its layer when that is authored, not with a restored or patched one
        if name in written and unit not in restored:
            names = [other for other in written if other == name or _companion(unit, other)]
            # A KnownFiles keeps what it knows of each (a file restored as it is need not be read or hashed).
            own = written.subset(names) if hasattr(written, "subset") else {other: written[other] for other in names}
            store.put_entry(key, own, kind=f"layer:{unit}")
