"""nn.Graph through CUDA graphs against its plain replay and eager, on a GPU: the training step
of bench_graph.py's MLP (3 linear layers, cross-entropy, SGD with momentum) on cuda:0.

    tools/python tools/bench/bench_cuda_graph.py [--quick] [--json OUT.json]

Three ways to run the same step, timed in interleaved windows (each window ends with a
synchronize, so the device's time counts): eager Python; nn.Graph replaying its plan (each
kernel launched from the host); nn.Graph with config.enable_cuda_graph(True) (one graph launch
per step). Two sizes: width 256, batch 32, and width 16, batch 4, where the kernels cost almost
nothing and the step is the launch path. Prints each graph's CUDA graph status (captured, or why
not) first. Needs a GPU (the stand-in device would time the host kernels).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median, print_table, save_results  # noqa: E402

import numpy as np  # noqa: E402

import oneflow as flow  # noqa: E402
import oneflow.nn as nn  # noqa: E402


def make(width, seed=0):
    flow.manual_seed(seed)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10)).to("cuda")
    return model, flow.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


class TrainGraph(nn.Graph):
    def __init__(self, model, opt, cuda_graph):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(opt)
        self.config.enable_cuda_graph(cuda_graph)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def time_interleaved(steps, x, y, iters, windows):
    for step in steps:
        for _ in range(5):
            step(x, y)
    flow.cuda.synchronize()
    times = [[] for _ in steps]
    for _ in range(windows):
        for k, step in enumerate(steps):
            t0 = time.perf_counter()
            for _ in range(iters):
                step(x, y)
            flow.cuda.synchronize()
            times[k].append((time.perf_counter() - t0) / iters)
    return [median(t) for t in times]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    if not flow.cuda.is_available() or flow.cuda.is_fake():
        sys.exit(f"bench_cuda_graph: needs a GPU ({flow.cuda.unavailable_reason() or 'fake'})")
    iters, windows = (20, 3) if args.quick else (100, 11)
    rng = np.random.RandomState(0)
    rows = []
    for width, batch in ((256, 32), (16, 4)):
        x = flow.tensor(rng.randn(batch, width).astype(np.float32), device="cuda")
        y = flow.tensor(rng.randint(0, 10, batch), device="cuda")
        model, opt = make(width)
        loss_fn = nn.CrossEntropyLoss()

        def eager_step(a, b, model=model, opt=opt, loss_fn=loss_fn):
            loss = loss_fn(model(a), b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        plain = TrainGraph(*make(width), cuda_graph=False)
        graphed = TrainGraph(*make(width), cuda_graph=True)
        for _ in range(3):  # compile, warm replay, capture
            plain(x, y)
            graphed(x, y)
        print(f"width {width} batch {batch}: {graphed._compiled[0].plan.cuda_graph_status()}",
              flush=True)
        eager_s, plain_s, graph_s = time_interleaved([eager_step, plain, graphed], x, y, iters,
                                                     windows)
        steps = graphed._compiled[0].plan.num_steps()
        name = f"MLP width {width} batch {batch} train step ({steps} plan steps)"
        rows.append(dict(metric=f"{name}: CUDA graph vs plain replay", unit="us",
                         ours=graph_s * 1e6, torch=plain_s * 1e6, higher_is_better=False,
                         ours_label="cuda graph", baseline="plain replay", target=None))
        rows.append(dict(metric=f"{name}: CUDA graph vs eager", unit="us", ours=graph_s * 1e6,
                         torch=eager_s * 1e6, higher_is_better=False, ours_label="cuda graph",
                         baseline="eager", target=dict(on="ratio", op=">=", value=2.0)))
    print_table(rows)
    if args.json:
        save_results(args.json, rows)


if __name__ == "__main__":
    main()
