"""examples/gpt.py's model under parallel layouts: tensor-parallel speed-up of one GPT layer,
data-parallel tokens/s against PyTorch DDP, and the pipeline bubble against the schedule's
ideal. A benchmark, not a test: it prints the figures and the targets.

    tools/python tools/bench/bench_gpt_parallel.py [--quick] [--json OUT.json]

  tp layer:  one GPT block (pre-LayerNorm attention + GELU MLP) at hidden 2048 (16 heads),
             batch 4 x 64 tokens, forward + backward + AdamW step; 1 rank (local tensors)
             against 2 ranks under gpt.py's tp layout (Megatron: q/k/v and c_fc split(0),
             both c_proj split(1), LayerNorm inputs whole). Median step time over windows.
  dp:        gpt.py's GPT (4 layers, 4 heads, n_embd 128, block 64, batch 8 per rank, tied
             head, AdamW) under --parallel dp (global tensors: batch split(0), parameters
             broadcast) against the same model written for PyTorch (nn.Embedding, one fused
             F.cross_entropy) in torch.nn.parallel.DistributedDataParallel over gloo, both in
             the same 2 worker processes, timed windows alternating. Tokens/s over both ranks.
  pp:        gpt.py's GPT (4 layers, 4 heads, n_embd 256, block 64, batch 64, untied) on 2
             stages by flow.nn.parallel.Pipeline, 8 micro-batches, 1F1B; the measured bubble
             (1 - stage busy time / step wall time, the median over steps after warm-up, the
             worse of the two ranks) against the schedule's ideal (p - 1) / (m + p - 1). The
             stages are not equal (the first holds the embeddings, the second the head and the
             loss), so the lighter stage also waits for the heavier one.
Timed figures are medians over windows; the best window is printed too (the machine may be
shared), and each rank's CPU time per step (process_time, all threads of the process; waits
in collectives included), which other load on the machine does not inflate.
Every process runs one thread (OMP_NUM_THREADS=1): on a 2-core machine two ranks take both
cores, so anything else running on the machine shows up in the 2-rank figures.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
from common import free_port, median, pin_single_thread, print_table, save_results  # noqa: E402


def launch(nproc, *args):
    """Runs this file's worker on nproc ranks under our launcher; returns rank 0's JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node", str(nproc),
               "--master_port", str(free_port()), os.path.abspath(__file__), "--worker", *args,
               "--out", out]
        subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        with open(out) as f:
            return json.load(f)


# ---------------------------------------------------------------------------------------------
# Workers (one per rank, under the launcher).

def tp_layer(quick):
    import numpy as np
    import oneflow as flow
    import gpt

    world = flow.env.get_world_size()
    C, H, BATCH, T = 2048, 16, 4, 64
    block = gpt.Block(C, H, T)
    layout = gpt.Layout("tp" if world > 1 else "none", world, H, 8)
    layout.place(block)
    opt = flow.optim.AdamW(block.parameters(), lr=1e-4)
    x = flow.tensor(np.random.RandomState(0).randn(BATCH, T, C).astype(np.float32))
    if world > 1:
        x = x.to_global(placement=layout.placement, sbp=flow.sbp.broadcast)
    x.requires_grad_()

    def step():
        opt.zero_grad()
        block(x).sum().backward()
        opt.step()

    cpu = []

    def window(n):
        if world > 1:
            flow.comm.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            step()
        float(layout.whole(block.ln_1.weight)[0])  # the step has finished everywhere
        cpu.append((time.process_time() - c0) / n)
        return (time.perf_counter() - t0) / n

    window(2)
    cpu.clear()
    times = [window(2 if quick else 3) for _ in range(3 if quick else 7)]
    # This rank's CPU seconds per step (waits in collectives included): what the step costs
    # a core, whatever else the machine runs.
    return {"step_s": median(times), "best_s": min(times), "cpu_s": median(cpu)}


