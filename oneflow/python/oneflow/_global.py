"""Global tensors in Python: flow.placement, flow.sbp and the Tensor methods around them.

    P = flow.placement("cpu", ranks=[0, 1])
    w = flow.randn(4, 4, placement=P, sbp=flow.sbp.broadcast)   # same values on every rank
    x = local_batch.to_global(placement=P, sbp=flow.sbp.split(0))
    y = x @ w                       # S(0) x B -> S(0)
    y.to_global(sbp=flow.sbp.broadcast).to_local()   # the whole y on every rank
"""

import functools
import types

import numpy as np

import oneflow as flow
import oneflow._oneflow_internal as _C

_SPLIT, _BROADCAST, _PARTIAL = 0, 1, 2


class _Sbp:
    __slots__ = ("kind", "axis")

    def __init__(self, kind, axis=-1):
        self.kind, self.axis = kind, axis

    def __call__(self):  # flow.sbp.broadcast() works like flow.sbp.broadcast
        return self

    def __eq__(self, other):
        return isinstance(other, _Sbp) and (self.kind, self.axis) == (other.kind, other.axis)

    def __hash__(self):
        return hash((self.kind, self.axis))

    def __repr__(self):
        if self.kind == _SPLIT:
            return f"oneflow.sbp.split(dim={self.axis})"
        return "oneflow.sbp.broadcast" if self.kind == _BROADCAST else "oneflow.sbp.partial_sum"

    def _pair(self):
        return (self.kind, self.axis)


def _split(dim):
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"sbp.split: dim must be an int, got {type(dim).__name__}")
    return _Sbp(_SPLIT, dim)


sbp = types.ModuleType("oneflow.sbp", "Split, broadcast and partial-sum layouts of global tensors.")
sbp.sbp = _Sbp
sbp.split = _split
sbp.broadcast = _Sbp(_BROADCAST)
sbp.partial_sum = _Sbp(_PARTIAL)


def _flatten(ranks):
    if isinstance(ranks, np.ndarray):  # numpy arrays and integers, as OneFlow accepts them
        ranks = ranks.tolist()
    if isinstance(ranks, np.integer):
        ranks = int(ranks)
    if isinstance(ranks, int):
        return [ranks], []
    rows = [int(r) if isinstance(r, np.integer) else r for r in ranks]
    if rows and all(isinstance(r, int) for r in rows):
        return rows, [len(rows)]
    flat, shape = [], None
    for r in rows:
        f, s = _flatten(r)
        if shape is not None and s != shape:
            raise ValueError(f"placement: ranks {ranks} are not a rectangular array")
        shape = s
        flat += f
    return flat, [len(rows)] + (shape or [])


class placement:
    """Where a global tensor lives: a device type and the ranks holding it, possibly as an n-D
    array (ranks=[[0, 1], [2, 3]] is a 2x2 mesh). The old form placement("cuda", {0: [0, 1]})
    means node 0, devices 0 and 1."""

    def __init__(self, type="cpu", ranks=None, hierarchy=None):
        if isinstance(type, str) and type not in ("cpu", "cuda"):
            raise ValueError(f"placement: type must be 'cpu' or 'cuda', got {type!r}")
        if ranks is None:
            raise ValueError("placement: ranks are required, e.g. placement('cpu', ranks=[0, 1])")
        if isinstance(ranks, dict):
            per_node = flow.env.get_local_world_size()
            flat = [int(node) * per_node + int(dev)
                    for node, devs in sorted(ranks.items()) for dev in devs]
            shape = [len(flat)]
        else:
            flat, shape = _flatten(ranks)
        if hierarchy is not None:
            shape = list(hierarchy)
        for r in flat:
            if not isinstance(r, int) or r < 0:
                raise ValueError(f"placement: ranks must be non-negative ints, got {r!r}")
        if len(set(flat)) != len(flat):
            raise ValueError(f"placement: a rank appears twice in {ranks}")
        # As OneFlow's ParallelDesc: parallel ids follow the sorted ranks, so ranks=[0, 2, 1, 3]
        # is the placement [0, 1, 2, 3] (the hierarchy keeps its shape).
        flat = sorted(flat)
        self._type, self._flat, self._hierarchy = type, flat, shape
        self._nested = self._nest(flat, shape)

    @staticmethod
    def _nest(flat, shape):
        if len(shape) <= 1:
            return list(flat)
        step = len(flat) // shape[0]
        return [placement._nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]

    @property
    def type(self):
        return self._type

    device_type = type

    @property
    def ranks(self):
        """The ranks as a numpy array shaped like the hierarchy (as in OneFlow)."""
        return np.array(self._flat, dtype=np.int64).reshape(self._hierarchy)

    @property
    def hierarchy(self):
        return tuple(self._hierarchy)

    def _args(self):
        return (self._type, self._flat, self._hierarchy)

    def __eq__(self, other):
        return isinstance(other, placement) and self._args() == other._args()

    def __hash__(self):
        return hash((self._type, tuple(self._flat), tuple(self._hierarchy)))

    def __repr__(self):
        return f'oneflow.placement(type="{self._type}", ranks={self._nested})'

    @staticmethod
    def all(device_type="cpu"):
        return placement(device_type, list(range(flow.env.get_world_size())))


