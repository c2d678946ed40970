"""The xacro expansion's own process: ``python -P .../rules/urdf/xacro_process.py`` reads one request (JSON
on stdin) and writes one reply (JSON on stdout). ``rules.urdf.xacro`` starts it; nothing else should.

It runs as a script, not as ``usdforge.rules.urdf.xacro_process``: importing the usdforge package would
cost more than the expansion. ``-P`` keeps this folder off ``sys.path`` (its ``xacro.py`` would shadow
the xacro package); the one usdforge module it needs, ``paths.py`` (stdlib only), is loaded from beside it.

Why a process of its own: the ``xacro`` package keeps its state in module globals (file and macro stacks,
the list of included files, the substitution-argument context), evaluates Python expressions, and a xacro
file can ask for unbounded work (a recursive macro, ``${'x' * 10**10}``). A child process gives each
expansion fresh globals, a time limit and a memory limit, and keeps the evaluation out of the process
that runs doit or the user's program.

What the child changes in ``xacro`` (2.1.1, pinned in pyproject.toml), and why:

* ``$(find pkg)`` (and ``$(find-pkg-share pkg)``, ROS 2 launch's spelling) resolve through the request's
  packages, allowed roots and tree bound with ``rules.urdf.paths.find_package``, the resolver of
  ``package://`` URIs, so both agree and neither leaves the model's tree; xacro itself would need ROS's
  ament index.
* Every file xacro opens (the top-level file, includes, ``xacro.load_yaml``) goes through one guarded
  ``open`` placed in xacro's module namespace: read-only, a regular file, inside the xacro's folder or a
  package root (symbolic links resolved). Each path is recorded, missing ones too, and sent back with the
  content hash of the bytes xacro got: they are the expansion's dependencies.
* ``${...}`` expressions and ``$(eval ...)`` are checked with ``ast`` before xacro evaluates them (see
  ``check_expression``): no names or attributes starting with ``_``, no ``format``/``format_map``
  attributes (they reach attributes through format strings), no frame, code, traceback or generator
  attributes (``gi_frame``, ``f_globals``, …; a YAML key of that form is read as ``d['f_max']``), no
  lambdas, assignments or imports;
  ``type`` and ``vars`` are removed from xacro's symbols. ``$(eval ...)`` may only name xacro arguments
  and xacro's substitution functions.
* ``$(env VAR)`` is refused and ``$(optenv VAR default)`` gives the value the request's ``env`` holds for
  VAR (the cfg's ``xacro_env``), else its default (with a warning naming how to set it): a conversion
  depends on files, cfg and xacro arguments only, never on the process environment.
* The xacro arguments and ``env`` values the expansion never read are reported back (``unused``): a
  misspelt ``--xacro-arg`` would otherwise change nothing, silently.
* ``$(cwd)`` and ``$(dirname)`` give absolute folders (the child runs in the xacro's folder, so
  ``$(cwd)`` is that folder, wherever the build was started): their use is recorded and sent back as
  ``location``, and the parent makes those folders part of the conversion's key.
* xacro's warnings are collected and sent back (the parent re-issues them as ConversionWarnings).

* ``$(eval ...)`` runs with empty builtins in one namespace holding only the names it uses, so no scope
  (a comprehension's included) reaches Python's real builtins; include globs start inside the roots and
  match only files inside them (``_ConfinedGlob``); an error names and searches for its line only files
  the expansion read.
* The expanded URDF may hold at most ``request["max_bytes"]`` bytes (checked here, before it is sent).

The reply: one JSON line, ``{"ok": true, "files": [...], "digests": {file: sha256 or "missing"},
"warnings": [...], "unused": [...], "location": ["cwd", "dirname"] (those used)}`` followed by the expanded URDF's bytes, or ``{"ok": false, "file": PATH, "line": N or
null, "problem": TEXT, "files": [...]}``.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

#: Attributes an expression may not touch besides ``_``-prefixed ones: string formatting reads attributes
#: of its arguments (``'{0.__class__}'.format(x)``) past the name check.
_FORBIDDEN_ATTRIBUTES = frozenset({"format", "format_map"})
#: Attribute prefixes of frames, code, tracebacks and generators: ``g.gi_frame.f_back.f_globals`` reaches
#: the evaluating module's globals without a single underscore-prefixed name.
_FORBIDDEN_PREFIXES = ("_", "gi_", "cr_", "ag_", "f_", "tb_", "co_")
#: Builtins xacro exposes that reach an object's internals (``vars(f)``, three-argument ``type``).
_REMOVED_SYMBOLS = ("type", "vars")
#: The address-space limit the parent set, in bytes (for messages).
_memory_limit = 0
_ALLOWED_NODES = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.Subscript, ast.Slice, ast.Call,
    ast.keyword, ast.Starred, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.List, ast.Tuple,
    ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension, ast.Store,
    ast.JoinedStr, ast.FormattedValue, ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context,
)


class Refused(Exception):
    """Something xacro was asked to do that usdforge does not allow; ``str()`` says what and why.
    ``expression``: the refused expression, when it was one (to find its line)."""

    def __init__(self, message: str, expression: str | None = None):
        super().__init__(message)
        self.expression = expression


def check_expression(text: str, names: set[str] | None = None) -> None:
    """Raise Refused unless ``text`` is a plain expression: constants, names, calls, arithmetic,
    comparisons, conditionals, containers and comprehensions, subscripts, attributes.

    names: when given, the only names the expression may use (``$(eval)``: arguments and functions).
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise Refused(f"invalid expression '{text}' ({exc.msg})", text) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise Refused(f"expression '{text}' uses {type(node).__name__.lower()}, which usdforge does not "
                          "evaluate in xacro files", text)
        if isinstance(node, ast.Name) and (node.id.startswith("_") or (names is not None and node.id not in names)):
            raise Refused(f"expression '{text}' uses the name '{node.id}', which is not available", text)
        if isinstance(node, ast.Attribute) and (node.attr.startswith(_FORBIDDEN_PREFIXES)
                                                or node.attr in _FORBIDDEN_ATTRIBUTES):
            raise Refused(f"expression '{text}' uses the attribute '{node.attr}', which usdforge does not allow "
                          "in xacro files", text)
        if isinstance(node, ast.comprehension) and node.is_async:
            raise Refused(f"expression '{text}' uses an async comprehension", text)


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _paths_module():
    """``rules/urdf/paths.py``, the converter's own package resolution, loaded without its package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_usdforge_urdf_paths", Path(__file__).with_name("paths.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class UsageDict(dict):
    """xacro's argument table (``$(arg)``, ``xacro:arg``, ``$(eval)``), remembering the names looked up."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(key)  # xacro:arg asks before taking its default: a declared argument is used
        return super().__contains__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


