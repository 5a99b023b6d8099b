"""Two hosts on one machine for tests and benchmarks: two network namespaces joined by a veth
pair, each with its own hostname (UTS namespace), its own /dev/shm (a tmpfs in its own mount
namespace) and its own loopback. Needs root and iproute2.

    hosts = TwoHosts()
    hosts.create()                       # raises Unavailable where namespaces cannot be made
    procs = hosts.job("train.py")        # one launcher per host, as the tutorials start them
    ...
    hosts.destroy()

Addresses 10.77.<n>.1 and .2 are our own test hosts inside the namespaces; nothing leaves them.
"""

import os
import subprocess
import sys
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


class Unavailable(Exception):
    """Network namespaces cannot be made here (not root, no iproute2)."""


class TwoHosts:
    """Namespaces A (10.77.n.1, hostname oftest-a) and B (10.77.n.2, hostname oftest-b).
    env: the environment launchers get (each host may add its own)."""

    def __init__(self, env=None):
        self.env = dict(os.environ if env is None else env)
        tag = uuid.uuid4().hex[:6]
        self.ns = [f"oftA{tag}", f"oftB{tag}"]
        self.veth = [f"ofa{tag}", f"ofb{tag}"]
        subnet = 1 + int(tag[:2], 16) % 250
        self.addr = [f"10.77.{subnet}.1", f"10.77.{subnet}.2"]
        self.hostname = ["oftest-a", "oftest-b"]

    def create(self):
        if os.geteuid() != 0:
            raise Unavailable("network namespaces need root")
        r = _run("ip", "netns", "add", self.ns[0])
        if r.returncode != 0:
            raise Unavailable(f"network namespaces unavailable: ip netns add: {r.stderr.strip()}")
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
                raise Unavailable(f"cannot set up two hosts: {' '.join(step)}: {r.stderr.strip()}")

    def destroy(self):
        for ns in self.ns:
            _run("ip", "netns", "del", ns)  # deletes the veth pair with it

    def node(self, host, *launch_args, env=None):
        """One launcher on host (0 or 1), as a user would start it there; env: extra
        variables."""
        inner = ('hostname "$0" && mount -t tmpfs tmpfs /dev/shm && exec "$@"')
        cmd = ["ip", "netns", "exec", self.ns[host], "unshare", "--uts", "--mount",
               "--propagation", "private", "sh", "-c", inner, self.hostname[host],
               sys.executable, "-m", "oneflow.distributed.launch", *map(str, launch_args)]
        return subprocess.Popen(cmd, env={**self.env, **(env or {})}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                start_new_session=True)

    def job(self, script, *args, port=29400, nproc=2, env=None):
        """The same launcher command on both hosts (env: per host, a list of two dicts)."""
        return [self.node(h, "--nnodes", 2, "--node_rank", h, "--nproc_per_node", nproc,
                          "--master_addr", self.addr[0], "--master_port", port, script, *args,
                          env=(env or [None, None])[h]) for h in (0, 1)]
