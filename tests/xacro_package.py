"""A small xacro robot package for the xacro tests (no tests here): a top-level xacro with an argument that
picks a YAML config (``xacro.load_yaml``), a macro in an included xacro, a mesh by ``package://``, and files
the expansion does not read (an unused xacro, the other config, a README)."""

from __future__ import annotations

from pathlib import Path

import trimesh

TOP = """<?xml version="1.0"?>
<robot name="bot" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:arg name="variant" default="short"/>
  <xacro:include filename="$(find bot_description)/urdf/arm.xacro"/>
  <xacro:property name="config" value="$(find bot_description)/config/$(arg variant).yaml"/>
  <xacro:property name="dims" value="${xacro.load_yaml(config)}"/>
  <link name="base">
    <inertial>
      <mass value="${dims['base_mass']}"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>
    </inertial>
    <visual><geometry><mesh filename="package://bot_description/meshes/base.stl"/></geometry></visual>
  </link>
  <xacro:arm parent="base" length="${dims['arm_length']}"/>
</robot>
"""

ARM = """<?xml version="1.0"?>
<robot xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:macro name="arm" params="parent length">
    <link name="arm">
      <inertial>
        <origin xyz="0 0 ${length / 2}"/>
        <mass value="1.0"/>
        <inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.001"/>
      </inertial>
      <visual><geometry><box size="0.05 0.05 ${length}"/></geometry></visual>
      <collision><geometry><box size="0.05 0.05 ${length}"/></geometry></collision>
    </link>
    <joint name="shoulder" type="revolute">
      <parent link="${parent}"/>
      <child link="arm"/>
      <origin xyz="0 0 0.1" rpy="0 0 ${pi / 2}"/>
      <axis xyz="0 1 0"/>
      <limit lower="-1.5" upper="1.5" effort="10" velocity="2"/>
    </joint>
  </xacro:macro>
</robot>
"""


#: A xacro that writes (the length of) ``$(cwd)`` into its output: a material's name.
XACRO_CWD = """<?xml version="1.0"?>
<robot name="bot" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:property name="here" value="$(cwd)"/>
  <link name="base">
    <inertial><mass value="1.0"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
    <visual><geometry><box size="0.1 0.1 0.1"/></geometry>
      <material name="m_${len(here)}"><color rgba="0.5 0.5 0.5 1"/></material></visual>
  </link>
</robot>
"""


def write_bot(root: Path) -> Path:
    """Write the package ``bot_description`` under ``root``; return its folder."""
    package = root / "bot_description"
    for folder in ("urdf", "config", "meshes"):
        (package / folder).mkdir(parents=True, exist_ok=True)
    (package / "package.xml").write_text("<package><name>bot_description</name></package>\n")
    (package / "urdf" / "bot.urdf.xacro").write_text(TOP)
    (package / "urdf" / "arm.xacro").write_text(ARM)
    (package / "urdf" / "unused.xacro").write_text(ARM.replace('name="arm"', 'name="other_arm"'))
    (package / "config" / "short.yaml").write_text("base_mass: 2.0\narm_length: 0.3\n")
    (package / "config" / "long.yaml").write_text("base_mass: 2.0\narm_length: 0.6\n")
    (package / "README.txt").write_text("read by nothing\n")
    trimesh.creation.box(extents=[0.2, 0.2, 0.1]).export(package / "meshes" / "base.stl")
    return package
