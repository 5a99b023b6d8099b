"""Helpers shared by the benchmarks in tools/bench/ (no framework imports here).

    from common import pin_single_thread, median, save_results
    tools/python tools/bench/common.py table RESULTS.json...   # the table run_all.sh prints
    tools/python tools/bench/common.py torch-version           # PyPI's PyTorch the rows run

PyTorch is PyPI's newest release in a virtual environment the benchmarks create once and reuse
($ONEFLOW_BENCH_VENV, default ~/.cache/oneflow_bench_venv: `python3 -m venv` + `pip install torch
numpy`; PyPI's Linux wheel brings NVIDIA's CUDA libraries, about 3 GB, a few minutes). Its side
runs in its own process under that venv's Python (torch_python()), ours under tools/python.

Each benchmark saves a list of result rows as JSON:
    {"metric", "unit", "ours", "torch", "higher_is_better", "target"[, "ours_label", "baseline"]}
"ours" is the figure measured, "torch" the one it is compared with; "ours_label" and
"baseline" say what they are (default "ours" and "PyTorch"; e.g. "ours, Gloo TCP" against
"PyTorch, gloo TCP", or a global op against "our local op"), and the table prints them as its
column headers, starting a new header wherever they change. "target" is
{"op": ">=" | "<=" | "<", "value": float, "on": "ratio" | "ours"} or None (a row that only
informs): a ratio target compares ours/baseline, an absolute one compares our own figure.
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pin_single_thread():
    """One thread for every BLAS/OpenMP pool. Call BEFORE importing oneflow or torch."""
    for var in THREAD_VARS:
        os.environ[var] = "1"


TOOLS_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(script, nproc, *args, env=None):
    """Runs `script --worker --out FILE *args` on nproc ranks under our launcher (with the
    variables in `env` added to the environment) and returns the JSON its rank 0 wrote to FILE."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [TOOLS_PYTHON, "-m", "oneflow.distributed.launch", "--nproc_per_node", str(nproc),
               "--master_port", str(free_port()), os.path.abspath(script), "--worker", *args,
               "--out", out]
        subprocess.run(cmd, check=True, env=dict(os.environ, **(env or {})))
        with open(out) as f:
            return json.load(f)


BENCH_VENV = os.environ.get("ONEFLOW_BENCH_VENV",
                            os.path.expanduser("~/.cache/oneflow_bench_venv"))


def torch_python():
    """The interpreter of the venv with PyPI's PyTorch, created (once) if missing; exits with one
    line where it cannot be made (PyPI unreachable, say)."""
    python = os.path.join(BENCH_VENV, "bin", "python")
    done = os.path.join(BENCH_VENV, ".oneflow_bench_complete")
    if not os.path.exists(done):
        print(f"creating {BENCH_VENV} with PyPI's torch and numpy (once; about 3 GB)", flush=True)
        for cmd in (["/usr/bin/python3", "-m", "venv", BENCH_VENV],
                    [python, "-m", "pip", "install", "-q", "--upgrade", "pip"],
                    [python, "-m", "pip", "install", "-q", "torch", "numpy"]):
            r = subprocess.run(cmd, env=torch_env())
            if r.returncode != 0:
                sys.exit(f"bench: cannot create the PyTorch venv: {' '.join(cmd)} exited "
                         f"{r.returncode}")
        open(done, "w").close()
    return python


