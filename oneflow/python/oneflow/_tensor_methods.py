"""The one place that installs the Tensor methods (oneflow/__init__.py calls install() once):
the methods that need PyTorch's flexible arguments (x.sum(dim=1, keepdim=True), x.view(2, -1)),
indexing writes, hooks, pickling and the legacy constructor, then the methods of the API modules
(_ops, _index_api, _misc, _math_api) and of global tensors (_global)."""

import builtins
import sys

import oneflow as flow
import oneflow._oneflow_internal as _C
from oneflow import (_breadth_ops, _complex, _global, _index_api, _math_api, _misc, _tensor_str,
                     _tensor_types, _trace_state)
from oneflow._api_util import Size, _floating_default, _inplace, _method, _size
from oneflow._creation import tensor, zeros
from oneflow._ops import (_floor_div, add, argmax, argmin, argwhere, clamp, flatten, gather,
                          index_select, log_softmax, masked_fill, masked_select, max, mean, min,
                          nonzero, permute, pow, remainder, reshape, softmax, squeeze, sub, sum,
                          transpose, unsqueeze, view)
from oneflow._random import _drawing_from

Tensor = _C.Tensor


def _to(self, *args, **kwargs):
    """to(device), to(dtype), to(device, dtype), to(other_tensor); to(oneflow.Tensor) is the
    tensor itself (OneFlow's way to get a graph module's tensor)."""
    if len(args) == 1 and args[0] is Tensor and not kwargs:
        return self
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            if a.is_global or self.is_global:
                raise RuntimeError("tensor.to(other) can only be called when tensor and other are "
                                   "local tensors (use to_global for global ones)")
            dtype, device = a.dtype, a._device
        elif a is not None:
            device = a
    t = self
    if device is not None:
        t = t._to_device(device)
    if dtype is not None:
        t = t._to_dtype(dtype)
    return t


