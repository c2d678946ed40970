"""The field → layer map of a robot conversion (``rules.robot.layer_fields``), proven by mutation: every
field of every converter cfg changed to another valid value; the rebuild that reuses the intermediate and
the layers whose keys did not change equals a cold conversion with the new cfg, byte for byte, and only
units that declare the field change bytes. Also: the intermediate is untrusted cache input."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import attrs
import pytest

from layer_fixture import mutations, write_fixtures
from usdforge.pipeline import converter_for
from usdforge.pipeline.cache import Store
from usdforge.pipeline.kinds import cfg_class
from usdforge.rules.mjcf import slim
from usdforge.rules.outputs import ROBOT_LAYER_FILES
from usdforge.rules.robot.layer_fields import (FIELD_UNITS, NO_OUTPUT_FIELDS, READ_FIELDS, FieldView,
                                               UndeclaredField, documented_tables)

UNIT_OF_FILE = {file: unit for unit, file in ROBOT_LAYER_FILES.items()}
REPO = Path(__file__).resolve().parents[1]


def units(folder: Path) -> dict[str, dict[str, bytes]]:
    """The output in ``folder`` by unit: {unit: {relative name: bytes}} (the lazy key aside)."""
    found: dict[str, dict[str, bytes]] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.endswith(".usdforge.toml"):
            name = path.relative_to(folder).as_posix()
            unit = UNIT_OF_FILE.get(name) or ("articulation_cfg" if name.endswith("_cfg.py") else
                                             "materials" if name.startswith("textures/") else "interface")
            found.setdefault(unit, {})[name] = path.read_bytes()
    return found


def hits(store: Store, prefix: str) -> int:
    return sum(v["hits"] for k, v in store.stats()["last_build"].items() if k.startswith(prefix))


def reuses(store: Store, unit: str) -> int:
    """How often the last build reused ``unit``: from the build cache (``layer:``) or, unchanged, from the
    output the previous build left (``kept:``)."""
    return hits(store, f"layer:{unit}") + hits(store, f"kept:{unit}")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("layers")
    write_fixtures(root / "fx")
    (root / "fx" / "extra").mkdir()
    return root


@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_every_field_is_declared_or_named(kind):
    """Every field of the converter cfg is in the map: output fields by unit, read fields, or no output."""
    named = set(FIELD_UNITS[kind]) | set(READ_FIELDS[kind]) | set(NO_OUTPUT_FIELDS)
    assert named == {f.name for f in attrs.fields(cfg_class(kind))}
    assert set(mutations(kind, Path("/x"))) == {f.name for f in attrs.fields(cfg_class(kind))}


@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_mutating_each_field_rebuilds_only_its_layers(kind, folder):
    """For each field: the rebuild with the cache (reusing the intermediate and the unchanged layers)
    equals a cold conversion without the cache, and the units that changed declare the field."""
    asset = folder / "fx" / ("layered.urdf.xacro" if kind == "urdf" else "layered.xml")
    base = cfg_class(kind)(asset_path=str(asset))
    work = folder / kind
    store = Store(work / "cache", build="cold")
    warnings.simplefilter("ignore")
    converter_for(kind)(attrs.evolve(base, usd_dir=str(work / "base")), cache=store)
    reference = units(work / "base")
    seen: dict[str, set[str]] = {}
    step = 0
    fallbacks = len(slim.compiles)
    for field, values in mutations(kind, folder / "fx").items():
        if field in ("asset_path", "usd_dir", "usd_file_name"):
            continue  # where the files are: no byte of the output
        for value in values:
            step += 1
            cfg = attrs.evolve(base, **{field: value})
            store = Store(work / "cache", build=f"step{step}")
            converter_for(kind)(attrs.evolve(cfg, usd_dir=str(work / f"inc{step}")), cache=store)
            converter_for(kind)(attrs.evolve(cfg, usd_dir=str(work / f"cold{step}")), cache=False)
            rebuilt, cold = units(work / f"inc{step}"), units(work / f"cold{step}")
            assert rebuilt == cold, f"{field}={value!r}: the rebuild differs from a cold conversion"
            changed = {u for u in set(cold) | set(reference) if cold.get(u) != reference.get(u)} - {"interface"}
            declared = set(FIELD_UNITS[kind].get(field, ())) if field not in READ_FIELDS[kind] else set(changed)
            assert changed <= declared, f"{field}={value!r} changed {sorted(changed - declared)}, which do not declare it"
            seen.setdefault(field, set()).update(changed)
            if field in FIELD_UNITS[kind] and field != "run_asset_transformer" and kind == "urdf":
                assert hits(store, "intermediate") == 1  # the robot as read came from the cache
            if field in FIELD_UNITS[kind] and field not in ("run_asset_transformer", "link_density") and kind == "mjcf":
                # MuJoCo's compiled model came from the slim intermediate: no compile (link_density edits
                # the spec before the compile: a miss, compiled and stored under its own key).
                assert hits(store, "mjcf-slim") == 1 and len(slim.compiles) == fallbacks, field
            if field == "robot_type":  # only base reads it: every other keyed unit was reused
                assert hits(store, "layer:") >= 5
            if field == "collision_type" and value != "Convex Decomposition":  # the shapes see no difference
                assert hits(store, "layer:instances") == hits(store, "layer:geometry") == 1
            shutil.rmtree(work / f"cold{step}")
            shutil.rmtree(work / f"inc{step}")
    # Every output field demonstrably changes something on these fixtures (the map is not vacuous).
    silent = {f for f in FIELD_UNITS[kind] if not seen.get(f)}
    assert not silent, f"fields that changed no byte of the fixture: {sorted(silent)}"


@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_edits_accumulated_in_one_folder_equal_cold_conversions(kind, folder):
    """Edits one after another in one output folder (each rebuild reuses what the previous states left in
    the cache, with every earlier edit still in force: fields in combination) equal cold conversions."""
    import random

    asset = folder / "fx" / ("layered.urdf.xacro" if kind == "urdf" else "layered.xml")
    cfg = cfg_class(kind)(asset_path=str(asset))
    work = folder / f"{kind}-chain"
    choices = [(field, value) for field, values in mutations(kind, folder / "fx").items()
               if field in FIELD_UNITS[kind] and field != "run_asset_transformer" for value in values]
    random.Random(5).shuffle(choices)
    warnings.simplefilter("ignore")
    for step, (field, value) in enumerate(choices[:12]):
        cfg = attrs.evolve(cfg, **{field: value})
        converter_for(kind)(attrs.evolve(cfg, usd_dir=str(work / "out")), cache=Store(work / "cache"))
        converter_for(kind)(attrs.evolve(cfg, usd_dir=str(work / f"cold{step}")), cache=False)
        assert units(work / "out") == units(work / f"cold{step}"), f"after {field}={value!r} (step {step})"
        shutil.rmtree(work / f"cold{step}")


@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_each_unit_ignores_every_field_it_does_not_declare_at_once(kind, folder):
    """For each unit: every field it does not declare changed at once (their interplay included) leaves
    its bytes as they were; so a unit's bytes are a function of its declared fields on this robot."""
    from usdforge.rules.robot.layer_fields import LAYER_FIELDS

    asset = folder / "fx" / ("layered.urdf.xacro" if kind == "urdf" else "layered.xml")
    base = cfg_class(kind)(asset_path=str(asset))
    work = folder / f"{kind}-joint"
    warnings.simplefilter("ignore")
    converter_for(kind)(attrs.evolve(base, usd_dir=str(work / "base")), cache=False)
    reference = units(work / "base")
    options = mutations(kind, folder / "fx")
    for unit, declared in LAYER_FIELDS[kind].items():
        others = {field: values[-1] for field, values in options.items()
                  if field in FIELD_UNITS[kind] and field not in declared}
        out = work / unit
        converter_for(kind)(attrs.evolve(base, usd_dir=str(out), **others), cache=False)
        assert units(out).get(unit) == reference.get(unit), f"{unit} changed with {sorted(others)}"


