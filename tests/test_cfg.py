"""Cfg classes: round trips through dict / TOML / JSON, validators, one-line path errors, the digest."""

from __future__ import annotations

import json
import subprocess
import sys

import attrs
import pytest

from usdforge import schemas
from usdforge.schemas import (ConfigError, MassPropertiesCfg, MeshCollisionBaseCfg, MeshConverterCfg, RigidBodyBaseCfg,
                     cfg_from_json, cfg_from_toml, cfg_to_dict, cfg_to_json, cfg_to_toml, config_digest,
                     structure_cfg)


def every_cfg_class() -> list[type]:
    """Every attrs class ``schemas`` exports (the physics groups, the converter cfgs, …)."""
    return sorted((obj for obj in vars(schemas).values() if isinstance(obj, type) and attrs.has(obj)),
                  key=lambda cls: cls.__name__)


def default_instance(cls: type):
    required = {f.name: "asset.obj" for f in attrs.fields(cls) if f.default is attrs.NOTHING}
    return cls(**required)


@pytest.mark.parametrize("cls", every_cfg_class(), ids=lambda cls: cls.__name__)
def test_every_cfg_class_round_trips_through_dict_toml_and_json(cls):
    cfg = default_instance(cls)
    assert structure_cfg(cfg_to_dict(cfg), cls) == cfg
    assert cfg_from_toml(cfg_to_toml(cfg), cls) == cfg
    assert cfg_from_json(cfg_to_json(cfg), cls) == cfg


def test_mesh_cfg_with_every_field_set_round_trips():
    cfg = MeshConverterCfg(asset_path="chair.obj", usd_dir="out", usd_file_name="chair.usda",
                           force_usd_conversion=True, make_instanceable=False,
                           mass_props=MassPropertiesCfg(mass=2.0, density=500.0),
                           rigid_props=RigidBodyBaseCfg(rigid_body_enabled=True, kinematic_enabled=False,
                                                        disable_gravity=True),
                           mesh_collision_props=MeshCollisionBaseCfg(mesh_approximation_name="convexHull"),
                           translation=(1.0, 2.0, 3.0), rotation=(0.0, 0.0, 0.6, 0.8), scale=(0.001, 0.001, 0.001))
    for text, load in ((cfg_to_toml(cfg), cfg_from_toml), (cfg_to_json(cfg), cfg_from_json)):
        assert load(text, MeshConverterCfg) == cfg
    assert json.loads(cfg_to_json(cfg))["rotation"] == [0.0, 0.0, 0.6, 0.8]


@pytest.mark.parametrize("build, message", [
    (lambda: MassPropertiesCfg(mass=-1.0), "mass: expected a number >= 0"),
    (lambda: MassPropertiesCfg(density=-5.0), "density: expected a number >= 0"),
    (lambda: MeshConverterCfg(asset_path="a.obj", scale=(1.0, 0.0, 1.0)), "scale: expected 3 finite non-zero"),
    (lambda: MeshConverterCfg(asset_path="a.obj", rotation=(0.0, 0.0, 0.0, 2.0)), "rotation: expected a unit"),
    (lambda: MeshCollisionBaseCfg(mesh_approximation_name="sphere"), "mesh_approximation_name: expected one of"),
])
def test_validators_reject_impossible_values(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_rotation_tolerates_rounding():
    assert MeshConverterCfg(asset_path="a.obj", rotation=(0.0, 0.0, 0.7071068, 0.7071068)).rotation[3] > 0.7


@pytest.mark.parametrize("table, expected", [
    ({"asset_path": "a", "scale": [0, 1, 1]},
     "assets[3].cfg.scale: expected 3 finite non-zero scale factors, found (0.0, 1.0, 1.0)"),
    ({"asset_path": "a", "mass_props": {"mass": -2}},
     "assets[3].cfg.mass_props.mass: expected a number >= 0 (or None), found -2.0"),
    ({"asset_path": "a", "colour": "red"}, "assets[3].cfg: unknown field(s) colour for MeshConverterCfg"),
    ({"scale": [1, 1, 1]}, "assets[3].cfg.asset_path: required field is missing"),
    ({"asset_path": "a", "mesh_collision_props": {"mesh_approximation_name": "hull"}},
     "assets[3].cfg.mesh_collision_props.mesh_approximation_name: expected one of"),
])
def test_bad_cfg_data_is_one_line_naming_the_field_path(table, expected):
    with pytest.raises(ConfigError) as caught:
        structure_cfg(table, MeshConverterCfg, "assets[3].cfg")
    message = str(caught.value)
    assert message.startswith(expected) and "\n" not in message and "Traceback" not in message


@pytest.mark.parametrize("table, expected", [
    ({"asset_path": "a", "make_instanceable": "yes"}, "make_instanceable: invalid value (expected true or false, found 'yes')"),
    ({"asset_path": "a", "rigid_props": {"disable_gravity": 1}}, "rigid_props.disable_gravity: invalid value (expected true or false"),
])
def test_bools_accept_only_true_and_false(table, expected):
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        structure_cfg(table, MeshConverterCfg)


def test_digest_ignores_location_fields_and_sees_everything_else():
    base = MeshConverterCfg(asset_path="a.obj")
    moved = MeshConverterCfg(asset_path="/elsewhere/b.obj", usd_dir="/out", usd_file_name="x.usda")
    assert config_digest(base) == config_digest(moved)
    assert config_digest(base) != config_digest(attrs.evolve(base, scale=(2.0, 2.0, 2.0)))
    assert config_digest(base) != config_digest(attrs.evolve(base, mass_props=MassPropertiesCfg(mass=1.0)))
    assert config_digest(base, "mesh") != config_digest(base, "urdf")


def test_digest_includes_the_version(monkeypatch):
    import usdforge.schemas.digest

    before = config_digest(MeshConverterCfg(asset_path="a.obj"))
    monkeypatch.setattr(usdforge.schemas.digest, "__version__", "999.0")
    assert config_digest(MeshConverterCfg(asset_path="a.obj")) != before


def test_digest_is_stable_across_processes():
    code = ("from usdforge.schemas import MeshConverterCfg, MassPropertiesCfg, config_digest;"
            "print(config_digest(MeshConverterCfg(asset_path='a.obj', mass_props=MassPropertiesCfg(mass=0.1),"
            " rotation=(0.0, 0.0, 0.6, 0.8))))")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout.strip() for seed in ("1", "2")}
    assert len(outputs) == 1
    assert outputs.pop() == config_digest(MeshConverterCfg(asset_path="a.obj", mass_props=MassPropertiesCfg(mass=0.1),
                                                           rotation=(0.0, 0.0, 0.6, 0.8)))
