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
import subprocess
import sys
import time
import uuid

import pytest

from test_comm import DIST, env_with, free_port, ok_lines

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


class TwoHosts:
    """Namespaces A (10.77.n.1, hostname oftest-a) and B (10.77.n.2, hostname oftest-b)."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.ns = [f"oftA{tag}", f"oftB{tag}"]
        self.veth = [f"ofa{tag}", f"ofb{tag}"]
        subnet = 1 + int(tag[:2], 16) % 250
        self.addr = [f"10.77.{subnet}.1", f"10.77.{subnet}.2"]
        self.hostname = ["oftest-a", "oftest-b"]

    def create(self):
        r = _run("ip", "netns", "add", self.ns[0])
        if r.returncode != 0:
            pytest.skip(f"network namespaces unavailable: ip netns add: {r.stderr.strip()}")
        steps = [
            ["ip", "netns", "add", self.ns[1]],
            ["ip", "link", "add", self.veth[0], "type", "veth", "peer", "name", self.veth[1]],
        ]
        for i in (0, 1):
            steps += [
                ["ip", "link", "set", self.veth[i], "netns", self.ns[i]],
                ["ip", "-n", self.ns[i], "addr", "add", f"{self.addr[i]}/24", "dev", self.veth[i]],
                ["ip", "-n", self.ns[i], "link", "set", self.veth[i], "up"],
                ["ip", "-n", self.ns[i], "link", "set", "lo", "up"],
            ]
        for step in steps:
            r = _run(*step)
            if r.returncode != 0:
                self.destroy()
                pytest.skip(f"cannot set up two hosts: {' '.join(step)}: {r.stderr.strip()}")

    def destroy(self):
        for ns in self.ns:
            _run("ip", "netns", "del", ns)  # deletes the veth pair with it

    def node(self, host, *launch_args, env=None):
        """One launcher on host (0 or 1), as a user would start it there."""
        inner = ('hostname "$0" && mount -t tmpfs tmpfs /dev/shm && exec "$@"')
        cmd = ["ip", "netns", "exec", self.ns[host], "unshare", "--uts", "--mount",
               "--propagation", "private", "sh", "-c", inner, self.hostname[host],
               sys.executable, "-m", "oneflow.distributed.launch", *map(str, launch_args)]
        return subprocess.Popen(cmd, env=env or env_with(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                start_new_session=True)

    def job(self, script, *args, port=None, nproc=2, env=None):
        port = port or free_port()
        return [self.node(h, "--nnodes", 2, "--node_rank", h, "--nproc_per_node", nproc,
                          "--master_addr", self.addr[0], "--master_port", port, script, *args,
                          env=env) for h in (0, 1)]


@pytest.fixture(scope="module")
def hosts():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    h = TwoHosts()
    h.create()
    yield h
    h.destroy()


def _finish(procs, timeout=180):
    outs = [p.communicate(timeout=timeout) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


def test_collectives_across_two_hosts(hosts):
    results = _finish(hosts.job(os.path.join(DIST, "collectives.py")))
    for code, out, err in results:
        assert code == 0, out[-2000:] + err[-3000:]
    # The world spans two hosts: all-reduce inside each host, then once between hosts.
    assert ok_lines(results[0][1]) == ["rank 0 of 4 ok shm+gloo", "rank 1 of 4 ok shm+gloo"]
    assert ok_lines(results[1][1]) == ["rank 2 of 4 ok shm+gloo", "rank 3 of 4 ok shm+gloo"]


def test_ddp_across_two_hosts_equals_one_process(hosts):
    results = _finish(hosts.job(os.path.join(DIST, "ddp_check.py"), "mlp", "sgd"))
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
    procs = hosts.job(script)
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
