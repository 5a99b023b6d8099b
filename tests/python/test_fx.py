"""oneflow.fx: symbolic trace, graph edits and replace_pattern, checked against running the model
(and numpy) on the same inputs."""

import numpy as np
import pytest

import oneflow as flow
import oneflow.fx
import oneflow.nn as nn
import oneflow.nn.functional as F


def _double_relu(t):  # a user's helper: traced through with the forward
    return F.relu(t) * 2


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.seq = nn.Sequential(nn.Tanh(), nn.Linear(4, 2))
        self.scale = nn.Parameter(flow.tensor([0.5, -1.5]))

    def forward(self, x, shift=1.0):
        y = self.seq(self.fc(x)) * self.scale
        z = _double_relu(y).sum(dim=1, keepdim=True)
        return flow.cat([z, y[:, :1] + shift, y.shape[0] * z], dim=1).view(-1)


def test_trace_equals_eager_and_records_each_kind_of_node():
    m = _Net()
    gm = oneflow.fx.symbolic_trace(m)
    x = flow.randn(5, 3)
    assert np.allclose(gm(x).numpy(), m(x).numpy(), atol=1e-6)
    assert np.allclose(gm(x, shift=-2.0).numpy(), m(x, shift=-2.0).numpy(), atol=1e-6)
    ops = {n.op for n in gm.graph.nodes}
    assert ops == {"placeholder", "get_attr", "call_function", "call_method", "call_module",
                   "output"}
    # Library layers are leaves, Sequential is traced into, the helper's F.relu is recorded.
    modules = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert modules == ["fc", "seq.0", "seq.1"]
    functions = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert F.relu in functions and flow.cat in functions
    assert "oneflow.cat(" in gm.code and "def forward(self, x, shift=1.0)" in gm.code
    # The parameter is the model's own (get_attr), so training the model changes gm.
    with flow.no_grad():
        m.scale.fill_(3.0)
    assert np.allclose(gm(x).numpy(), m(x).numpy(), atol=1e-6)


def test_graph_edit_replaces_a_module_with_a_function():
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    gm = oneflow.fx.symbolic_trace(m)
    relu = [n for n in gm.graph.nodes if n.op == "call_module" and n.target == "1"][0]
    with gm.graph.inserting_before(relu):
        sig = gm.graph.call_function(flow.sigmoid, relu.args)
    relu.replace_all_uses_with(sig)
    gm.graph.erase_node(relu)
    gm.graph.lint()
    gm.recompile()
    x = flow.randn(3, 4)
    want = m[2](flow.sigmoid(m[0](x)))
    assert np.allclose(gm(x).numpy(), want.numpy(), atol=1e-6)
    assert "sigmoid" in gm.code and "'1'" not in gm.code


def test_replace_pattern_rewrites_every_match():
    class M(nn.Module):
        def forward(self, x, w):
            a = flow.cat([flow.neg(x), w]).sum()
            b = flow.cat([flow.neg(w), x]).sum()
            return a * b

    def pattern(p, q):
        return flow.cat([flow.neg(p), q]).sum()

    def replacement(p, q):
        return (p * q).sum()

    gm = oneflow.fx.symbolic_trace(M())
    matches = oneflow.fx.replace_pattern(gm, pattern, replacement)
    assert len(matches) == 2
    assert "neg" not in gm.code and "cat" not in gm.code
    x, w = np.random.rand(3).astype(np.float32), np.random.rand(3).astype(np.float32)
    got = gm(flow.tensor(x), flow.tensor(w)).numpy()
    assert np.allclose(got, (x * w).sum() * (w * x).sum(), rtol=1e-5)


def test_replace_pattern_skips_a_match_whose_inside_is_used_elsewhere():
    class M(nn.Module):
        def forward(self, x):
            n = flow.neg(x)
            return flow.cat([n, x]).sum() + n.sum()

    gm = oneflow.fx.symbolic_trace(M())
    matches = oneflow.fx.replace_pattern(
        gm, lambda p, q: flow.cat([flow.neg(p), q]).sum(), lambda p, q: (p * q).sum())
    assert matches == [] and "cat" in gm.code


def test_control_flow_on_a_traced_value_is_refused_and_modules_run_after():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            if x.sum() > 0:
                return self.fc(x)
            return x

    m = Branchy()
    with pytest.raises(oneflow.fx.TraceError, match="control flow cannot depend on it"):
        oneflow.fx.symbolic_trace(m)
    assert m(flow.ones(1, 2)).shape == (1, 2)  # the trace's module hook is gone


