"""Self-collision avoidance: spheres fitted to each body's colliders as read from the converted USD.

:func:`fit_self_collision` reads every prim with ``UsdPhysics.CollisionAPI`` below a link (meshes, and
the ``Sphere``/``Cube``/``Capsule``/``Cylinder`` primitives with their authored scale), samples its
surface in the body frame, and covers each body with up to ``max_spheres`` spheres: k-means centres of
the samples, each radius the distance to the farthest sample it owns, so every sample is inside the
cover (an over-approximation; :class:`SphereCoverError` says by how much).

Pairs of bodies are checked unless they are adjacent (parent and child joined by a joint, as MuJoCo and
URDF conventions exclude), cannot move relative to each other (no coordinate moves one without the
other), or touch at the rest pose (their collider surfaces closer than ``rest_gap``, 2 cm by default,
with all joints at zero). Of a checked pair, the sphere pairs that overlap (within the margin) at rest are left out too:
the cover's excess would otherwise put every configuration in collision (franka link0/link2 overlap
through link1's).

In :func:`solvers.solve_ik`, :class:`SelfCollision` adds one least-squares row per checked body pair:
``r = sqrt(Σ max(0, margin − d)²)`` over its sphere pairs, with d the surface distance of two spheres,
and its gradient by forward-mode differentiation of the link FK. A solution counts as converged only
where no two checked spheres overlap (clearance ≥ 0); the margin keeps them apart while solving.
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
from jax import Array

from .forward import tree_kernel
from .kinematics import Kinematics


class SphereCoverError(NamedTuple):
    """How far a body's sphere cover is from its collider surface (metres).

    ``uncovered``: the farthest a fresh, denser surface sample lies outside every sphere (0 when the
    cover contains the surface). ``excess_max`` / ``excess_mean``: over points of the spheres' outer
    surface (inside no other sphere), the distance to the nearest surface sample: how much the cover
    inflates the collider.
    """

    uncovered: float
    excess_max: float
    excess_mean: float


@dataclass(frozen=True, eq=False)
class SelfCollision:
    """A sphere model of a Kinematics's links and the pairs to keep apart (a pytree).

    Arrays (S spheres, P sphere pairs): ``centres`` (S, 3) in the body frame, ``radii`` (S,),
    ``sphere_body`` (S,) index into ``kin.body_names``, ``pair_a``/``pair_b`` (P,) sphere indices,
    ``pair_group`` (P,) index of the body pair, ``margin`` (m) and ``weight`` (of the rows, relative to
    frame tasks of weight 1). Static: ``body_pairs`` (G names), ``cover_error`` per body with spheres.
    """

    centres: Array
    radii: Array
    sphere_body: Array
    pair_a: Array
    pair_b: Array
    pair_group: Array
    margin: Array
    weight: Array
    body_pairs: tuple[tuple[str, str], ...]
    cover_error: tuple[tuple[str, SphereCoverError], ...]

    @property
    def num_spheres(self) -> int:
        return int(self.radii.shape[0])

    def sphere_centres(self, kin: Kinematics, q: Array) -> Array:
        """World centres (S, 3, ...) for q (J, ...)."""
        pos, rot = tree_kernel(kin, q)  # (B, 3, ...), (B, 3, 3, ...)
        p, r = pos[self.sphere_body], rot[self.sphere_body]
        c = self.centres.reshape(self.centres.shape + (1,) * (q.ndim - 1))
        return p + r[:, :, 0] * c[:, None, 0] + r[:, :, 1] * c[:, None, 1] + r[:, :, 2] * c[:, None, 2]

    def pair_distances(self, kin: Kinematics, q: Array) -> Array:
        """Surface distance (P, ...) of every checked sphere pair (negative: overlap)."""
        c = self.sphere_centres(kin, q)
        d = c[self.pair_a] - c[self.pair_b]
        rad = (self.radii[self.pair_a] + self.radii[self.pair_b]).reshape((-1,) + (1,) * (q.ndim - 1))
        return jnp.sqrt(d[:, 0] ** 2 + d[:, 1] ** 2 + d[:, 2] ** 2) - rad

    def clearance(self, kin: Kinematics, q: Array) -> Array:
        """Smallest pair distance (...) for q (J, ...); +inf when no pair is checked."""
        if self.pair_a.shape[0] == 0:
            return jnp.full(q.shape[1:], jnp.inf, q.dtype)
        return jnp.min(self.pair_distances(kin, q), axis=0)

    def penalty(self, kin: Kinematics, q: Array) -> Array:
        """Σ max(0, margin − d)² per body pair (G, ...)."""
        pen = jnp.maximum(self.margin - self.pair_distances(kin, q), 0.0)
        return jax.ops.segment_sum(pen * pen, self.pair_group, num_segments=len(self.body_pairs))

    def rows(self, kin: Kinematics, q: Array) -> tuple[Array, Array]:
        """Least-squares rows (G, J, ...) and errors (G, ...) pushing apart the pairs within the margin."""
        n_joints = q.shape[0]
        value, lin = jax.linearize(lambda x: self.penalty(kin, x), q)
        eye = jnp.eye(n_joints, dtype=q.dtype).reshape((n_joints, n_joints) + (1,) * (q.ndim - 1))
        grad = jax.vmap(lin)(jnp.broadcast_to(eye, (n_joints,) + q.shape))  # (J, G, ...)
        active = value > 0
        r = jnp.sqrt(jnp.where(active, value, 1.0))
        scale = jnp.sqrt(self.weight)
        rows = jnp.where(active[None], grad / (2.0 * r), 0.0)  # d sqrt(C) / dq
        return scale * jnp.moveaxis(rows, 0, 1), jnp.where(active, -scale * r, 0.0)


jax.tree_util.register_dataclass(
    SelfCollision,
    data_fields=["centres", "radii", "sphere_body", "pair_a", "pair_b", "pair_group", "margin", "weight"],
    meta_fields=["body_pairs", "cover_error"],
)


# ---------------------------------------------------------------------------------------------------------
# Host side: colliders from USD, sphere fitting, pair selection.


#: Interior samples of the last :func:`collider_points` call, by (USD path, body).
INTERIOR: dict[tuple[str, str], np.ndarray] = {}


def collider_points(usd_path: str | PathLike[str], kin: Kinematics, samples_per_m2: float = 20000.0,
                    seed: int = 0) -> dict[str, np.ndarray]:
    """Surface samples (M, 3), metres in the body frame, of every link's colliders, by body name.

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
    out: dict[str, np.ndarray] = {}
    for name, path in zip(tree.body_names, tree.body_paths):
        body = stage.GetPrimAtPath(path)
        body_inv = np.linalg.inv(_matrix(cache.GetLocalToWorldTransform(body), mpu))
        pts: list[np.ndarray] = []
        inside: list[np.ndarray] = []
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
            pts += [np.asarray(mesh.vertices), np.asarray(sampled)]
            # Interior samples (of the convex hull: collision meshes are hulls or near it) for the centres.
            inside.append(_hull_interior(np.asarray(mesh.vertices), rng))
        if pts:
            out[name] = np.concatenate(pts)
            INTERIOR[(str(usd_path), name)] = np.concatenate(inside) if inside else np.zeros((0, 3))
    return out


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


