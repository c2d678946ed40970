"""Hostile and broken inputs (issue #12): each file in tests/bad_inputs/ is one class of bad input. Its
conversion must exit 1 with one line on stderr naming the file, the element (line where known) and the
problem, and write nothing.

A file states what is expected in its first comments: ``<!-- expect: TEXT -->`` (TEXT must appear in the
message right after the file's path; ``{dir}`` is tests/bad_inputs) and optionally ``<!-- allow-root: DIR -->``
(run with ``--allow-root DIR``). Non-XML files are listed in ``OTHER``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from usdforge.pipeline.cli import main

BAD = Path(__file__).resolve().parent / "bad_inputs"
#: Files that cannot carry an XML comment: name → (expected text, extra args).
OTHER = {
    "mesh_gltf_not_object.gltf": (": not a glTF document: the JSON is list, not an object", []),
    "mesh_without_extension": (": cannot tell what to convert: the file name has no extension", []),
    "mesh_stl_wrong_triangle_count.stl": (": binary STL whose header counts 1000 triangles (50084 bytes) but "
                                          "the file has 134 bytes", []),
}
_EXPECT = re.compile(r"<!-- expect: (.*?) -->")
_ALLOW = re.compile(r"<!-- allow-root: (.*?) -->")


def _cases() -> list[Path]:
    return sorted(p for p in BAD.iterdir() if p.is_file())


def _expectation(source: Path) -> tuple[str, list[str]]:
    if source.name in OTHER:
        return OTHER[source.name]
    head = source.read_text(errors="replace")[:4000]
    expect = _EXPECT.search(head)
    assert expect, f"{source.name} states no expectation"
    allow = _ALLOW.search(head)
    return expect.group(1).replace("{dir}", str(BAD)), ["--allow-root", allow.group(1)] if allow else []


def convert(source: Path, out: Path, args: list[str], capsys) -> tuple[int, list[str]]:
    """Run ``usdforge convert`` in-process; (exit status, stderr lines)."""
    status = main(["convert", "-q", str(source), str(out), *args])
    return status, capsys.readouterr().err.strip().splitlines()


def assert_refused(source: Path, expect: str, args: list[str], run: Path, capsys) -> str:
    """Convert into ``run/out`` (``run`` made here): exit 1, one located line holding ``expect``, nothing
    written; return the line."""
    run.mkdir()
    out = run / "out"
    status, err = convert(source, out, args, capsys)
    assert status == 1, err
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"usdforge: error: {source}"), line
    assert expect in line, line
    assert len(line) < 600, "long values are cut"
    assert not any(run.iterdir()), "nothing is written"
    return line


@pytest.mark.parametrize("source", _cases(), ids=lambda p: p.name)
def test_bad_input_is_one_located_line_and_writes_nothing(source, tmp_path, capsys, monkeypatch):
    expect, args = _expectation(source)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    line = assert_refused(source, expect, args, tmp_path / "run", capsys)
    if expect.startswith(":"):  # ":LINE: <element>: problem" right after the file's path
        assert line.startswith(f"usdforge: error: {source}{expect}"), line
    assert not any(work.iterdir()), "no stray files (MUJOCO_LOG.TXT) in the current folder"


def test_the_corpus_of_bad_inputs_covers_each_class():
    names = {p.name for p in _cases()}
    assert len(names) >= 45
    for needed in ("urdf_texture_absolute.urdf", "urdf_texture_parent.urdf", "urdf_texture_package_escape.urdf",
                   "mjcf_texture_absolute.xml", "urdf_mesh_dev_zero.urdf", "mjcf_mesh_dev_urandom.xml",
                   "mjcf_pos_nan.xml", "mjcf_mass_inf.xml", "urdf_mass_huge.urdf", "mesh_gltf_not_object.gltf"):
        assert needed in names


# ---- what cannot be a committed file: FIFOs, symlink loops, size limits, allowed roots -----------------

def _urdf_naming(folder: Path, mesh: str, texture: str | None = None) -> Path:
    material = f'<material name="m"><texture filename="{texture}"/></material>' if texture else ""
    path = folder / "robot.urdf"
    path.write_text(f'<robot name="r"><link name="a"><visual><geometry><mesh filename="{mesh}"/></geometry>'
                    f'{material}</visual></link></robot>\n')
    return path


def test_fifo_mesh_is_refused_without_blocking(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    os.mkfifo(model / "pipe.stl")
    source = _urdf_naming(model, "pipe.stl")
    done = threading.Event()
    threading.Timer(60, lambda: None if done.is_set() else os.open(model / "pipe.stl", os.O_WRONLY | os.O_NONBLOCK)
                    ).start()
    try:
        line = assert_refused(source, ':1: <mesh filename="pipe.stl">: mesh file', [], tmp_path / "run", capsys)
    finally:
        done.set()
    assert "is a FIFO, not a regular file" in line


def test_symlink_loop_and_directory_mesh_are_one_clear_line(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    os.symlink("loop.stl", model / "loop.stl")
    source = _urdf_naming(model, "loop.stl")
    line = assert_refused(source, ':1: <mesh filename="loop.stl">: mesh file', [], tmp_path / "run", capsys)
    assert "symbolic links" in line or "loop" in line.lower()


def test_symlink_out_of_the_model_folder_is_refused(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    os.symlink("/etc/hostname", model / "innocent.png")
    source = _urdf_naming(model, "box.stl", texture="innocent.png")
    assert_refused(source, "(a link to /etc/hostname) is outside the model's folder", [], tmp_path / "run", capsys)


def test_file_over_the_size_limit_is_refused(tmp_path, capsys, monkeypatch):
    import usdforge.rules.files as files

    model = tmp_path / "model"
    model.mkdir()
    (model / "big.stl").write_bytes(b"solid x\n" + b" " * 5000 + b"\nendsolid x\n")
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 4096)
    source = _urdf_naming(model, "big.stl")
    line = assert_refused(source, ':1: <mesh filename="big.stl">: mesh file', [], tmp_path / "run", capsys)
    assert "over the 4096-byte limit" in line


def test_allow_root_lets_a_model_read_from_that_folder_only(tmp_path, capsys, monkeypatch):
    from PIL import Image

    shared = tmp_path / "shared_textures"
    shared.mkdir()
    Image.new("RGB", (4, 4), (255, 0, 0)).save(shared / "red.png")
    model = tmp_path / "model"
    model.mkdir()
    source = model / "robot.urdf"
    source.write_text('<robot name="r"><material name="m"><texture filename="../shared_textures/red.png"/>'
                      '</material><link name="a"><visual><geometry><box size="1 1 1"/></geometry>'
                      '<material name="m"/></visual></link></robot>\n')
    assert_refused(source, "texture", [], tmp_path / "run", capsys)
    out = tmp_path / "allowed"
    status, err = convert(source, out, ["--allow-root", str(shared)], capsys)
    assert status == 0, err
    copies = list((out / "textures").glob("*.png"))
    assert len(copies) == 1 and copies[0].read_bytes() == (shared / "red.png").read_bytes()


def test_manifest_allowed_roots_reach_each_entry(tmp_path):
    from usdforge.pipeline.manifest import entry_cfg, load_library

    manifest = tmp_path / "library.toml"
    manifest.write_text('allowed_roots = ["textures"]\n[[assets]]\nname = "r"\nsource = "r.urdf"\n'
                        '[assets.cfg]\nallowed_roots = ["/opt/extra"]\n')
    library = load_library(manifest)
    cfg = entry_cfg(library, library.assets[0], 0)
    assert cfg.allowed_roots == (str(tmp_path / "textures"), "/opt/extra")


def test_content_hash_of_a_device_or_fifo_returns_at_once(tmp_path):
    # doit's up-to-date check hashes every referenced file; /dev/zero or a FIFO used to hang it forever.
    os.mkfifo(tmp_path / "pipe")
    code = ("from usdforge.pipeline.fingerprint import file_digest;"
            f"print(file_digest('/dev/zero'), file_digest({str(tmp_path / 'pipe')!r}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["not-a-file", "not-a-file"]


def test_the_first_failing_reference_is_reported_and_files_after_it_are_not_decoded(tmp_path, monkeypatch):
    """Textures are decoded side by side, yet the error is that of the first failing reference in the
    model's order; a texture named after a refused reference is never opened."""
    from PIL import Image

    from usdforge.rules.errors import ConversionError
    from usdforge.rules.files import Reference, check_references

    model = tmp_path / "model.urdf"
    for name in ("a.png", "b.png", "d.png"):
        Image.new("RGB", (8, 8)).save(tmp_path / name)
    (tmp_path / "bad.png").write_text("not an image")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.stl"
    outside.write_text("solid x\nendsolid x\n")
    opened = []
    real_open = Image.open
    monkeypatch.setattr(Image, "open", lambda path, *a, **k: opened.append(Path(path).name) or real_open(path, *a, **k))

    def refs(*items):
        return [Reference(tmp_path / name if what == "texture" else outside, what, model, f"<{what}>", line)
                for line, (what, name) in enumerate(items, 1)]

    with pytest.raises(ConversionError, match=r":3: <texture>: texture file .*bad.png is not an image"):
        check_references(refs(("texture", "a.png"), ("texture", "b.png"), ("texture", "bad.png"),
                              ("mesh", ""), ("texture", "d.png")), [tmp_path])
    assert "d.png" not in opened  # after the mesh outside the roots: never read
    opened.clear()
    with pytest.raises(ConversionError, match=r":2: <mesh>: mesh .* is outside the model's folder"):
        check_references(refs(("texture", "a.png"), ("mesh", ""), ("texture", "bad.png")), [tmp_path])
    assert opened == ["a.png"]


