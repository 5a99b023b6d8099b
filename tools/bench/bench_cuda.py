"""GPU throughput: oneflow's CUDA backend vs PyTorch on the same GPU, side by side in one process.

    tools/python tools/bench/bench_cuda.py [--quick] [--json OUT.json] [--only CASE]

Cases (identical inputs and initial weights for both frameworks, copied from numpy / the torch
model; the same TF32 settings for both, set explicitly):
  matmul fp32:  4096x4096 @ 4096x4096 float32, TF32 off (flow/torch.backends.cuda.matmul.allow_tf32
                = False, both defaults): full-precision float32 math
  matmul bf16:  the same in bfloat16
  conv2d:       a ResNet-style 3x3 layer, input 64x256x56x56 float32, weight 256x256x3x3, stride 1,
                padding 1, no bias; cuDNN TF32 on (flow/torch.backends.cudnn.allow_tf32 = True, both
                defaults; cuDNN algorithms by heuristics, torch.backends.cudnn.benchmark off, as ours);
                forward alone, and forward + backward (input and weight gradients from a fixed
                output gradient, the leaves' .grad reset to None each time)
  lenet:        one training step of bench_train.py's LeNet (3x32x32 inputs), batch 256
  mobilenetv2:  one training step of examples/mobilenetv2_global.py's MobileNetV2 (the CIFAR
                variant, width 1.0, dropout 0.2, 3x32x32 inputs), batch 256
  attention:    F.scaled_dot_product_attention, causal, q/k/v 8x12x1024x64, forward + backward
                (q, k, v gradients from a fixed output gradient), float32 and bfloat16;
                TFLOP/s counts the causal half of 4*B*H*L*S*E forward and 2.5x that backward
A training step is zero_grad(set_to_none=True), forward, CrossEntropyLoss, backward,
SGD(lr=0.01, momentum=0.9) step; float32, matmul TF32 off and cuDNN TF32 on (both defaults).

Timing: each framework warms up (at least ~0.2 s of work, which also sizes the window), then
timed windows of N iterations, bracketed by flow.cuda.synchronize() / torch.cuda.synchronize(),
alternate between the two frameworks (so clock or thermal drift hits both alike); the figure is
the median over the windows. N is the same for both, sized so a window takes ~0.3 s (--quick:
~0.1 s). TFLOP/s counts 2*M*N*K for matmul and 2*N*K*C*R*S*P*Q for the conv forward (3x that
for forward + backward); "peak" is the fraction of the card's dense peak (PEAKS below) for the
precision used: fp32 for the fp32 matmul, tf32 for the conv, bf16 for the bf16 matmul.
Targets: ours/torch >= 0.9 for every row.

Without a usable GPU for oneflow or for PyTorch it prints "bench_cuda: skipped: <reason>",
writes no rows (an empty list to --json) and exits 0, so run_all.sh runs it on CPU machines too.
"""

import argparse
import itertools
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
sys.path.insert(0, HERE)
from common import median, save_results  # noqa: E402

import numpy as np  # noqa: E402
import oneflow as flow  # noqa: E402

# Dense peaks in TFLOP/s (no structured sparsity), from NVIDIA's H100 Tensor Core GPU datasheet:
# fp32 is the CUDA-core figure; the datasheet's TF32 and BF16 Tensor Core figures are "with
# sparsity", so they are halved here (SXM: 989 -> 494.5, 1979 -> 989.5). The H200 has the H100
# SXM's compute (its datasheet lists the same figures; only memory differs).
PEAKS = {
    "H100 SXM": {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5},
    "H100 PCIe": {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5},
    "H200": {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5},
}


def card_of(device_name):
    """The PEAKS key for torch.cuda.get_device_name(), or None for a card not in the table."""
    if "H200" in device_name:  # "NVIDIA H200", "NVIDIA H200 NVL"... (GH200 too: same compute)
        return "H200"
    if "H100" in device_name:
        if "PCIe" in device_name:
            return "H100 PCIe"
        if "NVL" in device_name:
            return None  # other clocks and figures than the SXM; not in the table
        return "H100 SXM"  # "NVIDIA H100 80GB HBM3"
    return None


