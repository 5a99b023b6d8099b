"""flow.comm and flow.env across real processes started by the launcher over 127.0.0.1."""

import os
import re
import socket
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHONPATH = os.path.join(ROOT, "oneflow", "python")
DIST = os.path.join(ROOT, "tests", "python", "dist")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_with(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT",
                        "ONEFLOW_JOB_TOKEN", "ONEFLOW_SHM")}
    env["PYTHONPATH"] = os.pathsep.join([PYTHONPATH] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update({k: str(v) for k, v in extra.items()})
    return env


# The devices the multi-rank scripts of dist/ run their global tensors on (dist/device.py).
DEVICES = ["cpu", "cuda"]


def launch(*args, env=None, timeout=120, device="cpu"):
    """The launcher with args. device "cuda": the dist/ scripts put their global tensors on cuda
    placements, on a GPU where one is usable, else on the stand-in CUDA device
    (ONEFLOW_FAKE_CUDA=1: host memory and CPU kernels, so where tensors go is checked anyway)."""
    cmd = [sys.executable, "-m", "oneflow.distributed.launch", *map(str, args)]
    env = dict(env or env_with())
    if device == "cuda":
        env["ONEFLOW_TEST_DEVICE"] = "cuda"
        if not _gpu_usable():
            env["ONEFLOW_FAKE_CUDA"] = "1"
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _gpu_usable():
    import oneflow as flow

    return flow.cuda.is_available() and not flow.cuda.is_fake()


def ok_lines(out):
    return sorted(l.split("] ", 1)[-1] for l in out.splitlines() if " ok " in l)


@pytest.mark.parametrize("nproc,shm", [(2, "1"), (4, "1"), (2, "0")])
def test_every_collective_matches_hand_computed_values(nproc, shm):
    r = launch("--nproc_per_node", nproc, "--master_port", free_port(),
               os.path.join(DIST, "collectives.py"), env=env_with(ONEFLOW_SHM=shm))
    assert r.returncode == 0, r.stdout + r.stderr
    transport = "shm" if shm == "1" else "gloo"
    assert ok_lines(r.stdout) == sorted(f"rank {k} of {nproc} ok {transport}" for k in range(nproc))


def test_two_launchers_as_two_nodes_form_a_world_of_four():
    port = free_port()
    common = ["--nnodes", 2, "--nproc_per_node", 2, "--master_addr", "127.0.0.1",
              "--master_port", port]
    script = os.path.join(DIST, "collectives.py")
    cmds = [[sys.executable, "-m", "oneflow.distributed.launch", *map(str, common),
             "--node_rank", str(node), script] for node in (0, 1)]
    env = env_with()  # no token: the same command on both nodes is the same job
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for c in cmds]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
    assert ok_lines(outs[0][0]) == ["rank 0 of 4 ok shm", "rank 1 of 4 ok shm"]
    assert ok_lines(outs[1][0]) == ["rank 2 of 4 ok shm", "rank 3 of 4 ok shm"]


def test_env_reports_the_world(tmp_path):
    script = tmp_path / "world.py"
    script.write_text(textwrap.dedent("""
        import oneflow as flow
        e = flow.env
        print("world", e.get_rank(), e.get_world_size(), e.get_local_rank(), e.get_node_size())
    """))
    r = launch("--nproc_per_node", 2, "--master_port", free_port(), script)
    assert r.returncode == 0, r.stderr
    assert sorted(l.split("] ", 1)[-1] for l in r.stdout.splitlines()) == [
        "world 0 2 0 1", "world 1 2 1 1"]


RAISES = """
    import time
    import oneflow as flow
    flow.env.init()
    x = flow.ones(4)
    if flow.env.get_rank() == {bad}:
        time.sleep(0.5)
        raise ValueError("rank {bad} gives up")
    flow.comm.all_reduce(x)  # the others wait here for a rank that never comes
    print("unreachable")
"""


def no_process_left(marker):
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return out.strip() == ""


def test_a_rank_that_raises_stops_the_job_within_seconds(tmp_path):
    script = tmp_path / "raises_in_job.py"
    script.write_text(textwrap.dedent(RAISES.format(bad=1)))
    start = time.time()
    r = launch("--nproc_per_node", 2, "--master_port", free_port(), script,
               env=env_with(ONEFLOW_TIMEOUT_SECONDS=300))
    took = time.time() - start
    assert r.returncode != 0
    assert took < 30, took
    assert "rank 1" in r.stderr and "ValueError: rank 1 gives up" in r.stderr
    assert "unreachable" not in r.stdout
    time.sleep(0.5)
    assert no_process_left("raises_in_job.py")


