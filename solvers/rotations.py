"""Quaternion and rotation-matrix math in JAX, component-first.

Convention: the component axes come *first* and any batch dimensions trail: a quaternion is (4, ...)
in order (w, x, y, z), a vector (3, ...), a rotation matrix (3, 3, ...). Every formula is written
component by component on arrays of the batch shape, so on a batch it is plain elementwise code that
XLA on CPU fuses into loops running along the (contiguous) batch axis; with no batch dimensions the
same functions work on a single pose (and under ``vmap``).

The public API (``solvers.kinematics``, ``solvers.differential_ik``) is batch-first, (..., 4), and
moves axes at its boundary.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array


def to_components(x: Array, n_axes: int = 1) -> Array:
    """Batch-first (..., c) or (..., c, d) → component-first (c, ...) or (c, d, ...)."""
    src = tuple(range(-n_axes, 0))
    return jnp.moveaxis(x, src, tuple(range(n_axes)))


def from_components(x: Array, n_axes: int = 1) -> Array:
    """Component-first (c, ...) or (c, d, ...) → batch-first (..., c) or (..., c, d)."""
    return jnp.moveaxis(x, tuple(range(n_axes)), tuple(range(-n_axes, 0)))


def quat_mul(a: Array, b: Array) -> Array:
    """Hamilton product ``a * b`` of quaternions (4, ...)."""
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    return jnp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def quat_conjugate(q: Array) -> Array:
    """Conjugate (w, -x, -y, -z) of quaternions (4, ...)."""
    return jnp.stack([q[0], -q[1], -q[2], -q[3]])


def quat_inverse(q: Array) -> Array:
    """Inverse ``conj(q) / |q|^2`` of quaternions (4, ...); the conjugate for unit quaternions."""
    return quat_conjugate(q) / (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])


def axis_angle_from_quat(q: Array, eps: float = 1.0e-6) -> Array:
    """Rotation vector (3, ...) (axis × angle, radians) of quaternions (4, ...).

    The quaternion is flipped to w >= 0 first, so the result is the rotation of angle <= π. Below
    ``eps`` the ratio angle / sin(angle / 2) uses its Taylor series, which stays finite at zero.
    """
    sign = jnp.where(q[0] < 0.0, -1.0, 1.0).astype(q.dtype)
    w = sign * q[0]
    mag = jnp.sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    angle = 2.0 * jnp.arctan2(mag, w)
    small = jnp.abs(angle) <= eps
    # angle / sin(angle / 2), with sin(angle / 2) = mag / |q| (no sin call); Taylor 2 + angle²/24 near 0.
    norm = jnp.sqrt(w * w + mag * mag)
    factor = sign * jnp.where(small, 2.0 + angle * angle / 24.0, angle * norm / jnp.where(small, 1.0, mag))
    return jnp.stack([q[1] * factor, q[2] * factor, q[3] * factor])


def quat_from_rotvec(v: Array, eps: float = 1.0e-6) -> Array:
    """Unit quaternion (4, ...) of rotation vectors (3, ...); identity below ``eps`` radians."""
    angle = jnp.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    small = angle <= eps
    half = 0.5 * angle
    k = jnp.where(small, 0.0, jnp.sin(half) / jnp.where(small, 1.0, angle))
    return jnp.stack([jnp.where(small, 1.0, jnp.cos(half)), v[0] * k, v[1] * k, v[2] * k])


def matrix_to_quat(r: Array) -> Array:
    """Unit quaternion (4, ...) with w >= 0 of rotation matrices (3, 3, ...) (Shepperd's method).

    The largest of the four squared components comes from the diagonal and the others from
    off-diagonal sums, which keeps full precision for every rotation.
    """
    m00, m01, m02 = r[0, 0], r[0, 1], r[0, 2]
    m10, m11, m12 = r[1, 0], r[1, 1], r[1, 2]
    m20, m21, m22 = r[2, 0], r[2, 1], r[2, 2]
    t0, t1 = 1 + m00 + m11 + m22, 1 + m00 - m11 - m22
    t2, t3 = 1 - m00 + m11 - m22, 1 - m00 - m11 + m22
    c0 = (t0, m21 - m12, m02 - m20, m10 - m01)
    c1 = (m21 - m12, t1, m01 + m10, m02 + m20)
    c2 = (m02 - m20, m01 + m10, t2, m12 + m21)
    c3 = (m10 - m01, m02 + m20, m12 + m21, t3)
    # Selects with `where`, not a gather: it stays one fused elementwise loop.
    tmax = jnp.maximum(jnp.maximum(t0, t1), jnp.maximum(t2, t3))
    p0, p1, p2 = t0 == tmax, t1 == tmax, t2 == tmax
    q = [jnp.where(p0, a, jnp.where(p1, b, jnp.where(p2, c, d))) for a, b, c, d in zip(c0, c1, c2, c3)]
    scale = 0.5 / jnp.sqrt(tmax)
    scale = jnp.where(q[0] < 0.0, -scale, scale)
    return jnp.stack([qi * scale for qi in q])


def quat_to_matrix(q: Array) -> Array:
    """Rotation matrices (3, 3, ...) of quaternions (4, ...); normalises first."""
    q = q / jnp.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    w, x, y, z = q[0], q[1], q[2], q[3]
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)]),
            jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)]),
            jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]),
        ]
    )