@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_shapes_are_keyed_by_whether_colliders_are_decomposed_only(kind, folder):
    """A collision approximation edit re-keys the physics layer (its ``physics:approximation`` tokens) and
    leaves the shapes' keys alone, unless it switches convex decomposition on or off (decomposed prototypes
    are other prims)."""
    from usdforge.pipeline.layer_keys import unit_keys

    base = cfg_class(kind)(asset_path=str(folder / "fx" / "layered.xml"))
    keys = {value: unit_keys(kind, attrs.evolve(base, collision_type=value), "source")
            for value in ("Convex Hull", "Bounding Cube", "Bounding Sphere", "Convex Decomposition")}
    for unit in ("instances", "geometry"):
        assert keys["Convex Hull"][unit] == keys["Bounding Cube"][unit] == keys["Bounding Sphere"][unit]
        assert keys["Convex Decomposition"][unit] != keys["Convex Hull"][unit]
    assert len({k["physics"] for k in keys.values()}) == 4
    cube = attrs.evolve(base, collision_type="Bounding Cube")
    assert FieldView(cube, ("collision_type",), "instances").collision_type == "Convex Hull"  # what shapes see
    assert FieldView(cube, ("collision_type",), "physics").collision_type == "Bounding Cube"


def test_a_physics_rebuild_names_colliders_from_the_mesh_record(folder, monkeypatch):
    """A rebuild that re-authors the physics layer but restores the shapes names each mesh collider's parts
    from the mesh cache entry's record, without reading the mesh arrays; a record that is not a list of
    names (the cache is untrusted) reads the parts. Either way the output equals a cold conversion."""
    import json

    from usdforge.rules.robot import meshes

    asset = folder / "fx" / "layered.urdf.xacro"
    cfg = cfg_class("urdf")(asset_path=str(asset))
    work = folder / "part-names"
    warnings.simplefilter("ignore")
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(work / "out")), cache=Store(work / "cache"))
    decoded = []
    real = meshes.parts_from_bytes
    monkeypatch.setattr(meshes, "parts_from_bytes", lambda *a: decoded.append(1) or real(*a))
    for step, density in enumerate((300.0, 400.0)):  # physics only (a drive edit is patched: no colliders named)
        edited = attrs.evolve(cfg, link_density=density)
        store = Store(work / "cache", build=f"names{step}")
        converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "out")), cache=store)
        converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / f"cold{step}")), cache=False)
        assert units(work / "out") == units(work / f"cold{step}")
        assert reuses(store, "instances") == 1 and (decoded == []) == (step == 0)
        for entry in (work / "cache" / "entries").rglob("*.json"):  # forge the records for the next step
            body = json.loads(entry.read_text())
            if body.get("kind") == "mesh-geometry":
                body["meta"] = {"parts": "part"}
                body.pop("checksum")
                store.put_entry(body["key"], {"parts.bin": store.get_entry(body["key"]).files["parts.bin"]},
                                body["meta"], kind="mesh-geometry")


@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_a_drive_edit_is_patched_into_the_cached_layers(kind, folder, monkeypatch):
    """A drive-gain edit sets the new values on the physics (and MJCF's mujoco) layer the cache keeps without
    the drive fields, authoring neither; an edit that changes which drive attributes are authored (no drives;
    MJCF: a bias that leaves no stiffness, so no target position) authors the layer; another collision
    approximation sets the token on the mesh colliders, but not into or out of decomposition. Each rebuild
    equals a cold conversion, byte for byte."""
    from usdforge.rules.robot import isaaclab_cfg, writer
    from usdforge.schemas.urdf_cfg import JointDriveCfg, PDGainsCfg

    patched: list[bool] = []
    real = writer.patched_layer
    monkeypatch.setattr(writer, "patched_layer", lambda *a: (r := real(*a), patched.append(r is not None))[0])
    composed: list[int] = []  # stages the Isaac Lab cfg was read from, per rebuild
    stage = isaaclab_cfg._facts_stage
    monkeypatch.setattr(isaaclab_cfg, "_facts_stage", lambda *a: (composed.append(1), stage(*a))[1])
    cfg = cfg_class(kind)(asset_path=str(folder / "fx" / ("layered.urdf.xacro" if kind == "urdf" else "layered.xml")))
    edits = [({"joint_drive": JointDriveCfg(gains=PDGainsCfg(stiffness=1234.0, damping=56.0))}, [True]),
             ({"joint_drive": None}, [False])] if kind == "urdf" else \
        [({"override_gain_prm": (77.0,)}, [True, True]),
         ({"override_gain_prm": (77.0,), "override_bias_prm": (0.0, 0.0, -3.0)}, [False, True])]
    # Another approximation token is patched too; decomposition is another class. MJCF's mujoco layer holds no
    # token: the output the last edit left holds it as this one makes it (its unit's key is recorded in the
    # lazy key), so it is taken from there, not patched again (a patched layer is not stored under its key).
    last = edits[-1][0]
    edits += [({**last, "collision_type": "Bounding Sphere"}, [True]),
              ({**last, "collision_type": "Convex Decomposition"}, [])]
    work = folder / f"patched-{kind}"
    warnings.simplefilter("ignore")
    converter_for(kind)(attrs.evolve(cfg, usd_dir=str(work / "out")), cache=Store(work / "cache"))
    for step, (fields, expected) in enumerate(edits):
        patched.clear()
        composed.clear()
        edited = attrs.evolve(cfg, **fields)
        converter_for(kind)(attrs.evolve(edited, usd_dir=str(work / "out")), cache=Store(work / "cache"))
        # The cfg after a patched drive edit: the cached facts and the patch's drives, no stage composed.
        assert len(composed) == (0 if step != 1 else 1), fields
        converter_for(kind)(attrs.evolve(edited, usd_dir=str(work / f"cold{step}")), cache=False)
        assert patched == expected, fields
        assert units(work / "out") == units(work / f"cold{step}")


