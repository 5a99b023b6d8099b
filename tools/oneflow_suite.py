"""OneFlow's own single-device tests (modules/, tensor/, exceptions/, graph/) against this package.

    tools/python tools/oneflow_suite.py fetch /path/to/oneflow       # once: a checkout or git dir
    tools/python tools/oneflow_suite.py                              # modules tensor exceptions
    tools/python tools/oneflow_suite.py modules -f test_abs -k Abs  # a folder, files, tests
    tools/python tools/oneflow_suite.py graph -j 2 --timeout 120 --json out.json

The test files are OneFlow's, unedited, and stay out of this tree: `fetch` copies
python/oneflow/test/{modules,tensor,exceptions,graph} and python/oneflow/test_utils (upstream's
test-support code: autotest, random tensors, the PyTorch comparison) of commit COMMIT (or
--commit) from a OneFlow checkout or bare git dir into the ignored folder upstream_suite/
(ONEFLOW_UPSTREAM_SUITE names another fetched folder). At run time test_utils is grafted onto
`oneflow.__path__` (only it: nothing else of upstream's package is visible), the test's own
folder is on sys.path (for its sibling helpers), ONEFLOW_TEST_CPU_ONLY=1 is set as upstream's
CPU-only CI does, and autotest compares against the PyTorch importable here (Debian's 1.13).
No test file is edited; the support code gets the edits HELPER_EDITS lists, at import time.

Each file runs in its own process, tests one after another; the runner watches each test: one
running longer than --timeout seconds is killed (hang), one whose process dies is a crash (the
signal named); the file then goes on in a fresh process with the tests not yet run. A file that
does not import reports each of its tests as an error with the import's reason. Output: one line
per test (pass/fail/error/crash/hang/skip and the reason's last line), per-folder counts, and the
most frequent reasons.
"""

import argparse
import collections
import concurrent.futures
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oneflow_tests import collect  # noqa: E402  (the AST listing of a file's tests)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = os.path.abspath(os.environ.get("ONEFLOW_UPSTREAM_SUITE")
                        or os.path.join(ROOT, "upstream_suite"))
COMMIT = "25c8978c1c8b1371ef6aa4187dae4495bd233c35"
FOLDERS = ("modules", "tensor", "exceptions", "graph")
DEFAULT_FOLDERS = ("modules", "tensor", "exceptions")
# The only edits, to upstream's support code (never to a test file), applied as it is imported:
# (module, pattern, replacement, why).
# (module, pattern, replacement, why): none needed now that flow has complex dtypes.
HELPER_EDITS = []
OUTCOMES = ("pass", "fail", "error", "crash", "hang", "skip")
MARK = "@@suite"
LIVE = set()  # the test processes running now (stopped with the runner)


