"""The asset library manifest (``assets/library.toml``): which sources to convert, and how.

```toml
allowed_roots = ["../textures"]     # optional: folders every entry may also read files from
[[assets]]
name = "chair"                      # output folder build/usd/chair/
source = "meshes/chair.obj"         # relative to the manifest's folder, or absolute
kind = "mesh"                       # optional: derived from the extension (mesh, urdf, mjcf)
packages = { my_robot = "../robots/my_robot" }   # URDF package:// roots (and xacro's $(find))
xacro_args = { ur_type = "ur5e" }   # arguments of a .xacro source
ee_body = "hand"                    # optional: end-effector body, for `doit ik`
ik = { num_targets = 1024 }         # optional: settings of the IK study (IkStudyCfg: ee_bodies, weights,
                                    #   num_seeds, collision, collision_margin, collision_pairs, ...)
[assets.cfg]                        # overrides of the converter cfg's fields
mass_props = { mass = 2.0 }
```
"""

from __future__ import annotations

import re
import tomli
from pathlib import Path
from typing import Any

import attrs

from usdforge.pipeline.kinds import KINDS, cfg_class, kind_of
from usdforge.rules.errors import ConversionError
from usdforge.schemas import ConfigError, structure_cfg
from usdforge.schemas.validators import FieldValueError

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _valid_name(instance: Any, attribute: Any, value: str) -> None:
    if not isinstance(value, str) or not _NAME.fullmatch(value):  # fullmatch: "a\n" matched ^…$
        raise FieldValueError(attribute.name, f"expected a name of letters, digits, '_', '-', '.', found {value!r}")


def _valid_kind(instance: Any, attribute: Any, value: str | None) -> None:
    if value is not None and value not in KINDS:
        raise FieldValueError(attribute.name, f"expected one of {', '.join(KINDS)}, found {value!r}")


def _link_pairs(instance: Any, attribute: Any, value: list | None) -> None:
    """``[[links_a, links_b], ...]``: each entry two non-empty lists of link names."""
    if value is None:
        return
    for entry in value:
        if len(entry) != 2 or not all(group and all(isinstance(n, str) for n in group) for group in entry):
            raise FieldValueError(attribute.name, f"expected [[links_a, links_b], ...] (two lists of link names "
                                                  f"per entry), found {value!r}")


@attrs.frozen(kw_only=True)
class IkStudyCfg:
    """The seeded IK study ``doit ik`` runs on an entry that names an ``ee_body`` (see solvers.ik_report).

    num_targets: reachable targets (FK of random in-limit configurations). Default 4096.
    seed: random seed of the targets and the perturbed starts. Default 0.
    iterations: step cap from the perturbed starts (≤ ``perturbation`` rad or m per joint). Default 20.
    home_iterations: step cap from the rest pose. Default 200.
    perturbation: largest start perturbation per joint, rad or m. Default 0.2.
    method: "dls", "adaptive_dls", "pinv", "svd" or "trans". Default "dls".
    dtype: "float32" or "float64". Default "float32".
    ee_bodies: further end-effectors (source names) solved together with the entry's ``ee_body``.
        Default empty: ``ee_body`` alone.
    weights: task weight per end-effector (``ee_body`` first). Default None: 1 each.
    num_seeds: starts per target from the rest pose, solved in parallel. Default 1.
    collision: self-collision avoidance with capsules fitted to the USD's colliders. Default False.
    collision_margin: distance kept between the capsules of checked link pairs, metres. Default 0.005.
    collision_pairs: which link pairs to keep apart, as ``[[links_a, links_b], ...]`` (source link
        names): a pair is checked when one link is in ``links_a`` and the other in ``links_b`` of some
        entry, e.g. ``[[["left_elbow_link"], ["right_elbow_link", "torso_link"]]]``. Adjacent, rigidly
        joined and touching-at-rest pairs stay excluded. Default None: every pair of links with colliders.
    """

    num_targets: int = 4096
    seed: int = 0
    iterations: int = 20
    home_iterations: int = 200
    perturbation: float = 0.2
    method: str = "dls"
    dtype: str = "float32"
    ee_bodies: list[str] = attrs.field(factory=list)
    weights: list[float] | None = None
    num_seeds: int = 1
    collision: bool = False
    collision_margin: float = 0.005
    collision_pairs: list[list[list[str]]] | None = attrs.field(default=None, validator=_link_pairs)


