"""Reading an MJCF model with MuJoCo itself: ``MjSpec`` parses it (defaults classes, include, frames,
attach, replicate, compiler settings) and compiling it gives what MuJoCo infers (body mass and inertia
from geoms, fitted geoms, mesh frames, limits from autolimits, builtin textures).

A model that MjSpec parses but MuJoCo cannot compile is repaired element by element, each repair a
warning that quotes MuJoCo's message: a mesh MuJoCo's decoder rejects (an ASCII STL) is read with trimesh
and handed to MuJoCo as vertices and faces; any other element MuJoCo names in its error (an actuator with
a missing target, a degenerate geom …) is left out. Bodies that lose a mass-bearing geom this way have no
trustworthy mass, unless their inertial is explicit: ``LoadedModel.unknown_mass`` lists them.
"""

from __future__ import annotations

import contextlib
import re
import threading
import warnings
from pathlib import Path
from typing import Any, Callable

import attrs
import mujoco
import numpy as np

from usdforge.rules.errors import ConversionError

#: Element kinds a compile error can name, as they appear in MuJoCo's messages → MjSpec list attribute.
_ELEMENT_LISTS = {
    "actuator": "actuators", "geom": "geoms", "mesh": "meshes", "sensor": "sensors", "tendon": "tendons",
    "equality": "equalities", "site": "sites", "texture": "textures", "material": "materials",
    "hfield": "hfields", "skin": "skins", "camera": "cameras", "light": "lights", "pair": "pairs",
    "exclude": "excludes", "key": "keys", "flex": "flexes",
}
#: Words in a message that tell which kind of element failed (checked in this order).
_KIND_HINTS = (
    ("mesh", re.compile(r"\b(stl|obj|msh)_?decoder\b|\bmesh\b|STL file|OBJ file", re.IGNORECASE)),
    ("actuator", re.compile(r"\bactuator\b|\bmuscle\b|\btransmission\b")), ("sensor", re.compile(r"\bsensor\b")),
    ("tendon", re.compile(r"\btendon\b")), ("equality", re.compile(r"\bequality\b|\bconnect\b|\bweld\b")),
    ("geom", re.compile(r"\bgeom\b")), ("site", re.compile(r"\bsite\b")), ("hfield", re.compile(r"\bhfield\b")),
    ("texture", re.compile(r"\btexture\b")), ("material", re.compile(r"\bmaterial\b")),
    ("skin", re.compile(r"\bskin\b")), ("camera", re.compile(r"\bcamera\b")), ("light", re.compile(r"\blight\b")),
    ("pair", re.compile(r"\bpair\b")), ("exclude", re.compile(r"\bexclude\b")), ("key", re.compile(r"\bkey(frame)?\b")),
    ("flex", re.compile(r"\bflex\b")),
)
_ELEMENT = re.compile(r"Element name '(?P<name>[^']*)', id (?P<id>\d+)(?:, line (?P<line>\d+))?")
_LINE = re.compile(r"line (?:number=)?(?P<line>\d+)", re.IGNORECASE)

#: MuJoCo's warnings since the last ``mujoco_warnings()``: collected here instead of MuJoCo's default,
#: which prints them and appends them to MUJOCO_LOG.TXT in the current folder.
_MUJOCO_WARNINGS: list[str] = []
mujoco.set_mju_user_warning(_MUJOCO_WARNINGS.append)


def mujoco_warnings() -> list[str]:
    """MuJoCo's warnings since the last call (each once, in order), and forget them."""
    found = list(dict.fromkeys(_MUJOCO_WARNINGS))
    _MUJOCO_WARNINGS.clear()
    return found


#: The most repairs tried before giving up (each removes or rewrites one element).
MAX_REPAIRS = 1000


