"""oneflow.distributed with torch.distributed's names: every collective on 2 ranks started by
the launcher (env://) and by hand (tcp://host:port), and the one-line errors of
init_process_group."""
import os
import subprocess
import sys

import pytest

import oneflow as flow
import oneflow.distributed as dist
from test_comm import DIST, env_with, free_port, launch

SCRIPT = os.path.join(DIST, "torch_distributed_api.py")


def ok_lines(out):
    return sorted(l.split("] ", 1)[-1] for l in out.splitlines() if l.rstrip().endswith(" ok"))


def test_collectives_under_the_launcher_env_init():
    r = launch("--nproc_per_node", 2, "--master_port", free_port(), SCRIPT, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ok_lines(r.stdout) == ["rank 0 ok", "rank 1 ok"]


def test_collectives_with_tcp_init_and_no_launcher():
    port = free_port()
    procs = [subprocess.Popen([sys.executable, SCRIPT, "tcp", str(rank), str(port)], env=env_with(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
    assert [o.strip() for o, _ in outs] == ["rank 0 ok", "rank 1 ok"]


def test_one_process_without_a_launcher_is_a_world_of_one():
    assert not dist.is_initialized()
    dist.init_process_group("gloo")
    try:
        assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
        t = flow.ones(3)
        dist.all_reduce(t)
        assert t.tolist() == [1.0, 1.0, 1.0]
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


@pytest.mark.parametrize("kwargs,message", [
    ({"backend": "mpi"}, "init_process_group: backend 'mpi' is not supported, use 'gloo', 'nccl' or "
                         "'cpu:gloo,cuda:nccl' (oneflow picks shared memory, Gloo or NCCL per tensor)"),
    ({"backend": "gloo", "store": object()},
     "init_process_group: store= is not supported, use init_method='env://' (the launcher's variables) or 'tcp://host:port'"),
    ({"backend": "gloo", "init_method": "file:///tmp/x"},
     "init_process_group: init_method 'file:///tmp/x' is not supported, use 'env://' or 'tcp://host:port'"),
    ({"init_method": "tcp://127.0.0.1"}, "init_process_group: init_method 'tcp://127.0.0.1' is not tcp://host:port"),
    ({"init_method": "tcp://127.0.0.1:29999"},
     "init_process_group: needs rank in [0, world_size) and world_size >= 1, got rank=None, world_size=None"),
    ({"init_method": "tcp://127.0.0.1:29999", "rank": 2, "world_size": 2},
     "init_process_group: needs rank in [0, world_size) and world_size >= 1, got rank=2, world_size=2"),
])
def test_init_process_group_errors_are_one_line(kwargs, message, monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises((ValueError, RuntimeError)) as info:
        dist.init_process_group(**kwargs)
    assert str(info.value) == message
    assert not dist.is_initialized()
    assert "RANK" not in os.environ  # nothing was set on the way to the error


def test_env_init_arguments_without_master_addr(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match=r"^init_process_group: rank and world_size without a launcher need "
                                         r"MASTER_ADDR and MASTER_PORT in the environment \(or init_method='tcp://host:port'\)$"):
        dist.init_process_group("gloo", init_method="env://", world_size=2, rank=1)


def test_groups_and_names():
    g = dist.new_group([0])
    assert g.ranks == [0] and dist.get_rank(g) == 0 and dist.get_world_size(g) == 1
    with pytest.raises(ValueError, match=r"^new_group: ranks \[0, 3\] must be distinct and in \[0, 1\)$"):
        dist.new_group([0, 3])
    with pytest.raises(TypeError, match=r"^get_rank: group must be what new_group returned \(or a list of ranks\), got str$"):
        dist.get_rank("world")
    assert dist.Backend.GLOO == "gloo" and dist.Backend("NCCL") == "nccl"
    assert dist.group.WORLD is None and dist.is_gloo_available() and not dist.is_mpi_available()
    from oneflow.nn.parallel import DistributedDataParallel

    m = DistributedDataParallel(flow.nn.Linear(2, 2), device_ids=[0], output_device=0, process_group=g)
    assert m.device_ids == [0] and m.output_device == 0