class _TorchGPT:
    """gpt.py's model for PyTorch (built lazily: torch is imported in the worker)."""

    @staticmethod
    def build(torch, vocab, block_size, n_layer, n_head, n_embd):
        nn, F = torch.nn, torch.nn.functional

        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.query, self.key, self.value, self.c_proj = (nn.Linear(n_embd, n_embd)
                                                                 for _ in range(4))
                self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                                     .view(1, 1, block_size, block_size))

            def forward(self, x):
                B, T, C = x.size()
                q, k, v = (f(x).view(B, T, n_head, C // n_head).transpose(1, 2)
                           for f in (self.query, self.key, self.value))
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), -1)
                return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(n_embd), Attn(), nn.LayerNorm(n_embd)
                self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                         nn.Linear(4 * n_embd, n_embd))

            def forward(self, x):
                x = x + self.attn(self.ln_1(x))
                return x + self.mlp(self.ln_2(x))

        class GPT(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block_size, n_embd)
                self.h = nn.ModuleList([Block() for _ in range(n_layer)])
                self.ln_f = nn.LayerNorm(n_embd)
                self.lm_head = nn.Linear(n_embd, vocab, bias=False)
                self.lm_head.weight = self.wte.weight

            def forward(self, idx, targets):
                x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
                for b in self.h:
                    x = b(x)
                logits = self.lm_head(self.ln_f(x))
                return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))

        return GPT()