@attrs.define
class LoadedModel:
    """A parsed and compiled MJCF model.

    spec: the (possibly repaired) MjSpec; model: its compiled MjModel; data: MjData at qpos0 with
    kinematics computed (body poses at the rest pose).
    skipped: "kind 'name'" of each element left out; warnings: every repair's message.
    unknown_mass: names of bodies whose compiled mass is not the source's (a mass-bearing geom was left
        out and the inertial is not explicit).
    trimesh_meshes: mesh asset name → file, for the meshes MuJoCo could not decode and was given as
        vertices read with trimesh (their ``file`` is cleared in the spec).
    texture_files: texture id → image file of the 2D file textures, which MuJoCo is not asked to decode
        (the USD references the file; decoding large images is most of a compile): in the compiled model
        they are 1×1 placeholders.
    visual_meshes: mesh asset name → file and scale of the meshes only visual-only geoms use, which
        MuJoCo is not asked to compile (``rules.mjcf.visual_meshes``): in the compiled model they are
        stand-ins, and the geoms are authored from the files.
    """

    path: Path
    spec: mujoco.MjSpec
    model: mujoco.MjModel
    data: mujoco.MjData
    skipped: list[str] = attrs.field(factory=list)
    warnings: list[str] = attrs.field(factory=list)
    unknown_mass: set[str] = attrs.field(factory=set)
    trimesh_meshes: dict[str, Path] = attrs.field(factory=dict)
    texture_files: dict[int, Path] = attrs.field(factory=dict)
    visual_meshes: dict[str, Any] = attrs.field(factory=dict)


def mujoco_message(exc: BaseException) -> str:
    """MuJoCo's error text on one line (it spans several)."""
    return " ".join(part.strip() for part in str(exc).splitlines() if part.strip())


def parse_spec(path: Path) -> mujoco.MjSpec:
    """MjSpec of the model at ``path``; one ConversionError with MuJoCo's message (and line) otherwise."""
    try:
        return mujoco.MjSpec.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - MuJoCo raises ValueError/RuntimeError; all mean "cannot parse"
        message = mujoco_message(exc)
        found = _ELEMENT.search(str(exc)) or _LINE.search(str(exc))
        line = int(found.group("line")) if found and found.group("line") else None
        raise ConversionError(path, f"MuJoCo cannot parse this model: {message}", line=line) from None


def _failed_element(spec: mujoco.MjSpec, message: str) -> tuple[str, object] | None:
    """The (kind, spec element) a compile error names, or None when it names none we can find."""
    found = _ELEMENT.search(message)
    if found is None:
        return None
    name, index = found.group("name"), int(found.group("id"))
    for kind, hint in _KIND_HINTS:
        if not hint.search(message):
            continue
        elements = list(getattr(spec, _ELEMENT_LISTS[kind]))
        by_name = [e for e in elements if name and e.name == name]
        if by_name:
            return kind, by_name[0]
        if 0 <= index < len(elements):
            return kind, elements[index]
    # No hint matched: an element of that name, when exactly one has it.
    named = [(kind, e) for kind, attribute in _ELEMENT_LISTS.items() for e in getattr(spec, attribute)
             if name and e.name == name]
    return named[0] if len(named) == 1 else None


def compiler_dir(spec: mujoco.MjSpec, attribute: str, path: Path) -> str:
    """``spec.meshdir`` / ``spec.texturedir``; a ConversionError naming ``<compiler>`` when it is not UTF-8
    (MuJoCo keeps the bytes, Python cannot decode them)."""
    try:
        return getattr(spec, attribute)
    except UnicodeDecodeError:
        raise ConversionError(path, f"{attribute} is not valid UTF-8 text", "<compiler>") from None


def _mesh_file(spec: mujoco.MjSpec, mesh: mujoco.MjsMesh, model_dir: Path) -> Path:
    meshdir = compiler_dir(spec, "meshdir", model_dir)
    meshdir = Path(meshdir) if meshdir else Path()
    path = Path(mesh.file)
    return path if path.is_absolute() else model_dir / meshdir / path


def _repair_mesh(spec: mujoco.MjSpec, mesh: mujoco.MjsMesh, model_dir: Path) -> Path | None:
    """Give MuJoCo the vertices and faces trimesh reads from the file (returned); None when trimesh cannot
    read it either."""
    from usdforge.rules.mesh.read import combined_mesh, load_parts

    path = _mesh_file(spec, mesh, model_dir)
    try:
        combined = combined_mesh(load_parts(path))
    except ConversionError:
        return None
    mesh.file = ""
    mesh.uservert = np.asarray(combined.vertices, dtype=np.float64).reshape(-1).tolist()
    mesh.userface = np.asarray(combined.faces, dtype=np.int64).reshape(-1).tolist()
    return path


