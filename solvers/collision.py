"""Self-collision avoidance: capsules fitted to each body's colliders as read from the converted USD.

:func:`fit_self_collision` reads every prim with ``UsdPhysics.CollisionAPI`` below a link (meshes, and
the ``Sphere``/``Cube``/``Capsule``/``Cylinder`` primitives with their authored scale). A sphere or
capsule collider is kept exactly as one capsule; any other is sampled (surface and hull interior, in
the body frame) and covered by capsules (:func:`fit_capsules`: split the worst part at a median until
the average excess thickness is within a tolerance), so every sample is inside the cover (an
over-approximation; :class:`CoverError` says by how much).

Pairs of bodies are checked unless they are adjacent (parent and child joined by a joint, as MuJoCo and
URDF conventions exclude), cannot move relative to each other (no coordinate moves one without the
other), or touch at the rest pose (their collider surfaces closer than ``rest_gap``, 2 cm by default,
with all joints at zero). Of a checked pair, the capsule pairs that overlap (within the margin) at rest are left out
too: the cover's excess would otherwise put every configuration in collision.

In :func:`solvers.solve_ik`, each iteration computes every checked capsule pair's surface distance d
(segment distance minus radii), reduced per body pair in one fused pass per block shape
(:meth:`SelfCollision.group_distances`), and adds least-squares rows for the closest capsule pairs of
the ``active_pairs`` (8) nearest body pairs: row ∂d/∂q (analytic, from the closest points) and error
margin − d where d < margin. A solution counts as converged only where no two checked capsules overlap
(clearance ≥ 0); the margin keeps them apart while solving.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from os import PathLike
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

from .forward import tree_kernel
from .kinematics import Kinematics


class CoverError(NamedTuple):
    """How far a body's capsule cover is from its collider surface (metres).

    ``uncovered``: the farthest a fresh, denser surface sample lies outside every capsule (0 when the
    cover contains the surface). ``excess_max`` / ``excess_mean``: over points of the capsules' outer
    surface (inside no other capsule of the body), the distance to the nearest surface sample: how much
    the cover inflates the collider (0 for colliders that are spheres and capsules, which are exact).
    """

    uncovered: float
    excess_max: float
    excess_mean: float


#: The former name (the cover was made of spheres before capsules); a sphere is a capsule of length 0.
SphereCoverError = CoverError


@dataclass(frozen=True, eq=False)
class SelfCollision:
    """A capsule model of a Kinematics's links and the pairs to keep apart (a pytree).

    Arrays (S capsules, P capsule pairs): ``ends_a`` / ``ends_b`` (S, 3) the ends of each capsule's
    segment in its body's frame (equal for a sphere), ``radii`` (S,), ``capsule_body`` (S,) index into
    ``kin.body_names``, ``pair_a``/``pair_b`` (P,) capsule indices, ``pair_group`` (P,) index of the
    body pair, ``margin`` (m) and ``weight`` (of the rows, relative to frame tasks of weight 1). Static:
    ``body_pairs`` (G names), ``cover_error`` per body with capsules, ``blocks`` (G (i0, i1, j0, j1): the
    capsule ranges of each body pair) with ``block_masks`` (the capsule pairs of a block that are
    checked, row-major), ``active_pairs`` (body pairs that get rows per iteration).
    """

    ends_a: Array
    ends_b: Array
    radii: Array
    capsule_body: Array
    pair_a: Array
    pair_b: Array
    pair_group: Array
    margin: Array
    weight: Array
    body_pairs: tuple[tuple[str, str], ...]
    cover_error: tuple[tuple[str, CoverError], ...]
    blocks: tuple[tuple[int, int, int, int], ...] = ()
    block_masks: tuple[tuple[bool, ...], ...] = ()
    active_pairs: int = 8

    @property
    def num_capsules(self) -> int:
        return int(self.radii.shape[0])

    def capsule_ends(self, kin: Kinematics, q: Array) -> tuple[Array, Array]:
        """World segment ends (S, 3, ...), (S, 3, ...) for q (J, ...)."""
        pos, rot = tree_kernel(kin, q)  # (B, 3, ...), (B, 3, 3, ...)
        p, r = pos[self.capsule_body], rot[self.capsule_body]

        def world(local: Array) -> Array:
            c = local.reshape(local.shape + (1,) * (q.ndim - 1))
            return p + r[:, :, 0] * c[:, None, 0] + r[:, :, 1] * c[:, None, 1] + r[:, :, 2] * c[:, None, 2]

        return world(self.ends_a), world(self.ends_b)

    def pair_distances(self, kin: Kinematics, q: Array) -> Array:
        """Surface distance (P, ...) of every checked capsule pair (negative: overlap)."""
        a, b = self.capsule_ends(kin, q)
        gap = segment_distance(a[self.pair_a], b[self.pair_a], a[self.pair_b], b[self.pair_b])
        rad = (self.radii[self.pair_a] + self.radii[self.pair_b]).reshape((-1,) + (1,) * (q.ndim - 1))
        return gap - rad

    def _blocks(self, kin: Kinematics, q: Array):
        """The checked capsule pairs block by block. A body pair's capsule pairs are a dense block (its two
        bodies' capsules, those overlapping at rest masked out); blocks of one shape (ni, nj) are computed
        together and reduced in one fused pass, so no (P, ...) array of every pair's distance is stored
        and the traced program has one copy of the distance code per block shape.

        Yields per shape: surface distances (Gs, ni · nj, ...) (+inf where left out), the blocks' positions
        in ``blocks`` (Gs,), their first capsule indices (Gs,), (Gs,) and nj.
        """
        a, b = self.capsule_ends(kin, q)
        a, b = jnp.moveaxis(a, 1, 0), jnp.moveaxis(b, 1, 0)  # (3, S, ...): components first
        batch = q.shape[1:]
        shapes: dict[tuple[int, int], list[int]] = {}
        for g, (i0, i1, j0, j1) in enumerate(self.blocks):
            shapes.setdefault((i1 - i0, j1 - j0), []).append(g)
        for (ni, nj), groups in shapes.items():
            first_i = np.array([self.blocks[g][0] for g in groups])
            first_j = np.array([self.blocks[g][2] for g in groups])

            def side(ends: Array, first: np.ndarray, count: int, axis: int) -> Array:
                """(3, Gs, ni, 1, ...) or (3, Gs, 1, nj, ...): the blocks' capsules, sliced (no gather)."""
                return jnp.expand_dims(jnp.stack([ends[:, f:f + count] for f in first], axis=1), axis)

            _, _, gap = _closest(side(a, first_i, ni, 3), side(b, first_i, ni, 3), side(a, first_j, nj, 2),
                                 side(b, first_j, nj, 2), axis=0)
            dist = jnp.sqrt(gap[0] * gap[0] + gap[1] * gap[1] + gap[2] * gap[2] + 1e-18)  # (Gs, ni, nj, ...)
            ri = np.stack([np.arange(f, f + ni) for f in first_i])
            rj = np.stack([np.arange(f, f + nj) for f in first_j])
            lead = (1,) * len(batch)
            rad = (self.radii[ri][:, :, None] + self.radii[rj][:, None, :]).reshape((len(groups), ni, nj) + lead)
            keep = np.stack([np.asarray(self.block_masks[g], bool).reshape(ni, nj) for g in groups])
            d = jnp.where(keep.reshape(keep.shape + lead), dist - rad, jnp.inf)
            yield d.reshape((len(groups), ni * nj) + batch), np.array(groups), first_i, first_j, nj

    def group_distances(self, kin: Kinematics, q: Array) -> Array:
        """Per checked body pair, the surface distance (G, ...) of its closest capsule pair at q (J, ...)."""
        parts, order = [], []
        for d, groups, *_ in self._blocks(kin, q):
            parts.append(jnp.min(d, axis=1))
            order.append(groups)
        return jnp.concatenate(parts)[np.argsort(np.concatenate(order))]

    def clearance(self, kin: Kinematics, q: Array) -> Array:
        """Smallest pair distance (...) for q (J, ...); +inf when no pair is checked."""
        if not self.blocks:
            return jnp.full(q.shape[1:], jnp.inf, q.dtype)
        return jnp.min(self.group_distances(kin, q), axis=0)

    def nearest(self, kin: Kinematics, q: Array, distances: Array | None = None) -> tuple[Array, Array]:
        """Capsule indices (K, ...), (K, ...) of the closest capsule pairs of the K = min(``active_pairs``,
        G) closest body pairs at q; ``distances``: :meth:`group_distances` at q, if already known."""
        if distances is None:
            distances = self.group_distances(kin, q)
        cap_a, cap_b, order = [], [], []
        for d, groups, first_i, first_j, nj in self._blocks(kin, q):
            # The index of each block's minimum as an integer min-reduction (XLA:CPU fuses and vectorises
            # it; an argmin's variadic reduction costs 9 times the distances themselves).
            best = distances[groups][:, None]
            iota = jnp.arange(d.shape[1], dtype=jnp.int32).reshape((1, -1) + (1,) * (d.ndim - 2))
            k = jnp.minimum(jnp.min(jnp.where(d <= best, iota, d.shape[1]), axis=1), d.shape[1] - 1)
            lead = (-1,) + (1,) * (d.ndim - 2)
            cap_a.append(jnp.asarray(first_i, jnp.int32).reshape(lead) + k // nj)
            cap_b.append(jnp.asarray(first_j, jnp.int32).reshape(lead) + k % nj)
            order.append(groups)
        back = np.argsort(np.concatenate(order))
        cap_a_, cap_b_ = jnp.concatenate(cap_a)[back], jnp.concatenate(cap_b)[back]
        k = min(self.active_pairs, int(distances.shape[0]))
        _, idx = lax.top_k(jnp.moveaxis(-distances, 0, -1), k)
        idx = jnp.moveaxis(idx, -1, 0)
        return jnp.take_along_axis(cap_a_, idx, axis=0), jnp.take_along_axis(cap_b_, idx, axis=0)

    def rows(self, kin: Kinematics, q: Array, pairs: tuple[Array, Array] | None = None) -> tuple[Array, Array]:
        """Least-squares rows (K, J, ...) and errors (K, ...) pushing apart the capsule pairs ``pairs``
        (capsule indices (K, ...), (K, ...); default: :meth:`nearest` at q) that are within the margin:
        row ∂d/∂q and error margin − d, both times sqrt(weight); zero for a pair farther apart.

        ∂d/∂q is analytic: with the closest points p_a, p_b of the two segments and n their unit
        direction, ∂d/∂q = n · (∂p_a/∂q − ∂p_b/∂q) at fixed segment parameters (the parameters are a
        minimiser, so their own change does not enter to first order). The point derivatives come from
        the link poses' derivatives (forward mode through the tree FK, one tangent per joint), gathered
        per selected pair.
        """
        if pairs is None:
            pairs = self.nearest(kin, q)
        cap_a, cap_b = pairs
        n_joints, batch = q.shape[0], q.shape[1:]
        (pos, rot), lin = jax.linearize(lambda x: tree_kernel(kin, x), q)
        eye = jnp.eye(n_joints, dtype=q.dtype).reshape((n_joints, n_joints) + (1,) * len(batch))
        d_pos, d_rot = jax.vmap(lin)(jnp.broadcast_to(eye, (n_joints,) + q.shape))  # (J, B, 3, ...), (J, B, 3, 3, ...)
        n_bodies = pos.shape[0]
        # Per body: position, rotation and their J derivatives, flat: (B, 12 (J + 1), ...).
        flat = jnp.concatenate([
            pos, rot.reshape((n_bodies, 9) + batch),
            jnp.moveaxis(d_pos, 0, 1).reshape((n_bodies, 3 * n_joints) + batch),
            jnp.moveaxis(d_rot, 0, 1).reshape((n_bodies, 9 * n_joints) + batch)], axis=1)
        caps = jnp.concatenate([cap_a, cap_b])  # (2K, ...)
        body = self.capsule_body[caps]
        g = jnp.take_along_axis(flat, jnp.broadcast_to(body[:, None], body.shape[:1] + flat.shape[1:2] + batch), axis=0)
        p = g[:, 0:3]
        r = g[:, 3:12].reshape((-1, 3, 3) + batch)
        dp = g[:, 12:12 + 3 * n_joints].reshape((-1, n_joints, 3) + batch)
        dr = g[:, 12 + 3 * n_joints:].reshape((-1, n_joints, 3, 3) + batch)

        def world(local: Array) -> tuple[Array, Array]:
            """Capsule ends in the world (2K, 3, ...) and their derivatives (2K, J, 3, ...)."""
            c = jnp.moveaxis(local[caps], -1, 1)  # (2K, 3, ...)
            x = p + jnp.sum(r * c[:, None], axis=2)
            dx = dp + jnp.sum(dr * c[:, None, None], axis=3)
            return x, dx

        e_a, de_a = world(self.ends_a)
        e_b, de_b = world(self.ends_b)
        k = cap_a.shape[0]
        s, t, gap = _closest(e_a[:k], e_b[:k], e_a[k:], e_b[k:])
        dist = jnp.sqrt(jnp.sum(gap * gap, axis=1) + 1e-18)
        normal = gap / dist[:, None]
        s, t = s[:, None, None], t[:, None, None]
        d_gap = de_a[:k] + s * (de_b[:k] - de_a[:k]) - de_a[k:] - t * (de_b[k:] - de_a[k:])  # (K, J, 3, ...)
        grad = jnp.sum(d_gap * normal[:, None], axis=2)  # (K, J, ...)
        d = dist - self.radii[cap_a] - self.radii[cap_b]
        active = d < self.margin
        scale = jnp.sqrt(self.weight)
        return jnp.where(active[:, None], scale * grad, 0.0), jnp.where(active, scale * (self.margin - d), 0.0)


jax.tree_util.register_dataclass(
    SelfCollision,
    data_fields=["ends_a", "ends_b", "radii", "capsule_body", "pair_a", "pair_b", "pair_group", "margin",
                 "weight"],
    meta_fields=["body_pairs", "cover_error", "blocks", "block_masks", "active_pairs"],
)


def segment_distance(p1: Array, q1: Array, p2: Array, q2: Array, xp: Any = jnp) -> Array:
    """Distance (P, ...) between segments p1–q1 and p2–q2, each (P, 3, ...) (Ericson, Real-Time Collision
    Detection, 5.1.9). Degenerate segments (points) are handled; the closest parameters are clamped
    into [0, 1], so the result is differentiable almost everywhere. ``xp=numpy`` evaluates it on the
    host (no tracing, for the fit)."""
    _, _, gap = _closest(p1, q1, p2, q2, xp)
    return xp.sqrt(gap[:, 0] * gap[:, 0] + gap[:, 1] * gap[:, 1] + gap[:, 2] * gap[:, 2] + 1e-18)


def _closest(p1: Array, q1: Array, p2: Array, q2: Array, xp: Any = jnp, axis: int = 1) -> tuple[Array, Array, Array]:
    """Closest-point parameters s, t in [0, 1] of segments p1–q1 and p2–q2 (the 3 components on
    ``axis``, broadcasting over the others), and the vector between the two closest points (first minus
    second, components on ``axis``)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2

    def dot(u: Array, v: Array) -> Array:
        c = lambda w, i: w[(slice(None),) * axis + (i,)]  # noqa: E731
        return c(u, 0) * c(v, 0) + c(u, 1) * c(v, 1) + c(u, 2) * c(v, 2)

    a, e, f, c, b = dot(d1, d1), dot(d2, d2), dot(d2, r), dot(d1, r), dot(d1, d2)
    tiny = 1e-12
    a_s, e_s = xp.maximum(a, tiny), xp.maximum(e, tiny)
    denom = a * e - b * b
    s = xp.where(denom > 1e-6 * a * e + tiny, xp.clip((b * f - c * e) / xp.maximum(denom, tiny), 0.0, 1.0), 0.0)
    t = xp.where(e > tiny, (b * s + f) / e_s, 0.0)
    s = xp.where((t < 0.0) | (e <= tiny), xp.clip(-c / a_s, 0.0, 1.0), xp.where(t > 1.0, xp.clip((b - c) / a_s, 0.0, 1.0), s))
    s = xp.where(a > tiny, s, 0.0)
    t = xp.clip(t, 0.0, 1.0)
    return s, t, p1 + d1 * xp.expand_dims(s, axis) - p2 - d2 * xp.expand_dims(t, axis)


# ---------------------------------------------------------------------------------------------------------
# Host side: colliders from USD.


@dataclass(frozen=True)
class Collider:
    """One collider prim in its body's frame (metres): ``surface`` samples (M, 3) (its vertices and
    area-weighted points of its triangles), ``interior`` samples (K, 3) of its convex hull, and ``exact``
    (ends_a (k, 3), ends_b (k, 3), radii (k,)) when the prim is itself a sphere or capsule (uniformly
    scaled), else None."""

    surface: np.ndarray
    interior: np.ndarray
    exact: tuple[np.ndarray, np.ndarray, np.ndarray] | None


def read_colliders(usd_path: str | PathLike[str], kin: Kinematics, samples_per_m2: float = 20000.0,
                   seed: int = 0) -> dict[str, list[Collider]]:
    """Every link's colliders (:class:`Collider`, in the link's frame), by body name.

    Meshes contribute their vertices and area-weighted samples of their triangles; primitives (Sphere,
    Cube, Capsule, Cylinder) are tessellated by trimesh with their full authored transform (scale
    included). Colliders are found below the link's prim; a frame (merged link) gives its colliders to
    the body it belongs to only through its own name.
    """
    import trimesh
    from pxr import Usd, UsdGeom, UsdPhysics

    from .usd_tree import read_kinematic_tree

    tree = read_kinematic_tree(usd_path)
    stage = Usd.Stage.Open(str(usd_path))
    mpu = float(UsdGeom.GetStageMetersPerUnit(stage))
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    rng = np.random.default_rng(seed)
    out: dict[str, list[Collider]] = {}
    for name, path in zip(tree.body_names, tree.body_paths):
        body = stage.GetPrimAtPath(path)
        body_inv = np.linalg.inv(_matrix(cache.GetLocalToWorldTransform(body), mpu))
        found: list[Collider] = []
        for prim in Usd.PrimRange(body, Usd.TraverseInstanceProxies()):
            if prim != body and prim.HasAPI(UsdPhysics.RigidBodyAPI):
                continue  # another body's subtree (bodies are flat, but be safe)
            if not prim.HasAPI(UsdPhysics.CollisionAPI):
                continue
            mesh = _collider_mesh(prim, trimesh)
            if mesh is None:
                continue
            to_body = body_inv @ _matrix(cache.GetLocalToWorldTransform(prim), mpu)
            mesh.apply_transform(to_body)
            count = int(min(20000, max(200, mesh.area * samples_per_m2)))
            sampled, _ = trimesh.sample.sample_surface(mesh, count, seed=int(rng.integers(1 << 31)))
            verts = np.asarray(mesh.vertices)
            # Interior samples (of the convex hull: collision meshes are hulls or near it) for the fit.
            found.append(Collider(np.concatenate([verts, np.asarray(sampled)]), _hull_interior(verts, rng),
                                  _exact_capsule(prim, to_body)))
        if found:
            out[name] = found
    return out


def _exact_capsule(prim: Any, to_body: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A Sphere or Capsule prim as one capsule in the body frame (metres), or None (other types, or a
    scale that is not uniform: an ellipsoid is no capsule)."""
    from pxr import UsdGeom

    if not (prim.IsA(UsdGeom.Sphere) or prim.IsA(UsdGeom.Capsule)):
        return None
    linear = to_body[:3, :3]
    scale = np.linalg.svd(linear, compute_uv=False)
    if scale.max() > scale.min() * (1 + 1e-6):
        return None
    # The same mapping as the tessellated colliders' (to_body applied to the prim's own coordinates).
    radius = float(prim.GetAttribute("radius").Get() or 0.0) * scale[0]
    half = np.zeros(3)
    if prim.IsA(UsdGeom.Capsule):
        axis = {"X": 0, "Y": 1, "Z": 2}[str(prim.GetAttribute("axis").Get() or "Z")]
        half[axis] = 0.5 * float(prim.GetAttribute("height").Get() or 0.0)
    a, b = linear @ half + to_body[:3, 3], linear @ -half + to_body[:3, 3]
    return a[None], b[None], np.array([radius])


