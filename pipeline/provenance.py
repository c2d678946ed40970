"""Provenance that travels with an asset: the interface layer's ``customLayerData["usdforge"]`` records
usdforge's version, the converter kind, the source's file name and content hash, the cfg digest and the
cache key. No absolute paths and no timestamps, so outputs stay byte-identical wherever they are built."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

#: The customLayerData key holding the record.
PROVENANCE_KEY = "usdforge"


def stamp_provenance(usd_file: Path, record: dict[str, str]) -> None:
    """Add ``record`` to the customLayerData of the layer at ``usd_file`` and save it."""
    from pxr import Sdf

    layer = Sdf.Layer.FindOrOpen(str(usd_file))
    if layer is None:
        raise OSError(f"could not open {usd_file} to record its provenance")
    data = dict(layer.customLayerData)
    data[PROVENANCE_KEY] = dict(sorted(record.items()))
    layer.customLayerData = data
    from usdforge.rules.usd.stage import write_layer

    write_layer(lambda: layer.Save(force=True), Path(usd_file))


@contextmanager
def provenance_on_save(usd_file: Path, record: dict[str, str]) -> Iterator[set[str]]:
    """Within the block, a rule that saves the layer at ``usd_file`` (``rules.usd.stage.save_stage``,
    ``RobotLayers.save``) records ``record`` in it as it saves (a text layer: the bytes ``stamp_provenance``
    would give; a crate layer: written once, not saved a second time). Yields a set holding the file's real
    path once that happened (else ``stamp_provenance`` is still needed)."""
    from usdforge.rules.usd.on_save import custom_data_on_save

    with custom_data_on_save(usd_file, PROVENANCE_KEY, dict(sorted(record.items()))) as done:
        yield done


def read_provenance(usd_file: str | Path) -> dict[str, Any] | None:
    """The provenance record of a USD file, or None when it has none. Raises OSError when it cannot be opened."""
    from pxr import Sdf, Tf

    try:
        layer = Sdf.Layer.OpenAsAnonymous(str(usd_file), metadataOnly=True)
    except Tf.ErrorException:
        layer = None
    if layer is None:
        raise OSError(f"{usd_file}: not a USD file that can be opened")
    record = layer.customLayerData.get(PROVENANCE_KEY)
    return dict(record) if record is not None else None
