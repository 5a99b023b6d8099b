"""Names OneFlow's own tests use beyond the everyday API (issue 38), each composed exactly from
existing ops (so gradients, SBP rules and CUDA kernels come with them), with PyTorch's and
OneFlow's signatures.

    flow.fmod(x, 3), flow.tile(x, (2, 1)), flow.movedim(x, 0, -1), flow.unbind(x, 1)
    flow.tensordot(a, b, dims=([1], [0])), flow.atleast_2d(x), flow.tensor_split(x, 3)
    x.frac(), x.clamp_min(0), flow.bincount(idx, minlength=5), flow.searchsorted(seq, v)
"""

import builtins
import math

import oneflow._oneflow_internal as _C
from oneflow._api_util import Size, _inplace

Tensor = _C.Tensor

__all__ = [
    "cast", "equal", "not_equal", "fmod", "acosh", "arccosh", "exp2", "frac", "nansum",
    "movedim", "moveaxis", "swapaxes", "swapdims", "mv", "dot", "mm", "tile", "cross", "select",
    "unbind", "tensordot", "broadcast_shapes", "broadcast_tensors", "atleast_1d", "atleast_2d",
    "atleast_3d", "hstack", "vstack", "dstack", "column_stack", "row_stack", "clamp_min",
    "clamp_max", "logaddexp", "tensor_split", "hsplit", "vsplit", "dsplit", "t", "bernoulli",
    "bincount", "searchsorted", "get_rng_state", "set_rng_state", "as_strided", "clone",
    "batch_gather", "tensor_scatter_nd_update", "softsign", "softshrink", "hardshrink",
    "broadcast_like", "index_add",
]


def _dims(x):
    return len(x._shape)


def _wrap(dim, ndim, op):
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a {ndim}-D tensor "
                         f"(expected -{n} <= dim < {n})")
    return dim % n


def _is_float(x):
    return x.dtype in (_C.float16, _C.bfloat16, _C.float32, _C.float64)


def cast(input, dtype):
    return input.to(dtype)


def equal(input, other):
    """True when both have the same shape and elements (a Python bool, as in OneFlow/PyTorch)."""
    if tuple(input._shape) != tuple(other._shape):
        return False
    return builtins.bool(_C.eq(input, other).all().item())


def not_equal(input, other):
    return input != other


def fmod(input, other):
    """The remainder with the sign of the dividend (C's fmod), from remainder (Python's sign
    rule): where the two signs differ, the remainder is moved back by the divisor."""
    r = input % other
    if not isinstance(other, Tensor):
        other = _C.full([], builtins.float(other), input.dtype, input._device)
    differ = (r != 0) & ((r < 0) != (input < 0))
    return _C.where(differ, r - other, r)


def acosh(input):
    if input.dtype in (_C.float16, _C.bfloat16):  # x * x - 1 in float32, as a kernel would
        return acosh(input.to(_C.float32)).to(input.dtype)
    return _C.log(input + _C.sqrt(input * input - 1))


arccosh = acosh


def exp2(input):
    return _C.pow(_C.full([], 2.0, input.dtype, input._device), input)


def frac(input):
    return input - _C.trunc(input)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    zeroed = _C.where(input != input, _C.full([], 0.0, input.dtype, input._device), input)
    return zeroed.sum() if dim is None else zeroed.sum(dim, keepdim)


def _dim_list(d):
    return [d] if isinstance(d, builtins.int) else list(d)


def movedim(input, source, destination):
    n = _dims(input)
    src = [_wrap(d, n, "movedim") for d in _dim_list(source)]
    dst = [_wrap(d, n, "movedim") for d in _dim_list(destination)]
    if len(src) != len(dst):
        raise ValueError(f"movedim: source and destination need as many dims, got {len(src)} "
                         f"and {len(dst)}")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dim in source {src} or destination {dst}")
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    order = [next(rest) if o is None else o for o in order]
    return input.permute(*order)


moveaxis = movedim


def swapaxes(input, axis0, axis1):
    return input.transpose(axis0, axis1)


swapdims = swapaxes


def mv(input, vec):
    if _dims(input) != 2 or _dims(vec) != 1:
        raise RuntimeError(f"mv: expected a 2-D matrix and a 1-D vector, got {_dims(input)}-D "
                           f"and {_dims(vec)}-D")
    return _C.matmul(input, vec)