def dp(quick, torch_port):
    import torch
    import torch.distributed as dist
    import oneflow as flow
    import gpt

    torch.set_num_threads(1)
    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{torch_port}", rank=rank,
                            world_size=world)
    L, H, C, T, BATCH = 4, 4, 128, 64, 8  # BATCH per rank
    data = gpt.CharData(gpt.read_fortunes())
    V = data.vocab_size
    batches = [data.batch("train", BATCH * world, T, s) for s in range(8)]

    args = gpt.parser().parse_args(["--parallel", "dp", "--n_layer", str(L), "--n_head", str(H),
                                    "--n_embd", str(C), "--block_size", str(T)])
    model, layout = gpt.build(args, V, world)
    ours = gpt.Trainer(model, layout, lr=1e-3)

    tmodel = torch.nn.parallel.DistributedDataParallel(
        _TorchGPT.build(torch, V, T, L, H, C))
    topt = torch.optim.AdamW(tmodel.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    tbatches = [(torch.tensor(x[rank * BATCH:(rank + 1) * BATCH]),
                 torch.tensor(y[rank * BATCH:(rank + 1) * BATCH])) for x, y in batches]

    cpu = {"ours": [], "torch": []}

    def ours_window(n):
        flow.comm.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(n):
            loss = ours.step(*batches[i % len(batches)])
        float(layout.whole(loss))
        cpu["ours"].append((time.process_time() - c0) / n)
        return (time.perf_counter() - t0) / n

    def torch_window(n):
        dist.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(n):
            topt.zero_grad(set_to_none=True)
            tmodel(*tbatches[i % len(tbatches)]).backward()
            topt.step()
        cpu["torch"].append((time.process_time() - c0) / n)
        return (time.perf_counter() - t0) / n

    ours_window(3)
    torch_window(3)
    cpu["ours"].clear()
    cpu["torch"].clear()
    steps, windows = (4, 3) if quick else (8, 7)
    o, t = [], []
    for _ in range(windows):
        o.append(ours_window(steps))
        t.append(torch_window(steps))
    tokens = world * BATCH * T
    dist.destroy_process_group()
    return {"ours_tokens_s": tokens / median(o), "torch_tokens_s": tokens / median(t),
            "ours_best": tokens / min(o), "torch_best": tokens / min(t),
            "ours_cpu_s": median(cpu["ours"]), "torch_cpu_s": median(cpu["torch"])}


def pp(quick):
    import oneflow as flow
    import gpt
    from oneflow.nn.parallel.pipeline import ideal_bubble

    world = flow.env.get_world_size()
    M = 8
    data = gpt.CharData(gpt.read_fortunes())
    args = gpt.parser().parse_args(["--parallel", "pp", "--untied", "--n_layer", "4", "--n_head",
                                    "4", "--n_embd", "256", "--block_size", "64",
                                    "--micro_batches", str(M)])
    model, layout = gpt.build(args, data.vocab_size, world)
    trainer = gpt.Trainer(model, layout, lr=1e-3)
    bubbles = []
    for s in range(4 if quick else 8):
        trainer.step(*data.batch("train", 64, 64, s))
        if s >= 2:  # after warm-up
            bubbles.append(trainer.pipe.last_timing["bubble"])
    mine = median(bubbles)
    # The worse of the two ranks (each measures its own stage).
    worst = flow.tensor([mine]).to_global(placement=layout.all, sbp=flow.sbp.split(0)) \
        .to_global(sbp=flow.sbp.broadcast).to_local().numpy().max()
    return {"bubble": float(worst), "ideal": ideal_bubble(2, M)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="write result rows here")
    p.add_argument("--worker", choices=("tp_layer", "dp", "pp"))
    p.add_argument("--out")
    p.add_argument("--torch-port", type=int)
    args = p.parse_args()
    if args.worker:
        pin_single_thread()
        import oneflow as flow
        fn = {"tp_layer": lambda: tp_layer(args.quick), "dp": lambda: dp(args.quick, args.torch_port),
              "pp": lambda: pp(args.quick)}[args.worker]
        result = fn()
        if flow.env.get_rank() == 0:
            with open(args.out, "w") as f:
                json.dump(result, f)
        return
    q = ["--quick"] if args.quick else []
    one = launch(1, "tp_layer", *q)
    two = launch(2, "tp_layer", *q)
    dpr = launch(2, "dp", "--torch-port", str(free_port()), *q)
    ppr = launch(2, "pp", *q)
    print(f"tp layer (hidden 2048): 1 rank {one['step_s'] * 1e3:.0f} ms/step, 2 ranks "
          f"{two['step_s'] * 1e3:.0f} ms/step, {one['step_s'] / two['step_s']:.2f}x (best windows: "
          f"{one['best_s'] * 1e3:.0f} and {two['best_s'] * 1e3:.0f} ms, "
          f"{one['best_s'] / two['best_s']:.2f}x); CPU time per step per rank "
          f"{one['cpu_s'] * 1e3:.0f} and {two['cpu_s'] * 1e3:.0f} ms, "
          f"{one['cpu_s'] / two['cpu_s']:.2f}x")
    print(f"dp GPT 2 ranks: ours {dpr['ours_tokens_s']:.0f} tokens/s, PyTorch DDP "
          f"{dpr['torch_tokens_s']:.0f} tokens/s, {dpr['ours_tokens_s'] / dpr['torch_tokens_s']:.2f}x "
          f"(best windows: {dpr['ours_best']:.0f} and {dpr['torch_best']:.0f}, "
          f"{dpr['ours_best'] / dpr['torch_best']:.2f}x); CPU time per step per rank ours "
          f"{dpr['ours_cpu_s'] * 1e3:.1f} ms, PyTorch {dpr['torch_cpu_s'] * 1e3:.1f} ms, "
          f"{dpr['torch_cpu_s'] / dpr['ours_cpu_s']:.2f}x")
    print(f"pp 2 stages, 8 micro-batches, 1F1B: bubble {ppr['bubble']:.3f}, ideal {ppr['ideal']:.3f}")
    rows = [
        {"metric": "GPT layer hidden 2048 step, TP 2 ranks", "unit": "s",
         "ours": two["step_s"], "torch": one["step_s"], "ours_label": "ours, TP 2 ranks",
         "baseline": "ours, 1 rank", "higher_is_better": False,
         "target": {"op": ">=", "value": 1.6, "on": "ratio"}},
        {"metric": "GPT DP 2 ranks", "unit": "tokens/s", "ours": dpr["ours_tokens_s"],
         "torch": dpr["torch_tokens_s"], "ours_label": "ours, global DP",
         "baseline": "PyTorch 1.13 (Debian) DDP, gloo", "higher_is_better": True,
         "target": {"op": ">=", "value": 1.5, "on": "ratio"}},
        {"metric": "GPT pipeline bubble - ideal, 2 stages x 8 micro-batches", "unit": "fraction",
         "ours": ppr["bubble"] - ppr["ideal"], "torch": ppr["ideal"], "ours_label": "excess",
         "baseline": "ideal", "higher_is_better": False,
         "target": {"op": "<=", "value": 0.10, "on": "ours"}},
    ]
    print()
    print_table(rows)
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