def _geom_carries_mass(geom: mujoco.MjsGeom) -> bool:
    # A geom contributes to its body's mass unless MuJoCo's inertia ignores it (mass 0 given explicitly).
    return not (geom.mass == 0.0 or (np.isnan(geom.mass) and geom.density == 0.0))


def _compiled(spec: mujoco.MjSpec, alongside: Callable[[], object] | None) -> mujoco.MjModel:
    """``spec.compile()``, with ``alongside`` run on a thread meanwhile and joined before this returns or
    raises (no thread is left importing when a reading child is forked later)."""
    if alongside is None:
        return spec.compile()

    def quietly() -> None:
        # A failure is the caller's to meet: it does the same work after the compile (an import raising again).
        with contextlib.suppress(Exception):
            alongside()

    thread = threading.Thread(target=quietly, name="usdforge-alongside-compile", daemon=True)
    thread.start()
    try:
        return spec.compile()
    finally:
        thread.join()


def compile_repaired(path: Path, spec: mujoco.MjSpec, alongside: Callable[[], object] | None = None) -> LoadedModel:
    """Compile ``spec``, repairing what MuJoCo names in its errors (see the module docstring).

    alongside: work for a thread during the first compile (MuJoCo releases the GIL while it compiles),
    joined before this returns or raises: the caller's imports (``rules.mjcf.convert``). Its exceptions
    are dropped: the caller does the same work after, and meets the error itself.

    Raises ConversionError with MuJoCo's message when an error names no element that can be repaired.
    The returned ``spec`` is a copy of ``spec`` as it was just before the compile that succeeded: a
    compiled spec keeps its own processed copy of every mesh (unitree_h1: 110 MB beside the model's 50),
    so the compiled one is dropped and the model is not held twice.
    """
    loaded_warnings: list[str] = []
    skipped: list[str] = []
    unknown_mass: set[str] = set()
    trimesh_meshes: dict[str, Path] = {}
    for _ in range(MAX_REPAIRS):
        uncompiled = spec.copy()  # small: meshes are read by the compile
        limited = _limit_hulls(spec)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecation notes of MuJoCo's own (settotalmass …)
                work, alongside = alongside, None  # the first compile only
                model = _compiled(spec, work)
            break
        except Exception as exc:  # noqa: BLE001 - MuJoCo's compile errors are ValueErrors with its message
            for mesh, value in limited:  # the repairs go on with the model's own values
                mesh.maxhullvert = value
            message = mujoco_message(exc)
            failed = _failed_element(spec, str(exc))
            if failed is None:
                found = _ELEMENT.search(str(exc)) or _LINE.search(str(exc))
                line = int(found.group("line")) if found and found.group("line") else None
                raise ConversionError(path, f"MuJoCo cannot compile this model: {message}", line=line) from None
            kind, element = failed
            label = f"{kind} '{element.name}'" if element.name else f"{kind} #{_ELEMENT.search(str(exc)).group('id')}"
            repaired = _repair_mesh(spec, element, path.parent) if kind == "mesh" and element.file else None
            if repaired is not None:
                trimesh_meshes[element.name] = repaired
                loaded_warnings.append(f"MuJoCo cannot compile {label} ({message}); read the mesh with trimesh")
                continue
            if kind == "geom":
                body = element.parent
                if _geom_carries_mass(element) and not body.explicitinertial:
                    unknown_mass.add(body.name)
            if kind == "mesh":
                for geom in list(spec.geoms):
                    if geom.meshname == element.name:
                        if _geom_carries_mass(geom) and not geom.parent.explicitinertial:
                            unknown_mass.add(geom.parent.name)
                        spec.delete(geom)
            spec.delete(element)
            skipped.append(label)
            loaded_warnings.append(f"MuJoCo cannot compile {label} ({message}); left it out")
    else:
        raise ConversionError(path, "MuJoCo cannot compile this model: too many errors to repair")
    from usdforge.rules.mjcf.finite import check_finite_model

    check_finite_model(path, model)
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    return LoadedModel(path, uncompiled, model, data, skipped, loaded_warnings, unknown_mass, trimesh_meshes)


