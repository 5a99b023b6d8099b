"""The planner's bytes per step against the bytes the runtime's boxing moves, for each layout of
examples/gpt.py on 2 CPU ranks (none, dp, tp, pp, zero). A benchmark, not a test.

    tools/python tools/bench/plan_vs_boxing.py [--layouts dp,tp] [gpt.py's model arguments]

Counted: every rank-0 boxing plan that ONEFLOW_DEBUG_BOXING=1 prints (boxing/execute.cc), each
step priced with the boxing table's bytes per rank (the planner's collectives.py, the same
table as sbp/boxing_steps.cc; a route step by the bytes it prints, over its destination
ranks, for the rank that printed it, the busiest such rank's), summed over a run of 3 steps less a run of 1 step, halved: one step's bytes, with the
set-up (placing the parameters) and the first step's extras taken out. Predicted: the planner's
communication per device per step for the same model (gpt(..., dropout=False), fp32, tied head
except under pp) and layout. Collectives the runtime makes outside boxing (none today for these
layouts) would be missed by the count.
"""

import argparse
import os
import re
import subprocess
import sys

from oneflow.distributed.plan import Layout, Mesh, evaluate, gpt, load_profile
from oneflow.distributed.plan.collectives import bytes_per_rank

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT = os.path.join(ROOT, "examples", "gpt.py")
HEADER = re.compile(r"\[boxing\] \(.*\) -> \(.*\) of \(([0-9, ]*)\):")
STEP = re.compile(r"^(\S+)->(\S+): (.+?) (?:over|to the ranks of) cpu:\[([0-9, ]+)\]"
                  r"(?: \((\d+) bytes\))?")
KINDS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
         "reduce_scatter": "reduce_scatter", "all_to_all": "all_to_all",
         "point-to-point pieces": "send_recv"}


def counted(lines):
    """Bytes per rank by collective kind, from the printed plans."""
    out, numel, sent = {}, None, {}
    for raw in lines:
        line = raw.split("] ", 1)[1] if raw.startswith("[rank ") else raw
        h = HEADER.search(line)
        if h:
            dims = [int(x) for x in h.group(1).replace(" ", "").split(",") if x]
            numel = 1
            for d in dims:
                numel *= d
            continue
        s = STEP.match(line)
        if not s or numel is None or s.group(3) not in KINDS:
            continue  # a local step, or not a plan line
        kind, n = KINDS[s.group(3)], len(s.group(4).split(","))
        if kind == "send_recv":  # a route: printed by its source's rank, which sends it
            rank = raw[len("[rank "):raw.index("]")] if raw.startswith("[rank ") else "0"
            sent[rank] = sent.get(rank, 0.0) + float(s.group(5)) / n
            continue
        out[kind] = out.get(kind, 0.0) + bytes_per_rank(kind, 4.0 * numel, n)
    if sent:  # per rank: the busiest sender (a pipeline's ends send one way each)
        out["send_recv"] = max(sent.values())
    return out


def run(layout, steps, model_args):
    args = ["--parallel", layout, "--steps", str(steps), "--eval_interval", "0"] + model_args
    if layout == "pp":
        args.append("--untied")
    if layout == "none":
        cmd = [sys.executable, GPT] + args
    else:
        cmd = [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node", "2", GPT] + args
    env = dict(os.environ, ONEFLOW_DEBUG_BOXING="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if done.returncode:
        raise SystemExit(f"plan_vs_boxing: gpt.py --parallel {layout} failed:\n"
                         + "\n".join(done.stderr.splitlines()[-10:]))
    return counted((done.stdout + done.stderr).splitlines())


def predicted(layout, a, vocab):
    model = gpt(a.n_layer, a.n_embd, a.n_head, vocab, a.block_size, a.batch_size, dtype="fp32",
                dropout=False, tied=layout != "pp")
    lo = {"none": Layout(), "dp": Layout(dp=2, micro_batch=a.batch_size // 2),
          "tp": Layout(tp=2, micro_batch=a.batch_size),
          "pp": Layout(pp=2, micro_batch=a.batch_size // a.micro_batches),
          "zero": Layout(dp=2, micro_batch=a.batch_size // 2, zero=1)}[layout]
    mesh = Mesh(1, 1 if layout == "none" else 2)
    est = evaluate(model, mesh, load_profile("a100_80gb"), lo)  # bytes do not depend on it
    out = {}
    for (_, kind), v in est.comm_bytes.items():
        out[kind] = out.get(kind, 0.0) + v
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layouts", default="none,dp,tp,pp,zero")
    ap.add_argument("--n_layer", type=int, default=2)
    ap.add_argument("--n_head", type=int, default=4)
    ap.add_argument("--n_embd", type=int, default=64)
    ap.add_argument("--block_size", type=int, default=32)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--micro_batches", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=120, help="gpt.py's vocabulary (the fortunes' "
                    "characters, rounded up to --vocab_multiple 8)")
    a = ap.parse_args()
    model_args = [f"--{k}={getattr(a, k)}" for k in ("n_layer", "n_head", "n_embd", "block_size",
                                                     "batch_size", "micro_batches")]
    print("| layout | kind | predicted bytes/step | counted bytes/step | error |")
    print("|---|---|---|---|---|")
    for layout in a.layouts.split(","):
        one, three = run(layout, 1, model_args), run(layout, 3, model_args)
        got = {k: (three.get(k, 0.0) - one.get(k, 0.0)) / 2 for k in set(one) | set(three)}
        want = predicted(layout, a, a.vocab)
        kinds = sorted(k for k in set(got) | set(want) if got.get(k) or want.get(k)) or ["(none)"]
        for k in kinds:
            p, c = want.get(k, 0.0), got.get(k, 0.0)
            err = f"{100 * (p - c) / c:+.1f}%" if c else ("0" if not p else "n/a")
            print(f"| {layout} | {k} | {p:.0f} | {c:.0f} | {err} |", flush=True)
        p, c = sum(want.values()), sum(got.values())
        if len(kinds) > 1:
            print(f"| {layout} | total | {p:.0f} | {c:.0f} | {100 * (p - c) / c:+.1f}% |", flush=True)


if __name__ == "__main__":
    main()
