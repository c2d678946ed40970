"""The mesh formats usdforge reads, by file extension. No imports: the doit parent process and the URDF
reader consult it without loading a mesh library."""

#: File extensions trimesh reads here (lower case, without the dot).
TRIMESH_FORMATS = ("obj", "stl", "ply", "off", "glb", "gltf", "dae")
#: Formats read through the optional assimp binding.
ASSIMP_FORMATS = ("fbx",)
MESH_FORMATS = TRIMESH_FORMATS + ASSIMP_FORMATS
