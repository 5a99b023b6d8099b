"""oneflow.nn: Module registration and state dicts, printing, init, and layers compared with
PyTorch (forward and backward) on copied weights."""

import copy
import math
from collections import OrderedDict

import pytest

import oneflow as flow
import oneflow.nn as nn
import oneflow.nn.functional as F


def _same_values(a, b, atol=1e-6):
    import numpy as np

    np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=1e-5, atol=atol)


def _numpy(t):
    import numpy as np

    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(3, 2, bias=False)
        self.register_buffer("steps", flow.zeros(1))
        self.register_buffer("scratch", flow.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


# ---- Parameter ----


def test_parameter_is_a_leaf_tensor_that_requires_grad():
    p = nn.Parameter(flow.zeros(2, 3))
    assert isinstance(p, flow.Tensor)
    assert isinstance(p, nn.Parameter)
    assert p.is_leaf and p.requires_grad
    assert tuple(p.shape) == (2, 3)
    assert not nn.Parameter(flow.zeros(2), requires_grad=False).requires_grad


def test_parameter_shares_storage_with_its_data():
    data = flow.zeros(3)
    p = nn.Parameter(data)
    with flow.no_grad():
        p.add_(1.0)
    assert data.tolist() == [1.0, 1.0, 1.0]


def test_parameter_of_a_non_leaf_is_a_leaf():
    x = flow.ones(2, requires_grad=True)
    p = nn.Parameter(x * 2)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad


def test_deepcopy_gives_independent_parameters():
    m = nn.Linear(2, 2)
    m2 = copy.deepcopy(m)
    assert isinstance(m2.weight, nn.Parameter)
    assert m2.weight is not m.weight
    _same_values(m2.weight, m.weight)
    with flow.no_grad():
        m2.weight.fill_(0.0)
    assert m.weight.abs().sum().item() > 0


# ---- registration ----


def test_attributes_register_parameters_buffers_and_modules():
    net = _Net()
    assert [n for n, _ in net.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight"]
    assert [n for n, _ in net.named_buffers()] == ["steps", "scratch"]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "act", "fc2"]
    assert len(list(net.parameters())) == 3
    assert len(list(net.parameters(recurse=False))) == 0
    assert net.fc1.bias is net._modules["fc1"]._parameters["bias"]
    assert net.fc2.bias is None


def test_state_dict_keys_and_persistence():
    net = _Net()
    sd = net.state_dict()
    assert isinstance(sd, OrderedDict)
    # PyTorch's order: a module's own parameters and buffers, then its children's.
    assert list(sd.keys()) == ["steps", "fc1.weight", "fc1.bias", "fc2.weight"]
    # Detached tensors that share storage with the parameters.
    assert not sd["fc1.weight"].requires_grad
    with flow.no_grad():
        net.fc1.weight.fill_(2.0)
    assert sd["fc1.weight"].sum().item() == pytest.approx(24.0)


def test_state_dict_round_trip_copies_in_place():
    a, b = _Net(), _Net()
    weight_before = b.fc1.weight
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b.fc1.weight is weight_before  # same Parameter object: optimizers keep working
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        _same_values(pa, pb)


def test_strict_load_lists_missing_and_unexpected_keys_in_one_line():
    net = _Net()
    sd = net.state_dict()
    del sd["fc1.bias"]
    sd["fc3.weight"] = flow.zeros(1)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd)
    assert str(info.value) == (
        "_Net.load_state_dict: missing keys ['fc1.bias']; unexpected keys ['fc3.weight']"
    )


def test_non_strict_load_returns_the_keys():
    net = _Net()
    sd = net.state_dict()
    del sd["fc1.bias"]
    sd["extra"] = flow.zeros(1)
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["fc1.bias"]
    assert result.unexpected_keys == ["extra"]


def test_shape_mismatch_names_the_key_and_both_shapes():
    net = _Net()
    sd = net.state_dict()
    sd["fc2.weight"] = flow.zeros(5, 3)
    for strict in (True, False):
        with pytest.raises(RuntimeError) as info:
            net.load_state_dict(sd, strict=strict)
        assert str(info.value) == (
            "_Net.load_state_dict: size mismatch for fc2.weight: checkpoint has shape (5, 3), "
            "model has shape (2, 3)"
        )


def test_assigning_a_plain_tensor_to_a_parameter_name_is_an_error():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError) as info:
        m.weight = flow.zeros(2, 2)
    assert str(info.value) == (
        "cannot assign 'Tensor' as parameter 'weight' (oneflow.nn.Parameter or None expected)"
    )