class Session:
    """One expansion: the roots files may come from, the files opened and the warnings issued."""

    def __init__(self, source: Path, packages: dict[str, str], tree_root: str | None = None,
                 env: dict[str, str] | None = None, allowed: list[str] | None = None):
        paths = _paths_module()
        find_package, UnresolvedUri = paths.find_package, paths.UnresolvedUri

        self.source = source
        self.packages = packages
        self.tree_root = tree_root
        self.allowed = tuple(allowed or ())
        self.env = dict(env or {})
        #: ``env`` names ``$(optenv)`` read.
        self.env_read: set[str] = set()
        # The source's folder, as named and (a linked source) as it really is, and the package roots.
        self.roots = list(dict.fromkeys([os.path.realpath(source.parent), os.path.dirname(os.path.realpath(source)),
                                         *(os.path.realpath(p) for p in packages.values())]))
        self.files: list[str] = []
        #: sha256 of each file read (missing ones absent).
        self.digests: dict[str, str] = {}
        self.warnings: list[str] = []
        #: The substitutions used that give absolute folders ("cwd", "dirname").
        self.location: set[str] = set()
        self._find_package = find_package
        self._unresolved = UnresolvedUri

    def find(self, name: str) -> str:
        """``$(find name)``: the package's folder, which becomes a root files may be read from."""
        try:
            folder = self._find_package(name, self.source.parent, self.packages, self.tree_root, self.allowed)
        except self._unresolved as exc:
            raise Refused(str(exc)) from None
        real = os.path.realpath(folder)
        if real not in self.roots:
            self.roots.append(real)
        return os.path.abspath(folder)

    def open(self, file: Any, mode: str = "r", *args: Any, **kwargs: Any):
        """xacro's ``open``: read-only, regular files inside the roots; every path recorded."""
        if any(flag in mode for flag in "wax+"):
            raise Refused(f"xacro tried to write {file}; usdforge only reads")
        path = os.path.abspath(os.fspath(file))
        if path not in self.files:
            self.files.append(path)
        real = os.path.realpath(path)
        if not _inside(real, self.roots):
            raise Refused(f"{path} is outside the xacro's folder and its package roots "
                          f"({', '.join(self.roots)}); usdforge reads no file from elsewhere",
                          os.path.basename(path))  # found on the line that names it
        try:
            info = os.stat(real)
        except FileNotFoundError:
            raise FileNotFoundError(2, "No such file or directory", path) from None
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{path} is not a regular file")
        with open(real, "rb") as stream:
            data = stream.read()
        # xacro gets exactly the bytes hashed here, so the reply's digests describe what was expanded.
        self.digests[path] = hashlib.sha256(data).hexdigest()
        stream = io.BytesIO(data) if "b" in mode else io.StringIO(data.decode(kwargs.get("encoding") or "utf-8"))
        stream.name = path  # parsers name the file in their errors (YAML's marks)
        return stream


