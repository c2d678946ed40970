"""The one error a rule raises for bad input: it names the file, the element (and line) and the problem."""

from __future__ import annotations

from pathlib import Path


def located_message(file: str | Path, problem: str, element: str | None = None, line: int | None = None) -> str:
    """``file:line: element: problem`` (line and element when known): how every user-facing problem reads,
    on one line (a problem quoting several lines of a parser's message is joined with spaces)."""
    problem = " ".join(part.strip() for part in str(problem).splitlines() if part.strip())
    where = str(file) + (f":{line}" if line else "")
    return f"{where}: {element + ': ' if element else ''}{problem}"


class Located:
    """Where a problem is and what it is; ``str()`` is one line: ``file:line: element: problem``.

    file: the input file at fault (the asset, or a mesh/include it references).
    problem: what is wrong, in words a user can act on.
    element: the XML element or part, when known (``<joint name="elbow">``).
    line: the line in ``file``, when known (lxml's sourceline).
    """

    def __init__(self, file: str | Path, problem: str, element: str | None = None, line: int | None = None):
        self.file = str(file)
        self.problem = problem
        self.element = element
        self.line = line
        # A mixin: the next class in the MRO is the Exception the subclass names (ConversionError(Located, ...)).
        super().__init__(located_message(file, problem, element, line))  # type: ignore[call-arg]


class ConversionError(Located, Exception):
    """Bad input that stops a conversion (see ``Located`` for what it carries)."""


class MissingFiles(ConversionError):
    """Files a model references that are not there (or name a ROS package that cannot be found): the
    conversion stops before writing anything. ``lines``: one located line per missing file, in the model's
    order; ``str()`` holds them all, one per line. The first is the error's own file, line and element."""

    def __init__(self, missing: list[tuple[str | Path, str, str | None, int | None]]):
        super().__init__(*missing[0])
        self.lines = [located_message(*item) for item in missing]
        self.args = ("\n".join(self.lines),)

    def __str__(self) -> str:
        return "\n".join(self.lines)
