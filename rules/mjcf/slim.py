"""The slim MJCF intermediate: what the MJCF reading and authoring take from MuJoCo's compiled model,
kept in the build cache so that a rebuild after a cfg edit does not compile the model again. No pxr here.

Compiling is most of an MJCF conversion (franka_emika_panda: ~0.9 s of a ~1.3 s cold conversion; MuJoCo
decodes every mesh and computes hulls and inertia) and depends on the source's files only, plus the one
cfg field that edits the spec before the compile (``link_density``). The slim intermediate holds, after a
successful compile:

- the compiled model's arrays the readers and authors use (``FIELDS``: bodies, joints, geoms, sites,
  actuators, tendons, equalities, keyframes, cameras, lights, materials, meshes' arrays and the
  builtin textures' texels: ~200 arrays), its sizes (``nbody`` …), its name and path tables, the
  ``opt``/``stat``/``vis.map`` values read, and the body poses of ``mj_kinematics`` at ``qpos0``;
- MuJoCo's warnings of that compile (given again when it is reused);
- in an entry of its own (``MESH_ARRAYS``, most of the bytes), the meshes' vertices, faces, normals and
  texture coordinates: read only when an author asks for them (the shapes authored), so an edit that
  restores the shapes reads and hashes ~0.1 MB instead of franka's 14 MB.

The MjSpec the authors read beside it (mesh inertia modes, hull budgets, plugins, the model name) is parsed
again on reuse (a few ms, no meshes read), with the same file checks as a cold conversion.

Keyed by the robot intermediate's source key (``rules.robot.intermediate``: the source and every file it
references by content, where it is, ``allowed_roots``, the code and library versions) and ``link_density``.
Stored only for a model compiled as given (no repair: no element left out, no mesh read by trimesh) without
flexes or skins (whose warnings need MuJoCo's own name lookup).

On reuse the model is a ``SlimModel``: the stored arrays, and for anything not stored a compile of the
same (parsed) spec on first use, so a field the authors read that is not in ``FIELDS`` costs time, never
correctness. The bytes are untrusted input: ``decode`` accepts only known fields with MuJoCo's dtypes and
dimensions, first dimensions equal to their element counts, counts bounded and equal to the spec's, arrays
laid out one after another as ``encode`` writes them (each a view of one private copy: none shares a byte),
and finite values within USD's float range; anything else is a miss (compiled afresh and stored again).
"""

from __future__ import annotations

import hashlib
import json
import math
import types
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, NamedTuple

import mujoco
import numpy as np

#: Bumped when the form changes: an older slim intermediate is then a miss.
FORMAT = 3
_FILE = "slim.bin"
#: The meshes' own arrays (most of the bytes: franka 14 MB of 14.1), kept in an entry of their own and read
#: only when an author asks for them (the shapes are authored): a rebuild that restores the shapes names
#: mesh colliders from the meshes' names alone (``rules.robot.meshes.MeshLibrary.provide_lazy``).
MESH_ARRAYS = ("mesh_vert", "mesh_normal", "mesh_texcoord", "mesh_face", "mesh_facenormal", "mesh_facetexcoord")
_MESH_FILE = "slim-meshes.bin"
#: The largest slim intermediate read (bytes): bounds a forged entry.
MAX_BYTES = 1 << 30
#: The largest array dimension accepted.
MAX_COUNT = 1 << 28
#: Channels of a texture's texels that ``rules.mjcf.geoms.texture_png`` writes as an image (L, RGB, RGBA).
_TEXTURE_CHANNELS = (1, 3, 4)
#: The largest size field accepted (``nbuffer``, the model's memory, included; ``njmax`` may be -1).
MAX_SIZE = 1 << 40

#: Element-count fields → the array-name prefixes counted by them (first dimension). Checked in order:
#: the longer, more specific names first.
_FIRST_DIM = (
    ("nmeshvert", ("mesh_vert",)), ("nmeshnormal", ("mesh_normal",)), ("nmeshtexcoord", ("mesh_texcoord",)),
    ("nmeshface", ("mesh_face", "mesh_facenormal", "mesh_facetexcoord")), ("ntexdata", ("tex_data",)),
    ("nhfielddata", ("hfield_data",)), ("nwrap", ("wrap_",)), ("nq", ("qpos0", "qpos_spring")),
    ("nbody", ("body_",)), ("njnt", ("jnt_",)), ("nv", ("dof_",)), ("ngeom", ("geom_",)), ("nsite", ("site_",)),
    ("ncam", ("cam_",)), ("nlight", ("light_",)), ("nmesh", ("mesh_",)), ("ntex", ("tex_",)),
    ("nmat", ("mat_",)), ("npair", ("pair_",)), ("nexclude", ("exclude_",)), ("neq", ("eq_",)),
    ("ntendon", ("tendon_",)), ("nu", ("actuator_",)), ("nsensor", ("sensor_",)), ("nkey", ("key_",)),
    ("nhfield", ("hfield_",)), ("nnames", ("names",)), ("npaths", ("paths",)),
)
#: Name-address arrays, one per accessor (``model.body(i).name`` …): accessor → (array, count).
_NAMED = {"body": ("name_bodyadr", "nbody"), "joint": ("name_jntadr", "njnt"), "geom": ("name_geomadr", "ngeom"),
          "site": ("name_siteadr", "nsite"), "camera": ("name_camadr", "ncam"), "light": ("name_lightadr", "nlight"),
          "mesh": ("name_meshadr", "nmesh"), "hfield": ("name_hfieldadr", "nhfield"),
          "texture": ("name_texadr", "ntex"), "material": ("name_matadr", "nmat"), "pair": ("name_pairadr", "npair"),
          "equality": ("name_eqadr", "neq"), "tendon": ("name_tendonadr", "ntendon"),
          "actuator": ("name_actuatoradr", "nu"), "sensor": ("name_sensoradr", "nsensor"),
          "key": ("name_keyadr", "nkey")}
