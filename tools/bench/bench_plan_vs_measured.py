"""The planner's cost model against this machine: for each layout of examples/gpt.py on CPU ranks
(none on 1, dp, tp, pp, zero on 2, dp_tp on a 2 x 2 mesh of 4), predicted against measured step
time, bytes moved per step per rank and peak memory per rank, side by side.

    tools/python tools/bench/bench_plan_vs_measured.py [--steps 6] [--layouts dp,tp,...]
        [--profile local_cpu] [--n_embd 256 --n_layer 2 --block_size 64 --batch_size 8]

Every layout trains through nn.Graph (gpt.py --graph --untied, OMP_NUM_THREADS=1 per rank; zero is the graph's ZeRO stage 2:
reduce-scatter then all-gather, as the planner's ZeRO prices it). Measured, on every rank:
  time    median wall time of --steps steps after 3 warm-up steps (the loss read back each
          step), the slowest rank's
  bytes   one more step under oneflow.profiler: the bytes of its boxing events (each step's
          bytes per rank from the boxing table, as the runtime records them) and of collectives
          called outside boxing (their tensor's bytes turned into ring bytes per rank, the
          same table), the busiest rank's
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


def _moved(events, world):
    """Bytes this rank moved: boxing steps' (the table's bytes per rank, as recorded) plus
    collectives outside any boxing step (ring bytes per rank from their tensor's bytes)."""
    from oneflow.distributed.plan.collectives import bytes_per_rank

    total = sum(e.bytes for e in events if e.kind == "boxing" and e.bytes > 0)
    for e in events:
        if e.kind != "collective" or e.bytes <= 0 or _in_boxing(e):
            continue
        kind = next((k for k in COLLECTIVE_KINDS if k in e.name), None)
        if kind is not None:
            total += bytes_per_rank(kind, e.bytes, _group_size(e.detail, world))
        elif "send" in e.name:
            total += e.bytes
    return total


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
    times = []
    for x, y in batches[3:3 + a.steps]:
        t0 = time.perf_counter()
        float(lay.whole(trainer.step(x, y)))
        times.append(time.perf_counter() - t0)
    peak = flow.cpu.max_memory_allocated()
    x, y = batches[-1]
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU]) as prof:
        float(lay.whole(trainer.step(x, y)))
    events = list(prof.events())
    moved = _moved(events, world)
    names = sorted({f"{e.kind}:{e.name}:{e.detail}:{'in' if _in_boxing(e) else 'out'}"
                    for e in events if e.bytes >= 0})
    out = {"rank": flow.env.get_rank(), "time": statistics.median(times), "peak": peak,
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
    return evaluate(model, Mesh(1, world), profile, Layout(**shape))


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
        m_bytes = max(r["bytes"] for r in ranks)
        m_peak = max(r["peak"] for r in ranks)
        p_bytes = sum(est.comm_bytes.values())
        rows.append((layout, est.step_time, m_time, p_bytes, m_bytes, est.memory, m_peak))
        print(f"{layout}: boxing/collective events {sorted(set(sum((r['events'] for r in ranks), [])))}",
              file=sys.stderr, flush=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"gpt n_layer {a.n_layer}, n_embd {a.n_embd}, n_head {a.n_head}, block {a.block_size}, "
          f"batch {a.batch_size}, fp32, nn.Graph; profile {profile.name!r}; load average "
          f"{' '.join(load)} on {os.cpu_count()} cores")
    print(f"| layout | ranks | time pred (ms) | time meas (ms) | off | bytes pred | bytes meas | "
          f"off | memory pred (MiB) | memory meas (MiB) | off |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for layout, pt, mt, pb, mb, pm, mm in rows:
        print(f"| {layout} | {LAYOUTS[layout]} | {pt * 1e3:.2f} | {mt * 1e3:.2f} | {_off(pt, mt)} | "
              f"{pb:.0f} | {mb:.0f} | {_off(pb, mb)} | {pm / 2**20:.2f} | {mm / 2**20:.2f} | "
              f"{_off(pm, mm)} |")
    pred_rank = [r[0] for r in sorted(rows, key=lambda r: r[1])]
    meas_rank = [r[0] for r in sorted(rows, key=lambda r: r[2])]
    print(f"ranking by step time: predicted {' < '.join(pred_rank)}; measured "
          f"{' < '.join(meas_rank)}: {'equal' if pred_rank == meas_rank else 'different'}")


if __name__ == "__main__":
    main()
