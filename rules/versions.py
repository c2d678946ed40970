"""Installed versions of distributions, read from the ``*.dist-info`` names on sys.path (no
``importlib.metadata`` import): what cache keys and stamps name the libraries by."""

from __future__ import annotations

import functools
import os
import re
import sys


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.cache
def _installed() -> dict[str, str]:
    """{canonical distribution name: version} from the ``*.dist-info``/``*.egg-info`` names on sys.path,
    the first one found winning (as imports and ``importlib.metadata`` do). One listing per sys.path
    folder: importing ``importlib.metadata`` and asking it once per distribution costs a no-op ``doit
    convert`` about 50 ms."""
    found: dict[str, str] = {}
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                distribution, _, version = name.rsplit(".", 1)[0].partition("-")
                found.setdefault(_canonical(distribution), version.split("-")[0])
    return found


def distribution_version(name: str) -> str:
    """The installed version of distribution ``name`` ("absent" when not installed), from one listing of
    sys.path: no ``importlib.metadata`` import (with its ``email`` and ``csv``, about 15 ms of a one-off
    conversion) unless sys.path holds no listing at all."""
    installed = _installed()
    if installed:
        return installed.get(_canonical(name), "absent")
    import importlib.metadata  # no listing at all (a zip application): ask

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"
