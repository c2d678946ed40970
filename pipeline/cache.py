"""The build cache: a content-addressed store of conversion outputs and mesh geometry, shareable by
several checkouts and machines (a local folder, or one on a network file system).

Where it is: ``$USDFORGE_CACHE`` when set; else, for the one-off CLI and the Python API, the user's cache
folder (``$XDG_CACHE_HOME/usdforge``, i.e. ``~/.cache/usdforge``, as pip does), and for ``doit convert``
``build/cache/`` beside the library (``cache=PATH`` there). Layout::

    objects/ab/<sha256>          file contents, named by the SHA-256 of their bytes
    entries/ab/<key>.json        an artifact: {relative file name: object sha256} and its kind (what made
                                 it: ``mjcf``, ``mesh-geometry``, ``mjcf-compiled`` …), named by its cache key
    claims/ab/<sha256>           one empty file per entry, its claim: entry <key> written naming these
                                 objects under these file names, named by the SHA-256 of
                                 ``["entry", "<key>", [["<file name>", "<sha>"], …]]`` (sorted by name), in
                                 the folder of the key's first two characters; an older usdforge's claims
                                 (one per object: ``["<sha>", "<key>", "<file name>"]``) still count
    stats.log                    one line per lookup: build id, hit or miss
    size.json                    the size the last limit check found, and when (``Store.keep_limit``)

Every write goes to a temporary file in the destination's folder and is renamed into place, so a reader
(or a writer killed half way) never sees a partial object; two writers of one object write the same
bytes. Every object is hashed when read: a corrupt or truncated one is reported once, removed and treated
as absent (the artifact is rebuilt and written again). An entry is bound to its key: it must name the key
it is filed under, and every object it names must have been written for that key under that file name
(its claims): an entry naming other, intact objects (another artifact's, or its own under another name:
a layer's entry shares the whole output's objects) is a miss with one warning. A cache that cannot be
written (read-only, full disk) gives one warning and the build goes on without storing anything.

Bounded: a store holds at most ``max_bytes`` (default ``DEFAULT_MAX_BYTES``, ``$USDFORGE_CACHE_MAX_SIZE``,
e.g. ``20GB``; ``0``: no limit). A writer checks the size on its first store (unless a check less than
an hour old found it under half the limit) and after every tenth of the limit it writes; over the limit,
the least recently used artifacts are pruned down to 80 % of it (``prune``: regular files inside the
cache only, no link followed). No pxr here.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple

from usdforge.pipeline.fingerprint import by_size_in_threads

log = logging.getLogger("usdforge")

#: Environment variable naming the cache folder; "off" turns the cache off.
CACHE_ENV = "USDFORGE_CACHE"
#: Environment variable: the cache's size limit (``5GB``, ``500MB``, ``0`` for none).
MAX_SIZE_ENV = "USDFORGE_CACHE_MAX_SIZE"
#: The default size limit, in bytes (as ccache's): a few full libraries of robots.
DEFAULT_MAX_BYTES = 5_000_000_000
#: Pruning over the limit goes down to this fraction of it, so that it does not run at every store.
PRUNE_TO = 0.8
#: Environment variable grouping the lookups of one build (``doit convert`` sets it for its run).
BUILD_ENV = "USDFORGE_BUILD_ID"
_STATS = "stats.log"
_SIZE = "size.json"
_PROCESS_BUILD = os.urandom(6).hex()  # random, as uuid4's (uuid imports more than it needs)
#: The largest object read from a cache, in bytes (larger: treated as absent). Bounds a reader's memory
#: against a forged entry; a real robot's largest output (a geometry layer) is tens of MB.
MAX_OBJECT_BYTES = 1 << 30
#: The largest entry (JSON) read from a cache, in bytes.
MAX_ENTRY_BYTES = 16 << 20
_SHA = re.compile(r"[0-9a-f]{64}")
#: Opens a cache file without following a link, and without waiting on a FIFO's writer.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)


class KnownFiles(Mapping[str, bytes]):
    """Files to store (relative name → bytes), each read from ``folder`` only when asked for; ``known``: name
    → (SHA-256, size) of those written from a cache object this process verified (a layer restored from the
    build cache), which ``Store.put_entry`` need not read or hash when the store still holds the object."""

    def __init__(self, folder: Path, names: Iterable[str], known: dict[str, tuple[str, int]] | None = None,
                 given: Callable[[str], bytes | None] | None = None):
        self.folder = folder
        self._names = sorted(set(names))
        self._named = frozenset(self._names)
        self.known = {name: known[name] for name in self._names if known and name in known}
        self._read: dict[str, bytes] = {}
        #: A file's bytes as the build wrote them, or None to read it: the pipeline gives those of an output
        #: left in place, which is a link to the output and may be written in place meanwhile.
        self._given = given

    def __getitem__(self, name: str) -> bytes:
        if name not in self._read:
            if name not in self._named:
                raise KeyError(name)
            data = self._given(name) if self._given is not None else None
            self._read[name] = data if data is not None else (self.folder / name).read_bytes()
        return self._read[name]

    def subset(self, names: Iterable[str]) -> "KnownFiles":
        """These files of ``names`` only (what is read is read once for both)."""
        part = KnownFiles(self.folder, [name for name in names if name in self._named], self.known,
                          self._given)
        part._read = self._read
        return part

    def __contains__(self, name: object) -> bool:  # Mapping's would read the file
        return name in self._named

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class Artifact(NamedTuple):
    """What the cache holds for one key: files (relative name → bytes, verified), meta data, and the
    files' SHA-256 (relative name → hex)."""

    files: dict[str, bytes]
    meta: Any
    shas: dict[str, str]


