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
        path = tmp_path / f"t{index}.png"
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
    small, large = tmp_path / "small.png", tmp_path / "large.png"
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


def crafted_png(tmp_path: Path) -> Path:
    """A PNG whose every chunk's CRC holds but whose IDAT is a zlib header over no valid deflate stream:
    Pillow's ``verify`` (chunks and CRCs) passes it; only decoding the pixels finds it broken."""
    import struct
    import zlib

    good = tmp_path / "good.png"
    Image.new("RGB", (64, 64), (10, 200, 30)).save(good)
    data = good.read_bytes()
    idat = data.index(b"IDAT")
    junk = zlib.compress(b"\0" * 10)[:4] + b"\xff" * 40
    crafted = tmp_path / "crafted.png"
    crafted.write_bytes(data[:idat - 4] + struct.pack(">I", len(junk)) + b"IDAT" + junk
                        + struct.pack(">I", zlib.crc32(b"IDAT" + junk)) + data[data.index(b"IEND") - 4:])
    with Image.open(crafted) as image:
        image.verify()  # the CRCs hold: a check that stops at them lets it through
    return crafted


def test_a_png_with_valid_crcs_over_a_broken_stream_is_refused_and_nothing_is_written(tmp_path):
    """Every texture is decoded, not only CRC-checked (986c2a9 let this file through), in the background
    of the conversion (``texture_checks_overlapped``) but joined before anything is published: the
    conversion fails with its one line and leaves no output."""
    from usdforge.pipeline import MjcfConverter
    from usdforge.rules.errors import ConversionError
    from usdforge.schemas import MjcfConverterCfg

    crafted = crafted_png(tmp_path)
    assert files._image_problems([crafted])[crafted] is not None
    source = tmp_path / "textured.xml"
    source.write_text("""<mujoco>
      <asset><texture name="t" type="2d" file="crafted.png"/><material name="m" texture="t"/></asset>
      <worldbody><body name="b"><freejoint/><geom type="box" size=".1 .1 .1" material="m"/></body></worldbody>
    </mujoco>""")
    out = tmp_path / "out"
    with pytest.raises(ConversionError, match=r"crafted.png is not an image \(") as raised:
        MjcfConverter(MjcfConverterCfg(asset_path=str(source), usd_dir=str(out)))
    assert "\n" not in str(raised.value)
    assert not out.exists() or not any(out.rglob("*.usd*")), sorted(out.rglob("*"))


def test_overlapped_texture_checks_return_at_once_and_raise_on_leaving(tmp_path, monkeypatch):
    """Inside ``texture_checks_overlapped`` a bad texture does not stop ``check_references`` (its decode
    runs in the background); leaving raises its error, in the model's order, and replaces an error of the
    body (the texture is the cause, as when textures were checked first)."""
    from usdforge.rules.errors import ConversionError

    good = tmp_path / "good.png"
    Image.new("RGB", (8, 8)).save(good)
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not an image" * 10)
    crafted = crafted_png(tmp_path)
    refs = [files.Reference(path, "texture", tmp_path / "m.xml", f"<texture {path.stem}>", index + 1)
            for index, path in enumerate([good, crafted, bad])]
    started = threading.Event()
    decode = files._image_problem

    def slow(path: Path, **options) -> str | None:
        assert started.wait(2), "a texture was decoded before check_references returned"
        return decode(path, **options)

    monkeypatch.setattr(files, "_image_problem", slow)
    monkeypatch.setattr(files.os, "cpu_count", lambda: 2)
    with pytest.raises(ConversionError, match=r"m.xml:2: <texture crafted>: texture file .*crafted.png is not an image"):
        with files.texture_checks_overlapped():
            files.check_references(refs, [tmp_path])
            started.set()
    with pytest.raises(ConversionError, match="crafted.png is not an image") as raised:
        with files.texture_checks_overlapped():
            files.check_references(refs, [tmp_path])
            started.set()
            raise ValueError("MuJoCo cannot read the texture")
    assert raised.value.__suppress_context__
    with files.texture_checks_overlapped():
        files.check_references(refs[:1], [tmp_path])


