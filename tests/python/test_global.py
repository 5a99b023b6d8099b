"""Global tensors: conversions, deduction and training through real processes, the planner,
rule coverage and the one-line errors."""

import os
import subprocess
import sys

import numpy as np
import pytest

import oneflow as flow
from test_comm import DEVICES, DIST, env_with, free_port, launch


def ok_lines(out):
    return sorted(l.split("] ", 1)[-1] for l in out.splitlines()
                  if l.endswith(" ok") or " ok " in l)


@pytest.mark.parametrize("nproc", [2, 4])
@pytest.mark.parametrize("device", DEVICES)
def test_conversions_and_matmul_deduction(nproc, device):
    r = launch("--nproc_per_node", nproc, "--master_port", free_port(),
               os.path.join(DIST, "global_convert.py"), timeout=300, device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == sorted(f"rank {k} convert ok" for k in range(nproc))


@pytest.mark.parametrize("first", ["1,2", "2,3", "1,3"])
@pytest.mark.parametrize("device", DEVICES)
def test_placements_that_leave_out_ranks(first, device):
    # The job's first collective on a placement without rank 0 used to hang (rank 0 had not
    # started the control plane; a placement change waited for source ranks that skip it).
    # ONEFLOW_TIMEOUT_SECONDS bounds every wait, so a regression fails in seconds, not hangs.
    r = launch("--nproc_per_node", 4, "--master_port", free_port(),
               os.path.join(DIST, "subset_placements.py"), first, timeout=120,
               env=env_with(ONEFLOW_TIMEOUT_SECONDS="20"), device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == sorted(f"rank {k} subset ok" for k in range(4))


@pytest.mark.parametrize("device", DEVICES)
def test_oneflow_global_contract_on_four_ranks(device):
    # Issue 20: broadcast data synchronised from the placement's first rank, meta for ranks
    # outside it, one error for different shapes, numpy() everywhere, S -> P pieces where
    # OneFlow's naive boxing puts them, global_id, numpy ranks.
    r = launch("--nproc_per_node", 4, "--master_port", free_port(),
               os.path.join(DIST, "oneflow_semantics.py"), timeout=120,
               env=env_with(ONEFLOW_TIMEOUT_SECONDS="20"), device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    names = ["broadcast sync", "meta check", "s to p pieces", "ids and placements", "nd view"]
    assert ok_lines(r.stdout) == sorted(f"rank {k} {n} ok" for k in range(4) for n in names)


def _oneflow_naive_bytes(src, a, dst, b, shape, itemsize=4):
    """Bytes OneFlow's naive eager boxing moves between two 1-D placements (its kernels
    eager_{b,s,p}_to_{b,s,p}_kernel.cpp at 25c8978c): to S/B, each destination receives the region
    it needs from the sources that hold it (from B: itself if a source, else source j % m; from
    P: every source); to P, each source piece goes to itself if a destination, else to
    destination i % n (from B: the whole once, nothing when a source is a destination)."""
    def region(ranks, sbp, i):
        out = [(0, n) for n in shape]
        if sbp.is_split:
            bounds = np.cumsum([0] + [len(p) for p in np.array_split(np.arange(shape[sbp.axis]),
                                                                     len(ranks))])
            out[sbp.axis] = (bounds[i], bounds[i + 1])
        return out

    def size(reg):
        return int(np.prod([max(0, e - s) for s, e in reg]))

    def inter(r1, r2):
        return [(max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(r1, r2)]

    m, n, moved = len(src), len(dst), 0
    if b != P:
        for j, d in enumerate(dst):
            need = region(dst, b, j)
            if a == B:
                moved += 0 if d in src else size(need)
            else:
                moved += sum(size(inter(region(src, a, i), need)) for i, s in enumerate(src)
                             if s != d)
    elif a == B:
        moved = 0 if any(s in dst for s in src) else size(region(src, B, 0))
    else:
        moved = sum(size(region(src, a, i)) for i, s in enumerate(src) if s not in dst)
    return moved * itemsize


def test_placement_changes_move_no_more_than_oneflow():
    groups = [[0, 1, 2, 3], [1, 2], [2, 3], [1, 3], [0, 1], [3], [0, 2, 3], [2, 1]]
    for shape in [(4, 6), (5, 3)]:
        for src in groups:
            for dst in groups:
                # a placement's parallel ids follow its sorted ranks ([2, 1] is [1, 2])
                if sorted(src) == sorted(dst):
                    continue
                for a in (S0, S1, B, P):
                    for b in (S0, S1, B, P):
                        _, cost = plan(src, [a], dst, [b], shape=shape)
                        want = _oneflow_naive_bytes(sorted(src), a, sorted(dst), b, shape)
                        assert cost <= want, (src, a, dst, b, shape, cost, want)


@pytest.mark.parametrize("device", DEVICES)
def test_global_tensors_take_local_index_tensors(device):
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "global_index.py"), timeout=120, device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == ["rank 0 index ok", "rank 1 index ok"]


@pytest.mark.parametrize("model,opt", [("mlp", "sgd"), ("mlp", "adam"), ("lenet", "sgd"),
                                       ("lenet", "adam")])
@pytest.mark.parametrize("device", DEVICES)
def test_tutorial_training_equals_one_process(model, opt, device):
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "global_train.py"), model, opt, timeout=300, device=device)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = ok_lines(r.stdout)
    assert len(lines) == 2 and all(f"{model} {opt} ok" in l for l in lines), r.stdout


def test_debug_boxing_prints_the_inserted_steps():
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "global_train.py"), "mlp", "sgd",
               env=env_with(ONEFLOW_DEBUG_BOXING=1), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    # data parallel: gradients of broadcast parameters are all-reduced
    assert "P->B: all_reduce over cpu:[0, 1]" in r.stderr
    assert "B->S(0): local slice over cpu:[0, 1]" in r.stderr


