"""Quaternion and rotation-matrix helpers in JAX, written element by element.

Quaternions are (w, x, y, z). Every function broadcasts over leading dimensions, so it works on a
single pose, on a batch, and under ``jit``/``vmap``. The formulas are spelt out component-wise rather
than as small matmuls: XLA on CPU fuses elementwise code into one loop, while tiny batched matmuls
each become a library call.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array


def quat_mul(a: Array, b: Array) -> Array:
    """Hamilton product ``a * b`` of quaternions (..., 4)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return jnp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conjugate(q: Array) -> Array:
    """Conjugate (w, -x, -y, -z) of quaternions (..., 4)."""
    return q * jnp.asarray([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def quat_inverse(q: Array) -> Array:
    """Inverse ``conj(q) / |q|^2`` of quaternions (..., 4); equals the conjugate for unit quaternions."""
    return quat_conjugate(q) / jnp.sum(q * q, axis=-1, keepdims=True)


def axis_angle_from_quat(q: Array, eps: float = 1.0e-6) -> Array:
    """Rotation vector (..., 3) (axis times angle, radians) of quaternions (..., 4).

    The quaternion is first flipped to w >= 0 so the result is the rotation of angle <= pi. Below
    ``eps`` the ratio angle / sin(angle / 2) uses its Taylor series, which keeps it finite at zero.
    """
    q = jnp.where(q[..., :1] < 0.0, -q, q)
    xyz = q[..., 1:]
    mag = jnp.sqrt(jnp.sum(xyz * xyz, axis=-1))
    half = jnp.arctan2(mag, q[..., 0])
    angle = 2.0 * half
    small = jnp.abs(angle) <= eps
    safe_angle = jnp.where(small, 1.0, angle)
    ratio = jnp.where(small, 0.5 - angle * angle / 48.0, jnp.sin(half) / safe_angle)
    return xyz / ratio[..., None]


def quat_from_rotvec(v: Array, eps: float = 1.0e-6) -> Array:
    """Unit quaternion (..., 4) of rotation vectors (..., 3); identity below ``eps`` radians."""
    angle = jnp.sqrt(jnp.sum(v * v, axis=-1))
    small = angle <= eps
    safe = jnp.where(small, 1.0, angle)
    half = 0.5 * angle
    xyz = v * (jnp.sin(half) / safe)[..., None]
    q = jnp.concatenate([jnp.cos(half)[..., None], xyz], axis=-1)
    identity = jnp.zeros_like(q).at[..., 0].set(1.0)
    return jnp.where(small[..., None], identity, q)


def matrix_to_quat(r: Array) -> Array:
    """Unit quaternion (..., 4) with w >= 0 of rotation matrices (..., 3, 3) (Shepperd's method).

    The largest of the four squared components is taken from the diagonal and the others from the
    off-diagonal sums, which keeps full precision for every rotation.
    """
    m00, m01, m02 = r[..., 0, 0], r[..., 0, 1], r[..., 0, 2]
    m10, m11, m12 = r[..., 1, 0], r[..., 1, 1], r[..., 1, 2]
    m20, m21, m22 = r[..., 2, 0], r[..., 2, 1], r[..., 2, 2]
    t0, t1 = 1 + m00 + m11 + m22, 1 + m00 - m11 - m22
    t2, t3 = 1 - m00 + m11 - m22, 1 - m00 - m11 + m22
    c0 = jnp.stack([t0, m21 - m12, m02 - m20, m10 - m01], -1)
    c1 = jnp.stack([m21 - m12, t1, m01 + m10, m02 + m20], -1)
    c2 = jnp.stack([m02 - m20, m01 + m10, t2, m12 + m21], -1)
    c3 = jnp.stack([m10 - m01, m02 + m20, m12 + m21, t3], -1)
    # Selects with `where`, not a gather: it stays one fused elementwise loop under vmap.
    tmax = jnp.maximum(jnp.maximum(t0, t1), jnp.maximum(t2, t3))
    pick = lambda t: (t == tmax)[..., None]  # noqa: E731
    q = jnp.where(pick(t0), c0, jnp.where(pick(t1), c1, jnp.where(pick(t2), c2, c3)))
    q = q * (0.5 / jnp.sqrt(tmax))[..., None]
    return jnp.where(q[..., :1] < 0.0, -q, q)


def quat_to_matrix(q: Array) -> Array:
    """Rotation matrices (..., 3, 3) of quaternions (..., 4); normalises first."""
    q = q / jnp.sqrt(jnp.sum(q * q, axis=-1, keepdims=True))
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )
