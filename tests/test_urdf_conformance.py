"""The 44 conformance URDFs (newton-physics/urdf-usd-converter's test data) convert; each USD passes the
UsdPhysics validators and matches its URDF (masses, joints, limits, FK at 20 configurations); and the
feature each file exercises comes out as docs/usd_layout.md says."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pxr import Gf, UsdGeom, UsdPhysics, UsdShade

from usdforge.rules.verify.articulation import articulation_problems
from usdforge.rules.verify.urdf import verify_urdf
from test_urdf_support import (CONFORMANCE, applied_schemas, conformance_files, conformance_packages, convert_urdf,
                               joints, mesh_prims, open_stage, physics_validation_errors, prims_by_source_name)


def converted(name: str, **cfg):
    path = CONFORMANCE / name
    return convert_urdf(path, conformance_packages(path), **cfg)


def test_all_44_fixtures_are_there():
    assert len(conformance_files()) == 44


@pytest.mark.parametrize("urdf", conformance_files(), ids=lambda p: p.stem)
def test_fixture_converts_validates_and_matches_urdf(urdf):
    result = convert_urdf(urdf, conformance_packages(urdf))
    assert result.usd.is_file()
    assert physics_validation_errors(result.usd) == []
    assert articulation_problems(open_stage(result.usd)) == []
    report = verify_urdf(urdf, result.usd, conformance_packages(urdf), configurations=20, seed=3)
    assert report.ok, str(report)


def test_world_link_on_a_fixed_joint_fixes_the_base():
    stage = open_stage(converted("link_first_ghost_link_fixed.urdf").usd)
    named = prims_by_source_name(stage)
    assert not named["BaseLink"].HasAPI(UsdPhysics.RigidBodyAPI)
    fixed = UsdPhysics.FixedJoint(joints(stage)["joint1"])
    # Anchored to the robot's Xform, which carries the API of this fixed base (issue 29).
    assert fixed.GetBody0Rel().GetTargets() == [stage.GetDefaultPrim().GetPath()]
    assert fixed.GetBody1Rel().GetTargets() == [named["link1"].GetPath()]
    assert stage.GetDefaultPrim().HasAPI(UsdPhysics.ArticulationRootAPI)
    # link_box was merged into link1 and is its frame, 0.8 m up.
    box = named["link_box"]
    assert box.GetParent() == named["link1"]
    assert np.allclose(UsdGeom.Xformable(box).ComputeLocalToWorldTransform(0).ExtractTranslation(), (0, 0, 1.8))


def test_world_link_on_a_floating_joint_leaves_the_base_free_where_the_joint_puts_it():
    stage = open_stage(converted("link_first_ghost_link_floating.urdf").usd)
    named = prims_by_source_name(stage)
    assert "joint1" not in joints(stage)
    assert not any(UsdPhysics.Joint(p).GetBody1Rel().GetTargets() == [named["link1"].GetPath()]
                   for p in joints(stage).values())
    position = UsdGeom.Xformable(named["link1"]).ComputeLocalToWorldTransform(0).ExtractTranslation()
    assert np.allclose(position, (0, 0, 1))


def test_ghost_link_between_bodies_is_a_frame_and_the_joint_is_reparented():
    stage = open_stage(converted("link_ghost_link_children.urdf").usd)
    named = prims_by_source_name(stage)
    assert named["ghost_link"].GetParent() == named["BaseLink"]
    joint = UsdPhysics.RevoluteJoint(joints(stage)["joint2"])
    assert joint.GetBody0Rel().GetTargets() == [named["BaseLink"].GetPath()]
    assert np.allclose(joint.GetLocalPos0Attr().Get(), (0.4, 0, 0))


def test_ghost_chains_keep_every_link_as_a_frame_with_merge_fixed_joints_off():
    result = converted("link_skip_ghost_link_chain_branch.urdf", merge_fixed_joints=False)
    stage = open_stage(result.usd)
    named = prims_by_source_name(stage)
    for ghost in ("ghost_link", "ghost_link_2", "ghost_link_3", "ghost_link_4", "ghost_link_5"):
        assert not named[ghost].HasAPI(UsdPhysics.RigidBodyAPI)
        assert named[ghost].GetParent() == named["BaseLink"]
    assert verify_urdf(CONFORMANCE / "link_skip_ghost_link_chain_branch.urdf", result.usd).ok


def test_planar_joints_lock_the_normal_translation_and_the_tilting_rotations():
    stage = open_stage(converted("fixed_planar_joints.urdf").usd)
    prim = joints(stage)["joint_planar_axis_tilt"]
    assert prim.GetTypeName() == "PhysicsJoint"
    locked = sorted(s.split(":")[1] for s in applied_schemas(prim) if s.startswith("PhysicsLimitAPI:"))
    assert len(locked) == 3 and sum(1 for s in locked if s.startswith("trans")) == 1
    for dof in locked:
        limit = UsdPhysics.LimitAPI(prim, dof)
        assert limit.GetLowAttr().Get() > limit.GetHighAttr().Get()
    # The locked translation axis of the joint frame is the URDF plane normal (0.2, 0.3, 1), normalised.
    axis = "XYZ".index(next(s for s in locked if s.startswith("trans"))[-1])
    rotation = Gf.Matrix3d(Gf.Rotation(UsdPhysics.Joint(prim).GetLocalRot1Attr().Get())).GetTranspose()
    column = np.array(rotation)[:, axis]
    assert np.allclose(column, np.array([0.2, 0.3, 1.0]) / np.linalg.norm([0.2, 0.3, 1.0]), atol=1e-6)


def test_floating_joint_between_links_is_a_free_d6_joint():
    stage = open_stage(converted("fixed_floating_joints.urdf").usd)
    prim = joints(stage)["joint_arm_1"]
    assert prim.GetTypeName() == "PhysicsJoint"
    assert not [s for s in applied_schemas(prim) if s.startswith("PhysicsLimitAPI")]


def test_mimic_chain_and_offsets():
    stage = open_stage(converted("mimic_joint.urdf").usd)
    named = joints(stage)
    follower = named["jointB"]
    assert follower.GetAttribute("usdforge:mimic:multiplier").Get() == 2.0
    assert follower.GetAttribute("usdforge:mimic:offset").Get() == 0.5
    # Newton's offset is in the follower's USD unit (degrees), PhysX's in radians with the opposite sign.
    assert follower.GetAttribute("newton:mimicCoef0").Get() == pytest.approx(math.degrees(0.5), rel=1e-6)
    axis = next(s for s in applied_schemas(follower) if s.startswith("PhysxMimicJointAPI:")).split(":")[1]
    assert follower.GetAttribute(f"physxMimicJoint:{axis}:offset").Get() == pytest.approx(-0.5)
    assert named["jointD"].GetAttribute("usdforge:mimic:offset").Get() == 0.25


def test_mimic_of_a_fixed_joint_is_dropped_with_a_warning():
    result = converted("link_skip_ghost_link_with_mimic.urdf")
    stage = open_stage(result.usd)
    follower = joints(stage)["jointB"]
    assert not follower.GetRelationship("usdforge:mimic:joint")
    assert follower.GetAttribute("urdf:mimic:joint").Get() == "jointA"
    assert any("<mimic> dropped" in w and "jointA" in w for w in result.warnings)


def test_convert_mimic_joints_to_normal_joints_drops_the_couplings():
    result = converted("mimic_joint.urdf", convert_mimic_joints_to_normal_joints=True)
    stage = open_stage(result.usd)
    for prim in joints(stage).values():
        assert not prim.GetRelationship("usdforge:mimic:joint")
        assert not [s for s in applied_schemas(prim) if "Mimic" in s]
    assert joints(stage)["jointB"].GetAttribute("urdf:mimic:multiplier").Get() == 2.0
    # Kinematics still match when the follower is driven to the coupled value; the coupling itself is gone.
    assert verify_urdf(CONFORMANCE / "mimic_joint.urdf", result.usd, expect_mimic=False).ok
    report = verify_urdf(CONFORMANCE / "mimic_joint.urdf", result.usd)
    assert any("mimic of 'jointA' is not authored" in p for p in report.problems)


def test_unknown_elements_attributes_transmissions_and_gazebo_become_custom_data():
    result = converted("undefined.urdf")
    stage = open_stage(result.usd)
    named = prims_by_source_name(stage)
    root = stage.GetDefaultPrim()
    assert "trans1" in root.GetAttribute("urdf:transmission:trans1").Get()
    assert "<static>true</static>" in root.GetAttribute("urdf:gazebo:robot_0").Get()
    link = named["link_box"]
    custom = link.GetAttribute("urdf:custom").Get()
    assert "日本語の文字列" in custom and "data3" in custom  # both <custom> blocks, text intact
    assert "joint_box" not in joints(stage)  # a fixed joint: merged, link_box2 is a frame of link_box
    assert named["link_box2"].GetParent() == link
    collision = link.GetChild("collisions").GetChild("collision_box")
    assert "custom collision data" in collision.GetAttribute("urdf:collision_data").Get()
    assert any("unknown element <custom>" in w for w in result.warnings)
    assert any("custom_attr" in w for w in result.warnings)


def test_calibration_and_safety_controller_are_custom_data_on_the_joint():
    result = converted("undefined.urdf", merge_fixed_joints=False)
    stage = open_stage(result.usd)
    joint = joints(stage)["joint_box"]
    assert joint.GetAttribute("urdf:calibration:rising").Get() == 0.3
    assert joint.GetAttribute("urdf:safety_controller:k_velocity").Get() == 10.0
    assert joint.GetAttribute("urdf:attributes:custom_attr").Get() == "joint"


def test_names_that_are_not_identifiers_are_sanitised_and_kept():
    stage = open_stage(converted("test_displayname.urdf").usd)
    named = prims_by_source_name(stage)
    assert stage.GetDefaultPrim().GetName() == "test_displayname"
    assert named["link-box"].GetName() == "link_box"
    assert named["link-box2"].GetName() == "link_box2" and named["link-box2"].GetParent() == named["link-box"]
    assert stage.GetPrimAtPath("/test_displayname/Looks/material_red")


def test_unsupported_and_unreadable_meshes_are_warnings_naming_the_line():
    result = converted("meshes.urdf")
    line = next(i for i, text in enumerate((CONFORMANCE / "meshes.urdf").read_text().splitlines(), 1)
                if "box.dxf" in text)
    assert any(f"meshes.urdf:{line}: <mesh>:" in w and "box.dxf" in w for w in result.warnings), result.warnings


def test_centimetre_dae_is_scaled_to_metres():
    stage = open_stage(converted("meshes.urdf").usd)
    body = prims_by_source_name(stage)["link_mesh_dae_unit_cm"].GetParent()  # merged: a frame of its body
    visual = next(p for p in body.GetChild("visuals").GetChildren()
                  if p.GetAttribute("usdforge:sourceLink").Get() == "link_mesh_dae_unit_cm")
    size = UsdGeom.BBoxCache(0, [UsdGeom.Tokens.default_]).ComputeLocalBound(visual).ComputeAlignedRange().GetSize()
    # Vertices ±100 units, a node scale of 0.5, 0.01 m per unit: a 1 m cube; then the URDF's scale 0.8.
    assert np.allclose(size, (0.8, 0.8, 0.8), rtol=1e-5)


def test_inertia_is_rotated_into_the_link_frame_and_decomposed():
    stage = open_stage(converted("inertia.urdf", merge_fixed_joints=False).usd)
    prim = prims_by_source_name(stage)["link_box7"]
    mass = UsdPhysics.MassAPI(prim)
    moments = np.array(mass.GetDiagonalInertiaAttr().Get())
    q = mass.GetPrincipalAxesAttr().Get()
    axes = np.array(Gf.Matrix3d(Gf.Rotation(Gf.Quatd(q.GetReal(), Gf.Vec3d(q.GetImaginary())))).GetTranspose())
    tensor = axes @ np.diag(moments) @ axes.T
    r, p, y = 0.3, -0.4, 0.5
    from usdforge.rules.urdf.source import rpy_matrix

    rotation = rpy_matrix((r, p, y))
    urdf = np.array([[2.0, 0.5, 0.25], [0.5, 1.0, -0.1], [0.25, -0.1, 3.0]])
    assert np.allclose(tensor, rotation @ urdf @ rotation.T, atol=1e-5)
    assert np.allclose(mass.GetCenterOfMassAttr().Get(), (0, 0, 0.5))


def test_inertial_without_inertia_uses_the_shapes_and_warns():
    result = converted("inertia_origin_mass_no_inertia.urdf")
    stage = open_stage(result.usd)
    mass = UsdPhysics.MassAPI(prims_by_source_name(stage)["link_origin_mass_only"])
    assert mass.GetMassAttr().Get() == 1.0
    assert np.allclose(mass.GetDiagonalInertiaAttr().Get(), [1.0 * 0.02 / 12] * 3, rtol=1e-5)  # a 0.1 m cube
    assert any("no <inertia>" in w for w in result.warnings)


def test_materials_colours_and_textures():
    stage = open_stage(converted("material_texture.urdf").usd)
    look = stage.GetPrimAtPath("/material_texture/Looks/texture_material")
    texture = UsdShade.Shader(look.GetChild("DiffuseTexture"))
    file = texture.GetInput("file").Get()
    assert file.resolvedPath and file.resolvedPath.endswith(".png")
    visual = prims_by_source_name(stage)["link_sphere"].GetParent()
    assert visual is not None
    red = open_stage(converted("material_color.urdf").usd)
    materials = [UsdShade.Shader(p) for p in red.Traverse() if p.GetName() == "PreviewSurface"]
    colours = {tuple(round(c, 3) for c in m.GetInput("diffuseColor").Get()) for m in materials
               if m.GetInput("diffuseColor").Get() is not None}
    assert colours


def test_ros_packages_resolve_by_their_folders_or_by_walking_up():
    """ros_packages.urdf names test_package/assets/box.stl: no folder of that name, but the model's own
    folder holds assets/box.stl (urdf-usd-converter's rule; rules.urdf.paths)."""
    path = CONFORMANCE / "ros_packages.urdf"
    without = convert_urdf(path, {})
    assert any("package 'test_package' resolved to" in w for w in without.warnings)
    assert mesh_prims(open_stage(without.usd))
    with_packages = convert_urdf(path, conformance_packages(path))
    stage = open_stage(with_packages.usd)
    assert mesh_prims(stage)


def test_file_uris_relative_and_absolute():
    result = converted("external_reference_file.urdf", allow_missing_files=True)
    stage = open_stage(result.usd)
    assert mesh_prims(stage), "file://assets/box.obj is relative to the URDF"
    assert any("/home/user/urdf/assets/grid.png" in w and "not found" in w for w in result.warnings)


def test_visual_and_collision_names_are_kept():
    stage = open_stage(converted("visual_collision_name.urdf").usd)
    body = prims_by_source_name(stage)["link"].GetParent()  # link is merged into RootLink
    visual = body.GetChild("visuals").GetChild("box_name_visual")
    collision = body.GetChild("collisions").GetChild("box_name_collision")
    assert visual.GetAttribute("usdforge:sourceName").Get() == "box_name_visual"
    assert collision.GetAttribute("usdforge:sourceName").Get() == "box_name_collision"
    assert visual.GetAttribute("usdforge:sourceLink").Get() == "link"
