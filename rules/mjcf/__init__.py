"""MJCF → the format-neutral Robot and MuJoCo's own USD records, read through MuJoCo's MjSpec and compiled MjModel."""
