"""The intermediate of a robot conversion: the robot model as read from its source, before any cfg rule
(``rules.robot.model.Robot``: links, joints, frames, inertia, shapes, materials, mesh references), kept
in the build cache so that a rebuild after a cfg edit does not read the source again. No pxr here.

Its key (``source_key``, given by the pipeline through ``intermediate_scope``) names the source and every
file it references by content, the absolute folders the model names (mesh paths are absolute), the cfg
fields that decide the reading (``rules.robot.layer_fields.READ_FIELDS``), the code and library versions:
never another cfg field, so every cfg edit that leaves those alone reuses it.

The form is JSON with tagged values (``encode`` / ``decode``): arrays as (dtype, shape, base64 bytes), so
every float comes back bit for bit; only the model's own classes and plain data are accepted. No pickle:
a cache is untrusted input (shared, copied from elsewhere). ``decode`` validates as it goes (types of
every field, array shapes and dtypes, class names) and raises ``ValueError`` on any doubt; the caller
then reads the source afresh. The warnings and notes the reading gave travel with it and are given again.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable, Iterator

import attrs
import numpy as np

from usdforge.rules.conversion_warnings import note, recording, warn
from usdforge.rules.robot import model

#: Bumped when the form changes: an old intermediate is then a miss.
FORMAT = 1
_FILE = "robot.json"
#: The classes an intermediate may hold, by name.
_CLASSES = {cls.__name__: cls for cls in (model.Robot, model.Link, model.Joint, model.Shape, model.Geometry,
                                          model.Inertial, model.Material, model.Frame, model.Mimic, model.Drive)}
_DTYPES = ("<f8", "<f4", "<i8", "<i4", "|b1")
_ITEMSIZE = {dtype: np.dtype(dtype).itemsize for dtype in _DTYPES}
_FIELD_NAMES = {cls: frozenset(f.name for f in attrs.fields(cls)) for cls in _CLASSES.values()}
_MAX_BYTES = 256 << 20

_SCOPE: ContextVar[tuple[Any, str] | None] = ContextVar("usdforge_intermediate", default=None)


class Unencodable(TypeError):
    """The model holds a value this form cannot carry (an in-memory mesh …): it is not cached."""


def encode_value(value: Any) -> Any:
    """``value`` as JSON data with tags for what JSON cannot say (tuples, arrays, paths, model classes)."""
    if value is None or isinstance(value, (bool, str)) or type(value) is int or type(value) is float:
        return value
    if isinstance(value, list) and type(value) is list:
        return [encode_value(v) for v in value]
    if type(value) is tuple:
        return {"~t": [encode_value(v) for v in value]}
    if type(value) is dict:
        return {"~d": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if isinstance(value, Path):
        return {"~p": str(value)}
    if type(value) is np.ndarray and value.dtype.str in _DTYPES:
        data = np.ascontiguousarray(value)
        return {"~a": [data.dtype.str, list(data.shape), base64.b64encode(data.tobytes()).decode("ascii")]}
    if isinstance(value, np.generic) and np.dtype(type(value)).str in _DTYPES:
        return {"~s": [np.dtype(type(value)).str, base64.b64encode(value.tobytes()).decode("ascii")]}
    if type(value).__name__ in _CLASSES and type(value) is _CLASSES[type(value).__name__]:
        return {"~c": type(value).__name__,
                "f": {f.name: encode_value(getattr(value, f.name)) for f in attrs.fields(type(value))}}
    raise Unencodable(f"cannot keep a {type(value).__name__} in the intermediate")


_PLAIN = frozenset((type(None), bool, str, int, float))


def decode_value(data: Any, depth: int = 0) -> Any:
    """The value ``encode_value`` gave ``data`` for; ValueError for anything it could not have given."""
    if type(data) in _PLAIN:
        return data
    if depth > 64:
        raise ValueError("nested too deep")
    depth += 1
    # Plain items are taken as they are, without a call each, and a tagged value is told by its one key
    # (most of a robot's values: a rebuild decodes about a thousand per robot).
    if type(data) is list:
        return [v if type(v) in _PLAIN else decode_value(v, depth) for v in data]
    if type(data) is not dict:
        raise ValueError(f"unexpected {type(data).__name__}")
    if len(data) == 2:
        cls = _CLASSES.get(data.get("~c")) if type(data.get("~c")) is str else None
        fields = data.get("f")
        if cls is None or type(fields) is not dict or fields.keys() != _FIELD_NAMES[cls]:
            raise ValueError(f"not a model class: {data.get('~c')!r}")
        return cls(**{name: value if type(value) in _PLAIN else decode_value(value, depth)
                      for name, value in fields.items()})
    if len(data) != 1:
        raise ValueError(f"unexpected {type(data).__name__}")
    [(tag, payload)] = data.items()
    if tag == "~a":
        if type(payload) is not list or len(payload) != 3:
            raise ValueError("malformed item")
        dtype, shape, text = payload
        if type(dtype) is not str or dtype not in _ITEMSIZE or type(shape) is not list or len(shape) > 4 \
                or type(text) is not str:
            raise ValueError("bad array")
        size = _ITEMSIZE[dtype]
        for n in shape:
            if type(n) is not int or n < 0:
                raise ValueError("bad array")
            size *= n
        raw = bytearray(binascii.a2b_base64(text, strict_mode=True))  # writable, as a read array is
        if len(raw) != size:
            raise ValueError("array size does not match its shape")
        return np.frombuffer(raw, dtype=dtype).reshape(shape)
    if tag == "~d":
        items = {}
        for pair in _list(payload):
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("bad mapping item")
            key, value = pair
            if type(key) is not str:
                key = decode_value(key, depth)
                if not isinstance(key, (str, int, float, bool, tuple)) and key is not None:
                    raise ValueError("bad mapping key")
            items[key] = value if type(value) in _PLAIN else decode_value(value, depth)
        return items
    if tag == "~t":
        return tuple([v if type(v) in _PLAIN else decode_value(v, depth) for v in _list(payload)])
    if tag == "~p":
        if type(payload) is not str:
            raise ValueError("bad path")
        return Path(payload)
    if tag == "~s":
        dtype, text = _list(payload, 2)
        if type(dtype) is not str or dtype not in _ITEMSIZE or type(text) is not str:
            raise ValueError("bad scalar")
        raw = binascii.a2b_base64(text, strict_mode=True)
        if len(raw) != _ITEMSIZE[dtype]:
            raise ValueError("bad scalar size")
        return np.frombuffer(raw, dtype=dtype)[0]
    raise ValueError("unknown tag")


def _list(value: Any, length: int | None = None) -> list:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        raise ValueError("malformed item")
    return value


def _check_robot(robot: Any) -> None:
    """ValueError unless ``robot`` has the shapes the writer relies on (types, (4, 4) poses, (3,) axes)."""
    def pose(value: Any) -> None:
        if not (isinstance(value, np.ndarray) and value.shape == (4, 4) and value.dtype == np.float64):
            raise ValueError("a pose is not a (4, 4) float array")

    if not isinstance(robot, model.Robot) or not isinstance(robot.name, str) or not isinstance(robot.source, Path):
        raise ValueError("not a robot")
    for frame in robot.frames:
        if not isinstance(frame, model.Frame):
            raise ValueError("bad frame")
        pose(frame.pose)
    for link in robot.links:
        if not isinstance(link, model.Link) or not isinstance(link.name, str):
            raise ValueError("bad link")
        pose(link.pose)
        for frame in link.frames:
            if not isinstance(frame, model.Frame):
                raise ValueError("bad frame")
            pose(frame.pose)
        for shape in link.shapes:
            if not isinstance(shape, model.Shape) or not isinstance(shape.geometry, model.Geometry):
                raise ValueError("bad shape")
            pose(shape.pose)
        inertial = link.inertial
        if inertial is not None and not (isinstance(inertial, model.Inertial)
                                         and np.shape(inertial.center_of_mass) == (3,)
                                         and np.shape(inertial.inertia) == (3, 3)):
            raise ValueError("bad inertial")
    for joint in robot.joints:
        if not isinstance(joint, model.Joint) or np.shape(joint.axis) != (3,):
            raise ValueError("bad joint")
        pose(joint.frame_in_parent)
        pose(joint.frame_in_child)


def encode(robot: model.Robot, messages: list) -> bytes:
    """The intermediate's bytes: ``robot`` and the warnings and notes reading it gave (in order)."""
    body = {"format": FORMAT, "robot": encode_value(robot),
            "messages": [{"note": type(m).__name__ == "ConversionNote", "file": m.file, "problem": m.problem,
                          "element": m.element, "line": m.line} for m in messages]}
    return json.dumps(body, separators=(",", ":"), allow_nan=True).encode()


