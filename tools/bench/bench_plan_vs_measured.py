"""The planner's cost model against this machine: for each layout of examples/gpt.py on CPU ranks
(none on 1, dp, tp, pp, zero on 2, dp_tp on a 2 x 2 mesh of 4), predicted against measured step
time, bytes moved per step per rank and peak memory per rank, side by side.

    tools/python tools/bench/bench_plan_vs_measured.py [--steps 6] [--layouts dp,tp,...]
        [--profile local_cpu] [--n_embd 256 --n_layer 2 --block_size 64 --batch_size 8]

Every layout trains through nn.Graph (gpt.py --graph --untied, OMP_NUM_THREADS=1 per rank; zero is the graph's ZeRO stage 2:
reduce-scatter then all-gather, as the planner's ZeRO prices it). Measured, on every rank:
  time    median wall time of --steps steps after 3 warm-up steps (the loss read back each
          step), the slowest rank's; and the same steps' CPU time (time.process_time: the work
          of the rank, without the time other processes held the cores, which on a shared
          machine is most of the wall time)
  bytes   one more step under oneflow.profiler: every collective the communicator recorded
          (with the bytes of its tensor), turned into the bytes a rank sends in a ring
          (all_reduce 2(n-1)/n, all_gather (n-1) x its shard, reduce_scatter and all_to_all
          (n-1)/n, send 1; the boxing table's), the busiest rank's; broadcasts (the loss read
          back) and receives are left out
  memory  flow.cpu.max_memory_allocated over the timed steps (reset after warm-up; the model,
          optimizer state, graph inputs and intermediates), the fullest rank's
Predicted: oneflow.distributed.plan's evaluate() of the same GPT (fp32, no dropout, untied) on
the same mesh and layout with a profile of this machine measured just before
(`python3 -m oneflow.distributed.plan --measure-profile`: the calibration; --profile local_cpu
takes the shipped one instead). The ranking compares step times.
Targets: bytes within 5%, memory within 15%, time within 25%, the same ranking. The machine is
shared: `uptime` is printed with the table, and the times are as loaded as it says.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYOUTS = {"none": 1, "dp": 2, "tp": 2, "pp": 2, "zero": 2, "dp_tp": 4}
COLLECTIVE_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--profile", default=None,
                    help="a profile name or file; default: measure this machine now "
                         "(python3 -m oneflow.distributed.plan --measure-profile), so the rates "
                         "are those of the load the layouts run under")
    ap.add_argument("--n_embd", type=int, default=256)
    ap.add_argument("--n_layer", type=int, default=2)
    ap.add_argument("--n_head", type=int, default=4)
    ap.add_argument("--block_size", type=int, default=64)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--micro_batches", type=int, default=4)
    ap.add_argument("--rank-run", dest="rank_run", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    return ap


def gpt_args(a, layout):
    sizes = ["--n_layer", str(a.n_layer), "--n_head", str(a.n_head), "--n_embd", str(a.n_embd),
             "--block_size", str(a.block_size), "--batch_size", str(a.batch_size),
             "--micro_batches", str(a.micro_batches), "--untied", "--vocab_multiple", "8"]
    extra = ["--zero_stage", "2"] if layout == "zero" else []
    return sizes + ["--parallel", layout, "--graph"] + extra


# ---------------------------------------------------------------- one rank


def _in_boxing(e):
    p = e.parent
    while p is not None:
        if p.kind == "boxing":
            return True
        p = p.parent
    return False


def _group_size(detail, world):
    """The ranks of a collective's group from its detail ("... ranks [0, 1] ..."), else world."""
    if "[" in detail and "]" in detail:
        inner = detail[detail.index("[") + 1:detail.index("]")]
        return len([t for t in inner.split(",") if t.strip()]) or world
    return world


