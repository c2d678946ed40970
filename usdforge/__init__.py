"""usdforge: robot and asset descriptions (URDF, MJCF, meshes) → simulation-ready OpenUSD, and batched JAX IK.

One namespace for the whole project; the repository's top-level folders are its subpackages::

    from usdforge import UrdfConverter, UrdfConverterCfg     # converters and cfgs (Isaac Lab's names)
    import usdforge.solvers                                    # JAX kinematics and differential IK
    usdforge.pipeline  usdforge.rules  usdforge.schemas        # build system, conversion rules, cfgs

Names are imported on first use, so ``import usdforge`` imports neither pxr nor trimesh, MuJoCo or JAX.
"""

from __future__ import annotations

import importlib
from typing import Any

# The subpackages live in the repository's top-level folders; this folder holds a symbolic link to each
# (usdforge/pipeline -> ../pipeline, ...), so ``usdforge.pipeline`` is found on disk, by Python and by
# static tools alike, wherever this folder is found (an editable install's src/, or the checkout's root).

# ``__version__`` is served by ``__getattr__`` too: importing ``usdforge.schemas._version`` here would run
# ``usdforge.schemas`` (cattrs and every cfg class, ~0.4 s) in every process, a no-op ``doit convert`` too.

_CONVERTERS = ("AssetConverterBase", "MeshConverter", "UrdfConverter", "MjcfConverter", "converter_for")


def _module_of(name: str) -> str | None:
    if name in _CONVERTERS:
        return "usdforge.pipeline.converters"
    if name == "__version__":
        return "usdforge.schemas._version"
    if name in ("solvers", "pipeline", "rules", "schemas"):
        return f"usdforge.{name}"
    from usdforge import schemas

    if name in schemas.__all__:
        return "usdforge.schemas"
    return None


def __getattr__(name: str) -> Any:
    module = _module_of(name)
    if module is None:
        raise AttributeError(f"module 'usdforge' has no attribute {name!r}")
    imported = importlib.import_module(module)
    return imported if module == f"usdforge.{name}" else getattr(imported, name)


def __dir__() -> list[str]:
    from usdforge import schemas

    return sorted({*globals(), "__version__", *_CONVERTERS, *schemas.__all__, "solvers", "pipeline", "rules", "schemas"})
