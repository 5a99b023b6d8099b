"""oneflow.distributed: starting multi-process jobs, and PyTorch's torch.distributed names over
oneflow's runtime.

    python3 -m oneflow.distributed.launch --nproc_per_node 2 train.py --lr 0.1

    import oneflow.distributed as dist
    dist.init_process_group("gloo", init_method="env://")     # under the launcher
    t = flow.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    dist.barrier()

The launcher (oneflow.distributed.launch) starts one process per local rank with torchrun's
environment variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...), which
oneflow.env.get_rank() and friends read; a rank of a launched job joins it when it imports
oneflow, so init_process_group has nothing left to start there: it checks what it is told
against the environment and records the backend. ``init_method="tcp://host:port"`` with
``rank`` and ``world_size`` (or ``env://`` with those arguments in a process started without
the launcher) sets the variables and joins the job then (every rank assumed on this machine
unless LOCAL_RANK and LOCAL_WORLD_SIZE say otherwise). Without a launcher and without arguments
the process is rank 0 of a world of one, as in OneFlow.

The backend is accepted ("gloo", "nccl", "cpu:gloo,cuda:nccl"): oneflow picks the transport
per tensor (shared memory or Gloo for CPU tensors, NCCL for CUDA tensors). Collectives are
those of oneflow.comm with PyTorch's signatures; ``group`` is what new_group returns (or a
list of ranks), and a rank outside the group gets None back, as in PyTorch. The *_object
collectives pickle the objects (only peers of the same job send them, as in PyTorch).
"""
import os

import oneflow as flow
from oneflow import comm as _comm
from oneflow import env as _env
from oneflow.comm import ReduceOp  # noqa: F401  (torch.distributed.ReduceOp)

__all__ = [
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "all_gather", "all_gather_into_tensor",
    "all_gather_object", "all_reduce", "all_to_all", "barrier", "broadcast",
    "broadcast_object_list", "destroy_process_group", "gather", "gather_object", "get_backend",
    "get_rank", "get_world_size", "group", "init_process_group", "is_available",
    "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available", "new_group",
    "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "send",
    "ZeroRedundancyOptimizer",
]


def __getattr__(name):
    # Imported on first use: oneflow.optim is not loaded yet when oneflow imports this module.
    if name == "ZeroRedundancyOptimizer":
        from oneflow.distributed.zero import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer
    raise AttributeError(f"module 'oneflow.distributed' has no attribute {name!r}")


class Backend:
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"
    UCC = "ucc"

    def __new__(cls, name):
        return _check_backend(name, "Backend")


def _check_backend(backend, op="init_process_group"):
    if backend is None:
        return "cpu:gloo,cuda:nccl"
    name = str(backend).lower()
    for part in name.split(","):
        device, _, b = part.rpartition(":")
        if b not in ("gloo", "nccl") or device not in ("", "cpu", "cuda"):
            raise ValueError(f"{op}: backend {backend!r} is not supported, use 'gloo', 'nccl' or "
                             "'cpu:gloo,cuda:nccl' (oneflow picks shared memory, Gloo or NCCL per tensor)")
    return name


class ProcessGroup:
    """The ranks of a group (what new_group returns); collectives take it as group=."""

    def __init__(self, ranks):
        self.ranks = list(ranks)

    def size(self):
        return len(self.ranks)

    def rank(self):
        me = _env.get_rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def __repr__(self):
        return f"ProcessGroup(ranks={self.ranks})"


class GroupMember:
    WORLD = None  # the default group: every rank
    NON_GROUP_MEMBER = object()


class group:  # noqa: N801  (torch.distributed.group.WORLD)
    WORLD = None


_state = {"initialized": False, "backend": None}


def is_available():
    return True


def is_initialized():
    """Whether init_process_group ran (and destroy_process_group did not undo it)."""
    return _state["initialized"]


def is_gloo_available():
    return True


def is_nccl_available():
    return flow.backends.cuda.is_built()


def is_mpi_available():
    return False


def _env_world():
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    info = _env._info()
    return (info["rank"], info["world_size"]) if info["source"] != "none" else (None, None)


