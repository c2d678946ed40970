"""MuJoCo's own USD decoder (``mujoco[usd]==4.0.0``, in its environment under ``build/``) reads back what
usdforge wrote from MJCF: ``rules.verify.roundtrip`` decodes the USD, compiles it and compares it with the
source's compiled model (counts, masses, inertias, limits, tendon lengths and actuator moments at 10
random configurations, a short passive rollout). One small fixture per class of loss (issue 33) under
``fixtures/roundtrip/``; the corpus and conformance models run the same check in ``doit verify``."""

from __future__ import annotations

from pathlib import Path

import pytest

from engines import BUILD, engine_python
from test_mjcf_support import CORPUS_CFG, converted
from usdforge.rules.verify.roundtrip import TENDON_TOLERANCE, decode_and_compare

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "roundtrip"


def roundtrip(path: Path, **cfg) -> dict:
    engine_python("mujoco-usd")  # made on first use
    return decode_and_compare(path, converted(path, **{**CORPUS_CFG, **cfg}).usd_path, BUILD)


def test_tendon_paths_keep_their_order_repeats_and_side_sites():
    """A repeated site, a pulley sharing a site between branches, and a side site on only one of two
    wrapping geoms: the decoder reads every tendon back with the source's length at 10 configurations
    (before: 'transmission target … not found' — the repeated targets collapsed)."""
    result = roundtrip(FIXTURES / "tendon_paths.xml")
    assert result["errors"] == []
    assert result["summary"]["tendons"] == 3 and result["summary"]["configurations"] == 10
    assert result["summary"]["tendon_error"] < TENDON_TOLERANCE


def test_joint_and_contact_parameters_read_back_without_deprecation_warnings():
    """Damping, armature, frictionloss, margin, gap, iterations and the time step read back equal, from the
    newton: attributes MuJoCo 4.0's decoder reads (before: a deprecation warning per joint, collider and
    scene attribute)."""
    result = roundtrip(FIXTURES / "joint_contact_parameters.xml")
    assert result["deprecations"] == []
    assert result["errors"] == []


def test_flex_and_plugin_actuators_are_named_as_lost_and_the_rest_reads_back():
    """No silent loss: the flex and the mujoco.pid actuator each get a warning naming the element and what
    is lost (before: none); the decoder reads the rest back, the flex listed as a decoder limit."""
    path = FIXTURES / "flex_and_plugin_actuator.xml"
    messages = converted(path, **CORPUS_CFG).warnings
    assert any("flex 'cloth' (9 vertices, dimension 2) is not written" in m for m in messages)
    assert any("actuator 'pid_shoulder' is a plugin actuator (mujoco.pid (kd=2, ki=4, kp=40)" in m for m in messages)
    result = roundtrip(path)
    assert result["errors"] == []
    assert [key for _, key in result["limits"]] == ["flex"]


def test_sdf_geoms_are_written_as_their_mesh_with_the_plugin_kept():
    """An SDF geom is its plugin-made mesh, visual and collider, with the plugin and its configuration as
    mjcf:sdf:* data and a warning naming the geom (before: 'geom type 8 has no USD geometry')."""
    from pxr import Usd

    path = FIXTURES / "sdf_geom.xml"
    result = converted(path, **CORPUS_CFG)
    assert any("SDF geom 'torus_geom' (mujoco.sdf.torus (radius1=0.35, radius2=0.15))" in m for m in result.warnings)
    stage = Usd.Stage.Open(str(result.usd_path))
    plugins = [p for p in stage.Traverse() if p.HasAttribute("mjcf:sdf:plugin")]
    assert [p.GetAttribute("mjcf:sdf:plugin").Get() for p in plugins] == ["mujoco.sdf.torus"]
    assert plugins[0].GetAttribute("mjcf:sdf:config:radius1").Get() == "0.35"
    assert roundtrip(path)["errors"] == []


def test_a_flat_height_field_reads_back_as_a_solid():
    """The height field is written as MuJoCo's solid (surface, walls, base) and the decoder reads it back;
    the ball lands on it as on the source's (before: "mesh volume is too small")."""
    result = roundtrip(FIXTURES / "flat_height_field.xml")
    assert result["errors"] == []
    assert result["summary"]["rollout_steps"] == 100


