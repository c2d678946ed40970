"""The MJCF converter's cfg, reference scanning, errors, outputs and the MJCF semantics of the USD it
writes (actuators, equalities, contacts, scene, stacked joints, textures …), fixture by fixture."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import mujoco
import numpy as np
import pytest
from pxr import Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade

from usdforge.pipeline.converters import MjcfConverter
from usdforge.rules.errors import ConversionError
from usdforge.rules.mjcf.references import mjcf_references
from usdforge.rules.outputs import planned_outputs
from usdforge.schemas import ConfigError, MjcfConverterCfg, cfg_from_toml, cfg_to_toml, structure_cfg
from test_mjcf_support import (CORPUS_CFG, UsdKinematics, compiled, conformance_fixtures, converted,
                               corpus_models, physics_errors, source_name)

REPO = Path(__file__).resolve().parents[1]


def fixture(name: str) -> Path:
    return conformance_fixtures()[name]


def stage_of(path: Path, **cfg) -> Usd.Stage:
    return Usd.Stage.Open(str(converted(path, **cfg).usd_path))


def prim_by_source(stage: Usd.Stage, name: str, predicate=lambda prim: True) -> Usd.Prim:
    for prim in Usd.PrimRange.Stage(stage, Usd.TraverseInstanceProxies()):
        if source_name(stage, prim.GetPath()) == name and predicate(prim):
            return prim
    raise AssertionError(f"no prim with usdforge:sourceName {name!r}")


def joint(stage: Usd.Stage, name: str) -> Usd.Prim:
    return prim_by_source(stage, name, lambda prim: prim.IsA(UsdPhysics.Joint))


def applied(prim: Usd.Prim) -> set[str]:
    """Every API schema name on the prim, also the ones usd-core has no definition for (MuJoCo's)."""
    names = set(prim.GetAppliedSchemas())
    for spec in prim.GetPrimStack():
        listop = spec.GetInfo("apiSchemas") if spec.HasInfo("apiSchemas") else None
        if listop is not None:
            names.update(listop.GetAddedOrExplicitItems())
    return names


def write_model(tmp_path: Path, body: str, name: str = "model") -> Path:
    path = tmp_path / f"{name}.xml"
    path.write_text(textwrap.dedent(body))
    return path


# ---- cfg -------------------------------------------------------------------------------------------------

def test_cfg_has_isaac_labs_fields_and_defaults():
    cfg = MjcfConverterCfg(asset_path="robot.xml")
    assert (cfg.merge_mesh, cfg.collision_from_visuals, cfg.collision_type, cfg.self_collision,
            cfg.import_physics_scene, cfg.fix_base, cfg.link_density, cfg.robot_type) == \
        (False, False, "Convex Hull", False, False, False, 0.0, "Default")
    assert (cfg.override_gain_type, cfg.override_bias_type, cfg.override_gain_prm, cfg.override_bias_prm) == \
        (None, None, None, None)
    assert cfg.run_asset_transformer is True and cfg.make_instanceable is True


def test_cfg_round_trips_through_toml_and_rejects_bad_values():
    cfg = MjcfConverterCfg(asset_path="robot.xml", fix_base=True, link_density=500, collision_type="Bounding Cube",
                           override_gain_type="fixed", override_gain_prm=[100, 0, 0],
                           override_bias_prm=[0, -100, -10], robot_type="Humanoid")
    assert cfg_from_toml(cfg_to_toml(cfg), MjcfConverterCfg) == cfg
    assert cfg.override_gain_prm == (100.0, 0.0, 0.0) and cfg.link_density == 500.0
    bad = {"collision_type": "Convex", "override_bias_type": "linear", "link_density": -1,
           "override_gain_prm": list(range(11)), "robot_type": "Robot"}
    for field, value in bad.items():
        with pytest.raises(ConfigError, match=rf"^assets\[0\]\.cfg\.{field}: expected"):
            structure_cfg({"asset_path": "robot.xml", field: value}, MjcfConverterCfg, "assets[0].cfg")


# ---- references ------------------------------------------------------------------------------------------

def test_references_follow_includes_meshdir_and_attached_models(tmp_path):
    tiago = corpus_models()["pal_tiago"]
    references = mjcf_references(tiago)
    assert tiago.parent / "tiago.xml" in references  # <include>
    spec = mujoco.MjSpec.from_file(str(tiago))
    meshes = {(tiago.parent / spec.meshdir / mesh.file).resolve() for mesh in spec.meshes}
    assert meshes <= {path.resolve() for path in references}
    attach = mjcf_references(fixture("attach_scene.xml"))
    assert {path.name for path in attach} == {"attach_model.xml", "box.obj", "grid.png"}
    model = write_model(tmp_path, """
        <mujoco><compiler assetdir="art"/><include file="parts/missing.xml"/>
          <asset><mesh file="gone.stl"/><texture type="cube" fileright="r.png" fileleft="l.png"/></asset>
        </mujoco>""")
    assert set(mjcf_references(model)) == {tmp_path / "parts/missing.xml", tmp_path / "art/gone.stl",
                                           tmp_path / "art/r.png", tmp_path / "art/l.png"}


def test_reference_scanner_does_not_import_pxr():
    code = ("import sys; from usdforge.rules.mjcf.references import mjcf_references; "
            f"mjcf_references({str(corpus_models()['pal_tiago'])!r}); assert 'pxr' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


# ---- errors and outputs ----------------------------------------------------------------------------------

def test_a_model_mujoco_cannot_parse_is_one_error_and_nothing_is_written(tmp_path):
    model = write_model(tmp_path, """
        <mujoco>
          <worldbody>
            <body><geom type="boxx" size="1 1 1"/></body>
          </worldbody>
        </mujoco>""", "broken")
    out = tmp_path / "out"
    with pytest.raises(ConversionError) as error:
        MjcfConverter(MjcfConverterCfg(asset_path=str(model), usd_dir=str(out)))
    assert str(error.value).startswith(f"{model}:4: MuJoCo cannot parse this model")
    assert "invalid keyword: 'boxx'" in str(error.value) and "\n" not in str(error.value)
    assert not out.exists()


@pytest.mark.parametrize("settings", [{}, {"run_asset_transformer": False}, {"make_instanceable": False}])
def test_outputs_are_the_planned_ones_and_deterministic(tmp_path, settings):
    source = fixture("builtin_textures.xml")
    first = MjcfConverter(MjcfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "a"), **settings))
    second = MjcfConverter(MjcfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "b"), **settings))
    files = sorted(p.relative_to(tmp_path / "a").as_posix() for p in (tmp_path / "a").rglob("*") if p.is_file())
    planned = planned_outputs("mjcf", first.usd_file_name, first.cfg.make_instanceable,
                              first.cfg.run_asset_transformer, first.cfg.articulation_cfg)
    assert sorted(f for f in files if not f.startswith("textures/")) == sorted(planned)
    assert any(f.startswith("textures/") and f.endswith(".png") for f in files)  # the builtin gradient
    for name in files:
        if not name.endswith(".usdforge.toml"):  # the lazy key names its own folder
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


