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

    def add_failure(self, task, fail) -> None:
        # The group task (``convert``) fails only because its subtasks did: already reported.
        if ":" not in task.name and fail.get_name() == "UnmetDependency":
            return
        super().add_failure(task, fail)

    def _write_failure(self, result: dict, write_exception: bool = True) -> None:
        fail, task = result["exception"], result["task"]
        if isinstance(fail, TaskFailed) and not fail.traceback:  # usdforge's own message (TaskFailed(str))
            lines = [line for line in str(fail.message).splitlines() if line.strip()]
            if len(lines) > 1:  # a report of several findings (``doit verify``): one line each, as given
                self.write("\n".join(lines) + "\n")
                return
            message = lines[0] if lines else task.name
        else:  # doit's (a missing file_dep, an action that raised): its name and first line, on one line
            lines = [line for line in fail.get_msg().splitlines() if line.strip()]
            message = f"{task.name}: {fail.get_name()}: {lines[-1] if lines else ''}"
        self.write(f"usdforge: error: {message}\n")

    def complete_run(self) -> None:
        failed = [result["task"].name for result in self.failures]
        if failed:
            self.write(f"usdforge: {len(failed)} task(s) failed: {', '.join(failed)}\n")
        if self.runtime_errors:
            self.write("usdforge: error: " + " ".join("\n".join(self.runtime_errors).split("\n")) + "\n")
