"""Unit conversions between SI cfg values and USD, in one place.

USD angles are degrees, and angular drive gains are per degree: stiffness N·m/deg, damping N·m·s/deg.
"""

from __future__ import annotations

import math

DEGREES_PER_RADIAN = 180.0 / math.pi


def radians_to_degrees(value: float) -> float:
    """An angle (or angular limit) in rad → deg."""
    return value * DEGREES_PER_RADIAN


def degrees_to_radians(value: float) -> float:
    """An angle in deg → rad."""
    return value / DEGREES_PER_RADIAN


def per_radian_to_per_degree(value: float) -> float:
    """A gain per rad (N·m/rad, N·m·s/rad) → per deg, as UsdPhysics angular drives want."""
    return value / DEGREES_PER_RADIAN


def per_degree_to_per_radian(value: float) -> float:
    """A gain per deg → per rad."""
    return value * DEGREES_PER_RADIAN
