"""Training that survives a lost rank: the launcher's restarts (--max_restarts), the training state
saved and loaded in one call (flow.utils.training_state), exact resume of examples/gpt.py, the
grace period of a SIGTERM (--term_timeout). Real launcher processes; the lost host and the
smaller world are in test_multihost.py."""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import oneflow as flow
from test_comm import DIST, ROOT, env_with, free_port, launch
from test_launch import assert_all_dead, launcher_cmd, wait_for_files, write

sys.path.insert(0, os.path.join(ROOT, "examples"))
import gpt  # noqa: E402

PREFIX = "oneflow.distributed.launch: "


def tiny(steps=8, n_head=2):
    """A GPT of a few thousand parameters, a few steps: seconds per run."""
    return ["--n_layer", 1, "--n_embd", 16, "--n_head", n_head, "--block_size", 8,
            "--batch_size", 4, "--steps", steps, "--eval_interval", 0]


TINY = tiny()
needs_fortunes = pytest.mark.skipif(
    not os.path.isdir(gpt.FORTUNES),
    reason=f"Debian's fortunes package is not installed ({gpt.FORTUNES})")


def losses(out):
    """{step: loss} from rank 0's `step S: loss L` lines (the last one for a step)."""
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"\[rank 0\] step (\d+): loss ([0-9.]+)", out)}


def final_parameters(folder):
    state = flow.load(os.path.join(folder, "step-00000008"))
    return {k: v.numpy() for k, v in state["model"].items()}