def _hull_interior(vertices: np.ndarray, rng: np.random.Generator, count: int = 4000) -> np.ndarray:
    """Uniform samples inside the convex hull of ``vertices`` (none for a flat or tiny point set)."""
    from scipy.spatial import ConvexHull, QhullError

    try:
        hull = ConvexHull(vertices)
    except (QhullError, ValueError):
        return np.zeros((0, 3))
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    box = rng.uniform(lo, hi, size=(count, 3))
    inside = np.all(box @ hull.equations[:, :3].T + hull.equations[:, 3] <= 0, axis=1)
    return box[inside]


def _matrix(gf: Any, mpu: float) -> np.ndarray:
    """Column-convention 4×4 (scale kept) from a Gf row-convention matrix; translation in metres."""
    m = np.array(gf, dtype=np.float64).T
    m[:3, 3] *= mpu
    m[:3, :3] *= 1.0  # rotation and scale stay as authored (scale is unitless)
    return m


def _collider_mesh(prim: Any, trimesh: Any) -> Any:
    """A trimesh of one collider prim in its own frame (USD units), or None for an unsupported type."""
    from pxr import UsdGeom

    def get(attr: str, default: Any) -> Any:
        a = prim.GetAttribute(attr)
        v = a.Get() if a else None
        return default if v is None else v

    if prim.IsA(UsdGeom.Mesh):
        points = np.asarray(get("points", []), dtype=np.float64).reshape(-1, 3)
        counts = np.asarray(get("faceVertexCounts", []), dtype=np.int64)
        indices = np.asarray(get("faceVertexIndices", []), dtype=np.int64)
        faces, start = [], 0
        for c in counts:  # fan triangulation of each polygon
            faces += [(indices[start], indices[start + i], indices[start + i + 1]) for i in range(1, c - 1)]
            start += c
        if not len(points) or not faces:
            return None
        return trimesh.Trimesh(points, np.array(faces), process=False)
    axis_to_z = {"X": trimesh.transformations.rotation_matrix(math.pi / 2, [0, 1, 0]),
                 "Y": trimesh.transformations.rotation_matrix(-math.pi / 2, [1, 0, 0]), "Z": np.eye(4)}
    if prim.IsA(UsdGeom.Sphere):
        return trimesh.creation.icosphere(subdivisions=2, radius=float(get("radius", 1.0)))
    if prim.IsA(UsdGeom.Cube):
        return trimesh.creation.box(extents=[float(get("size", 2.0))] * 3)
    if prim.IsA(UsdGeom.Capsule):
        m = trimesh.creation.capsule(height=float(get("height", 1.0)), radius=float(get("radius", 0.5)))
        return m.apply_transform(axis_to_z[str(get("axis", "Z"))])
    if prim.IsA(UsdGeom.Cylinder):
        m = trimesh.creation.cylinder(radius=float(get("radius", 1.0)), height=float(get("height", 2.0)))
        return m.apply_transform(axis_to_z[str(get("axis", "Z"))])
    return None


