"""conv1d, conv_transpose1d/2d, pad, interpolate, channel dropout and the recurrent layers,
each compared with PyTorch on the same inputs and weights: values and gradients (inputs and
parameters) at rtol 1e-4 in float32, and the one-line text of each misuse error."""

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn as nn
import oneflow.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RTOL, ATOL = 1e-4, 1e-5


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _copy_weights(flow_mod, torch_mod):
    state = {k: flow.tensor(v.detach().numpy()) for k, v in torch_mod.state_dict().items()}
    flow_mod.load_state_dict(state)


def _compare(flow_fn, torch_fn, arrays, flow_mod=None, torch_mod=None, grad=True, seed=0):
    """Runs both on copies of arrays; compares every output and, through sum(out * r) for a
    random r, the gradients of every input and of the modules' parameters."""
    fx = [flow.tensor(a, requires_grad=grad) for a in arrays]
    tx = [torch.tensor(a, requires_grad=grad) for a in arrays]
    fo = [o for o in _flat(flow_fn(*fx)) if o is not None]
    to = [o for o in _flat(torch_fn(*tx)) if o is not None]
    assert len(fo) == len(to)
    rng = np.random.default_rng(seed)
    floss, tloss = 0, 0
    for f, t in zip(fo, to):
        assert tuple(f.shape) == tuple(t.shape)
        np.testing.assert_allclose(_np(f), _np(t), rtol=RTOL, atol=ATOL)
        r = rng.standard_normal(tuple(t.shape)).astype(np.float32)
        floss = floss + (f * flow.tensor(r)).sum()
        tloss = tloss + (t * torch.tensor(r)).sum()
    if not grad:
        return fo, to
    floss.backward()
    tloss.backward()
    for a, b in zip(fx, tx):
        np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=RTOL, atol=ATOL)
    if flow_mod is not None:
        tparams = dict(torch_mod.named_parameters())
        fparams = dict(flow_mod.named_parameters())
        assert sorted(fparams) == sorted(tparams)
        for name, p in fparams.items():
            np.testing.assert_allclose(_np(p.grad), _np(tparams[name].grad), rtol=RTOL, atol=ATOL,
                                       err_msg=name)
    return fo, to


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- conv1d ----


@pytest.mark.parametrize(
    "kernel,stride,padding,dilation,groups,bias",
    [
        (3, 1, 0, 1, 1, True),
        (3, 2, 1, 1, 1, False),
        (3, 1, 2, 2, 2, True),
        (3, 1, "same", 1, 1, True),
        (4, 1, "same", 1, 1, True),   # uneven 'same': the extra element on the right
        (3, 1, "same", 2, 2, False),
        (2, 1, "valid", 1, 1, True),
        (3, 3, (1,), (1,), 4, True),  # depthwise
    ],
)
def test_conv1d_matches_torch(kernel, stride, padding, dilation, groups, bias):
    x = _rand(2, 4, 9)
    w = _rand(6 if groups != 4 else 4, 4 // groups, kernel, seed=1)
    b = _rand(w.shape[0], seed=2)
    arrays = [x, w, b] if bias else [x, w]
    _compare(
        lambda x, w, b=None: F.conv1d(x, w, b, stride, padding, dilation, groups),
        lambda x, w, b=None: TF.conv1d(x, w, b, stride, padding, dilation, groups),
        arrays,
    )


def test_conv1d_unbatched_matches_torch():
    _compare(lambda x, w: F.conv1d(x, w, padding=1), lambda x, w: TF.conv1d(x, w, padding=1),
             [_rand(3, 7), _rand(5, 3, 3, seed=1)])


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate"])
@pytest.mark.parametrize("padding", [1, "same"])
def test_conv1d_module_matches_torch(padding_mode, padding):
    torch.manual_seed(0)
    tm = torch.nn.Conv1d(3, 5, 3, padding=padding, padding_mode=padding_mode)
    fm = nn.Conv1d(3, 5, 3, padding=padding, padding_mode=padding_mode)
    assert tuple(fm.weight.shape) == (5, 3, 3)
    _copy_weights(fm, tm)
    _compare(fm, tm, [_rand(2, 3, 8)], fm, tm)


def test_conv1d_errors():
    w = flow.tensor(_rand(4, 3, 3))
    with pytest.raises(ValueError, match=r"^conv1d: expected a 2-D or 3-D input, got shape \(1, 3, 4, 4\)$"):
        F.conv1d(flow.tensor(_rand(1, 3, 4, 4)), w)
    with pytest.raises(ValueError, match=r"^conv1d: padding='same' is not supported for strided convolutions$"):
        F.conv1d(flow.tensor(_rand(1, 3, 8)), w, stride=2, padding="same")
    with pytest.raises(TypeError, match=r"^conv1d: stride must be an int or a 1-tuple of ints, got \(1, 2\)$"):
        F.conv1d(flow.tensor(_rand(1, 3, 8)), w, stride=(1, 2))
    with pytest.raises(ValueError, match=r"^Conv1d: in_channels \(3\) must be divisible by groups \(2\)$"):
        nn.Conv1d(3, 4, 3, groups=2)


# ---- conv_transpose ----


@pytest.mark.parametrize(
    "stride,padding,output_padding,groups,dilation,bias",
    [
        (1, 0, 0, 1, 1, True),
        (2, 1, 1, 1, 1, True),
        ((2, 3), (1, 0), (1, 2), 1, 1, False),
        (2, 0, 0, 2, 1, True),
        (1, 1, 0, 1, 2, True),
        (3, 2, 1, 2, (2, 1), False),
    ],
)
def test_conv_transpose2d_matches_torch(stride, padding, output_padding, groups, dilation, bias):
    x = _rand(2, 4, 5, 4)
    w = _rand(4, 6 // groups, 3, 3, seed=1)
    b = _rand(6, seed=2)
    arrays = [x, w, b] if bias else [x, w]
    _compare(
        lambda x, w, b=None: F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation),
        lambda x, w, b=None: TF.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation),
        arrays,
    )