def test_register_parameter_errors():
    m = nn.Module()
    with pytest.raises(KeyError) as info:
        m.register_parameter("a.b", None)
    assert info.value.args[0] == 'parameter name can\'t contain ".", got "a.b"'
    with pytest.raises(TypeError, match="oneflow.nn.Parameter or None required"):
        m.register_parameter("w", flow.zeros(1))


def test_unknown_attribute_error():
    with pytest.raises(AttributeError) as info:
        nn.Linear(1, 1).foo
    assert str(info.value) == "'Linear' object has no attribute 'foo'"


def test_delattr_and_reassignment_between_kinds():
    net = _Net()
    del net.fc2
    assert "fc2" not in dict(net.named_children())
    net.steps = None  # a buffer may be set to None
    assert "steps" not in net.state_dict()
    net.fc1 = nn.Identity()
    assert [n for n, _ in net.named_parameters()] == []


def test_shared_parameters_are_listed_once():
    a = nn.Linear(2, 2)
    seq = nn.Sequential(a, a)
    assert len(list(seq.parameters())) == 2
    assert [n for n, _ in seq.named_modules()] == ["", "0"]


def test_train_eval_propagates():
    net = nn.Sequential(nn.Linear(1, 1), nn.Sequential(nn.Dropout(0.5)))
    net.eval()
    assert all(not m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError):
        net.train("yes")


def test_zero_grad_and_requires_grad_():
    m = nn.Linear(3, 1)
    m(flow.ones(2, 3)).sum().backward()
    assert m.weight.grad is not None
    m.zero_grad(set_to_none=False)
    assert m.weight.grad.abs().sum().item() == 0.0
    m.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None
    m.requires_grad_(False)
    assert not m.weight.requires_grad


def test_forward_hooks_and_pre_hooks():
    m = nn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: calls.append("pre"))
    h2 = m.register_forward_hook(lambda mod, args, out: out * 0)
    y = m(flow.ones(1, 2))
    assert calls == ["pre"]
    assert y.abs().sum().item() == 0.0
    h1.remove()
    h2.remove()
    assert m(flow.ones(1, 2)).abs().sum().item() > 0
    assert calls == ["pre"]


def test_pre_hook_can_replace_the_input():
    m = nn.Identity()
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    assert m(flow.ones(2)).tolist() == [2.0, 2.0]


def test_apply_visits_every_module():
    net = _Net()
    names = []
    net.apply(lambda mod: names.append(type(mod).__name__))
    assert names == ["Linear", "ReLU", "Linear", "_Net"]


def test_to_dtype_keeps_parameter_identity():
    net = _Net()
    w = net.fc1.weight
    net.to(flow.float64)
    assert net.fc1.weight is w
    assert isinstance(net.fc1.weight, nn.Parameter)
    assert net.fc1.weight.dtype == flow.float64
    assert net.steps.dtype == flow.float64
    net.float()
    assert net.fc1.weight.dtype == flow.float32
    y = net(flow.ones(1, 4))
    assert tuple(y.shape) == (1, 2)
    net.to("cpu")
    assert str(net.fc1.weight.device) == "cpu"


def test_to_leaves_integer_buffers_alone():
    bn = nn.BatchNorm2d(2)
    bn.double()
    assert bn.num_batches_tracked.dtype == flow.int64
    assert bn.running_mean.dtype == flow.float64


def test_forward_missing():
    with pytest.raises(NotImplementedError) as info:
        nn.Module()(flow.ones(1))
    assert str(info.value) == 'Module [Module] is missing the required "forward" function'


# ---- printing ----


def test_module_repr():
    assert repr(nn.Linear(1, 1)) == "Linear(in_features=1, out_features=1, bias=True)"
    assert repr(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)) == (
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)"
    )
    assert repr(nn.BatchNorm2d(4)) == (
        "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    )
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.ReLU()) == "ReLU()"
    assert repr(nn.Dropout(0.1)) == "Dropout(p=0.1, inplace=False)"
    assert repr(nn.GELU()) == "GELU(approximate='none')"


def test_nested_repr():
    net = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): Sequential(\n"
        "    (0): ReLU()\n"
        "    (1): Linear(in_features=3, out_features=1, bias=True)\n"
        "  )\n"
        ")"
    )


# ---- containers ----


