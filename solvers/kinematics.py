"""The kinematics of a converted asset as arrays for JAX: :class:`Kinematics` and its construction.

:class:`Kinematics` holds the tree as flat arrays and is a registered pytree, so it can be passed to
(and closed over by) ``jit``/``vmap`` functions. Two views of the tree are precomputed on the host, in
float64 NumPy, from a :class:`~solvers.usd_tree.KinematicTree`:

* the *chain* from the root to the end-effector, with fixed joints folded into constant transforms, so
  one ``lax.scan`` step per moving coordinate gives the ee pose and the Jacobian columns;
* the *tree* of all links, one scan step per elementary motion or link, for ``forward_kinematics_all``.

Every motion is expressed about/along the local z axis of a frame chosen at build time, which makes a
step a rotation about z (two columns change) or a shift along z. The JAX kernels are in
:mod:`solvers.forward`.

Precision: arrays are float32 unless ``dtype=jnp.float64`` is asked for. float64 needs 64-bit JAX, which
this package never switches on by itself: call ``jax.config.update("jax_enable_x64", True)`` at program
start, or build *and* use the Kinematics inside ``with jax.enable_x64(True):``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from os import PathLike
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from .device import resolve_device
from .usd_tree import KinematicTree, invert_transform, make_transform, quat_to_matrix, read_kinematic_tree

# Rotations taking the z axis onto x, y, z (exact 0/±1 entries): a motion about axis a of a joint frame F
# is a motion about z of the frame F @ _ALIGN[a].
_ALIGN = (
    np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]),
    np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]),
    np.eye(3),
)


class Chain(NamedTuple):
    """One end-effector chain (C moving coordinates): ``rot`` (C+1, 3, 3) and ``pos`` (C+1, 3) the constant
    transforms before each motion and after the last (ee offset included), ``revolute`` (C,) 1 for a
    rotation and 0 for a translation."""

    rot: Array
    pos: Array
    revolute: Array


class MimicJoint(NamedTuple):
    """A dependent joint: ``q[name] = multiplier * q[leader] + offset`` (radians or metres)."""

    name: str
    leader: str
    multiplier: float
    offset: float


# eq=False: identity semantics (comparing or hashing the arrays element-wise would be meaningless).
@dataclass(frozen=True, eq=False)
class Kinematics:
    """Kinematic tree of one asset plus its end-effector chains, as arrays for JAX.

    Coordinates ``q`` (J,) are the independent joint values in ``joint_names`` order, in radians or metres
    from the USD rest pose (where bodies are authored): the joints between the root and any of the
    end-effectors (one tree, shared joints). Mimic followers are not coordinates; they are listed in
    ``mimic``. Floating roots stay at their rest pose. ``body_names`` are the links' source names: rigid
    bodies and link frames (source links the converter merged into a body), in parents-first order;
    ``ee_bodies`` (E of them) are among them, ``ee_body`` is the first. ``multi_ee`` is True when built
    with ``ee_bodies=``: the public FK functions then return a (..., E, ...) axis for the end-effectors.

    Array fields (C = moving coordinates on a chain, K = tree nodes, B = links): ``lower``/``upper``
    (J,) limits (±inf when unlimited); ``chains`` one :class:`Chain` per end-effector; the ``tree_*``
    arrays (K, ...) the same for every node of the tree, ``tree_parent`` (K,) the parent node (K for
    the world) and ``body_node`` (B,) the node of each body.

    Static fields (part of the pytree structure): ``chains_coords`` (one per chain) and ``tree_coords``
    give, per motion, ``(index into q, multiplier, offset)`` (index -1: no motion), so mimic couplings
    and the Jacobian's chain rule are resolved when tracing.
    """

    lower: Array
    upper: Array
    chains: tuple[Chain, ...]
    tree_rot: Array
    tree_pos: Array
    tree_revolute: Array
    tree_prismatic: Array
    tree_parent: Array
    body_node: Array
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    ee_bodies: tuple[str, ...]
    mimic: tuple[MimicJoint, ...]
    chains_coords: tuple[tuple[tuple[int, float, float], ...], ...]
    tree_coords: tuple[tuple[int, float, float], ...]
    multi_ee: bool = False

    @property
    def ee_body(self) -> str:
        """The first end-effector body."""
        return self.ee_bodies[0]

    @property
    def num_ee(self) -> int:
        """E, the number of end-effectors."""
        return len(self.ee_bodies)

    @property
    def chain_rot(self) -> Array:
        """(C+1, 3, 3) constant transforms of the first chain."""
        return self.chains[0].rot

    @property
    def chain_pos(self) -> Array:
        """(C+1, 3) constant offsets of the first chain."""
        return self.chains[0].pos

    @property
    def chain_revolute(self) -> Array:
        """(C,) motion kinds of the first chain."""
        return self.chains[0].revolute

    @property
    def chain_coords(self) -> tuple[tuple[int, float, float], ...]:
        """Motion coordinates of the first chain."""
        return self.chains_coords[0]

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
        """Number of moving coordinates between the root and the (first) end-effector body."""
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
        ee_body: str | None = None,
        *,
        ee_bodies: Sequence[str] | None = None,
        ee_offset: Sequence[float] | Sequence[Sequence[float] | None] | None = None,
        dtype: Any = jnp.float32,
        device: str | jax.Device | None = None,
    ) -> "Kinematics":
        """Read a converted asset and build the kinematics for end-effector ``ee_body``, or for several at
        once with ``ee_bodies=[...]`` (one tree, shared joints; FK and Jacobians gain an E axis).

        An end-effector is a link's source name (``usdforge:sourceName``), prim name or prim path.
        ``ee_offset`` is an optional frame in the ee body frame: (3,) position in metres, or (7,) position
        plus quaternion (w, x, y, z); the ee pose and Jacobian are reported there. With ``ee_bodies`` it
        is one such frame (or None) per end-effector. ``device``: see :func:`solvers.device.resolve_device`.
        """
        return cls.from_tree(read_kinematic_tree(path), ee_body, ee_bodies=ee_bodies, ee_offset=ee_offset,
                             dtype=dtype, device=device)

    @classmethod
    def from_tree(
        cls,
        tree: KinematicTree,
        ee_body: str | None = None,
        *,
        ee_bodies: Sequence[str] | None = None,
        ee_offset: Sequence[float] | Sequence[Sequence[float] | None] | None = None,
        dtype: Any = jnp.float32,
        device: str | jax.Device | None = None,
    ) -> "Kinematics":
        """Build from an already parsed :class:`KinematicTree` (e.g. once per dtype)."""
        if (ee_body is None) == (ee_bodies is None):
            raise ValueError("give either ee_body (one end-effector) or ee_bodies (a list of them)")
        multi = ee_bodies is not None
        names = [ee_body] if ee_bodies is None else list(ee_bodies)
        if not names:
            raise ValueError("ee_bodies is empty; name at least one end-effector body")
        if not multi:
            offsets = [ee_offset]
        elif ee_offset is None:
            offsets = [None] * len(names)
        else:
            offsets = list(ee_offset)  # type: ignore[arg-type]
            if len(offsets) != len(names):
                raise ValueError(f"ee_offset must give one frame (or None) per end-effector: {len(names)} "
                                 f"ee_bodies, {len(offsets)} offsets")
        dtype = jnp.dtype(dtype)
        if dtype not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}")
        if dtype == jnp.float64 and not jax.config.jax_enable_x64:
            raise ValueError(
                "float64 kinematics need 64-bit JAX: call jax.config.update('jax_enable_x64', True) at "
                "program start, or build and use the Kinematics inside `with jax.enable_x64(True):`"
            )
        ees = [tree.body_index(n) for n in names]
        if len(set(ees)) != len(ees):
            raise ValueError(f"ee_bodies names a body twice: {names}")
        host = _build_host_arrays(tree, ees, [_offset_transform(o) for o in offsets])
        dev = resolve_device(device)
        put = lambda a: jax.device_put(jnp.asarray(a, dtype=a.dtype if a.dtype.kind == "i" else dtype), dev)  # noqa: E731
        arrays = {k: put(v) for k, v in host.arrays.items()}
        chains = tuple(Chain(put(r), put(p), put(v)) for r, p, v in host.chains)
        return cls(
            **arrays,
            chains=chains,
            joint_names=host.joint_names,
            body_names=tree.body_names,
            ee_bodies=tuple(tree.body_names[i] for i in ees),
            mimic=host.mimic,
            chains_coords=host.chains_coords,
            tree_coords=host.tree_coords,
            multi_ee=multi,
        )


jax.tree_util.register_dataclass(
    Kinematics,
    data_fields=[
        "lower", "upper", "chains",
        "tree_rot", "tree_pos", "tree_revolute", "tree_prismatic", "tree_parent", "body_node",
    ],
    meta_fields=["joint_names", "body_names", "ee_bodies", "mimic", "chains_coords", "tree_coords", "multi_ee"],
)


class _HostArrays(NamedTuple):
    arrays: dict[str, np.ndarray]
    chains: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    joint_names: tuple[str, ...]
    mimic: tuple[MimicJoint, ...]
    chains_coords: tuple[tuple[tuple[int, float, float], ...], ...]
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


def _build_host_arrays(tree: KinematicTree, ees: list[int], offsets: list[np.ndarray]) -> _HostArrays:
    """Fold the tree into the chain and tree arrays (float64, NumPy)."""
    # The coordinates are the chains': the independent joints between the root and any end-effector body,
    # in authored joint order, plus the leaders of chain joints that mimic one off the chains. Followers
    # map onto their leaders; every other joint of the tree (fingers beyond the hand, other limbs) stays at
    # its rest position, so its Jacobian column would be zero and it is no coordinate.
    paths = [tree.path_to(ee) for ee in ees]
    dofs = [d for s in tree.joints for d in s.dofs]
    by_name = {d.name: d for d in dofs}
    on_chain = {d.name for path in paths for j in path for d in tree.joints[j].dofs}
    independent = {d.name for d in dofs if d.name in on_chain and d.mimic is None}
    independent |= {d.mimic.leader for d in dofs if d.name in on_chain and d.mimic is not None}
    joint_names = tuple(d.name for d in dofs if d.name in independent)
    col = {n: i for i, n in enumerate(joint_names)}
    mimic = tuple(
        MimicJoint(d.name, d.mimic.leader, d.mimic.multiplier, d.mimic.offset)
        for d in dofs if d.mimic is not None and d.mimic.leader in col
    )

    def coords(dof) -> tuple[int, float, float]:
        if dof is None:
            return (-1, 0.0, 0.0)
        if dof.mimic is None:
            return (col[dof.name], 1.0, 0.0) if dof.name in col else (-1, 0.0, 0.0)
        if dof.mimic.leader not in col:
            return (-1, 0.0, 0.0)
        return (col[dof.mimic.leader], float(dof.mimic.multiplier), float(dof.mimic.offset))

    lower = np.array([by_name[n].lower for n in joint_names])
    upper = np.array([by_name[n].upper for n in joint_names])

    def world(b: int) -> np.ndarray:
        return tree.rest_world[b] if b >= 0 else np.eye(4)

    def rest_rel(spec) -> np.ndarray:
        return invert_transform(world(spec.parent)) @ tree.rest_world[spec.child]

    # Chains: a list of constant transforms and motions per end-effector, consecutive constants folded.
    chains, chains_coords = [], []
    for ee, path, offset in zip(ees, paths, offsets):
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
        consts_a = np.stack(consts)
        chain_rev = np.array([1.0 if m.kind == "revolute" else 0.0 for m in motions])
        chains.append((consts_a[:, :3, :3], consts_a[:, :3, 3], chain_rev))
        chains_coords.append(tuple(coords(m) for m in motions))

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
    node_a = np.stack(node_t)
    arrays = {
        "lower": lower,
        "upper": upper,
        "tree_rot": node_a[:, :3, :3],
        "tree_pos": node_a[:, :3, 3],
        "tree_revolute": np.array([1.0 if d is not None and d.kind == "revolute" else 0.0 for d in node_dof]),
        "tree_prismatic": np.array([1.0 if d is not None and d.kind == "prismatic" else 0.0 for d in node_dof]),
        "tree_parent": np.array([p if p >= 0 else k for p in node_parent], dtype=np.int32),
        "body_node": body_node,
    }
    return _HostArrays(
        arrays, chains, joint_names, mimic, tuple(chains_coords), tuple(coords(d) for d in node_dof)
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
