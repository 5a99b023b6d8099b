"""The cases of bench_cuda.py, written once against the API oneflow and PyTorch share, and the
worker process that runs them for one framework.

    python3 tools/bench/cuda_cases.py torch        # a worker; bench_cuda.py starts two of these
    tools/python tools/bench/cuda_cases.py oneflow

A worker reads one JSON command per line on stdin and answers one JSON line on stdout (anything
else it prints goes to stderr):
    {"cmd": "setup", "case": NAME}  -> {"ok": true} | {"error": "..."}   builds inputs and model
    {"cmd": "warm", "seconds": S}   -> {"per_call": seconds}              doubling windows, >= S
    {"cmd": "window", "iters": N}   -> {"seconds": T}                     N calls, synced both ends
    {"cmd": "check", "path": P}     -> {"ok": true}                       np.save of the output
    {"cmd": "quit"}
Inputs and weights come from numpy with fixed seeds, so both frameworks compute the same thing.
"""

import json
import math
import os
import sys
import time

import numpy as np

# ----------------------------------------------------------------------------- shared helpers


def rand(shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape, dtype=np.float32) * scale)


class Ctx:
    """The framework module F (oneflow or torch) and the helpers the cases share."""

    def __init__(self, F):
        self.F = F
        self.nn = F.nn
        self.fn = F.nn.functional

    def dev(self, array, dtype=None, grad=False):
        t = self.F.from_numpy(np.asarray(array, order="C")).to("cuda")  # keeps 0-d
        if dtype is not None:
            t = t.to(dtype)
        if grad:
            t.requires_grad_(True)
        return t

    def sync(self):
        self.F.cuda.synchronize()

    def load_weights(self, model, seed):
        """Every parameter from numpy (same names in both frameworks -> same weights)."""
        with self.F.no_grad():
            for i, (name, p) in enumerate(model.named_parameters()):
                fan_in = int(np.prod(p.shape[1:])) if len(p.shape) > 1 else 0
                if name.endswith("weight") and len(p.shape) == 1:  # norm scales
                    arr = np.ones(tuple(p.shape), np.float32)
                elif fan_in:
                    arr = rand(tuple(p.shape), seed + i, 1.0 / math.sqrt(fan_in))
                else:
                    arr = np.zeros(tuple(p.shape), np.float32)
                p.copy_(self.F.from_numpy(arr).to(p.device))

    def autocast(self, dtype):
        return self.F.autocast(device_type="cuda", dtype=dtype)


def fwd_bwd(c, op, inputs, grad_out):
    """A callable doing op(*inputs).backward(grad_out) with the leaves' grads reset; and the
    forward output of its last call."""
    last = {}

    def step():
        for t in inputs:
            if getattr(t, "requires_grad", False):
                t.grad = None
        y = op(*inputs)
        y.backward(grad_out)
        last["y"] = y

    return step, lambda: last["y"]


def forward(op, *inputs):
    last = {}

    def step():
        last["y"] = op(*inputs)

    return step, lambda: last["y"]


# ----------------------------------------------------------------------------- models


def resnet50(c):
    nn = c.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers)