# ---- bodies, joints, geoms ---------------------------------------------------------------------------------

def test_static_kinematic_and_fixed_base_bodies():
    stage = stage_of(fixture("bodies.xml"))
    static = prim_by_source(stage, "regular_dynamic")  # no joint: welded to the world in MuJoCo
    assert not static.HasAPI(UsdPhysics.RigidBodyAPI)  # a static collider
    assert any(p.HasAPI(UsdPhysics.CollisionAPI) for p in Usd.PrimRange(static))
    assert prim_by_source(stage, "root_body").HasAPI(UsdPhysics.ArticulationRootAPI)  # carries nested_body
    for name in ("kinematic_body", "kinematic_child"):
        assert UsdPhysics.RigidBodyAPI(prim_by_source(stage, name)).GetKinematicEnabledAttr().Get()
    # static_base carries nothing moving; articulated_child carries the hinged leaf: a fixed base.
    assert not prim_by_source(stage, "static_base").HasAPI(UsdPhysics.RigidBodyAPI)
    base = prim_by_source(stage, "articulated_child")
    assert base.HasAPI(UsdPhysics.RigidBodyAPI) and base.HasAPI(UsdPhysics.ArticulationRootAPI)
    fixed = UsdPhysics.FixedJoint(joint(stage, "articulated_child_fixed_base"))
    # Anchored to the robot's Xform (issue 29); several trees: the API stays on each root body.
    assert fixed.GetBody0Rel().GetTargets() == [stage.GetDefaultPrim().GetPath()]
    assert fixed.GetBody1Rel().GetTargets() == [base.GetPath()]


