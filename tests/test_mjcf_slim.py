"""The slim MJCF intermediate (``rules.mjcf.slim``): a cfg-only rebuild reads MuJoCo's compiled model from
the build cache instead of compiling, and equals a cold conversion byte for byte; an edit of a file the
model references is a miss; a forged or damaged slim intermediate is rejected (compiled afresh, replaced)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import attrs
import mujoco
import numpy as np
import pytest

from usdforge.pipeline import converter_for
from usdforge.pipeline.cache import Store
from usdforge.rules.mjcf import slim
from usdforge.schemas import MjcfConverterCfg

_OBJ = "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
#: A mesh, a builtin texture, a tendon, an equality, a sensor on a joint, a site, a camera, a light, a key.
_MJCF = """<mujoco model="slim">
  <compiler autolimits="true"/>
  <option timestep="0.004" gravity="0 0 -9.7"/>
  <asset>
    <mesh name="part" file="part.obj"/>
    <texture name="grid" type="2d" builtin="checker" width="8" height="8" rgb1="1 1 1" rgb2="0 0 0"/>
    <material name="checks" texture="grid"/>
  </asset>
  <worldbody>
    <light name="sun" pos="0 0 3"/>
    <body name="base" pos="0 0 0.5">
      <geom type="box" size="0.1 0.1 0.05" mass="2" material="checks"/>
      <camera name="eye" pos="0.3 0 0.2"/>
      <body name="arm" pos="0 0 0.1">
        <joint name="shoulder" axis="0 0 1" range="-1 1" damping="0.5"/>
        <geom type="mesh" mesh="part" mass="0.1"/>
        <site name="tip" pos="0 0 0.2"/>
        <body name="finger" pos="0 0 0.2">
          <joint name="slide_a" type="slide" axis="1 0 0" range="0 0.04"/>
          <geom type="box" size="0.01 0.01 0.02" mass="0.05"/>
        </body>
        <body name="finger2" pos="0 0 0.2">
          <joint name="slide_b" type="slide" axis="-1 0 0" range="0 0.04"/>
          <geom type="box" size="0.01 0.01 0.02" mass="0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon><fixed name="split"><joint joint="slide_a" coef="0.5"/><joint joint="slide_b" coef="0.5"/></fixed></tendon>
  <equality><joint name="mirror" joint1="slide_a" joint2="slide_b"/></equality>
  <actuator><position name="turn" joint="shoulder" kp="20"/></actuator>
  <sensor><jointpos name="angle" joint="shoulder"/></sensor>
  <keyframe><key name="home" qpos="0.3 0.01 0.01" ctrl="0.3"/></keyframe>
