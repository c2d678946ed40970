"""Differential tester of incremental builds: after every random step, `doit convert` equals a clean build.

    python bench/differential.py [--steps 1000] [--seed 0] [--examples-steps 25] [--json]

A Hypothesis state machine (``hypothesis.stateful``) drives a small checkout: a library of five entries
(a textured OBJ, an STL with an alternative source, the embedded tiny_arm URDF with a second copy of its
package, a xacro package with includes, YAML and a ``$(cwd)`` variant, and the embedded pan_tilt MJCF), a
second manifest with the same entry names, and the build folder (doit's state and the build cache inside
it). Each step does one thing a user or a tool does:

- edit a byte of a mesh, texture, include, YAML or source file (a digit of a text file, another variant
  of a binary one), keeping its size and modification time (``cp -p``, ``rsync -t``) or not; touch one;
- edit a manifest field of an entry: source, kind, packages, xacro arguments, allowed roots, cfg,
  ee_body; edit a robot's cfg (drive gains, self_collision, collision_type, robot_type: a rebuild that
  reuses the robot as read and the layers the edit leaves alone); point a texture outside the entry's folder (allowed only with an allowed root);
- remove, restore or rename a referenced file; remove an entry's outputs;
- move the checkout, or clone it (times kept or not) and go on in the clone;
- switch to the other manifest;
- corrupt a cache object, or make a cache entry name another entry's (intact) objects;
- build in a fresh process instead of this one; run two builds at once (the same library, or the other
  one); ``kill -9`` a ``doit -n 2`` build part-way;

and then runs ``doit convert`` and compares every output of every entry, byte for byte (the lazy keys
``*.usdforge.toml`` and conversion records ``*.convert.json`` aside: they name their folder and hold
times), with a clean build of the same state: the entry converted by the Python API into a fresh folder
with no cache. An entry must fail in both or in neither. Clean builds are memoised by the entry's
manifest table, the checkout's place, the content of the folders the entry may read (its source's,
its packages', its allowed roots' top-level folders: a conversion reads nothing else) and the names of
the files in the folders their files mention (a conversion sees whether a file it names there exists).

Each Hypothesis example starts from a fresh checkout and runs up to ``--example-steps`` steps; examples
run until ``--steps`` steps in all. The seed of each run is printed; a divergence prints the seed and
the step sequence of the failing example (with ``--shrink``, Hypothesis's minimal one), and exits 1. A
divergence that depends on timing (a ``kill -9``) may not recur when Hypothesis replays the example: the
first divergence met is reported, with its steps, never Hypothesis's flaky-example error in its place.
A run during which the checkout's code changed (an edit, a checkout) is void and exits 2: its builds in
fresh processes ran other code than its clean builds, and the conversion records' ``cache_key`` (which
hashes the code) differs. ``--json``: a summary.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

from hypothesis import HealthCheck, Phase, settings, strategies as st  # noqa: E402
from hypothesis import seed as use_seed  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test  # noqa: E402

#: Files whose digits an edit never touches (they are manifests: edited field by field instead).
MANIFESTS = ("library.toml", "library2.toml")
SKIPPED = (".usdforge.toml", ".convert.json")


def make_checkout(work: Path) -> dict[str, dict[str, Any]]:
    """Write the library's files under ``work/lib``; return the two manifests' entries (name → table)."""
    import trimesh
    from PIL import Image

    from test_lazy import textured_obj
    from xacro_package import XACRO_CWD, write_bot

    lib = work / "lib"
    (lib / "crate").mkdir(parents=True)
    textured_obj(lib / "crate")
    (lib / "shared").mkdir()
    Image.new("RGB", (2, 2), (40, 80, 120)).save(lib / "shared" / "wood.png")
    (lib / "box").mkdir()
    trimesh.creation.box(extents=[0.1, 0.2, 0.3]).export(lib / "box" / "box.stl")
    trimesh.creation.box(extents=[0.3, 0.2, 0.1]).export(lib / "box" / "alt.stl")
    shutil.copytree(REPO / "assets" / "robots" / "tiny_arm", lib / "arm", ignore=shutil.ignore_patterns("*.py"))
    shutil.copytree(lib / "arm", lib / "arm_b")
    trimesh.creation.box(extents=[0.05, 0.05, 0.2]).export(lib / "arm_b" / "meshes" / "finger.stl")
    package = write_bot(lib / "bot")
    (package / "urdf" / "cwd.urdf.xacro").write_text(XACRO_CWD)
    shutil.copytree(REPO / "assets" / "robots" / "pan_tilt", lib / "pan_tilt", ignore=shutil.ignore_patterns("*.py"))
    first = {
        "crate": {"source": "crate/crate.obj", "cfg": {"mass_props": {"mass": 1.0},
                                                      "rigid_props": {"rigid_body_enabled": True}}},
        "box": {"source": "box/box.stl", "cfg": {"make_instanceable": False}},
        "arm": {"source": "arm/urdf/tiny_arm.urdf", "packages": {"tiny_arm": "arm"}, "cfg": {"fix_base": True}},
        "bot": {"source": "bot/bot_description/urdf/bot.urdf.xacro",
                "packages": {"bot_description": "bot/bot_description"}},
        "pan_tilt": {"source": "pan_tilt/pan_tilt.xml", "cfg": {}},
    }
    second = {
        "crate": {"source": "box/alt.stl", "cfg": {}},
        "box": {"source": "crate/crate.obj", "cfg": {"mass_props": {"mass": 2.0},
                                                    "rigid_props": {"rigid_body_enabled": True}}},
        "arm": {"source": "arm_b/urdf/tiny_arm.urdf", "packages": {"tiny_arm": "arm_b"}, "cfg": {}},
    }
    return {"library.toml": first, "library2.toml": second}


def manifest_text(entries: dict[str, dict[str, Any]]) -> str:
    import tomli_w

    return tomli_w.dumps({"assets": [{"name": name, **table} for name, table in entries.items()]})


def tree_digest(folders: list[Path]) -> str:
    """SHA-256 of the relative names and contents of every file under ``folders``."""
    digest = hashlib.sha256()
    for folder in sorted(set(folders)):
        digest.update(str(folder).encode() + b"\0")
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file():
                digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def names_outside(lib: Path, folders: list[Path]) -> str:
    """SHA-256 of the relative names of the files in the top-level folders of ``lib`` that files under
    ``folders`` mention (``shared/``, as ``../shared/wood.png``), and of the files directly in ``lib``. A
    conversion reads no byte outside ``folders``, but it sees whether a file it names there exists (an OBJ's
    texture in ``shared/`` without an allowed root: missing, a warning; present, an error), so a clean build
    memoised without them answers for a file since removed, renamed or restored. Only mentioned folders:
    every name in the library would void the memo at every removal (half as many clean builds again)."""
    if lib in folders:
        return ""  # tree_digest hashed every file
    text = b"".join(path.read_bytes() for folder in folders if folder.is_dir() for path in folder.rglob("*")
                    if path.is_file())
    mentioned = [top for top in sorted(lib.iterdir()) if top.is_dir() and top not in folders
                 and f"{top.name}/".encode() in text]
    names = sorted(path.relative_to(lib).as_posix() for top in [lib, *mentioned]
                   for path in (top.iterdir() if top == lib else top.rglob("*")) if path.is_file())
    return hashlib.sha256("\0".join(names).encode()).hexdigest()


def outputs(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(SKIPPED)}


class Oracle:
    """Clean builds, memoised by what they can depend on (see the module docstring)."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.memo: dict[str, Any] = {}
        self.runs = 0

    def clean(self, lib: Path, manifest: str, name: str) -> dict[str, bytes] | str:
        """The entry's outputs from a clean conversion, or "error: <message>"."""
        from usdforge.pipeline.converters import converter_for
        from usdforge.pipeline.manifest import entry_cfg, entry_kind, load_library
        from usdforge.rules.errors import ConversionError
        from usdforge.schemas import ConfigError

        library = load_library(lib / manifest)
        index, entry = next((i, e) for i, e in enumerate(library.assets) if e.name == name)
        table = json.dumps(next(a for a in _toml(lib / manifest)["assets"] if a["name"] == name), sort_keys=True)
        folders = [_top(lib, lib / entry.source), *(_top(lib, lib / p) for p in entry.packages.values()),
                   *(_top(lib, lib / r) for r in entry.cfg.get("allowed_roots", []))]
        key = hashlib.sha256(f"{lib}|{table}|{tree_digest(folders)}|{names_outside(lib, folders)}".encode()).hexdigest()
        if key not in self.memo:
            self.runs += 1
            build = self.scratch / f"clean-{self.runs}"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cfg = entry_cfg(library, entry, index, build, lib / manifest)
                    converter = converter_for(entry_kind(library, entry))(cfg, cache=False)
                self.memo[key] = outputs(Path(converter.usd_dir))
            except (ConfigError, ConversionError, ValueError) as exc:
                self.memo[key] = f"error: {exc}"
            shutil.rmtree(build, ignore_errors=True)
        return self.memo[key]


