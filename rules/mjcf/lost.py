"""What MuJoCo models and USD (with MuJoCo 4.0's ``mjc:`` schema and Newton's) have no common form for:
never dropped silently. Each is a warning naming the element and exactly what is lost; what can be kept as
data is kept.

- flex (deformables): not written; the vertex bodies and their joints are (they are ordinary bodies).
- skin: not written (the bodies it is bound to are).
- plugin actuators (``mujoco.pid`` …): the ``MjcActuator`` carries MuJoCo's compiled gain and bias,
  which a plugin does not use; the plugin, its configuration and its internal state are named in the
  warning and kept as ``mjcf:plugin:*`` data on the actuator prim.
- SDF geoms: written as their mesh (``rules.mjcf.geoms``), visual and collider; engines collide with
  that mesh, not the signed distance field. The plugin and its configuration are kept as
  ``mjcf:sdf:plugin`` and ``mjcf:sdf:config:<key>`` on the collider prims.
"""

from __future__ import annotations

import mujoco
from pxr import Sdf

from usdforge.rules.mjcf.geoms import SDF
from usdforge.rules.mjcf.usd import MjcfUsd, set_custom


def _plugins(spec: mujoco.MjSpec) -> dict[str, tuple[str, dict[str, str]]]:
    """Named plugin instances → (plugin kind, configuration), read at once (MjSpec's element views do not
    outlive the list they came from)."""
    return {plugin.name: (plugin.plugin_name, {str(k): str(v) for k, v in dict(plugin.config).items()})
            for plugin in spec.plugins if plugin.name}


def _element_plugin(element, plugins: dict) -> tuple[str, dict[str, str]] | None:
    """(kind, configuration) of the plugin an element (geom, actuator) uses: a named instance, or its own."""
    own = element.plugin
    if own is None or not own.active:
        return None
    if own.name in plugins:
        return plugins[own.name]
    return "", {str(k): str(v) for k, v in dict(own.config).items()}


def _plugin_text(plugin: tuple[str, dict[str, str]] | None) -> str:
    """``mujoco.pid (kd=2, ki=4, kp=40)``: the plugin's kind and configuration."""
    if plugin is None:
        return "a plugin"
    config = ", ".join(f"{k}={v}" for k, v in sorted(plugin[1].items()))
    return (plugin[0] or "an inline plugin") + (f" ({config})" if config else "")


def lost_elements(model: mujoco.MjModel) -> list[str]:
    """Warnings for the flex and skin elements, which nothing here writes."""
    messages = []
    for flex in range(model.nflex):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_FLEX, flex) or f"flex{flex}"
        messages.append(f"flex '{name}' ({int(model.flex_vertnum[flex])} vertices, dimension "
                        f"{int(model.flex_dim[flex])}) is not written: USD here has no deformable form MuJoCo's "
                        "decoder or Newton reads; its vertex bodies and joints are kept, their elasticity, "
                        "edges, elements and contacts are lost")
    for skin in range(model.nskin):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SKIN, skin) or f"skin{skin}"
        messages.append(f"skin '{name}' ({int(model.skin_vertnum[skin])} vertices bound to "
                        f"{int(model.skin_bonenum[skin])} bodies) is not written: its deforming surface is lost "
                        "(the bodies it is bound to are kept)")
    return messages


def author_plugin_data(usd: MjcfUsd, colliders: dict[int, list[Sdf.Path]], actuators: dict[int, Sdf.Path]) -> None:
    """Warnings and ``mjcf:`` data for SDF geoms and plugin actuators (module docstring)."""
    model, spec = usd.loaded.model, usd.loaded.spec
    if not (model.nplugin and (any(int(t) == SDF for t in model.geom_type) or (model.actuator_plugin >= 0).any())):
        return
    # A copied MjSpec (the loader keeps one) loses its plugins' kind names: read them from a fresh parse.
    plugins = _plugins(mujoco.MjSpec.from_file(str(usd.loaded.path)))
    spec_geoms, spec_actuators = list(spec.geoms), list(spec.actuators)
    for geom in range(model.ngeom):
        if int(model.geom_type[geom]) != SDF:
            continue
        plugin = _element_plugin(spec_geoms[geom], plugins)
        name = model.geom(geom).name or f"geom{geom}"
        mesh = model.mesh(int(model.geom_dataid[geom])).name
        usd.warnings.append(f"SDF geom '{name}' ({_plugin_text(plugin)}) is written as its mesh '{mesh}' (visual "
                            "and collider): engines collide with that mesh (MuJoCo's decoder: its convex hull), "
                            "not the signed distance field; the plugin is kept as mjcf:sdf:* data")
        for path in colliders.get(geom, []):
            prim = usd.spec("mujoco", path)
            set_custom(prim, "mjcf:sdf:plugin", plugin[0] if plugin is not None else "")
            for key, value in sorted(plugin[1].items()) if plugin is not None else ():
                set_custom(prim, f"mjcf:sdf:config:{key}", str(value))
    for actuator in range(model.nu):
        if int(model.actuator_plugin[actuator]) < 0:
            continue
        plugin = _element_plugin(spec_actuators[actuator], plugins)
        name = model.actuator(actuator).name or f"actuator{actuator}"
        usd.warnings.append(f"actuator '{name}' is a plugin actuator ({_plugin_text(plugin)}, "
                            f"{int(model.actuator_actnum[actuator])} activation state(s)): MuJoCo's USD schema has "
                            "no plugin actuators, so its control law is lost; the MjcActuator keeps its "
                            "transmission and ranges, the plugin is kept as mjcf:plugin:* data")
        path = actuators.get(actuator)
        if path is not None and plugin is not None:
            prim = usd.spec("mujoco", path)
            set_custom(prim, "mjcf:plugin:name", plugin[0])
            for key, value in sorted(plugin[1].items()):
                set_custom(prim, f"mjcf:plugin:config:{key}", str(value))
