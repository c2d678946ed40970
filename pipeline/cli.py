"""The ``usdforge`` command line: one-off conversions without a library.

    usdforge convert IN OUT_DIR [--package NAME=DIR]... [--xacro-arg NAME=VALUE]... [--config CFG.toml] [--force]

Writes ``OUT_DIR/<name>.usd`` (plus its layers). Any user error is one line on stderr and exit status 1;
nothing is written.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Sequence

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
                    "an output built from the same file, the files it references and the same settings.")
    convert.add_argument("input", metavar="IN", help="mesh (obj, stl, ply, off, glb, gltf, dae, fbx), "
                                                     "URDF (.urdf), xacro (.xacro) or MJCF (.xml) file")
    convert.add_argument("out_dir", metavar="OUT_DIR", help="output folder")
    convert.add_argument("--package", metavar="NAME=DIR", type=_package, action="append", default=[],
                         help="folder of ROS package NAME, for URDF package:// URIs and xacro's $(find NAME) "
                              "(repeatable)")
    convert.add_argument("--xacro-arg", metavar="NAME=VALUE", type=_xacro_arg, action="append", default=[],
                         help="argument of a xacro IN, as NAME:=VALUE on xacro's command line (repeatable)")
    convert.add_argument("--config", metavar="CFG.toml", type=Path,
                         help="TOML table of converter cfg fields (e.g. fix_base = true)")
    convert.add_argument("--kind", choices=("mesh", "urdf", "mjcf"), help="override the kind guessed from IN")
    convert.add_argument("--force", action="store_true", help="convert even when the output is up to date")
    convert.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (no warnings)")
    return parser


def convert_command(args: argparse.Namespace) -> str:
    """Run ``usdforge convert``; return the USD path. Raises ConfigError / ConversionError / ValueError."""
    from usdforge.pipeline.converters import converter_for
    from usdforge.pipeline.kinds import cfg_class, kind_of
    from usdforge.schemas import structure_cfg

    kind = args.kind or kind_of(args.input)
    table: dict = {}
    if args.config is not None:
        try:
            table = tomllib.loads(args.config.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{args.config}: config file not found") from None
        except tomllib.TOMLDecodeError as exc:
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
    try:
        cfg = structure_cfg(table, cfg_class(kind))
    except ConfigError as exc:
        raise ConfigError(f"{args.config}: {exc}" if args.config else str(exc)) from None
    converter = converter_for(kind)(cfg)
    return converter.usd_path


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``usdforge`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="usdforge: %(message)s")
    warnings.simplefilter("ignore" if args.quiet else "default")

    def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
        # A conversion warning already names its file, line and element: one line, no source echo.
        print(f"usdforge: warning: {message}", file=sys.stderr)

    warnings.showwarning = show_warning
    try:
        usd_path = convert_command(args)
    except (ConfigError, ConversionError, ValueError, OSError) as exc:
        print(f"usdforge: error: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(usd_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
