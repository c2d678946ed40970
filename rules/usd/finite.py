"""The last guard before a layer is written: no attribute value usdforge writes may be ``nan``/``inf``.

Readers reject non-finite input with a located error; this guard catches what slips through (a value that
overflows a 32-bit float after a unit conversion, a mesh reader's nan) so that no USD file usdforge writes
ever holds one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pxr import Gf, Sdf

from usdforge.rules.errors import NonFiniteOutput

_QUATERNIONS = (Gf.Quatf, Gf.Quatd, Gf.Quath)
#: Gf vectors: iterated as Python floats (a numpy conversion costs more than the check).
_VECTORS = frozenset(getattr(Gf, f"Vec{n}{t}") for n in (2, 3, 4) for t in "dfh")
#: Values that hold no float.
_NO_FLOAT = frozenset((type(None), bool, int, str, Sdf.AssetPath))


def _finite(value: Any) -> bool:
    """Whether every number in ``value`` (scalar, Gf vector/matrix/quaternion, Vt array) is finite as the
    32-bit or 64-bit float it is stored as."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind in _NO_FLOAT:
        return True
    if kind in _VECTORS:
        return all(map(math.isfinite, value))
    if isinstance(value, float):
        return math.isfinite(value)
    if value is None or isinstance(value, (bool, int, str, Sdf.AssetPath)):
        return True
    if isinstance(value, _QUATERNIONS):
        return all(math.isfinite(v) for v in (value.GetReal(), *value.GetImaginary()))
    array = np.asarray(value)  # a Vt array as its own type (float32 points: no float64 copy)
    if array.dtype.kind == "f":
        return bool(np.isfinite(array).all())
    if array.dtype.kind in "iub":
        return True
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return all(_finite(item) for item in value) if isinstance(value, (list, tuple)) else True
    return bool(np.isfinite(array).all())


def check_layer_finite(layer: Sdf.Layer, source: str | None = None) -> None:
    """NonFiniteOutput (naming ``source``, default the layer itself, and ``prim.attribute``) when any
    attribute default or time sample in ``layer`` is nan or infinite. The rules' ``convert`` re-raise it
    naming the asset."""
    problems: list[tuple[str, Any]] = []
    sampled = bool(layer.ListAllTimeSamples())  # most layers have none: no query per attribute

    def visit(path: Sdf.Path) -> None:
        if problems or not path.IsPropertyPath():
            return
        spec = layer.GetAttributeAtPath(path)
        if spec is None:
            return
        values = [spec.default] if spec.HasDefaultValue() else []
        if sampled:
            values += [layer.QueryTimeSample(path, t) for t in layer.ListTimeSamplesForPath(path)]
        for value in values:
            if not _finite(value):
                problems.append((str(path), value))
                return

    layer.Traverse(Sdf.Path.absoluteRootPath, visit)
    if problems:
        where, value = problems[0]
        text = str(value)
        text = text if len(text) <= 80 else text[:80] + "…"
        raise NonFiniteOutput(source or layer.identifier, f"would write a non-finite value ({text}) to {layer.identifier.rsplit('/', 1)[-1]}: "
                                      "a number in the source is not finite or too large for USD's 32-bit floats",
                              where)


def check_text_finite(layer: Sdf.Layer, text: str) -> None:
    """``check_layer_finite`` for a text layer whose ``ExportToString`` is ``text``: usda writes every
    non-finite number as ``nan``, ``inf`` or ``-inf``, so a text without those words (``info``, a shader's
    namespace, aside) holds none, and only a text with one has its attributes visited."""
    if "nan" in text or text.count("inf") != text.count("info"):
        check_layer_finite(layer)