def test_a_rank_failing_on_another_node_stops_this_node(tmp_path):
    # Node 1's launcher cannot kill node 0's ranks: they learn it from the control plane.
    script = tmp_path / "raises_other_node.py"
    script.write_text(textwrap.dedent(RAISES.format(bad=3)))
    port = free_port()
    common = ["--nnodes", 2, "--nproc_per_node", 2, "--master_port", port]
    env = env_with(ONEFLOW_JOB_TOKEN="abort-test", ONEFLOW_TIMEOUT_SECONDS=300)
    start = time.time()
    procs = [subprocess.Popen([sys.executable, "-m", "oneflow.distributed.launch",
                               *map(str, common), "--node_rank", str(node), str(script)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for node in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    took = time.time() - start
    assert all(p.returncode != 0 for p in procs)
    assert took < 30, took
    assert "rank 3 aborted the job: ValueError: rank 3 gives up" in outs[0][1], outs[0][1]
    time.sleep(0.5)
    assert no_process_left("raises_other_node.py")


def run_rank(script, rank, port, timeout=60, **extra):
    env = env_with(RANK=rank, WORLD_SIZE=2, LOCAL_RANK=rank, LOCAL_WORLD_SIZE=2,
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **extra)
    return subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


JOIN = """
    import oneflow as flow
    flow.env.init()
    flow.comm.barrier()
    print("joined")
"""


def join_script(tmp_path):
    script = tmp_path / "join.py"
    script.write_text(textwrap.dedent(JOIN))
    return script


def test_wrong_token_is_refused(tmp_path):
    script = join_script(tmp_path)
    port = free_port()
    master = run_rank(script, 0, port, ONEFLOW_JOB_TOKEN="right", ONEFLOW_TIMEOUT_SECONDS=20)
    time.sleep(1.0)
    stray = run_rank(script, 1, port, ONEFLOW_JOB_TOKEN="wrong", ONEFLOW_TIMEOUT_SECONDS=20)
    _, err = stray.communicate(timeout=60)
    master.kill()
    master.communicate()
    assert stray.returncode != 0
    assert (f"control plane: rank 1 was refused by the master at 127.0.0.1:{port}: its "
            f"ONEFLOW_JOB_TOKEN differs (set the same value on every node, or none) (another job "
            f"on this port? give each job its own --master_port; or start every node with the "
            f"same command and settings)") in err


def _node(node, script, port, **extra):
    cmd = [sys.executable, "-m", "oneflow.distributed.launch", "--nnodes", "2", "--node_rank",
           str(node), "--nproc_per_node", "2", "--master_port", str(port), str(script)]
    return subprocess.Popen(cmd, env=env_with(**extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_node_running_another_command_is_refused_and_the_job_stops(tmp_path):
    first, second = join_script(tmp_path), tmp_path / "other.py"
    second.write_text(first.read_text())
    port = free_port()
    start = time.monotonic()
    master = _node(0, first, port, ONEFLOW_TIMEOUT_SECONDS=120)
    time.sleep(1.0)
    stray = _node(1, second, port, ONEFLOW_TIMEOUT_SECONDS=120)
    _, stray_err = stray.communicate(timeout=60)
    _, master_err = master.communicate(timeout=60)
    assert time.monotonic() - start < 30  # seconds, not the 120 s timeout
    assert stray.returncode != 0 and master.returncode != 0
    differs = f"its command is 'python3 -u {second}' but this job's is 'python3 -u {first}'"
    assert (f"control plane: rank 2 was refused by the master at 127.0.0.1:{port}: {differs} "
            f"(another job on this port?") in stray_err or \
        (f"control plane: rank 3 was refused by the master at 127.0.0.1:{port}: {differs} "
         f"(another job on this port?") in stray_err, stray_err
    assert "oneflow: the master refused a rank " in master_err
    assert f": {differs}; stopping this job, which cannot gather its ranks" in master_err, master_err


def test_rank_0_says_whom_it_waits_for(tmp_path):
    script = join_script(tmp_path)
    port = free_port()
    master = _node(0, script, port, ONEFLOW_TIMEOUT_SECONDS=3, ONEFLOW_WAIT_REPORT_SECONDS=1)
    _, err = master.communicate(timeout=60)
    assert master.returncode != 0
    # One report a second; rank 1 (node 0) may itself join after the first one on a busy machine.
    assert re.search(rf"\[rank 0\] \[rank 0\] oneflow: waiting: ranks 2, 3 \(node 1\) have not "
                     rf"joined the job at 127\.0\.0\.1:{port}; giving up in [12] s\n", err), err
    assert (f"oneflow: rank 0: ranks 2, 3 (node 1) have not joined the job at 127.0.0.1:{port} "
            f"after 3 s (ONEFLOW_TIMEOUT_SECONDS); were they started with the same "
            f"--master_addr, --master_port and sizes?") in err, err


def test_unreachable_master_names_address_rank_and_seconds(tmp_path):
    script = join_script(tmp_path)
    port = free_port()
    p = run_rank(script, 1, port, ONEFLOW_TIMEOUT_SECONDS=2)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    assert f"control plane: rank 1 could not reach the master at 127.0.0.1:{port} within 2 s" in err


def test_port_in_use_is_one_clear_line(tmp_path):
    script = join_script(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = run_rank(script, 0, port, ONEFLOW_TIMEOUT_SECONDS=5)
        _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    assert f"control plane: cannot listen on 127.0.0.1:{port} (address already in use?) as rank 0" in err


def test_a_missing_peer_times_out_naming_the_ranks(tmp_path):
    script = join_script(tmp_path)
    port = free_port()
    p = run_rank(script, 0, port, ONEFLOW_TIMEOUT_SECONDS=2)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    # Every rank meets the others when it joins the job (at import).
    assert (f"oneflow: rank 0: rank 1 (node 0) has not joined the job at 127.0.0.1:{port} after "
            f"2 s (ONEFLOW_TIMEOUT_SECONDS)") in err, err


def test_single_process_needs_no_network():
    code = ("import oneflow as flow; x = flow.ones(3); flow.comm.all_reduce(x); "
            "print(flow.comm.transport(), x.tolist(), flow.env.get_world_size())")
    r = subprocess.run([sys.executable, "-c", code], env=env_with(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "self [1.0, 1.0, 1.0] 1"


def test_argument_errors_are_one_line():
    import oneflow as flow
    with pytest.raises(ValueError, match=r"all_reduce: unknown reduce op 'prod'"):
        flow.comm.all_reduce(flow.ones(2), op="prod")
    with pytest.raises(ValueError, match=r"all_gather: got 2 output tensors for 1 ranks"):
        flow.comm.all_gather([flow.ones(2), flow.ones(2)], flow.ones(2))
    with pytest.raises(TypeError, match=r"broadcast: tensor must be a oneflow.Tensor, got list"):
        flow.comm.broadcast([1, 2], 0)
    with pytest.raises(RuntimeError, match=r"broadcast: rank 3 is not in group cpu:\[0\]"):
        flow.comm.broadcast(flow.ones(2), 3)


def test_cpp_global_linear_regression_runs_data_parallel_under_the_launcher():
    binary = os.path.join(ROOT, "bazel-bin", "examples", "global_linear_regression")
    if not os.path.exists(binary):
        subprocess.run(["bazel", "build", "//examples:global_linear_regression"], cwd=ROOT,
                       check=True, capture_output=True)
    r = launch("--nproc_per_node", 2, "--master_port", free_port(), "--no_python", binary)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(l.split("] ", 1)[-1] for l in r.stdout.splitlines() if "w = " in l) == [
        "rank 0 of 2: w = [[2.0000], [3.0000]]", "rank 1 of 2: w = [[2.0000], [3.0000]]"]
    assert "step 200 loss" in r.stdout


def test_a_rank_killed_on_another_node_is_found_by_its_missing_heartbeat(tmp_path):
    # SIGKILL leaves no chance to abort: node 0 learns it from the master's heartbeat watchdog.
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent("""
        import os, signal, time
        import oneflow as flow
        flow.env.init()
        if flow.env.get_rank() == 3:
            time.sleep(1.5)
            os.kill(os.getpid(), signal.SIGKILL)
        flow.comm.all_reduce(flow.ones(4))
        print("unreachable")
    """))
    common = ["--nnodes", 2, "--nproc_per_node", 2, "--master_port", free_port()]
    env = env_with(ONEFLOW_JOB_TOKEN="kill-test", ONEFLOW_TIMEOUT_SECONDS=300,
                   ONEFLOW_HEARTBEAT_TIMEOUT_SECONDS=2)
    start = time.time()
    procs = [subprocess.Popen([sys.executable, "-m", "oneflow.distributed.launch",
                               *map(str, common), "--node_rank", str(node), str(script)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for node in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode != 0 for p in procs)
    assert time.time() - start < 30
    # node 1's launcher stops rank 2 right after rank 3 dies: the line names the node's ranks
    # that fell silent (rank 2 may be stopped a little later than the watchdog looks)
    assert re.search(r"(ranks 2, 3 \(node 1\)|rank [23] \(node 1\)) sent no heartbeat for 2 s "
                     r"\(the process died, its node was lost, or it is stuck\)",
                     outs[0][1]), outs[0][1]
    assert "unreachable" not in outs[0][0]
    time.sleep(0.5)
    assert no_process_left("killed.py")


def test_ranks_given_their_own_local_rank_argument_join_one_job(tmp_path):
    # PyTorch's older launchers pass each rank --local_rank=R: the job's default token (its
    # description) leaves that argument out, so these ranks are one job.
    script = join_script(tmp_path)
    port = free_port()
    procs = [subprocess.Popen([sys.executable, str(script), f"--local_rank={r}"],
                              env=env_with(RANK=r, WORLD_SIZE=2, LOCAL_RANK=r, LOCAL_WORLD_SIZE=2,
                                           MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                           ONEFLOW_TIMEOUT_SECONDS=30),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in (0, 1)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all(out.strip() == "joined" for out, _ in outs)
