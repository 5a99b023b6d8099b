"""The C++ SDK as a user gets it: installed by tools/install_sdk.sh under a temporary prefix,
then the projects of tests/cpp_sdk/ (a CMake one and a plain Makefile one using pkg-config),
copied to a temporary directory outside the repository, built with Debian's g++ and
-Wall -Wextra -Werror, and run:

- DistributedDataParallel of a C++ module on 2 ranks equals one-process training (with SGD and a
  StepLR schedule);
- a 2-rank global-tensor data-parallel MLP under our launcher (--no_python), by mpirun and by
  hand with torchrun's variables: the same losses as the Python API's program on the same data
  and seed (tests/cpp_sdk/global_mlp.py);
- LeNet (examples/lenet_cifar10.py's) trained from C++ to the same losses as from Python, its
  saved state dict loaded in Python, and Python's loaded back in C++.
"""

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import oneflow as flow
from test_comm import env_with, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROJECT = os.path.join(ROOT, "tests", "cpp_sdk")


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 600), **kw)
    assert r.returncode == 0, f"{cmd}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def sdk(tmp_path_factory):
    for tool in ("cmake", "pkg-config", "g++", "make"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing (tools/install_deps.sh installs it)")
    prefix = tmp_path_factory.mktemp("prefix")
    _run([os.path.join(ROOT, "tools", "install_sdk.sh"), "--prefix", str(prefix)])
    return prefix


def _project(tmp_path):
    work = tmp_path / "user_project"
    shutil.copytree(PROJECT, work)
    return work


@pytest.fixture(scope="module")
def cmake_build(sdk, tmp_path_factory):
    work = _project(tmp_path_factory.mktemp("cmake"))
    r = _run(["cmake", "-S", str(work), "-B", str(work / "build"), f"-DCMAKE_PREFIX_PATH={sdk}"])
    assert "OneFlow 0.1.0" in r.stdout
    _run(["cmake", "--build", str(work / "build"), "-j", "2"])
    return work / "build"


@pytest.fixture(scope="module")
def make_build(sdk, tmp_path_factory):
    work = _project(tmp_path_factory.mktemp("make"))
    _run(["make", "-C", str(work)],
         env=dict(os.environ, PKG_CONFIG_PATH=str(sdk / "lib" / "pkgconfig")))
    return work


def _losses(out):
    return [l.split("] ", 1)[-1] for l in out.splitlines() if re.search(r"step \d+ loss", l)]


def _launch(*args):
    cmd = [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node", "2",
           "--master_port", str(free_port()), *map(str, args)]
    return _run(cmd, env=env_with())


@pytest.fixture(scope="module")
def python_losses():
    losses = _losses(_launch(os.path.join(PROJECT, "global_mlp.py")).stdout)
    assert len(losses) == 5
    return losses


def test_version_soname_and_package_files(sdk):
    lib = sdk / "lib"
    assert os.readlink(lib / "liboneflow.so") == "liboneflow.so.0"
    assert os.readlink(lib / "liboneflow.so.0") == "liboneflow.so.0.1.0"
    soname = _run(["readelf", "-d", str(lib / "liboneflow.so.0.1.0")]).stdout
    assert "Library soname: [liboneflow.so.0]" in soname
    pc = dict(os.environ, PKG_CONFIG_PATH=str(lib / "pkgconfig"))
    assert _run(["pkg-config", "--modversion", "oneflow"], env=pc).stdout.strip() == \
        flow.__version__ == "0.1.0"
    flags = _run(["pkg-config", "--cflags", "--libs", "oneflow"], env=pc).stdout
    assert f"-I{sdk}/include/oneflow" in flags and "-loneflow" in flags
    # Only the public headers: the umbrella and what it includes, no sources or kernels.
    headers = {str(p.relative_to(sdk / "include" / "oneflow"))
               for p in (sdk / "include" / "oneflow").rglob("*") if p.is_file()}
    assert "oneflow/api/cpp/oneflow.h" in headers and "core/tensor.h" in headers
    assert all(h.endswith(".h") for h in headers)
    assert not any(h.startswith("core/kernels") for h in headers)


def test_cmake_rejects_an_incompatible_version(sdk, tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(p CXX)\n"
        "find_package(OneFlow 1.0 CONFIG REQUIRED)\n")
    r = subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"),
                        f"-DCMAKE_PREFIX_PATH={sdk}"], capture_output=True, text=True)
    assert r.returncode != 0
    assert "OneFlowConfig.cmake, version: 0.1.0" in r.stderr


