"""Cache keys from content, never from location.

A conversion's key hashes the converter kind, the source's file name and content, the content of every
file it references (each named relative to the source's folder, or as ``package://NAME/…`` under a ROS
package root), the cfg digest (location fields left out), the output file name, usdforge's version (and
the content of the code that writes the bytes) and the versions of the libraries that shape them. Two checkouts, two machines, or a copy of
the source elsewhere get the same key when the inputs are the same. No pxr here.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any, Callable

from usdforge.pipeline.fingerprint import file_digest
from usdforge.schemas import __version__, config_digest

#: Distributions whose versions shape the bytes a conversion writes, per kind.
BYTE_SHAPING = {
    "mesh": ("usd-core", "trimesh", "numpy", "pillow", "pycollada", "assimp-py"),
    "urdf": ("usd-core", "trimesh", "numpy", "pillow", "pycollada", "assimp-py", "lxml", "coacd"),
    "mjcf": ("usd-core", "mujoco", "trimesh", "numpy", "pillow", "coacd"),
}
#: Bumped when the layout of cached artifacts changes.
CACHE_FORMAT = 1
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def code_stamp() -> str:
    """SHA-256 of the code that writes the bytes (rules/, schemas/, the provenance stamp): an edited
    checkout never restores what other code wrote, even at the same version number."""
    digest = hashlib.sha256()
    files = sorted([*(_PACKAGE_ROOT / "rules").rglob("*.py"), *(_PACKAGE_ROOT / "schemas").rglob("*.py"),
                    _PACKAGE_ROOT / "pipeline" / "provenance.py"])
    for path in files:
        digest.update(path.relative_to(_PACKAGE_ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def library_versions(kind: str) -> dict[str, str]:
    """{distribution: version} of the byte-shaping libraries of ``kind`` ("absent" when not installed)."""
    versions = {}
    for name in BYTE_SHAPING[kind]:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def reference_name(path: str | Path, source_dir: Path, packages: dict[str, str]) -> str:
    """A location-free name of a referenced file: ``package://NAME/rel`` under a package root (the deepest
    one), else its path relative to the source's folder (POSIX, ``..`` allowed)."""
    path = os.path.abspath(path)
    best = None
    for name, folder in packages.items():
        folder = os.path.abspath(folder)
        if path.startswith(folder.rstrip(os.sep) + os.sep) and (best is None or len(folder) > len(best[1])):
            best = (name, folder)
    if best is not None:
        return f"package://{best[0]}/" + Path(os.path.relpath(path, best[1])).as_posix()
    return Path(os.path.relpath(path, source_dir)).as_posix()


def resolve_name(name: str, source_dir: Path, packages: dict[str, str]) -> Path | None:
    """The file a ``reference_name`` names here; None when its package is not given any more."""
    if name.startswith("package://"):
        package, _, rest = name[len("package://"):].partition("/")
        if package not in packages:
            return None
        return Path(os.path.abspath(Path(packages[package]) / rest))
    return Path(os.path.abspath(source_dir / name))


def named_digests(paths: list[str | Path], source_dir: Path, packages: dict[str, str],
                  digest: Callable[[str | Path], str] = file_digest) -> dict[str, str]:
    """{reference name: sha256 or "missing"} of the referenced files, sorted by name."""
    return {name: digest(path) for name, path in reference_names(paths, source_dir, packages).items()}


def reference_names(paths: list[str | Path], source_dir: Path, packages: dict[str, str]) -> dict[str, str | Path]:
    """{reference name: path} of the referenced files, sorted by name."""
    return dict(sorted((reference_name(p, source_dir, packages), p) for p in paths))


def location_free_digest(cfg: Any, kind: str) -> str:
    """The cfg digest (``schemas.config_digest``: location fields out) plus the output file name, which
    names the files written."""
    return hashlib.sha256(f"{config_digest(cfg, kind)}:{cfg.usd_file_name}".encode()).hexdigest()


def cache_key(kind: str, cfg_digest: str, asset_name: str, asset_sha: str, references: dict[str, str]) -> str:
    """The SHA-256 naming a conversion's outputs in the cache.

    cfg_digest: ``location_free_digest``; asset_name: the source's file name; references: ``named_digests``.
    """
    payload = {"format": CACHE_FORMAT, "usdforge": __version__, "code": code_stamp(), "kind": kind,
               "libraries": library_versions(kind),
               "cfg": cfg_digest, "asset": [asset_name, asset_sha], "references": references}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
