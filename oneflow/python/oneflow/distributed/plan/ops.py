"""What one op costs on one device: FLOPs, bytes moved through device memory, and bytes kept for
backward, forward and backward, from its shapes alone (no tensors are made).

    c = linear(tokens=4096, d_in=1024, d_out=4096, itemsize=2)
    c.flops, c.bwd_flops          # 2*4096*1024*4096 and twice that
    c.saved                       # the input, 4096*1024*2 bytes

Conventions (those of Narayanan et al. 2021 and Korthikanti et al. 2022, so the totals can be
checked against their closed forms): a matmul of (m, k) by (k, n) is 2mkn FLOPs forward and
twice that backward (one product for the input's gradient, one for the weight's); only matmuls
and convolutions are `gemm` ops, whose FLOPs count as model FLOPs and run at the GEMM rate;
the others are priced by their bytes. A dropout keeps a one-byte mask; a GELU, a layer norm and
a linear keep their input; a softmax keeps its output; a residual add keeps nothing.
Every function returns one OpCost or a list of them (attention: its five ops).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class OpCost:
    name: str
    flops: float  # forward
    bwd_flops: float
    bytes: float  # read and written in device memory, forward
    bwd_bytes: float
    saved: float  # bytes kept from forward for backward
    gemm: bool = False  # runs on the matrix units; its FLOPs are model FLOPs
    kernels: int = 1  # launches forward (backward: twice as many)
    bwd_extra_flops: float = 0.0  # backward work that is not model FLOPs (recomputed scores)


def matmul(m, k, n, itemsize, batch=1, saves_both=False, name="matmul"):
    """(batch, m, k) @ (batch, k, n). saves_both: both operands are activations (attention's
    products) rather than an activation and a weight."""
    a, b, c = batch * m * k, batch * k * n, batch * m * n
    f = 2.0 * batch * m * k * n
    return OpCost(name, f, 2 * f, (a + b + c) * itemsize, 2 * (a + b + c) * itemsize,
                  (a + b if saves_both else a) * itemsize, gemm=True)


def linear(tokens, d_in, d_out, itemsize, name="linear"):
    """y = x W^T + b over `tokens` rows (the bias add is fused into the GEMM)."""
    return matmul(tokens, d_in, d_out, itemsize, name=name)


def conv2d(n, c_in, c_out, h_out, w_out, kernel, itemsize, h_in=None, w_in=None, name="conv2d"):
    """A convolution as its implicit GEMM: (n*h_out*w_out, c_in*k*k) @ (c_in*k*k, c_out)."""
    h_in, w_in = h_in or h_out, w_in or w_out
    m, k = n * h_out * w_out, c_in * kernel * kernel
    f = 2.0 * m * k * c_out
    x, w, y = n * c_in * h_in * w_in, k * c_out, m * c_out
    return OpCost(name, f, 2 * f, (x + w + y) * itemsize, 2 * (x + w + y) * itemsize,
                  x * itemsize, gemm=True)


def layer_norm(rows, cols, itemsize, name="layer_norm"):
    n = rows * cols
    # Keeps its input (mean and rstd per row are small: 8 bytes a row).
    return OpCost(name, 8.0 * n, 10.0 * n, 2 * n * itemsize, 3 * n * itemsize,
                  n * itemsize + 8 * rows)


def softmax(rows, cols, itemsize, name="softmax"):
    """Scale, mask and softmax in one kernel (Megatron's fused softmax); keeps its output."""
    n = rows * cols
    return OpCost(name, 5.0 * n, 4.0 * n, 2 * n * itemsize, 3 * n * itemsize, n * itemsize)


def gelu(n, itemsize, name="gelu"):
    return OpCost(name, 8.0 * n, 12.0 * n, 2 * n * itemsize, 3 * n * itemsize, n * itemsize)


def dropout(n, itemsize, name="dropout"):
    """Writes its output and a one-byte mask; keeps the mask."""
    return OpCost(name, 1.0 * n, 1.0 * n, 2 * n * itemsize + n, 2 * n * itemsize + n, n)


def elementwise(n, itemsize, inputs=2, name="add"):
    """An n-ary elementwise op that keeps nothing (a residual add: its gradient passes on)."""
    return OpCost(name, 1.0 * n * (inputs - 1), 0.0, (inputs + 1) * n * itemsize,
                  (inputs + 1) * n * itemsize, 0)


def embedding(tokens, vocab, dim, itemsize, name="embedding"):
    """A lookup of `tokens` rows from a (vocab, dim) table; backward writes the whole table's
    gradient (zeroed, then scattered into), and keeps the indices (8 bytes each)."""
    n = tokens * dim
    return OpCost(name, 0.0, 1.0 * n, 2 * n * itemsize + 8 * tokens,
                  2 * n * itemsize + vocab * dim * itemsize + 8 * tokens, 8 * tokens)


def cross_entropy(tokens, vocab, itemsize, name="cross_entropy"):
    """Softmax cross-entropy over `vocab` logits per token, in fp32 (as mixed precision does):
    reads the logits, keeps the fp32 probabilities, backward writes the logits' gradient."""
    n = tokens * vocab
    return OpCost(name, 5.0 * n, 2.0 * n, n * (itemsize + 4), n * (4 + itemsize), 4 * n,
                  kernels=3)


def flash_attention(batch, heads, seq, head_dim, itemsize):
    """Self-attention's core as one fused kernel (FlashAttention): the same products, but the
    scores never reach device memory; backward computes them again (one more product, not
    counted as model FLOPs). Keeps Q, K, V and a float per row (the output is kept by the
    projection that reads it)."""
    rows = batch * heads * seq
    qkvo = 4 * rows * head_dim * itemsize
    f = 4.0 * batch * heads * seq * seq * head_dim
    return [OpCost("flash attention", f, 2 * f, qkvo + 4 * rows, 2 * qkvo + 4 * rows,
                   qkvo - rows * head_dim * itemsize + 4 * rows, gemm=True, bwd_extra_flops=f / 2)]


def attention(batch, heads, seq, head_dim, itemsize, dropout_p=True):
    """Self-attention's core on local heads (no flash attention: the scores are materialised,
    as in Megatron-LM 2021): Q K^T, fused scale/mask/softmax, dropout, probabilities @ V."""
    rows = batch * heads * seq
    ops = [matmul(seq, head_dim, seq, itemsize, batch=batch * heads, saves_both=True,
                  name="attention scores"),
           softmax(rows, seq, itemsize, name="attention softmax")]
    if dropout_p:
        ops.append(dropout(rows * seq, itemsize, name="attention dropout"))
    ops.append(matmul(seq, seq, head_dim, itemsize, batch=batch * heads, saves_both=True,
                      name="attention values"))
    return ops
