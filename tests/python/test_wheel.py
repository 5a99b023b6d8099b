"""The wheel (tools/build_wheel.sh) installed with pip into fresh venvs and used from outside the
source tree: Debian's python3 with its numpy (imports, the C++ kernels, a checkpoint, DDP on 2
ranks through the launcher), and a second CPython without numpy (imports; the suites that need
no numpy pass from the installed copy).

With PyPI (skipped, one line each, where it cannot be reached): the wheels for CPython 3.10 to
3.13 beside PyPI's newest numpy 2 and beside numpy 1.26; the cp311 wheel beside PyPI's newest
PyTorch in one process; and pip's NVIDIA packages (nvidia-cublas, nvidia-cudnn-cu13,
nvidia-nccl-cu13, which PyTorch's wheel depends on) found and opened by our loader from the venv
without LD_LIBRARY_PATH (opening needs no GPU). The PyTorch venv is made once under
~/.cache/oneflow_wheel_tests (the first run downloads about 3 GB: about 5 minutes here) and our
wheel is reinstalled into it each run; the numpy venvs are fresh each run (pip's cache keeps
their downloads).
"""

import glob
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.join(ROOT, "tests", "python")
# The second Python: a pyenv interpreter with headers, of another minor version than Debian's.
SECOND_PYTHONS = [f"/root/.pyenv/versions/{v}/bin/python3" for v in ("3.12.1", "3.10.13", "3.13.0")]
# In-process suites that start no process and need no numpy (test_optim's comparisons with
# PyTorch skip without it).
NO_NUMPY_SUITES = ["test_tensor_str.py", "test_serialization.py", "test_optim.py"]


PYTHONS = {"3.10": "/root/.pyenv/versions/3.10.13/bin/python3", "3.11": "/usr/bin/python3",
           "3.12": "/root/.pyenv/versions/3.12.1/bin/python3",
           "3.13": "/root/.pyenv/versions/3.13.0/bin/python3"}
CACHE = os.path.expanduser("~/.cache/oneflow_wheel_tests")


def _pypi_reason():
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15).close()
        return None
    except OSError as e:
        return f"PyPI cannot be reached ({e})"


PYPI_UNREACHABLE = _pypi_reason()
needs_pypi = pytest.mark.skipif(PYPI_UNREACHABLE is not None, reason=PYPI_UNREACHABLE or "")


