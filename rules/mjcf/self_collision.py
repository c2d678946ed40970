"""An MJCF ``self_collision`` edit patched into the cached physics layer instead of re-authoring it.

``self_collision`` reaches two layers only (``rules.robot.layer_fields``): physx, through one value
(patched for every robot: ``rules.robot.self_collision``), and MJCF's physics, through
``rules.mjcf.contacts.author_filtered_pairs``: the body pairs it filters (with the field off, every pair of
one articulation) and the joints it lets collide (``physics:collisionEnabled``). The physics layer is also
kept under its key without the field (the unit ``SELF_COLLISION_BASES["mjcf"]["physics"]``). A rebuild
that misses the layer's own key takes that base, removes what the filter author wrote (each body's
``physics:filteredPairs`` and its ``PhysicsFilteredPairsAPI``, the joints' ``physics:collisionEnabled``)
and runs that author again with the new value; when the pairs are the same either way (no articulation
with two colliding bodies, e.g. a drone), the base is the layer as it is.

usda writes a prim's properties in name order, so the bytes equal a cold conversion's
(tests/test_layer_fields.py and bench/rebuild.py compare them byte for byte). A base whose patched text
differs from it in any line the filter author does not write (a layer that does not read back as it was
written), or where ``PhysicsFilteredPairsAPI`` is not the last API schema of its prim (an author applied
one after the filter author), is not patched: the layer is authored as usual.
"""

from __future__ import annotations

import re
from typing import Any

from pxr import Sdf

from usdforge.rules.mjcf.bodies import BodyMap
from usdforge.rules.mjcf.contacts import author_filtered_pairs, never_touching_bodies
from usdforge.rules.mjcf.geoms import GeomMap
from usdforge.rules.mjcf.load import LoadedModel
from usdforge.rules.mjcf.usd import MjcfUsd
from usdforge.rules.robot.joints import joint_paths
from usdforge.rules.robot.layer_reuse import SELF_COLLISION_BASES, supply_patched
from usdforge.rules.robot.model import Robot
from usdforge.rules.robot.writer import link_paths
from usdforge.rules.usd import layer as sdf
from usdforge.rules.usd.stage import usd_identifier

#: What ``author_filtered_pairs`` writes in the physics layer.
PAIRS, PAIRS_API, COLLIDING = "physics:filteredPairs", "PhysicsFilteredPairsAPI", "physics:collisionEnabled"


def supply_self_collision_layers(loaded: LoadedModel, robot: Robot, bodies: BodyMap, geoms: GeomMap,
                                 self_collision: bool) -> None:
    """Inside a conversion with layer reuse (``rules.robot.layer_reuse``), give the writer the physics layer
    this ``self_collision`` asks for when the build cache holds it under its own key or under the key
    without the field (patched here); otherwise nothing (it is authored). The physx layer:
    ``rules.robot.self_collision``, for every robot."""
    supply_patched("physics", SELF_COLLISION_BASES["mjcf"]["physics"],
                   lambda text: _refiltered(text, loaded, robot, bodies, geoms, self_collision))


def _refiltered(text: str, loaded: LoadedModel, robot: Robot, bodies: BodyMap, geoms: GeomMap,
                self_collision: bool) -> str | None:
    """The physics layer ``text`` with what ``author_filtered_pairs`` wrote replaced by what it writes with
    ``self_collision``; None when the base is not as that author leaves it or does not read back as written
    (outside the filter's lines, the patched text must equal the base line for line)."""
    layer = Sdf.Layer.CreateAnonymous("self_collision.usda")
    root = Sdf.Path.absoluteRootPath.AppendChild(usd_identifier(robot.name))
    paths = _Paths(layer, root, robot)
    usd = MjcfUsd(loaded, robot, bodies, geoms, paths)
    never = never_touching_bodies(usd, self_collision)
    if never == never_touching_bodies(usd, not self_collision):
        return text  # the field changes nothing here (no articulation with two colliding bodies)
    try:
        if not layer.ImportFromString(text):
            return None
    except RuntimeError:  # pxr raises Tf errors as RuntimeError subclasses
        return None
    # Where the author writes (bodies' pairs, joints' flags), each looked up, and nowhere else in the text.
    found = [path for path in [*(p.AppendProperty(PAIRS) for p in paths.link_paths.values()),
                               *(p.AppendProperty(COLLIDING) for p in paths.joint_paths.values())]
             if layer.GetPropertyAtPath(path) is not None]
    pairs = sum(path.name == PAIRS for path in found)
    if pairs != text.count(f"rel {PAIRS} = ") or pairs != text.count(f'"{PAIRS_API}"') \
            or len(found) - pairs != text.count(f"bool {COLLIDING} = "):
        return None
    for path in found:
        spec = layer.GetPrimAtPath(path.GetPrimPath())
        if path.name == PAIRS:
            schemas = sdf.applied(spec)
            if schemas[-1:] != [PAIRS_API] or len(schemas) < 2:  # not last, or the only one (an emptied list op)
                return None
            spec.SetInfo("apiSchemas", Sdf.TokenListOp.Create(prependedItems=schemas[:-1]))
        spec.RemoveProperty(layer.GetPropertyAtPath(path))
    author_filtered_pairs(usd, self_collision, never)
    patched = layer.ExportToString()
    return patched if _unfiltered(patched) == _unfiltered(text) else None


#: What ``author_filtered_pairs`` writes in a physics layer's text: the pairs relationships (one target, or a
#: bracketed list) and the joints' flags (each on its own lines), the API schema in an ``apiSchemas`` list.
_FILTER_LINES = re.compile(rf"^[ \t]*(?:rel {re.escape(PAIRS)} = (?:<[^>\n]*>|\[\n(?:[^\n]*\n)*?[ \t]*\])"
                           rf"|bool {re.escape(COLLIDING)} = [01])\n", re.MULTILINE)


def _unfiltered(text: str) -> str:
    """A physics layer's text without what ``author_filtered_pairs`` writes (``_FILTER_LINES``)."""
    return _FILTER_LINES.sub("", text).replace(f', "{PAIRS_API}"', "")


class _Paths:
    """What ``author_filtered_pairs`` asks of the writer's context (``rules.robot.writer.RobotUsdContext``):
    the prim paths the writer gives links and joints, and the physics layer being patched."""

    def __init__(self, layer: Sdf.Layer, root: Sdf.Path, robot: Robot):
        self.root = root
        self._layer = layer
        self.link_paths = link_paths(root, robot)
        self.joint_paths = joint_paths(root, robot)

    def authored(self, role: str) -> bool:
        return role == "physics"

    def layer(self, role: str) -> Any:
        if role != "physics":
            raise KeyError(role)
        return self._layer
