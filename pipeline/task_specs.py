"""What each ``convert`` task needs, computed from the manifest once and cached in the build folder.

Building cfgs and digests needs cattrs and every cfg class; a no-op ``doit convert`` should not pay for
that. The specs are cached in ``build/task-specs/`` (not in the build cache, which may be shared: a spec
names the files ``doit clean`` removes) keyed on the manifest's content hash, its path, the build folder
and the stamps of the code that shapes cfgs, so any of those changing recomputes them. The cache names
each output relative to the entry's own folder ``<build>/usd/<name>/`` (``_compact``), joined to it at
load (``_expand``): a cached spec cannot name a file elsewhere, and loading 100,000 of them costs a JSON
parse and a few string joins each.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tomli
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


def _safe_name(name: Any) -> bool:
    """An entry name that is one folder name (``<build>/usd/<name>/``)."""
    return isinstance(name, str) and bool(name) and "/" not in name and "\0" not in name and name not in (".", "..")


def _safe_relatives(names: tuple[Any, ...]) -> bool:
    """Normalised file names relative to an output folder that stay inside it: strings, none absolute,
    none with an empty, ``.`` or ``..`` component, no NUL. Joined between slashes, every component of every
    name stands between two: a bad one shows as ``//``, ``/./`` or ``/../`` (a few substring searches per
    spec, not a regular expression per name: 100,000 specs of five names each load at every no-op)."""
    if not all(type(name) is str for name in names) or "\0" in "".join(names):
        return False
    joined = "/" + "/\0/".join(names) + "/"  # the separator's own component, a NUL, is in no name
    return "//" not in joined and "/./" not in joined and "/../" not in joined


def _compact(spec: dict[str, Any]) -> dict[str, Any]:
    """The cached form of a spec: the files it names relative to its output folder, which ``_expand``
    joins to ``<build>/usd/<name>/`` (a hand-edited cache file cannot make ``doit clean`` remove, or a
    conversion write, other files), and no paths to normalise again at each load."""
    if "error" in spec:
        return spec
    folder = spec["usd_dir"] + os.sep
    compact = {k: v for k, v in spec.items() if k not in ("targets", "key_path", "usd_path", "usd_dir", "doc")}
    compact["outputs"] = [t[len(folder):] for t in spec["targets"]]
    compact["key"] = spec["key_path"][len(folder):]
    compact["usd"] = spec["usd_path"][len(folder):]
    compact["doc_source"] = spec["doc"].split(" → ", 1)[0]
    return compact


#: A name whose JSON string is itself between quotes (no quote, backslash, control or non-ASCII character).
_PLAIN_JSON = re.compile(r'[ !#-\[\]-~]*')


def _writes_into(cfg_json: Any, folder: str) -> bool:
    """Whether the canonical JSON of a cfg (``schemas.cfg_to_json``) has ``usd_dir`` = ``folder``: without
    parsing it when no ``\\u`` escape could spell the key another way (the key once, with that value),
    else parsed."""
    if not isinstance(cfg_json, str):
        return False
    if "\\u" not in cfg_json:
        quoted = f'"{folder}"' if _PLAIN_JSON.fullmatch(folder) else json.dumps(folder)
        return cfg_json.count('"usd_dir"') == 1 and f'"usd_dir":{quoted}' in cfg_json
    try:
        return normalise(json.loads(cfg_json)["usd_dir"]) == folder
    except (ValueError, KeyError, TypeError):
        return False


def _expand(compact: dict[str, Any], usd_root: str) -> dict[str, Any]:
    """The spec of a cached ``_compact`` form; KeyError or ValueError when it is not one."""
    if "error" in compact:
        if not isinstance(compact["error"], str):
            raise ValueError("not an error message")
        return compact
    spec = dict(compact)
    name, outputs, key, usd = spec["name"], spec.pop("outputs"), spec.pop("key"), spec.pop("usd")
    if not (_safe_name(name) and type(outputs) is list and _safe_relatives((*outputs, key, usd))):
        raise ValueError(f"{name!r}: names a file outside its output folder")
    folder = usd_root + name
    if not _writes_into(spec["cfg_json"], folder):
        raise ValueError(f"{name!r}: its cfg writes elsewhere")
    folder_ = folder + "/"
    spec["usd_dir"] = folder
    spec["targets"] = [folder_ + output for output in outputs]
    spec["key_path"] = folder_ + key
    spec["usd_path"] = usd_path = folder_ + usd
    spec["doc"] = f"{spec.pop('doc_source')} → {usd_path}"
    return spec


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


def compute_specs(library_path: Path, build_dir: Path,
                  previous: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One spec per entry: kind, source, packages, cfg (JSON), digest, targets, key path, library folder,
    output folder; or an error.

    previous: {``entry_key``: spec} of an earlier computation; an entry whose key is there is not
    computed again (one edited entry of 100,000 costs the manifest's parse, not 100,000 cfgs)."""
    return [spec for spec, _ in _specs_and_keys(library_path, build_dir, previous or {})]


