"""flow.utils.tensorboard.SummaryWriter: its event files read back by PyPI's tensorboard (its
event accumulator, in a virtual environment tools/tensorboard_venv.sh makes once), the framing
checked against CRC-32C's published check value, and the one-line refusals."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import oneflow as flow
from oneflow.utils.tensorboard import SummaryWriter
from oneflow.utils.tensorboard._record import crc32c, masked_crc32c

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs in tensorboard's environment: every scalar, histogram and text event of a run folder.
READER = r"""
import json, sys
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.util import tensor_util
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0,
                                                     ea.TENSORS: 0})
acc.Reload()
tags = acc.Tags()
out = {"scalars": {}, "histograms": {}, "tensors": {}}
for t in tags["scalars"]:
    out["scalars"][t] = [[e.step, e.value] for e in acc.Scalars(t)]
for t in tags["histograms"]:
    out["histograms"][t] = [[e.step, e.histogram_value.min, e.histogram_value.max,
                             e.histogram_value.num, e.histogram_value.sum,
                             e.histogram_value.sum_squares, list(e.histogram_value.bucket_limit),
                             list(e.histogram_value.bucket)] for e in acc.Histograms(t)]
for t in tags["tensors"]:
    out["tensors"][t] = [[e.step, [v.decode() for v in tensor_util.make_ndarray(e.tensor_proto).reshape(-1)]]
                         for e in acc.Tensors(t)]
out["graph"] = None
if tags["graph"]:
    out["graph"] = [[n.name, n.op, list(n.input),
                     {k: (v.s.decode() if v.HasField("s") else
                          [[d.size for d in shape.dim] for shape in v.list.shape])
                      for k, v in n.attr.items()}] for n in acc.Graph().node]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def tensorboard_python():
    r = subprocess.run([os.path.join(ROOT, "tools", "tensorboard_venv.sh")], capture_output=True,
                       text=True, timeout=900)
    if r.returncode == 3:
        pytest.skip("PyPI cannot be reached: tensorboard (the reference reader) not installed")
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip().splitlines()[-1]