def _toml(path: Path) -> dict:
    import tomllib

    return tomllib.loads(path.read_text())


def _top(lib: Path, path: Path) -> Path:
    """The top-level folder of ``lib`` holding ``path`` (lib itself for a file directly in it)."""
    try:
        parts = Path(os.path.normpath(path)).relative_to(lib).parts
    except ValueError:
        return Path(os.path.normpath(path))
    return lib / parts[0] if len(parts) > 1 else lib


_DODO: dict[str, Any] = {}


def doit_convert(work: Path, manifest: Path, fresh_process: bool = False) -> tuple[int, set[str], str]:
    """Run ``doit convert library=manifest`` in ``work``: (exit status, failed entries, output)."""
    arguments = ["convert", f"library={manifest}"]
    if fresh_process:
        done = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(work),
                               *arguments], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=600)
        code, text = done.returncode, done.stdout + done.stderr
    else:
        from doit.cmd_base import ModuleTaskLoader
        from doit.doit_cmd import DoitMain

        if not _DODO:
            import runpy

            here = os.getcwd()
            os.chdir(work)
            try:
                _DODO.update(runpy.run_path(str(REPO / "dodo.py")))
            finally:
                os.chdir(here)
        here = os.getcwd()
        captured = io.StringIO()
        report = work.parent / "doit-report.txt"  # doit's reporter writes to the stdout it found at import
        os.chdir(work)
        try:
            with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                code = DoitMain(ModuleTaskLoader(_DODO)).run(["run", "--output-file", str(report), *arguments])
        finally:
            os.chdir(here)
        text = report.read_text() + captured.getvalue()
        from usdforge.pipeline import tasks

        for folder in list(getattr(tasks, "_HELD", {})):  # as when a doit process ends: the build folder's lock is released
            os.close(tasks._HELD.pop(folder))
    failed = set()
    for line in text.splitlines():
        if "task(s) failed:" in line:
            failed |= {item.strip().removeprefix("convert:") for item in line.split("failed:", 1)[1].split(",")}
    return code, failed, text


