"""tools/oneflow_suite.py (OneFlow's single-device suite runner) on a small made-up suite: it
fetches the folders from a git dir, runs each file in its own process, reports each outcome
(a crash by its signal, a hang after --timeout, an import error for each of the file's tests)
and goes on with the file's other tests after a crash or a hang; per-folder counts."""

import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "tools", "oneflow_suite.py")

FAKE_TESTS = '''
import os, signal, time, unittest
import oneflow as flow
import oneflow.unittest
from oneflow.test_utils.test_util import GenArgList

class TestMix(flow.unittest.TestCase):
    def test_a_pass(self):
        self.assertEqual(flow.ones(2).sum().item(), 2.0)
        self.assertEqual(len(list(GenArgList({"x": [1, 2]}))), 2)
    def test_b_fail(self):
        self.assertTrue(False, "wrong value")
    def test_c_error(self):
        raise KeyError("missing")
    def test_d_crash(self):
        os.kill(os.getpid(), signal.SIGSEGV)
    def test_e_after_crash(self):
        pass
    def test_f_hang(self):
        time.sleep(600)
    def test_g_after_hang(self):
        pass
    @unittest.skipIf(os.getenv("ONEFLOW_TEST_CPU_ONLY"), "only test cpu cases")
    def test_h_skip(self):
        pass
'''

TEST_UTIL = '''
import oneflow as flow
type_name_to_flow_type = {
    "float32": flow.float32,
    "complex64": flow.complex64,
}
def GenArgList(d):
    return [[v] for v in d["x"]]
'''


def _git(cwd, *args):
    subprocess.run(["git", "-C", cwd, *args], check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"))


def test_runner_reports_every_outcome(tmp_path):
    src = tmp_path / "oneflow"
    tests = src / "python" / "oneflow" / "test"
    for folder in ("modules", "tensor", "exceptions", "graph"):
        (tests / folder).mkdir(parents=True)
    (tests / "modules" / "test_mix.py").write_text(textwrap.dedent(FAKE_TESTS))
    (tests / "tensor" / "test_broken.py").write_text("import no_such_module\n"
                                                     "class TestX:\n    def test_one(self): pass\n"
                                                     "    def test_two(self): pass\n")
    utils = src / "python" / "oneflow" / "test_utils"
    utils.mkdir(parents=True)
    (utils / "__init__.py").write_text("")
    (utils / "test_util.py").write_text(textwrap.dedent(TEST_UTIL))
    _git(str(src), "init", "-q")
    _git(str(src), "add", "-A")
    _git(str(src), "commit", "-qm", "suite")
    env = dict(os.environ, ONEFLOW_UPSTREAM_SUITE=str(tmp_path / "fetched"),
               PYTHONPATH=os.path.join(ROOT, "oneflow", "python"))
    r = subprocess.run([sys.executable, RUNNER, "fetch", str(src), "--commit", "HEAD"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "fetched" / "support" / "test_utils" / "test_util.py").exists()
    r = subprocess.run([sys.executable, RUNNER, "modules", "tensor", "--timeout", "10"],
                       capture_output=True, text=True, env=env, timeout=300)
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    got = {name: outcome for outcome, name in
           re.findall(r"^(\w+)\s+modules/test_mix::TestMix\.(\w+)", out, re.M)}
    assert got == {"test_a_pass": "pass", "test_b_fail": "fail", "test_c_error": "error",
                   "test_d_crash": "crash", "test_e_after_crash": "pass", "test_f_hang": "hang",
                   "test_g_after_hang": "pass", "test_h_skip": "skip"}, out
    assert "killed by SIGSEGV" in out and "no result after 10s" in out
    assert re.search(r"error\s+tensor/test_broken::TestX.test_one\s+ModuleNotFoundError", out)
    assert "modules     3/7 pass (42.9%); 1 fail, 1 error, 1 crash, 1 hang, 1 skip" in out, out
    assert "tensor      0/2 pass (0.0%); 0 fail, 2 error, 0 crash, 0 hang, 0 skip" in out, out


def test_runner_without_a_fetched_suite_says_so_in_one_line(tmp_path):
    env = dict(os.environ, ONEFLOW_UPSTREAM_SUITE=str(tmp_path / "none"))
    r = subprocess.run([sys.executable, RUNNER], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode != 0
    assert r.stderr.strip().startswith("oneflow_suite: no fetched suite at")