def _set_world(rank, world_size, addr, port):
    if world_size is None or world_size < 1 or rank is None or not 0 <= rank < world_size:
        raise ValueError(f"init_process_group: needs rank in [0, world_size) and world_size >= 1, "
                         f"got rank={rank}, world_size={world_size}")
    if addr is None or port is None:
        raise ValueError("init_process_group: rank and world_size without a launcher need "
                         "MASTER_ADDR and MASTER_PORT in the environment (or init_method='tcp://host:port')")
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR=str(addr), MASTER_PORT=str(port))
    os.environ.setdefault("LOCAL_RANK", str(rank))
    os.environ.setdefault("LOCAL_WORLD_SIZE", str(world_size))


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Joins the job (PyTorch's signature); see the module docstring."""
    if _state["initialized"]:
        raise RuntimeError("init_process_group: the default process group is already initialized; "
                           "call destroy_process_group() first")
    backend = _check_backend(backend)
    if store is not None:
        raise ValueError("init_process_group: store= is not supported, use init_method='env://' "
                         "(the launcher's variables) or 'tcp://host:port'")
    method = init_method or "env://"
    rank = None if rank is None or rank < 0 else int(rank)
    world_size = None if world_size is None or world_size < 0 else int(world_size)
    env_rank, env_world = _env_world()
    if method.startswith("tcp://"):
        host, sep, port = method[len("tcp://"):].rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"init_process_group: init_method {method!r} is not tcp://host:port")
        if env_world is not None and env_world > 1 and (rank, world_size) != (env_rank, env_world):
            raise ValueError(f"init_process_group: rank={rank}, world_size={world_size} disagree with the "
                             f"launcher's RANK={env_rank}, WORLD_SIZE={env_world}")
        if env_world is None or env_world == 1:
            _set_world(rank, world_size, host.strip("[]"), int(port))
            # Ranks started by hand run different commands (--rank 0, --rank 1); what they
            # share is the address they meet at, so that is the job's token.
            os.environ.setdefault("ONEFLOW_JOB_TOKEN", f"{method}/{world_size}")
    elif method.startswith("env://"):
        if env_world is not None:
            for name, given, have in (("rank", rank, env_rank), ("world_size", world_size, env_world)):
                if given is not None and given != have:
                    raise ValueError(f"init_process_group: {name}={given} disagrees with the environment's "
                                     f"{'RANK' if name == 'rank' else 'WORLD_SIZE'}={have}")
        elif world_size is not None or rank is not None:
            _set_world(rank if rank is not None else 0, world_size if world_size is not None else 1,
                       os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"))
    else:
        raise ValueError(f"init_process_group: init_method {method!r} is not supported, use "
                         "'env://' or 'tcp://host:port'")
    if timeout is not None and not flow._C.env_started():
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
        os.environ["ONEFLOW_TIMEOUT_SECONDS"] = str(max(1, int(seconds)))
    if _env.get_world_size() > 1:
        _env.init()
    _state.update(initialized=True, backend=backend)


def destroy_process_group(group=None):
    """Forgets the default group (the job itself ends when the process exits)."""
    if group is None:
        _state.update(initialized=False, backend=None)


def get_backend(group=None):
    return _state["backend"] or "cpu:gloo,cuda:nccl"


def _ranks(group, op):
    if group is None:
        return None
    if isinstance(group, ProcessGroup):
        return group.ranks
    if isinstance(group, (list, tuple)):
        return list(group)
    raise TypeError(f"{op}: group must be what new_group returned (or a list of ranks), got {type(group).__name__}")


def _outside(group, op):
    """True when this rank is not in group: PyTorch returns None there without communicating."""
    ranks = _ranks(group, op)
    return ranks is not None and _env.get_rank() not in ranks


def get_rank(group=None):
    """This process's rank in the job, or in group (-1 outside it)."""
    ranks = _ranks(group, "get_rank")
    me = _env.get_rank()
    if ranks is None:
        return me
    return ranks.index(me) if me in ranks else -1


def get_world_size(group=None):
    ranks = _ranks(group, "get_world_size")
    return _env.get_world_size() if ranks is None else len(ranks)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False):
    """A group of ranks (every rank when None) for the collectives' group= argument."""
    world = _env.get_world_size()
    ranks = list(range(world)) if ranks is None else sorted(int(r) for r in ranks)
    bad = [r for r in ranks if not 0 <= r < world]
    if bad or len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks {ranks} must be distinct and in [0, {world})")
    if backend is not None:
        _check_backend(backend, "new_group")
    return ProcessGroup(ranks)


def _global_rank(group, group_rank):
    ranks = _ranks(group, "collective")
    return group_rank if ranks is None else ranks[group_rank]


