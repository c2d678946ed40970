"""USD authoring helpers shared by the rules: layer-level (Sdf) specs and stage-level (Usd) prims."""
