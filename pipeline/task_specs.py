"""What each ``convert`` task needs, computed from the manifest once and cached in the build folder.

Building cfgs and digests needs cattrs and every cfg class; a no-op ``doit convert`` should not pay for
that. The specs are cached in ``build/cache/`` keyed on the manifest's content hash, its path, the build
folder and the stamps of the code that shapes cfgs, so any of those changing recomputes them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from usdforge.pipeline.atomic import write_text_atomically
from usdforge.pipeline.fingerprint import file_digest, normalise

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
#: Code whose edits change cfgs, digests or planned outputs (usdforge's version is in schemas/): a change
#: of any invalidates the cache.
_CODE = ("schemas", "pipeline/manifest.py", "pipeline/kinds.py", "pipeline/task_specs.py", "rules/outputs.py")
#: The doc of the one spec of a manifest that cannot be read.
MANIFEST_ERROR_DOC = "the library manifest has an error"


def _code_stamp() -> list[Any]:
    stamps = []
    for item in _CODE:
        path = _PACKAGE_ROOT / item
        for file in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            stat = file.stat()
            stamps.append([file.name, stat.st_mtime_ns, stat.st_size])
    return stamps


def compute_specs(library_path: Path, build_dir: Path) -> list[dict[str, Any]]:
    """One spec per entry: kind, source, packages, cfg (JSON), digest, targets, key path, library folder,
    output folder; or an error."""
    import attrs

    from usdforge.pipeline.manifest import entry_cfg, entry_kind, entry_source, load_library
    from usdforge.rules.errors import ConversionError
    from usdforge.rules.outputs import key_file_name, planned_outputs
    from usdforge.schemas import ConfigError, cfg_to_json, config_digest

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
            "cfg_json": cfg_to_json(cfg), "digest": config_digest(cfg, kind),
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
    cache = build_dir / "cache" / f"library-{name}.json"
    try:
        cached = json.loads(cache.read_text())
        if cached["fingerprint"] == fingerprint:
            return cached["specs"]
    except (OSError, ValueError, KeyError):
        pass  # no cache yet, or an unreadable one: compute the specs afresh
    specs = compute_specs(library_path, build_dir)
    cache.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(cache, json.dumps({"fingerprint": fingerprint, "specs": specs}))
    return specs
