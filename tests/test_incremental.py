"""An incremental build equals a clean build: one test per way it once did not (issue #23).

Each builds, changes something, builds again, and compares every output byte for byte with a clean build
of the same state in a fresh folder without a cache (``clean``): a manifest edit of an entry's source or
packages, two libraries in one build folder, an edit that keeps size and modification time, a cache
entry naming another library's intact objects, xacro's ``$(cwd)``, and a xacro expanded twice.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from pathlib import Path

import pytest
import trimesh

from meshes import write_mesh
from test_cache import outputs
from test_doit import doit, executed
from xacro_package import XACRO_CWD

REPO = Path(__file__).resolve().parents[1]


def clean(library: Path, tmp_path: Path) -> dict[str, bytes]:
    """Every output of a clean ``doit convert`` of ``library`` in a fresh folder, no cache."""
    work = tmp_path / f"clean-{len(list(tmp_path.glob('clean-*')))}"
    work.mkdir()
    result = doit(work, "convert", "cache=off", library=library)
    assert result.returncode == 0, result.stdout + result.stderr
    return outputs(work / "build" / "usd")


def built(work: Path) -> dict[str, bytes]:
    return outputs(work / "build" / "usd")


def stl(path: Path, extents: list[float]) -> Path:
    """A binary STL box: every box has 12 triangles, so every such file has the same size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    trimesh.creation.box(extents=extents).export(path)
    return path


def test_an_edit_of_an_entrys_source_or_packages_in_the_manifest_rebuilds_it(tmp_path):
    lib = tmp_path / "lib"
    stl(lib / "meshes" / "a.stl", [0.1, 0.2, 0.3])
    stl(lib / "meshes" / "b.stl", [0.3, 0.2, 0.1])
    shutil.copytree(REPO / "assets" / "robots" / "tiny_arm", lib / "robots" / "tiny_arm")
    shutil.copytree(REPO / "assets" / "robots" / "tiny_arm", lib / "robots" / "tiny_arm_b")
    mesh = next((lib / "robots" / "tiny_arm_b" / "meshes").glob("*.stl"))
    stl(mesh, [0.05, 0.05, 0.2])
    library = lib / "library.toml"
    manifest = ('[[assets]]\nname = "part"\nsource = "meshes/{part}.stl"\n\n'
                '[[assets]]\nname = "arm"\nsource = "robots/tiny_arm/urdf/tiny_arm.urdf"\n'
                'packages = {{ tiny_arm = "robots/{arm}" }}\n')
    library.write_text(manifest.format(part="a", arm="tiny_arm"))
    work = tmp_path / "work"
    work.mkdir()
    assert doit(work, "convert", library=library).returncode == 0

    library.write_text(manifest.format(part="b", arm="tiny_arm_b"))
    again = doit(work, "convert", library=library)
    assert again.returncode == 0, again.stderr
    assert executed(again) == ["convert:arm", "convert:part"]
    assert built(work) == clean(library, tmp_path)


