"""Pictures of a converted asset, rendered from the USD output's visual geometry on the CPU.

Renderer: VTK (``pip install usdforge[report]``), offscreen: with no display VTK's wheels render through
EGL or OSMesa, which Mesa implements in software (llvmpipe), so no GPU and no X server are needed. The
geometry is what the USD says: every visible ``Mesh`` and primitive (``Cube``, ``Sphere``, ``Cylinder``,
``Capsule``, ``Cone``) that is not a guide or proxy (collision shapes are guides; they are drawn only
when there is nothing else), at its world transform, i.e. robots at their rest pose, coloured by its bound
material's ``diffuseColor`` and ``opacity`` (or its ``displayColor`` and ``displayOpacity``): a shape of
opacity 0 (MJCF ``rgba`` alpha 0: a site-like helper, flybody's wing planes) is not drawn, a translucent
one is drawn translucent; a stick figure of bodies and joints when fewer than half the bodies have a
shape; a neutral background; the camera framed to the asset's bounds (less a shape that dwarfs all
others, such as a 30 m rail or a floor).

Lit so that shape reads whatever the material: a light kit (key, fill, back and head lights), some
specular, and colours lifted off black (``SHADE_FLOOR``), so a black robot is drawn dark grey with its
shading instead of as a silhouette.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from usdforge.pipeline.report.views import VIEWS

BACKGROUND = (0.93, 0.93, 0.91)
DEFAULT_COLOUR = (0.62, 0.64, 0.68)
#: Drawn colour = SHADE_FLOOR + (1 - SHADE_FLOOR) · material colour: black becomes a grey that shading shows.
SHADE_FLOOR = 0.22
#: Shapes this transparent or more are not drawn.
INVISIBLE_OPACITY = 0.01


class MissingRenderer(RuntimeError):
    """VTK is not installed."""


def _vtk():
    try:
        import vtkmodules.vtkRenderingOpenGL2  # noqa: F401  (registers the OpenGL render windows)
        import vtkmodules.vtkInteractionStyle  # noqa: F401
        from vtkmodules import vtkCommonCore, vtkCommonDataModel, vtkFiltersSources, vtkIOImage, vtkRenderingCore
    except ImportError as exc:
        raise MissingRenderer("rendering the report's pictures needs VTK: pip install 'usdforge[report]'") from exc
    return vtkCommonCore, vtkCommonDataModel, vtkFiltersSources, vtkIOImage, vtkRenderingCore


def _opacity(prim) -> float:
    """The prim's opacity: its material's ``opacity`` input, else its ``displayOpacity``, else 1."""
    from pxr import UsdGeom, UsdShade

    material = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial()[0]
    shader = material.ComputeSurfaceSource()[0] if material else None
    opacity = shader.GetInput("opacity") if shader else None
    if opacity and not opacity.HasConnectedSource() and opacity.Get() is not None:
        return float(opacity.Get())
    values = UsdGeom.Gprim(prim).GetDisplayOpacityAttr().Get() if prim.IsA(UsdGeom.Gprim) else None
    return float(max(values)) if values else 1.0


def _colour(prim) -> tuple[float, float, float]:
    from pxr import UsdGeom, UsdShade

    material = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial()[0]
    if material:
        shader = material.ComputeSurfaceSource()[0]
        if shader:
            colour_input = shader.GetInput("diffuseColor")
            if colour_input:
                if colour_input.HasConnectedSource():
                    # A texture: its fallback, or a light grey standing in for the picture.
                    connected = colour_input.GetConnectedSources()[0]
                    source = connected[0].source if connected else None
                    fallback = source.GetPrim().GetAttribute("inputs:fallback").Get() if source else None
                    if fallback is not None:
                        return tuple(float(v) for v in list(fallback)[:3])
                    return (0.8, 0.8, 0.8)
                value = colour_input.Get()
                if value is not None:
                    return tuple(float(v) for v in value)
    colours = UsdGeom.Gprim(prim).GetDisplayColorAttr().Get() if prim.IsA(UsdGeom.Gprim) else None
    if colours:
        return tuple(float(v) for v in colours[0])
    return DEFAULT_COLOUR


def _poly_data(prim, vtk):
    """The prim's surface in its own frame as vtkPolyData (None when it is not drawable)."""
    from pxr import UsdGeom

    _, data_model, sources, _, _ = vtk
    if prim.IsA(UsdGeom.Mesh):
        mesh = UsdGeom.Mesh(prim)
        points = mesh.GetPointsAttr().Get()
        counts = mesh.GetFaceVertexCountsAttr().Get()
        indices = mesh.GetFaceVertexIndicesAttr().Get()
        if not points or not counts or indices is None:
            return None
        from vtkmodules.util.numpy_support import numpy_to_vtk, numpy_to_vtkIdTypeArray
        from vtkmodules.vtkCommonCore import vtkPoints

        vtk_points = vtkPoints()
        vtk_points.SetData(numpy_to_vtk(np.asarray(points, dtype=np.float64), deep=True))
        counts = np.asarray(counts, dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        cells = data_model.vtkCellArray()
        cells.SetData(numpy_to_vtkIdTypeArray(offsets, deep=True),
                      numpy_to_vtkIdTypeArray(np.asarray(indices, dtype=np.int64), deep=True))
        poly = data_model.vtkPolyData()
        poly.SetPoints(vtk_points)
        poly.SetPolys(cells)
        return poly
    axis_turn = None
    if prim.IsA(UsdGeom.Cube):
        source = sources.vtkCubeSource()
        size = UsdGeom.Cube(prim).GetSizeAttr().Get() or 2.0
        source.SetXLength(size), source.SetYLength(size), source.SetZLength(size)
    elif prim.IsA(UsdGeom.Sphere):
        source = sources.vtkSphereSource()
        source.SetRadius(UsdGeom.Sphere(prim).GetRadiusAttr().Get() or 1.0)
        source.SetThetaResolution(32), source.SetPhiResolution(16)
    elif prim.IsA(UsdGeom.Cylinder) or prim.IsA(UsdGeom.Capsule) or prim.IsA(UsdGeom.Cone):
        schema = (UsdGeom.Cylinder if prim.IsA(UsdGeom.Cylinder) else UsdGeom.Capsule if prim.IsA(UsdGeom.Capsule)
                  else UsdGeom.Cone)(prim)
        radius, height = schema.GetRadiusAttr().Get() or 1.0, schema.GetHeightAttr().Get() or 2.0
        axis_turn = schema.GetAxisAttr().Get() or "Z"
        if prim.IsA(UsdGeom.Cone):
            source = sources.vtkConeSource()  # along +X
            source.SetRadius(radius), source.SetHeight(height), source.SetResolution(32)
            axis_turn = {"X": None, "Y": ("Z", 90.0), "Z": ("Y", -90.0)}[axis_turn]
        elif prim.IsA(UsdGeom.Capsule):
            source = sources.vtkCylinderSource()  # along +Y; capped with spheres below
            source.SetRadius(radius), source.SetHeight(height), source.SetResolution(32)
            source.SetCapsuleCap(True)  # hemispherical ends (VTK >= 9.3)
            axis_turn = {"Y": None, "X": ("Z", -90.0), "Z": ("X", 90.0)}[axis_turn]
        else:
            source = sources.vtkCylinderSource()  # along +Y
            source.SetRadius(radius), source.SetHeight(height), source.SetResolution(32)
            axis_turn = {"Y": None, "X": ("Z", -90.0), "Z": ("X", 90.0)}[axis_turn]
    else:
        return None
    source.Update()
    poly = source.GetOutput()
    if axis_turn:
        from vtkmodules.vtkCommonTransforms import vtkTransform
        from vtkmodules.vtkFiltersGeneral import vtkTransformPolyDataFilter

        turn = vtkTransform()
        getattr(turn, f"Rotate{axis_turn[0]}")(axis_turn[1])
        transformed = vtkTransformPolyDataFilter()
        transformed.SetTransform(turn)
        transformed.SetInputData(poly)
        transformed.Update()
        poly = transformed.GetOutput()
    return poly


def _owning_body(prim, bodies: set[str]) -> str | None:
    while prim and not prim.IsPseudoRoot():
        if str(prim.GetPath()) in bodies:
            return str(prim.GetPath())
        prim = prim.GetParent()
    return None


def _actor(poly, world: np.ndarray, colour, vtk, opacity: float = 1.0):
    from vtkmodules.vtkCommonMath import vtkMatrix4x4
    from vtkmodules.vtkFiltersCore import vtkPolyDataNormals

    *_, rendering = vtk
    normals = vtkPolyDataNormals()
    normals.SetInputData(poly)
    normals.SetFeatureAngle(40.0)
    normals.SplittingOn()
    normals.ConsistencyOn()
    mapper = rendering.vtkPolyDataMapper()
    mapper.SetInputConnection(normals.GetOutputPort())
    actor = rendering.vtkActor()
    actor.SetMapper(mapper)
    matrix = vtkMatrix4x4()
    for i in range(4):
        for j in range(4):
            matrix.SetElement(i, j, float(world[i, j]))
    actor.SetUserMatrix(matrix)
    shown = SHADE_FLOOR + (1.0 - SHADE_FLOOR) * np.clip(np.asarray(colour, dtype=float), 0.0, 1.0)
    properties = actor.GetProperty()
    properties.SetColor(*shown)
    properties.SetDiffuse(0.8)
    properties.SetAmbient(0.15)
    properties.SetSpecular(0.3)
    properties.SetSpecularPower(20.0)
    if opacity < 1.0:
        properties.SetOpacity(opacity)
    return actor


def _shapes(stage, vtk, purposes: tuple[str, ...], bodies: set[str]) -> list[tuple[object, str | None]]:
    """(actor, owning body path or None) for every drawable gprim of one of ``purposes``."""
    from pxr import Usd, UsdGeom

    cache = UsdGeom.XformCache()
    found = []
    for prim in Usd.PrimRange.Stage(stage, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)):
        if not prim.IsA(UsdGeom.Gprim):
            continue
        imageable = UsdGeom.Imageable(prim)
        if imageable.ComputePurpose() not in purposes or imageable.ComputeVisibility() == UsdGeom.Tokens.invisible:
            continue
        opacity = _opacity(prim)
        if opacity <= INVISIBLE_OPACITY:  # drawn as nothing in the simulators' viewers too
            continue
        poly = _poly_data(prim, vtk)
        if poly is None or poly.GetNumberOfPoints() == 0 or prim.IsA(UsdGeom.Plane) or _is_ground(poly):
            continue
        world = np.array(cache.GetLocalToWorldTransform(prim), dtype=float).T
        found.append((_actor(poly, world, _colour(prim), vtk, min(opacity, 1.0)), _owning_body(prim, bodies)))
    return found