#: The compiled model's arrays the MJCF rule reads (found by recording every attribute the readers and
#: authors touch while converting the corpus's and the conformance suite's MJCF models, every cfg flag on).
FIELDS = (
    "actuator_actearly", "actuator_actlimited", "actuator_actnum", "actuator_actrange", "actuator_biasprm",
    "actuator_biastype", "actuator_cranklength", "actuator_ctrllimited", "actuator_ctrlrange", "actuator_dynprm",
    "actuator_dyntype", "actuator_forcelimited", "actuator_forcerange", "actuator_gainprm", "actuator_gaintype",
    "actuator_gear", "actuator_group", "actuator_lengthrange", "actuator_plugin", "actuator_trnid",
    "actuator_trntype", "body_geomadr", "body_geomnum", "body_gravcomp", "body_inertia", "body_ipos", "body_iquat",
    "body_jntadr", "body_jntnum", "body_mass", "body_mocapid", "body_parentid", "body_weldid", "cam_bodyid",
    "cam_fovy", "cam_mode", "cam_pos", "cam_quat", "dof_armature", "dof_damping", "dof_frictionloss", "dof_solimp",
    "dof_solref", "eq_active0", "eq_data", "eq_obj1id", "eq_obj2id", "eq_objtype", "eq_solimp", "eq_solref",
    "eq_type", "exclude_signature", "geom_bodyid", "geom_conaffinity", "geom_condim", "geom_contype", "geom_dataid",
    "geom_friction", "geom_gap", "geom_group", "geom_margin", "geom_matid", "geom_pos", "geom_priority",
    "geom_quat", "geom_rgba", "geom_size", "geom_solimp", "geom_solmix", "geom_solref", "geom_type",
    "jnt_actfrclimited", "jnt_actfrcrange", "jnt_actgravcomp", "jnt_axis", "jnt_bodyid", "jnt_dofadr", "jnt_group",
    "jnt_limited", "jnt_margin", "jnt_pos", "jnt_qposadr", "jnt_range", "jnt_solimp", "jnt_solref",
    "jnt_stiffness", "jnt_type", "key_ctrl", "key_qpos", "key_qvel", "key_time", "light_active", "light_bodyid",
    "light_bulbradius", "light_castshadow", "light_cutoff", "light_diffuse", "light_dir", "light_intensity",
    "light_pos", "light_type", "mat_rgba", "mat_texid", "mesh_face", "mesh_faceadr", "mesh_facenormal",
    "mesh_facenum", "mesh_facetexcoord", "mesh_normal", "mesh_normaladr", "mesh_normalnum", "mesh_pathadr", "mesh_pos", "mesh_quat",
    "mesh_texcoord", "mesh_texcoordadr", "mesh_texcoordnum", "mesh_vert", "mesh_vertadr", "mesh_vertnum",
    "qpos0", "qpos_spring", "sensor_cutoff", "sensor_dim", "sensor_noise", "sensor_objid", "sensor_objtype",
    "sensor_type", "site_bodyid", "site_group", "site_pos", "site_quat", "site_size", "site_type",
    "tendon_actfrclimited", "tendon_actfrcrange", "tendon_adr", "tendon_armature", "tendon_damping",
    "tendon_frictionloss", "tendon_group", "tendon_lengthspring", "tendon_limited", "tendon_margin", "tendon_num",
    "tendon_range", "tendon_rgba", "tendon_solimp_fri", "tendon_solimp_lim", "tendon_solref_fri",
    "tendon_solref_lim", "tendon_stiffness", "tendon_width", "tex_adr", "tex_data", "tex_height", "tex_nchannel",
    "tex_pathadr", "tex_type", "tex_width", "wrap_objid", "wrap_prm", "wrap_type",
    *(address for address, _ in _NAMED.values()),
)
#: MjData arrays read (the rest pose's body frames).
DATA_FIELDS = ("xpos", "xquat")
#: Sub-structures read: ``model.opt`` (every value), ``model.stat`` (every value), ``model.vis.map``.
_STRUCTS = ("opt", "stat", "vis.map")


@cache
def _reference() -> tuple[mujoco.MjModel, mujoco.MjData]:
    """An empty compiled model and its data: MuJoCo's defaults, dtype and trailing dimensions of every
    field (compiled once per process)."""
    model = mujoco.MjModel.from_xml_string("<mujoco/>")
    return model, mujoco.MjData(model)


@cache
def _counts() -> tuple[str, ...]:
    """The integer size fields of MjModel (``nbody``, ``nq`` …)."""
    model = _reference()[0]
    return tuple(name for name in dir(model) if name.startswith("n") and not name.startswith("name")
                 and type(getattr(model, name, None)) is int)


def empty_model() -> mujoco.MjModel:
    """MuJoCo's compiled ``<mujoco/>`` (its defaults), compiled once per process."""
    return _reference()[0]


def _struct(model: Any, path: str) -> Any:
    for part in path.split("."):
        model = getattr(model, part)
    return model


