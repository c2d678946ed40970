"""xacro expansion cost: usdforge's sandboxed expansion (a child process per expansion) beside what a user
would run instead: ROS's ``xacro`` command as a process (``$(find)`` patched as the corpus README shows),
and ``xacro.process_file`` in-process (no isolation, no limits, no dependency list).

    python bench/xacro_expansion.py [--repeat 5]

Reads the corpus xacro robots from ../shared/corpus/xacro. Prints the median wall time per expansion (ms).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "xacro"

CLI = """import sys, json, xacro, xacro.substitution_args as s
packages = json.loads(sys.argv[1]); s._eval_find = lambda p: packages[p]
sys.argv = ['xacro', *sys.argv[2:]]; xacro.main()"""


def median_ms(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def in_process(path: Path, packages: dict, args: dict) -> None:
    import xacro
    import xacro.substitution_args as substitution_args

    substitution_args._eval_find = lambda package: packages[package]
    xacro.process_file(str(path), mappings=dict(args)).toxml()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    from usdforge.rules.urdf import xacro as usdforge_xacro

    print(f"{'robot':<18}{'usdforge (process)':>20}{'xacro CLI (process)':>21}{'xacro in-process':>18}")
    for entry in json.loads((CORPUS / "MANIFEST.json").read_text()):
        path = CORPUS / entry["path"]
        packages = {name: str(CORPUS / folder) for name, folder in entry["package_paths"].items()}
        args = entry["xacro_args"]

        def ours() -> None:
            usdforge_xacro._CACHE.clear()  # a cold expansion each time
            usdforge_xacro.expand_xacro(path, packages, args)

        command = [sys.executable, "-c", CLI, json.dumps(packages), str(path),
                   *(f"{k}:={v}" for k, v in args.items())]
        cli = median_ms(lambda: subprocess.run(command, capture_output=True, check=True), options.repeat)
        print(f"{entry['name']:<18}{median_ms(ours, options.repeat):>17.0f} ms{cli:>18.0f} ms"
              f"{median_ms(lambda: in_process(path, packages, args), options.repeat):>15.1f} ms")


if __name__ == "__main__":
    main()
