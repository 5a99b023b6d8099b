"""bf16 autocast trains a small GPT on CUDA like float32 (issue 40): 200 AdamW steps with
gradient clipping, the same batches and initial weights in both runs; the mean loss of the last 10
steps under torch-style autocast("cuda", bfloat16) must be within 2% of float32's.

It runs on a GPU where one is usable (the CUDA kernels in bfloat16: linear on cuBLASLt, matmul,
gelu, softmax in float32, sums of bfloat16 gradients, ...), else on the stand-in CUDA device
(ONEFLOW_FAKE_CUDA=1: the CPU kernels on "cuda" tensors, which checks the dtypes and devices of
everything the step runs). Each run is a subprocess of this file (the stand-in is chosen at
import)."""

import json
import math
import os
import subprocess
import sys

import numpy as np

VOCAB, BLOCK, EMBD, HEADS, LAYERS, BATCH, STEPS = 32, 16, 32, 2, 1, 8, 200


def _train(autocast):
    import oneflow as flow
    import oneflow.nn as nn
    import oneflow.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(EMBD), nn.LayerNorm(EMBD)
            self.qkv, self.proj = nn.Linear(EMBD, 3 * EMBD), nn.Linear(EMBD, EMBD)
            self.fc, self.out = nn.Linear(EMBD, 4 * EMBD), nn.Linear(4 * EMBD, EMBD)

        def forward(self, x, mask):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
            att = F.softmax(att.masked_fill(mask[:t, :t] == 0, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, EMBD), nn.Embedding(BLOCK, EMBD)
            self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.ln = nn.LayerNorm(EMBD)
            self.head = nn.Linear(EMBD, VOCAB, bias=False)
            self.register_buffer("mask", flow.tril(flow.ones(BLOCK, BLOCK)))

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(flow.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x, self.mask)
            return self.head(self.ln(x))

    # A fixed random Markov chain over the vocabulary: learnable, not memorisable.
    rs = np.random.RandomState(0)
    trans = rs.dirichlet(np.full(VOCAB, 0.2), size=VOCAB)
    seq = [0]
    for _ in range(20000):
        seq.append(rs.choice(VOCAB, p=trans[seq[-1]]))
    seq = np.array(seq, dtype=np.int64)

    flow.manual_seed(0)
    model = GPT().to("cuda")
    opt = flow.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    losses = []
    for step in range(STEPS):
        starts = rs.randint(0, len(seq) - BLOCK - 1, size=BATCH)
        x = flow.tensor(np.stack([seq[s:s + BLOCK] for s in starts])).to("cuda")
        y = flow.tensor(np.stack([seq[s + 1:s + BLOCK + 1] for s in starts])).to("cuda")
        with flow.autocast("cuda", dtype=flow.bfloat16, enabled=autocast):
            logits = model(x)
            assert logits.dtype == (flow.bfloat16 if autocast else flow.float32), logits.dtype
            loss = F.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
        assert loss.dtype == flow.float32 and loss.device == flow.device("cuda:0")
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    for p in model.parameters():
        assert p.dtype == flow.float32 and p.grad.dtype == flow.float32
        assert p.device == flow.device("cuda:0")
    return losses


def _run_both(env_extra):
    env = dict(os.environ, **env_extra)
    r = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_bf16_gpt_trains_like_float32(env_extra):
    """Trains in a subprocess with env_extra; asserts the 2% gap and returns the summary."""
    out = _run_both(env_extra)
    f32, bf16 = out["float32"], out["bfloat16"]
    assert np.mean(f32[-10:]) < f32[0] - 0.5, f32  # it learns
    # bfloat16 really ran: the two runs part at the first step's rounding.
    assert max(abs(a - b) for a, b in zip(f32, bf16)) > 1e-4, (f32[:5], bf16[:5])
    gap = abs(np.mean(bf16[-10:]) - np.mean(f32[-10:])) / np.mean(f32[-10:])
    print(f"gpt, mean loss of the last 10 of {STEPS} steps: float32 {np.mean(f32[-10:]):.4f}, "
          f"bf16 autocast {np.mean(bf16[-10:]):.4f} ({100 * gap:.2f}%)")
    assert gap <= 0.02, (f32[-10:], bf16[-10:])
    return gap


def test_bf16_autocast_gpt_on_the_stand_in_device_trains_like_float32():
    check_bf16_gpt_trains_like_float32({"ONEFLOW_FAKE_CUDA": "1"})


if __name__ == "__main__":
    print(json.dumps({"float32": _train(False), "bfloat16": _train(True)}))