def read_back(python, folder):
    r = subprocess.run([python, "-c", READER, str(folder)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_crc32c_check_value_and_mask():
    # RFC 3720's CRC-32C check value, and TensorFlow's mask of it.
    assert crc32c(b"123456789") == 0xE3069283
    c = 0xE3069283
    assert masked_crc32c(b"123456789") == (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_scalars_histogram_text_read_back_by_tensorboard(tmp_path, tensorboard_python):
    rng = np.random.default_rng(0)
    values = rng.normal(size=1000)
    with SummaryWriter(str(tmp_path)) as w:
        for step in range(5):
            w.add_scalar("loss", 1.0 / (step + 1), step)
            w.add_scalar("lr", flow.tensor(0.1 * step), step)  # a one-element tensor
        w.add_scalars("run", {"a": 1.5, "b": -2.0}, 7)
        w.add_histogram("weights", flow.tensor(values.astype(np.float32)), 3)
        w.add_histogram("ints", np.array([1, 2, 2, 3, 3, 3]), 4, bins=3)
        w.add_text("note", "hello tensorboard", 2)
    got = read_back(tensorboard_python, tmp_path)
    assert got["scalars"]["loss"] == [[s, pytest.approx(1.0 / (s + 1), rel=1e-6)] for s in range(5)]
    assert [s for s, _ in got["scalars"]["lr"]] == list(range(5))
    assert [v for _, v in got["scalars"]["lr"]] == pytest.approx([0.1 * s for s in range(5)],
                                                                  rel=1e-6)
    step, lo, hi, num, total, sq, limits, buckets = got["histograms"]["weights"][0]
    v32 = values.astype(np.float32).astype(np.float64)
    assert (step, num) == (3, 1000)
    assert lo == pytest.approx(v32.min()) and hi == pytest.approx(v32.max())
    assert total == pytest.approx(v32.sum()) and sq == pytest.approx((v32 * v32).sum())
    assert sum(buckets) == 1000 and len(limits) == len(buckets)
    counts, edges = np.histogram([1, 2, 2, 3, 3, 3], bins=3)
    _, _, _, _, _, _, limits, buckets = got["histograms"]["ints"][0]
    assert buckets == counts.tolist() and limits == pytest.approx(edges[1:].tolist())
    assert got["tensors"]["note/text_summary"] == [[2, ["hello tensorboard"]]]
    # add_scalars: one run folder per curve, the main tag inside, as PyTorch writes them.
    for key, value in (("a", 1.5), ("b", -2.0)):
        sub = read_back(tensorboard_python, tmp_path / f"run_{key}")
        assert sub["scalars"]["run"] == [[7, value]]


def test_refusals_are_one_line(tmp_path):
    w = SummaryWriter(str(tmp_path))
    with pytest.raises(ValueError, match=r"add_scalar\('x'\): expected a number or a one-element "
                       r"tensor, got a tensor of shape \(2,\)"):
        w.add_scalar("x", flow.tensor([1.0, 2.0]), 0)
    with pytest.raises(TypeError, match=r"SummaryWriter.add_graph: expected an nn.Graph, got "
                       r"Linear \(wrap a Module in an nn.Graph to write its graph\)"):
        w.add_graph(flow.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="add_scalar: global_step must be an integer, got 1.5"):
        w.add_scalar("x", 1.0, 1.5)
    with pytest.raises(ValueError, match=r"add_histogram\('h'\): the values contain inf or NaN"):
        w.add_histogram("h", [1.0, float("nan")], 0)
    w.close()
    with pytest.raises(RuntimeError, match="SummaryWriter: the writer was closed"):
        w.add_scalar("x", 1.0, 0)
    with pytest.raises(ValueError, match="SummaryWriter: purge_step is not supported"):
        SummaryWriter(str(tmp_path), purge_step=3)


def test_graph_of_an_nn_graph_read_back_by_tensorboard(tmp_path, tensorboard_python):
    class Net(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = flow.nn.Linear(4, 8)
            self.l2 = flow.nn.Linear(8, 2)

        def forward(self, x):
            return self.l2(flow.relu(self.l1(x)))

    net = Net()
    opt = flow.optim.SGD(net.parameters(), lr=0.1)

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.net = net
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.net(x).sum()
            loss.backward()
            return loss

    train = Train()
    with pytest.raises(ValueError, match="SummaryWriter.add_graph: the graph has not run yet; "
                       "call it once or pass input_to_model"):
        SummaryWriter(str(tmp_path / "none")).add_graph(train)
    w = SummaryWriter(str(tmp_path))
    w.add_graph(train, flow.randn(3, 4))
    w.close()
    nodes = read_back(tensorboard_python, tmp_path)["graph"]
    assert nodes is not None, "tensorboard found no graph in the event file"
    by_name = {name: (op, inputs, attrs) for name, op, inputs, attrs in nodes}
    assert len(by_name) == len(nodes)  # names are unique
    for name, (op, inputs, attrs) in by_name.items():
        for i in inputs:
            assert i in by_name, f"{name} reads {i}, which is no node"
    assert by_name["input/0"][0] == "Input" and by_name["input/0"][2]["_output_shapes"] == [[3, 4]]
    consts = sorted(attrs["_output_shapes"][0] for name, (op, _, attrs) in by_name.items()
                    if op == "Const" and attrs["dtype"] == "float32")
    assert consts == sorted([[8, 4], [8], [2, 8], [2]])  # the parameters
    ops = [op for op, _, _ in by_name.values()]
    assert ops.count("sgd_update") == 4 and "relu_grad" in ops
    # The modules' names are name scopes: TensorBoard folds net/l2/... into one box.
    l2 = [name for name, (op, _, _) in by_name.items() if op == "linear"]
    assert l2 and all(name.startswith("net/l2/") for name in l2)
    # The output is the loss: a sum over the second linear's output.
    (loss,) = by_name["output/0"][1]
    assert by_name[loss][0] == "sum" and by_name[loss][1] == l2


def test_gpt_example_writes_losses(tmp_path, tensorboard_python):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "gpt.py"), "--steps", "3",
                        "--n_layer", "1", "--n_embd", "32", "--batch_size", "4", "--block_size",
                        "16", "--eval_interval", "0", "--tensorboard", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    printed = [float(l.split("loss ")[1].split(",")[0]) for l in r.stdout.splitlines()
               if l.startswith("step ") and ": loss " in l]
    got = read_back(tensorboard_python, tmp_path)
    assert [s for s, _ in got["scalars"]["train/loss"]] == [0, 1, 2]
    assert [v for _, v in got["scalars"]["train/loss"]] == pytest.approx(printed, abs=1e-4)
    assert len(got["scalars"]["train/tokens_per_s"]) == 3
