"""Which input files a conversion may read: regular files, of bounded size, inside the model's folder,
its package roots or roots the user allows explicitly; textures must decode as images. No pxr here.

A description downloaded from the internet can name ``/etc/passwd`` as a texture, ``/dev/zero`` as a mesh
or climb out of its folder with ``../``: every file a model references is checked here, with the element
that names it, before anything reads it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import os
import stat
import threading
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from usdforge.rules.errors import ConversionError
from usdforge.rules.native_loads import NATIVE_LOADS

#: Largest model description (URDF, MJCF and its includes) read, in bytes.
MAX_MODEL_BYTES = 256 << 20
#: Largest mesh, texture or other referenced file read, in bytes.
MAX_FILE_BYTES = 2 << 30
#: Largest image decoded as a texture, in pixels (width × height). Pillow's own limit is set to it
#: (``PIL.Image.MAX_IMAGE_PIXELS``: its default, about 9459², refused images this limit allows).
MAX_TEXTURE_PIXELS = 16384 * 16384
#: Bytes of decoded texels the texture check holds at once: images are decoded side by side (in the
#: model's order) only while their decoded sizes add up to at most this; a larger one is decoded alone.
DECODE_BUDGET_BYTES = 256 << 20
#: How textures are checked beyond Pillow's decode (a PNG's pixel data by ``rules.png_pixels``, a JPEG at 1/8
#: scale), part of the cached verdict's key.
TEXTURE_CHECK = "png-inflate-filters-1;jpeg-draft-1"
#: Most XML elements in one model file (a 100,000-link robot has about a million).
MAX_ELEMENTS = 2_000_000
#: Largest magnitude of a number usdforge writes: USD stores most values as 32-bit floats (at most about
#: 3.4e38), and unit conversions (radians → degrees, per-degree gains) must not overflow them.
MAX_MAGNITUDE = 1e30
#: Longest attribute value quoted in a message, in characters.
MAX_QUOTE = 120


def quote(text: str, limit: int = MAX_QUOTE) -> str:
    """``text`` cut to ``limit`` characters (with how many were left out), for one-line messages."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def describe_element(element) -> str:
    """``<mesh name="arm">`` (or ``<mesh file="…">``, or ``<mesh>``) of an lxml element, for messages."""
    tag = element.tag if isinstance(element.tag, str) else "?"
    for key in ("name", "file", "filename"):
        value = element.get(key)
        if value is not None:
            return f'<{tag} {key}="{quote(value, 100)}">'
    return f"<{tag}>"


class Reference(NamedTuple):
    """A file a model names: where (``file``, ``line``, ``element``) and how (``what``: mesh, texture …)."""

    path: Path
    what: str
    file: Path
    element: str | None = None
    line: int | None = None


def inside(path: Path, roots: Iterable[Path]) -> bool:
    """Whether ``path`` (symlinks resolved) lies in one of ``roots`` (symlinks resolved)."""
    return _inside_real(os.path.realpath(path), [os.path.realpath(root) for root in roots])


def _inside_real(real: str, tops: list[str]) -> bool:
    """``inside`` of a real path and real roots."""
    return any(real == top or real.startswith(top.rstrip(os.sep) + os.sep) for top in tops)


