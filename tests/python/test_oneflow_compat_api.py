"""OneFlow names that user code reaches for, against PyTorch where it has them and OneFlow's
documentation otherwise: the legacy typed constructors (flow.FloatTensor & co),
nn.functional.sparse_softmax_cross_entropy, flow._C.reshape_like, x.flip(dims=...),
oneflow.framework.args_tree and oneflow.framework.balanced_splitter."""

import collections

import numpy as np
import pytest
import torch

import oneflow as flow
from oneflow.framework import args_tree, balanced_splitter

TYPES = ["BoolTensor", "ByteTensor", "CharTensor", "IntTensor", "LongTensor", "HalfTensor",
         "BFloat16Tensor", "FloatTensor", "DoubleTensor"]


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


@pytest.mark.parametrize("name", TYPES)
def test_legacy_constructors_match_torch(name):
    ours, ref = getattr(flow, name), getattr(torch, name)
    data = [[0.0, 1.7], [-2.2, 255.0]] if name not in ("ByteTensor", "CharTensor") else [[0, 1], [2, 100]]
    for args in ((data,), (np.array(data),), (2, 3), (flow.Size([4]),), ()):
        targs = tuple(torch.Size(a) if isinstance(a, flow.Size) else a for a in args)
        x, t = ours(*args), ref(*targs)
        assert _dtype_name(x.dtype) == _dtype_name(t.dtype), args
        assert tuple(x.shape) == tuple(t.shape), args
        if args and not isinstance(args[0], (int, flow.Size)):  # sizes: values unspecified
            np.testing.assert_array_equal(x.float().numpy(), t.float().numpy())
    # a tensor argument: copied in the type's dtype (torch wants the type's own dtype already)
    assert ours(flow.tensor([2.5, 0.0])).tolist() == \
        ref(torch.tensor([2.5, 0.0]).to(t.dtype)).tolist()
    assert isinstance(x, ours) and isinstance(t, ref)
    for other in TYPES:
        assert isinstance(x, getattr(flow, other)) == isinstance(t, getattr(torch, other)), other
        assert not isinstance(x, getattr(flow.cuda, other))
    assert x.type() == t.type().replace("torch.", "oneflow.")
    assert repr(ours) == f"<class 'oneflow.{name}'>"


def test_a_constructor_without_arguments_gives_an_empty_tensor():
    assert tuple(flow.Tensor().shape) == tuple(torch.Tensor().shape) == (0,)
    assert flow.Tensor().dtype == flow.float32


def test_legacy_constructors_take_requires_grad_and_placement():
    w = flow.FloatTensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    assert w.grad.tolist() == [2.0, 4.0]
    P = flow.placement("cpu", ranks=[0])
    g = flow.LongTensor([[1, 2], [3, 4]], placement=P, sbp=flow.sbp.split(0))
    assert g.is_global and g.dtype == flow.int64 and g.sbp == (flow.sbp.split(0),)
    assert isinstance(g, flow.LongTensor) and g.numpy().tolist() == [[1, 2], [3, 4]]


def test_legacy_constructor_errors_are_one_line():
    with pytest.raises(TypeError, match=r"^oneflow.FloatTensor: the dtype is oneflow.float32, so "
                                        r"dtype= is not accepted \(got dtype=oneflow.int64\)$"):
        flow.FloatTensor([1], dtype=flow.int64)
    with pytest.raises(TypeError, match=r"^oneflow.LongTensor: expected sizes or data \(a list, "
                                        r"array or tensor\), got the string 'a'$"):
        flow.LongTensor("a")
    with pytest.raises(TypeError, match=r"^oneflow.cuda.FloatTensor: a CUDA type takes no "
                                        r"placement= or sbp="):
        flow.cuda.FloatTensor([1], placement=flow.placement("cpu", ranks=[0]), sbp=flow.sbp.broadcast)


def test_cuda_legacy_constructors():
    if not flow.cuda.is_available():
        with pytest.raises(RuntimeError, match=r"^oneflow.cuda.LongTensor: CUDA is not available"):
            flow.cuda.LongTensor([1, 2])
        return
    x = flow.cuda.LongTensor([1, 2])
    assert x.device.type == "cuda" and x.dtype == flow.int64
    assert isinstance(x, flow.cuda.LongTensor) and not isinstance(x, flow.LongTensor)
    assert x.type() == "oneflow.cuda.LongTensor"


