"""Where ``ArticulationRootAPI`` goes on a fixed base (issue 11, item 1; issue 29), measured in the engines.

The UsdPhysics schema allows a fixed articulation's API on the root joint to the world or on a parent of it,
and for a floating one asks for the root body. Since issue 29 usdforge writes it on the robot's Xform (the
default prim, a parent of the joint), as Isaac Lab's ``how-to/make_fixed_prim`` prescribes: PhysX reads the
API on the root body of a tree fixed to the world as a floating base. OpenUSD's parser and Newton read a
fixed base wherever the API is, but MuJoCo 4.0's USD decoder turns the prim carrying the API into a moving
body and refuses the asset when it is the joint or the robot's Xform (a massless body, or one holding the
static floor plane): ``doit verify``'s decoder check moves the API to the root body first
(``rules.verify.engines.decoder_copy``). This test measures the three placements on a fixed-base URDF
(cartpole with ``fix_base``) and a fixed-base MJCF (the overlapping-articulations fixture), so that the day
the decoder accepts the schema's placement, it fails and says so.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import pytest
from pxr import Usd, UsdPhysics

from engines import run_in_engine
from test_articulations import OVERLAPPING
from test_mjcf_support import converted
from test_urdf_support import CORPUS, convert_urdf

PLACEMENTS = ("body", "joint", "robot")


def _variants(usd: Path, folder: Path, name: str) -> dict[str, str]:
    """The converted asset flattened, with the API on the root body, on the fixed joint to the world, or on
    the robot's Xform (the default prim, a parent of that joint: as written)."""
    stage = Usd.Stage.Open(str(usd))
    robot = stage.GetDefaultPrim().GetPath()
    carriers = [p.GetPath() for p in stage.Traverse() if p.HasAPI(UsdPhysics.ArticulationRootAPI)]
    assert carriers == [robot], carriers  # as written: on the robot's Xform
    joint = next(p for p in stage.Traverse() if p.IsA(UsdPhysics.FixedJoint)
                 and UsdPhysics.FixedJoint(p).GetBody0Rel().GetTargets() == [robot])  # anchored to the Xform
    root = UsdPhysics.FixedJoint(joint).GetBody1Rel().GetTargets()[0]
    paths = {"body": root, "joint": joint.GetPath(), "robot": robot}
    files = {}
    for placement in PLACEMENTS:
        flat = Usd.Stage.Open(stage.Flatten())
        flat.GetPrimAtPath(robot).RemoveAppliedSchema("PhysicsArticulationRootAPI")
        flat.GetPrimAtPath(paths[placement]).AddAppliedSchema("PhysicsArticulationRootAPI")
        path = folder / f"{name}_{placement}.usda"
        flat.GetRootLayer().Export(str(path))
        files[placement] = str(path)
    return files


def _articulation_roots(path: str) -> list[str]:
    load = getattr(UsdPhysics, "UsdPhysicsLoadStageFromPrimRange", None) or UsdPhysics.LoadUsdPhysicsFromRange
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        parsed = load(Usd.Stage.Open(path), ["/"])
    return [str(p) for p in parsed.get(UsdPhysics.ObjectType.Articulation, ([], []))[0]]


NEWTON = """
    import json, sys, warp as wp
    wp.config.quiet = True
    import newton
    out = {}
    for key, path in json.loads(sys.argv[1]).items():
        builder = newton.ModelBuilder()
        builder.add_usd(path)
        fixed = [i for i in range(builder.joint_count)
                 if builder.joint_parent[i] == -1 and int(builder.joint_type[i]) == int(newton.JointType.FIXED)]
        out[key] = {"bodies": builder.body_count, "dofs": builder.joint_dof_count,
                    "articulations": builder.articulation_count, "fixed_to_world": len(fixed)}
    print(json.dumps(out))
"""

DECODER = """
    import json, sys, mujoco, mujoco._usd
    out = {}
    for key, path in json.loads(sys.argv[1]).items():
        try:
            model = mujoco.MjSpec.from_file(path).compile()
            out[key] = {"nv": int(model.nv), "free": int((model.jnt_type == 0).sum())}
        except ValueError as exc:
            out[key] = {"error": str(exc).splitlines()[0]}
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def placements(tmp_path_factory) -> dict[str, dict[str, str]]:
    folder = tmp_path_factory.mktemp("placements")
    cartpole = convert_urdf(CORPUS / "urdf" / "cartpole" / "cartpole.urdf", fix_base=True).usd
    return {"cartpole": _variants(cartpole, folder, "cartpole"),
            "overlapping": _variants(converted(OVERLAPPING).usd_path, folder, "overlapping")}


def _run(engine: str, script: str, cases: dict[str, str], folder: Path) -> dict:
    path = folder / f"placement_{engine.replace('-', '_')}.py"
    path.write_text(textwrap.dedent(script))
    return run_in_engine(engine, path, json.dumps(cases))


def test_fixed_base_articulation_root_placements_in_three_engines(placements, tmp_path):
    cases = {f"{name}/{placement}": path for name, files in placements.items() for placement, path in files.items()}
    # OpenUSD's parser: one articulation, rooted where the API is, for every placement.
    for key, path in cases.items():
        roots = _articulation_roots(path)
        assert len(roots) == 1, (key, roots)
    newton = _run("newton", NEWTON, cases, tmp_path)
    decoder = _run("mujoco-usd", DECODER, cases, tmp_path)
    for name in placements:
        ours = newton[f"{name}/robot"]
        assert ours["articulations"] == 1 and ours["fixed_to_world"] == 1, ours
        for placement in ("joint", "body"):
            assert newton[f"{name}/{placement}"] == ours, (name, placement)  # Newton: the same fixed base
        assert "error" not in decoder[f"{name}/body"] and decoder[f"{name}/body"]["free"] == 0, decoder
        for placement in ("joint", "robot"):
            result = decoder[f"{name}/{placement}"]
            # The decoder makes the API's prim a moving body: massless ("mjMINVAL"), or holding the floor plane.
            assert "error" in result, (
                f"MuJoCo's USD decoder now reads ArticulationRootAPI on the {placement} of a fixed base "
                f"({name}: {result}): drop the adaptation in rules.verify.engines.decoder_copy (issue 29)")


def test_verify_decoder_check_states_its_adaptation():
    """``doit verify``'s MuJoCo-decoder check loads the fixed base (API moved to the root body in a copy) and
    says so; Newton's check loads the asset as written."""
    from engines import BUILD, engine_python
    from usdforge.rules.verify.engines import load_check

    usd = convert_urdf(CORPUS / "urdf" / "cartpole" / "cartpole.urdf", fix_base=True).usd
    stage = Usd.Stage.Open(str(usd))
    for engine in ("mujoco-usd", "newton"):
        engine_python(engine)
        result = load_check(engine, usd, stage, BUILD)
        assert result.status == "passed", [f.message for f in result.findings]
        assert ("adapted: ArticulationRootAPI moved from /" in result.detail) == (engine == "mujoco-usd"), result.detail
