"""Two ranks that disagree about a collective, run by tests/python/test_robustness.py through
the launcher: `ranks_disagree.py CASE`.

refusals: calls the members disagree on (count, dtype, root's count, operation, to_global's sbp
  and placement), one after the other; each must be refused on both ranks with one line, printed
  as "rank R refused <name>: <line>", and the group still works afterwards ("rank R ok").
one_rank / recv_without_send / elsewhere: a rank waits for a member that is elsewhere (at exit,
  or in another call); the job must end within seconds naming what each rank is doing.
never_set_up: rank 1 makes no collective; rank 0 waits in the group's set-up.
pipeline (3 ranks): waits in a chain of recvs are not a disagreement; the job must succeed.
busy: rank 1 computes past rank 0's timeout; rank 0's timeout names what rank 1 posted."""

import sys

import oneflow as flow

rank = flow.env.get_rank()
case = sys.argv[1]


def refusals():
    p = flow.placement("cpu", [0, 1])
    return {
        "count": lambda: flow.comm.all_reduce(flow.ones(4 if rank == 0 else 1004)),
        "dtype": lambda: flow.comm.all_reduce(
            flow.ones(4, dtype=flow.float32 if rank == 0 else flow.float64)),
        "broadcast": lambda: flow.comm.broadcast(flow.ones(8 if rank == 0 else 2), src=0),
        "op": lambda: (flow.comm.all_reduce(flow.ones(4)) if rank == 0
                       else flow.comm.broadcast(flow.ones(4), src=0)),
        "all_gather": lambda: flow.comm.all_gather(
            [flow.zeros(3 + 2 * rank) for _ in range(2)], flow.ones(3 + 2 * rank)),
        "sbp": lambda: flow.ones(4, 2).to_global(
            placement=p, sbp=flow.sbp.split(0) if rank == 0 else flow.sbp.broadcast),
        "placement": lambda: flow.ones(4).to_global(
            placement=flow.placement("cpu", [0, 1] if rank == 0 else [1]),
            sbp=flow.sbp.broadcast),
    }


if case == "refusals":
    for name, call in refusals().items():
        try:
            call()
            print(f"rank {rank} accepted {name}", flush=True)
        except Exception as e:  # noqa: BLE001 - the test reads the line
            print(f"rank {rank} refused {name}: {e}", flush=True)
    x = flow.ones(3) * (rank + 1)
    flow.comm.all_reduce(x)
    print(f"rank {rank} ok {x.tolist()}", flush=True)
elif case == "one_rank":
    flow.comm.barrier()  # the group's communicator is set up; then rank 1 goes to exit
    if rank == 0:
        flow.comm.all_reduce(flow.ones(4))
elif case == "recv_without_send":
    flow.comm.barrier()
    if rank == 1:
        flow.comm.recv(0, shape=(4,), dtype=flow.float32)
elif case == "elsewhere":
    flow.comm.barrier()
    if rank == 0:
        flow.comm.all_reduce(flow.ones(4))
    else:
        flow.comm.recv(0, shape=(4,), dtype=flow.float32)
elif case == "never_set_up":
    if rank == 0:  # rank 1 never makes a collective: rank 0 waits in the group's set-up
        flow.comm.all_reduce(flow.ones(4))
elif case == "pipeline":
    # 3 ranks: not a disagreement. Rank 2 waits in a recv from 1, rank 1 in a recv from 0, while
    # rank 0 computes for 5 s: the waits must not end the job.
    import time

    flow.comm.barrier()
    if rank == 0:
        time.sleep(5)
        flow.comm.send(flow.ones(4), 1)
    elif rank == 1:
        x = flow.comm.recv(0)
        flow.comm.send(x * 2, 2)
    else:
        print(f"rank 2 got {flow.comm.recv(1).tolist()}", flush=True)
elif case == "busy":
    flow.comm.barrier()
    if rank == 0:
        flow.comm.all_reduce(flow.ones(4))
    else:
        import time

        time.sleep(12)
else:
    sys.exit(f"unknown case {case}")
print(f"rank {rank} returned", flush=True)
