"""`doit convert` on generated libraries of 1,000 to 100,000 small mesh entries: cold, no-op, one edit.

    python bench/library_scale.py [--entries 1000 10000 100000] [--backend json sqlite3] [--repeat 3]
                                  [--work /tmp] [--distinct 0] [--usdforge DIR ...] [--check-clean]

Each library holds N entries of the embedded ``cone.off`` at different scales (``--distinct K``: K scales
cycled, so the build cache restores the repeats: a quicker way to build a 100 k library; 0: every entry
its own scale). For each N, backend and checkout it prints, side by side: the cold build (`doit -n 2
convert`: wall and CPU seconds, the workers' included), the first no-op after it, the median no-op
`doit convert` (wall and CPU), the median no-op of a bare doit file with N up-to-date tasks (one file_dep
and one target each, the json backend: doit's own floor), their ratios, the no-op's peak RSS, the size of
the state a no-op reads (doit's state, usdforge's learnt stamps, the cached task specs), the rebuild after
one entry's scale is edited (asserted to convert that entry only) with that entry's conversion (its
record's seconds) and what the rest of the rebuild costs in no-ops (issue #32: at most 2), and the
per-entry no-op cost. Every checkout's modules are compiled first (``bytecode.compile_package``).
``--check-clean``: then builds the edited manifest from scratch (no cache) and compares every output of
the incremental build with it, byte for byte. ``--usdforge DIR ...``: the checkouts to time (default: this
one), e.g. a main checkout and this one: each builds its own copy of the library, the cold builds one
after the other, the no-ops interleaved with each other's and the bare doit file's.
The 100 k library takes ~4 GB under --work and, cold, tens of minutes on 2 cores: run it in the
background with a log file (nohup python bench/library_scale.py --entries 100000 > log 2>&1 &).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bytecode import compile_package

REPO = Path(__file__).resolve().parents[1]

BARE_DODO = '''
import os

DOIT_CONFIG = {"backend": "json", "dep_file": "bare.doit.db", "default_tasks": ["copy"]}


def copy(source, target):
    with open(source, "rb") as read, open(target, "wb") as write:
        write.write(read.read())


def task_copy():
    for name in sorted(os.listdir("bare_in")):
        yield {"name": name, "file_dep": [f"bare_in/{name}"], "targets": [f"bare_out/{name}"],
               "actions": [(copy, [f"bare_in/{name}", f"bare_out/{name}"])]}
'''


def scale(index: int, distinct: int) -> float:
    return 1.0 + (index % distinct if distinct else index) * 1e-5


def write_manifest(folder: Path, entries: int, distinct: int, edited: int | None = None) -> Path:
    """N entries of cone.off, entry i at scale 1 + i·1e-5 (``edited``: that entry at another scale)."""
    lines = []
    for index in range(entries):
        factor = scale(index, distinct) + (0.5 if index == edited else 0.0)
        lines.append(f'[[assets]]\nname = "e{index:06d}"\nsource = "cone.off"\n[assets.cfg]\n'
                     f'scale = [{factor!r}, {factor!r}, {factor!r}]\n'
                     'collision_props = { collision_enabled = true }\n')
    path = folder / "library.toml"
    path.write_text("\n".join(lines))
    return path


def make_bare(folder: Path, entries: int) -> None:
    (folder / "bare_dodo.py").write_text(BARE_DODO)
    for sub in ("bare_in", "bare_out"):
        (folder / sub).mkdir(exist_ok=True)
    for index in range(entries):
        (folder / "bare_in" / f"f{index:06d}").write_bytes(b"x")


def run(command: list[str], cwd: Path, usdforge: Path) -> tuple[float, int, str, float]:
    """Wall seconds, peak RSS (MB, of the doit process itself), output and CPU seconds (user + system, of
    the process and the workers it waited for) of one whole process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PYTHONPATH": str(usdforge / "src")})
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{output[-3000:]}")
    return elapsed, int(usage.ru_maxrss / 1024), output, usage.ru_utime + usage.ru_stime


def state_size(build: Path) -> int:
    """Bytes of the state a no-op reads: doit's, usdforge's learnt stamps (an older usdforge's
    ``.usdforge-stamps.json`` or the code stamps), the cached task specs."""
    paths = [*build.glob(".doit.db*"), *build.glob(".usdforge-*stamps.json"), *(build / "task-specs").glob("*")]
    return sum(p.stat().st_size for p in paths if p.is_file())