def test_every_registered_op_has_an_sbp_rule():
    missing = sorted(set(flow._C.registered_ops()) - set(flow._C.sbp_rule_names()))
    assert missing == []


def plan(src, frm, dst, to, shape=(4, 4), hs=None, hd=None):
    return flow._C.boxing_plan(flow.placement("cpu", src, hs), frm, flow.placement("cpu", dst, hd),
                               to, list(shape))


S0, S1, B, P = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum


def test_planner_one_dimension_table():
    assert plan([0, 1], [P], [0, 1], [B])[0] == "P->B: all_reduce over cpu:[0, 1]"
    assert plan([0, 1], [S0], [0, 1], [B])[0] == "S(0)->B: all_gather over cpu:[0, 1]"
    assert plan([0, 1], [P], [0, 1], [S1])[0] == "P->S(1): reduce_scatter over cpu:[0, 1]"
    assert plan([0, 1], [S0], [0, 1], [S1])[0] == "S(0)->S(1): all_to_all over cpu:[0, 1]"
    assert plan([0, 1], [B], [0, 1], [S0])[0] == "B->S(0): local slice over cpu:[0, 1]"
    assert plan([0, 1], [B], [0, 1], [B]) == ("(nothing to do)", 0.0)
    # costs: all-reduce moves twice what all-gather moves
    assert plan([0, 1], [P], [0, 1], [B])[1] == 2 * plan([0, 1], [S0], [0, 1], [B])[1]


def test_planner_two_dimensions_and_placement_changes():
    text, _ = plan([0, 1, 2, 3], [S0, S0], [0, 1, 2, 3], [B, S0], hs=[2, 2], hd=[2, 2])
    # the outer split cannot change under an inner split of the same axis: each rank gets the
    # rows it lacks point to point (no rank gathers the whole): 1 + 2 + 2 + 1 rows of 16 bytes
    assert text == ("(S(0), S(0))->(B, S(0)): point-to-point pieces to the ranks of "
                    "cpu:[[0, 1], [2, 3]] (96 bytes)")
    text, _ = plan([0, 1, 2, 3], [P, S1], [0, 1, 2, 3], [B, S1], hs=[2, 2], hd=[2, 2])
    assert text == "P->B: all_reduce over cpu:[[0, 1], [2, 3]] (hierarchy dim 0)"
    # Between 1-D placements: OneFlow's naive point-to-point boxing, only the pieces that move.
    text, cost = plan([0, 1], [S0], [2, 3], [S1])
    assert text == "S(0)->S(1): point-to-point pieces to the ranks of cpu:[2, 3] (64 bytes)"
    assert cost == 64  # every element once (4 x 4 float32), no gather first
    # S(1) -> P into a containing placement: each rank keeps its own piece zero-padded
    assert plan([0, 1], [S1], [0, 1, 2, 3], [P])[1] == 0
    # B -> S into a contained placement, S -> S into the same ranks: nothing moves
    assert plan([0, 1, 2, 3], [B], [1, 2], [S0])[1] == 0
    assert plan([0, 1], [S0], [0, 1, 2], [S0])[1] == 16  # row 2 of 4 rows moves: 4 floats
    # N-D placements route too: only the pieces each destination lacks (3 half-rows each)
    text, cost = plan([0, 1, 2, 3], [S0, S0], [0, 1], [S1], hs=[2, 2])
    assert text == "(S(0), S(0))->(S(1)): point-to-point pieces to the ranks of cpu:[0, 1] (48 bytes)"
    assert cost == 48


