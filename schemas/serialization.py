"""One cattrs converter for every cfg class, and the error that names the bad field's path.

The converter is built on first use (``get_converter()``; ``converter`` is the same object), not at
import; the code of each class's hooks is generated when a cfg of that class is first (un)structured, so a
one-off conversion pays only for the classes it uses. Cfg modules add their
own hooks with ``register_hooks``. ``get_converter().unstructure(cfg)`` gives plain dicts;
``structure_cfg(data, Cls, path)`` builds a cfg and turns any cattrs/attrs failure into one
``ConfigError`` line such as
``assets[3].cfg.scale: expected 3 finite non-zero scale factors, found (0.0, 1.0, 1.0)``.
Property-group fields (``rigid_props`` …) are tagged unions keyed on ``type`` = the class name, so a TOML
table picks any subclass. TOML has no null: ``None`` fields are left out, and a None whose default is
not None is written as ``false``.
"""

from __future__ import annotations

import json
import typing
from typing import Any, Callable, TypeVar

import attrs
import cattrs
import tomli_w
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from usdforge.schemas.validators import FieldValueError

T = TypeVar("T")


class ConfigError(ValueError):
    """A cfg that cannot be built; ``str()`` is one line naming the field's path, expectation and finding."""


def _property_group_bases() -> list[type]:
    """Base classes whose fields accept any subclass (the physics property groups)."""
    from usdforge.schemas import physics

    bases = list(physics.PROPERTY_GROUP_BASES)
    bases += [b for b in getattr(physics, "EXTRA_PROPERTY_GROUPS", ()) if b not in bases]
    return bases


def _import_backends() -> None:
    """Load the backends' cfg modules, whose classes join the groups: done before a group's classes are
    listed (``_include_property_groups``), so that every cfg module is loaded by then."""
    from usdforge.schemas import mujoco, newton, physx  # noqa: F401 - imported for their subclasses


class UnknownClassError(ValueError):
    """A property-group table whose ``type`` names no class of the group."""

    def __init__(self, tag: Any, expected: list[str]):
        super().__init__(f"unknown class {tag!r}; expected one of {', '.join(expected)}")
        self.tag = tag
        self.expected = expected


class TableExpectedError(ValueError):
    """A property group given as something other than a table."""


def _tagged_hooks(members: tuple[type, ...], structure_of: Callable[[type], Any]) -> Any:
    """Structure hook for ``members`` (a class first, then its subclasses) keyed on ``type``;
    ``structure_of(cls)`` gives one member's own (untagged) hook, asked for only when a table needs it."""
    base = members[0]
    by_tag = {m.__name__: m for m in members}
    expected = sorted(by_tag)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise TableExpectedError(f"expected a table of {base.__name__} fields (with an optional type = "
                                     f"one of {', '.join(expected)}), found {value!r}")
        if "type" not in value:
            return structure_of(base)(value, base)
        value = dict(value)
        tag = value.pop("type")
        cls = by_tag.get(tag) if isinstance(tag, str) else None
        if cls is None:
            raise UnknownClassError(tag, expected)
        return structure_of(cls)(value, cls)

    return structure


def _subclass_tree(cls: type) -> list[type]:
    """``cls`` and its subclasses, but for classes made for authoring only (``__usdforge_internal__``, as
    ``schemas.writer.effective_rigid_props`` makes: never read from or written to a cfg file)."""
    found, queue = [], [cls]
    while queue:
        klass = queue.pop(0)
        if klass not in found and not klass.__dict__.get("__usdforge_internal__", False):
            found.append(klass)
            queue.extend(klass.__subclasses__())
    return found


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

    # The same for an optional float whose default is not None (a material's friction): ``false`` is None.
    # A bool is never a valid float here, so this is unambiguous; ``true`` is rejected.
    def is_optional_float(tp: Any) -> bool:
        args = typing.get_args(tp)
        return (typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType"))
                and set(args) == {float, type(None)})

    def structure_optional_float(value: Any, tp: Any) -> Any:
        if value is None or value is False:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"expected a number (or false for None), found {value!r}")
        return float(value)

    conv.register_structure_hook_func(is_optional_float, structure_optional_float)

    # cattrs' default bool hook is bool(value): "no" and 0.5 would become True. Only true/false are bools.
    def structure_bool(value: Any, tp: Any) -> bool:
        if not isinstance(value, bool):
            raise TypeError(f"expected true or false, found {value!r}")
        return value

    def is_optional_bool(tp: Any) -> bool:
        args = typing.get_args(tp)
        return (typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType"))
                and set(args) == {bool, type(None)})

    conv.register_structure_hook(bool, structure_bool)

    # A list of names or folders: one string is not a list of its characters.
    def structure_strings(value: Any, tp: Any) -> tuple[str, ...]:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or \
                not all(isinstance(v, str) for v in value):
            raise TypeError(f"expected a list of strings, found {value!r}")
        return tuple(value)

    conv.register_structure_hook_func(lambda tp: tp == tuple[str, ...], structure_strings)
    conv.register_structure_hook_func(
        is_optional_bool, lambda value, tp: None if value is None else structure_bool(value, bool))
    _include_property_groups(conv, _property_group_bases())
    return conv


