"""The format-neutral robot model shared by the URDF and MJCF rules: merging, inertia, meshes and the layered USD writer."""
