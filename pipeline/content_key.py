"""Cache keys from content, never from location.

This module is the one definition of what a conversion's outputs depend on; the cache key, the lazy key
beside the outputs (``pipeline.lazy``) and doit's up-to-date check (``pipeline.tasks``) are all built
from it. A conversion's key hashes the converter kind, the source's file name and content, the content of
every file it references (each named relative to the source's folder, or as ``package://NAME/…`` under a
ROS package root), the cfg digest (location fields left out) with the output file name and the layout of
the folders it may read (package folders and allowed roots, relative to the source's folder: they decide
which references are allowed), usdforge's version and the content of the code that writes the bytes
(``code_version.code_stamp``), the versions of the libraries that shape them, and, for a xacro whose
expansion asked for ``$(cwd)`` or ``$(dirname)``, the absolute folders those gave. Two checkouts, two
machines, or a copy of the source elsewhere get the same key when the inputs are the same. No pxr here.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from usdforge.pipeline.code_version import BYTE_SHAPING, code_stamp, library_versions  # noqa: F401
from usdforge.pipeline.fingerprint import file_digest
from usdforge.pipeline.references import absolute_location  # noqa: F401
from usdforge.schemas import __version__, config_digest

#: Bumped when the layout of cached artifacts or what a key covers changes.
CACHE_FORMAT = 2


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


def folder_layout(cfg: Any) -> dict[str, Any]:
    """Where the folders a conversion may read from lie, relative to the source's folder (POSIX): package
    folders ({name: path}), allowed roots (sorted) and the tree root that bounds the package search by
    convention (``rules.urdf.paths``; the manifest's folder). They decide whether a reference is allowed
    and which file a ``package://`` URI names (a clean build may fail, or find another file, where an
    incremental one would have kept old outputs), never by absolute location."""
    base = os.path.dirname(os.path.abspath(cfg.asset_path))

    def relative(folder: str) -> str:
        return Path(os.path.relpath(os.path.abspath(folder), base)).as_posix()

    packages = {item["name"]: relative(item["path"]) for item in getattr(cfg, "ros_package_paths", None) or []}
    layout = {"packages": dict(sorted(packages.items())),
              "allowed_roots": sorted(relative(folder) for folder in getattr(cfg, "allowed_roots", None) or ())}
    if getattr(cfg, "tree_root", None):
        layout["tree_root"] = relative(cfg.tree_root)
    return layout


def location_free_digest(cfg: Any, kind: str) -> str:
    """The settings of a conversion: the cfg digest (``schemas.config_digest``: location fields out), the
    output file name (it names the files written) and the ``folder_layout``."""
    layout = json.dumps(folder_layout(cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{config_digest(cfg, kind)}:{cfg.usd_file_name}:{layout}".encode()).hexdigest()


def cache_key(kind: str, cfg_digest: str, asset_name: str, asset_sha: str, references: dict[str, str],
              location: dict[str, Any] | None = None) -> str:
    """The SHA-256 naming a conversion's outputs in the cache.

    cfg_digest: ``location_free_digest``; asset_name: the source's file name; references: ``named_digests``;
    location: absolute folders the conversion wrote into its output (``converters.location_read``), or
    None when it wrote none.
    """
    payload = {"format": CACHE_FORMAT, "usdforge": __version__, "code": code_stamp(), "kind": kind,
               "libraries": library_versions(kind),
               "cfg": cfg_digest, "asset": [asset_name, asset_sha], "references": references}
    if location:
        payload["location"] = location
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def entry_digest(cfg: Any, kind: str, root: str | Path) -> str:
    """What doit's up-to-date check keeps of a library entry's settings: ``location_free_digest`` and the
    source's path relative to the library's folder ``root`` (an entry pointed at another file rebuilds; a
    moved or cloned checkout keeps the digest). The rest of the definition (contents, code, libraries,
    location) is checked by ``pipeline.tasks.built_unchanged`` from what the conversion recorded."""
    source = Path(os.path.relpath(os.path.abspath(cfg.asset_path), os.path.abspath(root))).as_posix()
    return hashlib.sha256(f"{kind}:{location_free_digest(cfg, kind)}:{source}".encode()).hexdigest()