def _sbp_tuple(s, n, what="to_global"):
    if isinstance(s, _Sbp):
        s = (s,)
    s = tuple(s)
    for x in s:
        if not isinstance(x, _Sbp):
            raise TypeError(f"{what}: sbp must be flow.sbp.split(d), broadcast or partial_sum, "
                            f"got {x!r}")
    if len(s) != n:
        raise ValueError(f"{what}: sbp {s} has {len(s)} entries but the placement has {n} "
                         f"dimension{'s' if n != 1 else ''}")
    return s


def _info(t):
    return _C.global_info(t)


def _placement_of(t):
    device, ranks, hierarchy, _ = _info(t)
    return placement(device, ranks, hierarchy)


def _sbp_of(t):
    return tuple(_Sbp(k, a) for k, a in _info(t)[3])


def _to_global(self, placement=None, sbp=None, *, grad_sbp=None, check_meta=True, sync_data=True,
               copy=False):
    """OneFlow's contract. From a local tensor, every rank of the job calls it (also ranks
    outside the placement, which get the placement's shape and dtype): check_meta compares the
    members' shapes and dtypes (one error on every rank naming the rank that differs) and
    sync_data gives a broadcast tensor the data of the placement's first rank, so it holds one
    value. From a global tensor: boxing to the new placement / sbp."""
    info = _info(self)
    if info is None and (placement is None or sbp is None):
        raise ValueError("to_global: a local tensor needs both placement and sbp")
    if placement is None:
        placement = _placement_of(self)
    if not isinstance(placement, globals()["placement"]):
        raise TypeError(f"to_global: placement must be a flow.placement, got {placement!r}")
    if sbp is None:
        sbp = _sbp_of(self)
    sbp = _sbp_tuple(sbp, len(placement.hierarchy))
    device, flat, hierarchy = placement._args()
    pairs = [s._pair() for s in sbp]
    # Differentiable in C++ (oneflow/global/global_tensor.cc: the gradient is the reverse layout
    # change), so the Python and C++ APIs share one implementation.
    out = _C.to_global(self, device, flat, hierarchy, pairs, bool(check_meta or sync_data))
    if copy and out is self:
        out = out.clone()
    if grad_sbp is not None:
        # OneFlow: the gradient of the result takes grad_sbp in the backward pass (before it is
        # boxed back to the input's layout), e.g. split(0) to reduce-scatter instead of reduce.
        grad_sbp = _sbp_tuple(grad_sbp, len(placement.hierarchy))
        if not out.requires_grad:
            raise ValueError("to_global: grad_sbp was given but the result does not require grad "
                             "(there is no backward pass for it to apply to)")
        if out is self:
            out = out.clone()  # the hook belongs to this conversion, not to the input
        out.register_hook(lambda g: g.to_global(placement=placement, sbp=grad_sbp))
    return out


def _to_local(self, copy=False):
    t = _C.to_local(self)
    return t.clone() if copy else t


def _gathered(t):
    """The whole value of a global tensor on this rank (a local tensor), on every rank of the job
    as in OneFlow (numpy() of a global tensor is collective: every rank calls it)."""
    info = _info(t)
    if info is None:
        return t
    device = info[0]
    world = list(range(flow.env.get_world_size()))
    return _C.to_local(_C.to_global(t.detach(), device, world, [len(world)], [(_BROADCAST, -1)],
                                    False))


_global_ids = {}  # implementation address -> id (an address a freed tensor left gets a new id
# only when asked through a new tensor there: ids are for telling live tensors apart)


def _global_id(self):
    """An id of this global tensor, the same on every rank: ids count global tensors in the order
    the program first asks for one, which every rank follows in SPMD code; two handles of one
    tensor (to_global to its own layout returns it) share it."""
    if _info(self) is None:
        raise RuntimeError("global_id: only global tensors have one; this tensor is local")
    key = _C.tensor_impl_id(self)
    if key not in _global_ids:
        _global_ids[key] = len(_global_ids) + 1
    return _global_ids[key]