def decode(data: bytes) -> tuple[model.Robot, list[dict[str, Any]]]:
    """(robot, messages) from ``encode``'s bytes; ValueError when they are not such bytes."""
    if len(data) > _MAX_BYTES:
        raise ValueError("too large")
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT or not isinstance(body.get("messages"), list):
        raise ValueError("not an intermediate of this format")
    try:
        robot = decode_value(body.get("robot"))
        _check_robot(robot)
    except (TypeError, KeyError, AttributeError, RecursionError, ValueError) as exc:
        raise ValueError(f"not a robot model ({exc})") from None
    messages = body["messages"]
    for m in messages:
        if not (isinstance(m, dict) and isinstance(m.get("file"), str) and isinstance(m.get("problem"), str)
                and (m.get("element") is None or isinstance(m["element"], str))
                and (m.get("line") is None or type(m["line"]) is int)):
            raise ValueError("bad message")
    return robot, messages


@contextmanager
def intermediate_scope(store: Any, source_key: str | None) -> Iterator[None]:
    """Within the block, ``cached_read`` keeps the robot as read in ``store`` under ``source_key`` (None:
    no caching)."""
    token = _SCOPE.set(None if store is None or source_key is None else (store, source_key))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def active_source() -> tuple[Any, str] | None:
    """(store, source key) of the enclosing ``intermediate_scope``, or None: what other intermediates of
    the same source (``rules.mjcf.slim``) are keyed by."""
    return _SCOPE.get()


