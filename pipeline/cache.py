"""The build cache: a content-addressed store of conversion outputs and mesh geometry, shareable by
several checkouts and machines (a local folder, or one on a network file system).

Layout of the cache folder (default ``build/cache/``; ``cache=PATH`` or ``USDFORGE_CACHE``)::

    objects/ab/<sha256>          file contents, named by the SHA-256 of their bytes
    entries/ab/<key>.json        an artifact: {relative file name: object sha256}, named by its cache key
    claims/ab/<sha256>           the keys of the entries each object was written for, one a line
    stats.log                    one line per lookup: build id, hit or miss

Every write goes to a temporary file in the destination's folder and is renamed into place, so a reader
(or a writer killed half way) never sees a partial object; two writers of one object write the same
bytes. Every object is hashed when read: a corrupt or truncated one is reported once, removed and treated
as absent (the artifact is rebuilt and written again). An entry is bound to its key: it must name the key
it is filed under, and every object it names must have been written for that key (its claims): an entry
naming other, intact objects (another artifact's) is a miss with one warning. A cache that cannot be
written (read-only, full disk) gives one warning and the build goes on without storing anything. No pxr
here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from usdforge.pipeline.fingerprint import by_size_in_threads, file_size

log = logging.getLogger("usdforge")

#: Environment variable naming the cache folder; "off" turns the cache off.
CACHE_ENV = "USDFORGE_CACHE"
#: Environment variable grouping the lookups of one build (``doit convert`` sets it for its run).
BUILD_ENV = "USDFORGE_BUILD_ID"
_STATS = "stats.log"
_PROCESS_BUILD = uuid.uuid4().hex[:12]


class Artifact(NamedTuple):
    """What the cache holds for one key: files (relative name → bytes, verified), meta data, and the
    files' SHA-256 (relative name → hex)."""

    files: dict[str, bytes]
    meta: Any
    shas: dict[str, str]


def default_cache_dir(build_dir: str | Path = "build") -> Path | None:
    """``$USDFORGE_CACHE`` if set ("off" or empty: no cache), else ``<build_dir>/cache``, absolute."""
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        return None if configured.strip().lower() in ("", "off", "none", "0") else Path(configured).absolute()
    return (Path(build_dir) / "cache").absolute()


