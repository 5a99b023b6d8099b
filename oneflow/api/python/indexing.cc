#include "oneflow/api/python/indexing.h"

#include <pybind11/stl.h>

#include "core/inplace.h"
#include "oneflow/api/python/convert.h"
#include "oneflow/global/global_tensor.h"

namespace oneflow {
namespace python {

using IntList = std::vector<int64_t>;

Tensor TrueCoordinates(const Tensor& mask) {
  Tensor m = fn::contiguous(mask.detach());
  if (!m.is_cpu()) m = fn::to_device(m, Device::CPU());
  const bool* p = m.data<bool>();
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < m.numel(); ++i) {
    if (p[i]) pos.push_back(i);
  }
  const int64_t n = static_cast<int64_t>(pos.size()), k = m.ndim();
  Tensor out = Tensor::Empty(Shape({n, k}), DType::kInt64, Device::CPU());
  int64_t* o = out.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = pos[i];
    for (int64_t d = k - 1; d >= 0; --d) {
      o[i * k + d] = rest % m.shape()[d];
      rest /= m.shape()[d];
    }
  }
  return out;
}
namespace {

// A slice bound beyond int64 means "past the end" as it does in Python: it saturates.
int64_t SliceBound(py::handle h) {
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!index) {
    PyErr_Clear();
    // RuntimeError, as OneFlow (PyTorch: TypeError)
    throw Error(StrCat("slice: expected int bounds, got ", Py_TYPE(h.ptr())->tp_name));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) return overflow > 0 ? INT64_MAX : INT64_MIN;
  return v;
}

// The items of a Python index (int, slice, None, Ellipsis, index tensor or list, or a tuple of
// these), as PyTorch reads them: lists become tensors, a 0-dim integer tensor is an int, a
// uint8 tensor is a mask. Index tensors must be local.
// OneFlow's (and numpy's legacy, PyTorch's) rule: a short sequence that is not a tuple but holds
// a sequence, slice, tensor, None or ... is a tuple of indices: x[[[0, 1], [1, 0]]] is
// x[[0, 1], [1, 0]]; x[[0, 1]] stays one index.
bool SequenceIsTuple(py::handle index) {
  if (py::isinstance<py::tuple>(index)) return true;
  if (py::isinstance<Tensor>(index) || py::isinstance<py::str>(index) ||
      !PySequence_Check(index.ptr())) {
    return false;
  }
  const Py_ssize_t n = PySequence_Size(index.ptr());
  if (n < 0) {
    PyErr_Clear();
    return false;
  }
  if (n >= 32) return false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_GetItem(index.ptr(), i);
    if (item == nullptr) {
      PyErr_Clear();
      return false;
    }
    py::object h = py::reinterpret_steal<py::object>(item);
    if ((PySequence_Check(item) && !py::isinstance<py::str>(h)) || PySlice_Check(item) ||
        py::isinstance<Tensor>(h) || item == Py_Ellipsis || item == Py_None) {
      return true;
    }
  }
  return false;
}

std::vector<py::object> IndexItems(py::handle index, bool global_x) {
  py::tuple items = py::isinstance<py::tuple>(index) ? py::reinterpret_borrow<py::tuple>(index)
                    : SequenceIsTuple(index)
                        ? py::reinterpret_steal<py::tuple>(PySequence_Tuple(index.ptr()))
                        : py::make_tuple(index);
  std::vector<py::object> out;
  int ellipses = 0;
  for (py::handle h : items) {
    ellipses += py::isinstance<py::ellipsis>(h) ? 1 : 0;
    if (ellipses > 1) throw IndexError("an index can only have a single ellipsis ('...')");
    const bool numpy = !py::isinstance<Tensor>(h) && py::hasattr(h, "dtype") &&
                       py::hasattr(h, "ndim") && py::hasattr(h, "__array__");
    if (numpy && h.attr("ndim").cast<int64_t>() == 0) {
      // numpy integer scalars (and numpy bools, as PyTorch reads them) are Python ints
      const std::string kind = h.attr("dtype").attr("kind").cast<std::string>();
      if (kind == "b" || kind == "i" || kind == "u") {
        out.push_back(py::int_(h.attr("item")().cast<int64_t>()));
        continue;
      }
    }
    if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h) || numpy) {  // index tensors
      Tensor t = TensorFromData(h, py::none(), Device::CPU());
      // an empty list names no element: an int64 index (PyTorch's), not a float or bool one
      if (t.numel() == 0 && !numpy) t = fn::to_dtype(t, DType::kInt64);
      out.push_back(py::cast(t));
    } else if (py::isinstance<Tensor>(h)) {
      Tensor t = h.cast<Tensor>();
      if (t.is_global() && !global_x) {
        throw IndexError(
            "index tensors must be local tensors, got a global one; index with "
            "its to_local() or a local copy");
      }
      if (t.is_global()) {  // a global tensor's index: the whole index, on every rank
        py::gil_scoped_release release;
        t = global::Whole(t);
      }
      if (t.dtype() == DType::kUInt8) {
        out.push_back(py::cast(fn::to_dtype(t, DType::kBool)));
      } else if (t.ndim() == 0 && IsIntegral(t.dtype()) && t.dtype() != DType::kBool) {
        out.push_back(Item(t));
      } else {
        out.push_back(py::cast(t));
      }
    } else {
      out.push_back(py::reinterpret_borrow<py::object>(h));
    }
  }
  return out;
}