def test_cached_cfg_facts_that_are_not_facts_are_read_again(folder):
    """The Isaac Lab cfg's cached facts are untrusted: an entry that is not facts of the expected form (a
    field missing, a name that is no string) is a miss, the cfg read from the stage, equal to a cold one."""
    import json

    from usdforge.schemas.urdf_cfg import JointDriveCfg, PDGainsCfg

    cfg = cfg_class("urdf")(asset_path=str(folder / "fx" / "layered.urdf.xacro"))
    work = folder / "forged-facts"
    store = Store(work / "cache")
    warnings.simplefilter("ignore")
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(work / "out")), cache=store)
    entries = [path for path in (work / "cache" / "entries").rglob("*.json")
               if json.loads(path.read_text()).get("kind") == "layer:articulation_cfg_facts"]
    assert len(entries) == 1
    facts = store.entry(entries[0].stem)["meta"]
    assert facts["joints"] and "stiffness" not in facts["joints"][0]
    for forged in ({**facts, "joints": [{**facts["joints"][0], "name": 7}]}, {k: v for k, v in facts.items() if k != "fixed"}):
        store.put_entry(entries[0].stem, {}, meta=forged, kind="layer:articulation_cfg_facts")
        edited = attrs.evolve(cfg, joint_drive=JointDriveCfg(gains=PDGainsCfg(stiffness=float(len(forged)), damping=2.0)))
        converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "out")), cache=store)
        converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "cold")), cache=False)
        assert units(work / "out") == units(work / "cold")
        shutil.rmtree(work / "cold")


def test_a_layer_that_does_not_read_back_as_written_is_not_patched():
    """Patched line by line, only the value lines change: an empty metadata block "( )", which reads back as
    none, stays as written. Through Sdf (a text the line reading does not follow: a multi-line string), the
    patch is refused (the layer authored instead) when the cached layer does not read back as it was
    written; either way it is refused when the layer holds another type than asked for."""
    from pxr import Sdf

    from usdforge.rules.robot.drive_patch import UNSUPPORTED, patched_layer, patched_text

    layer = Sdf.Layer.CreateAnonymous("t.usda")
    spec = Sdf.CreatePrimInLayer(layer, "/r/j")
    spec.specifier = Sdf.SpecifierDef
    Sdf.AttributeSpec(spec, "drive:angular:physics:stiffness", Sdf.ValueTypeNames.Float).default = 1.0
    text = layer.ExportToString()
    want = {Sdf.Path("/r/j"): ([], [("drive:angular:physics:stiffness", Sdf.ValueTypeNames.Float, 2.0, False)])}
    args = (lambda name: name.startswith("drive:"), "PhysicsDriveAPI:")
    assert patched_layer(text.encode(), want, *args)[0] == text.replace("= 1", "= 2").encode()
    quirk = text.replace('def "j"\n', 'def "j" (\n    )\n', 1)
    assert quirk != text and patched_layer(quirk.encode(), want, *args)[0] == quirk.replace("= 1", "= 2").encode()
    Sdf.AttributeSpec(layer.GetPrimAtPath("/r"), "note", Sdf.ValueTypeNames.String).default = "two\nlines"
    multiline = layer.ExportToString().replace('def "j"\n', 'def "j" (\n    )\n', 1)
    assert '"""' in multiline and patched_text(multiline.encode(), want, *args) is UNSUPPORTED
    assert patched_layer(multiline.encode(), want, *args) is None
    double = {path: ([], [(name, Sdf.ValueTypeNames.Double, value, uniform)]) for path, (_, [(name, _, value, uniform)])
              in want.items()}
    assert patched_layer(text.encode(), double, *args) is None


def test_the_line_patch_reads_only_the_attribute_lines_it_patches_and_refuses_forms_it_does_not_read():
    """``patched_text`` tells a patched attribute's line by its name before matching it: other attributes of a
    patched prim are left as they are, a collider's approximation token is set wherever it is, and an
    approximation line in a form the reading does not follow (``custom``) leaves the text to Sdf."""
    from pxr import Sdf

    from usdforge.rules.robot.drive_patch import UNSUPPORTED, patched_text

    layer = Sdf.Layer.CreateAnonymous("t.usda")
    joint = Sdf.CreatePrimInLayer(layer, "/r/j")
    collider = Sdf.CreatePrimInLayer(layer, "/r/c")
    for spec in (joint, collider):
        spec.specifier = Sdf.SpecifierDef
    Sdf.AttributeSpec(joint, "physics:lowerLimit", Sdf.ValueTypeNames.Float).default = 1.0
    Sdf.AttributeSpec(joint, "drive:angular:physics:stiffness", Sdf.ValueTypeNames.Float).default = 1.0
    Sdf.AttributeSpec(joint, "drive:angular:physics:damping", Sdf.ValueTypeNames.Float).default = 1.0
    Sdf.AttributeSpec(collider, "physics:approximation", Sdf.ValueTypeNames.Token,
                      variability=Sdf.VariabilityUniform).default = "none"
    text = layer.ExportToString()
    want = {Sdf.Path("/r/j"): ([], [("drive:angular:physics:damping", Sdf.ValueTypeNames.Float, 3.0, False),
                                    ("drive:angular:physics:stiffness", Sdf.ValueTypeNames.Float, 2.0, False)])}
    args = (lambda name: name.startswith("drive:"), "PhysicsDriveAPI:")
    patched = patched_text(text.encode(), want, *args, "convexHull").decode()
    expected = text.replace("stiffness = 1", "stiffness = 2").replace("damping = 1", "damping = 3") \
        .replace('"none"', '"convexHull"')
    assert patched == expected and "physics:lowerLimit = 1" in patched
    custom = text.replace("uniform token physics:approximation", "custom uniform token physics:approximation")
    assert custom != text and patched_text(custom.encode(), want, *args, "convexHull") is UNSUPPORTED


def test_view_raises_on_undeclared_fields():
    from usdforge.schemas import UrdfConverterCfg

    cfg = UrdfConverterCfg(asset_path="robot.urdf", self_collision=True)
    seen = FieldView(cfg, ("self_collision",), "physx")
    assert seen.self_collision is True
    with pytest.raises(UndeclaredField, match="physx unit read the cfg field 'joint_drive'"):
        seen.joint_drive


@pytest.mark.parametrize("kind,unit,field", [("urdf", "base", "robot_type"), ("urdf", "instances", "make_instanceable"),
                                              ("urdf", "instances", "merge_mesh"), ("urdf", "physics", "collision_type"),
                                              ("urdf", "physx", "self_collision"), ("mjcf", "instances", "collision_type"),
                                              ("mjcf", "mujoco", "override_gain_prm"), ("mjcf", "mujoco", "merge_mesh"),
                                              ("mjcf", "physics", "self_collision")])
def test_an_author_reading_an_undeclared_field_raises(kind, unit, field, folder, monkeypatch):
    """The declarations are enforced on the layer authors: with ``field`` taken out of ``unit``'s
    declaration, a conversion (cold, then a rebuild after an edit that only physics and the Isaac Lab cfg
    declare, where physics alone names the colliders) fails with ``UndeclaredField`` naming both."""
    from usdforge.rules.robot.layer_fields import LAYER_FIELDS

    asset = folder / "fx" / ("layered.urdf.xacro" if kind == "urdf" else "layered.xml")
    cfg = cfg_class(kind)(asset_path=str(asset), robot_type="Manipulator")
    edit = {"link_density": 321.0} if kind == "urdf" else {"override_gain_prm": (77.0,)}
    monkeypatch.setitem(LAYER_FIELDS[kind], unit, tuple(f for f in LAYER_FIELDS[kind][unit] if f != field))
    work = folder / f"undeclared-{kind}-{unit}-{field}"
    warnings.simplefilter("ignore")
    with pytest.raises(UndeclaredField, match=f"the {unit} unit read the cfg field '{field}'"):
        converter_for(kind)(attrs.evolve(cfg, usd_dir=str(work / "out")), cache=Store(work / "cache"))
        converter_for(kind)(attrs.evolve(cfg, usd_dir=str(work / "out"), **edit), cache=Store(work / "cache"))