def test_graph_errors_name_the_operation():
    gm = oneflow.fx.symbolic_trace(nn.Sequential(nn.ReLU(), nn.ReLU()))
    first = [n for n in gm.graph.nodes if n.op == "call_module"][0]
    with pytest.raises(RuntimeError, match="erase_node: node _0 still has users _1"):
        gm.graph.erase_node(first)
    with pytest.raises(TypeError, match="symbolic_trace: expected an nn.Module or a Python "
                                        "function, got int"):
        oneflow.fx.symbolic_trace(3)


def test_calling_a_module_that_is_not_a_submodule_is_refused():
    stray = nn.ReLU()

    class M(nn.Module):
        def forward(self, x):
            return stray(x)

    with pytest.raises(oneflow.fx.TraceError, match="not a submodule of the traced module"):
        oneflow.fx.symbolic_trace(M())


def test_graph_module_deep_copies_and_runs_inside_nn_graph():
    import copy

    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    gm = oneflow.fx.symbolic_trace(m)
    twin = copy.deepcopy(gm)
    x = flow.randn(2, 3)
    assert np.allclose(twin(x).numpy(), m(x).numpy(), atol=1e-6)

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.gm = gm

        def build(self, x):
            return self.gm(x)

    assert np.allclose(G()(x).numpy(), m(x).numpy(), atol=1e-6)


def test_keyword_only_arguments_stay_keyword_only():
    class M(nn.Module):
        def forward(self, x, *, scale=2.0, bias):
            return x * scale + bias

    gm = oneflow.fx.symbolic_trace(M())
    assert "def forward(self, x, *, scale=2.0, bias)" in gm.code
    x = flow.ones(2)
    assert gm(x, bias=flow.ones(2)).tolist() == [3.0, 3.0]
    assert gm(x, scale=0.5, bias=x).tolist() == [1.5, 1.5]


def test_interpreter_runs_node_by_node_and_a_subclass_sees_each_value():
    m = _Net()
    gm = oneflow.fx.symbolic_trace(m)
    x = flow.randn(5, 3)
    assert np.allclose(oneflow.fx.Interpreter(gm).run(x).numpy(), m(x).numpy(), atol=1e-6)

    class Shapes(oneflow.fx.Interpreter):
        def run_node(self, node):
            out = super().run_node(node)
            node.shape = tuple(out.shape) if isinstance(out, flow.Tensor) else None
            return out

    assert np.allclose(Shapes(gm).run(x, shift=0.0).numpy(), m(x, shift=0.0).numpy(), atol=1e-6)
    shapes = {n.target: n.shape for n in gm.graph.nodes if n.op == "call_module"}
    assert shapes == {"fc": (5, 4), "seq.0": (5, 4), "seq.1": (5, 2)}
    with pytest.raises(TypeError, match="fx.Interpreter.run: missing the forward's argument 'x'"):
        oneflow.fx.Interpreter(gm).run()


def test_a_custom_tracer_and_graph_module_of_its_graph():
    class KeepSequentialWhole(oneflow.fx.Tracer):
        def is_leaf_module(self, m, qualified_name):
            return isinstance(m, nn.Sequential) or super().is_leaf_module(m, qualified_name)

    m = _Net()
    graph = KeepSequentialWhole().trace(m)
    gm = oneflow.fx.GraphModule(m, graph)
    assert [n.target for n in graph.nodes if n.op == "call_module"] == ["fc", "seq"]
    x = flow.randn(2, 3)
    assert np.allclose(gm(x).numpy(), m(x).numpy(), atol=1e-6)
    # inserting_after: a node placed right after fc's call.
    fc = [n for n in graph.nodes if n.target == "fc"][0]
    with graph.inserting_after(fc):
        doubled = graph.call_function(flow.mul, (fc, 2.0))
    for user in list(fc.users):
        if user is not doubled:
            user.replace_input_with(fc, doubled)
    graph.lint()
    gm.recompile()
    y = m.seq(m.fc(x) * 2.0) * m.scale  # _Net's forward with fc's output doubled
    z = (F.relu(y) * 2).sum(dim=1, keepdim=True)
    want = flow.cat([z, y[:, :1] + 1.0, y.shape[0] * z], dim=1).view(-1)
    assert np.allclose(gm(x).numpy(), want.numpy(), atol=1e-6)
    assert not np.allclose(gm(x).numpy(), m(x).numpy(), atol=1e-3)
