"""nn.Graph (compile mode): the trace, the replay as a plan, training inside the graph against
eager, re-compilation per input signature, state dicts, printing and the one-line errors."""

import os
import re

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn as nn
from test_comm import DIST, free_port, launch


def mlp(seed=0):
    flow.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def batches(n, batch=6, seed=1):
    rng = np.random.RandomState(seed)
    return [(flow.tensor(rng.randn(batch, 8).astype(np.float32)),
             flow.tensor(rng.randint(0, 4, batch))) for _ in range(n)]


class EvalGraph(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.builds = 0

    def build(self, x):
        self.builds += 1
        return self.model(x)


class TrainGraph(nn.Graph):
    def __init__(self, model, opt, lr_sch=None):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(opt, lr_sch=lr_sch)
        self.builds = 0

    def build(self, x, y):
        self.builds += 1
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def test_forward_compiles_once_and_replays_without_build():
    model = mlp()
    g = EvalGraph(model)
    assert not g.is_compiled and not g.training
    for x, _ in batches(4):
        np.testing.assert_allclose(g(x).numpy(), model(x).numpy(), rtol=1e-6, atol=1e-6)
    assert g.is_compiled and g.builds == 1  # calls 2..4 replayed the plan, not build


def test_parameters_are_shared_with_eager():
    model = mlp()
    g = EvalGraph(model)
    x, _ = batches(1)[0]
    g(x)
    with flow.no_grad():
        model[0].weight.fill_(0.5)  # an eager write: the replay reads the same Parameter
    np.testing.assert_allclose(g(x).numpy(), model(x).numpy(), rtol=1e-6, atol=1e-6)
    assert g.model is model and g.builds == 1


def test_new_input_shape_compiles_again_and_old_one_still_replays():
    model = mlp()
    g = EvalGraph(model)
    small, big = flow.randn(2, 8), flow.randn(5, 8)
    g(small)
    g(big)
    assert g.builds == 2 and len(g._compiled) == 2
    np.testing.assert_allclose(g(small).numpy(), model(small).numpy(), rtol=1e-6, atol=1e-6)
    g(flow.randn(5, 8, dtype=flow.float64).float())
    assert g.builds == 2  # same signature as big
    g(flow.randn(5, 8, dtype=flow.float64))  # another dtype: another plan (or the op's error)
    assert g.builds == 3


def _train(opt_name, graph, steps=6, sched=False):
    model = mlp()
    if opt_name == "sgd":
        opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, dampening=0.1,
                             weight_decay=1e-3)
    elif opt_name == "sgd_momentum":  # no weight decay: allow_fuse_model_update_ops fuses
        opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, dampening=0.1)
    else:
        opt = flow.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.05)
    lr_sch = flow.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5) if sched else None
    losses = []
    if graph:
        g = TrainGraph(model, opt, lr_sch)
        g.config.allow_fuse_model_update_ops(opt_name == "sgd_momentum")
        assert g.training
        for x, y in batches(steps):
            losses.append(g(x, y).numpy())
        assert g.builds == 1
        fused = "+momentum(" in g._compiled[0].plan.describe()
        assert fused == (opt_name == "sgd_momentum")
    else:
        loss_fn = nn.CrossEntropyLoss()
        for x, y in batches(steps):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if lr_sch is not None:
                lr_sch.step()
            losses.append(loss.detach().numpy())
    return np.array(losses), [p.numpy() for p in model.parameters()], opt


@pytest.mark.parametrize("opt_name", ["sgd", "sgd_momentum", "adamw"])
@pytest.mark.parametrize("sched", [False, True])
def test_training_inside_the_graph_equals_eager(opt_name, sched):
    eager_losses, eager_params, eager_opt = _train(opt_name, graph=False, sched=sched)
    graph_losses, graph_params, graph_opt = _train(opt_name, graph=True, sched=sched)
    assert len(set(np.round(graph_losses, 6))) > 1  # it trains: the losses move
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-5, atol=1e-5)
    for p, q in zip(graph_params, eager_params):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-5)
    assert graph_opt.param_groups[0]["lr"] == eager_opt.param_groups[0]["lr"]
    if opt_name == "adamw":
        steps = [s["step"] for s in graph_opt.state.values()]
        assert steps == [6] * len(steps)


