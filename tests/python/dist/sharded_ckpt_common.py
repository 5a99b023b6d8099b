"""Shared by the sharded checkpoint scripts: one small model, the layouts it is placed in and a
flattening of nested state dicts for comparisons."""

import collections

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from device import DEVICE  # noqa: E402

S0, S1, B = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast


class MLP(nn.Module):
    # fc1 has 10 outputs: split over 4 ranks they are uneven (3, 3, 2, 2).
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 10)
        self.fc2 = nn.Linear(10, 5)
        self.register_buffer("scale", flow.arange(5, dtype=flow.float32) + 0.5)
        self.register_buffer("count", flow.tensor(7, dtype=flow.int64))

    def forward(self, x):
        return self.fc2(flow.relu(self.fc1(x))) * self.scale


# name -> (ranks, {parameter or buffer: sbp}); unnamed tensors are broadcast.
LAYOUTS = {
    # Megatron style: fc1 column parallel (weight S(0)), fc2 row parallel (weight S(1)).
    "tp4": ([0, 1, 2, 3], {"fc1.weight": [S0], "fc1.bias": [S0], "fc2.weight": [S1]}),
    "tp2": ([0, 1], {"fc1.weight": [S1], "fc2.weight": [S0], "scale": [S0]}),
    "dp2": ([0, 1], {}),
    "mesh": ([[0, 1], [2, 3]], {"fc1.weight": [S0, S1], "fc1.bias": [B, S0],
                                "fc2.weight": [S1, S0], "scale": [S0, B]}),
}


def make(seed, layout=None):
    """The model with weights from seed, in one process (layout None) or placed by layout."""
    flow.manual_seed(seed)
    m = MLP()
    if layout is None:
        return m
    ranks, sbps = LAYOUTS[layout]
    P = flow.placement(DEVICE, ranks=ranks)
    nb = len(P.hierarchy)
    m = m.to_global(placement=P, sbp=[B] * nb)
    for name, sbp in sbps.items():
        owner, _, leaf = name.rpartition(".")
        mod = m.get_submodule(owner) if owner else m
        if leaf in mod._parameters:
            setattr(mod, leaf, nn.Parameter(getattr(mod, leaf).to_global(sbp=sbp)))
        else:
            mod._buffers[leaf] = mod._buffers[leaf].to_global(sbp=sbp)
    return m


def batch(layout=None):
    flow.manual_seed(123)
    x = flow.randn(8, 6)
    if layout is None:
        return x
    ranks = LAYOUTS[layout][0]
    P = flow.placement(DEVICE, ranks=ranks)
    return x.to_global(placement=P, sbp=[B] * len(P.hierarchy))


def flatten(obj, prefix=""):
    """{path: numpy array} for every tensor (or LazyTensor) in a nested object; numpy() of a
    global tensor is collective, so every rank calls this in the same order."""
    out = collections.OrderedDict()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}/"))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}{i}/"))
    elif isinstance(obj, flow.Tensor) or hasattr(obj, "_materialize_like"):
        out[prefix.rstrip("/")] = obj.numpy()
    return out


def same(a, b):
    """Bit-identical arrays (float NaNs compare by their bytes)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