# ---------------------------------------------------------------------------------------------------------
# Capsule fitting.


class _Capsule(NamedTuple):
    a: np.ndarray  # (3,) segment end
    b: np.ndarray  # (3,) segment end
    radius: float
    volume: float
    area: float


def enclosing_capsule(points: np.ndarray, radii_steps: int = 40) -> _Capsule:
    """The smallest-volume capsule containing ``points`` (N, 3) along one of their principal axes.

    For an axis through the centre of the points' cross-section, radius R (from the largest distance to
    the axis up to 2.5 times it), the segment is the shortest that keeps every point within R:
    end β = max(t − √(R² − ρ²)), start α = min(t + √(R² − ρ²)) over the points' axial t and radial ρ
    (a sphere where α ≥ β).
    """
    centre = points.mean(axis=0)
    _, _, axes = np.linalg.svd(points - centre, full_matrices=False)
    best: _Capsule | None = None
    for axis in axes:
        # Centre the axis on the cross-section's bounding box (closer to the smallest enclosing circle
        # than the mean for lopsided sections).
        rel = points - centre
        t = rel @ axis
        radial = rel - t[:, None] * axis
        e1 = axes[0] if abs(axis @ axes[0]) < 0.5 else axes[1]
        e1 = e1 - (e1 @ axis) * axis
        e1 /= np.linalg.norm(e1)
        e2 = np.cross(axis, e1)
        u, v = radial @ e1, radial @ e2
        shift = 0.5 * (u.max() + u.min()) * e1 + 0.5 * (v.max() + v.min()) * e2
        origin = centre + shift
        rho = np.linalg.norm(radial - shift, axis=1)
        r_max = float(rho.max())
        radii = r_max * np.linspace(1.0, 2.5, radii_steps) if r_max > 0 else np.array([0.0])
        slack = np.sqrt(np.maximum(radii[:, None] ** 2 - rho[None] ** 2, 0.0))  # (R, N)
        hi = (t[None] - slack).max(axis=1)
        lo = (t[None] + slack).min(axis=1)
        length = np.maximum(hi - lo, 0.0)
        volume = math.pi * radii ** 2 * length + 4.0 / 3.0 * math.pi * radii ** 3
        k = int(np.argmin(volume))
        if length[k] > 0:
            a, b = origin + lo[k] * axis, origin + hi[k] * axis
        else:
            a = b = origin + 0.5 * (lo[k] + hi[k]) * axis
        cap = _Capsule(a, b, float(radii[k]), float(volume[k]),
                       float(2 * math.pi * radii[k] * length[k] + 4 * math.pi * radii[k] ** 2))
        if best is None or cap.volume < best.volume:
            best = cap
    assert best is not None
    return best


