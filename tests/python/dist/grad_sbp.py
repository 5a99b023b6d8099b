"""to_global(..., grad_sbp=): the result's gradient takes grad_sbp in the backward pass; the
input's gradient is unchanged in value."""
import numpy as np

import oneflow as flow
from device import DEVICE  # noqa: E402

rank = flow.env.get_rank()
P = flow.placement(DEVICE, ranks=[0, 1])
seen = []
x = flow.tensor(np.arange(8, dtype=np.float32).reshape(4, 2) + rank, requires_grad=True)
y = x.to_global(placement=P, sbp=flow.sbp.broadcast, grad_sbp=flow.sbp.split(0))
y.register_hook(lambda g: seen.append(g.sbp) or g)
(y * y).sum().backward()
# the hook registered after the grad_sbp one sees the gradient already split(0)
assert seen == [(flow.sbp.split(0),)], seen
want = 2 * (np.arange(8, dtype=np.float32).reshape(4, 2) + 0)  # broadcast takes rank 0's data
assert np.allclose(x.grad.numpy(), want), (x.grad.numpy(), want)
try:
    flow.ones(2).to_global(placement=P, sbp=flow.sbp.broadcast, grad_sbp=flow.sbp.split(0))
except ValueError as e:
    assert "to_global: grad_sbp was given but the result does not require grad" in str(e)
else:
    raise AssertionError("no error")
print(f"rank {rank} ok grad_sbp")
