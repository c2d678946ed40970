"""Names of the files a conversion writes, known before converting (doit needs its targets up front).

No pxr here: the doit parent process imports this.
"""

from __future__ import annotations

from pathlib import Path

#: Folder (relative to usd_dir) of the layers a main USD file references.
PROPS_DIR = "Props"


def resolve_usd_file_name(asset_path: str, usd_file_name: str | None) -> str:
    """Isaac Lab's rule: the asset's stem + ``.usd`` when None (``ur.urdf.xacro`` → ``ur.usd``); ``.usd``
    appended unless ``.usd``/``.usda``."""
    if usd_file_name is None:
        stem = Path(asset_path).stem
        if str(asset_path).lower().endswith(".xacro") and stem.lower().endswith(".urdf"):
            stem = stem[:-len(".urdf")]
        return stem + ".usd"
    if usd_file_name.endswith((".usd", ".usda")):
        return usd_file_name
    return usd_file_name + ".usd"


def usd_stem(usd_file_name: str) -> str:
    """``chair.usda`` → ``chair``."""
    return usd_file_name.rsplit(".", 1)[0]


def instanceable_meshes_path(usd_file_name: str) -> str:
    """The mesh rule's meshes layer, relative to usd_dir: ``Props/<stem>_meshes.usd`` (binary geometry)."""
    return f"{PROPS_DIR}/{usd_stem(usd_file_name)}_meshes.usd"


def meshes_layer(kind: str, usd_file_name: str, make_instanceable: bool, run_asset_transformer: bool) -> str | None:
    """The file (relative to usd_dir) that holds a conversion's instanceable meshes, or None when the
    meshes live in the main file: the mesh rule's ``Props/<stem>_meshes.usd`` with ``make_instanceable``;
    a layered robot's geometry payload (``payloads/geometry.usd``)."""
    if kind == "mesh":
        return instanceable_meshes_path(usd_file_name) if make_instanceable else None
    return ROBOT_LAYER_FILES["geometry"] if run_asset_transformer else None


def articulation_cfg_file_name(usd_file_name: str) -> str:
    """A robot's Isaac Lab cfg written beside it (``rules.robot.isaaclab_cfg``): ``<stem>_cfg.py``."""
    return f"{usd_stem(usd_file_name)}_cfg.py"


def key_file_name(usd_file_name: str) -> str:
    """The lazy key (hashes + cfg, TOML) written beside the output: ``<stem>.usdforge.toml``."""
    return f"{usd_stem(usd_file_name)}.usdforge.toml"


#: Layers of a robot's layered output (``run_asset_transformer``) by role, relative to usd_dir, besides
#: the interface layer ``<stem>.usda``; named as Isaac Lab's asset transformer names them (case matters),
#: plus Newton's layer. base: bodies and frames; instances: the visual and collision shapes; geometry: mesh
#: prototypes (binary); materials: looks; physics: UsdPhysics (bodies, mass, colliders, joints, drives,
#: articulation); physx / newton / mujoco: engine attributes.
ROBOT_LAYER_FILES = {
    "base": "payloads/base.usda",
    "instances": "payloads/instances.usda",
    "geometry": "payloads/geometry.usd",
    "materials": "payloads/materials.usda",
    "physics": "payloads/Physics/physics.usda",
    "physx": "payloads/Physics/physX.usda",
    "newton": "payloads/Physics/newton.usda",
    "mujoco": "payloads/Physics/mujoco.usda",
}
ROBOT_PAYLOAD_LAYERS = tuple(ROBOT_LAYER_FILES.values())


def planned_outputs(kind: str, usd_file_name: str, make_instanceable: bool,
                    run_asset_transformer: bool = False, articulation_cfg: bool = False) -> list[str]:
    """Every file (relative to usd_dir) a conversion of ``kind`` writes, the lazy key included
    (``articulation_cfg``: a robot's Isaac Lab ``<stem>_cfg.py``).

    Textures copied next to the output are written too but are not known before converting.
    """
    files = [usd_file_name, key_file_name(usd_file_name)]
    if kind == "mesh":
        if make_instanceable:
            files.append(instanceable_meshes_path(usd_file_name))
    elif run_asset_transformer:
        files.extend(ROBOT_PAYLOAD_LAYERS)
    if kind != "mesh" and articulation_cfg:
        files.append(articulation_cfg_file_name(usd_file_name))
    return files