def measure(entries: int, backend: str, args: argparse.Namespace, checkouts: list[Path]) -> list[dict[str, Any]]:
    """One row per checkout, all measured on the same generated library side by side: the cold builds one
    after the other, the no-ops interleaved with each other and with the bare doit file's (they see the
    same load)."""
    Path(args.work).mkdir(parents=True, exist_ok=True)
    for usdforge in checkouts:  # each starts from compiled bytecode, as after pip install
        compile_package(usdforge / "src" / "usdforge", usdforge / "dodo.py")
    folders = [Path(tempfile.mkdtemp(prefix=f"usdforge-lib{entries}-", dir=args.work)) for _ in checkouts]
    try:
        doits: list[list[str]] = []
        libraries: list[Path] = []
        rows: list[dict[str, Any]] = []
        for folder, usdforge in zip(folders, checkouts):
            shutil.copy(REPO / "assets/meshes/cone.off", folder / "cone.off")
            libraries.append(write_manifest(folder, entries, args.distinct))
            doits.append([sys.executable, "-m", "doit", "--backend", backend, "-f", str(usdforge / "dodo.py"),
                          "-d", str(folder)])
        make_bare(folders[0], entries)
        bare = [sys.executable, "-m", "doit", "-f", str(folders[0] / "bare_dodo.py"), "-d", str(folders[0])]
        for doit, library, folder, usdforge in zip(doits, libraries, folders, checkouts):
            cold, _, _, cold_cpu = run([*doit, "-n", "2", "convert", f"library={library}"], folder, usdforge)
            rows.append({"usdforge": str(usdforge), "entries": entries, "cold": cold, "cold_cpu": cold_cpu,
                         "noops": [], "noop_cpus": [], "rss": 0})
            # The first no-op after the cold build: it learns the stamps the build did not (outputs written in
            # the last moments before doit's state was), then the no-ops below are timed.
            rows[-1]["first_noop"] = run([*doit, "convert", f"library={library}"], folder, usdforge)[0]
        run(bare, folders[0], checkouts[0])
        floor, floor_cpu = [], []
        for _ in range(args.repeat):  # interleaved: all see the same load
            for doit, library, folder, usdforge, row in zip(doits, libraries, folders, checkouts, rows):
                elapsed, peak, output, cpu = run([*doit, "convert", f"library={library}"], folder, usdforge)
                assert ".  convert:" not in output, output[-2000:]
                row["noops"].append(elapsed)
                row["noop_cpus"].append(cpu)
                row["rss"] = max(row["rss"], peak)
            elapsed, _, _, cpu = run(bare, folders[0], checkouts[0])
            floor.append(elapsed)
            floor_cpu.append(cpu)
        edited = entries // 2
        for doit, library, folder, usdforge, row in zip(doits, libraries, folders, checkouts, rows):
            write_manifest(folder, entries, args.distinct, edited)
            edit, _, output, _ = run([*doit, "convert", f"library={library}"], folder, usdforge)
            rebuilt = [line for line in output.splitlines() if line.startswith(".  convert:")]
            assert rebuilt == [f".  convert:e{edited:06d}"], rebuilt[:5]
            row.update(noop=statistics.median(row["noops"]), noop_cpu=statistics.median(row["noop_cpus"]),
                       bare=statistics.median(floor), bare_cpu=statistics.median(floor_cpu), edit=edit,
                       edit_conversion=conversion_seconds(folder / "build/usd" / f"e{edited:06d}"),
                       state=state_size(folder / "build") / 1e6)
            if args.check_clean:
                row["clean_equal"] = same_as_clean(folder, doit, library, usdforge)
        return rows
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def conversion_seconds(usd_dir: Path) -> float:
    """The wall seconds of the entry's last conversion, as its record (``<name>.convert.json``) gives them."""
    import json

    (record,) = usd_dir.glob("*.convert.json")
    return float(json.loads(record.read_text())["seconds"])


def outputs(usd: Path) -> dict[str, bytes]:
    """Every output file under ``usd`` but the lazy keys and conversion records (they name their folder
    and hold times)."""
    return {str(p.relative_to(usd)): p.read_bytes() for p in usd.rglob("*")
            if p.is_file() and not p.name.endswith((".usdforge.toml", ".convert.json"))}


def same_as_clean(folder: Path, doit: list[str], library: Path, usdforge: Path) -> bool:
    """Whether the incremental build (cold, no-ops, one edit) equals a clean build of the edited manifest
    in a fresh folder without a cache, byte for byte."""
    clean = folder / "clean"
    clean.mkdir()
    command = [*doit[:-1], str(clean), "-n", "2", "convert", f"library={library}", "cache=off"]
    run(command, clean, usdforge)
    mine, theirs = outputs(folder / "build/usd"), outputs(clean / "build/usd")
    return mine.keys() == theirs.keys() and all(mine[name] == theirs[name] for name in mine)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--backend", nargs="+", default=["json", "sqlite3"], choices=["json", "sqlite3", "dbm"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", default=tempfile.gettempdir())
    parser.add_argument("--distinct", type=int, default=0, help="K scales cycled (0: one per entry)")
    parser.add_argument("--usdforge", type=Path, nargs="+", default=[REPO],
                        help="the checkouts to time side by side (default: this one), e.g. a main checkout and this one")
    parser.add_argument("--check-clean", action="store_true",
                        help="also build the edited manifest from scratch (no cache) and compare every output")
    args = parser.parse_args()
    os.environ.pop("USDFORGE_CACHE", None)  # each library's own build/cache
    print(f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores; distinct scales: {args.distinct or 'all'}",
          flush=True)
    print("| usdforge | entries | backend | cold -n 2 s (CPU s) | first no-op s | no-op s | no-op CPU s | bare doit s (CPU s) "
          "| ratio wall / CPU | no-op peak RSS MB | state MB | one edit s (its conversion) | edit less conversion "
          "/ no-op | no-op µs/entry |", flush=True)
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for entries in args.entries:
        for backend in args.backend:
            for row in measure(entries, backend, args, args.usdforge):
                print(f"| {row['usdforge']} | {entries:,} | {backend} | {row['cold']:.1f} ({row['cold_cpu']:.1f}) | "
                      f"{row['first_noop']:.2f} | {row['noop']:.2f} | {row['noop_cpu']:.2f} | "
                      f"{row['bare']:.2f} ({row['bare_cpu']:.2f}) | "
                      f"{row['noop'] / row['bare']:.2f}× / {row['noop_cpu'] / row['bare_cpu']:.2f}× | {row['rss']} | "
                      f"{row['state']:.1f} | {row['edit']:.2f} ({row['edit_conversion']:.2f}) | "
                      f"{(row['edit'] - row['edit_conversion']) / row['noop']:.2f} | {1e6 * row['noop'] / entries:.0f} |",
                      flush=True)
                if "clean_equal" in row:
                    print(f"  incremental build == clean build, byte for byte: {row['clean_equal']}", flush=True)
            print(f"  load average now {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