def clean_env(**extra):
    """The environment without any path into the checkout (tools/python sets PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                        "MASTER_ADDR", "MASTER_PORT", "ONEFLOW_JOB_TOKEN")}
    env.update(extra)
    return env


def run(cmd, cwd, env=None, timeout=600):
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or clean_env(), capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def build_wheel(python, out):
    start = time.monotonic()
    path = run([os.path.join(ROOT, "tools", "build_wheel.sh"), "--python", python, "--out", out],
               cwd=ROOT, timeout=1800).strip().splitlines()[-1]
    print(f"{os.path.basename(path)}: {os.path.getsize(path) / 2**20:.1f} MiB, "
          f"built in {time.monotonic() - start:.0f} s")
    return path


def install(python, wheel, venv, system_site_packages):
    run([python, "-m", "venv", *(["--system-site-packages"] if system_site_packages else []),
         venv], cwd=os.path.dirname(venv))
    run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--no-index", "-q", wheel],
        cwd=os.path.dirname(venv))
    return os.path.join(venv, "bin", "python")


@pytest.fixture(scope="module")
def debian(tmp_path_factory):
    """(venv python, a folder outside the checkout) with the cp311 wheel installed."""
    work = tmp_path_factory.mktemp("wheel_debian")
    wheel = build_wheel("/usr/bin/python3", work / "dist")
    assert os.path.basename(wheel) == "oneflow-0.1.0-cp311-cp311-linux_x86_64.whl"
    python = install("/usr/bin/python3", wheel, str(work / "venv"), system_site_packages=True)
    return python, work


def test_the_installed_copy_imports_from_the_venv_with_its_bundled_libraries(debian):
    python, work = debian
    out = run([python, "-c", textwrap.dedent("""
        import os, oneflow, flowvision, oneflow.distributed.launch, oneflow.mock_torch
        for m in (oneflow, flowvision, oneflow._oneflow_internal):
            print(os.path.realpath(m.__file__))
        from importlib import metadata
        meta = metadata.metadata("oneflow")
        print(meta["Version"], meta["Requires-Python"], metadata.requires("oneflow"))
        libs = sorted(l.split()[-1] for l in open("/proc/self/maps") if ".so" in l)
        print("\\n".join(sorted(set(libs))))
    """)], cwd=work)
    venv = os.path.realpath(os.path.dirname(os.path.dirname(python)))
    files = out.splitlines()[:3]
    assert all(f.startswith(venv + os.sep) for f in files), out
    assert out.splitlines()[3] == "0.1.0 >=3.10 ['numpy>=1.21; extra == \"numpy\"']", out
    loaded = out.splitlines()[4:]
    assert not [l for l in loaded if l.startswith(ROOT)], out
    # oneDNN, OpenBLAS, Gloo and protobuf come from the wheel, under their hashed names.
    for lib in ("libdnnl-", "libopenblas", "libgloo-", "libprotobuf-"):
        assert [l for l in loaded if "/oneflow.libs/" in l and os.path.basename(l).startswith(lib)], \
            (lib, loaded)


def test_cpp_kernels_and_a_checkpoint_work_from_the_installed_copy(debian):
    python, work = debian
    script = work / "kernels.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import oneflow as flow
        import oneflow.nn as nn

        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
        np.testing.assert_allclose(flow.matmul(flow.tensor(a), flow.tensor(b)).numpy(), a @ b,
                                   rtol=1e-6)
        # numpy -> oneflow -> numpy keeps every dtype numpy and oneflow share.
        for dt in ("bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"):
            x = (np.arange(12).reshape(3, 4) % 3).astype(dt)[:, ::2]  # not contiguous
            y = flow.tensor(x).numpy()
            assert y.dtype == x.dtype and (y == x).all(), (dt, y, x)
        assert flow.tensor(np.float32(2.5)).numpy().shape == ()
        assert flow.zeros(0, 3).numpy().shape == (0, 3)

        flow.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
        x = flow.randn(2, 1, 8, 8)
        loss = model(x).softmax(1).square().sum()
        loss.backward()
        assert model[0].weight.grad.abs().sum().item() > 0
        flow.save(model.state_dict(), "model.of")
        fresh = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
        fresh.load_state_dict(flow.load("model.of"))
        assert fresh(x).tolist() == model(x).tolist()
        print("kernels ok")
    """))
    assert run([python, script], cwd=work).strip() == "kernels ok"


def test_ddp_on_two_ranks_through_the_installed_launcher(debian):
    python, work = debian
    script = work / "ddp.py"
    script.write_text(textwrap.dedent("""
        import os
        import oneflow as flow
        import oneflow.nn as nn
        from oneflow.nn.parallel import DistributedDataParallel as DDP

        rank, world = flow.env.get_rank(), flow.env.get_world_size()
        flow.manual_seed(0)
        x, y = flow.randn(8, 5), flow.randint(0, 3, (8,))
        ref = nn.Linear(5, 3)
        model = DDP(nn.Linear(5, 3))
        model.module.load_state_dict(ref.state_dict())
        mine = slice(rank * 4, rank * 4 + 4)
        nn.CrossEntropyLoss()(model(x[mine]), y[mine]).backward()
        nn.CrossEntropyLoss()(ref(x), y).backward()
        # Each rank's averaged gradient is the whole batch's gradient.
        diff = (model.module.weight.grad - ref.weight.grad).abs().max().item()
        assert diff < 1e-5, diff
        print(f"rank {rank} of {world} ok {os.path.dirname(flow.__file__)}")
    """))
    out = run([python, "-m", "oneflow.distributed.launch", "--nproc_per_node", 2, script],
              cwd=work, timeout=300)
    venv = os.path.dirname(os.path.dirname(python))
    lines = sorted(l.split("] ", 1)[-1] for l in out.splitlines() if " ok " in l)
    assert [l.split()[:5] for l in lines] == [["rank", "0", "of", "2", "ok"],
                                              ["rank", "1", "of", "2", "ok"]], out
    assert all(l.split()[-1].startswith(os.path.realpath(venv)) or l.split()[-1].startswith(venv)
               for l in lines), out


def pytest_shim(folder):
    """Debian's pytest (pure Python) for an interpreter without it: its packages linked into a
    folder put on PYTHONPATH, nothing else of Debian's site-packages (numpy stays absent)."""
    os.makedirs(folder)
    for name in ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "attr", "attrs", "py.py"):
        os.symlink(os.path.join("/usr/lib/python3/dist-packages", name), os.path.join(folder, name))
    return folder