@attrs.frozen(kw_only=True)
class LibraryEntry:
    """One asset of the library.

    name: Output folder name under ``build/usd``: letters, digits, ``_``, ``-`` and ``.``, not starting with
        ``-`` or ``.``; unique in the library ignoring case (one folder on a case-insensitive file system).
    source: The file to convert, relative to the manifest's folder or absolute.
    kind: "mesh", "urdf" or "mjcf". Default None: from the source's extension.
    packages: ROS package name → folder (relative to the manifest) for URDF ``package://`` and xacro's
        ``$(find)``. Default empty.
    xacro_args: Arguments of a xacro source (``name:=value`` on xacro's command line), merged into the
        cfg's ``xacro_args``. Default empty.
    ee_body: End-effector body (source name) for ``doit ik``. Default None: no IK study for this entry.
    ik: Settings of the IK study. Default ``IkStudyCfg()``.
    cfg: Overrides of the converter cfg's fields (asset_path and usd_dir are set by the pipeline).
    """

    name: str = attrs.field(validator=_valid_name)
    source: str
    kind: str | None = attrs.field(default=None, validator=_valid_kind)
    packages: dict[str, str] = attrs.field(factory=dict)
    xacro_args: dict[str, str] = attrs.field(factory=dict)
    ee_body: str | None = None
    ik: IkStudyCfg = attrs.field(factory=IkStudyCfg)
    cfg: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Library:
    """A manifest: its entries, and the folder their relative paths start from.

    allowed_roots: folders (relative to the manifest) whose files every entry may reference, besides
        its source's folder and its packages (each entry's ``cfg.allowed_roots`` adds its own). Default
        empty: a mesh, texture or include outside those folders is refused.
    """

    assets: list[LibraryEntry] = attrs.field(factory=list)
    root: str = "."
    allowed_roots: tuple[str, ...] = ()


def load_library(path: str | Path) -> Library:
    """Read and check a manifest. Raises ConfigError naming the file and the field's path."""
    path = Path(path)
    try:
        data = tomli.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: library manifest not found") from None
    except tomli.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    data.setdefault("root", str(path.parent.absolute()))
    try:
        library = structure_cfg(data, Library)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    seen: dict[str, int] = {}
    for index, entry in enumerate(library.assets):
        # Names differing only in case are one folder on a case-insensitive file system (macOS, Windows).
        if entry.name.casefold() in seen:
            raise ConfigError(f"{path}: assets[{index}].name: {entry.name!r} is already used by "
                              f"assets[{seen[entry.name.casefold()]}] (names are compared ignoring case)")
        seen[entry.name.casefold()] = index
    return library


def entry_source(library: Library, entry: LibraryEntry) -> Path:
    """The entry's source file, absolute."""
    return (Path(library.root) / entry.source).absolute()


def entry_kind(library: Library, entry: LibraryEntry) -> str:
    """The entry's kind (explicit, or from the source's extension)."""
    return entry.kind or kind_of(entry_source(library, entry))


def entry_cfg(library: Library, entry: LibraryEntry, index: int, build_dir: Path = Path("build"),
              manifest: str | Path = "library") -> Any:
    """The converter cfg of an entry: its ``cfg`` table plus asset_path, usd_dir (``build/usd/<name>``),
    usd_file_name (``<name>.usda`` unless the table says) and, for URDF, the entry's packages and xacro
    arguments.

    Raises ConfigError naming ``assets[index].cfg.<field>``.
    """
    kind = entry_kind(library, entry)
    table = dict(entry.cfg)
    for fixed in ("asset_path", "usd_dir"):
        if fixed in table:
            raise ConfigError(f"{manifest}: assets[{index}].cfg.{fixed}: set by the pipeline; give 'source' instead")
    table["asset_path"] = str(entry_source(library, entry))
    table["usd_dir"] = str((build_dir / "usd" / entry.name).absolute())
    table.setdefault("usd_file_name", f"{entry.name}.usda")
    roots = table.get("allowed_roots", [])
    if library.allowed_roots or roots:
        if isinstance(roots, str) or not isinstance(roots, list):
            raise ConfigError(f"{manifest}: assets[{index}].cfg.allowed_roots: expected a list of folders, "
                              f"found {roots!r}")
        table["allowed_roots"] = [str((Path(library.root) / folder).absolute())
                                  for folder in (*library.allowed_roots, *roots)]
    if entry.packages:
        if kind != "urdf":
            raise ConfigError(f"{manifest}: assets[{index}].packages: only URDF entries take packages")
        table["ros_package_paths"] = [*table.get("ros_package_paths", []),
                                      *({"name": name, "path": str((Path(library.root) / folder).absolute())}
                                        for name, folder in sorted(entry.packages.items()))]
    if entry.xacro_args:
        if kind != "urdf":
            raise ConfigError(f"{manifest}: assets[{index}].xacro_args: only xacro sources (URDF kind) take xacro "
                              "arguments")
        table["xacro_args"] = {**table.get("xacro_args", {}), **entry.xacro_args}
    if kind == "urdf":  # the manifest's folder bounds the search for packages by convention
        table.setdefault("tree_root", str(Path(library.root).absolute()))
    try:
        return structure_cfg(table, cfg_class(kind), f"assets[{index}].cfg")
    except ConfigError as exc:
        raise ConfigError(f"{manifest}: {exc}") from None
