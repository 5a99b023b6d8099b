"""A fuzzer of oneflow's public surface: flow.*, nn.functional.*, Tensor methods, nn modules and
the file loaders, called with random and hostile arguments in worker subprocesses, so that a
crash or a hang is caught and named instead of killing the run.

    tools/python tools/fuzz/fuzz.py --quick            # the corpus + 100000 calls (~40 s idle)
    tools/python tools/fuzz/fuzz.py --calls 150000 --seed 11

Every run first replays tools/fuzz/corpus.txt (past crashers, one expression a line), then
makes --calls random calls from --seed: call i is the same expression in every run, so a
report line reproduces alone with `tools/python -c "<its expression>"` (after the names the
corpus header lists). Verdicts: ok (a value, and every tensor in it has non-negative sizes whose
product is its numel), refused (an exception with a one-line message), unclear (a message of
several lines, empty, a binding's signature dump, or an AttributeError/ZeroDivisionError from
inside the package), bad (a tensor whose size disagrees with its shape), crash (the worker died
of a signal) and hang (no answer within --timeout seconds). The exit status is 1 when any call
crashed, hung or was bad.
"""

import argparse
import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus.txt")

PRELUDE = (
    "import numpy as np\n"
    "import oneflow as flow\n"
    "import oneflow.nn as nn\n"
    "import oneflow.nn.functional as F\n"
    "x = flow.randn(2, 3)\n"
    "t = flow.tensor([1, 2])\n"
)

# Arguments, as expressions so that every call prints as code that reproduces it.
TENSORS = [
    "flow.randn(2, 3)", "flow.randn(())", "flow.zeros(2, 0)", "flow.zeros(0)", "flow.randn(4)",
    "flow.randn(1, 1, 4, 4)", "flow.randn(2, 3, 5)", "flow.tensor([1, 2, 3])",
    "flow.tensor([True, False])", "flow.randn(2, 3).double()", "flow.tensor(2)",
    "flow.randn(3, 1).expand(3, 4)", "flow.randn(4, 3).t()", "flow.tensor([[1, 0], [2, 1]])",
]
SCALARS = [
    "0", "1", "2", "-1", "3", "-2", "7", "2**31", "2**62", "2**63 - 1", "2**63", "-2**63", "2**64",
    "0.5", "-0.0", "float('nan')", "float('inf')", "-float('inf')", "1e308", "True", "False",
    "None", "'abc'", "''", "()", "(2, 3)", "(-1,)", "(2**62, 4)", "[1, 2]", "[[1, 2], [3]]",
    "[flow.randn(3), flow.randn(7)]", "(0, -1)", "[]", "flow.float32", "flow.int64", "flow.bool",
    "'cpu'", "b'xyz'", "object()", "slice(None)", "{}",
]
KWARGS = ["dim", "keepdim", "dtype", "out", "p", "size", "kernel_size", "stride", "padding",
          "groups", "num_classes", "k", "eps", "alpha", "weight", "bias", "reduction",
          "correction", "unbiased", "n", "device"]

# Names never called: they write files, start jobs, wait for peers or change the process.
SKIP_WORDS = ("save", "load", "launch", "distributed", "env", "exit", "barrier", "sleep",
              "graph", "set_default", "profiler", "set_printoptions", "manual_seed",
              "set_num_threads", "seed", "cuda", "set_grad", "enable_grad", "no_grad",
              "set_autocast", "register", "hook", "backward", "global", "comm", "wait", "recv",
              "send", "boxing", "placement", "to_local", "sbp", "unittest", "mock_torch",
              "utils", "autocast", "data", "Tensor_", "__")


def _public(obj, prefix):
    names = []
    for name in sorted(dir(obj)):
        if name.startswith("_") or any(w in name for w in SKIP_WORDS):
            continue
        try:
            value = getattr(obj, name)
        except Exception:
            continue
        if callable(value):
            names.append((f"{prefix}.{name}", value))
    return names


def targets():
    """(expression, kind) of every callable the fuzzer calls, in a fixed order."""
    import oneflow as flow
    import oneflow.nn as nn
    import oneflow.nn.functional as F

    out = []
    for expr, value in _public(flow, "flow"):
        if isinstance(value, type) and not issubclass(value, flow.Tensor) \
                and not expr.endswith("Tensor"):
            continue  # classes of flow.* (dtypes, devices, Size): no ops; FloatTensor & co are
        out.append((expr, "function"))
    out.append(("flow.comm.all_to_all", "function"))
    out += [(e, "function") for e, v in _public(F, "F") if not isinstance(v, type)]
    out += [(e.split(".", 1)[1], "method") for e, _ in _public(flow.Tensor, "Tensor")]
    for expr, value in _public(nn, "nn"):
        if isinstance(value, type) and issubclass(value, nn.Module) and value is not nn.Module \
                and not expr.endswith(("Graph", "DataParallel", "ModuleList", "ModuleDict",
                                       "Sequential", "ParameterList", "ParameterDict")):
            out.append((expr, "module"))
    out += [(f"LOADER {i}", "loader") for i in range(len(LOADERS))]
    return out