def torch_env(**extra):
    """The environment for PyTorch's process: nothing of tools/python's (PYTHONPATH into the
    checkout, PYTHONHOME, LD_LIBRARY_PATH)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH")}
    env.update(extra)
    return env


REAL_ONEFLOW_VENV = os.environ.get("ONEFLOW_REAL_VENV",
                                   os.path.expanduser("~/.cache/oneflow_real_venv"))
# OneFlow 0.9.0 is PyPI's last release (wheels for CPython 3.7-3.10, built for CUDA 11.7): on a
# machine without its CUDA libraries it imports once pip's cuDNN 8 and cuBLAS 11 are on
# LD_LIBRARY_PATH, and it needs numpy 1.x.
REAL_ONEFLOW_PACKAGES = ["oneflow==0.9.0", "numpy<2", "nvidia-cudnn-cu11==8.*",
                         "nvidia-cublas-cu11==11.*"]


def real_oneflow_python():
    """(interpreter, environment) of the venv with PyPI's OneFlow 0.9.0 (pyenv's CPython 3.9),
    created once if missing."""
    python = os.path.join(REAL_ONEFLOW_VENV, "bin", "python")
    done = os.path.join(REAL_ONEFLOW_VENV, ".oneflow_bench_complete")
    if not os.path.exists(done):
        print(f"creating {REAL_ONEFLOW_VENV} with PyPI's {', '.join(REAL_ONEFLOW_PACKAGES)} "
              "(once; about 3 GB)", flush=True)
        for cmd in (["/root/.pyenv/versions/3.9.18/bin/python3", "-m", "venv", REAL_ONEFLOW_VENV],
                    [python, "-m", "pip", "install", "-q", *REAL_ONEFLOW_PACKAGES]):
            r = subprocess.run(cmd, env=torch_env())
            if r.returncode != 0:
                sys.exit(f"bench: cannot create the OneFlow 0.9 venv: {' '.join(cmd)} exited "
                         f"{r.returncode}")
        open(done, "w").close()
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         env=torch_env(), capture_output=True, text=True, check=True).stdout
    nvidia = os.path.join(out.strip(), "nvidia")
    libs = [os.path.join(nvidia, d, "lib") for d in sorted(os.listdir(nvidia))
            if os.path.isdir(os.path.join(nvidia, d, "lib"))]
    return python, torch_env(LD_LIBRARY_PATH=os.pathsep.join(libs))


def torch_version():
    out = subprocess.run([torch_python(), "-c", "import torch; print(torch.__version__)"],
                         env=torch_env(), capture_output=True, text=True, check=True).stdout
    return out.strip()


class Worker:
    """A benchmark process driven by one JSON line per request, answering one JSON line each:
    `python script --worker NAME` (ours under this interpreter, PyPI's torch under
    torch_python(), PyPI's OneFlow 0.9 ("oneflow-0.9") under real_oneflow_python()). Its first line says it is ready ({"version": ...}) or why not."""

    def __init__(self, script, which, *args, env=None):
        self.which = which
        if which == "torch":
            python, env = torch_python(), torch_env()
        elif which == "oneflow-0.9":  # PyPI's OneFlow, the real one
            python, env = real_oneflow_python()
        else:
            python, env = sys.executable, dict(os.environ, **(env or {}))
        self.proc = subprocess.Popen([python, script, "--worker", which, *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        line = self.proc.stdout.readline()
        self.ready = json.loads(line) if line else {"error": f"the {which} worker exited at start"}
        if "error" in self.ready:
            self.close()
            sys.exit(f"bench: {which}: {self.ready['error']}")

    def ask(self, **msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"bench: the {self.which} worker died (exit {self.proc.wait()}) on {msg}")
        reply = json.loads(line)
        if "error" in reply:
            sys.exit(f"bench: {self.which}: {msg.get('cmd')}: {reply['error']}")
        return reply

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
        self.proc.wait()


def serve(handlers, ready):
    """The worker's side of Worker: prints `ready`, then answers each request line with
    handlers[cmd](**request) (a dict) until stdin closes. Prints go to stderr meanwhile."""
    out = sys.stdout
    sys.stdout = sys.stderr
    out.write(json.dumps(ready) + "\n")
    out.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            reply = handlers[msg.pop("cmd")](**msg)
        except Exception as e:  # the parent prints it and stops
            reply = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def median(values):
    return statistics.median(values)


def save_results(path, rows):
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)


def ratio(row):
    """ours/torch, oriented so that > 1 always means we are better."""
    if row["higher_is_better"]:
        return row["ours"] / row["torch"]
    return row["torch"] / row["ours"]


def target_met(row):
    t = row["target"]
    if t is None:
        return None
    value = ratio(row) if t["on"] == "ratio" else row["ours"]
    return {">=": value >= t["value"], "<=": value <= t["value"], "<": value < t["value"]}[t["op"]]


def target_text(row):
    t = row["target"]
    if t is None:
        return "-"
    unit = "x" if t["on"] == "ratio" else " " + row["unit"]
    return f"{t['op']} {t['value']:g}{unit}"


def _fmt(value):
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def labels(row):
    return row.get("ours_label", "ours"), row.get("baseline", "PyTorch")


def print_table(rows):
    """One table; its "ours" and baseline columns are headed by what each group of rows
    compares (a header line wherever that changes)."""
    lines = []  # (cells, is_header)
    current = None
    for row in rows:
        if labels(row) != current:
            current = labels(row)
            lines.append((("metric",) + current + ("ratio", "target", ""), True))
        met = target_met(row)
        lines.append(((
            f"{row['metric']} ({row['unit']})",
            _fmt(row["ours"]),
            _fmt(row["torch"]),
            f"{ratio(row):.2f}x",
            target_text(row),
            "" if met is None else "ok" if met else "MISS",
        ), False))
    widths = [max(len(cells[i]) for cells, _ in lines) for i in range(6)]
    for i, (cells, header) in enumerate(lines):
        if header and i:
            print()
        print("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w)
                        for j, (cell, w) in enumerate(zip(cells, widths))).rstrip())
        if header:
            print("  ".join("-" * w for w in widths))
    print("ratio: the left figure against the right one, > 1 means the left is better "
          "(faster / less time).")


if __name__ == "__main__":
    if sys.argv[1:] == ["torch-version"]:
        print(torch_version())
        sys.exit(0)
    if len(sys.argv) < 3 or sys.argv[1] != "table":
        sys.exit("usage: common.py table RESULTS.json... | common.py torch-version")
    all_rows = []
    for path in sys.argv[2:]:
        with open(path) as f:
            all_rows.extend(json.load(f))
    print_table(all_rows)
