"""Forward kinematics and geometric Jacobians in JAX: the kernels and the batch-first public functions.

Kernels are component-first (see :mod:`solvers.rotations`): q (J, ...) with any trailing batch shape,
the batch being the contiguous axis, so every step is an elementwise loop along the batch that XLA on
CPU vectorises. The public functions take q (..., J), transpose once, and run the kernels in
cache-sized chunks (:mod:`solvers.chunking`).
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array, lax

from .chunking import map_chunks
from .fastmath import sincos
from .kinematics import Kinematics
from .rotations import matrix_to_quat


def _motion_coords(coords: tuple[tuple[int, float, float], ...], q: Array) -> Array:
    """Motion values (M, ...) from q (J, ...): ``multiplier * q[index] + offset`` (0 where index is -1)."""
    zero = jnp.zeros(q.shape[1:], q.dtype)
    rows = [zero if j < 0 else (q[j] if (m, o) == (1.0, 0.0) else m * q[j] + o) for j, m, o in coords]
    return jnp.stack(rows) if rows else jnp.zeros((0,) + q.shape[1:], q.dtype)


def _compose(r: list[list[Array]], p: list[Array], c_rot: Array, c_pos: Array) -> tuple[list[list[Array]], list[Array]]:
    """(r, p) @ (c_rot, c_pos): a batched frame times one constant transform, written out."""
    p = [p[i] + r[i][0] * c_pos[0] + r[i][1] * c_pos[1] + r[i][2] * c_pos[2] for i in range(3)]
    r = [[r[i][0] * c_rot[0, j] + r[i][1] * c_rot[1, j] + r[i][2] * c_rot[2, j] for j in range(3)] for i in range(3)]
    return r, p


def _move(r: list[list[Array]], p: list[Array], angle: Array, shift: Array) -> tuple[list[list[Array]], list[Array]]:
    """Rotate a frame by ``angle`` about, and shift it by ``shift`` along, its own z axis."""
    s, c = sincos(angle)
    r = [[c * ri[0] + s * ri[1], c * ri[1] - s * ri[0], ri[2]] for ri in r]
    return r, [p[i] + r[i][2] * shift for i in range(3)]


def _flat(r: list[list[Array]]) -> tuple[Array, ...]:
    return tuple(r[i][j] for i in range(3) for j in range(3))


def _nested(flat: tuple[Array, ...]) -> list[list[Array]]:
    return [list(flat[0:3]), list(flat[3:6]), list(flat[6:9])]


def chain_kernel(kin: Kinematics, q: Array, e: int = 0) -> tuple[Array, Array, Array]:
    """ee rotation (3, 3, ...), ee position (3, ...) and Jacobian (6, J, ...) of end-effector ``e`` for
    q (J, ...).

    One ``lax.scan`` step per chain motion: compose the constant transform, then rotate about / shift
    along z. The scan emits each motion's world axis and origin; the Jacobian columns follow from them:
    [z × (p_ee − o); z] for a rotation, [z; 0] for a shift, summed onto q through the mimic multipliers.
    """
    batch = q.shape[1:]
    dtype = q.dtype
    chain, chain_coords = kin.chains[e], kin.chains_coords[e]
    qc = _motion_coords(chain_coords, q)
    rev = chain.revolute.reshape((-1,) + (1,) * len(batch))
    # cos/sin of every joint in one vectorised op before the scan: inside the step, XLA on CPU would
    # recompute them in each of the fusions that consume them.
    angle, shift = rev * qc, (1.0 - rev) * qc
    sin, cos = sincos(angle)

    def step(carry, x):
        r, p = _nested(carry[0]), list(carry[1])
        c_rot, c_pos, c, s, d = x
        r, p = _compose(r, p, c_rot, c_pos)
        r = [[c * ri[0] + s * ri[1], c * ri[1] - s * ri[0], ri[2]] for ri in r]
        p = [p[i] + r[i][2] * d for i in range(3)]
        axis = jnp.stack([r[0][2], r[1][2], r[2][2]])
        return (_flat(r), tuple(p)), (axis, jnp.stack(p))

    one, zero = jnp.ones(batch, dtype), jnp.zeros(batch, dtype)
    init = (tuple(one if i == j else zero for i in range(3) for j in range(3)), (zero, zero, zero))
    xs = (chain.rot[:-1], chain.pos[:-1], cos, sin, shift)
    if len(chain_coords) == 0:  # an end-effector fixed to the root: nothing moves it
        r, p = _compose(_nested(init[0]), list(init[1]), chain.rot[-1], chain.pos[-1])
        ee_rot = jnp.stack([jnp.stack(ri) for ri in r])
        return ee_rot, jnp.stack(p), jnp.zeros((6, len(kin.joint_names)) + batch, dtype)
    (r_flat, p_t), (axes, origins) = lax.scan(step, init, xs)  # axes, origins: (C, 3, ...)
    r, p = _compose(_nested(r_flat), list(p_t), chain.rot[-1], chain.pos[-1])
    ee_rot = jnp.stack([jnp.stack(ri) for ri in r])
    ee_pos = jnp.stack(p)

    d = [ee_pos[i][None] - origins[:, i] for i in range(3)]  # (C, ...)
    z = [axes[:, i] for i in range(3)]
    lin = [z[1] * d[2] - z[2] * d[1], z[2] * d[0] - z[0] * d[2], z[0] * d[1] - z[1] * d[0]]
    cols = [rev * lin[i] + (1.0 - rev) * z[i] for i in range(3)] + [rev * z[i] for i in range(3)]
    cols_a = jnp.stack(cols, axis=1)  # (C, 6, ...)
    per_q: list[Array] = []
    for j in range(len(kin.joint_names)):
        terms = [cols_a[k] if m == 1.0 else m * cols_a[k] for k, (jj, m, _) in enumerate(chain_coords) if jj == j]
        per_q.append(functools.reduce(operator.add, terms) if terms else jnp.zeros((6,) + batch, dtype))
    jac = jnp.stack(per_q, axis=1) if per_q else jnp.zeros((6, 0) + batch, dtype)
    return ee_rot, ee_pos, jac


def tree_kernel(kin: Kinematics, q: Array) -> tuple[Array, Array]:
    """World position (B, 3, ...) and rotation (B, 3, 3, ...) of every body for q (J, ...)."""
    batch = q.shape[1:]
    dtype = q.dtype
    qn = _motion_coords(kin.tree_coords, q)
    k = kin.tree_rot.shape[0]
    eye = jnp.broadcast_to(jnp.eye(3, dtype=dtype).reshape((3, 3) + (1,) * len(batch)), (3, 3) + batch)
    rots = jnp.zeros((k + 1, 3, 3) + batch, dtype).at[k].set(eye)
    poss = jnp.zeros((k + 1, 3) + batch, dtype)

    def step(carry, x):
        rots, poss = carry
        i, parent, n_rot, n_pos, is_rev, is_pri, qk = x
        rp, pp = rots[parent], poss[parent]
        r, p = _compose([[rp[a, b] for b in range(3)] for a in range(3)], [pp[a] for a in range(3)], n_rot, n_pos)
        r, p = _move(r, p, is_rev * qk, is_pri * qk)
        rot = jnp.stack([jnp.stack(ri) for ri in r])
        return (rots.at[i].set(rot), poss.at[i].set(jnp.stack(p))), None

    xs = (jnp.arange(k), kin.tree_parent, kin.tree_rot, kin.tree_pos, kin.tree_revolute, kin.tree_prismatic, qn)
    (rots, poss), _ = lax.scan(step, (rots, poss), xs)
    return poss[kin.body_node], rots[kin.body_node]


def _tree_poses(kin: Kinematics, q: Array) -> tuple[Array, Array]:
    """Body positions (B, 3, ...) and quaternions (B, 4, ...)."""
    pos, rot = tree_kernel(kin, q)
    quat = jnp.stack([matrix_to_quat(rot[b]) for b in range(rot.shape[0])]) if rot.shape[0] else \
        jnp.zeros((0, 4) + rot.shape[3:], rot.dtype)
    return pos, quat


# ---------------------------------------------------------------------------------------------------------
# Public batch-first functions: q (..., J) with any leading shape.


def _check_q(kin: Kinematics, q: Any) -> Array:
    q = jnp.asarray(q)
    if q.ndim == 0 or q.shape[-1] != kin.num_joints:
        raise ValueError(
            f"q must have shape (..., {kin.num_joints}) for joints {list(kin.joint_names)}, got {q.shape}"
        )
    return q


@jax.jit
def _ee_batch_first(kin: Kinematics, q: Array) -> tuple[Array, Array, Array]:
    q = q.astype(kin.dtype)
    lead = q.shape[:-1]
    qt = q.reshape((-1, q.shape[-1])).T  # (J, M): the batch becomes the contiguous axis
    if not kin.multi_ee:
        pos, quat, jac = map_chunks(functools.partial(ee_kernel, kin), qt)
        return (
            pos.T.reshape(lead + (3,)),
            quat.T.reshape(lead + (4,)),
            jnp.moveaxis(jac, -1, 0).reshape(lead + jac.shape[:2]),
        )
    pos, quat, jac = map_chunks(functools.partial(ee_kernel_all, kin), qt)  # (E, 3, M), (E, 4, M), (E, 6, J, M)
    return (
        jnp.moveaxis(pos, -1, 0).reshape(lead + pos.shape[:2]),
        jnp.moveaxis(quat, -1, 0).reshape(lead + quat.shape[:2]),
        jnp.moveaxis(jac, -1, 0).reshape(lead + jac.shape[:3]),
    )


@jax.jit
def _tree_batch_first(kin: Kinematics, q: Array) -> tuple[Array, Array]:
    q = q.astype(kin.dtype)
    lead = q.shape[:-1]
    pos, quat = map_chunks(functools.partial(_tree_poses, kin), q.reshape((-1, q.shape[-1])).T)
    n_bodies = pos.shape[0]
    return (
        jnp.moveaxis(pos, -1, 0).reshape(lead + (n_bodies, 3)),
        jnp.moveaxis(quat, -1, 0).reshape(lead + (n_bodies, 4)),
    )


def forward_kinematics(kin: Kinematics, q: Any) -> tuple[Array, Array]:
    """End-effector pose in the world frame: position (..., 3) in metres, quaternion (..., 4) (w, x, y, z),
    w >= 0; (..., E, 3) and (..., E, 4) for a Kinematics built with ``ee_bodies``."""
    pos, quat, _ = _ee_batch_first(kin, _check_q(kin, q))
    return pos, quat


def jacobian(kin: Kinematics, q: Any) -> Array:
    """Geometric Jacobian (..., 6, J) of the ee frame origin: world frame, linear rows first; (..., E, 6, J)
    for a Kinematics built with ``ee_bodies``.

    Rows 0:3 map q̇ to the ee origin's linear velocity (m/s), rows 3:6 to the angular velocity (rad/s).
    Coordinates off the ee chain have zero columns.
    """
    return _ee_batch_first(kin, _check_q(kin, q))[2]


def forward_kinematics_and_jacobian(kin: Kinematics, q: Any) -> tuple[Array, Array, Array]:
    """ee position (..., 3), quaternion (..., 4) and Jacobian (..., 6, J) from one pass over the chain
    (with an E axis before the last for a Kinematics built with ``ee_bodies``)."""
    return _ee_batch_first(kin, _check_q(kin, q))


def forward_kinematics_all(kin: Kinematics, q: Any) -> tuple[Array, Array]:
    """World pose of every link (bodies and link frames) in ``kin.body_names`` order: positions (..., B, 3)
    in metres, quaternions (..., B, 4) (w, x, y, z), w >= 0."""
    return _tree_batch_first(kin, _check_q(kin, q))


def ee_kernel(kin: Kinematics, q: Array) -> tuple[Array, Array, Array]:
    """Unjitted ee position (3, ...), quaternion (4, ...) and Jacobian (6, J, ...) for q (J, ...).

    Component-first, for composing inside your own ``jit``/``vmap``/``lax`` code: with q of shape (J,)
    it is the single-configuration function; with q (J, N) it is the fast batched form.
    """
    rot, pos, jac = chain_kernel(kin, q)
    return pos, matrix_to_quat(rot), jac


def ee_kernel_all(kin: Kinematics, q: Array) -> tuple[Array, Array, Array]:
    """Every end-effector: positions (E, 3, ...), quaternions (E, 4, ...), Jacobians (E, 6, J, ...) for
    q (J, ...). One scan per chain (shared joints are recomputed per chain: chains are short)."""
    outs = [chain_kernel(kin, q, e) for e in range(kin.num_ee)]
    return (jnp.stack([p for _, p, _ in outs]), jnp.stack([matrix_to_quat(r) for r, _, _ in outs]),
            jnp.stack([j for _, _, j in outs]))
