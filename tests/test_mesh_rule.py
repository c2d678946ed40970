"""Mesh → USD: every format, read back with pxr and UsdPhysics' own parser, against trimesh."""

from __future__ import annotations

import itertools
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import trimesh
from pxr import Usd, UsdGeom, UsdPhysics

from meshes import assert_parts_read_alike, box_mesh, textured_obj, write_mesh
from usdforge.pipeline import MeshConverter
from usdforge.rules.errors import ConversionError
from usdforge.schemas import (CollisionBaseCfg, MassPropertiesCfg, MeshCollisionBaseCfg, MeshConverterCfg,
                     RigidBodyBaseCfg)

FORMATS = ["obj", "stl", "stl_ascii", "ply", "off", "glb", "gltf", "dae"]
Y_UP_TO_Z_UP = trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0])


def physics_cfg(asset: Path, usd_dir: Path, **overrides) -> MeshConverterCfg:
    values = dict(asset_path=str(asset), usd_dir=str(usd_dir), mass_props=MassPropertiesCfg(mass=2.0),
                  rigid_props=RigidBodyBaseCfg(rigid_body_enabled=True),
                  collision_props=CollisionBaseCfg(collision_enabled=True),
                  mesh_collision_props=MeshCollisionBaseCfg(mesh_approximation_name="convexHull"))
    values.update(overrides)
    return MeshConverterCfg(**values)


def mesh_points_world(stage: Usd.Stage) -> np.ndarray:
    """Every mesh point of the stage in world space (instance proxies included)."""
    cache = UsdGeom.XformCache()
    points = []
    for prim in Usd.PrimRange(stage.GetPseudoRoot(), Usd.TraverseInstanceProxies()):
        if prim.IsA(UsdGeom.Mesh):
            local = np.asarray(UsdGeom.Mesh(prim).GetPointsAttr().Get(), dtype=np.float64)
            matrix = np.asarray(cache.GetLocalToWorldTransform(prim), dtype=np.float64)  # row vectors
            points.append(np.c_[local, np.ones(len(local))] @ matrix)
    return np.concatenate(points)[:, :3]


def load_physics(stage: Usd.Stage) -> dict:
    parse = getattr(UsdPhysics, "UsdPhysicsLoadStageFromPrimRange", None) or UsdPhysics.LoadUsdPhysicsFromRange
    return parse(stage, ["/"])


@pytest.mark.parametrize("extension", FORMATS)
@pytest.mark.parametrize("instanceable", [True, False])
def test_every_format_converts_with_points_bounds_and_mass_of_trimesh(tmp_path, extension, instanceable):
    source = write_mesh(tmp_path, extension)
    cfg = physics_cfg(source, tmp_path / "out", make_instanceable=instanceable,
                      translation=(1.0, 2.0, 3.0), rotation=(0.0, 0.0, np.sin(np.pi / 8), np.cos(np.pi / 8)),
                      scale=(2.0, 1.0, 0.5))
    converter = MeshConverter(cfg)
    stage = Usd.Stage.Open(converter.usd_path)
    assert UsdGeom.GetStageUpAxis(stage) == "Z" and UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert UsdPhysics.GetStageKilogramsPerUnit(stage) == 1.0
    root = stage.GetDefaultPrim()
    assert root.GetPath() == "/box" or root.GetName().startswith("box")

    # The reference: trimesh's mesh, with glTF turned Z-up, then the cfg's transform.
    expected = box_mesh()
    if extension in ("glb", "gltf"):
        expected.apply_transform(Y_UP_TO_Z_UP)
    x, y, z, w = cfg.rotation
    transform = trimesh.transformations.quaternion_matrix([w, x, y, z])
    transform[:3, :3] = transform[:3, :3] @ np.diag(cfg.scale)
    transform[:3, 3] = cfg.translation
    expected.apply_transform(transform)

    points = mesh_points_world(stage)
    assert len(points) == len(expected.vertices)
    np.testing.assert_allclose(points.min(0), expected.bounds[0], atol=1e-5)
    np.testing.assert_allclose(points.max(0), expected.bounds[1], atol=1e-5)

    physics = load_physics(stage)
    bodies = physics[UsdPhysics.ObjectType.RigidBody][0]
    assert [str(p) for p in bodies] == [str(root.GetPath())]
    assert len(physics[UsdPhysics.ObjectType.MeshShape][0]) == 1
    mass = UsdPhysics.MassAPI(root)
    assert mass.GetMassAttr().Get() == pytest.approx(2.0)
    expected.density = 2.0 / expected.volume
    np.testing.assert_allclose(np.asarray(mass.GetCenterOfMassAttr().Get()), expected.center_mass, atol=1e-5)
    moments = np.sort(np.asarray(mass.GetDiagonalInertiaAttr().Get()))
    np.testing.assert_allclose(moments, np.sort(np.linalg.eigvalsh(expected.moment_inertia)), rtol=1e-5)
    mesh_prim = next(p for p in Usd.PrimRange(stage.GetPseudoRoot(), Usd.TraverseInstanceProxies())
                     if p.IsA(UsdGeom.Mesh))
    assert UsdPhysics.MeshCollisionAPI(mesh_prim).GetApproximationAttr().Get() == "convexHull"
    assert mesh_prim.HasAPI(UsdPhysics.CollisionAPI)
    assert root.GetChild("geometry").IsInstance() == instanceable


