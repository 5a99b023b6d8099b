"""One-process, one-thread training throughput: oneflow vs PyTorch, side by side.

    tools/python tools/bench/bench_train.py [--quick] [--json OUT.json] [--only mlp|lenet]

Models (identical shapes, identical initial weights copied from the torch model, identical
random batches for both frameworks):
  mlp:   Linear 784-512-512-10 with ReLU, batch 64, SGD(lr=0.01), CrossEntropyLoss
  lenet: Conv2d(3,6,5) ReLU MaxPool2d(2) Conv2d(6,16,5) ReLU MaxPool2d(2) Flatten
         Linear(400,120) ReLU Linear(120,84) ReLU Linear(84,10) on 3x32x32,
         batch 64, Adam(lr=1e-3), CrossEntropyLoss
Each step is zero_grad(set_to_none=True), forward, loss, backward, optimizer step.
After warm-up, timed windows of the two frameworks alternate (so drift in machine load hits
both alike); the figure is the median samples/s over the windows.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median, pin_single_thread, save_results  # noqa: E402

pin_single_thread()  # before oneflow / torch are imported

import numpy as np  # noqa: E402
import oneflow as flow  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

BATCH = 64
NUM_BATCHES = 8  # a small pool of random batches, cycled


def build_mlp(nn):
    return nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(),
        nn.Linear(512, 512), nn.ReLU(),
        nn.Linear(512, 10),
    )


def build_lenet(nn):
    return nn.Sequential(
        nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10),
    )


CASES = {
    # name: (builder, input shape without batch, optimizer factory (framework -> params -> opt))
    "mlp": (build_mlp, (784,), lambda lib, params: lib.optim.SGD(params, lr=0.01)),
    "lenet": (build_lenet, (3, 32, 32), lambda lib, params: lib.optim.Adam(params, lr=1e-3)),
}


class Trainer:
    """A model, its optimizer, loss and batches in one framework (`lib` is flow or torch)."""

    def __init__(self, lib, case, state_dict, batches):
        build, _, make_opt = CASES[case]
        self.model = build(lib.nn)
        self.model.load_state_dict({k: lib.tensor(v) for k, v in state_dict.items()})
        self.model.train()
        self.opt = make_opt(lib, self.model.parameters())
        self.loss_fn = lib.nn.CrossEntropyLoss()
        self.batches = [(lib.tensor(x), lib.tensor(y)) for x, y in batches]
        self.i = 0
        self.last_loss = None

    def step(self):
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.last_loss = loss

    def timed_window(self, steps):
        """Seconds for `steps` steps; .item() at the end waits for any queued work."""
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.last_loss.item()
        return time.perf_counter() - start


def relative_error(ours, theirs):
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    return float(np.linalg.norm(ours - theirs) / max(np.linalg.norm(theirs), 1e-30))


def first_batch(t):
    """Logits, loss and every parameter's gradient of t's model on its first batch (the
    optimizer does not step)."""
    x, y = t.batches[0]
    t.opt.zero_grad(set_to_none=True)
    out = t.model(x)
    loss = t.loss_fn(out, y)
    loss.backward()
    grads = {name: p.grad.numpy().copy() for name, p in t.model.named_parameters()}
    t.opt.zero_grad(set_to_none=True)
    return out.detach().numpy(), loss.item(), grads


def check_same_computation(case, trainers):
    """Exits the run (status 1) unless ours and torch's models compute the same logits, loss
    and gradients on the first batch, and the same loss after one optimizer step: otherwise the
    two are not timing the same computation. (The loss alone is near ln 10 for any untrained
    classifier; the logits and gradients tell models apart.)"""
    problems = []
    ours, theirs = first_batch(trainers["ours"]), first_batch(trainers["torch"])
    err = relative_error(ours[0], theirs[0])
    if not err <= 1e-4:
        problems.append(f"logits differ (relative error {err:.2e})")
    if not abs(ours[1] - theirs[1]) <= 1e-4 * max(1.0, abs(theirs[1])):
        problems.append(f"loss differs: ours {ours[1]:.6f}, torch {theirs[1]:.6f}")
    if sorted(ours[2]) != sorted(theirs[2]):
        problems.append(f"parameter names differ: {sorted(ours[2])} vs {sorted(theirs[2])}")
    else:
        for name in ours[2]:
            err = relative_error(ours[2][name], theirs[2][name])
            if not err <= 1e-3:
                problems.append(f"{name}'s gradient differs (relative error {err:.2e})")
    for t in trainers.values():
        t.step()
        t.step()
    second = {name: t.last_loss.item() for name, t in trainers.items()}
    if not abs(second["ours"] - second["torch"]) <= 1e-3 * max(1.0, abs(second["torch"])):
        problems.append(f"loss after one step differs: ours {second['ours']:.6f}, torch "
                        f"{second['torch']:.6f}")
    if problems:
        sys.exit(f"bench_train: {case}: ours and torch do not compute the same thing: "
                 + "; ".join(problems))
    return ours[1], theirs[1]


def run_case(case, warmup, windows, steps):
    build, in_shape, _ = CASES[case]
    rng = np.random.default_rng(0)
    batches = [
        (rng.standard_normal((BATCH,) + in_shape, dtype=np.float32),
         rng.integers(0, 10, size=BATCH, dtype=np.int64))
        for _ in range(NUM_BATCHES)
    ]
    torch.manual_seed(0)
    init = {k: v.detach().numpy().copy() for k, v in build(torch.nn).state_dict().items()}
    trainers = {"ours": Trainer(flow, case, init, batches), "torch": Trainer(torch, case, init, batches)}

    # Same weights, data and optimizer: the same logits, loss and gradients, or the run fails.
    first = dict(zip(("ours", "torch"), check_same_computation(case, trainers)))

    for t in trainers.values():
        t.timed_window(warmup)
    rates = {name: [] for name in trainers}
    for _ in range(windows):
        for name, t in trainers.items():
            rates[name].append(steps * BATCH / t.timed_window(steps))
    result = {name: median(r) for name, r in rates.items()}
    spread = {name: (min(r), max(r)) for name, r in rates.items()}
    print(f"{case:6s} samples/s  ours {result['ours']:8.0f} [{spread['ours'][0]:.0f}..{spread['ours'][1]:.0f}]"
          f"  torch {result['torch']:8.0f} [{spread['torch'][0]:.0f}..{spread['torch'][1]:.0f}]"
          f"  speedup {result['ours'] / result['torch']:.2f}x"
          f"  (loss@1 ours {first['ours']:.4f} torch {first['torch']:.4f})")
    return result


TARGETS = {"mlp": 1.2, "lenet": 1.0}  # ours/torch throughput ratio


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter windows")
    parser.add_argument("--json", help="write result rows here (for run_all.sh)")
    parser.add_argument("--only", choices=sorted(CASES), help="run one model only")
    args = parser.parse_args()
    warmup, windows, steps = (5, 5, 10) if args.quick else (20, 9, 30)

    print(f"batch {BATCH}, warm-up {warmup} steps, {windows} windows x {steps} steps, 1 thread; "
          f"torch {torch.__version__}, oneflow {flow.__version__}")
    rows = []
    for case in ([args.only] if args.only else list(CASES)):
        r = run_case(case, warmup, windows, steps)
        rows.append({"metric": f"{case} train", "unit": "samples/s", "ours": r["ours"], "torch": r["torch"],
                     "higher_is_better": True,
                     "target": {"op": ">=", "value": TARGETS[case], "on": "ratio"}})
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