def test_two_libraries_in_one_build_folder_never_mix(tmp_path):
    """One after the other, each gets its own outputs (same entry name, same relative source, same size
    and modification time, other bytes); at once, the second is refused with one line."""
    libraries = []
    for name, extents in (("a", [0.1, 0.2, 0.3]), ("b", [0.3, 0.1, 0.2])):
        source = stl(tmp_path / name / "meshes" / "part.stl", extents)
        os.utime(source, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
        (tmp_path / name / "library.toml").write_text('[[assets]]\nname = "part"\nsource = "meshes/part.stl"\n')
        libraries.append(tmp_path / name / "library.toml")
    work = tmp_path / "work"
    work.mkdir()
    for library in [*libraries, *libraries]:
        result = doit(work, "convert", library=library)
        assert result.returncode == 0, result.stderr
        assert built(work) == clean(library, tmp_path), library

    from usdforge.pipeline import tasks

    assert tasks.lock_build_folder(work / "build", libraries[0]) is None  # a build of library a is running
    try:
        refused = doit(work, "convert", library=libraries[1])
        assert refused.returncode != 0 and executed(refused) == ["convert:lock"]  # nothing converted
        lines = [line for line in (refused.stdout + refused.stderr).splitlines() if "running" in line]
        assert len(lines) == 1 and str(libraries[0]) in lines[0], refused.stdout + refused.stderr
        assert doit(work, "convert", library=libraries[0]).returncode == 0  # the same library may share it
    finally:
        os.close(tasks._HELD.pop(os.path.abspath(work / "build")))
    assert doit(work, "convert", library=libraries[1]).returncode == 0
    assert built(work) == clean(libraries[1], tmp_path)


def test_an_edit_keeping_size_and_modification_time_is_rebuilt_by_doit(tmp_path):
    """``cp -p``, ``rsync -t``, ``tar x``: other bytes, the same size and modification time."""
    lib = tmp_path / "lib"
    (lib / "meshes").mkdir(parents=True)
    source = write_mesh(lib / "meshes", "stl")
    library = lib / "library.toml"
    library.write_text('[[assets]]\nname = "box"\nsource = "meshes/box.stl"\n')
    work = tmp_path / "work"
    work.mkdir()
    assert doit(work, "convert", library=library).returncode == 0
    before = source.stat()
    edited = tmp_path / "edited.stl"
    stl(edited, [0.4, 0.2, 0.6])
    assert edited.stat().st_size == before.st_size
    shutil.copyfile(edited, source)
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = doit(work, "convert", library=library)
    assert again.returncode == 0 and executed(again) == ["convert:box"]
    assert built(work) == clean(library, tmp_path)


def test_a_cache_entry_naming_other_intact_objects_is_a_miss_with_one_warning(tmp_path, caplog):
    from usdforge.pipeline import MeshConverter
    from usdforge.pipeline.cache import Store, sha256_bytes
    from usdforge.schemas import MeshConverterCfg

    store = Store(tmp_path / "cache")
    sources = [stl(tmp_path / name / "part.stl", extents) for name, extents in
               (("a", [0.1, 0.2, 0.3]), ("b", [0.3, 0.1, 0.2]))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first, second = (MeshConverter(MeshConverterCfg(asset_path=str(s), usd_dir=str(tmp_path / f"out-{i}")),
                                       cache=store) for i, s in enumerate(sources))
    entries = [store._entry_path(c.cache_key) for c in (first, second)]
    other = json.loads(entries[1].read_bytes())["files"]
    for round, swapped in enumerate((list(other), ["part.usd"], [name for name in other if name != "part.usd"])):
        body = json.loads(entries[0].read_bytes()) if entries[0].is_file() else None
        if body is None:  # rejected by the previous round: write it back as it was
            MeshConverter(MeshConverterCfg(asset_path=str(sources[0]), usd_dir=str(tmp_path / "redo")), cache=store)
            body = json.loads(entries[0].read_bytes())
        body.pop("checksum")
        body["files"].update({name: other[name] for name in swapped})  # intact objects of another entry
        body["checksum"] = sha256_bytes(json.dumps(body, sort_keys=True).encode())
        entries[0].write_text(json.dumps(body, sort_keys=True))
        out = tmp_path / f"restored-{round}"
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="usdforge"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            again = MeshConverter(MeshConverterCfg(asset_path=str(sources[0]), usd_dir=str(out)),
                                  cache=Store(tmp_path / "cache"))  # a new build: its warnings afresh
        assert again.converted and not again.restored, swapped
        assert outputs(out) == outputs(tmp_path / "out-0"), swapped
        assert len([r for r in caplog.records if "build cache entry" in r.getMessage()]) == 1, swapped
    assert outputs(tmp_path / "out-1") != outputs(tmp_path / "out-0")




def test_xacro_cwd_is_the_sources_folder_and_part_of_the_key(tmp_path, monkeypatch):
    """``$(cwd)`` writes a folder into the output (here its length, in a material's name): wherever the
    build is started it is the xacro's folder, and a copy elsewhere is rebuilt, never restored."""
    from usdforge.pipeline import UrdfConverter
    from usdforge.pipeline.cache import Store
    from usdforge.schemas import UrdfConverterCfg

    store = Store(tmp_path / "cache")

    def convert(source: Path, out: str, cache) -> dict[str, bytes]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            UrdfConverter(UrdfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / out)), cache=cache)
        return outputs(tmp_path / out)

    source = tmp_path / "src" / "bot.urdf.xacro"
    source.parent.mkdir()
    source.write_text(XACRO_CWD)
    for folder in ("here", "a-longer-working-folder"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "here")
    convert(source, "first", store)
    monkeypatch.chdir(tmp_path / "a-longer-working-folder")
    assert convert(source, "second", store) == convert(source, "second-clean", False)
    moved = tmp_path / "somewhere-else" / "bot.urdf.xacro"
    moved.parent.mkdir()
    shutil.copy(source, moved)
    assert convert(moved, "moved", store) == convert(moved, "moved-clean", False)
    assert outputs(tmp_path / "moved") != outputs(tmp_path / "first")


