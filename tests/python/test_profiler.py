"""oneflow.profiler: the per-op table (self/total times that add up to the wall time), the
Chrome trace of one rank and the merged timeline of two (a profiled 2-rank GPT step; a rank
that reaches an all-reduce late), schedules, DataLoader waits, nn.Graph replays, refusals."""

import inspect
import json
import os
import re
import subprocess
import sys
import time

import pytest

import oneflow as flow
import oneflow.nn as nn
from oneflow import profiler
from oneflow.profiler import ProfilerActivity, profile, record_function

from test_comm import ROOT, free_port, launch

PYTHONPATH_ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "oneflow", "python"))


def mlp_step(model, opt, x):
    loss = model(x).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()


def self_cpu_total_us(table):
    m = re.search(r"Self CPU time total: ([\d.]+)(us|ms|s)\n", table)
    assert m, table
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def ancestors(e):
    while e.parent is not None:
        e = e.parent
        yield e


def test_table_adds_up_to_wall_time_and_backward_nests_under_the_step():
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    x = flow.randn(64, 64)
    mlp_step(model, opt, x)  # first-call costs out of the way
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 profile_memory=True) as prof:
        t0 = time.perf_counter()
        with record_function("step"):
            for _ in range(20):  # long enough that entering the range is a small part
                mlp_step(model, opt, x)
        wall_us = (time.perf_counter() - t0) * 1e6
    events = prof.events()
    step = [e for e in events if e.name == "step"]
    assert len(step) == 1 and step[0].kind == "user"
    ops = [e for e in events if e.kind == "op"]
    assert sum(e.name == "sgd_update" for e in ops) == 20 * 4  # 4 parameters, 20 steps
    names = {e.name for e in ops}
    assert {"linear", "relu", "sum"} <= names, names
    # Every op of the step ran inside it; the backward nodes under the engine's range, under it.
    assert all(step[0] in ancestors(e) for e in events if e is not step[0]), events
    nodes = [e for e in events if e.kind == "backward" and e.name.endswith("Backward0")]
    assert {"LinearBackward0", "ReluBackward0"} <= {e.name for e in nodes}, nodes
    assert all(e.parent.kind == "backward" and e.parent.name == "backward" for e in nodes)
    table = prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total")
    for column in ("Self CPU %", "Self CPU", "CPU total", "CPU time avg", "CPU Mem",
                   "Self CPU Mem", "# of Calls", "Input Shapes"):
        assert column in table
    assert abs(self_cpu_total_us(table) - wall_us) <= 0.1 * wall_us, (table, wall_us)
    # The step's total time is its own row; memory: the forward's activations were allocated.
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["step"].cpu_time_total == pytest.approx(step[0].cpu_time_total)
    assert avg["relu"].cpu_memory_usage >= 64 * 256 * 4


def test_group_by_input_shape_and_sort():
    a, b = flow.randn(2, 3), flow.randn(3, 4)
    c = flow.randn(5, 6)
    with profile(record_shapes=True) as prof:
        flow.matmul(a, b)
        flow.matmul(c, flow.randn(6, 2))
        flow.matmul(a, b)
    rows = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == "matmul"]
    assert sorted((r.input_shapes, r.count) for r in rows) == [
        ("[(2, 3), (3, 4)]", 2), ("[(5, 6), (6, 2)]", 1)], rows
    table = prof.key_averages().table(sort_by="count", row_limit=1)
    assert table.splitlines()[3].startswith("matmul"), table
    with pytest.raises(ValueError, match="table: cannot sort by 'bogus'; expected one of "
                       "cpu_time_total, self_cpu_time_total"):
        prof.key_averages().table(sort_by="bogus")


