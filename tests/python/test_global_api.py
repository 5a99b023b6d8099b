"""The global-tensor API OneFlow's own suite exercises (issue 20): constructors, devices,
generators, creation functions with placement/sbp, global_view, and every 1-D placement change
in a fresh job. One process here; 4 ranks through the launcher."""

import os

import numpy as np
import pytest
import torch

import oneflow as flow
from test_comm import DEVICES, DIST, env_with, free_port, launch
from test_global import _oneflow_naive_bytes, ok_lines, plan, S0, S1, B, P

P1 = flow.placement("cpu", ranks=[0])


def test_zero_size_tensors_are_contiguous():
    # A 0-size shard reported is_contiguous() False and collectives refused it.
    x = flow.zeros(8, 0, 4)
    assert x.is_contiguous() and x.permute(2, 0, 1).is_contiguous()
    assert not flow.zeros(2, 3).t().is_contiguous()


def test_cpu_devices_of_any_index_are_this_process_cpu():
    # flow.tensor(x, device="cpu:1") raised "CUDA is not available"; OneFlow names rank r's CPU
    # cpu:r, and all of them are one memory in a process.
    t = flow.tensor([1.0, 2.0], device="cpu:1")
    assert t.device == flow.device("cpu") == flow.device("cpu", 3) == flow.device("cpu:2")
    assert repr(flow.device("cpu", 3)) == "device(type='cpu', index=0)"  # local rank 0 here
    assert t.to("cpu:3").numpy().tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match=r"^device: index must be >= 0, got -1$"):
        flow.device("cpu", -1)
    with pytest.raises(RuntimeError, match=r"^device: the index in 'cpu:-2' must be >= 0$"):
        flow.device("cpu:-2")


def test_tensor_constructor_global_forms():
    x = flow.Tensor(2, 3, placement=P1, sbp=flow.sbp.split(0))
    assert x.is_global and tuple(x.shape) == (2, 3) and x.sbp == (flow.sbp.split(0),)
    y = flow.Tensor([[1, 2], [3, 4]], placement=P1, sbp=flow.sbp.broadcast)
    assert y.dtype == flow.float32 and y.numpy().tolist() == [[1, 2], [3, 4]]
    z = flow.Tensor(y, device="cpu")  # OneFlow: global -> this rank's local tensor
    assert z.is_local and z.numpy().tolist() == [[1, 2], [3, 4]]
    w = flow.Tensor(y, placement=P1, sbp=flow.sbp.split(1))
    assert w.sbp == (flow.sbp.split(1),) and w.numpy().tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match="^Tensor: placement and sbp go together"):
        flow.Tensor(2, placement=P1)


def test_type_as_a_global_tensor_gives_a_global_tensor():
    g = flow.ones(3, dtype=flow.float64, placement=P1, sbp=flow.sbp.broadcast)
    u = flow.tensor([1, 2, 3]).type_as(g)
    assert u.is_global and u.placement == P1 and u.dtype == flow.float64
    assert u.sbp == (flow.sbp.broadcast,) and u.numpy().tolist() == [1.0, 2.0, 3.0]
    s = flow.ones(4, dtype=flow.int32, placement=P1, sbp=flow.sbp.split(0)).type_as(g)
    assert s.is_global and s.placement == P1 and s.dtype == flow.float64
    assert s.sbp == (flow.sbp.broadcast,)  # g's sbp (OneFlow), not s's own split(0)
    assert flow.tensor([1, 2]).type_as(flow.ones(1)).dtype == flow.float32  # local: the dtype


def test_global_tensors_have_no_device():
    g = flow.ones(2, 3, placement=P1, sbp=flow.sbp.split(0))
    with pytest.raises(RuntimeError, match=r"^device: a global tensor has no device but a "
                                           r"placement \(oneflow.placement\(type=\"cpu\", "
                                           r"ranks=\[0\]\)\); read .placement"):
        g.device
    with pytest.raises(RuntimeError, match="^_tensor_buffer_shapes_and_dtypes: only local tensor "
                                           "buffers have it; this tensor is global$"):
        g._tensor_buffer_shapes_and_dtypes
    # the package's own paths that read a device still work on global tensors
    assert "placement=" in repr(g) and flow.zeros_like(g).placement == P1