def test_a_zero_inertia_fixed_base_passes_usd_validation(tmp_path):
    """Issue 30: ufactory_lite6's link_base is welded to the world with mass and diaginertia="0 0 0";
    written as is, UsdValidation's RigidBodyChecker failed it. Its moments are floored as a moving point
    mass's are (it is welded: the simulation does not change)."""
    path = write_model(tmp_path, """
        <mujoco model="lite">
          <worldbody>
            <body name="link_base">
              <inertial pos="0 0 0.05" mass="1.65" diaginertia="0 0 0"/>
              <geom type="box" size="0.05 0.05 0.05"/>
              <body name="link1" pos="0 0 0.1">
                <joint name="j1" axis="0 0 1" range="-3 3"/>
                <inertial pos="0 0 0.05" mass="1.0" diaginertia="0.01 0.01 0.01"/>
                <geom type="capsule" size="0.02" fromto="0 0 0 0 0 0.1"/>
              </body>
            </body>
          </worldbody>
        </mujoco>""", "lite")
    stage = stage_of(path)
    assert physics_errors(stage) == []
    base = UsdPhysics.MassAPI(prim_by_source(stage, "link_base"))
    assert base.GetMassAttr().Get() == pytest.approx(1.65) and min(base.GetDiagonalInertiaAttr().Get()) > 0


def test_options_left_unwritten_are_a_warning(tmp_path):
    """Issue 30: without import_physics_scene a model's time step and medium (skydio_x2: 0.01 s, air
    density and viscosity) were dropped silently, though engines simulate with them."""
    from test_mjcf_support import converted

    path = write_model(tmp_path, """
        <mujoco model="drone">
          <option timestep="0.01" density="1.225" viscosity="1.8e-5"/>
          <worldbody><body name="x"><freejoint/><geom type="box" size="0.1 0.1 0.02"/></body></worldbody>
        </mujoco>""", "drone")
    [warning] = [w for w in converted(path).warnings if "<option>" in w]
    assert "timestep 0.01, density 1.225, viscosity 1.8e-05 is not written" in warning
    assert not [w for w in converted(path, import_physics_scene=True).warnings if "<option>" in w]


def test_stacked_joints_become_a_chain_of_single_joints():
    stage = stage_of(fixture("stacked_joints.xml"))
    intermediate = prim_by_source(stage, "stacked_child__hinge_x")
    assert intermediate.GetAttribute("usdforge:stackedJointsOf").Get() == "stacked_child"
    assert UsdPhysics.MassAPI(intermediate).GetMassAttr().Get() > 0
    child = prim_by_source(stage, "stacked_child")
    root = prim_by_source(stage, "stacked_root")
    first, second = UsdPhysics.Joint(joint(stage, "hinge_x")), UsdPhysics.Joint(joint(stage, "hinge_y"))
    assert (first.GetBody0Rel().GetTargets(), first.GetBody1Rel().GetTargets()) == \
        ([root.GetPath()], [intermediate.GetPath()])
    assert (second.GetBody0Rel().GetTargets(), second.GetBody1Rel().GetTargets()) == \
        ([intermediate.GetPath()], [child.GetPath()])
    kinematics = UsdKinematics(stage)
    assert len(kinematics.joints) == 3 and kinematics.multiple_parents == []  # one parent each


def test_ref_is_folded_into_the_rest_pose_limits_spring_and_keyframe():
    path = corpus_models()["agility_cassie"]
    stage, model = stage_of(path, **CORPUS_CFG), compiled(path)
    knee = joint(stage, "left-knee")
    ref = float(model.qpos0[model.jnt_qposadr[model.joint("left-knee").id]])
    assert ref != 0 and knee.GetAttribute("usdforge:ref").Get() == pytest.approx(ref)
    assert knee.GetAttribute("mjc:springref").Get() == pytest.approx(
        model.qpos_spring[model.jnt_qposadr[model.joint("left-knee").id]] - ref)
    keyframe = stage.GetPrimAtPath(stage.GetDefaultPrim().GetPath().AppendPath("Keyframes/home"))
    qpos = np.asarray(keyframe.GetAttribute("mjc:qpos").Get())
    address = model.jnt_qposadr[model.joint("left-knee").id]
    assert qpos[address] == pytest.approx(model.key_qpos[0][address] - ref)
    assert keyframe.GetTypeName() == ""  # Cassie has ball joints: untyped, with a warning
    assert any("keyframes are kept as untyped prims" in w for w in converted(path, **CORPUS_CFG).warnings)


