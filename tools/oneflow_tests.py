"""OneFlow's own global-tensor tests against this package, on CPU ranks (or unedited, on CUDA).

    tools/oneflow_tests.sh                       # every test in ../shared/oneflow_upstream/
    tools/oneflow_tests.sh test_global_cast      # files whose name contains a word
    tools/oneflow_tests.sh -k s2b --timeout 60   # tests whose Class.method contains a word
    tools/oneflow_tests.sh --cuda                # unedited, on CUDA: a GPU, or without one the
                                                 # stand-in device (ONEFLOW_FAKE_CUDA=1)

The suite is OneFlow's own files, unmodified, kept outside this tree: ../shared/oneflow_upstream
beside the checkout (CI has it too; ONEFLOW_UPSTREAM_TESTS names another folder; its README.md
gives the commit and the selection). This tree holds only the runner and its edit list. At run time each file's source goes through EDITS below (the only
changes: CUDA devices and placements become CPU ones) and each test runs alone, in a fresh job of
as many ranks as its decorator asks for (skip_unless_1n1d / 1n2d / 1n4d; a test with none runs on
DEFAULT_RANKS), through our launcher. A test that has not finished within --timeout seconds is
killed and reported as a hang. Output: one line per test (pass / fail / error / hang / skip, the
first line of the reason), then a summary line. Logs of every rank: --logdir (default a fresh
folder under /tmp, printed at the end).
"""

import argparse
import ast
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = os.path.abspath(os.environ.get("ONEFLOW_UPSTREAM_TESTS")
                        or os.path.join(ROOT, "..", "shared", "oneflow_upstream"))
SUPPORT = os.path.join(SUITE, "support")
DEFAULT_RANKS = 2

# The mechanical edits, in one place: (pattern, replacement) applied to each file's source.
# A comparison `== "cuda"` is left alone (it selects CUDA-only branches, e.g. a kernel missing
# on CUDA): rewriting it would make such a test skip its CPU cases.
EDITS = [
    (r'(?<!== )"cuda"', '"cpu"'),            # flow.placement("cuda", ...), device="cuda", ...
    (r"(?<!== )'cuda'", "'cpu'"),
    (r'"cuda:', '"cpu:'),                     # flow.device("cuda:%d" % i) -> "cpu:%d"
]

# Reasons a test cannot pass here by design, recognised from its error (not from its name).
NEEDS = [
    ("nn.Graph", re.compile(r"has no attribute 'Graph'|nn\.Graph: compile mode")),
    ("CUDA", re.compile(r"CUDA is not available|needs CUDA|cuda kernel")),
]

RESULT = "@@oneflow_test_result"


# --cuda: the files run as they are, on CUDA placements.
UNEDITED = os.environ.get("ONEFLOW_UPSTREAM_UNEDITED") == "1"


def edited_source(path):
    src = open(path).read()
    if UNEDITED:
        return src
    for pat, rep in EDITS:
        src = re.sub(pat, rep, src)
    return src


