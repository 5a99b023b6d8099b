"""nn.Graph against eager: the training step time of MLPs (3 linear layers, cross-entropy, SGD
with momentum) on CPU, one thread.

    tools/python tools/bench/bench_graph.py [--quick] [--json OUT.json]

Eager: forward, loss, zero_grad, backward, optimizer step in Python, as a training loop does.
Graph: the same model in an nn.Graph whose build does forward, loss and backward with the
optimizer added and config.allow_fuse_model_update_ops(True) (OneFlow's switch for fused
updates, as its performance configurations set it); after the compile each call replays the
plan in C++. Per step, the median of
timed windows, eager's and the graph's interleaved. Two sizes: the issue's width 256, batch 32 (at this size the kernels
take most of the step), and width 16, batch 4, where kernels cost almost nothing, so the step
time is the per-step host overhead; divided by the plan's step count it is the host time per
op call. Last, examples/gpt.py's model at its default small config (--parallel none: 2 blocks,
4 heads, n_embd 64, batch 8 x 32 tokens, AdamW) on a batch of its fortune data (random tokens
over a vocabulary of the same size without Debian's fortunes): eager's step as its Trainer
runs it against its Trainer's nn.Graph.
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
        self.config.allow_fuse_model_update_ops(True)  # OneFlow's switch for fused updates

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def time_interleaved(steps, x, y, iters, windows):
    """Median seconds per call of each step function, their timed windows interleaved (so
    that load from other processes on a shared machine falls on all of them alike)."""
    for step in steps:
        for _ in range(5):
            step(x, y)
    times = [[] for _ in steps]
    for _ in range(windows):
        for k, step in enumerate(steps):
            t0 = time.perf_counter()
            for _ in range(iters):
                step(x, y)
            times[k].append((time.perf_counter() - t0) / iters)
    return [median(t) for t in times]


def gpt_row(iters, windows):
    """examples/gpt.py's Trainer, eager against its nn.Graph, on the same batch."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import gpt

    args = gpt.parser().parse_args([])  # the defaults: --parallel none, the small config
    if os.path.isdir(args.data):  # its training data, as examples/gpt.py reads it
        data = gpt.CharData(gpt.read_fortunes(args.data), args.vocab_multiple)
        vocab = data.vocab_size
        xb, yb = data.batch("train", args.batch_size, args.block_size, args.seed)
    else:  # random tokens over a vocabulary of the same size
        vocab = 120
        rs = np.random.RandomState(0)
        xb, yb = (rs.randint(0, vocab, (args.batch_size, args.block_size)) for _ in range(2))
    trainers = []
    for graph in (False, True):
        model, layout = gpt.build(args, vocab, 1)
        trainer = gpt.Trainer(model, layout, lr=args.lr)
        if graph:
            trainer.use_graph()
        trainers.append(trainer)
    x, y = flow.tensor(xb), flow.tensor(yb)
    eager, graphed = trainers

    def eager_step(a, b):
        eager.model.train()
        eager.opt.zero_grad()
        _, loss = eager.model(a, b)
        loss.backward()
        eager.opt.step()
        return loss

    def graph_step(a, b):
        graphed.model.train()
        return graphed.graph(a, b)

    graph_step(x, y)  # compiles
    eager_s, graph_s = time_interleaved([eager_step, graph_step], x, y, max(iters // 5, 4),
                                        windows)
    tokens = args.batch_size * args.block_size
    return dict(metric=f"GPT (examples/gpt.py, {args.n_layer} blocks, n_embd {args.n_embd}, "
                f"{tokens} tokens) train step", unit="us", ours=graph_s * 1e6,
                torch=eager_s * 1e6, higher_is_better=False, ours_label="graph",
                baseline="eager", target=dict(on="ratio", op=">=", value=1.0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    iters, windows = (20, 3) if args.quick else (50, 15)
    rng = np.random.RandomState(0)

    def data(width, b):
        return (flow.tensor(rng.randn(b, width).astype(np.float32)),
                flow.tensor(rng.randint(0, 10, b)))

    rows = []
    for width, batch in ((256, 32), (16, 4)):
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
        x, y = data(width, batch)
        graph(x, y)  # compiles
        plan = graph._compiled[0].plan
        eager_s, graph_s, replay_s = time_interleaved(
            [eager_step, graph, lambda a, b: plan.replay([a, b])], x, y, iters, windows)
        small = width == 16
        rows.append(dict(
            metric=f"MLP {width} batch {batch} train step" + (" (host overhead)" if small else ""),
            unit="us", ours=graph_s * 1e6, torch=eager_s * 1e6, higher_is_better=False,
            ours_label="graph", baseline="eager",
            target=None if small else dict(on="ratio", op=">=", value=1.3)))
        rows.append(dict(
            metric=f"  of which the C++ replay alone ({plan.num_steps()} steps)", unit="us",
            ours=replay_s * 1e6, torch=eager_s * 1e6, higher_is_better=False,
            ours_label="graph", baseline="eager", target=None))
        if small:
            rows.append(dict(
                metric="host time per op call", unit="us", ours=graph_s * 1e6 / plan.num_steps(),
                torch=eager_s * 1e6 / plan.num_steps(), higher_is_better=False,
                ours_label="graph", baseline="eager", target=None))
    rows.append(gpt_row(iters, windows))
    print_table(rows)
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
