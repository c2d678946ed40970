"""Reading URDF XML: lxml with ``rules.xml.SAFE_XML``, a recovery for a broken XML declaration, and the
small helpers every URDF reader needs (element descriptions, numbers, vectors). No pxr here.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from lxml import etree

from usdforge.rules.errors import ConversionError
from usdforge.rules.files import MAX_MAGNITUDE, quote
from usdforge.rules.xml import SAFE_XML

_DECLARATION = re.compile(rb"^\s*<\?xml[^>]*\?>", re.IGNORECASE)


def load_urdf_xml(path: Path, expanded: bytes | None = None) -> tuple[etree._Element, list[str]]:
    """The root element of the URDF at ``path`` and the recoveries made (messages for warnings).

    A malformed XML declaration (``<?xml versio="1.0"?>``) is dropped and the file re-parsed; any other
    XML error is a ConversionError naming the line.

    expanded: the document the xacro at ``path`` expanded to (``rules.urdf.xacro``), read instead of the
        file. Its lines are not the xacro's, so its elements carry no line: messages name the element.
    """
    from usdforge.rules.files import check_model_file

    check_model_file(path)
    if expanded is not None:
        try:
            root = etree.fromstring(expanded, SAFE_XML)
        except etree.XMLSyntaxError as exc:
            raise ConversionError(path, f"the xacro expanded to XML that is not well-formed: {exc.msg}") from None
        for element in root.iter():
            element.sourceline = 0  # lxml's "unknown"
        return _bounded(path, root), []
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConversionError(path, f"cannot read the file ({exc.strerror or exc})") from None
    try:
        return _bounded(path, etree.fromstring(data, SAFE_XML)), []
    except etree.XMLSyntaxError as exc:
        match = _DECLARATION.match(data)
        if match is not None:
            # Keep the line numbers: the declaration is replaced by as many newlines as it spanned.
            repaired = b"\n" * match.group(0).count(b"\n") + data[match.end():]
            try:
                root = etree.fromstring(repaired, SAFE_XML)
            except etree.XMLSyntaxError:
                pass  # the declaration was not the only problem: report the original error below
            else:
                return _bounded(path, root), [f"malformed XML declaration ignored ({exc.msg})"]
        raise ConversionError(path, f"not well-formed XML: {exc.msg}", line=exc.lineno) from None


def _bounded(path: Path, root: etree._Element) -> etree._Element:
    """``root``, unless the document holds more elements than usdforge converts (``rules.files``)."""
    from usdforge.rules.files import MAX_ELEMENTS

    if sum(1 for _ in root.iter()) > MAX_ELEMENTS:
        raise ConversionError(path, f"more than {MAX_ELEMENTS} XML elements: too large to convert")
    return root


def describe(element: etree._Element) -> str:
    """``<joint name="elbow">`` (or ``<visual>`` when unnamed), for messages."""
    tag = element.tag if isinstance(element.tag, str) else "?"
    name = element.get("name")
    return f'<{tag} name="{name}">' if name is not None else f"<{tag}>"


def numbers(element: etree._Element, attribute: str, count: int | tuple[int, ...], file: Path,
            default: tuple[float, ...] | None = None) -> tuple[float, ...] | None:
    """The attribute as ``count`` finite floats (``count`` may list allowed lengths); ``default`` when the
    attribute is absent. A malformed value is a ConversionError naming the element and line."""
    text = element.get(attribute)
    if text is None:
        return default
    allowed = (count,) if isinstance(count, int) else count
    try:
        values = tuple(map(float, text.split()))
    except ValueError:
        values = ()
    # -M <= v <= M is False for NaN and ±inf: finite and bounded in one comparison (hundreds of calls a robot)
    if len(values) not in allowed or not all(-MAX_MAGNITUDE <= v <= MAX_MAGNITUDE for v in values):
        want = " or ".join(str(n) for n in allowed)
        raise ConversionError(file, f"{attribute}=\"{quote(text)}\": expected {want} finite number(s) of at most "
                                    f"{MAX_MAGNITUDE:g} in magnitude", describe(element), element.sourceline)
    return values


def number(element: etree._Element, attribute: str, file: Path, default: float | None = None) -> float | None:
    """The attribute as one finite float, ``default`` when absent; ConversionError when malformed."""
    text = element.get(attribute)
    if text is None:
        return default
    try:  # float() of the text: what splitting it into one token gives, without the split and the tuple
        value = float(text)
    except ValueError:
        value = math.nan
    if -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE:
        return value
    return numbers(element, attribute, 1, file)[0]  # the ConversionError, worded as numbers words it
