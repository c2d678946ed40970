"""How conversion time grows with model size: generated MJCF and URDF models of 500 to 8,000 elements.

    python bench/scaling.py [--sizes 500 1000 2000 4000 8000] [--kinds mjcf-geoms mjcf-bodies urdf-links]

For each kind and size it prints, side by side: usdforge's in-process conversion time (``convert`` of the
rule, no lazy check), the time per element in µs, MuJoCo's own compile time of the same model
(``MjSpec.from_file(...).compile()``; for a URDF, MuJoCo's URDF import of it), and the ratio. Time per
element that stays flat as the size doubles means linear growth; one that doubles means quadratic.

Kinds:
  mjcf-geoms   one body with N sphere geoms (the contacts rule once looked each geom up in a list: O(N²))
  mjcf-bodies  N bodies in chains of 20, one hinge joint and one capsule each
  urdf-links   N links in chains of 20 on one base, one revolute joint, box visual/collision and inertia each
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def mjcf_geoms(n: int) -> str:
    geoms = "\n".join(f'      <geom name="g{i}" type="sphere" size="0.01" pos="{0.02 * (i % 50)} {0.02 * (i // 50)} 0"/>'
                      for i in range(n))
    return f'<mujoco model="geoms{n}">\n  <worldbody>\n    <body name="b">\n      <freejoint/>\n{geoms}\n' \
           '    </body>\n  </worldbody>\n</mujoco>\n'


def mjcf_bodies(n: int, depth: int = 20) -> str:
    """N bodies as chains of ``depth`` (MuJoCo's XML reader refuses nesting beyond a few hundred)."""
    chains = []
    for start in range(0, n, depth):
        count = min(depth, n - start)
        chains.append("".join(
            f'<body name="b{i}" pos="{0.1 if i > start else 0.05 * (start // depth)} 0 0.1">'
            f'<joint name="j{i}" type="hinge" axis="0 1 0" range="-1 1"/>'
            f'<geom type="capsule" size="0.01" fromto="0 0 0 0 0 0.1"/>' for i in range(start, start + count))
            + "</body>" * count)
    body = "\n".join(chains)
    return f'<mujoco model="bodies{n}">\n  <compiler angle="radian"/>\n  <worldbody>\n{body}\n  </worldbody>\n</mujoco>\n'


def urdf_links(n: int, depth: int = 20) -> str:
    """N links: a base and chains of ``depth`` links on it (MuJoCo's URDF import refuses deeper trees)."""
    inertial = ('<inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
                '</inertial>')
    shape = '<geometry><box size="0.05 0.05 0.1"/></geometry>'
    links = "\n".join(f'  <link name="l{i}">{inertial}<visual>{shape}</visual><collision>{shape}</collision></link>'
                      for i in range(n))
    joints = "\n".join(f'  <joint name="j{i}" type="revolute"><parent link="l{0 if i % depth == 1 else i - 1}"/>'
                       f'<child link="l{i}"/>'
                       f'<origin xyz="0 0 0.1"/><axis xyz="0 1 0"/>'
                       f'<limit lower="-1" upper="1" effort="10" velocity="1"/></joint>' for i in range(1, n))
    return f'<robot name="links{n}">\n{links}\n{joints}\n</robot>\n'


KINDS = {"mjcf-geoms": ("xml", mjcf_geoms), "mjcf-bodies": ("xml", mjcf_bodies), "urdf-links": ("urdf", urdf_links)}


def usdforge_seconds(kind: str, source: Path, out: Path) -> float:
    """Wall time of the rule's ``convert`` (parse, compile, author, save), in-process."""
    from usdforge.pipeline.kinds import cfg_class, rule
    from usdforge.schemas import structure_cfg

    name = "urdf" if kind.startswith("urdf") else "mjcf"
    cfg = structure_cfg({"asset_path": str(source), "usd_dir": str(out), "usd_file_name": source.stem + ".usda"},
                        cfg_class(name))
    convert = rule(name).convert
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(cfg, out)
    return time.perf_counter() - start


def mujoco_seconds(source: Path) -> float:
    """MuJoCo's parse + compile of the same file (its URDF importer for a .urdf)."""
    import mujoco

    start = time.perf_counter()
    if source.suffix == ".urdf":
        mujoco.MjModel.from_xml_path(str(source))
    else:
        mujoco.MjSpec.from_file(str(source)).compile()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 4000, 8000])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    args = parser.parse_args(argv)
    # Warm imports (pxr, mujoco, trimesh) so the first row is not charged for them.
    with tempfile.TemporaryDirectory() as folder:
        warm = Path(folder) / "warm.xml"
        warm.write_text(mjcf_geoms(2))
        usdforge_seconds("mjcf-geoms", warm, Path(folder) / "out")
    print(f"{'model':<12} {'N':>6} {'usdforge s':>11} {'µs/element':>11} {'MuJoCo s':>9} {'µs/element':>11} "
          f"{'ratio':>7}")
    for kind in args.kinds:
        extension, make = KINDS[kind]
        for n in args.sizes:
            with tempfile.TemporaryDirectory() as folder:
                source = Path(folder) / f"{kind}_{n}.{extension}"
                source.write_text(make(n))
                ours = usdforge_seconds(kind, source, Path(folder) / "out")
                theirs = mujoco_seconds(source)
            print(f"{kind:<12} {n:>6} {ours:>11.2f} {ours / n * 1e6:>11.0f} {theirs:>9.3f} {theirs / n * 1e6:>11.1f} "
                  f"{ours / theirs:>7.0f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