def test_geoms_meshes_ellipsoids_hfields_and_materials(tmp_path):
    model = write_model(tmp_path, """
        <mujoco model="shapes">
          <asset>
            <hfield name="terrain" nrow="3" ncol="4" size="1 2 0.5 0.1" elevation="0 1 0 1 1 0 1 0 0 0 1 1"/>
            <texture name="checker" type="2d" builtin="checker" rgb1="1 0 0" rgb2="0 0 1" width="8" height="8"/>
            <material name="checkered" texture="checker"/>
          </asset>
          <worldbody>
            <geom name="ground" type="hfield" hfield="terrain"/>
            <body name="egg" pos="0 0 1"><freejoint/>
              <geom name="shell" type="ellipsoid" size="0.1 0.2 0.3" material="checkered"/>
              <geom name="ghost" type="sphere" size="0.05" contype="0" conaffinity="0" rgba="0 1 0 1"/>
            </body>
          </worldbody>
        </mujoco>""")
    stage = stage_of(model)
    assert physics_errors(stage) == []
    egg = prim_by_source(stage, "egg")
    shell = stage.GetPrimAtPath(egg.GetPath().AppendPath("collisions/shell"))
    assert shell.IsA(UsdGeom.Mesh) and shell.HasAPI(UsdPhysics.CollisionAPI)  # tessellated, not a scaled sphere
    points = np.asarray(UsdGeom.Mesh(shell).GetPointsAttr().Get())
    assert np.allclose(np.abs(points).max(axis=0), [0.1, 0.2, 0.3], atol=1e-6)
    assert stage.GetPrimAtPath(egg.GetPath().AppendPath("visuals/shell"))  # rendered too (group 0)
    ghost = stage.GetPrimAtPath(egg.GetPath().AppendPath("visuals/ghost"))
    assert ghost and not stage.GetPrimAtPath(egg.GetPath().AppendPath("collisions/ghost"))
    terrain = [p for p in Usd.PrimRange.Stage(stage, Usd.TraverseInstanceProxies())
               if p.IsA(UsdGeom.Mesh) and p.HasAPI(UsdPhysics.CollisionAPI) and "/world/" in str(p.GetPath())]
    # MuJoCo's solid: the 3×4 grid, a base vertex under each of its 10 boundary vertices and the base's centre
    assert len(terrain) == 1 and len(UsdGeom.Mesh(terrain[0]).GetPointsAttr().Get()) == 12 + 10 + 1
    heights = sorted({round(p[2], 6) for p in UsdGeom.Mesh(terrain[0]).GetPointsAttr().Get()})
    assert heights == [-0.1, 0.0, 0.5]
    textures = [p for p in converted(model).files if p.suffix == ".png"]
    assert len(textures) == 1  # the builtin checker, from MuJoCo's texels


def test_reflected_meshes_are_mirrored():
    stage = stage_of(fixture("reflected_meshes.xml"))
    cache = UsdGeom.XformCache()

    def world_points(body: str) -> np.ndarray:
        prim = prim_by_source(stage, body)
        meshes = [p for p in Usd.PrimRange(prim, Usd.TraverseInstanceProxies()) if p.IsA(UsdGeom.Mesh)
                  and "/collisions/" in str(p.GetPath())]
        matrix = np.array(cache.GetLocalToWorldTransform(meshes[0])).T
        points = np.asarray(UsdGeom.Mesh(meshes[0]).GetPointsAttr().Get(), dtype=np.float64)
        return points @ matrix[:3, :3].T + matrix[:3, 3]

    model = compiled(fixture("reflected_meshes.xml"))
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    for body in ("bodyRegular", "bodyReflected"):
        geom = model.body(body).geomadr[0]
        mesh = model.geom_dataid[geom]
        vertices = model.mesh_vert[model.mesh_vertadr[mesh]:model.mesh_vertadr[mesh] + model.mesh_vertnum[mesh]]
        expected = vertices @ data.geom_xmat[geom].reshape(3, 3).T + data.geom_xpos[geom]
        ours = world_points(body)
        assert np.allclose(np.sort(ours, axis=0)[[0, -1]], np.sort(expected, axis=0)[[0, -1]], atol=1e-5)