def test_conv_transpose2d_unbatched_matches_torch():
    _compare(lambda x, w: F.conv_transpose2d(x, w, stride=2),
             lambda x, w: TF.conv_transpose2d(x, w, stride=2),
             [_rand(3, 4, 4), _rand(3, 2, 2, 2, seed=1)])


def test_conv_transpose2d_module_matches_torch():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1, groups=2)
    fm = nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1, groups=2)
    assert tuple(fm.weight.shape) == tuple(tm.weight.shape) == (4, 3, 3, 2)
    _copy_weights(fm, tm)
    _compare(fm, tm, [_rand(2, 4, 5, 5)], fm, tm)


def test_conv_transpose2d_module_output_size_matches_torch():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    fm = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    _copy_weights(fm, tm)
    fo, _ = _compare(lambda x: fm(x, output_size=[10, 9]), lambda x: tm(x, output_size=[10, 9]),
                     [_rand(1, 3, 5, 5)], fm, tm)
    assert tuple(fo[0].shape) == (1, 2, 10, 9)
    with pytest.raises(ValueError, match=r"^ConvTranspose2d: requested an output size of \(12, 9\), but "
                                         r"valid sizes range from 9 to 10 in dimension 0"):
        fm(flow.tensor(_rand(1, 3, 5, 5)), output_size=[12, 9])


def test_conv_transpose1d_matches_torch():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1)
    fm = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1)
    _copy_weights(fm, tm)
    _compare(fm, tm, [_rand(2, 4, 7)], fm, tm)
    _compare(lambda x, w: F.conv_transpose1d(x, w, None, 3, 0, 2, 1, 2),
             lambda x, w: TF.conv_transpose1d(x, w, None, 3, 0, 2, 1, 2),
             [_rand(3, 5), _rand(3, 2, 2, seed=1)])