def build_id() -> str:
    """The id of the build this process belongs to: ``$USDFORGE_BUILD_ID``, else one per process."""
    return os.environ.get(BUILD_ENV) or _PROCESS_BUILD


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Store:
    """One cache folder. Methods never raise for cache problems: a broken cache is an absent one."""

    def __init__(self, root: str | Path, build: str | None = None):
        self.root = Path(root)
        self.writable = True
        #: The build its lookups count for (None: ``build_id()``); a Dask worker records under the doit side's.
        self.build = build
        self._warned: set[str] = set()

    # -- paths
    def _object_path(self, sha: str) -> Path:
        return self.root / "objects" / sha[:2] / sha

    def _entry_path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / f"{key}.json"

    def _claims_path(self, sha: str) -> Path:
        return self.root / "claims" / sha[:2] / sha

    def _warn_once(self, topic: str, message: str) -> None:
        if topic not in self._warned:
            self._warned.add(topic)
            log.warning("%s", message)

    # -- writing
    def _write_atomically(self, destination: Path, data: bytes) -> None:
        destination.parent.mkdir(parents=True, exist_ok=True)
        staging = destination.with_name(f".{destination.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            # No fsync: every read verifies the object's hash, so one torn by a power loss is rejected then.
            staging.write_bytes(data)
            os.replace(staging, destination)
        except BaseException:
            staging.unlink(missing_ok=True)
            raise

    def _disable(self, exc: OSError) -> None:
        self.writable = False
        self._warn_once("write", f"warning: the build cache {self.root} cannot be written ({exc.strerror or exc}): "
                                 "building without storing results in it")

    def put_bytes(self, data: bytes) -> str | None:
        """Store ``data``; return its SHA-256, or None when the cache cannot be written."""
        sha = sha256_bytes(data)
        if not self.writable:
            return None
        path = self._object_path(sha)
        try:
            if not (path.is_file() and path.stat().st_size == len(data)):
                self._write_atomically(path, data)
        except OSError as exc:
            self._disable(exc)
            return None
        return sha

    def put_entry(self, key: str, files: dict[str, bytes], meta: Any = None) -> dict[str, str] | None:
        """Store an artifact: every file's bytes, then the entry naming them (so an entry is never visible
        before its objects), with ``meta`` (plain JSON data, e.g. the warnings of the conversion).
        Returns {name: sha256} of the files stored, or None when nothing could be."""
        objects = {}
        for name, data in sorted(files.items()):
            sha = self.put_bytes(data)
            if sha is None or not self._claim(sha, key):
                return None
            objects[name] = sha
        body = {"key": key, "files": objects, "meta": meta}
        body["checksum"] = sha256_bytes(json.dumps(body, sort_keys=True).encode())
        try:
            self._write_atomically(self._entry_path(key), json.dumps(body, sort_keys=True).encode())
        except OSError as exc:
            self._disable(exc)
            return None
        return objects

    def _claim(self, sha: str, key: str) -> bool:
        """Record that object ``sha`` was written for the entry ``key`` (one short O_APPEND write: lines of
        concurrent writers never interleave). False when the cache cannot be written."""
        if key in self._claims(sha):
            return True
        path = self._claims_path(sha)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(descriptor, f"{key}\n".encode())
            finally:
                os.close(descriptor)
        except OSError as exc:
            self._disable(exc)
            return False
        return True

    def _claims(self, sha: str) -> set[str]:
        try:
            return set(self._claims_path(sha).read_text(encoding="ascii", errors="replace").split())
        except OSError:
            return set()

    # -- reading
    def get_bytes(self, sha: str) -> bytes | None:
        """The object's bytes if present and intact; a corrupt one is removed, with a warning, and None."""
        path = self._object_path(sha)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if sha256_bytes(data) != sha:
            self._reject(path, sha)
            return None
        return data

    def verified_path(self, sha: str) -> Path | None:
        """The object's file if present and intact (hashed as ``get_bytes`` does, without keeping its
        bytes), for a reader that opens files itself; a corrupt one is removed, with a warning, and None.
        Objects are never rewritten with other bytes, so the file stays as verified."""
        path = self._object_path(sha)
        try:
            with open(path, "rb") as stream:
                actual = hashlib.file_digest(stream, "sha256").hexdigest()
        except OSError:
            return None
        if actual != sha:
            self._reject(path, sha)
            return None
        return path

    def _reject(self, path: Path, sha: str) -> None:
        self._warn_once(f"corrupt:{sha}", f"warning: the build cache object {path} is corrupt (its content "
                                          "does not match its hash): ignored, the artifact is rebuilt")
        try:
            path.unlink()
        except OSError:
            pass

    def entry(self, key: str) -> dict[str, Any] | None:
        """An artifact's entry ({"files": {relative name: object sha256}, "meta": …}), or None when absent
        or unreadable."""
        path = self._entry_path(key)
        try:
            body = json.loads(path.read_bytes())
            checksum = body.pop("checksum")
            if body.get("key") != key or sha256_bytes(json.dumps(body, sort_keys=True).encode()) != checksum:
                raise ValueError("checksum")
            if not isinstance(body["files"], dict):
                raise ValueError("files")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, AttributeError, TypeError):
            self._warn_once(f"entry:{key}", f"warning: the build cache entry {path} is corrupt: ignored, the "
                                            "artifact is rebuilt")
            return None
        if any(not isinstance(sha, str) or key not in self._claims(sha) for sha in body["files"].values()):
            self._warn_once(f"entry:{key}", f"warning: the build cache entry {path} names objects that were not "
                                            "written for its key: ignored, the artifact is rebuilt")
            return None
        try:
            os.utime(path)  # the entry's modification time is its last use (prune drops the oldest)
        except OSError:
            pass
        return body

    def get_entry(self, key: str) -> Artifact | None:
        """Every file of an artifact, verified, and its meta data; None when any file is absent or corrupt."""
        body = self.entry(key)
        if body is None:
            return None
        names, shas = list(body["files"]), list(body["files"].values())
        # Read and hashed side by side when large (a robot's geometry layer and textures: megabytes).
        contents = by_size_in_threads(self.get_bytes, shas, [file_size(self._object_path(sha)) for sha in shas])
        if any(data is None for data in contents):
            return None
        return Artifact(dict(zip(names, contents)), body.get("meta"), dict(body["files"]))

    # -- statistics
    def record(self, kind: str, hit: bool) -> None:
        """Append one lookup to the statistics (best effort: a read-only cache records nothing)."""
        if not self.writable:
            return
        line = json.dumps({"build": self.build or build_id(), "kind": kind, "hit": hit,
                           "time": round(time.time(), 3)}) + "\n"
        try:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
            try:
                fd = os.open(self.root / _STATS, flags, 0o644)
            except FileNotFoundError:  # no cache folder yet (made here, not on every lookup)
                self.root.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.root / _STATS, flags, 0o644)
            try:
                os.write(fd, line.encode())  # one short O_APPEND write: lines of concurrent builds never interleave
            finally:
                os.close(fd)
        except OSError:
            pass

    def stats(self) -> dict[str, object]:
        """Entries, objects, bytes, and the hits and misses of the last build (by kind)."""
        entries = list(self._files("entries"))
        objects = list(self._files("objects"))
        size = sum(file_size(p) for p in entries + objects)
        lookups = []
        try:
            lookups = [json.loads(line) for line in (self.root / _STATS).read_text().splitlines() if line.strip()]
        except (OSError, ValueError):
            pass
        last = lookups[-1]["build"] if lookups else None
        by_kind: dict[str, list[int]] = {}
        for item in lookups:
            if item.get("build") == last:
                counts = by_kind.setdefault(item.get("kind", "?"), [0, 0])
                counts[0 if item.get("hit") else 1] += 1
        return {"root": str(self.root), "entries": len(entries), "objects": len(objects), "bytes": size,
                "last_build": {kind: {"hits": h, "misses": m} for kind, (h, m) in sorted(by_kind.items())}}

    # -- maintenance
    def _files(self, folder: str) -> Iterable[Path]:
        base = self.root / folder
        if not base.is_dir():
            return []
        return (p for p in base.glob("*/*") if p.is_file() and not p.name.startswith("."))

    def prune(self, max_bytes: int) -> tuple[int, int]:
        """Drop least recently used artifacts until the cache holds at most ``max_bytes``, then the objects
        only they named, orphan objects older than an hour (a younger one may belong to an entry being
        written), stray temporary files of killed writers, and old statistics. Returns (entries removed,
        bytes freed)."""
        before = self.stats()["bytes"]
        entries = sorted(self._files("entries"), key=lambda p: _mtime(p))
        kept: dict[Path, set[str]] = {}
        for path in entries:
            try:
                kept[path] = set(json.loads(path.read_bytes())["files"].values())
            except (OSError, ValueError, KeyError, AttributeError):
                path.unlink(missing_ok=True)
        sizes = {p: file_size(p) for p in self._files("objects")}
        by_sha = {p.name: s for p, s in sizes.items()}

        def total() -> int:
            live = set().union(*kept.values()) if kept else set()
            return sum(file_size(p) for p in kept) + sum(by_sha.get(sha, 0) for sha in live)

        removed, dropped = 0, set()
        for path in list(kept):
            if total() <= max_bytes:
                break
            path.unlink(missing_ok=True)
            dropped |= kept.pop(path)
            removed += 1
        live = set().union(*kept.values()) if kept else set()
        now = time.time()
        for path in sizes:
            if path.name not in live and (path.name in dropped or now - _mtime(path) > 3600):
                path.unlink(missing_ok=True)
                self._claims_path(path.name).unlink(missing_ok=True)
        for folder in ("objects", "entries"):
            for stray in (self.root / folder).glob("*/.*.tmp-*") if (self.root / folder).is_dir() else []:
                if now - _mtime(stray) > 3600:  # a writer killed long ago; a live one is younger
                    stray.unlink(missing_ok=True)
        self._trim_stats()
        return removed, before - self.stats()["bytes"]

    def _trim_stats(self, keep: int = 10000) -> None:
        path = self.root / _STATS
        try:
            lines = path.read_text().splitlines(keepends=True)
            if len(lines) > keep:
                self._write_atomically(path, "".join(lines[-keep:]).encode())
        except OSError:
            pass

    def clear(self) -> None:
        """Remove every artifact and object (the folder itself and anything else in it stay)."""
        for folder in ("objects", "entries", "claims"):
            shutil.rmtree(self.root / folder, ignore_errors=True)
        (self.root / _STATS).unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def open_store(cache: str | Path | Store | bool | None) -> Store | None:
    """The store a conversion uses: a Store as given; a folder; False: none; None: ``default_cache_dir()``."""
    if isinstance(cache, Store):
        return cache
    if cache is False:
        return None
    if cache is None or cache is True:
        folder = default_cache_dir()
        return None if folder is None else _shared_store(folder)
    return _shared_store(Path(cache).absolute())


_STORES: dict[Path, Store] = {}


def _shared_store(folder: Path) -> Store:
    """One Store per folder per process, so its warnings are given once per build."""
    if folder not in _STORES:
        _STORES[folder] = Store(folder)
    return _STORES[folder]
