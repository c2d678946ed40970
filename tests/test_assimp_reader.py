"""Assimp, the primary mesh reader, against trimesh, the fallback (issue #26): on every mesh of the shared
corpus, the conformance fixtures and the embedded library, a file Assimp reads gives the parts trimesh
gives (same names and count, same triangles after transforms within 1e-6 relative, same normals, UVs,
per-vertex colours and material colours); a file it does not read falls back for a reason named in
``FALLBACK_CLASSES``. Then one generated fixture per fallback class, and a file that crashes the reader."""

from __future__ import annotations

import os
import re
import shutil
import signal
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from meshes import textured_obj, write_mesh

from usdforge.rules.errors import ConversionError
from usdforge.rules.files import open_texture
from usdforge.rules.mesh import assimp_read
from usdforge.rules.mesh.assimp_read import FALLBACK_CLASSES, read_in_child
from usdforge.rules.robot.meshes import MeshLibrary, read_file

REPO = Path(__file__).resolve().parents[1]
EXTENSIONS = {".stl", ".obj", ".ply", ".off", ".glb", ".gltf", ".dae", ".fbx"}


@pytest.fixture(autouse=True)
def fresh_reader():
    """Each test starts and ends without a reading child: one forked before a monkeypatch would not see it."""
    assimp_read.stop_reader()
    yield
    assimp_read.stop_reader()


def every_mesh(shared_dir: Path) -> list[Path]:
    roots = [shared_dir / "corpus", shared_dir / "conformance", REPO / "assets"]
    for root in roots:
        assert root.is_dir(), f"missing test data: {root}"
    return sorted(p for root in roots for p in root.rglob("*") if p.suffix.lower() in EXTENSIONS and p.is_file())


