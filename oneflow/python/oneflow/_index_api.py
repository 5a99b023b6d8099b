"""The everyday tensor API beyond _creation and _ops: creation (linspace, meshgrid, diag, new_*),
shape and index ops (split, chunk, narrow, flip, roll, repeat, scatter, take_along_dim, ...),
scans and sorting (cumsum, sort, topk, median, mode, unique, multinomial) and the matmul family
(bmm, addmm, baddbmm, outer, einsum), with PyTorch's signatures, over core/functional.h."""

import builtins

import oneflow._oneflow_internal as _C
from oneflow import _global
from oneflow._api_util import _MinMax, _finish, _inplace, _size
from oneflow._creation import arange

Tensor = _C.Tensor

__all__ = [
    "linspace", "meshgrid", "diag", "diagonal", "split", "chunk", "unflatten", "narrow", "flip",
    "roll", "repeat_interleave", "tril", "triu", "take_along_dim", "scatter", "scatter_add",
    "scatter_nd", "gather_nd",
    "cumsum", "cumprod", "sort", "argsort", "topk", "all", "any", "median", "mode", "unique",
    "nms",
    "multinomial", "bmm", "addmm", "baddbmm", "outer", "ger", "einsum",
]


def _int(v, op, what):
    if isinstance(v, Tensor):
        v = v.item()
    if isinstance(v, builtins.bool) or not isinstance(v, builtins.int):
        raise TypeError(f"{op}: {what} must be an int, got {type(v).__name__}")
    return v


def _int_list(v, op, what):
    if isinstance(v, builtins.int) and not isinstance(v, builtins.bool):
        return [v]
    if isinstance(v, (list, tuple)):
        return [_int(d, op, what) for d in v]
    raise TypeError(f"{op}: {what} must be an int or a sequence of ints, got {type(v).__name__}")


# ---------------------------------------------------------------- creation

def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    steps = _int(steps, "linspace", "steps")
    t = _C.linspace(builtins.float(start), builtins.float(end), steps, dtype, device)
    return _finish(t, requires_grad)


def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if len({t.is_global for t in tensors}) > 1:
        raise RuntimeError("meshgrid expects all tensors are global tensor or all are local "
                           "tensors")
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError(f"meshgrid expects all tensors to have the same dtype, got "
                           f"{', '.join(str(t.dtype) for t in tensors)}")
    return tuple(_C.meshgrid(list(tensors), "ij" if indexing is None else indexing))


def diag(input, diagonal=0):
    return _C.diag(input, diagonal)


def diagonal(input, offset=0, dim1=0, dim2=1):
    return _C.diagonal(input, offset, dim1, dim2)


# ---------------------------------------------------------------- shape and index

def split(tensor, split_size_or_sections, dim=0):
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = _int_list(split_size_or_sections, "split", "sizes")
        return tuple(_C.split_with_sizes(tensor, sizes, dim))
    return tuple(_C.split(tensor, _int(split_size_or_sections, "split", "split_size"), dim))


def chunk(input, chunks, dim=0):
    return tuple(_C.chunk(input, _int(chunks, "chunk", "chunks"), dim))


def unflatten(input, dim, sizes):
    return _C.unflatten(input, dim, _int_list(sizes, "unflatten", "sizes"))


def narrow(input, dim, start, length):
    return _C.narrow(input, dim, _int(start, "narrow", "start"), _int(length, "narrow", "length"))


def flip(input, dims):
    return _C.flip(input, _int_list(dims, "flip", "dims"))


def roll(input, shifts, dims=None):
    return _C.roll(input, _int_list(shifts, "roll", "shifts"),
                   [] if dims is None else _int_list(dims, "roll", "dims"))


def repeat_interleave(input, repeats=None, dim=None, output_size=None):
    """Each element (or slice along dim) repeated; repeat_interleave(r) alone, r a 1-D int
    tensor, is repeat_interleave(arange(len(r)), r)."""
    if repeats is None:
        if not isinstance(input, Tensor) or input.ndim != 1 or input.dtype.is_floating_point:
            got = f"{input.dtype} of shape {tuple(input.shape)}" if isinstance(input, Tensor) else \
                type(input).__name__
            raise TypeError(f"repeat_interleave: with one argument it must be a 1-D integer tensor of "
                            f"repeats, got {got}")
        repeats = input
        input = arange(repeats.shape[0], dtype=repeats.dtype, device=repeats.device)
    if not isinstance(repeats, Tensor):
        repeats = _int(repeats, "repeat_interleave", "repeats")
    elif repeats.ndim == 1 and repeats.shape[0] == 1 and dim is not None and input.ndim > 0 \
            and input.shape[dim] != 1:
        # OneFlow: a 1-D repeats tensor has one element per slice (PyTorch broadcasts one)
        raise RuntimeError(f"repeat_interleave: repeats must have the same size as input along "
                           f"dim: repeats has 1 element, dim {dim} has size {input.shape[dim]}")
    out = _C.repeat_interleave(input, repeats, dim)
    if output_size is not None and out.shape[0 if dim is None else dim] != output_size:
        raise ValueError(f"repeat_interleave: output_size={output_size} does not match the "
                         f"result's size {out.shape[0 if dim is None else dim]}")
    return out


