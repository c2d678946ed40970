"""Conversion time per corpus robot, usdforge beside urdf-usd-converter 0.3.4 (Newton's URDF converter, the
one Isaac Lab's importer 3.0 wraps), on the same files in one run.

    python bench/convert.py [--repeat N] [NAME ...]

Both sides are timed in-process (interpreter start and imports excluded), each file converted ``--repeat``
times (default 5) into a fresh folder; both write layered assets (usdforge's ``run_asset_transformer``
default, the converter's ``layer_structure`` default). urdf-usd-converter bundles its own ``pxr``
(usd-exchange), which clashes with usd-core, so it runs in ``build/bench-venv`` (created on first use:
``pip install urdf-usd-converter==0.3.4``) as a server process that converts a file when asked: the runs
of the two are interleaved, so load from other processes hits both alike. Per file the fastest run
(least disturbed) is reported, and the median run beside it. The corpus is ``../shared/corpus``.

The MJCF table does the same for the corpus's MuJoCo Menagerie models against mujoco-usd-converter 0.8.0
(Newton's MJCF converter, the one Isaac Lab's MJCF importer wraps), in its own ``build/bench-venv-mjcf``
(``pip install mujoco-usd-converter==0.8.0``; its pins clash with urdf-usd-converter's).

Beside each table, what creating a new file cost on this disk before and after its runs
(``file_creation_us``): both sides create files, and where that swings (18 to 750 µs on the project's
machine) so do the small models' speed-ups (cartpole: 1.6x when a new file cost 720-800 µs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CORPUS = REPO.parent / "shared" / "corpus"
VENV = REPO / "build" / "bench-venv"
THEIRS = "urdf-usd-converter==0.3.4"
#: usdforge should be at least this much faster on the median.
TARGET_SPEEDUP = 3.0

def server_script(module: str, converter: str, source_key: str) -> str:
    """A reference converter as a server: it converts the case (JSON) of each stdin line and prints the
    seconds that took. converter: the expression that makes one (``case`` is in scope)."""
    return textwrap.dedent(f'''
        import json, sys, tempfile, time, warnings, logging
        logging.disable(logging.CRITICAL)
        warnings.simplefilter("ignore")
        import {module}
        print("ready", flush=True)
        for line in sys.stdin:
            case = json.loads(line)
            with tempfile.TemporaryDirectory() as out:
                converter = {converter}
                start = time.perf_counter()
                converter.convert(case["{source_key}"], out)
                seconds = time.perf_counter() - start
            # Answered once its folder is removed, as ``our_time`` returns: the removal must not run
            # beside usdforge's next timed conversion (it did, on the second of two processors).
            print(seconds, flush=True)
    ''')


THEIR_SCRIPT = server_script("urdf_usd_converter", 'urdf_usd_converter.Converter(ros_packages=case["packages"])', "urdf")



def corpus() -> list[dict]:
    manifest = CORPUS / "MANIFEST.json"
    if not manifest.is_file():
        sys.exit(f"bench: the corpus is missing: expected {manifest}")
    cases = []
    for entry in json.loads(manifest.read_text()):
        if entry["format"] == "urdf":
            cases.append({"name": entry["name"], "urdf": str(CORPUS / entry["path"]),
                          "packages": [{"name": n, "path": str(CORPUS / p)} for n, p in entry["package_paths"].items()]})
    return cases


def venv_python(venv: Path, requirement: str) -> Path:
    """The interpreter of ``venv`` with ``requirement`` (``name==version``) installed, made once."""
    python = venv / "bin" / "python"
    name, version = requirement.split("==")
    probe = [str(python), "-c", f"import importlib.metadata as m; assert m.version({name!r}) == {version!r}"]
    if python.is_file() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"bench: installing {requirement} into {venv} (once) ...", file=sys.stderr)
    for step in ([sys.executable, "-m", "venv", "--clear", str(venv)],
                 [str(python), "-m", "pip", "install", "--quiet", requirement]):
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"bench: {' '.join(step)} failed:\n{(done.stdout + done.stderr)[-2000:]}")
    return python


def our_time(case: dict) -> float:
    """Seconds for one usdforge conversion of ``case`` into a fresh folder."""
    from usdforge.rules.urdf.convert import convert
    from usdforge.schemas import UrdfConverterCfg

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        out = Path(folder)
        cfg = UrdfConverterCfg(asset_path=case["urdf"], usd_dir=str(out),
                               usd_file_name=Path(case["urdf"]).stem + ".usda", ros_package_paths=case["packages"])
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        convert(cfg, out)
        return time.perf_counter() - start


def measure(cases: list[dict], repeat: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(ours, theirs): run times per robot, the two interleaved run by run."""
    # Its log goes to a file: a pipe nobody reads would fill up and stall it.
    log = tempfile.TemporaryFile(mode="w+")
    server = subprocess.Popen([str(venv_python(VENV, THEIRS)), "-c", THEIR_SCRIPT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=log, text=True)
    if server.stdout.readline().strip() != "ready":
        log.seek(0)
        sys.exit(f"bench: urdf-usd-converter did not start:\n{log.read()[-3000:]}")
    ours = {case["name"]: [] for case in cases}
    theirs = {case["name"]: [] for case in cases}
    try:
        for case in cases:  # one warm-up each: first-use costs (imports inside converters, caches)
            our_time(case)
            server.stdin.write(json.dumps(case) + "\n")
            server.stdin.flush()
            server.stdout.readline()
        for _ in range(repeat):
            for case in cases:
                ours[case["name"]].append(our_time(case))
                server.stdin.write(json.dumps(case) + "\n")
                server.stdin.flush()
                answer = server.stdout.readline()
                if not answer:
                    log.seek(0)
                    sys.exit(f"bench: urdf-usd-converter failed on {case['name']}:\n{log.read()[-3000:]}")
                theirs[case["name"]].append(float(answer))
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    return ours, theirs


MJCF_VENV = REPO / "build" / "bench-venv-mjcf"
MJCF_THEIRS = "mujoco-usd-converter==0.8.0"

MJCF_SCRIPT = server_script("mujoco_usd_converter", "mujoco_usd_converter.Converter()", "mjcf")



def mjcf_corpus() -> list[dict]:
    """The corpus's MJCF models (MANIFEST.json), as cases for the MJCF rows."""
    manifest = CORPUS / "MANIFEST.json"
    if not manifest.is_file():
        sys.exit(f"bench: the corpus is missing: expected {manifest}")
    return [{"name": entry["name"], "mjcf": str(CORPUS / entry["path"])}
            for entry in json.loads(manifest.read_text()) if entry["format"] == "mjcf"]


def our_mjcf_time(case: dict) -> float:
    """Seconds for one usdforge MJCF conversion of ``case`` into a fresh folder (layered output)."""
    from usdforge.rules.mjcf.convert import convert
    from usdforge.schemas import MjcfConverterCfg

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        out = Path(folder)
        cfg = MjcfConverterCfg(asset_path=case["mjcf"], usd_dir=str(out),
                               usd_file_name=Path(case["mjcf"]).stem + ".usda")
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        convert(cfg, out)
        return time.perf_counter() - start


def measure_mjcf(cases: list[dict], repeat: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(ours, theirs): MJCF run times per model, interleaved run by run, after one warm-up each."""
    server = subprocess.Popen([str(venv_python(MJCF_VENV, MJCF_THEIRS)), "-c", MJCF_SCRIPT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if server.stdout.readline().strip() != "ready":
        sys.exit("bench: mujoco-usd-converter did not start")
    ours = {case["name"]: [] for case in cases}
    theirs = {case["name"]: [] for case in cases}

    def their_time(case: dict) -> float:
        server.stdin.write(json.dumps(case) + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
        if not answer:
            sys.exit(f"bench: mujoco-usd-converter failed on {case['name']}")
        return float(answer)

    try:
        for case in cases:
            our_mjcf_time(case)
            their_time(case)
        for _ in range(repeat):
            for case in cases:
                ours[case["name"]].append(our_mjcf_time(case))
                theirs[case["name"]].append(their_time(case))
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    return ours, theirs


def print_table(title: str, theirs_label: str, cases: list[dict], ours: dict[str, list[float]],
                theirs: dict[str, list[float]], repeat: int) -> None:
    """One table: fastest run per file and side, the speed-ups, and the median against the target."""
    print(f"{title:<22}{'usdforge ms':>12}{theirs_label + ' ms':>32}{'speed-up':>10}   (median runs)")
    best, typical = [], []
    for case in cases:
        name = case["name"]
        mine, other = min(ours[name]), min(theirs[name])
        best.append(other / mine)
        typical.append(statistics.median(theirs[name]) / statistics.median(ours[name]))
        print(f"{name:<22}{mine * 1e3:>12.1f}{other * 1e3:>32.1f}{best[-1]:>9.1f}x   "
              f"({statistics.median(ours[name]) * 1e3:.1f} vs {statistics.median(theirs[name]) * 1e3:.1f} ms, "
              f"{typical[-1]:.1f}x)")
    median = statistics.median(best)
    verdict = "meets" if median >= TARGET_SPEEDUP else "misses"
    print(f"{title}: median speed-up {median:.2f}x on the fastest runs ({statistics.median(typical):.2f}x on the "
          f"median runs): {verdict} the {TARGET_SPEEDUP:g}x target; {repeat} interleaved runs per file and side, "
          "in-process, layered output on both sides")


def file_creation_us(count: int = 50) -> float:
    """Microseconds to create a new file (and write 2 KB to it) in a fresh folder of the system's temporary
    folder, the median of ``count``. Both sides create files per conversion (a URDF: usdforge 10 files and
    2 folders, urdf-usd-converter 6 and 1), and on a disk where this swings (18 to 750 µs on the project's
    machine, hour by hour) so do the small models' speed-ups: printed beside each table."""
    import os

    times = []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(count):
            start = time.perf_counter()
            descriptor = os.open(os.path.join(folder, f"f{index}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(descriptor, b"x" * 2048)
            os.close(descriptor)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="corpus robots to time (default: every URDF and MJCF model)")
    parser.add_argument("--repeat", type=int, default=5, help="timed conversions per file and side")
    args = parser.parse_args(argv)
    urdf_cases = [c for c in corpus() if not args.names or c["name"] in args.names]
    if urdf_cases:
        before = file_creation_us()
        ours, theirs = measure(urdf_cases, args.repeat)
        print_table("URDF robot", THEIRS.replace("==", " "), urdf_cases, ours, theirs, args.repeat)
        print(f"  (a new file cost {before:.0f} µs before the URDF runs, {file_creation_us():.0f} µs after)")
    mjcf_cases = [c for c in mjcf_corpus() if not args.names or c["name"] in args.names]
    if mjcf_cases:
        before = file_creation_us()
        ours, theirs = measure_mjcf(mjcf_cases, args.repeat)
        print_table("MJCF model", MJCF_THEIRS.replace("==", " "), mjcf_cases, ours, theirs, args.repeat)
        print(f"  (a new file cost {before:.0f} µs before the MJCF runs, {file_creation_us():.0f} µs after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
