"""nn.Graph against eager: the training step time of a small, overhead-bound MLP (width 256,
batch 32, 3 layers, SGD with momentum) on CPU, one thread.

    tools/python tools/bench/bench_graph.py [--quick] [--json OUT.json]

Eager: forward, loss, zero_grad, backward, optimizer step in Python, as a training loop does.
Graph: the same model in an nn.Graph whose build does forward, loss and backward with the
optimizer added; after the compile each call replays the plan in C++. Per step, the median of
several timed windows. The per-step host overhead is the step time minus the time of the same
work in kernels alone, estimated by the graph's replay at batch 1 (where kernels cost almost
nothing): eager's and the graph's overhead are both reported.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median, pin_single_thread, print_table, save_results  # noqa: E402

pin_single_thread()

import numpy as np  # noqa: E402

import oneflow as flow  # noqa: E402
import oneflow.nn as nn  # noqa: E402


def make(width, seed=0):
    flow.manual_seed(seed)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10))
    return model, flow.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


class TrainGraph(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def time_steps(step, x, y, iters, windows):
    for _ in range(5):
        step(x, y)
    times = []
    for _ in range(windows):
        t0 = time.perf_counter()
        for _ in range(iters):
            step(x, y)
        times.append((time.perf_counter() - t0) / iters)
    return median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    iters, windows = (20, 3) if args.quick else (100, 7)
    width, batch = 256, 32
    rng = np.random.RandomState(0)

    def data(b):
        return (flow.tensor(rng.randn(b, width).astype(np.float32)),
                flow.tensor(rng.randint(0, 10, b)))

    model, opt = make(width)
    loss_fn = nn.CrossEntropyLoss()

    def eager_step(x, y):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    gmodel, gopt = make(width)
    graph = TrainGraph(gmodel, gopt)
    x, y = data(batch)
    eager_s = time_steps(eager_step, x, y, iters, windows)
    graph_s = time_steps(graph, x, y, iters, windows)
    x1, y1 = data(1)
    eager1_s = time_steps(eager_step, x1, y1, iters, windows)
    graph1_s = time_steps(graph, x1, y1, iters, windows)
    steps = graph._compiled[0].plan.num_steps()
    rows = [
        dict(metric=f"MLP {width} batch {batch} train step", unit="us", ours=graph_s * 1e6,
             torch=eager_s * 1e6, higher_is_better=False, ours_label="graph",
             baseline="eager", target=dict(on="ratio", op=">=", value=1.3)),
        dict(metric=f"MLP {width} batch 1 train step (host overhead)", unit="us",
             ours=graph1_s * 1e6, torch=eager1_s * 1e6, higher_is_better=False,
             ours_label="graph", baseline="eager", target=None),
        dict(metric=f"host time per op call at batch 1 ({steps} plan steps)", unit="us",
             ours=graph1_s * 1e6 / steps, torch=eager1_s * 1e6 / steps, higher_is_better=False,
             ours_label="graph", baseline="eager", target=None),
    ]
    print_table(rows)
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
