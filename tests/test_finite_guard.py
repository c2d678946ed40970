"""The last guard before a layer is written (``rules.usd.finite.check_layer_finite``): a non-finite value
in any attribute, default or time sample, of any value type the writers author, is refused by name."""

from __future__ import annotations

import pytest
from pxr import Gf, Sdf, Vt

from usdforge.rules.usd.finite import NonFiniteOutput, check_layer_finite, check_text_finite

NAN, INF = float("nan"), float("inf")
T = Sdf.ValueTypeNames


@pytest.mark.parametrize("type_name, bad", [
    (T.Float, NAN), (T.Double, -INF), (T.Float, 1e39),  # too large for a 32-bit float: inf once stored
    (T.Float3, Gf.Vec3f(0.0, NAN, 0.0)), (T.Point3f, Gf.Vec3f(INF, 0.0, 0.0)), (T.Double3, Gf.Vec3d(0.0, 0.0, NAN)),
    (T.Quatf, Gf.Quatf(1.0, Gf.Vec3f(0.0, NAN, 0.0))), (T.Matrix4d, Gf.Matrix4d(1.0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0,
                                                                                 0, INF, 0, 1)),
    (T.Point3fArray, Vt.Vec3fArray([Gf.Vec3f(1.0, 2.0, 3.0), Gf.Vec3f(NAN, 0.0, 0.0)])),
    (T.FloatArray, Vt.FloatArray([1.0, INF]))])
@pytest.mark.parametrize("sampled", [False, True])
def test_a_non_finite_value_is_refused_by_name(type_name, bad, sampled):
    layer = Sdf.Layer.CreateAnonymous("guard.usda")
    prim = Sdf.CreatePrimInLayer(layer, "/robot/link")
    Sdf.AttributeSpec(prim, "fine", T.Float3).default = Gf.Vec3f(1.0, 2.0, 3.0)
    attribute = Sdf.AttributeSpec(prim, "value", type_name)
    if sampled:
        layer.SetTimeSample(attribute.path, 1.0, bad)
    else:
        attribute.default = bad
    with pytest.raises(NonFiniteOutput, match="non-finite"):
        check_layer_finite(layer, "robot.urdf")
    with pytest.raises(NonFiniteOutput, match="non-finite"):  # the text a robot's text layer is written from
        check_text_finite(layer, layer.ExportToString())
    fine = Sdf.Layer.CreateAnonymous("fine.usda")
    Sdf.AttributeSpec(Sdf.CreatePrimInLayer(fine, "/robot/link"), "value", type_name)
    check_layer_finite(fine)  # no value at all: fine
    check_text_finite(fine, fine.ExportToString())
