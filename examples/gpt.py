"""A GPT-2-style character-level language model on the fortune cookies of Debian's `fortunes`
package, trained under any layout that placement + SBP expresses. The model code is the same
for every layout; --parallel only decides where its parameters and inputs are placed, and
deduction inserts the collectives.

    python3 examples/gpt.py --steps 200                                   # one process
    python3 -m oneflow.distributed.launch --nproc_per_node 2 examples/gpt.py --parallel dp
    python3 -m oneflow.distributed.launch --nproc_per_node 2 examples/gpt.py --parallel tp
    python3 -m oneflow.distributed.launch --nproc_per_node 4 examples/gpt.py --parallel dp_tp
    python3 -m oneflow.distributed.launch --nproc_per_node 2 examples/gpt.py --parallel pp --untied
    python3 -m oneflow.distributed.launch --nproc_per_node 2 examples/gpt.py --parallel zero

Layouts (--parallel, several joined with '+' where they compose: dp+zero, tp+zero, dp_tp+zero):
  none   local tensors, one process
  dp     inputs split(0), parameters broadcast: the weight gradients come out partial and are
         all-reduced when they reach the (broadcast) parameters
  tp     Megatron on all ranks: query/key/value and mlp.c_fc split(0) (column parallel, whole
         heads per rank), both c_proj split(1) (row parallel: their output is a partial sum, made
         whole by the one all-reduce the next LayerNorm needs), the token embedding and the head
         split over the vocabulary, and a cross-entropy over the split vocabulary that never
         gathers the logits
  dp_tp  a (world / --tp) x --tp mesh: data (split(0), broadcast), weights (broadcast, tp's)
  pp     two stages (embedding + first half of the blocks on the first half of the ranks, the
         rest + head on the second half) run by flow.nn.parallel.Pipeline with micro-batches
  zero   dp with the AdamW state split over the ranks (flow.distributed.ZeroRedundancyOptimizer)
  auto   (with --graph) placements only: parameters and inputs broadcast on all ranks (on 4 or
         more, a (world / --tp) x --tp mesh), and the graph's auto-parallel
         (config.enable_auto_parallel) chooses every SBP
--checkpoint recomputes each block's activations in backward (flow.utils.checkpoint) under any
layout. --accumulate N splits each batch into N micro-batches whose gradients add up. --graph
trains through an nn.Graph (compile mode) under any layout: pp by set_stage on the two stages
with --micro_batches as accumulation steps, zero by the graph's enable_zero (--zero_stage 2
shards the gradients too), --checkpoint as activation checkpointing on each block:
    python3 -m oneflow.distributed.launch --nproc_per_node 2 examples/gpt.py --parallel pp \
        --untied --graph
--save DIR keeps training-state checkpoints in DIR (flow.utils.training_state: model and
optimizer, sharded) at the end and every --save_every steps, and a run started with DIR
resumes from its newest complete one (any layout, any number of ranks): with the launcher's
--max_restarts, a job that lost a rank goes on from there by itself, and ends with the same
parameters as a run that was never interrupted:
    python3 -m oneflow.distributed.launch --nproc_per_node 2 --max_restarts 3 examples/gpt.py \
        --parallel dp --save ckpt --save_every 50
With --save, SIGTERM (the launcher forwards it, e.g. from a preempted machine, --term_timeout
seconds before its SIGKILL) makes every rank save at the end of the step and stop.
--load DIR reads a model checkpoint (oneflow.save, sharded or not) before training.
"""

import argparse
import math
import os
import signal
import time

import numpy as np

import oneflow as flow
import oneflow.nn as nn
import oneflow.nn.functional as F
from oneflow.utils import training_state
from oneflow.utils.tensorboard import SummaryWriter
from oneflow.utils.checkpoint import checkpoint

FORTUNES = "/usr/share/games/fortunes"
LAYOUTS = ("none", "dp", "tp", "dp_tp", "pp", "zero")
S, B = flow.sbp.split, flow.sbp.broadcast


# ---------------------------------------------------------------------------------------------
# Data: every fortune database of the package, as characters.

def read_fortunes(folder=FORTUNES):
    """The text of every fortune database in folder (the plain files: not the .dat indexes,
    not the .u8 links, not folders), in name order."""
    if not os.path.isdir(folder):
        raise SystemExit(f"gpt.py: no fortune databases at {folder}; install Debian's fortunes "
                         "package (apt-get install fortunes)")
    texts = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.islink(path) or not os.path.isfile(path) or "." in name:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    if not texts:
        raise SystemExit(f"gpt.py: {folder} holds no fortune databases; install Debian's "
                         "fortunes package (apt-get install fortunes)")
    return "".join(texts)