def dot(input, other):
    if _dims(input) != 1 or _dims(other) != 1 or input._shape[0] != other._shape[0]:
        raise RuntimeError(f"dot: expected two 1-D tensors of the same size, got shapes "
                           f"{tuple(input._shape)} and {tuple(other._shape)}")
    if input.dtype != other.dtype:
        raise RuntimeError(f"dot: expected both vectors to have same dtype, but found "
                           f"{input.dtype} and {other.dtype}")
    return (input * other).sum()


def mm(input, mat2):
    """The matrix product of two 2-D tensors (flow.mm, Tensor.mm)."""
    if _dims(input) != 2:
        raise RuntimeError(f"mm: self must be a matrix, got a {_dims(input)}-D tensor")
    if _dims(mat2) != 2:
        raise RuntimeError(f"mm: mat2 must be a matrix, got a {_dims(mat2)}-D tensor")
    return _C.matmul(input, mat2)


def tile(input, dims):
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    n = _dims(input)
    if len(dims) < n:
        dims = [1] * (n - len(dims)) + dims
    if len(dims) > n:
        input = input.reshape([1] * (len(dims) - n) + list(input._shape))
    return input.repeat(*dims)


def cross(input, other, dim=None):
    """The cross product along a dim of size 3 (the first such dim when None, as OneFlow),
    broadcasting the two: c = a[(i+1)%3] * b[(i+2)%3] - a[(i+2)%3] * b[(i+1)%3]."""
    shape = broadcast_shapes(tuple(input._shape), tuple(other._shape))
    a, b = input.expand(*shape), other.expand(*shape)
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dimension of size 3 in shape {tuple(shape)}")
    dim = _wrap(dim, len(shape), "cross")
    if shape[dim] != 3:
        raise RuntimeError(f"cross: dim {dim} must have size 3, got {shape[dim]}")
    return _C.roll(a, [-1], [dim]) * _C.roll(b, [-2], [dim]) - \
        _C.roll(a, [-2], [dim]) * _C.roll(b, [-1], [dim])


def select(input, dim, index):
    n = _dims(input)
    dim = _wrap(dim, n, "select")
    size = input._shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select: index {index} is out of range for dim {dim} of size {size}")
    return _C.select(input, dim, index % size)


def unbind(input, dim=0):
    dim = _wrap(dim, _dims(input), "unbind")
    return tuple(_C.select(input, dim, i) for i in range(input._shape[dim]))


def tensordot(a, b, dims=2):
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, builtins.int):
        if dims < 0 or dims > builtins.min(_dims(a), _dims(b)):
            raise RuntimeError(f"tensordot: dims={dims} must be in [0, min(a.dim(), b.dim())]")
        da, db = list(range(_dims(a) - dims, _dims(a))), list(range(dims))
    else:
        da, db = (_dim_list(d) for d in dims)
    da = [_wrap(d, _dims(a), "tensordot") for d in da]
    db = [_wrap(d, _dims(b), "tensordot") for d in db]
    for i, j in zip(da, db):  # a contracted dim of size 1 broadcasts against the other's
        if a._shape[i] == 1 and b._shape[j] != 1:
            b = b.sum(j, keepdim=True)
        elif b._shape[j] == 1 and a._shape[i] != 1:
            a = a.sum(i, keepdim=True)
    if len(da) != len(db) or any(a._shape[i] != b._shape[j] for i, j in zip(da, db)):
        raise RuntimeError(f"tensordot: contracted dims {da} of {tuple(a._shape)} and {db} of "
                           f"{tuple(b._shape)} must pair up with equal sizes")
    fa = [i for i in range(_dims(a)) if i not in da]
    fb = [i for i in range(_dims(b)) if i not in db]
    k = math.prod(a._shape[i] for i in da)
    left = a.permute(*(fa + da)).reshape(-1, k)
    right = b.permute(*(db + fb)).reshape(k, -1)
    return _C.matmul(left, right).reshape([a._shape[i] for i in fa] + [b._shape[i] for i in fb])