def _hull_volume(points: np.ndarray) -> float:
    from scipy.spatial import ConvexHull, QhullError

    try:
        return float(ConvexHull(points).volume)
    except (QhullError, ValueError):
        return 0.0  # flat or too few points: the whole capsule counts as excess


def fit_capsules(points: np.ndarray, max_capsules: int = 8, tolerance: float = 0.003) -> list[_Capsule]:
    """Capsules whose union contains ``points`` (N, 3): split the worst-fitting part in two until every
    part's excess — (capsule volume − part hull volume) / capsule area, roughly the average thickness
    the capsule adds, metres — is within ``tolerance``, or ``max_capsules`` are used.

    A part is split at the median of the principal axis that gives the two halves the smallest total
    capsule volume (even where that is more than the part's: a box needs two levels of splits before its
    capsules shrink); each half keeps its points, so every point stays inside some capsule.
    """
    parts = [points]
    caps = [enclosing_capsule(points)]

    def excess(part: np.ndarray, cap: _Capsule) -> float:
        return (cap.volume - _hull_volume(part)) / max(cap.area, 1e-12)

    waste = [excess(points, caps[0])]
    while len(parts) < max_capsules:
        i = int(np.argmax(waste))
        if waste[i] <= tolerance:
            break
        part = parts[i]
        centre = part.mean(axis=0)
        _, _, axes = np.linalg.svd(part - centre, full_matrices=False)
        best = None
        for axis in axes:
            t = (part - centre) @ axis
            cut = np.median(t)
            halves = (part[t <= cut], part[t > cut])
            if min(len(h) for h in halves) < 8:
                continue
            pair = (enclosing_capsule(halves[0]), enclosing_capsule(halves[1]))
            if best is None or pair[0].volume + pair[1].volume < best[0][0].volume + best[0][1].volume:
                best = (pair, halves)
        if best is None:
            waste[i] = 0.0  # too few points to split: keep this capsule
            continue
        (c0, c1), (h0, h1) = best
        parts[i:i + 1], caps[i:i + 1], waste[i:i + 1] = [h0, h1], [c0, c1], [excess(h0, c0), excess(h1, c1)]
    return caps


