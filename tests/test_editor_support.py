"""Editors and type checkers follow the code (issue #31).

The ``usdforge`` namespace resolves on disk: ``usdforge/`` holds a link to each top-level folder and the
editable install puts ``src/`` (which holds only a link to ``usdforge/``) on ``sys.path`` with a static
``.pth``. Static tools (jedi, mypy) therefore resolve every ``usdforge.*`` import to a file in the checkout,
and no other top-level name is importable.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The names jedi must resolve to a definition in the checkout: (import line, name used, defining file).
TARGETS = [
    ("from usdforge.rules.urdf.read import read_urdf", "read_urdf", "rules/urdf/read.py"),
    ("from usdforge.pipeline.converters import UrdfConverter", "UrdfConverter", "pipeline/converters.py"),
    ("from usdforge.solvers import solve_ik", "solve_ik", "solvers/solve.py"),
]


def _pip(python: Path, *args: str, cwd: Path | None = None) -> None:
    done = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A new venv (no system site-packages) with the checkout installed by the README's editable command;
    ``--no-deps`` only because jedi needs usdforge's files, not its dependencies, to follow imports."""
    root = tmp_path_factory.mktemp("venv") / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    python = root / "bin" / "python"
    _pip(python, "install", "--no-deps", "-e", str(REPO))
    return python


def test_jedi_resolves_usdforge_imports_to_the_checkout_in_a_fresh_editable_install(fresh_venv):
    import jedi  # the test extra installs it: a missing jedi fails, it never skips
    environment = jedi.create_environment(str(fresh_venv), safe=False)
    source = "\n".join(line for line, _, _ in TARGETS) + "\n" + "\n".join(name for _, name, _ in TARGETS) + "\n"
    script = jedi.Script(source, path=str(Path(fresh_venv).parents[1] / "probe.py"), environment=environment)
    for row, (_, name, defining) in enumerate(TARGETS, start=len(TARGETS) + 1):
        found = script.goto(row, 1, follow_imports=True)
        assert found, f"jedi resolves no definition of {name}"
        path = Path(found[0].module_path).resolve()
        assert path == (REPO / defining).resolve(), (name, found[0].module_path)
        assert found[0].name == name and found[0].line is not None


def test_the_editable_install_is_a_static_path_and_adds_no_other_top_level_name(fresh_venv):
    site = Path(subprocess.run([str(fresh_venv), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    pth = [p for p in site.glob("__editable__*usdforge*") if p.suffix == ".pth"]
    assert len(pth) == 1 and not list(site.glob("__editable__*usdforge*finder.py")), sorted(site.iterdir())
    assert [Path(line).resolve() for line in pth[0].read_text().split()] == [(REPO / "src").resolve()]
    probe = ("import importlib, json\nout = {}\n"
             "for name in ('usdforge.pipeline.tasks', 'pipeline', 'pipeline.tasks', 'rules', 'schemas', 'solvers', "
             "'dodo', 'tests', 'bench'):\n"
             "    try:\n        importlib.import_module(name); out[name] = 'ok'\n"
             "    except ImportError as e:\n        out[name] = type(e).__name__\n"
             "print(json.dumps(out))\n")
    # Run outside the checkout: the checkout's own folder on sys.path is the other case, tested below.
    done = subprocess.run([str(fresh_venv), "-c", probe], capture_output=True, text=True, cwd=site, timeout=120)
    assert done.returncode == 0, done.stderr
    # usdforge.pipeline.tasks imports doit, absent from this --no-deps venv: found, then failing on doit.
    assert '"usdforge.pipeline.tasks": "ModuleNotFoundError"' in done.stdout or '"ok"' in done.stdout
    for name in ("pipeline", "pipeline.tasks", "rules", "schemas", "solvers", "dodo", "tests", "bench"):
        assert f'"{name}": "ModuleNotFoundError"' in done.stdout, (name, done.stdout)


@pytest.mark.parametrize("folder", ["pipeline", "rules", "schemas", "solvers"])
def test_a_top_level_folder_is_importable_only_as_a_usdforge_subpackage(folder):
    # A plain checkout with the repository root on sys.path (python -m pytest, an editor's workspace):
    # usdforge.<folder> resolves through the link in usdforge/, <folder> itself refuses to import.
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
            f"import usdforge.{folder} as sub; print(sub.__name__)\n"
            f"try:\n    import {folder}\nexcept ImportError as e:\n    print('refused:', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"usdforge.{folder}"
    assert lines[1].startswith("refused: import usdforge.") and folder in lines[1], lines


def test_a_wheel_holds_usdforge_alone_and_each_module_once(tmp_path):
    # Built from a copy (links kept as links), so the checkout gets no build/lib or egg-info of a wheel build.
    copy = tmp_path / "src"
    shutil.copytree(REPO, copy, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".mypy_cache"))
    _pip(Path(sys.executable), "wheel", "--no-deps", "-w", str(tmp_path / "dist"), str(copy))
    wheel = next((tmp_path / "dist").glob("usdforge-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert len(names) == len(set(names))
    assert {n.split("/")[0] for n in names} == {"usdforge", wheel.name.split("-py")[0] + ".dist-info"}
    modules = sorted(n for n in names if n.endswith(".py"))
    expected = sorted(f"usdforge/{p.relative_to(REPO).as_posix()}" for d in ("pipeline", "rules", "schemas", "solvers")
                      for p in (REPO / d).rglob("*.py") if "__pycache__" not in p.parts) + ["usdforge/__init__.py"]
    assert modules == sorted(expected)
    # Each module once, as a file (not a link): its bytes are the checkout's.
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("usdforge/rules/urdf/read.py") == (REPO / "rules/urdf/read.py").read_bytes()


#: mypy error codes that mean an import did not resolve (a module not found, a name a module lacks, or an
#: installed library mypy cannot read); the type checker must report none of them.
UNRESOLVED = re.compile(r"\[(import-not-found|import-untyped|import|no-redef)\]$|Module \"[\w.]+\" has no attribute")


def test_the_type_checker_reports_no_unresolved_import(tmp_path):
    # The checked files and the deliberate settings are in pyproject.toml ([tool.mypy]).
    env = {**os.environ, "MYPY_CACHE_DIR": str(REPO / "build" / "mypy_cache")}
    done = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=900)
    assert "error: " not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    # Every module was read: pipeline/, rules/, schemas/, solvers/ (through src/usdforge), dodo.py, tests/.
    summary = re.search(r"(?:Success: no issues found in|checked) (\d+) source files?", lines[-1])
    expected = sum(1 for d in ("pipeline", "rules", "schemas", "solvers", "usdforge", "tests") for p in (REPO / d).rglob("*.py")
                   if "__pycache__" not in p.parts and "bad_inputs" not in p.parts and "fixtures" not in p.parts) + 1
    assert summary and int(summary.group(1)) >= expected, (lines[-1], expected)
    checked = [line for line in lines if ": error: " in line]
    unresolved = [line for line in checked if UNRESOLVED.search(line)]
    assert not unresolved, "\n".join(unresolved)
    # The cfg classes' constructors are visible to type checkers (editors complete their fields).
    assert not [line for line in checked if "[call-arg]" in line and "schemas" in line], "\n".join(checked)
