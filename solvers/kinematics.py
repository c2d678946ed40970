"""Forward kinematics and the geometric Jacobian of a converted asset, in JAX.

:class:`Kinematics` holds the tree as flat arrays and is a registered pytree, so it can be passed to
(and closed over by) ``jit``/``vmap`` functions. Two views of the tree are precomputed on the host:

* the *chain* from the root to the end-effector, with fixed joints folded into constant transforms, so
  one ``lax.scan`` step per moving coordinate gives the ee pose and the Jacobian columns;
* the *tree* of all bodies, one scan step per elementary motion or body, for :func:`forward_kinematics_all`.

Every motion is expressed about/along the local z axis of a frame chosen at build time, which makes a
step a rotation about z (two columns change) or a shift along z.

Precision: arrays are float32 unless ``dtype=jnp.float64`` is asked for. float64 needs 64-bit JAX, which
this package never switches on by itself: call ``jax.config.update("jax_enable_x64", True)`` at program
start, or build *and* use the Kinematics inside ``with jax.enable_x64(True):``.
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from os import PathLike
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

from .device import resolve_device
from .rotations import matrix_to_quat
from .usd_tree import KinematicTree, invert_transform, make_transform, quat_to_matrix, read_kinematic_tree

# Rotations taking the z axis onto x, y, z (exact 0/±1 entries): a motion about axis a of a joint frame F
# is a motion about z of the frame F @ _ALIGN[a].
_ALIGN = (
    np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]),
    np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]),
    np.eye(3),
)


class MimicJoint(NamedTuple):
    """A dependent joint: ``q[name] = multiplier * q[leader] + offset`` (radians or metres)."""

    name: str
    leader: str
    multiplier: float
    offset: float


@dataclass(frozen=True)
class Kinematics:
    """Kinematic tree of one asset plus its end-effector chain, as arrays for JAX.

    Coordinates ``q`` (J,) are the independent joint values in ``joint_names`` order, in radians or metres
    from the USD rest pose (where bodies are authored). Mimic followers are not coordinates; they are
    listed in ``mimic``. Floating roots stay at their rest pose.

    Array fields (C = moving coordinates on the ee chain, K = tree nodes, B = bodies):
    ``lower``/``upper`` (J,) limits (±inf when unlimited); ``chain_rot`` (C+1, 3, 3) and ``chain_pos``
    (C+1, 3) the constant transforms before each chain motion and after the last (ee offset included);
    ``chain_revolute`` (C,) 1 for a rotation, 0 for a translation; the ``tree_*`` arrays (K, ...) the
    same for every node of the tree, ``tree_parent`` (K,) the parent node (K for the world) and
    ``body_node`` (B,) the node of each body.

    Static fields (part of the pytree structure): ``chain_coords`` and ``tree_coords`` give, per motion,
    ``(index into q, multiplier, offset)`` (index -1: no motion), so mimic couplings and the Jacobian's
    chain rule are resolved when tracing.
    """

    lower: Array
    upper: Array
    chain_rot: Array
    chain_pos: Array
    chain_revolute: Array
    tree_rot: Array
    tree_pos: Array
    tree_revolute: Array
    tree_prismatic: Array
    tree_parent: Array
    body_node: Array
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    ee_body: str
    mimic: tuple[MimicJoint, ...]
    chain_coords: tuple[tuple[int, float, float], ...]
    tree_coords: tuple[tuple[int, float, float], ...]

    @property
    def num_joints(self) -> int:
        """J, the number of independent coordinates."""
        return len(self.joint_names)

    @property
    def dtype(self) -> Any:
        """Floating dtype of the arrays (float32 or float64)."""
        return self.lower.dtype

    @property
    def chain_length(self) -> int:
        """Number of moving coordinates between the root and the end-effector body."""
        return len(self.chain_coords)

    def body_index(self, name: str) -> int:
        """Index into ``body_names`` (and the body axis of :func:`forward_kinematics_all`)."""
        try:
            return self.body_names.index(name)
        except ValueError:
            raise ValueError(f"unknown body {name!r}; available bodies: {', '.join(self.body_names)}") from None

    def joint_index(self, name: str) -> int:
        """Index of the independent coordinate ``name`` in q."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ValueError(f"unknown joint {name!r}; coordinates: {', '.join(self.joint_names)}") from None

    @classmethod
    def from_usd(
        cls,
        path: str | PathLike[str],
        ee_body: str,
        *,
        ee_offset: Sequence[float] | None = None,
        dtype: Any = jnp.float32,
        device: str | jax.Device | None = None,
    ) -> "Kinematics":
        """Read a converted asset and build the kinematics for end-effector ``ee_body``.

        ``ee_body`` is a link's source name (``usdforge:sourceName``), prim name or prim path.
        ``ee_offset`` is an optional frame in the ee body frame: (3,) position in metres, or (7,) position
        plus quaternion (w, x, y, z); the ee pose and Jacobian are reported there. ``device``: see
        :func:`solvers.device.resolve_device`.
        """
        return cls.from_tree(read_kinematic_tree(path), ee_body, ee_offset=ee_offset, dtype=dtype, device=device)

    @classmethod
    def from_tree(
        cls,
        tree: KinematicTree,
        ee_body: str,
        *,
        ee_offset: Sequence[float] | None = None,
        dtype: Any = jnp.float32,
        device: str | jax.Device | None = None,
    ) -> "Kinematics":
        """Build from an already parsed :class:`KinematicTree` (e.g. once per dtype)."""
        dtype = jnp.dtype(dtype)
        if dtype not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}")
        if dtype == jnp.float64 and not jax.config.jax_enable_x64:
            raise ValueError(
                "float64 kinematics need 64-bit JAX: call jax.config.update('jax_enable_x64', True) at "
                "program start, or build and use the Kinematics inside `with jax.enable_x64(True):`"
            )
        host = _build_host_arrays(tree, tree.body_index(ee_body), _offset_transform(ee_offset))
        dev = resolve_device(device)
        put = lambda a: jax.device_put(jnp.asarray(a, dtype=a.dtype if a.dtype.kind == "i" else dtype), dev)  # noqa: E731
        arrays = {k: put(v) for k, v in host.arrays.items()}
        return cls(
            **arrays,
            joint_names=host.joint_names,
            body_names=tree.body_names,
            ee_body=tree.body_names[tree.body_index(ee_body)],
            mimic=host.mimic,
            chain_coords=host.chain_coords,
            tree_coords=host.tree_coords,
        )


