"""An engine's output made actionable: the first real error in it as one line, and the whole log with
the build machine's absolute paths made relative (a verify JSON and the report are shared with others).

``first_error``: the exception of the first Python traceback in the log (its whole message, continuation
lines joined: MuJoCo's ``Error: ...`` then ``Element name 'x', id 1``), else the first line that says
``error``, else the last line. ``relative_log``: the build folder, the library folder (the working
directory), temporary folders and the home folder are replaced by ``build``/relative paths, ``<tmp>`` and
``~``; the log is bounded to ``LOG_CHARS`` (its head and tail kept).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

#: Characters of an engine's log kept in a finding (head and tail; the middle is cut with a note).
LOG_CHARS = 20000
_CHAIN = ("Traceback (most recent call last)", "During handling of the above exception",
          "The above exception was the direct cause")
_ERROR = re.compile(r"\berror\b", re.IGNORECASE)
_NOT_ERROR = re.compile(r"\b(warning|0 errors|no errors?)\b", re.IGNORECASE)


def first_error(log: str, limit: int = 500) -> str:
    """The first real error of ``log`` as one line (module docstring), at most ``limit`` characters."""
    lines = log.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith(_CHAIN[0]):
            continue
        after = index + 1
        while after < len(lines) and (lines[after].startswith((" ", "\t")) or not lines[after].strip()):
            after += 1  # the frames (indented) up to the exception's first line
        message = []
        for part in lines[after:]:
            if not part.strip() or part.startswith(_CHAIN):
                break
            message.append(part.strip())
        if message:
            return _clip(" ".join(message), limit)
    for line in lines:
        if _ERROR.search(line) and not _NOT_ERROR.search(line):
            return _clip(line.strip(), limit)
    rest = [line.strip() for line in lines if line.strip()]
    return _clip(rest[-1] if rest else "", limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def relative_log(log: str, build_dir: str | Path = "build") -> str:
    """``log`` without the machine's absolute paths (module docstring), bounded to ``LOG_CHARS``."""
    cwd = Path.cwd().resolve()
    build = Path(build_dir).resolve()
    try:
        build_name = os.path.relpath(build, cwd)
    except ValueError:  # another drive (Windows)
        build_name = "<build>"
    replacements = [(str(build), build_name), (str(cwd) + os.sep, ""), (str(cwd), "."),
                    (str(Path(tempfile.gettempdir()).resolve()), "<tmp>"), (tempfile.gettempdir(), "<tmp>"),
                    (str(Path.home()), "~")]
    for absolute, relative in sorted(replacements, key=lambda item: -len(item[0])):
        if len(absolute) > 1:
            log = log.replace(absolute, relative)
    if len(log) > LOG_CHARS:
        half = LOG_CHARS // 2
        log = f"{log[:half]}\n[... {len(log) - LOG_CHARS} characters cut ...]\n{log[-half:]}"
    return log