def test_chrome_trace_of_one_rank(tmp_path):
    x = flow.randn(8, 8, requires_grad=True)
    with profile() as prof:
        with record_function("outer"):
            (x * x).sum().backward()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    assert trace["distributedInfo"]["rank"] == 0
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == {0}
    outer = next(e for e in spans if e["name"] == "outer")
    for e in spans:
        assert outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + 1e-3
    assert {"mul", "sum", "MulBackward0", "SumBackward0"} <= {e["name"] for e in spans}
    names = [e for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert names[0]["args"]["name"] == "rank 0"


def test_with_stack_names_the_call_sites_and_groups_by_them(tmp_path):
    a = flow.randn(4, 4)
    linear = nn.Linear(4, 4)
    here = os.path.abspath(__file__)
    with profile(with_stack=True) as prof:
        for _ in range(3):
            line_loop = inspect.currentframe().f_lineno + 1
            flow.relu(a)
        line_once = inspect.currentframe().f_lineno + 1
        flow.relu(a)
        line_module = inspect.currentframe().f_lineno + 1
        linear(a)  # its op runs inside oneflow's nn code: those frames are left out
    test = "test_with_stack_names_the_call_sites_and_groups_by_them"
    relus = [e for e in prof.events() if e.name == "relu"]
    assert sorted(e.stack[0] for e in relus) == sorted(
        [f"{here}({line_loop}): {test}"] * 3 + [f"{here}({line_once}): {test}"])
    (op,) = [e for e in prof.events() if e.name == "linear"]
    assert op.stack[0] == f"{here}({line_module}): {test}"
    assert all("oneflow/python/oneflow" not in frame for e in prof.events() for frame in e.stack)
    # One row per call site with group_by_stack_n, its frames in Source Location.
    rows = [r for r in prof.key_averages(group_by_stack_n=1) if r.key == "relu"]
    assert sorted((r.count, r.stack[0]) for r in rows) == sorted(
        [(3, f"{here}({line_loop}): {test}"), (1, f"{here}({line_once}): {test}")])
    assert [r.count for r in prof.key_averages() if r.key == "relu"] == [4]
    table = prof.key_averages(group_by_stack_n=2).table()
    assert "Source Location" in table and f"{here}({line_once}): {test}" in table
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    spans = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "relu"]
    assert sorted(e["args"]["Call stack"][0] for e in spans) == sorted(e.stack[0] for e in relus)


def test_schedule_records_the_active_steps_and_hands_them_over(tmp_path):
    ready = []

    def on_ready(prof):
        ready.append(sorted(e.name for e in prof.events() if e.name.startswith("ProfilerStep")))
        profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")(prof)

    x = flow.randn(4, 4)
    with profile(schedule=profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=on_ready) as prof:
        for _ in range(6):
            flow.relu(x)
            prof.step()
    assert ready == [["ProfilerStep#2", "ProfilerStep#3"]]
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].startswith("w.") and files[0].endswith(".pt.trace.json")
    relus = [e for e in json.load(open(tmp_path / files[0]))["traceEvents"] if e.get("name") == "relu"]
    assert len(relus) == 2


def test_nothing_recorded_when_off_and_refusals_are_one_line():
    x = flow.randn(3)
    flow.relu(x)  # not recorded: before the profile
    with profile() as prof:
        pass
    assert not [e for e in prof.events() if e.kind == "op"]
    with pytest.raises(ValueError, match=r"profile.key_averages: group_by_stack_n needs the "
                       r"Python stacks of profile\(with_stack=True\); this profile recorded none"):
        prof.key_averages(group_by_stack_n=1)
    with pytest.raises(ValueError, match="profile: with_flops=True is not supported"):
        profile(with_flops=True)
    if flow._oneflow_internal.cuda_unavailable():
        with pytest.raises(ValueError, match=r"profile: ProfilerActivity.CUDA needs a CUDA device"):
            profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    with pytest.raises(ValueError, match="schedule: active must be an integer >= 1, got 0"):
        profiler.schedule(wait=0, warmup=0, active=0)
    with pytest.raises(RuntimeError, match="profile.key_averages: no results yet"):
        profile().key_averages()
    with profile():
        with pytest.raises(RuntimeError, match="profiler: recording is already on"):
            with profile():
                pass
    with pytest.raises(ValueError, match="record_function: args is not supported"):
        record_function("x", args="y")