def test_replay_is_a_plan_that_frees_intermediates():
    x, y = batches(1)[0]
    model = mlp()
    g = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1))
    g(x, y)
    text = repr(g)
    assert "(MODULE:model:Sequential)" in text and "(OPTIMIZER:_optimizer0:SGD)" in text
    assert "matmul" in text and "[model.0]" in text and "sgd_update" in text
    plan = g._compiled[0].plan
    steps = plan.describe().splitlines()
    assert sum("sgd_update" in s for s in steps) == 4
    assert 0 < plan.peak_live() < plan.num_steps()


def test_state_dict_round_trip_and_eager_interchange(tmp_path):
    model = mlp()
    opt = flow.optim.Adam(model.parameters(), lr=0.01)
    g = TrainGraph(model, opt)
    data = batches(3)
    g(*data[0])
    assert list(g.state_dict()) == ["model", "loss_fn", "_optimizer0"]
    flow.save(g.state_dict(), str(tmp_path / "graph.pt"))  # the live state, as eager's
    sd = flow.load(str(tmp_path / "graph.pt"))
    saved = {k: v.numpy().copy() for k, v in sd["model"].items()}
    g(*data[1])
    assert not np.array_equal(model[0].weight.numpy(), saved["0.weight"])
    g.load_state_dict(sd)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), saved[k])
    # Loaded into an eager copy: one eager step and one graph step from the same state agree.
    other = mlp(seed=5)
    other_opt = flow.optim.Adam(other.parameters(), lr=0.01)
    other.load_state_dict(sd["model"])
    other_opt.load_state_dict(sd["_optimizer0"])
    x, y = data[2]
    loss = nn.CrossEntropyLoss()(other(x), y)
    loss.backward()
    other_opt.step()
    g(x, y)
    for p, q in zip(model.parameters(), other.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-6)
    # And back: eager's state saved and loaded into the graph, bit for bit (parameters and
    # Adam's moments and step), and the graph's next replay uses it.
    flow.save({"model": other.state_dict(), "loss_fn": {}, "_optimizer0": other_opt.state_dict()},
              str(tmp_path / "eager.pt"))
    g.load_state_dict(flow.load(str(tmp_path / "eager.pt")))
    back = g.state_dict()
    for k, v in other.state_dict().items():
        np.testing.assert_array_equal(back["model"][k].numpy(), v.numpy())
    assert back["_optimizer0"]["state"]["step"] == other_opt.state_dict()["state"]["step"] == 2
    per_param = lambda sd: [v for k, v in sd["state"].items() if k != "step"]  # noqa: E731
    for theirs, ours in zip(per_param(other_opt.state_dict()), per_param(back["_optimizer0"])):
        assert int(ours["step"]) == int(theirs["step"]) == 2
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(ours[key].numpy(), theirs[key].numpy())
    x, y = data[0]
    loss = nn.CrossEntropyLoss()(other(x), y)
    other_opt.zero_grad()
    loss.backward()
    other_opt.step()
    g(x, y)
    for p, q in zip(model.parameters(), other.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match=r"load_state_dict: missing keys \['loss_fn', "):
        g.load_state_dict({"model": sd["model"]})


class RandomGraph(nn.Graph):
    def build(self, x):
        return x + flow.rand(3), nn.functional.dropout(x, p=0.5, training=True)


def test_random_ops_draw_new_numbers_each_replay_as_eager_does():
    x = flow.ones(3)
    flow.manual_seed(7)
    eager = []
    for _ in range(3):  # the same draws, in the same order, as the graph's build
        eager.append(((x + flow.rand(3)).numpy(),
                      nn.functional.dropout(x, p=0.5, training=True).numpy()))
    flow.manual_seed(7)
    g = RandomGraph()
    outs = [tuple(t.numpy() for t in g(x)) for _ in range(3)]
    for (a, m), (ea, em) in zip(outs, eager):
        np.testing.assert_array_equal(a, ea)
        np.testing.assert_array_equal(m, em)
    assert not np.array_equal(outs[1][0], outs[2][0])
    assert not np.array_equal(outs[1][1], outs[2][1])