def _point_capsule_distance(points: np.ndarray, a: np.ndarray, b: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Signed distance (N, S) of points (N, 3) to capsules (S ends, S radii); negative inside."""
    d = b - a  # (S, 3)
    len2 = np.maximum(np.einsum("sk,sk->s", d, d), 1e-18)
    t = np.clip(np.einsum("nsk,sk->ns", points[:, None] - a[None], d) / len2, 0.0, 1.0)
    closest = a[None] + t[..., None] * d[None]
    return np.linalg.norm(points[:, None] - closest, axis=2) - radii[None]


def cover_error(surface: np.ndarray, check: np.ndarray, a: np.ndarray, b: np.ndarray, radii: np.ndarray,
                fitted: np.ndarray, seed: int = 0) -> CoverError:
    """:class:`CoverError` of a body's capsules (ends ``a``/``b`` (S, 3), ``radii`` (S,)) against its
    collider surface: ``check`` (a fresh, denser sample) for the uncovered part, and the nearest of
    ``surface`` ∪ ``check`` to each point of the fitted capsules' outer surface (``fitted`` (S,) bool:
    capsules that are a collider exactly add no excess and are not sampled)."""
    from scipy.spatial import cKDTree

    uncovered = float(max(0.0, _point_capsule_distance(check, a, b, radii).min(axis=1).max()))
    if not fitted.any():
        return CoverError(uncovered, 0.0, 0.0)
    rng = np.random.default_rng(seed)
    shells = []
    for i in np.flatnonzero(fitted):
        d = b[i] - a[i]
        n = float(np.linalg.norm(d))
        dirs = rng.normal(size=(384, 3))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        u = rng.uniform(0.0, 1.0, size=384)
        if n > 0:
            axis = d / n
            along = dirs @ axis
            side = np.arange(384) % 3  # a third on each cap, a third on the cylinder
            u = np.where(side == 0, 0.0, np.where(side == 1, 1.0, u))
            flip = ((side == 0) & (along > 0)) | ((side == 1) & (along < 0))
            dirs = np.where(flip[:, None], dirs - 2 * along[:, None] * axis, dirs)
            cyl = side == 2
            dirs[cyl] -= (dirs[cyl] @ axis)[:, None] * axis
            dirs[cyl] /= np.linalg.norm(dirs[cyl], axis=1, keepdims=True)
        shells.append(a[i] + u[:, None] * d + radii[i] * dirs)
    shell = np.concatenate(shells)
    outer = shell[~(_point_capsule_distance(shell, a, b, radii) < -1e-7).any(axis=1)]
    if not len(outer):
        return CoverError(uncovered, 0.0, 0.0)
    dist, _ = cKDTree(np.concatenate([surface, check])).query(outer)
    return CoverError(uncovered, float(dist.max()), float(dist.mean()))


def fit_self_collision(
    usd_path: str | PathLike[str],
    kin: Kinematics,
    *,
    margin: float = 0.005,
    weight: float = 10.0,
    max_capsules: int = 8,
    tolerance: float = 0.003,
    bodies: list[str] | None = None,
    between: list[tuple[list[str], list[str]]] | None = None,
    rest_gap: float = 0.02,
    seed: int = 0,
) -> SelfCollision:
    """Fit :class:`SelfCollision` for ``kin`` from the colliders in ``usd_path``.

    A collider that is a sphere or a capsule (uniformly scaled) is taken as it is. Any other (a mesh, a
    cube, a cylinder) is covered by up to ``max_capsules`` capsules that contain its surface and hull
    interior samples, split until the average excess thickness is within ``tolerance`` (m):
    :func:`fit_capsules`. ``bodies`` limits the model to these links (default: every link with
    colliders); ``between = [(group_a, group_b), ...]`` checks only pairs with one link in each group of
    one of the entries (e.g. a humanoid's arm links against its torso and legs).
    ``margin`` (m) is the distance the solve keeps between checked covers; ``weight`` scales the
    collision rows against frame tasks of weight 1. Pairs whose colliders are closer than ``rest_gap``
    (m, at least the margin) at rest count as touching: a cover a little larger than its links cannot
    tell such neighbours (franka's link5 and link7 around the wrist) from a collision. Raises ValueError
    when no pair is left to check.
    """
    from scipy.spatial import cKDTree

    if margin < 0 or not math.isfinite(margin):
        raise ValueError(f"collision margin must be finite and >= 0 metres, got {margin}")
    colliders = read_colliders(usd_path, kin, seed=seed)
    dense = read_colliders(usd_path, kin, samples_per_m2=80000.0, seed=seed + 1)
    pts = {b: np.concatenate([c.surface for c in cs]) for b, cs in colliders.items()}
    if between is not None:
        bodies = sorted({b for group_a, group_b in between for b in [*group_a, *group_b]})
        wanted = {frozenset((a, b)) for group_a, group_b in between for a in group_a for b in group_b if a != b}
    names = [b for b in kin.body_names if b in pts and (bodies is None or b in bodies)]
    if bodies is not None:
        missing = sorted(set(bodies) - set(names))
        if missing:
            raise ValueError(f"no colliders found for bodies {missing} in {usd_path}")
    ends_a, ends_b, radii, owner, errors = [], [], [], [], []
    for name in names:
        a, b, r, fitted = [], [], [], []
        for col in colliders[name]:
            if col.exact is not None:
                a.append(col.exact[0]), b.append(col.exact[1]), r.append(col.exact[2])
                fitted += [False] * len(col.exact[2])
                continue
            caps = fit_capsules(np.concatenate([col.surface, col.interior]), max_capsules, tolerance)
            a.append(np.array([c.a for c in caps])), b.append(np.array([c.b for c in caps]))
            r.append(np.array([c.radius for c in caps]))
            fitted += [True] * len(caps)
        a_, b_, r_ = np.concatenate(a), np.concatenate(b), np.concatenate(r)
        check = np.concatenate([c.surface for c in dense[name]])
        errors.append((name, cover_error(pts[name], check, a_, b_, r_, np.array(fitted), seed=seed)))
        ends_a.append(a_), ends_b.append(b_), radii.append(r_)
        owner += [kin.body_index(name)] * len(r_)
    ends_a_ = np.concatenate(ends_a) if ends_a else np.zeros((0, 3))
    ends_b_ = np.concatenate(ends_b) if ends_b else np.zeros((0, 3))
    radii_a = np.concatenate(radii) if radii else np.zeros(0)
    owner_a = np.array(owner, dtype=np.int32)

    # Candidate body pairs: not parent/child, and moved apart by some coordinate.
    movers = _coordinates_moving(kin)
    parent = _parent_body(kin, usd_path)
    rest_pts = _rest_points(kin, {b: pts[b] for b in names})
    rest_a, rest_b = np.zeros_like(ends_a_), np.zeros_like(ends_b_)
    for name in names:
        own = owner_a == kin.body_index(name)
        rest_a[own] = _rest_points(kin, {name: ends_a_[own]})[name]
        rest_b[own] = _rest_points(kin, {name: ends_b_[own]})[name]
    groups, pa, pb, pg, blocks, masks = [], [], [], [], [], []
    for i, j in itertools.combinations(range(len(names)), 2):
        bi, bj = kin.body_index(names[i]), kin.body_index(names[j])
        if between is not None and frozenset((names[i], names[j])) not in wanted:
            continue
        if parent.get(bi) == bj or parent.get(bj) == bi or movers[bi] == movers[bj]:
            continue
        # Touching at rest (the colliders themselves, not their covers, closer than the margin): a pair
        # the robot is built to hold close.
        near = max(margin, rest_gap)
        if cKDTree(rest_pts[names[i]]).query(rest_pts[names[j]], distance_upper_bound=near)[0].min() < near:
            continue
        si, sj = np.flatnonzero(owner_a == bi), np.flatnonzero(owner_a == bj)  # contiguous (added body by body)
        a, b = np.repeat(si, len(sj)), np.tile(sj, len(si))
        # Capsule pairs of the covers that already overlap (within the margin) at rest cannot be told
        # from the rest pose: they are left out, the pair's other capsules still count.
        gap = segment_distance(rest_a[a], rest_b[a], rest_a[b], rest_b[b], xp=np)
        apart = gap - radii_a[a] - radii_a[b] >= margin
        if not apart.any():
            continue
        blocks.append((int(si[0]), int(si[-1]) + 1, int(sj[0]), int(sj[-1]) + 1))
        masks.append(tuple(bool(x) for x in apart))
        a, b = a[apart], b[apart]
        groups.append((names[i], names[j]))
        pa.append(a)
        pb.append(b)
        pg.append(np.full(len(a), len(groups) - 1))
    if not groups:
        raise ValueError(f"{usd_path}: no pair of links to keep apart (all adjacent, rigidly joined or touching at rest)")
    dt = kin.dtype
    return SelfCollision(
        ends_a=jnp.asarray(ends_a_, dt), ends_b=jnp.asarray(ends_b_, dt), radii=jnp.asarray(radii_a, dt),
        capsule_body=jnp.asarray(owner_a), pair_a=jnp.asarray(np.concatenate(pa), jnp.int32),
        pair_b=jnp.asarray(np.concatenate(pb), jnp.int32), pair_group=jnp.asarray(np.concatenate(pg), jnp.int32),
        margin=jnp.asarray(margin, dt), weight=jnp.asarray(weight, dt), body_pairs=tuple(groups),
        cover_error=tuple(errors), blocks=tuple(blocks), block_masks=tuple(masks),
    )


def _rest_points(kin: Kinematics, points: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Body-frame points moved to the world at q = 0 (the USD rest pose)."""
    from scipy.spatial.transform import Rotation

    from .forward import forward_kinematics_all

    pos, quat = (np.asarray(a, np.float64) for a in forward_kinematics_all(kin, np.zeros(kin.num_joints)))
    out = {}
    for b, p in points.items():
        i = kin.body_index(b)
        out[b] = pos[i] + Rotation.from_quat(quat[i, [1, 2, 3, 0]]).apply(p)
    return out


def _coordinates_moving(kin: Kinematics) -> list[frozenset[int]]:
    """Per body, the coordinates that move it (a body's set equals its parent's plus its own joint's)."""
    parent = np.asarray(kin.tree_parent)
    node_q = [c[0] for c in kin.tree_coords]
    k = len(node_q)
    moved: list[frozenset[int]] = []
    for node in range(k):
        p = int(parent[node])
        base = moved[p] if p < k else frozenset()
        moved.append(base | ({node_q[node]} if node_q[node] >= 0 else frozenset()))
    return [moved[int(n)] for n in np.asarray(kin.body_node)]


def _parent_body(kin: Kinematics, usd_path: str | PathLike[str]) -> dict[int, int]:
    """Child body index → parent body index, from the USD joints (frames map to their body)."""
    from .usd_tree import read_kinematic_tree

    tree = read_kinematic_tree(usd_path)  # same link order as kin.body_names
    return {spec.child: spec.parent for spec in tree.joints if spec.parent >= 0}