jax.tree_util.register_dataclass(
    Kinematics,
    data_fields=[
        "lower", "upper", "chain_rot", "chain_pos", "chain_revolute",
        "tree_rot", "tree_pos", "tree_revolute", "tree_prismatic", "tree_parent", "body_node",
    ],
    meta_fields=["joint_names", "body_names", "ee_body", "mimic", "chain_coords", "tree_coords"],
)


class _HostArrays(NamedTuple):
    arrays: dict[str, np.ndarray]
    joint_names: tuple[str, ...]
    mimic: tuple[MimicJoint, ...]
    chain_coords: tuple[tuple[int, float, float], ...]
    tree_coords: tuple[tuple[int, float, float], ...]


def _offset_transform(ee_offset: Sequence[float] | None) -> np.ndarray:
    if ee_offset is None:
        return np.eye(4)
    off = np.asarray(ee_offset, dtype=np.float64).reshape(-1)
    if off.shape == (3,):
        return make_transform(off, np.eye(3))
    if off.shape == (7,):
        return make_transform(off[:3], quat_to_matrix(off[3:]))
    raise ValueError(f"ee_offset must have 3 (position) or 7 (position + quaternion wxyz) values, got {off.shape}")


def _build_host_arrays(tree: KinematicTree, ee: int, offset: np.ndarray) -> _HostArrays:
    """Fold the tree into the chain and tree arrays (float64, NumPy)."""
    # Independent coordinates in authored joint order; followers map onto their leaders.
    dofs = [d for s in tree.joints for d in s.dofs]
    joint_names = tuple(d.name for d in dofs if d.mimic is None)
    col = {n: i for i, n in enumerate(joint_names)}
    mimic = tuple(
        MimicJoint(d.name, d.mimic.leader, d.mimic.multiplier, d.mimic.offset) for d in dofs if d.mimic is not None
    )
    by_name = {d.name: d for d in dofs}

    def coords(dof) -> tuple[int, float, float]:
        if dof is None:
            return (-1, 0.0, 0.0)
        if dof.mimic is None:
            return (col[dof.name], 1.0, 0.0)
        return (col[dof.mimic.leader], float(dof.mimic.multiplier), float(dof.mimic.offset))

    lower = np.array([by_name[n].lower for n in joint_names])
    upper = np.array([by_name[n].upper for n in joint_names])

    def world(b: int) -> np.ndarray:
        return tree.rest_world[b] if b >= 0 else np.eye(4)

    def rest_rel(spec) -> np.ndarray:
        return invert_transform(world(spec.parent)) @ tree.rest_world[spec.child]

    # Chain: a list of constant transforms and motions, then consecutive constants folded.
    path = tree.path_to(ee)
    start = tree.joints[path[0]].parent if path else ee
    items: list[Any] = [world(start)]
    for j in path:
        spec = tree.joints[j]
        items += _joint_items(spec, rest_rel(spec))
    items.append(offset)
    consts: list[np.ndarray] = [np.eye(4)]
    motions: list[Any] = []
    for it in items:
        if isinstance(it, np.ndarray):
            consts[-1] = consts[-1] @ it
        else:
            motions.append(it)
            consts.append(np.eye(4))
    chain_rev = np.array([1.0 if m.kind == "revolute" else 0.0 for m in motions])

    # Tree: one node per elementary motion and one per body (its frame), parents first.
    node_parent: list[int] = []
    node_t: list[np.ndarray] = []
    node_dof: list[Any] = []
    body_node = np.zeros(len(tree.body_names), dtype=np.int32)
    for b in range(len(tree.body_names)):
        j = tree.parent_joint[b]
        parent_node = -1
        if j < 0:
            pending = [tree.rest_world[b]]
        else:
            spec = tree.joints[j]
            parent_node = int(body_node[spec.parent]) if spec.parent >= 0 else -1
            pending = [rest_rel(spec)]
            for it in _joint_items(spec, np.eye(4)):
                if isinstance(it, np.ndarray):
                    pending.append(it)
                    continue
                node_parent.append(parent_node)
                node_t.append(_product(pending))
                node_dof.append(it)
                parent_node = len(node_t) - 1
                pending = []
        node_parent.append(parent_node)
        node_t.append(_product(pending))
        node_dof.append(None)
        body_node[b] = len(node_t) - 1
    k = len(node_t)
    consts_a = np.stack(consts)
    node_a = np.stack(node_t)
    arrays = {
        "lower": lower,
        "upper": upper,
        "chain_rot": consts_a[:, :3, :3],
        "chain_pos": consts_a[:, :3, 3],
        "chain_revolute": chain_rev,
        "tree_rot": node_a[:, :3, :3],
        "tree_pos": node_a[:, :3, 3],
        "tree_revolute": np.array([1.0 if d is not None and d.kind == "revolute" else 0.0 for d in node_dof]),
        "tree_prismatic": np.array([1.0 if d is not None and d.kind == "prismatic" else 0.0 for d in node_dof]),
        "tree_parent": np.array([p if p >= 0 else k for p in node_parent], dtype=np.int32),
        "body_node": body_node,
    }
    return _HostArrays(
        arrays, joint_names, mimic, tuple(coords(m) for m in motions), tuple(coords(d) for d in node_dof)
    )