def regular_file_problem(path: Path, max_bytes: int | None = None) -> str | None:
    """Why ``path`` cannot be read as an input file (not there, a directory, a device, a FIFO, a symlink
    loop, too large), or None when it is a regular file of at most ``max_bytes`` (default
    ``MAX_FILE_BYTES``)."""
    max_bytes = MAX_FILE_BYTES if max_bytes is None else max_bytes
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "not found" if not os.path.lexists(path) else "is a broken symbolic link"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"  # ELOOP: a symlink loop, EACCES …
    if stat.S_ISDIR(info.st_mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(info.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device" if stat.S_ISCHR(info.st_mode)
                or stat.S_ISBLK(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
        return f"is {kind}, not a regular file"
    if info.st_size > max_bytes:
        limit = f"{max_bytes >> 20} MiB" if max_bytes >= 1 << 20 else f"{max_bytes}-byte"
        return f"is {info.st_size} bytes, over the {limit} limit"
    return None


def check_model_file(path: Path, max_bytes: int | None = None) -> None:
    """ConversionError unless ``path`` is a regular file of at most ``max_bytes`` (default
    ``MAX_MODEL_BYTES``)."""
    problem = regular_file_problem(path, MAX_MODEL_BYTES if max_bytes is None else max_bytes)
    if problem is not None:
        raise ConversionError(path, f"the file {problem}")


def check_references(references: Iterable[Reference], roots: Iterable[Path]) -> None:
    """ConversionError (naming the file, line and element that names it) for the first existing reference
    outside ``roots`` (symlinks resolved), or that is not a readable regular file, or a texture that is not
    an image. Missing files are left to the converter (a warning or an error of its own).

    Only files that passed the other checks are decoded (a PNG's pixel data inflated and checked row by
    row, ``rules.png_pixels``); the textures are decoded side by side on the machine's cores (zlib and
    Pillow decode without the GIL: ANYmal C's 19 atlases take 0.34 s on one core, 0.82 s with Pillow), and
    the error raised is still that of the first failing reference, in the model's order. Inside
    ``texture_checks_overlapped`` (a pipeline conversion) the decodes run in the background and their
    error is raised when it is left, before the output is published."""
    tops = [os.path.realpath(root) for root in roots]  # once, not once per reference
    textures: list[Reference] = []
    failure = None
    for ref in references:
        ref = ref._replace(path=Path(os.path.abspath(ref.path)))
        if not os.path.lexists(ref.path):
            continue  # nothing to read: the converter warns (or fails) about the missing file
        if not _inside_real(os.path.realpath(ref.path), tops):
            real = os.path.realpath(ref.path)
            shown = quote(str(ref.path)) + (f" (a link to {quote(real)})" if real != str(ref.path) else "")
            failure = ConversionError(ref.file, f"{ref.what} {shown} is outside the model's folder and "
                                                "package roots; allow its folder with --allow-root DIR (or "
                                                "allowed_roots in the library)", ref.element, ref.line)
            break
        problem = regular_file_problem(ref.path)
        if problem is not None:
            failure = ConversionError(ref.file, f"{ref.what} file {quote(str(ref.path))} {problem}", ref.element,
                                      ref.line)
            break
        if ref.what == "texture":
            textures.append(ref)  # decoded below, with the textures named before any failure
    pending = _OVERLAPPED.get()
    if failure is None and pending is not None and textures:
        pending.append(_TextureCheck(textures))  # decoded in the background, joined by ``texture_checks_overlapped``
        return
    _raise_first_bad(textures, _image_problems([ref.path for ref in textures]))
    if failure is not None:
        raise failure


def _raise_first_bad(textures: list[Reference], problems: dict[Path, str | None]) -> None:
    """ConversionError for the first of ``textures`` (in the model's order) whose image has a problem."""
    for ref in textures:
        if problems[ref.path] is not None:
            raise ConversionError(ref.file, f"texture file {quote(str(ref.path))} is not an image "
                                            f"({problems[ref.path]})", ref.element, ref.line)


#: The texture checks started by ``check_references`` inside ``texture_checks_overlapped`` (None outside).
_OVERLAPPED: contextvars.ContextVar[list | None] = contextvars.ContextVar("usdforge_texture_checks", default=None)


@contextlib.contextmanager
def texture_checks_overlapped() -> Iterator[None]:
    """Within: ``check_references`` checks paths, roots and file kinds as before, reads each texture's
    header and looks up the cached verdicts, then returns while the textures are decoded in the background
    (Pillow and zlib release the GIL), overlapping MuJoCo's compile and the authoring; on leaving, every
    decode is joined and the first bad texture (in the model's order) raises the ConversionError it raises
    without overlap. Leave it before the output is published (``pipeline.converters``: before the staging
    folder is moved into place or stored), so a bad texture leaves no output. When the body raises, the
    decodes are joined too and a bad texture's error replaces the body's (it is the cause: the error the
    conversion gave when textures were checked first); an interrupt (not an Exception) waits for nothing."""
    pending: list[_TextureCheck] = []
    token = _OVERLAPPED.set(pending)
    try:
        yield
    except Exception:
        _OVERLAPPED.reset(token)
        for check in pending:
            try:
                check.join()
            except ConversionError as bad:
                raise bad from None  # the cause of the body's error, reported in its place
        raise
    except BaseException:
        _OVERLAPPED.reset(token)
        for check in pending:
            check.abandon()
        raise
    _OVERLAPPED.reset(token)
    for check in pending:
        check.join()


class _TextureCheck:
    """One ``check_references`` call's textures, decoded on a background thread (``_image_problems``):
    the verdict lookups and the headers are read at once, in the calling thread; ``join`` waits for the
    decodes, records the new verdicts in the build cache (in the calling thread, as without overlap) and
    raises for the first bad texture."""

    def __init__(self, textures: list[Reference]):
        self.textures = textures
        self._prepared = _prepare([ref.path for ref in textures], background=True)
        self._abandoned = threading.Event()
        self._problems: dict[Path, str | None] = {}
        self._thread = None  # every verdict cached (a rebuild): nothing to decode, no thread to start
        if self._prepared.to_decode:
            self._thread = threading.Thread(target=self._decode, name="usdforge-texture-check", daemon=True)
            self._thread.start()

    def _decode(self) -> None:
        # What the decodes load that the calling thread has not (zlib-ng, the thread pool's modules), loaded
        # first, never beside a pxr load (``rules.native_loads``); Pillow and the plugins of these files'
        # formats were loaded where their headers were read.
        try:
            with NATIVE_LOADS:
                from concurrent.futures import ThreadPoolExecutor  # noqa: F401 - its queue's _queue, _heapq

                import usdforge.rules.png_pixels  # noqa: F401 - zlib-ng
            self._problems = _decode_within_budget(self._prepared.to_decode, self._prepared.headers,
                                                   self._abandoned)
        except BaseException as exc:  # noqa: BLE001 - carried to ``join``, in the converting thread
            self._problems = exc  # type: ignore[assignment]

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
        if isinstance(self._problems, BaseException):
            raise self._problems
        _raise_first_bad(self.textures, _finish(self._prepared, self._problems))

    def abandon(self) -> None:
        self._abandoned.set()  # no new decode starts; those running end on their own (daemon thread)


def _image_problems(paths: list[Path]) -> dict[Path, str | None]:
    """{path: why it cannot be decoded as an image by Pillow (within ``MAX_TEXTURE_PIXELS``), or None}.

    Inside a conversion with a build cache, bytes that decoded once are not decoded again: the cache
    records a verdict keyed by the file's content hash (which the conversion computes anyway for its key),
    Pillow's version and the pixel limit, so a rebuild after a cfg edit decodes nothing; a changed file
    has another hash and is decoded again."""
    prepared = _prepare(paths)
    return _finish(prepared, _decode_within_budget(prepared.to_decode, prepared.headers))


class _Prepared(NamedTuple):
    """What ``_prepare`` found: every path's cached verdict (or None), the paths to decode and their headers'
    (problem, decoded bytes), read in the calling thread."""

    unique: list[Path]
    verdicts: dict[Path, tuple[object, str] | None]
    to_decode: list[Path]
    headers: dict[Path, tuple[str | None, int]] | None
    cached: dict[Path, str | None]
    same_bytes: dict[Path, Path]  # a path not decoded → the path of ``to_decode`` with the same bytes


def _prepare(paths: list[Path], background: bool = False) -> _Prepared:
    """Look up the cached verdicts (hashing here, in this thread) and read the headers of the others
    where they are decoded on other threads (``background``: all of them)."""
    unique = list(dict.fromkeys(paths))
    verdicts = {path: _decoded_verdict(path) for path in unique}
    cached: dict[Path, str | None] = {}
    to_decode = []
    # Files with the same bytes (ANYmal C's left and right hips share an atlas) are decoded once: the
    # verdict is the bytes', keyed by their hash (as the build cache keeps it).
    first_with: dict[str, Path] = {}
    same_bytes: dict[Path, Path] = {}
    for path in unique:
        verdict = verdicts[path]
        if verdict is not None and verdict[0].entry(verdict[1]) is not None:
            verdict[0].record("texture-decoded", hit=True)
            cached[path] = None
        elif verdict is not None and verdict[1] in first_with:
            same_bytes[path] = first_with[verdict[1]]
        else:
            if verdict is not None:
                first_with[verdict[1]] = path
            to_decode.append(path)
    # Headers here, where the decodes run on other threads: Pillow's warning for an image over its limit
    # is silenced (``_opened``), which is not thread-safe; one whose header passed decodes without a
    # warning, on any thread. One decode at a time in this thread opens each file once.
    headers = {path: _header(path) for path in to_decode} if background or _workers(to_decode) > 1 else None
    return _Prepared(unique, verdicts, to_decode, headers, cached, same_bytes)


def _finish(prepared: _Prepared, decoded: dict[Path, str | None]) -> dict[Path, str | None]:
    """Every path's problem (or None), the new good verdicts stored in the build cache."""
    for path in prepared.to_decode:
        verdict = prepared.verdicts[path]
        if verdict is not None and decoded[path] is None:
            verdict[0].record("texture-decoded", hit=False)
            verdict[0].put_entry(verdict[1], {}, meta={"artifact": "texture-decoded"}, kind="texture-decoded")
    return {**prepared.cached, **decoded, **{path: decoded[first] for path, first in prepared.same_bytes.items()}}


def _workers(paths: list[Path]) -> int:
    return min(len(paths), os.cpu_count() or 1, 8)


def _decode_within_budget(paths: list[Path], headers: dict[Path, tuple[str | None, int]] | None,
                          abandoned: threading.Event | None = None) -> dict[Path, str | None]:
    """{path: why it cannot be decoded as an image (within ``MAX_TEXTURE_PIXELS``), or None}.

    ``headers``: {path: (problem, decoded bytes)} (``_header``, read in the model's order, in the thread
    that called ``_prepare``), None for one decode at a time in this thread. An image whose header passed
    is decoded side by side with the others on the machine's cores (Pillow releases the GIL), started only
    when the decoded sizes in flight fit ``DECODE_BUDGET_BYTES`` (a larger one waits until it is alone):
    memory is bounded whatever the core count. ``abandoned`` set: no further decode starts (an interrupted conversion)."""
    from concurrent.futures import ThreadPoolExecutor

    workers = _workers(paths)
    condition = threading.Condition()
    in_flight = [0]

    def decode(path: Path, cost: int) -> str | None:
        try:
            return _image_problem(path, quiet=False)  # its header passed: Pillow has nothing to warn about
        finally:
            with condition:
                in_flight[0] -= cost
                condition.notify_all()

    problems: dict[Path, str | None] = {}
    futures = {}
    if workers <= 1:  # one image, or one core: one after another
        if headers is None:  # in the calling thread: each file opened once
            return {path: _image_problem(path) for path in paths}
        return {path: headers[path][0] or _image_problem(path, quiet=False) for path in paths}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for path in paths:
            problem, cost = headers[path]
            if problem is not None:
                problems[path] = problem
                continue
            with condition:
                condition.wait_for(lambda: in_flight[0] == 0 or in_flight[0] + cost <= DECODE_BUDGET_BYTES)
                in_flight[0] += cost
            if abandoned is not None and abandoned.is_set():
                break
            futures[path] = pool.submit(decode, path, cost)
    problems.update((path, future.result()) for path, future in futures.items())
    return problems


def _header(path: Path) -> tuple[str | None, int]:
    """(why ``path``'s header is not that of an image within ``MAX_TEXTURE_PIXELS``, or None; the bytes
    Pillow allocates to decode it)."""
    Image = _pillow()
    try:
        with _opened(Image, path, quiet=True) as image:
            problem = _size_problem(image)
            sample = 4 if image.mode in ("I", "F") else 2 if "16" in image.mode else 1
            return problem, image.width * image.height * max(1, len(image.getbands())) * sample
    except Exception as exc:  # noqa: BLE001 - Pillow raises many kinds; all mean "not a usable image"
        return _pillow_problem(Image, exc), 0


def _opened(Image, path: Path, quiet: bool):
    """``Image.open(path)``; ``quiet``: without Pillow's warning for an image over its limit (refused
    here with a message of its own). Not quiet where threads decode side by side: ``catch_warnings`` is
    not thread-safe, and an image whose header passed gives no such warning."""
    import warnings

    if not quiet:
        return Image.open(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        return Image.open(path)


def _size_problem(image) -> str | None:
    if image.width * image.height > MAX_TEXTURE_PIXELS:
        return f"{image.width}×{image.height} pixels, over the {MAX_TEXTURE_PIXELS} pixel limit"
    return None


def _pillow_problem(Image, exc: Exception) -> str:
    if isinstance(exc, Image.DecompressionBombError):  # over twice the limit: Pillow refuses it itself
        return f"over the {MAX_TEXTURE_PIXELS} pixel limit"
    return quote(str(exc) or type(exc).__name__)


@functools.cache
def _pillow():
    """``PIL.Image``, with its pixel limit set to ``MAX_TEXTURE_PIXELS`` (its default, about 9459², is
    lower than the documented limit). Imported where a texture is checked: a model without textures never
    imports Pillow."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_TEXTURE_PIXELS
    return Image


def check_texture(path: Path) -> None:
    """ConversionError naming ``path`` unless it decodes as an image within ``MAX_TEXTURE_PIXELS``: the check
    ``check_references`` gives a model's ``<texture>`` files (a PNG's pixel data inflated and checked by
    ``rules.png_pixels``; a verdict the build cache holds for these bytes is reused), for a texture a mesh
    file names that is copied into the output as it is rather than decoded (``rules.robot.meshes``)."""
    path = Path(path)
    problem = _image_problems([path])[path]
    if problem is not None:
        raise ConversionError(path, f"texture is not an image ({problem})")


def open_texture(path: Path):
    """``PIL.Image.open(path)`` within the texture pixel limit, decoded (``decoded_texture``)."""
    return decoded_texture(_pillow().open(path), path)


def decoded_texture(image, source: Path):
    """``image`` (a PIL image a mesh reader opened from ``source`` or a file it names) decoded now, or a
    ConversionError naming ``source``: the reference checks decode every texture, but in the background
    (``texture_checks_overlapped``), so a mesh reader may get to one first; a failure here is the user's
    one-line error rather than a traceback from the writer."""
    try:
        image.load()
    except Exception as exc:  # noqa: BLE001 - Pillow raises many kinds; all mean "not a usable image"
        raise ConversionError(source, f"texture is not an image ({_pillow_problem(_pillow(), exc)})") from None
    return image


def _image_problem(path: Path, quiet: bool = True) -> str | None:
    """Why ``path`` cannot be decoded as an image by Pillow (within ``MAX_TEXTURE_PIXELS``), or None."""
    Image = _pillow()
    try:
        with _opened(Image, path, quiet) as image:
            problem = _size_problem(image)
            if problem is not None:
                return problem
            if image.format == "PNG":  # the pixel data inflated and checked, not un-filtered into an image
                from usdforge.rules.png_pixels import NOT_CHECKED, pixel_problem

                problem = pixel_problem(path)
                if problem != NOT_CHECKED:
                    return problem
            if image.format == "JPEG":
                # libjpeg's DCT scaling: every block's entropy-coded data is still decoded (where a broken
                # or truncated file fails: the same verdicts on 4,000 random corruptions), the inverse DCT
                # at 1/8 scale: half the CPU of a full decode.
                image.draft(image.mode, ((image.width + 7) // 8, (image.height + 7) // 8))
            image.load()
    except Exception as exc:  # noqa: BLE001 - Pillow raises many kinds; all mean "not a usable image"
        return _pillow_problem(Image, exc)
    return None


def _decoded_verdict(path: Path) -> tuple[object, str] | None:
    """(store, key) of the "these bytes decode as an image" verdict for ``path`` in the enclosing
    conversion's build cache (``rules.robot.meshes.mesh_cache``), or None without one."""
    from usdforge.rules.robot.meshes import active_mesh_cache

    active = active_mesh_cache()
    if active is None:
        return None
    store, digest = active
    sha = digest(path)
    if len(sha) != 64:  # "missing", "unreadable": decode (and report) as without a cache
        return None
    payload = (f"texture-decoded;sha256={sha};pillow={_pillow_version()};max_pixels={MAX_TEXTURE_PIXELS};"
               f"check={TEXTURE_CHECK}")
    return store, hashlib.sha256(payload.encode()).hexdigest()


@functools.cache
def _pillow_version() -> str:
    from usdforge.rules.versions import distribution_version

    return distribution_version("pillow")


def model_roots(model_file: Path, extra: Iterable[str | Path] = ()) -> list[Path]:
    """The folders a model may read from: its own folder and ``extra`` (package roots, allowed roots)."""
    return [Path(model_file).absolute().parent, *(Path(p).absolute() for p in extra)]
