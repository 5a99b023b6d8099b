"""One training step of a GPT block at GPT-small shapes, ours against PyTorch, one thread each.

    tools/python tools/bench/bench_gpt_step.py [--quick] [--json FILE]

The model is examples/nanogpt_block.py's GPT exactly as PyTorch users write it (Embedding,
LayerNorm, causal self-attention through split/view/transpose with a tril mask, and through
scaled_dot_product_attention (ours; PyTorch 1.13 lacks it), GELU MLP, tied head, AdamW with weight-decay groups,
clip_grad_norm_): 1 block, 12 heads x 64 (n_embd 768), batch 8 x 256 tokens, a 256-symbol
vocabulary so the block, not the head, dominates. PyTorch runs it as written; we run the same
file under oneflow.mock_torch (`import torch` gives oneflow). Each framework runs in its own
process from the same numpy weights; a step is forward + backward + clip + AdamW step.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import median, pin_single_thread, print_table, save_results  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
SHAPE = dict(vocab=256, block=256, layers=1, heads=12, embd=768, batch=8)


def worker(sdpa, steps, windows):
    pin_single_thread()
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import numpy as np
    import torch
    import nanogpt_block as ng

    if hasattr(torch, "set_num_threads"):  # PyTorch; ours follows pin_single_thread's variables
        torch.set_num_threads(1)
    s = SHAPE
    model = ng.GPT(s["vocab"], s["block"], s["layers"], s["heads"], s["embd"], sdpa)
    rs = np.random.RandomState(0)
    model.load_state_dict({n: (t if n.endswith(".attn.bias") else
                               torch.tensor(rs.normal(0, 0.02, tuple(t.shape)).astype(np.float32)))
                           for n, t in model.state_dict().items()})
    opt = model.configure_optimizers(0.1, 1e-4, (0.9, 0.95))
    data = rs.randint(0, s["vocab"], size=(4, s["batch"], s["block"] + 1))
    batches = [(torch.tensor(d[:, :-1]).contiguous(), torch.tensor(d[:, 1:]).contiguous()) for d in data]

    def step(i):
        x, y = batches[i % len(batches)]
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    step(0)  # warm-up: allocations, oneDNN primitives
    times = []
    for w in range(windows):
        t0 = time.perf_counter()
        for i in range(steps):
            loss = step(i)
        float(loss.item())
        times.append((time.perf_counter() - t0) / steps)
    return {"step_s": median(times), "first_loss": float(step(0).item())}


def run(framework, sdpa, steps, windows):
    env = dict(os.environ)
    python = "/usr/bin/python3"
    if framework == "oneflow":
        from oneflow.mock_torch import STUBS
        env["PYTHONPATH"] = STUBS + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([python, os.path.abspath(__file__), "--worker", str(int(sdpa)),
                          str(steps), str(windows)], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sdpa, steps, windows = (int(v) for v in args.worker)
        print(json.dumps(worker(bool(sdpa), steps, windows)))
        return
    steps, windows = (1, 3) if args.quick else (2, 5)
    rows = []
    # Debian's PyTorch (1.13) has no scaled_dot_product_attention: our fused attention is
    # compared with the tril-mask form, which is what a user of that PyTorch writes.
    ref = run("torch", False, steps, windows)
    for sdpa in (False, True):
        ours = run("oneflow", sdpa, steps, windows)
        form = "ours scaled_dot_product_attention vs tril mask" if sdpa else "tril mask"
        rows.append({"metric": f"GPT block train step, b8 x t256, 12x64 heads, {form}", "unit": "ms",
                     "ours": ours["step_s"] * 1e3, "torch": ref["step_s"] * 1e3,
                     "higher_is_better": False, "target": {"op": ">=", "value": 1.2, "on": "ratio"}})
    print_table(rows)
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