bool IsTensorIndex(const py::object& h) { return py::isinstance<Tensor>(h); }

// An index tensor and the dim of the basic-indexed tensor it applies to.
struct AdvancedIndex {
  int64_t dim;    // in the tensor after basic indexing
  int64_t x_dim;  // in the indexed tensor (for messages)
  Tensor index;   // int64 on the CPU
};

// y[I1, ..., In] for index tensors on dims d1 < ... < dn of y (PyTorch's advanced indexing):
// the indices broadcast to one shape B; element b of the result's B dims takes
// y[..., I1[b], ..., In[b], ...]. B stands where the indexed dims stood when they are
// adjacent, else in front. One gather over the indexed dims flattened; autograd follows it.
Tensor ApplyAdvanced(const Tensor& y, const std::vector<AdvancedIndex>& adv) {
  const int64_t n = static_cast<int64_t>(adv.size());
  std::vector<int64_t> sizes;
  Shape b = adv[0].index.shape();
  for (const AdvancedIndex& a : adv) {
    sizes.push_back(y.shape()[a.dim]);
    b = BroadcastShapes(b, a.index.shape(), "index");
  }
  // Flat positions within the indexed dims, bounds checked (negative indices count back).
  Tensor lin = Tensor::Empty(b, DType::kInt64, Device::CPU());
  int64_t* l = lin.data<int64_t>();
  std::fill(l, l + lin.numel(), int64_t{0});
  for (int64_t i = 0; i < n; ++i) {
    Tensor idx = fn::contiguous(fn::expand(adv[i].index, b.dims()));
    const int64_t* p = idx.data<int64_t>();
    for (int64_t j = 0; j < lin.numel(); ++j) {
      int64_t v = p[j];
      if (v < -sizes[i] || v >= sizes[i]) {
        throw IndexError(StrCat("index ", v, " is out of bounds for dimension ", adv[i].x_dim,
                                " with size ", sizes[i]));
      }
      l[j] = l[j] * sizes[i] + (v < 0 ? v + sizes[i] : v);
    }
  }
  bool adjacent = true;
  for (int64_t i = 1; i < n; ++i) adjacent &= adv[i].dim == adv[i - 1].dim + 1;
  // The indexed dims first, flattened into one; the other dims after them, in order.
  IntList perm, rest;
  int64_t flat = 1;
  for (const AdvancedIndex& a : adv) perm.push_back(a.dim);
  for (int64_t d = 0; d < y.ndim(); ++d) {
    if (std::find(perm.begin(), perm.end(), d) == perm.end()) {
      perm.push_back(d);
      rest.push_back(y.shape()[d]);
    }
  }
  for (int64_t size : sizes) flat *= size;
  IntList shape{flat};
  shape.insert(shape.end(), rest.begin(), rest.end());
  Tensor yf = fn::reshape(fn::permute(y, perm), shape);
  Tensor index = y.device().type == DeviceType::kCPU ? lin : fn::to_device(lin, y.device());
  if (y.is_global()) {
    // Every rank computed the same positions: a broadcast index on y's placement.
    const global::GlobalMeta& m = global::Meta(y);
    index = global::MakeGlobal(index, index.shape(), m.placement,
                               sbp::NdSbp(m.nd_sbp.size(), sbp::Sbp::Broadcast()));
  }
  Tensor out = fn::index_select(yf, 0, fn::reshape(index, {-1}));
  IntList out_shape = b.dims();
  out_shape.insert(out_shape.end(), rest.begin(), rest.end());
  out = fn::reshape(out, out_shape);
  const int64_t first = adv[0].dim, nb = b.ndim();
  if (!adjacent || first == 0) return out;
  IntList back;  // [rest before the indexed dims, B, rest after]
  for (int64_t i = 0; i < first; ++i) back.push_back(nb + i);
  for (int64_t i = 0; i < nb; ++i) back.push_back(i);
  for (int64_t i = nb + first; i < static_cast<int64_t>(out_shape.size()); ++i) back.push_back(i);
  return fn::permute(out, back);
}

