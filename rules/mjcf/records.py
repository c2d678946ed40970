"""The parts of an MJCF model no physics engine simulates, kept in the USD: sites, keyframes, sensors,
cameras and lights.

- Sites: guide-purpose primitives ``<link>/sites/<name>`` with ``MjcSiteAPI`` (group), at MuJoCo's site
  pose in its body (MuJoCo's decoder reads them; site actuators and spatial tendons target them).
- Keyframes: ``MjcKeyframe`` prims ``/<robot>/Keyframes/<name>`` with ``mjc:qpos`` (hinge and slide
  entries in USD joint coordinates, MuJoCo's minus ``ref``), qvel, act, ctrl, mpos, mquat and
  ``mjcf:time``. MuJoCo 4.0's decoder cannot read spherical joints, and a keyframe whose qpos does not
  match the decoded model stops it loading, so in models with ball joints the keyframes are untyped prims
  with the same attributes (and a warning).
- Sensors: untyped prims ``/<robot>/Sensors/<name>`` with ``mjcf:type``, ``mjcf:objectType``,
  ``mjcf:target`` (relationship to the object's prim), noise, cutoff, dimension.
- Cameras: ``UsdGeom.Camera`` ``<link>/cameras/<name>`` (MuJoCo cameras look down -Z with +Y up, as USD's
  do), vertical field of view from ``fovy``; ``mjcf:mode`` keeps MuJoCo's tracking mode.
- Lights: ``UsdLux.DistantLight`` (directional) or ``SphereLight`` (spot with ``ShapingAPI`` cone, point)
  ``<link>/lights/<name>``, shining along MuJoCo's ``dir``.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
from pxr import Gf, Sdf

from usdforge.rules.usd import layer as sdf
from usdforge.rules.mjcf.bodies import BALL, HINGE, SLIDE, pose_matrix, translation
from usdforge.rules.mjcf.slim import id2name
from usdforge.rules.mjcf.usd import MjcfUsd, relationship, set_all, set_custom
from usdforge.rules.usd.stage import matrix_to_pose, schema_attribute, set_local_transform, unique_name

_GEOM = mujoco.mjtGeom
#: Vertical film aperture (mm) of authored cameras; the focal length follows from MuJoCo's fovy.
CAMERA_APERTURE = 20.955


def _set_pose(prim, pose: np.ndarray, scale=None) -> None:
    position, quaternion, _ = matrix_to_pose(pose)
    set_local_transform(prim, position, quaternion, scale)


def _link_child(usd: MjcfUsd, body: int, scope: str, name: str, taken: dict) -> Sdf.Path | None:
    link = usd.bodies.link_of_body.get(body)
    if link is None:
        return None
    parent = usd.ctx.link_paths[link].AppendChild(scope)
    return parent.AppendChild(unique_name(name, taken.setdefault(parent, set())))


def author_sites(usd: MjcfUsd) -> None:
    """Every site as a guide primitive with MjcSiteAPI; fills ``usd.site_paths``."""
    model = usd.loaded.model
    double, token = Sdf.ValueTypeNames.Double, Sdf.ValueTypeNames.Token
    taken: dict = {}
    for site in range(model.nsite):
        name = model.site(site).name or f"site{site}"
        path = _link_child(usd, int(model.site_bodyid[site]), "sites", name, taken)
        if path is None:
            continue
        usd.site_paths[site] = path
        set_all(usd.spec("mujoco", path), {"mjc:group": int(model.site_group[site])}, ["MjcSiteAPI"])
        if not usd.authored("base"):
            continue
        usd.define("base", path.GetParentPath(), "Scope")
        kind, size = int(model.site_type[site]), np.asarray(model.site_size[site], dtype=np.float64)
        scale = None
        if kind == int(_GEOM.mjGEOM_BOX):
            spec = usd.define("base", path, "Cube")
            sdf.attribute(spec, "size", double, 2.0)
            scale = size
        elif kind in (int(_GEOM.mjGEOM_CAPSULE), int(_GEOM.mjGEOM_CYLINDER)):
            spec = usd.define("base", path, "Capsule" if kind == int(_GEOM.mjGEOM_CAPSULE) else "Cylinder")
            sdf.attribute(spec, "radius", double, float(size[0]))
            sdf.attribute(spec, "height", double, 2.0 * float(size[1]))
            sdf.attribute(spec, "axis", token, "Z", uniform=True)
        elif kind == int(_GEOM.mjGEOM_ELLIPSOID):
            spec = usd.define("base", path, "Sphere")
            sdf.attribute(spec, "radius", double, 1.0)
            scale = size  # a site is no collider: a scaled sphere is fine
        else:
            spec = usd.define("base", path, "Sphere")
            sdf.attribute(spec, "radius", double, float(size[0]))
        sdf.attribute(spec, "purpose", token, "guide", uniform=True)
        sdf.xform(spec, pose_matrix(model.site_pos[site], model.site_quat[site]), scale)
        set_custom(spec, "usdforge:sourceName", name)


def usd_qpos(model: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray:
    """A MuJoCo qpos vector with hinge and slide entries in USD joint coordinates (minus qpos0)."""
    out = np.array(qpos, dtype=np.float64)
    for joint in range(model.njnt):
        if int(model.jnt_type[joint]) in (HINGE, SLIDE):
            address = int(model.jnt_qposadr[joint])
            out[address] -= model.qpos0[address]
    return out


def author_keyframes(usd: MjcfUsd) -> None:
    """Keyframes as MjcKeyframe prims (untyped ones in models with ball joints)."""
    model = usd.loaded.model
    if model.nkey == 0:
        return
    scope = usd.mujoco_scope("Keyframes")
    readable = not any(int(t) == BALL for t in model.jnt_type)
    if not readable:
        usd.warnings.append("keyframes are kept as untyped prims under Keyframes/: MuJoCo 4.0's USD decoder "
                            "cannot read ball joints, and a keyframe it cannot match would stop it loading")
    taken: set[str] = set()
    for key in range(model.nkey):
        name = model.key(key).name or f"key{key}"
        path = scope.AppendChild(unique_name(name, taken))
        prim = usd.define("mujoco", path, "MjcKeyframe" if readable else "")
        set_custom(prim, "usdforge:sourceName", name)
        values = {"mjc:qpos": usd_qpos(model, model.key_qpos[key]), "mjc:qvel": model.key_qvel[key]}
        if model.na:
            values["mjc:act"] = model.key_act[key]
        if model.nu:
            values["mjc:ctrl"] = model.key_ctrl[key]
        if model.nmocap:
            values["mjc:mpos"] = model.key_mpos[key]
            values["mjc:mquat"] = model.key_mquat[key]
        set_all(prim, values)
        set_custom(prim, "mjcf:time", float(model.key_time[key]))


_SENSOR_NAMES = {int(v): k.removeprefix("mjSENS_").lower() for k, v in mujoco.mjtSensor.__members__.items()}
_OBJECT_NAMES = {int(v): k.removeprefix("mjOBJ_").lower() for k, v in mujoco.mjtObj.__members__.items()}


def _object_path(usd: MjcfUsd, objtype: int, objid: int) -> Sdf.Path | None:
    kinds = mujoco.mjtObj
    if objid < 0:
        return None
    if objtype in (int(kinds.mjOBJ_BODY), int(kinds.mjOBJ_XBODY)):
        return usd.body_path(objid)
    if objtype == int(kinds.mjOBJ_JOINT):
        return usd.joint_path(objid)
    if objtype == int(kinds.mjOBJ_SITE):
        return usd.site_paths.get(objid)
    if objtype == int(kinds.mjOBJ_TENDON):
        return usd.tendon_paths.get(objid)
    return None


def author_sensors(usd: MjcfUsd) -> None:
    """Sensors as untyped prims with namespaced data."""
    model = usd.loaded.model
    if model.nsensor == 0:
        return
    scope = usd.mujoco_scope("Sensors")
    taken: set[str] = set()
    for sensor in range(model.nsensor):
        name = model.sensor(sensor).name or f"sensor{sensor}"
        prim = usd.define("mujoco", scope.AppendChild(unique_name(name, taken)))
        set_custom(prim, "usdforge:sourceName", name)
        objtype, objid = int(model.sensor_objtype[sensor]), int(model.sensor_objid[sensor])
        set_custom(prim, "mjcf:type", _SENSOR_NAMES.get(int(model.sensor_type[sensor]), "unknown"))
        set_custom(prim, "mjcf:objectType", _OBJECT_NAMES.get(objtype, "unknown"))
        set_custom(prim, "mjcf:object", id2name(model, objtype, objid) or "" if objid >= 0 else "")
        target = _object_path(usd, objtype, objid)
        if target is not None:
            relationship(prim, "mjcf:target", [target], custom=True)
        set_custom(prim, "mjcf:dim", int(model.sensor_dim[sensor]))
        set_custom(prim, "mjcf:noise", float(model.sensor_noise[sensor]))
        set_custom(prim, "mjcf:cutoff", float(model.sensor_cutoff[sensor]))


_MODES = {int(v): k.removeprefix("mjCAMLIGHT_").lower() for k, v in mujoco.mjtCamLight.__members__.items()}


def author_cameras(usd: MjcfUsd) -> None:
    """Cameras as UsdGeom.Camera prims in their bodies."""
    model = usd.loaded.model
    if not usd.authored("base"):
        return
    base = usd.ctx.stage("base")
    taken: dict = {}
    extent = float(model.stat.extent)
    for camera in range(model.ncam):
        name = model.camera(camera).name or f"camera{camera}"
        path = _link_child(usd, int(model.cam_bodyid[camera]), "cameras", name, taken)
        if path is None:
            continue
        prim = base.DefinePrim(path, "Camera")  # UsdGeom.Camera's, without its module (``schema_attribute``)
        _set_pose(prim, pose_matrix(model.cam_pos[camera], model.cam_quat[camera]))
        fovy = math.radians(float(model.cam_fovy[camera]))
        schema_attribute(prim, "verticalAperture", CAMERA_APERTURE)
        schema_attribute(prim, "horizontalAperture", CAMERA_APERTURE)
        schema_attribute(prim, "focalLength", CAMERA_APERTURE / (2.0 * math.tan(fovy / 2.0)))
        schema_attribute(prim, "clippingRange", Gf.Vec2f(float(model.vis.map.znear * extent),
                                                         float(model.vis.map.zfar * extent)))
        set_custom(prim, "usdforge:sourceName", name)
        set_custom(prim, "mjcf:mode", _MODES.get(int(model.cam_mode[camera]), "fixed"))


def _direction_pose(position: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """A pose at ``position`` whose -Z axis points along ``direction`` (USD lights shine down -Z)."""
    z = -np.asarray(direction, dtype=np.float64)
    z = z / np.linalg.norm(z) if np.linalg.norm(z) > 0 else np.array([0.0, 0.0, 1.0])
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    pose = translation(position)
    pose[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
    return pose


def author_lights(usd: MjcfUsd) -> None:
    """Lights as UsdLux prims in their bodies."""
    model = usd.loaded.model
    if not usd.authored("base"):
        return
    base = usd.ctx.stage("base")
    taken: dict = {}
    kinds = mujoco.mjtLightType
    for light in range(model.nlight):
        name = model.light(light).name or f"light{light}"
        path = _link_child(usd, int(model.light_bodyid[light]), "lights", name, taken)
        if path is None:
            continue
        kind = int(model.light_type[light])
        # UsdLux's prims, API schema and attributes, without its module (``schema_attribute``).
        if kind == int(kinds.mjLIGHT_DIRECTIONAL):
            prim = base.DefinePrim(path, "DistantLight")
        else:
            prim = base.DefinePrim(path, "SphereLight")
            schema_attribute(prim, "inputs:radius", float(model.light_bulbradius[light]))
            if kind == int(kinds.mjLIGHT_SPOT):
                prim.AddAppliedSchema("ShapingAPI")
                schema_attribute(prim, "inputs:shaping:cone:angle", float(model.light_cutoff[light]))
        _set_pose(prim, _direction_pose(model.light_pos[light], model.light_dir[light]))
        schema_attribute(prim, "inputs:color", Gf.Vec3f(*map(float, np.clip(model.light_diffuse[light], 0.0, 1.0))))
        schema_attribute(prim, "inputs:intensity", float(model.light_intensity[light]) or 1.0)
        set_custom(prim, "usdforge:sourceName", name)
        set_custom(prim, "mjcf:castShadow", bool(model.light_castshadow[light]))
        set_custom(prim, "mjcf:active", bool(model.light_active[light]))


def author_records(usd: MjcfUsd) -> None:
    """Keyframes, sensors, cameras and lights (after sites and tendons, which sensors refer to)."""
    author_keyframes(usd)
    author_sensors(usd)
    author_cameras(usd)
    author_lights(usd)