class CharData:
    """Characters as token ids; the last 10% held out for validation. The vocabulary is padded
    to a multiple of vocab_multiple (unused ids) so that it splits evenly over ranks."""

    def __init__(self, text, vocab_multiple=8):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = -(-len(self.chars) // vocab_multiple) * vocab_multiple
        ids = np.array([self.stoi[c] for c in text], dtype=np.int64)
        n = int(0.9 * len(ids))
        self.train, self.val = ids[:n], ids[n:]

    def batch(self, split, batch_size, block_size, seed):
        """(x, y) numpy int64 (batch_size, block_size): the same on every rank for one seed."""
        data = self.train if split == "train" else self.val
        rs = np.random.RandomState(seed)
        starts = rs.randint(0, len(data) - block_size - 1, size=batch_size)
        x = np.stack([data[s:s + block_size] for s in starts])
        y = np.stack([data[s + 1:s + 1 + block_size] for s in starts])
        return x, y

    def decode(self, ids):
        return "".join(self.chars[i] if i < len(self.chars) else "?" for i in ids)


# ---------------------------------------------------------------------------------------------
# The model (nanoGPT's, with separate query/key/value projections so that a split of their
# output rows keeps whole heads on each rank).

def _split_axis_of(x, axis):
    return x.is_global and any(s == S(axis) for s in x.sbp)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.query = nn.Linear(n_embd, n_embd)
        self.key = nn.Linear(n_embd, n_embd)
        self.value = nn.Linear(n_embd, n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        # Buffers are small constants: real memory also when the model is built on meta.
        self.register_buffer("bias", flow.tril(flow.ones(block_size, block_size, device="cpu"))
                             .view(1, 1, block_size, block_size), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        # Under tensor parallelism C is split with whole heads on each rank: the view keeps
        # that split as a split of the heads axis, with no communication.
        q = self.query(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = self.key(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
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
    def __init__(self, n_embd, n_head, block_size, recompute=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)
        self.recompute = recompute

    def _forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def forward(self, x):
        if self.recompute and self.training and x.requires_grad:
            return checkpoint(self._forward, x)
        return self._forward(x)


class Embeddings(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd):
        super().__init__()
        # With the table split over the vocabulary (tensor parallel), each rank looks up the
        # rows it holds and leaves zeros for the others: the embedding is a partial sum.
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.register_buffer("pos", flow.arange(block_size, device="cpu"), persistent=False)

    def forward(self, idx):
        return self.wte(idx) + self.wpe(self.pos[:idx.size(1)])


def _row_max(logits):
    """The max over the last axis (no gradient: it only shifts the exponent). A split last axis
    is never gathered: each rank's max of its shard, made global as a (..., ranks) tensor, is
    the tiny tensor that moves."""
    if _split_axis_of(logits, logits.dim() - 1):
        last = S(logits.dim() - 1)
        local = logits.to_local().max(-1, keepdim=True).values
        parts = local.to_global(placement=logits.placement, sbp=logits.sbp)
        whole = parts.to_global(sbp=[B if s == last else s for s in logits.sbp])
        return whole.max(-1, keepdim=True).values
    return logits.max(-1, keepdim=True).values


def _whole(reduced, x):
    """A reduction of x over its last axis, made whole where that axis was split (each rank's
    sum was partial). Left partial, deduction would reduce-scatter it over the batch for the
    log that follows, and the backward would then meet the vocabulary-split logits with a
    batch-split gradient and swap the whole (B, T, V) tensor between the ranks."""
    last = S(x.dim() - 1)
    if _split_axis_of(x, x.dim() - 1):
        return reduced.to_global(sbp=[B if s == last else s for s in x.sbp])
    return reduced


class Head(nn.Module):
    def __init__(self, vocab_size, n_embd):
        super().__init__()
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.register_buffer("ids", flow.arange(vocab_size, device="cpu"), persistent=False)

    def forward(self, x):
        return self.lm_head(self.ln_f(x))

    def loss(self, logits, targets):
        """Mean cross-entropy over (B, T), as sums over the vocabulary axis: with logits split
        over the vocabulary, the sum of exponentials and the target's logit (picked by a one-hot
        product) are partial sums, and only (B, T) tensors are reduced."""
        with flow.no_grad():
            m = _row_max(logits)
        shifted = logits - m
        sum_exp = _whole(shifted.exp().sum(-1), logits)
        picked = (shifted * (targets.unsqueeze(-1) == self.ids).to(logits.dtype)).sum(-1)
        return (sum_exp.log() - picked).mean()


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, tied=True,
                 recompute=False):
        super().__init__()
        self.block_size = block_size
        self.embed = Embeddings(vocab_size, block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, block_size, recompute)
                                for _ in range(n_layer)])
        self.head = Head(vocab_size, n_embd)
        if tied:
            self.head.lm_head.weight = self.embed.wte.weight

    def forward(self, idx, targets=None):
        x = self.embed(idx)
        for block in self.h:
            x = block(x)
        logits = self.head(x)
        return logits, None if targets is None else self.head.loss(logits, targets)

    def stages(self):
        """The model cut in two for a pipeline: embedding + first half of the blocks, the rest +
        head."""
        k = (len(self.h) + 1) // 2
        return [nn.Sequential(self.embed, *self.h[:k]), nn.Sequential(*self.h[k:], self.head)]


def init_weights(model, seed=1234):
    """GPT-2's scheme from numpy, the same numbers in every process and layout."""
    rs = np.random.RandomState(seed)
    with flow.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                value = np.zeros(p.shape, np.float32)
            elif ".ln_" in name:
                value = np.ones(p.shape, np.float32)
            else:
                std = 0.02 / math.sqrt(2 * len(model.h)) if name.endswith("c_proj.weight") else 0.02
                value = rs.normal(0.0, std, tuple(p.shape)).astype(np.float32)
            p.copy_(flow.tensor(value))


def init_weights_sharded(model, seed=1234):
    """GPT-2's scheme from flow's counter-based generator: on global parameters each rank draws
    only its shard, and the values are the same for every layout (not numpy's: init_weights)."""
    flow.manual_seed(seed)
    with flow.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif ".ln_" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * len(model.h)) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)


