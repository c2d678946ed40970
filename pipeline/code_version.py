"""What shapes a conversion's bytes besides its inputs: usdforge's code and the versions of the libraries
that write or read them. Part of every dependency check (``pipeline.content_key.cache_key``, the lazy key,
doit's up-to-date check). Light: no pxr, no cattrs (a no-op ``doit convert`` asks)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Callable

from usdforge.rules.versions import distribution_version

#: Distributions whose versions shape the bytes a conversion writes, per kind.
BYTE_SHAPING = {
    "mesh": ("usd-core", "trimesh", "numpy", "pillow", "pycollada", "assimp-py"),
    "urdf": ("usd-core", "trimesh", "numpy", "pillow", "pycollada", "assimp-py", "lxml", "coacd", "xacro",
             "pyyaml"),
    "mjcf": ("usd-core", "mujoco", "trimesh", "numpy", "pillow", "coacd", "assimp-py"),  # assimp: visual meshes
}
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
#: The pipeline modules that decide what a conversion reads and writes (rules/ and schemas/ count whole).
_PIPELINE_CODE = ("provenance.py", "converters.py", "references.py", "content_key.py", "kinds.py",
                  "code_version.py", "atomic.py", "layer_keys.py")


def code_files() -> list[Path]:
    """The code that writes the bytes: rules/, schemas/ (usdforge's version with it) and the pipeline
    modules of ``_PIPELINE_CODE``, sorted."""
    return sorted([*(_PACKAGE_ROOT / "rules").rglob("*.py"), *(_PACKAGE_ROOT / "schemas").rglob("*.py"),
                   *(_PACKAGE_ROOT / "pipeline" / name for name in _PIPELINE_CODE)])


def code_stamp(digest: Callable[[Path], str] | None = None) -> str:
    """SHA-256 of the code that writes the bytes (``code_files``: each file's name and SHA-256): an edited
    checkout never keeps or restores what other code wrote, even at the same version number. About 3 ms
    (90 files). digest: how to hash one file (doit's check trusts settled stat stamps it learnt, see
    ``pipeline.tasks``); default: read it (once per process)."""
    if digest is None:
        return _code_stamp()
    combined = hashlib.sha256()
    for path in code_files():
        combined.update(path.relative_to(_PACKAGE_ROOT).as_posix().encode() + b"\0" + digest(path).encode() + b"\0")
    return combined.hexdigest()


@functools.cache
def _code_stamp() -> str:
    return code_stamp(lambda path: hashlib.sha256(path.read_bytes()).hexdigest())


@functools.cache
def library_versions(kind: str) -> dict[str, str]:
    """{distribution: version} of the byte-shaping libraries of ``kind`` ("absent" when not installed)."""
    return {name: distribution_version(name) for name in BYTE_SHAPING[kind]}


def tools_digest(kind: str, digest: Callable[[Path], str] | None = None) -> str:
    """SHA-256 of ``code_stamp(digest)`` and ``library_versions(kind)``: one value that changes when
    either does."""
    versions = ",".join(f"{k}={v}" for k, v in sorted(library_versions(kind).items()))
    return hashlib.sha256(f"{code_stamp(digest)}|{kind}|{versions}".encode()).hexdigest()