def broadcast_shapes(*shapes):
    shapes = [tuple(s) if isinstance(s, (list, tuple)) else (s,) for s in shapes]
    n = builtins.max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, v in enumerate((1,) * (n - len(s)) + s):
            if v != 1 and out[i] not in (1, v):
                raise RuntimeError(f"broadcast_shapes: shapes {shapes} do not broadcast "
                                   f"(dim {i}: {out[i]} vs {v})")
            out[i] = v if v != 1 else out[i]
    return Size(out)


def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*(tuple(t._shape) for t in tensors))
    return tuple(t.expand(*shape) for t in tensors)


def broadcast_like(input, like, broadcast_axes=None):
    """input expanded to like's shape (OneFlow's): missing dims are inserted at broadcast_axes
    (the axes of like input is broadcast along), or in front when none are given."""
    n, target = _dims(input), list(like._shape)
    if n < len(target):
        shape = list(input._shape)
        if broadcast_axes is not None:
            axes = sorted(a % len(target) for a in broadcast_axes)
            if len(axes) != len(target) - n:
                raise RuntimeError(f"broadcast_like: {len(axes)} broadcast_axes for a {n}-D input "
                                   f"and a {len(target)}-D like need {len(target) - n}")
            for a in axes:
                shape.insert(a, 1)
        else:
            shape = [1] * (len(target) - n) + shape
        input = input.reshape(shape)
    return input.expand(*target)


def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source's slices added at index along dim (repeated indices add up)."""
    dim = _wrap(dim, _dims(input), "index_add")
    if _dims(index) > 1 or (_dims(source) and source._shape[dim] != index.numel()):
        raise RuntimeError(f"index_add: index of shape {tuple(index._shape)} needs one entry "
                           f"per slice of source along dim {dim} (shape {tuple(source._shape)})")
    shape = [1] * _dims(source)
    if shape:
        shape[dim] = index.numel()
    spread = index.to(_C.int64).reshape(shape).expand(*source._shape)
    added = _C.scatter_add(_C.full(list(input._shape), 0.0, source.dtype, input._device), dim,
                           spread, source)
    return input + (added if alpha == 1 else added * alpha)


def _compare_into(op):
    def compare(self, other):
        return op(self, other).to(self.dtype)
    return compare


def _atleast(n, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast(n, (t,)) for t in tensors[0])
    if len(tensors) > 1:
        return tuple(_atleast(n, (t,)) for t in tensors)
    x = tensors[0]
    d = _dims(x)
    if d >= n:
        return x
    if n == 3 and d == 2:
        return x.unsqueeze(-1)
    shape = [1] * (n - d) + list(x._shape)
    if n == 3 and d == 1:
        shape = [1, x._shape[0], 1]
    return x.reshape(shape)


def atleast_1d(*tensors):
    return _atleast(1, tensors)


def atleast_2d(*tensors):
    return _atleast(2, tensors)


def atleast_3d(*tensors):
    return _atleast(3, tensors)


def hstack(tensors):
    ts = atleast_1d(list(tensors))
    return _C.cat(list(ts), 0 if _dims(ts[0]) == 1 else 1)


def vstack(tensors):
    return _C.cat(list(atleast_2d(list(tensors))), 0)


row_stack = vstack


def dstack(tensors):
    return _C.cat(list(atleast_3d(list(tensors))), 2)


def column_stack(tensors):
    cols = [t.reshape(-1, 1) if _dims(t) <= 1 else t for t in tensors]
    return _C.cat(cols, 1)


def clamp_min(input, min):
    return input.clamp(min=min)


def clamp_max(input, max):
    return input.clamp(max=max)


def logaddexp(input, other):
    m = _C.maximum(input, other)
    return m + _C.log1p(_C.exp(-(input - other).abs()))


# Sections past a dim's size are empty tensors; past this many the call is refused, not a hang.
_MAX_EMPTY_SECTIONS = 1 << 16