def gpt(c, layers=6, d=768, heads=12, vocab=50257, seq=1024):
    nn, fn = c.nn, c.fn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.out = nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.reshape(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            y = fn.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.out(fn.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx, pos):
            x = self.tok(idx) + self.pos(pos)
            return self.head(self.ln(self.blocks(x)))

    return GPT()


def train_step(c, model, opt, loss_of, autocast_dtype=None):
    last = {}

    def step():
        opt.zero_grad(set_to_none=True)
        if autocast_dtype is None:
            loss = loss_of(model)
        else:
            with c.autocast(autocast_dtype):
                loss = loss_of(model)
        loss.backward()
        opt.step()
        last["y"] = loss

    return step, lambda: last["y"]


# ----------------------------------------------------------------------------- the cases
# Each builds its inputs and returns (step, output, meta); meta["bytes"] is the memory traffic
# of one call (memory-bound rows report GB/s and the fraction of the measured copy bandwidth),
# meta["flops"] the work of a matmul/conv call, meta["items"] (and "unit") a throughput.

N_ELEM = 1 << 26  # 256 MiB of float32: memory-bound ops far beyond the L2


def case_copy(c):
    x, y = c.dev(rand((N_ELEM,), 1)), c.dev(rand((N_ELEM,), 2))
    return (lambda: y.copy_(x)), (lambda: y), {"bytes": 8 * N_ELEM}


def case_relu(c):
    x = c.dev(rand((N_ELEM,), 1))
    s, o = forward(c.F.relu, x)
    return s, o, {"bytes": 8 * N_ELEM}


def case_add(c):
    x, y = c.dev(rand((N_ELEM,), 1)), c.dev(rand((N_ELEM,), 2))
    s, o = forward(lambda a, b: a + b, x, y)
    return s, o, {"bytes": 12 * N_ELEM}


def case_gelu(c):
    x = c.dev(rand((N_ELEM,), 1))
    s, o = forward(c.fn.gelu, x)
    return s, o, {"bytes": 8 * N_ELEM}


def case_softmax(c):
    x = c.dev(rand((8 * 12 * 1024, 1024), 1))
    s, o = forward(lambda a: c.fn.softmax(a, dim=-1), x)
    return s, o, {"bytes": 8 * x.numel()}


def case_layer_norm(c):
    shape = (8, 1024, 768)
    x = c.dev(rand(shape, 1), grad=True)
    w, b = c.dev(1 + rand((768,), 2, 0.1), grad=True), c.dev(rand((768,), 3, 0.1), grad=True)
    gy = c.dev(rand(shape, 4))
    s, o = fwd_bwd(c, lambda a, ww, bb: c.fn.layer_norm(a, (768,), ww, bb, 1e-5), [x, w, b], gy)
    return s, o, {}


def case_rms_norm(c):
    shape = (8, 1024, 768)
    x = c.dev(rand(shape, 1), grad=True)
    w = c.dev(1 + rand((768,), 2, 0.1), grad=True)
    gy = c.dev(rand(shape, 4))
    s, o = fwd_bwd(c, lambda a, ww: c.fn.rms_norm(a, (768,), ww, 1e-6), [x, w], gy)
    return s, o, {}


def case_embedding(c):
    table = c.dev(rand((50257, 768), 1))
    idx = c.F.from_numpy(np.random.default_rng(2).integers(0, 50257, (8, 1024))).to("cuda")
    s, o = forward(c.fn.embedding, idx, table)
    return s, o, {"bytes": 2 * 4 * 8 * 1024 * 768}


def case_cross_entropy(c):
    logits = c.dev(rand((8 * 1024, 50257), 1), grad=True)
    target = c.F.from_numpy(np.random.default_rng(2).integers(0, 50257, (8 * 1024,))).to("cuda")
    one = c.dev(np.ones((), np.float32))
    s, o = fwd_bwd(c, lambda a, t: c.fn.cross_entropy(a, t), [logits, target], one)
    return s, o, {}


def _attention(c, dtype):
    shape = (8, 12, 1024, 64)
    q, k, v = (c.dev(rand(shape, i, 0.5), dtype=dtype).requires_grad_(True) for i in (1, 2, 3))
    gy = c.dev(rand(shape, 4), dtype=dtype)
    op = lambda a, b, d: c.fn.scaled_dot_product_attention(a, b, d, is_causal=True)  # noqa
    s, o = fwd_bwd(c, op, [q, k, v], gy)
    return s, o, {}


def case_attention_fp32(c):
    return _attention(c, None)


def case_attention_bf16(c):
    return _attention(c, c.F.bfloat16)


def case_batch_norm(c):
    shape = (64, 256, 56, 56)
    x = c.dev(rand(shape, 1), grad=True)
    w, b = c.dev(1 + rand((256,), 2, 0.1), grad=True), c.dev(rand((256,), 3, 0.1), grad=True)
    rm, rv = c.dev(np.zeros(256, np.float32)), c.dev(np.ones(256, np.float32))
    gy = c.dev(rand(shape, 4))
    op = lambda a, ww, bb: c.fn.batch_norm(a, rm, rv, ww, bb, True, 0.1, 1e-5)  # noqa: E731
    s, o = fwd_bwd(c, op, [x, w, b], gy)
    return s, o, {}


def case_transpose(c):
    x = c.dev(rand((8192, 8192), 1))
    s, o = forward(lambda a: a.t().contiguous(), x)
    return s, o, {"bytes": 8 * x.numel()}


def case_permute(c):
    x = c.dev(rand((64, 256, 56, 56), 1))
    s, o = forward(lambda a: a.permute(0, 2, 3, 1).contiguous(), x)
    return s, o, {"bytes": 8 * x.numel()}


def case_adam(c):
    model = gpt(c).to("cuda")
    c.load_weights(model, 10)
    params = list(model.parameters())
    for i, p in enumerate(params):
        p.grad = c.dev(rand(tuple(p.shape), 100 + i, 1e-3))
    opt = c.F.optim.AdamW(params, lr=1e-4, weight_decay=0.1)
    n = sum(p.numel() for p in params)
    return opt.step, (lambda: params[0]), {"items": n / 1e6, "unit": "Mparam/s"}


def case_launch(c):
    x = c.dev(np.arange(4, dtype=np.float32))
    s, o = forward(lambda a: a + 1, x)
    return s, o, {}


def case_matmul_fp32(c):
    a, b = c.dev(rand((4096, 4096), 1)), c.dev(rand((4096, 4096), 2))
    s, o = forward(c.F.matmul, a, b)
    return s, o, {"flops": 2 * 4096 ** 3}


def case_matmul_bf16(c):
    a = c.dev(rand((4096, 4096), 1), dtype=c.F.bfloat16)
    b = c.dev(rand((4096, 4096), 2), dtype=c.F.bfloat16)
    s, o = forward(c.F.matmul, a, b)
    return s, o, {"flops": 2 * 4096 ** 3}


def case_conv(c):
    x = c.dev(rand((64, 256, 56, 56), 1), grad=True)
    w = c.dev(rand((256, 256, 3, 3), 2, 1 / 48), grad=True)
    gy = c.dev(rand((64, 256, 56, 56), 3))
    s, o = fwd_bwd(c, lambda a, ww: c.fn.conv2d(a, ww, None, 1, 1), [x, w], gy)
    return s, o, {"flops": 3 * 2 * 64 * 256 * 256 * 9 * 56 * 56}


def _resnet(c, dtype):
    model = resnet50(c).to("cuda")
    c.load_weights(model, 20)
    x = c.dev(rand((64, 3, 224, 224), 1))
    y = c.F.from_numpy(np.random.default_rng(2).integers(0, 1000, (64,))).to("cuda")
    opt = c.F.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    s, o = train_step(c, model, opt, lambda m: c.fn.cross_entropy(m(x), y), dtype)
    return s, o, {"items": 64, "unit": "img/s"}


def case_resnet50_fp32(c):
    return _resnet(c, None)


def case_resnet50_bf16(c):
    return _resnet(c, c.F.bfloat16)


def _gpt(c, dtype):
    model = gpt(c).to("cuda")
    c.load_weights(model, 30)
    rng = np.random.default_rng(2)
    idx = c.F.from_numpy(rng.integers(0, 50257, (8, 1024))).to("cuda")
    tgt = c.F.from_numpy(rng.integers(0, 50257, (8 * 1024,))).to("cuda")
    pos = c.F.from_numpy(np.arange(1024)[None, :].repeat(8, 0)).to("cuda")
    opt = c.F.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    loss = lambda m: c.fn.cross_entropy(m(idx, pos).reshape(8 * 1024, 50257), tgt)  # noqa
    s, o = train_step(c, model, opt, loss, dtype)
    return s, o, {"items": 8 * 1024, "unit": "tok/s"}


def case_gpt_fp32(c):
    return _gpt(c, None)


def case_gpt_bf16(c):
    return _gpt(c, c.F.bfloat16)


CASES = [name[5:] for name in list(globals()) if name.startswith("case_")]

# ----------------------------------------------------------------------------- the worker


def main():
    which = sys.argv[1]
    out = sys.stdout
    sys.stdout = sys.stderr  # only protocol lines go to the real stdout
    if which == "torch":
        import torch as F
    else:
        import oneflow as F
    c = Ctx(F)
    ready = {"framework": which, "version": F.__version__}
    try:
        if not F.cuda.is_available():
            ready["error"] = "no CUDA device"
        else:
            F.backends.cuda.matmul.allow_tf32 = False
            F.backends.cudnn.allow_tf32 = True
            if which == "torch":
                F.backends.cudnn.benchmark = False  # heuristics, as ours
                ready["device"] = F.cuda.get_device_name(0)
    except Exception as e:  # noqa: BLE001 - reported to the driver
        ready["error"] = f"{type(e).__name__}: {e}"
    out.write(json.dumps(ready) + "\n")
    out.flush()
    step = output = None
    for line in sys.stdin:
        msg = json.loads(line)
        reply = {}
        try:
            if msg["cmd"] == "quit":
                break
            if msg["cmd"] == "setup":
                step = output = None
                if hasattr(F.cuda, "empty_cache"):
                    F.cuda.empty_cache()
                step, output, meta = globals()["case_" + msg["case"]](c)
                step()  # first call: also proves it runs
                c.sync()
                reply = {"ok": True, "meta": meta}
            elif msg["cmd"] == "warm":
                iters, spent = 1, 0.0
                while True:
                    t = window(c, step, iters)
                    spent += t
                    if spent >= msg["seconds"]:
                        break
                    iters *= 2
                reply = {"per_call": t / iters}
            elif msg["cmd"] == "window":
                reply = {"seconds": window(c, step, msg["iters"])}
            elif msg["cmd"] == "check":
                y = output()
                np.save(msg["path"], y.detach().float().cpu().numpy())
                reply = {"ok": True}
        except Exception as e:  # noqa: BLE001 - one row fails, the others still run
            reply = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def window(c, step, iters):
    c.sync()
    start = time.perf_counter()
    for _ in range(iters):
        step()
    c.sync()
    return time.perf_counter() - start


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