def _struct_values(struct: Any) -> dict[str, Any]:
    """The public number and array values of a MuJoCo struct (``MjOption`` …)."""
    values = {}
    for name in dir(struct):
        if name.startswith("_"):
            continue
        value = getattr(struct, name)
        if isinstance(value, (int, float, np.ndarray)) and not isinstance(value, bool):
            values[name] = value
    return values


@cache
def _row_counts() -> dict[str, str]:
    """Array name → the size field its first dimension equals (``_FIRST_DIM``), for every held array."""
    rows = {address: count for address, count in _NAMED.values()}
    for name in _references():
        field = name.removeprefix("data.")
        if name in rows:
            continue
        if name.startswith("data."):
            rows[name] = "nbody"
            continue
        for count, prefixes in _FIRST_DIM:
            if field in prefixes or any(p[-1] == "_" and field.startswith(p) for p in prefixes):
                rows[name] = count
                break
    return rows


def encode(model: mujoco.MjModel, data: mujoco.MjData, warnings: list[str]) -> bytes:
    """The slim intermediate's bytes but ``MESH_ARRAYS`` (``encode_meshes``): a JSON header (sizes, struct
    scalars, warnings, each array's name, dtype, shape and offset) then the arrays' raw bytes."""
    arrays: dict[str, np.ndarray] = {name: getattr(model, name) for name in FIELDS if name not in MESH_ARRAYS}
    arrays["names"] = np.frombuffer(model.names, dtype=np.uint8)
    arrays["paths"] = np.frombuffer(model.paths, dtype=np.uint8)
    arrays.update({f"data.{name}": getattr(data, name) for name in DATA_FIELDS})
    scalars: dict[str, Any] = {}
    for path in _STRUCTS:
        for name, value in _struct_values(_struct(model, path)).items():
            if isinstance(value, np.ndarray):
                arrays[f"{path}.{name}"] = value
            else:
                scalars[f"{path}.{name}"] = value
    return _encoded(model, arrays, scalars, warnings)


def encode_meshes(model: mujoco.MjModel) -> bytes:
    """The bytes of ``MESH_ARRAYS`` (the same form as ``encode``'s, with the model's sizes)."""
    return _encoded(model, {name: getattr(model, name) for name in MESH_ARRAYS}, {}, [])


def _encoded(model: mujoco.MjModel, arrays: dict[str, np.ndarray], scalars: dict[str, Any], warnings: list[str]) -> bytes:
    header: dict[str, Any] = {"format": FORMAT, "sizes": {name: int(getattr(model, name)) for name in _counts()},
                              "scalars": scalars, "warnings": list(warnings), "arrays": []}
    chunks, offset = [], 0
    for name, value in arrays.items():
        value = np.ascontiguousarray(value)
        header["arrays"].append([name, value.dtype.str, list(value.shape), offset])
        chunks.append(value.tobytes())
        offset += value.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    return len(text).to_bytes(8, "little") + text + b"".join(chunks)


def _reference_value(name: str) -> Any:
    """MuJoCo's value of field ``name`` on the empty reference model (None: not a field we store)."""
    return _references().get(name)


@cache
def _references() -> dict[str, Any]:
    """Every field a slim intermediate holds → its value on the empty reference model."""
    model, data = _reference()
    found: dict[str, Any] = {name: getattr(model, name) for name in FIELDS}
    found.update({f"data.{name}": getattr(data, name) for name in DATA_FIELDS})
    found.update({name: np.zeros(0, dtype=np.uint8) for name in ("names", "paths")})
    for path in _STRUCTS:
        found.update({f"{path}.{name}": value for name, value in _struct_values(_struct(model, path)).items()})
    return found


def _finite(values: np.ndarray) -> bool:
    """Every value finite and within USD's float range (NaN fails both comparisons)."""
    from usdforge.rules.files import MAX_MAGNITUDE

    return not values.size or bool(values.min() >= -MAX_MAGNITUDE and values.max() <= MAX_MAGNITUDE)


class Slim:
    """A decoded slim intermediate: sizes, struct scalars, arrays, MuJoCo's warnings."""

    def __init__(self, sizes: dict[str, int], scalars: dict[str, Any], arrays: dict[str, np.ndarray],
                 warnings: list[str]):
        self.sizes, self.scalars, self.arrays, self.warnings = sizes, scalars, arrays, warnings


def decode(blob: bytes) -> Slim:
    """``encode``'s bytes back; ValueError on anything doubtful (see the module docstring)."""
    return _decode(blob, _model_fields())


@cache
def _model_fields() -> frozenset[str]:
    """The fields a slim intermediate of the model holds (every stored field but the meshes' arrays)."""
    return frozenset(set(_references()) - set(MESH_ARRAYS))


class _ArrayRule(NamedTuple):
    """What a stored array must be, from MuJoCo's value on the reference model: its dtype (and its
    ``str``), number of dimensions, last dimension when fixed (0: any), whole shape when fixed (None: its
    first dimension is the size ``count``), and the size its last dimension equals (``_KEY_COLUMNS``)."""

    dtype: np.dtype
    dtype_str: str
    ndim: int
    last: int
    shape: list[int] | None
    count: str | None
    columns: str | None


