"""URDF ``<material>``: global definitions and the inline or named material of a visual."""

from __future__ import annotations

from lxml import etree

from usdforge.rules.robot.model import Material
from usdforge.rules.urdf.source import UrdfSource
from usdforge.rules.urdf.xml import numbers


def read_material(src: UrdfSource, element: etree._Element) -> Material | None:
    """A ``<material>``: its own colour/texture, else the global material it names (None, with a warning,
    when it names none that exists). A visual's material that names nothing and defines nothing, or names
    a global material defined twice, is a ConversionError: which material is meant cannot be told."""
    name = element.get("name")
    color_element, texture_element = element.find("color"), element.find("texture")
    if color_element is None and texture_element is None:
        if not name:
            raise src.fail("material with no name, colour or texture: it names no material", element)
        if name in src.duplicate_materials:
            lines = " and ".join(str(line) for line in src.duplicate_materials[name])
            raise src.fail(f"material '{name}' is defined more than once (lines {lines}): which one is meant "
                           "cannot be told", element)
        if name not in src.materials:
            src.warn(f"material '{name}' is not defined; ignored", element)
            return None
        return src.materials[name]
    color = None
    if color_element is not None:
        rgba = numbers(color_element, "rgba", 4, src.path)
        if rgba is None:
            src.warn("<color> without rgba ignored", color_element)
        else:
            color = tuple(min(max(v, 0.0), 1.0) for v in rgba)  # finite floats (numbers): np.clip's values
    texture = None
    if texture_element is not None:
        texture = src.file(texture_element, "filename", "texture")
    return Material(name or "", color, texture)


def read_global_materials(src: UrdfSource, root: etree._Element) -> None:
    """The ``<robot>``'s own ``<material>`` children → ``src.materials`` (the first of a name wins), then
    every named material a link's visual defines (colour or texture) that the top level does not: URDF
    materials are global by name, and urdfdom resolves a name wherever it is first defined (an ABB
    description defines ``orange`` in ``base_link`` and names it in ``link_1`` … ``link_6``)."""
    for element in root.findall("material"):
        name = element.get("name")
        if not name:
            src.warn("material without a name ignored (nothing can refer to it)", element)
            continue
        if name in src.materials:
            # An error where a link uses it (read_material); unused, it is only a warning.
            src.duplicate_materials.setdefault(name, [src.material_lines[name]]).append(element.sourceline or 0)
            src.warn(f"material '{name}' is defined twice", element)
            continue
        material = read_material(src, element)
        if material is not None:
            src.materials[name] = material
            src.material_lines[name] = element.sourceline or 0
    for element in root.iterfind("link/visual/material"):
        name = element.get("name")
        if not name or name in src.materials or (element.find("color") is None and element.find("texture") is None):
            continue
        material = read_material(src, element)
        if material is not None:
            src.materials[name] = material
            src.material_lines[name] = element.sourceline or 0