def test_a_wheel_for_a_second_python_installs_and_passes_the_suites_without_numpy(
        tmp_path, tmp_path_factory):
    second = next((p for p in SECOND_PYTHONS if os.path.exists(p)), None)
    if second is None:
        pytest.skip(f"no second CPython with headers here (looked for {', '.join(SECOND_PYTHONS)})")
    # The wheel the numpy tests below install too (built once per session).
    version = next(v for v, p in PYTHONS.items() if p == second)
    _, wheel = wheel_for(version, tmp_path_factory)
    tag = run([second, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"], cwd=tmp_path)
    assert os.path.basename(wheel) == f"oneflow-0.1.0-{tag.strip()}-{tag.strip()}-linux_x86_64.whl"
    python = install(second, wheel, str(tmp_path / "venv"), system_site_packages=False)
    out = run([python, "-c", "import importlib.util, oneflow as flow; "
               "print(importlib.util.find_spec('numpy'), flow.ones(2, 3).sum().item(), "
               "flow.__file__)"], cwd=tmp_path)
    assert out.startswith("None 6.0 " + str(tmp_path / "venv")), out
    shim = pytest_shim(str(tmp_path / "shim"))
    # Debian's pytest 7.2 warns on every assert under Python 3.12 (ast.Str): not ours.
    out = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
               "ignore::DeprecationWarning",
               *[os.path.join(TESTS, s) for s in NO_NUMPY_SUITES]],
              cwd=tmp_path, env=clean_env(PYTHONPATH=shim))
    assert " passed" in out and "failed" not in out and "error" not in out, out


def test_pip_install_dot_and_pip_wheel_dot_build_through_the_pep517_backend(tmp_path):
    """`pip install .` from the checkout into a fresh venv (no PyPI: the backend needs no build
    requirements), used from outside the checkout; then `pip wheel .` gives the same wheel."""
    venv = tmp_path / "venv"
    run(["/usr/bin/python3", "-m", "venv", venv], cwd=tmp_path)
    pip = [venv / "bin" / "python", "-m", "pip"]
    run([*pip, "install", "--no-index", "-q", "."], cwd=ROOT, timeout=1800)
    out = run([venv / "bin" / "python", "-c", "import importlib.util, oneflow as flow; "
               "print(importlib.util.find_spec('numpy'), (flow.ones(2, 3) * 2).sum().item(), "
               "flow.__file__)"], cwd=tmp_path)
    assert out.startswith("None 12.0 " + str(venv)), out
    run([*pip, "wheel", "--no-index", "-q", "-w", tmp_path / "wheels", "."], cwd=ROOT,
        timeout=1800)
    assert os.listdir(tmp_path / "wheels") == ["oneflow-0.1.0-cp311-cp311-linux_x86_64.whl"]


_WHEELS = {}


def wheel_for(version, tmp_path_factory):
    """The wheel for CPython `version`, built once per test session."""
    python = PYTHONS[version]
    if not os.path.exists(python):
        pytest.skip(f"no CPython {version} here ({python})")
    if version not in _WHEELS:
        _WHEELS[version] = build_wheel(python, tmp_path_factory.mktemp(f"wheel_{version}"))
    return python, _WHEELS[version]


# numpy <-> oneflow for every dtype both have, a matmul against numpy's, and an autograd step.
NUMPY_SCRIPT = textwrap.dedent("""
    import numpy as np
    import oneflow as flow

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    np.testing.assert_allclose(flow.matmul(flow.tensor(a), flow.tensor(b)).numpy(), a @ b,
                               rtol=1e-6)
    for dt in ("bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"):
        x = (np.arange(12).reshape(3, 4) % 3).astype(dt)[:, ::2]  # not contiguous
        y = flow.tensor(x).numpy()
        assert y.dtype == x.dtype and (y == x).all(), (dt, y, x)
        z = flow.from_numpy(np.ascontiguousarray(x)).numpy()
        assert z.dtype == x.dtype and (z == x).all(), (dt, z, x)
    assert flow.tensor(np.float32(2.5)).item() == 2.5
    w = flow.tensor(a, requires_grad=True)
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * a)
    print("numpy", np.__version__, "ok")
""")


@needs_pypi
@pytest.mark.parametrize("version,numpy_spec", [
    ("3.10", "numpy"), ("3.11", "numpy"), ("3.12", "numpy"), ("3.13", "numpy"),
    ("3.11", "numpy==1.26.*"), ("3.12", "numpy==1.26.*")])