# ---------------------------------------------------------------------------------------------
# Layouts: where each parameter and input goes.

def tp_sbp(name):
    """A parameter's (or buffer's) SBP on the tensor-parallel axis (Megatron)."""
    if any(f".{n}." in f".{name}" for n in ("attn.query", "attn.key", "attn.value", "mlp.c_fc")):
        return S(0)  # column parallel: output rows (and bias) split
    if name.endswith("c_proj.weight"):
        return S(1)  # row parallel: input columns split, the output a partial sum
    if name in ("embed.wte.weight", "head.lm_head.weight", "head.ids"):
        return S(0)  # vocabulary split
    return B


class Layout:
    """Where a --parallel choice puts the model and the data."""

    def __init__(self, parallel, world, n_head, vocab_size, tp=2, micro_batches=4,
                 schedule="1f1b", tied=True, device="cpu"):
        parts = parallel.split("+")
        if parts == ["auto"]:  # placements only: nn.Graph's auto-parallel lays the rest out
            parts = ["dp"]
        base = [p for p in parts if p != "zero"]
        if any(p not in LAYOUTS for p in parts) or len(base) > 1 or len(parts) != len(set(parts)):
            raise ValueError(f"gpt.py: --parallel must be one of {LAYOUTS} or a base layout "
                             f"joined with '+zero', got {parallel!r}")
        self.kind = base[0] if base else "dp"  # "zero" alone is dp + zero
        if parallel == "auto":
            self.kind = "auto"
        self.zero = "zero" in parts
        if self.zero and self.kind in ("none", "pp"):
            raise ValueError(f"gpt.py: --parallel {parallel}: zero composes with dp, tp and dp_tp, "
                             f"not with {self.kind}")
        if self.kind == "none" and world > 1:
            raise ValueError(f"gpt.py: --parallel none runs in one process, got {world} ranks; "
                             f"pick a layout: {LAYOUTS[1:]}")
        self.world, self.micro_batches, self.schedule = world, micro_batches, schedule
        self.device = device
        ranks = list(range(world))
        self.all = flow.placement(device, ranks=ranks) if self.kind != "none" else None
        self.tp = {"tp": world, "dp_tp": tp}.get(self.kind, 1)
        if self.kind == "dp_tp":
            if tp < 1 or world % tp or world // tp < 2 or tp < 2:
                raise ValueError(f"gpt.py: --parallel dp_tp needs a mesh of at least 2 x 2: "
                                 f"{world} ranks with --tp {tp}")
            self.placement = flow.placement(
                device, ranks=[ranks[i:i + tp] for i in range(0, world, tp)])
        elif self.kind == "pp":
            if world < 2 or world % 2:
                raise ValueError(f"gpt.py: --parallel pp runs 2 stages on an even number of "
                                 f"ranks, got {world}")
            if tied:
                raise ValueError("gpt.py: --parallel pp puts the token embedding and the head on "
                                 "different stages, so they cannot share a tied weight; pass "
                                 "--untied")
            half = world // 2
            self.stage_placements = [flow.placement(device, ranks=ranks[:half]),
                                     flow.placement(device, ranks=ranks[half:])]
            self.placement = None
        elif self.kind == "auto" and world >= 4 and tp >= 2 and world % tp == 0:
            # a (world / --tp) x --tp mesh, as dp_tp's; the graph chooses what each axis splits
            self.placement = flow.placement(
                device, ranks=[ranks[i:i + tp] for i in range(0, world, tp)])
        else:
            self.placement = self.all
        if self.tp > 1:
            what = f"--parallel {self.kind}"
            if n_head % self.tp:
                raise ValueError(f"gpt.py: {what}: n_head {n_head} is not divisible by the "
                                 f"tensor-parallel size {self.tp} (each rank needs whole heads)")
            if vocab_size % self.tp:
                raise ValueError(f"gpt.py: {what}: the vocabulary of {vocab_size} is not "
                                 f"divisible by the tensor-parallel size {self.tp} (pad it with "
                                 "--vocab_multiple)")

    def activation_sbp(self):
        """The layout of the activations that enter a LayerNorm: whole features on each rank
        (tensor parallel), the batch split over the data-parallel axis."""
        return {"dp": (S(0),), "tp": (B,), "dp_tp": (S(0), B)}[self.kind]

    def sbp_of(self, name):
        if self.kind in ("dp", "none"):
            return (B,)
        if self.kind == "auto":
            return (B,) * len(self.placement.hierarchy)
        if self.kind == "tp":
            return (tp_sbp(name),)
        return (B, tp_sbp(name))  # dp_tp

    def place(self, model):
        """Moves every parameter and buffer to its layout (in place: Parameters keep their
        identity, so an optimizer built afterwards or before sees the same objects)."""
        if self.kind == "none":
            return model.to(self.device)
        if self.kind == "pp":
            return model  # the Pipeline moves each stage to its placement
        # Deduction is greedy, one op at a time, and a partial sum costs it nothing to make
        # (S -> P and B -> P are local), so left alone it keeps the residual stream partial and
        # reduce-scatters it into each LayerNorm (a batch split), and then gathers weights
        # rather than activations. Megatron's plan pins the LayerNorm input whole, as OneFlow's
        # LiBai layers do with to_global: the layout says so here (the model code does not
        # change) and boxing inserts the all-reduce that this cast needs.
        act = self.activation_sbp() if self.kind != "auto" else None
        for mod in model.modules() if act is not None else ():
            if isinstance(mod, nn.LayerNorm):
                mod.register_forward_pre_hook(
                    lambda m, inputs: (inputs[0].to_global(sbp=act),) + tuple(inputs[1:]))
        whole = (B,) * len(self.placement.hierarchy)
        seen = set()
        with flow.no_grad():
            for prefix, mod in model.named_modules():
                for key, p in mod._parameters.items():
                    if p is None or id(p) in seen:
                        continue
                    seen.add(id(p))
                    name = f"{prefix}.{key}" if prefix else key
                    if p.is_global:  # created with its layout (--create direct / meta)
                        p.data = p.data.to_global(placement=self.placement, sbp=self.sbp_of(name))
                        continue
                    p.data = p.data.to_global(placement=self.placement, sbp=whole).to_global(
                        sbp=self.sbp_of(name))
                for key, b in list(mod._buffers.items()):
                    if b is not None:
                        name = f"{prefix}.{key}" if prefix else key
                        mod._buffers[key] = b.to_global(placement=self.placement, sbp=whole) \
                            .to_global(sbp=self.sbp_of(name))
        return model

    def data(self, x, stage=0):
        """A numpy batch, the same on every rank, as this layout's input (stage: pipeline stage
        whose placement gets it)."""
        t = flow.tensor(x)
        if self.kind == "none":
            return t.to(self.device)
        if self.kind == "pp":
            pl = self.stage_placements[stage]
            t = t.to_global(placement=pl, sbp=B)
            return t.to_global(sbp=S(0)) if pl.ranks.size > 1 else t
        t = t.to_global(placement=self.placement, sbp=(B,) * len(self.placement.hierarchy))
        if self.kind == "dp":
            return t.to_global(sbp=S(0))
        if self.kind == "dp_tp":
            return t.to_global(sbp=(S(0), B))
        return t  # tp: every rank the whole batch

    def whole(self, t):
        """t's whole value as numpy on every rank (for printing and sampling)."""
        if not t.is_global:
            return t.detach().numpy()
        return t.detach().to_global(placement=self.all, sbp=B).to_local().numpy()