def _doit_process(work: Path, manifest: Path, *options: str) -> subprocess.Popen:
    """``doit convert library=manifest`` started in ``work`` in a process group of its own."""
    return subprocess.Popen([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(work), *options,
                             "convert", f"library={manifest}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")}, start_new_session=True)


class Divergence(AssertionError):
    """An incremental build that differs from the clean build of the same state (the message says where).
    The first one of a run is kept with its steps (``IncrementalBuilds.first_divergence``)."""

    def __init__(self, message: str):
        super().__init__(message)
        if IncrementalBuilds.first_divergence is None:
            IncrementalBuilds.first_divergence = {"error": f"Divergence: {message}",
                                                  "steps": list(IncrementalBuilds.log)}


class CodeChanged(RuntimeError):
    """The tester's own checkout changed while it ran: its clean builds (this process, the code it
    imported) and its builds in fresh processes (the code on disk) no longer run the same code, and the
    outputs differ in the conversion record's ``cache_key`` (it hashes the code). Not a divergence of the
    code under test: the run is void."""


#: ``code_on_disk`` when the run started (``run`` sets it).
_CODE_AT_START: list[Any] = []


@functools.cache
def _code_files() -> list[Path]:
    from usdforge.pipeline.code_version import code_files

    return list(code_files())


