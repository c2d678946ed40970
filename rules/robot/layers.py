"""The layers a robot is written into, by role (``rules.outputs.ROBOT_LAYER_FILES``): one ``Sdf.Layer`` per
payload file and the interface layer that loads them, or one layer for every role in single-file mode."""

from __future__ import annotations

from pathlib import Path

from pxr import Sdf, Usd

from usdforge.rules.outputs import ROBOT_LAYER_FILES
from usdforge.rules.robot.layer_reuse import write_restored
from usdforge.rules.usd import layer as sdf
from usdforge.rules.usd.finite import check_layer_finite, check_text_finite
from usdforge.rules.usd.stage import add_custom_data_on_save, relative_asset_path, write_layer, write_text

#: Payload order of the interface layer, strongest first.
PAYLOAD_ORDER = ("physx", "newton", "mujoco", "physics", "materials", "instances", "base")
T = Sdf.ValueTypeNames


def source_name(spec: Sdf.PrimSpec, name: str) -> None:
    """Record a prim's name in the source (prim names are made valid USD identifiers)."""
    sdf.attribute(spec, "usdforge:sourceName", T.String, name, custom=True)


class RobotLayers:
    """The layers being written, by role; one layer for every role in single-file mode.

    Every layer is an ``Sdf.Layer`` whose identifier is its final path (``rules.usd.layer.new_layer``),
    so that relative references between the layers resolve while authoring (for the Usd stages a
    callback opens on them); ``save`` writes each in its file's format (usda, or crate for ``.usd``) and,
    when layered, the interface layer.
    """

    def __init__(self, root_name: str, out_dir: Path, usd_file_name: str, layered: bool,
                 restored: dict[str, bytes] | None = None):
        self.root = Sdf.Path.absoluteRootPath.AppendChild(root_name)
        self.layered = layered
        self.main_file = out_dir / usd_file_name
        self.files = {role: (out_dir / relative if layered else self.main_file)
                      for role, relative in ROBOT_LAYER_FILES.items()}
        #: Role → its file's bytes from the build cache (layered only): that role's author is not called,
        #: and anything another author puts in its layer lands in a scratch layer that is never saved.
        self.restored = dict(restored or {}) if layered else {}
        #: Role → its layer; a restored role's (a scratch layer) is made when an author first asks for it
        #: (``layer``): most of a cfg-only rebuild's layers are restored, and few authors still run.
        self.layers: dict[str, Sdf.Layer] = {}
        self._stages: dict[str, Usd.Stage] = {}
        self._references: dict[tuple[str, str], str] = {}
        folders: set[Path] = set()
        for role, file in self.files.items():
            if file.parent not in folders:  # each folder once (a mkdir that finds it there costs the same)
                file.parent.mkdir(parents=True, exist_ok=True)
                folders.add(file.parent)
            if role in self.restored:
                continue
            existing = next((layer for r, layer in self.layers.items() if self.files[r] == file), None)
            self.layers[role] = existing if existing is not None else self._new(role, sdf.new_layer(str(file)))

    def _new(self, role: str, layer: Sdf.Layer) -> Sdf.Layer:
        """``layer`` (new) as ``role``'s starts: the robot's root prim, the default prim (but geometry's)."""
        if role != "geometry":
            layer.defaultPrim = self.root.name
            sdf.prim(layer, self.root, "Xform" if role == "base" else "",
                     Sdf.SpecifierDef if role == "base" else Sdf.SpecifierOver)
        return layer

    def authored(self, role: str) -> bool:
        """Whether ``role``'s layer is authored in this conversion (False: its bytes come from the cache)."""
        return role not in self.restored

    def layer(self, role: str) -> Sdf.Layer:
        """The layer of a role (a restored role's: a scratch layer, whose content is dropped)."""
        layer = self.layers.get(role)
        if layer is None:
            layer = self.layers[role] = self._new(role, _scratch(self.files[role].suffix.lstrip(".")))
        return layer

    def stage(self, role: str) -> Usd.Stage:
        """A Usd stage on ``role``'s layer (opened once, for callbacks that use the Usd API)."""
        layer = self.layer(role)
        key = layer.identifier
        if key not in self._stages:
            self._stages[key] = Usd.Stage.Open(layer, Usd.Stage.LoadNone)
        return self._stages[key]

    def spec(self, role: str, path: Sdf.Path, type_name: str = "") -> Sdf.PrimSpec:
        """A ``def`` prim spec in ``role``'s layer."""
        return sdf.prim(self.layer(role), path, type_name)

    def over(self, role: str, path: Sdf.Path) -> Sdf.PrimSpec:
        """An ``over`` in ``role``'s layer, or the spec already there (one layer in single-file mode)."""
        return sdf.over(self.layer(role), path)

    def reference(self, spec: Sdf.PrimSpec, from_role: str, to_role: str, target: Sdf.Path) -> None:
        """Reference ``target`` of ``to_role``'s layer from ``spec`` in ``from_role``'s layer."""
        key = (from_role, to_role)
        if key not in self._references:  # one asset path per pair of layers (every shape references one)
            same = self.files[from_role] == self.files[to_role]
            self._references[key] = "" if same else \
                relative_asset_path(self.files[to_role], self.files[from_role].parent)
        sdf.add_reference(spec, self._references[key], target)

    def asset_path(self, role: str, file: Path) -> str:
        """``file`` as an asset path relative to ``role``'s layer."""
        return relative_asset_path(file, self.files[role].parent)

    def save(self, name: str, contents: dict[Path, bytes] | None = None) -> list[Path]:
        """Write every layer (and, when layered, the interface layer); return the files, main file last.

        contents: files written with these bytes instead of their layer (a layer restored from the build
        cache; its ``Sdf.Layer`` was left empty)."""
        self._stages.clear()
        if self.layers.get("base") is not None:  # a restored base layer's bytes hold it already
            self.layers["base"].GetPrimAtPath(self.root).SetInfo("assetInfo", {"name": name})
        # One layer per file (None: a restored role's, never asked for: its file is written from its bytes).
        layers = {self.files[role]: self.layers.get(role) for role in self.files}
        contents = {**(contents or {}), **{self.files[role]: data for role, data in self.restored.items()}}
        if self.layered:
            layers[self.main_file] = self._interface(name)
        if not (contents and self.main_file in contents):  # the pipeline's provenance, recorded as it is written
            add_custom_data_on_save(layers[self.main_file], self.main_file)
        texts: dict[Path, str] = {}  # a text layer's bytes are its ExportToString: made once, checked, written
        for file, layer in layers.items():
            if contents and file in contents:
                continue  # a restored layer was checked when it was stored
            if file.suffix == ".usda":
                texts[file] = layer.ExportToString()
                check_text_finite(layer, texts[file])  # before any file is written
            else:
                check_layer_finite(layer)
        for file, layer in layers.items():
            if contents and file in contents:
                write_restored(file, file.relative_to(self.main_file.parent).as_posix(), contents[file])
            elif file in texts:
                write_layer(lambda: write_text(file, texts[file]), file)
            elif layer.rootPrims:
                write_layer(lambda: layer.Save(force=True), file)
            else:  # a crate layer without prims (no meshes): its bytes depend on its metadata alone
                key = layer.ExportToString()
                if key not in _EMPTY_CRATES:
                    write_layer(lambda: layer.Save(force=True), file)
                    if len(_EMPTY_CRATES) < 64:  # a handful of metadata sets in practice
                        _EMPTY_CRATES[key] = file.read_bytes()
                else:  # an empty crate's Save takes 0.5 ms, a third of cartpole's saving
                    write_layer(lambda: write_text(file, _EMPTY_CRATES[key]), file)
        from usdforge.rules.robot.isaaclab_cfg import hold_saved

        hold_saved(layer for file, layer in layers.items() if not (contents and file in contents))
        return list(layers)

    def _interface(self, name: str) -> Sdf.Layer:
        """The interface layer: ``/<robot>`` with payloads on the layers, strongest first."""
        interface = sdf.new_layer(str(self.main_file))
        interface.defaultPrim = self.root.name
        root = sdf.prim(interface, self.root, "Xform")
        root.SetInfo("assetInfo", {"name": name})
        root.payloadList.prependedItems = [
            Sdf.Payload(relative_asset_path(self.files[role], self.main_file.parent), self.root)
            for role in PAYLOAD_ORDER]
        return interface


#: A crate layer's bytes by its text, for layers without prims (``RobotLayers.save``): crate bytes are a function
#: of the layer's content and the usd-core version, and a prim-less layer's text holds all of its content.
_EMPTY_CRATES: dict[str, bytes] = {}


def _scratch(extension: str) -> Sdf.Layer:
    """An anonymous layer standing in for a restored one: what lands there is dropped."""
    return Sdf.Layer.CreateAnonymous(f"scratch.{extension}")
