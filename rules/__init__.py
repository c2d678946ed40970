"""Conversion rules: one subpackage per source format (mesh, urdf, mjcf), the format-neutral robot model
and writer they share (robot), USD-authoring helpers (usd) and verification against sources (verify)."""

if __name__ != "usdforge.rules":   # one importable name per module: never both rules.x and usdforge.rules.x
    raise ImportError(f"import usdforge.rules, not {__name__}: the repository's top-level folders are the "
                      "subpackages of usdforge")

