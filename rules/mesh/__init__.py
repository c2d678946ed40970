"""Mesh files → USD: reading every mesh format (trimesh; assimp for FBX), the mesh rule, and the files a mesh references."""
