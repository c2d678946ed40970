"""What each ``convert`` task needs, computed from the manifest once and cached in the build folder.

Building cfgs and digests needs cattrs and every cfg class; a no-op ``doit convert`` should not pay for
that. The specs are cached in ``build/task-specs/`` (not in the build cache, which may be shared: a spec
names the files ``doit clean`` removes) keyed on the manifest's content hash, its path, the build folder
and the stamps of the code that shapes cfgs, so any of those changing recomputes them. A cached spec whose
outputs do not all lie in its own folder ``<build>/usd/<name>/`` is recomputed too.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from usdforge.pipeline.atomic import write_text_atomically
from usdforge.pipeline.fingerprint import file_digest, normalise

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
#: Code whose edits change cfgs, digests or planned outputs (usdforge's version is in schemas/): a change
#: of any invalidates the cache.
_CODE = ("schemas", "pipeline/manifest.py", "pipeline/kinds.py", "pipeline/task_specs.py", "pipeline/content_key.py",
         "rules/outputs.py")
#: The doc of the one spec of a manifest that cannot be read.
MANIFEST_ERROR_DOC = "the library manifest has an error"


#: The folder of the build folder that caches the specs.
SPECS_FOLDER = "task-specs"


def _confined(spec: dict[str, Any], build_dir: Path) -> bool:
    """Whether every file a spec names for writing or removal lies in ``<build_dir>/usd/<its name>/``, as
    ``compute_specs`` makes them (a hand-edited cache file cannot make ``doit clean`` remove other files)."""
    if "error" in spec:
        return isinstance(spec.get("error"), str)
    name = spec["name"]
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        return False
    folder = normalise(build_dir / "usd" / name)
    paths = [spec["key_path"], spec["usd_path"], *spec["targets"]]
    cfg = json.loads(spec["cfg_json"])
    return spec["usd_dir"] == folder and normalise(cfg["usd_dir"]) == folder and all(
        isinstance(p, str) and normalise(p) == p and p.startswith(folder + os.sep) for p in paths)


@functools.cache
def _code_stamp() -> list[Any]:
    """[name, sha256] of each code file that shapes specs (hashed: a stat stamp is fooled by restored
    times, and these 30 small files hash in about a millisecond), once per process (every task group
    asks)."""
    stamps = []
    for item in _CODE:
        path = _PACKAGE_ROOT / item
        for file in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            stamps.append([file.name, file_digest(file)])
    return stamps


def compute_specs(library_path: Path, build_dir: Path) -> list[dict[str, Any]]:
    """One spec per entry: kind, source, packages, cfg (JSON), digest, targets, key path, library folder,
    output folder; or an error."""
    import attrs

    from usdforge.pipeline.content_key import entry_digest
    from usdforge.pipeline.manifest import entry_cfg, entry_kind, entry_source, load_library
    from usdforge.rules.errors import ConversionError
    from usdforge.rules.outputs import key_file_name, planned_outputs
    from usdforge.schemas import ConfigError, cfg_to_json

    try:
        library = load_library(library_path)
    except ConfigError as exc:
        return [{"name": "library", "error": str(exc), "doc": MANIFEST_ERROR_DOC}]
    specs = []
    for index, entry in enumerate(library.assets):
        try:
            kind = entry_kind(library, entry)
            cfg = entry_cfg(library, entry, index, build_dir, library_path)
        except (ConfigError, ConversionError) as exc:
            specs.append({"name": entry.name, "error": str(exc), "doc": f"{entry.source} (misconfigured)"})
            continue
        usd_dir = Path(cfg.usd_dir)
        outputs = planned_outputs(kind, cfg.usd_file_name, cfg.make_instanceable,
                                  getattr(cfg, "run_asset_transformer", False), getattr(cfg, "articulation_cfg", False))
        specs.append({
            "name": entry.name, "kind": kind, "source": normalise(entry_source(library, entry)),
            "packages": {item["name"]: item["path"] for item in getattr(cfg, "ros_package_paths", None) or []},
            "xacro_args": dict(getattr(cfg, "xacro_args", None) or {}),
            "cfg_json": cfg_to_json(cfg), "digest": entry_digest(cfg, kind, library.root),
            "targets": [normalise(usd_dir / name) for name in outputs],
            "key_path": normalise(usd_dir / key_file_name(cfg.usd_file_name)),
            "ee_body": entry.ee_body, "ik": attrs.asdict(entry.ik),
            "usd_path": normalise(usd_dir / cfg.usd_file_name),
            "root": normalise(library.root), "usd_dir": normalise(usd_dir),
            "doc": f"{entry.source} → {usd_dir / cfg.usd_file_name}",
        })
    return specs


def task_specs(library_path: str | Path, build_dir: str | Path) -> list[dict[str, Any]]:
    """``compute_specs``, from ``build/cache`` when the manifest, build folder and code are unchanged."""
    library_path, build_dir = Path(library_path), Path(build_dir)
    fingerprint = {"manifest": normalise(library_path), "sha256": file_digest(library_path),
                   "build_dir": normalise(build_dir), "code": _code_stamp()}
    name = hashlib.sha256(fingerprint["manifest"].encode()).hexdigest()[:16]
    cache = build_dir / SPECS_FOLDER / f"library-{name}.json"
    try:
        cached = json.loads(cache.read_text())
        if cached["fingerprint"] == fingerprint and all(map(_confined, cached["specs"], [build_dir] * len(cached["specs"]))):
            return cached["specs"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # no cache yet, or an unreadable one: compute the specs afresh
    specs = compute_specs(library_path, build_dir)
    cache.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(cache, json.dumps({"fingerprint": fingerprint, "specs": specs}))
    return specs
