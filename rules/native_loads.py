"""One thread at a time loads native libraries while a conversion runs threads of its own.

pxr's libraries make singletons while the dynamic loader runs their initializers, and those give up the
GIL and take it back (``TfSingleton``'s GIL dropper) with the loader's lock held. Another thread that holds
the GIL and loads any native module meanwhile (``import zlib_ng``, a Pillow plugin's ``_webp``) waits for
the loader's lock while the pxr load waits for the GIL: the process hangs (seen: an MJCF model's texture
check importing zlib-ng while the USD libraries loaded on a thread beside MuJoCo's compile).

So a thread that may load native modules while another may load pxr holds ``NATIVE_LOADS`` for as long
as it may: the texture checks' thread (``rules.files``) for its whole run, an import of the USD authoring
code (``import_exclusively``) for the import. Waiting for it gives up the GIL, so nothing else stalls.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

#: Held by a thread while it may load native libraries beside another thread that may (see above).
NATIVE_LOADS = threading.RLock()


def import_exclusively(name: str) -> ModuleType:
    """``importlib.import_module(name)`` holding ``NATIVE_LOADS`` (no other thread loads a native library
    meanwhile; it waits for one that does)."""
    with NATIVE_LOADS:
        return importlib.import_module(name)
