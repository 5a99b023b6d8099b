"""Large tensors on 4 ranks: each rank's peak memory against its shard, and the time, for
creation (randn with a placement), a sharded-checkpoint load into other layouts (split, and
broadcast: read in disjoint parts, gathered), and the layout changes B -> S, S -> B, S -> S',
P -> S, P -> B, a 2x2 mesh's (S(0), S(1)) -> (S(1), S(0)) and a placement change of one tensor.

    tools/python tools/bench/bench_bigmodel.py [--mb 1024] [--nproc 4]

Starts the launcher itself. Peak: oneflow.cpu.max_memory_allocated() since just before the
step, minus what was held then; resident: the rise of the peak resident set (VmHWM, which also
sees memory oneflow.cpu does not count: numpy, shared-memory segments; pages the allocator
reuses do not rise); "shard": the bytes of this rank's piece of the result (the whole tensor
for B). PyTorch's DTensor is not compared: Debian's torch 1.13 has no public
DTensor (torch.distributed._tensor came with 2.0).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024, help="logical size of the tensor (MiB)")
    ap.add_argument("--nproc", type=int, default=4)
    args = ap.parse_args()
    if "RANK" not in os.environ:
        with tempfile.TemporaryDirectory() as d:
            cmd = [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node",
                   str(args.nproc), os.path.abspath(__file__), "--mb", str(args.mb),
                   "--nproc", str(args.nproc)]
            env = dict(os.environ, BENCH_BIGMODEL_DIR=d)
            sys.exit(subprocess.call(cmd, env=env))
    worker(args)


def worker(args):
    import oneflow as flow

    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    S, B, P = flow.sbp.split, flow.sbp.broadcast, flow.sbp.partial_sum
    pl = flow.placement("cpu", ranks=list(range(world)))
    half = flow.placement("cpu", ranks=list(range(world // 2)))
    n = int((args.mb * (1 << 20) // 4) ** 0.5) // world * world
    mb = 1 << 20
    rows = []

    def step(name, fn):
        flow.comm.barrier()
        flow.cpu.reset_peak_memory_stats()
        base = flow.cpu.memory_allocated()
        rss_base = _reset_resident_peak()
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        peak = flow.cpu.max_memory_allocated() - base
        resident = _resident("VmHWM") - rss_base
        shard = out.to_local().numel() * out.element_size() if out.is_global else 0
        rows.append((name, peak / mb, resident / mb, shard / mb, dt))
        return out

    x = step("create randn S(0)", lambda: flow.randn(n, n, placement=pl, sbp=S(0)))
    b = step("S(0) -> B", lambda: x.to_global(sbp=B))
    s = step("B -> S(0)", lambda: b.to_global(sbp=S(0)))
    del s
    s = step("B -> S(1)", lambda: b.to_global(sbp=S(1)))
    del b
    step("S(1) -> B", lambda: s.to_global(sbp=B))
    del s
    s = step("S(0) -> S(1)", lambda: x.to_global(sbp=S(1)))
    del s
    part = step("create zeros P", lambda: flow.zeros(n, n, placement=pl, sbp=P))
    step("P -> S(0)", lambda: part.to_global(sbp=S(0)))
    step("P -> S(1)", lambda: part.to_global(sbp=S(1)))
    step("P -> B", lambda: part.to_global(sbp=B))
    del part
    if world == 4:
        mesh = flow.placement("cpu", ranks=[[0, 1], [2, 3]])
        m = x.to_global(placement=mesh, sbp=(S(0), S(1)))
        step("2x2 (S(0),S(1)) -> (S(1),S(0))", lambda: m.to_global(sbp=(S(1), S(0))))
        del m
    step(f"S(0) -> S(1) on {world // 2} ranks", lambda: x.to_global(placement=half, sbp=S(1)))
    path = os.path.join(os.environ["BENCH_BIGMODEL_DIR"], "ckpt")
    step("save sharded S(0)", lambda: (flow.save({"w": x}, path, sharded=True), x)[1])
    del x
    target = flow.empty(n, n, placement=half, sbp=S(1))
    def load():
        from oneflow._sharded_checkpoint import materialize_like

        return materialize_like(flow.load(path)["w"], target)
    step(f"load into S(1) on {world // 2} ranks", load)
    target = flow.empty(n, n, placement=half, sbp=B)
    step(f"load into B on {world // 2} ranks", load)
    for name, peak, resident, shard, dt in rows:
        print(f"rank {rank}: {name:31s} peak {peak:7.1f} MiB (resident {resident:7.1f})  shard "
              f"{shard:7.1f} MiB  ({peak / shard if shard else float('nan'):.2f} x)  {dt:7.3f} s",
              flush=True)
    if rank == 0:
        print(f"tensor ({n}, {n}) float32 = {n * n * 4 / mb:.0f} MiB logical, {world} ranks; "
              "PyTorch DTensor: not in Debian's torch 1.13", flush=True)


def _resident(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_resident_peak():
    """Resets VmHWM (the peak resident set, Linux) and returns the resident set now."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _resident("VmRSS")


if __name__ == "__main__":
    main()
