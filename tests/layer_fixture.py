"""Small generated robots that exercise every converter-cfg field (tests/test_layer_fields.py, bench/rebuild.py):
a URDF (xacro) and an MJCF model, each with a mesh, a cylinder collider, a fixed joint, a mimic/coupled
joint, a massless link, a bad inertia, a material and a keyframe."""

from __future__ import annotations

from pathlib import Path

_OBJ = """o part
v 0 0 0
v 0.1 0 0
v 0 0.1 0
v 0 0 0.1
f 1 3 2
f 1 2 4
f 1 4 3
f 2 3 4
"""

_XACRO = """<?xml version="1.0"?>
<robot name="layered" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:arg name="arm_length" default="0.3"/>
  <xacro:property name="fender" value="$(optenv LAYERED_FENDER 0.05)"/>
  <material name="red"><color rgba="0.8 0.1 0.1 1"/></material>
  <link name="base">
    <inertial><mass value="2"/><inertia ixx="0.001" iyy="0.001" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><box size="0.2 0.2 ${fender}"/></geometry><material name="red"/></visual>
    <collision><geometry><box size="0.2 0.2 0.1"/></geometry></collision>
  </link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="2"/>
    <dynamics damping="0.5"/></joint>
  <link name="arm">
    <inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><mesh filename="part.obj"/></geometry></visual>
    <collision><geometry><cylinder radius="0.02" length="$(arg arm_length)"/></geometry></collision>
    <collision><origin xyz="0 0 0.2"/><geometry><mesh filename="part.obj"/></geometry></collision>
  </link>
  <joint name="wrist_mount" type="fixed"><parent link="arm"/><child link="hand"/><origin xyz="0 0 0.3"/></joint>
  <link name="hand">
    <inertial><mass value="0.2"/><inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><geometry><sphere radius="0.03"/></geometry></collision>
  </link>
  <joint name="finger_a" type="prismatic"><parent link="hand"/><child link="finger"/>
    <axis xyz="1 0 0"/><limit lower="0" upper="0.04" effort="5" velocity="1"/></joint>
  <link name="finger">
    <visual><geometry><box size="0.01 0.01 0.04"/></geometry></visual>
    <collision><geometry><box size="0.01 0.01 0.04"/></geometry></collision>
  </link>
  <link name="camera"/>
  <joint name="antenna_hinge" type="continuous"><parent link="base"/><child link="antenna"/><axis xyz="0 1 0"/></joint>
  <link name="antenna">
    <inertial><mass value="0.1"/><inertia ixx="0.0001" iyy="0.0001" izz="0.0001" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><cylinder radius="0.005" length="0.2"/></geometry></visual>
  </link>
  <joint name="camera_mount" type="fixed"><parent link="base"/><child link="camera"/><origin xyz="0.1 0 0"/></joint>
  <joint name="finger_b" type="prismatic"><parent link="hand"/><child link="finger2"/>
    <axis xyz="-1 0 0"/><limit lower="0" upper="0.04" effort="5" velocity="1"/>
    <mimic joint="finger_a" multiplier="1" offset="0"/></joint>
  <link name="finger2">
    <inertial><mass value="0.05"/><inertia ixx="0.0001" iyy="0.0001" izz="0.0001" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><box size="0.01 0.01 0.04"/></geometry></visual>
    <collision><geometry><box size="0.01 0.01 0.04"/></geometry></collision>
  </link>
</robot>
"""

