"""usdforge's task graph. `doit convert` builds every entry of assets/library.toml into build/usd/.

`doit convert library=PATH` builds another manifest; `doit convert cache=PATH` uses that build cache
(default ``$USDFORGE_CACHE``, else build/cache; ``cache=off``: none); `doit ik` runs the IK study of every
entry with an `ee_body`; `doit verify` checks every built asset against its source; `doit report` writes
build/report/index.html; `doit list` shows the tasks. `doit convert scheduler=tcp://HOST:8786` (or
`workers=N`, a local Dask cluster; the `cluster` extra) runs each conversion on Dask; `shard=i/n` builds
shard i of n only.
"""

import gc
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from doit import create_after, get_var

from usdforge.pipeline.doit_reporter import UsdforgeReporter, quiet_interrupt
from usdforge.pipeline.distributed import build_options, doit_config
from usdforge.pipeline.tasks import DEFAULT_LIBRARY, CompactJSONCodec, convert_tasks, ik_tasks
from usdforge.pipeline.verify_tasks import report_tasks, thumbnail_tasks, verify_tasks

# No cyclic garbage collection while the tasks are created (nothing they build is garbage): the reporter
# turns it back on before any task runs (UsdforgeReporter.initialize).
gc.disable()
Path("build").mkdir(exist_ok=True)
quiet_interrupt()
_OPTIONS, _OPTIONS_ERROR = build_options(get_var("scheduler"), get_var("workers"), get_var("sources"),
                                         get_var("shard"))
# `doit convert verbose=1` also prints notes (what was kept or ignored harmlessly; see pipeline.cli).
if get_var("verbose") == "1":
    os.environ["USDFORGE_VERBOSE"] = "1"
# No task renders: MuJoCo need not load its OpenGL context (GLFW) in each worker (see pipeline.cli).
os.environ.setdefault("MUJOCO_GL", "disable")

DOIT_CONFIG = {
    "backend": "json",
    "codec_cls": CompactJSONCodec,
    "dep_file": "build/.doit.db",
    "default_tasks": ["convert"],
    "verbosity": 1,
    **({} if _OPTIONS_ERROR else doit_config(_OPTIONS)),   # a Dask build: doit's thread runner
    # One bad entry must not stop the library: every good entry is built, then each failure is reported
    # (one line each) and doit exits non-zero. `doit --continue` is thus the default.
    "continue": True,
    "reporter": UsdforgeReporter,
}


def only_when_asked(creator: Callable[[], Iterator[dict[str, Any]]]) -> Callable[[], Iterator[dict[str, Any]]]:
    """Create the tasks of ``creator`` only when they are asked for (doit's delayed creation): `doit convert`
    never builds the verify, thumbnail, report and IK tasks of a library of 100,000 entries. Not under
    `doit -s` (run the selected tasks only): doit clears their task_dep before delayed ones exist, so
    `doit -s verify:x` would first rebuild x."""
    single = any(arg == "--single" or (arg[:1] == "-" and arg[1:2] != "-" and arg[1:].isalpha() and "s" in arg)
                 for arg in sys.argv[1:])
    return creator if single else create_after()(creator)


def task_convert():
    """Convert every library entry to USD (one subtask per entry)."""
    yield from convert_tasks(get_var("library", str(DEFAULT_LIBRARY)), cache=get_var("cache", None),
                             options={**_OPTIONS, "error": _OPTIONS_ERROR})


@only_when_asked
def task_ik():
    """Run the seeded IK study of every entry with an ee_body; JSON report next to its USD."""
    yield from ik_tasks(get_var("library", str(DEFAULT_LIBRARY)))


@only_when_asked
def task_verify():
    """Verify every converted asset against its source; JSON result next to its USD."""
    yield from verify_tasks(get_var("library", str(DEFAULT_LIBRARY)))


@only_when_asked
def task_thumbnail():
    """Render every converted asset's pictures from its USD (build/report/images/)."""
    yield from thumbnail_tasks(get_var("library", str(DEFAULT_LIBRARY)))


@only_when_asked
def task_report():
    """Write build/report/index.html: every asset at a glance, with a page per asset."""
    yield from report_tasks(get_var("library", str(DEFAULT_LIBRARY)))