# Ring bytes one rank sends, from the bytes of the tensor the communicator records (the input
# for gathers, scatters and all-to-all), over a group of n.
_RING = {"all_reduce": lambda b, n: 2.0 * (n - 1) / n * b,
         "all_gather": lambda b, n: (n - 1) * b,  # b: this rank's shard
         "reduce_scatter": lambda b, n: (n - 1) / n * b,
         "all_to_all": lambda b, n: (n - 1) / n * b,
         "send": lambda b, n: b}


def _moved(events, world):
    """Bytes this rank sent, as its communicator recorded them: every collective's tensor bytes
    (inside boxing steps or not) turned into ring bytes per rank. Broadcasts (the loss read back
    for printing) and receives (the peer's sends) are not counted. Returns (total, by kind)."""
    by_kind = {}
    for e in events:
        if e.kind != "collective" or e.bytes <= 0:
            continue
        name = e.name.replace("_v", "")
        if name not in _RING:
            continue
        by_kind[name] = by_kind.get(name, 0.0) + _RING[name](e.bytes, _group_size(e.detail,
                                                                                   world))
    return sum(by_kind.values()), by_kind


def rank_run(a):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import gpt
    import oneflow as flow
    import oneflow.profiler as profiler

    layout = a.rank_run
    world = flow.env.get_world_size()
    args = gpt.parser().parse_args(gpt_args(a, layout))
    text = gpt.CharData(gpt.read_fortunes())
    model, lay = gpt.build(args, text.vocab_size, world)
    trainer = gpt.Trainer(model, lay, lr=1e-3, graph=args.graph)
    if args.graph:
        trainer.use_graph(zero_stage=args.zero_stage)
    batches = [text.batch("train", a.batch_size, a.block_size, s) for s in range(a.steps + 4)]
    for x, y in batches[:3]:
        float(lay.whole(trainer.step(x, y)))
    flow.cpu.reset_peak_memory_stats()
    times, cpu = [], []
    for x, y in batches[3:3 + a.steps]:
        t0, c0 = time.perf_counter(), time.process_time()
        float(lay.whole(trainer.step(x, y)))
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    peak = flow.cpu.max_memory_allocated()
    x, y = batches[-1]
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU]) as prof:
        float(lay.whole(trainer.step(x, y)))
    events = list(prof.events())
    moved, by_kind = _moved(events, world)
    names = sorted({f"{e.kind}:{e.name}:{e.detail}:{'in' if _in_boxing(e) else 'out'}"
                    for e in events if e.bytes >= 0})
    by_name = {k: round(v) for k, v in by_kind.items()}
    out = {"rank": flow.env.get_rank(), "time": statistics.median(times),
           "cpu": statistics.median(cpu), "by_name": by_name, "peak": peak,
           "bytes": moved, "vocab": text.vocab_size, "events": names}
    with open(f"{a.out}.{flow.env.get_rank()}", "w") as f:
        json.dump(out, f)


# ---------------------------------------------------------------- the driver