def test_sequential_indexing_and_ordered_dict():
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert isinstance(seq[0], nn.Linear) and isinstance(seq[-1], nn.ReLU)
    assert len(seq[:1]) == 1
    assert list(seq.state_dict().keys()) == ["fc.weight", "fc.bias"]
    with pytest.raises(IndexError):
        seq[2]


def test_module_list():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
    layers.append(nn.ReLU())
    layers.insert(0, nn.Identity())
    assert [type(m).__name__ for m in layers] == ["Identity", "Linear", "Linear", "ReLU"]
    assert list(layers.state_dict().keys()) == ["1.weight", "1.bias", "2.weight", "2.bias"]


# ---- init ----


def test_default_linear_init_is_bounded_by_one_over_sqrt_fan_in():
    m = nn.Linear(100, 50)
    bound = 1 / math.sqrt(100)
    assert m.weight.abs().max().item() <= bound
    assert m.bias.abs().max().item() <= bound
    # Not all zeros or constant.
    assert m.weight.abs().max().item() > bound / 2


def test_init_functions():
    t = flow.empty(4, 6)
    assert nn.init.zeros_(t) is t
    assert t.abs().sum().item() == 0
    nn.init.ones_(t)
    assert t.sum().item() == 24
    nn.init.constant_(t, 0.5)
    assert t.sum().item() == 12
    assert nn.init._calculate_fan_in_and_fan_out(flow.empty(8, 3, 5, 5)) == (75, 200)
    assert nn.init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert nn.init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert nn.init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    nn.init.xavier_uniform_(t)
    assert t.abs().max().item() <= math.sqrt(6 / 10)
    nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    nn.init.xavier_normal_(t)
    nn.init.normal_(t, 0.0, 0.01)
    assert t.abs().max().item() < 0.1


def test_init_errors():
    with pytest.raises(ValueError) as info:
        nn.init.xavier_uniform_(flow.empty(3))
    assert str(info.value) == (
        "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (got shape (3,))"
    )
    with pytest.raises(ValueError) as info:
        nn.init.kaiming_uniform_(flow.empty(3, 3), mode="fan_avg")
    assert str(info.value) == "init: mode must be 'fan_in' or 'fan_out', got 'fan_avg'"
    with pytest.raises(ValueError) as info:
        nn.init.calculate_gain("swish")
    assert str(info.value) == "calculate_gain: unsupported nonlinearity 'swish'"


def test_init_does_not_record_a_graph():
    m = nn.Linear(3, 3)
    nn.init.uniform_(m.weight, -1, 1)
    assert m.weight.is_leaf and m.weight.grad_fn is None


# ---- functional argument checks ----


def test_functional_errors_name_the_op():
    x = flow.ones(1, 1, 4, 4)
    with pytest.raises(TypeError) as info:
        F.max_pool2d(x, (2, 2, 2))
    assert str(info.value) == "max_pool2d: kernel_size must be an int or a pair of ints, got (2, 2, 2)"
    with pytest.raises(ValueError) as info:
        F.mse_loss(x, x, reduction="avg")
    assert str(info.value) == "mse_loss: reduction must be 'none', 'mean' or 'sum', got 'avg'"
    with pytest.raises(ValueError) as info:
        F.conv2d(flow.ones(4, 4), flow.ones(1, 1, 3, 3))
    assert str(info.value) == "conv2d: expected a 4-D input, got shape (4, 4)"
    with pytest.raises(ValueError) as info:
        nn.Dropout(1.5)
    assert str(info.value) == "Dropout: probability has to be between 0 and 1, but got 1.5"
    with pytest.raises(ValueError) as info:
        nn.BatchNorm2d(3)(flow.ones(2, 3))
    assert str(info.value) == "BatchNorm2d: expected 4D input (got 2D input)"
    with pytest.raises(ValueError) as info:
        nn.BatchNorm1d(3)(flow.ones(1, 3))
    assert str(info.value) == (
        "batch_norm: expected more than 1 value per channel when training, got input of shape (1, 3)"
    )


def test_dropout_modes():
    x = flow.ones(1000)
    assert nn.Dropout(0.5).eval()(x).tolist() == x.tolist()
    y = nn.Dropout(0.5)(x)
    zeros = sum(1 for v in y.tolist() if v == 0.0)
    assert 350 < zeros < 650
    assert set(y.tolist()) <= {0.0, 2.0}


# ---- layers against PyTorch ----


