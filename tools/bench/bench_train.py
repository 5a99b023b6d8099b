"""One-process, one-thread training throughput: oneflow vs PyPI's PyTorch, side by side.

    tools/python tools/bench/bench_train.py [--quick] [--json OUT.json] [--only mlp|lenet]

Models (identical shapes, identical initial weights (PyTorch's init, seed 0, copied to ours),
identical random batches for both frameworks):
  mlp:   Linear 784-512-512-10 with ReLU, batch 64, SGD(lr=0.01), CrossEntropyLoss
  lenet: Conv2d(3,6,5) ReLU MaxPool2d(2) Conv2d(6,16,5) ReLU MaxPool2d(2) Flatten
         Linear(400,120) ReLU Linear(120,84) ReLU Linear(84,10) on 3x32x32,
         batch 64, Adam(lr=1e-3), CrossEntropyLoss
Each step is zero_grad(set_to_none=True), forward, loss, backward, optimizer step. The MLP also
runs compiled: ours as an nn.Graph (forward, loss, backward and the optimizer in one plan)
against `torch.compile(model)` with PyTorch's optimizer stepping eagerly (how its tutorial
trains a compiled model; its compile time is spent in the warm-up, not timed).
`--against oneflow-0.9` compares with PyPI's OneFlow 0.9.0 instead (common.real_oneflow_python(),
CPython 3.9), eager against eager and its nn.Graph against ours (rows without targets).
Each framework runs in its own process (PyTorch under the venv of common.torch_python()); after
warm-up, their timed windows alternate (so drift in machine load hits both alike); the figure is
the median samples/s over the windows. The run fails unless both compute the same logits, loss
and gradients on the first batch and the same loss after a step (compiled: the same first
three losses).
"""

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import Worker, median, pin_single_thread, save_results, serve  # noqa: E402

pin_single_thread()  # before oneflow / torch are imported

import numpy as np  # noqa: E402

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