def test_conv_transpose_errors():
    x = flow.tensor(_rand(1, 4, 5, 5))
    w = flow.tensor(_rand(4, 2, 3, 3))
    with pytest.raises(Exception, match=r"conv_transpose2d: output_padding \(2, 2\) must be at least 0 and "
                                        r"smaller than the stride \(2, 2\)$"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(Exception, match=r"conv_transpose2d: input has 3 channels but weight \(4, 2, 3, 3\) "
                                        r"expects 4 \(in_channels\)$"):
        F.conv_transpose2d(flow.tensor(_rand(1, 3, 5, 5)), w)
    with pytest.raises(Exception, match=r"conv_transpose2d: expected bias of shape \(4,\) for 4 output "
                                        r"channels, got \(2,\)$"):
        F.conv_transpose2d(x, w, flow.tensor(_rand(2)), groups=2)
    with pytest.raises(ValueError, match=r"^conv_transpose2d: expected a 3-D or 4-D input, got shape \(4, 5\)$"):
        F.conv_transpose2d(flow.tensor(_rand(4, 5)), w)
    with pytest.raises(ValueError, match=r"^ConvTranspose2d: padding_mode must be 'zeros', got 'reflect'$"):
        nn.ConvTranspose2d(4, 2, 3, padding_mode="reflect")


# ---- pad ----


@pytest.mark.parametrize(
    "shape,pad,value",
    [
        ((2, 3, 5), (1, 2), 0.0),
        ((2, 3, 4, 5), (1, 0, 2, 3), 1.5),
        ((2, 3, 4, 5), (0, 1), -2.0),
        ((2, 3, 3, 4, 5), (1, 1, 0, 2, 2, 0), 0.5),
        ((4, 5), (1, 1, 1, 1), 3.0),
        ((2, 3, 4, 5), (-1, 2, 1, -2), 0.0),  # negative padding crops
    ],
)
def test_pad_constant_matches_torch(shape, pad, value):
    _compare(lambda x: F.pad(x, pad, value=value), lambda x: TF.pad(x, pad, value=value),
             [_rand(*shape)])


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize(
    "shape,pad",
    [
        ((2, 3, 6), (2, 3)),
        ((3, 6), (1, 4)),
        ((2, 3, 5, 6), (1, 2, 3, 0)),
        ((3, 5, 6), (2, 2, 1, 1)),
        ((1, 2, 4, 5, 6), (1, 2, 3, 1, 0, 2)),
        ((2, 4, 5, 6), (1, 1, 1, 1, 1, 1)),
    ],
)
def test_pad_reflect_replicate_matches_torch(mode, shape, pad):
    _compare(lambda x: F.pad(x, pad, mode=mode), lambda x: TF.pad(x, pad, mode=mode),
             [_rand(*shape)])


@pytest.mark.parametrize(
    "name,args",
    [
        ("ConstantPad1d", ((1, 2), 0.5)),
        ("ConstantPad2d", (2, -1.0)),
        ("ConstantPad3d", ((1, 0, 0, 1, 2, 1), 2.0)),
        ("ZeroPad2d", ((1, 2, 0, 3),)),
        ("ReflectionPad1d", (2,)),
        ("ReflectionPad2d", ((1, 2, 3, 0),)),
        ("ReflectionPad3d", (1,)),
        ("ReplicationPad1d", ((3, 0),)),
        ("ReplicationPad2d", (2,)),
        ("ReplicationPad3d", ((1, 2, 0, 1, 2, 0),)),
    ],
)
def test_pad_modules_match_torch(name, args):
    dims = int(name[-2])
    shape = {1: (2, 3, 5), 2: (2, 3, 5, 6), 3: (1, 2, 4, 5, 6)}[dims]
    _compare(getattr(nn, name)(*args), getattr(torch.nn, name)(*args), [_rand(*shape)])


def test_pad_errors():
    x = flow.tensor(_rand(1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"^pad: padding length must be divisible by 2, got 3 values \(1, 1, 1\)$"):
        F.pad(x, (1, 1, 1))
    with pytest.raises(ValueError, match=r"^pad: reflect padding \(3, 0\) must be smaller than the size 3 "
                                         r"of dimension 2 of the input \(1, 2, 3, 4\)$"):
        F.pad(x, (0, 0, 3, 0), mode="reflect")
    with pytest.raises(ValueError, match=r"^pad: mode='replicate' with 2 padding values expects a 2-D or "
                                         r"3-D input, got shape \(1, 2, 3, 4\)$"):
        F.pad(x, (1, 1), mode="replicate")
    with pytest.raises(NotImplementedError, match=r"^pad: mode='circular' is not supported"):
        F.pad(x, (1, 1, 1, 1), mode="circular")
    with pytest.raises(ValueError, match=r"^pad: padding \(1, 1, 1, 1, 1, 1, 1, 1, 1, 1\) pads 5 dimensions "
                                         r"but the input has only 4 \(shape \(1, 2, 3, 4\)\)$"):
        F.pad(x, (1,) * 10)
    with pytest.raises(ValueError, match=r"^pad: a padding value is only used by mode='constant'"):
        F.pad(x, (1, 1), mode="reflect", value=1.0)
    with pytest.raises(TypeError, match=r"^ReflectionPad2d: padding must be an int or a tuple of 4 ints, "
                                        r"got \(1, 2\)$"):
        nn.ReflectionPad2d((1, 2))


# ---- interpolate ----


@pytest.mark.parametrize(
    "shape,kwargs",
    [
        ((2, 3, 5), dict(size=9, mode="nearest")),
        ((2, 3, 5), dict(scale_factor=2, mode="nearest")),
        ((2, 3, 7), dict(size=3, mode="nearest")),
        ((2, 3, 4, 5), dict(scale_factor=(2, 3), mode="nearest")),
        ((2, 3, 4, 5), dict(size=(7, 3), mode="nearest")),
        ((2, 3, 4, 5), dict(scale_factor=1.7, mode="nearest")),
        ((2, 3, 4, 5), dict(scale_factor=1.7, mode="nearest", recompute_scale_factor=True)),
        ((2, 3, 4, 5), dict(size=(7, 3), mode="nearest-exact")),
        ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="nearest")),
        ((2, 3, 5), dict(size=8, mode="linear", align_corners=False)),
        ((2, 3, 5), dict(scale_factor=2.5, mode="linear", align_corners=True)),
        ((2, 3, 4, 5), dict(size=(7, 9), mode="bilinear", align_corners=False)),
        ((2, 3, 4, 5), dict(size=(7, 9), mode="bilinear", align_corners=True)),
        ((2, 3, 4, 5), dict(scale_factor=2, mode="bilinear", align_corners=False)),
        ((2, 3, 4, 5), dict(scale_factor=(1.5, 0.6), mode="bilinear", align_corners=False)),
        ((2, 3, 8, 9), dict(size=(3, 4), mode="bilinear", align_corners=True)),
        ((2, 3, 8, 9), dict(size=(3, 1), mode="bilinear", align_corners=True)),
        ((2, 3, 4, 5), dict(size=(6, 7), mode="bilinear")),  # align_corners default False
    ],
)
def test_interpolate_matches_torch(shape, kwargs):
    _compare(lambda x: F.interpolate(x, **kwargs), lambda x: TF.interpolate(x, **kwargs),
             [_rand(*shape)])


