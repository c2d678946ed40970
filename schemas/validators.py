"""attrs validators for cfg fields; each message says what was expected and what was found."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


class FieldValueError(ValueError):
    """An impossible cfg value; ``field`` names the attrs field, ``reason`` says expected vs found."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def non_negative_or_none(instance: Any, attribute: Any, value: float | None) -> None:
    """A float ≥ 0, or None."""
    if value is not None and not value >= 0.0:
        raise FieldValueError(attribute.name, f"expected a number >= 0 (or None), found {value!r}")


def positive_or_none(instance: Any, attribute: Any, value: float | None) -> None:
    """A float > 0, or None."""
    if value is not None and not value > 0.0:
        raise FieldValueError(attribute.name, f"expected a number > 0 (or None), found {value!r}")


def finite_vector(length: int):
    """A tuple of ``length`` finite floats."""

    def check(instance: Any, attribute: Any, value: tuple[float, ...]) -> None:
        if len(value) != length or not all(math.isfinite(v) for v in value):
            raise FieldValueError(attribute.name, f"expected {length} finite numbers, found {value!r}")

    return check


def non_zero_scale(instance: Any, attribute: Any, value: tuple[float, float, float]) -> None:
    """Three finite, non-zero scale factors (a negative factor mirrors; zero collapses the mesh)."""
    if len(value) != 3 or not all(math.isfinite(v) and v != 0.0 for v in value):
        raise FieldValueError(attribute.name, f"expected 3 finite non-zero scale factors, found {value!r}")


def unit_quaternion(tolerance: float = 1e-3):
    """Four numbers whose norm is 1 within ``tolerance``."""

    def check(instance: Any, attribute: Any, value: tuple[float, float, float, float]) -> None:
        if len(value) != 4 or not all(math.isfinite(v) for v in value):
            raise FieldValueError(attribute.name, f"expected a quaternion of 4 finite numbers, found {value!r}")
        norm = math.sqrt(sum(v * v for v in value))
        if abs(norm - 1.0) > tolerance:
            raise FieldValueError(attribute.name, f"expected a unit quaternion (norm 1 ± {tolerance}), found {value!r} with norm {norm:.6g}")

    return check


def one_of_or_none(allowed: Iterable[str]):
    """One of the ``allowed`` tokens, or None."""
    allowed = tuple(allowed)

    def check(instance: Any, attribute: Any, value: str | None) -> None:
        if value is not None and value not in allowed:
            raise FieldValueError(attribute.name, f"expected one of {', '.join(map(repr, allowed))}, found {value!r}")

    return check


def tuple_of_floats(value: Iterable[float]) -> tuple[float, ...]:
    """attrs converter: any iterable of numbers → tuple of floats (TOML/JSON give lists)."""
    return tuple(float(v) for v in value)
