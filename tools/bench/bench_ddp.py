"""2-rank data-parallel training throughput: our DistributedDataParallel against PyPI's PyTorch
DDP (gloo), plus the 1-rank and no-all-reduce figures that show what communication costs.

    tools/python tools/bench/bench_ddp.py [--quick] [--json OUT.json]

Models, batches and optimizers are bench_train.py's (MLP 784-512-512-10 with SGD, LeNet with
Adam; batch 64 per rank; one thread per rank; the same weights from numpy on both sides). Ours
runs under our launcher, PyTorch under torchrun in common.torch_python()'s venv; the two runs
alternate, 3 of each (2 with --quick), so load drift hits both alike, and each figure is the
median over the runs of each run's median window. Per case and world size:
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
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (free_port, median, pin_single_thread, print_table, run_workers,  # noqa: E402
                    save_results, torch_env, torch_python)


def worker(framework, out_path, quick, ddp_only):
    """One framework's side on this rank (ours under our launcher, PyTorch under torchrun in
    the venv of common.torch_python()); rank 0 writes the medians to out_path."""
    pin_single_thread()
    import numpy as np

    from bench_train import BATCH, CASES, NUM_BATCHES, Trainer

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if framework == "torch":
        import torch as lib
        import torch.distributed as dist

        lib.set_num_threads(1)
        if world > 1:
            dist.init_process_group("gloo", rank=rank, world_size=world)

        def barrier():
            if world > 1:
                dist.barrier()

        def wrap(model):
            return lib.nn.parallel.DistributedDataParallel(model)
    else:
        import oneflow as lib
        from oneflow.nn.parallel import DistributedDataParallel as FlowDDP

        if world > 1:
            lib.env.init()

        def barrier():
            if world > 1:
                lib.comm.barrier()

        wrap = FlowDDP

    class GlobalTrainer(Trainer):
        def step(self):
            x, y = self.batches[self.i % len(self.batches)]
            self.i += 1
            x = x.to_global(placement=self.placement, sbp=lib.sbp.split(0))
            y = y.to_global(placement=self.placement, sbp=lib.sbp.split(0))
            self.opt.zero_grad(set_to_none=True)
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            self.opt.step()
            self.last_loss = loss

    warmup, windows = (5, 5) if quick else (10, 9)
    results = {}
    for case in ("mlp", "lenet"):
        build, in_shape, _ = CASES[case]
        steps = {"mlp": 30, "lenet": 20}[case] // (2 if quick else 1)
        rng = np.random.default_rng(rank)  # each rank its own data
        batches = [(rng.standard_normal((BATCH,) + in_shape, dtype=np.float32),
                    rng.integers(0, 10, size=BATCH, dtype=np.int64)) for _ in range(NUM_BATCHES)]
        rs = np.random.RandomState(0)  # the same weights on every rank and in both frameworks
        init = {k: (rs.standard_normal(tuple(v.shape)) * 0.05).astype(np.float32)
                for k, v in build(lib.nn).state_dict().items()}
        trainers = {}
        if not ddp_only:
            trainers["local"] = Trainer(lib, case, init, batches)
        if world > 1:
            t = Trainer(lib, case, init, batches)
            t.model = wrap(t.model)
            t.opt = CASES[case][2](lib, t.model.parameters())
            trainers["ddp"] = t
        if world > 1 and not ddp_only and framework == "ours":
            # The OneFlow global-tensor tutorial: parameters broadcast, each rank's batch
            # becomes its split(0) shard of the global batch every step.
            t = GlobalTrainer(lib, case, init, batches)
            P = lib.placement("cpu", ranks=list(range(world)))
            t.model.to_global(placement=P, sbp=lib.sbp.broadcast)
            t.opt = CASES[case][2](lib, t.model.parameters())
            t.placement = P
            trainers["global"] = t
        for t in trainers.values():
            barrier()
            t.timed_window(warmup)
        ours_ddp = trainers.get("ddp") if framework == "ours" else None
        before = ours_ddp.model.comm_stats() if ours_ddp else None
        rates = {key: [] for key in trainers}
        for _ in range(windows):
            for key, t in trainers.items():
                barrier()
                rates[key].append(world * steps * BATCH / t.timed_window(steps))
        for mode, r in rates.items():
            results[f"{case}/{mode}/{framework}"] = median(r)
        if ours_ddp:
            after = ours_ddp.model.comm_stats()
            n = after["reductions"] - before["reductions"]
            results[f"{case}/exposed_ms"] = 1e3 * (after["exposed_seconds"] - before["exposed_seconds"]) / n
            results[f"{case}/comm_ms"] = 1e3 * (after["comm_seconds"] - before["comm_seconds"]) / n
            results[f"{case}/buckets"] = len(ours_ddp.model.bucket_indices())
            results[f"{case}/overlap"] = after["overlap"]
    results["version"] = lib.__version__
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)
    if world > 1 and framework == "torch":
        dist.destroy_process_group()


def run_torch(nproc, quick, ddp_only):
    """The PyTorch side on nproc ranks under torchrun in the venv; rank 0's results."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [torch_python(), "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
               "--master_port", str(free_port()), os.path.abspath(__file__), "--worker",
               "--framework", "torch", "--out", out, *(["--quick"] if quick else []),
               *(["--ddp-only"] if ddp_only else [])]
        subprocess.run(cmd, check=True, env=torch_env(OMP_NUM_THREADS="1"))
        with open(out) as f:
            return json.load(f)


def run(nproc, quick, repeats, ddp_only=False, env=None):
    """Both frameworks' results on nproc ranks: `repeats` runs of each, ours and PyTorch's
    alternating (so load drift hits both), each figure the median over the runs."""
    runs = []
    for _ in range(repeats):
        runs.append(run_workers(__file__, nproc, "--framework", "ours",
                                *(["--quick"] if quick else []),
                                *(["--ddp-only"] if ddp_only else []), env=env))
        runs.append(run_torch(nproc, quick, ddp_only))
    merged = {}
    for key in sorted(set().union(*runs)):
        values = [r[key] for r in runs if key in r]
        merged[key] = (median(values) if isinstance(values[0], float) and key != "version"
                       else values[0])
    merged["torch_version"] = runs[1]["version"]
    return merged


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="write result rows here (for run_all.sh)")
    p.add_argument("--worker", action="store_true")
    p.add_argument("--out")
    p.add_argument("--framework", choices=("ours", "torch"))
    p.add_argument("--ddp-only", action="store_true", help="(worker) time the two DDPs only")
    args = p.parse_args()
    if args.worker:
        return worker(args.framework, args.out, args.quick, args.ddp_only)
    repeats = 2 if args.quick else 3
    two = run(2, args.quick, repeats)
    gloo = run(2, args.quick, repeats, ddp_only=True, env={"ONEFLOW_SHM": "0"})
    one = run(1, args.quick, repeats)
    print(f"oneflow against torch {two['torch_version']} (PyPI, torchrun in its venv); "
          f"{repeats} runs of each, alternating; medians")
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
    for case, label, target in (("mlp", "MLP", 1.5), ("lenet", "LeNet", 1.5)):  # issue 44
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