def install():
    """Installs every Tensor method (oneflow/__init__.py calls it once)."""
    T = Tensor
    T.shape = property(lambda self: Size(self._shape))

    def size(self, dim=None):
        s = self._shape
        return Size(s) if dim is None else s[dim]
    T.size = size
    T.to = _to
    T.cpu = lambda self: self._to_device("cpu")
    T.cuda = lambda self, device=None: self._to_device("cuda" if device is None else device)
    T.float = lambda self: self._to_dtype(_C.float32)
    T.double = lambda self: self._to_dtype(_C.float64)
    T.half = lambda self: self._to_dtype(_C.float16)
    T.bfloat16 = lambda self: self._to_dtype(_C.bfloat16)
    T.long = lambda self: self._to_dtype(_C.int64)
    T.int = lambda self: self._to_dtype(_C.int32)
    T.bool = lambda self: self._to_dtype(_C.bool)
    def type_as(self, other):
        """self in other's dtype and where other is (OneFlow): with a global other, global on
        its placement with its sbp (a local self's values are broadcast from the placement's
        first rank, then laid out as other); with a local other and a global self, the whole
        value as a local tensor on other's device."""
        if not isinstance(other, T):
            raise TypeError(f"type_as: expected a tensor, got {type(other).__name__}")
        if other.is_global:
            placement, nd_sbp = other.placement, other.sbp
            t = self
            if not t.is_global:
                t = t.to_global(placement=placement,
                                sbp=[_global.sbp.broadcast] * len(placement.hierarchy))
            return t.to_global(placement=placement, sbp=nd_sbp)._to_dtype(other.dtype)
        if self.is_global:
            whole = self.to_global(sbp=[_global.sbp.broadcast] * len(self.placement.hierarchy))
            return whole.to_local()._to_device(other._device)._to_dtype(other.dtype)
        return self._to_dtype(other.dtype)
    T.type_as = type_as

    def type(self, dtype=None, non_blocking=False):
        """x.type(): the legacy type name ('oneflow.FloatTensor'); x.type(t) with t a dtype, a
        legacy type (flow.LongTensor, flow.cuda.FloatTensor) or its name: x converted to it."""
        if dtype is None:
            return _tensor_types.type_name(self)
        if isinstance(dtype, str):
            dtype = _tensor_types.by_name(dtype)
        if isinstance(dtype, _C.dtype):
            return self._to_dtype(dtype)
        if not isinstance(dtype, _tensor_types._TensorType):
            raise TypeError(f"type: expected a dtype, a tensor type such as oneflow.FloatTensor "
                            f"or its name, got {dtype!r}")
        t = self._to_dtype(dtype.dtype)
        if _tensor_types._device_type(t) == dtype.device:
            return t
        if t.is_global:
            raise TypeError(f"type: {dtype!r} is on {dtype.device} but this global tensor is on "
                            f"{t.placement}; change its device with to_global(placement=...)")
        return t._to_device(dtype.device)
    T.type = type
    T.is_floating_point = lambda self: self.dtype.is_floating_point

    def __array__(self, dtype=None, copy=None):
        """numpy.asarray(t), np.allclose(t, ...): the values, also of a tensor that requires grad
        (OneFlow's numpy() does the same)."""
        a = (self.detach() if self.requires_grad else self).numpy()
        return a if dtype is None else a.astype(dtype, copy=False)
    T.__array__ = __array__
    T.reshape = reshape
    T.view = view
    T.view_as = lambda self, other: _C.view(self, list(other._shape))
    T.reshape_as = lambda self, other: _C.reshape(self, list(other._shape))
    T.permute = permute
    T.transpose = transpose
    T.T = property(lambda self: _C.permute(self, list(range(self.ndim - 1, -1, -1))))
    T.squeeze = squeeze
    T.unsqueeze = unsqueeze
    T.flatten = flatten

    def expand(self, *sizes):
        return _C.expand(self, _size(sizes, "expand", infer=True))
    T.expand = expand
    T.expand_as = lambda self, other: _C.expand(self, list(other._shape))
    T.sum = sum
    T.mean = mean
    T.max = max
    T.min = min
    T.argmax = argmax
    T.argmin = argmin
    # Methods that are the functional op with self first.
    for name in (
        "matmul", "mul", "div", "neg", "rsqrt", "sign", "square", "gelu", "eq",
        "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "maximum", "minimum",
    ):
        setattr(T, name, _method(getattr(_C, name)))
    T.add = add
    T.sub = sub
    T.pow = pow
    T.clamp = clamp
    T.clip = clamp
    T.softmax = softmax
    T.log_softmax = log_softmax
    T.index_select = index_select
    T.gather = gather
    T.all = lambda self: _C.min_all(self.bool().long()).bool() if self.numel() else _C.tensor(True, None, None, False)
    T.any = lambda self: _C.max_all(self.bool().long()).bool() if self.numel() else _C.tensor(False, None, None, False)
    T.nonzero = nonzero
    T.argwhere = argwhere
    T.masked_fill = masked_fill
    T.masked_fill_ = _inplace("masked_fill_", masked_fill)
    T.masked_select = masked_select
    T.add_ = _inplace("add_", lambda self, other, alpha=1: _C.add(self, other if alpha == 1 else other * alpha))
    T.sub_ = _inplace("sub_", lambda self, other, alpha=1: _C.sub(self, other if alpha == 1 else other * alpha))
    T.mul_ = _inplace("mul_", _C.mul)
    T.div_ = _inplace("div_", _C.div)
    T.clamp_ = _inplace("clamp_", clamp)
    T.__iadd__ = T.add_
    T.__isub__ = T.sub_
    T.__imul__ = T.mul_
    T.__itruediv__ = T.div_

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        with _drawing_from(generator, "uniform_"):
            _C.uniform_(self, builtins.float(a), builtins.float(b))
        return self

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        with _drawing_from(generator, "normal_"):
            _C.normal_(self, builtins.float(mean), builtins.float(std))
        return self
    T.uniform_ = uniform_
    T.normal_ = normal_

    _c_setitem = T.__setitem__

    def __setitem__(self, index, value):
        # The binding writes through x[index] as a view, but an int index on a strided view (a
        # column, x[:, 1]) yields a copy: the write would be lost. Write through length-1
        # slices instead, which are always views, reshaping the value to match.
        items = index if isinstance(index, tuple) else (index,)
        is_int = [isinstance(i, builtins.int) and not isinstance(i, builtins.bool) for i in items]
        special = [i is None or i is Ellipsis or isinstance(i, slice) or k for i, k in zip(items, is_int)]
        if not builtins.all(special) or not builtins.any(k or i is None for i, k in zip(items, is_int)):
            return _c_setitem(self, index, value)  # no int or None, or an index tensor/list
        if self.is_contiguous() and None not in items and builtins.all(is_int[:builtins.sum(is_int)]):
            return _c_setitem(self, index, value)  # leading ints of a contiguous tensor: views
        shape = self._shape
        consumed = builtins.sum(1 for i in items if i is not None and i is not Ellipsis)
        if consumed > len(shape):
            raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
        write_index, dim = [], 0
        for i, k in zip(items, is_int):
            if i is Ellipsis:
                write_index.append(i)
                dim += len(shape) - consumed
            elif k:
                n = shape[dim]
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {n}")
                i %= n
                write_index.append(slice(i, i + 1))
                dim += 1
            elif i is not None:
                write_index.append(i)
                dim += 1
        write_index = tuple(write_index)
        if isinstance(value, Tensor):
            view_shape = _C.Tensor.__getitem__(self.detach(), write_index)._shape
            # The shape x[index] has: the int dims dropped, a 1 for each None.
            target, dim = [], 0
            for i, k in zip(items, is_int):
                if i is Ellipsis:
                    target.extend(view_shape[dim:dim + len(shape) - consumed])
                    dim += len(shape) - consumed
                elif i is None:
                    target.append(1)
                else:
                    if not k:
                        target.append(view_shape[dim])
                    dim += 1
            target.extend(view_shape[dim:])
            v = value  # reshaped with autograd: the write is followed when value requires grad
            lead = 0
            while v.ndim - lead > len(target) and v._shape[lead] == 1:
                lead += 1  # PyTorch drops leading size-1 dims of the value
            if lead:
                v = _C.reshape(v, list(v._shape[lead:]))
            value = _C.reshape(_C.expand(v, target), list(view_shape))
        return _c_setitem(self, write_index, value)
    T.__setitem__ = __setitem__

    _c_requires_grad_ = T.requires_grad_

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.requires_grad and not self.is_leaf:
            return self  # already requires grad: a no-op on non-leaves too, as in PyTorch
        return _c_requires_grad_(self, requires_grad)
    T.requires_grad_ = requires_grad_

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))
    T.__iter__ = __iter__

    def __repr__(self):
        return _tensor_str._repr(self)
    T.__repr__ = __repr__
    T.__str__ = __repr__

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.item(), spec)
        return format(repr(self), spec)
    T.__format__ = __format__
    T.__mod__ = lambda self, other: remainder(self, other)
    T.__rmod__ = lambda self, other: _C.rremainder(self, other)
    T.remainder = remainder
    T.__floordiv__ = lambda self, other: _floor_div(self, other)
    T.__rfloordiv__ = lambda self, other: _floor_div(_C.tensor(other, self.dtype, None, False), self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = self.detach().clone()
        if self.requires_grad:
            result.requires_grad_(True)
        memo[id(self)] = result
        return result
    T.__deepcopy__ = __deepcopy__

    def __reduce_ex__(self, protocol):
        return (_rebuild_tensor, (self._raw_bytes(), tuple(self._shape), self.dtype.name, self.requires_grad))
    T.__reduce_ex__ = __reduce_ex__

    @staticmethod
    def _make_subclass(cls, data, requires_grad=False):
        obj = Tensor.__new__(cls)
        Tensor.__init__(obj, data.detach())
        if requires_grad:
            obj.requires_grad_(True)
        return obj
    T._make_subclass = _make_subclass

    _wrap = T.__init__  # the binding's: wraps an existing tensor

    def __init__(self, *args, dtype=None, device=None, placement=None, sbp=None,
                 requires_grad=False):
        """The legacy constructor forms OneFlow and PyTorch accept: flow.Tensor(2, 3) or
        flow.Tensor(flow.Size([2, 3])) (zeros of the default dtype unless dtype), flow.Tensor(data)
        (a copy in the default dtype of a list, array or tensor), any of them with device= or
        placement=/sbp=."""
        if len(args) == 1 and isinstance(args[0], T) and dtype is device is placement is sbp \
                is None and not requires_grad:
            return _wrap(self, args[0])  # wraps, sharing data (what Parameter and subclasses do)
        sizes = args[0] if len(args) == 1 and isinstance(args[0], Size) else args or (0,)
        is_shape = all(isinstance(a, builtins.int) and not isinstance(a, builtins.bool)
                       for a in sizes)
        if (placement is None) != (sbp is None):
            raise ValueError("Tensor: placement and sbp go together (got only one of them)")
        if placement is not None and device is not None:
            raise ValueError("Tensor: give device or placement, not both")
        if not is_shape and len(args) != 1:
            raise TypeError(f"Tensor: expected sizes (ints) or one data argument, got {args!r}")
        data = None if is_shape else args[0]
        if isinstance(data, T) and data.is_global:
            # OneFlow: a global tensor with device= gives this rank's local tensor there, with
            # placement= / sbp= the tensor laid out anew
            if placement is not None:
                t = data.to_global(placement=placement, sbp=sbp)
            else:
                t = data.to_local()
                t = t.to(device) if device is not None else t
            t = t._to_dtype(_floating_default(dtype))
        elif placement is not None:
            # the sizes or data are the logical (global) tensor's, as in flow.zeros / flow.tensor
            if is_shape:
                t = flow.zeros(*sizes, dtype=_floating_default(dtype), placement=placement, sbp=sbp)
            else:
                t = flow.tensor(data, dtype=_floating_default(dtype), placement=placement, sbp=sbp)
        else:
            if is_shape:
                t = zeros(*sizes, dtype=_floating_default(dtype))
            else:
                t = tensor(data, dtype=_floating_default(dtype))
            if device is not None:
                t = t.to(device)
        _wrap(self, t.detach())
        if requires_grad:
            self.requires_grad_(True)
    T.__init__ = __init__

    def register_hook(self, hook):
        """hook(grad) runs on each gradient computed for this tensor and may return a
        replacement; returns a handle whose remove() takes the hook off."""
        return _RemovableHandle(self, self._register_hook(hook))
    T.register_hook = register_hook

    # x.grad is the same Python object at each access while the gradient is the same tensor
    # (OneFlow's and PyTorch's identity), so `g = x.grad; g is x.grad` holds.
    raw_grad = T.grad

    def _get_grad(self):
        g = raw_grad.fget(self)
        if g is None:
            self.__dict__.pop("_grad_object", None)
            return None
        cached = self.__dict__.get("_grad_object")
        if cached is not None and _C.tensor_impl_id(cached) == _C.tensor_impl_id(g):
            return cached
        self.__dict__["_grad_object"] = g
        return g

    def _set_grad(self, g):
        raw_grad.fset(self, g)
        self.__dict__.pop("_grad_object", None)
    T.grad = property(_get_grad, _set_grad)

    def register_post_accumulate_grad_hook(self, hook):
        self._register_post_accumulate_grad_hook(hook)
    T.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook

    # Global tensors (oneflow/_global.py): the same methods serve local and global tensors;
    # numpy(), item(), tolist() and the number conversions gather a global tensor in C++.
    T.is_consistent = T.is_global
    T.is_local = property(lambda self: not self.is_global)
    T.placement = property(_global._placement)
    T.sbp = property(_global._sbp)
    T.device = property(_global._device)
    T.to_global = T.to_consistent = _global._to_global
    T.to_local = _global._to_local
    T.global_id = _global._global_id
    T.check_meta_consistency = _global._check_meta_consistency
    T._tensor_buffer_shapes_and_dtypes = property(_global._tensor_buffer_meta)
    # The other API modules' methods, in the order that settles names defined twice.
    for module in (_index_api, _misc, _math_api, _breadth_ops, _complex):
        for name, method in module._tensor_methods().items():
            setattr(T, name, method)
    _install_numpy_operands(T)
    _install_trace_points(T)


# ---------------------------------------------------------------- nn.Graph's trace points

# The value reads a compiled graph's replay could not redo; while a trace runs they (and
# backward) go to it (oneflow/_trace_state.py), otherwise straight to the C++ method.
_VALUE_READS = ("numpy", "item", "tolist", "__bool__", "__float__", "__int__", "__index__")


def _install_trace_points(T):
    run_backward = T.backward

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        trace = _trace_state._active
        if trace is None:
            return run_backward(self, gradient, retain_graph, create_graph, inputs)
        return trace.backward(self, run_backward, gradient, retain_graph, create_graph, inputs)

    backward.__doc__ = run_backward.__doc__
    T.backward = backward
    for name in _VALUE_READS:
        setattr(T, name, _value_read(getattr(T, name), name))


def _value_read(read, name):
    def method(self, *args, **kwargs):
        trace = _trace_state._active
        if trace is not None:
            trace.read(self, name)
        return read(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = read.__doc__
    return method


class _RemovableHandle:
    """What register_hook returns: remove() unregisters the hook (once)."""

    def __init__(self, tensor, hook_id):
        self._tensor, self.id = tensor, hook_id

    def remove(self):
        if self._tensor is not None:
            self._tensor._remove_hook(self.id)
            self._tensor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _rebuild_tensor(raw, shape, dtype_name, requires_grad):
    t = _C.from_bytes(raw, list(shape), getattr(_C, dtype_name))
    if requires_grad:
        t.requires_grad_(True)
    return t


# ---------------------------------------------------------------- numpy operands

# The operators that take a numpy operand, in either order (tensor + array, array + tensor);
# numpy leaves the reflected ones to the tensor because of Tensor.__array_priority__.
_NUMPY_OPERATORS = (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
    "__matmul__", "__rmatmul__", "__and__", "__rand__", "__or__", "__ror__", "__xor__",
    "__rxor__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
)


# Operators bound in C++ whose operand conversion (ScalarOrTensor, convert.cc) calls
# _numpy_operand itself: no Python wrapper on the hot path of `x + y`.
_CPP_NUMPY_OPERATORS = {"__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                        "__truediv__", "__rtruediv__", "__pow__", "__rpow__"}


def _numpy_operand(value, like):
    """A numpy operand of an operator on the tensor like: a numpy scalar or 0-d array is the
    Python number (a scalar operand, as in PyTorch); an array becomes a tensor where like is:
    on its device, or for a global like on its placement, broadcast."""
    if isinstance(value, sys.modules["numpy"].generic) or value.ndim == 0:
        return value.item()
    t = _C.tensor(value, None, None, False)
    if like.is_global:
        placement = like.placement
        return t.to_global(placement=placement,
                           sbp=[_global.sbp.broadcast] * len(placement.hierarchy))
    return t if like._device.type == "cpu" else t._to_device(like._device)


def _install_numpy_operands(T):
    T.__array_priority__ = 1000  # ndarray's operators return NotImplemented to a tensor
    T.__rmatmul__ = lambda self, other: _C.matmul(other, self)
    T.__rand__ = lambda self, other: self & other
    T.__ror__ = lambda self, other: self | other
    T.__xor__ = lambda self, other: _math_api.logical_xor(self, other)
    T.__rxor__ = lambda self, other: _math_api.logical_xor(self, other)
    for name in _NUMPY_OPERATORS:
        if name not in _CPP_NUMPY_OPERATORS:
            setattr(T, name, _accepting_numpy(getattr(T, name), name))


def _accepting_numpy(op, name):
    def operator(self, other):
        # numpy is optional: an ndarray operand means numpy is imported already.
        np = sys.modules.get("numpy")
        if np is not None and isinstance(other, (np.ndarray, np.generic)):
            other = _numpy_operand(other, self)
        return op(self, other)
    operator.__name__ = operator.__qualname__ = name
    return operator
