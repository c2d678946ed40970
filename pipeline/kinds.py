"""The conversion kinds: which rule converts which file, and with which cfg class. No pxr here."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import NamedTuple

from usdforge.rules.errors import ConversionError


class Kind(NamedTuple):
    """One conversion: its file extensions, cfg class (``module:Name``) and rule module."""

    extensions: tuple[str, ...]
    cfg_class: str
    rule_module: str


KINDS: dict[str, Kind] = {
    "mesh": Kind(("obj", "stl", "ply", "off", "glb", "gltf", "dae", "fbx"), "usdforge.schemas:MeshConverterCfg", "usdforge.rules.mesh.convert"),
    "urdf": Kind(("urdf", "xacro"), "usdforge.schemas:UrdfConverterCfg", "usdforge.rules.urdf.convert"),
    "mjcf": Kind(("xml", "mjcf"), "usdforge.schemas:MjcfConverterCfg", "usdforge.rules.mjcf.convert"),
}


def kind_of(source: str | Path) -> str:
    """The kind for a source file, from its extension."""
    extension = Path(source).suffix.lower().lstrip(".")
    for name, kind in KINDS.items():
        if extension in kind.extensions:
            return name
    known = ", ".join(f".{e}" for kind in KINDS.values() for e in kind.extensions)
    what = f" from the extension '.{extension}'" if extension else ": the file name has no extension"
    raise ConversionError(source, f"cannot tell what to convert{what} (known: {known}; or give the kind "
                                  "explicitly)")


def cfg_class(kind: str) -> type:
    """The cfg class of ``kind`` (imported on demand)."""
    module, _, name = KINDS[kind].cfg_class.partition(":")
    return getattr(importlib.import_module(module), name)


def rule(kind: str):
    """The rule module of ``kind`` (imports pxr: call only where a conversion runs)."""
    return importlib.import_module(KINDS[kind].rule_module)