def test_dataloader_waits_are_recorded():
    class Slow(flow.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            time.sleep(0.005)
            return flow.tensor([float(i)])

    loader = flow.utils.data.DataLoader(Slow(), batch_size=2)
    with profile() as prof:
        for batch in loader:
            flow.relu(batch)
    waits = [e for e in prof.events() if e.name == "DataLoader wait"]
    assert len(waits) == 4  # three batches and the end
    assert all(e.cpu_time_total >= 2 * 5000 for e in waits[:3]), waits


def test_graph_replay_is_recorded_step_by_step():
    lin = nn.Linear(4, 3)

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = lin

        def build(self, x):
            return flow.relu(self.lin(x))

    g = G()
    x = flow.randn(2, 4)
    g(x)  # compiles
    with profile() as prof:
        g(x)
    graph = [e for e in prof.events() if e.kind == "graph"]
    replays = [e for e in graph if e.parent is None or e.parent.kind != "graph"]
    assert len(replays) == 1, graph
    steps = replays[0].children
    assert steps and all(s.kind == "graph" for s in steps), steps
    assert "relu" in {s.name for s in steps}, steps


def test_two_rank_gpt_step_merged_timeline(tmp_path):
    folder = tmp_path / "traces"
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(ROOT, "examples", "gpt.py"), "--parallel", "dp", "--steps", 2,
               "--n_layer", 1, "--n_embd", 32, "--n_head", 2, "--batch_size", 4,
               "--block_size", 16, "--eval_interval", 0, "--profile", folder, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(os.listdir(folder)) == 2, os.listdir(folder)
    m = subprocess.run([sys.executable, "-m", "oneflow.profiler.merge", str(folder)],
                       capture_output=True, text=True, timeout=120, env=PYTHONPATH_ENV)
    assert m.returncode == 0, m.stderr
    assert "merge: 2 traces of ranks [0, 1] ->" in m.stdout
    trace = json.loads((folder / "merged.pt.trace.json").read_text())
    rows = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_name"}
    assert rows == {0: "rank 0", 1: "rank 1"}
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    ops_by_rank = {}
    for rank in (0, 1):
        mine = [e for e in spans if e["pid"] == rank]
        step = [e for e in mine if e["name"] == "ProfilerStep#1"]
        assert len(step) == 1, [e["name"] for e in mine if e["cat"] == "user"]
        lo, hi = step[0]["ts"], step[0]["ts"] + step[0]["dur"]
        main = [e for e in mine if e["tid"] == step[0]["tid"] and e is not step[0]]
        # Every op of the step (forward, backward, optimizer) on the main thread is inside it.
        assert all(lo <= e["ts"] and e["ts"] + e["dur"] <= hi + 1e-3 for e in main)
        ops = sorted(e["name"] for e in main if e["cat"] == "op")
        ops_by_rank[rank] = ops
        # The GPT block's forward (embeddings are index_select), its gradients, Adam's update.
        assert {"index_select", "linear", "matmul", "softmax", "layer_norm", "gelu",
                "softmax_grad", "layer_norm_grad", "gelu_grad", "adam_update"} <= set(ops), ops
        # Backward nodes, nested under the engine's range, itself inside the step.
        engine = [e for e in main if e["cat"] == "backward" and e["name"] == "backward"]
        assert len(engine) == 1
        b_lo, b_hi = engine[0]["ts"], engine[0]["ts"] + engine[0]["dur"]
        nodes = [e for e in main if e["cat"] == "backward" and e["name"].endswith("Backward0")]
        assert len(nodes) > 10 and {"MatmulBackward0", "SoftmaxBackward0"} <= {e["name"] for e in nodes}
        assert all(b_lo <= e["ts"] and e["ts"] + e["dur"] <= b_hi + 1e-3 for e in nodes)
        assert all(e["args"]["parent"] == "backward" for e in nodes)
        # Data parallel: the gradients' partial-sum to broadcast boxing is an all-reduce over
        # both ranks, with its bytes.
        colls = [e for e in mine if e["cat"] == "collective"]
        assert colls and all(e["args"]["bytes"] > 0 for e in colls if e["name"] == "all_reduce")
        assert all(e["args"]["group"].startswith("cpu:[0,1] ") for e in colls), colls[:3]
        boxing = [e for e in mine if e["cat"] == "boxing"]
        assert any(e["name"].startswith("P->B: all_reduce") and e["args"]["bytes"] > 0
                   for e in boxing), [e["name"] for e in boxing][:5]
    assert ops_by_rank[0] == ops_by_rank[1]
    # Rank 0's table: the self times add up to the step's wall time.
    table_total = self_cpu_total_us(r.stdout)
    wall = re.search(r"profiled step wall time: ([\d.]+)ms", r.stdout)
    assert wall, r.stdout[-3000:]
    wall_us = float(wall.group(1)) * 1e3
    assert abs(table_total - wall_us) <= 0.1 * wall_us, (table_total, wall_us)


def test_merged_timeline_shows_the_late_rank(tmp_path):
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(ROOT, "tests", "python", "dist", "profile_late_rank.py"), tmp_path,
               timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for f in os.listdir(tmp_path):
        info = json.loads((tmp_path / f).read_text())["distributedInfo"]
        assert 0 < info["clock_rtt_ns"] < 1e8  # measured through the control plane
    m = subprocess.run([sys.executable, "-m", "oneflow.profiler.merge", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, env=PYTHONPATH_ENV)
    assert m.returncode == 0, m.stderr
    assert re.search(r"all_reduce #1: rank 1 arrived last, (\d+\.\d+) ms after the first", m.stdout)
    late_ms = float(re.search(r"all_reduce #1: rank 1 arrived last, (\d+\.\d+) ms", m.stdout).group(1))
    assert 250 <= late_ms <= 1000, m.stdout
    trace = json.loads((tmp_path / "merged.pt.trace.json").read_text())
    ar = {(e["pid"], i): e for pid in (0, 1) for i, e in enumerate(sorted(
        (e for e in trace["traceEvents"] if e.get("name") == "all_reduce" and e["pid"] == pid),
        key=lambda e: e["ts"]))}
    # Rank 0 waited in the second all-reduce for rank 1; both left it together.
    assert ar[(0, 1)]["dur"] >= 250e3 > ar[(1, 1)]["dur"]
    assert abs((ar[(0, 1)]["ts"] + ar[(0, 1)]["dur"]) - (ar[(1, 1)]["ts"] + ar[(1, 1)]["dur"])) < 50e3
