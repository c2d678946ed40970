"""Non-finite numbers in an MJCF model: ``nan``/``inf``, or values too large for USD's 32-bit floats
(``1e300`` is finite as a double, ``inf`` once written as a float), found in the compiled model and
reported with the element (and its line) and attribute they came from. No pxr here."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
from lxml import etree

from usdforge.rules.errors import ConversionError
from usdforge.rules.files import MAX_MAGNITUDE

#: Compiled-model field prefix → (count attribute, MuJoCo object type, MJCF tag); checked in this order,
#: so a source attribute (body pos) is named before what MuJoCo derives from it (qpos0).
_KINDS = (
    ("body", "nbody", mujoco.mjtObj.mjOBJ_BODY, "body"),
    ("jnt", "njnt", mujoco.mjtObj.mjOBJ_JOINT, "joint"),
    ("geom", "ngeom", mujoco.mjtObj.mjOBJ_GEOM, "geom"),
    ("site", "nsite", mujoco.mjtObj.mjOBJ_SITE, "site"),
    ("actuator", "nu", mujoco.mjtObj.mjOBJ_ACTUATOR, None),
    ("tendon", "ntendon", mujoco.mjtObj.mjOBJ_TENDON, None),
    ("eq", "neq", mujoco.mjtObj.mjOBJ_EQUALITY, None),
    ("mesh", "nmesh", mujoco.mjtObj.mjOBJ_MESH, "mesh"),
    ("cam", "ncam", mujoco.mjtObj.mjOBJ_CAMERA, "camera"),
    ("light", "nlight", mujoco.mjtObj.mjOBJ_LIGHT, "light"),
    ("mat", "nmat", mujoco.mjtObj.mjOBJ_MATERIAL, "material"),
    ("pair", "npair", mujoco.mjtObj.mjOBJ_PAIR, "pair"),
    ("sensor", "nsensor", mujoco.mjtObj.mjOBJ_SENSOR, None),
    ("key", "nkey", mujoco.mjtObj.mjOBJ_KEY, "key"),
    ("dof", "nv", mujoco.mjtObj.mjOBJ_DOF, None),
)
#: Fields MuJoCo reads from the source (``<prefix>_<field>``), checked before those it derives from them
#: (``body_invweight0``, ``qpos0`` …) so the message names the attribute to fix.
_SOURCE_FIELDS = ("pos", "quat", "ipos", "iquat", "mass", "inertia", "size", "range", "axis", "margin", "gap",
                  "friction", "damping", "stiffness", "armature", "frictionloss", "springref", "ref", "gear",
                  "ctrlrange", "forcerange", "gainprm", "biasprm", "solref", "solimp", "rgba", "data", "scale")
#: Model-wide arrays (not per element), after every element's own.
_GLOBAL = ("qpos0", "qpos_spring", "mesh_vert", "mesh_normal", "hfield_data")


def _bad(values: np.ndarray) -> np.ndarray:
    """Boolean mask of the entries that are not finite or exceed ``MAX_MAGNITUDE``."""
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(values) | (np.abs(values) > MAX_MAGNITUDE)


def _line(path: Path, tag: str | None, name: str) -> int | None:
    """The line of ``<tag name="name">`` in the main model file, when it is there."""
    if tag is None or not name:
        return None
    from usdforge.rules.mjcf.references import LENIENT_XML

    try:
        root = etree.parse(str(path), LENIENT_XML).getroot()
    except (etree.XMLSyntaxError, OSError):
        return None
    found = root.find(f".//{tag}[@name='{name}']") if "'" not in name else None
    return found.sourceline if found is not None else None


def check_finite_model(path: Path, model: mujoco.MjModel) -> None:
    """ConversionError naming the element, its line and the attribute of the first value in the compiled
    model that is not finite or is larger than ``MAX_MAGNITUDE`` in magnitude."""
    fields = sorted(field for field in dir(model) if not field.startswith("_"))
    for source_only in (True, False):
        _check_elements(path, model, fields, source_only)
    _check_globals(path, model)


def _check_elements(path: Path, model: mujoco.MjModel, fields: list[str], source_only: bool) -> None:
    for prefix, count_name, obj, tag in _KINDS:
        count = getattr(model, count_name)
        if not count:
            continue
        first: tuple[int, str, float] | None = None  # (element index, field, value) of the first bad element
        for field in fields:
            if not field.startswith(prefix + "_") or (source_only and field[len(prefix) + 1:] not in _SOURCE_FIELDS):
                continue
            values = getattr(model, field)
            if not isinstance(values, np.ndarray) or values.dtype.kind != "f" or values.shape[:1] != (count,):
                continue
            rows = values.reshape(count, -1)
            bad = _bad(rows)
            if not bad.any():
                continue
            index = int(np.argmax(bad.any(axis=1)))
            if first is None or index < first[0]:
                first = (index, field, float(rows[index][bad[index]][0]))
        if first is not None:
            index, field, value = first
            name = mujoco.mj_id2name(model, obj, index) or ""
            label = tag or prefix
            element = f'<{label} name="{name}">' if name else f"{label} #{index}"
            raise ConversionError(path, f"{field.removeprefix(prefix + '_')}: {value:g} is not a finite number "
                                        f"of at most {MAX_MAGNITUDE:g} in magnitude", element, _line(path, tag, name))


def _check_globals(path: Path, model: mujoco.MjModel) -> None:
    for field in _GLOBAL:
        values = getattr(model, field, None)
        if isinstance(values, np.ndarray) and values.size and _bad(values).any():
            raise ConversionError(path, f"the compiled model's {field} holds a value that is not a finite number "
                                        f"of at most {MAX_MAGNITUDE:g} in magnitude")
    for field in ("gravity", "wind", "magnetic", "timestep", "density", "viscosity"):
        values = np.atleast_1d(np.asarray(getattr(model.opt, field, 0.0), dtype=float))
        if _bad(values).any():
            raise ConversionError(path, f"{field}: {values.tolist()} is not a finite number of at most "
                                        f"{MAX_MAGNITUDE:g} in magnitude", "<option>", _line(path, "option", ""))
