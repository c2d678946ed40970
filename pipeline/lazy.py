"""The lazy key: what an output was built from, stored beside it as TOML so a user can see why it rebuilt.

``<usd_dir>/<stem>.usdforge.toml`` records usdforge's version, the cache key (``pipeline.content_key``),
the config digest, content hashes of the asset and of every file it references (named relative to the
asset's folder or its package root, never by absolute path), content hashes of every output, the cfg
without its location fields, and the inputs' stamps (size, times, inode: an input whose stamp is
unchanged is not hashed again; a moved or cloned one has another stamp and is). Nothing in it names
where the checkout is, so a moved or cloned checkout is recognised as up to date.
"""

from __future__ import annotations

import os
import time
import tomllib
from pathlib import Path
from stat import S_ISREG
from typing import Any, Callable

import attrs
import tomli_w

from usdforge.pipeline.content_key import library_versions, resolve_name
from usdforge.pipeline.fingerprint import file_digest
from usdforge.schemas import __version__


@attrs.frozen(kw_only=True)
class LazyKey:
    """What one conversion's outputs were built from.

    kind: the rule ("mesh", "urdf", "mjcf").
    cache_key: the content key of the inputs (``pipeline.content_key.cache_key``).
    config_digest: ``content_key.location_free_digest`` of the cfg (usdforge's version included).
    source: the asset's path relative to the output folder (for people; the check uses content).
    libraries: versions of the libraries that shape the bytes (``content_key.library_versions``).
    asset: {file name: sha256} of the source file.
    references: {name relative to the source's folder, or package://…: sha256 or "missing"} of every
        file the source references, recursively.
    outputs: {path relative to usd_dir: sha256} of every file written (the key itself excluded).
    cfg: the cfg as plain data without location fields, for people reading the file.
    stamps: {file name of the asset, or reference name: [size, mtime_ns, ctime_ns, inode]} of the inputs
        as they were hashed (``file_stamp``): a file that still has its stamp here is not hashed again
        (``converters.AssetConverterBase``); a moved or cloned one has another and is hashed.
    """

    usdforge: str = __version__
    kind: str
    cache_key: str
    config_digest: str
    source: str = ""
    libraries: dict[str, str] = attrs.field(factory=dict)
    asset: dict[str, str]
    references: dict[str, str]
    outputs: dict[str, str] = attrs.field(factory=dict)
    cfg: dict[str, Any] = attrs.field(factory=dict)
    stamps: dict[str, list[int]] = attrs.field(factory=dict)


#: A file changed this recently (s) is not stamped: a later same-size edit within the same tick of the file
#: system's clock would keep the stamp (git's "racily clean" files). Times in whole seconds may come from
#: a coarse file system (FAT: 2 s ticks); finer times tick at the kernel's coarse clock (milliseconds).
RACY_SECONDS = 2.0
RACY_SECONDS_FINE = 0.1


def file_stamp(path: str | Path) -> list[int] | None:
    """[size, mtime_ns, ctime_ns, inode] of a regular file, or None (missing, not a file). The change
    time cannot be set by tools that restore modification times (tar, rsync -t), and moves it."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    if not S_ISREG(stat.st_mode):
        return None
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino & (2 ** 63 - 1)]  # TOML: 64-bit ints


def settled(stamp: list[int] | None, hashed_at: int | None = None) -> bool:
    """Whether a stamp may be trusted later: its file last changed more than ``RACY_SECONDS`` (or
    ``RACY_SECONDS_FINE`` when its times have a sub-second part) before ``hashed_at`` (ns since the
    epoch; default now), when its content started being read: any later change gets a later time."""
    if stamp is None:
        return False
    fine = stamp[1] % 1_000_000_000 != 0 or stamp[2] % 1_000_000_000 != 0
    window = min(RACY_SECONDS_FINE, RACY_SECONDS) if fine else RACY_SECONDS
    start = time.time_ns() if hashed_at is None else hashed_at
    return start - max(stamp[1], stamp[2]) > window * 1e9


def key_to_toml(key: LazyKey) -> str:
    """TOML text of a key (None values of the cfg left out: TOML has no null)."""
    from usdforge.schemas.serialization import _drop_none

    data = attrs.asdict(key)
    data["cfg"] = _drop_none(data["cfg"])
    return tomli_w.dumps(data)


def read_key(path: Path) -> LazyKey | None:
    """The key stored at ``path``, or None when it is missing or unreadable (then: rebuild)."""
    try:
        data = tomllib.loads(path.read_text())
        return LazyKey(**data)
    except (OSError, tomllib.TOMLDecodeError, TypeError, UnicodeDecodeError):
        return None


def stale_reasons(key: LazyKey | None, config_digest: str, asset: Path, usd_dir: Path,
                  packages: dict[str, str], digest: Callable[[str | Path], str] = file_digest) -> list[str]:
    """Why the outputs described by ``key`` are out of date; empty when they are up to date.

    The references are not re-scanned: the scan is a function of the asset's and the references'
    contents (and of the cfg), all compared here; each recorded name is resolved from the asset's folder
    (or its package), wherever that is now. A reference that was missing is recorded as ``"missing"``,
    so creating it later counts as a change. digest: how to hash a file (a memo of the caller's).
    """
    if key is None:
        return ["no usable lazy key (first conversion, or the key was deleted)"]
    reasons = []
    if key.usdforge != __version__:
        reasons.append(f"usdforge changed from {key.usdforge} to {__version__}")
    if key.config_digest != config_digest:
        reasons.append("the configuration changed")
    asset_sha = digest(asset)
    if key.asset != {asset.name: asset_sha}:
        reasons.append(f"the asset {asset} changed")
    current = {}
    for name in key.references:
        path = resolve_name(name, asset.parent, packages)
        current[name] = digest(path) if path is not None else "unresolved"
    changed = [name for name, sha in key.references.items() if current[name] != sha]
    if changed:
        reasons.append(f"referenced file(s) changed: {', '.join(changed)}")
    if key.libraries != library_versions(key.kind):
        reasons.append("the libraries that shape the output changed version")
    if reasons:
        return reasons  # out of date already: the outputs are rewritten, no need to hash them
    for relative, sha in key.outputs.items():
        if file_digest(usd_dir / relative) != sha:
            reasons.append(f"output {relative} is missing or was modified")
            break
    return reasons


