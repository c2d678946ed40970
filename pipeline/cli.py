"""The ``usdforge`` command line: one-off conversions without a library, provenance, the build cache.

    usdforge convert IN OUT_DIR [--package NAME=DIR]... [--xacro-arg NAME=VALUE]... [--allow-root DIR]...
                     [--config CFG.toml] [--force] [--cache DIR | --no-cache]
    usdforge info OUT.usda
    usdforge cache stats|prune [--max-size 5GB]|clear [--cache DIR]

``convert`` writes ``OUT_DIR/<name>.usd`` (plus its layers), restoring it from the build cache when that
holds the same inputs' outputs. The build cache is ``$USDFORGE_CACHE``, else the user's cache folder
(``$XDG_CACHE_HOME/usdforge``, i.e. ``~/.cache/usdforge``): a conversion leaves nothing in the folder it
runs in but the output folder it was given. Any user error is one line on stderr and exit status 1; nothing is
written.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import logging
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import NoReturn, Sequence

from usdforge.rules.errors import ConversionError
from usdforge.schemas import ConfigError, __version__


def _package(text: str) -> tuple[str, str]:
    name, sep, folder = text.partition("=")
    if not sep or not name or not folder:
        raise argparse.ArgumentTypeError(f"expected NAME=DIR, found {text!r}")
    return name, folder


def _xacro_arg(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, found {text!r}")
    return name, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="usdforge", description="Convert robot and asset descriptions "
                                     "(URDF, xacro, MJCF, meshes) to simulation-ready OpenUSD.")
    parser.add_argument("--version", action="version", version=f"usdforge {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser(
        "convert", help="convert one file (mesh, URDF, xacro or MJCF) into a folder",
        description="Convert IN into OUT_DIR/<name>.usd. Lazy: nothing happens when OUT_DIR already holds "
                    "an output built from the same file, the files it references and the same settings; "
                    "an output built from the same inputs anywhere is restored from the build cache.")
    convert.add_argument("input", metavar="IN", help="mesh (obj, stl, ply, off, glb, gltf, dae, fbx), "
                                                     "URDF (.urdf), xacro (.xacro) or MJCF (.xml) file")
    convert.add_argument("out_dir", metavar="OUT_DIR", help="output folder")
    convert.add_argument("--package", metavar="NAME=DIR", type=_package, action="append", default=[],
                         help="folder of ROS package NAME, for URDF package:// URIs and xacro's $(find NAME) "
                              "(repeatable)")
    convert.add_argument("--xacro-arg", metavar="NAME=VALUE", type=_xacro_arg, action="append", default=[],
                         help="argument of a xacro IN, as NAME:=VALUE on xacro's command line (repeatable)")
    convert.add_argument("--allow-root", metavar="DIR", action="append", default=[],
                         help="also let IN reference files (meshes, textures, includes) under DIR; by default "
                              "only IN's folder and its packages are allowed (repeatable)")
    convert.add_argument("--config", metavar="CFG.toml", type=Path,
                         help="TOML table of converter cfg fields (e.g. fix_base = true)")
    convert.add_argument("--kind", choices=("mesh", "urdf", "mjcf"), help="override the kind guessed from IN")
    convert.add_argument("--force", action="store_true", help="convert even when the output is up to date")
    convert.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (no warnings)")
    convert.add_argument("-v", "--verbose", action="store_true",
                         help="also print notes: what was kept or ignored without changing the simulation or "
                              "the picture (<transmission>, <gazebo>, custom data; how each ROS package resolved)")
    convert.add_argument("--allow-missing", action="store_true",
                         help="convert a URDF whose mesh or texture files are missing without them (one warning "
                              "with the count); by default a missing file fails the conversion")
    convert.add_argument("--xacro-env", metavar="NAME=VALUE", type=_xacro_arg, action="append", default=[],
                         help="what $(optenv NAME) gives in a xacro IN (the process environment is never read; "
                              "repeatable)")
    convert.add_argument("--cache", metavar="DIR", help="build cache folder (default: $USDFORGE_CACHE, else "
                                                        "$XDG_CACHE_HOME/usdforge, i.e. ~/.cache/usdforge)")
    convert.add_argument("--no-cache", action="store_true", help="neither restore from nor store into the cache")
    info = commands.add_parser("info", help="print where a converted USD file came from",
                               description="Print the provenance usdforge recorded in a USD file's "
                                           "customLayerData: version, converter kind, source file name and "
                                           "content hash, cfg digest and cache key.")
    info.add_argument("usd", metavar="OUT.usda", help="a USD file usdforge wrote (the interface layer)")
    cache = commands.add_parser("cache", help="inspect, prune or clear the build cache",
                                description="The build cache holds conversion outputs and mesh geometry by "
                                            "content hash (default: $USDFORGE_CACHE, else "
                                            "~/.cache/usdforge; a library build's is build/cache: --cache "
                                            "build/cache). It keeps itself under $USDFORGE_CACHE_MAX_SIZE "
                                            "(default 5GB; 0: no limit), least recently used first.")
    cache.add_argument("action", choices=("stats", "prune", "clear"),
                       help="stats: entries, size, what takes the room (by kind), hits of the last build; "
                            "prune: drop least recently used artifacts down to --max-size; clear: empty it")
    cache.add_argument("--max-size", metavar="SIZE", type=_size,
                       help="for prune: the size to keep at most (bytes, or with a unit: 500MB, 5GB; default: "
                            "the cache's limit)")
    cache.add_argument("--cache", metavar="DIR", help="the cache folder (default: $USDFORGE_CACHE, else "
                                                      "~/.cache/usdforge)")
    return parser


def _size(text: str) -> int:
    """``5GB`` → 5·10⁹ bytes (``pipeline.cache.parse_size``)."""
    from usdforge.pipeline.cache import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _human(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size} B"


def cache_command(args: argparse.Namespace) -> str:
    """Run ``usdforge cache ACTION``; return what to print. Raises ConfigError for a missing cache."""
    from usdforge.pipeline.cache import Store, default_cache_dir

    folder = Path(args.cache).absolute() if args.cache else default_cache_dir()
    if folder is None:
        raise ConfigError("the build cache is off (USDFORGE_CACHE=off): give --cache DIR")
    store = Store(folder)
    if args.action == "stats":
        stats = store.stats()
        limit = stats["max_bytes"]
        lines = [f"cache: {stats['root']}", f"entries: {stats['entries']}", f"objects: {stats['objects']}",
                 f"size: {_human(stats['bytes'])} ({stats['bytes']} bytes) of "
                 f"{_human(limit) + ' at most' if limit else 'no limit'}", "room by kind:"]
        lines += [f"  {kind}: {_human(room['bytes'])} in {room['entries']} entries" for kind, room in
                  stats["by_kind"].items()] or ["  (empty)"]
        # "kept:<unit>": a layer a rebuild took unchanged from its output folder (no lookup of the cache).
        last = {kind: v for kind, v in stats["last_build"].items() if not kind.startswith("kept:")}
        kept = sum(v["hits"] for kind, v in stats["last_build"].items() if kind.startswith("kept:"))
        if last:
            hits = sum(v["hits"] for v in last.values())
            total = hits + sum(v["misses"] for v in last.values())
            lines.append(f"last build: {hits}/{total} lookups hit ({100.0 * hits / total:.0f} %)")
            lines += [f"  {kind}: {v['hits']} hit(s), {v['misses']} miss(es)" for kind, v in last.items()]
        else:
            lines.append("last build: no lookups recorded")
        if kept:
            lines.append(f"  and {kept} layer(s) taken unchanged from their output folders (no lookup)")
        return "\n".join(lines)
    if args.action == "prune":
        limit = args.max_size if args.max_size is not None else store.max_bytes
        if limit is None:
            raise ConfigError("cache prune: the cache has no size limit (USDFORGE_CACHE_MAX_SIZE=0): give "
                              "--max-size SIZE (e.g. 5GB)")
        removed, freed = store.prune(limit)
        return f"pruned {removed} artifact(s), freed {_human(freed)}; {store.root} now holds " \
               f"{_human(store.size())}"
    store.clear()
    return f"cleared {store.root}"


def info_command(args: argparse.Namespace) -> str:
    """Run ``usdforge info OUT.usda``; return the provenance as ``key: value`` lines."""
    from usdforge.pipeline.provenance import read_provenance

    if not Path(args.usd).is_file():
        raise ConfigError(f"{args.usd}: no such file")
    record = read_provenance(args.usd)
    if record is None:
        raise ConfigError(f"{args.usd}: no usdforge provenance in its customLayerData (not written by usdforge, "
                          "or not its interface layer)")
    return "\n".join(f"{name}: {value}" for name, value in sorted(record.items()))


def convert_command(args: argparse.Namespace) -> str:
    """Run ``usdforge convert``; return the USD path. Raises ConfigError / ConversionError / ValueError."""
    from usdforge.pipeline.converters import converter_for
    from usdforge.pipeline.kinds import cfg_class, kind_of
    from usdforge.schemas import structure_cfg

    kind = args.kind or kind_of(args.input)
    if kind == "mjcf":  # one conversion and exit: MuJoCo's asset cache would only add to the peak memory
        from usdforge.rules.mjcf.load import disable_asset_cache

        disable_asset_cache()
    table: dict = {}
    if args.config is not None:
        import tomli  # here: a conversion without a config file never parses TOML

        try:
            table = tomli.loads(args.config.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{args.config}: config file not found") from None
        except tomli.TOMLDecodeError as exc:
            raise ConfigError(f"{args.config}: not valid TOML ({exc})") from None
    for fixed in ("asset_path", "usd_dir"):
        if fixed in table:
            raise ConfigError(f"{args.config}: {fixed}: given on the command line (IN, OUT_DIR), not in the config")
    table["asset_path"] = args.input
    table["usd_dir"] = args.out_dir
    table["force_usd_conversion"] = bool(args.force or table.get("force_usd_conversion", False))
    if args.package:
        if kind != "urdf":
            raise ConfigError(f"--package: only URDF input takes packages, {args.input} is {kind}")
        table["ros_package_paths"] = [*table.get("ros_package_paths", []),
                                      *({"name": n, "path": str(Path(d).absolute())} for n, d in args.package)]
    if args.xacro_arg:
        if kind != "urdf":
            raise ConfigError(f"--xacro-arg: only xacro input takes xacro arguments, {args.input} is {kind}")
        table["xacro_args"] = {**table.get("xacro_args", {}), **dict(args.xacro_arg)}
    if args.xacro_env:
        if kind != "urdf":
            raise ConfigError(f"--xacro-env: only xacro input takes xacro settings, {args.input} is {kind}")
        table["xacro_env"] = {**table.get("xacro_env", {}), **dict(args.xacro_env)}
    if args.allow_missing:
        if kind != "urdf":
            raise ConfigError(f"--allow-missing: only URDF input reads it, {args.input} is {kind}")
        table["allow_missing_files"] = True
    if args.allow_root:
        table["allowed_roots"] = [*table.get("allowed_roots", []), *(str(Path(d).absolute()) for d in args.allow_root)]
    try:
        cfg = structure_cfg(table, cfg_class(kind))
    except ConfigError as exc:
        raise ConfigError(f"{args.config}: {exc}" if args.config else str(exc)) from None
    converter = converter_for(kind)(cfg, cache=False if args.no_cache else args.cache)
    return converter.usd_path


#: Environment variable: "1" shows conversion notes on the terminal (``-v``; ``doit convert verbose=1``).
#: Only what is printed depends on it, never what is converted.
VERBOSE_ENV = "USDFORGE_VERBOSE"


def terminal_line(message: object) -> str | None:
    """The terminal line of a warning message: ``usdforge: warning: <message>``, or for a note
    (``rules.conversion_warnings.ConversionNote``) ``usdforge: note: <message>`` with ``-v`` and None
    without."""
    from usdforge.rules.conversion_warnings import is_note

    if is_note(message):
        return f"usdforge: note: {message}" if os.environ.get(VERBOSE_ENV) == "1" else None
    return f"usdforge: warning: {message}"


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` for users: ``usdforge: warning: <message>`` on stderr, one line (a conversion
    warning already names its file, line and element; Python's form would add our source line). Notes
    only with ``-v`` (``terminal_line``)."""
    text = terminal_line(message)
    if text is not None:
        print(text, file=sys.stderr)