@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_a_rebuild_writes_nothing_into_restored_layers(folder, monkeypatch, kind):
    """After a PhysX-only edit of the fixture (MJCF: sites, actuators, an equality, a keyframe), every layer
    is restored, physx (and MJCF's physics) patched from its base without ``self_collision``
    (``rules.robot.self_collision``, ``rules.mjcf.self_collision``); after a ``link_density`` edit, physics
    (and MJCF's mujoco) is re-authored and the others restored. No author, MJCF's own steps included, writes
    anything into a restored layer's stand-in (it holds the robot's root prim only, and is made only when an
    author asks for it), so a cfg edit pays for the layers it changes only. Each rebuild equals a cold
    conversion."""
    from pxr import Sdf

    from usdforge.rules.robot import layers as robot_layers
    from usdforge.rules.robot.layers import RobotLayers

    monkeypatch.setattr(robot_layers, "_EMPTY_CRATES", {})  # the first save below is Sdf's, not a memo's

    stand_ins: dict[str, Sdf.Layer] = {}
    real = RobotLayers.save

    def save(self, name, contents=None):
        # A restored role's stand-in is made only when an author asks for it (None: never asked).
        stand_ins.update({role: self.layers.get(role) for role in self.restored})
        return real(self, name, contents)

    monkeypatch.setattr(RobotLayers, "save", save)
    cfg = cfg_class(kind)(asset_path=str(folder / "fx" / "layered.xml"), import_physics_scene=True) \
        if kind == "mjcf" else cfg_class(kind)(asset_path=str(folder / "fx" / "layered.urdf.xacro"))
    work = folder / f"restored-untouched-{kind}"
    warnings.simplefilter("ignore")
    converter_for(kind)(attrs.evolve(cfg, usd_dir=str(work / "out")), cache=Store(work / "cache"))
    assert stand_ins == {}
    layers = {"base", "instances", "geometry", "materials", "physics", "physx", "newton", "mujoco"}
    for edit, fields, authored in (("self_collision", {"self_collision": True}, set()),
                                   ("link_density", {"self_collision": True, "link_density": 2000.0},
                                    {"physics", "mujoco"} if kind == "mjcf" else {"physics"})):
        stand_ins.clear()
        edited = attrs.evolve(cfg, **fields)
        converter_for(kind)(attrs.evolve(edited, usd_dir=str(work / "out")), cache=Store(work / "cache"))
        assert set(stand_ins) == layers - authored, edit
        for role, layer in stand_ins.items():
            if layer is None:
                continue
            paths: list[Sdf.Path] = []
            layer.Traverse(Sdf.Path.absoluteRootPath, paths.append)
            # The writer gives MJCF's steps the colliders' prims (where the contacts would go) in a restored
            # physics layer's stand-in: nothing else.
            colliders = {p for p in paths if "/collisions" in p.pathString} if role == "physics" else set()
            colliders |= {p.GetParentPath() for p in colliders if p.name == "collisions"}
            written = [p for p in paths if (p.pathString.count("/") > 1 or p.IsPropertyPath()) and p not in colliders]
            assert written == [], (edit, role, [str(p) for p in written])
        converter_for(kind)(attrs.evolve(edited, usd_dir=str(work / f"cold-{edit}")), cache=False)
        assert units(work / "out") == units(work / f"cold-{edit}"), edit


def test_a_self_collision_edit_that_changes_no_pair_keeps_the_physics_layer(tmp_path, monkeypatch):
    """An MJCF model whose ``self_collision`` changes no filtered pair (two free bodies, no articulation:
    a drone and a crate) takes the physics layer the cache holds without the field as it is
    (``rules.mjcf.self_collision``: no Sdf parse); the rebuild equals a cold conversion."""
    from usdforge.rules.mjcf import self_collision

    source = tmp_path / "free.xml"
    source.write_text('<mujoco model="free"><worldbody>'
                      '<body name="drone"><freejoint/><geom type="box" size="0.1 0.1 0.02"/></body>'
                      '<body name="crate" pos="1 0 0"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>'
                      "</worldbody></mujoco>")
    kept: list[bool] = []
    refiltered = self_collision._refiltered
    monkeypatch.setattr(self_collision, "_refiltered", lambda text, *args: kept.append(
        (result := refiltered(text, *args)) == text) or result)
    cfg = cfg_class("mjcf")(asset_path=str(source))
    warnings.simplefilter("ignore")
    converter_for("mjcf")(attrs.evolve(cfg, usd_dir=str(tmp_path / "out")), cache=Store(tmp_path / "cache"))
    edited = attrs.evolve(cfg, self_collision=True)
    converter_for("mjcf")(attrs.evolve(edited, usd_dir=str(tmp_path / "out")), cache=Store(tmp_path / "cache"))
    assert kept == [True]
    converter_for("mjcf")(attrs.evolve(edited, usd_dir=str(tmp_path / "cold")), cache=False)
    assert units(tmp_path / "out") == units(tmp_path / "cold")


def test_a_base_that_cannot_be_patched_is_replaced_by_the_layer_authored_instead(folder, monkeypatch):
    """When the physx layer's base (its key without ``self_collision``) cannot be patched, the layer is
    authored and stored as the base in its place (``layer_reuse.supply_patched``), the likelier fit for the
    next edit; the rebuild equals a cold conversion."""
    from usdforge.rules.robot import self_collision

    cfg = cfg_class("urdf")(asset_path=str(folder / "fx" / "layered.urdf.xacro"))
    work = folder / "unpatchable"
    warnings.simplefilter("ignore")
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(work / "out")), cache=Store(work / "cache"))
    stored: list[str] = []
    real = Store.put_entry
    monkeypatch.setattr(Store, "put_entry", lambda self, key, files, *a, **kw: stored.append(kw.get("kind"))
                        or real(self, key, files, *a, **kw))
    monkeypatch.setattr(self_collision, "enabled_set", lambda text, enabled: None)  # a base it cannot patch
    edited = attrs.evolve(cfg, self_collision=True)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "out")), cache=Store(work / "cache"))
    assert "layer:physx" in stored and f"layer:{self_collision.PHYSX_BASE}" in stored
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "cold")), cache=False)
    assert units(work / "out") == units(work / "cold")


def test_docs_show_the_generated_map():
    """docs/usd_layout.md holds the tables ``documented_tables`` generates (regenerate with
    ``python -m usdforge.rules.robot.layer_fields``)."""
    assert documented_tables() in (REPO / "docs" / "usd_layout.md").read_text()