def make_call(i, seed, all_targets):
    """The expression of random call i (the same in every run with this seed)."""
    rng = random.Random(seed * 1000003 + i)
    expr, kind = all_targets[i % len(all_targets)]
    if kind == "loader":
        return f"{expr} {rng.randrange(1 << 30)}"

    def arg():
        return rng.choice(TENSORS) if rng.random() < 0.45 else rng.choice(SCALARS)

    args = [arg() for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 4)))]
    if rng.random() < 0.25:
        args.append(f"{rng.choice(KWARGS)}={arg()}")
    if kind == "method":
        return f"({rng.choice(TENSORS)}).{expr}({', '.join(args)})"
    if kind == "module":
        call = f"{expr}({', '.join(args)})"
        if rng.random() < 0.6:
            call += f"({rng.choice(TENSORS)})"
        return call
    if kind == "function" and args and rng.random() < 0.5:
        args[0] = rng.choice(TENSORS)  # most functions take a tensor first
        for k in range(1, len(args)):  # and then often a dim or a size
            if "=" not in args[k] and rng.random() < 0.3:
                args[k] = rng.choice(["0", "1", "-1", "2", "(0, 1)", "[1]"])
    return f"{expr}({', '.join(args)})"


# ---- the file loaders: mutations of good files and crafted bad ones ---------------------------

def _good_flow_file():
    import io

    import oneflow as flow

    buf = io.BytesIO()
    flow.save({"w": flow.arange(6, dtype=flow.float32).reshape(2, 3), "n": 3}, buf)
    return buf.getvalue()


def _good_safetensors():
    import oneflow as flow
    from oneflow.utils import safetensors

    return safetensors.save({"a": flow.ones(2, 2), "b": flow.arange(3)})


def _record_pickle(shape, nbytes):
    """A flow.save file whose one tensor record claims `shape` and holds nbytes bytes."""
    import pickle

    class P(pickle.Pickler):
        def persistent_id(self, obj):
            if obj == "T":
                return ("oneflow.Tensor", 0, ("float32", shape, b"\0" * nbytes, False, False, "cpu"))
            return None

    import io

    buf = io.BytesIO()
    P(buf, protocol=4).dump({"__oneflow_save_format__": 1, "object": "T"})
    return buf.getvalue()


def _mutate(data, rng):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.random()
        if op < 0.4 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif op < 0.6:
            data = data[:rng.randrange(len(data) + 1)]
        elif op < 0.8 and data:
            at = rng.randrange(len(data))
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            at = rng.randrange(len(data) + 1)
            data[at:at] = rng.choice([b"\xff" * 8, b"\x00" * 8, b"(" * 64, b"[" * 4096,
                                      (2**62).to_bytes(8, "little")])
    return bytes(data)


LOADERS = [
    ("mutated flow.save file", lambda rng: _mutate(_good_flow_file(), rng)),
    ("mutated safetensors file", lambda rng: _mutate(_good_safetensors(), rng)),
    ("record of negative shape", lambda rng: _record_pickle((-2, -3), 24)),
    ("record of 2**64 elements", lambda rng: _record_pickle((2**32, 2**32), 0)),
    ("record of a random shape", lambda rng: _record_pickle(
        tuple(rng.choice([0, 1, 3, -1, 2**31, 2**62]) for _ in range(rng.randint(0, 3))),
        rng.choice([0, 4, 12, 24]))),
    ("pickle calling bytearray(4e9)",
     lambda rng: b"\x80\x04c__builtin__\nbytearray\n\x8a\x05\x00\x28\x6b\xee\x00\x85R."),
    ("pickle calling set(range(10**12))",
     lambda rng: b"\x80\x04cbuiltins\nset\ncbuiltins\nrange\nJ\x00\x00\x00\x00\x8a\x06\x00"
                 b"\x10\xa5\xd4\xe8\x00\x86R\x85R."),
    ("pickle calling os.system", lambda rng: b"cos\nsystem\n(S'echo pwned'\ntR."),
    ("safetensors of nested header", lambda rng: (lambda h: len(h).to_bytes(8, "little") + h)(
        b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}")),
    ("random bytes", lambda rng: bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))),
]


def run_loader(index, seed):
    import io

    import oneflow as flow
    from oneflow.utils import safetensors

    rng = random.Random(seed)
    data = LOADERS[index][1](rng)
    result = []
    for read in (lambda: flow.load(io.BytesIO(data)), lambda: safetensors.load(data)):
        try:
            result.append(read())
        except Exception as ex:  # each reader refuses on its own; one line each
            result.append(ex)
    errors = [r for r in result if isinstance(r, Exception)]
    if len(errors) == len(result):
        raise errors[0]
    return [r for r in result if not isinstance(r, Exception)]


# ---- the worker: runs expressions from stdin, answers one JSON line each -----------------------

