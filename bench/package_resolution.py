"""How many ``package://`` URIs of the shared corpus resolve to an existing file with no package given
explicitly (``rules.urdf.paths``), per robot, and by which rule: the figures in README's "ROS packages".

    PYTHONPATH=src python bench/package_resolution.py [CORPUS]

Compare with another checkout by pointing PYTHONPATH at its src/ (the old resolver has no rules: it
prints "-" for them).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from lxml import etree

from usdforge.rules.urdf import paths

ROOT = Path(__file__).resolve().parents[1]


def corpus_urdfs(corpus: Path) -> list[Path]:
    manifest = json.loads((corpus / "MANIFEST.json").read_text())
    return [corpus / entry["path"] for entry in manifest if entry["format"] == "urdf"]


def uris(urdf: Path) -> list[str]:
    root = etree.parse(str(urdf), etree.XMLParser(resolve_entities=False, no_network=True)).getroot()
    found = {e.get("filename", "").strip() for e in root.iter("mesh", "texture")}
    return sorted(u for u in found if u.startswith("package://"))


def main(corpus: Path) -> None:
    total = Counter()
    for urdf in corpus_urdfs(corpus):
        rules = Counter()
        resolved = 0
        names = uris(urdf)
        for uri in names:
            try:
                if hasattr(paths, "resolve_package_uri"):
                    found = paths.resolve_package_uri(uri, urdf.parent, {})
                    ok, rule = found.path.is_file(), found.rule
                else:
                    ok, rule = paths.resolve_uri(uri, urdf.parent, {}).is_file(), "-"
            except paths.UnresolvedUri:
                ok, rule = False, "unresolved"
            resolved += ok
            rules[rule if ok else "missing"] += 1
        total.update({"uris": len(names), "resolved": resolved})
        print(f"{urdf.relative_to(corpus)}: {resolved}/{len(names)} resolved {dict(rules)}"
              + (f"; tree {paths.tree_boundary(str(urdf.parent))}" if hasattr(paths, "tree_boundary") else ""))
    print(f"total: {total['resolved']}/{total['uris']} package:// URIs resolve with no package given")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "corpus")