@cache
def _array_rules() -> dict[str, _ArrayRule]:
    """Array field → its ``_ArrayRule`` (worked out once per process, not once per array decoded)."""
    rules = {}
    for name, reference in _references().items():
        if isinstance(reference, np.ndarray):
            count = _row_counts().get(name)
            rules[name] = _ArrayRule(reference.dtype, reference.dtype.str, reference.ndim,
                                     int(reference.shape[-1]) if reference.ndim > 1 else 0,
                                     list(reference.shape) if count is None else None, count, _KEY_COLUMNS.get(name))
            rule = rules[name]
            if rule.count is not None and (rule.ndim > 2 or rule.ndim == 2 and not (rule.last or rule.columns)):
                raise AssertionError(f"{name}: a shape _expected_shape cannot tell")  # a new MuJoCo field
    return rules


def _expected_shape(rule: _ArrayRule, sizes: dict[str, int]) -> list[int]:
    """The one shape an array of ``rule`` may have in a model of ``sizes``: its fixed shape, or its first
    dimension the size ``rule.count`` and (two dimensions) its second the size ``rule.columns`` or its fixed
    last one (every held array is one of these; ``_array_rules``). A size not held gives -1, which no
    listed dimension equals."""
    if rule.count is None:
        return rule.shape  # type: ignore[return-value]
    rows = sizes.get(rule.count, -1)
    if rule.ndim == 1:
        return [rows]
    return [rows, sizes.get(rule.columns, -1) if rule.columns is not None else rule.last]


def decode_meshes(blob: bytes, slim: Slim) -> dict[str, np.ndarray]:
    """``encode_meshes``'s bytes back, for the model ``slim`` holds (the same sizes; faces index its
    vertices); ValueError on anything doubtful."""
    meshes = _decode(blob, set(MESH_ARRAYS))
    if meshes.sizes != slim.sizes or meshes.scalars or meshes.warnings:
        raise ValueError("meshes of another model")
    _check_mesh_faces(meshes.arrays, slim.arrays)
    return meshes.arrays


def _decode(blob: bytes, expected: set[str]) -> Slim:
    """Bytes of ``_encoded`` holding exactly the fields ``expected`` back; ValueError on anything doubtful."""
    if len(blob) > MAX_BYTES or len(blob) < 8:
        raise ValueError("size")
    size = int.from_bytes(blob[:8], "little")
    if size > len(blob) - 8:
        raise ValueError("header size")
    try:
        header = json.loads(blob[8:8 + size])
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"header not JSON ({exc})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError("not a slim intermediate of this format")
    sizes, scalars, warnings, listed = (header.get(k) for k in ("sizes", "scalars", "warnings", "arrays"))
    if not (isinstance(sizes, dict) and set(sizes) == set(_counts())
            and all(type(v) is int and -1 <= v <= MAX_SIZE for v in sizes.values())):
        raise ValueError("sizes")
    if not (isinstance(warnings, list) and all(isinstance(w, str) for w in warnings)):
        raise ValueError("warnings")
    if not isinstance(scalars, dict):
        raise ValueError("scalars")
    from usdforge.rules.files import MAX_MAGNITUDE

    for name, value in scalars.items():
        reference = _reference_value(name) if name in expected else None
        # A float's bound compared in Python (as ``_finite`` compares in float64: NaN fails both).
        if reference is None or isinstance(reference, np.ndarray) or type(value) is not type(reference) \
                or (isinstance(value, float) and not -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE) \
                or (type(value) is int and not -(1 << 31) <= value < (1 << 31)):  # MuJoCo's are C ints
            raise ValueError(f"scalar {name}")
    # One private, writable copy of the arrays' bytes; each array a view of its own span of it. The spans
    # must follow one another from 0 as ``_encoded`` lays them out: no two arrays share a byte.
    body = bytearray(memoryview(blob)[8 + size:])
    arrays: dict[str, np.ndarray] = {}
    floats: dict[np.dtype, list[np.ndarray]] = {}
    if not isinstance(listed, list):
        raise ValueError("arrays")
    rules, end = _array_rules(), 0
    for item in listed:
        if type(item) is not list or len(item) != 4:
            raise ValueError("array entry")
        name, dtype, shape, offset = item
        rule = rules.get(name) if type(name) is str and name in expected else None
        if rule is None or name in arrays or dtype != rule.dtype_str:
            raise ValueError(f"array {name}")
        if type(offset) is not int or offset != end:
            raise ValueError(f"array {name} at {offset}, not {end}")
        # Its whole shape follows from its rule and the sizes (``_expected_shape``); the listed one must
        # equal it, and the array is made with ours (ints, whatever numbers the header holds).
        wanted = _expected_shape(rule, sizes)
        if shape != wanted or not 0 <= min(wanted, default=0) <= max(wanted, default=0) <= MAX_COUNT:
            raise ValueError(f"array {name}: shape {shape}, not {wanted}")
        end = offset + math.prod(wanted) * rule.dtype.itemsize  # exact: no int64 wrap-around
        if end > len(body):
            raise ValueError(f"array {name} out of bounds")
        value = np.ndarray(wanted, rule.dtype, body, offset)
        if not value.flags.aligned:  # after the name table's odd length: a copy of its own, aligned
            value = value.copy()
        if value.dtype.kind == "f" and value.size > 4096 and not _finite(value):  # a mesh's: not copied again
            raise ValueError(f"array {name} not finite")
        if value.dtype.kind == "f" and 0 < value.size <= 4096:
            floats.setdefault(value.dtype, []).append(value.ravel())
        arrays[name] = value
    if end != len(body):  # bytes after the last array: not what ``_encoded`` writes
        raise ValueError(f"{len(body) - end} bytes after the arrays")
    # The small float arrays checked at once per type (two reductions, not two per array); the first one
    # not finite named, as before.
    for group in floats.values():
        if not _finite(np.concatenate(group)):
            raise ValueError(f"array {next(n for n, v in arrays.items() if v.dtype.kind == 'f' and not _finite(v))} "
                             "not finite")
    missing = expected - {*arrays, *scalars}
    if missing:
        raise ValueError(f"missing {sorted(missing)[:3]}")
    _check_indices(arrays, sizes)
    _check_typed_ids(arrays, sizes)
    for accessor, (address, count) in _NAMED.items():
        addresses = arrays.get(address)
        if addresses is None:  # the meshes' entry holds no name table
            continue
        if addresses.size and (addresses.min() < 0 or addresses.max() > max(len(arrays["names"]) - 1, 0)):
            raise ValueError(f"{address} outside the name table")
    return Slim(sizes, scalars, arrays, warnings)


