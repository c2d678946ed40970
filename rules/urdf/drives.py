"""``UrdfConverterCfg.joint_drive`` → a ``Drive`` on every revolute, continuous and prismatic joint.

Gains are SI per radian here (N·m/rad, N·m·s/rad; N/m, N·s/m); ``rules.robot.writer`` writes them per degree
for angular drives through ``schemas.units``. A value may be a table of joint-name regular expressions
(``re.fullmatch``); a joint no pattern matches gets the default, a joint two patterns match is an error,
and a pattern that matches no joint is a warning (a likely typo).

``NaturalFrequencyGainsCfg``: the equivalent inertia ``m`` of each joint is the diagonal entry of the
joint-space mass matrix at the rest pose, computed from the robot's own inertials after merging
(``rules.robot.inertia.joint_space_inertia``, the composite-rigid-body diagonal), not from a MuJoCo model:
MuJoCo cannot compile half of the corpus URDFs (ASCII STL, DAE colliders, PR2's inertias), and this way
the gains always match the masses written to USD. The gains are ``solvers.drive_gains``'s
``natural_frequency_gains`` (stiffness m·ω², damping 2·r·ω·m).

Mimic followers get drives with zero stiffness and damping (and the leader's effort limit still applies to
them through their own ``<limit effort>``): PhysX requires zero gains on a joint that has a mimic
coupling, and the coupling, not a drive, moves them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from usdforge.rules.conversion_warnings import warn
from usdforge.rules.errors import ConversionError
from usdforge.rules.robot.inertia import joint_space_inertia
from usdforge.rules.robot.model import Drive, Robot
from usdforge.schemas.urdf_cfg import JointDriveCfg, NaturalFrequencyGainsCfg

ONE_DOF = ("revolute", "continuous", "prismatic")


class _Resolver:
    """Per-joint values of cfg fields that may be tables of patterns; remembers which patterns matched."""

    def __init__(self, source: Path):
        self.source = source
        self.used: dict[str, set[str]] = {}
        self.tables: dict[str, dict] = {}

    def __call__(self, value: Any, joint: str, field: str) -> Any:
        if not isinstance(value, dict):
            return value
        self.tables[field] = value
        hits = [pattern for pattern in value if re.fullmatch(pattern, joint)]
        self.used.setdefault(field, set()).update(hits)
        if len(hits) > 1:
            raise ConversionError(self.source, f"joint '{joint}' matches several patterns of joint_drive.{field} "
                                               f"({', '.join(repr(h) for h in hits)}): make them exclusive")
        return value[hits[0]] if hits else None

    def report_unused(self) -> None:
        for field, table in self.tables.items():
            unused = [pattern for pattern in table if pattern not in self.used.get(field, set())]
            if unused:
                warn(self.source, f"joint_drive.{field}: pattern(s) {', '.join(repr(p) for p in unused)} match no "
                                  "movable joint")


def apply_joint_drives(robot: Robot, cfg: JointDriveCfg | None, source: Path) -> None:
    """Set ``joint.drive`` for every 1-DoF joint of ``robot`` from ``cfg`` (None: no drives, only effort
    limits). Needs every link's inertial for natural-frequency gains."""
    if cfg is None:
        return
    resolve = _Resolver(source)
    gains = cfg.gains
    natural = isinstance(gains, NaturalFrequencyGainsCfg)
    inertia = joint_space_inertia(robot) if natural else {}
    for joint in robot.joints:
        if joint.kind not in ONE_DOF:
            continue
        kind = resolve(cfg.drive_type, joint.name, "drive_type") or "force"
        target = resolve(cfg.target_type, joint.name, "target_type") or "position"
        passive_damping = joint.damping or 0.0
        if natural:
            frequency = resolve(gains.natural_frequency, joint.name, "gains.natural_frequency")
            ratio = resolve(gains.damping_ratio, joint.name, "gains.damping_ratio")
            ratio = 0.005 if ratio is None else ratio
            if frequency is None:
                stiffness, damping = 0.0, passive_damping
            elif target == "velocity":
                stiffness, damping = 0.0, inertia[joint.name] * frequency
            else:
                from usdforge.solvers.drive_gains import natural_frequency_gains  # noqa: PLC0415 - imports JAX's package

                stiffness, damping = natural_frequency_gains(inertia[joint.name], frequency, ratio)
        else:
            stiffness = resolve(gains.stiffness, joint.name, "gains.stiffness")
            damping = resolve(gains.damping, joint.name, "gains.damping")
            stiffness = 0.0 if stiffness is None else stiffness
            damping = passive_damping if damping is None else damping
            if target == "velocity":
                # Isaac Lab: stiffness is the drive's strength in velocity space, i.e. the USD damping.
                stiffness, damping = 0.0, stiffness
        if target == "none" or joint.mimic is not None:
            stiffness, damping = 0.0, 0.0
        joint.drive = Drive(kind, float(stiffness), float(damping), target)
    resolve.report_unused()