def test_mesh_normals_are_mujocos_corner_by_corner(tmp_path):
    """MuJoCo's normals and per-corner normal indices become an indexed face-varying primvars:normals: the
    flattened normals equal MuJoCo's at every corner of every triangle, mirrored mesh included."""
    # A tetrahedron whose corners carry different (smooth) normals, so a corner mix-up shows.
    (tmp_path / "tetra.obj").write_text(textwrap.dedent("""\
        v 0 0 0
        v 1 0 0
        v 0 1 0
        v 0 0 1
        vn -0.577 -0.577 -0.577
        vn 1 0 0
        vn 0 1 0
        vn 0 0 1
        f 1//1 3//3 2//2
        f 1//1 2//2 4//4
        f 1//1 4//4 3//3
        f 2//2 3//3 4//4
        """))
    source = write_model(tmp_path, """\
        <mujoco model="normals">
          <asset>
            <mesh name="tetra" file="tetra.obj" scale="0.1 0.1 0.1"/>
            <mesh name="mirror" file="tetra.obj" scale="0.1 -0.1 0.1"/>
          </asset>
          <worldbody>
            <body name="regular"><freejoint/><geom type="mesh" mesh="tetra"/></body>
            <body name="mirrored" pos="1 0 0"><freejoint/><geom type="mesh" mesh="mirror"/></body>
          </worldbody>
        </mujoco>""")
    stage = stage_of(source)
    model = compiled(source)
    for body in ("regular", "mirrored"):
        mesh = model.geom_dataid[model.body(body).geomadr[0]]
        prim = next(p for p in Usd.PrimRange(prim_by_source(stage, body), Usd.TraverseInstanceProxies())
                    if p.IsA(UsdGeom.Mesh) and "/visuals/" in str(p.GetPath()))
        primvar = UsdGeom.PrimvarsAPI(prim).GetPrimvar("normals")
        assert primvar.IsIndexed() and primvar.GetInterpolation() == UsdGeom.Tokens.faceVarying
        faces = slice(model.mesh_faceadr[mesh], model.mesh_faceadr[mesh] + model.mesh_facenum[mesh])
        normals = model.mesh_normal[model.mesh_normaladr[mesh]:model.mesh_normaladr[mesh] + model.mesh_normalnum[mesh]]
        corners = np.asarray(UsdGeom.Mesh(prim).GetFaceVertexIndicesAttr().Get())
        assert np.array_equal(corners, model.mesh_face[faces].reshape(-1))
        expected = normals[model.mesh_facenormal[faces].reshape(-1)]
        assert len(np.unique(np.round(expected, 3), axis=0)) > 3  # the corners do differ
        assert np.allclose(np.asarray(primvar.ComputeFlattened(), dtype=np.float64), expected, atol=1e-6)


def test_a_mirroring_scale_keeps_each_corner_with_its_normal():
    """Indexed normals (MuJoCo's) and face-varying ones come out of a mirroring scale alike: the winding
    is reversed and every corner keeps its own normal, reflected."""
    from usdforge.rules.robot.meshes import MeshLibrary, MeshPart

    rng = np.random.default_rng(0)
    points, faces = rng.normal(size=(6, 3)), np.array([[0, 1, 2], [3, 4, 5], [0, 2, 4]])
    values = rng.normal(size=(5, 3))
    values /= np.linalg.norm(values, axis=1, keepdims=True)
    indices = rng.integers(0, 5, size=9)
    library = MeshLibrary()
    library.provide(Path("indexed"), [MeshPart("p", points, faces, normals=values, normal_indices=indices)])
    library.provide(Path("flat"), [MeshPart("p", points, faces, normals=values[indices])])
    scale = (1.0, -2.0, 1.0)
    indexed, = library.parts(Path("indexed"), scale)
    flat, = library.parts(Path("flat"), scale)
    assert np.array_equal(indexed.faces, faces[:, ::-1]) and np.array_equal(indexed.faces, flat.faces)
    assert np.allclose(indexed.face_varying_normals(), flat.normals)
    reflected = values[indices] * [1.0, -0.5, 1.0]  # normals transform by the inverse transpose, then unit
    reflected /= np.linalg.norm(reflected, axis=1, keepdims=True)
    assert np.allclose(flat.normals.reshape(-1, 3, 3)[:, ::-1].reshape(-1, 3), reflected)


# ---- actuators ---------------------------------------------------------------------------------------------

def test_actuators_are_drives_and_mjc_actuators():
    path = corpus_models()["franka_emika_panda"]
    stage, model = stage_of(path, **CORPUS_CFG), compiled(path)
    drive = UsdPhysics.DriveAPI(joint(stage, "joint1"), "angular")
    kp, kv = 4500.0, 450.0
    assert drive.GetStiffnessAttr().Get() == pytest.approx(kp * np.pi / 180.0, rel=1e-6)  # per degree
    assert drive.GetDampingAttr().Get() == pytest.approx(kv * np.pi / 180.0, rel=1e-6)
    assert drive.GetMaxForceAttr().Get() == pytest.approx(87.0)
    assert drive.GetTypeAttr().Get() == "force"
    # joint4's ctrlrange excludes 0: the rest target is the clamped control.
    target = UsdPhysics.DriveAPI(joint(stage, "joint4"), "angular").GetTargetPositionAttr().Get()
    assert target == pytest.approx(np.degrees(model.actuator_ctrlrange[3, 1]), rel=1e-5)
    actuators = [p for p in stage.Traverse() if p.GetTypeName() == "MjcActuator"]
    assert len(actuators) == model.nu
    gripper = prim_by_source(stage, "actuator8")
    tendon = stage.GetPrimAtPath(gripper.GetRelationship("mjc:target").GetTargets()[0])
    assert tendon.GetTypeName() == "MjcTendon" and source_name(stage, tendon.GetPath()) == "split"
    first = prim_by_source(stage, "actuator1")
    assert first.GetRelationship("mjc:target").GetTargets() == [joint(stage, "joint1").GetPath()]
    assert list(first.GetAttribute("mjc:biasPrm").Get())[:3] == [0.0, -kp, -kv]


