"""Paths as the report shows them: never absolute (a report shared with a colleague must neither leak the
building machine's folders nor point into them), and long enough to tell sources apart.

- ``Relative.text``: every absolute path in a message under the build folder becomes relative to the
  report's folder (``../usd/arm/arm.usd``); one under the library's folder, a source's folder or a
  package folder becomes relative to the library's folder (``meshes/box.stl``, ``../shared/x.xml``; when
  it shares no folder with the library but ``/``: ``…/`` and its last three parts).
  So does any other path of a file or folder on this machine. Other absolute text (USD prim paths such
  as ``/arm/base_link``) is left as it is.
- ``distinct_names``: the shortest trailing part of each source path that no other source shares
  (``stretch.xml`` twice becomes ``hello_robot_stretch/stretch.xml`` and ``hello_robot_stretch_3/stretch.xml``).
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import Iterable

#: An absolute path inside text: from a "/" not preceded by a word, dot, colon or slash (so neither a
#: relative path nor a URL) up to white space, a quote, a colon or a bracket.
_ABSOLUTE = re.compile(r"(?<![\w.:/~-])/[^\s'\"<>|;,:()\[\]{}`]+")


class Relative:
    """Rewrites absolute paths for the pages of the report in ``report_dir`` (see the module docstring).

    report_dir: the report's folder (``<build>/report``), its parent the build folder; library_dir: the
    folder of the library manifest (None: only build paths are rewritten); roots: further folders whose
    paths are shown relative to the library's folder (the sources' folders, package folders)."""

    def __init__(self, report_dir: str | os.PathLike, library_dir: str | os.PathLike | None = None,
                 roots: Iterable[str | os.PathLike] = ()):
        self.report_dir = os.path.abspath(report_dir)
        self.library_dir = os.path.abspath(library_dir) if library_dir is not None else None
        bases = [(os.path.dirname(self.report_dir), self.report_dir)]
        if self.library_dir is not None:
            bases += [(os.path.abspath(root), self.library_dir) for root in (self.library_dir, *roots)]
        # Longest first: a library inside the build folder is the library's, the rest of the build the report's.
        self._bases = sorted({b for b in bases if b[0] != os.sep}, key=lambda b: -len(b[0]))

    def path(self, path: str) -> str:
        """``path`` relative to the report or the library when under one of the folders, or when it names
        a file or folder elsewhere on this machine (or one in an existing folder other than ``/``: a mesh
        that was missing); else as given (a USD prim path)."""
        for root, base in self._bases:
            if path == root or path.startswith(root + os.sep):
                return _relative(path, base)
        parent = os.path.dirname(path)
        if self.library_dir is not None and (os.path.exists(path) or (parent != os.sep and os.path.isdir(parent))):
            return _relative(path, self.library_dir)
        return path

    def text(self, text: str) -> str:
        """``text`` with every absolute path under the known folders made relative (``path``)."""
        return _ABSOLUTE.sub(lambda match: self.path(os.path.normpath(match.group(0))), text)


def _relative(path: str, base: str, kept: int = 3) -> str:
    """``path`` relative to ``base``; when the two share no folder but the file system's root (a relative
    path would spell the absolute one out), ``…/`` and the last ``kept`` parts of the path."""
    if os.path.commonpath([path, base]) == os.sep:
        return "…/" + "/".join(PurePosixPath(path).parts[-kept:])
    return os.path.relpath(path, base)


def distinct_names(paths: list[str]) -> dict[str, str]:
    """Path → its shortest trailing part (at least the file name) that no other path of ``paths`` ends with."""
    parts = {path: PurePosixPath(path.replace(os.sep, "/")).parts for path in set(paths)}
    names = {}
    for path, own in parts.items():
        for length in range(1, len(own) + 1):
            tail = own[-length:]
            if not any(other[-length:] == tail for key, other in parts.items() if key != path):
                break
        names[path] = "/".join(p for p in tail if p != "/")
    return names