class InPlaceGraph(nn.Graph):
    def build(self, x):
        y = x * 2
        y.add_(1)
        y[0] = 0.0
        return y, y.detach()


def test_in_place_writes_and_detached_handles_replay():
    g = InPlaceGraph()
    for v in (1.0, 3.0):
        y, d = g(flow.full((3,), v))
        expect = np.array([0.0, 2 * v + 1, 2 * v + 1], dtype=np.float32)
        np.testing.assert_array_equal(y.numpy(), expect)
        np.testing.assert_array_equal(d.numpy(), expect)


class ItemGraph(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = mlp()

    def build(self, x):
        y = self.model(x)
        if y.sum() > 0:  # a data-dependent branch
            return y
        return -y


class NumpyGraph(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = mlp()

    def build(self, x):
        return self.model(x) * float(self.model[0].weight.sum().item())


class BackwardOnlyGraph(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = mlp()

    def build(self, x):
        y = self.model(x).sum()
        y.backward()
        return y


def test_what_a_replay_cannot_redo_fails_while_compiling():
    x = flow.randn(2, 8)
    with pytest.raises(RuntimeError, match=r"^nn.Graph ItemGraph: build reads a tensor's value "
                       r"\(Tensor.__bool__\) in module '<graph>' \(op 'gt' \(step \d+\)\); a "
                       r"compiled graph replays without Python and cannot depend on tensor "
                       r"values$"):
        ItemGraph()(x)
    with pytest.raises(RuntimeError, match=r"^nn.Graph NumpyGraph: build reads a tensor's value "
                       r"\(Tensor.item\) in module '<graph>' \(op 'sum' .*"):
        NumpyGraph()(x)
    with pytest.raises(RuntimeError, match=r"^nn.Graph BackwardOnlyGraph: build calls backward\(\) "
                       r"but the graph has no optimizer; add one with add_optimizer"):
        BackwardOnlyGraph()(x)


class ObservingGraph(nn.Graph):
    """Records, inside build, what the trace changed of the process."""

    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.seen = []

    def build(self, x):
        from oneflow import _trace_state

        self.seen.append((_trace_state.is_tracing(), nn.Module.__call__, flow.Tensor.backward,
                          flow.Tensor.item, flow.Tensor.__bool__))
        loss = self.model(x).sum()
        loss.backward()
        return loss


def test_the_trace_patches_nothing_and_is_asked_through_one_query():
    from oneflow import _trace_state

    model = mlp()
    g = ObservingGraph(model, flow.optim.SGD(model.parameters(), lr=0.1))
    outside = (nn.Module.__call__, flow.Tensor.backward, flow.Tensor.item, flow.Tensor.__bool__)
    assert not _trace_state.is_tracing()
    g(flow.randn(2, 8))
    assert len(g.seen) == 1
    tracing, *inside = g.seen[0]
    assert tracing and not _trace_state.is_tracing()
    assert all(a is b for a, b in zip(inside, outside))  # the same functions: nothing patched
    assert not nn.modules.module._module_call_hooks  # the trace's module hook is gone again
    # eager after the compile: module calls, backward and value reads as before
    y = model(flow.randn(2, 8)).sum()
    y.backward()
    assert np.isfinite(y.item()) and model[0].weight.grad is not None


def test_a_failed_compile_leaves_eager_working():
    g = ItemGraph()
    with pytest.raises(RuntimeError):
        g(flow.randn(2, 8))
    assert not g.is_compiled
    y = g.model(flow.randn(2, 8))  # no trace left behind: eager reads values again
    assert np.isfinite(y.sum().item())


def test_unsupported_switches_are_one_line_errors():
    model = mlp()
    g = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1))
    for call, name in [(lambda: g.config.allow_fuse_add_to_output(True),
                        "allow_fuse_add_to_output"),
                       (lambda: g.config.enable_cudnn_conv_heuristic_search_algo(False),
                        "enable_cudnn_conv_heuristic_search_algo")]:
        with pytest.raises(NotImplementedError,
                           match=rf"^nn.Graph TrainGraph: config.{name} is not supported by this "
                                 r"nn.Graph \(supported: set_gradient_accumulation_steps, "
                                 r"enable_amp, enable_zero, allow_fuse_model_update_ops, "
                                 r"enable_cuda_graph\)$"):
            call()
    with pytest.raises(ValueError, match=r"^nn.Graph TrainGraph: config.enable_zero supports stage "
                       r"1 and 2 \(stage 3 would shard the parameters too\), got 3$"):
        g.config.enable_zero(True, stage=3)
    with pytest.raises(ValueError, match=r"^nn.Graph TrainGraph: config.enable_amp expects dtype "
                       r"oneflow.float16 or oneflow.bfloat16, got oneflow.float32$"):
        g.config.enable_amp(True, dtype=flow.float32)
    with pytest.raises(TypeError, match=r"^nn.Graph TrainGraph: set_grad_scaler expects a "
                       r"flow.amp.GradScaler, got float$"):
        g.set_grad_scaler(2.0)
    block = g.model[0].to(nn.graph.GraphModule)
    with pytest.raises(AttributeError, match=r"^nn.Graph: Linear.to\(nn.graph.GraphModule\) has no "
                       r"switch 'fuse' \(activation_checkpointing, set_stage\)$"):
        block.fuse = True
    with pytest.raises(TypeError, match=r"^nn.Graph: Linear.to\(nn.graph.GraphModule\)."
                       r"activation_checkpointing expects a bool, got 1$"):
        block.activation_checkpointing = 1
    with pytest.raises(ValueError, match=r"^nn.Graph: Linear.to\(nn.graph.GraphModule\).set_stage"
                       r"\(0\) needs a placement: its parameters are on no placement\(s\), pass "
                       r"placement=$"):
        block.set_stage(0)
    g.config.enable_amp(False)  # turning a switch off is what happens anyway
    with pytest.raises(ValueError, match=r"^nn.Graph TrainGraph: config.set_gradient_accumulation_"
                       r"steps expects an int >= 1, got 0$"):
        g.config.set_gradient_accumulation_steps(0)
    with pytest.raises(TypeError, match=r"^nn.Graph TrainGraph: add_optimizer expects a "
                       r"oneflow.optim optimizer, got list$"):
        g.add_optimizer(list(model.parameters()))


def test_debug_prints_each_compile(capsys):
    g = EvalGraph(mlp())
    g.debug(1)
    g(flow.randn(2, 8))
    g(flow.randn(2, 8))
    out = capsys.readouterr().out
    assert out.count("(GRAPH:EvalGraph) compiling for inputs [((2, 8), 'oneflow.float32')]") == 1
    # linear -> relu prints as one fused step (oneflow/graph/passes.h)
    assert "(GRAPH:EvalGraph) plan:" in out and "linear+relu(%0, %1, %2)  [model.0]" in out


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_data_parallel_graph_training_on_two_ranks_equals_eager(opt_name):
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "graph_train.py"), opt_name, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = sorted(l.split("] ", 1)[-1] for l in r.stdout.splitlines() if l.endswith(" ok"))
    assert lines == [f"rank {k} graph train ok" for k in range(2)]


