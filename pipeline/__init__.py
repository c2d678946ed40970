"""The build-system integration: library manifest, dependency discovery, fingerprints, doit tasks, the
lazy converter API and the ``usdforge`` command line.

Names are imported on first use, so that doit's task loader (``dodo.py`` → ``pipeline.tasks``) pays only
for what a no-op run needs; importing pipeline never imports pxr.
"""

from __future__ import annotations

if __name__ != "usdforge.pipeline":   # one importable name per module: never both pipeline.x and usdforge.pipeline.x
    raise ImportError(f"import usdforge.pipeline, not {__name__}: the repository's top-level folders are the "
                      "subpackages of usdforge")

import importlib
from typing import Any

_EXPORTS = {
    "AssetConverterBase": "usdforge.pipeline.converters", "MeshConverter": "usdforge.pipeline.converters",
    "UrdfConverter": "usdforge.pipeline.converters", "MjcfConverter": "usdforge.pipeline.converters",
    "converter_for": "usdforge.pipeline.converters",
    "Library": "usdforge.pipeline.manifest", "LibraryEntry": "usdforge.pipeline.manifest", "load_library": "usdforge.pipeline.manifest",
    "entry_cfg": "usdforge.pipeline.manifest",
    "referenced_files": "usdforge.pipeline.references",
    "convert_tasks": "usdforge.pipeline.tasks",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'usdforge.pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