def test_principal_axes_rotate_the_diagonal_inertia_back_to_trimesh_tensor(tmp_path):
    # A rotated box has a full inertia tensor: diagonalInertia + principalAxes must reproduce it.
    source = write_mesh(tmp_path, "stl")
    cfg = physics_cfg(source, tmp_path / "out", rotation=(0.3, 0.2, 0.1, float(np.sqrt(1 - 0.14))))
    stage = Usd.Stage.Open(MeshConverter(cfg).usd_path)
    mass = UsdPhysics.MassAPI(stage.GetDefaultPrim())
    quat = mass.GetPrincipalAxesAttr().Get()
    rotation = trimesh.transformations.quaternion_matrix([quat.GetReal(), *quat.GetImaginary()])[:3, :3]
    tensor = rotation @ np.diag(np.asarray(mass.GetDiagonalInertiaAttr().Get())) @ rotation.T
    expected = box_mesh()
    x, y, z, w = cfg.rotation
    expected.apply_transform(trimesh.transformations.quaternion_matrix([w, x, y, z]))
    expected.density = 2.0 / expected.volume
    np.testing.assert_allclose(tensor, expected.moment_inertia, atol=1e-6)


def test_multi_part_glb_keeps_one_mesh_prim_per_part_with_its_transform(tmp_path):
    scene = trimesh.Scene()
    scene.add_geometry(trimesh.creation.box(extents=[1, 1, 1]), node_name="body")
    scene.add_geometry(trimesh.creation.icosphere(radius=0.5), node_name="knob",
                       transform=trimesh.transformations.translation_matrix([0, 2, 0]))
    source = tmp_path / "scene.glb"
    source.write_bytes(scene.export(file_type="glb"))
    stage = Usd.Stage.Open(MeshConverter(MeshConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "o"),
                                                          make_instanceable=False)).usd_path)
    meshes = {p.GetName(): p for p in stage.Traverse() if p.IsA(UsdGeom.Mesh)}
    assert set(meshes) == {"body", "knob"}
    knob_world = UsdGeom.XformCache().GetLocalToWorldTransform(meshes["knob"]).ExtractTranslation()
    # glTF's +Y up becomes +Z up.
    np.testing.assert_allclose(np.asarray(knob_world), [0, 0, 2], atol=1e-6)


