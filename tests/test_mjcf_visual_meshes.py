"""Visual-only meshes set aside (``rules.mjcf.visual_meshes``): MuJoCo compiles a stand-in for a mesh that
only visual geoms use, the geoms are authored from the file. What the rule reads of the compiled model is
MuJoCo's full compile's, the USD triangles are MuJoCo's own in the world, and a cfg-only rebuild over the
slim intermediate equals a cold conversion."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import attrs
import mujoco
import numpy as np
import pytest

from usdforge.pipeline import converter_for
from usdforge.pipeline.cache import Store
from usdforge.rules.mjcf.bodies import pose_matrix
from usdforge.rules.mjcf.load import checked_spec, compile_repaired, parse_spec, set_aside_file_textures
from usdforge.rules.mjcf.slim import FIELDS
from usdforge.schemas import MjcfConverterCfg

#: An asymmetric tetrahedron away from its file's origin: MuJoCo moves it into its inertial frame.
_POINTS = np.array([[0.1, 0.2, 0.3], [0.4, 0.2, 0.3], [0.1, 0.35, 0.3], [0.1, 0.2, 0.5]])
_FACES = ((0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3))
#: shell (scaled, in a rotated frame) and massless (mass 0 on a body without an inertial) are set aside;
#: hull (a collider), heavy (gives its body mass) and moved (refpos) are compiled.
_MJCF = """<mujoco model="visual">
  <compiler angle="degree" meshdir="meshes"/>
  <asset>
    <mesh name="shell" file="part.stl" scale="2 1 0.5"/>
    <mesh name="massless" file="part.stl" smoothnormal="true"/>
    <mesh name="hull" file="part.stl"/>
    <mesh name="heavy" file="part.stl"/>
    <mesh name="moved" file="part.stl" refpos="0.1 0 0"/>
  </asset>
  <worldbody>
    <body name="base" pos="0 0 1" euler="0 0 30">
      <freejoint/>
      <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>
      <frame pos="0.1 0.2 0.3" euler="10 20 30">
        <geom name="look" type="mesh" mesh="shell" contype="0" conaffinity="0" pos="0.05 0 0" euler="0 90 0"/>
      </frame>
      <geom type="mesh" mesh="hull"/>
      <body name="link" pos="0.3 0 0">
        <joint name="hinge" axis="0 1 0"/>
        <geom type="mesh" mesh="heavy" contype="0" conaffinity="0"/>
        <geom name="bare" type="mesh" mesh="massless" contype="0" conaffinity="0" mass="0" quat="0 1 0 0"/>
        <geom type="mesh" mesh="moved" contype="0" conaffinity="0" mass="0"/>
      </body>
    </body>
  </worldbody>
  <actuator><position joint="hinge" kp="10"/></actuator>
