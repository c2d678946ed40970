"""USD-authoring helpers shared by the rules: stages, meshes, preview materials, transforms, inertia.

The mesh rule builds its stages with these helpers (pxr's typed Usd API) and saves them into a folder; the
pipeline moves that folder's files into place atomically. The robot writer authors at the Sdf layer level
instead (``rules.usd.layer``: thousands of specs, several times faster) and shares the naming and
pose helpers here.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import numpy as np
from pxr import Gf, Sdf, Vt

from usdforge.rules.usd.finite import check_layer_finite
from usdforge.rules.usd.layer import principal_axes, quaternion, single_precision_moments
from usdforge.rules.usd.on_save import pending_custom_data

if TYPE_CHECKING:  # trimesh is imported where a mesh file is read, not by every rule that authors USD
    from pxr import Usd, UsdGeom, UsdShade

    import trimesh



_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


def usd_identifier(name: str) -> str:
    """A valid USD prim name for ``name``: other characters become ``_``; a leading digit gets ``_``."""
    cleaned = _NOT_IDENTIFIER.sub("_", name) or "_"
    return "_" + cleaned if cleaned[0].isdigit() else cleaned


def new_stage(root_name: str, path: Path | None = None, root_type: str = "Xform") -> tuple[Usd.Stage, Usd.Prim]:
    """A stage with usdforge's metadata (Z up, metres, kilograms) and its default prim ``/<root_name>``.

    path: the file the stage will be saved to (``save_stage``), so relative references resolve while
        authoring; None for an in-memory stage (``export_stage``).
    """
    from pxr import Usd, UsdGeom, UsdPhysics

    stage = Usd.Stage.CreateNew(str(path)) if path is not None else Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    root = stage.DefinePrim(Sdf.Path.absoluteRootPath.AppendChild(usd_identifier(root_name)), root_type)
    stage.SetDefaultPrim(root)
    return stage, root


def export_stage(stage: Usd.Stage, path: Path) -> Path:
    """Write an in-memory stage's root layer to ``path`` (``.usda`` text, ``.usd``/``.usdc`` binary)."""
    check_layer_finite(stage.GetRootLayer())
    path.parent.mkdir(parents=True, exist_ok=True)
    write_layer(lambda: stage.GetRootLayer().Export(str(path)), path)
    return path


def save_stage(stage: Usd.Stage) -> Path:
    """Save a stage made with ``new_stage(..., path)`` to its file (with the ``custom_data_on_save`` of
    that file)."""
    return save_layer(stage.GetRootLayer())


def save_layer(layer: Sdf.Layer) -> Path:
    """Save a layer made for its file (``new_stage(..., path)``'s, ``Sdf.Layer.CreateNew``) after the
    non-finite guard, with the ``custom_data_on_save`` of that file."""
    check_layer_finite(layer)
    add_custom_data_on_save(layer, Path(layer.realPath))
    write_layer(layer.Save, Path(layer.realPath))
    return Path(layer.realPath)


def add_custom_data_on_save(layer: Sdf.Layer, path: Path) -> None:
    """Set the ``custom_data_on_save`` of ``path`` (if any) in the customLayerData of ``layer``, which is
    about to be written there."""
    pending = pending_custom_data(path)
    if pending is not None:
        key, value, done = pending
        data = dict(layer.customLayerData)
        data[key] = value
        layer.customLayerData = data
        done.add(os.path.realpath(path))


def write_layer(write, path: Path) -> None:
    """Run ``write`` (a layer's Save or Export); OSError naming ``path`` when it fails. pxr reports a full
    disk as a Tf.ErrorException ending in "Could not close …" (the cause is a line above it): the error
    says "no space left on device" then, with ``errno`` ENOSPC."""
    import errno
    import shutil

    from pxr import Tf

    try:
        if write():
            return
        detail = ""
    except Tf.ErrorException as exc:
        detail = str(exc)
    except OSError as exc:  # write_text's
        detail = "no space left" if exc.errno == errno.ENOSPC else str(exc)
    full = "no space left" in detail.lower()
    if not full:
        try:
            full = shutil.disk_usage(path.parent).free < (1 << 20)
        except OSError:
            pass
    error = OSError(f"could not write {path}" + (": no space left on device" if full else ""))
    error.errno = errno.ENOSPC if full else errno.EIO
    raise error


