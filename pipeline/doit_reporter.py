"""doit's console output, with each failed library entry reported as usdforge's one line.

doit prints a failure as ``TaskFailed - taskid:convert:x`` plus a block of captured output; a library
build reports ``usdforge: error: <file>:<line>: <element>: <problem>`` per failed entry instead, and a
closing count, so a user sees at once which entries did not build and why.
"""

from __future__ import annotations

from doit.exceptions import TaskFailed
from doit.reporter import ConsoleReporter


class UsdforgeReporter(ConsoleReporter):
    """ConsoleReporter whose failures are one line each: ``usdforge: error: <message>``."""

    desc = "usdforge: one line per failed entry"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from usdforge.pipeline.stage_time import mark_run_started

        mark_run_started()  # the report's wall time of the run (its workers inherit it)
        self._deferred: list = []  # tasks to run at the end although a dependency failed

    def initialize(self, tasks, selected_tasks) -> None:
        """Called once every task is created and doit's state is loaded: those objects live until the
        end of the run, so the cyclic garbage collector, off while they were made (``dodo.py``), stops
        scanning them (``gc.freeze``) and is back on for what the run makes. A library of N entries
        otherwise has its ~50·N objects traversed again and again while they are created: ~30 % of a
        no-op at 10,000 entries. (They stay frozen: reference counting still frees them; only a cycle
        among them outlives a run, in a process that runs doit again.)"""
        import gc

        gc.freeze()
        gc.enable()
        super().initialize(tasks, selected_tasks)

    def add_failure(self, task, fail) -> None:
        if fail.get_name() == "UnmetDependency" and (task.meta or {}).get("despite_failures"):
            self._deferred.append(task)  # run at the end (``report``)
            return
        # The group task (``convert``) fails only because its subtasks did: already reported.
        if ":" not in task.name and fail.get_name() == "UnmetDependency":
            return
        super().add_failure(task, fail)

    def _write_failure(self, result: dict, write_exception: bool = True) -> None:
        fail, task = result["exception"], result["task"]
        if isinstance(fail, TaskFailed) and not fail.traceback:  # usdforge's own message (TaskFailed(str))
            lines = [line for line in str(fail.message).splitlines() if line.strip()]
            if len(lines) > 1:  # a report of several findings (``doit verify``): one line each, each an error
                self.write("".join(f"usdforge: error: {line}\n" for line in lines))
                return
            message = lines[0] if lines else task.name
        else:  # doit's (a missing file_dep, an action that raised): its name and first line, on one line
            lines = [line for line in fail.get_msg().splitlines() if line.strip()]
            message = f"{task.name}: {fail.get_name()}: {lines[-1] if lines else ''}"
        self.write(f"usdforge: error: {message}\n")

    def complete_run(self) -> None:
        self._run_despite_failures()
        failed = [result["task"].name for result in self.failures]
        if failed:
            self.write(f"usdforge: {len(failed)} task(s) failed: {', '.join(failed)}\n")
        if self.runtime_errors:
            self.write("usdforge: error: " + " ".join("\n".join(self.runtime_errors).split("\n")) + "\n")

    def _run_despite_failures(self) -> None:
        """Run now, at the end of the run, the tasks marked ``meta={"despite_failures": True}`` (``report``)
        that doit skipped because a task they depend on failed (the failures are reported as usual)."""
        for task in getattr(self, "_deferred", []):
            try:
                for action in task.actions:
                    action.py_callable(*action.args, **action.kwargs)
            except Exception as exc:  # noqa: BLE001 - reported as the task's one line
                self.write(f"usdforge: error: {task.name}: {type(exc).__name__}: {exc}\n")
                self.failures.append({"task": task, "exception": TaskFailed(str(exc))})
                continue
            self.write(f"usdforge: {task.name}: written despite failed tasks\n")


def quiet_interrupt() -> None:
    """Ctrl-C during ``doit``: one line, ``usdforge: interrupted``, instead of a traceback. doit lets the
    KeyboardInterrupt through after saving its state, and each conversion's ``finally`` has removed its
    temporary folder; Python still exits as killed by SIGINT (status 130 in a shell)."""
    import sys

    previous = sys.excepthook

    def hook(kind, value, traceback) -> None:
        if issubclass(kind, KeyboardInterrupt):
            sys.stderr.write("usdforge: interrupted: finished entries are kept, the others are converted by the "
                             "next run\n")
            return
        previous(kind, value, traceback)

    sys.excepthook = hook