class Trainer:
    """The model, its optimizer and one training step under a layout."""

    def __init__(self, model, layout, lr=1e-3, weight_decay=0.1, graph=False, accumulate=1):
        self.model, self.layout, self.accumulate = model, layout, accumulate
        if graph:
            # nn.Graph runs the whole step, pipeline and ZeRO included (use_graph): the stages
            # go to their placements here, and the optimizer is a plain AdamW.
            self.pipe = None
            if layout.kind == "pp":
                self.stages = model.stages()
                for stage, pl in zip(self.stages, layout.stage_placements):
                    stage.to_global(placement=pl, sbp=B)
            else:
                layout.place(model)
            self.opt = flow.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95),
                                        weight_decay=weight_decay)
            return
        if layout.kind == "pp":
            self.pipe = nn.parallel.Pipeline(model.stages(), layout.stage_placements,
                                             loss_fn=model.head.loss,
                                             num_micro_batches=layout.micro_batches,
                                             schedule=layout.schedule)
            params = list(self.pipe.parameters())
        else:
            self.pipe = None
            layout.place(model)
            params = list(model.parameters())
        if layout.zero:
            self.opt = flow.distributed.ZeroRedundancyOptimizer(
                params, optimizer_class=flow.optim.AdamW, lr=lr, betas=(0.9, 0.95),
                weight_decay=weight_decay)
        else:
            self.opt = flow.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)

    def use_graph(self, zero_stage=1, checkpointing=False):
        """Train through an nn.Graph (compile mode): the same model, traced once, replayed. The
        layout's extras are the graph's switches: pp sets each stage's placement on its modules
        (set_stage) with the micro-batches as gradient accumulation steps, zero enables the
        graph's ZeRO, --accumulate the accumulation steps, --checkpoint activation
        checkpointing on each block."""
        trainer, lay = self, self.layout

        class GPTGraph(nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = trainer.model
                self.add_optimizer(trainer.opt)
                if lay.zero:
                    self.config.enable_zero(True, stage=zero_stage, shard_min_size=1)
                if lay.kind == "auto":
                    self.config.enable_auto_parallel(True)
                if lay.kind == "pp":
                    for i, (stage, pl) in enumerate(zip(trainer.stages, lay.stage_placements)):
                        stage.to(nn.graph.GraphModule).set_stage(i, pl)
                    self.config.set_gradient_accumulation_steps(lay.micro_batches)
                elif trainer.accumulate > 1:
                    self.config.set_gradient_accumulation_steps(trainer.accumulate)
                for block in trainer.model.h:
                    block.to(nn.graph.GraphModule).activation_checkpointing = checkpointing

            def build(self, x, y):
                if lay.kind == "pp":
                    logits = trainer.stages[1](trainer.stages[0](x))
                    loss = trainer.model.head.loss(logits, y)
                else:
                    _, loss = self.model(x, y)
                loss.backward()
                return loss

        self.graph = GPTGraph()

    graph = None

    def step(self, xb, yb):
        """One optimizer step on the numpy batch; returns the loss (a tensor)."""
        lay = self.layout
        self.model.train()
        if self.graph is not None:
            if lay.kind == "pp":
                losses = self.graph(lay.data(xb, 0), lay.data(yb, 1))
            else:
                losses = self.graph(lay.data(xb), lay.data(yb))
            # with micro-batches: one loss each, stacked (OneFlow's graph outputs)
            return losses.mean() if losses.dim() else losses
        self.opt.zero_grad()
        if self.pipe is not None:
            loss = self.pipe.train_step(lay.data(xb, 0), lay.data(yb, 1))
        elif self.accumulate > 1:
            m = len(xb) // self.accumulate
            losses = []
            for k in range(self.accumulate):
                _, loss = self.model(lay.data(xb[k * m:(k + 1) * m]),
                                     lay.data(yb[k * m:(k + 1) * m]))
                (loss / self.accumulate).backward()
                losses.append(loss.detach())
            loss = flow.stack(losses).mean()
        else:
            _, loss = self.model(lay.data(xb), lay.data(yb))
            loss.backward()
        self.opt.step()
        return loss

    @flow.no_grad()
    def evaluate(self, xb, yb):
        lay = self.layout
        self.model.eval()
        if self.graph is not None and lay.kind == "pp":
            logits = self.stages[1](self.stages[0](lay.data(xb, 0)).to_global(
                placement=lay.stage_placements[1], sbp=B))
            loss = self.model.head.loss(logits, lay.data(yb, 1))
        elif self.pipe is not None:
            loss = self.model.head.loss(self.pipe(lay.data(xb, 0)), lay.data(yb, 1))
        else:
            loss = self.model(lay.data(xb), lay.data(yb))[1]
        return float(lay.whole(loss))

    @flow.no_grad()
    def sample(self, n_tokens, seed=0, top_k=5):
        """Greedy-ish sampling (top-k from numpy's generator, the same on every rank)."""
        lay, model = self.layout, self.model
        model.eval()
        rs = np.random.RandomState(seed)
        idx = np.zeros((1, 1), np.int64)
        for _ in range(n_tokens):
            cond = idx[:, -model.block_size:]
            if self.graph is not None and lay.kind == "pp":
                logits = self.stages[1](self.stages[0](lay.data(cond, 0)).to_global(
                    placement=lay.stage_placements[1], sbp=B))
            elif self.pipe is not None:
                logits = self.pipe(lay.data(cond, 0))
            else:
                logits = model(lay.data(cond))[0]
            last = lay.whole(logits[:, -1, :])[0].astype(np.float64)
            top = np.argsort(-last)[:top_k]
            p = np.exp(last[top] - last[top].max())
            idx = np.concatenate([idx, [[rs.choice(top, p=p / p.sum())]]], axis=1)
        return idx[0, 1:].tolist()

    def optimizer_state_bytes(self):
        if self.layout.zero and self.graph is None:
            return self.opt.state_bytes_per_rank()
        total = 0  # moments and buffers; 0-dim step counts aside, as ZeRO's count
        for value in self.opt.state.values():
            for t in value.values() if isinstance(value, dict) else ():
                if isinstance(t, flow.Tensor) and t.ndim > 0:
                    local = t.to_local() if t.is_global else t
                    total += local.numel() * local.element_size()
        return total


class _PreemptionFlag:
    """SIGTERM (the launcher's, on a preempted machine) asks for a checkpoint: the ranks agree
    after each step (any rank that got it makes all save at the same step) and stop."""

    def __init__(self, world):
        self.world, self.received = world, False
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum, frame):
        self.received = True

    def agreed(self):
        if self.world == 1:
            return self.received
        flag = flow.tensor([int(self.received)])
        flow.comm.all_reduce(flag, op=flow.comm.ReduceOp.MAX)
        return bool(flag.item())