def _include_property_groups(conv: cattrs.Converter, bases: list[type]) -> None:
    """Property groups as tagged unions: a class of a group's tree structures from a table of its own
    fields or of any subclass's (``type`` = the class name, see ``_tagged_hooks``); a class of a group of
    several classes unstructures with ``type`` first (also a subclass made after the converter was built).

    What cattrs' ``include_subclasses`` strategy would do, but lazily: the code of a class's own hooks is
    generated the first time a cfg of that class is (un)structured, not for all ~30 classes up front (that,
    and the full garbage collection ``include_subclasses`` runs per group, was most of the converter's
    build time, paid by every one-off ``usdforge convert``). The trees are listed when a class of a group
    is first (un)structured, after the backends' cfg modules are loaded (``_import_backends``): a cfg that
    holds no property group loads none of them; which subclasses a group accepts is fixed from then on.
    (No garbage collection is needed before listing: cfg classes are not slotted, so attrs leaves no
    replaced class behind.)
    """
    groups = tuple(bases)
    listed: dict[str, Any] = {}

    def listing() -> dict[str, Any]:
        """{"trees": class → its subtree, "tagged": the classes of groups of several classes (unstructured
        with ``type``)}, listed on first use, after the backends' modules are loaded."""
        if not listed:
            _import_backends()
            trees: dict[type, tuple[type, ...]] = {}
            tagged_output: set[type] = set()
            for base in groups:
                group = _subclass_tree(base)
                for cls in group:
                    trees[cls] = tuple(_subclass_tree(cls))
                if len(group) > 1:
                    tagged_output.update(group)
            listed.update(trees=trees, tagged=tagged_output)
        return listed

    own_structure: dict[type, Any] = {}
    own_unstructure: dict[type, Any] = {}
    tagged: dict[type, Any] = {}

    def structure_of(cls: type) -> Any:
        if cls not in own_structure:
            own_structure[cls] = conv.gen_structure_attrs_fromdict(cls)
        return own_structure[cls]

    def unstructure_of(cls: type) -> Any:
        if cls not in own_unstructure:
            own_unstructure[cls] = conv.gen_unstructure_attrs_fromdict(cls)
        return own_unstructure[cls]

    def in_group(tp: Any) -> bool:  # no listing (no backend import) for the classes of no group
        return isinstance(tp, type) and issubclass(tp, groups)

    def in_tree(tp: Any) -> bool:
        return in_group(tp) and tp in listing()["trees"]

    def structure(value: Any, tp: type) -> Any:
        if tp not in tagged:
            tagged[tp] = _tagged_hooks(listing()["trees"][tp], structure_of)
        return tagged[tp](value, tp)

    def unstructure(obj: Any) -> dict[str, Any]:
        # Decided by the object's class (listing the groups only when a cfg holds one): ``type`` first for
        # a class of a group of several classes (also one made after the groups were listed), else the
        # class's own fields.
        cls = obj.__class__
        fields = unstructure_of(cls)(obj)
        if not any(issubclass(cls, base) and base in listing()["tagged"] for base in groups):
            return fields
        return {"type": cls.__name__, **{k: v for k, v in fields.items() if k != "type"}}

    conv.register_structure_hook_func(in_tree, structure)
    conv.register_unstructure_hook_func(in_group, unstructure)


_converter: cattrs.Converter | None = None
_hooks: list[Callable[[cattrs.Converter], None]] = []


def register_hooks(install: Callable[[cattrs.Converter], None]) -> None:
    """Have ``install(converter)`` register a cfg module's own hooks when the converter is built (at once
    when it is built already); installers run in registration order, after the hooks above."""
    _hooks.append(install)
    if _converter is not None:
        install(_converter)


def get_converter() -> cattrs.Converter:
    """The cattrs converter of every cfg class, built on first use."""
    global _converter
    if _converter is None:
        conv = _make_converter()
        for install in _hooks:
            install(conv)
        _converter = conv
    return _converter


def __getattr__(name: str) -> Any:
    if name == "converter":
        return get_converter()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    if isinstance(exc, UnknownClassError):
        return [".type"], str(exc)
    if isinstance(exc, TableExpectedError):
        return [], str(exc)
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
        return get_converter().structure(data, cls)
    except Exception as exc:  # noqa: BLE001 - every failure becomes one readable line
        parts, reason = _describe(exc)
        raise ConfigError(f"{_join(path, parts)}: {reason}") from None


def cfg_to_dict(cfg: Any) -> dict[str, Any]:
    """Plain dict of a cfg (None kept); property groups carry their ``type``."""
    return get_converter().unstructure(cfg)


def _drop_none(value: Any, template: Any = None) -> Any:
    """TOML form: None left out; None where the default is not None becomes ``false``."""
    if isinstance(value, dict):
        template = _tagged_class(template, value.get("type"))
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


def _tagged_class(template: Any, tag: Any) -> Any:
    """The subclass of ``template`` named by a ``type`` tag (the template itself when none matches)."""
    if template is None or not attrs.has(template) or not isinstance(tag, str) or tag == template.__name__:
        return template
    queue = list(template.__subclasses__())
    while queue:
        cls = queue.pop(0)
        if cls.__name__ == tag:
            return cls
        queue.extend(cls.__subclasses__())
    return template


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
    import tomli  # here: writing a cfg (every conversion) never reads TOML

    try:
        data = tomli.loads(text)
    except tomli.TOMLDecodeError as exc:
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