@pytest.mark.parametrize("names, expect", [
    (['"box\\n"'], "expected a name of letters, digits"),           # TOML "box\n": a newline in a folder name
    (['"Box"', '"box"'], "'box' is already used by assets[0] (names are compared ignoring case)"),
])
def test_manifest_names_that_would_clash_as_folders_are_refused(tmp_path, names, expect):
    """An entry name ending in a newline passed (``re.match`` with ``$``) and failed later with a raw USD
    error; names differing only in case are one folder on a case-insensitive file system."""
    from usdforge.pipeline.manifest import load_library
    from usdforge.schemas import ConfigError

    (tmp_path / "box.stl").write_bytes((BAD / "files" / "nan_vertex.stl").read_bytes())
    library = tmp_path / "library.toml"
    library.write_text("".join(f'[[assets]]\nname = {name}\nsource = "box.stl"\n\n' for name in names))
    with pytest.raises(ConfigError) as caught:
        load_library(library)
    message = str(caught.value)
    assert "\n" not in message  # one line (the name shown escaped)
    assert message.startswith(str(library)) and expect in message, message


def test_a_full_disk_is_one_line_saying_no_space_left(tmp_path, capsys):
    """pxr reports a layer it cannot write for lack of space as a Tf.ErrorException ending in "Could not
    close <temporary file>" (it escaped as a traceback): one line naming the output file and the cause,
    and nothing left on the full file system. Needs a small tmpfs (root, or a container that allows it)."""
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        robot = Path(__file__).resolve().parents[1] / "assets" / "robots" / "tiny_arm"
        status = main(["convert", "-q", "--no-cache", str(robot / "urdf" / "tiny_arm.urdf"), str(small / "out"),
                       "--package", f"tiny_arm={robot}"])
        err = capsys.readouterr().err.strip().splitlines()
        assert status == 1 and len(err) == 1, err
        assert err[0].startswith(f"usdforge: error: could not write {small / 'out'}/"), err
        assert err[0].endswith("no space left on device"), err
        assert list(small.iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(small)], check=True)  # lazy: pxr may still hold a file open