def _skeleton(stage, bodies: set[str], size: float, vtk) -> list:
    """Spheres at the bodies and rods along the joints: a stick figure for robots that have (almost) no
    visual geometry, so that their shape still shows."""
    from pxr import Usd, UsdGeom, UsdPhysics
    from vtkmodules.vtkFiltersCore import vtkTubeFilter

    _, _, sources, _, _ = vtk
    cache = UsdGeom.XformCache()
    origin = {b: np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(b)), dtype=float).T[:3, 3]
              for b in bodies}
    radius = max(size * 0.012, 1e-4)
    actors = []
    for centre in origin.values():
        sphere = sources.vtkSphereSource()
        sphere.SetRadius(radius * 2), sphere.SetThetaResolution(16), sphere.SetPhiResolution(8)
        sphere.SetCenter(*centre)
        sphere.Update()
        actors.append(_actor(sphere.GetOutput(), np.eye(4), (0.85, 0.45, 0.15), vtk))
    for prim in Usd.PrimRange.Stage(stage, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)):
        if not prim.IsA(UsdPhysics.Joint):
            continue
        joint = UsdPhysics.Joint(prim)
        ends = [rel.GetTargets() for rel in (joint.GetBody0Rel(), joint.GetBody1Rel())]
        if not all(ends) or str(ends[0][0]) not in origin or str(ends[1][0]) not in origin:
            continue
        a, b = origin[str(ends[0][0])], origin[str(ends[1][0])]
        if np.linalg.norm(b - a) < 1e-9:
            continue
        rod = sources.vtkLineSource()
        rod.SetPoint1(*a), rod.SetPoint2(*b)
        tube = vtkTubeFilter()
        tube.SetInputConnection(rod.GetOutputPort())
        tube.SetRadius(radius), tube.SetNumberOfSides(12), tube.CappingOn()
        tube.Update()
        actors.append(_actor(tube.GetOutput(), np.eye(4), (0.55, 0.57, 0.62), vtk))
    return actors