#: The hull vertex budget of a mesh whose hull nothing read from the compiled model depends on: MuJoCo's
#: smallest hull (a tetrahedron).
_SMALLEST_HULL = 4


def _limit_hulls(spec: mujoco.MjSpec) -> list[tuple[Any, int]]:
    """Give every mesh whose convex hull the converter never reads the smallest hull budget; return
    (mesh, its own ``maxhullvert``) of each changed.

    MuJoCo computes a collision hull (``mesh_graph``, ``mesh_poly*``, ``mesh_extrema``) for every mesh
    compiled; nothing the authors read depends on it except the inertia of a mesh with ``inertia="convex"``
    and a primitive geom fitted to a mesh, which keep theirs (pal_tiago: 0.156 → 0.114 s CPU of compile,
    every other array the same; ``tests/test_mjcf_rule.py``). The USD says the model's own budget
    (``newton:maxHullVertices``, from the uncompiled spec), and engines compute their own hulls."""
    fitted = {geom.meshname for geom in spec.geoms
              if geom.meshname and int(geom.type) != int(mujoco.mjtGeom.mjGEOM_MESH)}
    convex = int(mujoco.mjtMeshInertia.mjMESH_INERTIA_CONVEX)
    limited = []
    for mesh in spec.meshes:
        if int(mesh.inertia) != convex and mesh.name not in fitted and \
                not 0 <= mesh.maxhullvert <= _SMALLEST_HULL:
            limited.append((mesh, int(mesh.maxhullvert)))
            mesh.maxhullvert = _SMALLEST_HULL
    return limited


def model_path(model: mujoco.MjModel, address: int) -> Path | None:
    """A file path as the compiled model stores it (``mesh_pathadr``, ``tex_pathadr`` …): MuJoCo's own
    resolution (meshdir, texturedir, attached sub-models' folders); None when the element has no file."""
    if address < 0:
        return None
    raw = bytes(model.paths[address:])
    name = raw[:raw.index(b"\0")].decode() if b"\0" in raw else raw.decode()
    return Path(name) if name else None


def files_inside(model: Any, roots: list[Path]) -> bool:
    """Whether every file a model names for its meshes and textures (``mesh_pathadr``, ``tex_pathadr``: files
    the authors read or copy into the output) is a readable regular file inside ``roots``. A model from the
    build cache (compiled, or slim) names the files of the bytes it was stored with: a forged entry could
    name any file, which ``checked_spec`` never saw."""
    from usdforge.rules.files import inside, regular_file_problem

    for addresses in (model.mesh_pathadr, model.tex_pathadr):
        for address in np.asarray(addresses).ravel():
            file = model_path(model, int(address))
            if file is not None and (not inside(file.absolute(), roots) or regular_file_problem(file) is not None):
                return False
    return True


def set_aside_file_textures(spec: mujoco.MjSpec, model_dir: Path) -> dict[int, Path]:
    """Replace each 2D texture read from a file MuJoCo would find (``texturedir`` of the model) by a 1×1
    builtin placeholder; return texture id → file. Textures of attached models, whose folder the spec does
    not tell, stay for MuJoCo to read."""
    texturedir = compiler_dir(spec, "texturedir", model_dir)
    texturedir = Path(texturedir) if texturedir else Path()
    files: dict[int, Path] = {}
    for index, texture in enumerate(spec.textures):
        if not texture.file or int(texture.type) != int(mujoco.mjtTexture.mjTEXTURE_2D):
            continue
        file = Path(texture.file)
        file = file if file.is_absolute() else model_dir / texturedir / file
        if not file.is_file():
            continue
        files[index] = file
        texture.file = ""
        texture.builtin = mujoco.mjtBuiltin.mjBUILTIN_FLAT
        texture.width = texture.height = 1
        texture.nchannel = 3
    return files


