"""A fast reader of the TOML that ``tomli_w`` writes for a lazy key (``pipeline.lazy``), for every rebuild's
first step: ``tomllib`` is pure Python and took about 0.5 ms of a small robot's 10 ms cfg-only rebuild.

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
from typing import Any


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
