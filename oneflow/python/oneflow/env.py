"""The process world: rank and world size of this process (torchrun's variables).

    flow.env.get_rank()        # 0 without a launcher
    flow.env.get_world_size()  # 1 without a launcher
"""

import os


def _int_env(*names, default):
    for n in names:
        v = os.environ.get(n)
        if v is not None and v != "":
            return int(v)
    return default


def get_rank():
    return _int_env("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", default=0)


def get_world_size():
    return _int_env("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", default=1)


def get_local_rank():
    return _int_env("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", default=0)


def get_local_world_size():
    return _int_env("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", default=1)


def get_node_size():
    return max(1, get_world_size() // max(1, get_local_world_size()))