def test_upsample_modules_match_torch():
    x = [_rand(2, 3, 4, 5)]
    _compare(nn.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2), x)
    _compare(nn.Upsample(size=(6, 7), mode="bilinear", align_corners=False),
             torch.nn.Upsample(size=(6, 7), mode="bilinear", align_corners=False), x)
    _compare(nn.UpsamplingBilinear2d(scale_factor=2), torch.nn.UpsamplingBilinear2d(scale_factor=2), x)
    _compare(nn.UpsamplingNearest2d(size=(5, 9)), torch.nn.UpsamplingNearest2d(size=(5, 9)), x)


def test_interpolate_errors():
    x = flow.tensor(_rand(1, 2, 4, 4))
    with pytest.raises(ValueError, match=r"^interpolate: only one of size or scale_factor should be defined$"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match=r"^interpolate: either size or scale_factor should be defined$"):
        F.interpolate(x)
    with pytest.raises(ValueError, match=r"^interpolate: mode='bilinear' expects a 4-D input \(N, C, \.\.\.\), "
                                         r"got shape \(1, 2, 4\)$"):
        F.interpolate(flow.tensor(_rand(1, 2, 4)), size=3, mode="bilinear")
    with pytest.raises(ValueError, match=r"^interpolate: align_corners option can only be set with the "
                                         r"interpolating modes"):
        F.interpolate(x, size=3, align_corners=True)
    with pytest.raises(ValueError, match=r"^interpolate: input with spatial dimensions \[4, 4\] needs an "
                                         r"output size of 2 values, got size=\(3, 3, 3\)$"):
        F.interpolate(x, size=(3, 3, 3))
    with pytest.raises(NotImplementedError, match=r"^interpolate: mode='bicubic' is not supported"):
        F.interpolate(x, size=3, mode="bicubic")


# ---- channel dropout ----


@pytest.mark.parametrize("cls,shape", [("Dropout2d", (40, 50, 3, 4)), ("Dropout1d", (40, 50, 6)),
                                        ("Dropout1d", (50, 6))])
