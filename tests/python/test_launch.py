"""python3 -m oneflow.distributed.launch: real launcher processes starting real ranks."""

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from oneflow.distributed import launch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHONPATH = os.path.join(ROOT, "oneflow", "python")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(**extra):
    env = dict(os.environ)
    env.pop("ONEFLOW_JOB_TOKEN", None)
    env.pop("OMP_NUM_THREADS", None)
    paths = [PYTHONPATH] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra)
    return env


def launcher_cmd(*args):
    return [sys.executable, "-m", "oneflow.distributed.launch", *map(str, args)]


def run_launcher(*args, env=None, timeout=60):
    return subprocess.run(launcher_cmd(*args), env=env or base_env(), capture_output=True,
                          text=True, timeout=timeout)


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


ENV_SCRIPT = """
    import os, sys
    keys = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
            "MASTER_ADDR", "MASTER_PORT", "ONEFLOW_JOB_TOKEN", "OMP_NUM_THREADS"]
    print(" ".join(f"{k}={os.environ.get(k, '<unset>')}" for k in keys))
    print("args=" + ",".join(sys.argv[1:]))
    print("to-stderr", file=sys.stderr)
"""


def parse_env_lines(stdout):
    """{rank: {KEY: value}} from the `[rank R] KEY=value ...` lines."""
    out = {}
    for line in stdout.splitlines():
        m = re.fullmatch(r"\[rank (\d+)\] (RANK=.*)", line)
        if m:
            out[int(m.group(1))] = dict(kv.split("=", 1) for kv in m.group(2).split())
    return out