def test_site_and_tendon_actuators_and_overrides():
    x2 = corpus_models()["skydio_x2"]
    stage = stage_of(x2, **CORPUS_CFG)
    thrusters = [p for p in stage.Traverse() if p.GetTypeName() == "MjcActuator"]
    assert len(thrusters) == 4
    for thruster in thrusters:
        site = stage.GetPrimAtPath(thruster.GetRelationship("mjc:target").GetTargets()[0])
        assert "MjcSiteAPI" in applied(site) and UsdGeom.Imageable(site).GetPurposeAttr().Get() == "guide"
    overridden = stage_of(fixture("simple_actuator.xml"), override_gain_type="fixed", override_bias_type="affine",
                          override_gain_prm=(20.0,), override_bias_prm=(0.0, -20.0, -2.0))
    actuator = next(p for p in overridden.Traverse() if p.GetTypeName() == "MjcActuator")
    assert list(actuator.GetAttribute("mjc:gainPrm").Get()) == [20.0] + [0.0] * 9
    assert list(actuator.GetAttribute("mjc:biasPrm").Get())[:3] == [0.0, -20.0, -2.0]
    hinge = next(p for p in overridden.Traverse() if p.IsA(UsdPhysics.RevoluteJoint))
    gear = compiled(fixture("simple_actuator.xml")).actuator_gear[0, 0]
    assert UsdPhysics.DriveAPI(hinge, "angular").GetStiffnessAttr().Get() == \
        pytest.approx(20.0 * gear * gear * np.pi / 180.0, rel=1e-6)


# ---- equalities, contacts, scene, records -----------------------------------------------------------------

def test_equality_constraints():
    stage = stage_of(fixture("equality_connect.xml"))
    connect = joint(stage, "bodies")
    assert connect.IsA(UsdPhysics.SphericalJoint) and UsdPhysics.Joint(connect).GetExcludeFromArticulationAttr().Get()
    assert "MjcEqualityConnectAPI" in applied(connect)
    welds = stage_of(fixture("equality_weld_attributes.xml"))
    weld = joint(welds, "custom-weld")
    assert weld.IsA(UsdPhysics.FixedJoint) and weld.GetAttribute("mjc:torqueScale").Get() == pytest.approx(2.5)
    assert list(weld.GetAttribute("mjc:solref").Get()) == pytest.approx([0.03, 0.8])
    mimic = stage_of(fixture("equality_joint_attributes.xml"))
    follower = joint(mimic, "hinge0")
    assert follower.GetRelationship("usdforge:mimic:joint").GetTargets() == [joint(mimic, "hinge1").GetPath()]
    assert follower.GetAttribute("usdforge:mimic:multiplier").Get() == pytest.approx(1.5)
    assert follower.GetAttribute("mjc:coef2").Get() == pytest.approx(0.1)
    assert {"MjcEqualityJointAPI", "NewtonMimicAPI"} <= applied(follower)
    assert joint(mimic, "hinge2").GetAttribute("newton:mimicEnabled").Get() is False


def test_contact_rules(tmp_path):
    stage = stage_of(fixture("contact_excludes.xml"))
    pairs = set()
    for name in ("no_collide_A", "no_collide_B", "no_collide_C", "collider"):
        prim = prim_by_source(stage, name)
        for target in UsdPhysics.FilteredPairsAPI(prim).GetFilteredPairsRel().GetTargets():
            pairs.add(frozenset((name, source_name(stage, target))))
    assert pairs == {frozenset(p) for p in (("no_collide_A", "no_collide_B"), ("no_collide_A", "no_collide_C"),
                                             ("no_collide_B", "no_collide_C"))}
    materials = stage_of(fixture("physics_materials.xml"))
    frictions = {}
    for prim in materials.Traverse():
        if prim.HasAPI(UsdPhysics.CollisionAPI):
            bound, _ = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial("physics")
            frictions[source_name(materials, prim.GetParent().GetParent().GetPath()) or prim.GetName()] = \
                UsdPhysics.MaterialAPI(bound.GetPrim()).GetDynamicFrictionAttr().Get()
    distinct = {p.GetPath() for p in materials.Traverse() if p.HasAPI(UsdPhysics.MaterialAPI)}
    assert len(distinct) == 4  # (0.8 …) ×2, (0.5 …), MuJoCo's default, (0.3 …) ×2
    groups = stage_of(write_model_for_groups(tmp_path))
    group_prims = [p for p in groups.Traverse() if p.IsA(UsdPhysics.CollisionGroup)]
    assert len(group_prims) == 2
    table = UsdPhysics.CollisionGroup.ComputeCollisionGroupTable(groups)
    a, b = (p.GetPath() for p in sorted(group_prims, key=lambda p: str(p.GetPath())))
    assert not table.IsCollisionEnabled(a, a) and table.IsCollisionEnabled(a, b)
    assert frictions


