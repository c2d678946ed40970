"""Articulations: the trees of bodies connected by joints, their roots, ``ArticulationRootAPI`` and Isaac
Sim's robot schema."""

from __future__ import annotations

from collections.abc import Callable

from pxr import Sdf

from usdforge.rules.robot.layers import RobotLayers
from usdforge.rules.robot.model import Robot
from usdforge.rules.usd import layer as sdf

T = Sdf.ValueTypeNames


def trees(robot: Robot) -> list[list[str]]:
    """The bodies of each tree (connected by joints), in link order; each list starts with its root."""
    parent_of = {j.child: j.parent for j in robot.joints if j.parent is not None}

    def root_of(name: str) -> str:
        while name in parent_of:
            name = parent_of[name]
        return name

    found: dict[str, list[str]] = {}
    for link in robot.links:
        found.setdefault(root_of(link.name), []).append(link.name)
    return list(found.values())


def tree_roots(robot: Robot) -> list[str]:
    """Each tree's articulation root: ``robot.articulation_root`` in its tree, else the tree's root."""
    return [robot.articulation_root if robot.articulation_root in tree else tree[0] for tree in trees(robot)]


def world_jointed(robot: Robot) -> set[str]:
    """Links with a joint to the world: the roots of fixed trees (``fixed_base`` included)."""
    jointed = {j.child for j in robot.joints if j.parent is None}
    if robot.fixed_base:
        jointed.update(tree_roots(robot))
    return jointed


def articulation_prims(robot: Robot, root: Sdf.Path, link_paths: dict[str, Sdf.Path]) -> list[Sdf.Path]:
    """The prims that carry ``ArticulationRootAPI``, one per jointed tree (docs/usd_layout.md):

    - a robot whose only jointed tree is fixed to the world: the robot's Xform ``root``, as Isaac Lab's
      ``how-to/make_fixed_prim`` prescribes (PhysX reads the API on the root link of a tree fixed to the
      world as a floating base with a loop joint);
    - otherwise each tree's root body (a floating base, or several trees in one asset: one articulation
      each, which one Xform cannot carry).
    """
    jointed = {j.child for j in robot.joints} | {j.parent for j in robot.joints if j.parent}
    to_world = world_jointed(robot)
    found = [(root_link, tree) for root_link, tree in zip(tree_roots(robot), trees(robot))
             if robot.fixed_base or any(name in jointed for name in tree)]  # a lone free body is no articulation
    if len(found) == 1 and any(name in to_world for name in found[0][1]):
        return [root]
    return [link_paths[root_link] for root_link, _ in found]


def author_articulations(layers: RobotLayers, robot: Robot, link_paths: dict[str, Sdf.Path],
                         self_collision: Callable[[], bool]) -> None:
    """``ArticulationRootAPI`` (physics) and PhysX's articulation settings (physx) where
    ``articulation_prims`` says, each only when its layer is authored (``RobotLayers.authored``);
    ``self_collision`` is asked only for the physx layer."""
    prims = articulation_prims(robot, layers.root, link_paths)
    enabled = bool(self_collision()) if layers.authored("physx") else False
    for path in prims:
        if layers.authored("physics"):
            sdf.apply_schemas(layers.over("physics", path), "PhysicsArticulationRootAPI")
        if layers.authored("physx"):
            physx = layers.over("physx", path)
            sdf.apply_schemas(physx, "PhysxArticulationAPI")
            sdf.attribute(physx, "physxArticulation:enabledSelfCollisions", T.Bool, enabled)


def author_robot_schema(root: Sdf.PrimSpec, robot_type: str, robot: Robot, link_paths: dict[str, Sdf.Path],
                        joint_paths: dict[str, Sdf.Path]) -> None:
    """Isaac Sim's robot schema: type, namespace, and every link and joint of the robot."""
    sdf.apply_schemas(root, "IsaacRobotAPI")
    sdf.attribute(root, "isaac:robotType", T.Token, robot_type)
    sdf.attribute(root, "isaac:namespace", T.String, robot.name)
    sdf.relationship(root, "isaac:physics:robotLinks", list(link_paths.values()))
    sdf.relationship(root, "isaac:physics:robotJoints", list(joint_paths.values()))