def test_single_process_global_tensors():
    P1 = flow.placement("cpu", ranks=[0])
    x = flow.randn(3, 4, placement=P1, sbp=flow.sbp.split(0), requires_grad=True)
    assert x.is_global and x.sbp == (flow.sbp.split(0),) and x.placement == P1
    y = (x * 2).sum()
    y.backward()
    assert np.allclose(x.grad.numpy(), 2.0)
    assert "placement=oneflow.placement(type=\"cpu\", ranks=[0])" in repr(x)
    assert repr(flow.sbp.split(1)) == "oneflow.sbp.split(dim=1)"
    assert flow.placement("cpu", ranks=[[0, 1], [2, 3]]).hierarchy == (2, 2)
    assert flow.placement("cpu", {0: [0, 1]}).ranks.tolist() == [0, 1]
    local = x.to_local()
    assert not local.is_global and tuple(local.shape) == (3, 4)


def test_placement_and_sbp_are_the_cpp_values():
    # One Placement / Sbp for Python, the bindings and C++ (sbp/sbp.h bound as it is): what a
    # tensor reports is the value the user built, hashable, printable and picklable.
    import pickle
    P = flow.placement("cpu", ranks=np.array([[3, 2], [1, 0]]))  # ranks sort, the mesh stays
    assert isinstance(P, flow._C.placement) and P.type == "cpu" and P.hierarchy == (2, 2)
    assert repr(P) == 'oneflow.placement(type="cpu", ranks=[[0, 1], [2, 3]])'
    assert P.ranks.tolist() == [[0, 1], [2, 3]] and P.ranks.dtype == np.int64
    assert P == flow.placement("cpu", [0, 1, 2, 3], hierarchy=(2, 2)) and len({P, P}) == 1
    assert flow.placement.all("cpu") == flow.placement("cpu", ranks=[0])
    S0 = flow.sbp.split(0)
    assert flow.sbp.broadcast() == flow.sbp.broadcast and S0 != flow.sbp.split(1)
    assert len({S0, flow.sbp.split(dim=0), flow.sbp.partial_sum}) == 2
    assert repr(flow.sbp.partial_sum) == "oneflow.sbp.partial_sum"
    for v in (P, S0, flow.sbp.broadcast):
        assert pickle.loads(pickle.dumps(v)) == v
    x = flow.ones(2).to_global(placement=flow.placement("cpu", [0]), sbp=S0)
    placement, nd_sbp = flow._C.global_info(x)
    assert placement == x.placement and nd_sbp == x.sbp == (S0,)
    with pytest.raises(ValueError, match="placement: a rank appears twice in"):
        flow.placement("cpu", [0, 0])
    with pytest.raises(ValueError, match="are not a rectangular array"):
        flow.placement("cpu", [[0, 1], [2]])
    with pytest.raises(TypeError, match="sbp.split: dim must be an int, got float"):
        flow.sbp.split(1.0)


def test_number_conversions_of_global_tensors():
    # float() of a global scalar read the data-less global wrapper and crashed (SIGSEGV), e.g.
    # OneFlow's flow.full(shape, global_scalar, placement=..., sbp=...)
    P1 = flow.placement("cpu", ranks=[0])
    x = flow.tensor(2.5, placement=P1, sbp=[flow.sbp.broadcast])
    assert float(x) == 2.5 and int(x) == 2 and bool(x)
    y = flow.full((4,), x, placement=P1, sbp=flow.sbp.split(0))
    assert y.numpy().tolist() == [2.5] * 4
    z = flow.zeros_like(y, placement=P1, sbp=flow.sbp.broadcast)  # OneFlow's x_like layout kwargs
    assert z.sbp == (flow.sbp.broadcast,) and z.numpy().tolist() == [0.0] * 4
    # placements order their ranks and take numpy ranks, as OneFlow's
    assert flow.placement("cpu", ranks=np.array([0])) == P1