def _check_value(value, depth=0):
    """None when every tensor in value has a size that agrees with its shape, else why not."""
    import oneflow as flow

    if isinstance(value, flow.Tensor):
        shape = tuple(value.shape)
        numel = 1
        for d in shape:
            if d < 0:
                return f"tensor of shape {shape} has a negative size"
            numel *= d
        if numel != value.numel():
            return f"tensor of shape {shape} has numel {value.numel()}, not {numel}"
        return None
    if depth < 3 and isinstance(value, (tuple, list)):
        for v in value[:64]:
            why = _check_value(v, depth + 1)
            if why:
                return why
    if depth < 3 and isinstance(value, dict):
        for v in list(value.values())[:64]:
            why = _check_value(v, depth + 1)
            if why:
                return why
    return None


def _unclear(ex):
    msg = str(ex)
    if not msg.strip():
        return "empty message"
    if "\n" in msg.strip():
        return "several lines"
    if "incompatible function arguments" in msg or "Unable to cast" in msg:
        return "binding dump"
    if isinstance(ex, (AttributeError, ZeroDivisionError, RecursionError, UnboundLocalError,
                       NameError, KeyError, AssertionError)):
        return type(ex).__name__
    if len(msg) > 400:
        return "longer than 400 characters"
    return None


def worker(seed):
    import warnings

    warnings.simplefilter("ignore")
    scope = {}
    exec(PRELUDE, scope)
    with open(os.devnull, "w") as devnull:
        for line in sys.stdin:
            expr = line.rstrip("\n")
            # Calls print (a module's repr, a warning): keep them off the answer channel.
            real_stdout, sys.stdout = sys.stdout, devnull
            try:
                if expr.startswith("LOADER "):
                    _, index, sub = expr.split()
                    value = run_loader(int(index), int(sub))
                else:
                    value = eval(expr, dict(scope))
                why = _check_value(value)
                answer = {"verdict": "bad", "detail": why} if why else {"verdict": "ok"}
            except BaseException as ex:  # noqa: B902 - SystemExit from a call is a finding too
                unclear = _unclear(ex)
                first = str(ex).strip().splitlines()[0][:300] if str(ex).strip() else ""
                answer = {"verdict": "unclear" if unclear else "refused",
                          "detail": f"{type(ex).__name__}: {first}" + (
                              f"  [{unclear}]" if unclear else "")}
            finally:
                sys.stdout = real_stdout
            print(json.dumps(answer), flush=True)


# ---- the parent: feeds workers, restarts them after a crash or a hang -------------------------

class Worker:
    def __init__(self, seed, workdir):
        path = os.pathsep.join(os.path.abspath(p) for p in
                               os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
        env = dict(os.environ, ONEFLOW_MAX_ALLOC_BYTES=str(1 << 30), OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1", PYTHONPATH=path)
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", str(seed)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            text=True, cwd=workdir, env=env)

    def ask(self, expr, timeout):
        try:
            self.proc.stdin.write(expr + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.kill()
            return {"verdict": "hang", "detail": f"no answer in {timeout:.0f} s"}
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.stderr.seek(0)
            last = (self.stderr.read().strip().splitlines() or [""])[-1][:200]
            return {"verdict": "crash", "detail": f"worker died, exit status {code}: {last}"}
        return json.loads(line)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def corpus():
    with open(CORPUS) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--calls", type=int, default=300000)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds one call may take")
    ap.add_argument("--quick", action="store_true",
                    help="the corpus and 100000 calls (at most 300 s of them)")
    ap.add_argument("--budget", type=float, default=0, help="stop making calls after this many "
                    "seconds (0: no limit)")
    ap.add_argument("--show", type=int, default=20, help="unclear messages to list")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.worker is not None:
        return worker(opts.worker)
    if opts.quick:  # what tests/python/test_fuzz.py runs: bounded even on a loaded machine
        opts.calls = 100000
        opts.budget = opts.budget or 300

    all_targets = targets()
    exprs = [("corpus", e) for e in corpus()]
    exprs += [("random", make_call(i, opts.seed, all_targets)) for i in range(opts.calls)]
    counts, findings, unclear = {}, [], []
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="oneflow_fuzz_") as workdir:
        w = None
        for n, (origin, expr) in enumerate(exprs):
            if opts.budget and origin == "random" and time.time() - start > opts.budget:
                print(f"fuzz: time budget of {opts.budget:.0f} s spent after {n} calls")
                break
            if w is None or w.proc.poll() is not None:
                w = Worker(opts.seed, workdir)
            answer = w.ask(expr, opts.timeout)
            verdict = answer["verdict"]
            counts[verdict] = counts.get(verdict, 0) + 1
            if verdict in ("crash", "hang", "bad"):
                findings.append((verdict, origin, expr, answer.get("detail", "")))
                w = None
            elif verdict == "unclear":
                unclear.append((expr, answer["detail"]))
        if w is not None:
            w.kill()
    seconds = time.time() - start
    print(f"fuzz: {sum(counts.values())} calls over {len(all_targets)} callables in "
          f"{seconds:.0f} s (seed {opts.seed}): " +
          ", ".join(f"{counts.get(k, 0)} {k}" for k in
                    ("ok", "refused", "unclear", "bad", "crash", "hang")))
    for expr, detail in unclear[:opts.show]:
        print(f"  unclear: {expr}  ->  {detail}")
    for verdict, origin, expr, detail in findings:
        print(f"  {verdict.upper()} ({origin}): {expr}  ->  {detail}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