def intermediate_key(source_key: str) -> str:
    """The cache key of the intermediate of the source ``source_key`` names."""
    return hashlib.sha256(f"intermediate:{FORMAT}:{source_key}".encode()).hexdigest()


def cached_read(read: Callable[[], model.Robot]) -> model.Robot:
    """``read()``'s robot, or, inside an ``intermediate_scope`` whose cache holds it, the robot it gave
    before (its warnings and notes given again, in order). Anything doubtful in the cache (corrupt,
    another form, not a model) is a miss: the source is read again and the intermediate replaced."""
    scope = _SCOPE.get()
    if scope is None:
        return read()
    store, source_key = scope
    key = intermediate_key(source_key)
    artifact = store.get_entry(key)
    store.record("intermediate", hit=artifact is not None and _FILE in artifact.files)
    if artifact is not None and _FILE in artifact.files:
        try:
            robot, messages = decode(artifact.files[_FILE])
        except ValueError:
            robot = None  # a doubtful intermediate: read the source again (and store a good one)
        if robot is not None:
            for m in messages:
                (note if m.get("note") else warn)(m["file"], m["problem"], m.get("element"), m.get("line"))
            return robot
    with recording() as messages:
        robot = read()
    try:
        data = encode(robot, messages)
    except Unencodable:
        return robot  # kept out of the cache; the conversion is unaffected
    store.put_entry(key, {_FILE: data}, kind="intermediate")
    return robot
