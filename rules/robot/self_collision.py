"""A ``self_collision`` edit patched into the cached physx layer instead of re-authoring it.

The physx layer depends on ``self_collision`` only through the value of each articulation's
``physxArticulation:enabledSelfCollisions`` (``rules.robot.articulation``; the declarations of
``rules.robot.layer_fields`` and tests/test_layer_fields.py say and prove that no other unit but MJCF's
physics layer reads the field: ``rules.mjcf.self_collision`` patches that one). The layer is also kept under
its key without the field (the unit ``SELF_COLLISION_BASES[kind]["physx"]``); a rebuild that misses the
layer's own key sets the value on that base's value lines (``bool physxArticulation:enabledSelfCollisions =
0``, as Sdf writes a bool: the bytes equal a cold conversion's), when every mention of the attribute is
one; otherwise the layer is authored as usual. No pxr here.
"""

from __future__ import annotations

import re

from usdforge.rules.robot.layer_reuse import SELF_COLLISION_BASES, supply_patched

#: What ``rules.robot.articulation`` sets from ``self_collision`` in the physx layer.
ENABLED = "physxArticulation:enabledSelfCollisions"
#: The unit keeping the physx layer under its key without ``self_collision`` (``pipeline.layer_keys``).
PHYSX_BASE = SELF_COLLISION_BASES["urdf"]["physx"]
#: Its value line in the physx layer's text.
#: Spaces and tabs only: ``\s*`` would also take newlines, and a forged entry of blank lines would take
#: quadratic time.
_ENABLED_LINE = re.compile(rf"^([ \t]*bool {re.escape(ENABLED)} = )[01]$", re.MULTILINE)


def supply_physx_layer(self_collision: bool) -> None:
    """Inside a conversion with layer reuse (``rules.robot.layer_reuse``), give the writer the physx layer
    this ``self_collision`` asks for when the build cache holds it under its own key or under the key
    without the field (patched here); otherwise nothing (it is authored)."""
    supply_patched("physx", PHYSX_BASE, lambda text: enabled_set(text, self_collision))


def enabled_set(text: str, enabled: bool) -> str | None:
    """The physx layer ``text`` with every articulation's ``ENABLED`` set to ``enabled`` (a bool value line,
    as Sdf writes it: 0 or 1); None when the attribute is written in any other form."""
    patched, count = _ENABLED_LINE.subn(lambda match: match.group(1) + ("1" if enabled else "0"), text)
    return patched if count == text.count(ENABLED) else None