class FullGraph(nn.Graph):
    def build(self, x):
        return flow.full((2, 2), x.sum())  # the fill value stays a tensor of the plan


def test_full_with_a_tensor_value_follows_the_input():
    g = FullGraph()
    for v in (1.0, 2.5):
        np.testing.assert_array_equal(g(flow.full((3,), v)).numpy(), np.full((2, 2), 3 * v))
    assert len(g._compiled) == 1


class DropoutGraph(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
        self.builds = 0

    def build(self, x):
        self.builds += 1
        return self.model(x)


def test_train_and_eval_modes_are_part_of_the_signature():
    g = DropoutGraph()
    x = flow.randn(4, 8)
    g(x)
    g.model.eval()
    np.testing.assert_allclose(g(x).numpy(), g.model(x).numpy(), rtol=1e-6, atol=1e-6)
    g.model.train()
    g(x)
    assert g.builds == 2  # eval compiled its own plan; train replays the first one


class NonzeroGraph(nn.Graph):
    def build(self, x):
        return x[x > 0]


def test_a_data_dependent_shape_fails_while_compiling():
    with pytest.raises(RuntimeError, match=r"^nn.Graph NonzeroGraph: module '<graph>' reads the "
                       r"data of op 'gt' \(step \d+\) on the host \(a data-dependent shape or "
                       r"value: nonzero, boolean indexing, a Python number from a tensor\); a "
                       r"compiled graph replays without Python and cannot depend on tensor "
                       r"values$"):
        NonzeroGraph()(flow.randn(3, 4))


class AccGraph(nn.Graph):
    def __init__(self, model, opt, steps):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.config.set_gradient_accumulation_steps(steps)

    def build(self, x):
        out = self.model(x).reshape(-1)
        loss = out.sum()
        loss.backward()
        return out, loss


def test_gradient_accumulation_equals_eager_micro_batches():
    x = flow.randn(8, 8)
    eager_model, graph_model = mlp(), mlp()
    eager_opt = flow.optim.SGD(eager_model.parameters(), lr=0.01, momentum=0.9)
    g = AccGraph(graph_model, flow.optim.SGD(graph_model.parameters(), lr=0.01, momentum=0.9), 4)
    for step in range(3):
        outs, losses = [], []
        for k in range(4):
            out = eager_model(x[2 * k:2 * k + 2]).reshape(-1)
            loss = out.sum()
            (loss * 0.25).backward()
            outs.append(out.detach().numpy())
            losses.append(loss.item())
        eager_opt.step()
        eager_opt.zero_grad()
        out, loss = g(x)
        assert tuple(out.shape) == (32,) and tuple(loss.shape) == (4,)
        np.testing.assert_allclose(out.numpy(), np.concatenate(outs), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(loss.numpy(), losses, rtol=1e-5, atol=1e-5)
        for p, q in zip(graph_model.parameters(), eager_model.parameters()):
            np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match=r"^nn.Graph AccGraph: gradient accumulation over 4 "
                       r"micro-batches needs each input's dim 0 divisible by 4, got shape \(6, 8\) "
                       r"for tensor input 0$"):
        g(flow.randn(6, 8))


def test_an_optimizer_loaded_outside_the_graph_is_picked_up():
    data = batches(3)
    model, twin = mlp(), mlp()
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    twin_opt = flow.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    g = TrainGraph(model, opt)
    g(*data[0])
    loss_fn = nn.CrossEntropyLoss()
    loss = loss_fn(twin(data[0][0]), data[0][1])
    loss.backward()
    twin_opt.step()
    twin_opt.zero_grad()
    opt.load_state_dict(twin_opt.state_dict())  # new buffers and groups, with lr 0.05
    opt.param_groups[0]["lr"] = 0.05
    twin_opt.param_groups[0]["lr"] = 0.05
    g(*data[1])
    loss = loss_fn(twin(data[1][0]), data[1][1])
    loss.backward()
    twin_opt.step()
    assert g.builds == 2  # the plan held the old buffers: compiled again
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-6)


GPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "examples", "gpt.py")


_EAGER = {}  # (nproc, layout) -> eager run's (losses, final parameters), shared by the tests


def _gpt_run(folder, nproc, *args, device="cpu"):
    """examples/gpt.py for 10 steps: rank 0's losses and the parameters it saved at the end."""
    r = launch("--nproc_per_node", nproc, "--master_port", free_port(), GPT, "--steps", "10",
               "--eval_interval", "0", "--save", folder, "--device", device, *args,
               timeout=300, device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    losses = [float(m.group(1)) for m in re.finditer(r"\[rank 0\] step \d+: loss ([0-9.]+)",
                                                     r.stdout)]
    state = flow.load(os.path.join(folder, "step-00000010"), map_location="cpu")
    return losses, {k: v.numpy() for k, v in state["model"].items()}


needs_fortunes = pytest.mark.skipif(not os.path.isdir("/usr/share/games/fortunes"),
                                    reason="Debian's fortunes package is not installed")


@needs_fortunes
@pytest.mark.parametrize("nproc,parallel,extra,eager_parallel", [
    (1, "none", (), "none"),
    (2, "dp", (), "dp"),
    (2, "tp", (), "tp"),
    (4, "dp_tp", (), "dp_tp"),
    (2, "pp", ("--untied",), "pp"),                          # set_stage, 4 micro-batches
    (2, "zero", (), "dp"),                                   # ZeRO stage 1
    (2, "tp+zero", ("--zero_stage", "2"), "tp"),             # ZeRO stage 2 on a TP layout
    (4, "dp_tp+zero", ("--zero_stage", "2"), "dp_tp"),       # ZeRO 2 on a 2 x 2 mesh
    (4, "pp", ("--untied",), "pp"),                          # 2 stages of 2 data-parallel ranks
    (2, "dp", ("--accumulate", "2"), "dp"),                  # gradient accumulation
    (2, "dp", ("--checkpoint",), "dp"),                      # activation checkpointing
])
def test_gpt_trains_through_a_graph_like_eager(tmp_path, nproc, parallel, extra, eager_parallel):
    """Every --parallel layout, and the graph's accumulation, checkpointing and ZeRO: the same
    losses and final parameters as eager training (1e-4) over 10 steps."""
    untied = ("--untied",) if "--untied" in extra else ()
    key = (nproc, eager_parallel, untied)
    if key not in _EAGER:
        _EAGER[key] = _gpt_run(tmp_path / "eager", nproc, "--parallel", eager_parallel, *untied)
    eager_losses, eager_params = _EAGER[key]
    losses, params = _gpt_run(tmp_path / "graph", nproc, "--parallel", parallel, "--graph",
                              *extra)
    assert len(eager_losses) == 10
    np.testing.assert_allclose(losses, eager_losses, atol=1e-4)
    assert params.keys() == eager_params.keys()
    for k in params:
        np.testing.assert_allclose(params[k], eager_params[k], atol=1e-4, err_msg=k)


@needs_fortunes
@pytest.mark.parametrize("parallel,extra,eager_parallel", [
    ("pp", ("--untied",), "pp"),
    ("zero", ("--zero_stage", "2", "--accumulate", "2", "--checkpoint"), "dp"),
])
def test_gpt_graph_on_cuda_placements_trains_like_eager(tmp_path, parallel, extra, eager_parallel):
    """The graph's switches with cuda placements (a GPU where one is usable, else the stand-in
    CUDA device): the same losses and parameters as eager on cuda."""
    untied = ("--untied",) if "--untied" in extra else ()
    eager_losses, eager_params = _gpt_run(tmp_path / "eager", 2, "--parallel", eager_parallel,
                                          *untied, device="cuda")
    losses, params = _gpt_run(tmp_path / "graph", 2, "--parallel", parallel, "--graph", *extra,
                              device="cuda")
    np.testing.assert_allclose(losses, eager_losses, atol=1e-4)
    for k in params:
        np.testing.assert_allclose(params[k], eager_params[k], atol=1e-4, err_msg=k)


# ---------------------------------------------------------------- AMP, checkpointing


class AmpGraph(TrainGraph):
    def __init__(self, model, opt, dtype, scaler=None):
        super().__init__(model, opt)
        self.config.enable_amp(True, dtype=dtype)
        if scaler is not None:
            self.set_grad_scaler(scaler)


def _eager_amp_step(model, opt, loss_fn, x, y, dtype, scaler):
    with flow.autocast("cpu", dtype=dtype):
        loss = loss_fn(model(x), y)
    opt.zero_grad()
    if scaler is None:
        loss.backward()
        opt.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return loss


@pytest.mark.parametrize("dtype,opt_name", [("bfloat16", "sgd"), ("float16", "adam")])
def test_amp_with_grad_scaler_trains_like_eager_autocast(dtype, opt_name):
    dtype = getattr(flow, dtype)

    def make():
        model = mlp()
        opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if opt_name == "sgd" \
            else flow.optim.Adam(model.parameters(), lr=0.01)
        return model, opt

    model, opt = make()
    twin, twin_opt = make()
    # growth every 2 clean steps: the scale changes between replays without a new compile
    scaler = flow.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    twin_scaler = flow.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    g = AmpGraph(model, opt, dtype, scaler)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in batches(5):
        loss = g(x, y)
        ref = _eager_amp_step(twin, twin_opt, loss_fn, x, y, dtype, twin_scaler)
        assert loss.dtype == ref.dtype
        np.testing.assert_allclose(loss.numpy(), ref.numpy(), rtol=1e-6)
        assert scaler.get_scale() == twin_scaler.get_scale()
    assert g.builds == 1 and scaler.get_scale() == 2.0 ** 12
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-7)
    # The casts are in the plan: matmuls in the low dtype, the parameters stay float32.
    assert "= cast(%" in repr(g)
    assert all(p.dtype == flow.float32 for p in model.parameters())