def canonical_triangles(points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(F, 9): each triangle's corners rotated to start at its smallest corner (winding kept), sorted."""
    corners = points[faces]  # (F, 3, 3)
    flat = corners.reshape(-1, 3)
    group = np.repeat(np.arange(len(faces)), 3)
    order = np.lexsort((flat[:, 2], flat[:, 1], flat[:, 0], group))  # corners sorted within each triangle
    first = order[::3] - 3 * np.arange(len(faces))  # (F,) the smallest corner's place
    turn = (first[:, None] + np.arange(3)) % 3
    rolled = np.take_along_axis(corners, turn[:, :, None], axis=1).reshape(len(faces), 9)
    return rolled[np.lexsort(rolled.T[::-1])]


def assert_same_parts(path: Path, ours: list, theirs: list) -> None:
    assert [p.name for p in ours] == [p.name for p in theirs], path
    for a, b in zip(ours, theirs):
        where = f"{path} part {a.name}"
        assert len(a.faces) == len(b.faces), where
        scale = max(float(np.abs(b.points).max()), 1e-12)
        np.testing.assert_allclose(canonical_triangles(a.points, a.faces), canonical_triangles(b.points, b.faces),
                                   rtol=0, atol=1e-6 * scale, err_msg=where)
        for field in ("normals", "uv", "colors"):
            mine, other = getattr(a, field), getattr(b, field)
            assert (mine is None) == (other is None), f"{where}: {field}"
            if field == "normals" and mine is not None:
                mine, other = a.face_varying_normals(), b.face_varying_normals()
            if mine is not None:
                np.testing.assert_allclose(mine, other, atol=1e-5, err_msg=f"{where}: {field}")
        assert (a.color is None) == (b.color is None), f"{where}: material colour"
        if a.color is not None:  # trimesh rounds some formats' colours to 1/255
            np.testing.assert_allclose(a.color, b.color, atol=0.5 / 255 + 1e-6, err_msg=f"{where}: colour")
        assert b.texture is None, where  # trimesh's parts hold their textures decoded
        # Assimp's names a PNG or JPEG file (copied as it is into the output), else holds it decoded.
        mine = open_texture(a.texture) if a.texture is not None else a.image
        assert (mine is None) == (b.image is None), f"{where}: texture image"
        if mine is not None:  # the same file: the same pixels
            assert (mine.mode, mine.size, mine.tobytes()) == (b.image.mode, b.image.size, b.image.tobytes()), where


def test_assimp_reads_what_trimesh_reads_or_falls_back_for_a_named_reason(shared_dir):
    readers: Counter = Counter()
    for path in every_mesh(shared_dir):
        try:
            theirs, _ = read_file(path, "trimesh")
        except ConversionError:
            theirs = None
        ours, used = read_file(path, "assimp")
        if used != "assimp":
            reason = used.removeprefix("trimesh: ")
            assert reason in FALLBACK_CLASSES, (path, used)
            readers[reason] += 1
            continue
        assert theirs is not None, f"{path}: Assimp reads a file trimesh refuses"
        assert_same_parts(path, ours, theirs)
        readers["assimp"] += 1
    print(dict(readers))
    # The corpus's URDF meshes (STL and COLLADA) are what Assimp is for: most of every kind go through it.
    assert readers["assimp"] >= 200, readers


def test_corpus_urdf_meshes_mostly_read_by_assimp(shared_dir):
    urdf = sorted(p for p in (shared_dir / "corpus" / "urdf").rglob("*")
                  if p.suffix.lower() in (".stl", ".dae"))
    used = Counter(read_file(p)[1] for p in urdf)
    # Every one: r2d2's two textured COLLADA files too (a diffuse map, opaque); panda's link5-7.dae hold
    # <lines>: read without them.
    assert set(used) == {"assimp"}, used


@pytest.mark.parametrize("extension", ["stl", "stl_ascii", "ply", "off", "glb", "gltf", "dae", "obj"])
def test_generated_fixtures_of_every_format_are_read_by_assimp_as_trimesh_reads_them(tmp_path, extension):
    path = write_mesh(tmp_path, extension)
    ours, used = read_file(path)
    assert used == "assimp"
    assert_same_parts(path, ours, read_file(path, "trimesh")[0])


def test_a_multi_node_glb_keeps_its_node_transforms_and_names(tmp_path):
    import trimesh

    scene = trimesh.Scene()
    scene.add_geometry(trimesh.creation.box(extents=[1, 2, 3]), node_name="body")
    scene.add_geometry(trimesh.creation.icosphere(radius=0.5), node_name="knob",
                       transform=trimesh.transformations.rotation_matrix(0.7, [1, 2, 3], [0, 2, 0]))
    path = tmp_path / "scene.glb"
    path.write_bytes(scene.export(file_type="glb"))
    ours, used = read_file(path)
    assert used == "assimp" and [p.name for p in ours] == ["body", "knob"]
    assert_same_parts(path, ours, read_file(path, "trimesh")[0])


@pytest.mark.parametrize("unit, up", [("0.01", "Y_UP"), ("0.0254", "Z_UP"), ("1", "X_UP")])
def test_collada_unit_is_applied_and_up_axis_ignored_as_before(tmp_path, unit, up):
    box = write_mesh(tmp_path, "dae")
    asset = f'<asset><unit name="u" meter="{unit}"/><up_axis>{up}</up_axis></asset>'
    box.write_text(re.sub(r"<asset>.*?</asset>", asset, box.read_text(), count=1, flags=re.DOTALL))
    assert f'meter="{unit}"' in box.read_text()
    ours, used = read_file(box)
    assert used == "assimp"
    theirs = read_file(box, "trimesh")[0]
    assert_same_parts(box, ours, theirs)
    extent = np.ptp(ours[0].points, axis=0)
    np.testing.assert_allclose(extent, np.array([0.2, 0.4, 0.6]) * float(unit), rtol=1e-6)


# One generated fixture per fallback class.

def write_obj(folder: Path, text: str, name: str = "part.obj") -> Path:
    path = folder / name
    path.write_text(text)
    return path


TETRA = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\n"


@pytest.mark.parametrize("reason, content", [
    ("polygons", TETRA + "f 1 2 3 4\n"),
    ("missing reference", "mtllib gone.mtl\nusemtl red\n" + TETRA + "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"),
    ("uv without material", TETRA + "vt 0 0\nvt 1 0\nvt 0 1\nf 1/1 3/3 2/2\nf 1/1 2/2 4/1\n"),
    ("several meshes", "o a\n" + TETRA + "f 1 3 2\no b\nf 1 2 4\n"),
])
def test_each_obj_fallback_class_goes_to_trimesh(tmp_path, reason, content):
    path = write_obj(tmp_path, content)
    _, used = read_file(path)
    assert used == f"trimesh: {reason}"


def collada_box(folder: Path, edit) -> Path:
    path = write_mesh(folder, "dae")
    path.write_text(edit(path.read_text()))
    return path


LINE = ('<lines count="1"><input semantic="VERTEX" source="#verts-vertices" offset="0"/><p>0 1</p></lines>'
        '</mesh>')


@pytest.mark.parametrize("reason, make", [
    # <lines> (refused by assimp-py) in a file that names an image: no in-memory copy, trimesh reads it.
    ("refused", lambda folder: collada_box(folder, lambda text: text.replace("</mesh>", LINE, 1).replace(
        "<library_geometries>", '<library_images><image id="i"><init_from>t.png</init_from></image>'
        "</library_images><library_geometries>", 1))),
    ("collada unit", lambda folder: collada_box(folder, lambda text: text.replace(
        "<up_axis>", '<unit name="none" meter="0"/><up_axis>', 1))),
    ("not finite", lambda folder: write_obj(folder, "v nan 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")),
    ("no triangles", lambda folder: write_obj(folder, "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\n"
                                              "property float y\nproperty float z\nend_header\n0 0 0\n1 0 0\n"
                                              "0 1 0\n", "points.ply")),
])
def test_the_other_fallback_classes(tmp_path, reason, make):
    path = make(tmp_path)
    _, used = read_file(path, "assimp")
    assert used == f"trimesh: {reason}"


def test_collada_with_lines_is_read_by_assimp_without_them(shared_dir):
    # assimp-py refuses a COLLADA file with <lines>; an in-memory copy without them gives trimesh's parts.
    path = shared_dir / "conformance" / "urdf" / "assets" / "box_with_line.dae"
    with pytest.raises(ValueError):
        import assimp_py

        assimp_py.import_file(str(path), assimp_py.Process_Triangulate | assimp_py.Process_SortByPType)
    parts, used = read_file(path)
    assert used == "assimp" and len(parts) == 1
    assert_same_parts(path, parts, read_file(path, "trimesh")[0])


def test_transparent_collada_material_goes_to_trimesh(shared_dir):
    _, used = read_file(shared_dir / "conformance" / "urdf" / "assets" / "box_transparent_material.dae")
    assert used == "trimesh: transparency"


def test_textured_material_goes_to_trimesh(shared_dir):
    _, used = read_file(shared_dir / "conformance" / "urdf" / "assets" / "box_materials.dae")
    assert used in ("trimesh: texture", "trimesh: transparency")


@pytest.mark.parametrize("change", ["image missing", "transparent alpha below 1"])
def test_textured_collada_goes_to_trimesh_where_the_readers_would_differ(tmp_path, shared_dir, change):
    meshes = shared_dir / "corpus" / "urdf" / "r2d2" / "urdf_tutorial" / "meshes"
    text = (meshes / "l_finger_tip.dae").read_text()
    if change == "transparent alpha below 1":
        shutil.copy(meshes / "l_finger_tip_color.png", tmp_path)
        text = re.sub(r"(<transparent[^>]*>\s*<color[^>]*>)[^<]*", r"\g<1>0 0 0 0.5", text, count=1)
        assert "0 0 0 0.5" in text
    path = tmp_path / "tip.dae"
    path.write_text(text)
    assert read_file(meshes / "l_finger_tip.dae")[1] == "assimp"
    assert read_file(path)[1] == "trimesh: texture"


def test_glb_with_an_embedded_image_goes_to_trimesh(tmp_path):
    import trimesh
    from PIL import Image

    mesh = trimesh.creation.box()
    mesh.visual = trimesh.visual.TextureVisuals(uv=np.random.default_rng(0).random((len(mesh.vertices), 2)),
                                                image=Image.new("RGB", (4, 4), (200, 10, 10)))
    path = tmp_path / "textured.glb"
    path.write_bytes(mesh.export(file_type="glb"))
    _, used = read_file(path)
    assert used == "trimesh: embedded texture"


def test_a_file_that_crashes_assimp_falls_back_and_the_build_goes_on(tmp_path, monkeypatch):
    # A real segfault inside the reader's child: the parent sees "crashed" and trimesh reads the file.
    def crash(path):
        os.kill(os.getpid(), signal.SIGSEGV)

    monkeypatch.setattr(assimp_read, "read_assimp", crash)
    assimp_read.stop_reader()
    path = write_obj(tmp_path, TETRA + "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    assert read_in_child(path) == "crashed"
    parts, used = read_file(path)
    assert used == "trimesh: crashed" and len(parts[0].faces) == 4
    assert len(MeshLibrary().parts(path)[0].faces) == 4


def test_a_file_that_hangs_assimp_is_killed_and_falls_back(tmp_path, monkeypatch):
    def hang(path):
        import time

        time.sleep(60)

    monkeypatch.setattr(assimp_read, "read_assimp", hang)
    assimp_read.stop_reader()
    path = write_obj(tmp_path, TETRA + "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    assert read_in_child(path, timeout=0.5) == "crashed"


def test_the_child_message_is_data_not_code():
    # A garbled or hostile message from the child decodes to an error, never to an object it names.
    with pytest.raises((ValueError, KeyError, TypeError)):
        assimp_read.decode(len(b'{"fallback": "os.system"}').to_bytes(8, "little") + b'{"fallback": "os.system"}')
    parts = assimp_read.read_assimp(REPO / "assets" / "meshes" / "plate.stl")
    again = assimp_read.decode(assimp_read.encode(parts))
    assert [p.name for p in again] == [p.name for p in parts]
    np.testing.assert_array_equal(again[0].faces, parts[0].faces)
    # A face past the points (the parent indexes the points, normals and UVs by the faces) is garbled too.
    past = parts[0]._replace(faces=np.where(parts[0].faces == 0, len(parts[0].points), parts[0].faces))
    with pytest.raises(ValueError, match="do not fit the points"):
        assimp_read.decode(assimp_read.encode([past]))


def test_a_part_the_reading_child_welds_is_the_part_the_robot_path_welds(shared_dir):
    """The reading child welds a robot part while the parent is busy (``robot_part``): the parent then
    makes the same part, bit for bit, from a smaller answer (a sixth of the points; an STL soup's facet
    normals dropped; a COLLADA part's normals and UVs corner by corner); welded normals or UVs that are
    not one per corner are a garbled answer."""
    from usdforge.rules.robot.meshes import _from_assimp

    corpus = shared_dir / "corpus" / "urdf"
    dae = corpus / "r2d2" / "urdf_tutorial" / "meshes" / "l_finger.dae"
    stl = corpus / "solo12" / "example-robot-data" / "robots" / "solo_description" / "meshes" / "stl" / "with_foot"
    for path in (stl / "solo_foot.stl", dae):
        for raw in assimp_read.read_assimp(path):
            plain, welded = (assimp_read.encode([assimp_read.robot_part(path, raw, weld)]) for weld in (False, True))
            assert len(welded) < len(plain) / (1.2 if path.suffix == ".dae" else 2.5)
            here, there = (_from_assimp("part", assimp_read.decode(data)[0]) for data in (plain, welded))
            assert there.uv is not None or path.suffix == ".stl"
            for field in ("points", "faces", "normals", "uv"):
                mine, theirs = getattr(here, field), getattr(there, field)
                assert (mine is None and theirs is None) or (mine.dtype == theirs.dtype and
                                                             mine.tobytes() == theirs.tobytes()), field
    short = assimp_read.robot_part(dae, raw, True)
    with pytest.raises(ValueError, match="do not fit"):
        assimp_read.decode(assimp_read.encode([short._replace(uv=short.uv[:-3])]))
    for garbled in (short._replace(normals=short.normals.reshape(-1)), short._replace(uv=short.normals),
                    short._replace(transform=np.eye(2))):  # the parent indexes them as (N, 3|2) and (4, 4)
        with pytest.raises(ValueError, match="shape"):
            assimp_read.decode(assimp_read.encode([garbled]))
    with pytest.raises(ValueError, match="colour"):
        assimp_read.decode(assimp_read.encode([short._replace(color=(1.0, float("inf"), 0.0, 1.0))]))


def test_the_reading_child_welds_only_an_answer_the_parent_is_not_waiting_for():
    """The live protocol: an answer the child finishes while this process is not waiting for it comes
    welded; while this process waits for it (here: for a later one, which waits on it too), as read; the
    robot path makes the same part of both."""
    import select

    from usdforge.rules.robot.meshes import _from_assimp

    path = REPO / "assets" / "meshes" / "plate.stl"
    answers = {}
    for waiting in (0, 1 << 40):
        assimp_read.stop_reader()
        reader = assimp_read._reader()
        reader.waiting[:] = waiting.to_bytes(8, "little")
        assimp_read.request_ahead([path], robot=True)
        assert select.select([reader.answers], [], [], 30)[0]  # answered before this process waits for it
        answers[waiting] = read_in_child(path, robot=True)[0]
    assert answers[0].welded and not answers[1 << 40].welded
    welded, plain = (_from_assimp("plate", answers[key]) for key in (0, 1 << 40))
    assert welded.points.tobytes() == plain.points.tobytes() and welded.faces.tobytes() == plain.faces.tobytes()
    assert plain.normals is None and answers[1 << 40].normals is None  # an STL's facet normals stay in the child
    with pytest.raises(ValueError, match="welded"):  # to a caller who did not ask: garbled (the child is dropped)
        assimp_read.decode(assimp_read.encode([answers[0]]), robot=False)


def test_the_reader_and_its_version_are_in_the_cache_keys():
    from usdforge.pipeline.content_key import BYTE_SHAPING
    from usdforge.rules.robot import meshes

    # MJCF too: its visual-only STL meshes are read through Assimp (rules.mjcf.visual_meshes).
    assert all("assimp-py" in BYTE_SHAPING[kind] for kind in ("mesh", "urdf", "mjcf"))
    assert any(path.name == "assimp_read.py" for path in meshes._READER_CODE)


def crash_reading(monkeypatch, name: str) -> None:
    """The reader's child segfaults on the file called ``name`` and reads the others (a fresh child is
    forked with the patch in place)."""
    read = assimp_read.read_assimp

    def crash_on_name(path):
        if path.name == name:
            os.kill(os.getpid(), signal.SIGSEGV)
        return read(path)

    monkeypatch.setattr(assimp_read, "read_assimp", crash_on_name)
    assimp_read.stop_reader()


def test_one_child_reads_file_after_file_and_a_crash_loses_only_that_file(tmp_path, monkeypatch):
    paths = [write_obj(tmp_path, TETRA + "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n", f"p{i}.obj") for i in range(4)]
    crash_reading(monkeypatch, "p1.obj")  # the next child is forked with the patch in place
    children = []
    results = []
    for path in paths:
        results.append(read_in_child(path))
        children.append(assimp_read._READERS[0].pid if 0 in assimp_read._READERS else None)
    assert [isinstance(r, str) for r in results] == [False, True, False, False] and results[1] == "crashed"
    assert children[1] is None and children[2] == children[3] != children[0]
    assert [len(MeshLibrary().parts(p)[0].faces) for p in paths] == [4, 4, 4, 4]  # p1 read by trimesh


def test_a_urdf_reads_its_meshes_in_two_children_forked_once(monkeypatch, shared_dir):
    from usdforge.rules.urdf.read import read_urdf

    started = []

    class Counted(assimp_read._ReaderProcess):
        def __init__(self):
            started.append(1)
            super().__init__()

    monkeypatch.setattr(assimp_read, "_ReaderProcess", Counted)
    assimp_read.stop_reader()
    corpus = shared_dir / "corpus" / "urdf" / "pr2" / "example-robot-data"
    read_urdf(corpus / "robots" / "pr2_description" / "urdf" / "pr2.urdf", {"example-robot-data": str(corpus)})
    assert len(started) == assimp_read.READERS == 2  # its 26 distinct STL files, two children side by side


def test_the_reading_child_holds_none_of_the_parents_files(tmp_path):
    # A pipe the parent holds (a peer's stdin, a worker's stdout) must see its end of file when the parent
    # closes it, though the reading child, forked while it was open, lives on.
    read_end, write_end = os.pipe()
    assert not isinstance(read_in_child(REPO / "assets" / "meshes" / "plate.stl"), str)  # forked now
    os.close(write_end)
    import select

    assert select.select([read_end], [], [], 10)[0] and os.read(read_end, 1) == b""  # no one else holds it
    os.close(read_end)
    children = [int(p) for p in os.listdir(f"/proc/{assimp_read._READERS[0].pid}/fd")]
    assert len(children) == 5, children  # 0-2 on /dev/null, the request and answer pipes
    # The second child is forked while the first one's pipes are open here: it holds none of them either.
    files = [write_obj(tmp_path, TETRA + "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n", f"t{i}.obj") for i in range(4)]
    assimp_read.request_ahead(files)
    assert all(not isinstance(read_in_child(path), str) for path in files)  # each child answered: past its set-up
    assert sorted(assimp_read._READERS) == [0, 1]
    for reader in assimp_read._READERS.values():
        assert len(os.listdir(f"/proc/{reader.pid}/fd")) == 5


def test_a_forked_process_holds_no_pipe_of_its_parents_reading_children(tmp_path):
    """A process forked after the reading children started (a ``doit -n`` worker) closes its copies of
    their pipes and forgets them, so they end with the parent; its lock is its own (another thread may
    have held the parent's at the fork); it forks reading children of its own when it reads."""
    files = [write_obj(tmp_path, TETRA + "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n", f"f{i}.obj") for i in range(2)]
    assimp_read.request_ahead(files)
    assert all(not isinstance(read_in_child(path), str) for path in files)
    inherited = [fd for reader in assimp_read._READERS.values() for fd in (reader.requests, reader.answers)]
    assimp_read._LOCK.acquire()  # as if another thread held it at the fork
    try:
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                closed = []
                for fd in inherited:
                    try:
                        os.fstat(fd)
                    except OSError:
                        closed.append(fd)
                fresh = assimp_read._LOCK.acquire(timeout=5)
                if fresh:
                    assimp_read._LOCK.release()
                if fresh:  # else reading would wait for the parent's lock forever
                    ok = closed == inherited and not assimp_read._READERS and \
                        not isinstance(read_in_child(files[0]), str)
                    assimp_read.stop_reader()
                    status = 0 if ok else 1
            finally:
                os._exit(status)
    finally:
        assimp_read._LOCK.release()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert all(not isinstance(read_in_child(path), str) for path in files)  # the parent's children live on


def test_a_textured_obj_is_read_by_assimp_as_trimesh_reads_it(tmp_path):
    """An OBJ with a diffuse map and its Kd: Assimp's parts are trimesh's (the colour, the decoded image,
    the UVs); without Kd, trimesh's default grey differs from Assimp's: trimesh reads it."""
    path = textured_obj(tmp_path)
    ours, used = read_file(path)
    assert used == "assimp"
    assert ours[0].texture == tmp_path / "grid.png" and ours[0].image is None and ours[0].uv is not None
    assert_same_parts(path, ours, read_file(path, "trimesh")[0])
    assimp_read.stop_reader()
    assert read_file(textured_obj(tmp_path, material=""))[1] == "trimesh: texture"


def test_a_png_texture_is_copied_as_it_is_and_another_format_is_decoded(tmp_path):
    """Assimp's part names a PNG (or JPEG) texture file, checked as an image and copied by the writer byte
    for byte (no Pillow decode, no PNG encode: r2d2's largest cost); a broken one is refused as before; a
    BMP, or a file whose bytes are not the format its suffix says, is decoded and written as PNG, as
    trimesh's in-memory images are."""
    from PIL import Image

    from usdforge.rules.robot.materials import Materials

    path = textured_obj(tmp_path)
    png = (tmp_path / "grid.png").read_bytes()
    part = read_file(path)[0][0]
    assert part.texture == tmp_path / "grid.png" and part.image is None

    class Layers:  # what Materials asks of the layers for a texture file
        root = None

        def asset_path(self, role, file):
            return f"./{file.name}"

        def layer(self, role):
            from pxr import Sdf

            return Sdf.Layer.CreateAnonymous("m.usda")

    out = tmp_path / "out"
    materials = Materials(Layers(), out)
    materials.material(part.color, part.texture, part.image, "painted")
    assert [f.read_bytes() for f in materials.files] == [png]  # the file's own bytes
    (tmp_path / "grid.png").write_bytes(png[:8] + b"not an image" * 8)  # a PNG's signature only: checked
    assimp_read.stop_reader()
    with pytest.raises(ConversionError, match="texture is not an image"):
        read_file(path)
    Image.new("RGB", (8, 4), (30, 120, 220)).save(tmp_path / "grid.bmp")
    (tmp_path / "part.mtl").write_text("newmtl painted\nKd 0.8 0.5 0.2\nd 1.0\nmap_Kd grid.bmp\n")
    assimp_read.stop_reader()
    part = read_file(path)[0][0]
    assert part.texture is None and part.image is not None and part.image.size == (8, 4)
    (tmp_path / "grid.bmp").rename(tmp_path / "fake.png")  # a BMP named .png
    (tmp_path / "part.mtl").write_text("newmtl painted\nKd 0.8 0.5 0.2\nd 1.0\nmap_Kd fake.png\n")
    assimp_read.stop_reader()
    part = read_file(path)[0][0]
    assert part.texture is None and part.image is not None


def test_a_texture_the_file_does_not_name_is_never_opened_on_the_childs_word(tmp_path, monkeypatch):
    """The child's answer comes from Assimp reading untrusted bytes: a texture it names that is not one of
    the file's references (which the conversion checked against the allowed roots) sends the file to
    trimesh; the parent opens nothing outside."""
    path = textured_obj(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}_outside.png"
    shutil.copy(tmp_path / "grid.png", outside)
    real = assimp_read.read_assimp

    def naming_outside(file):
        return [part._replace(texture=outside) for part in real(file)]

    monkeypatch.setattr(assimp_read, "read_assimp", naming_outside)
    assimp_read.stop_reader()
    import usdforge.rules.files as files

    opened, real_open = [], files.open_texture
    monkeypatch.setattr(files, "open_texture", lambda texture: opened.append(texture) or real_open(texture))
    assert read_in_child(path) == "texture"
    assert read_file(path)[1] == "trimesh: texture" and outside not in opened
    monkeypatch.setattr(assimp_read, "read_assimp", real)
    assimp_read.stop_reader()
    assert read_file(path)[1] == "assimp"  # the file's own texture: Assimp's parts stand


def test_files_asked_for_ahead_give_the_same_answers_in_any_order_and_a_crash_stays_with_its_file(
        tmp_path, monkeypatch):
    """``request_ahead`` pipelines the reading child (it reads the next files while the parent works):
    read in another order, each file still gets its own answer; a file that changed since it was asked for
    is read again; a file that crashes the child while another is awaited is "crashed" for itself only,
    and the files asked for after it are read by a fresh child."""
    faces = "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
    folder = tmp_path / "m"
    folder.mkdir()
    paths = [write_obj(folder, TETRA + faces * (index + 1)) for index in range(1)]
    for index in range(1, 4):
        path = folder / f"m{index}.obj"
        path.write_text(TETRA + faces * (index + 1))
        paths.append(path)
    paths[0] = paths[0].rename(folder / "m0.obj")
    direct = {path: len(read_in_child(path)[0].faces) for path in paths}
    assert sorted(direct.values()) == [4, 8, 12, 16]
    assimp_read.stop_reader()
    assimp_read.request_ahead(paths)
    paths[1].write_text(TETRA + faces * 7)  # changed after it was asked for: read again
    for path in [paths[2], paths[1], paths[3], paths[0]]:
        expected = 28 if path == paths[1] else direct[path]
        assert len(read_in_child(path)[0].faces) == expected

    crash_reading(monkeypatch, "m1.obj")
    assimp_read.request_ahead(paths)
    assert len(read_in_child(paths[3])[0].faces) == direct[paths[3]]  # m1 crashed on the way: a fresh child
    assert read_in_child(paths[1]) == "crashed"
    assert len(read_in_child(paths[0])[0].faces) == direct[paths[0]]


def test_files_asked_for_ahead_alternate_between_two_children_and_a_crash_in_one_spares_the_other(
        tmp_path, monkeypatch):
    """``request_ahead`` of several files forks a second child and alternates the files between the two
    (each reads its own in order while this process waits on the other); every answer is the file's own;
    a crash ends only the child it happened in: the other child, and its answers, live on."""
    faces = "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
    paths = []
    for index in range(4):
        path = tmp_path / f"n{index}.obj"
        path.write_text(TETRA + faces * (index + 1))
        paths.append(path)
    crash_reading(monkeypatch, "n2.obj")
    assimp_read.request_ahead(paths)
    readers = dict(assimp_read._READERS)
    assert sorted(readers) == [0, 1] and readers[0].pid != readers[1].pid
    asked = {slot: [request.path.name for request, _ in reader.pending] for slot, reader in readers.items()}
    assert asked == {0: ["n0.obj", "n2.obj"], 1: ["n1.obj", "n3.obj"]}
    answers = [read_in_child(path) for path in paths]
    assert answers[2] == "crashed"
    assert [len(answer[0].faces) for index, answer in enumerate(answers) if index != 2] == [4, 8, 16]
    assert assimp_read._READERS[1] is readers[1] and assimp_read._READERS.get(0) is not readers[0]
    assert [len(read_in_child(path)[0].faces) for path in paths[:2]] == [4, 8]  # read again, by the first


@pytest.mark.parametrize("scale, hash_collides", [(1e-3, False), (0.5, False), (1e5, False), (0.5, True)])
def test_welding_groups_points_exactly_as_trimesh_unique_rows(scale, hash_collides, monkeypatch):
    """``_weld`` (sorting integer keys: each column's rank packed into one integer; beyond 1 cm, equal rows
    grouped by a hash first) gives trimesh's ``grouping.unique_rows``: the same unique rows in the same
    order and the same inverse, for points within 1 cm (packed as trimesh packs them) and beyond (trimesh
    sorts the rows' bytes), with shared coordinates in a column and mirrored ones, and when different
    rows share a hash (here every row: a zero hash)."""
    from trimesh.grouping import unique_rows

    from usdforge.rules.robot import meshes
    from usdforge.rules.robot.meshes import _weld

    if hash_collides:
        monkeypatch.setattr(meshes, "_ROW_HASH", (np.uint64(0),) * 3)

    rng = np.random.default_rng(int(scale * 1000))
    base = rng.uniform(-scale, scale, (400, 3))
    base[::3, 0] = np.round(base[::3, 0], 1)  # many rows share their first coordinate
    base[200:260, 1] = -base[:60, 1]  # mirrored coordinates
    points = base[rng.integers(0, len(base), 3000)]
    unique, inverse = _weld(points)
    expected_unique, expected_inverse = unique_rows(points)
    np.testing.assert_array_equal(unique, expected_unique)
    np.testing.assert_array_equal(inverse, expected_inverse)


def test_welding_over_a_million_points_groups_by_the_whole_hash(monkeypatch):
    """Beyond 2^20 points the hash is not shortened by the index packed into it (``_hash_groups``): with
    only 40 bits left, two of a few million distinct rows would likely share them, and every such mesh
    would take the slow path (``_memcmp_order``: 3.3 s against 1.1 s for 3 million distinct rows). Here the
    row hash is the first coordinate alone (every distinct row has its own, all within 2^21 of each other:
    the top 43 bits are one), which the shortened hash sent to the slow path. Same unique rows and inverse
    as trimesh."""
    from trimesh.grouping import unique_rows

    from usdforge.rules.robot import meshes
    from usdforge.rules.robot.meshes import _weld

    monkeypatch.setattr(meshes, "_ROW_HASH", (np.uint64(1), np.uint64(0), np.uint64(0)))
    slow = []
    real = meshes._memcmp_order
    monkeypatch.setattr(meshes, "_memcmp_order", lambda rows: slow.append(len(rows)) or real(rows))
    rng = np.random.default_rng(7)
    base = rng.uniform(-0.5, 0.5, (300_000, 3))
    base[:, 0] = rng.permutation(300_000) * 1e-8 + 1e-9  # a distinct first coordinate per row, within 3 mm
    points = base[rng.integers(0, len(base), 2 ** 20 + 5)]
    unique, inverse = _weld(points)
    assert slow == []
    expected_unique, expected_inverse = unique_rows(points)
    np.testing.assert_array_equal(unique, expected_unique)
    np.testing.assert_array_equal(inverse, expected_inverse)