def test_the_wheel_beside_numpy_from_pypi(version, numpy_spec, tmp_path, tmp_path_factory):
    """numpy 2 (the newest that supports the interpreter) and numpy 1.26, each in a fresh venv
    with the wheel."""
    python, wheel = wheel_for(version, tmp_path_factory)
    venv = tmp_path / "venv"
    run([python, "-m", "venv", venv], cwd=tmp_path)
    vpython = venv / "bin" / "python"
    run([vpython, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel, numpy_spec],
        cwd=tmp_path)
    (tmp_path / "check.py").write_text(NUMPY_SCRIPT)
    out = run([vpython, "check.py"], cwd=tmp_path).split()
    assert out[0] == "numpy" and out[2] == "ok", out
    major = out[1].split(".")[0]
    assert (major == "2") if numpy_spec == "numpy" else out[1].startswith("1.26."), out


@pytest.fixture(scope="module")
def torch_venv(tmp_path_factory):
    """A venv (cached under ~/.cache) with PyPI's newest torch and numpy, and this checkout's
    cp311 wheel installed into it afresh."""
    if PYPI_UNREACHABLE:
        pytest.skip(PYPI_UNREACHABLE)
    _, wheel = wheel_for("3.11", tmp_path_factory)
    venv = os.path.join(CACHE, "torch-cp311")
    python = os.path.join(venv, "bin", "python")
    done = os.path.join(venv, ".complete")
    if not os.path.exists(done):
        start = time.monotonic()
        shutil.rmtree(venv, ignore_errors=True)
        os.makedirs(CACHE, exist_ok=True)
        run(["/usr/bin/python3", "-m", "venv", venv], cwd=CACHE)
        run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "torch",
             "numpy"], cwd=CACHE, timeout=3600)
        open(done, "w").close()
        print(f"{venv}: PyPI's torch installed in {time.monotonic() - start:.0f} s")
    run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
         "--force-reinstall", wheel], cwd=CACHE)
    return python


TORCH_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    first, second = sys.argv[1:3]
    mods = {name: __import__(name) for name in (first, second)}
    torch, flow = mods["torch"], mods["oneflow"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    outs = []
    for lib in (torch, flow):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.gelu(lib.nn.functional.linear(xt, wt)).softmax(dim=1)
        y.log().sum().backward()
        outs.append((y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()))
    for t, f in zip(*outs):
        np.testing.assert_allclose(f, t, rtol=1e-4, atol=1e-5)
    # Tensors cross between the two through numpy.
    back = torch.from_numpy(flow.tensor(x).numpy())
    assert torch.equal(back, torch.tensor(x))
    print(torch.__version__, flow.__file__)
""")


@pytest.mark.parametrize("first", ["torch", "oneflow"])
def test_the_wheel_beside_pypis_pytorch_in_one_process(torch_venv, first, tmp_path):
    (tmp_path / "both.py").write_text(TORCH_SCRIPT)
    second = "oneflow" if first == "torch" else "torch"
    out = run([torch_venv, "both.py", first, second], cwd=tmp_path).split()
    assert int(out[0].split(".")[0]) >= 2, out
    venv = os.path.dirname(os.path.dirname(torch_venv))
    assert out[1].startswith(venv + os.sep), out


# The libraries cuda_libs.h opens, and the pip distributions that ship them for CUDA 13.
NVIDIA_LIBS = {"libcublas.so.13": "nvidia-cublas", "libcudnn.so.9": "nvidia-cudnn-cu13",
               "libnccl.so.2": "nvidia-nccl-cu13"}


def test_pips_nvidia_libraries_are_found_and_opened_from_the_venv(torch_venv, tmp_path):
    """Only oneflow imported (PyTorch would load them itself), no LD_LIBRARY_PATH: our loader
    finds each library in the venv's site-packages/nvidia/*/lib and opens it."""
    code = textwrap.dedent(f"""
        import sys
        from importlib import metadata
        from oneflow import _oneflow_internal as C
        for soname, dist in {NVIDIA_LIBS!r}.items():
            print(soname, metadata.version(dist), C.cuda_open_library(soname))
        assert "torch" not in sys.modules
    """)
    env = clean_env()
    env.pop("LD_LIBRARY_PATH", None)
    out = run([torch_venv, "-c", code], cwd=tmp_path, env=env).strip().splitlines()
    venv = os.path.dirname(os.path.dirname(torch_venv))
    assert [l.split()[0] for l in out] == list(NVIDIA_LIBS), out
    for line in out:
        soname, _, path = line.split()
        assert path.startswith(venv + os.sep) and "/site-packages/nvidia/" in path, line
        assert os.path.basename(path) == soname, line
