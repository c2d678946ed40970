"""What shapes a conversion's bytes besides its inputs: usdforge's code and the versions of the libraries
that write or read them. Part of every dependency check (``pipeline.content_key.cache_key``, the lazy key,
doit's up-to-date check). Light: no pxr, no cattrs (a no-op ``doit convert`` asks)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
from pathlib import Path

#: Distributions whose versions shape the bytes a conversion writes, per kind.
BYTE_SHAPING = {
    "mesh": ("usd-core", "trimesh", "numpy", "pillow", "pycollada"),
    "urdf": ("usd-core", "trimesh", "numpy", "pillow", "pycollada", "lxml", "coacd", "xacro", "pyyaml"),
    "mjcf": ("usd-core", "mujoco", "trimesh", "numpy", "pillow", "coacd"),
}
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
#: The pipeline modules that decide what a conversion reads and writes (rules/ and schemas/ count whole).
_PIPELINE_CODE = ("provenance.py", "converters.py", "references.py", "content_key.py", "kinds.py",
                  "code_version.py", "atomic.py")


@functools.cache
def code_stamp() -> str:
    """SHA-256 of the code that writes the bytes (rules/, schemas/ (usdforge's version with it) and the
    pipeline modules of ``_PIPELINE_CODE``): an edited checkout never keeps or restores what other code
    wrote, even at the same version number. About 3 ms (90 files)."""
    digest = hashlib.sha256()
    files = sorted([*(_PACKAGE_ROOT / "rules").rglob("*.py"), *(_PACKAGE_ROOT / "schemas").rglob("*.py"),
                    *(_PACKAGE_ROOT / "pipeline" / name for name in _PIPELINE_CODE)])
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


def tools_digest(kind: str) -> str:
    """SHA-256 of ``code_stamp`` and ``library_versions(kind)``: one value that changes when either does."""
    versions = ",".join(f"{k}={v}" for k, v in sorted(library_versions(kind).items()))
    return hashlib.sha256(f"{code_stamp()}|{kind}|{versions}".encode()).hexdigest()
