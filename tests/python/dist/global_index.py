"""Global tensors indexed with local index tensors (every rank passing the same ones), under
broadcast and split layouts: values and gradients against numpy; a global mask selects as numpy
does. Prints "rank R index ok"."""

import numpy as np

import oneflow as flow
from device import DEVICE  # noqa: E402

P = flow.placement(DEVICE, ranks=list(range(flow.env.get_world_size())))
B, S = flow.sbp.broadcast, flow.sbp.split
a = np.arange(24, dtype=np.float32).reshape(4, 6)
indices = [
    (np.array([3, 0, 3]),),
    (slice(None), np.array([5, 1])),
    (np.array([0, 1]), np.array([2, 3])),
    (a[:, 0] > 5,),
]
for sbp in [B, S(0), S(1)]:
    for index in indices:
        flow_index = tuple(flow.tensor(i) if isinstance(i, np.ndarray) else i for i in index)
        x = flow.tensor(a).to_global(placement=P, sbp=B).to_global(sbp=sbp)
        x.requires_grad_(True)
        y = x[flow_index]
        want = a[index]
        np.testing.assert_array_equal(y.detach().to_global(sbp=B).to_local().numpy(), want)
        (y * 2).sum().backward()
        grad = np.zeros_like(a)
        np.add.at(grad, index, 2.0)
        np.testing.assert_array_equal(x.grad.to_global(sbp=B).to_local().numpy(), grad)
# A global mask (OneFlow takes global index tensors on global tensors): the selected values.
m = x.detach()
np.testing.assert_array_equal(m[m > 3].to_global(sbp=B).to_local().numpy(), a[a > 3])
try:
    y = x.detach()
    y[flow.tensor([0])] = 1.0
    raise AssertionError("a write through an index tensor into a global tensor was accepted")
except IndexError as e:
    assert "__setitem__: index tensors on a global tensor are not supported" in str(e), e
try:
    flow.nonzero(x.detach())
    raise AssertionError("nonzero of a global tensor was accepted")
except RuntimeError as e:
    assert "nonzero: not supported on a global tensor" in str(e), e
print(f"rank {flow.env.get_rank()} index ok", flush=True)