def test_moments_on_the_triangle_inequality_survive_single_precision():
    """A thin disk's A + B = C holds in the USD's floats too, so the decoder accepts the body (before:
    "inertia must satisfy A + B >= C"), and its inertia reads back within 1e-5."""
    result = roundtrip(FIXTURES / "thin_disk_inertia.xml")
    assert result["errors"] == []


def test_every_conformance_fixture_and_corpus_model_reads_back_equal():
    """The 52 MJCF conformance fixtures and 8 corpus models (one decoder process): no difference but the
    decoder's listed limits (spherical joints, sensors, mocap bodies; sources MuJoCo cannot compile are
    only decoded, compiled and rolled out), and no deprecation warning."""
    from test_mjcf_support import conformance_fixtures, corpus_models
    from usdforge.rules.verify.roundtrip import DECODER_LIMITS, decode_and_compare_many

    engine_python("mujoco-usd")
    sources = {**conformance_fixtures(), **corpus_models()}
    pairs = {name: (path, converted(path, **CORPUS_CFG).usd_path) for name, path in sources.items()}
    results = decode_and_compare_many(list(pairs.values()), BUILD)
    problems = {}
    for name, (_, usd) in pairs.items():
        result = results[str(Path(usd).resolve())]
        if "failed" in result or result["errors"] or result["deprecations"]:
            problems[name] = result.get("failed") or result["errors"][:3]
        assert {key for _, key in result.get("limits", [])} <= set(DECODER_LIMITS)
    assert problems == {}
    limited = {name for name, (_, usd) in pairs.items() if results[str(Path(usd).resolve())]["limits"]}
    assert {"agility_cassie", "ball_joints.xml", "bodies.xml", "meshes.xml"} <= limited


def test_shell_inertia_reaches_visual_only_geoms():
    """A shell-inertia mesh used only by a visual geom carries newton:massModel = shell on its prototype
    mesh, so the decoder reads it back (before: "mesh volume is too small")."""
    result = roundtrip(FIXTURES / "shell_inertia_visual.xml")
    assert result["errors"] == []


def test_the_oracle_names_the_element_and_the_size_of_a_difference(tmp_path):
    """doit verify's mujoco-roundtrip check on a USD whose repeated-site tendon lost its mjc:path:indices
    (as usdforge wrote it before): a failed check with a finding naming the tendon and how far off it is."""
    import shutil

    from pxr import Sdf, Usd

    from usdforge.rules.verify.roundtrip import roundtrip_check

    engine_python("mujoco-usd")
    source = FIXTURES / "tendon_paths.xml"
    shutil.copytree(converted(source, **CORPUS_CFG).usd_path.parent, tmp_path / "out")
    usd = tmp_path / "out" / "model.usda"
    layer = Sdf.Layer.FindOrOpen(str(tmp_path / "out" / "payloads" / "Physics" / "mujoco.usda"))
    tendon = layer.GetPrimAtPath("/tendon_roundtrip/Tendons/repeat")
    tendon.RemoveProperty(tendon.attributes["mjc:path:indices"])
    layer.Save()
    result = roundtrip_check(source, usd, Usd.Stage.Open(str(usd)), BUILD)
    assert result.status == "failed"
    messages = [f.message for f in result.errors]
    assert any(m.startswith("tendon 'repeat': length") and "(off by" in m for m in messages), messages


def test_a_rollout_difference_names_its_cause():
    """A pendulum written without its <option> (import_physics_scene=false): the rollout finding names what
    the decoded model simulates otherwise (gravity, the integrator), not only how far a body ended up
    (before: "after a 0.2 s passive rollout it is … m from where the source's is" and nothing more)."""
    result = roundtrip(FIXTURES / "scene_options.xml", import_physics_scene=False)
    rollout = [message for element, message in result["errors"] if element == "body 'tip'"]
    assert len(rollout) == 1, result["errors"]
    assert "gravity [0.0, 0.0, -9.81" in rollout[0] and "[0.0, 0.0, -30.0] in the source" in rollout[0], rollout
    assert "integrator mjINT_EULER decoded, mjINT_IMPLICITFAST in the source" in rollout[0], rollout
    assert roundtrip(FIXTURES / "scene_options.xml")["errors"] == []  # with its scene: equal
