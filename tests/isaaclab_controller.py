"""Run Isaac Lab 3.0.0's DifferentialIKController (torch, float32) on saved inputs; see isaaclab_env.py.

Usage: python isaaclab_controller.py ISAACLAB_ROOT REQUEST.json ARRAYS.npz. Loads the controller files
as bare modules (Isaac Lab's package __init__ needs Isaac Sim), with ``configclass`` standing in as a
keyword-only dataclass (what it is for these fields). Quaternions in ARRAYS are (w, x, y, z) and are
converted to Isaac Lab's (x, y, z, w) here. Writes ARRAYS.out.npz (one ``q_<case>`` per case) and prints
one JSON line: the validation messages of the request's bad configurations.
"""

import dataclasses
import importlib.util
import json
import sys
import types

import numpy as np
import torch

root, request_path, arrays_path = sys.argv[1:4]


def package(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__path__ = [f"{root}/{name.replace('.', '/')}"]
    sys.modules[name] = mod
    return mod


def load(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, f"{root}/{name.replace('.', '/')}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


package("isaaclab")
utils = package("isaaclab.utils")
utils.configclass = lambda cls: dataclasses.dataclass(kw_only=True)(cls)
package("isaaclab.controllers")
load("isaaclab.utils.math")
Controller = load("isaaclab.controllers.differential_ik").DifferentialIKController
Cfg = load("isaaclab.controllers.differential_ik_cfg").DifferentialIKControllerCfg

request = json.loads(open(request_path).read())
data = np.load(arrays_path)
t = lambda a: torch.as_tensor(np.asarray(a, np.float32))  # noqa: E731
xyzw = lambda q: q[:, [1, 2, 3, 0]]  # noqa: E731
out = {}
for case in request["cases"]:
    cfg = Cfg(**case["cfg"])
    n = data["q"].shape[0]
    ctrl = Controller(cfg, num_envs=n, device="cpu")
    if "lower" in data.files:
        ctrl.set_joint_pos_limits(t(data["lower"]), t(data["upper"]))
    if cfg.command_type == "position":
        ctrl.set_command(t(data["pos_des"]), ee_quat=t(xyzw(data["cur_quat"])))
    else:
        ctrl.set_command(torch.cat([t(data["pos_des"]), t(xyzw(data["quat_des"]))], dim=1))
    q = ctrl.compute(t(data["cur_pos"]), t(xyzw(data["cur_quat"])), t(data["jac"]), t(data["q"]))
    out[f"q_{case['name']}"] = q.numpy()
np.savez(arrays_path.replace(".npz", ".out.npz"), **out)

messages = []
for bad in request.get("bad_cfgs", []):
    try:
        Cfg(**bad)
        messages.append(None)
    except ValueError as exc:
        messages.append(str(exc))
print(json.dumps({"messages": messages, "torch": torch.__version__}))