def test_one_line_errors():
    P1 = flow.placement("cpu", ranks=[0])
    x = flow.ones(2, 3).to_global(placement=P1, sbp=flow.sbp.broadcast)
    with pytest.raises(ValueError, match=r"to_global: sbp \(oneflow.sbp.broadcast, "
                                         r"oneflow.sbp.broadcast\) has 2 entries but the "
                                         r"placement has 1 dimension$"):
        x.to_global(sbp=(flow.sbp.broadcast, flow.sbp.broadcast))
    with pytest.raises(RuntimeError, match=r"^to_global: split axis 2 is out of range for a "
                                           r"tensor with 2 dims$"):
        x.to_global(sbp=flow.sbp.split(2))
    with pytest.raises(RuntimeError, match=r"^to_global: placement cpu:\[0, 3\] names rank 3 "
                                           r"but the world has 1 rank$"):
        flow.ones(2).to_global(placement=flow.placement("cpu", ranks=[0, 3]),
                               sbp=flow.sbp.broadcast)
    with pytest.raises(RuntimeError, match=r"^add: input 1 is a local tensor of shape \(2, 3\) "
                                           r"while input 0 is global"):
        x + flow.ones(2, 3)
    with pytest.raises(ValueError, match="to_global: a local tensor needs both placement and sbp"):
        flow.ones(2).to_global(sbp=flow.sbp.broadcast)
    with pytest.raises(RuntimeError, match=r"^to: a global tensor moves between devices with "
                                           r"to_global and a placement of the other device type, "
                                           r"got tensor\(shape=\(2, 3\).* to cuda:0$"):
        x.to("cuda")


DIFFERENT_PLACEMENTS = """
import oneflow as flow
a = flow.ones(2).to_global(placement=flow.placement("cpu", ranks=[0, 1]), sbp=flow.sbp.broadcast)
b = flow.ones(2).to_global(placement=flow.placement("cpu", ranks=[1]), sbp=flow.sbp.broadcast)
a + b
"""

CHECK_META = """
import oneflow as flow
n = 3 if flow.env.get_rank() == 1 else 2
flow.ones(n, 4).to_global(placement=flow.placement("cpu", ranks=[0, 1]),
                          sbp=flow.sbp.broadcast, check_meta=True)
"""

NDIM_MISMATCH = """
import oneflow as flow
x = flow.ones(4, 3) if flow.env.get_rank() == 0 else flow.ones(4)
x.to_global(placement=flow.placement("cpu", ranks=[0, 1]), sbp=flow.sbp.split(0))
"""


@pytest.mark.parametrize("code,message", [
    (DIFFERENT_PLACEMENTS, "add: input 0 is on placement cpu:[0, 1] but input 1 is on cpu:[1]; "
                           "move one with to_global(placement=...)"),
    (CHECK_META, "to_global: rank 1 has a local tensor of shape (3, 4) float32 but rank 0 has "
                 "(2, 4) float32"),
    # Split shards are always gathered: every rank sees the mismatch and stops (no hang).
    (NDIM_MISMATCH, "to_global: rank 1 has a local tensor of shape (4,) float32 but rank 0 has "
                    "(4, 3) float32"),
])
def test_errors_across_ranks(tmp_path, code, message):
    script = tmp_path / "bad.py"
    script.write_text(code)
    r = launch("--nproc_per_node", 2, "--master_port", free_port(), script, timeout=120)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("device", DEVICES)
def test_global_state_dict_save_and_load(tmp_path, device):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "global_save.py"), folder, timeout=120, device=device)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("saved by rank 0 and loaded back") == 2
    # The file holds whole tensors: one process loads it without any placement (onto the cpu:
    # saved from cuda placements, its tensors would otherwise go back to the GPU).
    state = flow.load(str(folder / "model.of"), map_location="cpu")
    expected = np.load(tmp_path / "expected.npz")
    assert sorted(state) == sorted(expected.files)
    for k in expected.files:
        assert not state[k].is_global
        np.testing.assert_array_equal(state[k].numpy(), expected[k])
    assert tuple(state["0.weight"].shape) == (7, 5)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_flow_through_to_global_and_to_local(device):
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "global_grad.py"), timeout=120, device=device)
    assert r.returncode == 0, r.stdout + r.stderr
    for case in ("local_to_split", "local_to_partial", "broadcast_to_split", "to_local",
                 "batch_norm_split", "double_backward_boxed", "bucketed_grads"):
        assert r.stdout.count(f"{case} ok") == 2, r.stdout


def test_cpp_gradients_flow_through_layout_changes():
    # global::ToGlobal / LocalToGlobal / ToLocal are differentiable in C++ (Python's to_global
    # and to_local are the same functions): tests/global/layout_grad.cc on 2 ranks.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = os.path.join(root, "bazel-bin", "tests", "global", "layout_grad")
    subprocess.run(["bazel", "build", "//tests:global/layout_grad"], cwd=root, check=True,
                   capture_output=True)
    r = launch("--nproc_per_node", 2, "--master_port", free_port(), "--no_python", binary)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ok_lines(r.stdout) == ["rank 0 layout gradients ok", "rank 1 layout gradients ok"]