#: Keyframe arrays → the size their second dimension equals (the reference model has no keyframe, so its
#: arrays' second dimension, 0, says nothing).
_KEY_COLUMNS = {"key_qpos": "nq", "key_qvel": "nv", "key_ctrl": "nu"}


#: Index arrays → the size of what they index (-1: none), checked on decode: a forged entry must not make
#: an author index past an array (a traceback) or from its end (numpy's negative indices: a wrong value).
_INDICES = {"body_parentid": "nbody", "body_weldid": "nbody", "body_mocapid": "nmocap", "cam_bodyid": "nbody",
            "geom_bodyid": "nbody", "jnt_bodyid": "nbody", "light_bodyid": "nbody", "site_bodyid": "nbody",
            "geom_matid": "nmat", "jnt_dofadr": "nv", "jnt_qposadr": "nq", "mesh_face": "nmeshvert",
            "mat_texid": "ntex", "mesh_pathadr": "npaths", "tex_pathadr": "npaths"}
#: (address, count) array pairs → the size of the table each span lies in.
_SPANS = {("body_geomadr", "body_geomnum"): "ngeom", ("body_jntadr", "body_jntnum"): "njnt",
          ("mesh_vertadr", "mesh_vertnum"): "nmeshvert", ("mesh_faceadr", "mesh_facenum"): "nmeshface",
          ("mesh_normaladr", "mesh_normalnum"): "nmeshnormal",
          ("mesh_texcoordadr", "mesh_texcoordnum"): "nmeshtexcoord", ("tendon_adr", "tendon_num"): "nwrap"}


