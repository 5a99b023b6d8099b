"""OneFlow's global-tensor contract on 4 ranks (issue 20), each check printing '<name> ok':
local -> global with broadcast gives every rank the data of the placement's first rank, and
ranks outside the placement take its shape and dtype; ranks that disagree on shape or dtype get
one error naming the rank; numpy() of a global tensor is the whole value on every rank, also
outside the placement; S -> P into another placement leaves each piece zero-padded where
OneFlow's naive boxing puts it (its own rank when that is a destination, else destination
index % n); global_id and check_meta_consistency; numpy ranks for placements."""

import numpy as np

import oneflow as flow
from device import DEVICE  # noqa: E402

rank = flow.env.get_rank()
assert flow.env.get_world_size() == 4
B, P, S = flow.sbp.broadcast, flow.sbp.partial_sum, flow.sbp.split


def ok(name):
    print(f"rank {rank} {name} ok", flush=True)


# 1. broadcast data is synchronised from the placement's first rank (rank 1 here), and rank 0
#    and 3, outside, take its meta even though their local tensors differ.
local = flow.tensor(np.full((2, 3), rank, np.float32)) if rank in (1, 2) else flow.zeros(7, dtype=flow.int64)
g = local.to_global(placement=flow.placement(DEVICE, ranks=[1, 2]), sbp=B)
assert tuple(g.shape) == (2, 3) and g.dtype == flow.float32, (g.shape, g.dtype)
if rank in (1, 2):
    assert np.array_equal(g.to_local().numpy(), np.full((2, 3), 1, np.float32))
else:
    assert g.to_local().numpy().size == 0
# numpy() is the whole value on every rank (collective), also outside the placement
assert np.array_equal(g.numpy(), np.full((2, 3), 1, np.float32)), g.numpy()
ok("broadcast sync")

# 2. different shapes on the placement's ranks: one error on every rank, naming the rank
try:
    flow.ones(rank + 1, 2).to_global(placement=flow.placement.all(DEVICE), sbp=B)
    raise SystemExit("to_global accepted different shapes")
except Exception as e:  # noqa: BLE001
    msg = str(e)
    assert "to_global: rank 1 has a local tensor of shape (2, 2) float32 but rank 0 has (1, 2)" \
        in msg, msg
ok("meta check")

# 3. S(1) -> P into a containing placement: each rank keeps its own piece zero-padded (OneFlow's
#    EagerSToPKernel), nothing moves; into a disjoint one, piece i goes to destination i % n.
whole = np.arange(32, dtype=np.float32).reshape(4, 8)
src = flow.placement(DEVICE, ranks=[0, 1])
x = flow.tensor(whole).to_global(placement=src, sbp=B).to_global(sbp=S(1))
y = x.to_global(placement=flow.placement.all(DEVICE), sbp=P)
mine = y.to_local().numpy()
want = np.zeros_like(whole)
if rank in (0, 1):
    want[:, 4 * rank:4 * rank + 4] = whole[:, 4 * rank:4 * rank + 4]
assert np.array_equal(mine, want), (mine, want)
assert np.array_equal(y.numpy(), whole)
z = x.to_global(placement=flow.placement(DEVICE, ranks=[3, 2]), sbp=P)
want = np.zeros_like(whole)
if rank in (3, 2):
    i = [2, 3].index(rank)  # the placement orders its ranks; piece i goes to destination i
    want[:, 4 * i:4 * i + 4] = whole[:, 4 * i:4 * i + 4]
    assert np.array_equal(z.to_local().numpy(), want)
assert np.array_equal(z.numpy(), whole)
ok("s to p pieces")

assert flow.placement(DEVICE, ranks=[3, 2]).ranks.tolist() == [2, 3]
# 4. global_id: one tensor, one id (to_global to its own layout returns it); meta consistency
p01 = flow.placement(DEVICE, ranks=np.array([0, 1]))  # numpy ranks, as OneFlow accepts
a = flow.tensor(np.ones((4, 8), np.int32), dtype=flow.float32, placement=p01, sbp=[S(0)])
b = a.to_global(placement=p01, sbp=[S(0)])
assert a.global_id() == b.global_id()
c = a.to_global(sbp=B)
assert c.global_id() != a.global_id()
a.check_meta_consistency()
assert flow.placement(DEVICE, ranks=np.arange(4).reshape(2, 2)).ranks.tolist() == [[0, 1], [2, 3]]
ok("ids and placements")

# 5. view under a 2-D sbp: (8, 4) as (S(0), S(0)) on a 2x2 mesh viewed as (2, 4, 4) is
# (S(0), S(1)) with no boxing (each rank's rows are its piece of the view), and its values are
# the whole tensor's view.
mesh = flow.placement(DEVICE, ranks=[[0, 1], [2, 3]])
rows = np.arange(32, dtype=np.float32).reshape(8, 4)
v = flow.tensor(rows, placement=mesh, sbp=[S(0), S(0)]).view(2, 4, 4)
assert v.sbp == (S(0), S(1)), v.sbp
assert np.array_equal(v.to_local().numpy(), rows[2 * rank:2 * rank + 2].reshape(1, 2, 4))
assert np.array_equal(v.numpy(), rows.reshape(2, 4, 4))
ok("nd view")