TARGET_RATIO = 0.9  # ours/torch, every row
MATMUL = 4096
CONV = dict(n=64, c=256, k=256, h=56, w=56, r=3, s=3, pad=1)
TRAIN_BATCH = 256
NUM_BATCHES = 4  # a small pool of random batches, cycled


def skip_reason():
    """'' when both frameworks can run on a GPU, else why not."""
    if not flow.backends.cuda.is_built():
        return "oneflow was built without CUDA"
    if not flow.cuda.is_available():
        return f"no CUDA device for oneflow ({flow.cuda.unavailable_reason()})"
    try:
        import torch
    except ImportError as e:
        return f"PyTorch is not importable ({e})"
    if torch.version.cuda is None:
        return f"PyTorch {torch.__version__} has no CUDA support"
    if not torch.cuda.is_available():
        return "no CUDA device for PyTorch"
    return ""


# ----------------------------------------------------------------------------- timing


def time_window(fn, sync, iters):
    """Seconds for `iters` calls of fn, the device idle before and finished after."""
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return time.perf_counter() - start


def warm_up(fn, sync, seconds):
    """Runs fn in doubling windows until `seconds` were spent (allocator pools, library handles,
    algorithm choice, clocks); returns the seconds per call of the last window."""
    iters, spent = 1, 0.0
    while True:
        t = time_window(fn, sync, iters)
        spent += t
        if spent >= seconds:
            return t / iters
        iters *= 2


def compare(cases, repeats, window_s):
    """cases: {"ours": (fn, sync), "torch": (fn, sync)} -> ({name: median seconds per call}, N)."""
    per_call = {name: warm_up(fn, sync, max(0.2, window_s)) for name, (fn, sync) in cases.items()}
    iters = max(3, min(10000, math.ceil(window_s / min(per_call.values()))))
    samples = {name: [] for name in cases}
    for _ in range(repeats):
        for name, (fn, sync) in cases.items():
            samples[name].append(time_window(fn, sync, iters) / iters)
    return {name: median(s) for name, s in samples.items()}, iters


def check_close(what, ours, theirs, tol):
    """Exits the run (status 1) when ours (numpy) is not theirs (numpy) within a relative
    Frobenius error tol: a fast kernel that computes something else would otherwise look like
    a win."""
    ours, theirs = ours.astype(np.float64), theirs.astype(np.float64)
    err = np.linalg.norm(ours - theirs) / max(np.linalg.norm(theirs), 1e-30)
    if not err <= tol:
        sys.exit(f"bench_cuda: {what}: ours differs from torch: relative error {err:.2e} > {tol:g}")


# ----------------------------------------------------------------------------- cases


