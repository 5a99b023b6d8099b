"""GPU speed: oneflow's CUDA backend against PyTorch on the same GPU, each in its own process.

    tools/python tools/bench/bench_cuda.py [--quick] [--json OUT.json] [--only CASE,CASE]
        [--torch-python PYTHON]

The cases (tools/bench/cuda_cases.py, written once against the API both frameworks share; the
issue-40 table): copy (the bandwidth reference), relu, add, gelu, softmax, layer_norm, rms_norm,
embedding, cross_entropy (fwd+bwd), attention causal 8x12x1024x64 fp32 and bf16 (fwd+bwd),
batch_norm 64x256x56x56 (training, fwd+bwd), transpose / permute + contiguous, AdamW over GPT's
parameters, the launch path (`x + 1` on 4 elements), matmul fp32 / bf16 (4096^3), a ResNet-style
conv (fwd+bwd), ResNet-50 training (batch 64) and GPT 6x768 T1024 B8 AdamW training, both in
fp32 and under bf16 autocast. Inputs and weights come from numpy with fixed seeds; matmul TF32 off
and cuDNN TF32 on in both (PyTorch's defaults), cuDNN by heuristics (benchmark off, as ours).

How: two workers (ours under this interpreter, PyTorch under --torch-python, default
$BENCH_TORCH_PYTHON or python3: on the GPU machines our extension is built for another Python
than the machine's PyTorch). For each case both build it and run it once; both outputs of that
first call are compared (relative L2 error <= 2e-3, bf16 3e-2; a row that differs is marked);
each warms up (>= 0.2 s); then timed windows of the same N calls, bracketed by the framework's
synchronize, alternate between the two (drift hits both alike); the figure is the median.
Speed ratio = PyTorch's time / ours (> 1: we are faster). Target: >= 0.9 on every row.
Memory-bound rows also print GB/s and the fraction of that framework's own copy bandwidth.

Without a usable GPU for oneflow or for PyTorch it prints "bench_cuda: skipped: <reason>",
writes no rows (an empty list to --json) and exits 0, so run_all.sh runs it on CPU machines too.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import median, save_results  # noqa: E402
from cuda_cases import CASES  # noqa: E402

import numpy as np  # noqa: E402

TARGET_RATIO = 0.9


class Worker:
    def __init__(self, python, which):
        self.which = which
        env = dict(os.environ)
        if which == "torch":  # the machine's own interpreter: not our bundle's Python setup
            for var in ("PYTHONHOME", "PYTHONPATH", "LD_LIBRARY_PATH"):
                env.pop(var, None)
        self.proc = subprocess.Popen([python, os.path.join(HERE, "cuda_cases.py"), which],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        line = self.proc.stdout.readline()
        self.ready = json.loads(line) if line else {"error": "the worker exited at start"}

    def ask(self, **msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            return {"error": f"the {self.which} worker died (exit {self.proc.wait()})"}
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.ask(cmd="quit")
            except (BrokenPipeError, OSError):
                pass
        self.proc.wait()


def rel_err(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    if a.shape != b.shape:
        return float("inf")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def run_case(case, workers, repeats, window_s, tmp):
    """One row (dict) or an error string."""
    metas = {}
    for w in workers:
        r = w.ask(cmd="setup", case=case)
        if "error" in r:
            return f"{w.which}: {r['error']}"
        metas[w.which] = r["meta"]
    paths = {w.which: os.path.join(tmp, f"{case}.{w.which}.npy") for w in workers}
    for w in workers:
        r = w.ask(cmd="check", path=paths[w.which])
        if "error" in r:
            return f"{w.which}: check: {r['error']}"
    err = rel_err(np.load(paths["oneflow"]), np.load(paths["torch"]))
    per_call = {}
    for w in workers:
        r = w.ask(cmd="warm", seconds=window_s)
        if "error" in r:
            return f"{w.which}: {r['error']}"
        per_call[w.which] = r["per_call"]
    iters = max(1, round(window_s / max(per_call.values())))
    times = {w.which: [] for w in workers}
    for _ in range(repeats):
        for w in workers:
            r = w.ask(cmd="window", iters=iters)
            if "error" in r:
                return f"{w.which}: {r['error']}"
            times[w.which].append(r["seconds"] / iters)
    sec = {k: median(v) for k, v in times.items()}
    meta = metas["oneflow"]
    tol = 3e-2 if "bf16" in case else 2e-3
    row = {"metric": case, "ours_s": sec["oneflow"], "torch_s": sec["torch"], "rel_err": err,
           "differs": err > tol, "iters": iters}
    if "items" in meta:
        row.update(unit=meta["unit"], ours=meta["items"] / sec["oneflow"],
                   torch=meta["items"] / sec["torch"], higher_is_better=True)
    else:
        row.update(unit="us", ours=sec["oneflow"] * 1e6, torch=sec["torch"] * 1e6,
                   higher_is_better=False)
    for key in ("bytes", "flops"):
        if key in meta:
            row[key] = meta[key]
    # copy is the bandwidth reference the memory-bound rows are read against, not a target
    row["target"] = None if case == "copy" else {"op": ">=", "value": TARGET_RATIO, "on": "ratio"}
    return row


def speed(row):
    return row["torch_s"] / row["ours_s"]


def describe(row, copy_bw):
    text = (f"{row['metric']:18s} ours {row['ours']:10.1f}  torch {row['torch']:10.1f} "
            f"{row['unit']:8s} speed {speed(row):5.2f}x")
    if "bytes" in row:
        bw = {k: row["bytes"] / row[k + "_s"] / 1e9 for k in ("ours", "torch")}
        text += f"  GB/s ours {bw['ours']:6.0f} torch {bw['torch']:6.0f}"
        if copy_bw and row["metric"] != "copy":
            text += (f" ({bw['ours'] / copy_bw['ours']:.0%} / "
                     f"{bw['torch'] / copy_bw['torch']:.0%} of copy)")
    if "flops" in row:
        text += f"  TFLOP/s ours {row['flops'] / row['ours_s'] / 1e12:6.1f}"
    if row["differs"]:
        text += f"  DIFFERS (relative error {row['rel_err']:.1e})"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter windows")
    parser.add_argument("--json", help="write result rows here (for run_all.sh)")
    parser.add_argument("--only", help="comma-separated cases: " + ",".join(CASES))
    parser.add_argument("--torch-python", default=os.environ.get("BENCH_TORCH_PYTHON", "python3"))
    args = parser.parse_args()
    cases = args.only.split(",") if args.only else CASES
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        sys.exit(f"bench_cuda: unknown case(s) {unknown}; known: {', '.join(CASES)}")

    workers = [Worker(sys.executable, "oneflow"), Worker(args.torch_python, "torch")]
    try:
        reasons = [f"{w.which}: {w.ready['error']}" for w in workers if "error" in w.ready]
        if reasons:
            print(f"bench_cuda: skipped: {'; '.join(reasons)}")
            save_results(args.json, [])
            return
        repeats, window_s = (3, 0.1) if args.quick else (5, 0.2)
        print(f"{workers[1].ready.get('device')}: oneflow {workers[0].ready['version']} against "
              f"torch {workers[1].ready['version']}; {repeats} alternating windows of ~{window_s:g} "
              f"s each, medians; speed = torch time / ours", flush=True)
        rows, failed, copy_bw = [], [], None
        with tempfile.TemporaryDirectory() as tmp:
            for case in cases:
                row = run_case(case, workers, repeats, window_s, tmp)
                if isinstance(row, str):
                    failed.append(case)
                    print(f"{case:18s} FAILED: {row}", flush=True)
                    continue
                if case == "copy":
                    copy_bw = {k: row["bytes"] / row[k + "_s"] / 1e9 for k in ("ours", "torch")}
                rows.append(row)
                print(describe(row, copy_bw), flush=True)
        speeds = [speed(r) for r in rows if r["metric"] != "copy"]
        if speeds:
            below = [r["metric"] for r in rows if r["target"] and speed(r) < TARGET_RATIO]
            print(f"bench_cuda: {len(rows)} rows, speed min {min(speeds):.2f}x, geometric mean "
                  f"{float(np.exp(np.mean(np.log(speeds)))):.2f}x; below {TARGET_RATIO}: "
                  f"{', '.join(below) or 'none'}; failed: {', '.join(failed) or 'none'}")
        save_results(args.json, rows)
    finally:
        for w in workers:
            w.close()


if __name__ == "__main__":
    main()
