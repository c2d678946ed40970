"""A fast reader of the TOML that ``tomli_w`` writes for a lazy key (``pipeline.lazy``), for every rebuild's
first step: ``tomllib`` is pure Python and took about 0.5 ms of a small robot's 10 ms cfg-only rebuild;
and ``dumps``, ``tomli_w.dumps``'s text made without its character-by-character string formatting.

It reads only the forms ``tomli_w.dumps`` gives plain data: ``key = value`` lines (bare or basic-string keys,
no dotted ones), ``[table.sub]`` headers, basic strings (no ``\\U`` escape), decimal integers,
floats (``str(float)``, ``inf``, ``nan``), booleans, arrays (one item a line, a trailing comma) and inline
tables on one line. Anything else - a comment, a literal or multi-line string, a tab, a key or table given
twice, a form it does not know - raises ``Unread``: the caller then reads the text with ``tomllib``, so
the result is always ``tomllib.loads``'s (tests/test_lazy.py compares both on written keys and on
thousands of edited ones).
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator


class Unread(ValueError):
    """The text holds a form this reader does not take: read it with ``tomllib``."""


_BARE = r"[A-Za-z0-9_-]+"
#: A basic string with the escapes ``tomli_w`` writes (``\uXXXX``, not ``\U``; no raw control character, DEL or tab).
_STRING = r'"(?:[^"\\\x00-\x1f\x7f]|\\[btnfr"\\]|\\u[0-9A-Fa-f]{4})*"'
_KEY = re.compile(rf"({_BARE}|{_STRING})")
_KEY_LINE = re.compile(rf"({_BARE}|{_STRING}) = ")
_TABLE = re.compile(rf"\[((?:{_BARE}|{_STRING})(?:\.(?:{_BARE}|{_STRING}))*)\]")
_STRING_AT = re.compile(_STRING)
_UNICODE = re.compile(r"\\u([0-9A-Fa-f]{4})")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_SPECIAL = {"true": True, "false": False, "inf": float("inf"), "-inf": float("-inf"), "+inf": float("inf"),
            "nan": float("nan"), "-nan": float("nan"), "+nan": float("nan")}
_WORD = re.compile(r"[+-]?[a-z]+")


def _key(text: str) -> str:
    """A bare or basic-string key (or string value) as TOML reads it."""
    if not text.startswith('"'):
        return text
    if "\\" not in text:
        return text[1:-1]
    # The escapes above are JSON's too; but JSON takes a lone surrogate (\ud800), which TOML refuses.
    if any(0xD800 <= int(code, 16) <= 0xDFFF for code in _UNICODE.findall(text)):
        raise Unread("a surrogate")
    return json.loads(text)


def loads(text: str) -> dict[str, Any]:
    """The document ``text`` holds, as ``tomllib.loads`` gives it; ``Unread`` for a form not read here."""
    if "\r" in text or "\t" in text or ("#" in text and _has_comment(text)):
        raise Unread("a comment, tab or carriage return")
    document: dict[str, Any] = {}
    table = document
    tables: set[tuple[str, ...]] = set()  # the tables given by a header
    made = {id(document)}  # the tables a header made (an inline table is no table to extend)
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line:
            continue
        if line[0] == "[":
            match = _TABLE.fullmatch(line)
            if match is None:
                raise Unread(f"line {index}")
            path = tuple(_key(part) for part in _KEY.findall(match.group(1)))
            if path in tables:
                raise Unread("a table given twice")
            tables.add(path)
            table = document
            for part in path:
                if part not in table:
                    table[part] = {}
                    made.add(id(table[part]))
                table = table[part]
                if id(table) not in made:
                    raise Unread("a table over a value")
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            raise Unread(f"line {index}")
        key = _key(match.group(1))
        if key in table:
            raise Unread("a key given twice")
        rest = line[match.end():]
        if rest == "[":  # an array, one item a line
            items = []
            while True:
                if index >= len(lines):
                    raise Unread("an array without its end")
                item = lines[index]
                index += 1
                if item == "]":
                    break
                if not item.startswith("    ") or not item.endswith(","):
                    raise Unread(f"line {index}")
                value, end = _value(item, 4)
                if end != len(item) - 1:
                    raise Unread(f"line {index}")
                items.append(value)
            table[key] = items
            continue
        value, end = _value(rest, 0)
        if end != len(rest):
            raise Unread(f"line {index}")
        table[key] = value
    return document


def _has_comment(text: str) -> bool:
    """Whether a ``#`` lies outside every string (a comment)."""
    return "#" in _STRING_AT.sub("", text)