def _joint_items(spec, rel: np.ndarray) -> list[Any]:
    """``rel @ frame @ [align_a, motion, align_a^-1 for each dof] @ frame^-1`` as a list."""
    if not spec.dofs:
        return [rel]
    items: list[Any] = [rel @ spec.frame]
    for d in spec.dofs:
        align = make_transform(np.zeros(3), _ALIGN[d.axis])
        items += [align, d, invert_transform(align)]
    items.append(invert_transform(spec.frame))
    return items


def _product(ts: list[np.ndarray]) -> np.ndarray:
    out = np.eye(4)
    for t in ts:
        out = out @ t
    return out


# ---------------------------------------------------------------------------------------------------------
# Kernels, component-first: q (J, ...) with any trailing batch shape (see solvers.rotations). The batch
# axis is the contiguous one, so every step is an elementwise loop along the batch.


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
    c, s = jnp.cos(angle), jnp.sin(angle)
    r = [[c * ri[0] + s * ri[1], c * ri[1] - s * ri[0], ri[2]] for ri in r]
    return r, [p[i] + r[i][2] * shift for i in range(3)]


def _flat(r: list[list[Array]]) -> tuple[Array, ...]:
    return tuple(r[i][j] for i in range(3) for j in range(3))


def _nested(flat: tuple[Array, ...]) -> list[list[Array]]:
    return [list(flat[0:3]), list(flat[3:6]), list(flat[6:9])]


