"""Articulations: the trees of bodies connected by joints, their roots, ``ArticulationRootAPI`` and Isaac
Sim's robot schema."""

from __future__ import annotations

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


def author_articulations(layers: RobotLayers, robot: Robot, link_paths: dict[str, Sdf.Path],
                         self_collision: bool) -> None:
    """``ArticulationRootAPI`` (and PhysX's articulation settings) on the root of every jointed tree."""
    jointed = {j.child for j in robot.joints} | {j.parent for j in robot.joints if j.parent}
    for root, tree in zip(tree_roots(robot), trees(robot)):
        if not (robot.fixed_base or any(name in jointed for name in tree)):
            continue  # a lone free body is no articulation
        sdf.apply_schemas(layers.over("physics", link_paths[root]), "PhysicsArticulationRootAPI")
        physx = layers.over("physx", link_paths[root])
        sdf.apply_schemas(physx, "PhysxArticulationAPI")
        sdf.attribute(physx, "physxArticulation:enabledSelfCollisions", T.Bool, bool(self_collision))


def author_robot_schema(root: Sdf.PrimSpec, robot_type: str, robot: Robot, link_paths: dict[str, Sdf.Path],
                        joint_paths: dict[str, Sdf.Path]) -> None:
    """Isaac Sim's robot schema: type, namespace, and every link and joint of the robot."""
    sdf.apply_schemas(root, "IsaacRobotAPI")
    sdf.attribute(root, "isaac:robotType", T.Token, robot_type)
    sdf.attribute(root, "isaac:namespace", T.String, robot.name)
    sdf.relationship(root, "isaac:physics:robotLinks", list(link_paths.values()))
    sdf.relationship(root, "isaac:physics:robotJoints", list(joint_paths.values()))