def test_an_obj_vertex_line_with_too_few_numbers_is_a_warning_naming_the_file(tmp_path, capsys):
    # Found by bench/fuzz.py: Assimp refuses the NaN, and trimesh then reads two columns for every vertex,
    # which the welding indexed past (a traceback).
    model = tmp_path / "model"
    model.mkdir()
    (model / "short.obj").write_text("v 0 0 nan\nv 1 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 3 4\n")
    status = main(["convert", str(_urdf_naming(model, "short.obj")), str(tmp_path / "out")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 0 and "Traceback" not in "\n".join(lines)
    assert any("short.obj: mesh vertices with 2 coordinates instead of 3" in line for line in lines), lines


def test_a_flat_mesh_encloses_no_volume_and_gives_no_traceback(tmp_path, capsys):
    """A mesh whose points lie in one plane has no volume (qhull refuses to build its hull): a URDF link
    whose mass alone is given, with such a mesh as its only shape, converts with the isotropic-inertia
    warning; the mesh converter asked for that mesh's mass says in one line that it encloses no volume.
    Found by bench/fuzz.py (a QhullError traceback before)."""
    (tmp_path / "flat.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    (tmp_path / "flat.urdf").write_text(
        '<robot name="flat"><link name="base"><inertial><mass value="1"/></inertial>'
        '<visual><geometry><mesh filename="flat.obj"/></geometry></visual></link></robot>')
    assert main(["convert", str(tmp_path / "flat.urdf"), str(tmp_path / "out.usda"), "--no-cache"]) == 0
    assert "no <inertia>" in capsys.readouterr().err
    from usdforge.pipeline import MeshConverter
    from usdforge.rules.errors import ConversionError
    from usdforge.schemas import MassPropertiesCfg, MeshConverterCfg

    with pytest.raises(ConversionError, match="encloses no volume"):
        MeshConverter(MeshConverterCfg(asset_path=str(tmp_path / "flat.obj"), usd_dir=str(tmp_path / "mesh"),
                                       mass_props=MassPropertiesCfg(mass=2.0)), cache=False)


@pytest.mark.parametrize("file_name", ["payloads/base.usda", "payloads/Physics/physics.usda", "../r.usda",
                                       "/tmp/r.usda", "sub\\r.usd", ".."])
def test_a_usd_file_name_with_a_folder_is_one_line_naming_the_field(tmp_path, file_name):
    """``payloads/base.usda`` was written over the base layer of the same conversion (a broken asset, no
    error), ``../r.usda`` and an absolute name ended in a ValueError traceback: the name is one file name."""
    from usdforge.pipeline.manifest import entry_cfg, load_library
    from usdforge.schemas import ConfigError, UrdfConverterCfg

    library = tmp_path / "library.toml"
    library.write_text(f'[[assets]]\nname = "r"\nsource = "r.urdf"\n[assets.cfg]\nusd_file_name = {file_name!r}\n')
    with pytest.raises(ConfigError) as caught:
        entry_cfg(load_library(library), load_library(library).assets[0], 0)
    message = str(caught.value)
    assert "\n" not in message and "assets[0].cfg.usd_file_name" in message, message
    assert "expected a file name without a folder" in message, message
    with pytest.raises(ValueError, match="usd_file_name: expected a file name without a folder"):
        UrdfConverterCfg(asset_path="r.urdf", usd_file_name=file_name)
    assert UrdfConverterCfg(asset_path="r.urdf", usd_file_name="r.usda").usd_file_name == "r.usda"
