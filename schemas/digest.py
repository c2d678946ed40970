"""The config digest: what in a cfg decides the USD that comes out."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from usdforge.schemas._version import __version__
from usdforge.schemas.converter_cfgs import LOCATION_FIELDS
from usdforge.schemas.serialization import cfg_to_dict

#: Fields left out of the digest: where the asset is and goes, and the force flag (an action, not a setting).
#: allowed_roots permits reading files (and finding ROS packages there): it changes what a conversion writes
#: only through which files it references, which the cache key and the lazy check hash by name and content.
#: tree_root (the manifest's folder) is a location, like allowed_roots.
DIGEST_EXCLUDED_FIELDS = (*LOCATION_FIELDS, "force_usd_conversion", "allowed_roots", "tree_root")
#: Fields left out while they hold their default (added after digests were published): a cfg that does
#: not set them keeps the digest, and so the cache entries and provenance, it had before they existed.
DIGEST_OMITTED_AT_DEFAULT = {"xacro_env": {}, "allow_missing_files": False}


def digest_settings(cfg: Any) -> dict[str, Any]:
    """The cfg fields that decide the output (``DIGEST_EXCLUDED_FIELDS`` and defaults of
    ``DIGEST_OMITTED_AT_DEFAULT`` left out), as plain data."""
    return {k: v for k, v in cfg_to_dict(cfg).items()
            if k not in DIGEST_EXCLUDED_FIELDS and not (k in DIGEST_OMITTED_AT_DEFAULT
                                                        and v == DIGEST_OMITTED_AT_DEFAULT[k])}


def config_digest(cfg: Any, kind: str | None = None) -> str:
    """SHA-256 (hex) of the canonical JSON of ``cfg`` without location fields (package folders included:
    only the package names count), plus usdforge's version.

    kind: the conversion rule ("mesh", "urdf", "mjcf"); defaults to the cfg's class name.
    Stable across processes and machines: sorted keys, no whitespace, floats in Python's repr.
    """
    settings = digest_settings(cfg)
    if settings.get("ros_package_paths"):
        # A package's folder is a location: what matters is the content found there (the lazy check and
        # the cache key hash every referenced file), so a moved checkout keeps its digest.
        settings["ros_package_paths"] = sorted(entry["name"] for entry in settings["ros_package_paths"])
    payload = {"usdforge": __version__, "kind": kind or type(cfg).__name__, "cfg": settings}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