@pytest.mark.parametrize("opt_name", ["adam", "sgd_dampened", "adagrad"])
def test_grad_scaler_skips_the_update_after_inf_gradients_and_backs_off(opt_name):
    model, twin = mlp(), mlp()

    def make_opt(params):
        if opt_name == "adam":
            return flow.optim.Adam(params, lr=0.01)
        if opt_name == "adagrad":  # its lr decays with the step count, which skips must not move
            return flow.optim.Adagrad(params, lr=0.05, lr_decay=0.5)
        # the buffer starts at zero: the first update that runs stores (1 - dampening) * grad
        return flow.optim.SGD(params, lr=0.1, momentum=0.9, dampening=0.5)

    opt, twin_opt = make_opt(model.parameters()), make_opt(twin.parameters())
    # 2**140 overflows float32 in the scaled loss: the first steps find inf, skip, back off.
    scaler = flow.amp.GradScaler("cpu", init_scale=2.0 ** 140, backoff_factor=2.0 ** -8)
    twin_scaler = flow.amp.GradScaler("cpu", init_scale=2.0 ** 140, backoff_factor=2.0 ** -8)
    g = AmpGraph(model, opt, flow.bfloat16, scaler)
    loss_fn = nn.CrossEntropyLoss()
    before = [p.numpy().copy() for p in model.parameters()]
    scales, changed = [], []
    for k, (x, y) in enumerate(batches(6)):
        g(x, y)
        _eager_amp_step(twin, twin_opt, loss_fn, x, y, flow.bfloat16, twin_scaler)
        scales.append(scaler.get_scale())
        assert scaler.get_scale() == twin_scaler.get_scale()
        changed.append(any((p.numpy() != b).any() for p, b in zip(model.parameters(), before)))
        before = [p.numpy().copy() for p in model.parameters()]
    # two skipped steps (the compile and a replay: 2**132 still overflows), then clean updates
    assert scales[:3] == [2.0 ** 132, 2.0 ** 124, 2.0 ** 124] and changed == [False, False] + \
        [True] * 4, (scales, changed)
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-7)
    if opt_name != "sgd_dampened":  # the step count only counts the updates that happened
        assert [int(s["step"]) for s in opt.state.values()] == \
            [int(s["step"]) for s in twin_opt.state.values()] == [4] * 4
    assert "if %" in repr(g) and "else none:" in repr(g)