def _parsed(path: Path) -> mujoco.MjSpec:
    """The spec as ``load_mjcf`` has it before compiling (file textures set aside; the visual meshes are
    not, which changes no element's count or name)."""
    spec = parse_spec(path)
    set_aside_file_textures(spec, path.parent)
    return spec


def disable_asset_cache() -> None:
    """Turn off MuJoCo's process-wide asset cache (decoded meshes kept for later compiles, up to 500 MB) in
    a process that compiles each model once, such as the CLI or a doit worker, where it only adds to the
    peak memory (unitree_h1: 100 MB of 143k mesh vertices). A recompile (``link_density``, repairs) then
    decodes the meshes again."""
    mujoco.mj_setCacheCapacity(mujoco.mj_getCache(), 0)


def checked_spec(path: str | Path, allowed_roots: tuple[str, ...] = ()) \
        -> tuple[Path, mujoco.MjSpec, dict[int, Path], dict[str, Any]]:
    """(absolute path, parsed spec with file textures and visual-only meshes set aside, texture id → file,
    mesh name → ``rules.mjcf.visual_meshes.VisualMesh``) of the MJCF model at ``path``, after every file it
    references is checked (``load_mjcf``); MuJoCo's warnings so far dropped."""
    from usdforge.rules.files import check_model_file, check_references, model_roots
    from usdforge.rules.mjcf.references import mjcf_file_references
    from usdforge.rules.mjcf.visual_meshes import set_aside_visual_meshes

    path = Path(path).absolute()
    check_model_file(path)
    roots = model_roots(path, allowed_roots)
    references = mjcf_file_references(path, roots)
    check_references(references, roots)
    mujoco_warnings()
    spec = parse_spec(path)
    for attribute in ("meshdir", "texturedir"):
        compiler_dir(spec, attribute, path)  # here, so that the error names the model file
    textures = set_aside_file_textures(spec, path.parent)
    attached = any(reference.what == "model" for reference in references)
    return path, spec, textures, set_aside_visual_meshes(spec, path.parent, roots, attached)


def load_mjcf(path: str | Path, allowed_roots: tuple[str, ...] = (),
              alongside: Callable[[], object] | None = None) -> LoadedModel:
    """Parse and compile the MJCF model at ``path`` (see the module docstring); inside the pipeline's
    mesh cache, the compiled model is reused from the build cache when the files are unchanged
    (``rules.mjcf.compiled``).

    allowed_roots: folders besides the model's own whose files it may reference. Every file the model
    references (includes, meshes, textures, …) is checked first (``rules.files``): inside those folders, a
    regular file of bounded size, textures decodable images; MuJoCo never gets to read anything else.
    alongside: work for a thread while MuJoCo compiles (``compile_repaired``), if it compiles.
    """
    from usdforge.rules.mjcf.compiled import cached_model, store_model

    from usdforge.rules.files import model_roots

    path, spec, textures, visual = checked_spec(path, allowed_roots)
    if visual:  # the reading child reads the visual meshes' files while MuJoCo compiles the rest
        from usdforge.rules.robot.meshes import MeshLibrary

        MeshLibrary().read_ahead(mesh.file for mesh in visual.values())
    model, token = cached_model(path, spec)  # the build cache's compiled model of these files, if any
    if model is not None and not files_inside(model, model_roots(path, allowed_roots)):
        model = None  # names files the checks never saw: compiled afresh (and stored in its place)
    if model is not None:
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        loaded = LoadedModel(path, spec, model, data)
    else:
        loaded = compile_repaired(path, spec, alongside)
        del spec  # compiled, it holds MuJoCo's processed meshes (h1: 110 MB): gone before the model is stored
        if not (loaded.warnings or loaded.skipped or loaded.trimesh_meshes):  # repairs edit the spec: not reused
            store_model(token, loaded.model, lambda: _parsed(path))
    loaded.texture_files, loaded.visual_meshes = textures, visual
    loaded.warnings.extend(f"MuJoCo: {message}" for message in mujoco_warnings())
    return loaded