# ------------------------------------------------------------------------------ collectives
def barrier(group=None, async_op=False, device_ids=None):
    if _outside(group, "barrier"):
        return None
    _comm.barrier(_ranks(group, "barrier"))
    return _comm._Done(None) if async_op else None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    if _outside(group, "all_reduce"):
        return None
    return _comm.all_reduce(tensor, op, _ranks(group, "all_reduce"), async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """dst's tensor becomes the reduction (here every rank's does: a valid superset)."""
    if _outside(group, "reduce"):
        return None
    return _comm.all_reduce(tensor, op, _ranks(group, "reduce"), async_op)


def broadcast(tensor, src, group=None, async_op=False):
    if _outside(group, "broadcast"):
        return None
    return _comm.broadcast(tensor, src, _ranks(group, "broadcast"), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    if _outside(group, "all_gather"):
        return None
    return _comm.all_gather(tensor_list, tensor, _ranks(group, "all_gather"), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    if _outside(group, "all_gather_into_tensor"):
        return None
    return _comm.all_gather_into_tensor(output_tensor, input_tensor, _ranks(group, "all_gather_into_tensor"), async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """gather_list on rank dst receives every rank's tensor (an all-gather underneath)."""
    if _outside(group, "gather"):
        return None
    n = get_world_size(group)
    me = get_rank(group)
    if me == dst and (gather_list is None or len(gather_list) != n):
        raise ValueError(f"gather: rank {dst} needs a gather_list of {n} tensors, got "
                         f"{'None' if gather_list is None else len(gather_list)}")
    outs = gather_list if me == dst else [flow.empty_like(tensor) for _ in range(n)]
    return _comm.all_gather(outs, tensor, _ranks(group, "gather"), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    if _outside(group, "reduce_scatter"):
        return None
    return _comm.reduce_scatter(output, input_list, op, _ranks(group, "reduce_scatter"), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    if _outside(group, "reduce_scatter_tensor"):
        return None
    return _comm.reduce_scatter_tensor(output, input, op, _ranks(group, "reduce_scatter_tensor"), async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    if _outside(group, "all_to_all"):
        return None
    return _comm.all_to_all(output_tensor_list, input_tensor_list, _ranks(group, "all_to_all"), async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """tensor on each rank becomes scatter_list[its rank] of rank src."""
    if _outside(group, "scatter"):
        return None
    n, me = get_world_size(group), get_rank(group)
    if me == src:
        if scatter_list is None or len(scatter_list) != n:
            raise ValueError(f"scatter: rank {src} needs a scatter_list of {n} tensors, got "
                             f"{'None' if scatter_list is None else len(scatter_list)}")
        for r, t in enumerate(scatter_list):
            if r == me:
                with flow.no_grad():
                    tensor.copy_(t)
            else:
                _comm.send(t, _global_rank(group, r))
    else:
        _comm.recv(_global_rank(group, src), out=tensor)
    return _comm._Done(None) if async_op else None


def send(tensor, dst, group=None, tag=0):
    """Sends tensor to rank dst (of group); recv(tensor, src) on dst receives it."""
    _comm.send(tensor, _global_rank(group, dst), tag=tag)


def recv(tensor, src=None, group=None, tag=0):
    """Fills tensor with what rank src sent; returns src. src=None (any sender) is not supported."""
    if src is None:
        raise ValueError("recv: src=None (receive from any rank) is not supported, name the sending rank")
    _comm.recv(_global_rank(group, src), out=tensor, tag=tag)
    return src


# ------------------------------------------------------------------------- picklable objects
def _to_bytes_tensor(obj):
    import pickle

    data = pickle.dumps(obj)
    return flow._C.from_bytes(data, (len(data),), flow.uint8)


def all_gather_object(object_list, obj, group=None):
    """object_list[i] = rank i's obj (pickled, sent, unpickled)."""
    if _outside(group, "all_gather_object"):
        return None
    n = get_world_size(group)
    if len(object_list) != n:
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries for {n} ranks")
    ranks = _ranks(group, "all_gather_object")
    data = _to_bytes_tensor(obj)
    sizes = [flow.zeros(1, dtype=flow.int64) for _ in range(n)]
    _comm.all_gather(sizes, flow.tensor([data.shape[0]], dtype=flow.int64), ranks)
    outs = [flow.empty(int(s.item()), dtype=flow.uint8) for s in sizes]
    _comm.all_gather(outs, data, ranks)
    import pickle

    for i, t in enumerate(outs):
        object_list[i] = pickle.loads(t.numpy().tobytes())
    return None


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    if _outside(group, "gather_object"):
        return None
    everything = [None] * get_world_size(group)
    all_gather_object(everything, obj, group)
    if get_rank(group) == dst:
        if object_gather_list is None or len(object_gather_list) != len(everything):
            raise ValueError(f"gather_object: rank {dst} needs an object_gather_list of {len(everything)} entries")
        object_gather_list[:] = everything
    return None


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """object_list on every rank becomes rank src's (same length everywhere)."""
    if _outside(group, "broadcast_object_list"):
        return None
    ranks = _ranks(group, "broadcast_object_list")
    root = _global_rank(group, src)
    size = flow.zeros(1, dtype=flow.int64)
    if _env.get_rank() == root:
        data = _to_bytes_tensor(list(object_list))
        size = flow.tensor([data.shape[0]], dtype=flow.int64)
    _comm.broadcast(size, root, ranks)
    if _env.get_rank() != root:
        data = flow.empty(int(size.item()), dtype=flow.uint8)
    _comm.broadcast(data, root, ranks)
    if _env.get_rank() != root:
        import pickle

        received = pickle.loads(data.numpy().tobytes())
        if len(received) != len(object_list):
            raise ValueError(f"broadcast_object_list: rank {root} sent {len(received)} objects, this "
                             f"rank's object_list has {len(object_list)}")
        object_list[:] = received
    return None
