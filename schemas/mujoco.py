"""MuJoCo-solver subclasses (Newton's MuJoCo solver reads ``mjc:*``), as in Isaac Lab 3.0's
``isaaclab_newton.sim.schemas``.

``mjc:gravcomp`` is a raw attribute (no registered applied schema exists for body gravity compensation);
``mjc:actuatorgravcomp`` belongs to the registered ``MjcJointAPI`` schema, applied when it is set.
"""

from __future__ import annotations

from usdforge.schemas.newton import NewtonJointDrivePropertiesCfg, NewtonRigidBodyPropertiesCfg
from usdforge.schemas.physics import bool_field, cfg_class, float_field
from usdforge.schemas.routing import usd_group


@usd_group("mjc", None)
@cfg_class
class MujocoRigidBodyPropertiesCfg(NewtonRigidBodyPropertiesCfg):
    """MuJoCo rigid body properties: ``NewtonRigidBodyPropertiesCfg`` plus ``mjc:*``.

    gravcomp: Gravity compensation scale of the body, float in [0, 1] (0 none, 1 full), dimensionless.
        Default None (leave as authored; MuJoCo: 0). → ``mjc:gravcomp`` (raw attribute, no schema). Joint
        level ``actuatorgravcomp`` needs it to be non-zero.
    """

    gravcomp: float | None = float_field(0.0, 1.0)


@usd_group("mjc", "MjcJointAPI")
@cfg_class
class MujocoJointDrivePropertiesCfg(NewtonJointDrivePropertiesCfg):
    """MuJoCo joint drive properties: ``NewtonJointDrivePropertiesCfg`` plus ``mjc:*`` (``MjcJointAPI``).

    actuatorgravcomp: bool. Route the gravity compensation force through the actuator (``qfrc_actuator``,
        counted against ``actuatorfrcrange``) instead of ``qfrc_passive``. Default None (leave as authored;
        MuJoCo: False). → ``mjc:actuatorgravcomp``. True needs body-level gravcomp
        (``MujocoRigidBodyPropertiesCfg.gravcomp``), or it does nothing. Isaac Lab's spawner enables that
        itself when it applies both cfgs; usdforge's converters take no joint drive cfg, so code that
        applies both to an asset gets the same rule from ``schemas.writer.effective_rigid_props``.
    """

    actuatorgravcomp: bool | None = bool_field()