def _torch():
    return pytest.importorskip("torch")


def _to_flow(t, requires_grad=False):
    """A flow tensor with the values and dtype of a torch tensor."""
    dtype = getattr(flow, str(t.dtype).rsplit(".", 1)[-1])
    return flow.tensor(t.detach().tolist(), dtype=dtype, requires_grad=requires_grad)


def _copy_state(torch_module, flow_module):
    flow_module.load_state_dict({k: _to_flow(v) for k, v in torch_module.state_dict().items()})


def _check_layer(torch_module, flow_module, torch_input, atol=1e-5):
    """Same output, input gradient and parameter gradients for a random upstream gradient."""
    torch = _torch()
    _copy_state(torch_module, flow_module)
    x_t = torch_input.clone().requires_grad_(True)
    x_f = _to_flow(torch_input, requires_grad=True)
    y_t = torch_module(x_t)
    y_f = flow_module(x_f)
    _same_values(y_f, y_t, atol)
    upstream = torch.randn(y_t.shape, dtype=y_t.dtype)
    (y_t * upstream).sum().backward()
    (y_f * _to_flow(upstream)).sum().backward()
    _same_values(x_f.grad, x_t.grad, atol)
    for (name, p_t), (_, p_f) in zip(torch_module.named_parameters(), flow_module.named_parameters()):
        _same_values(p_f.grad, p_t.grad, atol)
    for (name, b_t), (_, b_f) in zip(torch_module.named_buffers(), flow_module.named_buffers()):
        _same_values(b_f, b_t, atol)


def test_linear_matches_torch():
    torch = _torch()
    torch.manual_seed(0)
    _check_layer(torch.nn.Linear(5, 3), nn.Linear(5, 3), torch.randn(4, 5))
    _check_layer(torch.nn.Linear(5, 3, bias=False), nn.Linear(5, 3, bias=False), torch.randn(2, 4, 5))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(kernel_size=3),
        dict(kernel_size=3, padding=1),
        dict(kernel_size=(3, 2), stride=2, padding=(1, 0), bias=False),
        dict(kernel_size=3, dilation=2, padding="same"),
        dict(kernel_size=1, groups=2),
    ],
)
def test_conv2d_matches_torch(kwargs):
    torch = _torch()
    torch.manual_seed(0)
    x = torch.randn(2, 4, 7, 6)
    _check_layer(torch.nn.Conv2d(4, 6, **kwargs), nn.Conv2d(4, 6, **kwargs), x, atol=1e-4)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm2d_training_and_eval_match_torch(momentum):
    torch = _torch()
    torch.manual_seed(0)
    bn_t = torch.nn.BatchNorm2d(3, momentum=momentum)
    bn_f = nn.BatchNorm2d(3, momentum=momentum)
    with torch.no_grad():
        bn_t.weight.uniform_(0.5, 1.5)
        bn_t.bias.uniform_(-0.5, 0.5)
    for _ in range(3):  # running statistics and num_batches_tracked accumulate
        _check_layer(bn_t, bn_f, torch.randn(4, 3, 5, 5) * 2 + 1, atol=1e-4)
        bn_t.zero_grad()
        bn_f.zero_grad()
    assert bn_f.num_batches_tracked.item() == bn_t.num_batches_tracked.item() == 3
    bn_t.eval()
    bn_f.eval()
    _check_layer(bn_t, bn_f, torch.randn(4, 3, 5, 5), atol=1e-4)


def test_batchnorm_running_stats_accumulate_over_steps():
    torch = _torch()
    torch.manual_seed(0)
    bn_t = torch.nn.BatchNorm2d(2, momentum=None)
    bn_f = nn.BatchNorm2d(2, momentum=None)
    for _ in range(3):
        x = torch.randn(3, 2, 4, 4) * 3 + 2
        bn_t(x)
        bn_f(_to_flow(x))
    _same_values(bn_f.running_mean, bn_t.running_mean, 1e-5)
    _same_values(bn_f.running_var, bn_t.running_var, 1e-5)
    assert bn_f.num_batches_tracked.item() == 3


