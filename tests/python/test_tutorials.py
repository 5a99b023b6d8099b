"""The data-parallel tutorial examples (PyTorch DDP, paddle.DataParallel, MindSpore data
parallel), each run through the launcher on two ranks over fake data."""

import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import oneflow as flow
from test_comm import DIST, ROOT, env_with, free_port, launch

EXAMPLES = os.path.join(ROOT, "examples")


def run_two_ranks(script, *args, timeout=180):
    return launch("--nproc_per_node", 2, "--master_port", free_port(),
                  os.path.join(EXAMPLES, script), *args, timeout=timeout)


def run_one_process(script, *args, timeout=180, env=None):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *map(str, args)],
                          env=env or env_with(), capture_output=True, text=True, timeout=timeout)


def rank_lines(out, rank):
    prefix = f"[rank {rank}] "
    return [l[len(prefix):] for l in out.splitlines() if l.startswith(prefix)]


def final_accuracy(lines, at_least):
    """The "final test accuracy" line's value, which must reach at_least (a figure the run
    reaches with margin on its fake data; chance is 0.1)."""
    found = [float(l.split(": ")[1]) for l in lines
             if re.fullmatch(r"final test accuracy: \d\.\d{4}", l)]
    assert len(found) == 1, lines
    assert found[0] >= at_least, f"final test accuracy {found[0]:.4f} < {at_least}: {lines}"
    return found[0]


# ------------------------------------------------------------------ lenet_ddp.py (PyTorch style)
def epoch_losses(lines):
    return [float(x) for l in lines for x in re.findall(r"\] done .* train loss: (\S+)", l)]


def eval_lines(lines):
    return [l.split("  loss")[0] for l in lines if l.startswith("Test: [")]


# (optimizer, learning rate, seed, shuffled): cases where one process with the doubled batch
# parts from the two ranks after a flip (see below). Fake data: chance is 0.1.
LENET_CASES = [
    ("adam", None, 2, True),    # doubled batch: parameters 2.2e-2 apart after 64 steps
    ("adam", None, 3, False),   # 2.6e-2 apart
    ("sgd", "0.02", 1, True),   # 5.8e-2 apart (0.02: the default 0.01 hardly learns in 64 steps)
    ("sgd", "0.02", 4, False),
]