def test_generator_streams():
    gen = flow.Generator()
    assert gen.manual_seed(7) is gen and gen.initial_seed() == 7
    flow.manual_seed(7)
    want = flow.randn(5).numpy()
    flow.manual_seed(123)
    before = flow.rand(3).numpy()
    flow.manual_seed(123)
    got = flow.randn(5, generator=gen).numpy()
    # g.manual_seed(s) + draw == flow.manual_seed(s) + draw, and the default stream is untouched
    assert np.array_equal(got, want)
    assert np.array_equal(flow.rand(3).numpy(), before)
    # the generator moves on, and repeats after manual_seed; every drawing function honours it
    draws = {
        "rand": lambda g: flow.rand(2, 3, generator=g),
        "randn": lambda g: flow.randn(2, 3, generator=g),
        "randint": lambda g: flow.randint(0, 100, (6,), generator=g),
        "randperm": lambda g: flow.randperm(20, generator=g),
        "normal": lambda g: flow.normal(1.0, 2.0, (4,), generator=g),
        "normal_": lambda g: flow.empty(4).normal_(generator=g),
        "uniform_": lambda g: flow.empty(4).uniform_(generator=g),
        "rand_like": lambda g: flow.rand_like(flow.ones(3), generator=g),
        "randint_like": lambda g: flow.randint_like(flow.ones(5), 10, generator=g),
    }
    for name, draw in draws.items():
        gen.manual_seed(11)
        a, b = draw(gen).numpy(), draw(gen).numpy()
        gen.manual_seed(11)
        assert np.array_equal(draw(gen).numpy(), a), name
        assert not np.array_equal(a, b), name
    state = gen.get_state()
    c = flow.rand(4, generator=gen).numpy()
    gen.set_state(state)
    assert np.array_equal(flow.rand(4, generator=gen).numpy(), c)
    with pytest.raises(TypeError, match="^randn: generator must be a oneflow.Generator, got int$"):
        flow.randn(2, generator=3)
    flow.default_generator.manual_seed(9)
    assert flow.initial_seed() == 9


def test_creation_functions_match_torch_and_take_placement():
    for n in (0, 1, 2, 5, 8):
        for periodic in (True, False):
            np.testing.assert_allclose(flow.hann_window(n, periodic=periodic).numpy(),
                                       torch.hann_window(n, periodic=periodic).numpy(),
                                       rtol=1e-6, atol=1e-7)
    for start, end, steps, base in [(-10, 10, 8, 10.0), (0, 3, 4, 2.0), (1, 1, 1, 10.0),
                                    (2, -1, 7, 3.0)]:
        np.testing.assert_allclose(flow.logspace(start, end, steps, base=base).numpy(),
                                   torch.logspace(start, end, steps, base=base).numpy(),
                                   rtol=1e-5)
    flow.manual_seed(3)
    n = flow.normal(2.0, 3.0, (1000,), dtype=flow.float64)
    flow.manual_seed(3)
    assert np.allclose(n.numpy(), flow.randn(1000, dtype=flow.float64).numpy() * 3 + 2)
    r = flow.randint_like(flow.ones(2, 50), 3, 7, dtype=flow.int8)
    assert r.dtype == flow.int8 and tuple(r.shape) == (2, 50)
    assert r.numpy().min() >= 3 and r.numpy().max() <= 6
    assert tuple(flow.rand(size=(2, 3)).shape) == (2, 3)
    with pytest.raises(TypeError, match="^normal: with number mean and std, size is required"):
        flow.normal(0.0, 1.0)
    S = flow.sbp.split(0)
    for make in (lambda: flow.hann_window(8, placement=P1, sbp=S),
                 lambda: flow.logspace(-10, 10, 8, placement=P1, sbp=S),
                 lambda: flow.normal(0.0, 1.0, (8, 8), placement=P1, sbp=S, dtype=flow.float64,
                                     requires_grad=True),
                 lambda: flow.randperm(8, placement=P1, sbp=S),
                 lambda: flow.randint_like(flow.ones(8), 1, 10, placement=P1, sbp=S)):
        t = make()
        assert t.is_global and t.placement == P1 and t.sbp == (S,)


def test_global_view_and_graph_api_errors():
    from oneflow.utils import global_view
    sd = {"a": flow.ones(2), "b": [flow.zeros(3), None]}
    g = global_view.to_global(sd, placement=P1, sbp=flow.sbp.broadcast)
    assert g["a"].is_global and g["b"][0].placement == P1 and g["b"][1] is None
    assert global_view.to_local(g)["b"][0].is_local
    with pytest.raises(ValueError, match="^global_view.to_global: local tensors need both "
                                         "placement and sbp"):
        global_view.to_global(flow.ones(2), placement=None, sbp=None)
    with pytest.raises(TypeError, match="^to_global: sbp must be"):
        global_view.to_global(flow.ones(2), placement=P1, sbp=(flow.sbp.broadcast, 0))
    with pytest.raises(ValueError, match="global_mode: an enabled global mode needs placement"):
        global_view.global_mode(True)

    class G(flow.nn.Graph):
        pass
    assert G().state_dict() == {}  # no modules, no optimizer: nothing to save
    with pytest.raises(NotImplementedError, match=r"^nn.Graph G: subclasses must define build\(\)$"):
        G()()