def png_with_pixels(tmp_path: Path, name: str, image: Image.Image, raw: bytes | None = None,
                    stream: bytes | None = None) -> Path:
    """``image`` saved as PNG with its pixel data replaced: ``raw`` (filter bytes and rows) compressed, or
    ``stream`` as the IDAT data as it is; every chunk's CRC valid."""
    import struct
    import zlib

    path = tmp_path / name
    image.save(path)
    data = path.read_bytes()
    start = data.index(b"IDAT") - 4
    end = data.index(b"IEND") - 4
    body = stream if stream is not None else zlib.compress(raw) if raw is not None else None
    if body is not None:
        chunk = struct.pack(">I", len(body)) + b"IDAT" + body + struct.pack(">I", zlib.crc32(b"IDAT" + body))
        path.write_bytes(data[:start] + chunk + data[end:])
    return path


def idat_stream(data: bytes) -> bytes:
    """The IDAT chunks' data of a PNG file's bytes, joined."""
    import struct

    position, found = 8, []
    while position < len(data):
        size, kind = struct.unpack(">I4s", data[position:position + 8])
        if kind == b"IDAT":
            found.append(data[position + 8:position + 8 + size])
        position += 12 + size
    return b"".join(found)


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "LA", "1", "P", "I;16"])
def test_png_pixel_data_is_checked_without_building_the_image(tmp_path, monkeypatch, mode):
    """A non-interlaced PNG's pixels are checked by inflating its IDAT stream and checking the rows'
    length and filter bytes (``rules.png_pixels``), not by Pillow's decode (under half the CPU): a good
    image of every colour type passes; a broken stream and an unknown filter type are refused, as
    Pillow's decode refuses them; a stream that ends before the last row is refused as truncated (Pillow
    leaves missing rows blank); what follows the last row is not read, as Pillow does not read it: a
    stream cut off after it (no end, no checksum) or holding extra data passes."""
    import zlib

    source = Image.effect_noise((23, 9), 60).convert(mode)
    good = png_with_pixels(tmp_path, "good.png", source)
    raw = zlib.decompress(idat_stream(good.read_bytes()))
    stride = len(raw) // 9
    bad_filter = bytearray(raw)
    bad_filter[4 * stride] = 7
    compressed = zlib.compress(raw)
    cases = {"bad_filter.png": (bytes(bad_filter), None, "row 4 has filter type 7"),
             "short.png": (raw[:-stride], None, "ends after 8 of 9 rows"),
             "cut.png": (None, compressed[:-2], "no problem"),
             "extra.png": (None, zlib.compress(raw + b"\0" * stride), "no problem"),
             "broken.png": (None, compressed[:2] + b"\xff" * 20, "not a valid zlib stream")}
    for name, (data, stream, _) in cases.items():
        png_with_pixels(tmp_path, name, source, raw=data, stream=stream)
    for name in ("bad_filter.png", "broken.png"):  # Pillow refuses these too; it leaves missing rows blank
        with pytest.raises(Exception), Image.open(tmp_path / name) as image:
            image.load()
    for name in ("cut.png", "extra.png"):  # and loads these
        with Image.open(tmp_path / name) as image:
            image.load()
    monkeypatch.setattr(Image.Image, "load", lambda self: pytest.fail("the PNG was decoded by Pillow"))
    assert files._image_problem(good) is None
    for name, (_, _, expected) in cases.items():
        assert expected in (files._image_problem(tmp_path / name) or "no problem"), name


