"""Per-op timings behind bench_train.py: the ops of the MLP and LeNet at their training shapes.

    tools/python tools/bench/bench_ops.py [--quick] [--filter SUBSTRING]

For each op: forward time (inputs require grad, as in training) and forward+backward time
(backward from a fixed random output gradient; leaf .grad reset to None each time, so the
cost of storing a fresh leaf gradient is included, as with zero_grad(set_to_none=True)).
Optimizer rows time one step() on one parameter of the given shape with a fresh gradient.
µs, median over repeats, one thread, oneflow vs PyTorch; "slower" = ours / torch.
Use it to find which kernel to optimise when bench_train.py misses its targets.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median, pin_single_thread  # noqa: E402

pin_single_thread()  # before oneflow / torch are imported

import numpy as np  # noqa: E402
import oneflow as flow  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape, dtype=np.float32)


# name: (input arrays, fn(F, *tensors) -> output); F is torch.nn.functional or flow.nn.functional.
# Every float input is a leaf that requires grad; int64 inputs (labels) do not.
OPS = {
    "linear 64x784->512": ((randn(64, 784), randn(512, 784), randn(512)), lambda F, x, w, b: F.linear(x, w, b)),
    "linear 64x512->512": ((randn(64, 512), randn(512, 512), randn(512)), lambda F, x, w, b: F.linear(x, w, b)),
    "relu 64x512": ((randn(64, 512),), lambda F, x: F.relu(x)),
    "relu 64x6x28x28": ((randn(64, 6, 28, 28),), lambda F, x: F.relu(x)),
    "conv2d 64x3x32x32 k5 ->6": ((randn(64, 3, 32, 32), randn(6, 3, 5, 5), randn(6)),
                                 lambda F, x, w, b: F.conv2d(x, w, b)),
    "conv2d 64x6x14x14 k5 ->16": ((randn(64, 6, 14, 14), randn(16, 6, 5, 5), randn(16)),
                                  lambda F, x, w, b: F.conv2d(x, w, b)),
    "max_pool2d 64x6x28x28": ((randn(64, 6, 28, 28),), lambda F, x: F.max_pool2d(x, 2)),
    "max_pool2d 64x16x10x10": ((randn(64, 16, 10, 10),), lambda F, x: F.max_pool2d(x, 2)),
    "cross_entropy 64x10": ((randn(64, 10), rng.integers(0, 10, 64)), lambda F, x, y: F.cross_entropy(x, y)),
}



def _attention(F, q, k, v):
    """Causal attention: scaled_dot_product_attention where the library has it (ours; torch >=
    2.0), else the same math written out (Debian's torch 1.13)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    lib = torch if F is torch.nn.functional else flow
    t = q.shape[-2]
    s = (q @ k.transpose(-2, -1)) * (1.0 / q.shape[-1] ** 0.5)
    s = s.masked_fill(lib.ones(t, t, dtype=lib.bool).tril().logical_not(), float("-inf"))
    return F.softmax(s, -1) @ v


# GPT-small shapes (issue 15's targets): batch 8, sequence 256, 12 heads x 64 = 768.
OPS.update({
    "gpt layer_norm 2048x768": ((randn(2048, 768), randn(768), randn(768)),
                                lambda F, x, w, b: F.layer_norm(x, (768,), w, b)),
    "gpt softmax 8x12x256x256": ((randn(8, 12, 256, 256),), lambda F, x: F.softmax(x, -1)),
    "gpt embedding 8x256 of 50257x768": ((rng.integers(0, 50257, (8, 256)), randn(50257, 768)),
                                         lambda F, i, w: F.embedding(i, w)),
    "gpt attention 8x12x256x64": ((randn(8, 12, 256, 64), randn(8, 12, 256, 64), randn(8, 12, 256, 64)),
                                  _attention),
    "gpt gelu 2048x3072": ((randn(2048, 3072),), lambda F, x: F.gelu(x)),
})

OPTIMIZERS = {
    "SGD step 512x784": ((512, 784), lambda lib, ps: lib.optim.SGD(ps, lr=0.01)),
    "SGD step 512x512": ((512, 512), lambda lib, ps: lib.optim.SGD(ps, lr=0.01)),
    "Adam step 120x400": ((120, 400), lambda lib, ps: lib.optim.Adam(ps, lr=1e-3)),
}


def time_us(fn, repeats, loops):
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter() - start) / loops * 1e6)
    return median(samples)


def op_case(lib, arrays, fn):
    F = lib.nn.functional
    inputs = [lib.tensor(a, requires_grad=a.dtype == np.float32) for a in arrays]
    leaves = [t for t in inputs if t.requires_grad]
    grad_out = lib.tensor(np.ones(tuple(fn(F, *inputs).shape), dtype=np.float32))

    def forward():
        return fn(F, *inputs)

    def forward_backward():
        for t in leaves:
            t.grad = None
        forward().backward(grad_out)

    return forward, forward_backward


def optimizer_case(lib, shape, make_opt):
    p = lib.nn.Parameter(lib.tensor(randn(*shape)))
    opt = make_opt(lib, [p])
    grad = lib.tensor(randn(*shape))

    def step():
        p.grad = grad  # as left by backward; the step must not depend on it being fresh
        opt.step()

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--filter", default="", help="only rows whose name contains this")
    args = parser.parse_args()
    repeats, loops = (3, 5) if args.quick else (7, 20)
    libs = {"ours": flow, "torch": torch}

    print(f"{'op':28s} {'fwd ours':>9s} {'torch':>8s} {'slower':>7s}   "
          f"{'fwd+bwd ours':>12s} {'torch':>8s} {'slower':>7s}   (µs)")
    for name, (arrays, fn) in OPS.items():
        if args.filter not in name:
            continue
        fwd, both = {}, {}
        for lib_name, lib in libs.items():
            forward, forward_backward = op_case(lib, arrays, fn)
            fwd[lib_name] = time_us(forward, repeats, loops)
            both[lib_name] = time_us(forward_backward, repeats, loops)
        print(f"{name:28s} {fwd['ours']:9.1f} {fwd['torch']:8.1f} {fwd['ours'] / fwd['torch']:6.2f}x   "
              f"{both['ours']:12.1f} {both['torch']:8.1f} {both['ours'] / both['torch']:6.2f}x")
    for name, (shape, make_opt) in OPTIMIZERS.items():
        if args.filter not in name:
            continue
        t = {lib_name: time_us(optimizer_case(lib, shape, make_opt), repeats, loops)
             for lib_name, lib in libs.items()}
        print(f"{name:28s} {t['ours']:9.1f} {t['torch']:8.1f} {t['ours'] / t['torch']:6.2f}x")


if __name__ == "__main__":
    main()
