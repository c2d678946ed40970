"""``dask worker --preload`` module for tests/test_distributed.py: every conversion on this worker first
sleeps ``USDFORGE_TEST_SLOW_S`` seconds, so a test can kill a worker (or the scheduler) while a conversion
is surely running. Loaded only by the test's workers; usdforge itself has no such hook."""

import os
import time

from usdforge.pipeline.converters import AssetConverterBase

# Dask imports a preload file twice (reloading it): keep the real method from the first time.
_original = getattr(AssetConverterBase, "_unslowed_build", AssetConverterBase._build)
AssetConverterBase._unslowed_build = _original
_delay = float(os.environ.get("USDFORGE_TEST_SLOW_S", "0.5"))


def _slow_build(self, *args, **kwargs):
    time.sleep(_delay)
    return _original(self, *args, **kwargs)


AssetConverterBase._build = _slow_build
