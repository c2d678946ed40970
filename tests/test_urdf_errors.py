"""Tolerance: recoverable problems convert with a ConversionWarning naming file, line and element;
unrecoverable ones raise ConversionError(file, problem, element, line) and nothing is written."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from usdforge.pipeline import UrdfConverter
from usdforge.rules.conversion_warnings import ConversionNote, ConversionWarning
from usdforge.rules.errors import ConversionError
from usdforge.rules.urdf.convert import convert
from usdforge.schemas import UrdfConverterCfg

LINK = '<link name="{name}"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/>' \
       '</inertial><collision><geometry><box size="1 1 1"/></geometry></collision></link>'


def robot(*body: str, declaration: str = '<?xml version="1.0"?>') -> str:
    return declaration + "\n<robot name=\"r\">\n" + "\n".join(body) + "\n</robot>\n"


def joint(name: str, parent: str, child: str, kind: str = "revolute", extra: str = '<limit lower="-1" upper="1"/>') -> str:
    return f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>{extra}</joint>'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "robot.urdf"
    path.write_text(text)
    return path


def run(tmp_path: Path, text: str, **cfg) -> tuple[list[Path], list[ConversionWarning | ConversionNote]]:
    """Convert; the files written and the warnings and notes issued."""
    path = write(tmp_path, text)
    out = tmp_path / "out"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files = convert(UrdfConverterCfg(asset_path=str(path), usd_dir=str(out), usd_file_name="r.usda", **cfg), out)
    return files, [w.message for w in caught if isinstance(w.message, (ConversionWarning, ConversionNote))]


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


UNRECOVERABLE = {
    "no robot element": ('<?xml version="1.0"?>\n<model name="m"/>\n', "<model", "no <robot> element"),
    "duplicate link": (robot(LINK.format(name="a"), LINK.format(name="a")), None, "link name 'a' is used twice"),
    "joint to unknown link": (robot(LINK.format(name="a"), joint("j", "a", "ghost")), 'child link="ghost"',
                              "child link 'ghost' is not a link"),
    "cycle": (robot(LINK.format(name="a"), LINK.format(name="b"), joint("j1", "a", "b"), joint("j2", "b", "a")),
              None, "cycle"),
    "two parents": (robot(LINK.format(name="a"), LINK.format(name="b"), LINK.format(name="c"),
                          joint("j1", "a", "c"), joint("j2", "b", "c")), 'name="j2"', "child of two joints"),
    "bad number": (robot(LINK.format(name="a"), LINK.format(name="b"),
                         joint("j", "a", "b", extra='<limit lower="-1" upper="one"/>')), "upper=\"one\"",
                   'upper="one": expected 1 finite number'),
    "zero axis": (robot(LINK.format(name="a"), LINK.format(name="b"),
                        joint("j", "a", "b", extra='<axis xyz="0 0 0"/><limit lower="-1" upper="1"/>')),
                  '<axis xyz="0 0 0"/>', "zero axis"),
    "unknown joint type": (robot(LINK.format(name="a"), LINK.format(name="b"), joint("j", "a", "b", kind="hinge")),
                           'type="hinge"', "joint type 'hinge'"),
    "broken xml": (robot(LINK.format(name="a"), "<link name='b'>"), None, "not well-formed XML"),
}


@pytest.mark.parametrize("case", list(UNRECOVERABLE))
def test_unrecoverable_problem_is_one_conversion_error_naming_file_line_and_element(tmp_path, case):
    text, needle, problem = UNRECOVERABLE[case]
    path = write(tmp_path, text)
    with pytest.raises(ConversionError) as raised:
        run(tmp_path, text)
    error = raised.value
    assert error.file == str(path)
    assert problem in error.problem
    assert error.line is not None
    if needle is not None:
        assert error.line == line_of(text, needle)
    assert "\n" not in str(error) and str(error).startswith(f"{path}:{error.line}: ")


def test_nothing_is_written_when_the_conversion_fails(tmp_path):
    text, _, _ = UNRECOVERABLE["cycle"]
    path = write(tmp_path, text)
    out = tmp_path / "out"
    with pytest.raises(ConversionError):
        UrdfConverter(UrdfConverterCfg(asset_path=str(path), usd_dir=str(out)))
    assert not out.exists() or not any(out.rglob("*"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp")]


def test_misspelled_xml_declaration_is_a_warning(tmp_path):
    text = robot(LINK.format(name="a"), declaration='<?xml versio="1.0"?>')
    files, caught = run(tmp_path, text)
    assert files
    assert any(w.line == 1 and "XML declaration" in w.problem for w in caught)


def test_unknown_tag_missing_mesh_and_nameless_material_are_warnings_naming_their_line(tmp_path):
    text = robot(
        '<material><color rgba="1 0 0 1"/></material>',
        '<link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/>'
        '</inertial>',
        '<visual><geometry><mesh filename="meshes/missing.stl"/></geometry></visual>',
        '<sensor_data rate="10"/>',
        "</link>")
    files, caught = run(tmp_path, text, allow_missing_files=True)
    assert files
    by_problem = {w.problem: w for w in caught}
    missing = next(w for w in caught if "missing.stl" in w.problem)
    assert missing.line == line_of(text, "missing.stl") and missing.element == "<mesh>"
    nameless = next(w for w in caught if "without a name" in w.problem)
    assert nameless.line == line_of(text, "<material>") and nameless.file == str(tmp_path / "robot.urdf")
    unknown = next(w for w in caught if "<sensor_data>" in w.problem)
    assert unknown.line == line_of(text, "sensor_data") and "custom data urdf:sensor_data" in unknown.problem
    assert by_problem


def test_warning_text_is_file_line_element_problem(tmp_path):
    text = robot(LINK.format(name="a"), '<gazebo reference="a"><mu1>0.2</mu1></gazebo>')
    _, caught = run(tmp_path, text)
    message = next(str(w) for w in caught if "gazebo" in str(w))
    assert message.startswith(f"{tmp_path / 'robot.urdf'}:{line_of(text, '<gazebo')}: <gazebo>: ")


def test_revolute_joint_without_limit_is_unlimited_with_a_warning(tmp_path):
    text = robot(LINK.format(name="a"), LINK.format(name="b"), joint("j", "a", "b", extra=""))
    _, caught = run(tmp_path, text)
    assert any("without <limit>" in w.problem and w.line == line_of(text, 'name="j"') for w in caught)


def test_unknown_root_link_name_is_an_error(tmp_path):
    path = write(tmp_path, robot(LINK.format(name="a")))
    with pytest.raises(ConversionError, match="root_link_name 'nope'"):
        convert(UrdfConverterCfg(asset_path=str(path), root_link_name="nope"), tmp_path / "out")


def test_overlapping_drive_patterns_are_an_error_and_unused_ones_a_warning(tmp_path):
    path = write(tmp_path, robot(LINK.format(name="a"), LINK.format(name="b"), joint("elbow", "a", "b")))
    drive = UrdfConverterCfg.JointDriveCfg(gains=UrdfConverterCfg.JointDriveCfg.PDGainsCfg(
        stiffness={"el.*": 1.0, ".*bow": 2.0}))
    with pytest.raises(ConversionError, match="matches several patterns"):
        convert(UrdfConverterCfg(asset_path=str(path), joint_drive=drive), tmp_path / "out")
    drive = UrdfConverterCfg.JointDriveCfg(gains=UrdfConverterCfg.JointDriveCfg.PDGainsCfg(
        stiffness={"elbow": 1.0, "wrist": 2.0}))
    with pytest.warns(ConversionWarning, match="'wrist' match no movable joint"):
        convert(UrdfConverterCfg(asset_path=str(path), joint_drive=drive), tmp_path / "out2")


def test_all_zero_inertia_with_mass_is_replaced_by_the_shapes_inertia(tmp_path):
    text = robot('<link name="a"><inertial><mass value="2"/><inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" '
                 'iyz="0"/></inertial><collision><geometry><box size="1 1 1"/></geometry></collision></link>')
    files, caught = run(tmp_path, text)
    assert any("all zeros" in w.problem and w.line == line_of(text, "<inertia") for w in caught)
    from pxr import Usd, UsdPhysics

    stage = Usd.Stage.Open(str(tmp_path / "out" / "r.usda"))
    mass = UsdPhysics.MassAPI(stage.GetPrimAtPath("/r/a"))
    assert list(mass.GetDiagonalInertiaAttr().Get()) == pytest.approx([2.0 * 2 / 12] * 3)
