"""Wall and CPU time of one build step (a conversion, a verification, an asset's pictures) and of the
whole run, for ``doit report``: the figures a user would measure with ``time``.

CPU time is the process's own (every thread: MuJoCo, hashing and rendering threads count) plus that of
the child processes it waited for (the engine checks' subprocesses). One step runs at a time in a doit
process (``-n N`` forks N workers), so a step's CPU time is its own. No pxr here.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Iterator

#: Environment variable holding when the doit run began (seconds since the epoch), set by its reporter in
#: the main process before the workers start, so every step and the report see it.
RUN_ENV = "USDFORGE_RUN_STARTED"


def cpu_seconds() -> float:
    """CPU time (user + system, s) of this process and of the children it waited for."""
    total = time.process_time()
    try:
        import resource
    except ImportError:  # not POSIX: children are not counted
        return total
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + children.ru_utime + children.ru_stime


@contextlib.contextmanager
def timed() -> Iterator[dict[str, float]]:
    """Time the block: the dict given holds ``started`` (s since the epoch) at once, and ``seconds`` (wall)
    and ``cpu_seconds`` when the block ends, however it ends."""
    timing = {"started": round(time.time(), 3)}
    wall, cpu = time.perf_counter(), cpu_seconds()
    try:
        yield timing
    finally:
        timing["seconds"] = round(time.perf_counter() - wall, 3)
        timing["cpu_seconds"] = round(cpu_seconds() - cpu, 3)


def process_started() -> float:
    """When this process started (s since the epoch): from ``/proc`` on Linux (10 ms), else now. Its age
    is the system's uptime less its start time after boot (both 10 ms ticks; ``btime`` would round the
    boot time to the second)."""
    try:
        with open("/proc/self/stat", "rb") as stream:
            fields = stream.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as stream:
            uptime = float(stream.read().split()[0])
        now = time.time()
        return now - (uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))  # field 22 of stat: start, in ticks
    except (OSError, ValueError, IndexError):
        return time.time()


def mark_run_started() -> None:
    """Record that a doit run began when this process did (``RUN_ENV``)."""
    os.environ[RUN_ENV] = f"{process_started():.3f}"


def run_started() -> float | None:
    """When the doit run this process belongs to began, or None outside one."""
    try:
        return float(os.environ[RUN_ENV])
    except (KeyError, ValueError):
        return None
