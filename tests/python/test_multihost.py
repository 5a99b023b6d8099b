"""Two real hosts on one machine: two network namespaces joined by a veth pair, each with its
own hostname (UTS namespace), its own /dev/shm (a tmpfs in its own mount namespace) and its own
loopback. One launcher runs in each, started exactly as the OneFlow/PyTorch tutorials say
(`--nnodes 2 --node_rank K --master_addr A --master_port P`, nothing else exported).

Needs root (`ip netns add`); skipped with the reason elsewhere. Addresses 10.77.<n>.1/.2 are
our own test hosts inside the namespaces; no traffic leaves them.
"""

import os
import re
import signal
import sys
import time

import pytest

from test_comm import DIST, env_with, free_port, ok_lines

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from two_hosts import TwoHosts, Unavailable  # noqa: E402


@pytest.fixture(scope="module")
def hosts():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    h = TwoHosts(env_with())
    try:
        h.create()
    except Unavailable as e:
        pytest.skip(str(e))
    yield h
    h.destroy()


def _finish(procs, timeout=180):
    outs = [p.communicate(timeout=timeout) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


def test_collectives_across_two_hosts(hosts):
    results = _finish(hosts.job(os.path.join(DIST, "collectives.py"), port=free_port()))
    for code, out, err in results:
        assert code == 0, out[-2000:] + err[-3000:]
    # The world spans two hosts: all-reduce inside each host, then once between hosts.
    assert ok_lines(results[0][1]) == ["rank 0 of 4 ok shm+gloo", "rank 1 of 4 ok shm+gloo"]
    assert ok_lines(results[1][1]) == ["rank 2 of 4 ok shm+gloo", "rank 3 of 4 ok shm+gloo"]


def test_ddp_across_two_hosts_equals_one_process(hosts):
    results = _finish(hosts.job(os.path.join(DIST, "ddp_check.py"), "mlp", "sgd",
                                port=free_port()))
    for code, out, err in results:
        assert code == 0, out[-2000:] + err[-3000:]
    assert sum(out.count("equals one process") for _, out, _ in results) == 4


KEEPS_REDUCING = """
import time
import oneflow as flow
flow.env.init()
print("joined", flush=True)
for _ in range(100000):
    flow.comm.all_reduce(flow.ones(1024))
    time.sleep(0.01)
"""


def test_losing_a_host_stops_the_other_within_seconds(hosts, tmp_path):
    script = tmp_path / "keeps_reducing.py"
    script.write_text(KEEPS_REDUCING)
    procs = hosts.job(script, port=free_port())
    try:
        time.sleep(4)  # the job is up and reducing
        assert all(p.poll() is None for p in procs)
        # host B's launcher dies (and its ranks with it: PR_SET_PDEATHSIG)
        os.killpg(procs[1].pid, signal.SIGKILL)
        lost = time.monotonic()
        _, err = procs[0].communicate(timeout=60)
        took = time.monotonic() - lost
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert procs[0].returncode != 0
    assert took < 15, f"host A's ranks took {took:.1f} s to stop"
    assert re.search(r"ranks 2, 3 \(node 1\) sent no heartbeat for 10 s", err), err[-3000:]


JOIN = """
import oneflow as flow
flow.comm.barrier()
print("joined", flush=True)
"""


def test_a_second_job_on_the_same_port_is_refused(hosts, tmp_path):
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text(JOIN + "import time; time.sleep(600)\n")
    second.write_text(JOIN)
    port = free_port()
    job = hosts.job(first, port=port)
    try:
        time.sleep(3)  # the first job is up (all four ranks joined)
        stray = hosts.node(1, "--nnodes", 2, "--node_rank", 1, "--nproc_per_node", 2,
                           "--master_addr", hosts.addr[0], "--master_port", port, second)
        code, out, err = _finish([stray], timeout=60)[0]
    finally:
        for p in job:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    assert code != 0
    assert (f"was refused by the master at {hosts.addr[0]}:{port}: its command is "
            f"'python3 -u {second}' but this job's is 'python3 -u {first}' (another job on this "
            f"port? give each job its own --master_port") in err, err[-3000:]


def test_losing_a_host_the_other_goes_on_alone_from_the_last_checkpoint(hosts, tmp_path):
    """--nnodes 1:2 --max_restarts 1: host B's launcher is killed at step 4 (rank 2 kills it; its
    ranks die with it); host A waits for it (--join_timeout 6), then restarts alone on 2 ranks,
    from the checkpoint the 4 ranks saved after step 3 (resharded), and its losses go on where
    they stopped."""
    from test_elastic import PREFIX, TINY, losses

    gpt_dir = "/usr/share/games/fortunes"
    if not os.path.isdir(gpt_dir):
        pytest.skip(f"Debian's fortunes package is not installed ({gpt_dir})")
    port, rdzv = free_port(), free_port()
    procs = [hosts.node(h, "--nnodes", "1:2", "--node_rank", h, "--nproc_per_node", 2,
                        "--master_addr", hosts.addr[0], "--master_port", port,
                        "--rdzv_port", rdzv, "--max_restarts", 1, "--join_timeout", 6,
                        os.path.join(DIST, "gpt_killed.py"), "launcher", 2, 4, "--parallel", "dp",
                        *TINY, "--save", tmp_path / "ckpt", "--save_every", 3)
             for h in (0, 1)]
    try:
        (code_a, out_a, err_a), (code_b, _, _) = _finish(procs, timeout=120)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert code_b == -signal.SIGKILL
    assert code_a == 0, out_a[-3000:] + err_a[-3000:]
    restart = [l for l in err_a.splitlines() if " restart " in l]
    assert len(restart) == 1, err_a[-3000:]
    assert restart[0].startswith(PREFIX + "restart 1 of 1 after ")
    assert restart[0].endswith(": new world 1 node(s) x 2 = 2 rank(s), this node 0 (was 2 "
                               "node(s) x 2 = 4 rank(s), this node 0)")
    assert "[rank 0] resumed from " + str(tmp_path / "ckpt" / "step-00000003") + \
        " (step 3, saved by 4 rank(s)) on 2 rank(s)" in out_a
    before, after = out_a.split("resumed from", 1)
    lost, resumed = losses(before), losses(after)
    assert sorted(resumed) == list(range(3, 8))
    # step 3 again, on 2 ranks instead of 4: the same batch and weights, another reduction order
    assert 3 in lost and abs(resumed[3] - lost[3]) < 1e-4, (lost, resumed)
