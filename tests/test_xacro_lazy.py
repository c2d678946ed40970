"""Lazy rules for xacro sources: every file the expansion read (includes, YAML configs) and every file the
expanded URDF names are dependencies; editing one re-converts, editing a file the expansion did not read
does not; other xacro arguments are other settings. Through the Python API and through ``doit convert``."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pxr import Usd, UsdPhysics

from usdforge.pipeline import UrdfConverter
from usdforge.pipeline.cli import main
from usdforge.pipeline.references import referenced_files
from usdforge.schemas import UrdfConverterCfg
from test_doit import doit, executed
from xacro_package import write_bot


@pytest.fixture
def bot(tmp_path) -> Path:
    return write_bot(tmp_path / "src")


def build(package: Path, out: Path, **cfg) -> UrdfConverter:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return UrdfConverter(UrdfConverterCfg(
            asset_path=str(package / "urdf" / "bot.urdf.xacro"), usd_dir=str(out),
            ros_package_paths=[{"name": "bot_description", "path": str(package)}], **cfg))


def test_scan_lists_includes_yaml_and_meshes_and_follows_the_arguments(bot):
    source = bot / "urdf" / "bot.urdf.xacro"
    packages = {"bot_description": str(bot)}
    found = {Path(p).relative_to(bot).as_posix() for p in referenced_files("urdf", source, packages)}
    assert found == {"urdf/arm.xacro", "config/short.yaml", "meshes/base.stl"}
    other = {Path(p).relative_to(bot).as_posix()
             for p in referenced_files("urdf", source, packages, {"variant": "long"})}
    assert other == {"urdf/arm.xacro", "config/long.yaml", "meshes/base.stl"}


def test_editing_an_included_xacro_or_yaml_reconverts_and_unread_files_do_not(bot, tmp_path):
    out = tmp_path / "out"
    first = build(bot, out)
    assert first.converted and Path(first.usd_path).name == "bot.usd"
    assert not build(bot, out).converted
    for unread in ("urdf/unused.xacro", "config/long.yaml", "README.txt"):
        (bot / unread).write_text((bot / unread).read_text() + "\n<!-- edited -->\n" if unread.endswith("xacro")
                                  else (bot / unread).read_text() + "# edited\n")
    assert not build(bot, out).converted

    (bot / "config" / "short.yaml").write_text("base_mass: 2.0\narm_length: 0.4\n")
    again = build(bot, out)
    assert again.converted and any("short.yaml" in reason for reason in again.reasons)
    assert not build(bot, out).converted

    arm = bot / "urdf" / "arm.xacro"
    arm.write_text(arm.read_text().replace('effort="10"', 'effort="20"'))
    edited = build(bot, out)
    assert edited.converted and any("arm.xacro" in reason for reason in edited.reasons)
    stage = Usd.Stage.Open(edited.usd_path)
    drives = [UsdPhysics.DriveAPI(p, "angular") for p in stage.Traverse() if p.IsA(UsdPhysics.RevoluteJoint)]
    assert [d.GetMaxForceAttr().Get() for d in drives] == [20.0]


def test_xacro_arguments_are_settings_recorded_with_the_output(bot, tmp_path):
    out = tmp_path / "out"
    build(bot, out)
    longer = build(bot, out, xacro_args={"variant": "long"})
    assert longer.converted and "the configuration changed" in longer.reasons
    assert not build(bot, out, xacro_args={"variant": "long"}).converted
    # Now long.yaml is read and short.yaml is not.
    (bot / "config" / "short.yaml").write_text("base_mass: 3.0\narm_length: 0.1\n")
    assert not build(bot, out, xacro_args={"variant": "long"}).converted
    (bot / "config" / "long.yaml").write_text("base_mass: 3.0\narm_length: 0.7\n")
    assert build(bot, out, xacro_args={"variant": "long"}).converted
    sidecar = (out / "bot.usdforge.toml").read_text()
    assert '[cfg.xacro_args]\nvariant = "long"' in sidecar
    # The sidecar names what the expansion read, relative to the package root (no absolute paths).
    assert "config/long.yaml" in sidecar and "config/short.yaml" not in sidecar and str(bot) not in sidecar


def test_command_line_takes_xacro_arguments(bot, tmp_path, capsys):
    out = tmp_path / "cli"
    source = str(bot / "urdf" / "bot.urdf.xacro")
    assert main(["convert", source, str(out), "--package", f"bot_description={bot}", "--xacro-arg",
                 "variant=long", "-q"]) == 0
    assert '[cfg.xacro_args]\nvariant = "long"' in (out / "bot.usdforge.toml").read_text()
    assert main(["convert", source, str(tmp_path / "bad"), "--package", f"bot_description={bot}",
                 "--xacro-arg", "variant=medium", "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "medium.yaml" in err and "bot.urdf.xacro:6: xacro: missing file" in err
    assert not (tmp_path / "bad").exists()


def test_doit_reconverts_exactly_the_entries_that_read_an_edited_file(bot, tmp_path):
    library = tmp_path / "src" / "library.toml"
    library.write_text("""
