"""Models as the planner sees them: a stem, one block repeated `layers` times, a head; each part
says, for a micro-batch of b samples on one of t tensor-parallel ranks, its ops (ops.py), the
collectives tensor parallelism adds (collectives.Comm), its parameters and what it hands on.

    m = gpt(layers=24, hidden=2304, heads=24, vocab=51200, seq=2048, batch=512)
    m.block.part(b=1, t=2).ops          # one transformer layer's ops on one of 2 TP ranks

This is the seam for other front ends: trace.py traces a model on meta tensors (no weights
made) into the same ModelSpec, its repeated blocks collapsed into `block` x `layers`, its ops
priced by ops.py from the traced shapes (tensor parallelism not yet: its collectives would be
those its SBP signatures need). The analytic models: gpt (Megatron-LM's GPT, the layout of
Narayanan et al. 2021) and mlp (Megatron's column- then row-parallel pairs).
"""

import functools
from dataclasses import dataclass, replace

from oneflow.distributed.plan import ops as O
from oneflow.distributed.plan.collectives import Comm

_ITEMSIZE = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class Precision:
    """Bytes per parameter kept on a device, and what the optimizer step moves per parameter."""
    dtype: str  # compute dtype: a key of the profile's peak_flops
    itemsize: int
    param_bytes: int
    grad_bytes: int
    optimizer_bytes: int  # Adam's state (with the fp32 master copy under mixed precision)
    optimizer_traffic: int  # bytes read and written per parameter by one Adam step


def precision(dtype):
    """fp32: weights, gradients, Adam's m and v in fp32. bf16 / fp16: mixed precision as
    Megatron-LM does it: 16-bit weights and gradients, fp32 master weights, m and v."""
    if dtype not in _ITEMSIZE:
        raise ValueError(f"plan: unknown dtype {dtype!r}; known: {', '.join(_ITEMSIZE)}")
    if _ITEMSIZE[dtype] == 4:
        return Precision(dtype, 4, 4, 4, 8, 28)
    return Precision(dtype, 2, 2, 2, 12, 28)


@dataclass(frozen=True)
class Part:
    ops: tuple
    comms: tuple = ()
    params: float = 0  # on one TP rank
    out_bytes: float = 0  # the activation handed to the next part (a pipeline send), one TP rank
    out_split: bool = False  # out_bytes is already 1/t of it (sequence parallel)


