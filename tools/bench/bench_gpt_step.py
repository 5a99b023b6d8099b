"""One training step of a GPT block at GPT-small shapes, ours against PyPI's PyTorch, one thread
each, eager and compiled.

    tools/python tools/bench/bench_gpt_step.py [--quick] [--json FILE] [--no-compile]

The model is examples/nanogpt_block.py's GPT exactly as PyTorch users write it (Embedding,
LayerNorm, causal self-attention through split/view/transpose with a tril mask, or through
scaled_dot_product_attention, GELU MLP, tied head, AdamW with weight-decay groups,
clip_grad_norm_): 1 block, 12 heads x 64 (n_embd 768), batch 8 x 256 tokens, a 256-symbol
vocabulary so the block, not the head, dominates. PyTorch runs it as written; we run the same
file under oneflow.mock_torch (`import torch` gives oneflow). Each framework runs in its own
process (PyTorch under common.torch_python()'s venv) from the same numpy weights; a step is
forward + backward + clip + AdamW step. Rows:
  eager, tril mask / eager, scaled_dot_product_attention: both frameworks the same form
  compiled (sdpa): ours nn.Graph (forward, loss, backward, clipping (the optimizer groups'
    clip_grad_max_norm, OneFlow's graph form) and AdamW in one plan) against
    torch.compile(model) with PyTorch's clip and AdamW eager (its compile is in the warm-up)
The two processes' timed windows alternate, so load drift hits both; figures are medians.
The first loss (before any update) of each pair must agree, or the run fails.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import Worker, median, pin_single_thread, print_table, save_results, serve  # noqa: E402,E501

ROOT = os.path.dirname(os.path.dirname(HERE))
SHAPE = dict(vocab=256, block=256, layers=1, heads=12, embd=768, batch=8)


def worker():
    pin_single_thread()
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import numpy as np
    import torch
    import nanogpt_block as ng

    if hasattr(torch, "set_num_threads"):  # PyTorch; ours follows pin_single_thread's variables
        torch.set_num_threads(1)
    steps = {}

    def setup(name, sdpa, mode):
        s = SHAPE
        model = ng.GPT(s["vocab"], s["block"], s["layers"], s["heads"], s["embd"], sdpa)
        rs = np.random.RandomState(0)
        model.load_state_dict({n: (t if n.endswith(".attn.bias") else
                                   torch.tensor(rs.normal(0, 0.02, tuple(t.shape))
                                                .astype(np.float32)))
                               for n, t in model.state_dict().items()})
        opt = model.configure_optimizers(0.1, 1e-4, (0.9, 0.95))
        data = rs.randint(0, s["vocab"], size=(4, s["batch"], s["block"] + 1))
        batches = [(torch.tensor(d[:, :-1]).contiguous(), torch.tensor(d[:, 1:]).contiguous())
                   for d in data]
        if mode == "eager" or mode == "compile":
            run = torch.compile(model) if mode == "compile" else model

            def step(i):
                x, y = batches[i % len(batches)]
                _, loss = run(x, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                return loss
        elif mode == "graph":
            for group in opt.param_groups:
                group["clip_grad_max_norm"], group["clip_grad_norm_type"] = 1.0, 2.0

            class TrainGraph(torch.nn.Graph):
                def __init__(self):
                    super().__init__()
                    self.model = model
                    self.add_optimizer(opt)
                    self.config.allow_fuse_model_update_ops(True)

                def build(self, x, y):
                    _, loss = self.model(x, y)
                    loss.backward()
                    return loss

            graph = TrainGraph()

            def step(i):
                return graph(*batches[i % len(batches)])
        else:
            raise ValueError(f"unknown mode {mode!r}")
        first = float(step(0).item())  # warm-up: allocations, oneDNN primitives, the compile
        steps[name] = step
        return {"first_loss": first}

    def window(name, steps_per_window):
        step = steps[name]
        t0 = time.perf_counter()
        for i in range(steps_per_window):
            loss = step(i)
        float(loss.item())
        return {"seconds": (time.perf_counter() - t0) / steps_per_window}

    serve({"setup": setup, "window": window}, {"version": torch.__version__})


PAIRS = [  # (row, (ours sdpa, ours mode), (torch sdpa, torch mode), target on the ratio)
    ("eager, tril mask", (False, "eager"), (False, "eager"), 1.0),
    ("eager, scaled_dot_product_attention", (True, "eager"), (True, "eager"), 1.0),
    ("compiled (sdpa): ours nn.Graph vs torch.compile", (True, "graph"), (True, "compile"), 1.0),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--no-compile", action="store_true", help="skip the compiled row")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker()
    steps, windows = (1, 3) if args.quick else (2, 5)
    from oneflow.mock_torch import STUBS

    workers = {"ours": Worker(__file__, "ours", env={
                   "PYTHONPATH": STUBS + os.pathsep + os.environ.get("PYTHONPATH", "")}),
               "torch": Worker(__file__, "torch")}
    print(f"GPT block step: oneflow {workers['ours'].ready['version']} (mock_torch) against "
          f"torch {workers['torch'].ready['version']} (PyPI), each in its own process; "
          f"{windows} alternating windows of {steps} steps, medians", flush=True)
    rows = []
    try:
        for label, ours, theirs, target in PAIRS:
            if args.no_compile and ours[1] == "graph":
                continue
            first = {}
            for which, (sdpa, mode) in (("ours", ours), ("torch", theirs)):
                first[which] = workers[which].ask(cmd="setup", name=label, sdpa=sdpa,
                                                  mode=mode)["first_loss"]
            if not abs(first["ours"] - first["torch"]) <= 1e-3 * abs(first["torch"]):
                sys.exit(f"bench_gpt_step: {label}: first losses differ: ours {first['ours']:.6f}"
                         f", torch {first['torch']:.6f}")
            times = {"ours": [], "torch": []}
            for _ in range(windows):
                for which, w in workers.items():
                    times[which].append(w.ask(cmd="window", name=label,
                                              steps_per_window=steps)["seconds"])
            sec = {k: median(v) for k, v in times.items()}
            print(f"{label}: ours {sec['ours'] * 1e3:.0f} ms, torch {sec['torch'] * 1e3:.0f} ms "
                  f"(first loss ours {first['ours']:.5f} torch {first['torch']:.5f})", flush=True)
            row = {"metric": f"GPT block train step, b8 x t256, 12x64 heads, {label}",
                   "unit": "ms", "ours": sec["ours"] * 1e3, "torch": sec["torch"] * 1e3,
                   "higher_is_better": False, "target": {"op": ">=", "value": target, "on": "ratio"}}
            if ours[1] == "graph":
                row.update(ours_label="ours nn.Graph", baseline="torch.compile")
            rows.append(row)
    finally:
        for w in workers.values():
            w.close()
    print_table(rows)
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