def test_a_corrupt_intermediate_is_read_again(folder):
    """The intermediate is untrusted: a forged or damaged one is a miss (the source is read afresh) and
    the output equals a cold conversion."""
    from usdforge.rules.robot.intermediate import decode, encode_value

    asset = folder / "fx" / "layered.urdf.xacro"
    cfg = cfg_class("urdf")(asset_path=str(asset))
    work = folder / "corrupt"
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(work / "a")), cache=Store(work / "cache"))
    objects = [p for p in (work / "cache" / "objects").rglob("*") if p.is_file()]
    forged = [p for p in objects if p.read_bytes().startswith(b'{"format":1,"robot"')]
    assert len(forged) == 1
    for bad in (b'{"format":1,"robot":{"~c":"os.system","f":{}},"messages":[]}', b"\x00garbage",
                b'{"format":1,"robot":{"~a":["<f8",[4,4],"AAAA"]},"messages":[]}'):
        with pytest.raises(ValueError):
            decode(bad)
    # A damaged object (its bytes no longer match its hash): a miss, the source is read again.
    forged[0].chmod(0o644)
    forged[0].write_bytes(b'{"format":1,"robot":' + str(encode_value([1, 2])).encode() + b',"messages":[]}')
    edited = attrs.evolve(cfg, joint_drive=None)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "b")), cache=Store(work / "cache"))
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "c")), cache=False)
    assert units(work / "b") == units(work / "c")
    # A consistent entry (object, claim and entry agree) whose content is not a robot: read afresh, replaced.
    import json

    store = Store(work / "cache")
    keys = [json.loads(e.read_text())["key"] for e in (work / "cache" / "entries").rglob("*") if e.is_file()
            and "robot.json" in json.loads(e.read_text())["files"]]
    assert len(keys) == 1
    store.put_entry(keys[0], {"robot.json": b'{"format":1,"robot":{"~c":"Robot","f":{}},"messages":[]}'})
    edited = attrs.evolve(cfg, self_collision=True)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "d")), cache=store)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "e")), cache=False)
    assert units(work / "d") == units(work / "e")
    assert store.get_entry(keys[0]).files["robot.json"].startswith(b'{"format":1,"robot":{"~c":"Robot","f":{"name"')


def test_the_intermediate_round_trips_every_conformance_urdf():
    """The intermediate's form keeps everything the reader gives (custom data of every type, arrays bit
    for bit, tuples, paths): encoding the decoded robot gives the same bytes, for every conformance URDF."""
    from usdforge.rules.conversion_warnings import recording
    from usdforge.rules.errors import ConversionError
    from usdforge.rules.robot.intermediate import Unencodable, decode, encode
    from usdforge.rules.robot.meshes import MeshLibrary
    from usdforge.rules.urdf.convert import read_source

    folder = REPO.parent / "shared" / "conformance" / "urdf"
    assert folder.is_dir(), f"the shared conformance fixtures are missing: {folder}"
    checked = 0
    warnings.simplefilter("ignore")
    for urdf in sorted(folder.glob("*.urdf")):
        cfg = cfg_class("urdf")(asset_path=str(urdf), allow_missing_files=True)
        try:
            with recording() as messages:
                robot = read_source(cfg, MeshLibrary())
        except ConversionError:
            continue  # a fixture of a refused input: nothing to keep
        try:
            data = encode(robot, messages)
        except Unencodable:
            continue
        again, replayed = decode(data)
        assert encode(again, []) == encode(robot, []), urdf.name
        assert len(replayed) == len(messages)
        checked += 1
    assert checked >= 30


def test_cfg_facts_are_kept_only_when_the_drives_are_the_physics_layers_alone(tmp_path):
    """The cfg's facts are cached without the drives, which a patched rebuild takes from the physics layer:
    only when no other layer of the stage holds a drive opinion on a joint the cfg reads."""
    from pxr import Sdf, Usd

    from usdforge.rules.robot.isaaclab_cfg import _drives_from_physics_alone

    physics = Sdf.Layer.CreateNew(str(tmp_path / "payloads" / "Physics" / "physics.usda"))
    other = Sdf.Layer.CreateNew(str(tmp_path / "payloads" / "Physics" / "physX.usda"))
    joint = Sdf.CreatePrimInLayer(physics, "/r/j")
    Sdf.AttributeSpec(joint, "drive:angular:physics:stiffness", Sdf.ValueTypeNames.Float).default = 1.0
    root = Sdf.Layer.CreateAnonymous("facts.usda")
    root.subLayerPaths = [other.identifier, physics.identifier]
    facts = {"rigid": False, "joints": [{"path": "/r/j", "angular": True}]}
    assert _drives_from_physics_alone(Usd.Stage.Open(root), facts)
    Sdf.AttributeSpec(Sdf.CreatePrimInLayer(other, "/r/j"), "drive:angular:physics:damping",
                      Sdf.ValueTypeNames.Float).default = 2.0
    assert not _drives_from_physics_alone(Usd.Stage.Open(root), facts)


def test_a_rebuild_for_another_cfg_takes_the_recorded_references(folder, monkeypatch):
    """A rebuild whose only reason is another cfg takes the referenced files its lazy key records instead of
    scanning the source (the source and every referenced file are as recorded); one that changes a field
    deciding the reading (``READ_FIELDS``) scans it again."""
    from usdforge.pipeline import converters

    scans: list[int] = []
    real = converters.referenced_files
    monkeypatch.setattr(converters, "referenced_files", lambda *a, **k: (scans.append(1), real(*a, **k))[1])
    cfg = cfg_class("urdf")(asset_path=str(folder / "fx" / "layered.urdf.xacro"))
    work = folder / "recorded-references"
    warnings.simplefilter("ignore")

    def build(**fields):
        return converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(work / "out"), **fields), cache=Store(work / "cache"))

    first = build()
    second = build(self_collision=True)
    assert len(scans) == 1 and second.converted and second.lazy_key.references == first.lazy_key.references
    assert build(self_collision=True, allow_missing_files=not cfg.allow_missing_files).converted and len(scans) == 2