def tensor_split(input, indices_or_sections, dim=0):
    dim = _wrap(dim, _dims(input), "tensor_split")
    size = input._shape[dim]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, builtins.int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be > 0, got {n}")
        if n > size + _MAX_EMPTY_SECTIONS:  # each section is a tensor: refuse before making them
            raise RuntimeError(f"tensor_split: {n} sections of a dim of size {size} would make "
                               f"{n} tensors; expected at most {size + _MAX_EMPTY_SECTIONS} "
                               f"(the size plus {_MAX_EMPTY_SECTIONS} empty ones)")
        q, r = divmod(size, n)
        bounds, at = [], 0
        for i in range(n - 1):
            at += q + (1 if i < r else 0)
            bounds.append(at)
    else:
        bounds = list(indices_or_sections)
    out, start = [], 0
    for end in bounds + [size]:
        s, e = builtins.min(builtins.max(start, 0), size), builtins.min(builtins.max(end, 0), size)
        out.append(input.narrow(dim, s, builtins.max(e - s, 0)))
        start = end
    return tuple(out)


def _split_like(op, input, sections, dim, min_dims):
    if _dims(input) < min_dims:
        raise RuntimeError(f"{op}: needs a tensor of at least {min_dims} dims, got "
                           f"{_dims(input)}-D")
    if isinstance(sections, builtins.int) and input._shape[dim] % sections:
        raise RuntimeError(f"{op}: dim {dim} of size {input._shape[dim]} does not split into "
                           f"{sections} equal sections")
    return tensor_split(input, sections, dim)


def hsplit(input, indices_or_sections):
    return _split_like("hsplit", input, indices_or_sections, 0 if _dims(input) == 1 else 1, 1)


def vsplit(input, indices_or_sections):
    return _split_like("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    return _split_like("dsplit", input, indices_or_sections, 2, 3)


def t(input):
    if _dims(input) > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{_dims(input)}D")
    return input if _dims(input) < 2 else input.transpose(0, 1)


def bernoulli(input, p=None, *, generator=None, dtype=None):
    """1 with probability input (or p), else 0, in input's dtype (or dtype=, OneFlow's)."""
    from oneflow import _random

    probs = input if p is None else _C.full(list(input._shape), builtins.float(p), input.dtype,
                                            input._device)
    with _random._drawing_from(generator, "bernoulli"):
        draw = _C.rand(list(input._shape), input.dtype if _is_float(input) else _C.float32,
                       input._device)
    return (draw < probs).to(input.dtype if dtype is None else dtype)


def bincount(input, weights=None, minlength=0):
    if _dims(input) != 1 or _is_float(input) or input.dtype == _C.bool:
        raise RuntimeError(f"bincount: expected a 1-D tensor of non-negative integers, got a "
                           f"{_dims(input)}-D {input.dtype} tensor")
    if input.numel() and builtins.int(input.min().item()) < 0:
        raise RuntimeError("bincount: input must be non-negative")
    n = builtins.max(builtins.int(input.max().item()) + 1 if input.numel() else 0, minlength)
    if weights is None:
        src = _C.full(list(input._shape), 1.0, _C.int64, input._device)
        zeros = _C.full([n], 0.0, _C.int64, input._device)
    else:
        src = weights if _is_float(weights) else weights.to(_C.float64)
        zeros = _C.full([n], 0.0, src.dtype, input._device)
    return _C.scatter_add(zeros, 0, input.to(_C.int64), src)


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Indices where values go to keep each innermost row sorted: a binary search per value
    (the first position whose element is >= value, or > value with right=True), the same
    steps as OneFlow's and PyTorch's kernels, so an unsorted row gives their answer too."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' contradicts right=True")
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        seq = _C.take_along_dim(seq, sorter.to(_C.int64), -1)
    scalar = not isinstance(values, Tensor)
    v = _C.full([], builtins.float(values), seq.dtype, seq._device) if scalar else values
    zero_dim = _dims(v) == 0
    if zero_dim:
        v = v.reshape(1)
    if _dims(seq) > 1 and tuple(seq._shape[:-1]) != tuple(v._shape[:-1]):
        raise RuntimeError(f"searchsorted: leading dims of sorted_sequence "
                           f"{tuple(seq._shape)} and values {tuple(v._shape)} must match")
    m = seq._shape[-1]
    lead = list(v._shape[:-1])
    rows = seq.reshape([1] * len(lead) + [m]).expand(*(lead + [m])) if _dims(seq) == 1 else seq
    start = (v != v).to(_C.int64) * 0  # zeros laid out as v (local or global)
    end = start + m
    for _ in range(builtins.max(m, 1).bit_length() + 1):
        active = start < end
        mid = start + (end - start) // 2
        mid_val = rows.gather(-1, mid.clamp(0, builtins.max(m - 1, 0))) if m else v
        go_right = active & ((mid_val <= v) if right else (mid_val < v))
        start = _C.where(go_right, mid + 1, start)
        end = _C.where(active & ~go_right, mid, end)
    out = start.reshape([]) if zero_dim else start
    return out.to(_C.int32) if out_int32 else out