def test_a_xacro_is_expanded_once_per_build_also_when_it_fails(tmp_path, monkeypatch):
    import usdforge.rules.urdf.xacro as xacro
    from usdforge.pipeline import UrdfConverter
    from usdforge.rules.errors import ConversionError
    from usdforge.schemas import UrdfConverterCfg

    calls = []
    real = xacro._expand
    monkeypatch.setattr(xacro, "_expand", lambda *args: (calls.append(args[0]), real(*args))[1])
    monkeypatch.setattr(xacro, "_CACHE", {})
    source = tmp_path / "bot.urdf.xacro"
    source.write_text(XACRO_CWD)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        UrdfConverter(UrdfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out")), cache=False)
    assert len(calls) == 1
    source.write_text(XACRO_CWD.replace("</robot>", "<xacro:undefined_macro/></robot>"))
    calls.clear()
    with pytest.raises(ConversionError):
        UrdfConverter(UrdfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out")), cache=False)
    assert len(calls) == 1


def test_a_mesh_scan_is_not_reused_by_a_later_build_of_the_same_process(tmp_path):
    """An OBJ's references depend on its MTL too: after the MTL names another texture (the OBJ untouched),
    that texture is a dependency, and editing it rebuilds (found by bench/differential.py: a process-wide
    memo of scans keyed on the OBJ's stat stamp kept the old texture)."""
    from PIL import Image

    from test_lazy import convert, textured_obj

    (tmp_path / "src").mkdir()
    asset = textured_obj(tmp_path / "src")
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(asset, out)
        Image.new("RGB", (2, 2), (10, 200, 10)).save(asset.parent / "stone.png")
        (asset.parent / "crate.mtl").write_text("newmtl wood\nKd 0.6 0.4 0.2\nmap_Kd stone.png\n")
        assert convert(asset, out).converted
        Image.new("RGB", (2, 2), (200, 10, 10)).save(asset.parent / "stone.png")
        again = convert(asset, out)
        assert again.converted and any("stone.png" in reason for reason in again.reasons)
        convert(asset, tmp_path / "clean", force_usd_conversion=True)
    assert outputs(out) == outputs(tmp_path / "clean")


def test_an_output_stamp_learnt_by_a_no_op_still_sees_an_edit_keeping_size_and_time(tmp_path):
    """Outputs are written just before doit records them (racily clean: no stamp); a later check hashes
    them once and keeps the stamp they then have. An edit keeping size and modification time is seen."""
    lib = tmp_path / "lib"
    stl(lib / "meshes" / "box.stl", [0.1, 0.2, 0.3])
    library = lib / "library.toml"
    library.write_text('[[assets]]\nname = "box"\nsource = "meshes/box.stl"\n')
    work = tmp_path / "work"
    work.mkdir()
    assert doit(work, "convert", library=library).returncode == 0
    for _ in range(2):
        assert executed(doit(work, "convert", library=library)) == []
    output = work / "build" / "usd" / "box" / "Props" / "box_meshes.usd"
    state = json.loads((work / "build" / ".doit.db").read_text())["convert:box"]
    assert state["_values_:"]["outputs"]["Props/box_meshes.usd"][1] is not None  # learnt into doit's state
    assert "result:" not in state and "usd_path" not in state["_values_:"]  # kept once, only what is read
    before = output.stat()
    data = bytearray(output.read_bytes())
    data[-1] ^= 0x01
    output.write_bytes(bytes(data))
    os.utime(output, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = doit(work, "convert", library=library)
    assert executed(again) == ["convert:box"]
    assert built(work) == clean(library, tmp_path)
