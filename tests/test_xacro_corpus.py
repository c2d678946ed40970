"""The corpus xacro robots (``../shared/corpus/xacro``: UR5e, Franka FER with hand) convert from the xacro
itself and pass the URDF corpus's checks: UsdPhysics validators, one tree, every link's pose from the USD's
joints equal to the URDF's forward kinematics at 20 configurations, masses, limits, effort.

The reference URDF is expanded here independently, with the plain ``xacro`` package (``$(find)`` replaced
by the manifest's package folders, as the corpus's own verify.py does), not with usdforge's expansion.
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path

import pytest

from usdforge.rules.verify.urdf import verify_urdf
from test_urdf_support import SHARED, Converted, convert_urdf, open_stage, physics_validation_errors

XACRO_CORPUS = SHARED / "corpus" / "xacro"


def entries() -> list[dict]:
    manifest = XACRO_CORPUS / "MANIFEST.json"
    if not manifest.is_file():
        return [{"name": "xacro-corpus-missing"}]
    return json.loads(manifest.read_text())


ENTRIES = {entry["name"]: entry for entry in entries()}


def packages(entry: dict) -> dict[str, str]:
    return {name: str(XACRO_CORPUS / folder) for name, folder in entry["package_paths"].items()}


def source(entry: dict) -> Path:
    path = XACRO_CORPUS / entry.get("path", "missing")
    if not path.is_file():
        pytest.fail(f"shared xacro corpus missing: expected {path} (../shared beside the checkout)")
    return path


@functools.cache
def reference_urdf(name: str, folder: str) -> Path:
    """The entry expanded by the plain xacro package, written to ``folder``."""
    import xacro
    import xacro.substitution_args as substitution_args

    entry = ENTRIES[name]
    found = packages(entry)
    original = substitution_args._eval_find
    substitution_args._eval_find = lambda package: found[package]
    try:
        document = xacro.process_file(str(source(entry)), mappings=dict(entry["xacro_args"]))
    finally:
        substitution_args._eval_find = original
    path = Path(folder) / f"{name}.urdf"
    path.write_text(document.toprettyxml(indent="  "))
    return path


def converted(name: str) -> Converted:
    entry = ENTRIES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return convert_urdf(source(entry), packages(entry), xacro_args=dict(entry["xacro_args"]))


@pytest.mark.parametrize("name", list(ENTRIES))
def test_corpus_xacro_converts_validates_and_matches_the_expanded_urdf(name, tmp_path_factory):
    entry = ENTRIES[name]
    result = converted(name)
    assert result.usd.is_file()
    assert physics_validation_errors(result.usd) == []
    reference = reference_urdf(name, str(tmp_path_factory.mktemp(name)))
    report = verify_urdf(reference, result.usd, packages(entry), configurations=20, seed=7)
    assert report.ok, str(report)
    assert report.configurations == 20
    assert report.links_compared == entry["counts"]["links"]
    movable = sum(n for kind, n in entry["counts"]["joints_by_type"].items() if kind != "fixed")
    assert report.joints_compared == movable
    print(report)


def test_franka_finger_is_a_mimic_of_its_leader():
    result = converted("franka_fer_hand")
    from pxr import UsdPhysics

    stage = open_stage(result.usd)
    coupled = [p for p in stage.Traverse() if p.IsA(UsdPhysics.Joint)
               and p.GetRelationship("usdforge:mimic:joint").GetTargets()]
    assert len(coupled) == ENTRIES["franka_fer_hand"]["counts"]["mimic_joints"] == 1


def test_ur5e_meshes_chosen_by_yaml_are_read():
    from pxr import Usd, UsdGeom

    stage = open_stage(converted("ur5e").usd)
    meshes = [p for p in Usd.PrimRange(stage.GetDefaultPrim(), Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate))
              if p.IsA(UsdGeom.Mesh)]
    assert meshes and all(len(UsdGeom.Mesh(p).GetPointsAttr().Get()) > 0 for p in meshes)