def as_strided(input, size, stride, storage_offset=None):
    """The elements at storage_offset + sum(i_k * stride[k]) of input's memory, as a new
    tensor of shape size: a gather, so gradients add up where elements repeat. input may be any
    dense layout (contiguous or permuted); its memory is read in storage order. Unlike
    OneFlow's, the result is a copy, not a view (writes to it do not reach input), and memory
    before input's own first element is out of reach."""
    size, stride = list(size), list(stride)
    base = input.storage_offset()
    storage_offset = base if storage_offset is None else storage_offset
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided: size {tuple(size)} and stride {tuple(stride)} need as "
                           f"many dims")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or storage_offset < 0:
        raise RuntimeError(f"as_strided: negative size, stride or storage_offset "
                           f"({tuple(size)}, {tuple(stride)}, {storage_offset})")
    # input's elements in memory order: its dims sorted by stride, largest first
    order = sorted(range(len(input._shape)), key=lambda k: -input.stride()[k])
    memory = input.permute(*order) if order else input
    dense = memory.is_contiguous()
    if not dense:
        raise RuntimeError("as_strided: needs an input whose elements fill its memory without "
                           "gaps (a contiguous or permuted tensor); call .contiguous() first")
    first = storage_offset - base
    last = first + builtins.sum((n - 1) * st for n, st in zip(size, stride) if n > 0)
    if builtins.all(n > 0 for n in size) and (first < 0 or last >= input.numel()):
        raise RuntimeError(f"as_strided: size {tuple(size)}, stride {tuple(stride)} and offset "
                           f"{storage_offset} reach memory outside the input's {input.numel()} "
                           f"elements (from offset {base})")
    index = _C.full([], builtins.float(first), _C.int64, input._device)
    for k, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = n
        step = _C.arange(0.0, builtins.float(n), 1.0, _C.int64, input._device) * st
        index = index + step.reshape(shape)
    flat = memory.reshape(-1)
    return _C.index_select(flat, 0, index.reshape(-1)).reshape(size)


def clone(input, *, memory_format=None):
    return input.clone()


def batch_gather(in_, indices):
    """OneFlow's batch_gather: for indices of shape (B..., K) and in_ of shape (B..., N, R...),
    out[b..., k, r...] = in_[b..., indices[b..., k], r...] (a gather along dim indices.dim()-1)."""
    b = _dims(indices) - 1
    if _dims(in_) <= b or tuple(in_._shape[:b]) != tuple(indices._shape[:b]):
        raise RuntimeError(f"batch_gather: indices of shape {tuple(indices._shape)} need in_ with "
                           f"the same {b} leading (batch) dims and one more, got "
                           f"{tuple(in_._shape)}")
    if _is_float(indices) or indices.dtype == _C.bool:
        raise RuntimeError(f"batch_gather: indices must be integers, got {indices.dtype}")
    rest = list(in_._shape[b + 1:])
    index = indices.to(_C.int64).reshape(list(indices._shape) + [1] * len(rest))
    index = index.expand(*(list(indices._shape) + rest))
    return _C.gather(in_, b, index)


def tensor_scatter_nd_update(tensor, indices, updates):
    """tensor with the slices at indices' coordinates replaced by updates (OneFlow's and
    TensorFlow's): updates has shape indices.shape[:-1] + tensor.shape[indices.shape[-1]:]."""
    from oneflow import _index_api

    if tensor.dtype != updates.dtype:
        raise RuntimeError(f"tensor_scatter_nd_update: The dtype of tensor and updates must be "
                           f"same, got {tensor.dtype} and {updates.dtype}")
    shape = list(tensor._shape)
    hit = _index_api.scatter_nd(indices, _C.full(list(updates._shape), 1.0, tensor.dtype,
                                                 tensor._device), shape)
    placed = _index_api.scatter_nd(indices, updates, shape)
    return _C.where(hit > 0, placed, tensor)