def test_channel_dropout_structure_and_rate(cls, shape):
    p = 0.3
    flow.manual_seed(1)
    m = getattr(nn, cls)(p)
    x = flow.tensor(np.abs(_rand(*shape)) + 0.5, requires_grad=True)
    y = m(x)
    y.sum().backward()
    ratio = _np(y) / _np(x)
    channels = ratio.reshape(int(np.prod(shape[: len(shape) - (2 if cls == "Dropout2d" else 1)])), -1)
    # One draw per channel: every value of a channel is dropped or kept and scaled by 1/(1-p).
    np.testing.assert_allclose(channels, channels[:, :1].repeat(channels.shape[1], 1), rtol=1e-6)
    kept = channels[:, 0] != 0
    np.testing.assert_allclose(channels[kept, 0], 1 / (1 - p), rtol=1e-6)
    assert abs((~kept).mean() - p) < 0.05, (~kept).mean()
    # The gradient is the same mask.
    np.testing.assert_allclose(_np(x.grad), ratio, rtol=1e-6)
    # Another call draws another mask.
    assert not np.array_equal(_np(m(x)) != 0, _np(y) != 0)
    m.eval()
    assert np.array_equal(_np(m(x)), _np(x))


def test_channel_dropout_errors():
    # Other ranks: a warning and the channels of a 3-D input, as PyTorch 1.13 (and OneFlow's
    # tests) do.
    with pytest.warns(UserWarning, match=r"^dropout2d: Received a 2-D input to dropout2d"):
        assert F.dropout2d(flow.ones(2, 3)).shape == (2, 3)
    with pytest.raises(ValueError, match=r"^dropout1d: dropout probability has to be between 0 and 1, "
                                         r"but got 1.5$"):
        F.dropout1d(flow.ones(2, 3), 1.5)
    with pytest.raises(ValueError, match=r"^Dropout2d: dropout probability has to be between 0 and 1, "
                                         r"but got -0.1$"):
        nn.Dropout2d(-0.1)
    with pytest.raises(ValueError, match=r"^Dropout2d: inplace=True is not supported$"):
        nn.Dropout2d(0.5, inplace=True)
    assert np.array_equal(_np(F.dropout2d(flow.ones(2, 3, 4, 4), 1.0)), np.zeros((2, 3, 4, 4)))


# ---- recurrent layers ----


def _rnn_pair(cls, seed=0, **kwargs):
    torch.manual_seed(seed)
    tm = getattr(torch.nn, cls)(**kwargs)
    fm = getattr(nn, cls)(**kwargs)
    assert list(dict(fm.named_parameters())) == list(dict(tm.named_parameters()))
    for (name, p), (_, q) in zip(fm.named_parameters(), tm.named_parameters()):
        assert tuple(p.shape) == tuple(q.shape), name
    _copy_weights(fm, tm)
    return fm, tm


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize(
    "num_layers,bias,batch_first,bidirectional,with_state",
    [
        (1, True, False, False, False),
        (2, True, True, False, True),
        (1, False, False, True, True),
        (2, True, False, True, False),
        (3, False, True, True, True),
    ],
)
def test_rnn_layers_match_torch(cls, num_layers, bias, batch_first, bidirectional, with_state):
    fm, tm = _rnn_pair(cls, input_size=3, hidden_size=4, num_layers=num_layers, bias=bias,
                       batch_first=batch_first, bidirectional=bidirectional)
    d = 2 if bidirectional else 1
    x = _rand(2, 5, 3) if batch_first else _rand(5, 2, 3)
    arrays = [x]
    if with_state:
        arrays.append(_rand(num_layers * d, 2, 4, seed=1))
        if cls == "LSTM":
            arrays.append(_rand(num_layers * d, 2, 4, seed=2))

    def call(m):
        def f(x, h=None, c=None):
            if h is None:
                return m(x)
            return m(x, (h, c)) if cls == "LSTM" else m(x, h)
        return f

    fo, to = _compare(call(fm), call(tm), arrays, fm, tm)
    assert len(fo) == (3 if cls == "LSTM" else 2)


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_rnn_unbatched_and_relu_match_torch(cls):
    fm, tm = _rnn_pair(cls, input_size=3, hidden_size=4, num_layers=2, bidirectional=True)
    _compare(fm, tm, [_rand(6, 3)], fm, tm)
    fm, tm = _rnn_pair("RNN", input_size=3, hidden_size=4, nonlinearity="relu", num_layers=2)
    _compare(fm, tm, [_rand(6, 2, 3)], fm, tm)