def user_cache_dir() -> Path:
    """The user's cache folder for usdforge: ``$XDG_CACHE_HOME/usdforge`` (an absolute XDG_CACHE_HOME
    only, as the XDG base directory specification says), else ``~/.cache/usdforge``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "usdforge"


def default_cache_dir(build_dir: str | Path | None = None) -> Path | None:
    """``$USDFORGE_CACHE`` if set ("off" or empty: no cache); else ``<build_dir>/cache`` for a library build
    (``doit convert``), or ``user_cache_dir()`` without a build folder (the CLI and the Python API: a
    one-off conversion leaves nothing in the folder it runs in). Absolute."""
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        return None if configured.strip().lower() in ("", "off", "none", "0") else Path(configured).absolute()
    if build_dir is None:
        return user_cache_dir().absolute()
    return (Path(build_dir) / "cache").absolute()


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_size(text: str) -> int:
    """``5GB`` → 5·10⁹ bytes (KiB, MiB, GiB for powers of two; a bare number is bytes). ValueError."""
    stripped = text.strip().upper()
    number = stripped.rstrip("KMGTIB")
    unit = stripped[len(number):]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not 0 <= value < float("inf"):
        raise ValueError(f"expected a size like 500MB or 5GB, found {text!r}")
    return int(value * _UNITS[unit])


def max_cache_bytes() -> int | None:
    """The size limit of a cache: ``$USDFORGE_CACHE_MAX_SIZE`` (``0``: none, as None), else
    ``DEFAULT_MAX_BYTES``. A malformed value gives one warning and the default."""
    configured = os.environ.get(MAX_SIZE_ENV)
    if configured is None or not configured.strip():
        return DEFAULT_MAX_BYTES
    try:
        limit = parse_size(configured)
    except ValueError as exc:
        log.warning("warning: %s=%s: %s; using the default limit of %d bytes", MAX_SIZE_ENV, configured, exc,
                    DEFAULT_MAX_BYTES)
        return DEFAULT_MAX_BYTES
    return limit or None


def build_id() -> str:
    """The id of the build this process belongs to: ``$USDFORGE_BUILD_ID``, else one per process."""
    return os.environ.get(BUILD_ENV) or _PROCESS_BUILD


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: A control character, DEL or backslash: never in a file name of the cache.
_UNSAFE_CHARACTER = re.compile(r"[\x00-\x1f\\\x7f]")


def unsafe_file_name(name: object) -> str | None:
    """Why ``name`` (a file name in a cache entry or a worker's artifact) cannot be written under an
    output folder, or None when it can: a plain relative POSIX path (no ``..``, ``.`` or empty part, not
    absolute, no backslash, control character or NUL, at most 1024 characters)."""
    if not isinstance(name, str) or not name:
        return "not a file name"
    if len(name) > 1024:
        return "longer than 1024 characters"
    if _UNSAFE_CHARACTER.search(name) is not None:
        return "a control character or backslash in the name"
    if name.startswith("/"):
        return "an absolute path"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "a '..', '.' or empty part"
    return None


def unsafe_file_names(names: Iterable[object]) -> str | None:
    """The first problem of a set of names to be written together (each as ``unsafe_file_name``, and no
    name the folder of another), as ``'name': problem``; None when every one can be written."""
    names = list(names)
    for name in names:
        problem = unsafe_file_name(name)
        if problem is not None:
            return f"{name!r}: {problem}"
    # Each name's folders ("a/b/c": "a/b", "a"), by its slashes: every name is a plain relative path here,
    # so this is what ``PurePosixPath(name).parents`` gives (but "."), without pathlib's cost per name.
    folders = {name[:at] for name in names for at in _slashes(name)}
    for name in names:
        if name in folders:
            return f"{name!r}: both a file and a folder"
    return None


def _slashes(name: str) -> Iterator[int]:
    """The index of each "/" in ``name``."""
    at = name.find("/")
    while at >= 0:
        yield at
        at = name.find("/", at + 1)


def is_sha256(value: object) -> bool:
    """Whether ``value`` is a SHA-256 as the cache names objects: 64 lower-case hex digits."""
    return isinstance(value, str) and _SHA.fullmatch(value) is not None


def _read_regular(name: str, dir_fd: int | None, limit: int) -> bytes:
    """The bytes of the regular file ``name`` (relative to ``dir_fd``), read without following a link and
    without blocking on a FIFO or device. Raises OSError when it is not a regular file or holds more than
    ``limit`` bytes."""
    return _read_regular_stat(name, dir_fd, limit)[0]


def _read_regular_stat(name: str, dir_fd: int | None, limit: int) -> tuple[bytes, os.stat_result]:
    """``_read_regular``, and the file's status as it was opened."""
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{name}: not a regular file")
        if info.st_size > limit:
            raise OSError(f"{name}: larger than {limit} bytes")
        os.set_blocking(fd, True)
        # os.read, not a buffered stream: one system call for a file as large as fstat says (a buffered
        # read of a small cache object cost ten times more: 40 µs, 14 of them per cfg-only rebuild); then
        # until the end, for a file that grew since, at most one byte past the limit.
        chunks = [os.read(fd, info.st_size + 1)]
        read = len(chunks[0])
        while chunks[-1] and read <= limit:
            chunks.append(os.read(fd, min(1 << 20, limit + 1 - read)))
            read += len(chunks[-1])
        if read > limit:
            raise OSError(f"{name}: larger than {limit} bytes")
        return chunks[0] if len(chunks) <= 2 and not chunks[-1] else b"".join(chunks), info
    finally:
        os.close(fd)


#: The largest output file ``same_small_file`` hashes, in bytes: hashing costs less than replacing it up to here.
SAME_FILE_MAX_BYTES = 1 << 20


def same_small_file(path: Path, sha: str, names: int = 1, data: bytes | None = None) -> bool:
    """Whether ``path`` is a regular file (no link followed) of at most ``SAME_FILE_MAX_BYTES`` whose SHA-256
    is ``sha`` and that has ``names`` names (hard links): an output a rebuild need not replace. False for
    anything else (absent, larger, a symbolic link, a file linked elsewhere as well: a change made through
    another name would reach it).

    data: the bytes whose SHA-256 is ``sha``, when the caller holds them (verified or hashed already): the
    file's bytes are then compared with them instead of hashed (equal bytes, equal hash; a comparison costs a
    few µs a MB, a SHA-256 0.8 ms here)."""
    return _small_file_identity(path, sha, names, data) is not None


def _small_file_identity(path: Path, sha: str, names: int = 1, data: bytes | None = None) -> tuple[int, int] | None:
    """(device, inode) of ``path`` when ``same_small_file(path, sha, names, data)``, else None."""
    found = _small_file(path, sha, names, data)
    return None if found is None else found[1]


def verified_small_file(path: Path, sha: str) -> tuple[bytes, tuple[int, int]] | None:
    """(bytes, (device, inode)) of ``path`` when ``same_small_file(path, sha)`` (a regular file of one name,
    at most ``SAME_FILE_MAX_BYTES``, whose SHA-256 is ``sha``; no link followed), read once; else None."""
    return _small_file(path, sha)


def _small_file(path: Path, sha: str, names: int = 1, data: bytes | None = None) \
        -> tuple[bytes, tuple[int, int]] | None:
    """``same_small_file``'s check, giving the file's bytes and (device, inode) when it holds."""
    try:
        found, info = _read_regular_stat(str(path), None, SAME_FILE_MAX_BYTES)
    except OSError:
        return None
    if info.st_nlink != names:
        return None
    same = found == data if data is not None else sha256_bytes(found) == sha
    return (found, (info.st_dev, info.st_ino)) if same else None


def link_same_small_file(source: Path, sha: str, destination: Path, data: bytes | None = None,
                         identity: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """Make ``destination`` (absent) a hard link of ``source`` when ``same_small_file(source, sha, 1, data)``: a file
    with those bytes without writing one (creating a file cost 330 µs on this machine's disk in a slow
    hour, a link 13 µs). Returns the file's (device, inode); None, nothing left at ``destination``, when it
    cannot be (the file differs, has another name, changed meanwhile, is on another file system). The two
    names share one file until the caller is done: ``same_small_file(..., names=2)`` checks it again.

    identity: the (device, inode) ``verified_small_file`` gave for ``source`` in this build: the file is not
    read again here, the link is checked to be that file (a change in place meanwhile is found by the
    caller's check with ``names=2``)."""
    if identity is None:
        identity = _small_file_identity(source, sha, 1, data)
    if identity is None:
        return None
    try:
        os.link(source, destination, follow_symlinks=False)
    except OSError:
        return None
    try:
        linked = os.lstat(destination)
        if stat.S_ISREG(linked.st_mode) and (linked.st_dev, linked.st_ino) == identity and linked.st_nlink == 2:
            return identity
    except OSError:
        pass  # removed below, as one that is not the file hashed
    with contextlib.suppress(OSError):
        os.unlink(destination)  # the name now holds another file than the one hashed: not taken
    return None


class Store:
    """One cache folder. Methods never raise for cache problems: a broken cache is an absent one."""

    def __init__(self, root: str | Path, build: str | None = None, max_bytes: int | None | bool = True):
        self.root = Path(root)
        self._root_name = os.fspath(self.root)
        self.writable = True
        #: The build its lookups count for (None: ``build_id()``); a Dask worker records under the doit side's.
        self.build = build
        #: The size limit in bytes (None: none; True: ``max_cache_bytes()``), kept by pruning as it writes.
        self.max_bytes = max_cache_bytes() if max_bytes is True else (max_bytes or None)
        self._written = 0  # bytes this store wrote
        #: A conversion's background writes (``rules.robot.meshes.write_in_background``) store beside its
        #: own thread: ``_written`` is added to under one lock, and one thread checks and prunes at a time.
        self._written_lock = threading.Lock()
        self._check_lock = threading.Lock()
        self._next_check = 0  # when _written reaches this, the size is checked (0: at the first store)
        self._warned: set[str] = set()
        self._batch = threading.local()  # .lines: what ``records_batched`` holds back in this thread
        #: Descriptors of the top folders (``_TOP_FOLDERS``) held once opened: a rebuild reaches into them a
        #: few dozen times, and opening the root and the top folder each time was two thirds of every
        #: open (``_open_folder``). One replaced (the folder removed or swapped meanwhile: ``clear``) is
        #: kept open until the store is collected: another thread may be using its number.
        self._held: dict[str, tuple[int, tuple[int, int]]] = {}  # top folder → (descriptor, (device, inode))
        self._retired: list[int] = []
        self._held_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._held, self._retired)

    # -- paths
    def _object_path(self, sha: str) -> Path:
        return self.root / "objects" / sha[:2] / sha

    def _object_name(self, sha: str) -> str:
        """``_object_path`` as a string (for a stat: no pathlib object made)."""
        return f"{self._root_name}/objects/{sha[:2]}/{sha}"

    def _entry_path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / f"{key}.json"

    def _open_folder(self, parts: tuple[str, ...], create: bool = False) -> int:
        """A descriptor of the folder ``root/<parts…>``, each part opened without following a symbolic
        link (a link planted in a shared cache cannot send a read, write or removal elsewhere); made when
        ``create``. The root itself is the user's choice and may be a link. Raises OSError. The caller
        closes it.

        Below a top folder (``objects/ab``, ``entries/ab``, ``claims/ab``) the path is opened from the top
        folder's held descriptor (``_held_top``) while ``root/<top>`` still names that folder (one lstat
        instead of opening the root and the top folder again); once it names another (removed and made
        again by ``clear``, or a link planted in its place), it is opened afresh as the first time."""
        if len(parts) >= 2 and parts[0] in _TOP_FOLDERS:
            return _open_below(self._held_top(parts[0], create), parts[1:], create)
        return self._open_path(parts, create)

    def _held_top(self, name: str, create: bool) -> int:
        """The held descriptor of the top folder ``name`` when ``root/name`` still names the folder it
        describes (same device and inode, no link followed); else that folder opened as ``_open_path`` opens
        it, and held. Never closed by a caller: one replaced is closed when the store is collected (another
        thread may still be using its number)."""
        held = self._held.get(name)
        if held is not None and _names_folder(f"{self._root_name}/{name}", held[1]):
            return held[0]
        opened = self._open_path((name,), create)  # made when ``create``, else FileNotFoundError when gone
        info = os.fstat(opened)
        with self._held_lock:
            replaced = self._held.get(name)  # this thread's stale one, or one another thread held meanwhile
            if replaced is not None:
                self._retired.append(replaced[0])
            self._held[name] = (opened, (info.st_dev, info.st_ino))
        return opened

    def _open_path(self, parts: tuple[str, ...], create: bool) -> int:
        """``_open_folder`` from the root, every part opened (none held)."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            if not create:
                raise
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        if not parts:
            return fd
        try:
            return _open_below(fd, parts, create)
        finally:
            os.close(fd)

    def _read(self, parts: tuple[str, ...], name: str, limit: int) -> bytes:
        """The bytes of the regular file ``root/<parts…>/name``, no link followed on the way (OSError)."""
        folder = self._open_folder(parts)
        try:
            return _read_regular(name, folder, limit)
        finally:
            os.close(folder)

    def _unlink(self, parts: tuple[str, ...], name: str) -> None:
        """Remove ``root/<parts…>/name`` (a link itself, never its target); silent when absent."""
        try:
            folder = self._open_folder(parts)
        except OSError:
            return
        try:
            os.unlink(name, dir_fd=folder)
        except OSError:
            pass
        finally:
            os.close(folder)


    def _warn_once(self, topic: str, message: str) -> None:
        if topic not in self._warned:
            self._warned.add(topic)
            log.warning("%s", message)

    # -- writing
    def _write_atomically(self, destination: tuple[tuple[str, ...], str], data: bytes) -> None:
        """Write ``data`` to ``destination`` (its folder's parts under the root, its name: no pathlib object
        made) through a temporary sibling renamed into place; no folder on the way is a link followed (a
        planted one raises OSError)."""
        parts, name = destination
        folder = self._open_folder(parts, create=True)
        staging = f".{name}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
            try:
                # No fsync: every read verifies the object's hash, so one torn by a power loss is rejected then.
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(staging, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(staging, dir_fd=folder)
            except OSError:
                pass
            raise
        finally:
            os.close(folder)

    def _disable(self, exc: OSError) -> None:
        self.writable = False
        self._warn_once("write", f"warning: the build cache {self.root} cannot be written ({exc.strerror or exc}): "
                                 "building without storing results in it")

    def put_bytes(self, data: bytes) -> str | None:
        """Store ``data``; return its SHA-256, or None when the cache cannot be written."""
        return self._put_object(sha256_bytes(data), data) if self.writable else None

    def _put_object(self, sha: str, data: bytes) -> str | None:
        """Store ``data``, whose SHA-256 is ``sha``, unless the store holds it; ``sha``, or None when the
        cache cannot be written."""
        try:
            if not self._holds(sha, len(data)):
                self._write_atomically((("objects", sha[:2]), sha), data)
        except OSError as exc:
            self._disable(exc)
            return None
        return sha

    def put_entry(self, key: str, files: dict[str, bytes], meta: Any = None, kind: str | None = None,
                  background: Callable[[Callable[[], Any]], None] | None = None) -> dict[str, str] | None:
        """Store an artifact: every file's bytes, then the entry naming them (so an entry is never visible
        before its objects), with ``meta`` (plain JSON data, e.g. the warnings of the conversion) and its
        ``kind`` (what made it, for ``stats``). Returns {name: sha256} of the files stored, or None when
        nothing could be. Then keeps the size limit (``keep_limit``).

        ``files`` may be a ``KnownFiles``: a file whose object it knows (bytes this process restored from a
        verified object) and this store holds is then neither read nor hashed again.

        background: the files are read and hashed in this call, and the writing (objects, claim, entry, size
        limit) is handed to ``background(write)``, which runs ``write()`` later (a thread the caller waits
        for: a rebuild publishes its output meanwhile, and the files need not stay where they were read).
        Returns {name: sha256} of the files as they will be stored; a write that fails stores nothing, as
        without ``background``."""
        if not self.writable:  # switched off (a full disk, a read-only cache): no claim or entry either
            return None
        objects: dict[str, str] = {}
        unstored: list[tuple[str, bytes]] = []  # (sha256, bytes) of the objects to write
        known = getattr(files, "known", None) or {}
        for name in sorted(files):
            sha, size = known.get(name, (None, None))
            if sha is None or not self._holds(sha, size):
                data = files[name]
                sha = sha256_bytes(data)
                unstored.append((sha, data))
            objects[name] = sha

        def write() -> dict[str, str] | None:
            return self._write_entry(key, objects, unstored, meta, kind)

        if background is None:
            return write()
        background(write)
        return objects

    def _write_entry(self, key: str, objects: dict[str, str], unstored: list[tuple[str, bytes]], meta: Any,
                     kind: str | None) -> dict[str, str] | None:
        """``put_entry``'s writing: the objects ``unstored`` ((sha256, bytes)), the claim and the entry naming
        ``objects``, then the size limit; ``objects``, or None when the cache cannot be written."""
        if not self.writable:  # switched off since the files were read (another thread's write failed)
            return None
        written = 0
        for sha, data in unstored:
            if self._put_object(sha, data) is None:
                return None
            written += len(data)
        if not self._claim(key, objects):
            return None
        body = {"key": key, "files": objects, "meta": meta}
        if kind is not None:
            body["kind"] = kind
        body["checksum"] = sha256_bytes(json.dumps(body, sort_keys=True).encode())
        text = json.dumps(body, sort_keys=True).encode()
        try:
            if not self._same_entry(key, text):  # an unchanged entry is only marked used, not rewritten
                self._write_atomically((("entries", key[:2]), f"{key}.json"), text)
        except OSError as exc:
            self._disable(exc)
            return None
        with self._written_lock:
            self._written += written
        self.keep_limit()
        return objects

    def _holds(self, sha: str, size: int) -> bool:
        """Whether the object ``sha`` is a regular file of ``size`` bytes (as ``put_bytes`` finds one stored)."""
        try:
            present = os.lstat(self._object_name(sha))
        except OSError:
            return False
        return stat.S_ISREG(present.st_mode) and present.st_size == size

    def _same_entry(self, key: str, text: bytes) -> bool:
        """Whether the entry ``key`` holds exactly ``text``; if so its time is set to now (its last use, as a
        lookup sets it). No link followed."""
        try:
            folder = self._open_folder(("entries", key[:2]))
        except OSError:
            return False
        try:
            name = f"{key}.json"
            if _read_regular(name, folder, len(text)) != text:
                return False
            os.utime(name, dir_fd=folder, follow_symlinks=False)
            return True
        except OSError:
            return False
        finally:
            os.close(folder)

    def keep_limit(self) -> None:
        """Prune the least recently used artifacts down to ``PRUNE_TO`` of ``max_bytes`` when the cache
        holds more; checked at this store's first write and then after every tenth of the limit written.
        A check scans the cache's files (a fraction of a second for tens of thousands) and notes the size
        it found (``size.json``); a first write skips the scan when a check less than an hour old found
        the cache under half its limit (a one-off conversion need not scan a large cache)."""
        if self.max_bytes is None or self._written < self._next_check:
            return
        if not self._check_lock.acquire(blocking=False):
            return  # another thread of this store is checking: its check covers these bytes
        try:
            self._check_size()
        finally:
            self._check_lock.release()

    def _check_size(self) -> None:
        if self._written < self._next_check:
            return  # checked by another thread meanwhile
        first = self._next_check == 0
        self._next_check = self._written + self.max_bytes // 10
        if first and self._recently_small():
            return
        size = self.size()
        if size > self.max_bytes:
            removed, freed = self.prune(int(self.max_bytes * PRUNE_TO))
            size -= freed
            log.info("usdforge: the build cache %s went over its limit of %d bytes: pruned %d artifact(s), "
                     "%d bytes", self.root, self.max_bytes, removed, freed)
        try:
            self._write_atomically(((), _SIZE), json.dumps({"bytes": size, "time": time.time()}).encode())
        except OSError:
            pass  # the note only saves a later scan

    def _recently_small(self) -> bool:
        """Whether the last size check (``size.json``) is under an hour old and found under half the limit."""
        try:
            note = json.loads(_read_regular(str(self.root / _SIZE), None, 4096))
            return 0 <= time.time() - float(note["time"]) < 3600 and int(note["bytes"]) < self.max_bytes / 2
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def _claim(self, key: str, objects: dict[str, str]) -> bool:
        """Record that the objects of ``objects`` (file name → sha256) were written for the entry ``key`` as
        those files: one empty file for the entry, named by the hash of the key and the whole mapping
        (``_entry_claim_name``), so that recording and checking it costs one file operation however many
        files the entry names or entries share an object (one mesh at many scales: every entry of a library
        claims its meshes layer). Creating a file was most of a claim's cost (skydio_x2's PhysX-only edit:
        15 claims, about 1.5 ms; now 5). No link followed. False when the cache cannot be written."""
        try:
            if not all(map(is_sha256, objects.values())):
                raise OSError("not an object name")
            claim = _entry_claim_name(key, objects)
            folder = self._open_folder(("claims", _claim_folder(key, claim)), create=True)
            try:
                # Read-only: a claim already there needs no write (a read-only shared cache).
                descriptor = os.open(claim, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644,
                                     dir_fd=folder)
                try:
                    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                        raise OSError(f"{claim}: the claim is not a regular file")
                finally:
                    os.close(descriptor)
            finally:
                os.close(folder)
        except OSError as exc:
            self._disable(exc)
            return False
        return True

    def _unclaimed(self, key: str, objects: dict[str, str]) -> list[str]:
        """The objects of ``objects`` (file name → sha256) not claimed for entry ``key`` under that name: no
        regular file (no link followed) for the entry's claim, nor for each object's claim as an older
        usdforge kept them (one per object, ``claims/<claim[:2]>/<claim>``)."""
        if not isinstance(key, str) or not all(map(is_sha256, objects.values())) \
                or not all(isinstance(name, str) for name in objects):
            return list(objects.values())
        claim = _entry_claim_name(key, objects)
        if self._is_regular_in(("claims", _claim_folder(key, claim)), claim):
            return []  # the entry's own claim: every object written for it under its name
        return [sha for name, sha in objects.items() if not self._is_regular(("claims",), _claim_name(sha, key, name))]

    def _is_regular(self, parts: tuple[str, ...], name: str) -> bool:
        """Whether ``root/<parts…>/<name[:2]>/name`` is a regular file, no link followed on the way."""
        return self._is_regular_in((*parts, name[:2]), name)

    def _is_regular_in(self, parts: tuple[str, ...], name: str) -> bool:
        """Whether ``root/<parts…>/name`` is a regular file, no link followed on the way."""
        try:
            folder = self._open_folder(parts)
        except OSError:
            return False
        try:
            return stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
        except OSError:
            return False
        finally:
            os.close(folder)

    # -- reading
    def _object_bytes(self, sha: str) -> bytes:
        """The object file's bytes (unverified): a regular file within ``MAX_OBJECT_BYTES``, else OSError."""
        if not is_sha256(sha):  # never a path: a forged "../../x" would read (and remove) any file
            raise OSError(f"{sha!r}: not an object name")
        return self._read(("objects", sha[:2]), sha, MAX_OBJECT_BYTES)

    def get_bytes(self, sha: str) -> bytes | None:
        """The object's bytes if present and intact; a corrupt one is removed, with a warning, and None.
        Only a regular file is read (a link, FIFO or device is absent), within ``MAX_OBJECT_BYTES``."""
        try:
            data = self._object_bytes(sha)
        except OSError:
            return None
        if sha256_bytes(data) != sha:
            self._reject(sha)
            return None
        return data

    def verified_path(self, sha: str) -> Path | None:
        """The object's file if present and intact (hashed as ``get_bytes`` does, without keeping its
        bytes), for a reader that opens files itself; a corrupt one is removed, with a warning, and None.
        Objects are never rewritten with other bytes, so the file stays as verified."""
        if not is_sha256(sha):
            return None
        try:
            folder = self._open_folder(("objects", sha[:2]))
        except OSError:
            return None
        try:
            fd = os.open(sha, _READ_FLAGS, dir_fd=folder)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_OBJECT_BYTES:
                    return None
                os.set_blocking(fd, True)
                with os.fdopen(fd, "rb", closefd=False) as stream:
                    actual = hashlib.file_digest(stream, "sha256").hexdigest()
            finally:
                os.close(fd)
        except OSError:
            return None
        finally:
            os.close(folder)
        if actual != sha:
            self._reject(sha)
            return None
        return self._object_path(sha)

    def _reject(self, sha: str) -> None:
        path = self._object_path(sha)
        self._warn_once(f"corrupt:{sha}", f"warning: the build cache object {path} is corrupt (its content "
                                          "does not match its hash): ignored, the artifact is rebuilt")
        self._unlink(("objects", sha[:2]), sha)

    def entry(self, key: str) -> dict[str, Any] | None:
        """An artifact's entry ({"files": {relative name: object sha256}, "meta": …}), or None when absent
        or unreadable. An entry naming a file that cannot be written under an output folder
        (``unsafe_file_names``) or an object by anything but a SHA-256 is corrupt."""
        try:
            folder = self._open_folder(("entries", key[:2]))
        except FileNotFoundError:
            return None
        except OSError:
            folder = None  # reported as corrupt below, as a read through it would be
        try:
            return self._entry_in(key, folder)
        finally:
            if folder is not None:
                os.close(folder)

    def _entry_in(self, key: str, folder: int | None) -> dict[str, Any] | None:
        """``entry`` of ``key``, read through the descriptor of its folder (None: unreadable). The entry's
        ``Path`` is made only for a warning (pathlib costs more than the read: a rebuild looks a dozen up)."""
        name = f"{key}.json"
        try:
            if folder is None:
                raise OSError(f"{self._entry_path(key).parent}: not a folder of the cache")
            body = json.loads(_read_regular(name, folder, MAX_ENTRY_BYTES))
            checksum = body.pop("checksum")
            if body.get("key") != key or sha256_bytes(json.dumps(body, sort_keys=True).encode()) != checksum:
                raise ValueError("checksum")
            if not isinstance(body["files"], dict):
                raise ValueError("files")
            if unsafe_file_names(body["files"]) or not all(map(is_sha256, body["files"].values())):
                raise ValueError("names")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, AttributeError, TypeError, RecursionError):
            self._warn_once(f"entry:{key}", f"warning: the build cache entry {self._entry_path(key)} is corrupt: "
                                            "ignored, the artifact is rebuilt")
            return None
        unclaimed = self._unclaimed(key, body["files"])
        if unclaimed:
            # Claims in a file named by the object (an older usdforge's, one line per entry): a miss, stored
            # again, not a forgery worth a warning.
            if not all(self._is_regular(("claims",), sha) for sha in unclaimed):
                self._warn_once(f"entry:{key}", f"warning: the build cache entry {self._entry_path(key)} names "
                                                "objects that were not written for its key under those names: "
                                                "ignored, the artifact is rebuilt")
            return None
        # The entry's modification time is its last use (prune drops the oldest); in a read-only cache it
        # cannot be set, and the entry is used all the same.
        with contextlib.suppress(OSError):
            os.utime(name, dir_fd=folder, follow_symlinks=False)
        return body

    def get_entry(self, key: str) -> Artifact | None:
        """Every file of an artifact, verified, and its meta data; None when any file is absent or corrupt."""
        body = self.entry(key)
        if body is None:
            return None
        names, shas = list(body["files"]), list(body["files"].values())
        # Read and hashed side by side when large (a robot's geometry layer and textures: megabytes); one
        # object (most of a rebuild's dozen layer lookups) needs no stat of its size first.
        contents = [self.get_bytes(sha) for sha in shas] if len(shas) < 2 else \
            by_size_in_threads(self.get_bytes, shas, [_lsize(self._object_name(sha)) for sha in shas])
        if any(data is None for data in contents):
            return None
        return Artifact(dict(zip(names, contents)), body.get("meta"), dict(body["files"]))

    # -- statistics
    def record(self, kind: str, hit: bool) -> None:
        """Append one lookup to the statistics (best effort: a read-only cache records nothing); inside
        ``records_batched``, when its block ends."""
        if not self.writable:
            return
        # The line json.dumps gives for {"build", "kind", "hit", "time"}, made without building and encoding a
        # dict: a rebuild records a dozen lookups.
        line = (f'{{"build": {_json_text(self.build or build_id())}, "kind": {_json_text(kind)}, '
                f'"hit": {"true" if hit else "false"}, "time": {round(time.time(), 3)!r}}}\n')
        pending = getattr(self._batch, "lines", None)
        if pending is not None:
            pending.append(line)
            return
        self._append_records(line)

    @contextlib.contextmanager
    def records_batched(self) -> Iterator[None]:
        """Within the block, ``record`` keeps its lines and they are appended in one write as the block ends:
        a cfg-only rebuild looks a dozen units up, and an open, write and close each cost it about 0.4 ms.
        Per thread (another thread's lookups are appended as they come); nested blocks write with the
        outermost."""
        if getattr(self._batch, "lines", None) is not None:
            yield
            return
        lines = self._batch.lines = []
        try:
            yield
        finally:
            self._batch.lines = None
            if lines and self.writable:
                self._append_records("".join(lines))

    def _append_records(self, text: str) -> None:
        """Append ``text`` (whole lines) to the statistics in one O_APPEND write."""
        try:
            # No link followed: a stats.log planted as a link would append to any file the user can write.
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
            try:
                fd = os.open(self.root / _STATS, flags, 0o644)
            except FileNotFoundError:  # no cache folder yet (made here, not on every lookup)
                self.root.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.root / _STATS, flags, 0o644)
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    # One O_APPEND write: lines of concurrent builds never interleave.
                    os.write(fd, text.encode())
            finally:
                os.close(fd)
        except OSError:
            pass  # the statistics are best effort: a cache that cannot take them still serves the build

    def _lookups(self) -> list[dict[str, Any]]:
        try:
            text = _read_regular(str(self.root / _STATS), None, MAX_ENTRY_BYTES * 4).decode()
            return [item for item in map(json.loads, filter(str.strip, text.splitlines())) if isinstance(item, dict)]
        except (OSError, ValueError):
            return []

    def size(self) -> int:
        """Bytes of the cache's entries and objects (regular files only)."""
        return sum(self._files("entries").values()) + sum(self._files("objects").values())

    def stats(self) -> dict[str, object]:
        """Entries, objects, bytes, what takes the room (``by_kind``: kind → entries and bytes, each object
        counted once, for the kind of the first entry naming it; objects no entry names are
        ``unreferenced``; entries stored before kinds were recorded are ``unknown``), the size limit, and
        the hits and misses of the last build (by kind)."""
        entries = self._files("entries")
        objects = self._files("objects")
        size = sum(entries.values()) + sum(objects.values())
        by_sha = {path.name: bytes_ for path, bytes_ in objects.items()}
        by_kind: dict[str, dict[str, int]] = {}
        for path, entry_bytes in sorted(entries.items()):
            body = self._entry_body(path)
            kind = str(body.get("kind") or "unknown") if body is not None else "corrupt"
            room = by_kind.setdefault(kind, {"entries": 0, "bytes": 0})
            room["entries"] += 1
            room["bytes"] += entry_bytes
            files = body.get("files") if body is not None else None
            for sha in files.values() if isinstance(files, dict) else ():
                room["bytes"] += by_sha.pop(sha, 0) if isinstance(sha, str) else 0
        if by_sha:
            by_kind["unreferenced"] = {"entries": 0, "bytes": sum(by_sha.values())}
        lookups = self._lookups()
        last = lookups[-1].get("build") if lookups else None
        last_kinds: dict[str, list[int]] = {}
        for item in lookups:
            if item.get("build") == last:
                counts = last_kinds.setdefault(str(item.get("kind", "?")), [0, 0])
                counts[0 if item.get("hit") else 1] += 1
        return {"root": str(self.root), "entries": len(entries), "objects": len(objects), "bytes": size,
                "max_bytes": self.max_bytes,
                "by_kind": dict(sorted(by_kind.items(), key=lambda item: -item[1]["bytes"])),
                "last_build": {kind: {"hits": h, "misses": m} for kind, (h, m) in sorted(last_kinds.items())}}

    def _entry_body(self, path: Path) -> dict[str, Any] | None:
        """The JSON of the entry file ``path`` (as ``_scan`` lists it), unchecked; None when unreadable."""
        try:
            body = json.loads(self._read(path.parent.relative_to(self.root).parts, path.name, MAX_ENTRY_BYTES))
        except (OSError, ValueError, RecursionError):
            return None
        return body if isinstance(body, dict) else None

    # -- maintenance
    def _scan(self, folder: str) -> list[tuple[Path, os.stat_result]]:
        """(path, lstat) of every file in ``root/folder/*/`` (temporary ones included), without following a
        symbolic link: a linked folder is not entered, and a link is listed as itself (so removing it
        removes the link, never its target)."""
        found = []
        try:
            if os.path.islink(self.root / folder):
                return []
            with os.scandir(self.root / folder) as top:
                subs = [entry for entry in top if entry.is_dir(follow_symlinks=False)]
            for sub in subs:
                with os.scandir(sub.path) as files:
                    found.extend((Path(entry.path), entry.stat(follow_symlinks=False)) for entry in files
                                 if not entry.is_dir(follow_symlinks=False))
        except OSError:
            pass
        return found

    def _files(self, folder: str) -> dict[Path, int]:
        """{path: size} of the regular files in ``root/folder/*/`` (temporary ones excluded), no link followed."""
        return {path: info.st_size for path, info in self._scan(folder)
                if stat.S_ISREG(info.st_mode) and not path.name.startswith(".")}

    def _remove(self, path: Path) -> None:
        """Remove ``path`` (``root/<folder>/<sub>/<name>``, as ``_scan`` lists it) without following a link."""
        self._unlink(path.parent.relative_to(self.root).parts, path.name)

    def prune(self, max_bytes: int) -> tuple[int, int]:
        """Drop least recently used artifacts until the cache holds at most ``max_bytes``, then the objects
        only they named, orphan objects older than an hour (a younger one may belong to an entry being
        written), stray temporary files of killed writers, links and other non-regular files (a cache holds
        none), and old statistics. No symbolic link is followed, so nothing outside the cache folder is
        read or removed. Returns (entries removed, bytes freed)."""
        before = self.size()
        entry_sizes = self._files("entries")
        kept: dict[Path, dict[str, str]] = {}  # entry file → {file name: object}
        for path in sorted(entry_sizes, key=lambda p: _mtime(p)):
            try:
                files = json.loads(self._read(path.parent.relative_to(self.root).parts, path.name,
                                              MAX_ENTRY_BYTES))["files"]
                kept[path] = {name: sha for name, sha in files.items() if isinstance(name, str) and is_sha256(sha)}
            except (OSError, ValueError, KeyError, AttributeError, TypeError, RecursionError):
                self._remove(path)
        sizes = self._files("objects")
        by_sha = {p.name: s for p, s in sizes.items()}
        users = collections.Counter(sha for files in kept.values() for sha in files.values())  # entries naming each
        total = sum(entry_sizes[p] for p in kept) + sum(by_sha.get(sha, 0) for sha in users)

        removed, dropped = 0, set()
        for path in list(kept):  # oldest first
            if total <= max_bytes:
                break
            self._remove(path)
            total -= entry_sizes[path]
            for sha in kept.pop(path).values():
                users[sha] -= 1
                if not users[sha]:
                    del users[sha]
                    total -= by_sha.get(sha, 0)
                    dropped.add(sha)
            removed += 1
        live = set(users)
        now = time.time()
        for path in sizes:
            if path.name not in live and (path.name in dropped or now - _mtime(path) > 3600):
                self._remove(path)
        # The claims of the entries kept; any other claim older than an hour (a younger one may belong to an
        # entry being written) is dropped, as are an older usdforge's claims files.
        claims = {_claim_name(sha, path.name.removesuffix(".json"), name)
                  for path, files in kept.items() for name, sha in files.items()}
        claims.update(_entry_claim_name(path.name.removesuffix(".json"), files) for path, files in kept.items())
        for path, info in self._scan("claims"):
            if path.name not in claims and not path.name.startswith(".") and now - info.st_mtime > 3600:
                self._remove(path)
        for folder in ("objects", "entries", "claims"):
            for path, info in self._scan(folder):
                stray = path.name.startswith(".") and ".tmp-" in path.name
                if not stat.S_ISREG(info.st_mode) or (stray and now - info.st_mtime > 3600):
                    # A writer killed long ago (a live one is younger), or what no writer makes: a link, a FIFO.
                    self._remove(path)
        self._trim_stats()
        return removed, before - self.size()

    def _trim_stats(self, keep: int = 10000) -> None:
        try:
            lines = _read_regular(str(self.root / _STATS), None, MAX_ENTRY_BYTES * 4).decode().splitlines(keepends=True)
            if len(lines) > keep:
                self._write_atomically(((), _STATS), "".join(lines[-keep:]).encode())
        except (OSError, ValueError):
            pass

    def clear(self) -> None:
        """Remove every artifact and object (the folder itself and anything else in it stay). A folder
        that is a symbolic link is removed as a link: its target is not touched."""
        for name in ("objects", "entries", "claims", _STATS, _SIZE):
            path = self.root / name
            if path.is_symlink() or not path.is_dir():
                path.unlink(missing_ok=True)
            else:
                shutil.rmtree(path, ignore_errors=True)  # rmtree never follows a link inside the tree