def write_model_for_groups(folder: Path) -> Path:
    """Feet that only touch the floor: contype 2 / conaffinity 1 against a floor of contype 1 / conaffinity 2."""
    return write_model(folder, """
        <mujoco model="groups"><worldbody>
          <geom name="floor" type="plane" size="5 5 .1" contype="1" conaffinity="2"/>
          <body name="a" pos="0 0 1"><freejoint/><geom type="sphere" size=".1" contype="2" conaffinity="1"/></body>
          <body name="b" pos="0 0 2"><freejoint/><geom type="sphere" size=".1" contype="2" conaffinity="1"/></body>
        </worldbody></mujoco>""")


def test_self_collision_off_filters_every_pair_of_an_articulation():
    path = corpus_models()["franka_emika_panda"]
    stage = stage_of(path)  # defaults: self_collision False
    links = [prim_by_source(stage, f"link{i}") for i in range(8)]
    filtered = set()
    for prim in links:
        for target in UsdPhysics.FilteredPairsAPI(prim).GetFilteredPairsRel().GetTargets():
            filtered.add(frozenset((prim.GetPath(), target)))
    assert frozenset((links[0].GetPath(), links[7].GetPath())) in filtered
    # A fixed base: PhysX's articulation settings are on the robot's Xform with the API (issue 29).
    assert stage.GetDefaultPrim().GetAttribute("physxArticulation:enabledSelfCollisions").Get() is False


def test_scene_options_and_flags():
    stage = stage_of(fixture("scene_attributes.xml"), import_physics_scene=True)
    scene = next(p for p in stage.Traverse() if p.IsA(UsdPhysics.Scene))
    assert UsdPhysics.Scene(scene).GetGravityMagnitudeAttr().Get() == pytest.approx(5.0)
    assert tuple(UsdPhysics.Scene(scene).GetGravityDirectionAttr().Get()) == (0.0, 0.0, -1.0)
    # 0.01 s is 100 steps per second exactly: said once, as Newton's (MuJoCo's decoder reads it there)
    assert not scene.GetAttribute("mjc:option:timestep").HasAuthoredValue()
    assert scene.GetAttribute("mjc:option:integrator").Get() == "rk4"
    assert scene.GetAttribute("mjc:option:solver").Get() == "cg"
    assert scene.GetAttribute("mjc:flag:contact").Get() is False and scene.GetAttribute("mjc:flag:energy").Get()
    assert scene.GetAttribute("newton:timeStepsPerSecond").Get() == 100
    assert scene.GetAttribute("mjc:compiler:angle").Get() == "radian"
    without = stage_of(fixture("scene_attributes.xml"))
    assert not any(p.IsA(UsdPhysics.Scene) for p in without.Traverse())


def test_sites_cameras_lights_sensors_and_the_warning():
    stage = stage_of(fixture("sites.xml"))
    site = prim_by_source(stage, "site")
    assert site.IsA(UsdGeom.Cube) and "MjcSiteAPI" in applied(site)
    assert prim_by_source(stage, "worldsite").GetAttribute("mjc:group").Get() == 1
    cassie = corpus_models()["agility_cassie"]
    result = converted(cassie, **CORPUS_CFG)
    stage = Usd.Stage.Open(str(result.usd_path))
    assert prim_by_source(stage, "track").IsA(UsdGeom.Camera)
    assert any(p.HasAPI(UsdLux.LightAPI) for p in stage.Traverse())
    sensors = [p for p in stage.Traverse() if p.HasAttribute("mjcf:type")]
    assert len(sensors) == compiled(cassie).nsensor
    assert any("kept as MuJoCo data" in w and "20 sensor(s)" in w for w in result.warnings)