def predicted(a, layout, vocab, profile):
    from oneflow.distributed.plan import Layout, Mesh, evaluate, gpt

    model = gpt(layers=a.n_layer, hidden=a.n_embd, heads=a.n_head, vocab=vocab,
                seq=a.block_size, batch=a.batch_size, dtype="fp32", dropout=False, tied=False)
    world = LAYOUTS[layout]
    shape = {"none": dict(), "dp": dict(dp=2), "tp": dict(tp=2), "zero": dict(dp=2, zero=2),
             "dp_tp": dict(tp=2, dp=2),
             "pp": dict(pp=2, micro_batch=a.batch_size // a.micro_batches)}[layout]
    if "micro_batch" not in shape:
        shape["micro_batch"] = a.batch_size // shape.get("dp", 1)
    return evaluate(model, Mesh(1, world), profile, Layout(**shape), transient_grads=True)


def measure(a, layout):
    import tempfile

    world = LAYOUTS[layout]
    with tempfile.TemporaryDirectory(prefix="plan-vs-measured-") as tmp:
        out = os.path.join(tmp, "rank")
        me = [os.path.abspath(__file__), "--rank-run", layout, "--out", out] + \
            [f"--{k}={getattr(a, k)}" for k in ("steps", "n_embd", "n_layer", "n_head",
                                                "block_size", "batch_size", "micro_batches")]
        if world == 1:
            cmd = [sys.executable] + me
        else:
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            cmd = [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node",
                   str(world), "--master_port", str(port)] + me
        env = dict(os.environ, OMP_NUM_THREADS="1")  # as the launcher sets it for each rank
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        if done.returncode != 0:
            raise SystemExit(f"bench_plan_vs_measured: {layout} failed:\n"
                             f"{(done.stdout + done.stderr)[-3000:]}")
        ranks = []
        for r in range(world):
            with open(f"{out}.{r}") as f:
                ranks.append(json.load(f))
    return ranks


def _off(pred, meas):
    return f"{100.0 * (pred - meas) / meas:+.0f}%" if meas else "n/a"


def main(argv=None):
    a = parser().parse_args(argv)
    if a.rank_run:
        return rank_run(a)
    from oneflow.distributed.plan import load_profile

    if a.profile is None:
        import tempfile

        from oneflow.distributed.plan import measure as calibrate

        with tempfile.TemporaryDirectory(prefix="plan-profile-") as tmp:
            path = os.path.join(tmp, "profile.json")
            calibrate.main(path, log=sys.stderr)
            profile = load_profile(path)
    else:
        profile = load_profile(a.profile)
    rows = []
    for layout in a.layouts.split(","):
        if layout not in LAYOUTS:
            raise SystemExit(f"bench_plan_vs_measured: unknown layout {layout!r}; known: "
                             f"{', '.join(LAYOUTS)}")
        ranks = measure(a, layout)
        est = predicted(a, layout, ranks[0]["vocab"], profile)
        m_time = max(r["time"] for r in ranks)
        m_cpu = max(r["cpu"] for r in ranks)
        m_bytes = max(r["bytes"] for r in ranks)
        m_peak = max(r["peak"] for r in ranks)
        p_bytes = sum(est.comm_bytes.values())
        rows.append((layout, est.step_time, m_time, m_cpu, p_bytes, m_bytes, est.memory, m_peak))
        busiest = max(ranks, key=lambda r: r["bytes"])
        print(f"{layout}: predicted bytes {dict((f'{g} {k}', v) for (g, k), v in est.comm_bytes.items() if v)}; "
              f"measured on rank {busiest['rank']}: {busiest['by_name']}", file=sys.stderr,
              flush=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"gpt n_layer {a.n_layer}, n_embd {a.n_embd}, n_head {a.n_head}, block {a.block_size}, "
          f"batch {a.batch_size}, fp32, nn.Graph; profile {profile.name!r}; load average "
          f"{' '.join(load)} on {os.cpu_count()} cores")
    print(f"| layout | ranks | time pred (ms) | CPU time meas (ms) | off | wall time meas (ms) | "
          f"off | bytes pred | bytes meas | off | memory pred (MiB) | memory meas (MiB) | off |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for layout, pt, mt, mc, pb, mb, pm, mm in rows:
        print(f"| {layout} | {LAYOUTS[layout]} | {pt * 1e3:.2f} | {mc * 1e3:.2f} | {_off(pt, mc)} | "
              f"{mt * 1e3:.2f} | {_off(pt, mt)} | {pb:.0f} | {mb:.0f} | {_off(pb, mb)} | "
              f"{pm / 2**20:.2f} | {mm / 2**20:.2f} | {_off(pm, mm)} |")
    pred_rank = [r[0] for r in sorted(rows, key=lambda r: r[1])]
    for what, col in (("CPU time", 3), ("wall time", 2)):
        meas_rank = [r[0] for r in sorted(rows, key=lambda r: r[col])]
        print(f"ranking by step time: predicted {' < '.join(pred_rank)}; measured ({what}) "
              f"{' < '.join(meas_rank)}: {'equal' if pred_rank == meas_rank else 'different'}")


if __name__ == "__main__":
    main()