def build(args, vocab_size, world):
    layout = Layout(args.parallel, world, args.n_head, vocab_size, tp=args.tp,
                    micro_batches=args.micro_batches, schedule=args.schedule,
                    tied=not args.untied, device=args.device)
    if args.create != "local" and layout.kind in ("none", "pp"):
        raise ValueError(f"gpt.py: --create {args.create} places each parameter on one "
                         f"placement (--parallel dp, tp, dp_tp, zero), got --parallel "
                         f"{args.parallel}")
    flow.cpu.reset_peak_memory_stats()
    base = flow.cpu.memory_allocated()
    # Under --graph, --checkpoint is the graph's switch on each block (use_graph).
    make = lambda: GPT(vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd,
                       tied=not args.untied, recompute=args.checkpoint and not args.graph)
    if args.create == "local":
        model = make()
        init_weights(model, args.seed)
        return model, layout
    with flow.device("meta"):  # shapes only: no rank holds the whole model
        model = make()
    pl = layout.placement
    if args.create == "direct":
        with flow.no_grad():
            for name, p in model.named_parameters():
                p.data = flow.empty(*p.shape, placement=pl, sbp=layout.sbp_of(name))
        init_weights_sharded(model, args.seed)
    else:  # meta: placed by Module.to_global, initialised by each module's reset_parameters()
        flow.manual_seed(args.seed)
        model.to_global(pl, sbp=layout.sbp_of)
    report_creation(args, model, base)
    return model, layout


