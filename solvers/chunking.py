"""Run a component-first batched function over a large batch in cache-sized chunks.

The kernels are chains of elementwise loops over the batch axis, each reading and writing whole batch
arrays. Up to a few thousand targets those arrays stay in the core's L2 cache; at 65536 targets every
loop streams through main memory and a step runs about three times slower per target. Splitting the
batch into chunks inside one jitted ``fori_loop`` keeps the working set in cache.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import lax

#: Targets per chunk; measured best on XLA:CPU for a 7-joint DLS iteration (1024–4096 are within 10 %).
DEFAULT_CHUNK = 2048


def map_chunks(fn: Callable[..., Any], *args: Any, chunk: int = DEFAULT_CHUNK) -> Any:
    """``fn(*args)`` for args whose arrays all share a trailing batch axis, computed ``chunk`` at a time.

    ``fn`` must act independently on each batch element and return arrays with the same trailing batch
    axis. A short last chunk is padded by repeating the last element (never zeros, which could be an
    invalid quaternion) and the padding is dropped from the result.
    """
    leaves = jax.tree_util.tree_leaves(args)
    n = leaves[0].shape[-1]
    if n <= chunk:
        return fn(*args)
    n_chunks = -(-n // chunk)
    padded = n_chunks * chunk

    def pad(a: jax.Array) -> jax.Array:
        widths = [(0, 0)] * (a.ndim - 1) + [(0, padded - n)]
        return jnp.pad(a, widths, mode="edge") if padded > n else a

    args = jax.tree_util.tree_map(pad, args)
    sliced = lambda i: jax.tree_util.tree_map(  # noqa: E731
        lambda a: lax.dynamic_slice_in_dim(a, i * chunk, chunk, axis=a.ndim - 1), args
    )
    shapes = jax.eval_shape(lambda a: fn(*a), sliced(0))
    outs = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape[:-1] + (padded,), s.dtype), shapes)

    def body(i: jax.Array, outs: Any) -> Any:
        res = fn(*sliced(i))
        return jax.tree_util.tree_map(
            lambda o, r: lax.dynamic_update_slice_in_dim(o, r, i * chunk, axis=o.ndim - 1), outs, res
        )

    outs = lax.fori_loop(0, n_chunks, body, outs)
    return jax.tree_util.tree_map(lambda o: o[..., :n], outs)