class Blocks(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        flow.manual_seed(3)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Dropout(dropout),
                                                   nn.Linear(64, 16)) for _ in range(3)])
        self.out = nn.Linear(16, 4)

    def forward(self, x, recompute=False):
        from oneflow.utils.checkpoint import checkpoint

        for b in self.blocks:
            x = x + (checkpoint(b, x) if recompute else b(x))
        return self.out(x)


class BlocksGraph(nn.Graph):
    def __init__(self, model, opt, checkpointing):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        for b in model.blocks:
            b.to(nn.graph.GraphModule).activation_checkpointing = checkpointing

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_activation_checkpointing_recomputes_and_holds_less(dropout):
    rng = np.random.RandomState(0)
    data = [(flow.tensor(rng.randn(64, 16).astype(np.float32)), flow.tensor(rng.randint(0, 4, 64)))
            for _ in range(4)]
    runs = {}
    for mode in ("eager", "graph", "graph+checkpointing"):
        model = Blocks(dropout)
        opt = flow.optim.SGD(model.parameters(), lr=0.1)
        g = BlocksGraph(model, opt, mode.endswith("checkpointing")) if mode != "eager" else None
        flow.manual_seed(7)  # the dropout masks: the same draws in every mode
        losses = []
        for x, y in data:
            if g is None:
                loss = nn.functional.cross_entropy(model(x, recompute=True), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            else:
                loss = g(x, y)
            losses.append(loss.numpy())
        runs[mode] = (losses, [p.numpy() for p in model.parameters()], g)
    for mode in ("graph", "graph+checkpointing"):
        np.testing.assert_allclose(runs[mode][0], runs["eager"][0], rtol=1e-5)
        for p, q in zip(runs[mode][1], runs["eager"][1]):
            np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
    plain, recomputed = runs["graph"][2], runs["graph+checkpointing"][2]
    plan, rplan = plain._compiled[0].plan, recomputed._compiled[0].plan
    # The forward runs again in backward (more steps), and fewer activations wait for it.
    assert rplan.num_steps() > plan.num_steps()
    assert rplan.peak_bytes() < 0.8 * plan.peak_bytes(), (rplan.peak_bytes(), plan.peak_bytes())
    if dropout:
        assert "(redraws step" in rplan.describe()


@pytest.mark.parametrize("case", ["zero1", "zero2", "pipeline", "amp_zero2"])
def test_graph_switches_on_two_ranks_equal_one_process_eager(case):
    """ZeRO 1/2 (state split(0), stage 2's reduce-scatter), set_stage pipelines (F0 F1 B0 F2 ..)
    and AMP + GradScaler + ZeRO 2 on global tensors: dist/graph_switches.py."""
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "graph_switches.py"), case, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = sorted(l.split("] ", 1)[-1] for l in r.stdout.splitlines() if l.endswith(" ok"))
    assert lines == [f"rank {k} graph {case} ok" for k in range(2)]


