"""Isaac Lab conformance of what a user reads back (issue 11, items 2, 3 and 8), on the embedded library's
robots: the file ``usd_instanceable_meshes_path`` names, the layered layout's file names (case included, as
Isaac Lab's tools look them up on Linux), and the joints of an IK chain."""

from __future__ import annotations

from pathlib import Path

import pytest
from pxr import Sdf, Usd, UsdGeom

from meshes import write_mesh
from usdforge.pipeline import MeshConverter, MjcfConverter, UrdfConverter
from usdforge.schemas import MeshConverterCfg, MjcfConverterCfg, UrdfConverterCfg
from usdforge.solvers import Kinematics

ASSETS = Path(__file__).resolve().parents[1] / "assets"
TINY_ARM = ASSETS / "robots" / "tiny_arm" / "urdf" / "tiny_arm.urdf"
PAN_TILT = ASSETS / "robots" / "pan_tilt" / "pan_tilt.xml"
pytestmark = pytest.mark.filterwarnings("ignore::usdforge.rules.conversion_warnings.ConversionWarning")


def tiny_arm(out: Path, **cfg) -> UrdfConverter:
    return UrdfConverter(UrdfConverterCfg(asset_path=str(TINY_ARM), usd_dir=str(out),
                                          ros_package_paths=[{"name": "tiny_arm", "path": str(TINY_ARM.parents[1])}],
                                          **cfg))


def _holds_meshes(path: Path) -> bool:
    stage = Usd.Stage.Open(str(path))
    return any(prim.IsA(UsdGeom.Mesh) and len(UsdGeom.Mesh(prim).GetPointsAttr().Get() or []) > 0
               for prim in stage.Traverse(Usd.TraverseInstanceProxies(Usd.PrimAllPrimsPredicate)))


def test_instanceable_meshes_path_names_the_file_that_holds_the_meshes(tmp_path):
    layered = tiny_arm(tmp_path / "layered")
    assert layered.usd_instanceable_meshes_path == "payloads/geometry.usd"
    assert _holds_meshes(Path(layered.usd_dir) / layered.usd_instanceable_meshes_path)
    assert tiny_arm(tmp_path / "flat", run_asset_transformer=False).usd_instanceable_meshes_path is None
    mjcf = MjcfConverter(MjcfConverterCfg(asset_path=str(PAN_TILT), usd_dir=str(tmp_path / "pan_tilt")))
    assert (Path(mjcf.usd_dir) / mjcf.usd_instanceable_meshes_path).is_file()
    source = write_mesh(tmp_path, "stl")
    assert MeshConverter(MeshConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "mesh"),
                                          make_instanceable=False)).usd_instanceable_meshes_path is None


def test_layered_robot_uses_isaac_labs_layer_names(tmp_path):
    converter = tiny_arm(tmp_path / "out")
    out = Path(converter.usd_dir)
    names = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert {"payloads/Physics/physX.usda", "payloads/instances.usda", "payloads/Physics/physics.usda",
            "payloads/Physics/newton.usda", "payloads/Physics/mujoco.usda", "payloads/base.usda"} <= names
    assert "payloads/Physics/physx.usda" not in names
    # The interface layer's payloads name those files, strongest first.
    layer = Sdf.Layer.FindOrOpen(converter.usd_path)
    payloads = [p.assetPath for p in layer.GetPrimAtPath(f"/{layer.defaultPrim}").payloadList.prependedItems]
    assert payloads == ["./payloads/Physics/physX.usda", "./payloads/Physics/newton.usda",
                        "./payloads/Physics/mujoco.usda", "./payloads/Physics/physics.usda",
                        "./payloads/materials.usda", "./payloads/instances.usda", "./payloads/base.usda"]

def test_ik_chain_holds_only_the_joints_from_root_to_end_effector(tmp_path):
    kin = Kinematics.from_usd(tiny_arm(tmp_path / "out").usd_path, ee_body="hand")
    assert kin.num_joints == 4
    assert list(kin.joint_names) == ["shoulder_pan", "shoulder_lift", "elbow", "wrist"]