@dataclass(frozen=True)
class GptBlock:
    hidden: int
    heads: int
    seq: int
    ffn: int
    itemsize: int
    dropout: bool = True
    flash: bool = False  # the attention core as one fused kernel (ops.flash_attention)
    sequence_parallel: bool = False  # Korthikanti et al.: the non-TP ops on 1/t of the tokens

    @functools.lru_cache(maxsize=None)
    def part(self, b, t):
        h, s, f, z = self.hidden, self.seq, self.ffn, self.itemsize
        n = b * s  # tokens
        sp = self.sequence_parallel and t > 1
        r = n // t if sp else n  # the tokens of the ops that TP does not split
        a, d = self.heads // t, h // self.heads
        core = O.flash_attention(b, a, s, d, z) if self.flash else O.attention(b, a, s, d, z, self.dropout)
        drop = [O.dropout(r * h, z)] if self.dropout else []
        qkv, fc = O.linear(n, h, 3 * h // t, z, "qkv"), O.linear(n, h, f // t, z, "fc")
        if sp:  # the column-parallel inputs are kept as the 1/t shards they were gathered from
            qkv, fc = (replace(o, saved=o.saved / t) for o in (qkv, fc))
        ops = [O.layer_norm(r, h, z, "ln_1"), qkv] + core
        ops += [O.linear(n, h // t, h, z, "attention out")] + drop + [
            O.elementwise(r * h, z, name="residual add"), O.layer_norm(r, h, z, "ln_2"), fc,
            O.gelu(n * f // t, z), O.linear(n, f // t, h, z, "proj")] + drop + [
            O.elementwise(r * h, z, name="residual add")]
        x = n * h * z
        if not t > 1:
            comms = ()
        elif sp:  # S(0)->B before each column-parallel linear, P->S(0) after each row-parallel
            # one; backward the reverse, and the kept shards gathered again for the weights'
            # gradients.
            ag, rs = Comm("all_gather", x, "tp", "fwd"), Comm("reduce_scatter", x, "tp", "fwd")
            bag, brs = replace(ag, phase="bwd"), replace(rs, phase="bwd")
            comms = (ag, rs) * 2 + (bag, brs) * 2 + (bag,) * 2
        else:  # row-parallel outputs P->B forward; column-parallel inputs' gradients backward
            comms = (Comm("all_reduce", x, "tp", "fwd"),) * 2 + (Comm("all_reduce", x, "tp", "bwd"),) * 2
        params = (3 * h * h + 3 * h + h * h + h * f + f + f * h) / t + 2 * h + 4 * h
        return Part(tuple(ops), comms, params, r * h * z, sp)


@dataclass(frozen=True)
class GptStem:
    hidden: int
    vocab: int
    seq: int
    itemsize: int
    dropout: bool = True

    @functools.lru_cache(maxsize=None)
    def part(self, b, t):
        h, z, n = self.hidden, self.itemsize, b * self.seq
        ops = (O.embedding(n, self.vocab // t, h, z, "token embedding"),
               O.embedding(n, self.seq, h, z, "position embedding"),
               O.elementwise(n * h, z)) + ((O.dropout(n * h, z),) if self.dropout else ())
        # The vocabulary-parallel lookup: each rank's rows, summed (P->B).
        comms = (Comm("all_reduce", n * h * z, "tp", "fwd"),) if t > 1 else ()
        return Part(ops, comms, self.vocab * h / t + self.seq * h, n * h * z)


@dataclass(frozen=True)
class GptHead:
    hidden: int
    vocab: int
    seq: int
    itemsize: int
    tied: bool = True  # False: a weight of its own (vocab x hidden)

    @functools.lru_cache(maxsize=None)
    def part(self, b, t):
        h, z, n = self.hidden, self.itemsize, b * self.seq
        ops = (O.layer_norm(n, h, z, "ln_f"), O.linear(n, h, self.vocab // t, z, "logits"),
               O.cross_entropy(n, self.vocab // t, z))
        comms = ()
        if t > 1:  # the split-vocabulary loss: max, sum and target logit per token (fp32)
            comms = (Comm("all_reduce", 3 * 4 * n, "tp", "fwd"), Comm("all_reduce", n * h * z, "tp", "bwd"))
        own = 0 if self.tied else self.vocab * h / t
        return Part(ops, comms, 2 * h + own, 4 * n)


@dataclass(frozen=True)
class MlpBlock:
    """Linear(width, width * expand), ReLU, Linear(width * expand, width): column- then
    row-parallel under TP (one all-reduce forward, one backward)."""
    width: int
    expand: int
    itemsize: int

    @functools.lru_cache(maxsize=None)
    def part(self, b, t):
        w, e, z = self.width, self.width * self.expand, self.itemsize
        ops = (O.linear(b, w, e // t, z, "fc"), O.elementwise(b * e // t, z, 1, "relu"),
               O.linear(b, e // t, w, z, "proj"))
        comms = ()
        if t > 1:
            comms = (Comm("all_reduce", b * w * z, "tp", "fwd"), Comm("all_reduce", b * w * z, "tp", "bwd"))
        # relu keeps its output for backward: count it with the second linear's input.
        return Part(ops, comms, (2 * w * e + e) / t + w, b * w * z)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    block: object  # .part(b, t) -> Part
    layers: int
    batch: int  # samples per step
    precision: Precision
    stem: object = None
    head: object = None
    tied_params: float = 0  # parameters the stem and head share (a copy on each end of a pipeline)
    tp_divides: tuple = ()  # (what, size): sizes that the TP degree must divide
    seq: int = 1  # tokens per sample

    def check_tp(self, t):
        """None when t tensor-parallel ranks fit the model, else why not (one line)."""
        for what, size in self.tp_divides:
            if size % t:
                return f"tp {t} does not divide the {what} ({size})"
        return None

    def parts(self):
        return [p for p in (self.stem, self.block, self.head) if p is not None]

    def parameters(self):
        n = self.layers * self.block.part(1, 1).params
        return n + sum(p.part(1, 1).params for p in (self.stem, self.head) if p is not None)

    def model_flops(self):
        """FLOPs of one training step's matmuls, forward and backward, without recomputation
        (Narayanan et al.'s model FLOPs)."""
        def gemm(part):
            return sum(o.flops + o.bwd_flops for o in part.part(1, 1).ops if o.gemm)
        stem_head = sum(gemm(p) for p in (self.stem, self.head) if p is not None)
        return self.batch * (self.layers * gemm(self.block) + stem_head)

    def recompute_flops(self):
        """The matmul FLOPs activation checkpointing adds per step (each block's forward again)."""
        return self.batch * self.layers * sum(o.flops for o in self.block.part(1, 1).ops if o.gemm)


def gpt(layers, hidden, heads, vocab, seq, batch, dtype="fp16", ffn=None, name=None,
        dropout=True, tied=True, flash_attention=False, sequence_parallel=False):
    """Megatron-LM's GPT: learned positions, pre-LN blocks, a 4h MLP, the head tied to the
    token embedding (tied=False: a head of its own), dropout everywhere (dropout=False: none,
    as examples/gpt.py). As Megatron-LM 2021 by default; flash_attention and
    sequence_parallel as Megatron-LM runs them since 2022."""
    for what, v in (("layers", layers), ("hidden", hidden), ("heads", heads), ("vocab", vocab),
                    ("seq", seq), ("batch", batch)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"plan: gpt needs a positive integer {what}, got {v!r}")
    if hidden % heads:
        raise ValueError(f"plan: gpt: hidden {hidden} does not split into {heads} heads")
    pr = precision(dtype)
    ffn = ffn or 4 * hidden
    z = pr.itemsize
    block = GptBlock(hidden, heads, seq, ffn, z, dropout, flash_attention, sequence_parallel)
    spec = ModelSpec(name or "GPT", block, layers,
                     batch, pr, GptStem(hidden, vocab, seq, z, dropout),
                     GptHead(hidden, vocab, seq, z, tied), tied_params=vocab * hidden if tied else 0,
                     tp_divides=(("heads", heads), ("vocabulary", vocab), ("ffn", ffn)), seq=seq)
    return spec


def mlp(layers, width, batch, expand=4, dtype="fp32", name=None):
    for what, v in (("layers", layers), ("width", width), ("batch", batch), ("expand", expand)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"plan: mlp needs a positive integer {what}, got {v!r}")
    pr = precision(dtype)
    return ModelSpec(name or "MLP", MlpBlock(width, expand, pr.itemsize), layers, batch, pr,
                     tp_divides=(("hidden width", width * expand),))
