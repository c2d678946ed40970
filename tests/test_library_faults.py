"""A library build under faults (issue #12): bad entries among good ones, killed conversions, `doit clean`,
`kill -9` of a parallel build, two builds at once. Each runs the real `doit` on a small library."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trimesh

from meshes import write_mesh
from test_lazy import textured_obj

REPO = Path(__file__).resolve().parents[1]


def doit_command(workdir: Path, *args: str, library: Path) -> list[str]:
    return [sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(workdir), *args,
            f"library={library}"]


#: No build cache: the reference build of a test would otherwise fill it, and the builds under test would
#: restore instead of converting (too fast to be killed mid-way, and no concurrent conversions).
NO_CACHE = {"USDFORGE_CACHE": "off"}


def doit(workdir: Path, *args: str, library: Path, timeout: float = 300,
         extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(extra_env or {})}
    return subprocess.run(doit_command(workdir, *args, library=library), capture_output=True, text=True, env=env,
                          timeout=timeout)


def tree_digest(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under ``folder``; of a lazy key (which records the absolute
    output folder), the content hashes it lists."""
    import tomllib

    digest = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.endswith(".convert.json"):  # that one records wall times
            relative = path.relative_to(folder).as_posix()
            if path.name.endswith(".usdforge.toml"):
                key = tomllib.loads(path.read_text())
                digest[relative] = repr((list(key["asset"].values()), key["outputs"], key["config_digest"]))
            else:
                digest[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def mesh_library(root: Path, count: int, subdivisions: int = 2) -> Path:
    """A library of ``count`` mesh entries (spheres of different sizes, with mass so inertia is computed)."""
    meshes = root / "meshes"
    meshes.mkdir(parents=True)
    entries = []
    for index in range(count):
        sphere = trimesh.creation.icosphere(subdivisions=subdivisions, radius=0.1 + 0.01 * index)
        sphere.export(meshes / f"s{index}.stl")
        entries.append(f'[[assets]]\nname = "s{index}"\nsource = "meshes/s{index}.stl"\n'
                       '[assets.cfg]\nmass_props = { mass = 1.0 }\n')
    library = root / "library.toml"
    library.write_text("\n".join(entries))
    return library


def test_plain_doit_convert_builds_every_good_entry_then_reports_each_bad_one(tmp_path):
    library = mesh_library(tmp_path / "lib", 7)
    (tmp_path / "lib" / "broken.urdf").write_text("<robot name='x'><link\n")
    library.write_text(library.read_text() + """
[[assets]]
name = "missing"
source = "meshes/nope.stl"

[[assets]]
name = "badcfg"
source = "meshes/s0.stl"
[assets.cfg]
scale = [0.0, 1.0, 1.0]

[[assets]]
name = "broken"
source = "broken.urdf"
""")
    work = tmp_path / "work"
    work.mkdir()
    result = doit(work, "convert", library=library)  # no --continue
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert sorted(p.name for p in (work / "build/usd").iterdir()) == [f"s{i}" for i in range(7)]
    errors = [line for line in output.splitlines() if line.startswith("usdforge: error: ")]
    assert len(errors) == 3, output
    assert any(f"{tmp_path / 'lib/meshes/nope.stl'}: source of library entry 'missing' not found" in e for e in errors)
    assert any("assets[8].cfg.scale: expected 3 finite non-zero scale factors" in e for e in errors)
    assert any(f"{tmp_path / 'lib/broken.urdf'}:2: not well-formed XML" in e for e in errors)
    assert "DependencyError" not in output and "Traceback" not in output and "taskid:" not in output
    assert "3 task(s) failed: convert:missing, convert:badcfg, convert:broken" in output


def test_a_killed_conversions_temporary_folder_is_removed_by_the_next_build(tmp_path):
    library = mesh_library(tmp_path / "lib", 1)
    work = tmp_path / "work"
    usd = work / "build" / "usd"
    usd.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = usd / f".s0.tmp-{socket.gethostname()}-{int(dead.stdout)}-abcd"
    live = usd / f".s0.tmp-{socket.gethostname()}-{os.getpid()}-efgh"  # this process is alive: a concurrent build
    old_unknown = usd / ".s0.tmp-k2j3h4"  # the format before host and process were recorded
    for folder in (killed, live, old_unknown):
        folder.mkdir()
        (folder / "s0.usda").write_text("partial")
    os.utime(old_unknown, (time.time() - 7200, time.time() - 7200))
    result = doit(work, "convert", library=library)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not killed.exists() and not old_unknown.exists()
    assert live.exists()
    assert (usd / "s0" / "s0.usda").is_file()


def test_a_record_file_a_killed_build_was_writing_is_removed_by_the_next_build(tmp_path):
    """A kill between writing a small file (the conversion record, a verify result, the report) and renaming
    it into place leaves its temporary sibling; the next write of that file removes it, unless its writer
    still runs."""
    library = mesh_library(tmp_path / "lib", 1)
    work = tmp_path / "work"
    usd = work / "build" / "usd" / "s0"
    usd.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = usd / f".s0.convert.json.tmp-{socket.gethostname()}-{int(dead.stdout)}-abcd"
    live = usd / f".s0.convert.json.tmp-{socket.gethostname()}-{os.getpid()}-efgh"
    for stray in (killed, live):
        stray.write_text("")
    result = doit(work, "convert", library=library, extra_env=NO_CACHE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (usd / "s0.convert.json").is_file() and not killed.exists() and live.exists()


def test_doit_clean_removes_copied_textures_temporaries_and_empty_folders(tmp_path):
    meshes = tmp_path / "lib" / "meshes"
    meshes.mkdir(parents=True)
    textured_obj(meshes)
    library = tmp_path / "lib" / "library.toml"
    library.write_text('[[assets]]\nname = "crate"\nsource = "meshes/crate.obj"\n'
                       '[assets.cfg]\nmake_instanceable = false\n')
    work = tmp_path / "work"
    work.mkdir()
    assert doit(work, "convert", library=library).returncode == 0
    built = work / "build/usd/crate"
    assert list((built / "textures").glob("*.png")), "the build copies a texture"
    (work / f"build/usd/.crate.tmp-{socket.gethostname()}-1-zz").mkdir()
    result = doit(work, "clean", "convert", library=library)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not built.exists()
    assert [p.name for p in (work / "build/usd").iterdir()] == []


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def reference_and_workspace(tmp_path: Path, library: Path) -> tuple[dict[str, str], Path, dict[str, str]]:
    """The digest of a plain build of ``library`` (the expected outputs), an empty work folder for the
    builds under test, and their environment (no build cache, so they convert rather than restore)."""
    reference = tmp_path / "reference"
    reference.mkdir()
    assert doit(reference, "convert", library=library).returncode == 0
    work = tmp_path / "work"
    work.mkdir()
    return tree_digest(reference / "build/usd"), work, {**os.environ, "PYTHONPATH": str(REPO), **NO_CACHE}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG are Linux's")
def test_kill_9_of_a_parallel_build_stops_its_workers_and_the_next_build_converges(tmp_path):
    library = mesh_library(tmp_path / "lib", 16, subdivisions=4)
    expected, work, env = reference_and_workspace(tmp_path, library)
    process = subprocess.Popen(doit_command(work, "-n", "2", "convert", library=library), env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        workers = _children(process.pid)
        if len(workers) >= 2 and any((work / "build/usd").glob("s*")) if (work / "build/usd").is_dir() else False:
            break
        time.sleep(0.05)
    assert process.poll() is None and workers, "the build ended before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers), "workers outlive a killed doit"

    result = doit(work, "convert", library=library, extra_env=NO_CACHE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert tree_digest(work / "build/usd") == expected
    assert not list((work / "build/usd").glob(".*tmp-*"))


def test_two_builds_of_one_library_at_once_give_the_same_outputs_as_one(tmp_path):
    library = mesh_library(tmp_path / "lib", 6)
    expected, work, env = reference_and_workspace(tmp_path, library)
    runs = [subprocess.Popen(doit_command(work, "convert", library=library), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert tree_digest(work / "build/usd") == expected
    assert not list((work / "build/usd").glob(".*tmp-*"))
    again = doit(work, "convert", library=library)
    assert again.returncode == 0 and tree_digest(work / "build/usd") == expected
