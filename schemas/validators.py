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
    """A finite float ≥ 0, or None."""
    if value is not None and not (_is_number(value) and math.isfinite(value) and value >= 0.0):
        raise FieldValueError(attribute.name, f"expected a number >= 0 (or None), found {value!r}")


def positive_or_none(instance: Any, attribute: Any, value: float | None) -> None:
    """A finite float > 0, or None."""
    if value is not None and not (_is_number(value) and math.isfinite(value) and value > 0.0):
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


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _interval(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    left = "(" if lo_open or lo is None else "["
    right = ")" if hi_open or hi is None else "]"
    return f"{left}{'-inf' if lo is None else f'{lo:g}'}, {'inf' if hi is None else f'{hi:g}'}{right}"


def number_in_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
                    hi_open: bool = False, optional: bool = True):
    """A finite number in the interval [lo, hi] (open ends with lo_open/hi_open; None = unbounded), or None
    when ``optional``. Infinities are rejected: they cannot be written to JSON (the digest) and None already
    means "the engine's default"."""
    where = _interval(lo, hi, lo_open, hi_open)
    tail = " (or None)" if optional else ""

    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value is None and optional:
            return
        ok = _is_number(value) and math.isfinite(value)
        if ok and lo is not None:
            ok = value > lo if lo_open else value >= lo
        if ok and hi is not None:
            ok = value < hi if hi_open else value <= hi
        if not ok:
            raise FieldValueError(attribute.name, f"expected a finite number in {where}{tail}, found {value!r}")

    return check


def int_in_range(lo: int | None = None, hi: int | None = None, *, optional: bool = True):
    """An integer (not a bool) in [lo, hi], or None when ``optional``."""
    where = _interval(lo, hi, False, False)
    tail = " (or None)" if optional else ""

    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value is None and optional:
            return
        ok = isinstance(value, int) and not isinstance(value, bool)
        ok = ok and (lo is None or value >= lo) and (hi is None or value <= hi)
        if not ok:
            raise FieldValueError(attribute.name, f"expected an integer in {where}{tail}, found {value!r}")

    return check


def bool_or_none(instance: Any, attribute: Any, value: Any) -> None:
    """True, False or None."""
    if value is not None and not isinstance(value, bool):
        raise FieldValueError(attribute.name, f"expected true or false (or None), found {value!r}")


def bool_value(instance: Any, attribute: Any, value: Any) -> None:
    """True or False."""
    if not isinstance(value, bool):
        raise FieldValueError(attribute.name, f"expected true or false, found {value!r}")


def one_of(allowed: Iterable[str]):
    """One of the ``allowed`` tokens (None is not allowed)."""
    allowed = tuple(allowed)

    def check(instance: Any, attribute: Any, value: str) -> None:
        if value not in allowed:
            raise FieldValueError(attribute.name, f"expected one of {', '.join(map(repr, allowed))}, found {value!r}")

    return check


def float_or_none(value: Any) -> Any:
    """attrs converter: an int becomes a float (so the USD attribute is a float, not an int); None, floats
    and anything else (left for the validator to reject) pass through. Bools are not numbers here."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def file_name_or_none(instance: Any, attribute: Any, value: Any) -> None:
    """One file name (no folder: written in the output folder itself, where no other output of the
    conversion is named like it), or None."""
    if value is None:
        return
    if not isinstance(value, str) or value in ("", ".", "..") or any(c in value for c in "/\\\0"):
        raise FieldValueError(attribute.name, f"expected a file name without a folder (or None), found {value!r}")


def folder_list(instance: Any, attribute: Any, value: Any) -> None:
    """A list of folder names (strings), not one string."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) or not all(isinstance(v, str) for v in value):
        raise FieldValueError(attribute.name, f"expected a list of folders, found {value!r}")