def code_on_disk() -> list[Any]:
    """The stat stamps (size, modification and change times, inode) of the files the conversion record's
    code stamp hashes (``pipeline.code_version.code_files``), as they are now: any edit, checkout or pull
    changes one (a few stat calls per step, where hashing them again would take 6 ms)."""
    from usdforge.pipeline.fingerprint import file_stamp

    return [(str(path), file_stamp(path)) for path in _code_files()]


def check_code_unchanged() -> None:
    """Raise ``CodeChanged`` when the checkout's code is no longer what it was when the run started."""
    if _CODE_AT_START and code_on_disk() != _CODE_AT_START[0]:
        raise CodeChanged("the checkout's code changed while the tester ran (an edit, a checkout, a pull): "
                          "builds in fresh processes run other code than the clean builds; the run is void, "
                          "run it again on a checkout nobody edits")


class IncrementalBuilds(RuleBasedStateMachine):
    """The state machine: a checkout (``self.work``), its manifests, and the steps of the module docstring."""

    base: Path = Path(tempfile.gettempdir())
    oracle: Oracle | None = None
    steps = 0
    log: list[str] = []
    kinds: dict[str, int] = {}  # how many steps of each kind (the first word of their note)
    #: The first divergence met ({"error", "steps"}): a replay by Hypothesis that does not meet it again (a
    #: kill's timing) raises its Flaky error, which would hide it and its steps.
    first_divergence: dict[str, Any] | None = None

    def __init__(self):
        super().__init__()
        self.manifests: dict[str, dict[str, dict[str, Any]]] = {}
        self.current = "library.toml"
        self.work = self.base / "checkout"
        self.saved: dict[str, bytes] = {}  # removed files, to restore

    # -- helpers
    @property
    def lib(self) -> Path:
        return self.work / "lib"

    def write_manifests(self) -> None:
        for name, entries in self.manifests.items():
            (self.lib / name).write_text(manifest_text(entries))

    def files(self) -> list[Path]:
        return sorted(p for p in self.lib.rglob("*") if p.is_file() and p.name not in MANIFESTS)

    def note(self, text: str) -> None:
        # On IncrementalBuilds itself, whatever the subclass running: ``run`` reports them from there.
        IncrementalBuilds.log.append(text)
        IncrementalBuilds.kinds[text.split(" ")[0]] = IncrementalBuilds.kinds.get(text.split(" ")[0], 0) + 1

    def build_and_compare(self, fresh_process: bool = False) -> None:
        IncrementalBuilds.steps += 1
        manifest = self.lib / self.current
        code, failed, text = doit_convert(self.work, manifest, fresh_process)
        check_code_unchanged()
        entries = self.manifests[self.current]
        for name in entries:
            expected = self.oracle.clean(self.lib, self.current, name)
            if isinstance(expected, str):
                if name not in failed:
                    raise Divergence(f"{name}: the clean build fails ({expected}), doit convert did not\n{text}")
                continue
            if name in failed:
                raise Divergence(f"{name}: doit convert failed, the clean build did not\n{text}")
            got = outputs(self.work / "build" / "usd" / name)
            if got != expected:
                differing = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
                raise Divergence(f"{name}: outputs differ from a clean build: {', '.join(differing)}\n{text}")

    # -- steps
    @initialize()
    def fresh_checkout(self):
        shutil.rmtree(self.base / "checkout", ignore_errors=True)
        shutil.rmtree(self.base / "moved", ignore_errors=True)
        self.work = self.base / "checkout"
        self.work.mkdir(parents=True)
        (self.work / "build").mkdir()
        self.manifests = make_checkout(self.work)
        self.write_manifests()
        IncrementalBuilds.log = []  # the steps of this example only
        self.note("fresh checkout")
        self.build_and_compare()

    @rule(which=st.integers(0, 10_000), digit=st.integers(0, 10_000), keep=st.booleans())
    def edit_a_byte(self, which, digit, keep):
        """A digit of a text file (another value), or another variant of a binary one (same size)."""
        files = self.files()
        path = files[which % len(files)]
        before = path.stat()
        data = bytearray(path.read_bytes())
        if path.suffix.lower() in (".stl",):
            import trimesh

            extents = [0.1 + (digit % 7) * 0.01, 0.2, 0.1 + (digit % 5) * 0.02]
            data = bytearray(trimesh.creation.box(extents=extents).export(file_type="stl"))
        elif path.suffix.lower() == ".png":
            from PIL import Image

            stream = io.BytesIO()
            Image.new("RGB", (2, 2), (digit % 256, 80, 40)).save(stream, format="PNG")
            data = bytearray(stream.getvalue())
        else:
            digits = [i for i, byte in enumerate(data) if 48 <= byte <= 57]
            if not digits:
                return self.build_and_compare()
            at = digits[digit % len(digits)]
            data[at] = 48 + (data[at] - 48 + 1) % 10
        path.write_bytes(bytes(data))
        if keep and path.stat().st_size == before.st_size:
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        self.note(f"edit {path.relative_to(self.lib)} (keep size+mtime: {keep})")
        self.build_and_compare()

    @rule(which=st.integers(0, 10_000))
    def touch(self, which):
        files = self.files()
        path = files[which % len(files)]
        later = time.time() + 3
        os.utime(path, (later, later))
        self.note(f"touch {path.relative_to(self.lib)}")
        self.build_and_compare()

    @rule(entry=st.integers(0, 100), field=st.sampled_from(
        ["mass", "source", "packages", "xacro_args", "allowed_roots", "kind", "ee_body", "instanceable",
         "shared_texture"]), value=st.integers(0, 3))
    def edit_the_manifest(self, entry, field, value):
        entries = self.manifests[self.current]
        name = sorted(entries)[entry % len(entries)]
        table = entries[name]
        cfg = table.setdefault("cfg", {})
        sources = {"crate": ["crate/crate.obj", "box/alt.stl"], "box": ["box/box.stl", "box/alt.stl"],
                   "arm": ["arm/urdf/tiny_arm.urdf", "arm_b/urdf/tiny_arm.urdf"],
                   "bot": ["bot/bot_description/urdf/bot.urdf.xacro", "bot/bot_description/urdf/cwd.urdf.xacro"],
                   "pan_tilt": ["pan_tilt/pan_tilt.xml"]}
        if field == "mass":
            cfg["mass_props"] = {"mass": 1.0 + value}
            cfg["rigid_props"] = {"rigid_body_enabled": True}
        elif field == "source":
            table["source"] = sources[name][value % len(sources[name])]
        elif field == "packages" and name == "arm":
            table["packages"] = {"tiny_arm": ["arm", "arm_b"][value % 2]}
        elif field == "xacro_args" and name == "bot":
            table["xacro_args"] = {"variant": ["short", "long"][value % 2]}
        elif field == "allowed_roots":
            if value % 2:
                cfg["allowed_roots"] = ["shared"]
            else:
                cfg.pop("allowed_roots", None)
        elif field == "kind":
            kind = {"crate": "mesh", "box": "mesh", "arm": "urdf", "bot": "urdf", "pan_tilt": "mjcf"}[name]
            if str(table["source"]).endswith((".stl", ".obj")):
                kind = "mesh"
            if value % 2:
                table["kind"] = kind
            else:
                table.pop("kind", None)
        elif field == "ee_body":
            if value % 2:
                table["ee_body"] = "hand"
            else:
                table.pop("ee_body", None)
        elif field == "instanceable":
            cfg["make_instanceable"] = bool(value % 2)
        elif field == "shared_texture" and (self.lib / "crate" / "crate.mtl").is_file():  # not removed
            mtl = self.lib / "crate" / "crate.mtl"
            text = mtl.read_text()
            target = ["wood.png", "../shared/wood.png"][value % 2]
            mtl.write_text("\n".join(f"map_Kd {target}" if line.startswith("map_Kd") else line
                                     for line in text.splitlines()) + "\n")
        self.write_manifests()
        self.note(f"manifest {self.current}: {name}.{field} ({value})")
        self.build_and_compare()

    @rule(which=st.integers(0, 10_000), how=st.sampled_from(["remove", "restore", "rename"]))
    def remove_restore_or_rename(self, which, how):
        if how == "restore" and self.saved:
            relative = sorted(self.saved)[which % len(self.saved)]
            (self.lib / relative).parent.mkdir(parents=True, exist_ok=True)
            (self.lib / relative).write_bytes(self.saved.pop(relative))
            for moved in (self.lib / relative).parent.glob(Path(relative).name + ".renamed"):
                moved.unlink()
        else:
            files = [p for p in self.files() if not p.name.endswith(".renamed")]
            path = files[which % len(files)]
            relative = path.relative_to(self.lib).as_posix()
            self.saved[relative] = path.read_bytes()
            if how == "rename":
                path.rename(path.with_name(path.name + ".renamed"))
            else:
                path.unlink()
        self.note(f"{how} {relative}")
        self.build_and_compare()

    @rule(which=st.integers(0, 100))
    def remove_an_entrys_outputs(self, which):
        usd = self.work / "build" / "usd"
        names = sorted(p.name for p in usd.iterdir()) if usd.is_dir() else []
        if names:
            shutil.rmtree(usd / names[which % len(names)])
            self.note(f"remove outputs of {names[which % len(names)]}")
        self.build_and_compare()

    @rule(clone=st.booleans(), keep_times=st.booleans())
    def move_or_clone_the_checkout(self, clone, keep_times):
        target = self.base / ("moved" if self.work.name == "checkout" else "checkout")
        shutil.rmtree(target, ignore_errors=True)
        if clone:
            shutil.copytree(self.work, target, copy_function=shutil.copy2 if keep_times else shutil.copy,
                            symlinks=True)
            shutil.rmtree(self.work)  # the old one is gone, so the oracle's memo sees one place at a time
        else:
            shutil.move(self.work, target)
        self.work = target
        self.note(f"{'clone' if clone else 'move'} the checkout to {target.name} (times kept: {keep_times})")
        self.build_and_compare()

    @rule()
    def switch_libraries(self):
        self.current = "library2.toml" if self.current == "library.toml" else "library.toml"
        self.note(f"switch to {self.current}")
        self.build_and_compare()

    @rule(which=st.integers(0, 10_000), how=st.sampled_from(["flip", "entry"]))
    def corrupt_the_cache(self, which, how):
        from usdforge.pipeline.cache import sha256_bytes

        cache = self.work / "build" / "cache"
        if how == "flip":
            objects = sorted((cache / "objects").glob("*/*")) if (cache / "objects").is_dir() else []
            if objects:
                victim = objects[which % len(objects)]
                data = bytearray(victim.read_bytes())
                data[which % len(data)] ^= 0x01
                victim.write_bytes(bytes(data))
                self.note(f"flip a byte of cache object {victim.name[:12]}")
        else:
            entries = sorted((cache / "entries").glob("*/*.json")) if (cache / "entries").is_dir() else []
            if len(entries) >= 2:
                victim, other = entries[which % len(entries)], entries[(which + 1) % len(entries)]
                body, donor = json.loads(victim.read_bytes()), json.loads(other.read_bytes())
                body.pop("checksum")
                names = sorted(body["files"])
                if not names:  # an entry holding data only (the Isaac Lab cfg's facts): no object to forge
                    self.build_and_compare()
                    return
                for index, name in enumerate(sorted(donor["files"])):
                    body["files"][names[index % len(names)]] = donor["files"][name]
                body["checksum"] = sha256_bytes(json.dumps(body, sort_keys=True).encode())
                victim.write_text(json.dumps(body, sort_keys=True))
                self.note(f"cache entry {victim.name[:12]} names the objects of {other.name[:12]}")
        self.build_and_compare()

    @rule(other_library=st.booleans())
    def two_builds_at_once(self, other_library):
        """Two ``doit convert`` processes in the checkout at once (the same library, or the other one:
        refused while the first runs); then the build of the step, whose outputs must be clean."""
        manifests = [self.lib / self.current, self.lib / (("library2.toml" if self.current == "library.toml"
                                                             else "library.toml") if other_library else self.current)]
        running = [_doit_process(self.work, manifest) for manifest in manifests]
        for process in running:
            process.communicate(timeout=600)
        self.note(f"two builds at once ({'another library' if other_library else 'the same library'})")
        self.build_and_compare()

    @rule(after=st.floats(0.0, 3.0))
    def kill_a_build(self, after):
        """``kill -9`` of a ``doit convert -n 2`` part-way; then the build of the step."""
        import signal

        process = _doit_process(self.work, self.lib / self.current, "-n", "2")
        try:
            process.communicate(timeout=after)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
        self.note(f"kill -9 a build after {after:.2f} s")
        self.build_and_compare()

    @rule(which=st.integers(0, 3))
    def build_again(self, which):
        """A build with nothing changed, in a fresh process one time in four (Hypothesis favours rules
        without arguments: a bare rule would be a third of all steps)."""
        self.note("build again" + (" in a fresh process" if which == 0 else ""))
        self.build_and_compare(fresh_process=which == 0)


