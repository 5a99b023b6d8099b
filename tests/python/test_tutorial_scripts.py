"""Tutorial scripts as their users run them, on 2 ranks through the launcher:

* OneFlow's global-tensor data-parallel tutorial (flowvision CIFAR10 + mobilenet_v2) copied as
  published (placement "cuda": the stand-in CUDA device without a GPU), on CIFAR-10 files in the
  python-version layout;
* PyTorch's DDP tutorial main.py under oneflow.mock_torch, whose result equals one-process
  training on the same data;
* the main job's progress bar on a terminal.
"""
import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import numpy as np

import oneflow as flow
from oneflow.utils.vision.fake_data import write_fake_cifar10
from test_comm import ROOT, env_with, free_port

TUTORIALS = os.path.join(ROOT, "tests", "python", "tutorials")


def rank_lines(out, rank):
    prefix = f"[rank {rank}] "
    return [l[len(prefix):] for l in out.splitlines() if l.startswith(prefix)]


def test_oneflow_global_tensor_tutorial_trains_on_two_ranks(tmp_path):
    # 5 x 65 training images: 6 batches of 64 per rank, so the tutorial prints batches 0 and 5.
    write_fake_cifar10(tmp_path / "data", n_per_batch=65, seed=0, layout="python")
    cmd = [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node", "2", "--master_port",
           str(free_port()), os.path.join(TUTORIALS, "global_tensor_ddp.py")]
    # Its placement is "cuda", as published: a GPU where one is usable, else the stand-in CUDA
    # device (host memory, CPU kernels; core/device.h), so this runs everywhere.
    env = env_with() if flow.cuda.is_available() else env_with(ONEFLOW_FAKE_CUDA="1")
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for rank in (0, 1):
        lines = rank_lines(r.stdout, rank)
        assert lines[:3] == ["Using cuda device", "Epoch 1", "-------------------------------"], lines
        losses = [re.fullmatch(r"loss: (\d+\.\d{6})  \[ {0,4}(\d+)/  325\]", l) for l in lines[3:]]
        assert all(losses) and [int(m.group(2)) for m in losses] == [0, 320], lines
        values = [float(m.group(1)) for m in losses]
        if rank == 0:
            first = values
        else:
            assert values == first  # the loss is one global tensor: both ranks print its value
    # mobilenet_v2's 1000 outputs start near uniform (ln 1000 = 6.91), and SGD lowers the loss.
    assert 6.5 < first[0] < 7.3 and first[1] < first[0]


def test_pytorch_ddp_tutorial_under_mock_torch_equals_one_process(tmp_path):
    write_fake_cifar10(tmp_path / "data", n_per_batch=20, seed=1, layout="python")
    script = os.path.join(TUTORIALS, "pytorch_ddp", "main.py")
    common = f"{script} --data {tmp_path / 'data'} --epochs 2 --lr 0.02 --seed 3"
    mock_on = f'eval "$({sys.executable} -m oneflow.mock_torch)"'
    # As a PyTorch user starts it: python -m torch.distributed.launch (ours under the mock).
    two = subprocess.run(
        ["bash", "-c", f"{mock_on} && {sys.executable} -m torch.distributed.launch --nproc_per_node 2 "
                       f"--master_port {free_port()} {common} --batch_size 16 --save {tmp_path / 'two.pt'}"],
        env=env_with(), capture_output=True, text=True, timeout=240)
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    # One process with twice the batch: DistributedSampler's order does not depend on the
    # number of ranks, so each step sees the union of the two ranks' batches.
    one = subprocess.run(
        ["bash", "-c", f"{mock_on} && {sys.executable} -m oneflow.distributed.launch --nproc_per_node 1 "
                       f"--master_port {free_port()} {common} --batch_size 32 --save {tmp_path / 'one.pt'}"],
        env=env_with(OMP_NUM_THREADS=1), capture_output=True, text=True, timeout=240)
    assert one.returncode == 0, one.stdout[-3000:] + one.stderr[-3000:]

    assert rank_lines(two.stdout, 1) == []  # only rank 0 prints
    pattern = r"Epoch (\d)/2, loss: (\d+\.\d{6}), test accuracy: (\d\.\d{4})"
    got = [re.fullmatch(pattern, l) for l in rank_lines(two.stdout, 0)]
    want = [re.fullmatch(pattern, l) for l in rank_lines(one.stdout, 0)]
    assert all(got) and all(want) and len(got) == len(want) == 2, two.stdout + one.stdout
    for g, w in zip(got, want):
        assert g.group(1) == w.group(1) and g.group(3) == w.group(3)
        assert abs(float(g.group(2)) - float(w.group(2))) <= 2e-6
    a, b = flow.load(str(tmp_path / "two.pt")), flow.load(str(tmp_path / "one.pt"))
    assert list(a) == list(b) == ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight",
                                  "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
    for k in a:
        np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), rtol=0, atol=1e-5, err_msg=k)


def read_all(fd):
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other end closed
            return out
        if not chunk:
            return out
        out += chunk


def terminal():
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    return master, slave


def test_main_job_shows_a_progress_bar_on_a_terminal():
    digits = os.path.join(ROOT, "examples", "train_digits.py")
    # One process writing to a terminal: the bar and the epoch lines above it.
    master, slave = terminal()
    p = subprocess.Popen([sys.executable, digits, "--epochs", "12"], stdout=slave,
                         stderr=subprocess.PIPE, env=env_with())
    os.close(slave)
    shown = read_all(master).decode()
    p.wait(timeout=120)
    assert p.returncode == 0, p.stderr.read()
    assert re.search(r"train: 100%\|█+\| 540/540 \[", shown), shown[-500:]
    assert re.search(r"\repoch  12  loss \d\.\d{4}  train acc \d\.\d{4}", shown)
    assert shown.rstrip().endswith("test accuracy: " + shown.rstrip()[-6:])
    # Under the launcher a rank's stdout is a pipe: tools/main names the terminal instead. The
    # bar goes there; the launcher's output keeps the header and the result.
    master, slave = terminal()
    r = subprocess.run([sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node", "2",
                        "--master_port", str(free_port()), digits, "--epochs", "12"],
                       env=env_with(ONEFLOW_PROGRESS_TTY=os.ttyname(slave)), capture_output=True, text=True,
                       timeout=120)
    os.close(slave)
    shown = read_all(master).decode()
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("[rank 0] digits: ") and lines[1].startswith("[rank 0] test accuracy: ")
    assert re.search(r"train: 100%\|█+\| 276/276 \[", shown) and "epoch  12  loss" in shown, shown[-500:]