# ---------------------------------------------------------------- one test, inside each rank
def run_one(path, name):
    import unittest
    import types

    import oneflow as flow

    # OneFlow's test helpers (oneflow.test_utils) are upstream code the tests import: they live
    # with the suite (support/), not in our package, and are grafted onto its import path for the
    # tests only. oneflow.framework.args_tree and balanced_splitter are our package's own.
    flow.__path__.append(SUPPORT)
    # Upstream test files that others import as siblings (test_global_nms: from test_nms import
    # ...) and that are not global tests themselves.
    sys.path.insert(0, os.path.join(SUPPORT, "siblings"))
    rank = flow.env.get_rank()
    mod_name = os.path.splitext(os.path.basename(path))[0]
    module = types.ModuleType(mod_name)
    module.__file__ = path
    sys.modules[mod_name] = module
    outcome, reason = "error", ""
    try:
        exec(compile(edited_source(path), path, "exec"), module.__dict__)
        suite = unittest.defaultTestLoader.loadTestsFromName(name, module)
        result = unittest.TestResult()
        suite.run(result)
        if result.errors:
            outcome, reason = "error", result.errors[0][1]
        elif result.failures:
            outcome, reason = "fail", result.failures[0][1]
        elif result.skipped:
            outcome, reason = "skip", result.skipped[0][1]
        elif result.testsRun:
            outcome = "pass"
        else:
            reason = "no test ran"
    except BaseException:  # noqa: BLE001 - an import error of the file is the test's error
        reason = traceback.format_exc()
    if outcome in ("error", "fail"):
        sys.stderr.write(reason)
    last = [l for l in reason.strip().splitlines() if l.strip()]
    line = last[-1].strip() if last else ""
    print(f"{RESULT} rank={rank} outcome={outcome} reason={line}", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    if outcome in ("pass", "skip"):
        return 0
    # As an uncaught exception does (oneflow.env's excepthook): tell the other ranks, which may
    # be waiting for this one in the test's next collective, instead of meeting them at exit.
    flow._oneflow_internal.env_abort(f"{name}: {line}")
    return 1


# ---------------------------------------------------------------- the runner
def decorator_ranks(decorators):
    for d in decorators:
        text = ast.unparse(d)
        m = re.search(r"skip_unless_(\d+)n(\d+)d", text)
        if m:
            return int(m.group(1)) * int(m.group(2))
    return None


def unconditional_skip(decorators):
    for d in decorators:
        if isinstance(d, ast.Call) and ast.unparse(d.func) in ("unittest.skip",):
            return ast.literal_eval(d.args[0]) if d.args else "skipped"
    return None


def collect(path):
    """[(Class.method, ranks, skip_reason)] in file order."""
    tree = ast.parse(open(path).read(), path)
    out = []
    # A class defined twice: the module keeps the last definition, as unittest sees it.
    last = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or last[node.name] is not node:
            continue
        cls_ranks = decorator_ranks(node.decorator_list)
        cls_skip = unconditional_skip(node.decorator_list)
        for fn in node.body:
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test"):
                ranks = decorator_ranks(fn.decorator_list) or cls_ranks or DEFAULT_RANKS
                skip = unconditional_skip(fn.decorator_list) or cls_skip
                out.append((f"{node.name}.{fn.name}", ranks, skip))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_test(path, name, ranks, timeout, log):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT",
                        "ONEFLOW_JOB_TOKEN")}
    env.update(ONEFLOW_TEST_DEVICE_NUM=str(ranks), ONEFLOW_TEST_NODE_NUM="1",
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "oneflow", "python"),
                                           env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    cmd = [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node", str(ranks),
           "--master_port", str(free_port()), os.path.abspath(__file__), "--one", path, name]
    start = time.time()
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        try:
            p.wait(timeout=timeout)
            hung = False
        except BaseException as e:
            if not isinstance(e, subprocess.TimeoutExpired):  # interrupted: stop the test's job
                os.killpg(p.pid, signal.SIGKILL)
                raise
            hung = True
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    secs = time.time() - start
    text = open(log, errors="replace").read()
    results = re.findall(rf"{RESULT} rank=(\d+) outcome=(\w+) reason=(.*)", text)
    # A rank stopped by another's failure reports that one's reason: the first failure counts.
    own = [r for r in results if "aborted" not in r[2] or r[1] not in ("fail", "error")]
    results = own if own else results
    outcomes = {o for _, o, _ in results}
    reason = ""
    for want in ("error", "fail"):
        hits = [r for _, o, r in results if o == want]
        if hits:
            reason = hits[0]
            break
    if hung:
        outcome, reason = "hang", f"no result after {timeout:.0f}s ({len(results)}/{ranks} ranks done)"
    elif "error" in outcomes:
        outcome = "error"
    elif "fail" in outcomes:
        outcome = "fail"
    elif len(results) < ranks:
        outcome = "error"
        tail = [l for l in text.splitlines() if l.strip()]
        reason = f"rc {p.returncode}, {len(results)}/{ranks} ranks reported: " + (tail[-1] if tail else "")
    elif outcomes == {"skip"}:
        outcome, reason = "skip", results[0][2]
    elif outcomes <= {"pass", "skip"}:
        outcome = "pass"
    else:
        outcome = "error"
    if outcome in ("fail", "error") and re.search(r"invalid device ordinal \d+: this machine has",
                                                  reason):
        # A test written for more GPUs than this machine has (cuda:3 on one GPU) cannot pass
        # here: skipped, with the reason.
        outcome, reason = "skip", f"needs more GPUs than this machine has: {reason}"
    need = ""
    if outcome in ("fail", "error"):
        for label, pat in NEEDS:
            if pat.search(text):
                need = label
                break
    return outcome, need, reason.strip(), secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="words a file name must contain (default: all)")
    ap.add_argument("-k", dest="keyword", default=None, help="word Class.method must contain")
    ap.add_argument("--timeout", type=float, default=180.0,
                    help="seconds before a test counts as a hang and is killed (default 180)")
    ap.add_argument("--logdir", default=None)
    ap.add_argument("--cuda", action="store_true",
                    help="run the files unedited (CUDA devices and placements): on a GPU, or on "
                         "the stand-in CUDA device when ONEFLOW_FAKE_CUDA=1 is set")
    ap.add_argument("--one", nargs=2, metavar=("FILE", "TEST"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        sys.exit(run_one(*args.one))
    if args.cuda:
        os.environ["ONEFLOW_UPSTREAM_UNEDITED"] = "1"  # the ranks' jobs inherit it
    if not os.path.isdir(SUITE):
        sys.exit(f"oneflow_tests: OneFlow's test files not found at {SUITE} (expected "
                 f"../shared/oneflow_upstream beside the checkout, or ONEFLOW_UPSTREAM_TESTS)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stops the running test's job too
    logdir = args.logdir or tempfile.mkdtemp(prefix="oneflow_tests-")
    os.makedirs(logdir, exist_ok=True)
    files = sorted(f for f in os.listdir(SUITE) if f.startswith("test_") and f.endswith(".py"))
    if args.files:
        files = [f for f in files if any(w in f for w in args.files)]
    counts = {k: 0 for k in ("pass", "fail", "error", "hang", "skip")}
    needs = {}
    t0 = time.time()
    for f in files:
        path = os.path.join(SUITE, f)
        for name, ranks, skip in collect(path):
            if args.keyword and args.keyword not in name:
                continue
            label = f"{f[:-3]}::{name} [{ranks}]"
            if skip:
                counts["skip"] += 1
                print(f"skip   {label}  (skipped upstream: {skip})", flush=True)
                continue
            log = os.path.join(logdir, f"{f[:-3]}.{name}.log")
            outcome, need, reason, secs = run_test(path, name, ranks, args.timeout, log)
            counts[outcome] += 1
            if need:
                needs.setdefault(need, []).append(label)
            note = f"  [needs {need}]" if need else ""
            why = f"  {reason[:200]}" if reason and outcome != "pass" else ""
            print(f"{outcome:<6} {label} {secs:.1f}s{note}{why}", flush=True)
    total = sum(counts.values())
    extra = "".join(f", {len(v)} need {k}" for k, v in sorted(needs.items()))
    print(f"oneflow upstream suite{' (cuda, unedited)' if args.cuda else ''}: {total} tests: {counts['pass']} pass, {counts['fail']} fail, "
          f"{counts['error']} error, {counts['hang']} hang, {counts['skip']} skip{extra} "
          f"({time.time() - t0:.0f}s; logs in {logdir})", flush=True)
    sys.exit(0 if counts["pass"] + counts["skip"] == total else 1)


if __name__ == "__main__":
    main()
