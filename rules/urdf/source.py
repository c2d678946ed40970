"""The URDF file being read: its location, package roots, meshes and what every element reader shares.

``UrdfSource`` holds the state of one read (the file, its folder and package roots, the mesh library,
global materials, warnings gathered per kind) and the small parsers every element needs: located errors
and warnings, ``<origin>``, file attributes, and unknown data kept as custom attributes.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from lxml import etree

from usdforge.rules.conversion_warnings import note, warn
from usdforge.rules.errors import ConversionError
from usdforge.rules.files import MAX_MAGNITUDE, quote
from usdforge.rules.robot.meshes import MeshLibrary
from usdforge.rules.robot.model import Material
from usdforge.rules.urdf.paths import UnresolvedUri, resolve_uri
from usdforge.rules.urdf.xml import describe, numbers

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


def attribute_token(text: str) -> str:
    """A USD namespace component for ``text``: other characters become ``_``; a leading digit gets ``_``."""
    cleaned = _NOT_IDENTIFIER.sub("_", text) or "_"
    return "_" + cleaned if cleaned[0].isdigit() else cleaned


def rpy_matrix(rpy: tuple[float, float, float]) -> np.ndarray:
    """URDF's roll-pitch-yaw (fixed axes X, then Y, then Z) as a (3, 3) rotation: Rz(y) Ry(p) Rx(r), the
    product written out as urdfdom's ``Rotation::setFromRPY`` does (no trimesh import for a mesh-less robot)."""
    roll, pitch, yaw = (float(v) for v in rpy)
    sr, cr, sp, cp, sy, cy = (math.sin(roll), math.cos(roll), math.sin(pitch), math.cos(pitch),
                              math.sin(yaw), math.cos(yaw))
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def xml_text(element: etree._Element) -> str:
    """An element as compact XML text (for custom data)."""
    return etree.tostring(element, encoding="unicode", with_tail=False).strip()


def float_or_text(value: str) -> float | str:
    """An attribute value as a float when it is a finite number USD can store, else as given (text)."""
    try:
        number = float(value)
    except ValueError:
        return value
    return number if math.isfinite(number) and abs(number) <= MAX_MAGNITUDE else value


class Notes:
    """Notes (``rules.conversion_warnings.note``) about kinds of things kept or ignored harmlessly (an
    unknown tag, custom data), one per kind with a count."""

    def __init__(self, file: Path):
        self.file = file
        self._first: dict[str, tuple[str, int | None, int]] = {}

    def add(self, key: str, element: etree._Element) -> None:
        desc, line, count = self._first.get(key, (describe(element), element.sourceline, 0))
        self._first[key] = (desc, line, count + 1)

    def flush(self) -> None:
        for key, (desc, line, count) in self._first.items():
            times = f" ({count} occurrences; the first is here)" if count > 1 else ""
            note(self.file, f"{key}{times}", desc, line)


class UrdfSource:
    """One URDF file being read (see the module docstring)."""

    def __init__(self, path: Path, packages: dict[str, str], meshes: MeshLibrary, tree_root: str | None = None,
                 missing_noted: bool = False, allowed: tuple[str, ...] = ()):
        self.path = Path(path)
        self.folder = self.path.parent
        self.packages = packages
        #: The package search's bound (``rules.urdf.paths``).
        self.tree_root = tree_root
        #: Allowed roots, which may also hold packages.
        self.allowed = tuple(allowed)
        #: Missing files were already summed up in one warning (``allow_missing_files``): each is a note.
        self.missing_noted = missing_noted
        self.meshes = meshes
        self.notes = Notes(self.path)
        #: Global ``<material>`` definitions by name (``rules.urdf.materials``).
        self.materials: dict[str, Material] = {}
        #: Names of global materials defined more than once → the lines defining them.
        self.duplicate_materials: dict[str, list[int]] = {}
        self.material_lines: dict[str, int] = {}
        #: Mesh files whose own references (MTL, textures) were already checked.
        self.checked_references: set[Path] = set()

    def fail(self, problem: str, element: etree._Element | None = None) -> ConversionError:
        """A ``ConversionError`` naming this file and the element's line."""
        return ConversionError(self.path, problem, describe(element) if element is not None else None,
                               element.sourceline if element is not None else None)

    def warn(self, problem: str, element: etree._Element | None = None) -> None:
        """One ``ConversionWarning`` naming this file and the element's line."""
        warn(self.path, problem, describe(element) if element is not None else None,
             element.sourceline if element is not None else None)

    def origin(self, parent: etree._Element) -> np.ndarray:
        """The (4, 4) pose of a parent's ``<origin xyz rpy>`` (identity when absent)."""
        pose = np.eye(4)
        element = parent.find("origin")
        if element is None:
            return pose
        pose[:3, 3] = numbers(element, "xyz", 3, self.path, (0.0, 0.0, 0.0))
        pose[:3, :3] = rpy_matrix(numbers(element, "rpy", 3, self.path, (0.0, 0.0, 0.0)))
        return pose

    def file(self, element: etree._Element, attribute: str, what: str) -> Path | None:
        """The existing local file an attribute names, or None with a warning."""
        uri = element.get(attribute)
        if not uri:
            self.warn(f"{what} without a {attribute} ignored", element)
            return None
        try:
            path = resolve_uri(uri, self.folder, self.packages, self.tree_root, self.allowed)
        except UnresolvedUri as exc:
            self.missing(f"{what} '{quote(uri)}' ignored: {exc}", element)
            return None
        if not path.is_file():
            self.missing(f"{what} file {path} not found; ignored", element)
            return None
        return path

    def missing(self, problem: str, element: etree._Element) -> None:
        """A referenced file that is not there: a warning, or a note when ``missing_noted``."""
        if self.missing_noted:
            note(self.path, problem, describe(element), element.sourceline)
        else:
            self.warn(problem, element)

    def keep_unknown(self, element: etree._Element, known_children: tuple[str, ...],
                     known_attributes: tuple[str, ...], custom: dict, what: str) -> None:
        """Unknown child elements and attributes → ``custom`` (``urdf:<tag>`` XML text,
        ``urdf:attributes:<name>``), each kind warned about once."""
        for name, value in element.attrib.items():
            if name not in known_attributes:
                custom[f"urdf:attributes:{attribute_token(name)}"] = value
                self.notes.add(f"unknown attribute '{name}' on <{what}> kept as custom data "
                               f"urdf:attributes:{attribute_token(name)}", element)
        for child in element:
            if not isinstance(child.tag, str) or child.tag in known_children:
                continue
            key = f"urdf:{attribute_token(child.tag)}"
            custom[key] = f"{custom[key]}\n{xml_text(child)}" if key in custom else xml_text(child)
            self.notes.add(f"unknown element <{child.tag}> in <{what}> kept as custom data {key}", child)

    def keep_attributes(self, element: etree._Element, prefix: str, custom: dict) -> None:
        """Every attribute of ``element`` → ``custom[prefix:<name>]`` (a float when numeric)."""
        for name, value in element.attrib.items():
            custom[f"{prefix}:{attribute_token(name)}"] = float_or_text(value)
