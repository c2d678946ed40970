"""Recoverable problems in a source: converted anyway, with a Python ``warnings.warn``.

usdforge reports every recoverable problem (an unknown tag, a missing optional mesh, a material without a
name, data kept as custom attributes because USD physics has no equivalent) as one ``ConversionWarning``
whose text names the file, the line and the element, like ``ConversionError``. The CLI prints them; a
library user filters them with the ``warnings`` module (``warnings.simplefilter("error",
ConversionWarning)`` turns them into errors). Unrecoverable problems raise ``rules.errors.ConversionError``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from usdforge.rules.errors import Located


class ConversionWarning(Located, UserWarning):
    """A recoverable problem: the conversion goes on (see ``rules.errors.Located`` for what it carries)."""


def warn(file: str | Path, problem: str, element: str | None = None, line: int | None = None) -> None:
    """Issue one ``ConversionWarning``."""
    warnings.warn(ConversionWarning(file, problem, element, line), stacklevel=2)