def test_a_rebuild_scans_again_when_the_source_names_a_package_found_by_search(tmp_path, monkeypatch):
    """A package the cfg does not give is found by searching the tree (``rules.urdf.paths``), which a new or
    moved ``package.xml`` redirects without any recorded file changing: a cfg-only rebuild of such a source
    scans it again (found by review: the recorded references would key the old file while the new one is
    read). Given in ``ros_package_paths``, the recorded references are taken."""
    from usdforge.pipeline import converters

    scans: list[int] = []
    real = converters.referenced_files
    monkeypatch.setattr(converters, "referenced_files", lambda *a, **k: (scans.append(1), real(*a, **k))[1])
    tree = tmp_path / "tree"
    (tree / ".git").mkdir(parents=True)
    (tree / "parts" / "meshes").mkdir(parents=True)
    (tree / "parts" / "package.xml").write_text("<package><name>parts</name></package>")
    (tree / "parts" / "meshes" / "box.obj").write_text(
        "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    source = tree / "robot" / "robot.urdf"
    source.parent.mkdir()
    source.write_text('<robot name="r"><link name="a"><visual><geometry><mesh filename="package://parts/meshes/'
                      'box.obj"/></geometry></visual></link></robot>\n')
    warnings.simplefilter("ignore")

    def build(name: str, **fields):
        cfg = cfg_class("urdf")(asset_path=str(source), usd_dir=str(tmp_path / name / "out"), **fields)
        return converter_for("urdf")(cfg, cache=Store(tmp_path / name / "cache"))

    build("searched")
    assert build("searched", self_collision=True).converted and len(scans) == 2
    given = [{"name": "parts", "path": str(tree / "parts")}]
    build("given", ros_package_paths=given)
    assert build("given", ros_package_paths=given, self_collision=True).converted and len(scans) == 3


def test_a_prim_less_crate_layer_is_written_from_its_own_content(tmp_path, monkeypatch):
    """``RobotLayers.save`` writes a crate layer without prims (a robot without meshes: the geometry layer)
    from the bytes of the first one saved in the process with the same text: the bytes are Sdf's own Save of
    that content, and a layer whose metadata differs is saved anew, not given the remembered bytes."""
    from pxr import Sdf

    from usdforge.rules.robot import layers as robot_layers
    from usdforge.rules.robot.layers import RobotLayers

    monkeypatch.setattr(robot_layers, "_EMPTY_CRATES", {})  # the first save below is Sdf's, not a memo's

    def saved(folder: Path, data: dict | None = None) -> bytes:
        layers = RobotLayers("robot", folder, "robot.usda", layered=True)
        if data is not None:
            layers.layer("geometry").customLayerData = data
        layers.save("robot")
        return (folder / ROBOT_LAYER_FILES["geometry"]).read_bytes()

    first = saved(tmp_path / "a")
    assert list(robot_layers._EMPTY_CRATES.values()) == [first]
    second = saved(tmp_path / "b")  # written from the memo
    reference = Sdf.Layer.OpenAsAnonymous(str(tmp_path / "a" / ROBOT_LAYER_FILES["geometry"]))
    reference.Export(str(tmp_path / "reference.usd"))
    assert first == second == (tmp_path / "reference.usd").read_bytes()
    other = saved(tmp_path / "c", {"note": "a different layer"})
    assert other != first
    assert Sdf.Layer.OpenAsAnonymous(str(tmp_path / "c" / ROBOT_LAYER_FILES["geometry"])).customLayerData == \
        {"note": "a different layer"}


def test_a_rebuild_keeps_unchanged_outputs_and_replaces_modified_ones(folder):
    """A cfg-only rebuild, or a restore of the whole output, leaves an output file that already holds the bytes
    it would write as it is (not replaced: the same inode), proven by hashing it: an output modified since
    (same size), or replaced by a symbolic link to a file with the right bytes, is written again (no link
    followed). Each equals a cold build."""
    cfg = cfg_class("urdf")(asset_path=str(folder / "fx" / "layered.urdf.xacro"))
    work = folder / "kept-outputs"
    warnings.simplefilter("ignore")
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(work / "out")), cache=Store(work / "cache"))
    out = work / "out"
    kept = (out / ROBOT_LAYER_FILES["base"]).stat().st_ino
    modified = out / ROBOT_LAYER_FILES["instances"]
    data = bytearray(modified.read_bytes())
    data[len(data) // 2] ^= 0x01
    modified.write_bytes(bytes(data))
    linked = out / ROBOT_LAYER_FILES["materials"]
    elsewhere = work / "elsewhere.usda"
    elsewhere.write_bytes(linked.read_bytes())
    linked.unlink()
    linked.symlink_to(elsewhere)
    shared = out / ROBOT_LAYER_FILES["newton"]  # a hard link elsewhere too (a snapshot by cp -al): not kept
    snapshot = work / "snapshot.usda"
    snapshot.hardlink_to(shared)
    edited = attrs.evolve(cfg, self_collision=True)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(out)), cache=Store(work / "cache"))
    assert (out / ROBOT_LAYER_FILES["base"]).stat().st_ino == kept
    assert not linked.is_symlink() and elsewhere.is_file()
    assert shared.stat().st_ino != snapshot.stat().st_ino and shared.read_bytes() == snapshot.read_bytes()
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "cold")), cache=False)
    assert units(out) == units(work / "cold")
    # Back to the first cfg: the whole output restored from the cache, the unchanged files left in place.
    modified.write_bytes(bytes(data))
    back = converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(out)), cache=Store(work / "cache"))
    assert back.restored and (out / ROBOT_LAYER_FILES["base"]).stat().st_ino == kept
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(work / "cold-first")), cache=False)
    assert units(out) == units(work / "cold-first")