def _union(actors: list) -> np.ndarray:
    bounds = np.array([actor.GetBounds() for actor in actors])
    return np.array([bounds[:, 0].min(), bounds[:, 1].max(), bounds[:, 2].min(), bounds[:, 3].max(),
                     bounds[:, 4].min(), bounds[:, 5].max()])


def _diagonal(bounds: np.ndarray) -> float:
    return float(np.linalg.norm(bounds[1::2] - bounds[0::2]))


def _framed(actors: list, ratio: float = 4.0, drops: int = 3) -> list:
    """``actors`` less the few shapes that dwarf all the others together (a 30 m rail, a floor), which
    would shrink the asset to a dot: each is left out while the rest is ``ratio`` times smaller."""
    kept = sorted(actors, key=lambda actor: _diagonal(_union([actor])))
    for _ in range(drops):
        if len(kept) < 2 or _diagonal(_union(kept)) <= ratio * max(_diagonal(_union(kept[:-1])), 1e-9):
            break
        kept = kept[:-1]
    return kept


def _scene(stage, vtk) -> tuple[list, tuple]:
    """The actors to draw and the bounds to frame (module docstring). With no visual shape at all, the
    collision shapes are drawn translucent over a stick figure of the bodies and joints, which is framed."""
    from pxr import Usd, UsdPhysics

    bodies = {str(p.GetPath()) for p in Usd.PrimRange.Stage(stage, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate))
              if p.HasAPI(UsdPhysics.RigidBodyAPI)}
    shapes = _shapes(stage, vtk, ("default", "render"), bodies)
    skeleton, translucent = [], not shapes
    if translucent:
        shapes = _shapes(stage, vtk, ("guide", "proxy"), bodies)
        for actor, _ in shapes:
            actor.GetProperty().SetOpacity(0.15)
    if bodies and len({body for _, body in shapes if body}) < len(bodies) / 2:
        from pxr import UsdGeom

        cache = UsdGeom.XformCache()
        points = np.array([np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(b)), dtype=float).T[:3, 3]
                           for b in bodies])
        size = float(np.linalg.norm(points.max(axis=0) - points.min(axis=0))) or 0.1
        skeleton = _skeleton(stage, bodies, size, vtk)
    actors = [actor for actor, _ in shapes] + skeleton
    if not actors:
        return actors, (-1, 1, -1, 1, -1, 1)
    framed = skeleton if translucent and skeleton else _framed(actors)
    return actors, tuple(_union(framed))


