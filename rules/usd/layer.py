"""Authoring USD at the layer level: prim specs, typed attributes, relationships, applied schemas,
transforms, meshes, mass and preview materials, without a UsdStage.

Every function takes an ``Sdf.Layer`` or ``Sdf.PrimSpec``. Sdf authoring skips composition and change
processing, about 7× faster than the Usd API. The attribute types and variabilities here are the schemas'
own (UsdGeom, UsdPhysics, UsdShade); ``pxr.UsdValidation``'s AttributeTypeMismatch validator checks them in
the tests.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import math

import numpy as np

from pxr import Gf, Sdf, Tf, Vt

T = Sdf.ValueTypeNames
UNIFORM = Sdf.VariabilityUniform


def new_layer(identifier: str) -> Sdf.Layer:
    """An empty layer with usdforge's stage metadata (Z up, metres, kilograms) whose identifier is its
    future path (relative references to it resolve while authoring through the layer registry, before the
    file exists); the format follows the extension. ``Save`` writes it (the folder must exist)."""
    # New first: it refuses an identifier the registry holds, which is rare; a Find before it cost about 30 us
    # per layer in a conversion (it resolves the identifier and stats the file; 9 layers per robot).
    try:
        layer = Sdf.Layer.New(Sdf.FileFormat.FindByExtension(identifier.rsplit(".", 1)[-1]), identifier)
    except Tf.ErrorException:
        # still open (a stage on an earlier conversion into the same folder, in this process)
        layer = Sdf.Layer.FindOrOpen(identifier)  # a strong reference: Find's handle dies with that stage
        if layer is None:
            raise
        layer.Clear()
    layer.TransferContent(_stage_metadata())  # a third of the time of three SetInfo calls
    return layer


def _stage_metadata() -> Sdf.Layer:
    """An anonymous layer holding only usdforge's stage metadata (Z up, metres, kilograms), made once."""
    global _METADATA
    if _METADATA is None:
        _METADATA = Sdf.Layer.CreateAnonymous("stage_metadata.usda")
        root = _METADATA.pseudoRoot
        root.SetInfo("upAxis", "Z")
        root.SetInfo("metersPerUnit", 1.0)
        root.SetInfo("kilogramsPerUnit", 1.0)
    return _METADATA


_METADATA: Sdf.Layer | None = None


def prim(layer: Sdf.Layer, path: Sdf.Path | str, type_name: str = "",
         specifier: Sdf.Specifier = Sdf.SpecifierDef) -> Sdf.PrimSpec:
    """The prim spec at ``path`` (missing ancestors as ``over``). An existing spec keeps its specifier unless
    ``specifier`` is def; ``type_name`` is set when given."""
    path = _path(path)
    spec = layer.GetPrimAtPath(path)
    if spec is None:
        spec = Sdf.CreatePrimInLayer(layer, path)
        if specifier != Sdf.SpecifierOver:  # CreatePrimInLayer makes an over already
            spec.specifier = specifier
    elif specifier == Sdf.SpecifierDef:
        spec.specifier = specifier
    if type_name:
        spec.typeName = type_name
    return spec


def _path(path: Sdf.Path | str) -> Sdf.Path:
    """``path`` as an Sdf.Path: an Sdf.Path as it is (``Sdf.Path(path)`` of one costs 1.6 µs, a third of
    a prim spec's creation; the writer makes thousands)."""
    return path if type(path) is Sdf.Path else Sdf.Path(path)


def over(layer: Sdf.Layer, path: Sdf.Path | str) -> Sdf.PrimSpec:
    """An ``over`` for ``path`` (or the spec that is already there)."""
    return prim(layer, path, specifier=Sdf.SpecifierOver)


def attribute(spec: Sdf.PrimSpec, name: str, type_name: Sdf.ValueTypeName, value: Any = None, *,
              uniform: bool = False, custom: bool = False) -> Sdf.AttributeSpec:
    """Create (or reuse) ``name`` on ``spec`` and set its default value when ``value`` is not None."""
    try:  # created first: a conversion authors each attribute once (a lookup first cost 0.6 of 4.4 µs)
        attr = Sdf.AttributeSpec(spec, name, type_name, UNIFORM if uniform else Sdf.VariabilityVarying, custom)
    except Tf.ErrorException:
        attr = spec.attributes.get(name)
        if attr is None:  # not there: the name or type was refused
            raise
    if value is not None:
        attr.default = value
    return attr


