"""flow.distributed.ZeroRedundancyOptimizer: optimizer state split(0) over the data-parallel
ranks. The multi-rank checks (same parameters as one-process training, the state bytes per rank,
state_dict round trips) run in tests/python/dist/zero_train.py through the launcher."""

import os

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn as nn
from test_comm import DEVICES, DIST, env_with, free_port, launch


def ok_lines(out):
    return sorted(l.split("] ", 1)[-1] for l in out.splitlines() if l.endswith(" ok"))


@pytest.mark.parametrize("nproc", [2, 4])
@pytest.mark.parametrize("opt", ["adamw", "adam", "sgd"])
@pytest.mark.parametrize("device", DEVICES)
def test_zero_trains_like_one_process_with_1_over_n_of_the_state(opt, nproc, tmp_path, device):
    r = launch("--nproc_per_node", nproc, "--master_port", free_port(),
               os.path.join(DIST, "zero_train.py"), opt, str(tmp_path), timeout=300,
               env=env_with(ONEFLOW_TIMEOUT_SECONDS="60"), device=device)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ok_lines(r.stdout) == sorted(f"rank {k} of {nproc} {opt} ok" for k in range(nproc))
    # The state bytes each rank reported add up to the whole, each about 1/n of it.
    shares = [l for l in r.stdout.splitlines() if "state bytes" in l]
    assert len(shares) == nproc
    mine = [int(l.split("state bytes ")[1].split()[0]) for l in shares]
    whole = int(shares[0].split(" of ")[2].split()[0])
    assert sum(mine) == whole
    assert max(mine) <= whole / nproc * 1.1


def _model():
    flow.manual_seed(3)
    return nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))


def test_local_parameters_are_updated_as_by_the_wrapped_optimizer():
    # Nothing to shard on local tensors: the wrapper is the plain optimizer.
    a, b = _model(), _model()
    za = flow.distributed.ZeroRedundancyOptimizer(a.parameters(), optimizer_class=flow.optim.AdamW,
                                                  lr=0.1)
    ob = flow.optim.AdamW(b.parameters(), lr=0.1)
    x = flow.randn(6, 5)
    for _ in range(3):
        for m, o in ((a, za), (b, ob)):
            o.zero_grad()
            m(x).square().sum().backward()
            o.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    assert isinstance(za.optim, flow.optim.AdamW)
    assert za.state_dict()["param_groups"][0]["lr"] == 0.1


def test_single_rank_global_parameters_are_not_sharded():
    P = flow.placement("cpu", ranks=[0])
    a = _model().to_global(placement=P, sbp=flow.sbp.broadcast)
    b = _model()
    za = flow.distributed.ZeroRedundancyOptimizer(a.parameters(), optimizer_class=flow.optim.Adam,
                                                  lr=0.05)
    ob = flow.optim.Adam(b.parameters(), lr=0.05)
    x = flow.randn(6, 5)
    for _ in range(3):
        za.zero_grad()
        a(x.to_global(placement=P, sbp=flow.sbp.split(0))).square().sum().backward()
        za.step()
        ob.zero_grad()
        b(x).square().sum().backward()
        ob.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert tuple(p.sbp) == (flow.sbp.broadcast,)
        assert np.abs(p.detach().numpy() - q.detach().numpy()).max() < 1e-6
    # Nothing to split on one rank: the state is the parameter's own layout.
    first = next(a.parameters())
    assert za.shard_of(first) is first
    assert tuple(za.state[first]["exp_avg"].sbp) == (flow.sbp.broadcast,)


@pytest.mark.parametrize("kw,text", [
    (dict(process_group="g"), "ZeroRedundancyOptimizer: process_group is not supported"),
    (dict(parameters_as_bucket_view=True),
     "ZeroRedundancyOptimizer: parameters_as_bucket_view=True is not supported"),
    (dict(overlap_with_ddp=True), "ZeroRedundancyOptimizer: overlap_with_ddp=True is not supported"),
])
def test_unsupported_options_say_so(kw, text):
    with pytest.raises(NotImplementedError, match=text):
        flow.distributed.ZeroRedundancyOptimizer(_model().parameters(),
                                                 optimizer_class=flow.optim.SGD, lr=0.1, **kw)


def test_optimizer_class_must_be_an_optimizer():
    with pytest.raises(TypeError, match="optimizer_class must be a oneflow.optim.Optimizer "
                                        "subclass such as flow.optim.AdamW, got 'adam'"):
        flow.distributed.ZeroRedundancyOptimizer(_model().parameters(), optimizer_class="adam")


@pytest.mark.parametrize("device", DEVICES)
def test_zero_on_a_2x2_mesh_with_tensor_parallel_weights_holds_each_state_element_once(device):
    r = launch("--nproc_per_node", 4, "--master_port", free_port(),
               os.path.join(DIST, "zero_mesh.py"), timeout=300,
               env=env_with(ONEFLOW_TIMEOUT_SECONDS="60"), device=device)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len([l for l in r.stdout.splitlines() if "mesh state bytes" in l and l.endswith(" ok")]) == 4
