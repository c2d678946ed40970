"""The lazy matrix of the Python API: what re-converts and what does not (content hashes, not mtimes)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import attrs
import pytest
import trimesh

from meshes import write_mesh
from usdforge.pipeline import MeshConverter
from usdforge.rules.errors import ConversionError
from usdforge.rules.outputs import key_file_name
from usdforge.schemas import MassPropertiesCfg, MeshConverterCfg


def textured_obj(folder: Path) -> Path:
    """An OBJ whose MTL names a texture: both are referenced files."""
    mesh = trimesh.creation.box()
    obj = folder / "crate.obj"
    obj.write_text("mtllib crate.mtl\nusemtl wood\n" + "".join(f"v {x} {y} {z}\n" for x, y, z in mesh.vertices)
                   + "".join(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in mesh.faces))
    (folder / "crate.mtl").write_text("newmtl wood\nKd 0.6 0.4 0.2\nmap_Kd wood.png\n")
    from PIL import Image

    Image.new("RGB", (2, 2), (120, 80, 40)).save(folder / "wood.png")
    return obj


@pytest.fixture
def obj_asset(tmp_path) -> Path:
    return textured_obj(tmp_path)


def convert(asset: Path, usd_dir: Path, **fields) -> MeshConverter:
    return MeshConverter(MeshConverterCfg(asset_path=str(asset), usd_dir=str(usd_dir), **fields))


def test_second_conversion_is_lazy_and_the_key_says_what_it_was_built_from(obj_asset, tmp_path):
    first = convert(obj_asset, tmp_path / "out")
    assert first.converted
    second = convert(obj_asset, tmp_path / "out")
    assert not second.converted and second.reasons == []
    key = (tmp_path / "out" / key_file_name(first.usd_file_name)).read_text()
    assert "crate.obj" in key and "crate.mtl" in key and "wood.png" in key and "config_digest" in key
    assert str(tmp_path) not in key  # content and relative names only: a moved checkout is up to date


def test_touch_with_identical_content_does_not_reconvert(obj_asset, tmp_path):
    convert(obj_asset, tmp_path / "out")
    later = time.time() + 10
    for path in (obj_asset, obj_asset.with_suffix(".mtl"), tmp_path / "wood.png"):
        os.utime(path, (later, later))
    assert not convert(obj_asset, tmp_path / "out").converted


@pytest.mark.parametrize("edited", ["crate.obj", "crate.mtl", "wood.png"])
def test_editing_the_asset_or_any_file_it_references_reconverts(obj_asset, tmp_path, edited):
    convert(obj_asset, tmp_path / "out")
    with open(tmp_path / edited, "ab") as stream:
        stream.write(b"\n# edited\n" if edited != "wood.png" else b"\0")
    again = convert(obj_asset, tmp_path / "out")
    assert again.converted and any(edited in reason for reason in again.reasons)


def test_editing_an_unreferenced_file_does_not_reconvert(obj_asset, tmp_path):
    convert(obj_asset, tmp_path / "out")
    (tmp_path / "unrelated.png").write_bytes(b"x")
    assert not convert(obj_asset, tmp_path / "out").converted


def test_cfg_edit_reconverts_but_excluded_fields_do_not(obj_asset, tmp_path):
    convert(obj_asset, tmp_path / "out", usd_file_name="crate.usd")
    edited = convert(obj_asset, tmp_path / "out", usd_file_name="crate.usd", mass_props=MassPropertiesCfg(mass=1.0))
    assert edited.converted and "the configuration changed" in edited.reasons
    # asset_path spelled differently (relative) names the same file: not a change.
    relative = os.path.relpath(obj_asset)
    same = MeshConverter(MeshConverterCfg(asset_path=relative, usd_dir=str(tmp_path / "out"), usd_file_name="crate.usd",
                                          mass_props=MassPropertiesCfg(mass=1.0)))
    assert not same.converted


def test_deleted_or_modified_output_reconverts(obj_asset, tmp_path):
    first = convert(obj_asset, tmp_path / "out")
    Path(first.usd_path).unlink()
    assert convert(obj_asset, tmp_path / "out").converted
    meshes = Path(first.usd_dir) / first.usd_instanceable_meshes_path
    meshes.write_bytes(meshes.read_bytes()[:-10])
    assert convert(obj_asset, tmp_path / "out").converted


def test_force_always_converts(obj_asset, tmp_path):
    convert(obj_asset, tmp_path / "out")
    forced = convert(obj_asset, tmp_path / "out", force_usd_conversion=True)
    assert forced.converted and forced.reasons == ["force_usd_conversion is set"]


def test_no_usd_dir_converts_into_a_fresh_temporary_folder_every_time(obj_asset):
    first = MeshConverter(MeshConverterCfg(asset_path=str(obj_asset)))
    second = MeshConverter(MeshConverterCfg(asset_path=str(obj_asset)))
    assert first.converted and second.converted and first.usd_dir != second.usd_dir
    name = Path(first.usd_dir).name
    assert Path(first.usd_dir).parent.name == "usdforge" and name.startswith("usd_")
    _, date, clock, suffix = name.split("_")
    assert len(date) == 8 and len(clock) == 6 and suffix
    assert Path(first.usd_path).is_file() and first.usd_file_name == "crate.usd"


def test_usd_file_name_follows_isaac_lab(obj_asset, tmp_path):
    assert convert(obj_asset, tmp_path / "a", usd_file_name="thing").usd_file_name == "thing.usd"
    assert convert(obj_asset, tmp_path / "b", usd_file_name="thing.usda").usd_file_name == "thing.usda"


def test_missing_asset_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        convert(tmp_path / "nope.obj", tmp_path / "out")


def test_failed_conversion_keeps_the_previous_output_and_leaves_no_partial_files(tmp_path):
    source = write_mesh(tmp_path, "stl")
    good = convert(source, tmp_path / "out")
    before = {p: p.read_bytes() for p in Path(good.usd_dir).rglob("*") if p.is_file()}
    source.write_bytes(b"\x00 garbage")
    with pytest.raises(ConversionError):
        convert(source, tmp_path / "out")
    after = {p: p.read_bytes() for p in Path(good.usd_dir).rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_files_an_earlier_run_wrote_but_this_run_does_not_are_removed(tmp_path):
    source = write_mesh(tmp_path, "stl")
    instanced = convert(source, tmp_path / "out")
    meshes = Path(instanced.usd_dir) / instanced.usd_instanceable_meshes_path
    assert meshes.is_file()
    (Path(instanced.usd_dir) / "notes.txt").write_text("mine")  # a user's file is not ours to remove
    flat = convert(source, tmp_path / "out", make_instanceable=False)
    assert flat.converted and not meshes.exists() and not meshes.parent.exists()
    assert (Path(instanced.usd_dir) / "notes.txt").read_text() == "mine"


def test_the_cfg_is_not_mutated_and_properties_are_absolute(obj_asset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = MeshConverterCfg(asset_path=obj_asset.name, usd_dir="out")
    converter = MeshConverter(cfg)
    assert cfg.usd_dir == "out" and attrs.evolve(cfg) == cfg
    assert Path(converter.usd_dir).is_absolute() and Path(converter.usd_path).is_file()
