"""usdforge's task graph. `doit convert` builds every entry of assets/library.toml into build/usd/.

`doit convert library=PATH` builds another manifest; `doit ik` runs the IK study of every entry with an
`ee_body`; `doit list` shows the tasks.
"""

from pathlib import Path

from doit import get_var

from usdforge.pipeline.doit_reporter import UsdforgeReporter
from usdforge.pipeline.tasks import DEFAULT_LIBRARY, convert_tasks, ik_tasks

Path("build").mkdir(exist_ok=True)

DOIT_CONFIG = {
    "backend": "json",
    "dep_file": "build/.doit.db",
    "default_tasks": ["convert"],
    "verbosity": 1,
    # One bad entry must not stop the library: every good entry is built, then each failure is reported
    # (one line each) and doit exits non-zero. `doit --continue` is thus the default.
    "continue": True,
    "reporter": UsdforgeReporter,
}


def task_convert():
    """Convert every library entry to USD (one subtask per entry)."""
    yield from convert_tasks(get_var("library", str(DEFAULT_LIBRARY)))


def task_ik():
    """Run the seeded IK study of every entry with an ee_body; JSON report next to its USD."""
    yield from ik_tasks(get_var("library", str(DEFAULT_LIBRARY)))