// Applies a Python index to x as PyTorch does: ints, slices, None and ... first (views; an
// int selects its dim), then the index tensors together (ApplyAdvanced). A bool mask of k
// dims must match the k dims it covers and stands for the coordinates of its true elements.
Tensor ApplyIndex(const Tensor& x, const std::vector<py::object>& items) {
  int64_t consumed = 0;  // dims of x the index names
  for (const py::object& h : items) {
    if (IsTensorIndex(h) && h.cast<Tensor>().dtype() == DType::kBool) {
      consumed += h.cast<Tensor>().ndim();
    } else if (!h.is_none() && !py::isinstance<py::ellipsis>(h) && !py::isinstance<py::bool_>(h)) {
      ++consumed;
    }
  }
  if (consumed > x.ndim()) {
    throw IndexError(StrCat("too many indices for tensor of dimension ", x.ndim()));
  }
  Tensor y = x;
  int64_t dim = 0;    // dim of y the next index applies to
  int64_t x_dim = 0;  // dims of x named before this index
  std::vector<AdvancedIndex> adv;
  std::vector<bool> bools;  // the bools among adv
  for (const py::object& h : items) {
    if (py::isinstance<py::ellipsis>(h)) {
      dim += x.ndim() - consumed;
      x_dim += x.ndim() - consumed;
    } else if (h.is_none()) {
      y = fn::unsqueeze(y, dim++);
    } else if (py::isinstance<py::bool_>(h)) {
      // A bool is a 0-dim mask (PyTorch's and OneFlow's): a new dim indexed by [0] (True) or by
      // nothing (False); with other index tensors it broadcasts as one of them.
      y = fn::unsqueeze(y, dim);
      Tensor idx = Tensor::Empty(Shape({h.cast<bool>() ? 1 : 0}), DType::kInt64, Device::CPU());
      if (idx.numel() == 1) idx.data<int64_t>()[0] = 0;
      adv.push_back({dim++, x_dim, idx});
      bools.push_back(h.cast<bool>());
    } else if (py::isinstance<py::int_>(h)) {
      int64_t i = ToInt64(h, "index"), n = y.shape()[dim];
      if (i < -n || i >= n) {  // name the dim of x, as PyTorch does
        throw IndexError(StrCat("index ", i, " is out of bounds for dimension ", x_dim,
                                " with size ", n, " (out of range [", -n, ", ", n, "))"));
      }
      y = fn::select(y, dim, i);
      ++x_dim;
    } else if (py::isinstance<py::slice>(h)) {
      py::slice s = py::reinterpret_borrow<py::slice>(h);
      py::object start = s.attr("start"), stop = s.attr("stop"), step = s.attr("step");
      int64_t st = step.is_none() ? 1 : ToInt64(step, "slice step");
      if (st <= 0)
        throw Error(StrCat("slice: step must be positive, got ", st));  // RuntimeError, as OneFlow
      int64_t n = y.shape()[dim];
      y = fn::slice(y, dim, start.is_none() ? 0 : SliceBound(start),
                    stop.is_none() ? n : SliceBound(stop), st);
      ++dim;
      ++x_dim;
    } else if (IsTensorIndex(h)) {
      Tensor idx = h.cast<Tensor>();
      if (idx.dtype() == DType::kBool) {
        const int64_t k = idx.ndim();
        IntList covered(y.shape().dims().begin() + dim, y.shape().dims().begin() + dim + k);
        if (k == 0 || Shape(covered) != idx.shape()) {
          throw IndexError(StrCat("the shape of the mask ", idx.shape(), " at index ", x_dim,
                                  " does not match the shape of the indexed tensor ", x.shape(),
                                  k == 0 ? " (a 0-dim mask is not supported)" : ""));
        }
        Tensor coords = TrueCoordinates(idx);
        for (int64_t d = 0; d < k; ++d) {
          adv.push_back({dim + d, x_dim + d, fn::select(coords, 1, d)});
        }
        dim += k;
        x_dim += k;
        continue;
      }
      if (!IsIntegral(idx.dtype())) {
        throw IndexError(StrCat("tensors used as indices must be long, int or bool, got ",
                                DTypeName(idx.dtype())));
      }
      idx = fn::contiguous(idx.detach());
      if (!idx.is_cpu()) idx = fn::to_device(idx, Device::CPU());
      if (idx.dtype() != DType::kInt64) idx = fn::to_dtype(idx, DType::kInt64);
      adv.push_back({dim++, x_dim++, idx});
    } else {
      throw IndexError(StrCat("unsupported index ", ShortRepr(h)));
    }
  }
  if (adv.size() == 1 && bools.size() == 1) {  // x[..., True, ...] alone: a view
    return bools[0] ? y : fn::slice(y, adv[0].dim, 0, 0, 1);
  }
  return adv.empty() ? y : ApplyAdvanced(y, adv);
}

}  // namespace