def _is_ground(poly) -> bool:
    """A flat sheet far wider than anything else (a floor) would shrink the robot to a dot."""
    bounds = poly.GetBounds()
    extents = sorted(bounds[2 * i + 1] - bounds[2 * i] for i in range(3))
    return extents[0] < 1e-6 and extents[2] > 20.0


def _frame(camera, bounds, direction: np.ndarray, aspect: float, fov: float = 30.0, margin: float = 1.08) -> None:
    """Point ``camera`` along ``-direction`` at the box ``bounds`` so that the box just fills the picture."""
    low, high = np.array(bounds[0::2], dtype=float), np.array(bounds[1::2], dtype=float)
    centre = (low + high) / 2
    up = np.array([0.0, 0.0, 1.0]) if abs(direction[2]) < 0.99 else np.array([0.0, 1.0, 0.0])
    right = np.cross(up, direction)
    right /= np.linalg.norm(right)
    up = np.cross(direction, right)
    corners = np.array([[x, y, z] for x in (low[0], high[0]) for y in (low[1], high[1]) for z in (low[2], high[2])])
    offsets = corners - centre
    half_width = np.abs(offsets @ right).max()
    half_height = np.abs(offsets @ up).max()
    depth = np.abs(offsets @ direction).max()
    tangent = math.tan(math.radians(fov / 2))
    distance = max(half_height / tangent, half_width / (tangent * aspect), 1e-3) * margin + depth
    camera.SetViewAngle(fov)
    camera.SetFocalPoint(*centre)
    camera.SetPosition(*(centre + direction * distance))
    camera.SetViewUp(*up)


def render_views(usd_path: str | Path, outputs: dict[str, str | Path], size: dict[str, tuple[int, int]]) -> int:
    """Render the asset at ``usd_path`` from the ``VIEWS`` named in ``outputs`` (view → PNG path) at
    ``size`` (view → (width, height) pixels); the number of shapes drawn. PNGs written atomically."""
    import os

    from pxr import Usd

    vtk = _vtk()
    core, _, _, image_io, rendering = vtk
    stage = Usd.Stage.Open(str(usd_path))
    if stage is None:
        raise ValueError(f"{usd_path}: OpenUSD cannot open it")
    actors, bounds = _scene(stage, vtk)
    core.vtkObject.GlobalWarningDisplayOff()  # VTK's "no X server" notice before it falls back to EGL
    for view, path in outputs.items():
        renderer = rendering.vtkRenderer()
        renderer.SetBackground(*BACKGROUND)
        renderer.SetBackground2(1.0, 1.0, 1.0)
        renderer.GradientBackgroundOn()
        for actor in actors:
            renderer.AddActor(actor)
        window = rendering.vtkRenderWindow()
        window.SetOffScreenRendering(1)
        window.SetMultiSamples(0)
        window.AddRenderer(renderer)
        width, height = size[view]
        window.SetSize(width, height)
        camera = renderer.GetActiveCamera()
        direction = np.asarray(VIEWS[view], dtype=float)
        direction /= np.linalg.norm(direction)
        _frame(camera, bounds, direction, width / height)
        renderer.ResetCameraClippingRange()
        lights = rendering.vtkLightKit()  # key, fill, back and head lights, following the camera
        lights.SetKeyLightIntensity(0.9)
        lights.AddLightsToRenderer(renderer)
        window.Render()
        grab = rendering.vtkWindowToImageFilter()
        grab.SetInput(window)
        grab.ReadFrontBufferOff()
        grab.Update()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(path.name + f".tmp-{os.getpid()}.png")
        writer = image_io.vtkPNGWriter()
        writer.SetFileName(str(staging))
        writer.SetInputConnection(grab.GetOutputPort())
        writer.Write()
        window.Finalize()
        os.replace(staging, path)
    return len(actors)
