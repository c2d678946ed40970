"""Write a library manifest of the 14 corpus robots in ``../shared/corpus`` plus the embedded library
(``assets/library.toml``), for ``doit convert verify report library=PATH``.

    python bench/corpus_library.py build/corpus/library.toml
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import tomli_w

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"


def corpus_library(embedded: Path = ROOT / "assets" / "library.toml") -> dict:
    """The manifest as plain data: corpus entries (MuJoCo's scene and contact rules kept for MJCF, fixed
    bases for URDF robots whose root is a world link) then the embedded entries, sources absolute."""
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    assets = []
    for entry in manifest:
        item = {"name": entry["name"] if entry["format"] == "mjcf" else f"{entry['name']}_urdf",
                "source": str(CORPUS / entry["path"])}
        if entry["format"] == "mjcf":
            item["cfg"] = {"import_physics_scene": True, "self_collision": True}
        else:
            item["packages"] = {name: str(CORPUS / folder) for name, folder in entry.get("package_paths", {}).items()}
        assets.append(item)
    for item in tomllib.loads(embedded.read_text())["assets"]:
        item = dict(item)
        item["source"] = str((embedded.parent / item["source"]).resolve())
        if "packages" in item:
            item["packages"] = {k: str((embedded.parent / v).resolve()) for k, v in item["packages"].items()}
        assets.append(item)
    return {"assets": assets}


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "build/corpus/library.toml")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(tomli_w.dumps(corpus_library()))
    print(target)