Tensor ApplyIndex(const Tensor& x, py::handle index) {
  return ApplyIndex(x, IndexItems(index, x.is_global()));
}

// t[index] = value. Basic indices write through a view of t; index tensors (integer or bool)
// name elements by position: the index applied to t's flat positions says which, and the
// value, broadcast to the indexed shape, is written there (where one element is named twice,
// the last write wins).
// value without the leading size-1 dims it has beyond ndim (PyTorch drops them when writing).
Tensor DropLeadingOnes(Tensor v, int64_t ndim) {
  while (v.ndim() > ndim && v.shape()[0] == 1) v = fn::squeeze(v, 0);
  return v;
}

void SetItem(Tensor& t, py::handle index, py::handle value) {
  CheckInPlace(t, "__setitem__");
  std::vector<py::object> items = IndexItems(index, t.is_global());
  bool advanced = false;
  int bools = 0;  // two bools or more index as tensors do (ApplyIndex), not as a view
  for (const py::object& h : items) {
    advanced |= IsTensorIndex(h);
    bools += py::isinstance<py::bool_>(h) ? 1 : 0;
  }
  advanced |= bools > 1;
  if (!advanced) {
    // A write into a view of t, which autograd follows (t's history is rebased).
    Tensor view = ApplyIndex(t, items);
    Tensor v = DropLeadingOnes(ScalarOrTensor(value, view), view.ndim());
    InPlace(
        view, [&](const Tensor&) { return v; }, "__setitem__");
    return;
  }
  if (GradModeEnabled() && py::isinstance<Tensor>(value) && value.cast<Tensor>().requires_grad()) {
    throw Error(
        "__setitem__: the value requires grad, but writes through an index tensor are "
        "not recorded by autograd; use slices, masked_fill or oneflow.where, or write "
        "value.detach()");
  }
  if (t.is_global()) {
    throw IndexError(
        "__setitem__: index tensors on a global tensor are not supported; use "
        "oneflow.where (or write to_local())");
  }
  if (t.requires_grad() && GradModeEnabled()) {
    throw Error(
        "__setitem__: writing through an index tensor into a tensor that requires grad "
        "is not supported; use masked_fill or oneflow.where, which autograd follows");
  }
  NoGradGuard no_grad;
  Tensor named =
      ApplyIndex(fn::reshape(fn::arange(0, static_cast<double>(t.numel()), 1, DType::kInt64),
                             t.shape().dims()),
                 items);
  // The value broadcasts to the indexed shape.
  Tensor given = ScalarOrTensor(value, t).detach();
  Tensor v = DropLeadingOnes(given, named.ndim());
  bool fits = v.ndim() <= named.ndim();
  for (int64_t i = 1; fits && i <= v.ndim(); ++i) {
    const int64_t d = v.shape()[v.ndim() - i];
    fits = d == 1 || d == named.shape()[named.ndim() - i];
  }
  if (!fits) {
    throw Error(StrCat("__setitem__: a value of shape ", given.shape(),
                       " cannot be broadcast to the indexed shape ", named.shape()));
  }
  v = fn::contiguous_copy(fn::expand(v, named.shape().dims()));
  if (v.dtype() != t.dtype()) v = fn::to_dtype(v, t.dtype());
  if (!v.is_cpu()) v = fn::to_device(v, Device::CPU());
  Tensor dst =
      t.is_cpu() && t.is_contiguous() ? t : fn::contiguous_copy(fn::to_device(t, Device::CPU()));
  Tensor pos = fn::contiguous(named);
  const int64_t* p = pos.data<int64_t>();
  DispatchWithHalf(t.dtype(), "__setitem__", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = dst.data<T>();
    const T* s = v.data<T>();
    for (int64_t i = 0; i < pos.numel(); ++i) d[p[i]] = s[i];
  });
  if (dst.is_same(t)) {
    t.storage()->bump_version();
  } else {
    fn::copy_(t, dst);
  }
}

}  // namespace python
}  // namespace oneflow
