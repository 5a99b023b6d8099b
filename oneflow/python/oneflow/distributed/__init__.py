"""oneflow.distributed: starting multi-process jobs.

    python3 -m oneflow.distributed.launch --nproc_per_node 2 train.py --lr 0.1

The launcher (oneflow.distributed.launch) starts one process per local rank with torchrun's
environment variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...), which
oneflow.env.get_rank() and friends read. Nothing heavy is imported here.
"""