@needs_fortunes
@pytest.mark.parametrize("parallel", ["dp", "tp", "zero"])
def test_gpt_resumes_exactly_after_a_rank_is_killed(tmp_path, parallel):
    killed = launch("--nproc_per_node", 2, "--master_port", free_port(), "--max_restarts", 1,
                    os.path.join(DIST, "gpt_killed.py"), "rank", 1, 4, "--parallel", parallel,
                    *TINY, "--save", tmp_path / "killed", "--save_every", 3)
    assert killed.returncode == 0, killed.stdout[-2000:] + killed.stderr[-3000:]
    whole = launch("--nproc_per_node", 2, "--master_port", free_port(), os.path.join(
        ROOT, "examples", "gpt.py"), "--parallel", parallel, *TINY, "--save", tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    restart = [l for l in killed.stderr.splitlines() if " restart " in l]
    assert restart == [PREFIX + "restart 1 of 1 after rank 1 (node 0) was killed by SIGKILL: new "
                       "world 1 node(s) x 2 = 2 rank(s), this node 0"], killed.stderr
    assert "[rank 0] resumed from " + str(tmp_path / "killed" / "step-00000003") + \
        " (step 3, saved by 2 rank(s)) on 2 rank(s)" in killed.stdout
    # the steps after the checkpoint ran twice; the second time as in the uninterrupted run
    assert losses(killed.stdout) == losses(whole.stdout)
    a, b = final_parameters(tmp_path / "killed"), final_parameters(tmp_path / "whole")
    assert a.keys() == b.keys() and len(a) > 10
    for name in a:
        assert a[name].tobytes() == b[name].tobytes(), name


# A rank that records its pid and a grandchild's (per start), then rank 1 dies by SIGKILL.
DIES_EVERY_TIME = """
    import os, signal, subprocess, sys, time
    d, rank = sys.argv[1], int(os.environ["RANK"])
    start = os.environ["ONEFLOW_RESTART_COUNT"]
    assert os.environ["TORCHELASTIC_RESTART_COUNT"] == start
    child = subprocess.Popen(["sleep", "60"])
    for name, pid in (("pid", os.getpid()), ("grandchild", child.pid)):
        with open(os.path.join(d, f"{name}{rank}.{start}.tmp"), "w") as f:
            f.write(str(pid))
        os.replace(os.path.join(d, f"{name}{rank}.{start}.tmp"),
                   os.path.join(d, f"{name}{rank}.{start}"))
    if rank == 1:
        while not os.path.exists(os.path.join(d, f"pid0.{start}")):
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)
"""


def test_restarts_exhausted_give_one_line_a_failure_code_and_no_orphan(tmp_path):
    script = write(tmp_path / "dies.py", DIES_EVERY_TIME)
    t0 = time.monotonic()
    r = launch("--nproc_per_node", 2, "--master_port", free_port(), "--max_restarts", 2, script,
               tmp_path, timeout=60)
    assert r.returncode == 1, r.stderr
    assert time.monotonic() - t0 < 30
    lines = r.stderr.splitlines()
    assert [l for l in lines if " restart " in l or "no restart left" in l] == [
        PREFIX + "restart 1 of 2 after rank 1 (node 0) was killed by SIGKILL: new world 1 node(s) "
                 "x 2 = 2 rank(s), this node 0",
        PREFIX + "restart 2 of 2 after rank 1 (node 0) was killed by SIGKILL: new world 1 node(s) "
                 "x 2 = 2 rank(s), this node 0",
        PREFIX + "rank 1 (node 0) was killed by SIGKILL; no restart left (--max_restarts 2 used "
                 "up): exiting with code 1"], r.stderr
    assert lines[-1].endswith("exiting with code 1")
    names = [f"{n}{rank}.{start}" for n in ("pid", "grandchild") for rank in (0, 1)
             for start in (0, 1, 2)]
    assert_all_dead([int((tmp_path / n).read_text()) for n in names])


def test_without_max_restarts_a_failure_ends_the_job_as_before(tmp_path):
    script = write(tmp_path / "dies.py", DIES_EVERY_TIME)
    r = launch("--nproc_per_node", 2, "--master_port", free_port(), script, tmp_path, timeout=60)
    assert r.returncode == 1
    assert " restart" not in r.stderr and not (tmp_path / "pid0.1").exists()


SAVES_ON_SIGTERM = """
    import os, signal, sys, time
    d, seconds = sys.argv[1], float(sys.argv[2])
    def save(signum, frame):
        time.sleep(seconds)  # writing a checkpoint
        open(os.path.join(d, "saved" + os.environ["RANK"]), "w").close()
        sys.exit(0)
    signal.signal(signal.SIGTERM, save)
    tmp = os.path.join(d, "pid" + os.environ["RANK"])
    with open(tmp + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(tmp + ".tmp", tmp)
    time.sleep(60)
"""


@pytest.mark.parametrize("term_timeout, save_s, saved", [(10, 1.5, True), (1, 4, False)])
def test_sigterm_reaches_every_rank_with_the_grace_period(tmp_path, term_timeout, save_s, saved):
    script = write(tmp_path / "saves.py", SAVES_ON_SIGTERM)
    p = subprocess.Popen(launcher_cmd("--nproc_per_node", 2, "--master_port", free_port(),
                                      "--term_timeout", term_timeout, script, tmp_path, save_s),
                         env=env_with(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = wait_for_files([tmp_path / "pid0", tmp_path / "pid1"], p)
    time.sleep(0.3)  # the handlers are installed right after the pid files
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    took = time.monotonic() - t0
    assert p.returncode == 128 + signal.SIGTERM
    assert ((tmp_path / "saved0").exists(), (tmp_path / "saved1").exists()) == (saved, saved)
    if saved:  # the launcher waited for the ranks' saves, not for the whole grace period
        assert save_s <= took < term_timeout, took
    else:
        assert term_timeout <= took < save_s, took
        assert f"processes still running after {term_timeout}s: SIGKILL" in err
    assert_all_dead(pids)


@pytest.mark.parametrize("args, message", [
    (["--nnodes", "3:2", "x.py"], "--nnodes 3:2: MIN 3 is larger than MAX 2"),
    (["--nnodes", "0:2", "x.py"], "--nnodes MIN must be at least 1, got 0"),
    (["--nnodes", "1:2", "--node_rank", "2", "x.py"],
     "--node_rank 2 is out of range for --nnodes 2"),
    (["--max_restarts", "-1", "x.py"], "--max_restarts must not be negative, got -1"),
    (["--term_timeout", "0", "x.py"], "--term_timeout must be positive, got 0"),
    (["--join_timeout", "soon", "x.py"], "--join_timeout must be a number of seconds, got 'soon'"),
    (["--master_port", "4000", "--rdzv_port", "4000", "x.py"],
     "--rdzv_port 4000 is the --master_port (rank 0 listens there)"),
])
def test_elastic_usage_errors_are_one_line(args, message):
    r = launch(*args)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX + "error: "), r.stderr
    assert message in lines[0]


def test_restart_count_and_world_in_the_environment():
    from oneflow.distributed import launch as launcher

    args = launcher.parse_args(["--nproc_per_node", "2", "--nnodes", "1:3", "--node_rank", "2",
                                "--max_restarts", "4", "--no_python", "/bin/true"])
    assert (args.min_nnodes, args.nnodes) == (1, 3)
    envs = launcher.child_envs(args, base_env={}, node_rank=1, nnodes=2, restart=3)
    assert [e["RANK"] for e in envs] == ["2", "3"]
    assert {e["WORLD_SIZE"] for e in envs} == {"4"}
    assert {(e["NODE_RANK"], e["GROUP_WORLD_SIZE"]) for e in envs} == {("1", "2")}
    assert {(e["TORCHELASTIC_RESTART_COUNT"], e["ONEFLOW_RESTART_COUNT"],
             e["TORCHELASTIC_MAX_RESTARTS"]) for e in envs} == {("3", "3", "4")}


# ---- several nodes on one host: the launchers' rendezvous --------------------------------

NODE_FAILS_ONCE = """
    import os, signal, sys, time
    import oneflow as flow
    flow.comm.barrier()
    rank, start = int(os.environ["RANK"]), os.environ["ONEFLOW_RESTART_COUNT"]
    print(f"rank {rank} of {os.environ['WORLD_SIZE']} in start {start}", flush=True)
    if rank == 3 and start == "0":
        os.kill(os.getpid(), signal.SIGKILL)
    flow.comm.barrier()
"""


def test_two_launchers_restart_every_rank_together(tmp_path):
    script = write(tmp_path / "fails_once.py", NODE_FAILS_ONCE)
    port, rdzv = free_port(), free_port()
    procs = [subprocess.Popen(launcher_cmd(
        "--nproc_per_node", 2, "--nnodes", 2, "--node_rank", k, "--master_port", port,
        "--rdzv_port", rdzv, "--max_restarts", 1, "--join_timeout", 20, script),
        env=env_with(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for k in (0, 1)]
    results = [p.communicate(timeout=90) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, out[-2000:] + err[-3000:]
        lines = [l for l in err.splitlines() if " restart " in l]
        assert lines == [PREFIX + f"restart 1 of 1 after rank 3 (node 1) was killed by SIGKILL: "
                         f"new world 2 node(s) x 2 = 4 rank(s), this node {procs.index(p)}"], err
    out = results[0][0] + results[1][0]
    for rank in range(4):
        assert f"rank {rank} of 4 in start 1" in out


# ---- the DataLoader's place ----------------------------------------------------------------

def batches_by_place(out):
    """{(rank, epoch, index): values and the random numbers drawn after them} from
    `[rank R] batch E I: values drew [...]` lines (the last one)."""
    return {(int(m.group(1)), int(m.group(2)), int(m.group(3))): m.group(4) for m in re.finditer(
        r"\[rank (\d+)\] batch (\d+) (\d+): (\[.*\] drew \[.*\])", out)}


def test_dataloader_resumed_mid_epoch_across_a_restart_yields_the_same_batches(tmp_path):
    script = os.path.join(DIST, "loader_resume.py")
    whole = launch("--nproc_per_node", 2, "--master_port", free_port(), script)
    killed = launch("--nproc_per_node", 2, "--master_port", free_port(), "--max_restarts", 1,
                    script, tmp_path / "ckpt")
    assert whole.returncode == 0 and killed.returncode == 0, killed.stderr[-3000:]
    assert "[rank 1] resumed at epoch 1 batch 3" in killed.stdout, killed.stdout[-3000:]
    # after the restart each rank printed batches 3.. of epoch 1 only
    after = killed.stdout.split("resumed at epoch 1 batch 3", 1)[1]
    assert min(i for (_, e, i) in batches_by_place(after)) == 3
    expected = batches_by_place(whole.stdout)
    assert len(expected) == 2 * 2 * 8  # ranks x epochs x batches of 46 / 2 / 3
    assert batches_by_place(killed.stdout) == expected


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_state_resumes_a_shuffled_epoch_and_the_generators(num_workers):
    from oneflow.utils import training_state
    from oneflow.utils.data import DataLoader, TensorDataset

    dataset = TensorDataset(flow.arange(40).reshape(40, 1))

    def loader():
        return DataLoader(dataset, batch_size=3, shuffle=True, num_workers=num_workers)

    flow.manual_seed(3)
    whole = [b.numpy().ravel().tolist() for (b,) in loader()]
    flow.manual_seed(3)
    first = loader()
    batches = iter(first)
    seen = [next(batches)[0].numpy().ravel().tolist() for _ in range(4)]
    flow.randn(5)  # the model draws
    state, rng = first.state_dict(), training_state.rng_state()
    following, drawn = next(batches)[0].numpy().ravel().tolist(), flow.randn(3).numpy()

    flow.manual_seed(99)  # another process: another generator state
    second = loader()
    second.load_state_dict(state)
    training_state.set_rng_state(rng)
    rest = iter(second)
    assert next(rest)[0].numpy().ravel().tolist() == following
    assert flow.randn(3).numpy().tobytes() == drawn.tobytes()
    assert seen + [following] + [b.numpy().ravel().tolist() for (b,) in rest] == whole
    assert second.state_dict()["done"] and second.state_dict()["yielded"] == 14


def test_distributed_sampler_resumed_in_a_smaller_world_covers_the_rest_of_the_epoch():
    from oneflow.utils.data import DataLoader, DistributedSampler, TensorDataset

    dataset = TensorDataset(flow.arange(50).reshape(50, 1))

    def loader(world, rank):
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, seed=1)
        sampler.set_epoch(2)
        return DataLoader(dataset, batch_size=2, sampler=sampler)

    taken, states = [], []
    for rank in range(4):  # 4 ranks took 3 batches each
        four = loader(4, rank)
        batches = iter(four)
        taken += [v for _ in range(3) for v in next(batches)[0].numpy().ravel().tolist()]
        states.append(four.state_dict())
    rest = []
    for rank in range(2):
        two = loader(2, rank)
        two.load_state_dict(states[rank])
        assert two.sampler.epoch == 2
        rest += [v for (b,) in two for v in b.numpy().ravel().tolist()]
    assert len(taken) == 24 and len(set(taken)) == 24
    assert sorted(set(taken) | set(rest)) == list(range(50)) and not set(taken) & set(rest)
    assert len(rest) == 26  # the 26 left, split evenly: nothing padded


def test_dataloader_load_state_dict_error():
    from oneflow.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(flow.arange(4)), batch_size=2)
    with pytest.raises(ValueError, match=r"^DataLoader.load_state_dict: the state lacks yielded, "
                                         r"rng; expected one from DataLoader.state_dict\(\)$"):
        loader.load_state_dict({"epoch": 0, "done": False, "seed_count": None})


# ---- training_state in one process ---------------------------------------------------------

def test_training_state_keeps_the_newest_complete_checkpoints(tmp_path):
    from oneflow.utils import training_state

    model = flow.nn.Linear(3, 2)
    opt = flow.optim.Adam(model.parameters(), lr=0.1)
    sched = flow.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    scaler = flow.amp.GradScaler(init_scale=256.0, growth_interval=2)
    for step in range(1, 5):
        scaler.scale(model(flow.randn(4, 3)).sum()).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
        training_state.save(tmp_path, step, model=model, optimizer=opt, lr_scheduler=sched,
                            grad_scaler=scaler, extra={"epoch": 7}, keep=2)
    (tmp_path / "step-00000009").mkdir()  # a save that died before its rename looks like this
    assert sorted(os.listdir(tmp_path)) == ["step-00000003", "step-00000004", "step-00000009"]
    assert training_state.latest(tmp_path) == str(tmp_path / "step-00000004")
    drawn = flow.randn(3).numpy()

    model2 = flow.nn.Linear(3, 2)
    opt2 = flow.optim.Adam(model2.parameters(), lr=0.1)
    sched2 = flow.optim.lr_scheduler.StepLR(opt2, step_size=1, gamma=0.5)
    scaler2 = flow.amp.GradScaler()
    got = training_state.load(tmp_path, model=model2, optimizer=opt2, lr_scheduler=sched2,
                              grad_scaler=scaler2)
    assert (got["step"], got["world_size"], got["extra"]) == (4, 1, {"epoch": 7})
    assert flow.randn(3).numpy().tobytes() == drawn.tobytes()  # the generators came back
    assert model2.weight.numpy().tobytes() == model.weight.numpy().tobytes()
    assert opt2.state_dict()["state"][0]["step"] == 4
    assert sched2.get_last_lr() == sched.get_last_lr()
    assert scaler2.get_scale() == scaler.get_scale() == 1024.0  # grown twice, every 2 steps
    assert training_state.load(tmp_path / "none") is None


def test_training_state_errors(tmp_path):
    from oneflow.utils import training_state

    with pytest.raises(ValueError, match=r"^training_state.save: step must be a non-negative "
                                         r"integer, got -1$"):
        training_state.save(tmp_path, -1)
    flow.save({"w": flow.ones(2)}, tmp_path / "plain", sharded=True)
    with pytest.raises(RuntimeError, match=r"training_state.load: '.*plain' is a checkpoint but "
                                           r"not of the training state"):
        training_state.load(tmp_path / "plain")
    training_state.save(tmp_path / "t", 1, extra={"epoch": 1})
    with pytest.raises(KeyError, match=r"training_state.load: '.*step-00000001' holds no model "
                                       r"state \(it holds no object state\); pass only what was "
                                       r"saved"):
        training_state.load(tmp_path / "t", model=flow.nn.Linear(1, 1))


# A rank that joins the job, says so, records its pid and waits to be stopped.
JOINS_AND_WAITS = """
    import os, sys, time
    import oneflow as flow
    flow.comm.barrier()
    rank, start = int(os.environ["RANK"]), os.environ["ONEFLOW_RESTART_COUNT"]
    with open(os.path.join(sys.argv[1], f"pid{rank}.{start}.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.path.join(sys.argv[1], f"pid{rank}.{start}.tmp"),
               os.path.join(sys.argv[1], f"pid{rank}.{start}"))
    print(f"rank {rank} of {os.environ['WORLD_SIZE']} in start {start}", flush=True)
    if start == "1":
        flow.comm.barrier()
        sys.exit(0)
    time.sleep(60)
"""


def _node(k, port, rdzv, script, tmp_path, *extra, nnodes=2):
    return subprocess.Popen(launcher_cmd(
        "--nnodes", nnodes, "--node_rank", k, "--master_port", port, "--rdzv_port", rdzv,
        "--max_restarts", 1, *extra, script, tmp_path), env=env_with(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_a_lost_node_is_waited_for_and_may_come_back(tmp_path):
    script = write(tmp_path / "waits.py", JOINS_AND_WAITS)
    port, rdzv = free_port(), free_port()
    nodes = [_node(k, port, rdzv, script, tmp_path, "--join_timeout", 30) for k in (0, 1)]
    try:
        first = wait_for_files([tmp_path / "pid0.0", tmp_path / "pid1.0"], nodes[0])
        os.killpg(nodes[1].pid, signal.SIGKILL)  # node 1's launcher (its rank dies with it)
        nodes[1].communicate(timeout=10)
        assert_all_dead([first[1]], within=5)
        time.sleep(1)
        again = _node(1, port, rdzv, script, tmp_path, "--join_timeout", 30)
        (out0, err0), (out1, err1) = nodes[0].communicate(timeout=60), again.communicate(timeout=60)
    finally:
        for p in nodes + [locals().get("again")]:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert nodes[0].returncode == 0 and again.returncode == 0, err0[-2000:] + err1[-2000:]
    assert [l for l in err0.splitlines() if " restart " in l] == [
        PREFIX + "restart 1 of 1 after node 1's launcher is gone (its connection closed): new "
                 "world 2 node(s) x 1 = 2 rank(s), this node 0"], err0
    assert PREFIX + "joined the job at its restart 1 of 1: new world 2 node(s) x 1 = 2 rank(s), " \
                    "this node 1" in err1.splitlines(), err1
    assert "[rank 1] rank 1 of 2 in start 1" in out1 and "[rank 0] rank 0 of 2 in start 1" in out0


def test_a_node_that_does_not_come_back_within_the_join_timeout_ends_the_job(tmp_path):
    script = write(tmp_path / "waits.py", JOINS_AND_WAITS)
    port, rdzv = free_port(), free_port()
    nodes = [_node(k, port, rdzv, script, tmp_path, "--join_timeout", 3) for k in (0, 1)]
    try:
        pids = wait_for_files([tmp_path / "pid0.0", tmp_path / "pid1.0"], nodes[0])
        os.killpg(nodes[1].pid, signal.SIGKILL)
        t0 = time.monotonic()
        _, err = nodes[0].communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        for p in nodes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert nodes[0].returncode == 1
    assert 3 <= took < 15, took
    assert err.splitlines()[-1] == (
        PREFIX + "cannot restart after node 1's launcher is gone (its connection closed): "
                 "rendezvous: 1 node(s) joined round 1 within 3 s (--join_timeout), --nnodes "
                 "needs at least 2"), err
    assert_all_dead(pids)


def test_losing_node_0_ends_the_other_launchers_with_one_line(tmp_path):
    script = write(tmp_path / "waits.py", JOINS_AND_WAITS)
    port, rdzv = free_port(), free_port()
    nodes = [_node(k, port, rdzv, script, tmp_path, "--join_timeout", 30) for k in (0, 1)]
    try:
        pids = wait_for_files([tmp_path / "pid0.0", tmp_path / "pid1.0"], nodes[0])
        os.killpg(nodes[0].pid, signal.SIGKILL)
        t0 = time.monotonic()
        _, err = nodes[1].communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        for p in nodes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert nodes[1].returncode == 1
    assert took < 10, took
    assert err.splitlines()[-1] == (
        PREFIX + f"lost the rendezvous at 127.0.0.1:{rdzv} (node 0's launcher is gone: its "
                 "connection closed)"), err
    assert_all_dead(pids)


@pytest.mark.parametrize("node, message", [
    (0, "oneflow.distributed.launch: rendezvous: 1 node(s) joined round 0 within 2 s "
        "(--join_timeout), --nnodes needs at least 2"),
    (1, "oneflow.distributed.launch: cannot reach the rendezvous of node 0's launcher at "
        "127.0.0.1:{rdzv} within 2 s (--join_timeout): "),
])
def test_a_node_alone_at_the_start_gives_up_after_the_join_timeout(tmp_path, node, message):
    script = write(tmp_path / "never.py", "raise SystemExit('never started')\n")
    rdzv = free_port()
    t0 = time.monotonic()
    p = _node(node, free_port(), rdzv, script, tmp_path, "--join_timeout", 2)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 1 and 2 <= time.monotonic() - t0 < 15
    assert err.splitlines()[-1].startswith(message.format(rdzv=rdzv)), err
    assert "never started" not in out + err


@needs_fortunes
def test_gpt_resumes_in_another_world_size_and_layout(tmp_path):
    """Saved by 2 ranks under zero after 4 steps, resumed by 4 ranks under tp (the model and
    the AdamW state resharded): the losses go on as the 2-rank run's."""
    gpt_py = os.path.join(ROOT, "examples", "gpt.py")
    six = tiny(6, n_head=4)  # whole heads on each of 4 ranks
    whole = launch("--nproc_per_node", 2, "--master_port", free_port(), gpt_py, "--parallel",
                   "zero", *six)
    saved = launch("--nproc_per_node", 2, "--master_port", free_port(), gpt_py, "--parallel",
                   "zero", *tiny(4, n_head=4), "--save", tmp_path / "ckpt")
    resumed = launch("--nproc_per_node", 4, "--master_port", free_port(), gpt_py, "--parallel",
                     "tp", *six, "--save", tmp_path / "ckpt")
    for r in (whole, saved, resumed):
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "[rank 0] resumed from " + str(tmp_path / "ckpt" / "step-00000004") + \
        " (step 4, saved by 2 rank(s)) on 4 rank(s)" in resumed.stdout
    expected, got = losses(whole.stdout), losses(resumed.stdout)
    assert sorted(got) == [4, 5]
    for step in (4, 5):  # another layout: another order of the sums
        assert abs(got[step] - expected[step]) < 1e-4, (step, got, expected)


@needs_fortunes
def test_gpt_saves_on_sigterm_and_resumes_from_there(tmp_path):
    gpt_py = os.path.join(ROOT, "examples", "gpt.py")
    args = tiny(steps=100000)
    p = subprocess.Popen(launcher_cmd("--nproc_per_node", 2, "--master_port", free_port(),
                                      "--term_timeout", 20, gpt_py, "--parallel", "dp", *args,
                                      "--save", tmp_path / "ckpt"),
                         env=env_with(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = ""
        while "step 3: loss" not in out:  # rank 0's lines; the job is training
            line = p.stdout.readline()
            assert line, p.stderr.read()[-3000:]
            out += line
        p.send_signal(signal.SIGTERM)
        rest, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM, err[-3000:]
    m = re.search(r"\[rank 0\] received SIGTERM: saved (.*step-(\d+)); stopping", rest)
    assert m, rest[-2000:] + err[-2000:]
    step = int(m.group(2))
    assert step >= 4 and "processes still running" not in err
    resumed = launch("--nproc_per_node", 2, "--master_port", free_port(), gpt_py, "--parallel",
                     "dp", *tiny(steps=step + 1), "--save", tmp_path / "ckpt")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"[rank 0] resumed from {m.group(1)} (step {step}, saved by 2 rank(s)) on 2 rank(s)" \
        in resumed.stdout
    assert sorted(losses(resumed.stdout)) == [step]


def test_a_preempted_node_leaves_and_the_others_go_on_in_a_smaller_world(tmp_path):
    script = write(tmp_path / "waits.py", JOINS_AND_WAITS)
    port, rdzv = free_port(), free_port()
    nodes = [_node(k, port, rdzv, script, tmp_path, "--join_timeout", 2, nnodes="1:2")
             for k in (0, 1)]
    try:
        pids = wait_for_files([tmp_path / "pid0.0", tmp_path / "pid1.0"], nodes[0])
        nodes[1].send_signal(signal.SIGTERM)  # node 1's machine is preempted
        (out0, err0), (_, err1) = nodes[0].communicate(timeout=60), nodes[1].communicate(timeout=30)
    finally:
        for p in nodes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert nodes[1].returncode == 128 + signal.SIGTERM, err1
    assert nodes[0].returncode == 0, err0[-3000:]
    assert [l for l in err0.splitlines() if " restart " in l] == [
        PREFIX + "restart 1 of 1 after node 1's launcher received SIGTERM: new world 1 node(s) x "
                 "1 = 1 rank(s), this node 0 (was 2 node(s) x 1 = 2 rank(s), this node 0)"], err0
    assert "[rank 0] rank 0 of 1 in start 1" in out0
    assert_all_dead(pids)
