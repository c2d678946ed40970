"""xacro sources: expanded to URDF with ROS's ``xacro`` package (PyPI ``xacro``, pinned), in a process of
its own (``rules.urdf.xacro_process``), with the files it read reported back.

A source is a xacro when its name ends in ``.xacro`` (``ur.urdf.xacro``). ``$(find pkg)``,
``$(find-pkg-share pkg)`` and the expanded URDF's ``package://`` URIs resolve through the same packages
(``rules.urdf.paths.find_package``). The expansion may only read regular files inside the xacro's folder
and its package roots, evaluates only restricted expressions, and never reads the environment; see
``xacro_process`` for the rules and the README ("xacro") for what a xacro file can and cannot do.

The dependency scan (``rules.urdf.references``) expands to learn the expansion's files, and the conversion
(``rules.urdf.convert``) needs the URDF: inside ``rules.build_scope.one_build()`` (``pipeline.converters``)
each xacro is expanded once and the scan's expansion, or its error, is what the conversion gets, so the
time limit is spent once per build. The expansion runs in the xacro's folder: ``$(cwd)`` is that folder
wherever the build was started, and ``Expansion.location`` says whether ``$(cwd)`` or ``$(dirname)`` put
an absolute folder into the URDF (then the conversion's key records where the files are). No pxr here.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import attrs

from usdforge.rules.build_scope import memo
from usdforge.rules.errors import ConversionError

#: Wall-clock limit of one expansion, in seconds.
TIMEOUT_S = 60.0
#: Address-space limit of the expansion's process, in bytes.
MEMORY_BYTES = 2 << 30


def is_xacro(path: str | Path) -> bool:
    """Whether ``path`` names a xacro file (its name ends in ``.xacro``, any case)."""
    return str(path).lower().endswith(".xacro")


@attrs.frozen
class Expansion:
    """One xacro expanded.

    urdf: the URDF document, UTF-8 XML.
    files: absolute paths of every file the expansion opened (the xacro itself, includes, YAML files),
        in the order it opened them; missing ones included (an optional include that does not exist).
    digests: sha256 (hex) of the bytes the expansion got from each file; "missing" for missing ones.
    warnings: xacro's warnings (``$(optenv)`` defaults, ``xacro.warning()`` calls …).
    location: the substitutions used that put absolute folders into the URDF ("cwd", "dirname"); empty
        when the URDF does not depend on where the files are.
    """

    urdf: bytes
    files: tuple[str, ...]
    digests: dict[str, str] = attrs.field(factory=dict)
    warnings: tuple[str, ...] = ()
    location: tuple[str, ...] = ()


class XacroError(ConversionError):
    """A xacro that does not expand. ``files`` holds what the expansion had opened when it failed (the
    missing include among them), so that a scan still watches them."""

    def __init__(self, file: str | Path, problem: str, line: int | None = None, files: tuple[str, ...] = ()):
        super().__init__(file, problem, "xacro", line)
        self.files = files


#: Expansions of this process: (path, packages, args) → (content hash of every file read, Expansion).
#: The conversion and the dependency scan before it expand the same xacro; the second is served here
#: when no file the first read has changed.
_CACHE: dict[tuple, tuple[dict[str, str], Expansion]] = {}
_CACHE_SIZE = 32
_LOCK = threading.Lock()
def _digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "missing"


def expand_xacro(path: str | Path, packages: dict[str, str] | None = None, args: dict[str, str] | None = None,
                 *, timeout_s: float = TIMEOUT_S, memory_bytes: int = MEMORY_BYTES) -> Expansion:
    """Expand the xacro at ``path`` with xacro arguments ``args`` (``name:=value`` on xacro's command
    line) and ROS packages ``packages`` (name → folder). Raises XacroError naming the file at fault, its
    line where it can be found, and the problem.

    The result is remembered in this process and reused while every file the expansion read has the same
    content (the expansion is a function of those files, the packages and the arguments)."""
    path = Path(path).absolute()
    key = (str(path), tuple(sorted((packages or {}).items())), tuple(sorted((args or {}).items())))
    build = memo("xacro")  # one build: the scan's expansion, or its error, is the conversion's
    if build is not None and key in build:
        if isinstance(build[key], XacroError):
            raise build[key]
        return build[key]
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is not None and all(_digest(f) == sha for f, sha in cached[0].items()):
        if build is not None:
            build[key] = cached[1]
        return cached[1]
    try:
        expansion = _expand(path, packages, args, timeout_s, memory_bytes)
    except XacroError as exc:
        if build is not None:
            build[key] = exc
        raise
    if build is not None:
        build[key] = expansion
    with _LOCK:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = (expansion.digests, expansion)
    return expansion


def _expand(path: Path, packages: dict[str, str] | None, args: dict[str, str] | None, timeout_s: float,
            memory_bytes: int) -> Expansion:
    request = {"path": str(path), "packages": dict(packages or {}), "args": dict(args or {}),
               "memory_bytes": memory_bytes}
    # -P: neither this folder (its xacro.py) nor the working directory may shadow the xacro package.
    command = [sys.executable, "-P", str(Path(__file__).with_name("xacro_process.py"))]
    try:
        # In the xacro's folder: $(cwd) names where the files are, not where the build was started.
        done = subprocess.run(command, input=json.dumps(request), capture_output=True, text=True,
                              timeout=timeout_s, check=False, cwd=path.parent)
    except subprocess.TimeoutExpired:
        raise XacroError(path, f"the expansion took longer than {timeout_s:g} s (stopped)") from None
    try:
        reply = json.loads(done.stdout)
    except ValueError:
        tail = " ".join(done.stderr.strip().splitlines()[-1:]) or f"exit status {done.returncode}"
        raise XacroError(path, f"the expansion failed ({tail})") from None
    files = tuple(reply.get("files") or ())
    if not reply.get("ok"):
        raise XacroError(reply.get("file") or path, reply.get("problem") or "the expansion failed",
                         reply.get("line"), files)
    return Expansion(reply["urdf"].encode(), files, dict(reply.get("digests") or {}),
                     tuple(reply.get("warnings") or ()), tuple(reply.get("location") or ()))
