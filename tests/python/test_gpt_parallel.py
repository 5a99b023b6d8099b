"""examples/gpt.py under every layout: real processes through the launcher, each layout trained
10 steps to the losses and parameters of one-process training from the same weights
(tests/python/dist/gpt_parallel.py), the tensor-parallel boxing plan of one block, sharded
checkpoints that change layout, and the one-line errors of layouts that cannot work."""

import os
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn as nn
from oneflow.utils.checkpoint import checkpoint
from test_comm import DIST, ROOT, env_with, free_port, launch

sys.path.insert(0, os.path.join(ROOT, "examples"))
import gpt  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.isdir(gpt.FORTUNES),
                                reason=f"Debian's fortunes package is not installed ({gpt.FORTUNES})")

N, V = 4 * 16, 120  # tokens of a batch, vocabulary (113 characters padded to a multiple of 8)


def ok_lines(out):
    return sorted(l.split("] ", 1)[-1] for l in out.splitlines() if l.endswith(" ok"))


def run(nproc, *args, **env):
    return launch("--nproc_per_node", nproc, "--master_port", free_port(),
                  os.path.join(DIST, "gpt_parallel.py"), *args, timeout=300,
                  env=env_with(ONEFLOW_TIMEOUT_SECONDS="60", **env))


def expected(nproc, specs, extra=()):
    return sorted([f"rank {k} of {nproc} {s} ok" for k in range(nproc) for s in specs]
                  + [f"rank {k} of {nproc} {e} ok" for k in range(nproc) for e in extra])


@pytest.fixture(scope="module")
def tp4(tmp_path_factory):
    """Tensor parallel on 4 ranks (activation checkpointing on) and the 2 x 2 mesh (without and
    with activation checkpointing), each against
    one process; the tensor-parallel model saved sharded."""
    folder = str(tmp_path_factory.mktemp("gpt") / "tp4")
    r = run(4, "tp:ckpt,dp_tp,dp_tp:ckpt", "--save", folder)
    return r, folder


def test_tensor_parallel_on_4_ranks_and_the_2x2_mesh_train_like_one_process(tp4):
    r, _ = tp4
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == expected(4, ["tp:ckpt", "dp_tp", "dp_tp:ckpt"], ["saved"])


def _state_bytes(out, spec):
    return {int(m.group(1)): int(m.group(2)) for m in
            re.finditer(rf"rank (\d+) {re.escape(spec)} optimizer state (\d+) bytes", out)}


def test_dp_zero_and_pipeline_on_2_ranks_train_like_one_process_and_load_the_tp_checkpoint(tp4):
    _, folder = tp4
    r = run(2, "pp,pp:ckpt,zero:ckpt,dp", "--load", folder)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == expected(2, ["pp", "pp:ckpt", "zero:ckpt", "dp"], ["loaded"])
    # ZeRO: every rank holds half of the AdamW state that data parallel holds whole.
    dp, zero = _state_bytes(r.stdout, "dp"), _state_bytes(r.stdout, "zero:ckpt")
    assert sorted(dp) == sorted(zero) == [0, 1]
    assert sum(zero.values()) == dp[0] == dp[1] and zero[0] == zero[1]
    assert re.search(r"rank 1 pp:ckpt bubble [0-9.]+ ideal 0\.200", r.stdout), r.stdout


def _cuda_env():
    """A GPU where one is usable, else the stand-in CUDA device (ONEFLOW_FAKE_CUDA=1)."""
    return {} if flow.cuda.is_available() else {"ONEFLOW_FAKE_CUDA": "1"}


