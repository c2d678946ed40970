"""UrdfConverterCfg: Isaac Lab's nested classes, cattrs round trips for its unions (attrs classes, number or
table), TOML's ``false`` for None, and one-line errors naming the field."""

from __future__ import annotations

import attrs
import pytest

from usdforge.pipeline.kinds import cfg_class
from usdforge.pipeline.manifest import LibraryEntry, Library, entry_cfg
from usdforge.schemas import (ConfigError, UrdfConverterCfg, cfg_from_json, cfg_from_toml, cfg_to_dict, cfg_to_json,
                     cfg_to_toml, config_digest, structure_cfg)

Drive = UrdfConverterCfg.JointDriveCfg
PD = Drive.PDGainsCfg
NF = Drive.NaturalFrequencyGainsCfg

CFGS = [
    UrdfConverterCfg(asset_path="robot.urdf"),
    UrdfConverterCfg(asset_path="robot.urdf", joint_drive=None, fix_base=True, root_link_name="base",
                     ros_package_paths=[{"name": "my_robot", "path": "/robots/my_robot"}]),
    UrdfConverterCfg(asset_path="robot.urdf", link_density=1000, collision_type="Convex Decomposition",
                     joint_drive=Drive(drive_type={".*finger.*": "acceleration", ".*": "force"},
                                       target_type={"wheel_.*": "velocity"},
                                       gains=PD(stiffness={"arm_.*": 400, "wheel_.*": 10.0}, damping=2))),
    UrdfConverterCfg(asset_path="robot.urdf", robot_type="Quadruped", run_asset_transformer=False,
                     joint_drive=Drive(gains=NF(natural_frequency={"hip.*": 20.0, "knee.*": 15.0},
                                                damping_ratio={"hip.*": 1.0}))),
    UrdfConverterCfg(asset_path="robot.urdf", joint_drive=Drive(target_type="none", gains=NF(natural_frequency=3))),
]


def test_nested_classes_are_isaac_labs():
    assert UrdfConverterCfg.JointDriveCfg.PDGainsCfg is PD
    assert UrdfConverterCfg.JointDriveCfg.NaturalFrequencyGainsCfg is NF
    assert cfg_class("urdf") is UrdfConverterCfg
    assert "JointDriveCfg" not in attrs.fields_dict(UrdfConverterCfg)


@pytest.mark.parametrize("cfg", CFGS)
def test_round_trips_exactly(cfg):
    assert cfg_from_toml(cfg_to_toml(cfg), UrdfConverterCfg) == cfg
    assert cfg_from_json(cfg_to_json(cfg), UrdfConverterCfg) == cfg
    assert structure_cfg(cfg_to_dict(cfg), UrdfConverterCfg) == cfg
    assert config_digest(cfg_from_toml(cfg_to_toml(cfg), UrdfConverterCfg), "urdf") == config_digest(cfg, "urdf")


def test_none_joint_drive_is_false_in_toml():
    text = cfg_to_toml(CFGS[1])
    assert "joint_drive = false" in text
    assert cfg_from_toml("asset_path = 'r.urdf'\njoint_drive = false\n", UrdfConverterCfg).joint_drive is None


def test_gains_union_is_inferred_without_a_tag_and_ints_become_floats():
    cfg = structure_cfg({"asset_path": "r.urdf", "joint_drive": {"gains": {"natural_frequency": 10}}},
                        UrdfConverterCfg)
    assert cfg.joint_drive.gains == NF(natural_frequency=10.0)
    assert isinstance(cfg.joint_drive.gains.natural_frequency, float)
    cfg = structure_cfg({"asset_path": "r.urdf", "joint_drive": {"gains": {"stiffness": {"a.*": 5}}}}, UrdfConverterCfg)
    assert cfg.joint_drive.gains == PD(stiffness={"a.*": 5.0})
    tagged = structure_cfg({"asset_path": "r.urdf", "joint_drive": {"gains": {"type": "PDGainsCfg"}}}, UrdfConverterCfg)
    assert tagged.joint_drive.gains == PD()
    assert cfg_to_dict(CFGS[3])["joint_drive"]["gains"]["type"] == "NaturalFrequencyGainsCfg"


@pytest.mark.parametrize("table,message", [
    ({"joint_drive": {"gains": {"stiffness": -1}}}, "cfg.joint_drive.gains.stiffness: expected a number >= 0"),
    ({"joint_drive": {"gains": {"natural_frequency": 0}}}, "cfg.joint_drive.gains.natural_frequency: expected a number > 0"),
    ({"joint_drive": {"gains": {"stiffness": {"[": 1.0}}}}, "is not a valid regular expression"),
    ({"joint_drive": {"drive_type": "torque"}}, "cfg.joint_drive.drive_type: expected one of 'acceleration', 'force'"),
    ({"joint_drive": {"target_type": {"a": "effort"}}}, "cfg.joint_drive.target_type: expected one of"),
    ({"joint_drive": {"gains": {"type": "PIDGainsCfg"}}}, "not a valid gains type 'PIDGainsCfg'"),
    ({"collision_type": "convex hull"}, "cfg.collision_type: expected one of 'Convex Hull'"),
    ({"robot_type": "Robot"}, "cfg.robot_type: expected one of 'Default'"),
    ({"link_density": -2.0}, "cfg.link_density: expected a number >= 0"),
    ({"ros_package_paths": [{"name": "a"}]}, "cfg.ros_package_paths: expected {name, path} tables"),
    ({"merge_fixed_joint": True}, "unknown field(s) merge_fixed_joint"),
])
def test_bad_values_are_one_line_naming_the_field(table, message):
    with pytest.raises(ConfigError) as raised:
        structure_cfg({"asset_path": "r.urdf", **table}, UrdfConverterCfg, "cfg")
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_library_entry_packages_become_ros_package_paths(tmp_path):
    library = Library(assets=[LibraryEntry(name="arm", source="robots/arm.urdf", packages={"arm": "robots/arm"},
                                           cfg={"fix_base": True})], root=str(tmp_path))
    cfg = entry_cfg(library, library.assets[0], 0, tmp_path / "build")
    assert isinstance(cfg, UrdfConverterCfg) and cfg.fix_base
    assert cfg.ros_package_paths == [{"name": "arm", "path": str(tmp_path / "robots" / "arm")}]
    assert cfg.usd_file_name == "arm.usda"