@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_a_rebuild_takes_unchanged_layers_from_the_output_only_as_its_lazy_key_records_them(kind, folder, monkeypatch,
                                                                                            capsys):
    """A cfg-only rebuild takes each layer whose unit key is the one the output's lazy key records for it from
    the output folder (``kept:``), without looking it up in the build cache; a layer whose recorded key or
    bytes do not match (a forged or stale record, a file edited since) is looked up instead, and a record
    that is no table is ignored. Each rebuild equals a cold conversion."""
    import tomllib

    import tomli_w

    from usdforge.rules.outputs import key_file_name
    from usdforge.schemas.urdf_cfg import JointDriveCfg, PDGainsCfg

    cfg = cfg_class(kind)(asset_path=str(folder / "fx" / ("layered.urdf.xacro" if kind == "urdf" else "layered.xml")))
    work = folder / f"left-{kind}"
    out = work / "out"
    warnings.simplefilter("ignore")
    first = converter_for(kind)(attrs.evolve(cfg, usd_dir=str(out)), cache=Store(work / "cache"))
    sidecar = out / key_file_name(Path(first.usd_path).name)
    recorded = tomllib.loads(sidecar.read_text())
    assert {"base", "physics", "physx"} <= set(recorded["units"])

    def gains(value: float) -> dict:
        return {"joint_drive": JointDriveCfg(gains=PDGainsCfg(stiffness=value, damping=1.0))} if kind == "urdf" \
            else {"override_gain_prm": (value,)}

    def rebuild(step: int, value: float) -> Store:
        store = Store(work / "cache", build=f"left{step}")
        edited = attrs.evolve(cfg, **gains(value))
        converter_for(kind)(attrs.evolve(edited, usd_dir=str(out)), cache=store)
        converter_for(kind)(attrs.evolve(edited, usd_dir=str(work / f"cold{step}")), cache=False)
        assert units(out) == units(work / f"cold{step}"), step
        return store

    from usdforge.pipeline import cache

    reads: list[str] = []
    real = cache._read_regular_stat
    monkeypatch.setattr(cache, "_read_regular_stat", lambda name, *a: (reads.append(str(name)), real(name, *a))[1])
    store = rebuild(0, 1234.0)
    monkeypatch.setattr(cache, "_read_regular_stat", real)
    assert hits(store, "kept:base") == hits(store, "kept:physx") == 1 and hits(store, "layer:base") == 0
    assert hits(store, "kept:physics") == 0  # its key changed with the gains
    # A layer taken from the output is read twice: when taken (hashed) and when published (compared); the
    # link into the temporary folder is checked to be the file read, not read again.
    assert sum(name.endswith(ROBOT_LAYER_FILES["base"]) for name in reads) == 2, reads
    # `usdforge cache stats` counts them apart from the cache's lookups (they are none).
    from usdforge.pipeline.cli import main

    assert main(["cache", "stats", "--cache", str(work / "cache")]) == 0
    printed = capsys.readouterr().out
    kept = hits(store, "kept:")
    lookups = sum(v["hits"] + v["misses"] for k, v in store.stats()["last_build"].items() if not k.startswith("kept:"))
    assert f"and {kept} layer(s) taken unchanged" in printed and f"/{lookups} lookups hit" in printed, printed
    # A forged record: base's key is another; physx's file is not the bytes recorded; newton's file was
    # edited since (same size). Each is looked up in the cache instead, and the output equals a cold build.
    recorded = tomllib.loads(sidecar.read_text())
    recorded["units"]["base"] = "0" * 64
    recorded["outputs"][ROBOT_LAYER_FILES["physx"]] = "1" * 64
    sidecar.write_text(tomli_w.dumps(recorded))
    newton = out / ROBOT_LAYER_FILES["newton"]
    data = bytearray(newton.read_bytes())
    data[len(data) // 2] ^= 0x01
    newton.write_bytes(bytes(data))
    store = rebuild(1, 2345.0)
    for role in ("base", "physx", "newton"):
        assert hits(store, f"kept:{role}") == 0 and hits(store, f"layer:{role}") == 1, role
    assert hits(store, "kept:instances") == 1
    # A record that is no table: nothing taken from the output, nothing raised.
    recorded = tomllib.loads(sidecar.read_text())
    recorded["units"] = "base"
    sidecar.write_text(tomli_w.dumps(recorded))
    store = rebuild(2, 3456.0)
    assert hits(store, "kept:") == 0 and hits(store, "layer:base") == 1


@pytest.mark.parametrize("kind", ["urdf", "mjcf"])
def test_a_patched_layer_the_output_holds_already_is_linked_not_written(kind, folder, monkeypatch):
    """A layer made from a cached base (a drive edit patched into the physics layer; MJCF: the actuators'
    gains, into the mujoco layer) that the previous build
    wrote with the same bytes is linked into the temporary folder from the output (two names while the rule
    runs), not written as a new file there, and left in place; a layer patched to other bytes is written.
    Each rebuild equals a cold conversion."""
    from usdforge.rules.robot import layer_reuse
    from usdforge.schemas.urdf_cfg import JointDriveCfg, PDGainsCfg

    cfg = cfg_class(kind)(asset_path=str(folder / "fx" / ("layered.urdf.xacro" if kind == "urdf" else "layered.xml")))
    gains = {"joint_drive": JointDriveCfg(gains=PDGainsCfg(stiffness=1234.0, damping=56.0))} if kind == "urdf" \
        else {"override_gain_prm": (77.0,)}
    work = folder / f"patched-kept-{kind}"
    out = work / "out"
    physics = out / ROBOT_LAYER_FILES["physics" if kind == "urdf" else "mujoco"]
    warnings.simplefilter("ignore")
    converter_for(kind)(attrs.evolve(cfg, usd_dir=str(out)), cache=Store(work / "cache"))
    names: list[int] = []  # the patched layer's names as the rule ends
    real = layer_reuse.restored_objects
    monkeypatch.setattr(layer_reuse, "restored_objects", lambda: (names.append(physics.stat().st_nlink), real())[1])
    # Patched to new values: written. Then a PhysX-only edit on top: the same patched bytes, linked.
    for step, (fields, linked) in enumerate([(gains, 1), ({**gains, "self_collision": True}, 2)]):
        names.clear()
        before = physics.stat().st_ino
        edited = attrs.evolve(cfg, **fields)
        converter_for(kind)(attrs.evolve(edited, usd_dir=str(out)), cache=Store(work / "cache"))
        assert names == [linked], fields
        assert (physics.stat().st_ino == before) == (linked == 2)
        converter_for(kind)(attrs.evolve(edited, usd_dir=str(work / f"cold{step}")), cache=False)
        assert units(out) == units(work / f"cold{step}")


def test_an_output_left_in_place_is_hashed_before_storing_only_when_the_store_reads_it(folder, monkeypatch):
    """An output left in place whose bytes the store takes from the cache's object is not hashed again before
    storing (only as it is published): a PhysX-only rebuild hashes the restored base layer's two names once.
    One edited in place meanwhile with the same size is not stored (the object is the build's bytes) and is
    replaced as it is published; the rebuild and a restore into a fresh folder equal a cold build."""
    from usdforge.pipeline import converters
    from usdforge.rules.robot import layer_reuse

    cfg = cfg_class("urdf")(asset_path=str(folder / "fx" / "layered.urdf.xacro"))
    work = folder / "kept-hashed"
    out = work / "out"
    base = out / ROBOT_LAYER_FILES["base"]
    warnings.simplefilter("ignore")
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(out)), cache=Store(work / "cache"))
    hashed: list[str] = []
    real_same = converters.same_small_file
    monkeypatch.setattr(converters, "same_small_file",
                        lambda path, sha, names=1, data=None: (hashed.append(Path(path).name),
                                                               real_same(path, sha, names, data))[1])
    edited = attrs.evolve(cfg, self_collision=True)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(out)), cache=Store(work / "cache"))
    assert hashed.count(base.name) == 1
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "cold")), cache=False)
    assert units(out) == units(work / "cold")
    # Back, then the edit again (another cache: converted, not restored whole) with the base layer flipped in
    # place (same size) as the rule ends.
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(out)), cache=Store(work / "cache2"))
    kept = base.stat().st_ino
    real = layer_reuse.restored_objects

    def flip_then_list():
        assert base.stat().st_nlink == 2  # left in place: linked into the temporary folder
        data = bytearray(base.read_bytes())
        data[len(data) // 2] ^= 0x01
        with open(base, "r+b") as stream:
            stream.write(bytes(data))
        return real()

    monkeypatch.setattr(layer_reuse, "restored_objects", flip_then_list)
    rebuilt = converter_for("urdf")(attrs.evolve(edited, usd_dir=str(out)), cache=Store(work / "cache2"))
    monkeypatch.setattr(layer_reuse, "restored_objects", real)
    assert not rebuilt.restored and base.stat().st_ino != kept and units(out) == units(work / "cold")
    fresh = converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "fresh")), cache=Store(work / "cache2"))
    assert fresh.restored and units(work / "fresh") == units(work / "cold")


