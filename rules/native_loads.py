"""One thread at a time loads native libraries while a conversion runs threads of its own.

pxr's libraries make singletons while the dynamic loader runs their initializers, and those give up the
GIL and take it back (``TfSingleton``'s GIL dropper) with the loader's lock held. Another thread that holds
the GIL and loads any native module meanwhile (``import zlib_ng``, a Pillow plugin's ``_webp``) waits for
the loader's lock while the pxr load waits for the GIL: the process hangs (seen: an MJCF model's texture
check importing zlib-ng while the USD libraries loaded on a thread beside MuJoCo's compile).

So a thread that loads native modules while another may load pxr holds ``NATIVE_LOADS`` while it does:
the texture checks' thread (``rules.files``) while it loads what its decodes need (then decodes without
it), an import of the USD authoring code (``import_exclusively``) for the import, and a fork of a mesh
reading child (``rules.mesh.assimp_read``: a child forked while another thread is inside the loader would
inherit its lock held). Waiting for it gives up the GIL.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

#: Held by a thread while it may load native libraries beside another thread that may (see above).
NATIVE_LOADS = threading.RLock()


def import_exclusively(name: str) -> ModuleType:
    """``importlib.import_module(name)`` holding ``NATIVE_LOADS`` (no other thread loads a native library
    meanwhile; it waits for one that does)."""
    loaded = sys.modules.get(name)
    if loaded is not None and not getattr(getattr(loaded, "__spec__", None), "_initializing", False):
        return loaded  # loaded already (a rebuild, the next entry of a library): nothing to wait for
    with NATIVE_LOADS:
        return importlib.import_module(name)