def _check_indices(arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> None:
    """ValueError unless every index array of ``_INDICES`` and span of ``_SPANS`` lies inside what it
    indexes, and every other integer array named as an id, address or count lies in [-1, the largest
    size]; ``_check_typed_ids`` bounds those whose target depends on a type and that the authors index (a
    geom's mesh, an actuator's target)."""
    bounded = [(name, arrays[name], -1, sizes[size] - 1) for name, size in _INDICES.items()
               if name in arrays and size in sizes]
    name = _first_outside(bounded)
    if name is not None:
        raise ValueError(f"{name} outside {_INDICES[name]} = {sizes[_INDICES[name]]}")
    for (address, count), size in _SPANS.items():
        starts, counts = arrays.get(address), arrays.get(count)
        if starts is None or counts is None or size not in sizes or not counts.size:
            continue
        used = counts > 0
        if starts.shape != counts.shape or counts.min() < 0 or (starts[used] < 0).any() or \
                (starts[used].astype(np.int64) + counts[used] > sizes[size]).any():
            raise ValueError(f"{address}/{count} outside {size} = {sizes[size]}")
    largest = max(sizes.values(), default=0)
    name = _first_outside([(name, values, -1, largest) for name, values in arrays.items()
                           if values.dtype.kind == "i" and name.endswith(("id", "adr", "num"))])
    if name is not None:
        raise ValueError(f"{name} out of range")


def _first_outside(bounds: list[tuple[str, np.ndarray, int, int]]) -> str | None:
    """The name of the first (name, values, lowest, highest) whose values do not all lie in [lowest,
    highest], or None. Integer arrays are bounded together, by one minimum and one maximum per array from
    two reductions over all of them (skydio_x2 holds 75 small index arrays: two NumPy calls each were a
    sixth of its decode); other arrays one by one."""
    checked = [(name, values, lowest, highest) for name, values, lowest, highest in bounds if values.size]
    whole = [item for item in checked if item[1].dtype.kind == "i"]
    for name, values, lowest, highest in checked:
        if values.dtype.kind != "i" and (values.min() < lowest or values.max() > highest):
            return name
    if not whole:
        return None
    flat = [values.ravel() for _, values, _, _ in whole]
    starts = np.cumsum([0, *(values.size for values in flat[:-1])])
    joined = np.concatenate(flat, dtype=np.int64)
    outside = (np.minimum.reduceat(joined, starts) < np.array([item[2] for item in whole], dtype=np.int64)) | \
              (np.maximum.reduceat(joined, starts) > np.array([item[3] for item in whole], dtype=np.int64))
    return whole[int(np.argmax(outside))][0] if outside.any() else None


#: Actuator transmission type → the size of what its first id indexes (joint, joint in parent, slider-crank's
#: site, tendon, site, body: ``mjtTrn``).
_TRANSMISSIONS = {0: "njnt", 1: "njnt", 2: "nsite", 3: "ntendon", 4: "nsite", 5: "nbody"}


def _check_typed_ids(arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> None:
    """ValueError unless the ids whose target depends on a type lie inside that target: a mesh or SDF
    geom's mesh, a height field geom's field, an actuator's joint, tendon, site or body, a sensor's,
    equality's or tendon wrap's object; and unless every texture's texels lie inside the texel table."""
    def outside(values: np.ndarray, size: str, lowest: int = -1) -> bool:
        return bool(values.size) and (values.min() < lowest or values.max() >= sizes.get(size, 0))

    kinds, data = arrays.get("geom_type"), arrays.get("geom_dataid")
    if kinds is not None and data is not None:
        mesh = int(mujoco.mjtGeom.mjGEOM_MESH), int(mujoco.mjtGeom.mjGEOM_SDF)
        if outside(data[np.isin(kinds, mesh)], "nmesh") or \
                outside(data[kinds == int(mujoco.mjtGeom.mjGEOM_HFIELD)], "nhfield", 0):
            raise ValueError("geom_dataid outside its meshes or height fields")
    trn, ids = arrays.get("actuator_trntype"), arrays.get("actuator_trnid")
    if trn is not None and ids is not None and ids.ndim == 2 and ids.shape[1] == 2:
        if not np.isin(trn, list(_TRANSMISSIONS)).all() or outside(ids[:, 1], "nsite") or \
                any(outside(ids[trn == kind, 0], size, 0) for kind, size in _TRANSMISSIONS.items()):
            raise ValueError("actuator_trnid outside what its transmission drives")
    for ids, types in _object_ids(arrays):
        if ids.shape != types.shape:
            raise ValueError("object ids and types of different shapes")
        for kind in np.unique(types):
            accessor = _OBJECTS.get(int(kind))
            if accessor is not None and outside(ids[types == kind], _NAMED[accessor][1]):
                raise ValueError(f"an object id outside its {accessor} table")
    starts = arrays.get("tex_adr")
    if starts is not None and starts.size:
        texels = [arrays[name].astype(np.int64) for name in ("tex_width", "tex_height", "tex_nchannel")]
        # Each dimension bounded first (a channel count is one an image has): their product cannot wrap
        # around in int64, and texture_png reads each texture as an image of that many channels.
        if not np.isin(texels[2], _TEXTURE_CHANNELS).all() or \
                min(values.min() for values in texels) < 0 or max(values.max() for values in texels) > MAX_COUNT:
            raise ValueError("tex_width/tex_height/tex_nchannel outside what a texture holds")
        if starts.min() < 0 or \
                (starts.astype(np.int64) + texels[0] * texels[1] * texels[2] > sizes.get("ntexdata", 0)).any():
            raise ValueError("tex_adr/tex_width/tex_height outside ntexdata")


#: Equality type → the object type of its two ids where the type is not ``eq_objtype`` (which MuJoCo sets
#: for connect and weld constraints only: a body or a site).
_EQUALITY_OBJECTS = {int(mujoco.mjtEq.mjEQ_JOINT): int(mujoco.mjtObj.mjOBJ_JOINT),
                     int(mujoco.mjtEq.mjEQ_TENDON): int(mujoco.mjtObj.mjOBJ_TENDON)}
#: Tendon wrap type → the object type of its id (a pulley has none).
_WRAP_OBJECTS = {int(mujoco.mjtWrap.mjWRAP_JOINT): int(mujoco.mjtObj.mjOBJ_JOINT),
                 int(mujoco.mjtWrap.mjWRAP_SITE): int(mujoco.mjtObj.mjOBJ_SITE),
                 int(mujoco.mjtWrap.mjWRAP_SPHERE): int(mujoco.mjtObj.mjOBJ_GEOM),
                 int(mujoco.mjtWrap.mjWRAP_CYLINDER): int(mujoco.mjtObj.mjOBJ_GEOM)}


def _object_ids(arrays: dict[str, np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(ids, their mjtObj types) of the sensors', equalities' and tendon wraps' objects, which the authors
    index (a joint's path, a reference angle) or name; types not in ``_OBJECTS`` (a clock sensor's) bound
    nothing."""
    pairs = []
    if "sensor_objid" in arrays and "sensor_objtype" in arrays:
        pairs.append((arrays["sensor_objid"], arrays["sensor_objtype"]))
    kinds, objtypes = arrays.get("eq_type"), arrays.get("eq_objtype")
    if kinds is not None and objtypes is not None:
        types = np.array([_EQUALITY_OBJECTS.get(int(k), int(t)) for k, t in zip(kinds, objtypes)], dtype=np.int64)
        types = types if kinds.shape == objtypes.shape else np.empty(0, dtype=np.int64)
        pairs.extend((arrays[name], types) for name in ("eq_obj1id", "eq_obj2id") if name in arrays)
    if "wrap_type" in arrays and "wrap_objid" in arrays:
        types = np.array([_WRAP_OBJECTS.get(int(k), -1) for k in arrays["wrap_type"]], dtype=np.int64)
        pairs.append((arrays["wrap_objid"], types))
    return pairs


def _check_mesh_faces(meshes: dict[str, np.ndarray], arrays: dict[str, np.ndarray]) -> None:
    """ValueError unless each mesh's faces index its own vertices, normals and (where it has any) texture
    coordinates: MuJoCo numbers them per mesh, so a bound by the table's size would let a face reach into
    the next mesh's vertices, or past the mesh's own points."""
    for mesh, (start, count) in enumerate(zip(arrays["mesh_faceadr"], arrays["mesh_facenum"])):
        for name, limit in (("mesh_face", "mesh_vertnum"), ("mesh_facenormal", "mesh_normalnum"),
                            ("mesh_facetexcoord", "mesh_texcoordnum")):
            own, size = meshes[name][start:start + count], int(arrays[limit][mesh])
            if own.size and (size or name != "mesh_facetexcoord") and (own.min() < 0 or own.max() >= size):
                raise ValueError(f"{name} of mesh {mesh} outside its {size} {limit.removeprefix('mesh_')}")


class _Fallback:
    """The model compiled from the spec, made on first use (a field the slim form does not hold)."""

    def __init__(self, compile_model: Callable[[], tuple[mujoco.MjModel, mujoco.MjData]]):
        self._compile = compile_model
        self._done: tuple[mujoco.MjModel, mujoco.MjData] | None = None

    def __call__(self) -> tuple[mujoco.MjModel, mujoco.MjData]:
        if self._done is None:
            self._done = self._compile()
            compiles.append(1)
        return self._done


#: One item per compile a ``SlimModel`` fell back to (tests and the bench read its length).
compiles: list[int] = []


class _Element:
    """``model.body(i)``: the element's name; anything else from the compiled model."""

    def __init__(self, name: str, accessor: str, index: int, fallback: _Fallback):
        self.name, self.id = name, index
        self._accessor, self._fallback = accessor, fallback

    def __getattr__(self, attribute: str) -> Any:
        return getattr(getattr(self._fallback()[0], self._accessor)(self.id), attribute)


class _Struct(SimpleNamespace):
    """``model.opt`` …: the stored values; anything else from the compiled model."""

    def __init__(self, values: dict[str, Any], path: str, fallback: _Fallback):
        super().__init__(**values)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_fallback", fallback)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(_struct(self._fallback()[0], self._path), attribute)


class SlimModel:
    """Duck-typed ``mujoco.MjModel`` over a slim intermediate (the readers' attributes, name accessors,
    ``opt``/``stat``/``vis.map``); any other attribute comes from the compiled model (compiled on first use)."""

    def __init__(self, slim: Slim, fallback: _Fallback,
                 meshes: Callable[[], dict[str, np.ndarray] | None] | None = None):
        self._slim, self._fallback = slim, fallback
        #: ``MESH_ARRAYS``, read on first use (None: not yet; empty: not held, compiled instead).
        self._meshes, self._mesh_arrays = meshes, None
        structs: dict[str, dict[str, Any]] = {path: {} for path in _STRUCTS}
        for name, value in [*slim.scalars.items(), *slim.arrays.items()]:
            for path in _STRUCTS:
                if name.startswith(path + "."):
                    structs[path][name[len(path) + 1:]] = value
        self.opt = _Struct(structs["opt"], "opt", fallback)
        self.stat = _Struct(structs["stat"], "stat", fallback)
        self.vis = _Struct({"map": _Struct(structs["vis.map"], "vis.map", fallback)}, "vis", fallback)
        self.names, self.paths = slim.arrays["names"].tobytes(), slim.arrays["paths"].tobytes()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        slim = self._slim
        if name in slim.arrays:
            return slim.arrays[name]
        if name in MESH_ARRAYS:
            if self._mesh_arrays is None:
                self._mesh_arrays = (self._meshes() if self._meshes is not None else None) or {}
            if name in self._mesh_arrays:
                return self._mesh_arrays[name]
        if name in slim.sizes:
            return slim.sizes[name]
        if name in _NAMED:
            return lambda index: self._element(name, int(index))
        return getattr(self._fallback()[0], name)

    def _element(self, accessor: str, index: int) -> _Element:
        address, count = _NAMED[accessor]
        if not 0 <= index < self._slim.sizes[count]:
            raise IndexError(f"{accessor} {index} out of range")
        start = int(self._slim.arrays[address][index])
        end = self.names.find(b"\0", start)
        return _Element(self.names[start:end if end >= 0 else None].decode(errors="replace"), accessor, index,
                        self._fallback)


class SlimData:
    """Duck-typed ``mujoco.MjData`` at the rest pose after ``mj_kinematics``: ``xpos``, ``xquat``."""

    def __init__(self, slim: Slim, fallback: _Fallback):
        self.xpos, self.xquat = slim.arrays["data.xpos"], slim.arrays["data.xquat"]
        self._fallback = fallback

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._fallback()[1], name)


def slim_key(source_key: str, link_density: float) -> str:
    """The cache key of the slim intermediate of the source ``source_key`` names, compiled at
    ``link_density`` (the one cfg field that edits the spec before the compile)."""
    return hashlib.sha256(f"mjcf-slim:{FORMAT}:{source_key}:{float(link_density)!r}".encode()).hexdigest()


def _meshes_key(key: str) -> str:
    """The key of the meshes' arrays of the slim intermediate under ``key``."""
    return hashlib.sha256(f"mjcf-slim-meshes:{key}".encode()).hexdigest()


def matches_spec(spec: mujoco.MjSpec, slim: Slim) -> bool:
    """The spec has as many elements of every kind as the stored model (the authors index the spec's
    lists by model ids)."""
    from usdforge.rules.mjcf.compiled import _COUNTS

    return all(len(getattr(spec, attribute)) == slim.sizes.get(size, -1) for attribute, size in _COUNTS)


def storable(model: mujoco.MjModel, repaired: bool) -> bool:
    """Whether reusing this compiled model through its slim form is sound (see the module docstring)."""
    return not repaired and not model.nflex and not model.nskin


def _compile(path: Path, spec: mujoco.MjSpec) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """The model and rest-pose data compiled from (a copy of) ``spec``: a slim model's fallback."""
    from usdforge.rules.mjcf.load import compile_repaired, mujoco_warnings

    loaded = compile_repaired(path, spec.copy())
    mujoco_warnings()  # given already, from the slim intermediate
    return loaded.model, loaded.data


def slim_or_compiled(asset: Path, allowed_roots: tuple[str, ...], link_density: float,
                     alongside: Callable[[], object] | None = None) -> Any:
    """The ``LoadedModel`` of the MJCF file ``asset`` at ``link_density``: over its slim intermediate when
    the enclosing ``intermediate_scope``'s cache holds a sound one (no compile), else compiled
    (``load_mjcf``, ``apply_link_density``), its slim intermediate stored when reusing it is sound.
    alongside: work for a thread while MuJoCo compiles, if it compiles (``compile_repaired``)."""
    from usdforge.rules.mjcf.convert import apply_link_density, set_link_density
    from usdforge.rules.files import model_roots
    from usdforge.rules.mjcf.load import LoadedModel, checked_spec, files_inside, load_mjcf
    from usdforge.rules.robot.intermediate import active_source
    from usdforge.rules.robot.meshes import write_in_background

    scope = active_source()
    if scope is None:
        return apply_link_density(load_mjcf(asset, allowed_roots, alongside), link_density)
    store, source = scope
    key = slim_key(source, link_density)
    artifact = store.get_entry(key)
    slim = None
    if artifact is not None and _FILE in artifact.files:
        try:
            slim = decode(artifact.files[_FILE])
        except ValueError:
            slim = None  # doubtful: compiled again below, and a sound one stored in its place
    if slim is not None:
        path, spec, textures, visual = checked_spec(asset, allowed_roots)
        set_link_density(spec, link_density)
        held = types.SimpleNamespace(paths=slim.arrays["paths"].tobytes(), mesh_pathadr=slim.arrays["mesh_pathadr"],
                                     tex_pathadr=slim.arrays["tex_pathadr"])
        if not matches_spec(spec, slim) or not files_inside(held, model_roots(path, allowed_roots)):
            slim = None  # another model's, or naming files the checks never saw
    store.record("mjcf-slim", hit=slim is not None)
    if slim is not None:
        fallback = _Fallback(lambda: _compile(path, spec))

        def meshes(held: Slim = slim) -> dict[str, np.ndarray] | None:
            artifact = store.get_entry(_meshes_key(key))
            store.record("mjcf-meshes", hit=artifact is not None)
            try:
                return decode_meshes(artifact.files[_MESH_FILE], held) if artifact is not None else None
            except (KeyError, ValueError):
                return None  # doubtful: the arrays are compiled (the fallback)

        return LoadedModel(path, spec, SlimModel(slim, fallback, meshes), SlimData(slim, fallback),
                           warnings=list(slim.warnings), texture_files=textures, visual_meshes=visual)
    loaded = apply_link_density(load_mjcf(asset, allowed_roots, alongside), link_density)
    repaired = bool(loaded.skipped or loaded.trimesh_meshes or loaded.unknown_mass)
    if storable(loaded.model, repaired):
        # Encoded, hashed and written beside the rest of the conversion (the model is not changed after).
        model, data, warnings = loaded.model, loaded.data, list(loaded.warnings)
        def put() -> None:  # the meshes first: an entry found has its meshes' entry beside it
            store.put_entry(_meshes_key(key), {_MESH_FILE: encode_meshes(model)}, kind="mjcf-meshes")
            store.put_entry(key, {_FILE: encode(model, data, warnings)}, kind="mjcf-slim")

        write_in_background(put)
    return loaded


#: MuJoCo object type → name accessor, for ``id2name``.
_OBJECTS = {int(mujoco.mjtObj.mjOBJ_BODY): "body", int(mujoco.mjtObj.mjOBJ_XBODY): "body",
            int(mujoco.mjtObj.mjOBJ_JOINT): "joint", int(mujoco.mjtObj.mjOBJ_GEOM): "geom",
            int(mujoco.mjtObj.mjOBJ_SITE): "site", int(mujoco.mjtObj.mjOBJ_CAMERA): "camera",
            int(mujoco.mjtObj.mjOBJ_LIGHT): "light", int(mujoco.mjtObj.mjOBJ_MESH): "mesh",
            int(mujoco.mjtObj.mjOBJ_HFIELD): "hfield", int(mujoco.mjtObj.mjOBJ_TEXTURE): "texture",
            int(mujoco.mjtObj.mjOBJ_MATERIAL): "material", int(mujoco.mjtObj.mjOBJ_PAIR): "pair",
            int(mujoco.mjtObj.mjOBJ_EQUALITY): "equality", int(mujoco.mjtObj.mjOBJ_TENDON): "tendon",
            int(mujoco.mjtObj.mjOBJ_ACTUATOR): "actuator", int(mujoco.mjtObj.mjOBJ_SENSOR): "sensor",
            int(mujoco.mjtObj.mjOBJ_KEY): "key"}


def id2name(model: Any, objtype: int, index: int) -> str | None:
    """``mujoco.mj_id2name`` for a compiled model or a ``SlimModel`` (None: unnamed or no such element)."""
    if not isinstance(model, SlimModel):
        return mujoco.mj_id2name(model, objtype, index)
    accessor = _OBJECTS.get(int(objtype))
    if accessor is None:
        return mujoco.mj_id2name(model._fallback()[0], objtype, index)
    if not 0 <= index < model._slim.sizes[_NAMED[accessor][1]]:
        return None
    return model._element(accessor, index).name or None
