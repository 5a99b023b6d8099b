"""2-rank data-parallel training throughput: our DistributedDataParallel against PyTorch DDP
(gloo), side by side in one run, plus the 1-rank and no-all-reduce figures that show what
communication costs.

    tools/python tools/bench/bench_ddp.py [--quick] [--json OUT.json]

Models, batches and optimizers are bench_train.py's (MLP 784-512-512-10 with SGD, LeNet with
Adam; batch 64 per rank; one thread per rank). Both frameworks live in the same worker
processes under our launcher (torch's gloo rendezvous on a second port), and their timed
windows alternate, so load drift hits both alike. Per case and world size:
  ddp:   the model wrapped in each framework's DDP (gradients averaged every step)
  local: the same model without DDP on each rank (compute only: the ceiling for ddp)
  global (ours): the OneFlow global-tensor tutorial, parameters broadcast and each rank's
         batch its split(0) shard, no DDP (the gradient all-reduce comes from boxing)
  1 rank: plain training in one process (the baseline of the scaling figure)
  ddp, ONEFLOW_SHM=0: a second 2-rank run of both DDPs where ours all-reduces over Gloo's
         loopback TCP, PyTorch's transport: ours over Gloo against PyTorch is the framework
         difference, ours through shared memory against ours over Gloo the transport one
samples/s counts every rank's samples. For ours, the reducer reports the time backward's end
waited for all-reduces still running: communication not hidden behind backward (all of it
where the reducer runs them inline, on a machine without a core to spare for overlap).
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import free_port, median, pin_single_thread, print_table, run_workers, save_results  # noqa: E402,E501


def worker(out_path, torch_port, quick, ddp_only):
    pin_single_thread()
    import numpy as np
    import torch
    import torch.distributed as dist

    import oneflow as flow
    from bench_train import BATCH, CASES, NUM_BATCHES, Trainer
    from oneflow.nn.parallel import DistributedDataParallel as FlowDDP

    class GlobalTrainer(Trainer):
        def step(self):
            x, y = self.batches[self.i % len(self.batches)]
            self.i += 1
            x = x.to_global(placement=self.placement, sbp=flow.sbp.split(0))
            y = y.to_global(placement=self.placement, sbp=flow.sbp.split(0))
            self.opt.zero_grad(set_to_none=True)
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            self.opt.step()
            self.last_loss = loss

    torch.set_num_threads(1)
    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{torch_port}",
                                rank=rank, world_size=world)
        flow.env.init()

    def barrier(lib):
        if world == 1:
            return
        flow.comm.barrier() if lib is flow else dist.barrier()

    warmup, windows = (5, 5) if quick else (10, 9)
    results = {}
    for case in ("mlp", "lenet"):
        build, in_shape, _ = CASES[case]
        steps = {"mlp": 30, "lenet": 20}[case] // (2 if quick else 1)
        rng = np.random.default_rng(rank)  # each rank its own data
        batches = [(rng.standard_normal((BATCH,) + in_shape, dtype=np.float32),
                    rng.integers(0, 10, size=BATCH, dtype=np.int64)) for _ in range(NUM_BATCHES)]
        torch.manual_seed(0)
        init = {k: v.detach().numpy().copy() for k, v in build(torch.nn).state_dict().items()}
        trainers = {}
        for name, lib in (("ours", flow), ("torch", torch)):
            if not ddp_only:
                trainers[(name, "local")] = (lib, Trainer(lib, case, init, batches))
            if world > 1:
                t = Trainer(lib, case, init, batches)
                t.model = FlowDDP(t.model) if lib is flow else torch.nn.parallel.DistributedDataParallel(t.model)
                t.opt = CASES[case][2](lib, t.model.parameters())
                trainers[(name, "ddp")] = (lib, t)
        if world > 1 and not ddp_only:
            # The OneFlow global-tensor tutorial: parameters broadcast, each rank's batch
            # becomes its split(0) shard of the global batch every step.
            t = GlobalTrainer(flow, case, init, batches)
            P = flow.placement("cpu", ranks=list(range(world)))
            t.model.to_global(placement=P, sbp=flow.sbp.broadcast)
            t.opt = CASES[case][2](flow, t.model.parameters())
            t.placement = P
            trainers[("ours", "global")] = (flow, t)
        for lib, t in trainers.values():
            barrier(lib)
            t.timed_window(warmup)
        ours_ddp = trainers.get(("ours", "ddp"), (None, None))[1]
        before = ours_ddp.model.comm_stats() if ours_ddp else None
        rates = {key: [] for key in trainers}
        for _ in range(windows):
            for key, (lib, t) in trainers.items():
                barrier(lib)
                rates[key].append(world * steps * BATCH / t.timed_window(steps))
        for (name, mode), r in rates.items():
            results[f"{case}/{mode}/{name}"] = median(r)
        if ours_ddp:
            after = ours_ddp.model.comm_stats()
            n = after["reductions"] - before["reductions"]
            results[f"{case}/exposed_ms"] = 1e3 * (after["exposed_seconds"] - before["exposed_seconds"]) / n
            results[f"{case}/comm_ms"] = 1e3 * (after["comm_seconds"] - before["comm_seconds"]) / n
            results[f"{case}/buckets"] = len(ours_ddp.model.bucket_indices())
            results[f"{case}/overlap"] = after["overlap"]
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)
    if world > 1:
        dist.destroy_process_group()


def run(nproc, quick, ddp_only=False, env=None):
    return run_workers(__file__, nproc, "--torch-port", str(free_port()),
                       *(["--quick"] if quick else []), *(["--ddp-only"] if ddp_only else []),
                       env=env)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="write result rows here (for run_all.sh)")
    p.add_argument("--worker", action="store_true")
    p.add_argument("--out")
    p.add_argument("--torch-port", type=int)
    p.add_argument("--ddp-only", action="store_true", help="(worker) time the two DDPs only")
    args = p.parse_args()
    if args.worker:
        return worker(args.out, args.torch_port, args.quick, args.ddp_only)
    two = run(2, args.quick)
    gloo = run(2, args.quick, ddp_only=True, env={"ONEFLOW_SHM": "0"})
    one = run(1, args.quick)
    print(f"{'case':6} {'':6} {'ddp 2 ranks':>12} {'local 2 ranks':>14} {'1 rank':>8} {'scaling':>8}"
          f" {'global 2 ranks':>15}")
    for case in ("mlp", "lenet"):
        for name in ("ours", "torch"):
            d, l, s = two[f"{case}/ddp/{name}"], two[f"{case}/local/{name}"], one[f"{case}/local/{name}"]
            g = f"{two[f'{case}/global/ours']:15.0f}" if name == "ours" else ""
            print(f"{case:6} {name:6} {d:12.0f} {l:14.0f} {s:8.0f} {d / s:7.2f}x {g}")
        step_ms = 1e3 * 2 * 64 / two[f"{case}/ddp/ours"]
        mode = ("on the communication thread" if two[f"{case}/overlap"]
                else "inline in backward (no core to spare for overlap)")
        print(f"{case:6} ours: {two[f'{case}/buckets']} bucket(s) reduced {mode}; all-reduce {two[f'{case}/comm_ms']:.2f} ms "
              f"per step, of which {two[f'{case}/exposed_ms']:.2f} ms not hidden behind backward "
              f"({two[f'{case}/exposed_ms'] / step_ms:.0%} of a {step_ms:.2f} ms step)")
        print(f"{case:6} ONEFLOW_SHM=0 (both over loopback TCP): ddp 2 ranks ours {gloo[f'{case}/ddp/ours']:.0f}, "
              f"torch {gloo[f'{case}/ddp/torch']:.0f}; ours all-reduce {gloo[f'{case}/comm_ms']:.2f} ms per step")
    rows = []
    shm_vs_torch = {"ours_label": "ours, shm", "baseline": "PyTorch, gloo TCP"}
    for case, label, target in (("mlp", "MLP", 1.8), ("lenet", "LeNet", 1.2)):
        rows.append({"metric": f"DDP {label} 2 ranks", "unit": "samples/s",
                     "ours": two[f"{case}/ddp/ours"], "torch": two[f"{case}/ddp/torch"], **shm_vs_torch,
                     "higher_is_better": True, "target": {"op": ">=", "value": target, "on": "ratio"}})
    for case, label in (("mlp", "MLP"), ("lenet", "LeNet")):
        rows.append({"metric": f"global-tensor DP {label} 2 ranks vs PyTorch DDP", "unit": "samples/s",
                     "ours": two[f"{case}/global/ours"], "torch": two[f"{case}/ddp/torch"], **shm_vs_torch,
                     "higher_is_better": True, "target": {"op": ">=", "value": 1.0, "on": "ratio"}})
    for case, label in (("mlp", "MLP"), ("lenet", "LeNet")):  # the same transport on both sides
        rows.append({"metric": f"DDP {label} 2 ranks", "unit": "samples/s",
                     "ours": gloo[f"{case}/ddp/ours"], "torch": gloo[f"{case}/ddp/torch"],
                     "ours_label": "ours, Gloo TCP", "baseline": "PyTorch, gloo TCP",
                     "higher_is_better": True, "target": None})
    for case, label in (("mlp", "MLP"), ("lenet", "LeNet")):  # the same framework on both sides
        rows.append({"metric": f"DDP {label} 2 ranks", "unit": "samples/s",
                     "ours": two[f"{case}/ddp/ours"], "torch": gloo[f"{case}/ddp/ours"],
                     "ours_label": "ours, shm", "baseline": "ours, Gloo TCP",
                     "higher_is_better": True, "target": None})
    rows.append({"metric": "DDP MLP 2-rank/1-rank scaling", "unit": "x",
                 "ours": two["mlp/ddp/ours"] / one["mlp/local/ours"],
                 "torch": two["mlp/ddp/torch"] / one["mlp/local/torch"],
                 "higher_is_better": True, "target": {"op": ">=", "value": 1.7, "on": "ours"}})
    print()
    print_table(rows)
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