def write_text(path: Path, text: str | bytes) -> bool:
    """Write a text layer's ``ExportToString`` (or a layer's bytes) to ``path`` as ``Save`` writes it (the
    same bytes, through a temporary file renamed into place), for ``write_layer``; OSError when it cannot."""
    target = str(path)
    folder, name = os.path.split(target)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    data = memoryview(text.encode() if isinstance(text, str) else text)
    try:
        # os-level calls, the flags and mode of open(..., "wb"): no buffer object, fstat, ioctl or seeks
        # (ten files per robot)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            while data:
                data = data[os.write(descriptor, data):]
        finally:
            os.close(descriptor)
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return True


def unique(name: str, taken: set[str]) -> str:
    """``name``, suffixed ``_1``, ``_2`` … until it is not in ``taken``; adds it there."""
    candidate, counter = name, 0
    while candidate in taken:
        counter += 1
        candidate = f"{name}_{counter}"
    taken.add(candidate)
    return candidate


def unique_name(name: str, taken: set[str]) -> str:
    """A prim name for ``name``: ``usd_identifier(name)`` made unique in ``taken`` (see ``unique``)."""
    return unique(usd_identifier(name), taken)


def set_local_transform(prim: Usd.Prim, translation: Iterable[float] = (0.0, 0.0, 0.0),
                        orientation_wxyz: Iterable[float] = (1.0, 0.0, 0.0, 0.0),
                        scale: Iterable[float] | None = None) -> None:
    """Author translate / orient (double precision) / optional scale ops on ``prim``, replacing any.

    The specs UsdGeom.Xformable's ``ClearXformOpOrder`` and ``Add*Op`` author, in their order (the op
    order first, then each op), through the prim's generic API: no UsdGeom module to load
    (``tests/test_mesh_rule.py`` compares the two)."""
    order = prim.CreateAttribute("xformOpOrder", Sdf.ValueTypeNames.TokenArray, False, Sdf.VariabilityUniform)
    order.Set(Vt.TokenArray())
    ops = [("xformOp:translate", Sdf.ValueTypeNames.Double3, Gf.Vec3d(*map(float, translation)))]
    w, x, y, z = map(float, orientation_wxyz)
    ops.append(("xformOp:orient", Sdf.ValueTypeNames.Quatd, Gf.Quatd(w, Gf.Vec3d(x, y, z))))
    if scale is not None:
        ops.append(("xformOp:scale", Sdf.ValueTypeNames.Double3, Gf.Vec3d(*map(float, scale))))
    for name, value_type, value in ops:
        existing = prim.GetAttribute(name)
        if existing and existing.GetTypeName() != value_type:  # UsdGeom's Add*Op refuses it too
            raise ValueError(f"{prim.GetPath()}: {name} exists as {existing.GetTypeName()}, not {value_type}")
        prim.CreateAttribute(name, value_type, False).Set(value)
    order.Set(Vt.TokenArray([name for name, _, _ in ops]))


def schema_attribute(prim: Usd.Prim, name: str, value: object) -> None:
    """Author ``value`` on the attribute ``name`` of ``prim``'s schemas (its type or an applied API schema)
    as the schema class's ``Create<Name>Attr(value)`` does (not custom; the type and variability of the
    schema's definition), through pxr.Usd alone: a robot conversion loads no UsdGeom, UsdPhysics, UsdShade
    or UsdLux module (tens of ms of a one-off conversion). ValueError when the schemas define no such
    attribute. The prim's composed definition is read: ``prim`` is one this stage's edit target defines
    (as every writer here does: one layer per stage), not one a stronger layer gives another type."""
    definition = prim.GetPrimDefinition().GetAttributeDefinition(name)
    if not definition:
        raise ValueError(f"{prim.GetPath()}: its schemas define no attribute {name}")
    prim.CreateAttribute(name, definition.GetTypeName(), False, definition.GetVariability()).Set(value)


