"""The one error a rule raises for bad input: it names the file, the element (and line) and the problem."""

from __future__ import annotations

from pathlib import Path


class ConversionError(Exception):
    """Bad input that stops a conversion. ``str()`` is one line: ``file:line: element: problem``.

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
        where = self.file + (f":{line}" if line else "")
        super().__init__(f"{where}: {element + ': ' if element else ''}{problem}")