def error_line(exc: BaseException) -> str:
    """The one line of a user error: its message on one line, and for a full disk the words "no space
    left on device" (pxr reports a failed write as "Could not close …" without them)."""
    import errno

    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT) and "space" not in text.lower():
        text += " (no space left on device)"
    return text


#: The cyclic garbage collector's thresholds during a command (Python's default is (700, 10, 10)): a
#: conversion allocates millions of short-lived objects (imports, attrs classes, USD specs) and few
#: cycles, so a young collection every 700 allocations costs CPU for nothing (tiago: 140 collections,
#: 0.058 s; 42, 0.037 s with these, the rest while this module's imports ran). Cycles are still
#: collected, 10,000 allocations later at most.
COLLECTOR_THRESHOLDS = (10_000, 10, 10)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``usdforge`` console script."""
    thresholds = gc.get_threshold()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    try:
        return _main(argv)
    finally:
        gc.set_threshold(*thresholds)  # as it was for a caller in this process (tests call main)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    # Nothing here renders: without this, ``import mujoco`` loads its OpenGL context (GLFW through cffi),
    # a fifth of a second of every MJCF conversion. A MUJOCO_GL the user set is kept.
    os.environ.setdefault("MUJOCO_GL", "disable")
    quiet = getattr(args, "quiet", False)
    verbose_before = os.environ.get(VERBOSE_ENV)
    if getattr(args, "verbose", False):
        os.environ[VERBOSE_ENV] = "1"
    try:
        return _run(args, quiet)
    finally:
        if verbose_before is None:
            os.environ.pop(VERBOSE_ENV, None)
        else:
            os.environ[VERBOSE_ENV] = verbose_before


def _run(args: argparse.Namespace, quiet: bool) -> int:
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="usdforge: %(message)s")
    warnings.simplefilter("ignore" if quiet else "default")
    warnings.showwarning = show_warning
    command = {"convert": convert_command, "info": info_command, "cache": cache_command}[args.command]
    try:
        output = command(args)
    except (ConfigError, ConversionError, ValueError, OSError) as exc:
        # One line, whatever the message quotes (a parser's multi-line message, a long value); one line per
        # problem where the error holds several (each missing file of a model).
        lines = getattr(exc, "lines", None)
        for text in [str(line) for line in lines] if lines else [error_line(exc)]:
            print("usdforge: error: " + " ".join(part.strip() for part in text.splitlines() if part.strip()),
                  file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: the atomic build has removed its temporary folder; no traceback
        print("usdforge: interrupted: nothing written", file=sys.stderr)
        return 130
    if not getattr(args, "quiet", False):
        print(output)
    return 0


def console() -> NoReturn:
    """Entry point of the ``usdforge`` console script (and ``python -m usdforge.pipeline.cli``): ``main``,
    then the process ends without tearing the interpreter down. Everything is written by then (the output
    published, the build cache's writes joined), so what a normal exit adds is freeing every object one by
    one (USD layers and types, the imported modules: 0.07-0.16 s of CPU, 10-15 % of a small conversion)
    before the kernel frees the memory anyway. What a normal exit does that matters is still done: the
    threads that are not daemons are joined, the ``atexit`` functions run (logging's flush among them) and
    the standard streams flushed."""
    code = main()
    # What Py_Finalize runs first, in its order: threading's exit hooks (a thread pool not shut down is
    # told to stop, so joining its idle workers cannot hang), then every thread that is not a daemon is
    # joined; then the atexit functions. Both private, both in every CPython 3.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away (a closed pipe), as a normal exit tolerates
            code = code or 120  # the status CPython's own exit gives when flushing stdout fails
    os._exit(code)


if __name__ == "__main__":
    console()
