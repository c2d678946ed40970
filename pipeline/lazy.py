"""The lazy key: what an output was built from, stored beside it as TOML so a user can see why it rebuilt.

``<usd_dir>/<stem>.usdforge.toml`` records usdforge's version, the cache key (``pipeline.content_key``),
the config digest, content hashes of the asset and of every file it references (named relative to the
asset's folder or its package root, never by absolute path), content hashes of every output, the cfg
without its location fields, the code stamp, and the inputs' stamps (size, times, inode, device: an input
whose settled stamp is unchanged is not hashed again, ``pipeline.fingerprint``; a moved or cloned one has
another stamp and is). Nothing in it names where the checkout is (but for a xacro whose output does:
``location``), so a moved or cloned checkout is recognised as up to date.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import attrs
import tomli_w

from usdforge.pipeline.code_version import code_stamp
from usdforge.pipeline.content_key import absolute_location, library_versions, resolve_name
from usdforge.pipeline.fingerprint import RACY_SECONDS, RACY_SECONDS_FINE, file_digest, file_stamp, settled  # noqa: F401
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
    code: ``code_version.code_stamp()`` of the usdforge that wrote the outputs.
    location: ``content_key.absolute_location`` when the outputs name where the source is (a xacro using
        ``$(cwd)`` or ``$(dirname)``); empty otherwise.
    stamps: {file name of the asset, or reference name: ``fingerprint.file_stamp``} of the inputs
        as they were hashed (``file_stamp``): a file that still has its stamp here is not hashed again
        (``converters.AssetConverterBase``); a moved or cloned one has another and is hashed.
    reading: ``layer_keys.reading_key``: what decides which files the source references besides their
        contents; a rebuild whose only reason is another cfg takes the references recorded here instead of
        scanning the source again when it is unchanged ("": always scanned).
    units: {unit: key} of each unit whose file is an output as it was built under that key
        (``layer_keys.unit_keys``; a robot's layers and its Isaac Lab cfg): a rebuild whose unit has the same
        key takes that output, still holding the bytes ``outputs`` records, instead of looking the unit up
        in the build cache (``rules.robot.layer_reuse.layer_scope``).
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
    code: str = ""
    location: dict[str, Any] = attrs.field(factory=dict)
    stamps: dict[str, list[int]] = attrs.field(factory=dict)
    reading: str = ""
    units: dict[str, str] = attrs.field(factory=dict)


def key_to_toml(key: LazyKey) -> str:
    """TOML text of a key (None values of the cfg left out: TOML has no null)."""
    from usdforge.schemas.serialization import _drop_none

    data = attrs.asdict(key)
    data["cfg"] = _drop_none(data["cfg"])
    return tomli_w.dumps(data)


def read_key(path: Path) -> LazyKey | None:
    """The key stored at ``path``, or None when it is missing or unreadable (then: rebuild)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    import tomli  # here: a first conversion (no key yet) never imports it

    try:
        return LazyKey(**tomli.loads(text))
    except (tomli.TOMLDecodeError, TypeError):
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
    if key.code != code_stamp():
        reasons.append("usdforge's code changed")
    if key.location and key.location != absolute_location(asset, packages):
        reasons.append("the outputs name the source's folder ($(cwd) or $(dirname)), and it moved")
    if reasons:
        return reasons  # out of date already: the outputs are rewritten, no need to hash them
    for relative, sha in key.outputs.items():
        if file_digest(usd_dir / relative) != sha:
            reasons.append(f"output {relative} is missing or was modified")
            break
    return reasons