def _check_meta_consistency(self):
    """Raises (on every member rank) unless the placement's ranks agree on this global tensor's
    shape, dtype, placement and sbp. Collective over the placement's ranks."""
    info = _info(self)
    if info is None:
        raise RuntimeError("check_meta_consistency: only for global tensors; this tensor is local")
    device, ranks, hierarchy, pairs = info
    if flow.env.get_rank() not in ranks or len(ranks) == 1:
        return None
    code = [self.ndim, _dtype_code(self.dtype), *self.shape, -7, *hierarchy, -7,
            *[k * 1000 + a for k, a in pairs]]
    width = 64
    if len(code) > width:
        raise ValueError("check_meta_consistency: tensors of more than 48 dims are not supported")
    mine = flow.tensor(code + [-9] * (width - len(code)), dtype=flow.int64)
    g = _C.to_global(mine, "cpu", list(ranks), [len(ranks)], [(_SPLIT, 0)], False)
    allv = _C.to_local(_C.to_global(g, "cpu", list(ranks), [len(ranks)], [(_BROADCAST, -1)],
                                    False)).numpy().reshape(len(ranks), width)
    for i, row in enumerate(allv):
        if row.tolist() != allv[0].tolist():
            raise RuntimeError(
                f"check_meta_consistency: rank {ranks[i]} sees this global tensor as "
                f"{_describe_code(row)} but rank {ranks[0]} as {_describe_code(allv[0])}")
    return None


def _dtype_code(dtype):
    return sum(ord(c) * (i + 1) for i, c in enumerate(str(dtype)))


def _describe_code(row):
    row = [int(v) for v in row if v != -9]
    ndim = row[0]
    return f"shape {tuple(row[2:2 + ndim])}"


def _build_global(fn, args, kwargs, layout):
    """fn(*args, **kwargs) built whole on every rank, laid out as layout = (device, ranks,
    hierarchy, sbp pairs); requires_grad applies to the global result."""
    requires_grad = kwargs.pop("requires_grad", False)
    out = _C.global_from_whole(fn(*args, **kwargs), *layout)
    if requires_grad:
        out.requires_grad_(True)
    return out


# oneflow.utils.global_view.global_mode: (placement, sbp) while enabled, else None
_mode = [None]


def _creation(fn):
    @functools.wraps(fn)
    def wrapper(*args, placement=None, sbp=None, **kwargs):
        if placement is None and sbp is None and _mode[0] is not None \
                and kwargs.get("device") is None:
            placement, sbp = _mode[0]  # global_mode: source ops build global tensors
        if placement is None and sbp is None:
            return fn(*args, **kwargs)
        if placement is None or sbp is None:
            raise ValueError(f"{fn.__name__}: placement and sbp go together")
        s = _sbp_tuple(sbp, len(placement.hierarchy), fn.__name__)
        return _build_global(fn, args, kwargs, placement._args() + ([x._pair() for x in s],))
    return wrapper