def relationship(spec: Sdf.PrimSpec, name: str, targets: Iterable[Sdf.Path | str], *,
                 custom: bool = False) -> Sdf.RelationshipSpec:
    """The relationship ``name`` on ``spec`` with exactly ``targets`` (an explicit list, even when empty)."""
    items = [_path(t) for t in targets]
    rel = spec.relationships.get(name)
    if rel is None:
        rel = Sdf.RelationshipSpec(spec, name, custom)
        if items:  # a new relationship's list becomes explicit with its items
            rel.targetPathList.explicitItems = items
            return rel
    paths = rel.targetPathList  # one proxy (each is made anew)
    paths.ClearEditsAndMakeExplicit()  # an empty list is still an opinion: "no targets"
    paths.explicitItems = items
    return rel


def apply_schemas(spec: Sdf.PrimSpec, *names: str) -> None:
    """Add API schemas to the spec's ``apiSchemas`` (prepended, each once, in order)."""
    items = list(spec.GetInfo("apiSchemas").prependedItems) if spec.HasInfo("apiSchemas") else []
    items += [name for name in names if name not in items]
    key = tuple(items)
    op = _LIST_OPS.get(key)
    if op is None:  # SetInfo copies the value: one list op per schema list serves every spec
        op = Sdf.TokenListOp.Create(prependedItems=items)
        if len(_LIST_OPS) < 4096:
            _LIST_OPS[key] = op
    spec.SetInfo("apiSchemas", op)


#: ``apply_schemas``' list ops by their prepended items (a few dozen distinct lists per robot).
_LIST_OPS: dict[tuple[str, ...], Sdf.TokenListOp] = {}


def applied(spec: Sdf.PrimSpec) -> list[str]:
    return list(spec.GetInfo("apiSchemas").prependedItems) if spec.HasInfo("apiSchemas") else []


def add_reference(spec: Sdf.PrimSpec, asset: str, target: Sdf.Path | str) -> None:
    """Prepend a reference (``asset`` "" = internal) to ``target``."""
    spec.referenceList.Prepend(Sdf.Reference(asset, _path(target)) if asset
                               else Sdf.Reference(primPath=_path(target)))


def set_instanceable(spec: Sdf.PrimSpec) -> None:
    spec.instanceable = True


def set_info(item: Sdf.Spec, key: str, value: Any) -> None:
    """Metadata on a property (``interpolation``, ``bindMaterialAs``)."""
    item.SetInfo(key, value)