class Bench:
    def __init__(self, torch, repeats, window_s):
        self.torch = torch
        self.repeats, self.window_s = repeats, window_s
        self.sync = {"ours": flow.cuda.synchronize, "torch": torch.cuda.synchronize}
        self.libs = {"ours": flow, "torch": torch}
        self.device_name = torch.cuda.get_device_name(0)
        self.card = card_of(self.device_name)
        self.rng = np.random.default_rng(0)
        self.rows = []

    def to_cuda(self, name, array, requires_grad=False):
        return self.libs[name].tensor(array, device="cuda", requires_grad=requires_grad)

    def numpy(self, t):
        return t.detach().float().to("cpu").numpy()

    def set_tf32(self, matmul, cudnn):
        for lib in self.libs.values():
            lib.backends.cuda.matmul.allow_tf32 = matmul
            lib.backends.cudnn.allow_tf32 = cudnn
        self.torch.backends.cudnn.benchmark = False  # heuristics, as ours

    def free(self):
        flow.cuda.synchronize()
        self.torch.cuda.synchronize()
        flow.cuda.empty_cache()
        self.torch.cuda.empty_cache()

    def report(self, metric, unit, seconds, work, precision=None, per="call"):
        """One row: `work` (FLOPs or samples) per call over the median seconds per call."""
        scale = 1e12 if unit == "TFLOP/s" else 1.0
        value = {name: work / s / scale for name, s in seconds.items()}
        row = {"metric": metric, "unit": unit, "ours": value["ours"], "torch": value["torch"],
               "higher_is_better": True,
               "target": {"op": ">=", "value": TARGET_RATIO, "on": "ratio"}}
        line = (f"{metric:42s} ours {value['ours']:9.1f}  torch {value['torch']:9.1f} {unit:9s} "
                f"ratio {value['ours'] / value['torch']:.2f}x   ms/{per}: ours "
                f"{seconds['ours'] * 1e3:.3f} torch {seconds['torch'] * 1e3:.3f}")
        if precision and self.card:
            peak = PEAKS[self.card][precision]
            row["peak_tflops"] = peak
            row["peak_fraction"] = {name: v / peak for name, v in value.items()}
            line += (f"   of {precision} peak {peak:g}: ours {value['ours'] / peak:.0%} "
                     f"torch {value['torch'] / peak:.0%}")
        print(line, flush=True)
        self.rows.append(row)

    # -- matmul

    def matmul(self):
        self.set_tf32(matmul=False, cudnn=True)
        n = MATMUL
        a = self.rng.standard_normal((n, n), dtype=np.float32)
        b = self.rng.standard_normal((n, n), dtype=np.float32)
        flops = 2.0 * n * n * n
        for dtype, precision, tol in (("float32", "fp32", 1e-5), ("bfloat16", "bf16", 2e-2)):
            ins = {name: [self.to_cuda(name, x).to(getattr(lib, dtype)) for x in (a, b)]
                   for name, lib in self.libs.items()}
            outs = {name: lib.matmul(*ins[name]) for name, lib in self.libs.items()}
            check_close(f"matmul {dtype}", self.numpy(outs["ours"]), self.numpy(outs["torch"]), tol)
            del outs
            seconds, _ = compare(
                {name: (lambda lib=lib, x=ins[name]: lib.matmul(*x), self.sync[name])
                 for name, lib in self.libs.items()}, self.repeats, self.window_s)
            self.report(f"cuda matmul {n}^3 {precision}", "TFLOP/s", seconds, flops, precision)
            del ins
            self.free()

    # -- conv2d

    def conv(self):
        self.set_tf32(matmul=False, cudnn=True)
        c = CONV
        p = (c["h"] + 2 * c["pad"] - c["r"]) + 1
        q = (c["w"] + 2 * c["pad"] - c["s"]) + 1
        flops = 2.0 * c["n"] * c["k"] * c["c"] * c["r"] * c["s"] * p * q
        x = self.rng.standard_normal((c["n"], c["c"], c["h"], c["w"]), dtype=np.float32)
        w = (self.rng.standard_normal((c["k"], c["c"], c["r"], c["s"]), dtype=np.float32)
             / np.float32(math.sqrt(c["c"] * c["r"] * c["s"])))
        g = self.rng.standard_normal((c["n"], c["k"], p, q), dtype=np.float32)
        t = {}
        for name in self.libs:
            t[name] = (self.to_cuda(name, x, True), self.to_cuda(name, w, True), self.to_cuda(name, g))

        def forward(name):
            xt, wt, _ = t[name]
            return self.libs[name].nn.functional.conv2d(xt, wt, padding=c["pad"])

        def forward_backward(name):
            xt, wt, gt = t[name]
            xt.grad = None
            wt.grad = None
            forward(name).backward(gt)

        for name in self.libs:
            forward_backward(name)
        # TF32 in both: compare loosely.
        check_close("conv2d forward", self.numpy(forward("ours")), self.numpy(forward("torch")), 1e-2)
        for i, what in ((0, "input grad"), (1, "weight grad")):
            check_close(f"conv2d {what}", self.numpy(t["ours"][i].grad), self.numpy(t["torch"][i].grad),
                        1e-2)
        shape = f"{c['n']}x{c['c']}x{c['h']}x{c['w']} {c['r']}x{c['s']}->{c['k']}"
        for label, fn, mult in (("fwd", forward, 1), ("fwd+bwd", forward_backward, 3)):
            seconds, _ = compare({name: (lambda name=name: fn(name), self.sync[name])
                                  for name in self.libs}, self.repeats, self.window_s)
            self.report(f"cuda conv2d {shape} {label}", "TFLOP/s", seconds, mult * flops, "tf32")
        t.clear()
        self.free()

    # -- attention

    def attention(self):
        b, h, n, e = 8, 12, 1024, 64
        flops = 3.5 * 4.0 * b * h * n * n * e / 2  # causal: half the scores
        arrays = [self.rng.standard_normal((b, h, n, e), dtype=np.float32) for _ in range(4)]
        for dtype, precision, tol in (("float32", "fp32", 1e-4), ("bfloat16", "bf16", 3e-2)):
            t = {}
            for name, lib in self.libs.items():
                dt = getattr(lib, dtype)
                t[name] = [self.to_cuda(name, a).to(dt).detach().requires_grad_(i < 3)
                           for i, a in enumerate(arrays)]

            def step(name):
                q, k, v, g = t[name]
                q.grad = k.grad = v.grad = None
                y = self.libs[name].nn.functional.scaled_dot_product_attention(q, k, v,
                                                                              is_causal=True)
                y.backward(g)
                return y

            ys = {name: step(name) for name in self.libs}
            check_close(f"attention {dtype} out", self.numpy(ys["ours"]), self.numpy(ys["torch"]), tol)
            for i, what in enumerate(("dq", "dk", "dv")):
                check_close(f"attention {dtype} {what}", self.numpy(t["ours"][i].grad),
                            self.numpy(t["torch"][i].grad), tol)
            del ys
            seconds, _ = compare({name: (lambda name=name: step(name), self.sync[name])
                                  for name in self.libs}, self.repeats, self.window_s)
            self.report(f"cuda attention causal {b}x{h}x{n}x{e} fwd+bwd {precision}", "TFLOP/s",
                        seconds, flops, precision)
            t.clear()
            self.free()

    # -- training steps

    def train(self, label, build_torch, build_ours, in_shape):
        """build_torch() / build_ours(): the model in each framework on the CPU; ours gets the torch
        model's initial weights (a strict load: the two must be the same module tree)."""
        self.set_tf32(matmul=False, cudnn=True)
        torch = self.torch
        torch.manual_seed(0)
        flow.manual_seed(0)
        models = {"torch": build_torch(), "ours": build_ours()}
        state = {k: v.detach().numpy().copy() for k, v in models["torch"].state_dict().items()}
        models["ours"].load_state_dict({k: flow.tensor(v) for k, v in state.items()})
        batches = [(self.rng.standard_normal((TRAIN_BATCH,) + in_shape, dtype=np.float32),
                    self.rng.integers(0, 10, size=TRAIN_BATCH, dtype=np.int64))
                   for _ in range(NUM_BATCHES)]

        steps = {}
        losses, logits = {}, {}
        for name, lib in self.libs.items():
            model = models[name].to("cuda")
            data = [(self.to_cuda(name, x), self.to_cuda(name, y)) for x, y in batches]
            loss_fn = lib.nn.CrossEntropyLoss()
            # Same weights and batch: the same logits and loss before training (eval mode: no
            # dropout, batch norm on its initial running statistics). The loss alone says little
            # (near ln 10 for any untrained model); the logits say whether the two compute the
            # same function. TF32 convolutions: compared loosely.
            model.eval()
            with lib.no_grad():
                out = model(data[0][0])
                losses[name] = loss_fn(out, data[0][1]).item()
                logits[name] = self.numpy(out)
            model.train()
            opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

            def step(model=model, batch=itertools.cycle(data), loss_fn=loss_fn, opt=opt):
                x, y = next(batch)
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()

            steps[name] = step
        check_close(f"{label} initial logits", logits["ours"], logits["torch"], 1e-2)
        if not abs(losses["ours"] - losses["torch"]) <= 1e-2 * max(1.0, abs(losses["torch"])):
            sys.exit(f"bench_cuda: {label}: initial loss differs: ours {losses['ours']:.6f}, "
                     f"torch {losses['torch']:.6f}")
        seconds, _ = compare({name: (steps[name], self.sync[name]) for name in self.libs},
                             self.repeats, self.window_s)
        self.report(f"cuda {label} train b{TRAIN_BATCH}", "samples/s", seconds, TRAIN_BATCH, per="step")
        del steps, models
        self.free()

    def lenet(self):
        # (bench_train's import pins the CPU thread pools to one thread: no GPU kernel uses them.)
        from bench_train import build_lenet

        self.train("lenet", lambda: build_lenet(self.torch.nn), lambda: build_lenet(flow.nn), (3, 32, 32))

    def mobilenetv2(self):
        sys.path.insert(0, EXAMPLES)
        from mobilenetv2_global import MobileNetV2

        TorchMobileNetV2 = mobilenet_v2_class(self.torch.nn)
        self.train("mobilenetv2", lambda: TorchMobileNetV2(num_classes=10, width=1.0, dropout=0.2),
                   lambda: MobileNetV2(num_classes=10, width=1.0, dropout=0.2), (3, 32, 32))


