"""Ranks started by Open MPI's mpirun and by Slurm's srun, without our launcher: rank, sizes and
the master come from their variables, and DDP trains to the same result as one process (the
same check our launcher's runs pass, tests/python/dist/ddp_check.py).

The Slurm test starts a one-node cluster of its own (munge, slurmctld, slurmd from Debian, a
temporary slurm.conf on free ports) and stops it afterwards; both tests need root and the
packages tools/install_deps.sh installs, and are skipped with the reason without them.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from test_comm import DIST, env_with, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = os.path.join(ROOT, "tools", "python")


def _require(*programs):
    for p in programs:
        if shutil.which(p) is None:
            pytest.skip(f"{p} is not installed (tools/install_deps.sh installs it)")
    if os.geteuid() != 0:
        pytest.skip("starting these launchers' daemons here needs root")


def _equals_one_process(out, ranks):
    # mpirun forwards each rank's output on its own: two ranks' lines may arrive run together.
    found = re.findall(r"rank \d+: DDP mlp sgd equals one process after 6 steps \(1 buckets\)", out)
    return sorted(found) == sorted(
        f"rank {r}: DDP mlp sgd equals one process after 6 steps (1 buckets)" for r in range(ranks))


def test_mpirun_starts_the_ranks(tmp_path):
    _require("mpirun")
    port = free_port()
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
           "-x", f"MASTER_PORT={port}", PYTHON, os.path.join(DIST, "ddp_check.py"), "mlp", "sgd"]
    r = subprocess.run(cmd, env=env_with(), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert _equals_one_process(r.stdout, 2), r.stdout


SLURM_CONF = """\
ClusterName=oftest
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _start_munge():
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode == 0:
        return
    os.makedirs("/run/munge", exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    r = subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"munged did not start: {r.stderr.strip()}")


@pytest.fixture
def slurm_cluster(tmp_path):
    _require("srun", "slurmctld", "slurmd", "/usr/sbin/munged")
    _start_munge()
    folder = tmp_path / "slurm"
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True)
    conf = folder / "slurm.conf"
    conf.write_text(SLURM_CONF.format(host=socket.gethostname(), ctld_port=free_port(),
                                      d_port=free_port(), dir=folder, cpus=os.cpu_count()))
    env = dict(os.environ, SLURM_CONF=str(conf))
    daemons = [subprocess.Popen([d, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for d in ("slurmctld", "slurmd")]
    try:
        deadline = time.monotonic() + 30
        while True:
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True,
                               text=True)
            if r.returncode == 0 and r.stdout.strip() in ("idle", "mix"):
                break
            if time.monotonic() > deadline:
                logs = "".join(p.read_text()[-1500:] for p in folder.glob("*.log"))
                pytest.fail(f"the test's Slurm cluster did not come up: {r.stdout} {r.stderr} "
                            f"{logs}")
            time.sleep(0.5)
        yield env
    finally:
        for d in daemons:
            d.terminate()
        for d in daemons:
            try:
                d.wait(timeout=10)
            except subprocess.TimeoutExpired:
                d.kill()


def test_srun_starts_the_ranks(slurm_cluster):
    # No MASTER_ADDR or MASTER_PORT: the first node of the step, a port from the job id.
    env = env_with(SLURM_CONF=slurm_cluster["SLURM_CONF"])
    for k in ("MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    cmd = ["srun", "-n", "2", PYTHON, os.path.join(DIST, "ddp_check.py"), "mlp", "sgd"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert _equals_one_process(r.stdout, 2), r.stdout