def _value(text: str, at: int) -> tuple[Any, int]:
    """The value starting at ``text[at]`` (on one line) and where it ends."""
    if at >= len(text):
        raise Unread("no value")
    first = text[at]
    if first == '"':
        match = _STRING_AT.match(text, at)
        if match is None:
            raise Unread("a string")
        return _key(match.group()), match.end()
    if first == "{":
        if text.startswith("{}", at):
            return {}, at + 2
        if not text.startswith("{ ", at):
            raise Unread("an inline table")
        at += 2
        table: dict[str, Any] = {}
        while True:
            match = _KEY_LINE.match(text, at)
            if match is None:
                raise Unread("an inline table's key")
            key = _key(match.group(1))
            if key in table:
                raise Unread("a key given twice")
            table[key], at = _value(text, match.end())
            if text.startswith(", ", at):
                at += 2
            elif text.startswith(" }", at):
                return table, at + 2
            else:
                raise Unread("an inline table")
    if first == "[":
        if text.startswith("[]", at):
            return [], at + 2
        raise Unread("an array inside a line")  # tomli_w writes a non-empty one over lines
    match = _NUMBER.match(text, at)
    if match is not None and match.end() < len(text) and text[match.end()] not in ", }":
        match = None  # a number followed by more (1979-05-27, 0x10, 1_000): not read here
    if match is not None:
        number = match.group()
        return (float(number) if match.group(1) or match.group(2) else int(number)), match.end()
    match = _WORD.match(text, at)
    if match is not None and match.group() in _SPECIAL:
        return _SPECIAL[match.group()], match.end()
    raise Unread("a value")


#: What ``tomli_w`` escapes in a basic string: the quote, the backslash and every ASCII control but tab.
_ESCAPED = re.compile(r'["\\\x00-\x08\x0a-\x1f\x7f]')
_COMPACT = {"\b": "\\b", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_BARE_KEY = re.compile(_BARE)


class Unwritten(ValueError):
    """A document holding a form ``dumps`` does not write (an array of tables, another type)."""


def _string(text: str) -> str:
    """``text`` as ``tomli_w`` writes a basic string."""
    if _ESCAPED.search(text) is None:
        return f'"{text}"'
    return '"' + _ESCAPED.sub(lambda m: _COMPACT.get(m.group()) or f"\\u{ord(m.group()):04x}", text) + '"'


def _key_part(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _literal(value: Any, level: int) -> str:
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int or kind is float:
        return str(value)
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        indent = "    " * (level + 1)
        return "[\n" + ",\n".join(indent + _literal(item, level + 1) for item in value) + f",\n{'    ' * level}]"
    if kind is dict:
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_key_part(k)} = {_literal(v, 0)}" for k, v in value.items()) + " }"
    raise Unwritten(f"a {kind.__name__}")


def dumps(document: dict[str, Any]) -> str:
    """``tomli_w.dumps(document)`` for plain data (str keys; str, int, float, bool, list, tuple and dict
    values); ``Unwritten`` for what it would write as an array of tables or does not take."""
    return "".join(_table_chunks(document, ""))


def _table_chunks(table: dict[str, Any], name: str) -> Iterator[str]:
    """``tomli_w``'s ``gen_table_chunks`` without arrays of tables."""
    yielded = False
    literals, tables = [], []
    for key, value in table.items():
        if type(key) is not str:
            raise Unwritten("a key that is not a string")
        if type(value) is dict:
            tables.append((key, value))
        else:
            if type(value) in (list, tuple) and value and all(type(item) is dict for item in value) and \
                    not all(len(f"    {_literal(item, 0)},") <= 100 and "\n" not in _literal(item, 0) for item in value):
                raise Unwritten("an array of tables")
            literals.append((key, value))
    if name and (literals or not tables):
        yielded = True
        yield f"[{name}]\n"
    for key, value in literals:
        yielded = True
        yield f"{_key_part(key)} = {_literal(value, 0)}\n"
    for key, value in tables:
        if yielded:
            yield "\n"
        else:
            yielded = True
        part = _key_part(key)
        yield from _table_chunks(value, f"{name}.{part}" if name else part)