class GraphTrainer(Trainer):
    """Ours compiled: forward, loss, backward and the optimizer in one nn.Graph."""

    def __init__(self, lib, case, state_dict, batches):
        super().__init__(lib, case, state_dict, batches)
        trainer = self

        class TrainGraph(lib.nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = trainer.model
                self.loss_fn = trainer.loss_fn
                self.add_optimizer(trainer.opt)
                self.config.allow_fuse_model_update_ops(True)

            def build(self, x, y):
                loss = self.loss_fn(self.model(x), y)
                loss.backward()
                return loss

        self.graph = TrainGraph()

    def step(self):
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        self.last_loss = self.graph(x, y)


class CompiledTrainer(Trainer):
    """PyTorch compiled: torch.compile(model), the optimizer eager."""

    def __init__(self, lib, case, state_dict, batches):
        super().__init__(lib, case, state_dict, batches)
        self.model = lib.compile(self.model)


def worker(which):
    """Serves setup / check / window requests for one framework (see common.Worker)."""
    if which == "torch":
        import torch as lib
        lib.set_num_threads(1)
    else:  # ours, or PyPI's OneFlow 0.9 under its own venv
        import oneflow as lib
    trainers = {}

    def init(case, path):
        """PyTorch's initial weights for `case` (seed 0), saved to `path`."""
        lib.manual_seed(0)
        model = CASES[case][0](lib.nn)
        np.savez(path, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
        return {}

    def setup(case, mode, init_path, data_path):
        state = dict(np.load(init_path))
        data = np.load(data_path)
        batches = [(data[f"x{i}"], data[f"y{i}"]) for i in range(NUM_BATCHES)]
        kind = {"eager": Trainer, "graph": GraphTrainer, "compile": CompiledTrainer}[mode]
        trainers[(case, mode)] = kind(lib, case, state, batches)
        return {}

    def check(case, mode, path):
        t = trainers[(case, mode)]
        out = {}
        if mode == "eager":
            x, y = t.batches[0]
            t.opt.zero_grad(set_to_none=True)
            logits = t.model(x)
            loss = t.loss_fn(logits, y)
            loss.backward()
            out["logits"] = logits.detach().numpy()
            out["loss0"] = np.array(loss.item())
            for name, p in t.model.named_parameters():
                out["grad." + name] = p.grad.numpy().copy()
            t.opt.zero_grad(set_to_none=True)
        t.i = 0
        for i in range(3):
            t.step()
            out[f"step{i}"] = np.array(t.last_loss.item())
        np.savez(path, **out)
        return {}

    def window(case, mode, steps):
        return {"seconds": trainers[(case, mode)].timed_window(steps)}

    serve({"init": init, "setup": setup, "check": check, "window": window},
          {"version": lib.__version__})


def relative_error(ours, theirs):
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    return float(np.linalg.norm(ours - theirs) / max(np.linalg.norm(theirs), 1e-30))


def check_same_computation(label, ours, theirs):
    """Exits the run (status 1) unless the two check() outputs agree: logits, loss and every
    gradient on the first batch (eager), and the losses of the first three steps. (The loss
    alone is near ln 10 for any untrained classifier; the logits and gradients tell models
    apart.) Returns the two first losses."""
    problems = []
    if "logits" in ours:
        err = relative_error(ours["logits"], theirs["logits"])
        if not err <= 1e-4:
            problems.append(f"logits differ (relative error {err:.2e})")
        names = sorted(k for k in ours if k.startswith("grad."))
        if names != sorted(k for k in theirs if k.startswith("grad.")):
            problems.append(f"parameter names differ: {names} vs "
                            f"{sorted(k for k in theirs if k.startswith('grad.'))}")
        else:
            for name in names:
                err = relative_error(ours[name], theirs[name])
                if not err <= 1e-3:
                    problems.append(f"{name[5:]}'s gradient differs (relative error {err:.2e})")
    for i in range(3):
        a, b = float(ours[f"step{i}"]), float(theirs[f"step{i}"])
        if not abs(a - b) <= 1e-3 * max(1.0, abs(b)):
            problems.append(f"loss of step {i} differs: ours {a:.6f}, torch {b:.6f}")
    if problems:
        sys.exit(f"bench_train: {label}: ours and torch do not compute the same thing: "
                 + "; ".join(problems))
    return float(ours["step0"]), float(theirs["step0"])


def run_case(workers, case, modes, warmup, windows, steps, tmp):
    """Median samples/s of each worker's model in its mode (modes: {which: mode})."""
    _, in_shape, _ = CASES[case]
    rng = np.random.default_rng(0)
    data = {}
    for i in range(NUM_BATCHES):
        data[f"x{i}"] = rng.standard_normal((BATCH,) + in_shape, dtype=np.float32)
        data[f"y{i}"] = rng.integers(0, 10, size=BATCH, dtype=np.int64)
    data_path, init_path = os.path.join(tmp, "data.npz"), os.path.join(tmp, f"{case}.init.npz")
    np.savez(data_path, **data)
    if not os.path.exists(init_path):
        workers["torch"].ask(cmd="init", case=case, path=init_path)
    label = f"{case} {'/'.join(modes.values())}"
    outs = {}
    for which, w in workers.items():
        w.ask(cmd="setup", case=case, mode=modes[which], init_path=init_path, data_path=data_path)
        path = os.path.join(tmp, f"{which}.check.npz")
        w.ask(cmd="check", case=case, mode=modes[which], path=path)
        outs[which] = dict(np.load(path))
    first = check_same_computation(label, outs["ours"], outs["torch"])
    for which, w in workers.items():  # torch.compile compiles here
        w.ask(cmd="window", case=case, mode=modes[which], steps=warmup)
    rates = {which: [] for which in workers}
    for _ in range(windows):
        for which, w in workers.items():
            seconds = w.ask(cmd="window", case=case, mode=modes[which], steps=steps)["seconds"]
            rates[which].append(steps * BATCH / seconds)
    result = {which: median(r) for which, r in rates.items()}
    spread = {which: (min(r), max(r)) for which, r in rates.items()}
    print(f"{label:14s} samples/s  ours {result['ours']:8.0f} [{spread['ours'][0]:.0f}.."
          f"{spread['ours'][1]:.0f}]  torch {result['torch']:8.0f} [{spread['torch'][0]:.0f}.."
          f"{spread['torch'][1]:.0f}]  speedup {result['ours'] / result['torch']:.2f}x"
          f"  (loss@1 ours {first[0]:.4f} torch {first[1]:.4f})", flush=True)
    return result


TARGETS = {"mlp": 1.2, "lenet": 1.0}  # ours/torch throughput ratio, eager
COMPILED = {"mlp"}  # also ours nn.Graph against torch.compile (target >= 1.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter windows")
    parser.add_argument("--json", help="write result rows here (for run_all.sh)")
    parser.add_argument("--only", choices=sorted(CASES), help="run one model only")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the nn.Graph / torch.compile rows")
    parser.add_argument("--against", choices=("torch", "oneflow-0.9"), default="torch",
                        help="the baseline: PyPI's PyTorch (default) or PyPI's OneFlow 0.9.0 "
                        "(its nn.Graph against ours for the compiled row)")
    parser.add_argument("--worker", choices=("ours", "torch", "oneflow-0.9"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    warmup, windows, steps = (5, 5, 10) if args.quick else (20, 9, 30)

    # The baseline's worker sits under the key "torch" whichever framework it is.
    workers = {"ours": Worker(__file__, "ours"), "torch": Worker(__file__, args.against)}
    name = "torch" if args.against == "torch" else "OneFlow"
    base = f"{'PyTorch' if name == 'torch' else 'OneFlow'} {workers['torch'].ready['version']}"
    print(f"batch {BATCH}, warm-up {warmup} steps, {windows} windows x {steps} steps, 1 thread; "
          f"{base} (PyPI), oneflow-cpp {workers['ours'].ready['version']}; each in its own "
          "process", flush=True)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for case in ([args.only] if args.only else list(CASES)):
                r = run_case(workers, case, {"ours": "eager", "torch": "eager"}, warmup, windows,
                             steps, tmp)
                rows.append({"metric": f"{case} train", "unit": "samples/s", "ours": r["ours"],
                             "torch": r["torch"], "higher_is_better": True, "baseline": base,
                             "target": ({"op": ">=", "value": TARGETS[case], "on": "ratio"}
                                        if name == "torch" else None)})
                if case in COMPILED and not args.no_compile:
                    compiled = "compile" if name == "torch" else "graph"
                    r = run_case(workers, case, {"ours": "graph", "torch": compiled}, warmup,
                                 windows, steps, tmp)
                    rows.append({"metric": f"{case} train, compiled", "unit": "samples/s",
                                 "ours": r["ours"], "torch": r["torch"],
                                 "ours_label": "ours nn.Graph",
                                 "baseline": ("torch.compile" if name == "torch" else
                                              f"{base} nn.Graph"),
                                 "higher_is_better": True,
                                 "target": ({"op": ">=", "value": 1.0, "on": "ratio"}
                                            if name == "torch" else None)})
    finally:
        for w in workers.values():
            w.close()
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