def test_batchnorm1d_matches_torch():
    torch = _torch()
    torch.manual_seed(0)
    _check_layer(torch.nn.BatchNorm1d(3), nn.BatchNorm1d(3), torch.randn(8, 3), atol=1e-4)
    _check_layer(torch.nn.BatchNorm1d(3), nn.BatchNorm1d(3), torch.randn(4, 3, 5), atol=1e-4)
    _check_layer(
        torch.nn.BatchNorm1d(3, affine=False, track_running_stats=False),
        nn.BatchNorm1d(3, affine=False, track_running_stats=False),
        torch.randn(4, 3),
        atol=1e-4,
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda nn_: nn_.MaxPool2d(2),
        lambda nn_: nn_.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
        lambda nn_: nn_.AvgPool2d(2),
        lambda nn_: nn_.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        lambda nn_: nn_.AdaptiveAvgPool2d((1, 1)),
        lambda nn_: nn_.AdaptiveAvgPool2d((2, None)),
        lambda nn_: nn_.Flatten(),
        lambda nn_: nn_.ReLU(),
        lambda nn_: nn_.ReLU6(),
        lambda nn_: nn_.Sigmoid(),
        lambda nn_: nn_.Tanh(),
        lambda nn_: nn_.GELU(),
        lambda nn_: nn_.GELU(approximate="tanh"),
        lambda nn_: nn_.Softmax(dim=1),
        lambda nn_: nn_.LogSoftmax(dim=1),
        lambda nn_: nn_.Identity(),
    ],
)
def test_parameterless_layers_match_torch(make):
    torch = _torch()
    torch.manual_seed(0)
    _check_layer(make(torch.nn), make(nn), torch.randn(2, 3, 6, 6) * 4)


def _check_loss(torch_loss, flow_loss, logits, target):
    torch = _torch()
    x_t = logits.clone().requires_grad_(True)
    x_f = _to_flow(logits, requires_grad=True)
    l_t = torch_loss(x_t, target)
    l_f = flow_loss(x_f, _to_flow(target))
    _same_values(l_f, l_t, 1e-5)
    upstream = torch.randn(l_t.shape)
    (l_t * upstream).sum().backward()
    (l_f * _to_flow(upstream)).sum().backward()
    _same_values(x_f.grad, x_t.grad, 1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_match_torch(reduction):
    torch = _torch()
    torch.manual_seed(0)
    logits = torch.randn(6, 4)
    target = torch.tensor([0, 3, 1, 2, 3, 0])
    ce_t = torch.nn.CrossEntropyLoss(reduction=reduction)
    ce_f = nn.CrossEntropyLoss(reduction=reduction)
    _check_loss(ce_t, ce_f, logits, target)
    ignoring = torch.tensor([0, -100, 1, 2, -100, 0])
    _check_loss(ce_t, ce_f, logits, ignoring)
    _check_loss(
        torch.nn.CrossEntropyLoss(reduction=reduction, label_smoothing=0.1),
        nn.CrossEntropyLoss(reduction=reduction, label_smoothing=0.1),
        logits,
        ignoring,
    )
    probs = torch.softmax(torch.randn(6, 4), dim=1)
    _check_loss(ce_t, ce_f, logits, probs)
    log_probs = torch.log_softmax(logits, dim=1)
    _check_loss(torch.nn.NLLLoss(reduction=reduction), nn.NLLLoss(reduction=reduction), log_probs, target)
    mse_t, mse_f = torch.nn.MSELoss(reduction=reduction), nn.MSELoss(reduction=reduction)
    _check_loss(mse_t, mse_f, logits, torch.randn(6, 4))


def test_small_cnn_trains_like_torch():
    """A whole model: same loss and gradients after copying the weights."""
    torch = _torch()
    torch.manual_seed(0)

    def build(nn_):
        return nn_.Sequential(
            nn_.Conv2d(1, 4, 3, padding=1),
            nn_.BatchNorm2d(4),
            nn_.ReLU(),
            nn_.MaxPool2d(2),
            nn_.Flatten(),
            nn_.Linear(4 * 4 * 4, 3),
        )

    net_t, net_f = build(torch.nn), build(nn)
    _copy_state(net_t, net_f)
    x = torch.randn(5, 1, 8, 8)
    y = torch.tensor([0, 1, 2, 1, 0])
    loss_t = torch.nn.functional.cross_entropy(net_t(x), y)
    loss_f = F.cross_entropy(net_f(_to_flow(x)), _to_flow(y))
    _same_values(loss_f, loss_t, 1e-5)
    loss_t.backward()
    loss_f.backward()
    for (name, p_t), (_, p_f) in zip(net_t.named_parameters(), net_f.named_parameters()):
        _same_values(p_f.grad, p_t.grad, 1e-4)