class IncrementalBuildsWithCfgEdits(IncrementalBuilds):
    """The same, with robot cfg edits among the steps (a class of its own: with ``--no-cfg-edits`` the
    steps a seed draws are exactly those of the machine without them)."""

    @rule(entry=st.sampled_from(["arm", "bot", "pan_tilt"]), value=st.integers(0, 7))
    def edit_a_robot_cfg(self, entry, value):
        """A cfg edit that rebuilds a robot from its cached intermediate and reuses the layers it leaves
        alone (rules.robot.layer_fields): drive gains, PhysX, collision approximation, robot schema."""
        entries = self.manifests[self.current]
        if entry not in entries:
            return
        cfg = entries[entry].setdefault("cfg", {})
        mjcf = entry == "pan_tilt"
        edit = value % 4
        if edit == 0:
            if mjcf:
                cfg["override_gain_prm"] = [10.0 + value]
            else:
                cfg["joint_drive"] = {"gains": {"type": "PDGainsCfg", "stiffness": 10.0 + value}}
        elif edit == 1:
            cfg["self_collision"] = value >= 4
        elif edit == 2:
            cfg["collision_type"] = ["Convex Hull", "Bounding Cube"][value >= 4]
        else:
            cfg["robot_type"] = ["Default", "Manipulator"][value >= 4]
        self.write_manifests()
        self.note(f"cfg {self.current}: {entry} edit {edit} ({value})")
        self.build_and_compare()


