"""URDF → the format-neutral Robot: XML reading, package:// paths, every element, joint drives, and the files a URDF references."""