@pytest.mark.parametrize("optimizer,lr,seed,shuffle", LENET_CASES)
def test_lenet_ddp_two_ranks_equal_their_steps_replayed_in_one_process(tmp_path, optimizer, lr, seed,
                                                                        shuffle):
    """Two ranks with batch 16 against one process replaying their steps (and against one
    process with batch 32, loosely).

    The replay (tests/python/dist/lenet_ddp_reference.py) puts each rank's batch through one
    model, sums the two gradients and halves them, as DDP's all-reduce does: the same kernels on
    the same shapes in the same order, so the two ranks must match it to the last bit, for any
    seed. SGD as well as Adam: Adam's step hardly changes when every gradient is scaled by the
    same factor, so only SGD's shows an average that divides by the wrong number.

    One process with the doubled batch takes the same steps only up to rounding (fc1's GEMM
    rounds differently for 16 and 32 rows, and it sums 32 per-sample gradients where DDP halves
    two sums of 16), and rounding does not stay small. Replaying both in one process and
    diffing every step (seeds 0..19, both orders), the first step where they part by more than
    rounding is one of: a max-pool window whose two largest inputs are within rounding of each
    other (top-2 gap <= 1e-7), or a ReLU input within rounding of 0 on one side and not the
    other (the window then picks a clipped 0 or not), either of which sends a sample's gradient
    to another input; or no discrete flip at all, Adam dividing a gradient near zero (~1e-9,
    below its eps of 1e-8) by its own tiny running norm, which turns a rounding difference of
    100% into a step difference of ~1e-5. Training then amplifies the difference to 1e-3..3e-2
    by step 64 in about one run in five with Adam (evaluation argmax ties never played a part:
    the accuracies agreed in every run), and further with SGD at a rate that learns in 64 steps
    (0.02: losses up to 5e-2 apart, accuracies up to 10%). So that comparison is made for Adam
    only, and loosely: epoch losses to 1e-2 and the final accuracy to 2.5% (measured: 2.5e-3
    and 0 over those 40 runs).
    """
    data = tmp_path / "cifar"
    common = ["--data", data, "--epochs", 2, "--seed", seed, "--print-freq", 5,
              "--optimizer", optimizer, *(["--lr", lr] if lr else []),
              *([] if shuffle else ["--no-shuffle"])]
    r = run_two_ranks("lenet_ddp.py", "--fake", *common, "--batch-size", 16,
                      "--output-dir", tmp_path / "two")
    assert r.returncode == 0, r.stdout + r.stderr
    rank0, rank1 = rank_lines(r.stdout, 0), rank_lines(r.stdout, 1)

    # setup_for_distributed: rank 1 prints only before it (the init line) and with force=True.
    assert rank1 == ["| distributed init (rank 1 of 2)", "rank 1: 64 steps on 1000 training samples"], rank1
    assert "rank 0: 64 steps on 1000 training samples" in rank0
    progress = [l for l in rank0 if l.startswith(("Epoch:", "Test:"))]
    assert sum(l.startswith("Epoch: [1]  [ 30/32]") for l in progress) == 1, progress
    assert "Start training: 1000 images, 500 per rank on 2 rank(s), batch 16 per rank" in rank0
    # The evaluation sums both ranks' counts: the whole test set.
    assert all(re.search(r"\(\d+/200\)", l) for l in rank0 if l.startswith("Test:"))
    two_acc = final_accuracy(rank0, 0.6)
    two = flow.load(str(tmp_path / "two" / "checkpoint.pt"))
    assert two["steps"] == 64

    # The replay: bit for bit. (The printed epoch losses to 1e-6 only: the example sums them
    # over ranks through flow.tensor([...], dtype=flow.float64), which today rounds Python
    # floats through float32 on the way in.)
    # One thread, like each launched rank: the same kernels' summation order.
    rr = run_one_process(os.path.join(DIST, "lenet_ddp_reference.py"), "--world", 2, "--fake", *common,
                         "--batch-size", 16, "--output-dir", tmp_path / "replay",
                         env=env_with(OMP_NUM_THREADS=1))
    assert rr.returncode == 0, rr.stdout + rr.stderr
    replay = rr.stdout.splitlines()
    assert len(epoch_losses(replay)) == 2
    np.testing.assert_allclose(epoch_losses(rank0), epoch_losses(replay), rtol=0, atol=1.01e-6)
    assert eval_lines(rank0) == eval_lines(replay), (rank0, replay)
    assert final_accuracy(replay, 0.6) == two_acc
    ref = flow.load(str(tmp_path / "replay" / "checkpoint.pt"))
    assert ref["steps"] == 64 and list(two["model"]) == list(ref["model"])
    for name, p in ref["model"].items():
        np.testing.assert_array_equal(two["model"][name].numpy(), p.numpy(), err_msg=name)

    if optimizer != "adam":
        return
    # One process over the same order with twice the batch takes the same steps up to rounding:
    # rank r's k-th batch holds positions 2*16*k + r, +2, ... of the epoch's permutation (seeded
    # with seed + epoch whatever the world size; the identity with --no-shuffle), and the union
    # of the two ranks' batches is the one-process batch k; DDP's average of two equal-sized
    # batch means is the mean over their union.
    r1 = run_one_process(os.path.join(EXAMPLES, "lenet_ddp.py"), *common, "--batch-size", 32,
                         "--output-dir", tmp_path / "one", env=env_with(OMP_NUM_THREADS=1))
    assert r1.returncode == 0, r1.stdout + r1.stderr
    one = r1.stdout.splitlines()
    assert one[0] == "Not using distributed mode"
    assert "rank 0: 64 steps on 2000 training samples" in one
    assert len(epoch_losses(one)) == 2
    np.testing.assert_allclose(epoch_losses(rank0), epoch_losses(one), rtol=0, atol=1e-2)
    assert abs(final_accuracy(one, 0.6) - two_acc) <= 0.025