def test_an_interlaced_png_is_decoded_by_pillow(tmp_path):
    """Adam7 images are not checked by the stream check: Pillow decodes them, and refuses a broken one."""
    import struct
    import zlib

    from usdforge.rules.png_pixels import NOT_CHECKED, pixel_problem

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 1))  # 1×1 grey, interlaced
    interlaced = tmp_path / "interlaced.png"  # Adam7's first pass holds the only pixel; the others are empty
    interlaced.write_bytes(b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", zlib.compress(b"\0\x80")) + chunk(b"IEND", b""))
    assert pixel_problem(interlaced) == NOT_CHECKED
    assert files._image_problem(interlaced) is None
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", b"\x78\x9c\xff\xff") + chunk(b"IEND", b""))
    assert files._image_problem(broken) is not None


def test_a_jpeg_is_decoded_at_an_eighth_of_its_size_and_a_truncated_one_refused(tmp_path, monkeypatch):
    """JPEG textures are decoded through libjpeg's DCT scaling (every block's entropy-coded data decoded,
    the inverse DCT at 1/8): a good file passes, a truncated one is refused as a full decode refuses it."""
    good = tmp_path / "good.jpg"
    Image.effect_noise((64, 48), 40).convert("RGB").save(good, quality=90)
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(good.read_bytes()[:len(good.read_bytes()) // 2])
    from PIL import JpegImagePlugin

    scales = []
    draft = JpegImagePlugin.JpegImageFile.draft
    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft",
                        lambda self, mode, size: scales.append(size) or draft(self, mode, size))
    assert files._image_problem(good) is None
    assert scales == [(8, 6)]
    assert "truncated" in (files._image_problem(cut) or "")


def test_files_with_the_same_bytes_are_decoded_once(tmp_path, monkeypatch):
    """Inside a conversion with a build cache, two texture files with the same bytes (ANYmal C's left and
    right hip atlases) are decoded once and get the same verdict, a broken pair too."""
    from usdforge.pipeline.cache import Store
    from usdforge.rules.robot.meshes import mesh_cache

    first, copy, other = tmp_path / "a.png", tmp_path / "b.png", tmp_path / "c.png"
    Image.new("RGB", (64, 64), (1, 2, 3)).save(first)
    copy.write_bytes(first.read_bytes())
    Image.new("RGB", (64, 64), (9, 9, 9)).save(other)
    broken, broken_copy = tmp_path / "broken.png", tmp_path / "broken_copy.png"
    broken.write_bytes(first.read_bytes()[:-30])  # the pixel data cut short
    broken_copy.write_bytes(broken.read_bytes())
    decoded: list[Path] = []
    decode = files._image_problem

    def counted(path: Path, **options) -> str | None:
        decoded.append(path)
        return decode(path, **options)

    monkeypatch.setattr(files, "_image_problem", counted)
    with mesh_cache(Store(tmp_path / "cache")):
        problems = files._image_problems([first, copy, other, broken, broken_copy])
    assert sorted(decoded) == sorted([first, other, broken])
    assert problems[first] is None and problems[copy] is None and problems[other] is None
    assert problems[broken] is not None and problems[broken_copy] == problems[broken]


def test_overlapped_texture_checks_start_no_thread_when_every_verdict_is_cached(tmp_path, monkeypatch):
    """A rebuild whose textures all decoded before (their verdicts in the build cache) starts no
    background thread: nothing is left to decode (a thread's start and join were about 1 ms of
    skydio_x2's drive edit). A texture not decoded yet still is, in the background."""
    from usdforge.pipeline.cache import Store
    from usdforge.pipeline.fingerprint import file_digest
    from usdforge.rules.robot.meshes import mesh_cache

    good = tmp_path / "good.png"
    Image.new("RGB", (8, 8)).save(good)
    other = tmp_path / "other.png"
    Image.new("RGB", (8, 8), (1, 2, 3)).save(other)
    refs = [files.Reference(path, "texture", tmp_path / "m.xml", "<texture>", 1) for path in (good, other)]
    started = []
    thread = files.threading.Thread

    def counting(*args, **kwargs):
        started.append(kwargs.get("name"))
        return thread(*args, **kwargs)

    monkeypatch.setattr(files.threading, "Thread", counting)
    with mesh_cache(Store(tmp_path / "cache"), file_digest):
        with files.texture_checks_overlapped():
            files.check_references(refs[:1], [tmp_path])  # decoded, its verdict stored
        assert started == ["usdforge-texture-check"]
        with files.texture_checks_overlapped():
            files.check_references(refs[:1], [tmp_path])
        assert started == ["usdforge-texture-check"]
        with files.texture_checks_overlapped():
            files.check_references(refs, [tmp_path])
        assert started == ["usdforge-texture-check"] * 2


def test_zlib_ng_and_the_standard_librarys_zlib_give_the_same_verdicts(tmp_path, monkeypatch):
    """The PNG check inflates with zlib-ng (5x faster) where it is installed: on the intact PNG and 400 random
    corruptions of it (bytes changed, the file cut short) it says what the standard library's zlib says, word
    for word. The image is made from a seeded generator (Pillow's ``effect_noise`` is not seeded: a random
    image gave 0-2 corruptions without a problem per 400, so whether any did was chance)."""
    import random
    import zlib

    from zlib_ng import zlib_ng  # a dependency: its absence fails here

    from usdforge.rules import png_pixels

    assert png_pixels.zlib is zlib_ng  # the dependency is used
    rng = random.Random(7)
    pixels = Image.frombytes("RGB", (64, 48), bytes(rng.randrange(256) for _ in range(64 * 48 * 3)))
    good = png_with_pixels(tmp_path, "good.png", pixels).read_bytes()
    path = tmp_path / "corrupt.png"
    verdicts = {"none": 0, "problem": 0}
    for case in range(401):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4) if case else 0):  # case 0: the intact file
            data[rng.randrange(60, len(data))] = rng.randrange(256)
        if case and rng.random() < 0.2:
            data = data[:rng.randrange(60, len(data))]
        path.write_bytes(bytes(data))
        answers = []
        for inflater in (zlib, zlib_ng):
            monkeypatch.setattr(png_pixels, "zlib", inflater)
            answers.append(png_pixels.pixel_problem(path))
        assert answers[0] == answers[1], answers
        verdicts["none" if answers[0] is None else "problem"] += 1
    assert min(verdicts.values()) > 0, verdicts  # both kinds of answer were compared


