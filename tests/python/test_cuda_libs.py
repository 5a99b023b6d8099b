"""Where cuBLAS / cuDNN / NCCL are found (core/kernels/cuda/cuda_libs.h): the loader is plain
dlopen, built with or without CUDA, so these run on any machine. A stand-in library (a copy of
the system's zlib under another name) placed as pip's NVIDIA packages place theirs
(site-packages/nvidia/<package>/lib) is opened from there without LD_LIBRARY_PATH. The real pip
packages are opened from a venv in tests/python/test_wheel.py."""

import os
import shutil
import subprocess
import sys

import pytest

ZLIB = next((p for p in ("/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1")
             if os.path.exists(p)), None)


def run_python(code, site, **extra):
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(site)])
    env.update(extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def site(tmp_path):
    if ZLIB is None:
        pytest.skip("no libz.so.1 to stand in for a CUDA library")
    site = tmp_path / "site-packages"
    for package in ("cu13", "cudnn"):
        (site / "nvidia" / package / "lib").mkdir(parents=True)
    (site / "nvidia" / "not_a_library_package").mkdir()
    shutil.copy(ZLIB, site / "nvidia" / "cudnn" / "lib" / "libstandin_cudnn.so.9")
    return site


def test_a_library_in_a_pip_nvidia_folder_on_sys_path_is_opened_from_there(site, tmp_path):
    r = run_python("import oneflow as flow; from oneflow import _oneflow_internal as C; "
                   "print(C.cuda_open_library('libstandin_cudnn.so.9')); "
                   "print(flow.cuda.library_search_path())", site,
                   CUDA_PATH=str(tmp_path / "toolkit"))
    assert r.returncode == 0, r.stderr
    opened, search = r.stdout.strip().splitlines()
    assert opened == str(site / "nvidia" / "cudnn" / "lib" / "libstandin_cudnn.so.9")
    nvidia = site / "nvidia"
    assert search == (f"already loaded, $LD_LIBRARY_PATH, {nvidia}/cu13/lib, {nvidia}/cudnn/lib, "
                      f"the system's library path, {tmp_path}/toolkit/lib64"), search


def test_a_missing_library_is_one_line_naming_where_it_looked(site, tmp_path):
    r = run_python("from oneflow import _oneflow_internal as C; "
                   "C.cuda_open_library('libnot_there.so.3')", site,
                   CUDA_PATH=str(tmp_path / "toolkit"))
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    nvidia = site / "nvidia"
    assert (f"cuda: cannot load libnot_there.so.3: looked in already loaded, $LD_LIBRARY_PATH, "
            f"{nvidia}/cu13/lib, {nvidia}/cudnn/lib, the system's library path, "
            f"{tmp_path}/toolkit/lib64 (libnot_there.so.3: cannot open shared object file") in last, \
        last


def test_ld_library_path_wins_over_the_pip_folders(site, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(ZLIB, mine / "libstandin_cudnn.so.9")
    r = run_python("from oneflow import _oneflow_internal as C; "
                   "print(C.cuda_open_library('libstandin_cudnn.so.9'))", site,
                   LD_LIBRARY_PATH=str(mine))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(mine / "libstandin_cudnn.so.9")


def test_without_the_folder_on_sys_path_the_library_is_not_found(site, tmp_path):
    """The search is what finds it: the same library name without the site-packages folder."""
    r = run_python("from oneflow import _oneflow_internal as C; "
                   "C.cuda_open_library('libstandin_cudnn.so.9')", tmp_path / "elsewhere",
                   CUDA_PATH=str(tmp_path / "toolkit"))
    assert r.returncode != 0
    assert "cuda: cannot load libstandin_cudnn.so.9" in r.stderr, r.stderr