def test_every_layout_on_cuda_placements_trains_like_one_process(tmp_path):
    # The same model code and checks on cuda placements: every tensor an op, a hook or the
    # optimizer makes must land on the rank's GPU (on the stand-in device without a GPU).
    r = run(2, "dp,tp,zero,pp", "--cuda", **_cuda_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == expected(2, ["dp", "tp", "zero", "pp"])
    folder = str(tmp_path / "dp_tp")
    r = run(4, "dp_tp", "--cuda", "--save", folder, **_cuda_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == expected(4, ["dp_tp"], ["saved"])
    # Saved sharded from cuda placements, read back in one CPU process (as torch.load, tensors
    # go back to the device they were saved from unless map_location says otherwise).
    whole, state = np.load(folder + ".npz"), flow.load(folder, map_location="cpu")
    assert sorted(state) == sorted(whole.files)
    for name in whole.files:
        assert state[name].device == flow.device("cpu")
        assert np.array_equal(state[name].numpy(), whole[name]), name


def test_one_process_loads_the_tp_checkpoint_bit_identically(tp4):
    _, folder = tp4
    whole = np.load(folder + ".npz")
    state = flow.load(folder)
    assert sorted(state) == sorted(whole.files)
    model = gpt.GPT(V, 16, 2, 4, 32)
    model.load_state_dict(state)
    for name, value in model.state_dict().items():
        assert not value.is_global and np.array_equal(value.numpy(), whole[name]), name


def _plans(err, rank=0):
    """The boxing plans ONEFLOW_DEBUG_BOXING printed on rank's stderr, with the marker lines:
    ('== ...' or (shape, [collective steps]))."""
    out, cur = [], None
    for line in err.splitlines():
        if not line.startswith(f"[rank {rank}] "):
            continue
        line = line.split("] ", 1)[1]
        m = re.match(r"\[boxing\] \(.*\) -> \(.*\) of \((.*)\):$", line)
        if m:
            shape = tuple(int(d) for d in m.group(1).replace(",", " ").split())
            cur = (shape, [])
            out.append(cur)
        elif line.startswith("== "):
            out.append(line)
            cur = None
        elif cur is not None and " over " in line:
            if "local" not in line:
                cur[1].append(line.split(" over ")[0])
        else:
            cur = None
    return out


def _between(plans, start, end):
    i, j = plans.index(start), plans.index(end)
    return Counter((step, shape) for shape, steps in plans[i + 1:j] for step in steps)


def test_the_tensor_parallel_plan_is_megatrons_and_never_gathers_the_logits():
    r = run(2, "tp,tp+zero", "--probe", ONEFLOW_DEBUG_BOXING="1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == expected(2, ["tp", "tp+zero"])
    plans = _plans(r.stderr)
    # Forward of a block: one all-reduce per sub-block (the partial sums of the row-parallel
    # c_proj, reduced where the next LayerNorm needs whole features); nothing else moves.
    assert _between(plans, "== block forward ==", "== block backward ==") == Counter(
        {("P->B: all_reduce", (4, 16, 32)): 2})
    # Backward: one all-reduce per sub-block of the input gradient (the column-parallel
    # layers' partial sums), and one bucket for the LayerNorms' weight and bias gradients
    # (4 x 32 values, reduced together when the pass ends).
    assert _between(plans, "== block backward ==", "== end ==") == Counter(
        {("P->B: all_reduce", (4, 16, 32)): 2, ("P->B: all_reduce", (128,)): 1})
    # Ten training steps of each layout: no collective moves a tensor of N x V elements (the logits).
    training = plans[:plans.index("== block forward ==")]
    moved = [(shape, steps) for shape, steps in training if steps]
    assert moved and all(int(np.prod(shape)) < N * V for shape, _ in moved), \
        [m for m in moved if int(np.prod(m[0])) >= N * V]
    # The split-vocabulary cross-entropy moves (B, T, ranks) maxima and (B, T) sums.
    kinds = Counter((s, shape) for shape, steps in training for s in steps)
    assert kinds[("S(2)->B: all_gather", (4, 16, 2))] == 20
    assert kinds[("P->B: all_reduce", (4, 16))] == 20


@pytest.mark.parametrize("parallel,world,n_head,vocab,message", [
    ("tp", 2, 3, 120, "gpt.py: --parallel tp: n_head 3 is not divisible by the tensor-parallel "
                      "size 2 (each rank needs whole heads)"),
    ("tp", 4, 4, 114, "gpt.py: --parallel tp: the vocabulary of 114 is not divisible by the "
                      "tensor-parallel size 4 (pad it with --vocab_multiple)"),
    ("dp_tp", 4, 2, 120, None),
    ("dp_tp", 2, 4, 120, "gpt.py: --parallel dp_tp needs a mesh of at least 2 x 2: 2 ranks with "
                         "--tp 2"),
    ("pp", 2, 4, 120, "gpt.py: --parallel pp puts the token embedding and the head on different "
                      "stages, so they cannot share a tied weight; pass --untied"),
    ("pp", 3, 4, 120, "gpt.py: --parallel pp runs 2 stages on an even number of ranks, got 3"),
    ("pp+zero", 2, 4, 120, "gpt.py: --parallel pp+zero: zero composes with dp, tp and dp_tp, not "
                           "with pp"),
    ("none", 2, 4, 120, "gpt.py: --parallel none runs in one process, got 2 ranks"),
    ("mp", 2, 4, 120, "gpt.py: --parallel must be one of ('none', 'dp', 'tp', 'dp_tp', 'pp', "
                      "'zero') or a base layout joined with '+zero', got 'mp'"),
])
def test_layouts_that_cannot_work_say_why_in_one_line(parallel, world, n_head, vocab, message):
    if message is None:  # a 2 x 2 mesh of 2 heads: works
        assert gpt.Layout(parallel, world, n_head, vocab).tp == 2
        return
    with pytest.raises(ValueError) as e:
        gpt.Layout(parallel, world, n_head, vocab)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_gpt_py_exits_with_the_message_under_the_launcher():
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(ROOT, "examples", "gpt.py"), "--parallel", "tp", "--n_head", "3",
               "--steps", "1", timeout=120)
    assert r.returncode != 0
    assert "gpt.py: --parallel tp: n_head 3 is not divisible by the tensor-parallel size 2" \
        in r.stdout + r.stderr


def _gpt_py(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "examples", "gpt.py"), *args],
                          env=env_with(), capture_output=True, text=True, timeout=120)


