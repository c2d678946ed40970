"""Seeded mutation fuzzer: mutated URDF, MJCF and mesh files through ``usdforge convert``.

    python bench/fuzz.py --minutes N [--seed 0] [--timeout 60] [--shared ../shared]

Seeds are the conformance fixtures and the smaller corpus models in ``../shared`` and the conformance
meshes, and a generated textured OBJ (``generated_seeds``); every other mutated mesh is converted as the
only mesh of a one-link URDF (every fourth STL instead as the visual-only mesh of a one-body MJCF, which
MuJoCo does not compile: ``model_around``), so that the robot path's readers are fuzzed as well as the standalone
converter's (both Assimp first, trimesh as the fallback). Each input is one seed with one
or more mutations: byte flips, truncation, an XML element deleted
or duplicated, a number replaced by nan / inf / -inf / 1e300 / an empty string / a word. The mutated file
is written into a fresh folder beside links to the seed's own files (meshes, textures) and converted with
``usdforge convert IN OUT --allow-root <seed folder>`` in a worker process, under a per-input timeout (a
worker that overruns is killed and counted as a hang; one that dies is a crash).

Every ``--cache-every``-th input (default 3) mutates a build cache instead of a model, as whoever can
write a shared cache could: a seed is converted once with ``--cache DIR``, then one of its entry's file
names is made hostile (``..``, absolute, empty parts, control characters), an object name made a path, an
object swapped for another or replaced by a FIFO, a link to ``/dev/zero`` or to a file outside, a folder of
the cache made a link out of it, ``stats.log`` made a link, the entry's JSON or meta data broken (the
checksum recomputed, as anyone can); the seed is then converted again from that cache, and ``usdforge
cache stats``, ``prune`` and ``clear`` run on it.

Every ``--uri-every``-th model input (default 4) that names files instead points one reference (a URDF
``filename``, an MJCF ``file``) at a mesh outside its roots, in a folder beside the fuzzer's scratch
folder: ``package://<that folder>/outside/secret.obj`` (found by a package search that climbs to the
temporary folder), ``package:///…``, ``../../…``, the absolute path, ``file://…``, ``$(find …)``,
``package://etc/passwd``. The secret
mesh holds a coordinate no seed has (1234.5678): an output holding its bytes (float32 or float64) read
outside its roots.

Each result is one of: converted (and its USD holds no nan/inf), clean error (exit 1, one line
``usdforge: error: ...`` on stderr per problem - one per missing file of a model -, nothing else, no
traceback, nothing written), crash (anything else: a traceback, an exit status other than 0/1, other lines
beside the errors, a dead worker, or output left behind by a failed conversion), hang, non-finite output,
or outside: a file outside the input's build and cache folders was created, changed or deleted (a sentinel
folder the hostile cache entries aim at, the seed's own folder, and the fuzzer's scratch folder and its
parent are compared before and after each input), or an output holds the outside secret's bytes. Prints the counts and one reproducer line per problem;
exits 1 when there is any crash, hang, non-finite output or file touched outside.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import random
import re
import selectors
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
REPLACEMENTS = [b"nan", b"inf", b"-inf", b"1e300", b"-1e300", b"", b"abc", b"1e-320", b"NaN 0", b"0x10"]
MESH_EXTENSIONS = (".stl", ".obj", ".dae", ".ply", ".off", ".glb", ".gltf")
#: Corpus models whose folder is larger than this are left out (each would take seconds per input).
MAX_SEED_FOLDER_BYTES = 3 << 20


# ---- seeds and mutations ------------------------------------------------------------------------------

def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def seeds(shared: Path) -> list[Path]:
    """Model and mesh files to mutate, sorted (so a seed gives the same inputs on every machine)."""
    found = sorted((shared / "conformance/urdf").glob("*.urdf")) + sorted((shared / "conformance/mjcf").glob("*.xml"))
    for folder in sorted((shared / "corpus/urdf").iterdir()) + sorted((shared / "corpus/mjcf").iterdir()):
        if folder.is_dir() and _folder_bytes(folder) <= MAX_SEED_FOLDER_BYTES:
            found += sorted(p for p in folder.iterdir() if p.suffix in (".urdf", ".xml") and "scene" not in p.name)
    found += sorted(p for p in (shared / "conformance").rglob("*") if p.suffix.lower() in MESH_EXTENSIONS)
    return found


def _flip(data: bytes, rng: random.Random) -> bytes:
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if buffer:
            buffer[rng.randrange(len(buffer))] = rng.randrange(256)
    return bytes(buffer)


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(len(data) + 1)]


def _number(data: bytes, rng: random.Random) -> bytes:
    matches = list(NUMBER.finditer(data))
    if not matches:
        return _flip(data, rng)
    for match in rng.sample(matches, min(len(matches), rng.randint(1, 3))):
        data = data[:match.start()] + rng.choice(REPLACEMENTS) + data[match.end():] if len(data) else data
        matches = list(NUMBER.finditer(data))
        if not matches:
            break
    return data


def _element(data: bytes, rng: random.Random, duplicate: bool) -> bytes:
    from lxml import etree

    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True))
    except etree.XMLSyntaxError:
        return _flip(data, rng)
    elements = [e for e in root.iter(etree.Element) if e is not root and e.getparent() is not None]
    if not elements:
        return _flip(data, rng)
    element = rng.choice(elements)
    parent = element.getparent()
    if duplicate:
        parent.insert(parent.index(element), copy.deepcopy(element))
    else:
        parent.remove(element)
    return etree.tostring(root)


MUTATIONS = {
    "flip": _flip, "truncate": _truncate, "number": _number,
    "delete": lambda d, r: _element(d, r, False), "duplicate": lambda d, r: _element(d, r, True),
}


#: A coordinate of the outside secret mesh that no seed holds: found in an output, it was read from outside.
SECRET = 1234.5678
SECRET_BYTES = (struct.pack("<f", SECRET), struct.pack("<d", SECRET), b"1234.5678", b"1234.567")
HOSTILE_URIS = ["package://{pkg}/outside/secret.obj", "package:///{pkg}/outside/secret.obj",
                "../../{pkg}/outside/secret.obj", "{secret}", "file://{secret}", "package://etc/passwd",
                "package://usr/share/secret.obj", "$(find {pkg})/outside/secret.obj",
                "package://{pkg}/../{pkg}/outside/secret.obj", "package://outside/secret.obj"]
REFERENCE = re.compile(rb'\b(filename|file)="([^"]*)"')


def hostile_uri(data: bytes, rng: random.Random, secret: Path) -> tuple[bytes, str] | None:
    """``data`` with one file reference pointed at ``secret`` (a mesh outside its roots: ``HOSTILE_URIS``),
    and the URI; None when the model names no file."""
    matches = list(REFERENCE.finditer(data))
    if not matches:
        return None
    match = rng.choice(matches)
    uri = rng.choice(HOSTILE_URIS).format(pkg=secret.parents[1].name, secret=secret)
    return data[:match.start(2)] + uri.encode() + data[match.end(2):], uri


def make_secret() -> Path:
    """``<tmp>/usdforge_secret_*/outside/secret.obj``: a folder beside the fuzzer's scratch folder, so a
    package search that climbs to the temporary folder (``package://usdforge_secret_*/…``) finds it."""
    folder = Path(tempfile.mkdtemp(prefix="usdforge_secret_")) / "outside"
    folder.mkdir()
    (folder / "secret.obj").write_text(f"v {SECRET} 0 0\nv 0 {SECRET} 0\nv 0 0 {SECRET}\nf 1 2 3\n")
    return folder / "secret.obj"


def secret_in(folder: Path) -> str:
    """The first output file under ``folder`` holding the outside secret's bytes ("" when none)."""
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file() and not path.is_symlink() and any(s in path.read_bytes() for s in SECRET_BYTES):
            return f"{path.name} holds bytes of {SECRET} from the outside secret mesh"
    return ""


def mutate(data: bytes, rng: random.Random, xml: bool) -> tuple[bytes, list[str]]:
    names = [n for n in MUTATIONS if xml or n in ("flip", "truncate", "number")]
    applied = [rng.choice(names) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
    for name in applied:
        data = MUTATIONS[name](data, rng)
    return data, applied


def generated_seeds(folder: Path) -> list[Path]:
    """Seeds the shared material lacks, written into ``folder``: a triangulated OBJ whose MTL material
    has its Kd and a diffuse map (a PNG), the textured OBJ that Assimp reads (#26), and a binary STL (the
    shared ones are ASCII), the only kind an MJCF visual-only mesh is read from its file as
    (``model_around``)."""
    sys.path.insert(0, str(REPO / "tests"))
    from meshes import textured_obj, write_mesh

    folder.mkdir(parents=True)
    (folder / "stl").mkdir()
    return [textured_obj(folder), write_mesh(folder / "stl", "stl")]


def workspace(seed: Path, data: bytes, folder: Path) -> Path:
    """``folder`` with links to every file beside ``seed`` and the mutated file under the seed's name."""
    folder.mkdir(parents=True)
    for item in seed.parent.iterdir():
        if item.name != seed.name:
            os.symlink(item, folder / item.name)
    mutated = folder / seed.name
    mutated.write_bytes(data)
    return mutated


def robot_around(mesh: Path) -> Path:
    """A one-link URDF beside ``mesh`` that uses it as visual and collision geometry (no inertial: its
    mass comes from the mesh's volume)."""
    urdf = mesh.parent / "fuzz_robot.urdf"
    urdf.write_text(f'''<robot name="fuzz"><link name="base">
  <visual><geometry><mesh filename="{mesh.name}"/></geometry></visual>
  <collision><geometry><mesh filename="{mesh.name}"/></geometry></collision>
</link></robot>
''')
    return urdf


def model_around(mesh: Path) -> Path:
    """A one-body MJCF beside ``mesh`` that shows it as a visual-only geom (contype and conaffinity 0, the
    body's inertia given): a binary STL there is not compiled by MuJoCo but read from its file by the mesh
    reader (``rules.mjcf.visual_meshes``, #26)."""
    model = mesh.parent / "fuzz_model.xml"
    model.write_text(f'''<mujoco model="fuzz"><asset><mesh name="shown" file="{mesh.name}"/></asset>
  <worldbody><body name="base"><freejoint/><inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>
    <geom type="mesh" mesh="shown" contype="0" conaffinity="0"/><geom type="box" size="0.1 0.1 0.1"/>
  </body></worldbody>
</mujoco>
''')
    return model


# ---- the worker: converts inputs in-process, one JSON line per input ---------------------------------

def worker() -> None:
    """Read ``{"args": [...], "out": dir}`` lines; run ``usdforge convert``; answer one JSON line each.

    What the conversion prints at the C level (MuJoCo, USD) on file descriptor 2 is what a user would see
    on stderr too: it is captured per input, beside Python's sys.stderr. File descriptor 1 is sent to
    /dev/null so that nothing but the answers reaches the parent."""
    import traceback
    import warnings

    from usdforge.pipeline.cli import main

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    saved_stderr = os.dup(2)
    for line in sys.stdin:
        job = json.loads(line)
        err, out = io.StringIO(), io.StringIO()
        with tempfile.TemporaryFile() as c_stderr:
            os.dup2(c_stderr.fileno(), 2)
            with redirect_stderr(err), redirect_stdout(out), warnings.catch_warnings():
                try:
                    status = main(job.get("argv") or ["convert", "-q", *job["args"]])
                except SystemExit as exc:  # argparse
                    status = exc.code if isinstance(exc.code, int) else 2
                except BaseException as exc:  # noqa: BLE001 - an escaped exception is what we look for
                    err.write("Traceback (escaped exception)\n" + "".join(traceback.format_exception(exc)))
                    status = -1
            os.dup2(saved_stderr, 2)
            c_stderr.seek(0)
            c_text = c_stderr.read().decode(errors="replace")
        result = {"status": status, "stderr": c_text + err.getvalue(), "nonfinite": None}
        if status == 0 and job.get("out"):
            result["nonfinite"] = nonfinite_in(Path(job["out"]))
        answers.write(json.dumps(result) + "\n")
        answers.flush()


def nonfinite_in(folder: Path) -> str | None:
    """The first ``layer prim.attribute`` holding nan/inf among the USD files under ``folder``."""
    from pxr import Sdf

    from usdforge.rules.usd.finite import NonFiniteOutput, check_layer_finite

    for path in sorted(folder.rglob("*")):
        if path.suffix in (".usd", ".usda", ".usdc"):
            layer = Sdf.Layer.OpenAsAnonymous(str(path))
            try:
                check_layer_finite(layer, str(path))
            except NonFiniteOutput as exc:
                return str(exc)
    return None


class Worker:
    """A worker process answering one job at a time, restarted after a hang or a crash."""

    def __init__(self):
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.process = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
                                        bufsize=1)

    def run(self, job: dict, timeout: float) -> dict | str:
        """The worker's answer, or "hang" / "died"."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout)
        selector.close()
        if not ready:
            self.stop()
            return "hang"
        line = self.process.stdout.readline()
        if not line:
            self.stop()
            return "died"
        return json.loads(line)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


# ---- cache-entry mutations ---------------------------------------------------------------------------

#: What a hostile entry's file names aim at; ``{outside}`` is the sentinel folder, ``{token}`` unique per input.
HOSTILE_NAMES = ["../../{token}", "../{token}", "{outside}/{token}", "sub/../../{token}", "./{token}", "a//{token}",
                 "{token}\n", "..\\..\\{token}", "", "..", "/", "{token}/", "x" * 5000]


def snapshot(*folders: Path) -> dict[str, tuple]:
    """(type, size, mtime, sha256 of small regular files) of every entry under ``folders``, links not
    followed: what a case must leave as it found it."""
    import hashlib
    import stat as stat_module

    found: dict[str, tuple] = {}
    for folder in folders:
        if not folder.exists():
            continue
        for path in [folder, *folder.rglob("*")]:
            try:
                info = os.lstat(path)
            except OSError:
                continue
            digest = None
            if stat_module.S_ISREG(info.st_mode) and info.st_size <= 1 << 20:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path)] = (stat_module.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns, digest,
                                os.readlink(path) if stat_module.S_ISLNK(info.st_mode) else None)
    return found


def top_level(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir()}
    except OSError:
        return set()


def make_outside(folder: Path) -> Path:
    """The sentinel folder hostile cache entries aim at: files and sha-like names, old enough to prune."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "victim.txt").write_text("precious\n")
    (folder / "sub").mkdir(exist_ok=True)
    for name in ("a" * 64, "b" * 64, ".x.tmp-1", "c" * 64 + ".json"):
        (folder / "sub" / name).write_bytes(b"precious")
        os.utime(folder / "sub" / name, (1, 1))
    return folder


def _forge(entry: Path, body: dict) -> None:
    import hashlib

    body = {k: v for k, v in body.items() if k != "checksum"}
    body["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    entry.write_text(json.dumps(body, sort_keys=True))


def mutate_cache(cache: Path, outside: Path, token: str, rng: random.Random) -> str:
    """Apply one hostile change to the build cache at ``cache`` (which holds at least one entry); its name."""
    entries = sorted((cache / "entries").glob("*/*.json"))
    objects = sorted(p for p in (cache / "objects").glob("*/*") if p.is_file())
    if not entries or not objects:
        return "none (nothing cached)"
    entry = rng.choice(entries)
    body = json.loads(entry.read_text())
    files = body.get("files") or {}
    kind = rng.choice(["name", "name", "sha-path", "swap", "fifo", "dev-zero", "link-outside", "object-dir",
                       "folder-link", "entries-link", "stats-link", "json", "meta", "not-dict"])
    if kind == "name" and files:
        hostile = rng.choice(HOSTILE_NAMES).format(outside=outside, token=token)
        files[hostile] = rng.choice(list(files.values()))
        if rng.random() < 0.5:
            del files[rng.choice([n for n in files if n != hostile] or [hostile])]
        _forge(entry, body)
        return f"name {hostile[:60]!r}"
    if kind == "sha-path" and files:
        name = rng.choice(list(files))
        files[name] = rng.choice(["../../../" + token, str(outside / "victim.txt"), "..", "A" * 64, "zz"])
        _forge(entry, body)
        return f"object name {files[name]!r}"
    if kind == "swap" and len(objects) > 1 and files:
        name = rng.choice(list(files))
        files[name] = rng.choice(objects).name
        _forge(entry, body)
        return "swapped object"
    if kind in ("fifo", "dev-zero", "link-outside", "object-dir"):
        victim = rng.choice(objects)
        victim.unlink()
        if kind == "fifo":
            os.mkfifo(victim)
        elif kind == "dev-zero":
            victim.symlink_to("/dev/zero")
        elif kind == "link-outside":
            victim.symlink_to(outside / "victim.txt")
        else:
            victim.mkdir()
        return f"object made {kind}"
    if kind == "folder-link":
        folder = rng.choice(objects).parent
        shutil.rmtree(folder)
        folder.symlink_to(outside / "sub", target_is_directory=True)
        return "objects folder made a link out"
    if kind == "entries-link":
        (cache / "entries" / "zz").symlink_to(outside / "sub", target_is_directory=True)
        return "entries/zz a link out"
    if kind == "stats-link":
        (cache / "stats.log").unlink(missing_ok=True)
        (cache / "stats.log").symlink_to(outside / "victim.txt")
        return "stats.log a link out"
    if kind == "json":
        entry.write_bytes(entry.read_bytes()[:rng.randrange(1, 40)])
        return "entry truncated"
    if kind == "meta":
        body["meta"] = rng.choice([{"warnings": [1, None, {"file": 3}]}, {"warnings": "x"}, [1, 2],
                                   {"warnings": [{"file": "../../etc/passwd", "problem": 5, "line": "x"}]}])
        _forge(entry, body)
        return "meta data broken"
    body["files"] = rng.choice([[1, 2], "x", {"a.usd": 5}, None])
    _forge(entry, body)
    return "files not a name table"


def cache_case(worker_process: "Worker", source: Path, scratch: Path, outside: Path, index: int, seed: int,
               timeout: float, rng: random.Random) -> tuple[str, str, str]:
    """Convert ``source`` into a fresh cache, mutate the cache, convert again from it, then run the cache
    commands on it: (outcome, detail, mutation)."""
    cache, out_a, out_b = scratch / f"cache_{index}", scratch / f"out_{index}_a", scratch / f"out_{index}_b"
    base = [str(source), "--allow-root", str(source.parent), "--cache", str(cache)]
    if source.suffix == ".dae" and "urdf" in source.parts:
        base += ["--kind", "mesh"]
    first = worker_process.run({"argv": ["convert", "-q", base[0], str(out_a), *base[1:]], "out": str(out_a)}, timeout)
    if not isinstance(first, dict) or first["status"] != 0:
        return classify(first, out_a) + ("warm-up",)
    mutation = mutate_cache(cache, outside, f"usdforge-fuzz-escape-{seed}-{index}", rng)
    # Not checked for nan/inf: a cache's writer decides what a restore holds (a swapped object is restored
    # as it is; opening such a file with pxr is no test of usdforge).
    answer = worker_process.run({"argv": ["convert", "-q", base[0], str(out_b), *base[1:]]}, timeout)
    outcome, detail = classify(answer, out_b)
    if outcome not in ("converted", "clean"):
        return outcome, detail, mutation
    for command in (["cache", "stats", "--cache", str(cache)], ["cache", "prune", "--max-size", "1", "--cache",
                                                                  str(cache)], ["cache", "clear", "--cache", str(cache)]):
        answer = worker_process.run({"argv": command}, timeout)
        if answer in ("hang", "died") or answer["status"] != 0 or "Traceback" in answer["stderr"]:
            return ("hang" if answer == "hang" else "crash",
                    f"usdforge {' '.join(command[:2])}: {answer if isinstance(answer, str) else answer['stderr'][-200:]}",
                    mutation)
    return outcome, detail, mutation


# ---- the campaign -----------------------------------------------------------------------------------

def classify(answer: dict | str, out: Path) -> tuple[str, str]:
    """(outcome, detail) of one input."""
    if answer == "hang":
        return "hang", "no answer within the timeout"
    if answer == "died":
        return "crash", "the worker process died"
    stderr = answer["stderr"]
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("usdforge: error: ")]
    if "Traceback" in stderr:
        return "crash", stderr.strip().splitlines()[-1][:300]
    if answer["status"] == 0:
        if answer["nonfinite"]:
            return "nonfinite", answer["nonfinite"][:300]
        return "converted", ""
    # One line per problem: a model missing several files gets one located line for each.
    if answer["status"] == 1 and errors and len(lines) == len(errors):
        if out.exists():
            return "crash", f"output left behind by a failed conversion: {errors[0][:200]}"
        return "clean", errors[0]
    return "crash", f"exit {answer['status']}: {' | '.join(lines)[:300]}"


def campaign(minutes: float, seed: int, timeout: float, shared: Path, verbose: bool = False,
             cache_every: int = 3, uri_every: int = 4) -> dict:
    rng = random.Random(seed)
    files = seeds(shared)
    # Cache cases convert an unmutated seed twice: the small ones (fixtures, meshes) keep inputs fast.
    cache_seeds = [f for f in files if "conformance" in f.parts and f.stat().st_size <= 64 << 10]
    counts = {"tried": 0, "converted": 0, "clean": 0, "crash": 0, "hang": 0, "nonfinite": 0, "outside": 0,
              "cache_cases": 0, "uri_cases": 0}
    problems: list[str] = []
    worker_process = Worker()
    deadline = time.monotonic() + minutes * 60
    scratch = Path(tempfile.mkdtemp(prefix="usdforge_fuzz_"))
    files += generated_seeds(scratch / "generated")
    outside = make_outside(scratch / "outside")
    secret = make_secret()
    try:
        while time.monotonic() < deadline:
            index = counts["tried"]
            cache_input = cache_every > 0 and index % cache_every == cache_every - 1 and cache_seeds
            source = rng.choice(cache_seeds if cache_input else files)
            watched = (outside, source.parent)
            before, around = snapshot(*watched), (top_level(scratch), top_level(scratch.parent))
            folder = scratch / f"input_{index}"
            if cache_input:
                counts["cache_cases"] += 1
                outcome, detail, mutation = cache_case(worker_process, source, scratch, outside, index, seed,
                                                       timeout, rng)
                applied, mutated = [f"cache: {mutation}"], source
            else:
                xml = source.suffix in (".urdf", ".xml", ".dae")
                hostile = (hostile_uri(source.read_bytes(), rng, secret)
                           if xml and uri_every > 0 and index % uri_every == uri_every - 1 else None)
                if hostile is not None:
                    counts["uri_cases"] += 1
                    data, applied = hostile[0], [f"uri: {hostile[1]}"]
                else:
                    data, applied = mutate(source.read_bytes(), rng, xml)
                mutated = workspace(source, data, folder)
                out = scratch / f"out_{index}"
                args = [str(mutated), str(out), "--allow-root", str(source.parent), "--cache",
                        str(scratch / f"cache_{index}")]
                if source.suffix.lower() in MESH_EXTENSIONS and index % 2:
                    # Every other mesh input goes through a robot, whose meshes Assimp reads first (in a child
                    # process; trimesh where it refuses or crashes): both readers are fuzzed.
                    visual = source.suffix.lower() == ".stl" and index % 4 == 3
                    args[0] = str(model_around(mutated) if visual else robot_around(mutated))
                elif source.suffix == ".dae" and "urdf" in source.parts:
                    args += ["--kind", "mesh"]
                answer = worker_process.run({"args": args, "out": str(out)}, timeout)
                outcome, detail = classify(answer, out)
                leaked = secret_in(out) if outcome == "converted" else ""
                if leaked:
                    outcome, detail = "outside", leaked
            touched = touched_outside(before, snapshot(*watched), around, scratch, index)
            if touched and outcome in ("converted", "clean"):
                outcome, detail = "outside", touched
            counts["tried"] += 1
            counts[outcome] += 1
            if outcome in ("crash", "hang", "nonfinite", "outside"):
                kept = scratch.parent / f"usdforge_fuzz_case_{seed}_{index}{source.suffix}"
                shutil.copyfile(mutated, kept)
                problems.append(f"{outcome}: seed={seed} input={index} {source.relative_to(shared)} "
                                f"{'+'.join(applied)} (kept as {kept}): {detail}")
            if verbose:
                print(f"{index:5d} {outcome:9s} {source.name} {'+'.join(applied)} {detail[:120]}", flush=True)
            shutil.rmtree(folder, ignore_errors=True)
            for leftover in scratch.glob(f"out_{index}*"):
                shutil.rmtree(leftover, ignore_errors=True)
            shutil.rmtree(scratch / f"cache_{index}", ignore_errors=True)
            if snapshot(outside) != before_outside(before, outside):  # a problem was reported: start clean again
                shutil.rmtree(outside, ignore_errors=True)
                make_outside(outside)
            if index % 200 == 199:
                worker_process.stop()  # a fresh process now and then: no state builds up
    finally:
        worker_process.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(secret.parents[1], ignore_errors=True)
    return {**counts, "problems": problems, "seeds": len(files), "minutes": minutes, "seed": seed}


def before_outside(before: dict[str, tuple], outside: Path) -> dict[str, tuple]:
    return {path: value for path, value in before.items() if path == str(outside) or path.startswith(f"{outside}/")}


def touched_outside(before: dict[str, tuple], after: dict[str, tuple], around: tuple[set[str], set[str]],
                    scratch: Path, index: int) -> str:
    """What changed outside the input's build and cache folders (empty: nothing): the watched folders
    compared entry by entry, and new names in the scratch folder (besides this input's own folders) and
    in its parent."""
    changed = sorted(set(before) ^ set(after) | {p for p in set(before) & set(after) if before[p] != after[p]})
    own = (f"input_{index}", f"out_{index}", f"cache_{index}")
    added = sorted(name for name in top_level(scratch) - around[0] if not name.startswith(own)
                   and not name.startswith(".out_"))
    added += sorted(name for name in top_level(scratch.parent) - around[1] if "usdforge-fuzz-escape" in name)
    found = changed + added
    return f"{len(found)} file(s) outside the build and cache folders changed: {', '.join(found[:3])}" if found else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2.0, help="how long to fuzz (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per input before it is a hang")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared", help="the shared test material")
    parser.add_argument("--cache-every", type=int, default=3,
                        help="every K-th input mutates a build cache instead of a model (0: none; default 3)")
    parser.add_argument("--uri-every", type=int, default=4,
                        help="every K-th model input points a file reference outside its roots (0: none; default 4)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per input")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker()
        return 0
    if not (args.shared / "conformance").is_dir():
        parser.error(f"test material not found: {args.shared}")
    summary = campaign(args.minutes, args.seed, args.timeout, args.shared, args.verbose, args.cache_every,
                       args.uri_every)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"fuzz: {summary['minutes']} min, seed {summary['seed']}, {summary['seeds']} seed files: "
              f"{summary['tried']} inputs tried, {summary['converted']} converted, {summary['clean']} clean errors, "
              f"{summary['crash']} crashes, {summary['hang']} hangs, {summary['nonfinite']} non-finite outputs, "
              f"{summary['outside']} touching files outside the build and cache folders "
              f"({summary['cache_cases']} inputs were cache mutations, {summary['uri_cases']} pointed a file "
              "reference outside its roots)")
        for problem in summary["problems"]:
            print("  " + problem)
    return 1 if summary["crash"] or summary["hang"] or summary["nonfinite"] or summary["outside"] else 0


if __name__ == "__main__":
    sys.exit(main())
