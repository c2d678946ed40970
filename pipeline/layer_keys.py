"""Keys of a robot conversion's parts in the build cache: the intermediate (the robot as read, keyed by
its source only) and each output unit (keyed by the source, the unit's declared cfg fields and the code).
See ``rules.robot.intermediate``, ``rules.robot.layer_reuse`` and ``rules.robot.layer_fields``. No pxr.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import attrs

from usdforge.pipeline.code_version import code_stamp, library_versions
from usdforge.rules.outputs import ROBOT_LAYER_FILES, articulation_cfg_file_name, instanceable_meshes_path
from usdforge.rules.robot.layer_fields import LAYER_FIELDS, PROJECTIONS, READ_FIELDS
from usdforge.rules.robot.layer_reuse import FACTS_UNIT, MESH_UNIT, PATCH_BASES, SELF_COLLISION_BASES
from usdforge.schemas import __version__

#: Units reused through their own key. The geometry layer also has a finer key of its own (the hash of
#: every prototype it holds: ``rules.robot.geometry``), used when the shapes are authored anyway; its unit
#: key lets a rebuild that reuses instances and materials skip the shapes altogether. The interface layer
#: holds the provenance record (the digest of the whole cfg) and is authored every time.
KEYED_UNITS = ("base", "instances", "geometry", "materials", "physics", "physx", "newton", "mujoco",
               "articulation_cfg")


#: The JSON encoder of key texts (``json.dumps`` with these options makes an encoder per call).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)


def _canonical(payload: Any) -> str:
    """``payload`` as the JSON text keys are hashed from (sorted keys, no spaces)."""
    return _ENCODER.encode(payload)


def _digest(payload: Any) -> str:
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()


def _plain(value: Any) -> Any:
    """A cfg field's value as plain data (a nested cfg with its class name: two gains classes)."""
    from usdforge.schemas.serialization import get_converter

    if attrs.has(type(value)):
        return {"type": type(value).__name__, **get_converter().unstructure(value)}
    return get_converter().unstructure(value)


def source_key(kind: str, cfg: Any, asset_sha: str, references: dict[str, str],
               location: dict[str, Any] | None) -> str:
    """What the robot as read depends on: the source (where it is, absolute: the model records absolute
    mesh and texture paths) and its content, every referenced file's content, the cfg fields that decide
    the reading (``READ_FIELDS``), the code and the libraries."""
    fields = {name: _plain(getattr(cfg, name)) for name in READ_FIELDS[kind]}
    return _digest({"usdforge": __version__, "code": code_stamp(), "libraries": library_versions(kind), "kind": kind,
                    "asset": [os.path.abspath(cfg.asset_path), asset_sha], "references": references,
                    "location": location or {}, "read": fields})


def reading_key(kind: str, cfg: Any) -> str:
    """What decides which files a robot source references, besides the contents of the source and of those
    files: the kind, where the source is and the cfg fields that decide the reading (``READ_FIELDS``:
    packages, xacro arguments, roots), absolute, and the code; "" for a kind without read fields (a mesh).
    The lazy key records it (``pipeline.lazy.LazyKey.reading``)."""
    if kind not in READ_FIELDS:
        return ""
    fields = {name: _plain(getattr(cfg, name)) for name in READ_FIELDS[kind]}
    return _digest({"usdforge": __version__, "code": code_stamp(), "kind": kind,
                    "asset": os.path.abspath(cfg.asset_path), "read": fields})


def unit_files(usd_file_name: str) -> dict[str, str]:
    """Unit → its file, relative to the output folder (a robot's layers, its Isaac Lab cfg, the mesh rule's
    meshes layer)."""
    return {**ROBOT_LAYER_FILES, **{unit: ROBOT_LAYER_FILES[role] for role, unit in PATCH_BASES.items()},
            **{unit: ROBOT_LAYER_FILES[role] for bases in SELF_COLLISION_BASES.values()
               for role, unit in bases.items()},
            "articulation_cfg": articulation_cfg_file_name(usd_file_name),
            MESH_UNIT: instanceable_meshes_path(usd_file_name)}


#: The mesh rule's unit (``MESH_UNIT``), reused on its own: the meshes layer of a ``make_instanceable`` output
#: (``Props/<stem>_meshes.usd``) with the textures it names. It holds the file's parts as read and their
#: collider schemas; the pose (translation, rotation, scale) and the mass are authored on the main layer,
#: so a library of one mesh at many scales, poses or masses reads and authors that mesh once. These are
#: the cfg fields the meshes layer reads (``rules.mesh.convert.author_parts``).
MESH_UNIT_FIELDS = ("collision_props", "mesh_collision_props")