def test_tensor_type_converts_like_torch():
    t, x = torch.ones(2), flow.ones(2)
    assert x.type(flow.LongTensor).dtype == flow.int64 == flow.int64
    assert t.type(torch.LongTensor).dtype == torch.int64
    assert x.type("oneflow.DoubleTensor").dtype == flow.float64
    assert x.type("torch.IntTensor").dtype == flow.int32
    assert x.type(flow.float16).dtype == flow.float16
    with pytest.raises(ValueError, match=r"^type: unknown tensor type 'oneflow.Nope'; expected"):
        x.type("oneflow.Nope")


def test_sparse_softmax_cross_entropy_matches_torch():
    rng = np.random.default_rng(0)
    for shape in ((6, 5), (2, 3, 5), (5,)):
        logits = rng.standard_normal(shape).astype(np.float32)
        labels = rng.integers(0, shape[-1], shape[:-1])
        x = flow.tensor(logits, requires_grad=True)
        out = flow.nn.functional.sparse_softmax_cross_entropy(labels=flow.tensor(labels), logits=x)
        t = torch.tensor(logits, requires_grad=True)
        ref = torch.nn.functional.cross_entropy(
            t.reshape(-1, shape[-1]), torch.tensor(labels).reshape(-1), reduction="none")
        ref = ref.reshape(labels.shape)
        assert tuple(out.shape) == tuple(ref.shape)
        np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
        (out * 1.5).sum().backward()
        (ref * 1.5).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    # int32 labels, positional (labels, logits) as OneFlow's signature
    out32 = flow.nn.functional.sparse_softmax_cross_entropy(
        flow.tensor(labels, dtype=flow.int32), flow.tensor(logits))
    np.testing.assert_allclose(out32.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sbp", [flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast],
                         ids=["S0", "S1", "B"])
def test_sparse_softmax_cross_entropy_on_global_logits(sbp):
    # on 4 ranks, every layout's values and gradient: tests/python/dist/global_api.py
    rng = np.random.default_rng(1)
    logits, labels = rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 6, (8,))
    P = flow.placement("cpu", ranks=[0])
    x = flow.tensor(logits, placement=P, sbp=sbp, requires_grad=True)
    y = flow.tensor(labels, placement=P, sbp=flow.sbp.broadcast)
    out = flow.nn.functional.sparse_softmax_cross_entropy(labels=y, logits=x)
    assert out.is_global and out.placement == P
    ref = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(labels),
                                            reduction="none")
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    assert x.grad.sbp == (sbp,)


def test_sparse_softmax_cross_entropy_errors_are_one_line():
    f = flow.nn.functional.sparse_softmax_cross_entropy
    with pytest.raises(ValueError, match=r"^sparse_softmax_cross_entropy: labels must have the "
                                         r"shape of logits without its last \(class\) dim, \(3,\), "
                                         r"got \(4,\)$"):
        f(flow.tensor([0, 1, 2, 0]), flow.ones(3, 5))
    with pytest.raises(TypeError, match=r"^sparse_softmax_cross_entropy: labels must be an int32 "
                                        r"or int64 tensor, got oneflow.float32$"):
        f(flow.ones(3), flow.ones(3, 5))
    with pytest.raises(TypeError, match=r"^sparse_softmax_cross_entropy: logits must be a floating "
                                        r"point tensor, got oneflow.int64$"):
        f(flow.tensor([0, 1, 2]), flow.ones(3, 5, dtype=flow.int64))


def test_reshape_like():
    x = flow.arange(6.0, requires_grad=True)
    y = flow._C.reshape_like(x, flow.zeros(2, 3))
    assert y.shape == flow.Size([2, 3])
    assert y.tolist() == torch.arange(6.0).reshape_as(torch.zeros(2, 3)).tolist()
    (y * 2).sum().backward()
    assert x.grad.tolist() == [2.0] * 6
    P = flow.placement("cpu", ranks=[0])
    g = flow._C.reshape_like(flow.arange(6.0, placement=P, sbp=flow.sbp.broadcast),
                             flow.zeros(3, 2))
    assert g.is_global and tuple(g.shape) == (3, 2)
    with pytest.raises(RuntimeError, match=r"^reshape_like: cannot reshape \(6,\) \(6 elements\) "
                                           r"like \(4,\) \(4 elements\)$"):
        flow._C.reshape_like(flow.zeros(6), flow.zeros(4))