def _specs_and_keys(library_path: Path, build_dir: Path,
                    previous: dict[str, dict[str, Any]]) -> list[tuple[dict[str, Any], str | None]]:
    """``compute_specs`` with each spec's ``entry_key`` (None for an error): from each entry's own text
    where the manifest splits into them (``_entry_texts``), else from the manifest read as a whole."""
    from usdforge.schemas import ConfigError

    try:  # each entry on its own, so that unchanged ones are reused; any error: the whole manifest's path
        text = Path(library_path).read_text()
        split = _entry_texts(text)
        result = None if split is None else _keyed_specs(*split, library_path, build_dir, previous)
        return _keyed_specs(text, None, library_path, build_dir, previous) if result is None else result
    except (OSError, ValueError, TypeError, KeyError, AttributeError, ConfigError):
        return [(spec, None) for spec in _all_specs(library_path, build_dir)]


#: The line that starts each entry of a manifest, as usdforge and most people write it.
_ENTRY_LINE = "[[assets]]"


def _entry_texts(text: str) -> tuple[str, list[str]] | None:
    """A manifest's text before its first entry, and each entry's own text (after its ``[[assets]]`` line,
    up to the next one), when entries start at lines that are exactly ``[[assets]]``; None when there is
    no such line. An entry's text that is not one entry's table on its own (a ``[[assets]]`` line inside
    a multi-line string, an indented header, a table after the entries) is found when it is parsed
    (``_entry_table``), and the manifest is then read as a whole: the split only saves parsing entries
    whose text is unchanged (a TOML parse of 10,000 entries takes about 0.4 s)."""
    parts = f"\n{text}".split(f"\n{_ENTRY_LINE}\n")
    return None if len(parts) < 2 else (parts[0], parts[1:])


def _entry_table(entry: str) -> dict[str, Any] | None:
    """The table of an entry's own text (``_entry_texts``), or None when that text is not exactly one
    entry's table."""
    try:
        data = tomli.loads(f"{_ENTRY_LINE}\n{entry}")
    except tomli.TOMLDecodeError:
        return None
    entries = data.get("assets")
    return entries[0] if list(data) == ["assets"] and type(entries) is list and len(entries) == 1 else None


def _keyed_specs(head: str, entries: list[str] | None, library_path: Path, build_dir: Path,
                 previous: dict[str, dict[str, Any]]) -> list[tuple[dict[str, Any], str | None]] | None:
    """(spec, entry key) of each entry: ``head`` is the whole manifest (``entries`` None: each entry keyed
    by its table as JSON) or its text before the entries, and ``entries`` their texts (``_entry_texts``:
    each keyed by its text, parsed only when no ``previous`` spec has its key). None when an entry's text
    is not one entry's table, or the head holds entries too. Raises what reading the manifest raises."""
    from usdforge.pipeline.manifest import Library, LibraryEntry
    from usdforge.schemas import ConfigError, structure_cfg

    data = tomli.loads(head)
    if entries is not None and "assets" in data:
        return None
    data.setdefault("root", str(Path(library_path).parent.absolute()))
    library = structure_cfg({**data, "assets": []}, Library)
    raws: list[Any] = data.get("assets", []) if entries is None else [None] * len(entries)
    if entries is None:
        entries = [json.dumps(raw, sort_keys=True, default=str) for raw in raws]
    context = json.dumps([library.root, list(library.allowed_roots), normalise(build_dir), normalise(library_path)])
    result, names = [], []
    for index, (entry, raw) in enumerate(zip(entries, raws)):
        key = hashlib.sha256(f"{context}\n{entry}".encode()).hexdigest()
        spec = previous.get(key)
        if spec is None:
            raw = _entry_table(entry) if raw is None else raw
            if raw is None:
                return None
            names.append(raw["name"].casefold())
            spec = _entry_spec(library, structure_cfg(raw, LibraryEntry), index, library_path, build_dir)
        else:
            names.append(spec["name"].casefold())
        result.append((spec, None if "error" in spec else key))
    if len(set(names)) != len(names):
        raise ConfigError("a name is used twice")
    return result


def _all_specs(library_path: Path, build_dir: Path) -> list[dict[str, Any]]:
    """Every entry's spec, or the manifest's one error (``manifest.load_library``'s message)."""
    from usdforge.pipeline.manifest import load_library
    from usdforge.schemas import ConfigError

    try:
        library = load_library(library_path)
    except ConfigError as exc:
        return [{"name": "library", "error": str(exc), "doc": MANIFEST_ERROR_DOC}]
    return [_entry_spec(library, entry, index, library_path, build_dir) for index, entry in enumerate(library.assets)]


