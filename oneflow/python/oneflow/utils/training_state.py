"""The state a training job needs to resume exactly, saved and loaded in one call.

    from oneflow.utils import training_state
    resumed = training_state.load("ckpt", model=model, optimizer=opt, lr_scheduler=sched,
                                  grad_scaler=scaler, dataloader=loader)   # None: nothing saved
    start = resumed["step"] if resumed else 0
    for step in range(start, steps):
        ...
        training_state.save("ckpt", step + 1, model=model, optimizer=opt, lr_scheduler=sched,
                            grad_scaler=scaler, dataloader=loader)         # ckpt/step-00000042

save writes one sharded checkpoint (oneflow.save(..., sharded=True): a collective, every rank
calls it) named step-NNNNNNNN inside the folder, atomically: it appears whole or not at all, so a
job killed while saving resumes from the one before. It holds the model and the optimizer in
whatever layout they have (ZeRO's split state included), the LR scheduler, the GradScaler, and
per rank the random generators (oneflow's, Python's random, numpy's; CUDA draws from oneflow's
CPU generator here) and the DataLoader's place (epoch, batches given out in it, the generator
state its shuffle drew from, the sampler's epoch), with `extra` (numbers, strings, lists and
dicts of them) for the script's own counters. Only the newest `keep` checkpoints stay.

load reads the newest complete checkpoint of the folder (or the checkpoint it is given) into
the objects passed, in their layout and world size (each rank reads only its shards); per-rank
state comes from the same rank, or, in a world of another size, from rank (rank % saved world
size). It returns {"step": ..., "world_size": saved world size, "extra": {...}}, None when the
folder holds no checkpoint.
"""

import json
import os
import random
import re
import shutil

import numpy as np

import oneflow as flow

FORMAT = "oneflow-training-state"
VERSION = 1
_NAME = re.compile(r"step-(\d{8,})")


def checkpoint_name(step):
    return f"step-{int(step):08d}"


def checkpoints(folder):
    """The complete checkpoints in folder, oldest first, as (step, path)."""
    found = []
    if not os.path.isdir(folder):
        return found
    for name in os.listdir(folder):
        m = _NAME.fullmatch(name)
        path = os.path.join(folder, name)
        if m and os.path.isfile(os.path.join(path, "metadata.json")):
            found.append((int(m.group(1)), path))
    return sorted(found)


def latest(folder):
    """The path of the newest complete checkpoint in folder; None when there is none."""
    found = checkpoints(folder)
    return found[-1][1] if found else None


# ---- per-rank state: random generators, data position ----

def rng_state():
    """This process's random generators as plain data."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    return {"oneflow": [int(v) for v in flow.default_generator.get_state().tolist()],
            "python": [py_state[0], list(py_state[1]), py_state[2]],
            "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]),
                      float(np_state[4])]}


def set_rng_state(state):
    flow.default_generator.set_state(flow.tensor(state["oneflow"], dtype=flow.uint8))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


def _per_rank_tensor(blob, world):
    """Every rank's bytes as one (world, length) uint8 tensor, split over the ranks (padded
    with spaces to the longest)."""
    if world == 1:
        return flow.tensor(np.frombuffer(blob, np.uint8).reshape(1, -1))
    n = flow.tensor([len(blob)], dtype=flow.int64)
    flow.comm.all_reduce(n, op=flow.comm.ReduceOp.MAX)
    padded = blob + b" " * (int(n.item()) - len(blob))
    local = flow.tensor(np.frombuffer(padded, np.uint8).reshape(1, -1))
    placement = flow.placement("cpu", ranks=list(range(world)))
    return local.to_global(placement=placement, sbp=flow.sbp.split(0))


# ---- save / load ----

def _check_step(step):
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"training_state.save: step must be a non-negative integer, got {step!r}")


def save(folder, step, *, model=None, optimizer=None, lr_scheduler=None, grad_scaler=None,
         dataloader=None, extra=None, keep=2):
    """Writes folder/step-NNNNNNNN (every rank calls it); returns its path."""
    _check_step(step)
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"training_state.save: keep must be a positive integer, got {keep!r}")
    world, rank = flow.env.get_world_size(), flow.env.get_rank()
    os.makedirs(folder, exist_ok=True)
    obj = {"format": FORMAT, "version": VERSION, "step": step, "world_size": world,
           "extra": dict(extra or {})}
    for key, value in (("model", model), ("optimizer", optimizer),
                       ("lr_scheduler", lr_scheduler), ("grad_scaler", grad_scaler)):
        if value is not None:
            obj[key] = value.state_dict()
    mine = {"rank": rank, "rng": rng_state()}
    if dataloader is not None:
        mine["dataloader"] = dataloader.state_dict()
    obj["per_rank"] = _per_rank_tensor(json.dumps(mine).encode(), world)
    path = os.path.join(folder, checkpoint_name(step))
    flow.save(obj, path, sharded=True)
    if rank == 0:  # after save's last barrier: the new one is in place on every rank's view
        for _, old in checkpoints(folder)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return path


def load(path, *, model=None, optimizer=None, lr_scheduler=None, grad_scaler=None,
         dataloader=None, rng=True):
    """Loads the checkpoint at path, or the newest one in the folder path, into the objects
    given; None when there is none."""
    if not os.path.isfile(os.path.join(path, "metadata.json")):
        found = latest(path)
        if found is None:
            return None
        path = found
    obj = flow.load(path)
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        fmt = obj.get("format") if isinstance(obj, dict) else None
        raise RuntimeError(f"training_state.load: '{path}' is a checkpoint but not of the "
                           f"training state (format {str(fmt)[:40]!r}, expected {FORMAT!r}); "
                           f"load it with oneflow.load")
    for key, value in (("model", model), ("optimizer", optimizer),
                       ("lr_scheduler", lr_scheduler), ("grad_scaler", grad_scaler)):
        if value is None:
            continue
        if key not in obj:
            held = [k for k in ("model", "optimizer", "lr_scheduler", "grad_scaler") if k in obj]
            raise KeyError(f"training_state.load: '{path}' holds no {key} state (it holds "
                           f"{', '.join(held) or 'no object state'}); pass only what was saved")
        value.load_state_dict(obj[key])
    rows = obj["per_rank"].numpy()
    saved_world = int(obj["world_size"])
    mine = json.loads(rows[flow.env.get_rank() % saved_world].tobytes().decode())
    if dataloader is not None:
        if "dataloader" not in mine:
            raise KeyError(f"training_state.load: '{path}' holds no dataloader state")
        dataloader.load_state_dict(mine["dataloader"])
    if rng:
        set_rng_state(mine["rng"])
    return {"step": int(obj["step"]), "world_size": saved_world, "extra": obj["extra"],
            "path": path}
