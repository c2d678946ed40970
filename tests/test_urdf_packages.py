"""Real-world URDF and xacro (issue #28, and #24's package resolution): one package resolver with a
boundary, missing files that fail, lenient limits, global materials, warnings vs notes, ``$(optenv)``.

Every fixture is generated here, in the layouts public robot repositories use: ``abb_irb140/urdf`` naming
``package://abb_irb140_support/meshes/...`` with the meshes in ``abb_irb140/meshes``; ``ur_e_description``
naming ``ur_description`` beside a ``ur_description`` folder that lacks the file; the three-slash
``package:///example-robot-data/...``. The boundary cases put a folder ``etc`` (with a secret ``passwd``)
just outside a model's tree (a ``.git`` folder marks the tree) and check that no rule reaches it.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from usdforge.pipeline.cli import main
from usdforge.rules.urdf import paths

SECRET = "root:x:0:0:SECRET-BYTES-28:/root:/bin/bash"
STL = "solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\nendloop\nendfacet\nendsolid t\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _robot(meshes: list[str], extra: str = "") -> str:
    links = "".join(f'<link name="l{i}"><visual><geometry><mesh filename="{m}"/></geometry></visual></link>'
                    for i, m in enumerate(meshes))
    joints = "".join(f'<joint name="j{i}" type="fixed"><parent link="l0"/><child link="l{i}"/></joint>'
                     for i in range(1, len(meshes)))
    return f'<robot name="r">\n{links}\n{joints}\n{extra}</robot>\n'


def _tree(tmp_path: Path) -> Path:
    """``tmp/tree`` marked as a repository (``.git``), and ``tmp/etc/passwd`` outside it."""
    tree = tmp_path / "tree"
    (tree / ".git").mkdir(parents=True)
    _write(tmp_path / "etc" / "passwd", SECRET)
    _write(tmp_path / "outsider" / "meshes" / "a.stl", STL)
    _write(tmp_path / "meshes" / "a.stl", STL)
    return tree


def _convert(source: Path, out: Path, capsys, *args: str) -> tuple[int, list[str], str]:
    status = main(["convert", "--no-cache", str(source), str(out), *args])
    captured = capsys.readouterr()
    return status, captured.err.strip().splitlines(), captured.out


def _resolve(uri: str, model: Path, packages: dict[str, str] | None = None):
    return paths.resolve_package_uri(uri, model.parent, packages or {})


# ---- the rules -----------------------------------------------------------------------------------------

def test_walk_up_finds_meshes_of_a_package_named_after_another_folder(tmp_path):
    """abb_irb140/urdf/irb140.urdf names package://abb_irb140_support/meshes/...: no folder of that name;
    the file is in abb_irb140/meshes (urdf-usd-converter's rule)."""
    tree = _tree(tmp_path)
    mesh = _write(tree / "abb_irb140" / "meshes" / "irb140" / "visual" / "link_1.stl", STL)
    model = _write(tree / "abb_irb140" / "urdf" / "irb140.urdf", "")
    found = _resolve("package://abb_irb140_support/meshes/irb140/visual/link_1.stl", model)
    assert (found.path, found.rule) == (mesh, "walk-up")


def test_a_folder_of_that_name_without_the_file_loses_to_the_folder_with_it(tmp_path):
    """ur_e_description/urdf names package://ur_description/meshes/ur5e/...; a sibling ur_description
    exists but lacks the file, which is in ur_e_description/meshes/ur5e."""
    tree = _tree(tmp_path)
    _write(tree / "ur_description" / "package.xml", "<package><name>ur_description</name></package>")
    _write(tree / "ur_description" / "meshes" / "ur5" / "base.stl", STL)
    mesh = _write(tree / "ur_e_description" / "meshes" / "ur5e" / "base.stl", STL)
    model = _write(tree / "ur_e_description" / "urdf" / "universalUR5e.urdf", "")
    found = _resolve("package://ur_description/meshes/ur5e/base.stl", model)
    assert (found.path, found.rule) == (mesh, "walk-up")
    # The named folder's missing file came first: creating it changes where the URI leads (below), so the
    # dependency scan records it.
    assert tree / "ur_description" / "meshes" / "ur5e" / "base.stl" in found.shadowed
    # Where the named folder has the file, it wins (the peer's rule alone would miss these).
    other = _write(tree / "ur_description" / "meshes" / "ur5e" / "base.stl", STL)
    assert _resolve("package://ur_description/meshes/ur5e/base.stl", model)[:3] == (other, tree / "ur_description",
                                                                                     "folder")


def test_three_slash_uri(tmp_path):
    tree = _tree(tmp_path)
    mesh = _write(tree / "example-robot-data" / "robots" / "talos_data" / "meshes" / "torso.stl", STL)
    model = _write(tree / "example-robot-data" / "robots" / "talos_data" / "robots" / "talos.urdf", "")
    found = _resolve("package:///example-robot-data/robots/talos_data/meshes/torso.stl", model)
    assert (found.path, found.rule) == (mesh, "three-slash")


def test_package_xml_declaring_the_name_is_preferred_and_explicit_roots_come_first(tmp_path):
    tree = _tree(tmp_path)
    _write(tree / "arm" / "meshes" / "m.stl", STL)  # called "arm", but declares another package
    _write(tree / "arm" / "package.xml", "<package><name>arm_old</name></package>")
    declared = _write(tree / "arm-ros2" / "meshes" / "m.stl", STL)
    _write(tree / "arm-ros2" / "package.xml", "<package format='3'>\n  <name> arm </name></package>")
    model = _write(tree / "robots" / "r.urdf", "")
    assert _resolve("package://arm/meshes/m.stl", model)[:3] == (declared, tree / "arm-ros2", "folder")
    given = _write(tmp_path / "given" / "meshes" / "m.stl", STL)
    assert _resolve("package://arm/meshes/m.stl", model, {"arm": str(tmp_path / "given")}).path == given


# ---- the boundary --------------------------------------------------------------------------------------

def test_no_rule_leaves_the_model_tree(tmp_path, capsys):
    """package://etc/passwd, a folder beside the tree, the walk-up rule and a three-slash URI all stop at
    the folder holding .git; the refusal is one line per file and quotes no byte of the outside file."""
    tree = _tree(tmp_path)
    model = _write(tree / "robot" / "urdf" / "r.urdf", _robot([
        "package://etc/passwd", "package://outsider/meshes/a.stl", "package://robot_support/meshes/a.stl",
        "package:///etc/passwd"]))
    for uri in ("package://etc/passwd", "package://outsider/meshes/a.stl", "package:///etc/passwd"):
        with pytest.raises(paths.UnresolvedUri, match="not found in the model's tree"):
            _resolve(uri, model)
    # tmp/meshes/a.stl exists above the tree: the walk-up rule does not reach it.
    with pytest.raises(paths.UnresolvedUri):
        _resolve("package://robot_support/meshes/a.stl", model)
    status, err, _ = _convert(model, tmp_path / "out", capsys)
    assert status == 1
    assert len(err) == 4 and all(line.startswith(f"usdforge: error: {model}:") for line in err), err
    assert all("not found in the model's tree" in line for line in err), err
    assert SECRET not in "\n".join(err) and "SECRET" not in "\n".join(err)
    assert not (tmp_path / "out").exists()


def test_without_a_marker_the_tree_is_the_package_and_never_the_root_or_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    _write(tmp_path / "home" / "secrets" / "key.stl", STL)
    model = _write(tmp_path / "home" / "robot" / "urdf" / "r.urdf", "")
    assert paths.tree_boundary(str(model.parent)) == str(tmp_path / "home" / "robot")
    (tmp_path / "home" / ".git").mkdir()  # a home folder under version control is still not a tree
    assert paths.tree_boundary(str(model.parent)) == str(tmp_path / "home" / "robot")
    with pytest.raises(paths.UnresolvedUri):
        _resolve("package://secrets/key.stl", model)
    assert paths.tree_boundary("/") == "/" and paths.tree_boundary("/etc") == "/etc"


def test_the_manifest_folder_bounds_the_search(tmp_path):
    tree = _tree(tmp_path)
    _write(tree / "lib" / "library.toml", "")
    model = _write(tree / "lib" / "robot" / "urdf" / "r.urdf", "")
    _write(tree / "other" / "meshes" / "a.stl", STL)
    assert _resolve("package://other/meshes/a.stl", model).rule == "folder"
    assert paths.tree_boundary(str(model.parent), str(tree / "lib")) == str(tree / "lib")
    with pytest.raises(paths.UnresolvedUri):
        paths.resolve_package_uri("package://other/meshes/a.stl", model.parent, {}, str(tree / "lib"))


XACRO_FIND = """<?xml version="1.0"?>
<robot name="x" xmlns:xacro="http://www.ros.org/wiki/xacro">
  {body}
  <link name="a"/>
</robot>
"""


@pytest.mark.parametrize("body", ['<xacro:include filename="$(find etc)/passwd"/>',
                                  '<xacro:property name="p" value="${xacro.load_yaml(\'$(find etc)/passwd\')}"/>'
                                  '<link name="${p}"/>'],
                         ids=["include", "load_yaml"])
def test_xacro_find_stops_at_the_boundary(tmp_path, capsys, body):
    tree = _tree(tmp_path)
    model = _write(tree / "robot" / "urdf" / "r.urdf.xacro", XACRO_FIND.format(body=body))
    status, err, _ = _convert(model, tmp_path / "out", capsys)
    assert status == 1 and len(err) == 1, err
    assert "ROS package 'etc' not found in the model's tree" in err[0], err
    assert "SECRET" not in err[0]
    assert not (tmp_path / "out").exists()


# ---- conversions ---------------------------------------------------------------------------------------

def test_the_layouts_convert_with_every_mesh_and_the_choice_is_recorded(tmp_path, capsys):
    from pxr import Usd, UsdGeom

    tree = _tree(tmp_path)
    _write(tree / "abb_irb140" / "meshes" / "l0.stl", STL)
    _write(tree / "ur_description" / "meshes" / "l1.stl", STL)
    _write(tree / "example-robot-data" / "robots" / "talos_data" / "meshes" / "l2.stl", STL)
    model = _write(tree / "abb_irb140" / "urdf" / "r.urdf", _robot([
        "package://abb_irb140_support/meshes/l0.stl", "package://ur_description/meshes/l1.stl",
        "package:///example-robot-data/robots/talos_data/meshes/l2.stl"]))
    status, err, out = _convert(model, tmp_path / "out", capsys)
    assert status == 0, err
    assert not any("note:" in line for line in err), "notes only with -v"
    stage = Usd.Stage.Open(out.strip())
    assert sum(1 for prim in stage.Traverse(Usd.TraverseInstanceProxies()) if prim.IsA(UsdGeom.Mesh)) == 3
    record = json.loads((tmp_path / "out" / "r.convert.json").read_text()) if (
        tmp_path / "out" / "r.convert.json").exists() else None
    status, err, _ = _convert(model, tmp_path / "out2", capsys, "-v")
    notes = [line for line in err if line.startswith("usdforge: note:")]
    assert any("package 'abb_irb140_support' resolved to" in n and "ancestor holding" in n for n in notes), notes
    assert any("package 'ur_description' resolved to" in n and "folder of that name" in n for n in notes), notes
    assert any("package:///" in n for n in notes), notes
    # Each folder is named relative to the model's folder: a record restored elsewhere names no build path.
    resolved = [n.split(" resolved to ", 1)[1] for n in notes if " resolved to " in n]
    assert resolved and not any(str(tmp_path) in r for r in resolved), resolved
    assert any(r.startswith(".. (") for r in resolved), resolved
    assert record is None  # the CLI writes no record; `doit convert` does (test_notes_are_recorded)


def test_missing_files_fail_by_default_and_allow_missing_warns_once(tmp_path, capsys):
    from pxr import Usd, UsdGeom

    model = _write(tmp_path / "robot" / "r.urdf", _robot(["a.stl", "gone.stl", "package://nowhere/x.stl"]))
    _write(tmp_path / "robot" / "a.stl", STL)
    status, err, _ = _convert(model, tmp_path / "out", capsys)
    assert status == 1
    assert err == [f"usdforge: error: {model}:2: <mesh filename=\"gone.stl\">: mesh file {model.parent / 'gone.stl'} "
                   "not found", err[1]], err
    assert err[1].startswith(f"usdforge: error: {model}:2: <mesh filename=\"package://nowhere/x.stl\">: mesh "
                             "'package://nowhere/x.stl' is missing: ROS package 'nowhere' not found"), err
    assert not (tmp_path / "out").exists()
    status, err, out = _convert(model, tmp_path / "out", capsys, "--allow-missing")
    assert status == 0, err
    warned = [line for line in err if line.startswith("usdforge: warning:") and "placeholder mass" not in line]
    assert warned == [f"usdforge: warning: {model}: 2 referenced file(s) missing; converted without them "
                      "(allow_missing_files; the conversion record lists each)"], err
    stage = Usd.Stage.Open(out.strip())
    assert sum(1 for prim in stage.Traverse(Usd.TraverseInstanceProxies()) if prim.IsA(UsdGeom.Mesh)) == 1


def test_limits_read_leniently_with_a_warning_naming_the_fix(tmp_path, capsys):
    from pxr import Usd, UsdPhysics

    model = _write(tmp_path / "r.urdf", """<robot name="r">
  <link name="a"/><link name="b"/><link name="c"/>
  <joint name="j" type="revolute"><parent link="a"/><child link="b"/>
    <limit lower="1" upper="-1" effort="-1.5" velocity="-2"/></joint>
  <joint name="k" type="prismatic"><parent link="b"/><child link="c"/>
    <limit lower="0.5" upper="0.1" effort="3" velocity="1"/></joint>
</robot>
""")
    status, err, out = _convert(model, tmp_path / "out", capsys)
    assert status == 0, err
    text = "\n".join(err)
    assert 'negative effort limit -1.5 read as its magnitude 1.5 (fix: effort="1.5")' in text
    assert 'negative velocity limit -2.0 read as its magnitude 2.0' in text
    assert 'lower limit 1 is above upper limit -1: swapped' in text and 'fix: lower="-1" upper="1"' in text
    stage = Usd.Stage.Open(out.strip())
    joints = {p.GetName(): p for p in stage.Traverse() if p.IsA(UsdPhysics.Joint)}
    revolute = UsdPhysics.RevoluteJoint(joints["j"])
    assert revolute.GetLowerLimitAttr().Get() < 0 < revolute.GetUpperLimitAttr().Get()
    prismatic = UsdPhysics.PrismaticJoint(joints["k"])
    assert (prismatic.GetLowerLimitAttr().Get(), prismatic.GetUpperLimitAttr().Get()) == pytest.approx((0.1, 0.5))
    drive = UsdPhysics.DriveAPI(joints["j"], "angular")
    assert drive.GetMaxForceAttr().Get() == pytest.approx(1.5)


def test_a_material_defined_in_one_visual_is_usable_by_name_everywhere(tmp_path, capsys):
    from pxr import Usd, UsdShade

    model = _write(tmp_path / "r.urdf", """<robot name="r">
  <link name="base"><visual><geometry><box size="1 1 1"/></geometry>
    <material name="orange"><color rgba="1 0.5 0 1"/></material></visual></link>
  <link name="arm"><visual><geometry><box size="1 1 1"/></geometry><material name="orange"/></visual></link>
  <link name="tip"><visual><geometry><box size="1 1 1"/></geometry><material name="nowhere"/></visual></link>
  <joint name="j" type="fixed"><parent link="base"/><child link="arm"/></joint>
  <joint name="k" type="fixed"><parent link="arm"/><child link="tip"/></joint>
</robot>
""")
    status, err, out = _convert(model, tmp_path / "out", capsys, "--config", str(_write(
        tmp_path / "cfg.toml", "merge_fixed_joints = false\n")))
    assert status == 0, err
    assert not any("'orange' is not defined" in line for line in err), err
    assert any("material 'nowhere' is not defined" in line for line in err), "a truly undefined name warns"
    stage = Usd.Stage.Open(out.strip())
    bound = {}
    for prim in stage.Traverse():
        material = UsdShade.MaterialBindingAPI(prim).GetDirectBinding().GetMaterial()
        if material and prim.GetPath().pathString.count("/") > 2:
            link = next(name for name in ("base", "arm", "tip") if f"/{name}/" in prim.GetPath().pathString + "/")
            bound[link] = material.GetPrim().GetName()
    assert bound.get("base") and bound.get("arm") == bound["base"], bound


def test_kept_data_is_a_note_shown_with_v_and_recorded(tmp_path, capsys):
    model = _write(tmp_path / "r.urdf", """<robot name="r">
  <link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j" type="revolute"><parent link="a"/><child link="b"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
    <safety_controller k_velocity="1"/></joint>
  <transmission name="t"><joint name="j"/></transmission>
  <gazebo reference="a"><mu1>1</mu1></gazebo>
</robot>
""")
    status, err, _ = _convert(model, tmp_path / "out", capsys)
    assert status == 0 and err == [], err
    status, err, _ = _convert(model, tmp_path / "out2", capsys, "-v")
    notes = [line for line in err if line.startswith("usdforge: note:")]
    assert len(notes) == 3 and all(("<transmission>" in n or "<gazebo>" in n or "<safety_controller>" in n)
                                   for n in notes), err
    from usdforge.rules.conversion_warnings import ConversionNote, ConversionWarning
    from usdforge.rules.urdf.read import read_urdf

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error", ConversionWarning)  # a note is not a warning: no error
        warnings.simplefilter("always", ConversionNote)
        read_urdf(model)
    assert len(caught) == 3 and all(isinstance(w.message, ConversionNote) for w in caught)


def test_notes_are_recorded_by_doit_convert(tmp_path):
    import subprocess
    import sys

    model = _write(tmp_path / "robots" / "r.urdf", """<robot name="r">
  <link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <gazebo reference="a"><mu1>1</mu1></gazebo>
</robot>
""")
    _write(tmp_path / "library.toml", f'[[assets]]\nname = "r"\nsource = "{model}"\n')
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "doit", "-f", str(root / "dodo.py"), "-d", str(tmp_path), "convert",
                           f"library={tmp_path / 'library.toml'}", "cache=off"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "note" not in done.stderr and "gazebo" not in done.stderr, done.stderr
    record = json.loads((tmp_path / "build" / "usd" / "r" / "r.convert.json").read_text())
    assert record["warnings"] == [] and any("<gazebo>" in n for n in record["notes"]), record
    model.write_text(model.read_text() + "<!-- edited: converted again -->\n")
    done = subprocess.run([sys.executable, "-m", "doit", "-f", str(root / "dodo.py"), "-d", str(tmp_path), "convert",
                           f"library={tmp_path / 'library.toml'}", "cache=off", "verbose=1"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("usdforge: note: ") and "<gazebo>" in line for line in done.stderr.splitlines()), \
        done.stderr


# ---- $(optenv) and unused settings ---------------------------------------------------------------------

OPTENV = """<?xml version="1.0"?>
<robot name="jackal" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <link name="base"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <xacro:if value="$(optenv JACKAL_FRONT_ACCESSORY_FENDER 0)">
    <link name="fender"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
    <joint name="f" type="fixed"><parent link="base"/><child link="fender"/></joint>
  </xacro:if>
</robot>
"""


def test_optenv_reads_the_entry_settings_never_the_environment(tmp_path, capsys, monkeypatch):
    from usdforge.rules.urdf.xacro import expand_xacro

    model = _write(tmp_path / "jackal.urdf.xacro", OPTENV)
    monkeypatch.setenv("JACKAL_FRONT_ACCESSORY_FENDER", "1")  # never read
    assert b"fender" not in expand_xacro(model).urdf
    expansion = expand_xacro(model, env={"JACKAL_FRONT_ACCESSORY_FENDER": "1"})
    assert b'name="fender"' in expansion.urdf and not expansion.warnings and not expansion.unused
    status, err, _ = _convert(model, tmp_path / "out", capsys, "--xacro-env", "JACKAL_FRONT_ACCESSORY_FENDER=1",
                              "--xacro-arg", "colour=red", "--xacro-env", "JACKAL_TYPO=1")
    assert status == 0, err
    text = "\n".join(err)
    assert "--xacro-arg colour: the expansion never reads colour" in text
    assert "--xacro-env JACKAL_TYPO: the expansion never reads JACKAL_TYPO" in text
    assert "JACKAL_FRONT_ACCESSORY_FENDER" not in text


def test_optenv_values_are_part_of_the_digest_only_when_set():
    from usdforge.schemas import UrdfConverterCfg
    from usdforge.schemas.digest import config_digest

    plain = UrdfConverterCfg(asset_path="r.urdf.xacro")
    assert config_digest(plain) == config_digest(UrdfConverterCfg(asset_path="r.urdf.xacro", tree_root="/x"))
    assert config_digest(plain) != config_digest(UrdfConverterCfg(asset_path="r.urdf.xacro", xacro_env={"A": "1"}))
    assert config_digest(plain) != config_digest(UrdfConverterCfg(asset_path="r.urdf.xacro", allow_missing_files=True))


def test_a_ros_workspace_src_folder_bounds_the_search(tmp_path):
    workspace = tmp_path / "ws"
    (workspace / "install").mkdir(parents=True)  # colcon's marks beside src/
    _write(workspace / "other" / "meshes" / "a.stl", STL)  # in the workspace, outside src/
    model = _write(workspace / "src" / "robot" / "urdf" / "r.urdf", "")
    _write(workspace / "src" / "robot_support" / "package.xml", "<package><name>robot_support</name></package>")
    _write(workspace / "src" / "robot_support" / "meshes" / "b.stl", STL)
    assert paths.tree_boundary(str(model.parent)) == str(workspace / "src")
    assert _resolve("package://robot_support/meshes/b.stl", model).rule == "folder"
    with pytest.raises(paths.UnresolvedUri):
        _resolve("package://other/meshes/a.stl", model)


def test_the_dependency_scan_and_the_conversion_resolve_alike(tmp_path):
    """A mesh found by the walk-up rule is a dependency (editing it re-converts); a package outside the
    tree is none."""
    from usdforge.pipeline.references import referenced_files

    tree = _tree(tmp_path)
    mesh = _write(tree / "abb_irb140" / "meshes" / "l0.stl", STL)
    model = _write(tree / "abb_irb140" / "urdf" / "r.urdf", _robot([
        "package://abb_irb140_support/meshes/l0.stl", "package://outsider/meshes/a.stl"]))
    # The walk-up rule tried the model's own folder first: that missing file would win if created, so it is
    # a dependency too (recorded as missing).
    assert referenced_files("urdf", model) == [str(mesh), str(tree / "abb_irb140" / "urdf" / "meshes" / "l0.stl")]


def test_a_manifest_entry_allows_missing_files_and_bounds_packages_by_its_folder(tmp_path):
    from usdforge.pipeline.manifest import entry_cfg, load_library

    manifest = _write(tmp_path / "library.toml", '[[assets]]\nname = "r"\nsource = "r.urdf.xacro"\n'
                                                 '[assets.cfg]\nallow_missing_files = true\n'
                                                 'xacro_env = { FENDER = "1" }\n')
    library = load_library(manifest)
    cfg = entry_cfg(library, library.assets[0], 0)
    assert cfg.allow_missing_files and cfg.xacro_env == {"FENDER": "1"} and cfg.tree_root == str(tmp_path)


def test_an_allowed_root_holds_packages_too(tmp_path, capsys):
    """--allow-root DIR: DIR, or a child of it called NAME (or declaring NAME), is an explicit root for
    package://NAME and $(find NAME), outside the model's tree."""
    tree = _tree(tmp_path)
    mesh = _write(tmp_path / "ws" / "shared_meshes" / "meshes" / "a.stl", STL)
    _write(tmp_path / "ws" / "shared_meshes" / "package.xml", "<package><name>arm_meshes</name></package>")
    model = _write(tree / "robot" / "r.urdf", _robot(["package://arm_meshes/meshes/a.stl"]))
    with pytest.raises(paths.UnresolvedUri):
        _resolve("package://arm_meshes/meshes/a.stl", model)
    found = paths.resolve_package_uri("package://arm_meshes/meshes/a.stl", model.parent, {}, None,
                                      (str(tmp_path / "ws"),))
    assert (found.path, found.rule) == (mesh, "explicit")
    assert paths.find_package("arm_meshes", model.parent, {}, None, (str(tmp_path / "ws"),)) == mesh.parents[1]
    status, err, _ = _convert(model, tmp_path / "out", capsys)
    assert status == 1
    status, err, _ = _convert(model, tmp_path / "out", capsys, "--allow-root", str(tmp_path / "ws"))
    assert status == 0, err