def tril(input, diagonal=0):
    return _C.tril(input, diagonal)


def triu(input, diagonal=0):
    return _C.triu(input, diagonal)


def take_along_dim(input, indices, dim=None):
    return _C.take_along_dim(input, indices, dim)


def scatter(input, dim, index, src=None, value=None, reduce=None):
    """A copy of input with src (a tensor, or the number value) written where index says along
    dim; reduce='add' adds instead (as scatter_add)."""
    if (src is None) == (value is None):
        raise TypeError("scatter: pass exactly one of src (a tensor or number) and value")
    if src is None:
        src = value
    if reduce is not None:
        if reduce != "add":
            raise NotImplementedError(f"scatter: reduce={reduce!r} is not supported (only 'add')")
        if not isinstance(src, Tensor):
            src = _C.full(list(index._shape), builtins.float(src), input.dtype, input.device)
        return _C.scatter_add(input, dim, index, src)
    if not isinstance(src, Tensor) and not isinstance(src, (builtins.int, builtins.float, builtins.bool)):
        raise TypeError(f"scatter: src must be a tensor or a number, got {type(src).__name__}")
    return _C.scatter(input, dim, index, src)


def scatter_add(input, dim, index, src):
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_add: src must be a tensor, got {type(src).__name__}")
    return _C.scatter_add(input, dim, index, src)


def _nd_rows(index, shape, op):
    """index's last axis (k coordinates into shape[:k]) as row numbers of shape viewed as
    (prod(shape[:k]), rest), flattened; and k."""
    if index.dtype not in (_C.int32, _C.int64):
        raise TypeError(f"{op}: index must be an int32 or int64 tensor, got {index.dtype}")
    if index.ndim < 1 or index.shape[-1] < 1 or index.shape[-1] > len(shape):
        raise ValueError(f"{op}: index of shape {tuple(index.shape)} needs a last dimension of 1 to "
                         f"{len(shape)} coordinates into shape {tuple(shape)}")
    k = index.shape[-1]
    index = index.to(_C.int64)
    rows, stride = None, 1
    for j in range(k - 1, -1, -1):
        term = index[..., j] * stride
        rows = term if rows is None else rows + term
        stride *= shape[j]
    return rows.reshape(-1), k


def scatter_nd(index, update, shape):
    """A zeros tensor of shape with update's slices added at index's coordinates (OneFlow's and
    TensorFlow's scatter_nd; repeated coordinates add up): update has shape
    index.shape[:-1] + shape[index.shape[-1]:]."""
    shape = _int_list(shape, "scatter_nd", "shape")
    rows, k = _nd_rows(index, shape, "scatter_nd")
    want = tuple(index.shape[:-1]) + tuple(shape[k:])
    if tuple(update.shape) != want:
        raise ValueError(f"scatter_nd: update has shape {tuple(update.shape)}; index of shape "
                         f"{tuple(index.shape)} into shape {tuple(shape)} needs {want}")
    rest = 1
    for d in shape[k:]:
        rest *= d
    count = 1
    for d in shape[:k]:
        count *= d
    n = rows.shape[0]
    out = update.new_zeros((count, rest))
    spread = rows.reshape(n, 1).expand(n, rest)
    return out.scatter_add(0, spread, update.reshape(n, rest)).reshape(shape)


def gather_nd(params, index):
    """params' slices at index's coordinates: shape index.shape[:-1] + params.shape[k:] for k =
    index.shape[-1] (the inverse of scatter_nd)."""
    shape = list(params.shape)
    rows, k = _nd_rows(index, shape, "gather_nd")
    rest = 1
    for d in shape[k:]:
        rest *= d
    n = rows.shape[0]
    flat = params.reshape(-1, rest)
    out = flat.gather(0, rows.reshape(n, 1).expand(n, rest))
    return out.reshape(tuple(index.shape[:-1]) + tuple(shape[k:]))


# ---------------------------------------------------------------- scans and sorting