#: A str as JSON (a quoted string): json's own encoder, without json.dumps' checks of its arguments.
_json_text = json.encoder.encode_basestring_ascii


def _claim_folder(key: str, claim: str) -> str:
    """The folder (under ``claims/``) of the claim ``claim`` of entry ``key``: the key's first two characters,
    so that an entry's claims share one folder (a cache still filling makes one folder per entry stored, not
    one per file); ``claim[:2]`` for a key that does not start with two hex digits (never a folder named by
    the key's own characters: ``..``)."""
    return key[:2] if _HEX2.fullmatch(key[:2]) else claim[:2]


_HEX2 = re.compile(r"[0-9a-f]{2}")


def _claim_name(sha: str, key: str, name: str) -> str:
    """The file name of a claim: object ``sha`` written for entry ``key`` as its file ``name``. Bound to the
    name too: a layer's entry shares objects with the whole output's entry, so an entry forged to name its
    own objects under other names (a layer's bytes as the stage) would pass a claim by key alone. Hashed,
    so that a key or name of any length gives one short file name; of a JSON list, so that no two claims
    hash the same text."""
    return sha256_bytes(json.dumps([sha, key, name]).encode())


def _entry_claim_name(key: str, objects: dict[str, str]) -> str:
    """The file name of an entry's claim: entry ``key`` written naming exactly ``objects`` (file name →
    sha256). Bound to the names too (an entry forged to name its own objects under other names, a layer's
    bytes as the stage, does not match). Hashed, of a JSON list unlike any object claim's three strings."""
    return sha256_bytes(json.dumps(["entry", key, sorted(objects.items())]).encode())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0


#: The cache's top folders, whose descriptors a Store holds (``Store._held_top``).
_TOP_FOLDERS = frozenset({"objects", "entries", "claims"})


def _names_folder(path: str, identity: tuple[int, int]) -> bool:
    """Whether ``path`` (its last part not followed if a link) is the folder of (device, inode) ``identity``."""
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == identity and stat.S_ISDIR(now.st_mode)


def _open_below(top: int, parts: tuple[str, ...], create: bool) -> int:
    """A new descriptor of the folder ``<top>/<parts…>`` (``parts`` not empty; ``top`` a descriptor the caller
    keeps open), each part opened without following a symbolic link; made when ``create``. Raises OSError."""
    fd = top
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            if fd != top:
                os.close(fd)
            fd = child
    except BaseException:
        if fd != top:
            os.close(fd)
        raise
    return fd


def _close_all(held: dict[str, tuple[int, tuple[int, int]]], retired: list[int]) -> None:
    """Close a collected store's held descriptors."""
    for fd in [*(fd for fd, _ in held.values()), *retired]:
        with contextlib.suppress(OSError):
            os.close(fd)
    held.clear()
    retired.clear()


def _lsize(path: str | Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


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
