"""Each corpus robot loads in Newton 1.8 (``ModelBuilder.add_usd`` with its default settings) with the body,
joint and DoF counts, the joint types and limits, velocity limits, damping and friction, and the total mass
that ``add_urdf`` gives on the source URDF.

Newton pins usd-core < 26.9 and mujoco 3.17, which clash with usdforge's, so it lives in its own virtual
environment (``tests/engines.py``: ``build/venv-newton``, created on first use, then reused); a small
script runs there and prints JSON. Both importers collapse fixed joints,
as usdforge's default ``merge_fixed_joints`` does; ``add_urdf`` is told whether our conversion fixed the
base (URDF world links) so both sides describe the same robot.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from engines import run_in_engine
from usdforge.rules.robot.inertia import MASSLESS_MASS
from test_urdf_support import Converted, convert_urdf, corpus_entries, corpus_packages, corpus_urdf


SCRIPT = textwrap.dedent('''
    import json, logging, sys, warnings
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    import newton

    def describe(builder):
        starts = list(builder.joint_qd_start) + [builder.joint_dof_count]
        labels = list(getattr(builder, "joint_label", None) or getattr(builder, "joint_key"))
        joints = {}
        for index, label in enumerate(labels):
            dofs = range(starts[index], starts[index + 1])
            joints[label.rsplit("/", 1)[-1]] = {
                "type": int(builder.joint_type[index]),
                "lower": [float(builder.joint_limit_lower[d]) for d in dofs],
                "upper": [float(builder.joint_limit_upper[d]) for d in dofs],
                "velocity": [float(builder.joint_velocity_limit[d]) for d in dofs],
                "damping": [float(builder.joint_damping[d]) for d in dofs],
                "friction": [float(builder.joint_friction[d]) for d in dofs]}
        return {"bodies": builder.body_count, "joints": builder.joint_count, "dofs": builder.joint_dof_count,
                "mass": float(sum(builder.body_mass)), "per_joint": joints}

    results = {}
    for case in json.load(open(sys.argv[1])):
        urdf = newton.ModelBuilder()
        urdf.add_urdf(case["urdf"], floating=not case["fixed"], collapse_fixed_joints=True,
                      package_dirs=case["package_dirs"])
        usd = newton.ModelBuilder()
        usd.add_usd(case["usd"], collapse_fixed_joints=True)
        results[case["name"]] = {"urdf": describe(urdf), "usd": describe(usd)}
    print(json.dumps(results))
''')


def fixed_base(result: Converted) -> bool:
    from pxr import Usd, UsdPhysics

    stage = Usd.Stage.Open(str(result.usd))
    world = ([], [stage.GetDefaultPrim().GetPath()])  # body0 empty or the robot's Xform (anchored, issue 29)
    return any(p.IsA(UsdPhysics.FixedJoint) and UsdPhysics.FixedJoint(p).GetBody0Rel().GetTargets() in world
               for p in stage.Traverse())


def placeholder_bodies(result: Converted) -> int:
    from pxr import Usd, UsdPhysics

    stage = Usd.Stage.Open(str(result.usd))
    return sum(1 for p in stage.Traverse() if p.HasAPI(UsdPhysics.MassAPI)
               and abs(UsdPhysics.MassAPI(p).GetMassAttr().Get() - MASSLESS_MASS) < 1e-9)


@pytest.fixture(scope="module")
def newton_results(tmp_path_factory):
    entries = corpus_entries()
    cases, conversions = [], {}
    for entry in entries:
        result = convert_urdf(corpus_urdf(entry), corpus_packages(entry))
        conversions[entry["name"]] = result
        cases.append({"name": entry["name"], "urdf": str(corpus_urdf(entry)), "usd": str(result.usd),
                      "fixed": fixed_base(result),
                      # Newton wants the folders that contain the packages.
                      "package_dirs": sorted({str(Path(p).parent) for p in corpus_packages(entry).values()})})
    folder = tmp_path_factory.mktemp("newton")
    (folder / "cases.json").write_text(json.dumps(cases))
    (folder / "compare.py").write_text(SCRIPT)
    return run_in_engine("newton", folder / "compare.py", str(folder / "cases.json"), cwd=folder), conversions


@pytest.mark.parametrize("name", [entry["name"] for entry in corpus_entries()])
def test_newton_loads_the_usd_like_the_urdf(newton_results, name):
    results, conversions = newton_results
    urdf, usd = results[name]["urdf"], results[name]["usd"]
    for key in ("bodies", "joints", "dofs"):
        assert usd[key] == urdf[key], f"{name}: {key}: add_usd {usd[key]}, add_urdf {urdf[key]}"
    # usdforge gives bodies without mass its small placeholder; Newton's URDF importer leaves them at 0.
    tolerance = 1e-6 * urdf["mass"] + 1.001 * MASSLESS_MASS * placeholder_bodies(conversions[name])
    assert abs(usd["mass"] - urdf["mass"]) <= tolerance, f"{name}: mass {usd['mass']} vs {urdf['mass']}"
    named = {label: joint for label, joint in urdf["per_joint"].items() if label in usd["per_joint"]}
    source_joints = {joint.get("name") for joint in _urdf_joints(corpus_urdf(next(
        e for e in corpus_entries() if e["name"] == name)))}
    compared = [label for label in named if label in source_joints]
    assert compared, f"{name}: no joint of the URDF found by name on both sides"
    for label in compared:
        ours, theirs = usd["per_joint"][label], urdf["per_joint"][label]
        assert ours["type"] == theirs["type"], f"{name}: joint {label} type"
        for bound in ("lower", "upper"):
            assert ours[bound] == pytest.approx(theirs[bound], rel=1e-6, abs=1e-6), f"{name}: joint {label} {bound}"


def _urdf_joints(path: Path):
    from lxml import etree

    from usdforge.rules.xml import SAFE_XML

    return etree.parse(str(path), SAFE_XML).getroot().findall("joint")


@pytest.mark.parametrize("name", [entry["name"] for entry in corpus_entries()])
def test_newton_default_reader_sees_velocity_limits_damping_and_friction(newton_results, name):
    """``add_usd`` with its default (Newton-only) schema resolver reads the URDF's ``<limit velocity>`` and
    ``<dynamics damping friction>`` as ``add_urdf`` does (issue 17): they are authored as ``newton:*``."""
    results, _ = newton_results
    urdf, usd = results[name]["urdf"], results[name]["usd"]
    source = {joint.get("name"): joint for joint in _urdf_joints(corpus_urdf(next(
        e for e in corpus_entries() if e["name"] == name)))}
    compared = 0
    for label, theirs in urdf["per_joint"].items():
        joint = source.get(label)
        if label not in usd["per_joint"] or joint is None or joint.get("type") == "fixed":
            continue
        has = {"velocity": joint.find("limit") is not None and joint.find("limit").get("velocity") is not None,
               "damping": joint.find("dynamics") is not None and joint.find("dynamics").get("damping") is not None,
               "friction": joint.find("dynamics") is not None and joint.find("dynamics").get("friction") is not None}
        for key in ("velocity", "damping", "friction"):
            if has[key]:
                compared += 1
                assert usd["per_joint"][label][key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-7), \
                    f"{name}: joint {label} {key}: add_usd {usd['per_joint'][label][key]}, add_urdf {theirs[key]}"
    sources = sum(1 for j in source.values() if j.get("type") != "fixed" and (
        (j.find("limit") is not None and j.find("limit").get("velocity") is not None) or j.find("dynamics") is not None))
    assert (compared > 0) == (sources > 0), f"{name}: {compared} values compared for {sources} joints"
