"""Verification of converted USD against its source, with the source's own oracle."""