def _install():
    T = flow.Tensor
    T.is_global = property(lambda self: _info(self) is not None)
    T.is_consistent = T.is_global
    T.is_local = property(lambda self: _info(self) is None)
    T.placement = property(lambda self: _placement_of(self) if _info(self) else None)
    T.sbp = property(lambda self: _sbp_of(self) if _info(self) else None)
    T.to_global = _to_global
    T.global_id = _global_id
    T.check_meta_consistency = _check_meta_consistency
    T.to_consistent = _to_global
    T.to_local = _to_local
    for name in ("numpy", "tolist", "item"):
        local_fn = getattr(T, name)

        def method(self, *args, _local_fn=local_fn, _name=name, **kwargs):
            # OneFlow's numpy() also reads tensors that require grad (a copy of the values).
            x = _gathered(self)
            if _name == "numpy" and x.requires_grad:
                x = x.detach()
            return _local_fn(x, *args, **kwargs)
        method.__name__ = name
        setattr(T, name, method)
    # Python number conversions read the data: a global tensor's comes from its whole value (the
    # global wrapper itself holds no data; reading it crashed).
    for name in ("__float__", "__int__", "__bool__", "__index__", "__array__"):
        local_fn = getattr(T, name, None)
        if local_fn is None:
            continue

        def conv(self, *args, _local_fn=local_fn, **kwargs):
            return _local_fn(_gathered(self) if _info(self) is not None else self, *args, **kwargs)
        conv.__name__ = name
        setattr(T, name, conv)
    for name in ("tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
                 "randperm", "normal", "arange", "eye", "logspace", "hann_window", "linspace"):
        setattr(flow, name, _creation(getattr(flow, name)))
    for name in ("new_zeros", "new_ones", "new_empty", "new_full"):
        setattr(T, name, _new_method(name, getattr(T, name)))
    flow.new_zeros = _new_tensor_op("new_zeros")
    flow.new_empty = _new_tensor_op("new_empty")
    flow.new_ones = _new_tensor_op("new_ones")
    for name in ("zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
                 "randint_like"):
        setattr(flow, name, _like_global(getattr(flow, name)))
    flow.empty_like.__name__ = "empty_like_op"  # OneFlow's name (its tests read it)
    # A global tensor has a placement, not a device (OneFlow raises); global_mode lifts that.
    local_device = T.device
    T._device = local_device  # what the package itself reads (a global tensor's device type)

    def device(self):
        if _info(self) is None:
            return local_device.__get__(self)
        if _mode[0] is not None:
            return flow.device(_info(self)[0])
        raise RuntimeError(f"device: a global tensor has no device but a placement "
                           f"({_placement_of(self)}); read .placement (its .type is the device "
                           f"type), or use oneflow.utils.global_view.global_mode")
    T.device = property(device)

    def tensor_buffer_meta(self):
        if _info(self) is not None:
            raise RuntimeError("_tensor_buffer_shapes_and_dtypes: only local tensor buffers have "
                               "it; this tensor is global")
        raise NotImplementedError("_tensor_buffer_shapes_and_dtypes: the tensor_buffer dtype is "
                                  "not supported")
    T._tensor_buffer_shapes_and_dtypes = property(tensor_buffer_meta)


def _new_method(name, local_method):
    """x.new_full(size, v, placement=, sbp=) and friends: a global result for a global x (its
    placement and sbp unless given) or when placement and sbp are given; else the local method."""
    def method(self, *args, placement=None, sbp=None, **kwargs):
        info = _info(self)
        if info is not None and kwargs.get("device") is None:
            placement = _placement_of(self) if placement is None else placement
            sbp = _sbp_of(self) if sbp is None else sbp
        # a global x is read only for its dtype: a local stand-in of that dtype builds the value
        stand_in = self if info is None else _C.full([0], 0.0, self.dtype, None)
        if placement is None and sbp is None:
            return local_method(stand_in, *args, **kwargs)
        if placement is None or sbp is None:
            raise ValueError(f"{name}: placement and sbp go together")
        s = _sbp_tuple(sbp, len(placement.hierarchy), name)
        return _build_global(lambda *a, **k: local_method(stand_in, *a, **k), args, kwargs,
                             placement._args() + ([x._pair() for x in s],))
    method.__name__ = name
    return method


def _new_tensor_op(name):
    """OneFlow's flow.new_zeros(input, size=None, dtype=None, device=None, placement=None,
    sbp=None, requires_grad=False): the Tensor method (_new_method) with input's size by
    default."""
    def op(input, size=None, dtype=None, device=None, placement=None, sbp=None,
           requires_grad=False):
        size = tuple(input.shape) if size is None else tuple(size)
        return getattr(input, name)(size, dtype=dtype, device=device, placement=placement,
                                    sbp=sbp, requires_grad=requires_grad)
    op.__name__ = op.__qualname__ = name + "_op"  # OneFlow's names (its tests read them)
    return op


def _like_global(fn):
    """x_like(global x): the same placement and sbp as x (the logical value built whole)."""
    @functools.wraps(fn)
    def wrapper(x, *args, placement=None, sbp=None, **kwargs):
        info = _info(x)
        if info is None and placement is None and sbp is None:
            return fn(x, *args, **kwargs)
        if placement is not None or sbp is not None:
            # OneFlow's x_like(x, placement=..., sbp=...): x's shape, the layout given (x's own
            # for the one left out)
            if placement is None:
                if info is None:
                    raise ValueError(f"{fn.__name__}: sbp without placement for a local tensor")
                placement = _placement_of(x)
            if sbp is None:
                if info is None:
                    raise ValueError(f"{fn.__name__}: placement without sbp for a local tensor")
                sbp = _sbp_of(x)
            s = _sbp_tuple(sbp, len(placement.hierarchy), fn.__name__)
            info = placement._args() + ([p._pair() for p in s],)
        # the local builders read x's logical shape
        return _build_global(fn, (x,) + args, kwargs, tuple(info))
    return wrapper