def test_instanceable_output_still_resolves_after_moving_the_folder(tmp_path):
    source = write_mesh(tmp_path, "stl")
    converter = MeshConverter(physics_cfg(source, tmp_path / "out"))
    assert converter.usd_instanceable_meshes_path == "Props/box_meshes.usd"
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(converter.usd_dir, moved)
    stage = Usd.Stage.Open(str(moved / converter.usd_file_name))
    assert len(mesh_points_world(stage)) == 8
    geometry = stage.GetDefaultPrim().GetChild("geometry")
    assert geometry.IsInstance() and geometry.GetPrototype().IsValid()


def test_colour_and_texture_become_preview_materials(tmp_path):
    from PIL import Image

    mesh = trimesh.creation.box()
    uv = np.random.default_rng(0).random((len(mesh.vertices), 2))
    image = Image.new("RGB", (4, 4), (10, 200, 30))
    mesh.visual = trimesh.visual.TextureVisuals(uv=uv, image=image)
    source = tmp_path / "textured.glb"
    source.write_bytes(trimesh.Scene(mesh).export(file_type="glb"))
    converter = MeshConverter(MeshConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "o")))
    stage = Usd.Stage.Open(converter.usd_path)
    shaders = [p for p in Usd.PrimRange(stage.GetPseudoRoot(), Usd.TraverseInstanceProxies())
               if p.GetTypeName() == "Shader"]
    ids = {p.GetAttribute("info:id").Get() for p in shaders}
    assert {"UsdPreviewSurface", "UsdUVTexture"} <= ids
    texture = next(p for p in shaders if p.GetAttribute("info:id").Get() == "UsdUVTexture")
    resolved = texture.GetAttribute("inputs:file").Get().resolvedPath
    assert resolved and Path(resolved).is_file()
    assert Image.open(resolved).getpixel((0, 0))[:3] == (10, 200, 30)


def test_converting_twice_gives_byte_identical_files(tmp_path):
    source = write_mesh(tmp_path, "glb")
    first = MeshConverter(physics_cfg(source, tmp_path / "a"))
    second = MeshConverter(physics_cfg(source, tmp_path / "b"))
    for name in (first.usd_file_name, first.usd_instanceable_meshes_path):
        assert (Path(first.usd_dir) / name).read_bytes() == (Path(second.usd_dir) / name).read_bytes()


