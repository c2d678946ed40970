"""Recoverable problems in a source: converted anyway, with a Python ``warnings.warn``.

usdforge reports every recoverable problem (an unknown tag, a missing optional mesh, a material without a
name, data kept as custom attributes because USD physics has no equivalent) as one ``ConversionWarning``
whose text names the file, the line and the element, like ``ConversionError``. The CLI prints them; a
library user filters them with the ``warnings`` module (``warnings.simplefilter("error",
ConversionWarning)`` turns them into errors). Unrecoverable problems raise ``rules.errors.ConversionError``.

Two levels: a *warning* (``warn``) is something that changes the simulation or the picture (a missing
mesh, a placeholder mass, an invalid inertia, a limit read leniently) - a user should act on it. A *note*
(``note``, ``ConversionNote``) says that something harmless was kept or ignored (``<transmission>`` and
``<gazebo>`` kept as custom data, ``<safety_controller>``, which folder a ROS package resolved to). Notes
go to the conversion record and the report like warnings; the command line shows them only with ``-v``.
``ConversionNote`` is not a ``ConversionWarning``: ``simplefilter("error", ConversionWarning)`` does not
turn a note into an error.
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


class ConversionNote(Located, UserWarning):
    """Something kept or ignored that changes neither the simulation nor the picture (see the module
    docstring); shown on the terminal only with ``-v``."""


_RECORDED: ContextVar[list[ConversionWarning] | None] = ContextVar("usdforge_recorded_warnings", default=None)


def warn(file: str | Path, problem: str, element: str | None = None, line: int | None = None) -> None:
    """Issue one ``ConversionWarning`` (and add it to the list of an enclosing ``recording()``)."""
    warning = ConversionWarning(file, problem, element, line)
    recorded = _RECORDED.get()
    if recorded is not None:
        recorded.append(warning)
    warnings.warn(warning, stacklevel=2)


def note(file: str | Path, problem: str, element: str | None = None, line: int | None = None) -> None:
    """Issue one ``ConversionNote`` (and add it to the list of an enclosing ``recording()``)."""
    message = ConversionNote(file, problem, element, line)
    recorded = _RECORDED.get()
    if recorded is not None:
        recorded.append(message)
    warnings.warn(message, stacklevel=2)


def is_note(message: object) -> bool:
    """Whether a warning message (``warnings.WarningMessage.message``) is a note."""
    return isinstance(message, ConversionNote)


@contextmanager
def recording() -> Iterator[list[ConversionWarning | ConversionNote]]:
    """Collect the warnings issued within the block (they are issued as usual too): the build cache
    stores them with the outputs and issues them again when it restores them. An enclosing
    ``recording()`` gets them too, in order, as the block ends."""
    recorded: list[ConversionWarning | ConversionNote] = []
    token = _RECORDED.set(recorded)
    try:
        yield recorded
    finally:
        _RECORDED.reset(token)
        outer = _RECORDED.get()
        if outer is not None:
            outer.extend(recorded)