class _ConfinedGlob:
    """``glob`` for xacro's include patterns: a pattern must start inside the roots, and only matches
    inside them are returned, so an include glob neither lists nor names files elsewhere."""

    def __init__(self, session: Session):
        self.session = session

    def glob(self, pattern: str, *args: Any, **kwargs: Any) -> list[str]:
        import glob

        fixed = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        base = os.path.realpath(os.path.dirname(fixed) or ".")
        if not _inside(base, self.session.roots):
            raise Refused(f"the include pattern '{pattern}' is outside the xacro's folder and its package "
                          "roots; usdforge reads no file from elsewhere", os.path.basename(pattern))
        return [match for match in glob.glob(pattern, *args, **kwargs)
                if _inside(os.path.realpath(match), self.session.roots)]


def _install(session: Session) -> None:
    """Put the session's rules into the ``xacro`` package (see the module docstring)."""
    import xacro
    import xacro.substitution_args as substitution_args

    xacro.open = session.open  # module-level name: found before the builtin by parse() and load_yaml()

    def warning(*args: Any, **kwargs: Any) -> None:
        session.warnings.append(" ".join(str(a) for a in args))

    xacro.warning = warning
    xacro.message = lambda *args, **kwargs: None
    xacro.print_location = lambda *args, **kwargs: None

    original_safe_eval = xacro.safe_eval

    def safe_eval(expr: str, globals: dict, locals: Any = None) -> Any:
        check_expression(expr)
        return original_safe_eval(expr, globals, locals)

    xacro.safe_eval = safe_eval
    symbols = xacro.create_global_symbols()  # again, so that it holds the functions patched above
    for name in _REMOVED_SYMBOLS:
        symbols.pop(name, None)
        symbols["python"].pop(name, None)
    xacro._global_symbols = symbols

    substitution_args._eval_find = session.find

    def env(name: str) -> str:
        raise Refused(f"$(env {name}) is not supported: a conversion depends only on its files, cfg and "
                      f"xacro arguments (pass the value as a xacro argument)", f"$(env {name})")

    def optenv(name: str, default: str = "") -> str:
        if name in session.env:
            session.env_read.add(name)
            return session.env[name]
        session.warnings.append(f"$(optenv {name}) gives its default '{default}': usdforge never reads the "
                                f"environment (set it with --xacro-env {name}=VALUE, or xacro_env in the cfg)")
        return default

    substitution_args._eval_env = env
    substitution_args._eval_optenv = optenv
    substitution_args._eval_dict.update(env=env, optenv=optenv, find=session.find)
    # _env/_optenv read os.environ themselves, not through _eval_env: route them through the policy.
    substitution_args._env = lambda resolved, a, args, context: resolved.replace(f"$({a})", env(*args[:1]))
    substitution_args._optenv = lambda resolved, a, args, context: resolved.replace(
        f"$({a})", optenv(args[0] if args else "", " ".join(args[1:])))

    original_extension = xacro.eval_extension

    def eval_extension(text: str) -> str:
        if text.strip() == "$(cwd)":
            session.location.add("cwd")
        return original_extension(text)

    xacro.eval_extension = eval_extension
    original_dirname = substitution_args._eval_dirname

    def eval_dirname(filename: Any) -> str:
        session.location.add("dirname")
        return original_dirname(filename)

    substitution_args._eval_dirname = eval_dirname
    original_eval = substitution_args._eval

    def checked_eval(text: str, context: dict) -> str:
        names = {"arg", "dirname", *substitution_args._eval_dict, *context.get("arg", {})}
        check_expression(text, names)
        return original_eval(text, context)

    def confined_eval(text: str, scope: Any, wrapper: Any) -> Any:
        # xacro calls eval(text, {}, wrapper): Python then adds the real builtins to the empty globals,
        # and a comprehension's scope reads its free names from the globals, not from ``wrapper``
        # (``[open(f) for f in ...]`` with an argument named ``f`` reached the real ``open``). One
        # namespace with empty builtins, holding only the names the expression uses, serves every scope.
        namespace: dict[str, Any] = {"__builtins__": {}}
        for name in {n.id for n in ast.walk(ast.parse(text.strip(), mode="eval")) if isinstance(n, ast.Name)}:
            try:
                namespace[name] = wrapper[name]
            except KeyError:
                pass
        return eval(text.strip(), namespace, namespace)

    substitution_args.eval = confined_eval  # module-level name: found before the builtin by _eval
    substitution_args._eval = checked_eval
    xacro.glob = _ConfinedGlob(session)  # xacro globs include patterns with glob.glob
    original_resolve = substitution_args._resolve_args
    # ROS 2 launch spells $(find pkg) as $(find-pkg-share pkg); xacro 2.1.1 knows only the former.
    find_pkg_share = re.compile(r"\$\(\s*find-pkg-share\s")
    substitution_args._resolve_args = lambda text, context, commands: original_resolve(
        find_pkg_share.sub("$(find ", text), context, commands)