def test_global_api_on_four_ranks():
    r = launch("--nproc_per_node", 4, "--master_port", free_port(),
               os.path.join(DIST, "global_api.py"), timeout=300,
               env=env_with(ONEFLOW_TIMEOUT_SECONDS="30"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    names = ["zero size", "constructors", "random", "type_as", "numpy operands",
             "sparse softmax cross entropy", "devices", "global view"]
    assert ok_lines(r.stdout) == sorted(f"rank {k} {n} ok" for k in range(4) for n in names)


# Issue 20, "Must show": each relation between source and destination placement, even and
# uneven sizes, in a fresh job whose first collective is the change itself.
RELATIONS = {"contains": ("1,2", "0,1,2,3"), "contained": ("0,1,2,3", "2,3"),
             "overlaps": ("0,1,2", "1,2,3"), "disjoint": ("0,1", "2,3")}


@pytest.mark.parametrize("shape", ["4,6", "5,3"], ids=["even", "uneven"])
@pytest.mark.parametrize("relation", sorted(RELATIONS))
@pytest.mark.parametrize("device", DEVICES)
def test_placement_change_in_a_fresh_job(relation, shape, device):
    src, dst = RELATIONS[relation]
    # bytes the plan moves: never more than OneFlow's naive point-to-point boxing
    dims = tuple(int(d) for d in shape.split(","))
    s, d = [int(r) for r in src.split(",")], [int(r) for r in dst.split(",")]
    for a in (S0, S1, B, P):
        for b in (S0, S1, B, P):
            _, cost = plan(s, [a], d, [b], shape=dims)
            assert cost <= _oneflow_naive_bytes(s, a, d, b, dims), (relation, a, b, cost)
    # values and waits: a second at most per change (ONEFLOW_TIMEOUT_SECONDS bounds a hang)
    r = launch("--nproc_per_node", 4, "--master_port", free_port(),
               os.path.join(DIST, "placement_relations.py"), src, dst, shape, timeout=120,
               env=env_with(ONEFLOW_TIMEOUT_SECONDS="10"), device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == sorted(f"rank {k} relation ok" for k in range(4))


@pytest.mark.parametrize("device", DEVICES)
def test_to_global_grad_sbp_is_applied_to_the_gradient(device):
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist", "grad_sbp.py"), device=device)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok grad_sbp") == 2, r.stdout


@pytest.mark.parametrize("device", DEVICES)
def test_new_zeros_new_empty_and_linspace_make_global_tensors(device):
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist", "new_tensor_ops.py"), device=device)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok new\n") == 2 and r.stdout.count("ok new methods\n") == 2, r.stdout


@pytest.mark.parametrize("device", DEVICES)
def test_oneflow_only_ops_on_global_tensors(device):
    # Issue 20: OneFlow's test_global_scatter_nd / coin_flip / partical_fc, as our own cases.
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "oneflow_only_ops.py"), timeout=120, device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    names = ["scatter_nd", "coin_flip", "partial_fc"]
    assert ok_lines(r.stdout) == sorted(f"rank {k} {n} ok" for k in range(2) for n in names)


@pytest.mark.parametrize("device", DEVICES)
def test_everyday_ops_on_global_tensors_equal_one_process(device):
    # Issue 15: the new ops under B, S(0), S(1) layouts (one_hot of a global index crashed).
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "everyday_global.py"), timeout=120, device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == sorted(f"rank {k} {n} ok" for k in range(2) for n in ("ops", "one_hot"))


@pytest.mark.parametrize("device", DEVICES)
def test_placement_changes_with_a_2d_mesh_route_pieces(device):
    # Issue 16: a placement change where either side is a 2-D mesh moves only the pieces each
    # destination needs, point to point (no gather to broadcast, no whole tensor sent).
    r = launch("--nproc_per_node", 4, "--master_port", free_port(),
               os.path.join(DIST, "nd_placement_changes.py"), timeout=180,
               env=env_with(ONEFLOW_TIMEOUT_SECONDS="20"), device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == sorted(f"rank {k} nd routes ok" for k in range(4))


def test_oneflow_only_ops_refuse_bad_arguments_in_one_line():
    with pytest.raises(ValueError, match=r"CoinFlip: batch_size must be a positive int, got 0"):
        flow.nn.CoinFlip(0)
    with pytest.raises(ValueError, match=r"CoinFlip: probability must be in \[0, 1\], got 1.5"):
        flow.nn.CoinFlip(4, probability=1.5)
    with pytest.raises(ValueError, match="CoinFlip: give placement and sbp together"):
        flow.nn.CoinFlip(4, placement=flow.placement("cpu", [0]))
    index = flow.tensor([[0, 1], [2, 3]])
    with pytest.raises(ValueError, match=r"scatter_nd: update has shape \(2,\); index of shape "
                                         r"\(2, 2\) into shape \(3, 4, 5\) needs \(2, 5\)"):
        flow.scatter_nd(index, flow.ones(2), [3, 4, 5])
    with pytest.raises(TypeError, match="scatter_nd: index must be an int32 or int64 tensor, got "
                                        "oneflow.float32"):
        flow.scatter_nd(flow.ones(2, 1), flow.ones(2), [3])
    with pytest.raises(ValueError, match=r"gather_nd: index of shape \(2, 3\) needs a last "
                                         r"dimension of 1 to 2 coordinates into shape \(3, 4\)"):
        flow.gather_nd(flow.ones(3, 4), flow.zeros(2, 3, dtype=flow.int64))
