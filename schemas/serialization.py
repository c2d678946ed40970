"""One cattrs converter for every cfg class, and the error that names the bad field's path.

``converter.unstructure(cfg)`` gives plain dicts; ``structure_cfg(data, Cls, path)`` builds a cfg and turns
any cattrs/attrs failure into one ``ConfigError`` line such as
``assets[3].cfg.scale: expected 3 finite non-zero scale factors, found (0.0, 1.0, 1.0)``.
Property-group fields (``rigid_props`` …) are tagged unions keyed on ``type`` = the class name, so a TOML
table picks any subclass. TOML has no null: ``None`` fields are left out, and a None whose default is
not None is written as ``false``.
"""

from __future__ import annotations

import json
import tomllib
import typing
from functools import partial
from typing import Any, TypeVar

import attrs
import cattrs
import tomli_w
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.strategies import configure_tagged_union, include_subclasses

from schemas.validators import FieldValueError

T = TypeVar("T")


class ConfigError(ValueError):
    """A cfg that cannot be built; ``str()`` is one line naming the field's path, expectation and finding."""


def _property_group_bases() -> list[type]:
    """Base classes whose fields accept any subclass (the physics property groups)."""
    from schemas import physics

    return [physics.MassPropertiesCfg, physics.RigidBodyBaseCfg, physics.CollisionBaseCfg,
            physics.MeshCollisionBaseCfg, *getattr(physics, "EXTRA_PROPERTY_GROUPS", ())]


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    # TOML cannot say null: `false` on an optional attrs-class field means None.
    def is_optional_attrs(tp: Any) -> bool:
        args = typing.get_args(tp)
        return (typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType"))
                and type(None) in args and len(args) == 2
                and any(attrs.has(a) for a in args if a is not type(None)))

    def structure_optional_attrs(value: Any, tp: Any) -> Any:
        if value is None or value is False:
            return None
        inner = next(a for a in typing.get_args(tp) if a is not type(None))
        return conv.structure(value, inner)

    conv.register_structure_hook_func(is_optional_attrs, structure_optional_attrs)
    for base in _property_group_bases():
        include_subclasses(base, conv, union_strategy=partial(
            configure_tagged_union, tag_name="type", tag_generator=lambda cls: cls.__name__, default=base))
    return conv


converter: cattrs.Converter = _make_converter()


def _describe(exc: BaseException) -> tuple[list[str], str]:
    """Path parts (relative) and the reason, for the first leaf error in a cattrs exception tree."""
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        with_notes, _without = exc.group_exceptions()
        for inner, note in with_notes:
            parts, reason = _describe(inner)
            name = getattr(note, "name", None)
            index = getattr(note, "index", None)
            head = f".{name}" if name is not None else f"[{index}]"
            return [head, *parts], reason
        if _without:
            return _describe(_without[0])
    if isinstance(exc, ForbiddenExtraKeysError):
        return [], f"unknown field(s) {', '.join(sorted(exc.extra_fields))} for {exc.cl.__name__}"
    if isinstance(exc, FieldValueError):
        return [f".{exc.field}"], exc.reason
    if isinstance(exc, KeyError):
        # cattrs' note already names the missing field.
        return [], "required field is missing"
    if isinstance(exc, (TypeError, ValueError)):
        message = str(exc)
        if "tagged union" in message or "not a valid" in message:
            return [], message
        return [], f"invalid value ({message})"
    return [], f"{type(exc).__name__}: {exc}"


def _join(prefix: str, parts: list[str]) -> str:
    path = prefix + "".join(parts)
    return path.lstrip(".") or "<root>"


def structure_cfg(data: Any, cls: type[T], path: str = "") -> T:
    """Build ``cls`` from plain data; any failure is one ``ConfigError`` naming the field's path."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path or '<root>'}: expected a table of {cls.__name__} fields, found {data!r}")
    try:
        return converter.structure(data, cls)
    except Exception as exc:  # noqa: BLE001 - every failure becomes one readable line
        parts, reason = _describe(exc)
        raise ConfigError(f"{_join(path, parts)}: {reason}") from None


def cfg_to_dict(cfg: Any) -> dict[str, Any]:
    """Plain dict of a cfg (None kept); property groups carry their ``type``."""
    return converter.unstructure(cfg)


def _drop_none(value: Any, template: Any = None) -> Any:
    """TOML form: None left out; None where the default is not None becomes ``false``."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if item is None:
                default = _default_of(template, key)
                if default is not None and default is not attrs.NOTHING:
                    out[key] = False
                continue
            out[key] = _drop_none(item, _field_type(template, key))
        return out
    if isinstance(value, (list, tuple)):
        return [_drop_none(item) for item in value]
    return value


def _field_type(cls: Any, key: str) -> Any:
    if cls is None or not attrs.has(cls):
        return None
    field = attrs.fields_dict(cls).get(key)
    if field is None:
        return None
    args = [a for a in typing.get_args(field.type) if a is not type(None)] if not isinstance(field.type, type) else [field.type]
    return next((a for a in args if attrs.has(a)), None)


def _default_of(cls: Any, key: str) -> Any:
    if cls is None or not attrs.has(cls):
        return None
    field = attrs.fields_dict(cls).get(key)
    if field is None:
        return None
    default = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return default.factory()
    return default


def cfg_to_toml(cfg: Any) -> str:
    """TOML text of a cfg; ``cfg_from_toml`` gives the same cfg back."""
    attrs.resolve_types(type(cfg))
    return tomli_w.dumps(_drop_none(cfg_to_dict(cfg), type(cfg)))


def cfg_from_toml(text: str, cls: type[T], path: str = "") -> T:
    """Build ``cls`` from TOML text (see ``cfg_to_toml``)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path or '<toml>'}: not valid TOML ({exc})") from None
    return structure_cfg(data, cls, path)


def cfg_to_json(cfg: Any) -> str:
    """Canonical JSON of a cfg: sorted keys, no whitespace (the digest hashes this)."""
    return json.dumps(cfg_to_dict(cfg), sort_keys=True, separators=(",", ":"), allow_nan=False)


def cfg_from_json(text: str, cls: type[T], path: str = "") -> T:
    """Build ``cls`` from JSON text."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path or '<json>'}: not valid JSON ({exc})") from None
    return structure_cfg(data, cls, path)