def test_one_process_prints_loss_tokens_per_second_validation_and_a_sample():
    r = _gpt_py("--steps", "2", "--eval_interval", "2", "--sample_tokens", "5", "--n_embd", "32",
                "--block_size", "16", "--batch_size", "4")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"step 0: loss [0-9.]+, \d+ tokens/s", lines[1]), lines
    assert re.fullmatch(r"step 1: validation loss [0-9.]+ \| sample: '.+'", lines[3]), lines


def test_a_missing_fortunes_package_is_one_line():
    r = _gpt_py("--data", "/nonexistent/fortunes")
    assert r.returncode != 0
    assert r.stderr.strip() == ("gpt.py: no fortune databases at /nonexistent/fortunes; install "
                                "Debian's fortunes package (apt-get install fortunes)")


def test_the_data_reads_the_databases_not_their_indexes_and_holds_out_the_last_tenth():
    text = gpt.read_fortunes()
    with open(os.path.join(gpt.FORTUNES, "fortunes"), encoding="utf-8", errors="replace") as f:
        assert f.read() in text
    data = gpt.CharData(text)
    assert len(data.chars) < data.vocab_size <= len(data.chars) + 7 and data.vocab_size % 8 == 0
    assert len(data.val) == len(text) - int(0.9 * len(text))
    assert data.decode(data.val[:50].tolist()) == text[int(0.9 * len(text)):][:50]


def test_activation_checkpointing_gives_the_gradients_of_the_plain_forward():
    grads = []
    for recompute in (False, True):
        model = gpt.GPT(V, 16, 2, 4, 32, recompute=recompute)
        gpt.init_weights(model)
        x = flow.tensor(np.arange(64).reshape(4, 16) % V)
        _, loss = model(x, (x + 1) % V)
        loss.backward()
        grads.append({n: p.grad.numpy() for n, p in model.named_parameters()})
    for name, g in grads[0].items():
        assert np.allclose(g, grads[1][name], atol=1e-6), name
    # No input requires grad: the parameters inside still get theirs (use_reentrant=False's
    # behaviour), the same as without checkpointing.
    lin = nn.Linear(2, 2)
    x = flow.randn(3, 2)
    checkpoint(lin, x).square().sum().backward()
    got = lin.weight.grad.numpy().copy()
    lin.zero_grad()
    lin(x).square().sum().backward()
    assert np.allclose(got, lin.weight.grad.numpy(), atol=1e-6)
    with pytest.raises(TypeError, match="checkpoint: function must be callable, got int"):
        checkpoint(3, x)


def test_checkpoint_sequential_gives_the_gradients_of_the_plain_forward():
    from oneflow.utils.checkpoint import checkpoint_sequential
    flow.manual_seed(3)
    seq = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    x = flow.randn(5, 4, requires_grad=True)
    (checkpoint_sequential(seq, 2, x) ** 2).sum().backward()
    got = [p.grad.numpy().copy() for p in seq.parameters()] + [x.grad.numpy().copy()]
    seq.zero_grad()
    x.grad = None
    (seq(x) ** 2).sum().backward()
    want = [p.grad.numpy() for p in seq.parameters()] + [x.grad.numpy()]
    assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(got, want))
    with pytest.raises(ValueError, match=r"checkpoint_sequential: segments must be an int in "
                                         r"\[1, 5\] \(the number of functions\), got 0"):
        checkpoint_sequential(seq, 0, x)
