"""A robot's materials: ``/Materials/<name>`` class prims in the materials layer, one per (colour, texture);
``/<robot>/Looks/<name>`` referencing them for shapes to bind; texture files copied into ``textures/``."""

from __future__ import annotations

import hashlib
import io
import shutil
from pathlib import Path
from typing import Any

from pxr import Sdf

from usdforge.rules.robot.layers import RobotLayers
from usdforge.rules.robot.model import Material, Shape
from usdforge.rules.usd import layer as sdf
from usdforge.rules.usd.stage import unique, unique_name, usd_identifier


class Materials:
    """The materials of one robot being written; ``files`` lists the texture files written so far."""

    def __init__(self, layers: RobotLayers, out_dir: Path):
        self.layers = layers
        self.root = layers.root
        self.out_dir = out_dir
        self.files: list[Path] = []
        self._materials: dict[tuple, str] = {}
        self._material_names: set[str] = set()
        self._looks: dict[str, Sdf.Path] = {}
        self._texture_files: dict[str, Path] = {}
        self._source_textures: dict[Path, tuple[Path, str]] = {}
        self._texture_names: set[str] = set()
        self._folders: set[Path] = set()

    def material(self, color: tuple | None, texture: Path | None = None, image: Any = None,
                  hint: str = "material") -> str:
        """The name of a ``/Materials/<name>`` material with this colour and texture (file or image)."""
        texture_file, texture_key = None, None
        if texture is not None and Path(texture).is_file():
            texture_file, texture_key = self._texture_from_file(Path(texture))
        elif image is not None:
            buffer = io.BytesIO()
            image.save(buffer, format="PNG", compress_level=1)  # zlib's fastest: 5x faster to encode
            data = buffer.getvalue()
            texture_key = hashlib.sha256(data).hexdigest()
            texture_file = self._texture(f"{usd_identifier(hint)}_{texture_key[:8]}.png", data, texture_key)
        key = (color_key(color), texture_key)
        if key in self._materials:
            return self._materials[key]
        name = unique_name(hint, self._material_names)
        self._materials[key] = name
        layer = self.layers.layer("materials")
        materials = Sdf.Path("/Materials")
        sdf.prim(layer, materials, specifier=Sdf.SpecifierClass)
        sdf.preview_material(layer, materials.AppendChild(name), color,
                             self.layers.asset_path("materials", texture_file) if texture_file else None)
        return name

    def _texture_from_file(self, texture: Path) -> tuple[Path, str]:
        """(copy in ``textures/``, key) of a texture file, copied once per source file (many materials share
        one atlas) under the source's name, made unique among the copies (``<stem>_1.png`` …); the key is
        the source path."""
        if texture not in self._source_textures:
            stem = unique(texture.stem, self._texture_names)
            copy = self.out_dir / "textures" / f"{stem}{texture.suffix.lower()}"
            self._folder(copy.parent)
            shutil.copyfile(texture, copy)  # in the kernel: textures are megabytes, read by nothing here
            self.files.append(copy)
            self._source_textures[texture] = (copy, f"file:{texture}")
        return self._source_textures[texture]

    def _texture(self, file_name: str, data: bytes, digest: str) -> Path:
        """Write an in-memory texture once per content into ``textures/``."""
        if digest not in self._texture_files:
            path = self.out_dir / "textures" / file_name
            self._texture_names.add(Path(file_name).stem)
            self._folder(path.parent)
            path.write_bytes(data)
            self.files.append(path)
            self._texture_files[digest] = path
        return self._texture_files[digest]

    def _folder(self, folder: Path) -> None:
        """Make ``folder`` once (a mkdir that finds it there costs as much as one that makes it)."""
        if folder not in self._folders:
            folder.mkdir(parents=True, exist_ok=True)
            self._folders.add(folder)

    def look(self, material: Material) -> Sdf.Path:
        """``/<robot>/Looks/<name>`` for a source material (defined once, referencing /Materials)."""
        return self.look_for(material.color, None, material.name or "material", material.texture)

    def look_for(self, color: tuple | None, image: Any, hint: str, texture: Path | None = None) -> Sdf.Path:
        name = self.material(color, texture=texture, image=image, hint=hint)
        if name not in self._looks:
            path = self.root.AppendChild("Looks").AppendChild(name)
            layer = self.layers.layer("materials")
            sdf.prim(layer, path.GetParentPath(), "Scope")
            self.layers.reference(sdf.prim(layer, path, "Material"), "materials", "materials",
                                  Sdf.Path("/Materials").AppendChild(name))
            self._looks[name] = path
        return self._looks[name]

    def bind(self, spec: Sdf.PrimSpec, shape: Shape) -> None:
        # A source material on the shape overrides the mesh file's own materials (strongerThanDescendants).
        if shape.material is not None and not shape.collision:
            sdf.bind_material(spec, self.look(shape.material), stronger=True)


def color_key(color: tuple | None) -> tuple | None:
    return None if color is None else tuple(round(float(c), 6) for c in color)


def image_key(image: Any) -> str | None:
    if image is None:
        return None
    return hashlib.sha256(image.tobytes()).hexdigest()


def material_key(material: Material | None) -> tuple | None:
    if material is None:
        return None
    return (material.name, color_key(material.color), str(material.texture) if material.texture else None)