def test_background_texture_decodes_wait_while_another_thread_loads_native_libraries(tmp_path, monkeypatch):
    """The texture checks' thread loads Pillow's plugins and zlib-ng, native modules: while another thread
    loads pxr's libraries (``rules.native_loads``: they give up the GIL inside the loader's lock) it must
    not start, or the two threads wait for each other for ever. It holds ``NATIVE_LOADS`` for its run."""
    from usdforge.rules.native_loads import NATIVE_LOADS

    texture = tmp_path / "t.png"
    Image.new("RGB", (8, 8)).save(texture)
    decoded = threading.Event()
    decode = files._image_problem

    def noted(path: Path, **options) -> str | None:
        decoded.set()
        return decode(path, **options)

    monkeypatch.setattr(files, "_image_problem", noted)
    monkeypatch.setattr(files.os, "cpu_count", lambda: 2)
    refs = [files.Reference(texture, "texture", tmp_path / "m.xml", "<texture t>", 1),
            files.Reference(texture, "texture", tmp_path / "m.xml", "<texture u>", 2)]
    holder_done = threading.Event()
    held = threading.Event()

    def hold() -> None:  # another thread "loading pxr" for a while
        with NATIVE_LOADS:
            held.set()
            holder_done.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(5)
    try:
        with files.texture_checks_overlapped():
            files.check_references(refs, [tmp_path])
            time.sleep(0.3)
            assert not decoded.is_set(), "a texture was decoded while another thread held NATIVE_LOADS"
            holder_done.set()
        assert decoded.is_set()
    finally:
        holder_done.set()
        holder.join()