def quaternion(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """(w, x, y, z) with w >= 0 of a proper rotation matrix (Shepperd's method, plain floats: this runs
    for every body, joint frame and shape, where numpy's per-call overhead would dominate)."""
    (a, b, c), (d, e, f), (g, h, i) = rotation.tolist()
    trace = a + e + i
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        w, x, y, z = 0.25 * s, (h - f) / s, (c - g) / s, (d - b) / s
    elif a > e and a > i:
        s = 2.0 * math.sqrt(1.0 + a - e - i)
        w, x, y, z = (h - f) / s, 0.25 * s, (b + d) / s, (c + g) / s
    elif e > i:
        s = 2.0 * math.sqrt(1.0 + e - a - i)
        w, x, y, z = (c - g) / s, (b + d) / s, 0.25 * s, (f + h) / s
    else:
        s = 2.0 * math.sqrt(1.0 + i - a - e)
        w, x, y, z = (d - b) / s, (c + g) / s, (f + h) / s, 0.25 * s
    norm = math.sqrt(w * w + x * x + y * y + z * z)
    sign = 1.0 if w >= 0 else -1.0
    return sign * w / norm, sign * x / norm, sign * y / norm, sign * z / norm


def xform(spec: Sdf.PrimSpec, pose: np.ndarray, scale: Iterable[float] | None = None) -> None:
    """translate (double3) + orient (quatd) [+ scale (double3)] of a (4, 4) rigid pose."""
    x0, y0, z0 = pose[:3, 3].tolist()
    attribute(spec, "xformOp:translate", T.Double3, Gf.Vec3d(x0, y0, z0))
    w, x, y, z = quaternion(pose[:3, :3])
    attribute(spec, "xformOp:orient", T.Quatd, Gf.Quatd(w, Gf.Vec3d(x, y, z)))
    order = ["xformOp:translate", "xformOp:orient"]
    if scale is not None:
        attribute(spec, "xformOp:scale", T.Double3, Gf.Vec3d(*map(float, scale)))
        order.append("xformOp:scale")
    attribute(spec, "xformOpOrder", T.TokenArray, Vt.TokenArray(order), uniform=True)


def quatf(rotation: np.ndarray) -> Gf.Quatf:
    """A (3, 3) rotation as a float quaternion with w >= 0."""
    w, x, y, z = quaternion(rotation)
    return Gf.Quatf(w, Gf.Vec3f(x, y, z))


def mesh(layer: Sdf.Layer, path: Sdf.Path, points: np.ndarray, faces: np.ndarray, *,
         normals: np.ndarray | None = None, normal_indices: np.ndarray | None = None,
         uv: np.ndarray | None = None, colors: np.ndarray | None = None) -> Sdf.PrimSpec:
    """A triangle ``Mesh``: points (V, 3) m, faces (F, 3) indices; optional normals and UVs, face-varying
    (F·3, 3|2) or per-vertex (V, 3|2), per-vertex RGBA colours (V, 4) in [0, 1] (one colour → constant
    displayColor/Opacity). With normal_indices (F·3,), normals (N, 3) are distinct values those index
    corner by corner: an indexed face-varying ``primvars:normals``, which UsdGeom reads before ``normals``."""
    spec = prim(layer, path, "Mesh")

    def vec(array: np.ndarray, width: int):
        array = np.ascontiguousarray(array, dtype=np.float32)
        return {2: Vt.Vec2fArray, 3: Vt.Vec3fArray}[width].FromNumpy(array) if width > 1 \
            else Vt.FloatArray.FromNumpy(array)

    def ints(array: np.ndarray):
        return Vt.IntArray.FromNumpy(np.ascontiguousarray(array, dtype=np.int32))

    points = np.ascontiguousarray(points, dtype=np.float32)
    faces = np.ascontiguousarray(faces, dtype=np.int32)
    attribute(spec, "points", T.Point3fArray, vec(points, 3))
    attribute(spec, "faceVertexCounts", T.IntArray, ints(np.full(len(faces), 3, np.int32)))
    attribute(spec, "faceVertexIndices", T.IntArray, ints(faces.reshape(-1)))
    attribute(spec, "subdivisionScheme", T.Token, "none", uniform=True)
    if len(points):
        attribute(spec, "extent", T.Float3Array, vec(_extent(points), 3))
    if normals is not None and normal_indices is not None:
        attr = attribute(spec, "primvars:normals", T.Normal3fArray, vec(normals, 3))
        set_info(attr, "interpolation", "faceVarying")
        attribute(spec, "primvars:normals:indices", T.IntArray, ints(normal_indices))
    elif normals is not None:
        attr = attribute(spec, "normals", T.Normal3fArray, vec(normals, 3))
        set_info(attr, "interpolation", "faceVarying" if len(normals) != len(points) else "vertex")
    if uv is not None:
        attr = attribute(spec, "primvars:st", T.TexCoord2fArray, vec(uv, 2))
        set_info(attr, "interpolation", "faceVarying" if len(uv) != len(points) else "vertex")
    if colors is not None:
        unique = np.unique(colors, axis=0)
        if len(unique) == 1:
            attribute(spec, "primvars:displayColor", T.Color3fArray, vec(unique[:, :3], 3))
            attribute(spec, "primvars:displayOpacity", T.FloatArray, vec(unique[:, 3], 1))
        else:
            attr = attribute(spec, "primvars:displayColor", T.Color3fArray, vec(colors[:, :3], 3))
            set_info(attr, "interpolation", "vertex")
    return spec


def _extent(points: np.ndarray) -> np.ndarray:
    """(min, max) (2, 3) of ``points`` (V, 3) float32, as ``points.min(0)`` and ``points.max(0)`` give them:
    reduced along the rows of their transposed copy (3× faster than down the columns of (V, 3)); a zero
    bound is taken again from ``points`` itself, so that its sign (of -0.0 and 0.0, which compare equal)
    is the one the row-by-row reduction picks."""
    extent = np.empty((2, 3), dtype=points.dtype)
    columns = points.T.copy()
    np.min(columns, axis=1, out=extent[0])
    np.max(columns, axis=1, out=extent[1])
    if not extent.all():
        extent[0], extent[1] = points.min(0), points.max(0)
    return extent


def single_precision_moments(moments: Iterable[float]) -> tuple[float, float, float]:
    """Principal moments (3,) kg·m² as ``physics:diagonalInertia``'s floats hold them, each the nearest
    float, except that the largest is lowered to the largest float not above the sum of the other two
    when that rounding alone breaks the triangle inequality A + B >= C (a thin disk or rod sits on it
    exactly; MuJoCo's decoder refuses a body that breaks it). Moments that break it by more stay as they
    are (rules.robot.inertia warns about those)."""
    # Python floats (each float32 rounding exact in float64): numpy's per-call cost is most of this on 3 values.
    values = [float(v) for v in moments]
    rounded = [float(np.float32(v)) for v in values]
    largest = rounded.index(max(rounded))
    others = sum(r for i, r in enumerate(rounded) if i != largest)
    exact = sum(v for i, v in enumerate(values) if i != largest)
    if rounded[largest] > others and exact >= values[largest] * (1.0 - 1e-6):
        lowered = np.float32(others)
        while float(lowered) > others:
            lowered = np.nextafter(lowered, np.float32(0.0))
        rounded[largest] = float(lowered)
    return tuple(rounded)


def mass(spec: Sdf.PrimSpec, value: float, center_of_mass: Iterable[float], inertia: np.ndarray,
         schemas: tuple[str, ...] = ()) -> None:
    """MassAPI with mass, centerOfMass, diagonalInertia and principalAxes, always together. schemas: API
    schemas applied before MassAPI in the same edit (the body's RigidBodyAPI: one list op, not two)."""
    apply_schemas(spec, *schemas, "PhysicsMassAPI")
    moments, q = principal_axes(inertia)
    attribute(spec, "physics:mass", T.Float, float(value))
    attribute(spec, "physics:centerOfMass", T.Point3f, Gf.Vec3f(*map(float, center_of_mass)))
    attribute(spec, "physics:diagonalInertia", T.Float3, Gf.Vec3f(*single_precision_moments(moments)))
    attribute(spec, "physics:principalAxes", T.Quatf, Gf.Quatf(float(q[0]), Gf.Vec3f(*map(float, q[1:]))))


def principal_axes(tensor: np.ndarray) -> tuple[np.ndarray, tuple[float, float, float, float]]:
    """Principal moments (3,) in kg·m² and principal axes as a quaternion (w, x, y, z), w >= 0, of a
    symmetric inertia tensor (3, 3) about the centre of mass: ``R diag(moments) Rᵀ == tensor`` with R
    proper. A diagonal tensor keeps the body axes rather than eigh's sorted, permuted ones."""
    # 0.5 * (A + Aᵀ) in plain floats, element by element as numpy computes it (the same values; numpy's
    # per-call cost was most of this for one body's 3 x 3).
    (a, b, c), (d, e, f), (g, h, i) = np.asarray(tensor, dtype=float).tolist()
    s00, s11, s22, s01, s02, s12 = 0.5 * (a + a), 0.5 * (e + e), 0.5 * (i + i), 0.5 * (b + d), 0.5 * (c + g), \
        0.5 * (f + h)
    symmetric = np.array([[s00, s01, s02], [s01, s11, s12], [s02, s12, s22]])
    entries = (s00, s11, s22, s01, s02, s12)
    if not all(-math.inf < v < math.inf for v in entries):  # non-finite: numpy's reductions decide, as they did
        off, scale = abs(s01) + abs(s02) + abs(s12), float(np.abs(symmetric).max())
    else:
        off, scale = abs(s01) + abs(s02) + abs(s12), max(abs(v) for v in entries)
    if off <= 1e-12 * max(scale, 1e-300):
        return np.clip(np.array([s00, s11, s22]), 0.0, None), (1.0, 0.0, 0.0, 0.0)
    moments, axes = np.linalg.eigh(symmetric)
    if np.linalg.det(axes) < 0:
        axes[:, 2] = -axes[:, 2]
    return np.clip(moments, 0.0, None), quaternion(axes)


def _connect(attr: Sdf.AttributeSpec, source: Sdf.Path) -> None:
    attr.connectionPathList.explicitItems = [source]


def preview_material(layer: Sdf.Layer, path: Sdf.Path, color: tuple | None = None, texture: str | None = None):
    """A ``UsdPreviewSurface`` material: a diffuse colour and opacity, or a texture read through ``st``.

    texture: the asset path as it should be written (relative to the layer that holds the material).
    """
    material = prim(layer, path, "Material")
    rgba = color or (0.8, 0.8, 0.8, 1.0)
    shader = prim(layer, path.AppendChild("PreviewSurface"), "Shader")
    attribute(shader, "info:id", T.Token, "UsdPreviewSurface", uniform=True)
    attribute(shader, "inputs:roughness", T.Float, 0.5)
    attribute(shader, "inputs:opacity", T.Float, float(rgba[3]))
    diffuse = attribute(shader, "inputs:diffuseColor", T.Color3f, None if texture else Gf.Vec3f(*map(float, rgba[:3])))
    attribute(shader, "outputs:surface", T.Token)
    if texture is not None:
        reader = prim(layer, path.AppendChild("TexCoordReader"), "Shader")
        attribute(reader, "info:id", T.Token, "UsdPrimvarReader_float2", uniform=True)
        attribute(reader, "inputs:varname", T.String, "st")
        attribute(reader, "outputs:result", T.Float2)
        image = prim(layer, path.AppendChild("DiffuseTexture"), "Shader")
        attribute(image, "info:id", T.Token, "UsdUVTexture", uniform=True)
        attribute(image, "inputs:file", T.Asset, Sdf.AssetPath(texture))
        _connect(attribute(image, "inputs:st", T.Float2), path.AppendChild("TexCoordReader").AppendProperty("outputs:result"))
        attribute(image, "inputs:wrapS", T.Token, "repeat")
        attribute(image, "inputs:wrapT", T.Token, "repeat")
        attribute(image, "outputs:rgb", T.Float3)
        _connect(diffuse, path.AppendChild("DiffuseTexture").AppendProperty("outputs:rgb"))
    _connect(attribute(material, "outputs:surface", T.Token), path.AppendChild("PreviewSurface").AppendProperty("outputs:surface"))
    return material


def bind_material(spec: Sdf.PrimSpec, material: Sdf.Path, stronger: bool = False) -> None:
    """Direct material binding (``MaterialBindingAPI``); ``stronger`` = strongerThanDescendants."""
    apply_schemas(spec, "MaterialBindingAPI")
    rel = relationship(spec, "material:binding", [material])
    if stronger:
        set_info(rel, "bindMaterialAs", "strongerThanDescendants")


def custom_attributes(spec: Sdf.PrimSpec, data: dict[str, Any]) -> None:
    """Source data with no USD equivalent as custom attributes (full names: ``urdf:...``)."""
    for name, value in data.items():
        if isinstance(value, bool):
            attribute(spec, name, T.Bool, value, custom=True)
        elif isinstance(value, int):
            attribute(spec, name, T.Int, value, custom=True)
        elif isinstance(value, float):
            attribute(spec, name, T.Double, value, custom=True)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
            attribute(spec, name, T.DoubleArray, Vt.DoubleArray([float(v) for v in value]), custom=True)
        else:
            attribute(spec, name, T.String, str(value), custom=True)