@pytest.mark.parametrize("content, message", [
    (b"solid nothing\nendsolid nothing\n", "holds no triangle mesh"),
    (b"\x00\x01 not a mesh at all", "cannot read"),
])
def test_corrupt_mesh_is_one_error_naming_the_file_and_nothing_is_written(tmp_path, content, message):
    source = tmp_path / "broken.stl" if content.startswith(b"solid") else tmp_path / "broken.glb"
    source.write_bytes(content)
    with pytest.raises(ConversionError, match=message) as caught:
        MeshConverter(MeshConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out")))
    assert str(source) in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_fbx_without_the_extra_names_the_extra(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "assimp_py", None)  # as if the fbx extra were not installed
    source = tmp_path / "model.fbx"
    source.write_bytes(b"Kaydara FBX Binary  \x00")
    with pytest.raises(ConversionError, match=r"usdforge\[fbx\]"):
        MeshConverter(MeshConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out")))


def test_assimp_reader_gives_trimesh_geometry(tmp_path):
    # No FBX writer exists on PyPI, so the assimp path is checked on an OBJ (assimp reads both).
    from usdforge.rules.mesh.read import load_parts_with_assimp

    parts = load_parts_with_assimp(write_mesh(tmp_path, "obj"))
    merged = trimesh.util.concatenate([p.mesh for p in parts])
    np.testing.assert_allclose(merged.bounds, box_mesh().bounds, atol=1e-6)
    assert merged.volume == pytest.approx(box_mesh().volume)


@pytest.mark.parametrize("extension", [*FORMATS, "textured obj", "dae in cm"])
def test_the_standalone_converter_reads_with_assimp_as_trimesh_reads(tmp_path, extension):
    """Assimp is the standalone converter's first reader (#26), giving the parts trimesh gives: the file's
    units (a COLLADA unit is not applied, as before), normals, UVs, colours, the decoded diffuse map; an STL's
    part named after its file, whichever reader. ``bench/mesh_readers.py`` runs this over every shared mesh."""
    import re

    from usdforge.rules.mesh.assimp_read import stop_reader
    from usdforge.rules.mesh.read import load_parts, read_parts

    if extension == "textured obj":
        path = textured_obj(tmp_path)
    else:
        path = write_mesh(tmp_path, extension.split()[0])
    if extension == "dae in cm":
        path.write_text(re.sub(r"<asset>.*?</asset>", '<asset><unit name="cm" meter="0.01"/></asset>',
                               path.read_text(), count=1, flags=re.DOTALL))
    try:
        ours, used = read_parts(path)
    finally:
        stop_reader()
    assert used == "assimp"
    theirs = load_parts(path)
    if path.suffix == ".stl":
        assert [p.name for p in ours] == [path.name]
        theirs = [p._replace(name=path.name) for p in theirs]
    assert_parts_read_alike(path, ours, theirs)


_FIELDS = {"mass_props": MassPropertiesCfg(mass=2.0), "rigid_props": RigidBodyBaseCfg(rigid_body_enabled=True),
           "collision_props": CollisionBaseCfg(collision_enabled=True),
           "mesh_collision_props": MeshCollisionBaseCfg(mesh_approximation_name="convexHull")}


@pytest.mark.parametrize("fields", [combo for n in range(1, 5) for combo in itertools.combinations(_FIELDS, n)],
                         ids=lambda combo: "+".join(name.removesuffix("_props") for name in combo))
@pytest.mark.parametrize("instanceable", [True, False])
def test_schema_combinations_do_what_each_field_means(tmp_path, fields, instanceable):
    """Issue 11 item 7 and issue 29: MassAPI on the top prim whenever mass_props is given, as Isaac Lab's
    MeshConverter authors it (a rigid body applied at spawn time makes it act), MeshCollisionAPI only on a
    collider (mesh_collision_props approximates the collision meshes; without colliders one warning).
    OpenUSD's validators pass every combination."""
    from pxr import UsdValidation

    source = write_mesh(tmp_path, "obj")
    cfg = MeshConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out"), make_instanceable=instanceable,
                           **{name: _FIELDS[name] for name in fields})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stage = Usd.Stage.Open(MeshConverter(cfg).usd_path)
    prims = list(Usd.PrimRange(stage.GetPseudoRoot(), Usd.TraverseInstanceProxies()))
    for prim in prims:
        if prim.HasAPI(UsdPhysics.MassAPI):
            assert prim.GetPath() == stage.GetDefaultPrim().GetPath(), prim.GetPath()
            assert prim.GetAttribute("physics:mass").Get() == pytest.approx(2.0)
        if prim.HasAPI(UsdPhysics.MeshCollisionAPI):
            assert prim.HasAPI(UsdPhysics.CollisionAPI), prim.GetPath()
    has = {name: any(prim.HasAPI(api) for prim in prims) for name, api in
           (("rigid_props", UsdPhysics.RigidBodyAPI), ("mass_props", UsdPhysics.MassAPI),
            ("collision_props", UsdPhysics.CollisionAPI), ("mesh_collision_props", UsdPhysics.MeshCollisionAPI))}
    expected = {"rigid_props": "rigid_props" in fields, "collision_props": "collision_props" in fields,
                "mass_props": "mass_props" in fields,
                "mesh_collision_props": {"mesh_collision_props", "collision_props"} <= set(fields)}
    assert has == expected
    messages = [str(w.message) for w in caught if "without" in str(w.message)]
    ignored = [name for name in ("mesh_collision_props",) if name in fields and not expected[name]]
    assert sorted(m.split(": ")[1].split(" ")[0] for m in messages) == sorted(ignored), messages
    registry = UsdValidation.ValidationRegistry()
    names = [m.name for m in registry.GetAllValidatorMetadata() if m.name.startswith("usdPhysicsValidators:")]
    context = UsdValidation.ValidationContext(registry.GetOrLoadValidatorsByName(names))
    assert [e.GetMessage() for e in context.Validate(stage) if e.GetType() == UsdValidation.ValidationErrorType.Error] == []


def test_a_collada_material_trimesh_cannot_read_gives_no_traceback(tmp_path, shared_dir):
    """A COLLADA effect without its <transparent> colour makes trimesh log a traceback while reading the
    material (found by bench/fuzz.py): the conversion goes on and prints no traceback."""
    import subprocess
    import sys

    source = (shared_dir / "conformance" / "urdf" / "assets" / "box_materials.dae").read_text()
    start, end = source.index("<transparent"), source.index("</transparent>") + len("</transparent>")
    dae = tmp_path / "box.dae"
    dae.write_text(source[:start] + source[end:])
    done = subprocess.run([sys.executable, "-m", "usdforge.pipeline.cli", "convert", "--no-cache", str(dae),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "out" / "box.usd").is_file()


def _files(folder: Path) -> dict[str, bytes]:
    """Every output file but the lazy key and the conversion record, by relative name."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and not p.name.endswith((".usdforge.toml", ".convert.json"))}


def test_the_meshes_layer_is_reused_across_poses_masses_and_names_and_rebuilt_when_its_inputs_change(tmp_path):
    """One mesh at many scales, masses and output names (a library of variants) reads and authors its
    meshes layer once: later conversions restore it from the cache, every output byte-identical to a
    conversion without a cache; an edited mesh file or other collider settings author it again."""
    import attrs

    from usdforge.pipeline.cache import Store

    folder = tmp_path / "src"
    folder.mkdir()
    asset = textured_obj(folder)  # a texture too: restored with its layer
    cache = tmp_path / "cache"

    def both(name: str, **overrides) -> dict[str, bytes]:
        cfg = MeshConverterCfg(asset_path=str(asset), usd_dir=str(tmp_path / "out" / name), usd_file_name=name,
                               collision_props=CollisionBaseCfg(collision_enabled=True), **overrides)
        MeshConverter(cfg, cache=cache)
        clean = tmp_path / "clean" / name
        MeshConverter(attrs.evolve(cfg, usd_dir=str(clean)), cache=False)
        mine = _files(tmp_path / "out" / name)
        assert mine == _files(clean), name
        return mine

    def unit_lookups() -> list[bool]:
        import json
        return [json.loads(line)["hit"] for line in (cache / "stats.log").read_text().splitlines()
                if json.loads(line)["kind"] == "layer:meshes"]

    first = both("a.usda", scale=(1.0, 1.0, 1.0))
    assert "textures/part_0.png" in first and unit_lookups() == [False]
    both("b.usda", scale=(2.0, 2.0, 2.0), mass_props=MassPropertiesCfg(mass=3.0))
    both("c.usd", translation=(0.1, 0.2, 0.3), rotation=(0.0, 0.0, 0.7071067811865476, 0.7071067811865476))
    assert unit_lookups() == [False, True, True]
    both("d.usda", mesh_collision_props=MeshCollisionBaseCfg(mesh_approximation_name="convexHull"))
    assert unit_lookups()[-1] is False
    (folder / "part.obj").write_text((folder / "part.obj").read_text().replace("v 1", "v 1.5", 1))
    edited = both("a.usda", scale=(1.0, 1.0, 1.0))
    assert unit_lookups()[-1] is False and edited["Props/a_meshes.usd"] != first["Props/a_meshes.usd"]
    assert Store(cache).stats()["entries"] >= 7


@pytest.mark.parametrize("pose", [((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), (1.5, 1.5, 1.5)),
                                  ((0.1, -2.0, 3e-7), (0.70710678, 0.0, 0.70710678, 0.0), (-1.0, 2.0, 1e-5))])
def test_the_sdf_main_layer_is_the_text_a_stage_authors(tmp_path, pose):
    """``main_layer`` (a plain text main layer through Sdf) writes the bytes the stage path writes."""
    from usdforge.rules.mesh.convert import main_layer
    from usdforge.rules.usd.stage import new_stage, save_layer, save_stage, set_local_transform

    translation, orientation, scale = (np.array(v) for v in pose)
    meshes, _ = new_stage("geometry", tmp_path / "Props" / "crate_meshes.usd")  # the reference resolves
    save_stage(meshes)
    stage, root = new_stage("crate", tmp_path / "stage.usda")
    geometry = stage.DefinePrim(root.GetPath().AppendChild("geometry"), "Xform")
    geometry.GetReferences().AddReference("./Props/crate_meshes.usd", "/geometry")
    geometry.SetInstanceable(True)
    set_local_transform(geometry, translation, orientation, scale)
    save_stage(stage)
    save_layer(main_layer(tmp_path / "sdf.usda", "crate", "./Props/crate_meshes.usd", translation, orientation, scale))
    assert (tmp_path / "sdf.usda").read_bytes() == (tmp_path / "stage.usda").read_bytes()


def test_the_rotation_of_the_cfg_is_trimeshs_matrix_to_the_bit():
    """``geometry_transform``'s own quaternion → matrix (no trimesh import on a cache hit) gives the bits
    trimesh's ``quaternion_matrix`` gave, so outputs keep their bytes: unit, unnormalised, tiny and zero
    quaternions."""
    from usdforge.rules.mesh.convert import _rotation_matrix

    rng = np.random.default_rng(7)
    quaternions = [*rng.normal(size=(300, 4)), *(rng.normal(size=(100, 4)) * 1e-7), np.zeros(4), [1, 0, 0, 0],
                   [0, 0, 0.7071067811865476, 0.7071067811865476], [1e-9, 0, 0, 0]]
    for q in quaternions:
        q = np.asarray(q, dtype=np.float64)
        assert np.array_equal(_rotation_matrix(q), trimesh.transformations.quaternion_matrix(q)), q


@pytest.mark.parametrize("scale", [None, (1.5, -2.0, 1e-5)])
def test_set_local_transform_authors_what_usdgeoms_xform_ops_author(scale):
    """``set_local_transform`` authors through the prim's generic API (no UsdGeom module loaded by a robot
    conversion): the text of the layer is UsdGeom.Xformable's ``ClearXformOpOrder`` + ``Add*Op``, on a
    prim with ops already and on a fresh one."""
    from pxr import Gf, Usd, UsdGeom

    from usdforge.rules.usd.stage import set_local_transform

    translation, orientation = (0.1, -2.0, 3e-7), (0.70710678, 0.0, 0.70710678, 0.0)
    texts = []
    for generic in (True, False):
        stage = Usd.Stage.CreateInMemory()
        prims = [stage.DefinePrim("/a", "Xform"), stage.DefinePrim("/b", "Camera")]
        UsdGeom.Xformable(prims[0]).AddRotateXYZOp().Set(Gf.Vec3f(1, 2, 3))
        for prim in prims:
            if generic:
                set_local_transform(prim, translation, orientation, scale)
                continue
            xformable = UsdGeom.Xformable(prim)
            xformable.ClearXformOpOrder()
            xformable.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*translation))
            w, x, y, z = orientation
            xformable.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(w, Gf.Vec3d(x, y, z)))
            if scale is not None:
                xformable.AddScaleOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*scale))
        texts.append(stage.GetRootLayer().ExportToString())
    assert texts[0] == texts[1]
