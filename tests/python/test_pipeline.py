"""flow.nn.parallel.Pipeline: stages on different placements, micro-batches, GPipe and 1F1B.
Multi-rank checks run tests/python/dist/pipeline_*.py through the launcher: the same parameters
as one-process training on the full batch, and stages that compute at the same time."""

import os

import pytest

import oneflow as flow
import oneflow.nn as nn
from oneflow.nn.parallel.pipeline import ideal_bubble, program
from test_comm import DIST, env_with, free_port, launch


def ok_lines(out):
    return sorted(l.split("] ", 1)[-1] for l in out.splitlines() if l.endswith(" ok"))


def run(nproc, script, *args):
    return launch("--nproc_per_node", nproc, "--master_port", free_port(),
                  os.path.join(DIST, script), *args, timeout=300,
                  env=env_with(ONEFLOW_TIMEOUT_SECONDS="60"))


@pytest.mark.parametrize("nproc,schedule,opt", [
    (2, "gpipe", "sgd"), (2, "1f1b", "sgd"), (2, "1f1b", "adam"), (4, "1f1b", "adam"),
    (4, "gpipe", "sgd"),
])
def test_two_stages_train_like_one_process_on_the_full_batch(nproc, schedule, opt):
    r = run(nproc, "pipeline_train.py", schedule, opt)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ok_lines(r.stdout) == sorted(f"rank {k} of {nproc} {schedule} {opt} ok"
                                        for k in range(nproc))


def _intervals(out):
    """{step: {(kind, stage, micro-batch): (start, end)}}"""
    got = {}
    for line in out.splitlines():
        if "interval " in line:
            step, kind, s, k, a, b = line.split("interval ", 1)[1].split()
            got.setdefault(int(step), {})[(kind, int(s), int(k))] = (float(a), float(b))
    return got


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_the_stages_compute_at_the_same_time(schedule):
    # Stage 0's forward of micro-batch k + 1 runs while stage 1 runs its forward of k: each
    # rank executes only its own stage's ops, and nothing waits for the other stage's compute.
    def overlapping(iv):
        n = 0
        for k in range(3):
            a0, b0 = iv[("F", 0, k + 1)]
            a1, b1 = iv[("F", 1, k)]
            n += min(b0, b1) - max(a0, a1) > 0
        return n

    # A serialising pipeline never overlaps (0 in every step); two ranks on two cores, with the
    # scheduler's noise, overlap some micro-batches of some steps (seen: 1 of 3 in a step, even on
    # an idle machine of this kind, at the session's start too): at least 2 of the 9 pairs over
    # the three steps, and a second job gets a second chance.
    for attempt in range(2):
        r = run(2, "pipeline_overlap.py", schedule)
        assert r.returncode == 0, r.stdout + r.stderr
        steps = _intervals(r.stdout)
        assert sorted(steps) == [0, 1, 2] and all(len(iv) == 16 for iv in steps.values()), steps
        if sum(overlapping(iv) for iv in steps.values()) >= 2:
            break
    assert sum(overlapping(iv) for iv in steps.values()) >= 2, steps


def _per_stage(prog, s):
    return [(kind, k) for kind, st, k in prog if st == s and kind in "FB"]


def test_1f1b_orders_each_stage_as_the_textbook_and_reaches_the_ideal_bubble():
    prog, makespan = program("1f1b", 2, 4)
    assert _per_stage(prog, 0) == [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3),
                                   ("B", 2), ("B", 3)]
    assert _per_stage(prog, 1) == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2),
                                   ("F", 3), ("B", 3)]
    # On the ideal clock (forward 1, backward 2) each stage is busy 4 * 3 of the makespan.
    assert abs((1 - 12 / makespan) - ideal_bubble(2, 4)) < 1e-12
    prog, makespan = program("gpipe", 3, 6)
    assert abs((1 - 18 / makespan) - ideal_bubble(3, 6)) < 1e-12


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(2, 1), (2, 4), (3, 5), (4, 2)])
def test_every_transfer_comes_after_its_producer_and_before_its_consumer(schedule, p, m):
    prog, _ = program(schedule, p, m)
    where = {a: i for i, a in enumerate(prog)}
    assert len(where) == len(prog) == 2 * p * m + 2 * (p - 1) * m
    for s in range(p - 1):
        for k in range(m):
            assert where[("F", s, k)] < where[("A", s, k)] < where[("F", s + 1, k)]
            assert where[("B", s + 1, k)] < where[("G", s, k)] < where[("B", s, k)]


def test_mistakes_give_one_line_errors():
    P = flow.placement("cpu", ranks=[0])
    st = [nn.Linear(2, 2), nn.Linear(2, 2)]
    with pytest.raises(ValueError, match="Pipeline: got 2 stages but 1 placements"):
        flow.nn.parallel.Pipeline(st, [P], nn.MSELoss(), 2)
    with pytest.raises(ValueError, match=r"Pipeline: schedule must be one of \('gpipe', '1f1b'\), "
                                         "got 'interleaved'"):
        flow.nn.parallel.Pipeline(st, [P, P], nn.MSELoss(), 2, schedule="interleaved")
    with pytest.raises(ValueError, match="Pipeline: num_micro_batches must be an int >= 1, got 0"):
        flow.nn.parallel.Pipeline(st, [P, P], nn.MSELoss(), 0)
    pipe = flow.nn.parallel.Pipeline(st, [P, P], nn.MSELoss(), 3)
    x = flow.randn(4, 2).to_global(placement=P, sbp=flow.sbp.broadcast)
    with pytest.raises(ValueError, match="Pipeline.train_step: the input has 4 rows on rank 0, "
                                         "not divisible into 3 micro-batches"):
        pipe.train_step(x, x)
    with pytest.raises(ValueError, match="Pipeline.train_step: the target must be a global tensor "
                                         "on .*, got a local tensor"):
        flow.nn.parallel.Pipeline(st, [P, P], nn.MSELoss(), 2).train_step(x, flow.randn(4, 2))


def test_one_process_pipeline_equals_the_sequential_model():
    # Both stages on rank 0: the schedule runs them one after the other, same gradients.
    P = flow.placement("cpu", ranks=[0])
    flow.manual_seed(1)
    a = [nn.Linear(3, 5), nn.Linear(5, 2)]
    flow.manual_seed(1)
    ref = nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 2))
    pipe = flow.nn.parallel.Pipeline(a, [P, P], nn.MSELoss(), 2)
    x, y = flow.randn(6, 3), flow.randn(6, 2)
    loss = pipe.train_step(x.to_global(placement=P, sbp=flow.sbp.broadcast),
                           y.to_global(placement=P, sbp=flow.sbp.broadcast))
    ref_loss = nn.MSELoss()(ref(x), y)
    ref_loss.backward()
    assert abs(loss.to_local().item() - ref_loss.item()) < 1e-6
    for p, q in zip(pipe.parameters(), ref.parameters()):
        assert (p.grad.to_local() - q.grad).abs().max().item() < 1e-6
    out = pipe(x.to_global(placement=P, sbp=flow.sbp.broadcast))
    assert (out.to_local() - ref(x)).abs().max().item() < 1e-6