_MJCF = """<mujoco model="layered">
  <compiler autolimits="true"/>
  <asset>
    <mesh name="part" file="part.obj"/>
    <material name="blue" rgba="0.1 0.2 0.8 1"/>
  </asset>
  <worldbody>
    <body name="base" pos="0 0 0.5">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.05" mass="2" material="blue"/>
      <body name="arm" pos="0 0 0.1">
        <joint name="shoulder" type="hinge" axis="0 0 1" range="-1 1" damping="0.5"/>
        <geom type="cylinder" size="0.02 0.15" mass="1"/>
        <geom type="mesh" mesh="part" pos="0 0 0.2" mass="0.1"/>
        <geom type="mesh" mesh="part" pos="0 0 0.3" contype="0" conaffinity="0" group="1" mass="0"/>
        <geom type="box" size="0.02 0.02 0.02" pos="0 0.05 0.3" contype="0" conaffinity="0" group="1" mass="0"/>
        <body name="hand" pos="0 0 0.3">
          <joint name="finger_a" type="slide" axis="1 0 0" range="0 0.04"/>
          <geom type="sphere" size="0.03"/>
          <body name="tip" pos="0 0 0.05">
            <joint name="finger_b" type="slide" axis="-1 0 0" range="0 0.04"/>
            <geom type="box" size="0.01 0.01 0.02"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <equality><joint joint1="finger_b" joint2="finger_a"/></equality>
  <actuator>
    <position name="shoulder" joint="shoulder" kp="50" kv="2"/>
    <motor name="finger" joint="finger_a" gear="1"/>
  </actuator>
  <keyframe><key name="bent" qpos="0 0 0.5 1 0 0 0 0.5 0.02 0.01"/></keyframe>
</mujoco>
"""


def write_fixtures(folder: Path) -> dict[str, Path]:
    """Write the fixtures into ``folder``; return {"urdf": the xacro, "mjcf": the MJCF file}."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part.obj").write_text(_OBJ)
    (folder / "layered.urdf.xacro").write_text(_XACRO)
    (folder / "layered.xml").write_text(_MJCF)
    return {"urdf": folder / "layered.urdf.xacro", "mjcf": folder / "layered.xml"}


def mutations(kind: str, folder: Path) -> dict[str, list]:
    """Field → other valid values of every cfg field of ``kind``'s converter (the fixtures' names),
    ``folder`` being the fixtures' folder. Every attrs field of the cfg class is a key (a test checks)."""
    from usdforge.schemas.urdf_cfg import JointDriveCfg, NaturalFrequencyGainsCfg, PDGainsCfg

    common = {"make_instanceable": [False], "allowed_roots": [(str(folder / "extra"),)],
              "force_usd_conversion": [True], "asset_path": [], "usd_dir": [], "usd_file_name": []}
    if kind == "urdf":
        return {**common, "fix_base": [True], "root_link_name": ["hand"], "link_density": [500.0],
                "balance_inertia": [True], "merge_fixed_joints": [False],
                "convert_mimic_joints_to_normal_joints": [True],
                "joint_drive": [None, JointDriveCfg(drive_type="acceleration"), JointDriveCfg(target_type="velocity"),
                                JointDriveCfg(gains=PDGainsCfg(stiffness=1234.0, damping=56.0)),
                                JointDriveCfg(gains=NaturalFrequencyGainsCfg(natural_frequency=10.0))],
                "collision_from_visuals": [True], "collision_type": ["Bounding Cube"], "self_collision": [True],
                "replace_cylinders_with_capsules": [True], "merge_mesh": [True],
                "ros_package_paths": [[{"name": "extra", "path": str(folder / "extra")}]],
                "xacro_args": [{"arm_length": "0.4"}], "xacro_env": [{"LAYERED_FENDER": "0.07"}],
                "allow_missing_files": [True], "tree_root": [str(folder)], "robot_type": ["Manipulator"],
                "run_asset_transformer": [False], "articulation_cfg": [False]}
    return {**common, "merge_mesh": [True], "collision_from_visuals": [True], "collision_type": ["Bounding Cube"],
            "self_collision": [True], "import_physics_scene": [True], "fix_base": [True], "link_density": [500.0],
            "robot_type": ["Manipulator"], "override_gain_type": ["affine"], "override_bias_type": ["affine"],
            "override_gain_prm": [(1234.0,)], "override_bias_prm": [(0.0, -1234.0, -5.0)],
            "run_asset_transformer": [False], "articulation_cfg": [False], "articulation_cfg_keyframe": ["bent"]}