# ---------------------------------------------------------------- fetch
def fetch(src, commit, dest):
    """Copies the test folders and test_utils of `src` (a checkout or a git dir) into `dest`."""
    paths = [f"python/oneflow/test/{f}" for f in FOLDERS] + ["python/oneflow/test_utils"]
    tmp = tempfile.mkdtemp(prefix="oneflow_suite-")
    try:
        if os.path.isdir(os.path.join(src, "python", "oneflow", "test")) and not commit:
            for p in paths:
                if os.path.isdir(os.path.join(src, p)):
                    shutil.copytree(os.path.join(src, p), os.path.join(tmp, p))
            got = "working tree of " + src
        else:
            commit = commit or COMMIT
            present = [p for p in paths if subprocess.run(
                ["git", "-C", src, "cat-file", "-e", f"{commit}:{p}"],
                capture_output=True).returncode == 0]
            if paths[-1] not in present:
                sys.exit(f"oneflow_suite fetch: {src} has no {paths[-1]} at {commit} (expected "
                         f"a OneFlow checkout or git dir, and a commit it holds)")
            archive = subprocess.run(["git", "-C", src, "archive", commit] + present,
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            got = f"{src} at {commit}"
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(os.path.join(dest, "support"))
        for f in FOLDERS:
            there = os.path.join(tmp, "python/oneflow/test", f)
            if os.path.isdir(there):
                shutil.move(there, os.path.join(dest, f))
            else:
                os.makedirs(os.path.join(dest, f))  # not in that commit: an empty folder
        shutil.move(os.path.join(tmp, "python/oneflow/test_utils"),
                    os.path.join(dest, "support", "test_utils"))
        with open(os.path.join(dest, "SOURCE"), "w") as f:
            f.write(got + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"oneflow_suite: fetched {got} into {dest}")


# ---------------------------------------------------------------- one file, in its own process
def last_line(text):
    lines = [l.strip() for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def emit(kind, name, outcome="", reason=""):
    line = f"{MARK}\t{kind}\t{name}\t{outcome}\t{last_line(reason)[:300]}"
    os.write(1, (line + "\n").encode())


class Reporter(unittest.TestResult):
    """Says when each test starts and how it ended, on stdout, at once (a crash loses nothing)."""

    def startTest(self, test):
        super().startTest(test)
        emit("start", test_name(test))

    def addSuccess(self, test):
        emit("end", test_name(test), "pass")

    def addError(self, test, err):
        super().addError(test, err)
        self.finish(test, "error", self.errors[-1][1])

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.finish(test, "fail", self.failures[-1][1])

    def addSkip(self, test, reason):
        emit("end", test_name(test), "skip", reason)

    def addExpectedFailure(self, test, err):
        emit("end", test_name(test), "pass")

    def addUnexpectedSuccess(self, test):
        emit("end", test_name(test), "fail", "unexpected success")

    def finish(self, test, outcome, text):
        name = test_name(test)
        if name.startswith(("setUpClass", "tearDownClass", "setUpModule", "tearDownModule")):
            name = "*" + name  # a class fixture: its tests are reported by the parent
        sys.stderr.write(f"---- {name}\n{text}\n")
        emit("end", name, outcome, text)


def test_name(test):
    if isinstance(test, unittest.TestCase):
        return f"{type(test).__name__}.{test._testMethodName}"
    return str(test)  # _ErrorHolder of a failed fixture: "setUpClass (module.Class)"


def flat(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flat(t)
        else:
            yield t


class EditedLoader(importlib.machinery.SourceFileLoader):
    def get_data(self, path):
        data = super().get_data(path)
        if not path.endswith(".py"):
            return data
        text = data.decode()
        for module, pat, rep, _ in HELPER_EDITS:
            if module == self.name:
                text, n = re.subn(pat, rep, text)
                if not n:
                    raise ImportError(f"oneflow_suite: helper edit {pat!r} of {module} matched "
                                      f"nothing: the fetched support code changed")
        return text.encode()

    def path_stats(self, path):
        raise OSError  # no cached bytecode: the edits apply to the source


class EditedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in {m for m, *_ in HELPER_EDITS}:
            return None
        parent, leaf = name.rsplit(".", 1)
        for d in sys.modules[parent].__path__:
            file = os.path.join(d, leaf + ".py")
            if os.path.exists(file):
                return importlib.util.spec_from_file_location(name, file,
                                                              loader=EditedLoader(name, file))
        return None


def run_file(path, done, keyword):
    import oneflow

    oneflow.__path__.append(os.path.join(SUITE, "support"))  # oneflow.test_utils, only it
    sys.meta_path.insert(0, EditedFinder())
    folder = os.path.dirname(path)
    sys.path.insert(0, folder)
    os.chdir(folder)
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        tests = [t for t in flat(unittest.defaultTestLoader.loadTestsFromModule(module))
                 if test_name(t) not in done and keyword in test_name(t)]
    except BaseException:  # noqa: BLE001 - the file's import error is each of its tests' error
        import traceback
        text = traceback.format_exc()
        sys.stderr.write(text)
        emit("import", name, "error", text)
        return
    unittest.TestSuite(tests).run(Reporter())


# ---------------------------------------------------------------- the parent
def child_env():
    env = dict(os.environ, ONEFLOW_TEST_CPU_ONLY="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "oneflow", "python"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
        env.pop(k, None)
    return env


def reader(stream, q):
    for line in iter(stream.readline, b""):
        q.put(line.decode(errors="replace"))
    q.put(None)


def stop(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def signal_name(rc):
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def run_path(path, keyword, timeout, log):
    """{test: (outcome, reason)} for one file, in as many processes as crashes and hangs need."""
    listed = [n for n, _, skip in collect(path)]
    results = {}
    with open(log, "w") as logf:
        while True:
            todo = [n for n in listed if n not in results and (not keyword or keyword in n)]
            if not todo and listed:
                break
            cmd = [sys.executable, os.path.abspath(__file__), "--child", path,
                   json.dumps(sorted(results)), keyword or ""]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=logf, env=child_env(),
                                 start_new_session=True)
            LIVE.add(p)
            q = queue.Queue()
            threading.Thread(target=reader, args=(p.stdout, q), daemon=True).start()
            current, deadline, finished, progressed = None, time.time() + timeout, False, False
            try:
                while True:
                    try:
                        line = q.get(timeout=max(0.1, deadline - time.time()))
                    except queue.Empty:
                        line = "" if time.time() < deadline else "@@timeout"
                    if line == "@@timeout":
                        stop(p)
                        what = current or "(file import)"
                        results[what] = ("hang", f"no result after {timeout:.0f}s")
                        progressed = True
                        if not current:
                            for n in todo:
                                results[n] = ("hang", f"the file's import took over {timeout:.0f}s")
                        break
                    if line is None:
                        rc = p.wait()
                        if current:
                            if rc < 0:
                                results[current] = ("crash", f"killed by {signal_name(rc)}")
                            else:
                                results[current] = ("error", f"process exited ({rc}) in the test")
                            progressed = True
                        elif rc != 0 and not progressed:
                            why = (f"killed by {signal_name(rc)}" if rc < 0 else f"exit {rc}")
                            for n in todo:
                                results[n] = ("crash" if rc < 0 else "error",
                                              f"the file's process ended before its tests: {why}")
                            progressed = True
                        else:
                            finished = True
                        break
                    if not line.startswith(MARK):
                        continue
                    _, kind, name, outcome, reason = line.rstrip("\n").split("\t", 4)
                    if kind == "start":
                        current, deadline = name, time.time() + timeout
                    elif kind == "end":
                        results[name.lstrip("*")] = (outcome, reason)
                        current, progressed = None, True
                    elif kind == "import":
                        for n in todo:
                            results[n] = ("error", reason)
                        finished = True
            except BaseException:
                stop(p)
                raise
            finally:
                LIVE.discard(p)
            if finished or not progressed:
                break
    # A fixture's failure (setUpClass) is its class's tests' outcome.
    out = {}
    for n in listed:
        if keyword and keyword not in n:
            continue
        cls = n.split(".")[0]
        fixture = next((v for k, v in results.items() if k.startswith(("setUpClass", "tearDown"))
                        and f".{cls})" in k), None)
        out[n] = results.get(n) or fixture or ("error", "not run (not found by unittest)")
    for n, v in results.items():  # tests unittest found that the AST listing did not
        if n not in out and "(" not in n and (not keyword or keyword in n):
            out[n] = v
    return out


def quit_now(rc):
    for p in list(LIVE):
        stop(p)
    os._exit(rc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", help=f"of {', '.join(FOLDERS)} (default: "
                                               f"{' '.join(DEFAULT_FOLDERS)}); or 'fetch SRC'")
    ap.add_argument("-f", dest="files", action="append", default=[],
                    help="word a file name must contain (repeatable)")
    ap.add_argument("-k", dest="keyword", default=None, help="word Class.method must contain")
    ap.add_argument("-j", dest="jobs", type=int, default=2, help="files run at once (default 2)")
    ap.add_argument("--timeout", type=float, default=180.0,
                    help="seconds one test may run before it counts as a hang (default 180)")
    ap.add_argument("--commit", default=None, help="fetch: the commit (default %s)" % COMMIT[:8])
    ap.add_argument("--json", default=None, help="write {file::test: [outcome, reason]} here")
    ap.add_argument("--logdir", default=None, help="each file's stderr (default: a fresh /tmp)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_file(args.child[0], set(json.loads(args.child[1])), args.child[2])
        return
    if args.folders[:1] == ["fetch"]:
        if len(args.folders) != 2:
            sys.exit("oneflow_suite fetch: give one OneFlow checkout or git dir, e.g. "
                     "tools/oneflow_suite.py fetch ~/oneflow")
        fetch(os.path.abspath(args.folders[1]), args.commit, SUITE)
        return
    folders = args.folders or list(DEFAULT_FOLDERS)
    for f in folders:
        if f not in FOLDERS:
            sys.exit(f"oneflow_suite: unknown folder {f!r}; expected one of {', '.join(FOLDERS)}")
    if not os.path.isdir(os.path.join(SUITE, "support", "test_utils")):
        sys.exit(f"oneflow_suite: no fetched suite at {SUITE}; run "
                 f"`tools/oneflow_suite.py fetch /path/to/oneflow` first (a checkout or git dir)")
    logdir = args.logdir or tempfile.mkdtemp(prefix="oneflow_suite-")
    os.makedirs(logdir, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: quit_now(143))
    signal.signal(signal.SIGINT, lambda *_: quit_now(130))
    t0 = time.time()
    every = {}
    counts = {}
    for folder in folders:
        files = sorted(f for f in os.listdir(os.path.join(SUITE, folder))
                       if f.startswith("test_") and f.endswith(".py")
                       and (not args.files or any(w in f for w in args.files)))
        c = counts[folder] = dict.fromkeys(OUTCOMES, 0)
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            jobs = {f: pool.submit(run_path, os.path.join(SUITE, folder, f), args.keyword,
                                   args.timeout, os.path.join(logdir, f"{folder}.{f[:-3]}.log"))
                    for f in files}
            for f in files:
                for name, (outcome, reason) in jobs[f].result().items():
                    c[outcome] += 1
                    every[f"{folder}/{f[:-3]}::{name}"] = (outcome, reason)
                    why = f"  {reason[:200]}" if outcome != "pass" and reason else ""
                    print(f"{outcome:<6} {folder}/{f[:-3]}::{name}{why}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(every, fh, indent=0, sort_keys=True)
    reasons = collections.Counter(re.sub(r"0x[0-9a-f]+|\d+(\.\d+)?", "N", r)[:120]
                                  for o, r in every.values() if o not in ("pass", "skip"))
    print("\nmost frequent reasons:")
    for r, n in reasons.most_common(25):
        print(f"  {n:5d}  {r}")
    print(f"\noneflow single-device suite ({open(os.path.join(SUITE, 'SOURCE')).read().strip()}"
          f", ONEFLOW_TEST_CPU_ONLY=1, {time.time() - t0:.0f}s, logs in {logdir}):")
    for folder, c in counts.items():
        ran = sum(c.values()) - c["skip"]
        pct = f"{100.0 * c['pass'] / ran:.1f}%" if ran else "-"
        print(f"  {folder:<11} {c['pass']}/{ran} pass ({pct}); "
              + ", ".join(f"{c[o]} {o}" for o in OUTCOMES[1:]))
    bad = sum(c[o] for c in counts.values() for o in ("fail", "error", "crash", "hang"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