def fit_spheres(points: np.ndarray, k: int, seed: int = 0, inner: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Up to k spheres (centres (k, 3), radii (k,)) containing every point of ``points``.

    Centres are k-means centres of ``inner`` (points inside the collider, when given: they lie near its
    medial axis, so the spheres hug a limb's thickness) or else of the surface points; each surface
    point goes to its nearest centre and each radius is the distance to the farthest point it owns.
    """
    from scipy.cluster.vq import kmeans2

    cloud = points if inner is None or len(inner) < k else inner
    k = max(1, min(k, len(cloud)))
    if k == 1:
        centres = 0.5 * (points.min(axis=0) + points.max(axis=0))[None]
    else:
        centres, _ = kmeans2(cloud, k, minit="++", seed=seed)
    owner = np.argmin(np.linalg.norm(points[:, None] - centres[None], axis=2), axis=1)
    keep = [i for i in range(len(centres)) if np.any(owner == i)]
    centres = centres[keep]
    owner = np.argmin(np.linalg.norm(points[:, None] - centres[None], axis=2), axis=1)
    radii = np.array([np.linalg.norm(points[owner == i] - centres[i], axis=1).max() for i in range(len(centres))])
    return centres, radii


def cover_error(points: np.ndarray, check: np.ndarray, centres: np.ndarray, radii: np.ndarray,
                seed: int = 0) -> SphereCoverError:
    """:class:`SphereCoverError` of a cover fitted to ``points``, measured against a fresh sample ``check``."""
    from scipy.spatial import cKDTree

    inside = np.linalg.norm(check[:, None] - centres[None], axis=2) - radii[None]
    uncovered = float(max(0.0, inside.min(axis=1).max()))
    rng = np.random.default_rng(seed)
    dirs = rng.normal(size=(256, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    shell = (centres[:, None] + radii[:, None, None] * dirs[None]).reshape(-1, 3)
    others = np.linalg.norm(shell[:, None] - centres[None], axis=2) - radii[None] < -1e-9
    outer = shell[~others.any(axis=1)]
    if not len(outer):
        return SphereCoverError(uncovered, 0.0, 0.0)
    dist, _ = cKDTree(np.concatenate([points, check])).query(outer)
    return SphereCoverError(uncovered, float(dist.max()), float(dist.mean()))


def fit_self_collision(
    usd_path: str | PathLike[str],
    kin: Kinematics,
    *,
    margin: float = 0.005,
    weight: float = 10.0,
    max_spheres: int = 16,
    sphere_size: float = 0.04,
    bodies: list[str] | None = None,
    between: list[tuple[list[str], list[str]]] | None = None,
    rest_gap: float = 0.02,
    seed: int = 0,
) -> SelfCollision:
    """Fit :class:`SelfCollision` for ``kin`` from the colliders in ``usd_path``.

    Each body with colliders gets ceil(largest extent / ``sphere_size``) spheres (m), at most
    ``max_spheres``. ``bodies`` limits the model to these links (default: every link with colliders);
    ``between = [(group_a, group_b), ...]`` checks only pairs with one link in each group of one of the
    entries (e.g. a humanoid's arm links against its torso and legs).
    ``margin`` (m) is the distance the solve keeps between checked covers; ``weight`` scales the
    collision rows against frame tasks of weight 1. Pairs whose colliders are closer than ``rest_gap``
    (m, at least the margin) at rest count as touching: a cover a centimetre or two larger than its
    links cannot tell such neighbours (franka's link5 and link7 around the wrist) from a collision. Raises ValueError when no pair is left to check.
    """
    from scipy.spatial import cKDTree

    if margin < 0 or not math.isfinite(margin):
        raise ValueError(f"collision margin must be finite and >= 0 metres, got {margin}")
    pts = collider_points(usd_path, kin, seed=seed)
    inner = {b: INTERIOR.get((str(usd_path), b)) for b in pts}
    check = collider_points(usd_path, kin, samples_per_m2=80000.0, seed=seed + 1)
    if between is not None:
        bodies = sorted({b for group_a, group_b in between for b in [*group_a, *group_b]})
        wanted = {frozenset((a, b)) for group_a, group_b in between for a in group_a for b in group_b if a != b}
    names = [b for b in kin.body_names if b in pts and (bodies is None or b in bodies)]
    if bodies is not None:
        missing = sorted(set(bodies) - set(names))
        if missing:
            raise ValueError(f"no colliders found for bodies {missing} in {usd_path}")
    centres, radii, owner, errors = [], [], [], []
    for b in names:
        p = pts[b]
        extent = float(np.max(p.max(axis=0) - p.min(axis=0)))
        c, r = fit_spheres(p, int(min(max_spheres, max(1, math.ceil(extent / sphere_size)))), seed=seed,
                           inner=inner.get(b))
        centres.append(c)
        radii.append(r)
        owner += [kin.body_index(b)] * len(r)
        errors.append((b, cover_error(p, check[b], c, r, seed=seed)))
    centres_a = np.concatenate(centres) if centres else np.zeros((0, 3))
    radii_a = np.concatenate(radii) if radii else np.zeros(0)
    owner_a = np.array(owner, dtype=np.int32)

    # Candidate body pairs: not parent/child, and moved apart by some coordinate.
    movers = _coordinates_moving(kin)
    parent = _parent_body(kin, usd_path)
    rest_pts = _rest_points(kin, {b: pts[b] for b in names})
    rest_c = np.zeros_like(centres_a)
    for b in names:
        own = owner_a == kin.body_index(b)
        rest_c[own] = _rest_points(kin, {b: centres_a[own]})[b]
    groups, pa, pb, pg = [], [], [], []
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
        si, sj = np.flatnonzero(owner_a == bi), np.flatnonzero(owner_a == bj)
        a, b = np.repeat(si, len(sj)), np.tile(sj, len(si))
        # Sphere pairs of the covers that already overlap (within the margin) at rest cannot be told
        # from the rest pose: they are left out, the pair's other spheres still count.
        apart = np.linalg.norm(rest_c[a] - rest_c[b], axis=1) - radii_a[a] - radii_a[b] >= margin
        a, b = a[apart], b[apart]
        if not len(a):
            continue
        groups.append((names[i], names[j]))
        pa.append(a)
        pb.append(b)
        pg.append(np.full(len(a), len(groups) - 1))
    if not groups:
        raise ValueError(f"{usd_path}: no pair of links to keep apart (all adjacent, rigidly joined or touching at rest)")
    dt = kin.dtype
    return SelfCollision(
        centres=jnp.asarray(centres_a, dt), radii=jnp.asarray(radii_a, dt), sphere_body=jnp.asarray(owner_a),
        pair_a=jnp.asarray(np.concatenate(pa), jnp.int32), pair_b=jnp.asarray(np.concatenate(pb), jnp.int32),
        pair_group=jnp.asarray(np.concatenate(pg), jnp.int32), margin=jnp.asarray(margin, dt),
        weight=jnp.asarray(weight, dt), body_pairs=tuple(groups), cover_error=tuple(errors),
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
