"""Texture decoding (#24): memory bounded by a byte budget for the decodes in flight, whatever the core
count, in the model's order; and the pixel limit is the documented 16384², not Pillow's lower default."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from PIL import Image

from usdforge.rules import files


def test_decodes_in_flight_stay_within_the_byte_budget_in_model_order(tmp_path, monkeypatch):
    paths = []
    for index in range(8):
        path = tmp_path / f"t{index}.tga"  # a format Pillow decodes to check (a PNG it verifies undecoded)
        Image.new("RGBA", (256, 256), (index, 0, 0, 255)).save(path)  # 256 kB decoded each
        paths.append(path)
    monkeypatch.setattr(files, "DECODE_BUDGET_BYTES", 600 * 1024)  # two at a time
    monkeypatch.setattr(files.os, "cpu_count", lambda: 8)
    lock = threading.Lock()
    state = {"now": 0, "most": 0, "started": []}
    decode = files._image_problem

    def counting(path: Path, **options) -> str | None:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            state["started"].append(path)
        time.sleep(0.05)  # long enough for every free worker to start its own
        try:
            return decode(path, **options)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(files, "_image_problem", counting)
    problems = files._image_problems(paths)
    assert problems == {path: None for path in paths}
    assert state["most"] == 2, state["most"]  # 8 workers, but the budget holds two 256 kB decodes
    assert state["started"] == paths


def test_an_image_too_large_for_the_budget_is_decoded_alone(tmp_path, monkeypatch):
    small, large = tmp_path / "small.tga", tmp_path / "large.tga"
    Image.new("L", (64, 64)).save(small)
    Image.new("L", (2048, 2048)).save(large)  # 4 MB decoded
    monkeypatch.setattr(files, "DECODE_BUDGET_BYTES", 1 << 20)
    monkeypatch.setattr(files.os, "cpu_count", lambda: 4)
    assert files._image_problems([small, large, small]) == {small: None, large: None}


def black_png(path: Path, width: int, height: int) -> Path:
    """A 1-bit black PNG written row by row through zlib (no image of that size in memory here)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer = zlib.compressobj(9)
    row = b"\0" * (1 + (width + 7) // 8)  # filter byte, then the bits
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b""))
    return path


def test_the_pixel_limit_is_the_documented_one(tmp_path):
    """An image over Pillow's default limit (2 × 89,478,485 pixels refused outright) but within 16384²
    decodes; one over 16384² is refused with the documented limit, from its header."""
    within = black_png(tmp_path / "within.png", 16384, 11000)  # 180 million pixels
    assert files._image_problems([within]) == {within: None}
    over = black_png(tmp_path / "over.png", 16385, 16384)
    problem = files._image_problems([over])[over]
    assert problem is not None and str(files.MAX_TEXTURE_PIXELS) in problem, problem


def test_a_png_is_checked_without_decoding_and_a_damaged_one_is_refused(tmp_path, monkeypatch):
    """A PNG is checked by Pillow's ``verify`` (every chunk's CRC through IEND), not decoded (a 2048²
    atlas: 40 ms of CPU, ANYmal C's 19: most of a first MJCF conversion); a flipped byte or a cut file is
    still refused, as a decode would refuse it. A file whose CRCs hold over a broken zlib stream passes
    the check, and ``decoded_texture`` (where a mesh's texture is written out) refuses it with one line."""
    import struct
    import zlib

    from PIL import PngImagePlugin

    from usdforge.rules.errors import ConversionError

    good = tmp_path / "good.png"
    Image.new("RGB", (64, 64), (10, 200, 30)).save(good)
    data = good.read_bytes()
    idat = data.index(b"IDAT")
    flipped = tmp_path / "flipped.png"
    flipped.write_bytes(data[:idat + 10] + bytes([data[idat + 10] ^ 0xFF]) + data[idat + 11:])
    cut = tmp_path / "cut.png"
    cut.write_bytes(data[:idat + 12])
    junk = zlib.compress(b"\0" * 10)[:4] + b"\xff" * 40  # a zlib header, then no valid deflate stream
    crafted = tmp_path / "crafted.png"
    crafted.write_bytes(data[:idat - 4] + struct.pack(">I", len(junk)) + b"IDAT" + junk
                        + struct.pack(">I", zlib.crc32(b"IDAT" + junk)) + data[data.index(b"IEND") - 4:])

    def no_decode(self, *args, **kwargs):
        raise AssertionError("a PNG was decoded")

    with monkeypatch.context() as patch:
        patch.setattr(PngImagePlugin.PngImageFile, "load", no_decode)
        problems = files._image_problems([good, flipped, cut, crafted])
    assert problems[good] is None and problems[crafted] is None
    assert problems[flipped] is not None and problems[cut] is not None, problems
    with pytest.raises(ConversionError, match="crafted.png: texture is not an image"):
        files.decoded_texture(Image.open(crafted), crafted)
    assert files.decoded_texture(Image.open(good), good).size == (64, 64)
