"""A nanoGPT-style GPT written exactly as PyTorch users write it (Embedding, LayerNorm, causal
self-attention through split/view/transpose with a tril mask or scaled_dot_product_attention, a
GELU MLP, ModuleDict, AdamW with weight-decay groups, clip_grad_norm_, a cosine schedule, top-k +
multinomial sampling). It imports torch: run it with PyTorch, or with oneflow through
`eval "$(python3 -m oneflow.mock_torch)"`. Weights and data come from numpy with fixed seeds,
so both runs start from the same numbers; it prints one JSON line with the losses.

    python3 examples/nanogpt_block.py --steps 20
    eval "$(python3 -m oneflow.mock_torch)" && python3 examples/nanogpt_block.py --steps 20
"""

import argparse
import json
import math

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, use_sdpa):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.use_sdpa = n_head, n_embd, use_sdpa
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                               is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, use_sdpa):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, use_sdpa)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, use_sdpa):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, block_size, use_sdpa) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = {n: p for n, p in self.named_parameters() if p.requires_grad}
        decay = [p for n, p in params.items() if p.dim() >= 2]
        no_decay = [p for n, p in params.items() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=65)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--embd", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--sdpa", action="store_true", help="attention through scaled_dot_product_attention")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = ap.parse_args()

    model = GPT(args.vocab, args.block, args.layers, args.heads, args.embd, args.sdpa)
    # The same initial weights in both frameworks: drawn by numpy, GPT-2's scheme.
    rs = np.random.RandomState(1234)
    state = {}
    for name, t in model.state_dict().items():
        shape = tuple(t.shape)
        if name.endswith(".attn.bias"):  # the causal mask buffer
            state[name] = t
        elif name.endswith(".bias"):
            state[name] = torch.zeros(shape)
        elif "ln" in name and name.endswith("weight"):
            state[name] = torch.ones(shape)
        else:
            state[name] = torch.tensor(rs.normal(0.0, 0.02, shape).astype(np.float32))
    model.load_state_dict(state)

    # Learnable sequences: each token is the previous one plus a per-sequence stride, with a
    # few random tokens mixed in.
    rd = np.random.RandomState(7)
    start = rd.randint(0, args.vocab, size=(args.steps, args.batch, 1))
    stride = rd.randint(1, 4, size=(args.steps, args.batch, 1))
    data = (start + stride * np.arange(args.block + 1)) % args.vocab
    noise = rd.rand(*data.shape) < 0.1
    data = np.where(noise, rd.randint(0, args.vocab, size=data.shape), data)
    optimizer = model.configure_optimizers(0.1, 1e-2, (0.9, 0.95))
    warmup = 3

    def lr_lambda(it):
        if it < warmup:
            return (it + 1) / warmup
        ratio = (it - warmup) / max(1, args.steps - warmup)
        return 0.1 + 0.5 * (1.0 + math.cos(math.pi * ratio)) * 0.9

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    losses, norms = [], []
    model.train()
    for step in range(args.steps):
        batch = torch.tensor(data[step])
        x, y = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    model.eval()
    torch.manual_seed(0)
    out = model.generate(torch.zeros((1, 1), dtype=torch.long), 8, top_k=5)
    tokens = out[0].tolist()
    assert len(tokens) == 9 and all(0 <= t < args.vocab for t in tokens), tokens
    print(json.dumps({"losses": losses, "grad_norms": norms, "lm_head": float(model.lm_head.weight.sum()),
                      "sampled": tokens}))


if __name__ == "__main__":
    main()
