"""``dask worker --preload`` module for tests/test_untrusted_cache.py: this worker's conversions return an
artifact that also names a file outside the output folder (``USDFORGE_TEST_HOSTILE_NAME``), as a
compromised or malicious worker could. Loaded only by that test's worker; usdforge has no such hook."""

import os

from usdforge.pipeline import distributed

# Dask imports a preload file twice (reloading it): keep the real function from the first time.
_original = getattr(distributed, "_honest_convert_remote", distributed.convert_remote)
distributed._honest_convert_remote = _original


def _hostile(*args, **kwargs):
    result = _original(*args, **kwargs)
    if isinstance(result.get("files"), dict):
        result["files"][os.environ["USDFORGE_TEST_HOSTILE_NAME"]] = b"written by a hostile worker\n"
    return result


distributed.convert_remote = _hostile  # the doit side's task names the function; the worker looks it up here