# ---- errors: one line naming the file, the line where it can be found, and the problem ---------------

def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it wraps (xacro's ``exc`` attribute, then ``__cause__``/``__context__``)."""
    found: list[BaseException] = []
    while exc is not None and exc not in found:
        found.append(exc)
        exc = getattr(exc, "exc", None) or exc.__cause__ or exc.__context__
    return found


def _problem_and_needles(exc: BaseException) -> tuple[str, list[str]]:
    """What went wrong, in words, and strings to look for in the files to find the line."""
    import xml.parsers.expat

    import xacro
    import xacro.substitution_args as substitution_args

    chain = _chain(exc)
    expressions = [m.group(1) for e in chain if isinstance(e, xacro.XacroException) and e.suffix
                   for m in [re.search(r"when evaluating expression '(.*)'", str(e.suffix), re.S)] if m]
    expressions.reverse()  # innermost first: the expression at fault, then those that used it
    needles = [f"${{{e}}}" for e in expressions] + expressions
    for error in chain:
        if isinstance(error, MemoryError):
            return f"the expansion ran out of memory (limit {_memory_limit >> 20} MiB)", needles
        if isinstance(error, Refused):
            own = [error.expression] if error.expression else []
            return f"refused: {error}", own + needles
        if isinstance(error, xml.parsers.expat.ExpatError):
            return f"not well-formed XML: {xml.parsers.expat.ErrorString(error.code)}", []
        if isinstance(error, substitution_args.ArgException):
            name = str(error)
            return (f"undefined xacro argument '{name}' (give it: xacro_args, --xacro-arg {name}=VALUE)",
                    [f"$(arg {name})", f"arg('{name}')", f'arg("{name}")'])
        if isinstance(error, NameError):
            name = getattr(error, "name", None) or (re.findall(r"'([^']*)'", str(error)) or ["?"])[0]
            where = f" in '${{{expressions[0]}}}'" if expressions else ""
            return f"undefined property or name '{name}'{where}", needles + [name]
        if isinstance(error, FileNotFoundError):
            missing = error.filename or ""
            return f"missing file {missing} (included or loaded here)", [os.path.basename(missing), *needles]
    text = " ".join(str(exc).split())
    match = re.match(r"unknown macro name: (\S+)", text)
    if match:
        return f"undefined macro '{match.group(1)}'", [f"<{match.group(1)}"]
    match = re.match(r'Xacro conditional "(.*?)" evaluated', text)
    if match:
        return text, [f'"{match.group(1)}"']
    if isinstance(exc, xacro.XacroException) and exc.macros:
        name = exc.macros[0].body.getAttribute("name")
        # The call is at fault (a missing or unknown parameter, a missing block): find it.
        return f"{text} (macro '{name}')", needles + [f"<xacro:{name}{end}" for end in (" ", ">", "/", "\n")]
    return text or type(exc).__name__, needles


def _line_of(file: str, needles: list[str]) -> int | None:
    try:
        lines = Path(file).read_text(errors="replace").splitlines()
    except OSError:
        return None
    for needle in needles:
        for number, line in enumerate(lines, 1):
            if needle and needle in line:
                return number
    return None


def _locate(exc: BaseException, source: Path, session: Session | None = None) -> tuple[str, int | None, str]:
    """(file, line or None, problem) of an expansion error. Only files the expansion read (through the
    guarded ``open``: inside the roots, regular) are searched for the line or named: a file outside them
    that xacro was about to open (an include of ``/etc/…``) is neither read here nor named."""
    import xml.parsers.expat

    import xacro

    problem, needles = _problem_and_needles(exc)
    stack = [f for f in (xacro.filestack or []) if f]
    for error in _chain(exc):
        if isinstance(error, xml.parsers.expat.ExpatError):
            read = [f for f in stack if session is None or os.path.abspath(f) in session.digests]
            return (read[-1] if read else str(source)), error.lineno, problem
        mark = getattr(error, "problem_mark", None)  # yaml.MarkedYAMLError: the YAML file is at fault
        if mark is not None and os.path.isabs(str(mark.name)) and (session is None or str(mark.name) in session.digests):
            what = " ".join(str(getattr(error, "problem", None) or error).split())
            return str(mark.name), mark.line + 1, f"not valid YAML: {what}"
    # Macro bodies are evaluated where they are called; their text is in the file that defined them.
    defined = [m.history[-1][-1] for m in reversed(xacro.macrostack or []) if m.history and m.history[-1]]
    candidates = [os.path.abspath(f) for f in [*defined, *reversed(stack)] if f]
    if session is not None:
        candidates = [f for f in candidates if f in session.digests]
    for file in dict.fromkeys(candidates):
        line = _line_of(file, needles)
        if line is not None:
            return file, line, problem
    return (candidates[0] if candidates else str(source)), None, problem


def expand(request: dict[str, Any]) -> dict[str, Any]:
    """Expand ``request["path"]`` with ``request["args"]`` and ``request["packages"]``; the reply."""
    import xacro

    source = Path(request["path"]).absolute()
    session = Session(source, dict(request.get("packages") or {}), request.get("tree_root"),
                      request.get("env"), request.get("allowed"))
    _install(session)
    captured = io.StringIO()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = captured  # xacro prints locations and colour codes; the reply is JSON
    try:
        mappings = UsageDict(request.get("args") or {})
        document = xacro.process_file(str(source), mappings=mappings)
        text = document.toxml().encode()
        limit = int(request.get("max_bytes") or 0)
        if limit and len(text) > limit:
            return {"ok": False, "file": str(source), "line": None, "files": session.files,
                    "problem": f"the expanded URDF is larger than {limit >> 20} MiB ({len(text) >> 20} MiB)"}
    except RecursionError:
        return {"ok": False, "file": str(source), "line": None, "files": session.files,
                "problem": "macros or properties nest too deeply (a recursive definition?)"}
    except Exception as exc:  # noqa: BLE001 - every failure of the expansion is the input's problem
        file, line, problem = _locate(exc, source, session)
        return {"ok": False, "file": file, "line": line, "problem": problem, "files": session.files}
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    digests = {f: session.digests.get(f, "missing") for f in session.files}
    unused = [f"--xacro-arg {name}" for name in sorted(set(request.get("args") or {}) - mappings.read)]
    unused += [f"--xacro-env {name}" for name in sorted(set(session.env) - session.env_read)]
    return {"ok": True, "urdf": text, "files": session.files, "digests": digests, "warnings": session.warnings,
            "unused": unused, "location": sorted(session.location)}


def write_reply(reply: dict[str, Any], stream: Any) -> None:
    """The reply as one JSON line (ASCII, so no newline inside) and then, for a success, the expanded
    URDF's bytes as they are: the parent reads them in bounded chunks instead of parsing them from JSON."""
    urdf = reply.pop("urdf", b"")
    stream.write(json.dumps(reply).encode() + b"\n")
    stream.write(urdf)
    stream.flush()


def _die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when the process that started it dies (a ``doit -n`` worker killed
    after Ctrl-C, a ``kill -9``): an expansion is never left running on its own. Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent and os.getppid() != parent:  # the parent died before prctl
        os._exit(1)


def main() -> None:
    request = json.loads(sys.stdin.read())
    _die_with_parent(int(request.get("parent") or 0))
    global _memory_limit
    limit = _memory_limit = int(request.get("memory_bytes") or 0)
    if limit:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        reply = expand(request)
    except MemoryError:
        reply = {"ok": False, "file": request["path"], "line": None, "files": [],
                 "problem": f"the expansion needs more than {limit >> 20} MiB of memory"}
    write_reply(reply, sys.stdout.buffer)


if __name__ == "__main__":
    main()