def test_lenet_ddp_max_steps_stops_early(tmp_path):
    # 250 training images, 125 per rank in batches of 8: 16 steps an epoch; 40 steps stop in
    # the third epoch.
    r = run_two_ranks("lenet_ddp.py", "--fake", "--fake-per-batch", 50, "--data", tmp_path,
                      "--epochs", 5, "--batch-size", 8, "--max-steps", 40)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 1: 40 steps on 314 training samples" in rank_lines(r.stdout, 1)
    rank0 = rank_lines(r.stdout, 0)
    assert sum(l.startswith("Test:") for l in rank0) == 3  # stopped in the third epoch
    final_accuracy(rank0, 0.6)


# ------------------------------------------------------------------ paddle_cnn.py
def test_paddle_cnn_two_ranks_log_on_rank_zero(tmp_path):
    r = run_two_ranks("paddle_cnn.py", "--fake", "--fake-train", 600, "--data", tmp_path,
                      "--epochs", 1, "--batch-size", 16, "--log-every", 5, "--seed", 2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert rank_lines(r.stdout, 1) == []
    rank0 = rank_lines(r.stdout, 0)
    logs = [l for l in rank0 if l.startswith("epoch: ")]
    # 300 samples per rank in batches of 16: 19 batches (the last one short), logged every 5.
    assert [int(re.search(r"batch_id: (\d+),", l).group(1)) for l in logs] == [0, 5, 10, 15], logs
    log_format = r"epoch: 0, batch_id: \d+, loss is: \d+\.\d{5}, acc is: \d\.\d{4}"
    assert all(re.fullmatch(log_format, l) for l in logs), logs
    assert "19 steps on 2 rank(s), batch 16 per rank" in rank0
    final_accuracy(rank0, 0.8)


def test_paddle_cnn_drop_last_and_one_process(tmp_path):
    r = run_one_process("paddle_cnn.py", "--fake", "--fake-train", 300, "--data", tmp_path,
                        "--epochs", 1, "--batch-size", 16, "--drop-last", "--max-steps", 10)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "10 steps on 1 rank(s), batch 16 per rank" in lines
    final_accuracy(lines, 0.6)


# ------------------------------------------------------------------ mindspore_mlp.py
def test_mindspore_mlp_two_shards(tmp_path):
    # 601 samples: the shards are padded to 301 each, so both ranks take 9 steps of 32 per epoch.
    r = run_two_ranks("mindspore_mlp.py", "--fake", "--fake-train", 601, "--data", tmp_path,
                      "--epochs", 2, "--batch-size", 32, "--log-every", 4)
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in (0, 1):
        steps = [l for l in rank_lines(r.stdout, rank) if l.startswith("epoch: ")]
        assert [l.split(", loss")[0] for l in steps] == [
            f"epoch: {e}, step: {s}" for e in (0, 1) for s in (0, 4, 8)], steps
    # Each device logs the loss of its own shard: the two ranks' first losses differ.
    first = [next(l for l in rank_lines(r.stdout, k) if l.startswith("epoch: 0, step: 0,")) for k in (0, 1)]
    assert first[0] != first[1], first
    rank0 = rank_lines(r.stdout, 0)
    assert "18 steps per device on 2 device(s), batch 32 per device" in rank0, rank0
    final_accuracy(rank0, 0.8)
    assert not any("final test accuracy" in l for l in rank_lines(r.stdout, 1))


def test_mindspore_shards_like_num_shards_shard_id(tmp_path):
    from oneflow.utils.vision.fake_data import write_fake_mnist

    write_fake_mnist(tmp_path, n_train=7, n_test=3)
    spec = importlib.util.spec_from_file_location("mindspore_mlp", os.path.join(EXAMPLES, "mindspore_mlp.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shards = [module.create_dataset(tmp_path, 2, num_shards=3, shard_id=k).dataset.indices for k in range(3)]
    # Shard k: k, k+3, ...; the last round wraps to the start so that all shards have 3 samples.
    assert shards == [[0, 3, 6], [1, 4, 0], [2, 5, 1]]
    assert len(module.create_dataset(tmp_path, 2, num_shards=3, shard_id=0)) == 1  # drop_remainder


def test_mindspore_mlp_in_one_process(tmp_path):
    r = run_one_process("mindspore_mlp.py", "--fake", "--fake-train", 200, "--data", tmp_path,
                        "--epochs", 5, "--max-steps", 10)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "10 steps per device on 1 device(s), batch 32 per device" in lines
    final_accuracy(lines, 0.8)
