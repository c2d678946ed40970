"""The lazy converter API, as Isaac Lab's ``AssetConverterBase`` and its subclasses.

``MeshConverter(cfg).usd_path`` converts on construction, unless ``cfg.usd_dir`` already holds an output
built from the same asset, referenced files and cfg (content hashes; see ``pipeline.lazy``), or the build
cache holds one (restored without converting; see ``pipeline.cache``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import stat
import string
import tempfile
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any, Callable, ClassVar

import attrs

from usdforge.pipeline.atomic import build_atomically, relative_names
from usdforge.pipeline.cache import (KnownFiles, Store, is_sha256, link_same_small_file, open_store, same_small_file,
                                     unsafe_file_names, verified_small_file)
from usdforge.pipeline.code_version import code_stamp
from usdforge.pipeline.content_key import (absolute_location, cache_key, library_versions, location_free_digest,
                                           reference_names, resolve_name)
from usdforge.pipeline.layer_keys import mesh_unit_keys, reading_key, source_key, unit_files, unit_keys
from usdforge.pipeline.fingerprint import by_size_in_threads, file_digest, file_size, file_stamp, stamped_digest
from usdforge.pipeline.lazy import LazyKey, key_to_toml, read_key, stale_reasons
from usdforge.pipeline.references import referenced_files
from usdforge.rules.outputs import key_file_name, meshes_layer, resolve_usd_file_name
from usdforge.schemas import __version__
from usdforge.schemas.digest import digest_settings

#: A ROS package named in a robot source: ``package://NAME/`` (``package:///`` names none: searched) or a
#: xacro ``$(find NAME)``.
_PACKAGE_NAMES = re.compile(rb"package://([^/\"'<>\s]*)|\$\(find(?:-pkg-share)?\s+([^)\s]+)\)")

log = logging.getLogger("usdforge")


def packages_of(cfg: Any) -> dict[str, str]:
    """ROS package name → folder from a cfg's ``ros_package_paths`` (URDF), else empty."""
    return {entry["name"]: entry["path"] for entry in getattr(cfg, "ros_package_paths", None) or []}


def fresh_usd_dir() -> Path:
    """``<tempdir>/usdforge/usd_{YYYYmmdd}_{HHMMSS}_{random}``: a new folder per call, so two conversions
    started at once never share one."""
    stamp = time.strftime("%Y%m%d_%H%M%S")
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=8))
    return Path(tempfile.gettempdir()) / "usdforge" / f"usd_{stamp}_{suffix}"


def location_read(kind: str, cfg: Any, asset: Path, packages: dict[str, str]) -> dict[str, Any] | None:
    """The absolute folders a conversion writes into its outputs (``content_key.absolute_location``): a
    xacro whose expansion used ``$(cwd)`` or ``$(dirname)``; None for every other source (outputs never
    name where their files are). Inside ``rules.build_scope.one_build()`` this reuses the scan's
    expansion."""
    from usdforge.rules.urdf.xacro import XacroError, expand_xacro, is_xacro

    if kind != "urdf" or not is_xacro(asset):
        return None
    try:
        # The scan's arguments exactly: inside one build the expansion is then the scan's, not a second one.
        expansion = expand_xacro(asset, packages, getattr(cfg, "xacro_args", None),
                                 tree_root=getattr(cfg, "tree_root", None), env=getattr(cfg, "xacro_env", None),
                                 allowed=tuple(getattr(cfg, "allowed_roots", None) or ()))
    except XacroError:
        return None  # the conversion reports it
    return absolute_location(asset, packages) if expansion.location else None