def chain_kernel(kin: Kinematics, q: Array) -> tuple[Array, Array, Array]:
    """ee rotation (3, 3, ...), ee position (3, ...) and Jacobian (6, J, ...) for q (J, ...).

    One ``lax.scan`` step per chain motion: compose the constant transform, then rotate about / shift
    along z. The scan emits each motion's world axis and origin; the Jacobian columns follow from them:
    [z × (p_ee − o); z] for a rotation, [z; 0] for a shift, summed onto q through the mimic multipliers.
    """
    batch = q.shape[1:]
    dtype = q.dtype
    qc = _motion_coords(kin.chain_coords, q)

    def step(carry, x):
        r, p = _nested(carry[0]), list(carry[1])
        c_rot, c_pos, is_rev, qk = x
        r, p = _compose(r, p, c_rot, c_pos)
        r, p = _move(r, p, is_rev * qk, (1.0 - is_rev) * qk)
        axis = jnp.stack([r[0][2], r[1][2], r[2][2]])
        return (_flat(r), tuple(p)), (axis, jnp.stack(p))

    one, zero = jnp.ones(batch, dtype), jnp.zeros(batch, dtype)
    init = (tuple(one if i == j else zero for i in range(3) for j in range(3)), (zero, zero, zero))
    xs = (kin.chain_rot[:-1], kin.chain_pos[:-1], kin.chain_revolute, qc)
    (r_flat, p_t), (axes, origins) = lax.scan(step, init, xs)  # axes, origins: (C, 3, ...)
    r, p = _compose(_nested(r_flat), list(p_t), kin.chain_rot[-1], kin.chain_pos[-1])
    ee_rot = jnp.stack([jnp.stack(ri) for ri in r])
    ee_pos = jnp.stack(p)

    rev = kin.chain_revolute.reshape((-1,) + (1,) * len(batch))
    d = [ee_pos[i][None] - origins[:, i] for i in range(3)]  # (C, ...)
    z = [axes[:, i] for i in range(3)]
    lin = [z[1] * d[2] - z[2] * d[1], z[2] * d[0] - z[0] * d[2], z[0] * d[1] - z[1] * d[0]]
    cols = [rev * lin[i] + (1.0 - rev) * z[i] for i in range(3)] + [rev * z[i] for i in range(3)]
    cols_a = jnp.stack(cols, axis=1)  # (C, 6, ...)
    per_q: list[Array] = []
    for j in range(len(kin.joint_names)):
        terms = [cols_a[k] if m == 1.0 else m * cols_a[k] for k, (jj, m, _) in enumerate(kin.chain_coords) if jj == j]
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
    rot, pos, jac = chain_kernel(kin, qt)
    quat = matrix_to_quat(rot)
    return (
        pos.T.reshape(lead + (3,)),
        quat.T.reshape(lead + (4,)),
        jnp.moveaxis(jac, -1, 0).reshape(lead + jac.shape[:2]),
    )


