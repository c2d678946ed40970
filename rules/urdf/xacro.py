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
import os
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
#: The largest expanded URDF, in bytes: the limit of any model file (``rules.files.MAX_MODEL_BYTES``).
MAX_EXPANDED_BYTES = 256 << 20
#: What the parent reads of the child's reply besides the URDF (file list, warnings), in bytes.
_REPLY_OVERHEAD = 16 << 20


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
    unused: the arguments given that the expansion never read (``--xacro-arg NAME``, ``--xacro-env NAME``).
    location: the substitutions used that put absolute folders into the URDF ("cwd", "dirname"); empty
        when the URDF does not depend on where the files are.
    """

    urdf: bytes
    files: tuple[str, ...]
    digests: dict[str, str] = attrs.field(factory=dict)
    warnings: tuple[str, ...] = ()
    unused: tuple[str, ...] = ()
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
                 *, tree_root: str | None = None, env: dict[str, str] | None = None,
                 allowed: tuple[str, ...] = (), timeout_s: float = TIMEOUT_S,
                 memory_bytes: int = MEMORY_BYTES) -> Expansion:
    """Expand the xacro at ``path`` with xacro arguments ``args`` (``name:=value`` on xacro's command
    line) and ROS packages ``packages`` (name → folder). Raises XacroError naming the file at fault, its
    line where it can be found, and the problem.

    tree_root: the library manifest's folder (bounds ``$(find)`` by convention: ``rules.urdf.paths``).
    env: what ``$(optenv NAME default)`` sees for NAME (the cfg's ``xacro_env``); the process environment
    is never read. allowed: folders that may also hold packages (``allowed_roots``).

    The result is remembered in this process and reused while every file the expansion read has the same
    content (the expansion is a function of those files, the packages and the arguments)."""
    path = Path(path).absolute()
    key = (str(path), tuple(sorted((packages or {}).items())), tuple(sorted((args or {}).items())), tree_root,
           tuple(sorted((env or {}).items())), tuple(allowed))
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
        expansion = _expand(path, packages, args, timeout_s, memory_bytes, tree_root, env, allowed)
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
            memory_bytes: int, tree_root: str | None = None, env: dict[str, str] | None = None,
            allowed: tuple[str, ...] = ()) -> Expansion:
    request = {"path": str(path), "packages": dict(packages or {}), "args": dict(args or {}),
               "memory_bytes": memory_bytes, "max_bytes": MAX_EXPANDED_BYTES, "parent": os.getpid(),
               "tree_root": tree_root, "env": dict(env or {}), "allowed": list(allowed)}
    # -P: neither this folder (its xacro.py) nor the working directory may shadow the xacro package.
    command = [sys.executable, "-P", str(Path(__file__).with_name("xacro_process.py"))]
    # In the xacro's folder: $(cwd) names where the files are, not where the build was started.
    stdout, stderr, returncode = _run_bounded(command, json.dumps(request).encode(), timeout_s,
                                              MAX_EXPANDED_BYTES + _REPLY_OVERHEAD, cwd=path.parent)
    if returncode is None:
        raise XacroError(path, f"the expansion took longer than {timeout_s:g} s (stopped)")
    if stdout is None:
        raise XacroError(path, f"the expanded URDF is larger than {MAX_EXPANDED_BYTES >> 20} MiB (stopped)")
    header, urdf = stdout
    try:
        reply = json.loads(header)
    except ValueError:
        tail = " ".join(stderr.decode(errors="replace").strip().splitlines()[-1:]) or f"exit status {returncode}"
        raise XacroError(path, f"the expansion failed ({tail})") from None
    files = tuple(reply.get("files") or ())
    if not reply.get("ok"):
        raise XacroError(reply.get("file") or path, reply.get("problem") or "the expansion failed",
                         reply.get("line"), files)
    return Expansion(urdf, files, dict(reply.get("digests") or {}), tuple(reply.get("warnings") or ()),
                     unused=tuple(reply.get("unused") or ()), location=tuple(reply.get("location") or ()))


def _run_bounded(command: list[str], request: bytes, timeout_s: float, max_bytes: int,
                 cwd: Path | None = None) -> tuple[tuple[bytes, bytes] | None, bytes, int | None]:
    """Run ``command`` with ``request`` on its stdin; ((stdout's first line, the rest of stdout), the last
    64 kB of stderr, exit status). stdout is read in chunks and the process killed once it has sent more
    than ``max_bytes`` (stdout None then), so the parent never holds more than that, once; the status is
    None when it ran past ``timeout_s`` (killed)."""
    import io
    import subprocess  # here: a URDF without xacro never starts a process (subprocess imports signal, selectors)

    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=cwd)
    first: list[bytes] = []
    rest = io.BytesIO()  # getvalue() hands over its buffer: the expanded URDF is held once
    errors: list[bytes] = []
    state = {"size": 0, "over": False}

    def read_out() -> None:
        line = process.stdout.readline(max_bytes + 1)
        first.append(line.rstrip(b"\n"))
        state["size"] = len(line)
        while state["size"] <= max_bytes:
            chunk = process.stdout.read1(1 << 20)
            if not chunk:
                return
            state["size"] += len(chunk)
            rest.write(chunk)
        state["over"] = True
        process.kill()
        while process.stdout.read1(1 << 20):  # until the killed process's pipe is closed
            pass

    def read_err() -> None:
        while True:
            chunk = process.stderr.read(1 << 16)
            if not chunk:
                return
            errors.append(chunk)
            del errors[:-2]

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for reader in readers:
        reader.start()
    try:
        process.stdin.write(request)
        process.stdin.close()
    except OSError:  # the child exited before reading its request: its status and stderr tell why
        pass
    try:
        returncode = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        returncode = None
    except BaseException:  # Ctrl-C (KeyboardInterrupt) or an error here: the expansion is not left running
        process.kill()
        process.wait()
        raise
    finally:
        for reader in readers:
            reader.join()
        process.stdout.close()
        process.stderr.close()
    if state["over"]:
        return None, b"".join(errors)[-65536:], returncode
    return ((first[0] if first else b""), rest.getvalue()), b"".join(errors)[-65536:], returncode