def _same_file(path: Path, identity: tuple[int, int]) -> bool:
    """Whether ``path`` (no link followed) is the regular file of (device, inode) ``identity``."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) == identity


class _WrittenLater:
    """Cache writes a conversion hands on (``Store.put_entry``'s ``background``): each runs on a thread of its
    own beside the rest of the build, which ``wait`` s for them before it ends."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []

    def __call__(self, write: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                write()
            except BaseException as exc:  # raised by ``wait`` in the building thread
                self._errors.append(exc)

        thread = threading.Thread(target=run, name="usdforge-entry-write", daemon=True)
        thread.start()
        self._threads.append(thread)

    def wait(self) -> BaseException | None:
        """Wait for every write; the first error one raised (not a cache problem: those only warn), or None."""
        for thread in self._threads:
            thread.join()
        return self._errors[0] if self._errors else None


class AssetConverterBase:
    """Converts ``cfg.asset_path`` to USD on construction, lazily when ``cfg.usd_dir`` is given.

    It re-converts only if the asset file changed, any file it references changed (meshes, textures,
    includes), the config digest changed, or an output is missing or was modified;
    ``force_usd_conversion`` always converts. With ``usd_dir=None`` the output goes to a fresh temporary
    folder. Where files change is compared by content, never by location: a moved or copied source with
    the same bytes is up to date.

    Before converting, the build cache (``pipeline.cache``) is asked for outputs built from the same
    inputs (``pipeline.content_key``): a hit is restored byte for byte without converting; a conversion
    stores its outputs there, and reads and stores robot mesh geometry there too.

    cache: the cache folder (or a ``pipeline.cache.Store``); None: ``$USDFORGE_CACHE``, else
        the user's cache folder (``$XDG_CACHE_HOME/usdforge``, i.e. ``~/.cache/usdforge``); False: no cache.

    After construction: ``converted`` is True when the outputs were written (converted or restored),
    ``restored`` when they came from the cache, ``reasons`` says why they were out of date, ``cache_key``
    names the inputs, ``inputs`` lists the asset and every file it references (absolute) and ``lazy_key``
    is the lazy key beside the outputs (as written, or as read when they were up to date).

    Raises:
        ValueError: the asset file does not exist.
        schemas.ConfigError / rules.errors.ConversionError: bad configuration or bad input.
    """

    #: The rule that converts this kind of asset ("mesh", "urdf", "mjcf").
    kind: ClassVar[str]

    def __init__(self, cfg: Any, cache: Any = None):
        asset = Path(cfg.asset_path).absolute()
        if not asset.is_file():
            raise ValueError(f"The asset path does not exist: {cfg.asset_path}")
        lazy = cfg.usd_dir is not None
        usd_dir = Path(cfg.usd_dir).absolute() if lazy else fresh_usd_dir()
        usd_file_name = resolve_usd_file_name(str(asset), cfg.usd_file_name)
        self.cfg = attrs.evolve(cfg, asset_path=str(asset), usd_dir=str(usd_dir), usd_file_name=usd_file_name)
        self._usd_dir = usd_dir
        self._usd_file_name = usd_file_name
        self._packages = packages_of(self.cfg)
        self._digest = location_free_digest(self.cfg, self.kind)
        self.restored = False
        self._digests: dict[str, str] = {}
        self._stamps: dict[str, list[int]] = {}  # absolute path → stamp of the content hashed
        self.reasons: list[str] = ["force_usd_conversion is set"] if cfg.force_usd_conversion else []
        previous = read_key(usd_dir / key_file_name(usd_file_name))
        if previous is not None and not cfg.force_usd_conversion:
            self._trust_stamps(previous, asset)
            if lazy:  # the lazy check hashes every recorded input
                self._hash_ahead([asset, *(p for p in (resolve_name(name, asset.parent, self._packages)
                                                       for name in previous.references) if p is not None)])
        if not lazy:
            self.reasons.append("no usd_dir: lazy conversion is off")
        elif not self.reasons:
            self.reasons = stale_reasons(previous, self._digest, asset, usd_dir, self._packages, self._file_digest)
        self.converted = bool(self.reasons)
        if self.converted:
            self._build(previous, open_store(cache), use_cache=not cfg.force_usd_conversion)
        else:
            self.lazy_key = previous
            self.cache_key = previous.cache_key
            self.inputs = [asset, *(p for p in (resolve_name(name, asset.parent, self._packages)
                                                for name in previous.references) if p is not None)]

    def _build(self, previous: LazyKey | None, store: Store | None, use_cache: bool) -> None:
        """Restore the outputs from the cache, or convert (and store them), into usd_dir atomically."""
        from usdforge.rules.build_scope import one_build

        # The scan's xacro expansion and mesh scans are the conversion's, this build only; its cache lookups
        # are recorded in one write.
        with one_build(), store.records_batched() if store is not None else contextlib.nullcontext():
            self._build_once(previous, store, use_cache)

    def _build_once(self, previous: LazyKey | None, store: Store | None, use_cache: bool) -> None:
        asset = Path(self.cfg.asset_path)
        reading = reading_key(self.kind, self.cfg)
        references = self._recorded_references(previous, reading, asset)
        if references is None:
            references = referenced_files(self.kind, asset, self._packages, getattr(self.cfg, "xacro_args", None),
                                          tree_root=getattr(self.cfg, "tree_root", None),
                                          xacro_env=getattr(self.cfg, "xacro_env", None),
                                          allowed_roots=getattr(self.cfg, "allowed_roots", ()))
        location = location_read(self.kind, self.cfg, asset, self._packages)
        paths = reference_names(references, asset.parent, self._packages)
        self._hash_ahead([asset, *paths.values()])
        named = {name: self._file_digest(path) for name, path in paths.items()}
        asset_sha = self._file_digest(asset)
        outputs: dict[str, str] = {}  # relative name → sha256 of what is written, known from the cache
        self.cache_key = key = cache_key(self.kind, self._digest, asset.name, asset_sha, named, location)
        self.inputs = [asset, *(Path(p) for p in references)]
        cached = store.get_entry(key) if store is not None and use_cache else None
        if store is not None and use_cache:
            store.record(self.kind, hit=cached is not None)
        provenance = {"version": __version__, "kind": self.kind, "source": asset.name, "source_sha256": asset_sha,
                      "config_digest": self._digest, "cache_key": key}
        #: {unit: key} of the units whose files this conversion publishes as they are (``LazyKey.units``).
        published_units: dict[str, str] = {}
        #: name → ((device, inode), bytes) of an output ``left`` took as a unit's file (verified as read).
        taken: dict[str, tuple[tuple[int, int], bytes]] = {}
        #: name → ((device, inode), SHA-256, bytes, path in the temporary folder) of an output left in place.
        kept: dict[str, tuple[tuple[int, int], str, bytes, Path]] = {}

        def keep(name: str, sha: str, staged: Path, data: bytes) -> bool:
            """Put the output ``name``, whose bytes ``data`` have the SHA-256 ``sha``, at ``staged`` as a hard
            link of the file the previous build left, when that holds those bytes (compared with ``data``, which
            the caller verified or hashed: no SHA-256 of the output) and has no other
            name: nothing written, and that file stays where it is (``unchanged``). False: the caller writes
            it."""
            if previous is None or previous.outputs.get(name) != sha or name == self._usd_file_name:
                return False  # the main file may be saved again (provenance): never a link of the output
            checked = taken.get(name)  # the file ``left`` read and hashed, when these are its bytes
            identity = link_same_small_file(self._usd_dir / name, sha, staged, data,
                                            checked[0] if checked is not None and checked[1] is data else None)
            if identity is not None:
                kept[name] = identity, sha, data, staged
                outputs[name] = sha  # the bytes written as that name, whether or not the cache stores them
            return identity is not None

        def still_kept(name: str, path: Path) -> bool:
            """Whether the output ``name`` linked by ``keep`` is still that file at ``path`` (its output or
            temporary name), with its two names and its bytes (compared again: an editor may have written it
            in place, or linked it elsewhere, meanwhile). If not, its temporary name is made a file of its
            own with the bytes the build wrote, so that the output is replaced as any other."""
            identity, sha, data, staged = kept[name]
            if _same_file(path, identity) and same_small_file(path, sha, names=2, data=data):
                return True
            del kept[name]
            staged.unlink(missing_ok=True)
            with open(staged, "xb") as stream:
                stream.write(data)
            return False

        def restore(staging: Path) -> list[Path]:
            from usdforge.rules.conversion_warnings import note, warn

            written = []
            # An artifact is untrusted (a shared cache, a Dask worker): nothing is written before every name
            # is known to stay inside the output folder.
            problem = unsafe_file_names(cached.files)
            if problem is not None:
                raise ValueError(f"{asset}: the build cache artifact {key} names a file outside its output "
                                 f"folder ({problem}): nothing restored")
            for item in cached.meta.get("warnings", []) if isinstance(cached.meta, dict) else []:
                # The conversion's warnings and notes, as it gave them, naming the files where they are now.
                if isinstance(item, dict) and isinstance(item.get("file"), str) and isinstance(item.get("problem"), str):
                    element, line = item.get("element"), item.get("line")
                    (note if item.get("note") else warn)(os.path.normpath(asset.parent / item["file"]), item["problem"],
                                                         element if isinstance(element, str) else None,
                                                         line if type(line) is int else None)
            # Every folder once, parents first (mkdir with parents=True tries the child first: 3 calls for 2).
            folders = {parent for name in cached.files for parent in PurePosixPath(name).parents} - {PurePosixPath()}
            for folder in sorted(folders, key=lambda f: len(f.parts)):
                (staging / folder).mkdir(exist_ok=True)
            for name, data in cached.files.items():
                outputs[name] = cached.shas[name]
                path = staging / name
                if not keep(name, outputs[name], path, data):
                    path.write_bytes(data)
                written.append(path)
            if self.kind != "mesh":  # the units its files are, as a conversion records them (LazyKey.units)
                from usdforge.rules.robot.layer_reuse import output_units

                units = unit_keys(self.kind, self.cfg, source_key(self.kind, self.cfg, asset_sha, named, location))
                published_units.update(output_units(units, unit_files(self._usd_file_name), cached.files))
            return written

        def convert(staging: Path) -> list[Path]:
            from usdforge.pipeline.kinds import rule
            from usdforge.pipeline.provenance import provenance_on_save, stamp_provenance
            from usdforge.rules.conversion_warnings import is_note, recording
            from usdforge.rules.files import texture_checks_overlapped
            from usdforge.rules.robot.meshes import mesh_cache

            from usdforge.rules.robot.intermediate import intermediate_scope
            from usdforge.rules.robot.layer_reuse import layer_scope, output_units, restored_objects, store_units

            # The robot as read and each layer of the output are reused on their own (pipeline.layer_keys); the
            # units' keys are recorded in the lazy key with or without a cache (LazyKey.units).
            source = source_key(self.kind, self.cfg, asset_sha, named, location) if self.kind != "mesh" else None
            units = unit_keys(self.kind, self.cfg, source) if source is not None else \
                mesh_unit_keys(self.cfg, asset_sha, named) if store is not None and self.kind == "mesh" else {}
            unit_names = unit_files(self._usd_file_name)
            reuse = store if use_cache else None
            recorded = previous.units if previous is not None and isinstance(previous.units, dict) else {}

            def left(unit: str, unit_key: str) -> dict[str, tuple[bytes, str]] | None:
                """The unit's file as the previous build left it, when that build recorded the unit under
                ``unit_key`` and the file still holds the bytes it wrote (read once and hashed)."""
                name = unit_names.get(unit)
                sha = previous.outputs.get(name) if name is not None and recorded.get(unit) == unit_key \
                    and isinstance(previous.outputs, dict) else None
                found = verified_small_file(self._usd_dir / name, sha) if is_sha256(sha) else None
                if found is None:
                    return None
                taken[name] = (found[1], found[0])
                return {name: (found[0], sha)}

            # Textures are decoded in the background, joined (a bad one raising) before anything is stored
            # or published, inside the mesh cache that records their verdicts.
            with mesh_cache(store if use_cache else None, self._file_digest), recording() as warned, \
                    intermediate_scope(reuse, source), layer_scope(reuse, units, unit_names, keep, left) as restored, \
                    provenance_on_save(staging / self._usd_file_name, provenance) as stamped, \
                    texture_checks_overlapped():
                written = rule(self.kind).convert(self.cfg, staging)
                verbatim = restored_objects()
            names = relative_names(written, staging)
            published_units.update(output_units(units, unit_names, names))
            if not stamped:  # not saved with the record (a binary layer, a layer the rule wrote otherwise)
                stamp_provenance(staging / self._usd_file_name, provenance)
            if store is not None:
                # Files restored as they are in the cache (verified when read) are not read or hashed again.
                known = {name: object_ for name, object_ in verbatim.items()
                         if file_size(staging / name) == object_[1]}
                # An output left in place is not read to be stored: the cache is given the bytes the build
                # wrote (the file is a link to the output, which may be written in place meanwhile; the
                # publish hashes it again).
                files = KnownFiles(staging, names, known,
                                   lambda name: kept[name][2] if name in kept else None)
                # A mesh's unit is kept only from a conversion that warned of nothing: a reuse skips the
                # reading that would warn again.
                store_units(store, units if self.kind != "mesh" or not warned else {}, unit_names, files, restored)
                meta = {"warnings": [{"file": os.path.relpath(w.file, asset.parent), "problem": w.problem,
                                      "element": w.element, "line": w.line, **({"note": True} if is_note(w) else {})}
                                     for w in warned]}
                outputs.update(store.put_entry(key, files, meta, kind=self.kind, background=later) or {})
            return written

        def make_key(written: dict[str, Path]) -> str:
            self.lazy_key = LazyKey(
                kind=self.kind, cache_key=key, config_digest=self._digest,
                source=Path(os.path.relpath(asset, self._usd_dir)).as_posix(), asset={asset.name: asset_sha},
                libraries=library_versions(self.kind), code=code_stamp(), location=location or {},
                references=named, outputs={name: outputs.get(name) or file_digest(path) for name, path in written.items()},
                cfg=self._readable_cfg(), stamps=self._input_stamps({asset.name: asset, **paths}), reading=reading,
                units=published_units)
            return key_to_toml(self.lazy_key)

        if cached is not None:
            self.restored = True
            log.info("restoring %s from the build cache: %s", asset, "; ".join(self.reasons))
        else:  # a first conversion needs no reason; a rebuild says why (what changed)
            log.info("converting %s%s", asset, "" if previous is None and not self.cfg.force_usd_conversion
                     else ": " + "; ".join(self.reasons))
        def unchanged(name: str, destination: Path) -> bool:
            """Whether the output ``name`` at ``destination`` holds the bytes written as it (their SHA-256
            known from the cache), as the previous build wrote it: hashed, no link followed, when small."""
            sha = outputs.get(name)
            if sha is None or previous is None or previous.outputs.get(name) != sha:
                return False
            if name in kept:  # the file linked into the temporary folder (two names), hashed again
                return still_kept(name, destination)
            return same_small_file(destination, sha)

        # The output's cache entry is written on a thread while the output is published (its files read and
        # hashed before): a rebuild's few new objects, claim and entry beside its few renames.
        later = _WrittenLater()
        try:
            build_atomically(self._usd_dir, restore if cached is not None else convert,
                             key_file_name(self._usd_file_name), make_key,
                             list(previous.outputs) if previous is not None else [], unchanged)
        finally:
            failed = later.wait()
        if failed is not None:
            raise failed

    def _recorded_references(self, previous: LazyKey | None, reading: str, asset: Path) -> list[str] | None:
        """The referenced files the previous key records, when a scan would find them again: the only reason
        to convert is the cfg (the source, every referenced file, the code and the libraries are as recorded,
        which ``stale_reasons`` checked) and what decides the reading is the same (``reading_key``). None:
        scan the source."""
        if previous is None or not reading or previous.reading != reading or previous.kind != self.kind \
                or self.reasons != ["the configuration changed"]:
            return None
        paths = [resolve_name(name, asset.parent, self._packages) for name in previous.references]
        if any(path is None for path in paths) or self._searches_packages([asset, *paths]):
            return None
        return sorted({str(path) for path in paths})

    def _searches_packages(self, paths: list[Path]) -> bool:
        """Whether a robot source among ``paths`` (the source, a xacro file it includes) names a ROS package
        the cfg does not give (``package://NAME``, ``package:///``, ``$(find NAME)``): it is found by a search
        of the tree (``rules.urdf.paths``: folder names, ``package.xml`` files), which a new or moved
        ``package.xml`` can redirect without any recorded file changing, so only a scan finds what is read."""
        from usdforge.rules.files import regular_file_problem

        for path in paths:
            if path.suffix.lower() not in (".urdf", ".xacro", ".xml"):
                continue
            if regular_file_problem(path) is not None:  # names from the lazy key: only regular files are read
                return True
            try:
                data = path.read_bytes()
            except OSError:
                return True
            for match in _PACKAGE_NAMES.finditer(data):
                name = match.group(1) if match.group(1) is not None else match.group(2)
                if name.decode("utf-8", "replace") not in self._packages:
                    return True
        return False

    def _file_digest(self, path: str | Path) -> str:
        """``file_digest``, once per file per conversion (the lazy check, the key and the mesh cache ask);
        the file's stamp is kept when it did not change while being hashed."""
        name = os.path.abspath(path)
        if name not in self._digests:
            self._keep(name, *stamped_digest(name))
        return self._digests[name]

    def _hash_ahead(self, paths: list[str | Path]) -> None:
        """Hash the files of ``paths`` not hashed yet side by side on the machine's cores (file reads and
        hashlib release the GIL): a fresh clone's mesh files are most of a restore from the cache."""
        todo = [name for name in dict.fromkeys(os.path.abspath(p) for p in paths) if name not in self._digests]
        for name, (digest, stamp) in zip(todo, by_size_in_threads(stamped_digest, todo,
                                                                   [file_size(name) for name in todo])):
            self._keep(name, digest, stamp)

    def _keep(self, name: str, digest: str, stamp: list[int] | None) -> None:
        self._digests[name] = digest
        if stamp is not None:
            self._stamps[name] = stamp

    def known_digest(self, path: str | Path) -> str | None:
        """The SHA-256 this conversion took of ``path``, if the file is still as it was then (its settled
        stamp unchanged); None when it was not hashed, was not settled, or changed since."""
        name = os.path.abspath(path)
        stamp = self._stamps.get(name)
        if stamp is None or name not in self._digests or file_stamp(name) != stamp:
            return None
        return self._digests[name]

    def _trust_stamps(self, previous: LazyKey, asset: Path) -> None:
        """Take the previous key's digests of the inputs whose stamp (size, times, inode) is unchanged and
        was settled when recorded, instead of hashing them again (a cfg edit rebuilds without reading
        every mesh file); any other file is hashed by content (a clone, a moved checkout, an edit)."""
        recorded = {asset.name: (asset, previous.asset.get(asset.name))}
        for name, sha in previous.references.items():
            recorded[name] = (resolve_name(name, asset.parent, self._packages), sha)
        for name, (path, sha) in recorded.items():
            stamp = previous.stamps.get(name)
            if path is None or sha is None or not isinstance(stamp, list) or sha == "missing":
                continue
            current = file_stamp(path)
            if current == stamp:  # settled when it was recorded
                self._digests[os.path.abspath(path)] = sha
                self._stamps[os.path.abspath(path)] = current

    def _input_stamps(self, paths: dict[str, str | Path]) -> dict[str, list[int]]:
        """Stamps of the inputs ({name: path}) hashed in this conversion (settled ones only, see
        ``_file_digest``) or trusted from the previous key."""
        stamps = {}
        for name, path in paths.items() if self._stamps else ():
            stamp = self._stamps.get(os.path.abspath(path))
            if stamp is not None:
                stamps[name] = stamp
        return stamps

    def _readable_cfg(self) -> dict[str, Any]:
        """The cfg for the sidecar: no location fields, package folders relative to the output folder."""
        data = digest_settings(self.cfg)
        if data.get("ros_package_paths"):
            data["ros_package_paths"] = [{"name": item["name"], "path": Path(os.path.relpath(item["path"],
                                          self._usd_dir)).as_posix()} for item in data["ros_package_paths"]]
        return data

    @property
    def usd_dir(self) -> str:
        """The absolute path of the folder holding the generated USD files."""
        return str(self._usd_dir)

    @property
    def usd_file_name(self) -> str:
        """The file name of the generated USD file."""
        return self._usd_file_name

    @property
    def usd_path(self) -> str:
        """The absolute path of the generated USD file."""
        return str(self._usd_dir / self._usd_file_name)

    @property
    def usd_instanceable_meshes_path(self) -> str | None:
        """The file holding the instanceable meshes, relative to ``usd_dir`` (so references resolve after
        moving the folder): ``Props/<stem>_meshes.usd`` of a mesh with ``make_instanceable``, the geometry
        payload ``payloads/geometry.usd`` of a layered robot; None when the meshes are in the main file."""
        return meshes_layer(self.kind, self._usd_file_name, self.cfg.make_instanceable,
                            getattr(self.cfg, "run_asset_transformer", False))


class MeshConverter(AssetConverterBase):
    """Converts a mesh file (OBJ, STL, PLY, OFF, GLB/GLTF, DAE; FBX with the ``fbx`` extra) to USD."""

    kind = "mesh"


class UrdfConverter(AssetConverterBase):
    """Converts a URDF robot description to an articulated USD asset."""

    kind = "urdf"


class MjcfConverter(AssetConverterBase):
    """Converts a MuJoCo MJCF model to an articulated USD asset."""

    kind = "mjcf"


def converter_for(kind: str) -> type[AssetConverterBase]:
    """The converter class of a kind."""
    return {"mesh": MeshConverter, "urdf": UrdfConverter, "mjcf": MjcfConverter}[kind]