</mujoco>
"""


def _outputs(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".usdforge.toml")}


def _hits(store: Store, kind: str) -> int:
    return store.stats()["last_build"].get(kind, {}).get("hits", 0)


@pytest.fixture
def compiles(monkeypatch) -> list[int]:
    """One item per ``MjSpec.compile`` call while the test runs."""
    calls: list[int] = []
    original = mujoco.MjSpec.compile

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(mujoco.MjSpec, "compile", counted)
    return calls


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """The fixture converted once with a cache (what each test's rebuild starts from)."""
    root = tmp_path_factory.mktemp("slim")
    (root / "part.obj").write_text(_OBJ)
    (root / "model.xml").write_text(_MJCF)
    cfg = MjcfConverterCfg(asset_path=str(root / "model.xml"), articulation_cfg=True)
    warnings.simplefilter("ignore")
    converter_for("mjcf")(attrs.evolve(cfg, usd_dir=str(root / "out")), cache=Store(root / "cache"))
    entries = [e for e in (root / "cache" / "entries").rglob("*") if e.is_file()
               and "slim.bin" in json.loads(e.read_text())["files"]]
    assert len(entries) == 1, "the cold conversion stored one slim intermediate"
    return {"root": root, "cfg": cfg, "key": json.loads(entries[0].read_text())["key"]}


def _rebuild(built: dict, name: str, **edits) -> tuple[dict[str, bytes], dict[str, bytes], Store]:
    """(rebuild with the cache, cold conversion without it) of the cfg with ``edits``."""
    root, cfg = built["root"], attrs.evolve(built["cfg"], **edits)
    store = Store(root / "cache", build=name)
    converter_for("mjcf")(attrs.evolve(cfg, usd_dir=str(root / f"{name}-inc")), cache=store)
    converter_for("mjcf")(attrs.evolve(cfg, usd_dir=str(root / f"{name}-cold")), cache=False)
    return _outputs(root / f"{name}-inc"), _outputs(root / f"{name}-cold"), store


def test_a_cfg_edit_rebuilds_without_compiling(built, compiles):
    """A drive-gain edit: the compiled model comes from the slim intermediate (no MuJoCo compile, no
    fallback), and the output equals a cold conversion of the same cfg byte for byte."""
    fallbacks = len(slim.compiles)
    store = Store(built["root"] / "cache", build="gain")
    cfg = attrs.evolve(built["cfg"], override_gain_prm=(321.0,), usd_dir=str(built["root"] / "gain-inc"))
    converter_for("mjcf")(cfg, cache=store)
    assert not compiles and len(slim.compiles) == fallbacks and _hits(store, "mjcf-slim") == 1
    assert "mjcf-meshes" not in store.stats()["last_build"]  # the shapes restored: no mesh array read
    converter_for("mjcf")(attrs.evolve(cfg, usd_dir=str(built["root"] / "gain-cold")), cache=False)
    assert _outputs(built["root"] / "gain-inc") == _outputs(built["root"] / "gain-cold")


def test_the_meshes_arrays_are_read_when_the_shapes_are_authored(built):
    """An edit that authors the shapes (``merge_mesh``) reads the meshes' arrays from their own entry (no
    compile); with that entry forged, they come from a compile of the spec. Both equal a cold conversion."""
    meshes_key = slim._meshes_key(built["key"])
    fallbacks = len(slim.compiles)
    rebuilt, cold, store = _rebuild(built, "meshes", merge_mesh=True)
    assert rebuilt == cold and len(slim.compiles) == fallbacks and _hits(store, "mjcf-meshes") == 1
    good = Store(built["root"] / "cache").get_entry(meshes_key).files["slim-meshes.bin"]
    try:
        size = int.from_bytes(good[:8], "little")
        header = json.loads(good[8:8 + size])
        header["sizes"]["nmeshvert"] += 1  # another model's meshes
        text = json.dumps(header).encode()
        Store(built["root"] / "cache").put_entry(meshes_key, {"slim-meshes.bin": len(text).to_bytes(8, "little")
                                                              + text + good[8 + size:]})
        rebuilt, cold, store = _rebuild(built, "meshes-forged", merge_mesh=True, make_instanceable=False)
        assert rebuilt == cold and len(slim.compiles) == fallbacks + 1
    finally:
        Store(built["root"] / "cache").put_entry(meshes_key, {"slim-meshes.bin": good})


def test_the_slim_model_reads_as_the_compiled_one(built):
    """Every held field, name (accessors and ``id2name``) and ``opt``/``stat``/``vis.map`` value equals
    MuJoCo's; a field it does not hold comes from a compile of the same spec, made on first use."""
    spec = mujoco.MjSpec.from_file(str(built["root"] / "model.xml"))
    model = spec.copy().compile()
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    decoded = slim.decode(slim.encode(model, data, ["a warning"]))
    fallback = slim._Fallback(lambda: (model, data))
    seen = slim.SlimModel(decoded, fallback, lambda: slim.decode_meshes(slim.encode_meshes(model), decoded))
    seen_data = slim.SlimData(decoded, fallback)
    for name in slim.FIELDS:
        got, want = getattr(seen, name), getattr(model, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert np.array_equal(seen_data.xquat, data.xquat) and seen.nbody == model.nbody == 5
    for objtype, accessor in slim._OBJECTS.items():
        count = getattr(model, slim._NAMED[accessor][1])
        for index in range(count):
            assert slim.id2name(seen, objtype, index) == mujoco.mj_id2name(model, objtype, index)
            assert getattr(seen, accessor)(index).name == getattr(model, accessor)(index).name
    assert seen.opt.timestep == 0.004 and list(seen.opt.gravity) == [0, 0, -9.7]
    assert seen.stat.extent == model.stat.extent and seen.vis.map.zfar == model.vis.map.zfar
    assert decoded.warnings == ["a warning"] and not fallback._done
    assert np.array_equal(seen.body_pos, model.body_pos) and fallback._done  # not held: compiled


def test_an_edit_of_a_referenced_file_is_a_miss(built, compiles):
    """Editing the mesh file the model references: the slim intermediate is not reused (compiled again)
    and the rebuild equals a cold conversion of the edited source."""
    mesh = built["root"] / "part.obj"
    before = mesh.read_text()
    try:
        mesh.write_text(before.replace("v 0 0 0.1", "v 0 0 0.35"))
        rebuilt, cold, store = _rebuild(built, "mesh", override_gain_prm=(321.0,))
    finally:
        mesh.write_text(before)
        # MuJoCo's in-process asset cache may keep the edited mesh for the restored file (same path, an
        # mtime within its resolution): the later tests compile the original.
        mujoco.mj_clearCache(mujoco.mj_getCache())
    assert _hits(store, "mjcf-slim") == 0 and compiles
    assert rebuilt == cold


def test_a_forged_slim_intermediate_is_rejected(built, compiles):
    """Forged bytes are refused by ``decode``; a consistent cache entry (objects, claim and entry agree)
    holding a non-finite value is a miss: the model is compiled, the output equals a cold conversion,
    and the entry is replaced by a sound one."""
    store = Store(built["root"] / "cache")
    good = store.get_entry(built["key"]).files["slim.bin"]
    slim.decode(good)
    size = int.from_bytes(good[:8], "little")
    header = json.loads(good[8:8 + size])

    def forged(edit) -> bytes:
        changed = json.loads(json.dumps(header))
        edit(changed)
        text = json.dumps(changed).encode()
        return len(text).to_bytes(8, "little") + text + good[8 + size:]

    def entry(name):
        return next(item for item in header["arrays"] if item[0] == name)

    def first(changed, name):
        return next(item for item in changed["arrays"] if item[0] == name)

    mass = entry("body_mass")
    nan = bytearray(good)
    nan[8 + size + mass[3]:8 + size + mass[3] + 8] = np.array([np.nan]).tobytes()
    bad = [b"", b"\x00garbage", good[:len(good) // 2], bytes(nan),
           forged(lambda h: first(h, "body_mass").__setitem__(1, "<i8")),          # another dtype
           forged(lambda h: first(h, "geom_size").__setitem__(2, [h["sizes"]["ngeom"] + 1, 3])),  # rows ≠ ngeom
           forged(lambda h: first(h, "geom_pos").__setitem__(0, "os.system")),      # an unknown field
           forged(lambda h: h["sizes"].__setitem__("nbody", -7)),
           forged(lambda h: h["arrays"].pop()),                                     # a field missing
           forged(lambda h: h.__setitem__("format", 0)),
           forged(lambda h: first(h, "opt.gravity").__setitem__(2, [2])),            # a fixed size changed
           # Arrays are views of one copy of the bytes: two spans sharing bytes (one array's writes would
           # reach the other) or a gap is refused, the spans follow one another as ``encode`` lays them out.
           forged(lambda h: h["arrays"][1].__setitem__(3, h["arrays"][0][3])),
           forged(lambda h: h["arrays"][-1].__setitem__(3, h["arrays"][-1][3] + 1))]
    ids = entry("geom_bodyid")  # an index past the bodies: the authors would index past an array
    assert ids[1] == "<i4"
    past = bytearray(good)
    past[8 + size + ids[3]:8 + size + ids[3] + 4] = np.array([header["sizes"]["nbody"]], np.int32).tobytes()
    bad.append(bytes(past))
    for blob in bad:
        with pytest.raises(ValueError):
            slim.decode(blob)
    held = slim.decode(good).arrays  # writable, each its own bytes (as copies were)
    assert all(value.flags.writeable for value in held.values())
    spans = sorted((value.__array_interface__["data"][0], value.nbytes) for value in held.values() if value.nbytes)
    assert all(start + length <= following for (start, length), (following, _) in zip(spans, spans[1:]))
    # The small float arrays are checked together: the one not finite is still named; a float scalar too.
    with pytest.raises(ValueError, match="array body_mass not finite"):
        slim.decode(bytes(nan))
    scalar = next(name for name, value in header["scalars"].items() if type(value) is float)
    for value in (float("inf"), float("nan"), -1e31):
        with pytest.raises(ValueError, match=f"scalar {scalar}"):
            slim.decode(forged(lambda h: h["scalars"].__setitem__(scalar, value)))
    store.put_entry(built["key"], {"slim.bin": bytes(nan)})
    rebuilt, cold, store = _rebuild(built, "forged", self_collision=True)
    assert rebuilt == cold and compiles and _hits(store, "mjcf-slim") == 0
    assert slim.decode(Store(built["root"] / "cache").get_entry(built["key"]).files["slim.bin"])


def test_forged_textures_trailing_bytes_and_wide_int_scalars_are_refused():
    """A texture whose width × height × channels wraps around in int64 (each huge), or whose channel count
    no image has (texture_png's KeyError, then a traceback), bytes after the last array, and an integer
    scalar wider than MuJoCo's C int were accepted; each is refused (the model is compiled instead)."""
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><asset><texture name="t" type="2d" builtin="checker" width="8" height="8" rgb1="1 0 0" '
        'rgb2="0 1 0"/><material name="m" texture="t"/></asset><worldbody><body><joint type="hinge"/>'
        '<geom size=".1" material="m" mass="1"/></body></worldbody></mujoco>')
    data = mujoco.MjData(model)
    good = slim.encode(model, data, [])
    slim.decode(good)
    integer = next(name for name, value in json.loads(good[8:8 + int.from_bytes(good[:8], "little")])["scalars"].items()
                   if type(value) is int)

    def textured(width: int, height: int, channels: int) -> bytes:
        def edit(sizes, arrays):
            arrays["tex_width"][:], arrays["tex_height"][:], arrays["tex_nchannel"][:] = width, height, channels
        return _reencoded(good, edit)

    def scalar(value: int) -> bytes:
        size = int.from_bytes(good[:8], "little")
        header = json.loads(good[8:8 + size])
        header["scalars"][integer] = value
        text = json.dumps(header).encode()
        return len(text).to_bytes(8, "little") + text + good[8 + size:]

    slim.decode(textured(8, 8, 3))  # re-encoded as it was: accepted
    for blob in (textured(2 ** 21, 2 ** 21, 2 ** 22), textured(8, 8, 2), good + b"\0" * 64, scalar(1 << 80),
                 scalar(-(1 << 31) - 1)):
        with pytest.raises(ValueError):
            slim.decode(blob)


def _reencoded(blob: bytes, edit) -> bytes:
    """``blob`` (a slim intermediate's or its meshes' bytes) with ``edit(sizes, arrays)`` applied, written
    back consistently (header offsets and sizes agree): what a forger who knows the format writes."""
    size = int.from_bytes(blob[:8], "little")
    header, body = json.loads(blob[8:8 + size]), blob[8 + size:]
    arrays = {name: np.frombuffer(body, np.dtype(dtype), int(np.prod(shape)), offset).reshape(shape).copy()
              for name, dtype, shape, offset in header["arrays"]}
    edit(header["sizes"], arrays)
    header["arrays"], chunks, offset = [], [], 0
    for name, value in arrays.items():
        value = np.ascontiguousarray(value)
        header["arrays"].append([name, value.dtype.str, list(value.shape), offset])
        chunks.append(value.tobytes())
        offset += value.nbytes
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + b"".join(chunks)


def test_ids_past_their_own_target_and_files_outside_the_roots_are_refused(built, compiles, tmp_path):
    """Ids whose target depends on a type (a mesh geom's mesh, a sensor's object), texels and each mesh's faces are bounded
    by their own table (a bound by the largest size let an author index past an array); a consistent
    entry naming a texture file outside the model's roots (passed by ``decode``: any path is a path) is a
    miss: the model is compiled, nothing outside is read, and the output equals a cold conversion."""
    store = Store(built["root"] / "cache")
    good = store.get_entry(built["key"]).files["slim.bin"]
    held = slim.decode(good)
    meshes = store.get_entry(slim._meshes_key(built["key"])).files[slim._MESH_FILE]
    slim.decode_meshes(meshes, held)
    mesh_geom = int(np.flatnonzero(held.arrays["geom_type"] == int(mujoco.mjtGeom.mjGEOM_MESH))[0])
    for edit in (lambda sizes, a: a["geom_dataid"].__setitem__(mesh_geom, sizes["nmesh"]),
                 lambda sizes, a: a["tex_pathadr"].__setitem__(0, sizes["npaths"]),
                 lambda sizes, a: a["tex_adr"].__setitem__(0, sizes["ntexdata"]),
                 # a sensor's, a joint equality's and a tendon wrap's joint (the equality's eq_objtype is
                 # no joint: its type comes from eq_type)
                 lambda sizes, a: a["sensor_objid"].__setitem__(0, sizes["njnt"]),
                 lambda sizes, a: a["eq_obj2id"].__setitem__(0, sizes["njnt"]),
                 lambda sizes, a: a["wrap_objid"].__setitem__(0, sizes["njnt"])):
        with pytest.raises(ValueError):
            slim.decode(_reencoded(good, edit))
    with pytest.raises(ValueError, match="mesh_facenormal of mesh 0"):  # bounded by nothing before
        slim.decode_meshes(_reencoded(meshes, lambda sizes, a: a["mesh_facenormal"].__setitem__(
            (0, 0), int(held.arrays["mesh_normalnum"][0]))), held)
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"not for the output")

    def outside(sizes, arrays):
        arrays["tex_pathadr"][:] = len(arrays["paths"])
        arrays["paths"] = np.frombuffer(arrays["paths"].tobytes() + str(secret).encode() + b"\0", np.uint8)
        sizes["npaths"] = len(arrays["paths"])

    forged = _reencoded(good, outside)
    slim.decode(forged)
    store.put_entry(built["key"], {"slim.bin": forged}, kind="mjcf-slim")
    rebuilt, cold, store = _rebuild(built, "outside", self_collision=True)
    assert rebuilt == cold and compiles and _hits(store, "mjcf-slim") == 0
    assert b"not for the output" not in b"".join(rebuilt.values())


def test_the_compile_runs_its_alongside_work_on_a_thread_and_joins_it(tmp_path):
    """``compile_repaired(..., alongside)``: the work (a one-off conversion's USD imports) runs on another
    thread while MuJoCo compiles, is finished when the compile returns, runs once however many repairs,
    and its failure is not the compile's (the caller meets it when it does the work itself)."""
    import threading

    import mujoco

    from usdforge.rules.mjcf.load import compile_repaired

    model = tmp_path / "m.xml"
    model.write_text('<mujoco><worldbody><body><freejoint/><geom size="0.1"/></body></worldbody></mujoco>')
    threads: list[str] = []

    def work() -> None:
        threads.append(threading.current_thread().name)

    loaded = compile_repaired(model, mujoco.MjSpec.from_file(str(model)), work)
    assert loaded.model.nbody == 2 and len(threads) == 1 and threads[0] != threading.current_thread().name

    def failing() -> None:
        threads.append("failed")
        raise ImportError("no such module")

    assert compile_repaired(model, mujoco.MjSpec.from_file(str(model)), failing).model.nbody == 2
    assert threads[-1] == "failed"