def mobilenet_v2_class(nn):
    """examples/mobilenetv2_global.py's MobileNetV2 over a framework's `nn` (the example's own is
    oneflow's): the same module tree and names, so state_dict keys match the example's (a strict
    load of one into the other checks it), with the example's stage table and channel rounding."""
    sys.path.insert(0, EXAMPLES)
    import mobilenetv2_global as example

    def conv_bn_relu6(inp, out, kernel, stride, groups=1):
        return nn.Sequential(
            nn.Conv2d(inp, out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out),
            nn.ReLU6(),
        )

    class InvertedResidual(nn.Module):
        def __init__(self, inp, out, stride, expand_ratio):
            super().__init__()
            hidden = int(round(inp * expand_ratio))
            self.use_residual = stride == 1 and inp == out
            layers = []
            if expand_ratio != 1:
                layers.append(conv_bn_relu6(inp, hidden, 1, 1))
            layers += [
                conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
                nn.Conv2d(hidden, out, 1, 1, 0, bias=False),
                nn.BatchNorm2d(out),
            ]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            y = self.conv(x)
            return x + y if self.use_residual else y

    class MobileNetV2(nn.Module):
        def __init__(self, num_classes=10, width=1.0, dropout=0.2):
            super().__init__()
            inp = example.make_divisible(32 * width)
            last_channel = example.make_divisible(1280 * width)
            layers = [conv_bn_relu6(3, inp, 3, 1)]
            for t, c, n, s in example.MobileNetV2.settings:
                out = example.make_divisible(c * width)
                for i in range(n):
                    layers.append(InvertedResidual(inp, out, s if i == 0 else 1, t))
                    inp = out
            layers.append(conv_bn_relu6(inp, last_channel, 1, 1))
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d((1, 1))
            self.flatten = nn.Flatten()
            self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last_channel, num_classes))

        def forward(self, x):
            return self.classifier(self.flatten(self.pool(self.features(x))))

    return MobileNetV2


CASES = ("matmul", "conv", "lenet", "mobilenetv2", "attention")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter windows")
    parser.add_argument("--json", help="write result rows here (for run_all.sh)")
    parser.add_argument("--only", choices=CASES, help="run one case only")
    args = parser.parse_args()

    reason = skip_reason()
    if reason:
        print(f"bench_cuda: skipped: {reason}")
        save_results(args.json, [])
        return

    import torch

    repeats, window_s = (3, 0.1) if args.quick else (7, 0.3)
    bench = Bench(torch, repeats, window_s)
    peaks = (", ".join(f"{k} {v:g}" for k, v in PEAKS[bench.card].items()) + " TFLOP/s dense"
             if bench.card else "not in the table: no peak fractions")
    print(f"{bench.device_name} (peaks as {bench.card or '?'}: {peaks}); torch {torch.__version__} "
          f"(CUDA {torch.version.cuda}), oneflow {flow.__version__}; {repeats} windows of ~{window_s:g} s, "
          f"medians", flush=True)
    for case in ([args.only] if args.only else CASES):
        getattr(bench, case)()
    save_results(args.json, bench.rows)


if __name__ == "__main__":
    main()