def test_flip_takes_dims_as_a_keyword():
    x, t = flow.arange(6).reshape(2, 3), torch.arange(6).reshape(2, 3)
    for kw in ({"dims": [0]}, {"dims": (1,)}, {"dims": [0, 1]}):
        assert x.flip(**kw).tolist() == t.flip(**kw).tolist()
    assert x.flip(0, 1).tolist() == t.flip(0, 1).tolist()
    assert flow.flip(x, dims=[1]).tolist() == torch.flip(t, dims=[1]).tolist()
    with pytest.raises(TypeError, match=r"^flip: got the dims both as arguments \(0,\) and as dims="):
        x.flip(0, dims=[1])
    with pytest.raises(TypeError, match=r"^flip: expected the dims to flip"):
        x.flip()


def test_balanced_splitter_is_the_split_rule():
    assert balanced_splitter.BalancedPartNums(10, 4) == [3, 3, 2, 2]
    assert balanced_splitter.BalancedRanges(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert balanced_splitter.BalancedRanges(2, 3) == [(0, 1), (1, 2), (2, 2)]
    assert balanced_splitter.BalancedRanges(0, 2) == [(0, 0), (0, 0)]
    # the rule the global tensors use: each part is what split(0) gives a rank
    for total, parts in ((7, 3), (9, 4), (3, 4)):
        ranges = balanced_splitter.BalancedRanges(total, parts)
        assert [e - b for b, e in ranges] == [len(p) for p in np.array_split(np.arange(total), parts)]
    with pytest.raises(ValueError, match=r"^BalancedRanges: the number of parts must be a "
                                         r"positive int, got 0$"):
        balanced_splitter.BalancedRanges(4, 0)
    assert flow.framework.balanced_splitter is balanced_splitter


def test_args_tree_walks_and_maps_nested_arguments():
    a, b, c = flow.ones(1), flow.zeros(2), flow.ones(3)
    mx = flow.tensor([[1.0, 3.0]]).max(dim=1)  # a (values, indices) result is a container
    args = (a, [b, {"k": c, "n": None}], "s", mx)
    tree = args_tree.ArgsTree(args)
    nodes = list(tree.iter_nodes())
    assert nodes[0] is args and nodes[1] is a and nodes[2] == args[1] and nodes[3] is b
    assert [n for n in nodes if isinstance(n, flow.Tensor)][:3] == [a, b, c]
    assert sum(isinstance(n, flow.Tensor) for n in nodes) == 5
    mapped = tree.map_leaf(lambda v: v.shape[0] if isinstance(v, flow.Tensor) else v)
    assert mapped[:3] == (1, [2, {"k": 3, "n": None}], "s") and list(mapped[3]) == [1, 1]
    assert type(mapped) is tuple and type(mapped[1]) is list
    assert args_tree.ArgsTree([a, b]).map_tuple_leaf(lambda t: t.numel()) == [1, 2]
    od = collections.OrderedDict(x=a, y=(b,))
    assert type(args_tree.ArgsTree(od).map_leaf(lambda v: v)) is collections.OrderedDict
    with pytest.raises(TypeError, match=r"^ArgsTree.map_tuple_leaf: expected tuple or list "
                                        r"arguments, got dict$"):
        args_tree.ArgsTree({"x": a}).map_tuple_leaf(lambda v: v)


def test_args_tree_names_its_nodes():
    a, b = flow.ones(1), flow.zeros(2)
    tree = args_tree.ArgsTree((a, {"w": b}), gen_name=True, root_prefix="input", root_name="args")
    named = dict(tree.iter_named_nodes())
    assert list(named) == ["input_args", "input.0_1", "input.1_2", "input.1.0_w"]
    leaf = named["input.1.0_w"]
    assert leaf.value() is b and leaf.is_leaf() and leaf.global_index() == 3
    assert not named["input.1_2"].is_leaf()
    assert repr(named["input.0_1"]) == ("(name: 1, idx: 1, type: TENSOR, value: tensor("
                                        "oneflow.Size([1]), oneflow.float32))")
    mapped = tree.map_leaf(lambda node: node.name())
    assert mapped == ("1", {"w": "w"})
    with pytest.raises(RuntimeError, match=r"^ArgsTree.iter_named_nodes: the tree was built "
                                           r"without gen_name=True$"):
        list(args_tree.ArgsTree((a,)).iter_named_nodes())
