"""The lazy converter API, as Isaac Lab's ``AssetConverterBase`` and its subclasses.

``MeshConverter(cfg).usd_path`` converts on construction, unless ``cfg.usd_dir`` already holds an output
built from the same asset, referenced files and cfg (content hashes; see ``pipeline.lazy``).
"""

from __future__ import annotations

import logging
import random
import string
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import attrs

from usdforge.pipeline.atomic import build_atomically
from usdforge.pipeline.fingerprint import digests, file_digest
from usdforge.pipeline.lazy import LazyKey, key_to_toml, read_key, stale_reasons
from usdforge.pipeline.references import referenced_files
from usdforge.rules.outputs import key_file_name, meshes_layer, resolve_usd_file_name
from usdforge.schemas import cfg_to_dict, config_digest

log = logging.getLogger("usdforge")


def packages_of(cfg: Any) -> dict[str, str]:
    """ROS package name → folder from a cfg's ``ros_package_paths`` (URDF), else empty."""
    return {entry["name"]: entry["path"] for entry in getattr(cfg, "ros_package_paths", None) or []}


def fresh_usd_dir() -> Path:
    """``<tempdir>/usdforge/usd_{YYYYmmdd}_{HHMMSS}_{random}``: a new folder per call, so two conversions
    started at once never share one."""
    stamp = time.strftime("%Y%m%d_%H%M%S")
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=8))
    return Path(tempfile.gettempdir()) / "usdforge" / f"usd_{stamp}_{suffix}"


class AssetConverterBase:
    """Converts ``cfg.asset_path`` to USD on construction, lazily when ``cfg.usd_dir`` is given.

    It re-converts only if the asset file changed, any file it references changed (meshes, textures,
    includes), the config digest changed, or an output is missing or was modified;
    ``force_usd_conversion`` always converts. With ``usd_dir=None`` the output goes to a fresh temporary
    folder and is always converted.

    Raises:
        ValueError: the asset file does not exist.
        schemas.ConfigError / rules.errors.ConversionError: bad configuration or bad input.
    """

    #: The rule that converts this kind of asset ("mesh", "urdf", "mjcf").
    kind: ClassVar[str]

    def __init__(self, cfg: Any):
        asset = Path(cfg.asset_path).absolute()
        if not asset.is_file():
            raise ValueError(f"The asset path does not exist: {cfg.asset_path}")
        lazy = cfg.usd_dir is not None
        usd_dir = Path(cfg.usd_dir).absolute() if lazy else fresh_usd_dir()
        usd_file_name = resolve_usd_file_name(str(asset), cfg.usd_file_name)
        self.cfg = attrs.evolve(cfg, asset_path=str(asset), usd_dir=str(usd_dir), usd_file_name=usd_file_name)
        self._usd_dir = usd_dir
        self._usd_file_name = usd_file_name
        self.reasons: list[str] = ["force_usd_conversion is set"] if cfg.force_usd_conversion else []
        previous = read_key(usd_dir / key_file_name(usd_file_name))
        if not lazy:
            self.reasons.append("no usd_dir: lazy conversion is off")
        elif not self.reasons:
            self.reasons = stale_reasons(previous, config_digest(self.cfg, self.kind), asset, usd_dir)
        self.converted = bool(self.reasons)
        if self.converted:
            log.info("converting %s: %s", asset, "; ".join(self.reasons))
            self._convert(previous)

    def _convert(self, previous: LazyKey | None) -> None:
        from usdforge.pipeline.kinds import rule

        asset = Path(self.cfg.asset_path)
        references = referenced_files(self.kind, asset, packages_of(self.cfg),
                                      getattr(self.cfg, "xacro_args", None))
        convert = rule(self.kind).convert

        def make_key(outputs: dict[str, Path]) -> str:
            return key_to_toml(LazyKey(
                kind=self.kind, config_digest=config_digest(self.cfg, self.kind), asset=digests([asset]),
                references=digests(references),
                outputs={name: file_digest(path) for name, path in outputs.items()},
                cfg=cfg_to_dict(self.cfg)))

        build_atomically(self._usd_dir, lambda staging: convert(self.cfg, staging),
                         key_file_name(self._usd_file_name), make_key,
                         list(previous.outputs) if previous is not None else [])

    @property
    def usd_dir(self) -> str:
        """The absolute path of the folder holding the generated USD files."""
        return str(self._usd_dir)

    @property
    def usd_file_name(self) -> str:
        """The file name of the generated USD file."""
        return self._usd_file_name

    @property
    def usd_path(self) -> str:
        """The absolute path of the generated USD file."""
        return str(self._usd_dir / self._usd_file_name)

    @property
    def usd_instanceable_meshes_path(self) -> str | None:
        """The file holding the instanceable meshes, relative to ``usd_dir`` (so references resolve after
        moving the folder): ``Props/<stem>_meshes.usd`` of a mesh with ``make_instanceable``, the geometry
        payload ``payloads/geometry.usd`` of a layered robot; None when the meshes are in the main file."""
        return meshes_layer(self.kind, self._usd_file_name, self.cfg.make_instanceable,
                            getattr(self.cfg, "run_asset_transformer", False))


class MeshConverter(AssetConverterBase):
    """Converts a mesh file (OBJ, STL, PLY, OFF, GLB/GLTF, DAE; FBX with the ``fbx`` extra) to USD."""

    kind = "mesh"


class UrdfConverter(AssetConverterBase):
    """Converts a URDF robot description to an articulated USD asset."""

    kind = "urdf"


class MjcfConverter(AssetConverterBase):
    """Converts a MuJoCo MJCF model to an articulated USD asset."""

    kind = "mjcf"


def converter_for(kind: str) -> type[AssetConverterBase]:
    """The converter class of a kind."""
    return {"mesh": MeshConverter, "urdf": UrdfConverter, "mjcf": MjcfConverter}[kind]
