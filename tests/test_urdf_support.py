"""Shared material for the URDF tests (no tests here): the shared corpus and conformance fixtures, one
conversion per URDF and settings per test session, and the UsdPhysics validators.

The shared folder is ``../shared`` beside the checkout; a test that needs it fails loudly without it.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import attrs
import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus"
CONFORMANCE = SHARED / "conformance" / "urdf"
_ROOT = Path(tempfile.mkdtemp(prefix="usdforge-urdf-tests-"))
atexit.register(shutil.rmtree, _ROOT, True)


def require_shared() -> None:
    """Fail (never skip) when the shared test material is not beside the checkout."""
    if not (CORPUS / "MANIFEST.json").is_file() or not CONFORMANCE.is_dir():
        pytest.fail(f"shared test material missing: expected {CORPUS}/MANIFEST.json and {CONFORMANCE} "
                    "(the ../shared folder beside the checkout)")


def corpus_entries() -> list[dict[str, Any]]:
    """The URDF entries of the corpus manifest (name, path, package_paths …)."""
    if not (CORPUS / "MANIFEST.json").is_file():
        return [{"name": "corpus-missing", "path": "", "package_paths": {}}]
    return [entry for entry in json.loads((CORPUS / "MANIFEST.json").read_text()) if entry["format"] == "urdf"]


def corpus_urdf(entry: dict[str, Any]) -> Path:
    require_shared()
    return CORPUS / entry["path"]


def corpus_packages(entry: dict[str, Any]) -> dict[str, str]:
    return {name: str(CORPUS / folder) for name, folder in entry["package_paths"].items()}


def conformance_files() -> list[Path]:
    """The conformance URDFs (a placeholder name when the folder is missing, so that the test fails)."""
    files = sorted(CONFORMANCE.glob("*.urdf"))
    return files or [CONFORMANCE / "conformance-missing.urdf"]


#: Conformance fixtures that name a file that is not there on purpose (a DXF, a texture in another folder,
#: an absolute path on the author's machine): converted with ``allow_missing_files`` (a missing file
#: otherwise fails the conversion).
MISSING_ON_PURPOSE = ("external_reference_file.urdf", "material_texture_name_duplication.urdf", "meshes.urdf")


def conformance_packages(path: Path) -> dict[str, str]:
    """ros_packages.urdf names two packages; its content says both live in the conformance folder."""
    if path.name == "ros_packages.urdf":
        return {"test_package": str(CONFORMANCE), "test_texture_package": str(CONFORMANCE)}
    return {}


@attrs.frozen
class Converted:
    """One conversion: the main USD file, every file written, and the warnings issued."""

    usd: Path
    files: tuple[Path, ...]
    warnings: tuple[str, ...]


def convert_urdf(urdf: Path, packages: dict[str, str] | None = None, **cfg: Any) -> Converted:
    """Convert ``urdf`` with ``rules.urdf.convert.convert`` (once per argument set per session) into a temp dir."""
    if str(urdf).startswith(str(SHARED)):
        require_shared()
    items = tuple(sorted(cfg.items(), key=lambda kv: kv[0]))
    return _convert(str(urdf), tuple(sorted((packages or {}).items())), _freeze(items))


def _freeze(value: Any) -> Any:
    if attrs.has(type(value)):  # a cfg object (JointDriveCfg …): its plain data, as TOML would give it
        from usdforge.schemas import converter

        value = converter.unstructure(value, type(value))
    if isinstance(value, dict):
        return ("__dict__", tuple(sorted((k, _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple) and value and value[0] == "__dict__":
        return {k: _thaw(v) for k, v in value[1]}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@functools.cache
def _convert(urdf: str, packages: tuple, cfg_items: tuple) -> Converted:
    from usdforge.rules.urdf.convert import convert
    from usdforge.schemas import UrdfConverterCfg, structure_cfg

    out = Path(tempfile.mkdtemp(dir=_ROOT))
    table = {k: _thaw(v) for k, v in cfg_items}
    if Path(urdf).parent == CONFORMANCE and Path(urdf).name in MISSING_ON_PURPOSE:
        table.setdefault("allow_missing_files", True)
    table.update(asset_path=urdf, usd_dir=str(out), usd_file_name=Path(urdf).stem + ".usda",
                 ros_package_paths=[{"name": n, "path": p} for n, p in packages])
    cfg = structure_cfg(table, UrdfConverterCfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files = convert(cfg, out)
    return Converted(out / cfg.usd_file_name, tuple(files), tuple(str(w.message) for w in caught))


@functools.cache
def _physics_validators():
    from pxr import UsdValidation

    registry = UsdValidation.ValidationRegistry()
    names = sorted(m.name for m in registry.GetAllValidatorMetadata() if m.name.startswith("usdPhysicsValidators:"))
    assert len(names) >= 4, f"expected UsdPhysics' validators, found {names}"
    return UsdValidation.ValidationContext(registry.GetOrLoadValidatorsByName(names))


def physics_validation_errors(usd: Path) -> list[str]:
    """Error messages of the UsdPhysics validators (RigidBody, Collider, PhysicsJoint, Articulation)."""
    from pxr import Usd, UsdValidation

    stage = Usd.Stage.Open(str(usd))
    assert stage is not None, f"cannot open {usd}"
    return [f"{e.GetValidator().GetMetadata().name}: {e.GetMessage()}" for e in _physics_validators().Validate(stage)
            if e.GetType() == UsdValidation.ValidationErrorType.Error]


_OPEN_STAGES: list = []


def open_stage(usd: Path):
    """The stage at ``usd``, kept alive for the session (a prim outlives the expression that opened it)."""
    from pxr import Usd

    stage = Usd.Stage.Open(str(usd))
    assert stage is not None, f"cannot open {usd}"
    _OPEN_STAGES.append(stage)
    return stage


def prims_by_source_name(stage) -> dict[str, Any]:
    """usdforge:sourceName → prim, for every named prim under the default prim (bodies, frames, joints)."""
    from pxr import Usd

    found = {}
    for prim in Usd.PrimRange(stage.GetDefaultPrim(), Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)):
        attribute = prim.GetAttribute("usdforge:sourceName")
        if attribute and attribute.HasAuthoredValue():
            found.setdefault(attribute.Get(), prim)
    return found


def joints(stage) -> dict[str, Any]:
    """Source name → joint prim."""
    from pxr import UsdPhysics

    return {name: prim for name, prim in prims_by_source_name(stage).items() if prim.IsA(UsdPhysics.Joint)}


def applied_schemas(prim) -> list[str]:
    """Every applied API schema name, those usd-core does not know (PhysX, Newton, MuJoCo) included."""
    return list(prim.GetPrimTypeInfo().GetAppliedAPISchemas())


def mesh_prims(stage) -> list:
    """Every UsdGeom.Mesh under the default prim, inside instances too."""
    from pxr import Usd, UsdGeom

    return [p for p in Usd.PrimRange(stage.GetDefaultPrim(), Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate))
            if p.IsA(UsdGeom.Mesh)]
