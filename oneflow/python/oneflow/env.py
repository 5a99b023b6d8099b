"""The process world: who this process is in the job (set by the launcher).

    flow.env.get_rank()        # 0 without a launcher
    flow.env.get_world_size()  # 1 without a launcher

The values come from torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, ...), else SLURM's,
else Open MPI's; reading them needs no network. A rank of a job of several processes joins it
(control plane, heartbeat) when it imports oneflow, as OneFlow does: rank 0 must serve the
control plane even when its script never calls a collective (a placement may leave it out),
and every rank meets the others at exit. Communicators start on their first collective.
"""

import atexit
import sys

import oneflow._oneflow_internal as _C


def _info():
    return _C.world_info()


def get_rank():
    return _info()["rank"]


def get_world_size():
    return _info()["world_size"]


def get_local_rank():
    return _info()["local_rank"]


def get_local_world_size():
    return _info()["local_world_size"]


def get_node_size():
    return _info()["node_size"]


def is_multi_process():
    return get_world_size() > 1


def _install_exit_hooks():
    # At import, before any rank joins: a job started by any path (flow.comm, to_global, DDP, a
    # C++ call) must tell the other ranks when this one fails, and meet them at a clean exit.
    # Both calls do nothing in a process that never joined a job.
    atexit.register(_C.env_shutdown)
    previous = sys.excepthook

    def _abort_then_report(kind, value, tb):
        # Tell the other ranks first, so they stop instead of waiting in a collective.
        _C.env_abort("%s: %s" % (kind.__name__, value))
        previous(kind, value, tb)

    sys.excepthook = _abort_then_report


_install_exit_hooks()


def init():
    """Joins the job now: rank 0 serves the control plane, the others connect (idempotent)."""
    _C.env_init()


def _is_a_rank():
    """Whether this process is one of the job's ranks: not the launcher (it reads the same
    variables under Slurm or mpirun), not a process that multiprocessing started."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return False
    argv = getattr(sys, "orig_argv", sys.argv)
    return not any(a.startswith("oneflow.distributed.launch") for a in argv[1:3])


if is_multi_process() and _is_a_rank():
    init()
