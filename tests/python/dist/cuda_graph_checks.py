"""Run by tests/python/test_cuda_graph.py on the stand-in CUDA device (ONEFLOW_FAKE_CUDA=1) and by
tests/python/test_cuda.py on a GPU: CUDA graphs, eager (flow.cuda.CUDAGraph) and nn.Graph's
config.enable_cuda_graph, against eager training. Prints "<name> ok" per check, and each graph's
CUDA graph status (what a GPU run shows about the capture)."""

import gc
import sys

import numpy as np

import oneflow as flow
import oneflow._oneflow_internal as _C
import oneflow.nn as nn

D = "cuda"


def mlp(seed=0, dropout=0.0):
    flow.manual_seed(seed)
    layers = [nn.Linear(16, 32), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(32, 4))
    return nn.Sequential(*layers).to(D)


def batches(n, seed=1):
    rng = np.random.default_rng(seed)
    return [(flow.tensor(rng.standard_normal((8, 16)).astype(np.float32), device=D),
             flow.tensor(rng.integers(0, 4, 8), device=D)) for _ in range(n)]


def graph_pools():
    s = flow.cuda.memory_stats()
    return s["num_graph_pools"], s["reserved_bytes.graph_pools.current"]


def expect_error(fn, text):
    """fn fails naming what it did. On a GPU a host copy or wait inside the capture may fail in
    the CUDA runtime before our check sees it: then the runtime's error names the capture."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the message is what is checked)
        if not flow.cuda.is_fake():
            print(f"capture error: {e}", flush=True)
            assert text in str(e) or "captur" in str(e), str(e)
        else:
            assert text in str(e), str(e)
        return
    raise AssertionError(f"expected an error containing {text!r}")


# ---- eager capture: forward replays equal eager, the pool is the graph's own
model = mlp()
static_x = flow.randn(8, 16, device=D)
# Warm up before capturing, as PyTorch's documentation asks: a library workspace made on first
# use (cuBLAS's 32 MiB) would otherwise come from the graph's pool and outlive it (seen on an
# H200: the pool's 32 MiB stayed reserved after the graph was deleted).
with flow.no_grad():
    model(static_x)
base_pools = graph_pools()
g = flow.cuda.CUDAGraph()
with flow.no_grad(), flow.cuda.graph(g):
    static_y = model(static_x)
pools, reserved = graph_pools()
assert pools == base_pools[0] + 1 and reserved > 0, (pools, reserved)
assert _C.cuda_pool_of(static_y) != 0
for x, _ in batches(3):
    static_x.copy_(x)
    g.replay()
    with flow.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(static_y.numpy(), want, rtol=1e-6, atol=1e-6)
# Eager tensors of every size the capture used come from the default pool.
eager = [flow.empty(8, 32, device=D) for _ in range(20)] + [flow.empty(8, 4, device=D)]
assert all(_C.cuda_pool_of(t) == 0 for t in eager)
del eager
# Deleting the graph and its output gives the pool's memory back.
del g, static_y
gc.collect()
assert graph_pools() == base_pools, (graph_pools(), base_pools)
print("eager capture ok", flush=True)

# ---- two graphs share a pool
h = flow.cuda.graph_pool_handle()
g1, g2 = flow.cuda.CUDAGraph(), flow.cuda.CUDAGraph()
with flow.no_grad():
    with flow.cuda.graph(g1, pool=h):
        a = static_x + static_x
    with flow.cuda.graph(g2, pool=g1.pool()):
        b = a * a
static_x.fill_(1.5)
g1.replay()
g2.replay()
assert float(b.sum().item()) == 8 * 16 * 9
assert _C.cuda_pool_of(a) == _C.cuda_pool_of(b) != 0
assert graph_pools()[0] == base_pools[0] + 1
del g1, g2, h, a, b
gc.collect()
assert graph_pools() == base_pools, (graph_pools(), base_pools)
print("shared pool ok", flush=True)

# ---- what a capture cannot contain: one line naming it
g = flow.cuda.CUDAGraph()


def capture(fn):
    with flow.cuda.graph(g):
        fn()


expect_error(lambda: capture(lambda: static_x + flow.ones(8, 16).to(D)),
             "cuda graph capture: step 'to_device' copies a cpu tensor to cuda:0 (a Python number")
expect_error(lambda: capture(lambda: (static_x + static_x).sum().item()),
             "cuda graph capture: step 'to_device' copies cuda:0 to the host; a captured graph "
             "cannot contain a host copy or a wait for the device")
expect_error(lambda: capture(lambda: static_x.to("cpu")),
             "cuda graph capture: step 'to_device' copies cuda:0 to the host")
expect_error(lambda: g.replay(), "cuda graph: replay() before a capture ended")
with flow.no_grad(), flow.cuda.graph(g):  # the graph is usable after the failures
    y = static_x + static_x
g.replay()
del g, y
gc.collect()
assert graph_pools() == base_pools, (graph_pools(), base_pools)
print("refusals ok", flush=True)

# ---- random ops in an eager capture: each replay draws what eager code draws next
flow.manual_seed(11)
g = flow.cuda.CUDAGraph()
with flow.no_grad(), flow.cuda.graph(g):
    static_y = flow.nn.functional.dropout(static_x, 0.5, training=True) + flow.rand(8, 16, device=D)
replays = []
for _ in range(3):
    g.replay()
    replays.append(static_y.numpy().copy())
flow.manual_seed(11)
eager = [(flow.nn.functional.dropout(static_x, 0.5, training=True) +
          flow.rand(8, 16, device=D)).numpy() for _ in range(4)]
for k, got in enumerate(replays):  # the capture drew eager[0]'s numbers (it ran them here only)
    np.testing.assert_allclose(got, eager[k + 1], rtol=0, atol=0)
assert not np.array_equal(replays[0], replays[1])
del g, static_y
gc.collect()
assert graph_pools() == base_pools, (graph_pools(), base_pools)
print("random ops in eager capture ok", flush=True)


# ---- make_graphed_callables: a module's forward and backward as graphs, trained eagerly
results = {}
for graphed in (False, True):
    model = mlp()
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    f = flow.cuda.make_graphed_callables(model, (flow.randn(8, 16, device=D),)) if graphed \
        else model
    losses = []
    for x, y in batches(5):
        loss = nn.functional.cross_entropy(f(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.numpy().copy())
    results[graphed] = (losses, [p.numpy() for p in model.parameters()])
np.testing.assert_allclose(results[True][0], results[False][0], rtol=1e-5, atol=1e-6)
for g_p, w_p in zip(results[True][1], results[False][1]):
    np.testing.assert_allclose(g_p, w_p, rtol=1e-5, atol=1e-6)
del f, results
gc.collect()
assert graph_pools() == base_pools, (graph_pools(), base_pools)
print("make_graphed_callables ok", flush=True)


# ---- nn.Graph: replays through one CUDA graph equal eager training, lr schedule included
class Train(nn.Graph):
    def __init__(self, model, opt, sch, cuda_graph=True):
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss()
        self.add_optimizer(opt, lr_sch=sch)
        self.config.enable_cuda_graph(cuda_graph)

    def build(self, x, y):
        loss = self.loss(self.model(x) * SCALE, y)
        loss.backward()
        return loss


SCALE = 1.0  # a Python number: a host tensor copied to the device in the plan


def train(use_graph, steps=20, dropout=0.0, optimizer="sgd"):
    model = mlp(dropout=dropout)
    if optimizer == "sgd":
        opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = flow.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    sch = flow.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    flow.manual_seed(7)
    losses = []
    if use_graph:
        graph = Train(model, opt, sch)
        for i, (x, y) in enumerate(batches(steps)):
            if i == 10:
                opt.param_groups[0]["lr"] = 0.05  # set by hand: no recapture either
            losses.append(graph(x, y).numpy().copy())  # outputs live until the next call
        return losses, [p.numpy() for p in model.parameters()], graph
    loss_fn = nn.CrossEntropyLoss()
    for i, (x, y) in enumerate(batches(steps)):
        if i == 10:
            opt.param_groups[0]["lr"] = 0.05
        loss = loss_fn(model(x) * SCALE, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sch.step()
        losses.append(loss.numpy().copy())
    return losses, [p.numpy() for p in model.parameters()], None


for optimizer in ("sgd", "adamw"):
    want_losses, want_params, _ = train(False, optimizer=optimizer)
    got_losses, got_params, graph = train(True, optimizer=optimizer)
    status = graph._compiled[0].plan.cuda_graph_status()
    print(f"status {optimizer}: {status}", flush=True)
    assert status.startswith("cuda graph: captured on cuda:0: 1 graph (steps 0-"), status
    assert "1 launch per replay" in status, status
    assert "(CUDA GRAPH:0: cuda graph: captured on cuda:0: 1 graph" in repr(graph)
    np.testing.assert_allclose(np.array(got_losses), np.array(want_losses), rtol=1e-5, atol=1e-6)
    for g_p, w_p in zip(got_params, want_params):
        np.testing.assert_allclose(g_p, w_p, rtol=1e-5, atol=1e-6)
    del graph
print("graph equals eager ok", flush=True)

# ---- random ops are captured too: each replay draws fresh masks, eager's (20 steps, an lr
# schedule and an lr set by hand on the way)
want_losses, want_params, _ = train(False, steps=20, dropout=0.25)
got_losses, got_params, graph = train(True, steps=20, dropout=0.25)
status = graph._compiled[0].plan.cuda_graph_status()
print(f"status dropout: {status}", flush=True)
assert "1 graph" in status and "1 launch per replay" in status, status
assert "outside the graphs" not in status, status
np.testing.assert_allclose(np.array(got_losses), np.array(want_losses), rtol=1e-5, atol=1e-6)
for g_p, w_p in zip(got_params, want_params):
    np.testing.assert_allclose(g_p, w_p, rtol=1e-5, atol=1e-6)
assert len({float(v) for v in got_losses}) == len(got_losses)  # no replay repeats a step
del graph
print("random ops captured ok", flush=True)

# ---- constants (Python numbers made tensors) are made once, at the capture
SCALE = 0.5
want_losses, want_params, _ = train(False, steps=6)
got_losses, got_params, graph = train(True, steps=6)
status = graph._compiled[0].plan.cuda_graph_status()
print(f"status constants: {status}", flush=True)
assert "1 graph" in status and "1 launch per replay" in status, status
# Python numbers made on the host (and copied) ran once at the capture; made on the device they
# are in the graph: no step runs outside it either way.
assert "outside the graphs" not in status, status
np.testing.assert_allclose(np.array(got_losses), np.array(want_losses), rtol=1e-5, atol=1e-6)
for g_p, w_p in zip(got_params, want_params):
    np.testing.assert_allclose(g_p, w_p, rtol=1e-5, atol=1e-6)
del graph
SCALE = 1.0
print("constants ok", flush=True)

# ---- GradScaler: its skip is a host read that splits the capture; skips while capturing retry
def scaled_training(use_graph, steps=20):
    model = mlp()
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    # 2**140 overflows float32: the compile, the warm replay and two replays that were to
    # capture skip their update and back off; the scale then grows every 3 clean steps until it
    # overflows again, and a captured replay skips.
    scaler = flow.amp.GradScaler("cuda", init_scale=2.0 ** 140, backoff_factor=2.0 ** -4,
                                 growth_factor=2.0 ** 2, growth_interval=3)
    scales = []
    if use_graph:
        graph = Train(model, opt, None)
        graph.set_grad_scaler(scaler)
        statuses = []
        for x, y in batches(steps):
            graph(x, y)
            scales.append(scaler.get_scale())
            statuses.append(graph._compiled[0].plan.cuda_graph_status())
        return scales, [p.numpy() for p in model.parameters()], statuses
    loss_fn = nn.CrossEntropyLoss()
    for x, y in batches(steps):
        loss = loss_fn(model(x) * SCALE, y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, [p.numpy() for p in model.parameters()], None


want_scales, want_params, _ = scaled_training(False)
got_scales, got_params, statuses = scaled_training(True)
print(f"status scaler: {statuses[-1]}", flush=True)
assert got_scales == want_scales, (got_scales, want_scales)
assert want_scales[:5] == [2.0 ** 136, 2.0 ** 132, 2.0 ** 128, 2.0 ** 124, 2.0 ** 124], want_scales
assert any(b < a for a, b in zip(want_scales[5:], want_scales[6:])), want_scales  # a later skip
assert statuses[3] == "cuda graph: on; the next replay captures", statuses[3]
assert statuses[4].startswith("cuda graph: captured on cuda:0: 2 graphs"), statuses[4]
assert "1 guard reads its flag on the host (GradScaler's skip), which splits the capture" in \
    statuses[-1], statuses[-1]
for g_p, w_p in zip(got_params, want_params):
    np.testing.assert_allclose(g_p, w_p, rtol=1e-5, atol=1e-6)
print("grad scaler ok", flush=True)

# ---- a graph on the CPU keeps the plain replay and says why
cpu_model = nn.Linear(4, 2)


class Infer(nn.Graph):
    def __init__(self):
        super().__init__()
        self.m = cpu_model
        self.config.enable_cuda_graph(True)

    def build(self, x):
        return self.m(x)


infer = Infer()
for _ in range(3):
    infer(flow.ones(2, 4))
assert infer._compiled[0].plan.cuda_graph_status() == (
    "cuda graph: plain replay: the graph does not compute on one CUDA device (its inputs and "
    "state are elsewhere, or global)"), infer._compiled[0].plan.cuda_graph_status()
print("fallback ok", flush=True)
gc.collect()
assert graph_pools() == base_pools, (graph_pools(), base_pools)
sys.exit(0)
