"""MuJoCo's compiled model of an MJCF source as an artifact of the build cache (MuJoCo's own binary MJB).

Compiling is most of an MJCF conversion (MuJoCo decodes every mesh, computes its convex hull and
inertia), and it depends on the source's files only, never on the converter's cfg: a cfg edit (drive
gains, collision approximation …) reuses the compiled model of the last conversion instead of compiling
again. The model is written with ``mj_saveModel``, compressed with zlib (level 1: an MJB is mostly mesh
arrays, 2-10x smaller), and read with ``MjModel.from_binary_path``, which gives back every array bit for
bit; the MjSpec the converter reads beside it is parsed again (a millisecond).

Opt-in (``$USDFORGE_CACHE_COMPILED=on``; default ``off``): it does not pay for its room. Measured with
``bench/compiled_cache.py`` on the corpus's 8 MJCF models (CPU seconds, median of 3): reading a stored
model back (decompressing and loading it) saves 0.01-0.56 s per model and cfg edit, 1.0 s in all, for
93 MB of compressed MJB (396 MB raw: reading it uncompressed saves more but takes four times the room);
``anybotics_anymal_c`` compiles in 1.6 s and reads back in 1.05 s. The conversion's own outputs (restored
whole when nothing changed) and the mesh geometry (reused on a cfg edit) stay cached by default.

A cfg-only rebuild reads the slim intermediate first (``rules.mjcf.slim``: the arrays the converter uses,
stored by default, read back in milliseconds): the MJB is looked up only when no slim intermediate is held
(a ``link_density`` edit, a model with flexes or skins).

Stored only when reusing it is sound:

- keyed by the source's absolute path (MuJoCo writes absolute mesh and texture paths into the model), the
  content of the source and of every file it references (``mjcf_references``: includes, meshes,
  textures, height fields, skins, attached models), MuJoCo's version and this code's;
- never after a repair (a spec MuJoCo could not compile as given), and only when a freshly parsed spec
  matches the model (``matches``): compiling can change a spec (``fusestatic`` merges bodies into their
  parents), and the converter reads the spec beside the model;
- on a hit the parsed spec must match the model again; otherwise the model is compiled as usual.

``matches``: as many elements of every kind in the spec as in the model, with the same body, geom and mesh
names in the same order (the converter indexes spec lists by model ids).

Active inside the pipeline's ``rules.robot.meshes.mesh_cache`` (same store, same file hashing). No pxr.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from functools import cache
from pathlib import Path
from typing import Any, Callable

import mujoco
import numpy as np

from usdforge.rules.robot.meshes import active_mesh_cache, write_in_background

_MJB_FILE = "model.mjb.zlib"
#: Environment variable: ``on`` stores compiled models (they are looked up whatever it says).
COMPILED_ENV = "USDFORGE_CACHE_COMPILED"
#: The largest MJB read back (decompressed), in bytes: bounds a forged object's expansion.
MAX_MJB_BYTES = 1 << 31
#: The code whose behaviour decides the compiled model (its bytes are part of the key).
_CODE = (Path(__file__), Path(__file__).with_name("load.py"), Path(__file__).with_name("visual_meshes.py"))
#: MjSpec list attribute → MjModel size, for the structural check of a reused model.
_COUNTS = (("bodies", "nbody"), ("geoms", "ngeom"), ("meshes", "nmesh"), ("joints", "njnt"), ("sites", "nsite"),
           ("actuators", "nu"), ("tendons", "ntendon"), ("equalities", "neq"), ("sensors", "nsensor"),
           ("textures", "ntex"), ("materials", "nmat"), ("cameras", "ncam"), ("lights", "nlight"),
           ("pairs", "npair"), ("excludes", "nexclude"), ("keys", "nkey"), ("hfields", "nhfield"),
           ("skins", "nskin"), ("flexes", "nflex"))
_NAMED = (("bodies", mujoco.mjtObj.mjOBJ_BODY), ("geoms", mujoco.mjtObj.mjOBJ_GEOM),
          ("meshes", mujoco.mjtObj.mjOBJ_MESH))


@cache
def _code_stamp() -> str:
    digest = hashlib.sha256(f"mujoco={mujoco.__version__};".encode())
    for path in _CODE:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def compiled_key(path: Path, digest: Callable[[Path], str]) -> str:
    """The cache key of the model compiled from the MJCF file at ``path`` (absolute)."""
    from usdforge.rules.mjcf.references import mjcf_references

    references = {os.path.relpath(ref, path.parent): digest(ref) for ref in mjcf_references(path)}
    payload = {"artifact": "mjcf-compiled", "source": str(path), "sha256": digest(path),
               "references": dict(sorted(references.items())), "code": _code_stamp()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def matches(spec: mujoco.MjSpec, model: mujoco.MjModel) -> bool:
    """The spec has the model's elements: as many of every kind, bodies, geoms and meshes named alike in
    the same order."""
    for attribute, size in _COUNTS:
        if len(getattr(spec, attribute)) != int(getattr(model, size)):
            return False
    for attribute, kind in _NAMED:
        for index, element in enumerate(getattr(spec, attribute)):
            if (element.name or "") != (mujoco.mj_id2name(model, kind, index) or ""):
                return False
    return True


def cached_model(path: Path, spec: mujoco.MjSpec) -> tuple[mujoco.MjModel | None, Any]:
    """The model compiled earlier from the same files, checked against ``spec``; None when absent, not
    reusable or no cache is active. The second item is what ``store_model`` needs (None: do not store)."""
    active = active_mesh_cache()
    if active is None:
        return None, None
    store, digest = active
    key = compiled_key(path, digest)
    entry = store.entry(key)
    sha = entry["files"].get(_MJB_FILE) if entry is not None else None
    packed = store.get_bytes(sha) if isinstance(sha, str) else None
    mjb = _decompressed(packed) if packed is not None else None
    del packed
    model = None
    if mjb is not None:
        try:  # through MuJoCo's virtual file system: the bytes are never written elsewhere
            model = mujoco.MjModel.from_binary_path("model.mjb", {"model.mjb": mjb})
        except Exception:  # noqa: BLE001 - an unreadable MJB (another MuJoCo) is an absent one
            model = None
        if model is not None and not matches(spec, model):
            model = None
    store.record("mjcf-compiled", hit=model is not None)
    return model, (None if model is not None else (store, key))


def _decompressed(packed: bytes) -> bytes | None:
    """The MJB in ``packed`` (zlib), None when it is not zlib data or expands past ``MAX_MJB_BYTES``."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(packed, MAX_MJB_BYTES)
    except zlib.error:
        return None
    return data if inflater.eof and not inflater.unconsumed_tail else None


def storing_compiled_models() -> bool:
    """Whether compiled models are stored (``COMPILED_ENV`` is ``on``, ``1`` or ``true``)."""
    return os.environ.get(COMPILED_ENV, "off").strip().lower() in ("on", "1", "true", "yes")


def store_model(token: Any, model: mujoco.MjModel, fresh: Callable[[], mujoco.MjSpec]) -> None:
    """Store ``model`` under the key ``cached_model`` gave (nothing when it gave None), when storing is on
    (``storing_compiled_models``) and the spec ``fresh()`` parses matches it (compiling did not change the
    spec)."""
    if token is None or not storing_compiled_models() or not matches(fresh(), model):
        return
    store, key = token
    buffer = np.empty(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    # Tens of MB to compress, hash and write: beside the rest of the conversion (zlib, hashlib and file
    # writes release the GIL).
    write_in_background(lambda: store.put_entry(key, {_MJB_FILE: zlib.compress(buffer, 1)}, kind="mjcf-compiled"))