def is_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie nobody reaped yet (e.g. a container's pid 1) is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def assert_all_dead(pids, within=3.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(is_alive(p) for p in pids):
        time.sleep(0.05)
    for p in pids:
        if is_alive(p):
            os.kill(p, signal.SIGKILL)
            pytest.fail(f"process {p} outlived the launcher")
        if not os.path.exists(f"/proc/{p}"):  # gone (not a zombie awaiting its reaper)
            with pytest.raises(ProcessLookupError):
                os.kill(p, 0)


def wait_for_files(paths, proc, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"launcher exited early ({proc.returncode}):\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {paths}")
        time.sleep(0.05)
    return [int(p.read_text()) for p in paths]


# A rank that records its pid (and a grandchild's) in tmp files, then sleeps.
SLEEPER = """
    import os, subprocess, sys, time
    d = sys.argv[1]
    rank = int(os.environ["RANK"])
    child = subprocess.Popen(["sleep", "60"])
    for name, pid in (("pid", os.getpid()), ("grandchild", child.pid)):
        tmp = os.path.join(d, f"{name}{rank}.tmp")
        with open(tmp, "w") as f:
            f.write(str(pid))
        os.replace(tmp, os.path.join(d, f"{name}{rank}"))
    print("sleeping", flush=True)
    time.sleep(60)
"""


# ---- environment and output -----------------------------------------------------------

@pytest.mark.parametrize("nproc", [2, 4])
def test_local_ranks_get_their_environment_and_prefixed_output(tmp_path, nproc):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    port = free_port()
    r = run_launcher("--nproc_per_node", nproc, "--master_port", port, script, "a", "--b", "1")
    assert r.returncode == 0, r.stderr
    envs = parse_env_lines(r.stdout)
    assert sorted(envs) == list(range(nproc))
    for rank, e in envs.items():
        assert e["RANK"] == str(rank)
        assert e["WORLD_SIZE"] == str(nproc)
        assert e["LOCAL_RANK"] == str(rank)
        assert e["LOCAL_WORLD_SIZE"] == str(nproc)
        assert e["GROUP_RANK"] == e["NODE_RANK"] == "0"
        assert e["MASTER_ADDR"] == "127.0.0.1"
        assert e["MASTER_PORT"] == str(port)
        # No token is made up per node: the job's description is its default token, so the
        # same command on every node joins without a shared secret.
        assert e["ONEFLOW_JOB_TOKEN"] == "<unset>"
    out_lines = r.stdout.splitlines()
    for rank in range(nproc):
        assert f"[rank {rank}] args=a,--b,1" in out_lines
        assert f"[rank {rank}] to-stderr" in r.stderr.splitlines()
        assert f"[rank {rank}] to-stderr" not in out_lines
    assert all(re.match(r"\[rank \d+\] ", l) for l in out_lines), r.stdout


def test_defaults_single_process(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    r = run_launcher(script)
    assert r.returncode == 0, r.stderr
    e = parse_env_lines(r.stdout)[0]
    assert (e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["MASTER_ADDR"], e["MASTER_PORT"]) == \
        ("0", "1", "0", "127.0.0.1", "29500")


def test_a_job_token_already_set_is_kept(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    r = run_launcher("--nproc_per_node", 2, "--master_port", free_port(), script,
                     env=base_env(ONEFLOW_JOB_TOKEN="mytoken123"))
    assert r.returncode == 0, r.stderr
    assert {e["ONEFLOW_JOB_TOKEN"] for e in parse_env_lines(r.stdout).values()} == {"mytoken123"}


def test_ips_stands_for_nodes_node_rank_and_master(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    r = run_launcher("--ips", "10.255.255.1,127.0.0.1", "--nproc_per_node", 2, "--master_port",
                     free_port(), script)  # this machine is the second host: node 1, ranks 2, 3
    e = parse_env_lines(r.stdout)
    assert sorted(e) == [2, 3], r.stdout + r.stderr
    assert {(v["NODE_RANK"], v["WORLD_SIZE"], v["MASTER_ADDR"]) for v in e.values()} == \
        {("1", "4", "10.255.255.1")}


@pytest.mark.parametrize("args,message", [
    (["--ips", "10.255.255.1,10.255.255.2"], "--ips 10.255.255.1,10.255.255.2: none of the hosts "
                                             "is this machine (its names and addresses: "),
    (["--ips", "127.0.0.1", "--nnodes", "2"], "--ips sets --nnodes: give one or the other"),
    (["--ips", "a,a"], "--ips 'a,a' names a host twice"),
])
def test_ips_errors(tmp_path, args, message):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    r = run_launcher(*args, script)
    assert r.returncode == 2
    assert f"oneflow.distributed.launch: error: {message}" in r.stderr


def test_msrun_log_dir_layout(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    r = run_launcher("--nproc_per_node", 2, "--master_port", free_port(), "--log_dir",
                     tmp_path / "logs", script)
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        folder = tmp_path / "logs" / "0" / f"rank.{rank}"
        assert (folder / "stdout").read_text().startswith(f"RANK={rank} ")
        assert (folder / "stderr").read_text() == "to-stderr\n"


def test_no_python_runs_the_program_itself():
    r = run_launcher("--nproc_per_node", 2, "--master_port", free_port(), "--no_python",
                     "/bin/sh", "-c", "echo rank=$RANK of $WORLD_SIZE local=$LOCAL_RANK")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["[rank 0] rank=0 of 2 local=0",
                                             "[rank 1] rank=1 of 2 local=1"]


def test_module_mode_runs_a_module_from_pythonpath(tmp_path):
    pkg = tmp_path / "mods"
    pkg.mkdir()
    write(pkg / "rankmod.py", """
        import os, sys
        print(f"module {__name__} rank {os.environ['RANK']} args {sys.argv[1:]}")
    """)
    env = base_env()
    env["PYTHONPATH"] = str(pkg) + os.pathsep + env["PYTHONPATH"]
    r = run_launcher("--nproc_per_node", 2, "--master_port", free_port(), "-m", "rankmod", "x", "-y",
                     env=env)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [
        "[rank 0] module __main__ rank 0 args ['x', '-y']",
        "[rank 1] module __main__ rank 1 args ['x', '-y']"]


def test_two_launchers_as_two_nodes(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    port = free_port()
    env = base_env(ONEFLOW_JOB_TOKEN="sharedtoken")
    procs = [subprocess.Popen(launcher_cmd("--nnodes", 2, "--node_rank", k, "--nproc_per_node", 2,
                                           "--master_addr", "127.0.0.1", "--master_port", port, script),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in (0, 1)]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    seen = {}
    for node, (out, _) in enumerate(results):
        envs = parse_env_lines(out)
        assert sorted(envs) == [2 * node, 2 * node + 1]
        for rank, e in envs.items():
            assert e["WORLD_SIZE"] == "4"
            assert e["NODE_RANK"] == e["GROUP_RANK"] == str(node)
            assert e["LOCAL_RANK"] == str(rank - 2 * node)
            assert e["LOCAL_WORLD_SIZE"] == "2"
            assert e["MASTER_PORT"] == str(port)
            assert e["ONEFLOW_JOB_TOKEN"] == "sharedtoken"
            seen[rank] = e["RANK"]
    assert seen == {0: "0", 1: "1", 2: "2", 3: "3"}


def test_a_last_line_without_newline_is_printed():
    r = run_launcher("--no_python", "/bin/sh", "-c", "printf 'no newline'")
    assert r.returncode == 0
    assert r.stdout == "[rank 0] no newline\n"


def test_logdir_keeps_each_ranks_output(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    logdir = tmp_path / "logs" / "run1"
    r = run_launcher("--nproc_per_node", 2, "--master_port", free_port(), "--logdir", logdir, script)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(logdir)) == ["stderr_rank0.log", "stderr_rank1.log",
                                          "stdout_rank0.log", "stdout_rank1.log"]
    for rank in range(2):
        out = (logdir / f"stdout_rank{rank}.log").read_text()
        assert out.startswith(f"RANK={rank} WORLD_SIZE=2 ")  # unprefixed
        assert "args=\n" in out
        assert (logdir / f"stderr_rank{rank}.log").read_text() == "to-stderr\n"
        assert f"[rank {rank}] RANK={rank} " in r.stdout  # the console still gets it


# ---- OMP_NUM_THREADS ------------------------------------------------------------------

def test_omp_num_threads_set_to_one_for_several_ranks(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    r = run_launcher("--nproc_per_node", 2, "--master_port", free_port(), script)
    assert r.returncode == 0, r.stderr
    assert {e["OMP_NUM_THREADS"] for e in parse_env_lines(r.stdout).values()} == {"1"}
    notices = [l for l in r.stderr.splitlines() if "OMP_NUM_THREADS" in l]
    assert len(notices) == 1 and notices[0].startswith("oneflow.distributed.launch: ")


def test_omp_num_threads_left_alone_for_one_rank_or_when_set(tmp_path):
    script = write(tmp_path / "env.py", ENV_SCRIPT)
    r = run_launcher(script)
    assert parse_env_lines(r.stdout)[0]["OMP_NUM_THREADS"] == "<unset>"
    assert "OMP_NUM_THREADS" not in r.stderr
    r = run_launcher("--nproc_per_node", 2, "--master_port", free_port(), script,
                     env=base_env(OMP_NUM_THREADS="3"))
    assert {e["OMP_NUM_THREADS"] for e in parse_env_lines(r.stdout).values()} == {"3"}
    assert "OMP_NUM_THREADS" not in r.stderr


# ---- failures and signals -------------------------------------------------------------

def test_a_failing_rank_stops_the_others(tmp_path):
    script = write(tmp_path / "fail.py", textwrap.dedent(SLEEPER).replace(
        'rank = int(os.environ["RANK"])',
        'rank = int(os.environ["RANK"])\n'
        'if rank == 1:\n'
        '    while not os.path.exists(os.path.join(d, "pid0")):\n'
        '        time.sleep(0.02)\n'
        '    with open(os.path.join(d, "pid1"), "w") as f:\n'
        '        f.write(str(os.getpid()))\n'
        '    print("about to fail", file=sys.stderr, flush=True)\n'
        '    raise ValueError("boom from rank 1")'))
    t0 = time.monotonic()
    p = subprocess.Popen(launcher_cmd("--nproc_per_node", 2, "--master_port", free_port(), script, tmp_path),
                         env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=30)
    elapsed = time.monotonic() - t0
    assert p.returncode == 1, err  # the exit code of an uncaught Python exception
    assert elapsed < 10, elapsed
    lines = err.splitlines()
    summary = [i for i, l in enumerate(lines) if l.startswith("oneflow.distributed.launch: rank 1 ")]
    assert len(summary) == 1, err
    i = summary[0]
    assert re.fullmatch(r"oneflow\.distributed\.launch: rank 1 \(pid \d+\) exited with code 1; "
                        r"stopping the other 1 process\(es\)\. Last lines of its stderr:", lines[i])
    tail = [l.strip() for l in lines[i + 1:]]
    assert "about to fail" in tail and "Traceback (most recent call last):" in tail
    assert tail[-1] == "ValueError: boom from rank 1"
    assert "[rank 1] ValueError: boom from rank 1" in lines
    assert "[rank 0] sleeping" in out
    pids = [int((tmp_path / n).read_text()) for n in ("pid0", "grandchild0", "pid1")]
    assert_all_dead(pids)


def test_a_rank_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path):
    script = write(tmp_path / "stubborn.py", """
        import os, signal, sys, time
        d = sys.argv[1]
        if os.environ["RANK"] == "0":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(os.path.join(d, "pid0.tmp"), "w") as f:
                f.write(str(os.getpid()))
            os.replace(os.path.join(d, "pid0.tmp"), os.path.join(d, "pid0"))
            time.sleep(60)
        while not os.path.exists(os.path.join(d, "pid0")):
            time.sleep(0.02)
        sys.exit(7)
    """)
    t0 = time.monotonic()
    r = run_launcher("--nproc_per_node", 2, "--master_port", free_port(), script, tmp_path)
    assert r.returncode == 7
    assert 4 < time.monotonic() - t0 < 15
    assert "rank 1 (pid " in r.stderr and "exited with code 7" in r.stderr
    assert "It wrote nothing to stderr." in r.stderr
    assert_all_dead([int((tmp_path / "pid0").read_text())])


def test_a_rank_killed_by_a_signal_is_reported():
    r = run_launcher("--no_python", "/bin/sh", "-c", "echo dying >&2; kill -9 $$")
    assert r.returncode == 1
    assert re.search(r"rank 0 \(pid \d+\) was killed by SIGKILL; stopping the other 0 process\(es\)\. "
                     r"Last lines of its stderr:\n    dying\n", r.stderr), r.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_launcher_stops_all_ranks(tmp_path, sig):
    script = write(tmp_path / "sleep.py", SLEEPER)
    p = subprocess.Popen(launcher_cmd("--nproc_per_node", 2, "--master_port", free_port(), script, tmp_path),
                         env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = wait_for_files([tmp_path / n for n in ("pid0", "pid1", "grandchild0", "grandchild1")], p)
    t0 = time.monotonic()
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert time.monotonic() - t0 < 10
    assert p.returncode == 128 + int(sig)
    assert f"received {sig.name}" in err
    assert_all_dead(pids)


# ---- usage errors ---------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--nnodes", "2", "--node_rank", "2", "x.py"], "--node_rank 2 is out of range for --nnodes 2"),
    ([], "missing the script to run"),
    (["--nproc_per_node", "2"], "missing the script to run"),
    (["/no/such/script.py"], "script '/no/such/script.py' not found"),
    (["--no_python", "/no/such/program"], "program '/no/such/program' not found"),
    (["--nproc_per_node", "0", "x.py"], "--nproc_per_node must be at least 1, got 0"),
    (["--nnodes", "two", "x.py"], "--nnodes must be an integer, got 'two'"),
    (["--master_port", "70000", "x.py"], "--master_port 70000 is not a port"),
    (["-m", "--no_python", "mod"], "-m and --no_python cannot be used together"),
    (["--bogus", "x.py"], "unrecognized arguments: --bogus"),
])
def test_usage_errors_are_one_line(args, message):
    r = run_launcher(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("oneflow.distributed.launch: error: ")
    assert message in lines[0]


def test_help_exits_zero():
    r = run_launcher("--help")
    assert r.returncode == 0 and "--nproc_per_node" in r.stdout


# ---- in-process helpers ---------------------------------------------------------------

def test_child_command_and_envs_in_process():
    args = launch.parse_args(["--nproc-per-node", "3", "--nnodes", "2", "--node-rank", "1",
                              "--master-addr", "10.0.0.1", "--master-port", "1234",
                              "--no_python", "/bin/sh", "-c", "true"])
    assert launch.child_command(args) == ["/bin/sh", "-c", "true"]
    envs = launch.child_envs(args, base_env={"OMP_NUM_THREADS": "4"})
    assert [e["RANK"] for e in envs] == ["3", "4", "5"]
    assert {e["WORLD_SIZE"] for e in envs} == {"6"}
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1", "2"]
    assert {e["MASTER_ADDR"] for e in envs} == {"10.0.0.1"}
    assert {e["OMP_NUM_THREADS"] for e in envs} == {"4"}
    args = launch.parse_args(["-m", "pkg.mod", "--lr", "1"])
    assert launch.child_command(args) == [sys.executable, "-u", "-m", "pkg.mod", "--lr", "1"]
