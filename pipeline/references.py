"""Dependency discovery: every file a source references (meshes, textures, includes), recursively.

The same function serves the Python API's lazy check and doit's ``calc_dep`` scan tasks, so the two never
disagree about what is up to date. The scanners live beside their rules (``rules/<format>/references.py``) so
they resolve paths exactly as the conversion does; none imports pxr.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from usdforge.pipeline.fingerprint import normalise


def referenced_files(kind: str, source: str | Path, packages: dict[str, str] | None = None,
                     xacro_args: dict[str, str] | None = None, *, tree_root: str | None = None,
                     xacro_env: dict[str, str] | None = None, allowed_roots: tuple[str, ...] = ()) -> list[str]:
    """Normalised paths of every file ``source`` references, recursively, without the source.

    Missing files are included (creating one later must count as a change); callers that need existing
    files only (doit's file_dep) filter them.

    packages: ROS package name → folder, for URDF ``package://`` URIs and xacro's ``$(find)``.
    xacro_args: arguments of a xacro source (its expansion decides which files it reads).
    tree_root, xacro_env, allowed_roots: a URDF cfg's fields of those names (the package search's bound,
    ``$(optenv)``, folders that may also hold packages).
    """
    source = Path(source)
    if kind == "mesh":
        from usdforge.rules.mesh.references import mesh_references

        found = mesh_references(source)
    elif kind == "urdf":
        from usdforge.rules.urdf.references import urdf_references

        found = urdf_references(source, packages or {}, xacro_args, tree_root, xacro_env, tuple(allowed_roots))
    elif kind == "mjcf":
        from usdforge.rules.mjcf.references import mjcf_references

        found = mjcf_references(source)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    own = normalise(source)
    return sorted({normalise(p) for p in found} - {own})


def absolute_location(asset: str | Path, packages: dict[str, str]) -> dict[str, Any]:
    """Where a source and its packages are, absolute: part of the key of a conversion that writes those
    folders into its outputs (a xacro using ``$(cwd)`` or ``$(dirname)``), so a moved or cloned checkout
    rebuilds it instead of restoring outputs that name the old place."""
    return {"folder": os.path.dirname(os.path.abspath(asset)),
            "packages": {name: os.path.abspath(folder) for name, folder in sorted(packages.items())}}
