"""Lazy rules for URDFs through ``pipeline.UrdfConverter``: editing a mesh or texture the URDF references
re-converts, editing an unreferenced file does not; what the dependency scan finds; the command line."""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import pytest
import trimesh

from usdforge.pipeline import UrdfConverter
from usdforge.pipeline.cli import main
from usdforge.pipeline.references import referenced_files
from usdforge.rules.errors import ConversionError
from usdforge.rules.urdf.references import urdf_references
from usdforge.schemas import UrdfConverterCfg
from test_urdf_support import CONFORMANCE

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def arm(tmp_path) -> Path:
    """A copy of the library's tiny_arm package: <tmp>/tiny_arm/{urdf,meshes}."""
    package = tmp_path / "tiny_arm"
    shutil.copytree(REPO / "assets" / "robots" / "tiny_arm", package, ignore=shutil.ignore_patterns("*.py"))
    (package / "README.txt").write_text("not referenced by the URDF\n")
    return package


def build(urdf: Path, out: Path, **cfg) -> UrdfConverter:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return UrdfConverter(UrdfConverterCfg(asset_path=str(urdf), usd_dir=str(out), **cfg))


def test_editing_a_referenced_mesh_reconverts_and_an_unreferenced_file_does_not(arm, tmp_path):
    urdf, out = arm / "urdf" / "tiny_arm.urdf", tmp_path / "out"
    # No packages given: package://tiny_arm is found as the URDF's ancestor folder named tiny_arm.
    first = build(urdf, out)
    assert first.converted and Path(first.usd_path).is_file()
    assert not build(urdf, out).converted
    (arm / "README.txt").write_text("edited\n")
    (arm / "meshes" / "unused.stl").write_bytes(trimesh.creation.box().export(file_type="stl"))
    assert not build(urdf, out).converted
    trimesh.creation.box(extents=[0.02, 0.012, 0.06]).export(arm / "meshes" / "finger.stl")
    again = build(urdf, out)
    assert again.converted and any("finger.stl" in reason for reason in again.reasons)
    assert not build(urdf, out).converted
    urdf.write_text(urdf.read_text().replace('effort="40"', 'effort="45"'))
    assert build(urdf, out).converted


def test_cfg_change_reconverts_but_location_fields_do_not(arm, tmp_path):
    urdf, out = arm / "urdf" / "tiny_arm.urdf", tmp_path / "out"
    build(urdf, out)
    assert build(urdf, out, fix_base=True).converted
    assert not build(urdf, out, fix_base=True).converted
    assert build(urdf, out, fix_base=True, force_usd_conversion=True).converted


def test_scan_lists_meshes_textures_and_their_files_missing_ones_included(arm):
    urdf = arm / "urdf" / "tiny_arm.urdf"
    found = urdf_references(urdf, {"tiny_arm": str(arm)})
    assert sorted(p.name for p in found) == ["base.stl", "finger.stl", "segment.obj"]
    texture = CONFORMANCE / "material_mesh_texture.urdf"
    names = {p.name for p in urdf_references(texture, {})}
    assert {"box_with_texture.obj", "box_with_texture.mtl", "grid.png"} <= names
    r2d2 = REPO.parent / "shared" / "corpus" / "urdf" / "r2d2" / "urdf_tutorial" / "urdf" / "07-physics.urdf"
    missing = [p for p in urdf_references(r2d2, {}) if not p.exists()]
    assert {p.name for p in missing} == {"l_finger_normals.png", "l_finger_tip_normals.png"}
    # The pipeline's scan is the same function, paths normalised.
    assert referenced_files("urdf", urdf, {"tiny_arm": str(arm)}) == sorted(str(p) for p in found)


@pytest.mark.parametrize("encoding, bom", [("utf-8", b""), ("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b""),
                                            ("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")])
def test_the_images_of_a_collada_mesh_are_found_in_any_encoding_and_one_without_images_names_none(
        tmp_path, encoding, bom):
    # The scan skips parsing a COLLADA file whose bytes cannot hold an <init_from>: a file in UTF-16 spells
    # it in other bytes, so it must be parsed, and its image found, all the same.
    r2d2 = REPO.parent / "shared" / "corpus" / "urdf" / "r2d2" / "urdf_tutorial" / "meshes"
    text = (r2d2 / "l_finger.dae").read_text(encoding="utf-8")
    declared = "UTF-16" if encoding.startswith("utf-16") else "utf-8"
    text = text.replace('encoding="utf-8"', f'encoding="{declared}"', 1)
    assert f'encoding="{declared}"' in text
    dae = tmp_path / "finger.dae"
    dae.write_bytes(bom + text.encode(encoding))
    found = {Path(p).name for p in referenced_files("mesh", dae)}
    assert found == {"l_finger_color.png", "l_finger_normals.png"}
    without = re.sub(r"<init_from>[^<]*</init_from>", "", text)
    assert "init_from" not in without and "<library_images>" in without
    dae.write_bytes(bom + without.encode(encoding))
    assert referenced_files("mesh", dae) == []


def test_creating_a_missing_mesh_reconverts(arm, tmp_path):
    urdf, out = arm / "urdf" / "tiny_arm.urdf", tmp_path / "out"
    finger = arm / "meshes" / "finger.stl"
    data = finger.read_bytes()
    finger.unlink()
    with pytest.raises(ConversionError, match="finger.stl not found"):  # by default a missing file fails
        build(urdf, out)
    with pytest.warns(UserWarning, match="finger.stl"):
        UrdfConverter(UrdfConverterCfg(asset_path=str(urdf), usd_dir=str(out), allow_missing_files=True))
    assert not build(urdf, out, allow_missing_files=True).converted
    finger.write_bytes(data)
    assert build(urdf, out, allow_missing_files=True).converted


def test_command_line_converts_with_packages_and_is_lazy(arm, tmp_path, capsys):
    urdf = arm / "urdf" / "tiny_arm.urdf"
    moved = tmp_path / "elsewhere" / "arm.urdf"
    moved.parent.mkdir()
    shutil.copy(urdf, moved)  # outside its package: the package folder must be given
    out = tmp_path / "cli"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["convert", str(moved), str(out), "--package", f"tiny_arm={arm}", "-q"]) == 0
        assert (out / "arm.usd").is_file() and (out / "payloads" / "geometry.usd").is_file()
        assert main(["convert", str(tmp_path / "none.urdf"), str(out), "-q"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_creating_the_file_a_package_uri_was_first_looked_for_reconverts(arm, tmp_path):
    # The package is given explicitly but lacks finger.stl, so the model's own tree gives it; creating it in
    # the given folder changes which file the URI names (found by the differential tester: the build kept
    # the tree's file, a clean build took the given one).
    given = tmp_path / "given" / "tiny_arm"
    shutil.copytree(arm, given)
    (given / "meshes" / "finger.stl").unlink()
    urdf, out = arm / "urdf" / "tiny_arm.urdf", tmp_path / "out"
    cfg = {"ros_package_paths": [{"name": "tiny_arm", "path": str(given)}]}
    assert build(urdf, out, **cfg).converted
    assert str(given / "meshes" / "finger.stl") in {str(p) for p in urdf_references(urdf, {"tiny_arm": str(given)})}
    assert not build(urdf, out, **cfg).converted
    trimesh.creation.box(extents=[0.01, 0.02, 0.03]).export(given / "meshes" / "finger.stl")
    assert build(urdf, out, **cfg).converted
    clean = tmp_path / "clean"
    build(urdf, clean, **cfg)
    assert (out / "payloads" / "geometry.usd").read_bytes() == (clean / "payloads" / "geometry.usd").read_bytes()