def test_cmake_project_trains_like_python(cmake_build, python_losses):
    assert _losses(_launch("--no_python", cmake_build / "global_mlp").stdout) == python_losses


def test_makefile_project_trains_like_python(make_build, python_losses):
    assert _losses(_launch("--no_python", make_build / "global_mlp").stdout) == python_losses


def test_cpp_ddp_of_a_module_equals_one_process_training(cmake_build):
    r = _launch("--no_python", cmake_build / "ddp_mlp")
    lines = sorted(l.split("] ", 1)[-1] for l in r.stdout.splitlines() if "C++ DDP" in l)
    assert lines == [f"rank {k}: C++ DDP equals one process after 6 steps (lr now 0.025)"
                     for k in (0, 1)], r.stdout


def test_cpp_ranks_started_without_our_launcher(make_build, python_losses):
    program = str(make_build / "global_mlp")
    if shutil.which("mpirun"):
        r = _run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                  "-x", f"MASTER_PORT={free_port()}", program], env=env_with())
        assert _losses(r.stdout) == python_losses
    # By hand, with torchrun's variables.
    port = free_port()
    procs = [subprocess.Popen([program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True,
                              env=env_with(RANK=r, WORLD_SIZE=2, LOCAL_RANK=r,
                                           LOCAL_WORLD_SIZE=2, MASTER_ADDR="127.0.0.1",
                                           MASTER_PORT=port)) for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert _losses(outs[0][0]) == python_losses


def test_lenet_from_cpp_and_python_train_alike_and_share_state_dicts(make_build, tmp_path):
    env = dict(env_with(), LENET_EXAMPLE=os.path.join(ROOT, "examples", "lenet_cifar10.py"))
    py_file, cpp_file = tmp_path / "py.safetensors", tmp_path / "cpp.safetensors"
    py = _run([sys.executable, os.path.join(PROJECT, "lenet.py"), str(py_file)], env=env)
    cpp = _run([str(make_build / "lenet"), str(cpp_file), str(py_file)], env=env)
    py_losses = [float(l.rsplit(" ", 1)[1]) for l in _losses(py.stdout)]
    cpp_losses = [float(l.rsplit(" ", 1)[1]) for l in _losses(cpp.stdout)]
    assert len(py_losses) == 5
    np.testing.assert_allclose(cpp_losses, py_losses, rtol=0, atol=1e-4)
    # C++'s trained weights, read by Python, equal Python's own.
    ours, theirs = flow.load(py_file), flow.load(cpp_file)
    assert sorted(ours) == sorted(theirs)
    for k in ours:
        np.testing.assert_allclose(theirs[k].numpy(), ours[k].numpy(), rtol=0, atol=1e-4)
    # Python's weights, loaded into C++'s LeNet, give Python's outputs.
    spec_globals = {}
    exec(open(env["LENET_EXAMPLE"]).read().split("\ndef train")[0], spec_globals)
    net = spec_globals["LeNet"]()
    net.load_state_dict(ours)
    net.eval()
    flow.manual_seed(0)
    spec_globals["LeNet"]()  # the same draws as the programs made before their batch
    x = flow.randn(16, 3, 32, 32)
    want = net(x).detach().numpy().ravel()
    got = np.array([float(v) for v in cpp.stdout.split()[-want.size:]])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
