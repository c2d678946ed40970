"""Recoverable problems in a source: converted anyway, with a Python ``warnings.warn``.

usdforge reports every recoverable problem (an unknown tag, a missing optional mesh, a material without a
name, data kept as custom attributes because USD physics has no equivalent) as one ``ConversionWarning``
whose text names the file, the line and the element, like ``ConversionError``. The CLI prints them; a
library user filters them with the ``warnings`` module (``warnings.simplefilter("error",
ConversionWarning)`` turns them into errors). Unrecoverable problems raise ``rules.errors.ConversionError``.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

from usdforge.rules.errors import Located


class ConversionWarning(Located, UserWarning):
    """A recoverable problem: the conversion goes on (see ``rules.errors.Located`` for what it carries)."""


_RECORDED: ContextVar[list[ConversionWarning] | None] = ContextVar("usdforge_recorded_warnings", default=None)


def warn(file: str | Path, problem: str, element: str | None = None, line: int | None = None) -> None:
    """Issue one ``ConversionWarning`` (and add it to the list of an enclosing ``recording()``)."""
    warning = ConversionWarning(file, problem, element, line)
    recorded = _RECORDED.get()
    if recorded is not None:
        recorded.append(warning)
    warnings.warn(warning, stacklevel=2)


@contextmanager
def recording() -> Iterator[list[ConversionWarning]]:
    """Collect the warnings issued within the block (they are issued as usual too): the build cache
    stores them with the outputs and issues them again when it restores them."""
    recorded: list[ConversionWarning] = []
    token = _RECORDED.set(recorded)
    try:
        yield recorded
    finally:
        _RECORDED.reset(token)