</mujoco>
"""


def _binary_stl(path: Path, points: np.ndarray = _POINTS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"\0" * 80 + struct.pack("<I", len(_FACES)))
        for face in _FACES:
            handle.write(struct.pack("<12fH", 0.0, 0.0, 0.0, *points[list(face)].reshape(-1), 0))


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("visual")
    _binary_stl(root / "meshes" / "part.stl")
    _binary_stl(root / "meshes" / "nan.stl", np.where(_POINTS == 0.5, np.nan, _POINTS))
    (root / "meshes" / "ascii.stl").write_text("solid a\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\n"
                                               "vertex 1 0 0\nvertex 0 1 0\nendloop\nendfacet\nendsolid a\n")
    (root / "model.xml").write_text(_MJCF)
    return root / "model.xml"


def _full_compile(path: Path) -> mujoco.MjModel:
    spec = parse_spec(path)
    set_aside_file_textures(spec, path.parent)
    return compile_repaired(path, spec).model


@pytest.mark.parametrize("edit, aside", [
    ((), {"shell", "massless"}),
    (('<asset>', '<asset>\n    <mesh name="text" file="ascii.stl"/>'), {"shell", "massless"}),  # unused
    (('<actuator>', '<sensor><distance geom1="bare" geom2="look"/></sensor><actuator>'), set()),  # both named
    (('<actuator>', '<contact><pair geom1="look" geom2="bare"/></contact><actuator>'), set()),
    (('mass="0" quat', 'quat'), {"shell"}),  # massless's body has no inertial: its geom now weighs
    (('<compiler ', '<compiler inertiafromgeom="true" '), {"massless"}),
    (('<compiler ', '<compiler fusestatic="true" '), {"massless"}),
    (('<freejoint/>', '<freejoint/><camera name="eye"/>'), set()),  # the extent MuJoCo computes
    (('<compiler ', '<statistic extent="2"/><compiler '), {"shell", "massless"}),
    (('<freejoint/>', '<freejoint/><camera name="eye"/>', '<compiler ', '<statistic extent="2"/><compiler '),
     {"shell", "massless"}),
    (('file="part.stl" scale="2 1 0.5"', 'file="ascii.stl"'), {"massless"}),  # MuJoCo's repair path
    (('file="part.stl" scale="2 1 0.5"', 'file="nan.stl"'), {"massless"}),  # likewise
    (('scale="2 1 0.5"', 'scale="-2 1 0.5"'), {"massless"}),
    (('<compiler ', '<compiler discardvisual="true" '), set()),
])
def test_only_meshes_that_decide_nothing_but_their_triangles_are_set_aside(model, tmp_path, edit, aside):
    text = _MJCF
    for old, new in zip(edit[::2], edit[1::2]):
        text = text.replace(old, new, 1)
    path = model.parent / f"edit-{tmp_path.name}.xml"
    path.write_text(text)
    _, spec, _, visual = checked_spec(path)
    assert set(visual) == aside
    for mesh in spec.meshes:  # a set-aside mesh is a stand-in MuJoCo compiles without reading a file
        assert (mesh.file == "") == (mesh.name in aside)


def test_the_compiled_model_is_the_full_compile_and_the_usd_triangles_are_mujocos(model):
    full = _full_compile(model)
    path, spec, _, visual = checked_spec(model)
    set_aside = compile_repaired(path, spec).model
    assert set(visual) == {"shell", "massless"} and visual["shell"].scale == (2.0, 1.0, 0.5)
    aside_geoms = {full.geom(name).id for name in ("look", "bare")}
    for field in FIELDS:  # everything the rule reads, but the set-aside meshes and their geoms' poses
        if field.startswith("mesh_") or field == "paths":
            continue
        ours, theirs = np.asarray(getattr(set_aside, field)), np.asarray(getattr(full, field))
        if field in ("geom_pos", "geom_quat", "geom_size"):
            keep = [g for g in range(full.ngeom) if g not in aside_geoms]
            ours, theirs = ours[keep], theirs[keep]
        np.testing.assert_array_equal(ours, theirs, err_msg=field)

    # The USD: each set-aside geom's triangles in the world are MuJoCo's (its compiled vertices, float32).
    from pxr import Usd, UsdGeom

    out = model.parent / "out"
    cfg = MjcfConverterCfg(asset_path=str(model), usd_dir=str(out))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converter_for("mjcf")(cfg, cache=Store(model.parent / "cache"))
    data = mujoco.MjData(full)
    mujoco.mj_kinematics(full, data)
    stage = Usd.Stage.Open(str(out / "model.usd"))
    cache = UsdGeom.XformCache()
    for link, geom, mesh_name in (("base", "look", "shell"), ("link", "bare", "massless")):
        prim = stage.GetPrimAtPath(f"/visual/{link}/visuals/{geom}/{mesh_name}")
        assert prim.IsValid(), (geom, mesh_name)
        g = full.geom(geom).id
        mesh = int(full.geom_dataid[g])
        world = np.asarray(cache.GetLocalToWorldTransform(prim)).T
        points = np.asarray(prim.GetAttribute("points").Get(), dtype=np.float64)
        faces = np.asarray(prim.GetAttribute("faceVertexIndices").Get()).reshape(-1, 3)
        ours = (points @ world[:3, :3].T + world[:3, 3])[faces]
        body = int(full.geom_bodyid[g])
        place = pose_matrix(data.xpos[body], data.xquat[body]) @ pose_matrix(full.geom_pos[g], full.geom_quat[g])
        vertices = full.mesh_vert[full.mesh_vertadr[mesh]:full.mesh_vertadr[mesh] + full.mesh_vertnum[mesh]]
        triangles = full.mesh_face[full.mesh_faceadr[mesh]:full.mesh_faceadr[mesh] + full.mesh_facenum[mesh]]
        theirs = (vertices @ place[:3, :3].T + place[:3, 3])[triangles]
        assert len(ours) == len(theirs) == len(_FACES)
        # Each of MuJoCo's triangles is one of ours, corner for corner in the same winding (any rotation).
        for triangle in theirs:
            distance = min(np.abs(np.roll(triangle, k, axis=0) - candidate).max()
                           for candidate in ours for k in range(3))
            assert distance < 1e-6 * np.ptp(theirs.reshape(-1, 3), axis=0).max(), (geom, distance)
        # And each corner's normal is MuJoCo's at that vertex (hard edges: the fallback (0, 0, 1) in the
        # mesh's frame; smoothnormal: the area-weighted sum).
        normals = np.asarray(prim.GetAttribute("primvars:normals").Get(), dtype=np.float64)
        corner_normals = normals[np.asarray(prim.GetAttribute("primvars:normals:indices").Get())] @ world[:3, :3].T
        facenormal = full.mesh_facenormal[full.mesh_faceadr[mesh]:full.mesh_faceadr[mesh] + full.mesh_facenum[mesh]]
        compiled = full.mesh_normal[full.mesh_normaladr[mesh]:full.mesh_normaladr[mesh] + full.mesh_normalnum[mesh]]
        at_vertex = {tuple(np.round(theirs.reshape(-1, 3)[k], 6)): compiled[n] @ place[:3, :3].T
                     for k, n in enumerate(facenormal.reshape(-1))}
        for corner, normal in zip(ours.reshape(-1, 3), corner_normals):
            np.testing.assert_allclose(normal, at_vertex[tuple(np.round(corner, 6))], atol=1e-5, err_msg=geom)


def test_a_cfg_only_rebuild_over_the_slim_intermediate_equals_a_cold_conversion(model):
    root = model.parent
    cfg = MjcfConverterCfg(asset_path=str(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converter_for("mjcf")(attrs.evolve(cfg, usd_dir=str(root / "first")), cache=Store(root / "rebuild-cache"))
        for name, edit in (("gain", {"override_gain_prm": (33.0,)}), ("colliders", {"collision_from_visuals": True})):
            store = Store(root / "rebuild-cache", build=name)
            edited = attrs.evolve(cfg, **edit)
            converter_for("mjcf")(attrs.evolve(edited, usd_dir=str(root / f"{name}-inc")), cache=store)
            assert store.stats()["last_build"]["mjcf-slim"]["hits"] == 1
            converter_for("mjcf")(attrs.evolve(edited, usd_dir=str(root / f"{name}-cold")), cache=False)
            assert _outputs(root / f"{name}-inc") == _outputs(root / f"{name}-cold"), name


def _outputs(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".usdforge.toml")}


def test_set_aside_normals_are_mujocos_for_hard_and_smooth_edges_at_any_scale():
    """``mujoco_normals`` against MuJoCo's compile of the same vertices: closed fans of uneven triangles
    (hard edges at the rim and the tips, so faces are dropped at some vertices and kept at others), with
    and without ``smoothnormal``, unscaled and non-uniformly scaled."""
    from usdforge.rules.mjcf.visual_meshes import mujoco_normals

    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(4, 9))
        angles = np.sort(rng.uniform(0.0, 2.0 * np.pi, n))
        radii = rng.uniform(0.5, 1.5, n)
        ring = np.c_[radii * np.cos(angles), radii * np.sin(angles), rng.uniform(-0.3, 0.3, n)]
        points = np.vstack([[0.0, 0.0, rng.uniform(0.1, 1.0)], ring, [0.0, 0.0, -rng.uniform(0.1, 1.0)]])
        points = points.astype(np.float32).astype(np.float64)  # what MuJoCo keeps of them
        faces = np.array([(0, i + 1, (i + 1) % n + 1) for i in range(n)]
                         + [(n + 1, (i + 1) % n + 1, i + 1) for i in range(n)])
        scale = np.round(rng.uniform(0.2, 3.0, 3), 3) if trial % 2 else np.ones(3)
        smooth = trial % 4 >= 2

        def text(values) -> str:
            return " ".join(f"{float(v):.9g}" for v in np.ravel(values))

        model = mujoco.MjModel.from_xml_string(
            f'<mujoco><asset><mesh name="m" scale="{text(scale)}" smoothnormal="{str(smooth).lower()}" '
            f'vertex="{text(points)}" face="{text(faces.astype(float))}"/></asset><worldbody>'
            '<geom type="mesh" mesh="m" contype="0" conaffinity="0"/></worldbody></mujoco>')
        assert np.array_equal(model.mesh_face, faces)  # MuJoCo kept the vertices in order
        frame = pose_matrix(model.mesh_pos[0], model.mesh_quat[0])[:3, :3]  # its normals are in the mesh frame
        theirs = np.zeros_like(points)
        theirs[model.mesh_face.reshape(-1)] = (model.mesh_normal @ frame.T)[model.mesh_facenormal.reshape(-1)]
        ours = mujoco_normals(points * scale, faces, smooth, tuple(scale))
        np.testing.assert_allclose(ours, theirs, atol=1e-5, err_msg=f"trial {trial}")