def test_fix_base_and_link_density(tmp_path):
    path = corpus_models()["skydio_x2"]
    stage = stage_of(path, fix_base=True)
    fixed = UsdPhysics.FixedJoint(joint(stage, "x2_fixed_base"))
    assert fixed.GetBody0Rel().GetTargets() == [stage.GetDefaultPrim().GetPath()]  # anchored (issue 29)
    assert fixed.GetBody1Rel().GetTargets() == [prim_by_source(stage, "x2").GetPath()]
    assert stage.GetDefaultPrim().HasAPI(UsdPhysics.ArticulationRootAPI)
    model = write_model(tmp_path, """
        <mujoco model="density"><worldbody><body name="cube"><freejoint/>
          <geom type="box" size=".1 .1 .1"/></body></worldbody></mujoco>""")
    dense = stage_of(model, link_density=500.0)
    light = UsdPhysics.MassAPI(prim_by_source(dense, "cube")).GetMassAttr().Get()
    assert light == pytest.approx(0.2 ** 3 * 500.0, rel=1e-6)  # MuJoCo's default would be 1000 kg/m³


def test_merge_mesh_merges_visual_meshes():
    path = corpus_models()["franka_emika_panda"]
    merged = stage_of(path, merge_mesh=True)
    link = prim_by_source(merged, "link6")
    visuals = [p for p in Usd.PrimRange(link, Usd.TraverseInstanceProxies())
               if p.IsA(UsdGeom.Mesh) and "/visuals/" in str(p.GetPath())]
    model = compiled(path)
    body = model.body("link6").id
    visual_geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == body and model.geom_contype[g] == 0]
    assert 0 < len(visuals) < len(visual_geoms)
    assert physics_errors(merged) == []


def test_collision_from_visuals_collision_type_and_robot_type():
    path = fixture("geoms.xml")
    model = compiled(path)
    default = stage_of(path)
    every = stage_of(path, collision_from_visuals=True, collision_type="Bounding Cube", robot_type="Manipulator")
    colliders = [p for p in every.Traverse() if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert len(colliders) == model.ngeom > len([p for p in default.Traverse() if p.HasAPI(UsdPhysics.CollisionAPI)])
    approximations = {UsdPhysics.MeshCollisionAPI(p).GetApproximationAttr().Get() for p in colliders
                      if p.HasAPI(UsdPhysics.MeshCollisionAPI)}
    assert approximations == {"boundingCube"}
    assert every.GetDefaultPrim().GetAttribute("isaac:robotType").Get() == "Manipulator"
    assert physics_errors(every) == []


def test_hulls_nothing_reads_are_compiled_smallest_and_the_output_is_the_same(tmp_path, monkeypatch):
    """MuJoCo computes a collision hull for every mesh; the converter reads none, except through a
    convex-inertia mesh's inertia and a primitive fitted to a mesh. The compile gets the smallest budget for
    the others (``load._limit_hulls``), the spec the authors read keeps the model's own, and the output is
    byte for byte a conversion with every hull in full (geoms.xml: legacy, exact, shell and convex meshes,
    ``maxhullvert`` -1 and 100)."""
    import attrs

    from usdforge.rules.mjcf import load

    budgets: list[list[int]] = []
    compile_ = mujoco.MjSpec.compile
    monkeypatch.setattr(mujoco.MjSpec, "compile",
                        lambda spec: budgets.append([m.maxhullvert for m in spec.meshes]) or compile_(spec))
    cfg = MjcfConverterCfg(asset_path=str(fixture("geoms.xml")))

    def outputs(name: str) -> dict[str, bytes]:
        MjcfConverter(attrs.evolve(cfg, usd_dir=str(tmp_path / name)), cache=False)
        return {p.relative_to(tmp_path / name).as_posix(): p.read_bytes() for p in (tmp_path / name).rglob("*")
                if p.is_file() and p.suffix != ".json" and not p.name.endswith(".usdforge.toml")}

    limited = outputs("limited")
    own = [m.maxhullvert for m in mujoco.MjSpec.from_file(str(fixture("geoms.xml"))).meshes]
    convex = [int(m.inertia) == int(mujoco.mjtMeshInertia.mjMESH_INERTIA_CONVEX)
              for m in mujoco.MjSpec.from_file(str(fixture("geoms.xml"))).meshes]
    assert budgets[-1] == [b if c else 4 for b, c in zip(own, convex)] and 100 in own and -1 in own
    monkeypatch.setattr(load, "_limit_hulls", lambda spec: [])
    full = outputs("full")
    assert budgets[-1] == own
    stage = Usd.Stage.Open(str(tmp_path / "limited" / "geoms.usd"))
    said = {p.GetAttribute("newton:maxHullVertices").Get() for p in stage.Traverse()
            if p.HasAttribute("newton:maxHullVertices")}
    assert said == {100, -1}  # the model's own budgets, not the compile's
    assert limited == full