def mesh_unit_keys(cfg: Any, asset_sha: str, references: dict[str, str]) -> dict[str, str]:
    """{``MESH_UNIT``: key} of a mesh conversion with ``make_instanceable`` (else empty): the source's file
    name (it names the prims and textures) and content, every referenced file's content (MTL, images,
    glTF buffers), the fields of ``MESH_UNIT_FIELDS``, the code and the libraries. No location and no
    output file name: the layer names neither (its textures are ``../textures/<source stem>_<i>.png``), so
    it is restored under another output's name (``rules.robot.layer_reuse.reused``)."""
    if not cfg.make_instanceable:
        return {}
    fields = {name: _plain(getattr(cfg, name)) for name in MESH_UNIT_FIELDS}
    return {MESH_UNIT: _digest({"unit": MESH_UNIT, "usdforge": __version__, "code": code_stamp(),
                                "libraries": library_versions("mesh"), "kind": "mesh",
                                "asset": [os.path.basename(cfg.asset_path), asset_sha], "references": references,
                                "fields": fields})}


#: Cfg fields a rebuild patches into the cached physics (and MJCF's mujoco) layer instead of re-authoring it,
#: by kind (``rules.robot.drive_patch``); ``collision_type`` is patched too, within its class of
#: ``layer_fields.PROJECTIONS`` (the ``physics:approximation`` token). Those layers are also kept under a key
#: without the drive fields and with the projected ``collision_type`` (the units of
#: ``rules.robot.layer_reuse.PATCH_BASES``).
DRIVE_FIELDS = {"urdf": ("joint_drive",),
                "mjcf": ("override_gain_type", "override_bias_type", "override_gain_prm", "override_bias_prm")}


def unit_keys(kind: str, cfg: Any, source: str) -> dict[str, str]:
    """{unit: key} of the units of a layered robot output that are reused on their own (``KEYED_UNITS``);
    empty for a mesh or a single-file output. A unit's key holds exactly the fields it declares
    (``LAYER_FIELDS``), each as its ``FieldView`` gives it (``PROJECTIONS``): it can hold no field the unit
    does not declare, and holds every one it does.

    Each key is the SHA-256 of ``{"fields": {...}, "file": …, "source": …, "unit": …}`` as ``_digest`` writes it;
    the text of each field's value is made once for all the units that read it (a conversion and a restore
    compute the keys of a dozen units, most of whose fields are shared)."""
    if kind not in LAYER_FIELDS or not cfg.run_asset_transformer:
        return {}
    texts: dict[tuple[str, Any], str] = {}  # (field, projection or None) → its value's canonical JSON

    def text(name: str, projection: Any) -> str:
        found = texts.get((name, projection))
        if found is None:
            value = getattr(cfg, name)
            found = texts[(name, projection)] = _canonical(_plain(value if projection is None else projection(value)))
        return found

    tail = f',"file":{_canonical(cfg.usd_file_name)},"source":{_canonical(source)},"unit":'

    def digest(unit: str, fields: dict[str, str]) -> str:
        """``_digest({"unit": unit, "source": source, "fields": …, "file": …})`` of fields given as text."""
        body = ",".join(f'"{name}":{value}' for name, value in sorted(fields.items()))  # names: identifiers
        return hashlib.sha256(f'{{"fields":{{{body}}}{tail}{_canonical(unit)}}}'.encode()).hexdigest()

    keys = {}
    for unit in KEYED_UNITS:
        if unit == "articulation_cfg" and not cfg.articulation_cfg:
            continue
        projections = PROJECTIONS.get(unit, {})
        fields = {name: text(name, projections.get(name)) for name in LAYER_FIELDS[kind][unit]}
        keys[unit] = digest(unit, fields)
        if unit == "articulation_cfg":  # its facts without the drives (rules.robot.isaaclab_cfg.FACTS_UNIT)
            keys[FACTS_UNIT] = digest(FACTS_UNIT, {name: value for name, value in fields.items()
                                                   if name not in DRIVE_FIELDS[kind]})
        if unit in PATCH_BASES:
            base = {name: value for name, value in fields.items() if name not in DRIVE_FIELDS[kind]}
            if "collision_type" in base:  # only whether it decomposes: the token itself is patched
                base["collision_type"] = text("collision_type", PROJECTIONS["instances"]["collision_type"])
            if base != fields:
                keys[PATCH_BASES[unit]] = digest(PATCH_BASES[unit], base)
        base_unit = SELF_COLLISION_BASES.get(kind, {}).get(unit)
        if base_unit is not None:  # the layer without self_collision (rules.robot/mjcf.self_collision patch it)
            keys[base_unit] = digest(base_unit, {name: value for name, value in fields.items()
                                                 if name != "self_collision"})
    return keys
