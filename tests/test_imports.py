"""What a process imports: a one-off conversion pays only for the libraries its source format needs
(issue #18). Each check runs in a fresh interpreter and reads its ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: Top-level packages no conversion of an MJCF model (whose meshes MuJoCo reads) may import.
NOT_FOR_MJCF = ("trimesh", "scipy", "networkx", "PIL", "jax", "glfw")


def imported_after(code: str, cwd: Path, full: bool = False) -> set[str]:
    """Top-level package names (``full``: every module name) in ``sys.modules`` after running ``code`` in
    a fresh interpreter."""
    names = "sys.modules" if full else "{m.split('.')[0] for m in sys.modules}"
    script = code + f"\nimport json, sys\nprint(json.dumps(sorted({names})))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_usdforge_and_its_cli_imports_no_heavy_library(tmp_path):
    modules = imported_after("import usdforge\nimport usdforge.pipeline.cli", tmp_path)
    assert not modules & {"pxr", "trimesh", "scipy", "mujoco", "jax", "lxml"}, sorted(modules)


@pytest.mark.parametrize("model", ["robotiq_2f85/2f85.xml", "skydio_x2/x2.xml"])
def test_cli_conversion_of_an_mjcf_model_imports_neither_trimesh_nor_scipy(tmp_path, shared_dir, model):
    # robotiq_2f85: STL meshes, which MuJoCo decodes (the USD geometry is MuJoCo's compiled meshes);
    # skydio_x2: OBJ meshes and ellipsoids, tessellated as MuJoCo's builtin icosphere.
    source = shared_dir / "corpus" / "mjcf" / model
    out = tmp_path / "out"
    code = ("from usdforge.pipeline.cli import main\n"
            f"assert main(['convert', '-q', {str(source)!r}, {str(out)!r}]) == 0\n")
    loaded = imported_after(code, tmp_path, full=True)
    modules = {name.split(".")[0] for name in loaded}
    assert (out / f"{source.stem}.usd").is_file() and (out / "payloads" / "geometry.usd").is_file()
    assert "mujoco" in modules and "pxr" in modules
    # Cameras, lights, physics materials and collision groups through pxr.Usd alone (schema_attribute).
    usd_modules = {"pxr.UsdGeom", "pxr.UsdPhysics", "pxr.UsdShade", "pxr.UsdLux", "usdforge.schemas.writer"}
    assert "pxr.Usd" in loaded and not loaded & usd_modules, sorted(loaded & usd_modules)
    # skydio_x2's texture file is decoded by Pillow to check that it is an image; robotiq_2f85 has none.
    forbidden = set(NOT_FOR_MJCF) - ({"PIL"} if model.startswith("skydio") else set())
    assert not modules & forbidden, sorted(modules & forbidden)


def test_cli_conversion_of_a_urdf_without_meshes_imports_neither_trimesh_nor_mujoco(tmp_path, shared_dir):
    source = shared_dir / "corpus" / "urdf" / "cartpole" / "cartpole.urdf"
    out = tmp_path / "out"
    code = ("from usdforge.pipeline.cli import main\n"
            f"assert main(['convert', '-q', {str(source)!r}, {str(out)!r}]) == 0\n")
    modules = imported_after(code, tmp_path, full=True)
    assert (out / "cartpole.usd").is_file()
    # Nor what a one-off conversion does not need (issue #26): importlib.metadata (with email and csv) for
    # library versions, cattrs' subclass strategy for the cfg converter; a TOML reader (no config file to read),
    # subprocess (no xacro to run), socket and uuid (a host name and random suffixes come from os).
    unneeded = {"trimesh", "scipy", "mujoco", "jax", "importlib.metadata", "email", "csv", "cattrs.strategies",
                "tomli", "tomllib", "subprocess", "socket", "uuid"}
    assert not modules & unneeded, sorted(modules & unneeded)
    # The robot is written through Sdf and its Isaac Lab cfg read through pxr.Usd alone: the Python modules
    # of UsdGeom, UsdPhysics and UsdShade cost about 40 ms of a one-off conversion. A cfg with no PhysX,
    # Newton or MuJoCo property group builds none of those cfg classes either.
    usd_modules = {"pxr.UsdGeom", "pxr.UsdPhysics", "pxr.UsdShade", "pxr.UsdLux"}
    backends = {"usdforge.schemas.physx", "usdforge.schemas.newton", "usdforge.schemas.mujoco",
                "usdforge.schemas.writer"}
    assert "pxr.Usd" in modules and not modules & (usd_modules | backends), sorted(modules & (usd_modules | backends))


def test_a_property_group_table_loads_the_backends_it_may_name(tmp_path):
    # The backends' cfg modules load when a group's table is first read, so a table naming a PhysX class
    # finds it, and a cfg's (un)structuring without one loads none of them.
    code = ("import sys\n"
            "from usdforge.schemas import MeshConverterCfg, cfg_from_toml, cfg_to_toml\n"
            "text = cfg_to_toml(MeshConverterCfg(asset_path='a.obj'))\n"
            "assert 'usdforge.schemas.physx' not in sys.modules\n"
            "cfg = cfg_from_toml(text + '\\n[collision_props]\\ntype = \"PhysxCollisionPropertiesCfg\"\\n"
            "contact_offset = 0.02\\n', MeshConverterCfg)\n"
            "assert type(cfg.collision_props).__name__ == 'PhysxCollisionPropertiesCfg', cfg.collision_props\n"
            "assert 'type = \"PhysxCollisionPropertiesCfg\"' in cfg_to_toml(cfg)\n")
    modules = imported_after(code, tmp_path, full=True)
    assert "usdforge.schemas.physx" in modules


def test_cli_conversion_of_a_mesh_file_reads_it_with_trimesh(tmp_path):
    # The other side of the rule: formats MuJoCo does not read still go through trimesh (one mesh reader).
    source = tmp_path / "box.obj"
    source.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    code = ("from usdforge.pipeline.cli import main\n"
            f"assert main(['convert', '-q', {str(source)!r}, {str(tmp_path / 'out')!r}]) == 0\n")
    modules = imported_after(code, tmp_path)
    assert "trimesh" in modules and "mujoco" not in modules and "jax" not in modules


#: What a URDF conversion whose meshes Assimp reads (issue #26) must not import: trimesh and what it pulls in.
NOT_FOR_ASSIMP_MESHES = ("trimesh", "scipy", "networkx", "collada", "PIL", "mujoco", "jax")


@pytest.mark.parametrize("model, package", [
    ("simple_humanoid/example-robot-data/robots/simple_humanoid_description/urdf/simple_humanoid.urdf",
     "example-robot-data=simple_humanoid/example-robot-data"),   # one binary STL
    ("pr2/example-robot-data/robots/pr2_description/urdf/pr2.urdf",
     "example-robot-data=pr2/example-robot-data"),                # 76 STL meshes
])
def test_cli_conversion_of_a_urdf_whose_meshes_assimp_reads_imports_no_trimesh(tmp_path, shared_dir, model, package):
    corpus = shared_dir / "corpus" / "urdf"
    name, folder = package.split("=")
    source = corpus / model
    out = tmp_path / "out"
    code = ("from usdforge.pipeline.cli import main\n"
            f"assert main(['convert', '-q', {str(source)!r}, {str(out)!r}, '--cache', {str(tmp_path / 'cache')!r}, "
            f"'--package', {name + '=' + str(corpus / folder)!r}]) == 0\n")
    modules = imported_after(code, tmp_path)
    assert (out / f"{source.stem}.usd").is_file()
    assert not modules & set(NOT_FOR_ASSIMP_MESHES), sorted(modules & set(NOT_FOR_ASSIMP_MESHES))


def test_cli_conversion_of_a_urdf_with_textured_collada_imports_pillow_but_no_trimesh(tmp_path, shared_dir):
    # r2d2's gripper meshes are textured COLLADA: Assimp reads them, Pillow decodes their images.
    source = shared_dir / "corpus" / "urdf" / "r2d2" / "urdf_tutorial" / "urdf" / "07-physics.urdf"
    out = tmp_path / "out"
    code = ("from usdforge.pipeline.cli import main\n"
            f"assert main(['convert', '-q', {str(source)!r}, {str(out)!r}, '--cache', {str(tmp_path / 'cache')!r}, "
            f"'--package', {'urdf_tutorial=' + str(source.parents[1])!r}]) == 0\n")
    modules = imported_after(code, tmp_path)
    unneeded = set(NOT_FOR_ASSIMP_MESHES) - {"PIL"}
    assert "PIL" in modules and not modules & unneeded, sorted(modules & unneeded)


def test_cli_conversion_of_a_urdf_with_a_mesh_assimp_does_not_read_uses_trimesh(tmp_path):
    # An OBJ with a quad: a fallback class ("polygons"), read by trimesh (imported only then).
    (tmp_path / "quad.obj").write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nf 1 2 3 4\nf 1 2 5\n")
    source = tmp_path / "robot.urdf"
    source.write_text('<robot name="r"><link name="base"><visual><geometry><mesh filename="quad.obj"/>'
                      '</geometry></visual></link></robot>')
    out = tmp_path / "out"
    code = ("from usdforge.pipeline.cli import main\n"
            f"assert main(['convert', '-q', {str(source)!r}, {str(out)!r}, '--cache', {str(tmp_path / 'cache')!r}]) == 0\n")
    modules = imported_after(code, tmp_path)
    assert "trimesh" in modules and "mujoco" not in modules


def test_a_mesh_conversion_whose_meshes_layer_comes_from_the_cache_imports_no_trimesh(tmp_path):
    # A library of variants of one mesh (other poses, names): the meshes layer is restored from the build
    # cache, so no file is read and neither trimesh nor what it pulls in is imported.
    (tmp_path / "box.stl").write_text("solid b\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\n"
                                      "vertex 0 1 0\nendloop\nendfacet\nendsolid b\n")
    code = ("from usdforge.pipeline import MeshConverter\nfrom usdforge.schemas import MeshConverterCfg\n"
            "MeshConverter(MeshConverterCfg(asset_path={asset!r}, usd_dir={out!r}, usd_file_name={name!r}, "
            "rotation=(0.0, 0.0, 0.6, 0.8)), cache={cache!r})\n")
    places = {"asset": str(tmp_path / "box.stl"), "cache": str(tmp_path / "cache")}
    imported_after(code.format(out=str(tmp_path / "a"), name="a.usda", **places), tmp_path)
    again = imported_after(code.format(out=str(tmp_path / "b"), name="b.usda", **places), tmp_path)
    hits = [json.loads(line)["hit"] for line in (tmp_path / "cache" / "stats.log").read_text().splitlines()
            if json.loads(line)["kind"] == "layer:meshes"]
    assert hits == [False, True] and (tmp_path / "b" / "Props" / "b_meshes.usd").is_file()
    assert not again & set(NOT_FOR_ASSIMP_MESHES), sorted(again & set(NOT_FOR_ASSIMP_MESHES))


def test_an_mjcf_model_with_textures_converts_while_the_usd_libraries_load_beside_its_compile(tmp_path, shared_dir):
    # agility_cassie: its textures are decoded on a thread (Pillow, zlib-ng: native modules) while the USD
    # libraries load on another beside MuJoCo's compile; without ``rules.native_loads`` the two threads
    # could wait for each other for ever (it hung once in eight conversions here). Fresh processes, timed.
    source = shared_dir / "corpus" / "mjcf" / "agility_cassie" / "cassie.xml"
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        done = subprocess.run([sys.executable, "-m", "usdforge.pipeline.cli", "convert", "-q", str(source), str(out),
                               "--cache", str(tmp_path / f"cache{attempt}")],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stderr
        assert (out / "cassie.usd").is_file()


def test_no_thread_loads_a_native_module_beside_another_without_native_loads(tmp_path):
    # The rule of rules.native_loads, checked on every module a thread other than the main one loads in a
    # one-off MJCF conversion whose PNG texture is decoded on a thread while the USD libraries load on
    # another beside the compile: a native module (a shared library) loaded by such a thread without
    # NATIVE_LOADS held could meet a pxr load inside the dynamic loader's lock (the hang this guards).
    from PIL import Image

    Image.new("RGB", (64, 64), (200, 30, 30)).save(tmp_path / "skin.png")
    (tmp_path / "model.xml").write_text(
        '<mujoco><asset><texture name="skin" file="skin.png" type="2d"/><material name="m" texture="skin"/>'
        '</asset><worldbody><body gravcomp="0.5"><freejoint/><geom size="0.1" material="m"/></body></worldbody>'
        '</mujoco>')  # gravcomp: the Usd-level writer (UsdPhysics ...) loads while the texture thread may run
    code = (
        "import sys, threading\n"
        "from usdforge.rules.native_loads import NATIVE_LOADS\n"
        "seen = []\n"
        "def hook(event, args):\n"
        "    if event != 'import':\n"
        "        return\n"
        "    if threading.current_thread() is not threading.main_thread() or any(\n"
        "            t.name == 'usdforge-texture-check' for t in threading.enumerate()):\n"
        "        seen.append((threading.current_thread().name, args[0], NATIVE_LOADS._is_owned()))\n"
        "sys.addaudithook(hook)\n"
        "from usdforge.pipeline.cli import main\n"
        f"assert main(['convert', '-q', {str(tmp_path / 'model.xml')!r}, {str(tmp_path / 'out')!r}]) == 0\n"
        "native = [(t, m) for t, m, owned in seen if not owned and\n"
        "          (getattr(sys.modules.get(m), '__file__', '') or '').endswith('.so')]\n"
        "assert not native, native\n"
        "assert any(t == 'usdforge-texture-check' for t, _, _ in seen), seen\n"
        "assert any(m.startswith('pxr') for t, m, _ in seen if t != 'usdforge-texture-check'), seen\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
