"""Global tensors in Python: flow.placement and flow.sbp (the C++ values), the Tensor methods of
global tensors (installed with the others by _tensor_methods) and creation with placement/sbp.

    P = flow.placement("cpu", ranks=[0, 1])
    w = flow.randn(4, 4, placement=P, sbp=flow.sbp.broadcast)   # same values on every rank
    x = local_batch.to_global(placement=P, sbp=flow.sbp.split(0))
    y = x @ w                       # S(0) x B -> S(0)
    y.to_global(sbp=flow.sbp.broadcast).to_local()   # the whole y on every rank
"""

import functools

import oneflow as flow
import oneflow._oneflow_internal as _C

# The C++ values (sbp/sbp.h, bound in oneflow/api/python/sbp.cc): hashable, comparable,
# printed as oneflow.sbp.split(dim=0) and oneflow.placement(type="cpu", ranks=[0, 1]).
sbp = _C.sbp
placement = _C.placement

def _sbp_tuple(s, n, what="to_global"):
    if isinstance(s, sbp.sbp):
        s = (s,)
    s = tuple(s)
    for x in s:
        if not isinstance(x, sbp.sbp):
            raise TypeError(f"{what}: sbp must be flow.sbp.split(d), broadcast or partial_sum, "
                            f"got {x!r}")
    if len(s) != n:
        raise ValueError(f"{what}: sbp {s} has {len(s)} entries but the placement has {n} "
                         f"dimension{'s' if n != 1 else ''}")
    return s


def _info(t):
    return _C.global_info(t)


def _placement(t):
    info = _info(t)
    return info[0] if info is not None else None


def _sbp(t):
    info = _info(t)
    return info[1] if info is not None else None


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
        placement = _placement(self)
    if not isinstance(placement, globals()["placement"]):
        raise TypeError(f"to_global: placement must be a flow.placement, got {placement!r}")
    if sbp is None:
        sbp = _sbp(self)
    sbp = _sbp_tuple(sbp, len(placement.hierarchy))
    # Differentiable in C++ (oneflow/global/global_tensor.cc: the gradient is the reverse layout
    # change), so the Python and C++ APIs share one implementation.
    out = _C.to_global(self, placement, sbp, bool(check_meta or sync_data))
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
    if not self.is_global:  # OneFlow refuses it (its wording)
        raise RuntimeError("Tensor.to_local: Expected global tensor for to_local but got local "
                           "tensor! (a local tensor is already local)")
    t = _C.to_local(self)
    return t.clone() if copy else t


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
    members, nd_sbp = info
    ranks = members.ranks.flatten().tolist()
    if flow.env.get_rank() not in ranks or len(ranks) == 1:
        return None
    code = [self.ndim, _dtype_code(self.dtype), *self.shape, -7, *members.hierarchy, -7,
            *[hash(s) for s in nd_sbp]]
    width = 64
    if len(code) > width:
        raise ValueError("check_meta_consistency: tensors of more than 48 dims are not supported")
    mine = flow.tensor(code + [-9] * (width - len(code)), dtype=flow.int64)
    cpu = placement("cpu", ranks)
    g = _C.to_global(mine, cpu, (sbp.split(0),), False)
    allv = _C.to_local(_C.to_global(g, cpu, (sbp.broadcast,), False)).numpy().reshape(
        len(ranks), width)
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
    """fn(*args, **kwargs) laid out as layout = (placement, sbp tuple), each rank building only
    its shard where fn's creation op can (oneflow/global/global_tensor.h: BuildGlobal), else
    built whole and sliced; requires_grad applies to the global result."""
    requires_grad = kwargs.pop("requires_grad", False)
    out = _C.global_build(lambda: fn(*args, **kwargs), *layout)
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
        if fn.__name__ == "tensor" and kwargs.get("device") is None:
            # Each rank's window of the data is made on the placement's device (also the empty
            # one of a rank outside it), as the other creation ops make theirs.
            kwargs["device"] = placement.type
        return _build_global(fn, args, kwargs, (placement, s))
    return wrapper


def _device(self):
    """A global tensor has a placement, not a device (OneFlow raises); global_mode lifts that.
    The package itself reads Tensor._device (the device of the local data)."""
    info = _info(self)
    if info is None:
        return self._device
    if _mode[0] is not None:
        return flow.device(info[0].type)
    raise RuntimeError(f"device: a global tensor has no device but a placement "
                       f"({info[0]}); read .placement (its .type is the device "
                       f"type), or use oneflow.utils.global_view.global_mode")


def _tensor_buffer_meta(self):
    if _info(self) is not None:
        raise RuntimeError("_tensor_buffer_shapes_and_dtypes: only local tensor buffers have "
                           "it; this tensor is global")
    raise NotImplementedError("_tensor_buffer_shapes_and_dtypes: the tensor_buffer dtype is "
                              "not supported")


def _install_functions():
    """The creation functions of the oneflow namespace take placement= and sbp= (and follow
    global_mode); the Tensor methods of global tensors are installed by _tensor_methods with the
    others."""
    for name in ("tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
                 "randperm", "normal", "arange", "eye", "logspace", "hann_window", "linspace"):
        setattr(flow, name, _creation(getattr(flow, name)))
    flow.new_zeros = _new_tensor_op("new_zeros")
    flow.new_empty = _new_tensor_op("new_empty")
    flow.new_ones = _new_tensor_op("new_ones")
    for name in ("zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
                 "randint_like"):
        setattr(flow, name, _like_global(getattr(flow, name)))
    flow.empty_like.__name__ = "empty_like_op"  # OneFlow's name (its tests read it)


def _new_method(name, local_method):
    """x.new_full(size, v, placement=, sbp=) and friends: a global result for a global x (its
    placement and sbp unless given) or when placement and sbp are given; else the local method."""
    def method(self, *args, placement=None, sbp=None, **kwargs):
        info = _info(self)
        if info is not None and kwargs.get("device") is None:
            placement = _placement(self) if placement is None else placement
            sbp = _sbp(self) if sbp is None else sbp
        # a global x is read only for its dtype: a local stand-in of that dtype builds the value
        stand_in = self if info is None else _C.full([0], 0.0, self.dtype, None)
        if placement is None and sbp is None:
            return local_method(stand_in, *args, **kwargs)
        if placement is None or sbp is None:
            raise ValueError(f"{name}: placement and sbp go together")
        s = _sbp_tuple(sbp, len(placement.hierarchy), name)
        return _build_global(lambda *a, **k: local_method(stand_in, *a, **k), args, kwargs,
                             (placement, s))
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
                placement = _placement(x)
            if sbp is None:
                if info is None:
                    raise ValueError(f"{fn.__name__}: placement without sbp for a local tensor")
                sbp = _sbp(x)
            s = _sbp_tuple(sbp, len(placement.hierarchy), fn.__name__)
            info = (placement, s)
        # the local builders read x's logical shape
        return _build_global(fn, (x,) + args, kwargs, info)
    return wrapper