@jax.jit
def _tree_batch_first(kin: Kinematics, q: Array) -> tuple[Array, Array]:
    q = q.astype(kin.dtype)
    lead = q.shape[:-1]
    pos, rot = tree_kernel(kin, q.reshape((-1, q.shape[-1])).T)  # (B, 3, M), (B, 3, 3, M)
    quat = jnp.stack([matrix_to_quat(rot[b]) for b in range(rot.shape[0])]) if rot.shape[0] else \
        jnp.zeros((0, 4) + rot.shape[3:], rot.dtype)
    n_bodies = pos.shape[0]
    return (
        jnp.moveaxis(pos, -1, 0).reshape(lead + (n_bodies, 3)),
        jnp.moveaxis(quat, -1, 0).reshape(lead + (n_bodies, 4)),
    )


def forward_kinematics(kin: Kinematics, q: Any) -> tuple[Array, Array]:
    """End-effector pose in the world frame: position (..., 3) in metres, quaternion (..., 4) (w, x, y, z), w >= 0."""
    pos, quat, _ = _ee_batch_first(kin, _check_q(kin, q))
    return pos, quat


def jacobian(kin: Kinematics, q: Any) -> Array:
    """Geometric Jacobian (..., 6, J) of the ee frame origin: world frame, linear rows first.

    Rows 0:3 map q̇ to the ee origin's linear velocity (m/s), rows 3:6 to the angular velocity (rad/s).
    Coordinates off the ee chain have zero columns.
    """
    return _ee_batch_first(kin, _check_q(kin, q))[2]


def forward_kinematics_and_jacobian(kin: Kinematics, q: Any) -> tuple[Array, Array, Array]:
    """ee position (..., 3), quaternion (..., 4) and Jacobian (..., 6, J) from one pass over the chain."""
    return _ee_batch_first(kin, _check_q(kin, q))


def forward_kinematics_all(kin: Kinematics, q: Any) -> tuple[Array, Array]:
    """World pose of every body in ``kin.body_names`` order: positions (..., B, 3), quaternions (..., B, 4)."""
    return _tree_batch_first(kin, _check_q(kin, q))


def ee_kernel(kin: Kinematics, q: Array) -> tuple[Array, Array, Array]:
    """Unjitted ee position (3, ...), quaternion (4, ...) and Jacobian (6, J, ...) for q (J, ...).

    Component-first, for composing inside your own ``jit``/``vmap``/``lax`` code: with q of shape (J,)
    it is the single-configuration function; with q (J, N) it is the fast batched form.
    """
    rot, pos, jac = chain_kernel(kin, q)
    return pos, matrix_to_quat(rot), jac


def random_configurations(kin: Kinematics, key: Array, shape: tuple[int, ...]) -> Array:
    """Uniform samples (*shape, J) within the joint limits.

    An unlimited side is replaced by a span of 2π (radians or metres) from the other side, or by
    [-π, π] when both sides are unlimited.
    """
    lo, hi = np.asarray(kin.lower, np.float64), np.asarray(kin.upper, np.float64)
    lo_ok, hi_ok = np.isfinite(lo), np.isfinite(hi)
    lo, hi = (
        np.where(lo_ok, lo, np.where(hi_ok, hi - 2 * math.pi, -math.pi)),
        np.where(hi_ok, hi, np.where(lo_ok, lo + 2 * math.pi, math.pi)),
    )
    u = jax.random.uniform(key, shape + (kin.num_joints,), dtype=kin.dtype)
    return jnp.asarray(lo, kin.dtype) + u * jnp.asarray(hi - lo, kin.dtype)