def test_rnn_dropout_between_layers():
    # dropout=1 zeroes the second layer's input in training: both frameworks then agree exactly;
    # in eval mode dropout is off and they agree too.
    for training in (True, False):
        fm, tm = _rnn_pair("LSTM", input_size=3, hidden_size=4, num_layers=2, dropout=1.0)
        fm.train(training)
        tm.train(training)
        _compare(fm, tm, [_rand(5, 2, 3)], fm, tm)
    fm, _ = _rnn_pair("GRU", input_size=3, hidden_size=4, num_layers=2, dropout=0.5)
    x = flow.tensor(_rand(5, 2, 3))
    flow.manual_seed(0)
    a = fm(x)[0]
    b = fm(x)[0]
    assert not np.allclose(_np(a), _np(b))  # a fresh mask between the layers each call
    fm.eval()
    assert np.array_equal(_np(fm(x)[0]), _np(fm(x)[0]))


@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell", "RNNCell"])
def test_rnn_cells_match_torch(cls):
    for bias in (True, False):
        fm, tm = _rnn_pair(cls, input_size=3, hidden_size=4, bias=bias)
        _compare(fm, tm, [_rand(2, 3)], fm, tm)
        arrays = [_rand(2, 3), _rand(2, 4, seed=1)] + ([_rand(2, 4, seed=2)] if cls == "LSTMCell" else [])
        if cls == "LSTMCell":
            _compare(lambda x, h, c: fm(x, (h, c)), lambda x, h, c: tm(x, (h, c)), arrays, fm, tm)
        else:
            _compare(fm, tm, arrays, fm, tm)
        _compare(fm, tm, [_rand(3)], fm, tm)  # unbatched


def test_rnn_state_dict_from_torch_gives_identical_outputs():
    torch.manual_seed(3)
    tm = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True)
    fm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True)
    assert list(fm.state_dict()) == list(tm.state_dict())
    _copy_weights(fm, tm)
    x = _rand(2, 4, 3)
    out, (h, c) = fm(flow.tensor(x))
    tout, (th, tc) = tm(torch.tensor(x))
    for a, b in ((out, tout), (h, th), (c, tc)):
        np.testing.assert_allclose(_np(a), _np(b), rtol=RTOL, atol=ATOL)


def test_rnn_errors():
    m = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(ValueError, match=r"^LSTM: input.size\(-1\) must be equal to input_size. Expected 3, got 5$"):
        m(flow.ones(4, 2, 5))
    with pytest.raises(ValueError, match=r"^LSTM: Expected input to be 2-D or 3-D but received 4-D tensor$"):
        m(flow.ones(4, 2, 3, 1))
    with pytest.raises(ValueError, match=r"^LSTM: expected h_0 of shape \(2, 2, 4\), got \(1, 2, 4\)$"):
        m(flow.ones(4, 2, 3), (flow.zeros(1, 2, 4), flow.zeros(2, 2, 4)))
    with pytest.raises(TypeError, match=r"^LSTM: expected hx as a tuple \(h_0, c_0\), got Tensor$"):
        m(flow.ones(4, 2, 3), flow.zeros(2, 2, 4))
    with pytest.raises(ValueError, match=r"^GRU: expected h_0 of shape \(2, 4\), got \(1, 2, 4\)$"):
        nn.GRU(3, 4, bidirectional=True)(flow.ones(4, 3), flow.zeros(1, 2, 4))
    with pytest.raises(NotImplementedError, match=r"^LSTM: proj_size is not supported, got 2$"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match=r"^GRU: dropout should be a number in range \[0, 1\]"):
        nn.GRU(3, 4, dropout=2)
    with pytest.raises(ValueError, match=r"^RNN: Unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match=r"^GRUCell: input has inconsistent input_size: got 2 expected 3$"):
        nn.GRUCell(3, 4)(flow.ones(5, 2))
    with pytest.raises(ValueError, match=r"^LSTMCell: expected h_0 of shape \(5, 4\), got \(5, 3\)$"):
        nn.LSTMCell(3, 4)(flow.ones(5, 3), (flow.zeros(5, 3), flow.zeros(5, 4)))