def _entry_spec(library: Any, entry: Any, index: int, library_path: Path, build_dir: Path) -> dict[str, Any]:
    import attrs

    from usdforge.pipeline.content_key import entry_digest
    from usdforge.pipeline.manifest import entry_cfg, entry_kind, entry_source
    from usdforge.rules.errors import ConversionError
    from usdforge.rules.outputs import key_file_name, planned_outputs
    from usdforge.schemas import ConfigError, cfg_to_json

    try:
        kind = entry_kind(library, entry)
        cfg = entry_cfg(library, entry, index, build_dir, library_path)
    except (ConfigError, ConversionError) as exc:
        return {"name": entry.name, "error": str(exc), "doc": f"{entry.source} (misconfigured)"}
    usd_dir = Path(cfg.usd_dir)
    outputs = planned_outputs(kind, cfg.usd_file_name, cfg.make_instanceable,
                              getattr(cfg, "run_asset_transformer", False), getattr(cfg, "articulation_cfg", False))
    return {
        "name": entry.name, "kind": kind, "source": normalise(entry_source(library, entry)),
        "packages": {item["name"]: item["path"] for item in getattr(cfg, "ros_package_paths", None) or []},
        "xacro_args": dict(getattr(cfg, "xacro_args", None) or {}),
        "cfg_json": cfg_to_json(cfg), "digest": entry_digest(cfg, kind, library.root),
        "targets": [normalise(usd_dir / name) for name in outputs],
        "key_path": normalise(usd_dir / key_file_name(cfg.usd_file_name)),
        # The IK study's settings only where `doit ik` runs one (a fifth of a spec, loaded at every no-op).
        "ee_body": entry.ee_body, **({"ik": attrs.asdict(entry.ik)} if entry.ee_body else {}),
        "usd_path": normalise(usd_dir / cfg.usd_file_name),
        "root": normalise(library.root), "usd_dir": normalise(usd_dir),
        "doc": f"{entry.source} → {usd_dir / cfg.usd_file_name}",
    }


#: {cache file: (fingerprint, specs)}: the specs this process loaded (each task group asks).
_LOADED: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}


def task_specs(library_path: str | Path, build_dir: str | Path) -> list[dict[str, Any]]:
    """``compute_specs``, from ``<build_dir>/task-specs/`` when the manifest, build folder and code are
    unchanged: one JSON parse and a few string joins per entry (no ``pathlib``, no cfg parsed). Every
    file a cached spec names is joined to its own folder ``<build_dir>/usd/<name>/``; its cfg's
    ``usd_dir`` is checked when a conversion runs (``tasks.in_output_folder``)."""
    library_path, build_dir = Path(library_path), Path(build_dir)
    fingerprint = {"manifest": normalise(library_path), "sha256": file_digest(library_path),
                   "build_dir": normalise(build_dir), "code": _code_stamp()}
    name = hashlib.sha256(fingerprint["manifest"].encode()).hexdigest()[:16]
    cache = build_dir / SPECS_FOLDER / f"library-{name}.json"
    loaded = _LOADED.get(str(cache))
    if loaded is not None and loaded[0] == fingerprint:
        return loaded[1]
    usd_root = os.path.join(fingerprint["build_dir"], "usd") + os.sep
    previous: dict[str, dict[str, Any]] = {}
    compacts: dict[str, dict[str, Any]] = {}  # entry key → the cached form of its previous spec
    try:
        with open(cache, encoding="utf-8") as stream:
            cached = json.load(stream)
        specs = [_expand(compact, usd_root) for compact in cached["specs"]]
        if cached["fingerprint"] == fingerprint:
            _LOADED[str(cache)] = (fingerprint, specs)
            return specs
        if {k: v for k, v in cached["fingerprint"].items() if k != "sha256"} == \
                {k: v for k, v in fingerprint.items() if k != "sha256"}:  # the manifest was edited
            previous = {key: spec for key, spec in zip(cached["keys"], specs, strict=True) if key is not None}
            compacts = dict(zip(cached["keys"], cached["specs"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # no cache yet, or an unreadable one: compute the specs afresh
    computed = _specs_and_keys(library_path, build_dir, previous)
    specs = [spec for spec, _ in computed]
    cache.parent.mkdir(parents=True, exist_ok=True)
    # A reused spec is written back in the form it was read in (not compacted again).
    compacted = [compacts[key] if key in previous and previous[key] is spec else _compact(spec)
                 for spec, key in computed]
    write_text_atomically(cache, json.dumps({"fingerprint": fingerprint, "specs": compacted,
                                             "keys": [key for _, key in computed]}))
    _LOADED[str(cache)] = (fingerprint, specs)
    return specs
