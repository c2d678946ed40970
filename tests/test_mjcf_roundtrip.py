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