def test_an_output_left_in_place_is_stored_as_the_build_wrote_it_not_as_read(folder, monkeypatch):
    """The store is given an output left in place as the build wrote it, never read from the file it
    shares with the output: an editor writing it in place while the store runs, right after any check
    found it unchanged, reaches neither the cache (a restore into a fresh folder equals a cold build) nor
    the output (checked again and replaced as it is published). Here the physics layer, patched with the
    gains the output holds already (kept) and stored, not taken from a cache object. The store used to
    check it and then read it: the edit in between was stored."""
    from usdforge.pipeline import converters
    from usdforge.schemas.urdf_cfg import JointDriveCfg, PDGainsCfg

    cfg = cfg_class("urdf")(asset_path=str(folder / "fx" / "layered.urdf.xacro"))
    work = folder / "stored-as-built"
    out = work / "out"
    physics = out / ROBOT_LAYER_FILES["physics"]
    warnings.simplefilter("ignore")
    gains = attrs.evolve(cfg, joint_drive=JointDriveCfg(gains=PDGainsCfg(stiffness=1234.0, damping=56.0)))
    for step in (cfg, gains):
        converter_for("urdf")(attrs.evolve(step, usd_dir=str(out)), cache=Store(work / "cache"))
    edited = attrs.evolve(gains, self_collision=True)  # the physics layer: the same patched bytes, kept
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "cold")), cache=False)
    storing, edits = [], []
    real_same, real_put = converters.same_small_file, Store.put_entry

    def same_then_edit(path, sha, names=1, data=None):
        same = real_same(path, sha, names, data)
        if same and storing and Path(path).name == physics.name:  # checked while storing: edited right after
            with open(path, "ab") as stream:
                stream.write(b"# edited in place\n")
            edits.append(path)
        return same

    def put(self, *args, **kwargs):
        storing.append(True)
        try:
            return real_put(self, *args, **kwargs)
        finally:
            storing.clear()

    monkeypatch.setattr(converters, "same_small_file", same_then_edit)
    monkeypatch.setattr(Store, "put_entry", put)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(out)), cache=Store(work / "cache"))
    monkeypatch.setattr(converters, "same_small_file", real_same)
    monkeypatch.setattr(Store, "put_entry", real_put)
    assert physics.stat().st_nlink == 1 and units(out) == units(work / "cold")
    fresh = converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "fresh")), cache=Store(work / "cache"))
    assert fresh.restored and units(work / "fresh") == units(work / "cold"), edits


def test_an_output_is_left_in_place_by_comparing_it_with_the_restored_bytes_not_by_hashing_it(folder, monkeypatch):
    """A restored layer the output holds is compared with the bytes the cache gave (verified there), not
    hashed (``same_small_file``'s ``data``): no SHA-256 of the output. A one-byte change (same size) is seen
    whether the sha alone would say the same or not: the file is not taken; in a rebuild, an output flipped
    in place before it is replaced (a new file) and the result equals a cold build."""
    from usdforge.pipeline import cache as cache_module

    path = folder / "same.bin"
    data = bytes(range(256)) * 64
    path.write_bytes(data)
    sha = cache_module.sha256_bytes(data)
    hashed: list[int] = []
    real_hash = cache_module.sha256_bytes
    monkeypatch.setattr(cache_module, "sha256_bytes", lambda b: (hashed.append(len(b)), real_hash(b))[1])
    assert cache_module.same_small_file(path, sha, data=data) and not hashed
    flipped = bytearray(data)
    flipped[1000] ^= 0x01
    assert not cache_module.same_small_file(path, sha, data=bytes(flipped))  # the sha is the file's: bytes decide
    assert not cache_module.link_same_small_file(path, sha, folder / "linked.bin", bytes(flipped))
    assert not (folder / "linked.bin").exists() and path.stat().st_nlink == 1
    assert cache_module.link_same_small_file(path, sha, folder / "linked.bin", data) is not None
    assert path.stat().st_nlink == 2 and not hashed
    monkeypatch.setattr(cache_module, "sha256_bytes", real_hash)

    cfg = cfg_class("urdf")(asset_path=str(folder / "fx" / "layered.urdf.xacro"))
    work = folder / "compared"
    out = work / "out"
    warnings.simplefilter("ignore")
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(out)), cache=Store(work / "cache"))
    edited = attrs.evolve(cfg, self_collision=True)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "cold")), cache=False)
    base = out / ROBOT_LAYER_FILES["base"]
    kept = base.stat().st_ino
    changed = bytearray(base.read_bytes())
    changed[len(changed) // 2] ^= 0x01
    with open(base, "r+b") as stream:  # in place: the same file, size and name count
        stream.write(bytes(changed))
    rebuilt = converter_for("urdf")(attrs.evolve(edited, usd_dir=str(out)), cache=Store(work / "cache"))
    assert not rebuilt.restored and base.stat().st_ino != kept and units(out) == units(work / "cold")


def test_an_output_written_in_place_during_a_rebuild_reaches_neither_the_output_nor_the_cache(folder, monkeypatch):
    """An output left in place by a cfg-only rebuild shares its file with the rebuild's temporary folder
    until it is published: an editor writing it in place meanwhile (same name, same file) is seen when the
    rebuild hashes it again, before storing or publishing: the output gets the rebuild's bytes and the
    cache is not given the edit (a restore into a fresh folder equals a cold build)."""
    from usdforge.rules.robot import layer_reuse

    cfg = cfg_class("urdf")(asset_path=str(folder / "fx" / "layered.urdf.xacro"))
    work = folder / "edited-meanwhile"
    warnings.simplefilter("ignore")
    out = work / "out"
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(out)), cache=Store(work / "cache"))
    base = out / ROBOT_LAYER_FILES["base"]
    kept = base.stat().st_ino
    real = layer_reuse.restored_objects

    def edit_then_list():  # called as the rule ends, while the output's file is linked into the temporary folder
        assert base.stat().st_nlink == 2
        with open(base, "ab") as stream:
            stream.write(b"# edited in place\n")
        return real()

    monkeypatch.setattr(layer_reuse, "restored_objects", edit_then_list)
    edited = attrs.evolve(cfg, self_collision=True)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(out)), cache=Store(work / "cache"))
    monkeypatch.setattr(layer_reuse, "restored_objects", real)
    converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "cold")), cache=False)
    assert base.stat().st_ino != kept and units(out) == units(work / "cold")
    restored = converter_for("urdf")(attrs.evolve(edited, usd_dir=str(work / "fresh")), cache=Store(work / "cache"))
    assert restored.restored and units(work / "fresh") == units(work / "cold")
    # Written in place, or linked elsewhere, after the store and before the publish (as the lazy key is made):
    # replaced all the same (renaming one name of a file onto another would leave it as it is).
    from usdforge.pipeline import converters

    real_key = converters.key_to_toml

    def append(key):
        with open(base, "ab") as stream:
            stream.write(b"# edited in place\n")
        return real_key(key)

    def snapshot(key):
        (work / "snapshot").hardlink_to(base)
        return real_key(key)

    for change in (append, snapshot):
        converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(out)), cache=Store(work / "cache"))
        monkeypatch.setattr(converters, "key_to_toml", change)
        converter_for("urdf")(attrs.evolve(edited, usd_dir=str(out)), cache=Store(work / "cache"))
        monkeypatch.setattr(converters, "key_to_toml", real_key)
        assert base.stat().st_nlink == 1 and units(out) == units(work / "cold")
    # The same with a cache that stores nothing (read-only or full), for a cfg built for the first time.
    denser = attrs.evolve(cfg, link_density=1234.0)
    converter_for("urdf")(attrs.evolve(cfg, usd_dir=str(out)), cache=Store(work / "cache"))
    monkeypatch.setattr(Store, "put_entry", lambda *args, **kwargs: None)
    monkeypatch.setattr(converters, "key_to_toml", append)
    assert converter_for("urdf")(attrs.evolve(denser, usd_dir=str(out)), cache=Store(work / "cache")).converted
    monkeypatch.setattr(converters, "key_to_toml", real_key)
    converter_for("urdf")(attrs.evolve(denser, usd_dir=str(work / "cold-denser")), cache=False)
    assert base.stat().st_nlink == 1 and units(out) == units(work / "cold-denser")
    assert not converter_for("urdf")(attrs.evolve(denser, usd_dir=str(out)), cache=False).converted