def report_creation(args, model, base):
    """Each rank's peak memory while the model was created against its shard of the weights
    (the bound: 1.3 x shard + 50 MB)."""
    mb = 1 << 20
    shard = sum(p.to_local().numel() * p.element_size() for p in model.parameters())
    whole = sum(p.numel() * p.element_size() for p in model.parameters())
    peak = flow.cpu.max_memory_allocated() - base
    bound = 1.3 * shard + 50e6
    print(f"rank {flow.env.get_rank()}: --create {args.create} --parallel {args.parallel}: "
          f"weights {whole / mb:.1f} MiB, this rank's shard {shard / mb:.1f} MiB, creation peak "
          f"{peak / mb:.1f} MiB ({peak / max(shard, 1):.2f} x shard; bound 1.3 x shard + 50 MB = "
          f"{bound / mb:.1f} MiB: {'within' if peak <= bound else 'ABOVE'})", flush=True)


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parallel", default="none",
                    help="none | dp | tp | dp_tp | pp | zero, or dp+zero, tp+zero, dp_tp+zero")
    ap.add_argument("--tp", type=int, default=2, help="tensor-parallel size of the dp_tp mesh")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="where the model and the data live (cuda: each rank's GPU)")
    ap.add_argument("--micro_batches", type=int, default=4, help="pp: micro-batches per step")
    ap.add_argument("--schedule", default="1f1b", choices=("1f1b", "gpipe"), help="pp schedule")
    ap.add_argument("--graph", action="store_true",
                    help="train through an nn.Graph (compile mode) instead of eagerly")
    ap.add_argument("--zero_stage", type=int, default=1, choices=(1, 2),
                    help="--graph with zero: the graph's ZeRO stage (2 also shards gradients)")
    ap.add_argument("--accumulate", type=int, default=1,
                    help="gradient accumulation: micro-batches per step (not with pp, which has "
                    "--micro_batches)")
    ap.add_argument("--checkpoint", action="store_true",
                    help="activation checkpointing: recompute each block in backward")
    ap.add_argument("--create", default="local", choices=("local", "direct", "meta"),
                    help="local: the whole model on every rank, then placed (numpy init); "
                    "direct: each parameter created with its placement and sbp (GPT-2 init "
                    "drawn shard by shard); meta: built on the meta device, then Module."
                    "to_global (each module's reset_parameters). direct and meta print each "
                    "rank's peak memory during creation against its shard")
    ap.add_argument("--creation_only", action="store_true",
                    help="stop after creating (and placing) the model")
    ap.add_argument("--n_layer", type=int, default=2)
    ap.add_argument("--n_head", type=int, default=4)
    ap.add_argument("--n_embd", type=int, default=64)
    ap.add_argument("--block_size", type=int, default=32)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--untied", action="store_true", help="a head of its own, not wte's weight")
    ap.add_argument("--vocab_multiple", type=int, default=8,
                    help="pad the vocabulary to a multiple of this (it must split over tp ranks)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval_interval", type=int, default=50,
                    help="validation loss and a sample every this many steps (0: never)")
    ap.add_argument("--eval_batches", type=int, default=4)
    ap.add_argument("--sample_tokens", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--data", default=FORTUNES, help="folder of fortune databases")
    ap.add_argument("--save", help="folder of training-state checkpoints: written at the end "
                    "(and every --save_every steps); the newest complete one is resumed from at "
                    "the start, under any layout and world size")
    ap.add_argument("--save_every", type=int, default=0,
                    help="with --save: a checkpoint every this many steps (0: at the end only)")
    ap.add_argument("--load", help="start from this (sharded or whole) checkpoint")
    ap.add_argument("--tensorboard", metavar="DIR",
                    help="rank 0 writes the losses and tokens/s as TensorBoard event files here")
    ap.add_argument("--profile", metavar="DIR",
                    help="profile the second step (the first warms up): each rank writes its "
                    "trace here (python3 -m oneflow.profiler.merge DIR joins them) and rank 0 "
                    "prints the per-op table")
    return ap


class _Profiled:
    """--profile DIR: the second step recorded (shapes and memory), written per rank to DIR;
    rank 0 prints the table and the wall time of the step's own work."""

    def __init__(self, folder, say):
        from oneflow import profiler

        self.say = say
        self.marks, self.starts = [], []  # each step's end, and when the next one began
        self.prof = profiler.profile(
            activities=[profiler.ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
            schedule=profiler.schedule(wait=0, warmup=1, active=1, repeat=1),
            on_trace_ready=self._ready(profiler.tensorboard_trace_handler(folder)))
        self.prof.start()

    def _ready(self, write):
        def ready(prof):
            write(prof)
            self.say(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
            # the profiled step's own work: from the return of the prof.step() that began it to
            # the call that ends it (the profiler's switching in between is not the step's)
            wall = (self.marks[-1] - self.starts[-1]) * 1e3
            self.say(f"profiled step wall time: {wall:.3f}ms", flush=True)
        return ready

    def step(self):
        self.marks.append(time.perf_counter())
        self.prof.step()
        self.starts.append(time.perf_counter())

    def close(self):
        self.prof.stop()


def main(argv=None):
    args = parser().parse_args(argv)
    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    data = CharData(read_fortunes(args.data), args.vocab_multiple)
    try:
        model, layout = build(args, data.vocab_size, world)
    except ValueError as e:
        raise SystemExit(str(e))
    if layout.kind == "auto" and not args.graph:
        raise SystemExit("gpt: --parallel auto is nn.Graph's auto-parallel: it needs --graph")
    if args.zero_stage != 1 and not (args.graph and layout.zero):
        raise SystemExit("gpt: --zero_stage 2 is the graph's ZeRO: it needs --graph and a zero "
                         "layout (--parallel zero, dp+zero, tp+zero or dp_tp+zero)")
    if args.accumulate < 1 or args.batch_size % args.accumulate or \
            (args.accumulate > 1 and layout.kind == "pp"):
        raise SystemExit(f"gpt: --accumulate must be >= 1 and divide --batch_size "
                         f"{args.batch_size} (pp uses --micro_batches), got {args.accumulate}")
    if args.creation_only:
        layout.place(model)
        return
    trainer = Trainer(model, layout, lr=args.lr, graph=args.graph, accumulate=args.accumulate)
    if args.graph:
        trainer.use_graph(zero_stage=args.zero_stage, checkpointing=args.checkpoint)
    if args.load:
        model.load_state_dict(flow.load(args.load))
    say = print if rank == 0 else (lambda *a, **k: None)
    start = 0
    if args.save:
        # As torchrun's user scripts do: a (re)started job goes on from its last checkpoint.
        resumed = training_state.load(args.save, model=model, optimizer=trainer.opt)
        if resumed is not None:
            start = resumed["step"]
            say(f"resumed from {resumed['path']} (step {start}, saved by "
                f"{resumed['world_size']} rank(s)) on {world} rank(s)", flush=True)
    n_params = sum(int(np.prod(p.shape)) for p in model.parameters())
    say(f"gpt: {n_params} parameters, vocabulary {data.vocab_size}, {len(data.train)} training "
        f"characters, --parallel {args.parallel} on {world} rank(s)")
    tokens = args.batch_size * args.block_size
    preempted = _PreemptionFlag(world) if args.save else None
    writer = SummaryWriter(args.tensorboard) if args.tensorboard and rank == 0 else None
    prof = _Profiled(args.profile, say) if args.profile else None
    for step in range(start, args.steps):
        xb, yb = data.batch("train", args.batch_size, args.block_size, args.seed + step)
        t0 = time.perf_counter()
        loss = trainer.step(xb, yb)
        value = float(layout.whole(loss))
        dt = time.perf_counter() - t0
        line = f"step {step}: loss {value:.4f}, {tokens / dt:.0f} tokens/s"
        if trainer.pipe is not None:
            from oneflow.nn.parallel.pipeline import ideal_bubble
            line += (f", bubble {trainer.pipe.last_timing['bubble']:.2f} (ideal "
                     f"{ideal_bubble(2, layout.micro_batches):.2f})")
        say(line, flush=True)
        if writer is not None:
            writer.add_scalar("train/loss", value, step)
            writer.add_scalar("train/tokens_per_s", tokens / dt, step)
        if prof is not None:
            prof.step()
        if args.eval_interval and ((step + 1) % args.eval_interval == 0 or step + 1 == args.steps):
            val = np.mean([trainer.evaluate(*data.batch("val", args.batch_size, args.block_size,
                                                        10 ** 6 + k))
                           for k in range(args.eval_batches)])
            text = data.decode(trainer.sample(args.sample_tokens, seed=step))
            say(f"step {step}: validation loss {val:.4f} | sample: {text!r}", flush=True)
            if writer is not None:
                writer.add_scalar("val/loss", val, step)
                writer.add_text("sample", text, step)
        if preempted is not None and preempted.agreed() and step + 1 < args.steps:
            path = training_state.save(args.save, step + 1, model=model, optimizer=trainer.opt)
            say(f"received SIGTERM: saved {path}; stopping", flush=True)
            return
        if args.save and args.save_every and (step + 1) % args.save_every == 0 \
                and step + 1 < args.steps:
            training_state.save(args.save, step + 1, model=model, optimizer=trainer.opt)
    if prof is not None:
        prof.close()
    if writer is not None:
        writer.close()
    print(f"rank {rank}: optimizer state {trainer.optimizer_state_bytes()} bytes", flush=True)
    if args.save:
        path = training_state.save(args.save, args.steps, model=model, optimizer=trainer.opt)
        say(f"saved a sharded checkpoint to {path}")


if __name__ == "__main__":
    main()
