"""The process world: who this process is in the job (set by the launcher).

    flow.env.get_rank()        # 0 without a launcher
    flow.env.get_world_size()  # 1 without a launcher

The values come from torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, ...), else SLURM's,
else Open MPI's; reading them needs no network. The job itself (control plane, heartbeat,
communicators) starts on the first collective, or on `flow.env.init()`.
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