def cumsum(input, dim, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return _C.cumsum(input, dim)


def cumprod(input, dim, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return _C.cumprod(input, dim)


def sort(input, dim=-1, descending=False, stable=False):
    """Always stable (stable=False allows any order of equal elements, this one included)."""
    return _MinMax(_C.sort(input, dim, descending))


def argsort(input, dim=-1, descending=False, stable=False):
    return _C.argsort(input, dim, descending)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) elements along dim; they always come sorted, which
    sorted=False allows."""
    return _MinMax(_C.topk(input, _int(k, "topk", "k"), dim, largest, sorted))


def _dims_or_all(dim, op):
    if dim is None:
        return []
    return _int_list(dim, op, "dim")


def all(input, dim=None, keepdim=False):
    return _C.all(input, _dims_or_all(dim, "all"), keepdim)


def any(input, dim=None, keepdim=False):
    return _C.any(input, _dims_or_all(dim, "any"), keepdim)


def median(input, dim=None, keepdim=False):
    """The lower median; with dim, (values, indices)."""
    if dim is None:
        return _C.median_all(input)
    return _MinMax(_C.median(input, dim, keepdim))


def mode(input, dim=-1, keepdim=False):
    return _MinMax(_C.mode(input, dim, keepdim))


def nms(boxes, scores, iou_threshold):
    """Indices (int64) of the boxes kept by non-maximum suppression, highest score first: boxes
    (N, 4) as (x1, y1, x2, y2); a box goes when its IoU with a kept one exceeds iou_threshold.
    A global result is broadcast on the boxes' placement."""
    return _C.nms(boxes, scores, float(iou_threshold))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The unique values of a local tensor, sorted (sorted=False leaves the order unspecified;
    it is sorted too), with the inverse indices and counts when asked."""
    if dim is not None:
        raise NotImplementedError("unique: dim= is not supported; flatten or call it per slice")
    values, inverse, counts = _C.unique(input)
    out = (values,)
    if return_inverse:
        out += (inverse,)
    if return_counts:
        out += (counts,)
    return out[0] if len(out) == 1 else out


def multinomial(input, num_samples, replacement=False, generator=None):
    if generator is not None:
        raise NotImplementedError("multinomial: generator= is not supported; seed the default "
                                  "generator with oneflow.manual_seed")
    return _C.multinomial(input, _int(num_samples, "multinomial", "num_samples"), replacement)


# ---------------------------------------------------------------- matmul family

def bmm(input, mat2):
    return _C.bmm(input, mat2)


def addmm(input, mat1, mat2, beta=1, alpha=1):  # OneFlow takes beta and alpha positionally
    return _C.addmm(input, mat1, mat2, builtins.float(beta), builtins.float(alpha))


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return _C.baddbmm(input, batch1, batch2, builtins.float(beta), builtins.float(alpha))


def outer(input, vec2):
    return _C.outer(input, vec2)


ger = outer


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    return _C.einsum(equation, list(operands))


# ---------------------------------------------------------------- Tensor methods

def _new(fill, name="new_full"):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        shape = _size(size, name)
        dtype, device = self.dtype if dtype is None else dtype, self.device if device is None else device
        if isinstance(fill, builtins.complex):
            return _finish(_C.complex_full(shape, fill, dtype, device), requires_grad)
        t = _C.full(shape, 0.0 if fill is None else builtins.float(fill), dtype, device)
        return _finish(t, requires_grad)
    return method


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    return _new(fill_value)(self, size, dtype=dtype, device=device, requires_grad=requires_grad)


def _new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    t = _C.empty(_size(size, "new_empty"), self.dtype if dtype is None else dtype,
                 self.device if device is None else device)
    return _finish(t, requires_grad)


def _flip_method(self, *dims, **kwargs):
    """x.flip(0, 1), x.flip([0, 1]) or x.flip(dims=[0, 1])."""
    if "dims" in kwargs:
        if dims:
            raise TypeError(f"flip: got the dims both as arguments {dims} and as dims=")
        dims = (kwargs.pop("dims"),)
    if kwargs:
        raise TypeError(f"flip() got an unexpected keyword argument {next(iter(kwargs))!r}")
    if not dims:
        raise TypeError("flip: expected the dims to flip, e.g. x.flip(0) or x.flip(dims=[0])")
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = dims[0]
    return flip(self, list(dims))


def _repeat_method(self, *sizes):
    return _C.repeat(self, _size(sizes, "repeat"))


def _scatter_method(self, dim, index, src=None, value=None, reduce=None):
    return scatter(self, dim, index, src, value=value, reduce=reduce)


def _tensor_methods():
    """Tensor methods of this module (oneflow/_tensor_methods.py installs them with the others)."""
    return {
        "new_zeros": _global._new_method("new_zeros", _new(0, "new_zeros")),
        "new_ones": _global._new_method("new_ones", _new(1, "new_ones")),
        "new_full": _global._new_method("new_full", _new_full),
        "new_empty": _global._new_method("new_empty", _new_empty),
        "diag": diag,
        "diagonal": diagonal,
        "split": split,
        "chunk": chunk,
        "unflatten": unflatten,
        "narrow": narrow,
        "flip": _flip_method,
        "roll": roll,
        "repeat": _repeat_method,
        "repeat_interleave": repeat_interleave,
        "tril": tril,
        "triu": triu,
        "tril_": _inplace("tril_", tril),
        "triu_": _inplace("triu_", triu),
        "take_along_dim": take_along_dim,
        "scatter": _scatter_method,
        "scatter_": _inplace("scatter_", _scatter_method),
        "scatter_add": scatter_add,
        "scatter_add_": _inplace("scatter_add_", scatter_add),
        "cumsum": cumsum,
        "cumprod": cumprod,
        "sort": sort,
        "argsort": argsort,
        "topk": topk,
        "all": all,
        "any": any,
        "median": median,
        "mode": mode,
        "unique": unique,
        "multinomial": multinomial,
        "bmm": bmm,
        "addmm": addmm,
        "baddbmm": baddbmm,
        "outer": outer,
        "ger": outer,
    }
