"""Conversion rules: one subpackage per source format (mesh, urdf, mjcf), the format-neutral robot model
and writer they share (robot), USD-authoring helpers (usd) and verification against sources (verify)."""