def run(steps: int, seed: int, example_steps: int, base: Path, shrink: bool = False,
        cfg_edits: bool = True) -> dict[str, Any]:
    """Run examples of ``example_steps`` steps until ``steps`` steps in all; the summary."""
    machine_class = IncrementalBuildsWithCfgEdits if cfg_edits else IncrementalBuilds
    IncrementalBuilds.base = base
    IncrementalBuilds.oracle = Oracle(base / "scratch")
    IncrementalBuilds.steps = 0
    IncrementalBuilds.kinds = {}
    IncrementalBuilds.first_divergence = None
    started = time.perf_counter()
    seeds = []
    divergence = None
    _CODE_AT_START[:] = [code_on_disk()]
    while IncrementalBuilds.steps < steps and divergence is None:
        current = seed + len(seeds)
        seeds.append(current)
        print(f"differential: seed {current} ({IncrementalBuilds.steps} steps so far)", file=sys.stderr, flush=True)
        IncrementalBuilds.log = []
        machine = use_seed(current)(machine_class)
        try:
            run_state_machine_as_test(machine, settings=settings(
                max_examples=max(1, (steps - IncrementalBuilds.steps) // example_steps + 1),
                stateful_step_count=example_steps, deadline=None, database=None,
                phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
                suppress_health_check=list(HealthCheck),
                print_blob=True))
        except Exception as exc:  # noqa: BLE001 - a divergence (or a crash of the tester) is reported whole
            divergence = {"seed": current, "error": f"{type(exc).__name__}: {exc}",
                          "steps": list(IncrementalBuilds.log)}
            if IncrementalBuilds.first_divergence is not None and not isinstance(exc, Divergence):
                # The replay did not meet it again (Flaky, FlakyStrategyDefinition): the divergence met, its steps.
                divergence.update(IncrementalBuilds.first_divergence, replay=f"{type(exc).__name__}: {str(exc)[:500]}")
        if divergence is None and IncrementalBuilds.first_divergence is not None:  # a replay that passed, unreported
            divergence = {"seed": current, **IncrementalBuilds.first_divergence}
        # Checked after any failure: Hypothesis replays a failing example, so a code change shows as a
        # CodeChanged, a FlakyStrategyDefinition (the replay failed earlier) or a divergence of the first
        # entry's conversion record (its cache_key), whichever the replay met first.
        if code_on_disk() != _CODE_AT_START[0]:
            divergence = {"seed": current, "void": True, "steps": [],
                          "error": f"what the run met: {divergence['error'] if divergence else 'no divergence'}"}
    return {"steps": IncrementalBuilds.steps, "seeds": seeds,
            "divergences": 0 if divergence is None or divergence.get("void") else 1,
            "divergence": divergence, "clean_builds": IncrementalBuilds.oracle.runs,
            "kinds": dict(sorted(IncrementalBuilds.kinds.items())),
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps in all (each ends with a build)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first example run")
    parser.add_argument("--example-steps", type=int, default=25, help="steps per example (fresh checkout)")
    parser.add_argument("--shrink", action="store_true", help="on a divergence, let Hypothesis shrink the "
                        "steps to a minimal sequence (slow: each step is a build)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    parser.add_argument("--no-cfg-edits", action="store_true", help="leave robot cfg edits out of the steps "
                        "(tests/test_differential.py keeps its sequence and time; tests/test_layer_fields.py covers them)")
    args = parser.parse_args()
    os.environ.pop("USDFORGE_CACHE", None)  # doit convert's default: build/cache inside the checkout
    with tempfile.TemporaryDirectory(prefix="usdforge-differential-") as tmp:
        summary = run(args.steps, args.seed, args.example_steps, Path(tmp), args.shrink, not args.no_cfg_edits)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"differential: {summary['steps']} steps, seeds {summary['seeds'][0]}..{summary['seeds'][-1]}, "
              f"{summary['divergences']} divergence(s), {summary['clean_builds']} clean builds, "
              f"{summary['seconds']} s\nsteps by kind: {summary['kinds']}")
    if summary["divergence"] and summary["divergence"].get("void"):
        print(f"VOID at seed {summary['divergence']['seed']}: the checkout's code changed while the tester ran "
              f"(builds in fresh processes ran other code than the clean builds); run it again on a checkout "
              f"nobody edits ({summary['divergence']['error']})", file=sys.stderr)
        sys.exit(2)
    if summary["divergence"]:
        d = summary["divergence"]
        print(f"DIVERGENCE at seed {d['seed']}: {d['error']}\nsteps:\n  " + "\n  ".join(d["steps"]), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
