"""Map the device names the controller API accepts ("cpu", "gpu", "cuda", "cuda:1") to JAX devices."""

from __future__ import annotations

import jax

GPU_EXTRA_HINT = (
    "install the GPU build of JAX with the `usdforge[gpu]` extra (pip install 'usdforge[gpu]') "
    "on a machine with an NVIDIA GPU and driver"
)


class GpuUnavailableError(RuntimeError):
    """A GPU device was requested but JAX has no GPU backend (or not that many GPUs)."""


def resolve_device(device: str | jax.Device | None) -> jax.Device:
    """The JAX device for ``device``: None (JAX's default), "cpu", "gpu"/"cuda" or "gpu:N"/"cuda:N".

    Asking for a GPU that is not there raises :class:`GpuUnavailableError` rather than running on the
    CPU without saying so.
    """
    if device is None:
        return jax.devices()[0]
    if isinstance(device, jax.Device):
        return device
    name, _, index_text = str(device).strip().lower().partition(":")
    try:
        index = int(index_text) if index_text else 0
    except ValueError:
        raise ValueError(f"invalid device {device!r}: expected 'cpu', 'gpu', 'cuda' or 'cuda:N'") from None
    if name in ("gpu", "cuda"):
        try:
            devices = jax.devices("gpu")
        except RuntimeError:
            devices = []
        if index >= len(devices):
            found = f"{len(devices)} GPU(s)" if devices else "no GPU backend"
            raise GpuUnavailableError(
                f"device {device!r} requested but JAX (backends: {', '.join(_backends())}) has {found}; "
                + GPU_EXTRA_HINT
            )
        return devices[index]
    if name == "cpu":
        devices = jax.devices("cpu")
        if index >= len(devices):
            raise ValueError(f"device {device!r} requested but JAX has {len(devices)} CPU device(s)")
        return devices[index]
    raise ValueError(f"unknown device {device!r}: expected 'cpu', 'gpu', 'cuda' or 'cuda:N'")


def _backends() -> list[str]:
    return sorted({d.platform for d in jax.devices()})
