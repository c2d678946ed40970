"""Messages a user reads (issue #12): no jargon on a first conversion, repeated warnings summarised, plain
words for a file without an extension, and what "changed" means for the lazy check."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import trimesh

from usdforge.pipeline import MeshConverter, UrdfConverter
from usdforge.schemas import MeshConverterCfg, UrdfConverterCfg

REPO = Path(__file__).resolve().parents[1]


def chain(links: int) -> str:
    names = "".join(f'<link name="l{i}"><visual><geometry><box size="1 1 1"/></geometry></visual></link>'
                    for i in range(links))
    joints = "".join(f'<joint name="j{i}" type="continuous"><parent link="l{i - 1}"/><child link="l{i}"/></joint>'
                     for i in range(1, links))
    return f'<robot name="chain">{names}{joints}</robot>\n'


def test_a_first_conversion_says_converting_and_no_jargon(tmp_path):
    source = tmp_path / "box.stl"
    trimesh.creation.box().export(source)
    command = [sys.executable, "-m", "usdforge.pipeline.cli", "convert", str(source), str(tmp_path / "out")]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == f"usdforge: converting {source}"
    trimesh.creation.box(extents=[1, 2, 3]).export(source)  # a changed source: the rebuild says why
    again = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                           timeout=120)
    assert again.returncode == 0 and "lazy key" not in again.stderr and str(source) in again.stderr


def test_the_same_warning_for_many_links_is_one_line(tmp_path):
    source = tmp_path / "chain.urdf"
    source.write_text(chain(300))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        UrdfConverter(UrdfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out")))
    massless = [str(w.message) for w in caught if "no mass" in str(w.message)]
    assert len(massless) == 1, massless[:3]
    assert "300 links: no mass; given the placeholder mass" in massless[0] and "(l0, l1, l2, l3, l4, …)" in massless[0]


def test_a_mesh_file_without_an_extension_is_named_so(tmp_path):
    (tmp_path / "part").write_bytes(b"solid x\nendsolid x\n")
    source = tmp_path / "r.urdf"
    source.write_text('<robot name="r"><link name="a"><visual><geometry><mesh filename="part"/></geometry>'
                      '</visual></link></robot>\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        UrdfConverter(UrdfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out")))
    messages = [str(w.message) for w in caught]
    assert any("mesh file name without an extension (supported: obj" in m for m in messages), messages
    assert not any("'.'" in m for m in messages)


def test_the_api_sees_an_edit_that_keeps_size_and_modification_time(tmp_path):
    # README: usdforge convert and the Python API compare content hashes every time.
    source = tmp_path / "box.stl"
    trimesh.creation.box(extents=[1, 2, 3]).export(source)
    cfg = MeshConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out"))
    assert MeshConverter(cfg).converted
    stat = source.stat()
    data = bytearray(source.read_bytes())
    data[-10] ^= 0x01  # one bit of the last vertex: same size
    source.write_bytes(bytes(data))
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert source.stat().st_size == stat.st_size and source.stat().st_mtime_ns == stat.st_mtime_ns
    assert MeshConverter(cfg).converted
