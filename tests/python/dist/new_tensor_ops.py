"""flow.new_zeros / new_empty of a global tensor keep its placement and sbp; flow.linspace takes
placement and sbp (OneFlow's test_global_constant / empty / linspace)."""
import oneflow as flow, numpy as np
from device import DEVICE  # noqa: E402
P = flow.placement(DEVICE, ranks=[0, 1])
x = flow.zeros(4, 6, placement=P, sbp=flow.sbp.split(0))
y = flow.new_zeros(x)
assert y.placement == P and y.sbp == (flow.sbp.split(0),) and tuple(y.shape) == (4, 6)
z = flow.new_empty(x, size=(4, 2))
assert z.sbp == (flow.sbp.split(0),) and tuple(z.shape) == (4, 2)
l = flow.linspace(start=-10, end=10, steps=8, placement=P, sbp=flow.sbp.split(0))
assert np.allclose(l.numpy(), np.linspace(-10, 10, 8)), l.numpy()
w = flow.new_zeros(flow.ones(3, dtype=flow.int64), (2,))
assert w.dtype == flow.int64 and w.is_local and tuple(w.shape) == (2,)
rank = flow.env.get_rank()
print(f"rank {rank} ok new")
# Tensor.new_full / new_zeros with placement and sbp, and on a global tensor (OneFlow's
# test_global_constant::_test_global_new_full)
f = flow.ones(4, 3).new_full((4, 3), 2.5, placement=P, sbp=flow.sbp.split(1))
assert f.sbp == (flow.sbp.split(1),) and np.allclose(f.numpy(), np.full((4, 3), 2.5))
g = x.new_ones((6,))
assert g.placement == P and g.sbp == (flow.sbp.split(0),) and np.allclose(g.numpy(), 1)
print(f"rank {rank} ok new methods")