[[assets]]
name = "bot"
source = "bot_description/urdf/bot.urdf.xacro"
packages = { bot_description = "bot_description" }

[[assets]]
name = "bot_long"
source = "bot_description/urdf/bot.urdf.xacro"
packages = { bot_description = "bot_description" }
xacro_args = { variant = "long" }
""")
    work = tmp_path / "work"
    work.mkdir()
    first = doit(work, "convert", library=library)
    assert first.returncode == 0, first.stderr
    assert executed(first) == ["convert:bot", "convert:bot_long"]
    assert executed(doit(work, "convert", library=library)) == []

    (bot / "config" / "short.yaml").write_text("base_mass: 2.5\narm_length: 0.35\n")
    assert executed(doit(work, "convert", library=library)) == ["convert:bot"]
    (bot / "config" / "long.yaml").write_text("base_mass: 2.5\narm_length: 0.65\n")
    assert executed(doit(work, "convert", library=library)) == ["convert:bot_long"]
    arm = bot / "urdf" / "arm.xacro"
    arm.write_text(arm.read_text().replace('velocity="2"', 'velocity="3"'))
    assert executed(doit(work, "convert", library=library)) == ["convert:bot", "convert:bot_long"]
    (bot / "urdf" / "unused.xacro").write_text("<robot/>\n")
    (bot / "README.txt").write_text("edited\n")
    assert executed(doit(work, "convert", library=library)) == []

    # Switching bot to the long config: its scan follows the argument, so long.yaml now re-converts it.
    library.write_text(library.read_text().replace('packages = { bot_description = "bot_description" }\n\n',
                                                   'packages = { bot_description = "bot_description" }\n'
                                                   'xacro_args = { variant = "long" }\n\n', 1))
    assert executed(doit(work, "convert", library=library)) == ["convert:bot"]
    (bot / "config" / "short.yaml").write_text("base_mass: 1.0\narm_length: 0.2\n")
    assert executed(doit(work, "convert", library=library)) == []
    (bot / "config" / "long.yaml").write_text("base_mass: 1.0\narm_length: 0.9\n")
    assert executed(doit(work, "convert", library=library)) == ["convert:bot", "convert:bot_long"]


def test_namespaced_and_glob_includes_and_eval_expand_and_are_dependencies(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "a.xacro").write_text(
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro"><xacro:macro name="mk" params="n"><link name="${n}"/>'
        '</xacro:macro><xacro:property name="size" value="2"/></robot>')
    (tmp_path / "parts" / "b.xacro").write_text('<robot><link name="from_b"/></robot>')
    (tmp_path / "parts" / "unread.xacro").write_text("<robot/>")
    top = tmp_path / "top.urdf.xacro"
    top.write_text('<?xml version="1.0"?>\n<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro">\n'
                   '  <xacro:include filename="parts/a.xacro" ns="p"/>\n  <xacro:include filename="parts/b*.xacro"/>\n'
                   '  <xacro:p.mk n="x${p.size}"/>\n'
                   '  <link name="${math.pi > 3 and \'big\' or \'small\'}$(eval 1 + 2)"/>\n</robot>\n')
    from usdforge.rules.urdf.xacro import expand_xacro

    assert b'<link name="from_b"/><link name="x2"/><link name="big3"/>' in expand_xacro(top).urdf
    found = {Path(p).relative_to(tmp_path).as_posix() for p in referenced_files("urdf", top)}
    assert found == {"parts/a.xacro", "parts/b.xacro"}