def test_parameters_replaced_after_compiling_compile_again():
    model = mlp()
    g = EvalGraph(model)
    x = flow.randn(3, 8)
    g(x)
    new = nn.Parameter(flow.randn(4, 16))
    model[2].weight = new  # the plan held the old Parameter
    np.testing.assert_allclose(g(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert g.builds == 2
    g(x)
    nn.Linear(2, 2)  # another module's assignments: checked, nothing of this graph changed
    g(x)
    assert g.builds == 2


class EmptyDrawGraph(nn.Graph):
    def build(self, x):
        empty = flow.rand(0)  # draws nothing: the next random op starts at the same counters
        return nn.functional.dropout(x, p=0.5, training=True), empty


def test_a_random_op_after_an_empty_draw_still_draws_new_numbers():
    g = EmptyDrawGraph()
    masks = [g(flow.ones(64))[0].numpy() for _ in range(3)]
    assert not (masks[0] == masks[1]).all() and not (masks[1] == masks[2]).all()
    assert "(redraws step" not in g._compiled[0].plan.describe()


def test_switches_are_fixed_once_compiled_and_module_switches_recompile():
    model = mlp()
    g = EvalGraph(model)
    x = flow.randn(3, 8)
    g(x)
    for call, name in [(lambda: g.config.enable_amp(True), "enable_amp"),
                       (lambda: g.config.set_gradient_accumulation_steps(2),
                        "set_gradient_accumulation_steps")]:
        with pytest.raises(RuntimeError, match=rf"^nn.Graph EvalGraph: config.{name} after the "
                           r"graph was compiled; set it in __init__ \(or make a new graph\)$"):
            call()
    model[0].to(nn.graph.GraphModule).activation_checkpointing = True
    g(x)
    assert g.builds == 2  # the module's switch changed what build traces


def test_enable_zero_without_shardable_parameters_is_one_line():
    model = mlp()
    g = TrainGraph(model, flow.optim.Adam(model.parameters(), lr=0.01))
    g.config.enable_zero(True, stage=2)
    with pytest.raises(ValueError, match=r"^nn.Graph TrainGraph: config.enable_zero shards the "
                       r"optimizer state of global parameters broadcast over several ranks with "
                       r"at least shard_min_size \(1024\) elements; none of the optimizers' "
                       r"parameters is one$"):
        g(*batches(1)[0])
    assert not g.is_compiled
