"""The one error a rule raises for bad input: it names the file, the element (and line) and the problem."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable


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


class NonFiniteOutput(ConversionError):
    """A layer about to be written holds a non-finite value; ``element`` is ``prim.attribute``
    (``rules.usd.finite``)."""


def names_the_asset(convert: Callable[[Any, Path], list[Path]]) -> Callable[[Any, Path], list[Path]]:
    """A rule's ``convert(cfg, out_dir)`` whose failures on bad input all name the asset
    (``cfg.asset_path``): the non-finite guard, text that is not UTF-8 (a MuJoCo path attribute), a
    linear-algebra failure on degenerate numbers. NumPy's floating-point warnings are not shown: their
    results are checked (inputs here, outputs by ``check_layer_finite``), and the user sees no line
    without a file."""

    @functools.wraps(convert)
    def wrapper(cfg: Any, out_dir: Path) -> list[Path]:
        import numpy as np  # here: this module is imported where NumPy is not (the CLI's start)

        try:
            with np.errstate(all="ignore"):
                return convert(cfg, out_dir)
        except NonFiniteOutput as exc:
            raise ConversionError(cfg.asset_path, exc.problem, exc.element) from None
        except UnicodeDecodeError as exc:
            raise ConversionError(cfg.asset_path, f"text that is not valid UTF-8 ({exc.reason} at byte "
                                                  f"{exc.start}: {exc.object[exc.start:exc.start + 8]!r})") from None
        except np.linalg.LinAlgError as exc:
            raise ConversionError(cfg.asset_path, f"degenerate numbers: {exc} (an inertia or transform that is "
                                                  "not a valid matrix)") from None

    return wrapper