def matrix_to_pose(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 4×4 affine matrix (column vectors) → translation (3,), quaternion (w, x, y, z) (4,), scale (3,)."""
    translation = matrix[:3, 3].copy()
    linear = matrix[:3, :3]
    scale = np.linalg.norm(linear, axis=0)
    rotation = linear / np.where(scale == 0, 1.0, scale)
    if np.linalg.det(rotation) < 0:  # a mirror: keep a proper rotation and put the flip into the scale
        scale[0] = -scale[0]
        rotation[:, 0] = -rotation[:, 0]
    return translation, np.array(quaternion(rotation)), scale


def author_mesh(stage: Usd.Stage, path: Sdf.Path | str, mesh: trimesh.Trimesh) -> UsdGeom.Mesh:
    """A ``UsdGeom.Mesh`` at ``path`` with points, triangles, vertex normals, UVs and colours of ``mesh``.

    Colours: one colour for the whole mesh becomes a constant ``displayColor`` (and ``displayOpacity``);
    per-vertex colours a vertex primvar. UVs go to ``primvars:st`` (vertex interpolation).
    """
    from pxr import UsdGeom

    usd_mesh = UsdGeom.Mesh.Define(stage, path)
    vertices = np.asarray(mesh.vertices, dtype=np.float32)
    faces = np.asarray(mesh.faces, dtype=np.int32)
    usd_mesh.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(vertices))
    usd_mesh.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(faces), 3, dtype=np.int32)))
    usd_mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(faces.reshape(-1)))
    usd_mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    if len(vertices):
        usd_mesh.CreateExtentAttr(Vt.Vec3fArray.FromNumpy(np.stack([vertices.min(0), vertices.max(0)])))
        normals = np.asarray(mesh.vertex_normals, dtype=np.float32)
        usd_mesh.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(normals))
        usd_mesh.SetNormalsInterpolation(UsdGeom.Tokens.vertex)
    primvars = UsdGeom.PrimvarsAPI(usd_mesh)
    uv = getattr(mesh.visual, "uv", None)
    if uv is not None and len(uv) == len(vertices):
        st = primvars.CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray, UsdGeom.Tokens.vertex)
        st.Set(Vt.Vec2fArray.FromNumpy(np.asarray(uv, dtype=np.float32)))
    colors = _vertex_colors(mesh)
    if colors is not None:
        unique = np.unique(colors, axis=0)
        if len(unique) == 1:
            usd_mesh.CreateDisplayColorAttr(Vt.Vec3fArray.FromNumpy(unique[:, :3].astype(np.float32)))
            usd_mesh.CreateDisplayOpacityAttr(Vt.FloatArray.FromNumpy(unique[:, 3].astype(np.float32)))
        else:
            display = primvars.CreatePrimvar("displayColor", Sdf.ValueTypeNames.Color3fArray,
                                             UsdGeom.Tokens.vertex)
            display.Set(Vt.Vec3fArray.FromNumpy(colors[:, :3].astype(np.float32)))
    return usd_mesh


def _vertex_colors(mesh: trimesh.Trimesh) -> np.ndarray | None:
    """Per-vertex RGBA in [0, 1] when the mesh file gave colours (not trimesh's default grey), else None."""
    visual = mesh.visual
    if getattr(visual, "kind", None) not in ("vertex", "face"):
        return None
    colors = np.asarray(visual.vertex_colors, dtype=np.float64) / 255.0
    return colors if len(colors) == len(mesh.vertices) else None


def material_of(mesh: trimesh.Trimesh) -> tuple[tuple[float, float, float, float] | None, object | None]:
    """The base colour (RGBA in [0, 1]) and texture image (PIL image or None) of a textured mesh."""
    material = getattr(mesh.visual, "material", None)
    if material is None:
        return None, None
    image = getattr(material, "baseColorTexture", None) or getattr(material, "image", None)
    factor = getattr(material, "baseColorFactor", None)
    if factor is None:
        factor = getattr(material, "main_color", None)
    color = None
    if factor is not None:
        rgba = np.asarray(factor, dtype=np.float64).reshape(-1)
        rgba = rgba / 255.0 if rgba.max() > 1.0 else rgba
        color = tuple(float(v) for v in (list(rgba) + [1.0] * 4)[:4])
    return color, image


def author_preview_material(stage: Usd.Stage, path: Sdf.Path | str,
                            color: tuple[float, float, float, float] | None = None,
                            texture_file: str | None = None) -> UsdShade.Material:
    """A ``UsdPreviewSurface`` material: a constant diffuse colour and opacity, or a texture via ``st``.

    texture_file: asset path as it should be written (relative to the layer that holds the material).
    """
    from pxr import UsdShade

    material = UsdShade.Material.Define(stage, path)
    shader = UsdShade.Shader.Define(stage, Sdf.Path(path).AppendChild("PreviewSurface"))
    shader.CreateIdAttr("UsdPreviewSurface")
    rgba = color or (0.8, 0.8, 0.8, 1.0)
    shader.CreateInput("roughness", Sdf.ValueTypeNames.Float).Set(0.5)
    shader.CreateInput("opacity", Sdf.ValueTypeNames.Float).Set(float(rgba[3]))
    if texture_file is None:
        shader.CreateInput("diffuseColor", Sdf.ValueTypeNames.Color3f).Set(Gf.Vec3f(*rgba[:3]))
    else:
        reader = UsdShade.Shader.Define(stage, Sdf.Path(path).AppendChild("TexCoordReader"))
        reader.CreateIdAttr("UsdPrimvarReader_float2")
        reader.CreateInput("varname", Sdf.ValueTypeNames.String).Set("st")
        texture = UsdShade.Shader.Define(stage, Sdf.Path(path).AppendChild("DiffuseTexture"))
        texture.CreateIdAttr("UsdUVTexture")
        texture.CreateInput("file", Sdf.ValueTypeNames.Asset).Set(texture_file)
        texture.CreateInput("st", Sdf.ValueTypeNames.Float2).ConnectToSource(
            reader.ConnectableAPI(), "result")
        texture.CreateInput("wrapS", Sdf.ValueTypeNames.Token).Set("repeat")
        texture.CreateInput("wrapT", Sdf.ValueTypeNames.Token).Set("repeat")
        texture.CreateOutput("rgb", Sdf.ValueTypeNames.Float3)
        shader.CreateInput("diffuseColor", Sdf.ValueTypeNames.Color3f).ConnectToSource(
            texture.ConnectableAPI(), "rgb")
    material.CreateSurfaceOutput().ConnectToSource(shader.ConnectableAPI(), "surface")
    return material


def bind_material(prim: Usd.Prim, material: UsdShade.Material) -> None:
    """Bind ``material`` to ``prim`` (applies ``MaterialBindingAPI``)."""
    from pxr import UsdShade

    UsdShade.MaterialBindingAPI.Apply(prim).Bind(material)


def relative_asset_path(target: Path, layer_dir: Path) -> str:
    """``target`` relative to the folder of the layer that references it, ``./``-prefixed, POSIX slashes."""
    target, layer_dir = Path(target), Path(layer_dir)
    if target.is_absolute() and layer_dir.is_absolute() and ".." not in target.parts and \
            target.parts[:len(layer_dir.parts)] == layer_dir.parts and len(target.parts) > len(layer_dir.parts):
        # Inside the folder (a robot's layers and textures): what relpath gives, without its two abspath calls.
        return "./" + "/".join(target.parts[len(layer_dir.parts):])
    relative = Path(os.path.relpath(target, layer_dir)).as_posix()
    return relative if relative.startswith("../") else f"./{relative}"


def author_mass(prim: Usd.Prim, mass: float, center_of_mass: Iterable[float], inertia_tensor: np.ndarray) -> None:
    """Author mass, centerOfMass, diagonalInertia and principalAxes together (every engine needs all four)."""
    from pxr import UsdPhysics

    mass_api = UsdPhysics.MassAPI.Apply(prim)
    moments, quat = principal_axes(inertia_tensor)
    mass_api.CreateMassAttr(float(mass))
    mass_api.CreateCenterOfMassAttr(Gf.Vec3f(*map(float, center_of_mass)))
    mass_api.CreateDiagonalInertiaAttr(Gf.Vec3f(*single_precision_moments(moments)))
    mass_api.CreatePrincipalAxesAttr(Gf.Quatf(float(quat[0]), Gf.Vec3f(*map(float, quat[1:]))))
