"""Conversion rules: one module per source format, plus shared USD-authoring helpers."""