def softsign(input):
    return _C.softsign(input)


def softshrink(input, lambd=0.5):
    return _C.softshrink(input, builtins.float(lambd))


def hardshrink(input, lambd=0.5):
    return _C.hardshrink(input, builtins.float(lambd))


def _unfold(input, dimension, size, step):
    """Tensor.unfold: the windows of `size` elements, `step` apart, along dimension, as a new
    last dim (a copy gathered by index_select, not a view)."""
    n_dims = _dims(input)
    dim = _wrap(dimension, n_dims, "unfold")
    length = input._shape[dim] if n_dims else 1
    if size < 0 or size > length or step <= 0:
        raise RuntimeError(f"unfold: size {size} must be in [0, {length}] (the size of dim "
                           f"{dim}) and step {step} > 0")
    x = input.reshape(1) if n_dims == 0 else input
    n = (length - size) // step + 1
    starts = _C.arange(0.0, builtins.float(n), 1.0, _C.int64, input._device) * step
    offsets = _C.arange(0.0, builtins.float(size), 1.0, _C.int64, input._device)
    index = (starts.reshape(n, 1) + offsets.reshape(1, size)).reshape(-1)
    picked = _C.index_select(x, dim, index)
    shape = list(x._shape)
    shape[dim:dim + 1] = [n, size]
    out = movedim(picked.reshape(shape), dim + 1, -1)
    return out.reshape(size) if n_dims == 0 else out


def get_rng_state():
    from oneflow import _random

    return _random.default_generator.get_state()


def set_rng_state(state):
    from oneflow import _random

    _random.default_generator.set_state(state)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    from oneflow import _creation

    return _creation.tensor(data, dtype=dtype if dtype is not None else self.dtype,
                            device=device if device is not None else self._device,
                            requires_grad=requires_grad)


def _new(self, *args, **kwargs):
    """x.new(): an empty tensor of x's dtype and device; x.new(2, 3) uninitialised of that
    size; x.new(data) a tensor of data in x's dtype (OneFlow's and PyTorch's legacy new)."""
    from oneflow import _creation

    if kwargs:
        raise TypeError(f"new: takes sizes or data only, got keywords {sorted(kwargs)}")
    if len(args) == 1 and not isinstance(args[0], builtins.int):
        if isinstance(args[0], (Size, tuple)) and builtins.all(
                isinstance(v, builtins.int) for v in args[0]):
            return _C.empty(list(args[0]), self.dtype, self._device)
        return _creation.tensor(args[0], dtype=self.dtype, device=self._device)
    return _C.empty([builtins.int(a) for a in args] if args else [0], self.dtype, self._device)


def _contiguous_(self):
    """x.contiguous_(): x itself, its elements moved into a contiguous buffer of its own when
    they were not (OneFlow's in-place contiguous; x no longer shares memory with its base)."""
    if not self.is_contiguous():
        self.data = self.contiguous()
    return self


def _tensor_methods():
    methods = {name: globals()[name] for name in (
        "fmod", "acosh", "arccosh", "exp2", "frac", "nansum", "movedim", "moveaxis", "swapaxes",
        "swapdims", "mv", "dot", "tile", "cross", "unbind", "tensor_split", "hsplit", "vsplit",
        "dsplit", "clamp_min", "clamp_max", "logaddexp", "bernoulli", "bincount", "not_equal",
        "as_strided", "t", "mm", "softsign", "softshrink", "hardshrink")}
    methods["ndimension"] = lambda self: len(self._shape)
    methods["unfold"] = _unfold
    methods["contiguous_"] = _contiguous_
    methods["frac_"] = _inplace("frac_", frac)
    methods["index_add"] = index_add
    methods["index_add_"] = _inplace("index_add_", index_add)
    # x.gt_(y) & co.: the comparison written into x, in x's dtype (1 or 0)
    for name, op in (("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b),
                     ("lt", lambda a, b: a < b), ("le", lambda a, b: a <= b),
                     ("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b)):
        methods[name + "_"] = _inplace(name + "_", _compare_into(op))
    methods["new_tensor"] = _new_tensor
    methods["new"] = _new
    methods["equal"] = equal
    methods["cast"] = cast
    return methods

