// The extension module oneflow._oneflow_internal (imported as oneflow._C): dtypes, devices,
// the Tensor class with its hot methods and operators, and the functional ops. Flexible
// Python signatures (flow.zeros(2, 3, dtype=...)) live in the Python package on top.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/autocast.h"
#include "core/kernels/cpu/blas.h"
#include "core/autograd.h"
#include "core/inplace.h"
#include "core/op_registry.h"
#include "core/ops/nn/nn.h"
#include "core/optim.h"
#include "oneflow/api/python/convert.h"
#include "oneflow/global/global_tensor.h"
#include "runtime/env.h"

namespace oneflow {
namespace python {
namespace {

using IntList = std::vector<int64_t>;

Tensor OptTensor(const py::object& o) { return o.is_none() ? Tensor() : o.cast<Tensor>(); }
py::object TensorOrNone(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

// ---------------------------------------------------------------- indexing

// The coordinates of a bool tensor's true elements in row-major order: an (n, ndim) int64
// CPU tensor (nonzero; a mask index uses one column per dim it covers).
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

// The items of a Python index (int, slice, None, Ellipsis, index tensor or list, or a tuple of
// these), as PyTorch reads them: lists become tensors, a 0-dim integer tensor is an int, a
// uint8 tensor is a mask. Index tensors must be local.
std::vector<py::object> IndexItems(py::handle index) {
  py::tuple items = py::isinstance<py::tuple>(index) ? py::reinterpret_borrow<py::tuple>(index)
                                                     : py::make_tuple(index);
  std::vector<py::object> out;
  int ellipses = 0;
  for (py::handle h : items) {
    ellipses += py::isinstance<py::ellipsis>(h) ? 1 : 0;
    if (ellipses > 1) throw IndexError("an index can only have a single ellipsis ('...')");
    if (py::isinstance<py::list>(h)) {
      out.push_back(py::cast(TensorFromData(h, py::none(), Device::CPU())));
    } else if (py::isinstance<Tensor>(h)) {
      Tensor t = h.cast<Tensor>();
      if (t.is_global()) {
        throw IndexError("index tensors must be local tensors, got a global one; index with "
                         "its to_local() or a local copy");
      }
      if (t.dtype() == DType::kUInt8) {
        out.push_back(py::cast(fn::to_dtype(t, DType::kBool)));
      } else if (t.ndim() == 0 && IsIntegral(t.dtype()) && t.dtype() != DType::kBool) {
        out.push_back(Item(t));
      } else {
        out.push_back(py::reinterpret_borrow<py::object>(h));
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
    } else if (!h.is_none() && !py::isinstance<py::ellipsis>(h)) {
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
  for (const py::object& h : items) {
    if (py::isinstance<py::ellipsis>(h)) {
      dim += x.ndim() - consumed;
      x_dim += x.ndim() - consumed;
    } else if (h.is_none()) {
      y = fn::unsqueeze(y, dim++);
    } else if (py::isinstance<py::bool_>(h)) {
      throw IndexError("indexing with a Python bool is not supported");
    } else if (py::isinstance<py::int_>(h)) {
      int64_t i = h.cast<int64_t>(), n = y.shape()[dim];
      if (i < -n || i >= n) {  // name the dim of x, as PyTorch does
        throw IndexError(StrCat("index ", i, " is out of bounds for dimension ", x_dim,
                                " with size ", n));
      }
      y = fn::select(y, dim, i);
      ++x_dim;
    } else if (py::isinstance<py::slice>(h)) {
      py::slice s = py::reinterpret_borrow<py::slice>(h);
      py::object start = s.attr("start"), stop = s.attr("stop"), step = s.attr("step");
      int64_t st = step.is_none() ? 1 : step.cast<int64_t>();
      if (st <= 0) throw IndexError("slice: step must be positive");
      int64_t n = y.shape()[dim];
      y = fn::slice(y, dim, start.is_none() ? 0 : start.cast<int64_t>(),
                    stop.is_none() ? n : stop.cast<int64_t>(), st);
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
      throw IndexError(StrCat("unsupported index ", py::repr(h).cast<std::string>()));
    }
  }
  return adv.empty() ? y : ApplyAdvanced(y, adv);
}
Tensor ApplyIndex(const Tensor& x, py::handle index) { return ApplyIndex(x, IndexItems(index)); }

// A Python callable held by C++ (autograd hooks), which may drop it on any thread: released
// under the GIL, or left alone once the interpreter is gone.
class PyCallable {
 public:
  explicit PyCallable(py::function f) : fn_(std::make_unique<py::object>(std::move(f))) {}
  ~PyCallable() {
    if (!Py_IsInitialized()) {
      (void)fn_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    fn_.reset();
  }
  PyCallable(const PyCallable&) = delete;
  PyCallable& operator=(const PyCallable&) = delete;
  // REQUIRES: the GIL.
  py::object operator()(py::object arg) const { return (*fn_)(std::move(arg)); }

 private:
  std::unique_ptr<py::object> fn_;
};

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
  std::vector<py::object> items = IndexItems(index);
  bool advanced = false;
  for (const py::object& h : items) advanced |= IsTensorIndex(h);
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
    throw IndexError("__setitem__: index tensors on a global tensor are not supported; use "
                     "oneflow.where (or write to_local())");
  }
  if (t.requires_grad() && GradModeEnabled()) {
    throw Error("__setitem__: writing through an index tensor into a tensor that requires grad "
                "is not supported; use masked_fill or oneflow.where, which autograd follows");
  }
  NoGradGuard no_grad;
  Tensor named = ApplyIndex(
      fn::reshape(fn::arange(0, static_cast<double>(t.numel()), 1, DType::kInt64), t.shape().dims()),
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
  Tensor dst = t.is_cpu() && t.is_contiguous() ? t : fn::contiguous_copy(fn::to_device(t, Device::CPU()));
  Tensor pos = fn::contiguous(named);
  const int64_t* p = pos.data<int64_t>();
  DispatchAll(t.dtype(), "__setitem__", [&](auto tag) {
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

// In-place op given as its out-of-place result (x.add_(y) writes add(x, y) into x); autograd
// follows the write (core/inplace.h).
Tensor& AssignInPlace(Tensor& t, const Tensor& value, const char* op) {
  InPlace(
      t, [&](const Tensor&) { return value; }, op);
  return t;
}

py::object NodeOrNone(const Tensor& t) {
  RefreshViewHistory(t);
  if (!t.grad_fn()) return py::none();
  return py::cast(t.grad_fn());
}

py::array ToNumpy(const Tensor& t) {
  if (t.requires_grad() && GradModeEnabled()) {
    throw Error("numpy: cannot convert a tensor that requires grad; call .detach().numpy()");
  }
  Tensor c = fn::contiguous(t.detach());
  if (!c.is_cpu()) c = fn::to_device(c, Device::CPU());
  std::string fmt;
  switch (c.dtype()) {
    case DType::kBool:
      fmt = "?";
      break;
    case DType::kUInt8:
      fmt = "B";
      break;
    case DType::kInt8:
      fmt = "b";
      break;
    case DType::kInt32:
      fmt = "i";
      break;
    case DType::kInt64:
      fmt = "q";
      break;
    case DType::kFloat16:
      fmt = "e";
      break;
    case DType::kFloat32:
      fmt = "f";
      break;
    case DType::kFloat64:
      fmt = "d";
      break;
    case DType::kBFloat16:
      c = fn::to_dtype(c, DType::kFloat32);
      fmt = "f";
      break;
  }
  std::vector<py::ssize_t> shape(c.shape().dims().begin(), c.shape().dims().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : c.strides()) strides.push_back(s * SizeOf(c.dtype()));
  // The array owns a copy: numpy users can keep it after the tensor changes.
  py::array view(py::dtype(fmt), shape, strides, c.raw_data());
  return py::array(view.attr("copy")());
}

}  // namespace

void BindComm(py::module_& m);    // comm.cc
void BindGlobal(py::module_& m);  // global.cc
void BindDdp(py::module_& m);     // ddp.cc
void BindCuda(py::module_& m);    // cuda.cc

PYBIND11_MODULE(_oneflow_internal, m) {
  m.doc() = "oneflow C++ core";

  // pybind11 tries the translator registered last first: the base class goes first.
  py::register_exception<oneflow::Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<oneflow::IndexError>(m, "IndexError", PyExc_IndexError);
  py::register_exception<oneflow::TypeError>(m, "TypeError", PyExc_TypeError);

  py::class_<PyDType>(m, "dtype")
      .def_property_readonly("name", [](const PyDType& d) { return DTypeName(d.dtype); })
      .def_property_readonly("is_floating_point",
                             [](const PyDType& d) { return IsFloating(d.dtype); })
      .def_property_readonly("itemsize", [](const PyDType& d) { return SizeOf(d.dtype); })
      .def("__repr__",
           [](const PyDType& d) { return std::string("oneflow.") + DTypeName(d.dtype); })
      .def("__eq__",
           [](const PyDType& a, py::handle b) {
             return py::isinstance<PyDType>(b) && b.cast<const PyDType&>().dtype == a.dtype;
           })
      .def("__hash__", [](const PyDType& d) { return static_cast<int>(d.dtype); })
      .def("__reduce__", [](const PyDType& d) {
        return py::make_tuple(py::module_::import("oneflow").attr("_dtype_from_name"),
                              py::make_tuple(DTypeName(d.dtype)));
      });
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    m.attr(DTypeName(t)) = py::cast(&DTypeObject(t), py::return_value_policy::reference);
  }

  py::class_<Device>(m, "device")
      .def(py::init([](py::object spec, py::object index) {
             Device d = ToDevice(spec);
             if (!index.is_none()) {
               int i = index.cast<int>();
               if (i < 0) throw Error(StrCat("device: index must be >= 0, got ", i));
               // flow.device("cpu", rank) is this process's CPU memory, as "cpu:N" is
               if (d.type == DeviceType::kCUDA) d.index = i;
             }
             return d;
           }),
           py::arg("type"), py::arg("index") = py::none())
      .def_property_readonly("type", [](const Device& d) { return DeviceTypeName(d.type); })
      .def_property_readonly("index",
                             [](const Device& d) -> py::object {
                               return d.type == DeviceType::kCPU ? py::object(py::none())
                                                                 : py::int_(d.index);
                             })
      .def("__str__", &Device::ToString)
      .def("__repr__",
           [](const Device& d) {
             // OneFlow names a process's CPU by its local rank (rank 1 of a node: cpu:1)
             return d.type == DeviceType::kCPU
                        ? StrCat("device(type='cpu', index=", comm::GetLocalRank(), ")")
                        : StrCat("device(type='cuda', index=", d.index, ")");
           })
      .def("__eq__",
           [](const Device& a, py::handle b) {
             if (py::isinstance<Device>(b)) return a == b.cast<Device>();
             if (py::isinstance<py::str>(b)) return a == Device::Parse(b.cast<std::string>());
             return false;
           })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1000 + d.index; });

  py::class_<Node, std::shared_ptr<Node>>(m, "Node")
      .def("name", &Node::name)
      .def("__repr__", [](const Node& n) { return "<" + n.name() + ">"; });

  py::class_<Tensor> tensor(m, "Tensor", py::dynamic_attr());
  tensor.def(py::init([](const Tensor& t) { return t; }))
      .def_property_readonly("_shape",
                             [](const Tensor& t) {
                               py::tuple s(t.ndim());
                               for (int64_t i = 0; i < t.ndim(); ++i) s[i] = t.shape()[i];
                               return s;
                             })
      .def_property_readonly("dtype",
                             [](const Tensor& t) {
                               return py::cast(&DTypeObject(t.dtype()),
                                               py::return_value_policy::reference);
                             })
      .def_property_readonly("device", [](const Tensor& t) { return t.device(); })
      .def_property_readonly("ndim", &Tensor::ndim)
      .def("dim", &Tensor::ndim)
      .def("numel", &Tensor::numel)
      .def("nelement", &Tensor::numel)
      .def("element_size", [](const Tensor& t) { return SizeOf(t.dtype()); })
      .def("__len__",
           [](const Tensor& t) {
             if (t.ndim() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.shape()[0];
           })
      .def("stride", [](const Tensor& t) { return py::tuple(py::cast(t.strides())); })
      .def("storage_offset", &Tensor::offset)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def_property_readonly("is_cuda", [](const Tensor& t) { return !t.is_cpu(); })
      .def_property_readonly("is_global", &Tensor::is_global)
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property("requires_grad", &Tensor::requires_grad,
                    [](Tensor& t, bool b) { t.set_requires_grad(b); })
      .def(
          "requires_grad_",
          [](py::object self, bool b) {
            self.cast<Tensor&>().set_requires_grad(b);
            return self;
          },
          py::arg("requires_grad") = true)
      .def_property(
          "grad", [](const Tensor& t) { return TensorOrNone(t.grad()); },
          [](Tensor& t, py::object g) { t.set_grad(OptTensor(g)); })
      .def_property_readonly("grad_fn", &NodeOrNone)
      .def("_register_hook",
           [](Tensor& t, py::function f) {
             auto hook = std::make_shared<PyCallable>(std::move(f));
             return RegisterGradHook(t, [hook](const Tensor& g) -> Tensor {
               py::gil_scoped_acquire gil;
               py::object r = (*hook)(py::cast(g));
               if (r.is_none()) return Tensor();
               if (!py::isinstance<Tensor>(r)) {
                 throw Error(StrCat("register_hook: the hook must return a tensor or None, got ",
                                    py::str(r.get_type()).cast<std::string>()));
               }
               return r.cast<Tensor>();
             });
           })
      .def("_remove_hook", [](Tensor& t, int64_t id) { RemoveGradHook(t, id); })
      .def("retain_grad", [](Tensor& t) { RetainGrad(t); })
      .def_property_readonly("retains_grad",
                             [](const Tensor& t) {
                               const AutogradMeta* am = t.impl()->autograd.get();
                               return am != nullptr && am->retains_grad;
                             })
      .def("_register_post_accumulate_grad_hook",
           [](Tensor& t, py::function f) {
             ONEFLOW_CHECK(
                 t.is_leaf() && t.requires_grad(),
                 "register_post_accumulate_grad_hook: only leaves that require grad take it");
             auto hook = std::make_shared<PyCallable>(std::move(f));
             t.impl()->mutable_autograd().post_accumulate_grad_hooks.push_back(
                 [hook](const Tensor& leaf) {
                   py::gil_scoped_acquire gil;
                   (*hook)(py::cast(leaf));
                 });
           })
      .def(
          "backward",
          [](const Tensor& t, py::object gradient, py::object retain_graph, bool create_graph,
             py::object inputs) {
            std::vector<Tensor> in;
            if (!inputs.is_none()) {
              if (py::isinstance<Tensor>(inputs)) {
                in.push_back(inputs.cast<Tensor>());
              } else {
                for (py::handle h : inputs) {
                  if (!py::isinstance<Tensor>(h)) {
                    throw TypeError(StrCat("backward: inputs must be tensors, got ",
                                           py::str(h.get_type()).cast<std::string>()));
                  }
                  in.push_back(h.cast<Tensor>());
                }
                if (in.empty()) throw Error("backward: inputs is an empty sequence");
              }
            }
            bool retain = retain_graph.is_none() ? create_graph : retain_graph.cast<bool>();
            Backward({t}, {OptTensor(gradient)}, retain, create_graph, in);
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(),
          py::arg("create_graph") = false, py::arg("inputs") = py::none())
      .def("detach", &Tensor::detach)
      .def_property("data", &Tensor::detach,
                    [](Tensor& t, const Tensor& v) {
                      // Replace this tensor's data in place of identity (Module.to keeps
                      // Parameters).
                      TensorImpl* impl = t.impl();
                      impl->storage = v.storage();
                      impl->shape = v.shape();
                      impl->strides = v.strides();
                      impl->offset = v.offset();
                      impl->dtype = v.dtype();
                      impl->extension = v.impl()->extension;  // local <-> global too
                    })
      .def("item", &Item)
      .def("tolist", &ToList)
      .def("numpy", &ToNumpy)
      .def("_raw_bytes",
           [](const Tensor& t) {
             Tensor c = fn::contiguous(t.detach());
             return py::bytes(static_cast<const char*>(c.raw_data()),
                              c.numel() * SizeOf(c.dtype()));
           })
      .def("__float__", [](const Tensor& t) { return py::float_(Item(t)); })
      .def("__int__", [](const Tensor& t) { return py::int_(Item(t)); })
      .def("__index__",
           [](const Tensor& t) {
             ONEFLOW_CHECK(IsIntegral(t.dtype()),
                           "__index__: only integer tensors can be used as an index");
             return py::int_(Item(t));
           })
      .def("__bool__",
           [](const Tensor& t) {
             if (t.numel() != 1) {
               throw Error(StrCat("bool: the truth value of a tensor with ", t.numel(),
                                  " elements is ambiguous"));
             }
             return py::bool_(Item(t));
           })
      .def("__getitem__", [](const Tensor& t, py::handle idx) { return ApplyIndex(t, idx); })
      .def("__setitem__", &SetItem)
      .def("contiguous", &fn::contiguous)
      .def("clone", &fn::clone)
      .def("_to_dtype",
           [](const Tensor& t, py::handle d) { return fn::to_dtype(t, ToDType(d, t.dtype())); })
      .def("_to_device",
           [](const Tensor& t, py::handle d) { return fn::to_device(t, ToDevice(d)); })
      // Operators (hot path: kept in C++).
      .def("__add__",
           [](const Tensor& a, py::handle b) { return fn::add(a, ScalarOrTensor(b, a)); })
      .def("__radd__",
           [](const Tensor& a, py::handle b) { return fn::add(ScalarOrTensor(b, a), a); })
      .def("__sub__",
           [](const Tensor& a, py::handle b) { return fn::sub(a, ScalarOrTensor(b, a)); })
      .def("__rsub__",
           [](const Tensor& a, py::handle b) { return fn::sub(ScalarOrTensor(b, a), a); })
      .def("__mul__",
           [](const Tensor& a, py::handle b) { return fn::mul(a, ScalarOrTensor(b, a)); })
      .def("__rmul__",
           [](const Tensor& a, py::handle b) { return fn::mul(ScalarOrTensor(b, a), a); })
      .def("__truediv__",
           [](const Tensor& a, py::handle b) { return fn::div(a, ScalarOrTensor(b, a)); })
      .def("__rtruediv__",
           [](const Tensor& a, py::handle b) { return fn::div(ScalarOrTensor(b, a), a); })
      .def("__pow__",
           [](const Tensor& a, py::handle b) { return fn::pow(a, ScalarOrTensor(b, a)); })
      .def("__rpow__",
           [](const Tensor& a, py::handle b) { return fn::pow(ScalarOrTensor(b, a), a); })
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return fn::matmul(a, b); })
      .def("__neg__", &fn::neg)
      .def("__abs__", &fn::abs)
      .def("__invert__", &fn::logical_not)
      .def("__and__",
           [](const Tensor& a, py::handle b) { return fn::logical_and(a, ScalarOrTensor(b, a)); })
      .def("__or__",
           [](const Tensor& a, py::handle b) { return fn::logical_or(a, ScalarOrTensor(b, a)); })
      .def("__eq__", [](const Tensor& a, py::handle b) { return fn::eq(a, ScalarOrTensor(b, a)); })
      .def("__ne__", [](const Tensor& a, py::handle b) { return fn::ne(a, ScalarOrTensor(b, a)); })
      .def("__lt__", [](const Tensor& a, py::handle b) { return fn::lt(a, ScalarOrTensor(b, a)); })
      .def("__le__", [](const Tensor& a, py::handle b) { return fn::le(a, ScalarOrTensor(b, a)); })
      .def("__gt__", [](const Tensor& a, py::handle b) { return fn::gt(a, ScalarOrTensor(b, a)); })
      .def("__ge__", [](const Tensor& a, py::handle b) { return fn::ge(a, ScalarOrTensor(b, a)); })
      .def("__hash__", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl()); })
      // In-place updates, which autograd follows (core/inplace.h).
      .def("_assign_",
           [](py::object self, const Tensor& v, const char* op) {
             AssignInPlace(self.cast<Tensor&>(), v, op);
             return self;
           })
      .def("_inplace_",
           [](py::object self, py::function f, const char* op) {
             InPlace(
                 self.cast<Tensor&>(),
                 [&](const Tensor& src) {
                   py::object r = f(src);
                   if (!py::isinstance<Tensor>(r)) {
                     throw TypeError(StrCat(op, ": expected a tensor result, got ",
                                            py::str(r.get_type()).cast<std::string>()));
                   }
                   return r.cast<Tensor>();
                 },
                 op);
             return self;
           })
      .def("zero_",
           [](py::object self) {
             Tensor& t = self.cast<Tensor&>();
             InPlace(
                 t, [](const Tensor& s) { return fn::scalar_like(0.0, s); }, "zero_");
             return self;
           })
      .def("fill_",
           [](py::object self, double v) {
             Tensor& t = self.cast<Tensor&>();
             InPlace(
                 t, [v](const Tensor& s) { return fn::scalar_like(v, s); }, "fill_");
             return self;
           })
      .def("copy_",
           [](py::object self, py::handle src) {
             Tensor& t = self.cast<Tensor&>();
             Tensor v = ScalarOrTensor(src, t);
             InPlace(
                 t, [&](const Tensor&) { return v; }, "copy_");
             return self;
           })
      .def("relu", &fn::relu)
      .def("sigmoid", &fn::sigmoid)
      .def("tanh", &fn::tanh)
      .def("exp", &fn::exp)
      .def("log", &fn::log)
      .def("sqrt", &fn::sqrt)
      .def("abs", &fn::abs);

  // ---- functional ----
  // Autocast state per device type ("cpu", "cuda"), thread-local as PyTorch's.
  m.def("set_autocast_enabled", [](const std::string& device_type, bool enabled) {
    SetAutocastEnabled(Device::Parse(device_type).type, enabled);
  });
  m.def("is_autocast_enabled", [](const std::string& device_type) {
    return AutocastEnabled(Device::Parse(device_type).type);
  });
  m.def("set_autocast_dtype", [](const std::string& device_type, py::handle dtype) {
    SetAutocastDType(Device::Parse(device_type).type, ToDType(dtype, DType::kFloat32));
  });
  m.def("get_autocast_dtype", [](const std::string& device_type) {
    return py::cast(&DTypeObject(AutocastDType(Device::Parse(device_type).type)),
                    py::return_value_policy::reference);
  });
  m.def("has_bf16_gemm", &cpu::HasBf16Gemm);  // bfloat16 matmul on oneDNN's bf16 kernels
  m.def("set_grad_enabled", &SetGradMode);
  m.def("is_grad_enabled", &GradModeEnabled);
  m.def("manual_seed", [](uint64_t s) { fn::manual_seed(s); });
  m.def("generator_state", []() { return fn::generator_state(); });
  m.def("set_generator_state",
        [](uint64_t seed, uint64_t offset) { fn::set_generator_state(seed, offset); });
  m.def("initial_seed", &fn::initial_seed);
  m.def(
      "tensor",
      [](py::handle data, py::handle dtype, py::handle device, bool requires_grad) {
        Tensor t = TensorFromData(data, dtype, ToDevice(device));
        if (requires_grad) t.set_requires_grad(true);
        return t;
      },
      py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      py::arg("requires_grad") = false);
  m.def("from_bytes", [](py::bytes b, py::handle shape, py::handle dtype) {
    std::string_view v = b;
    Shape s(ToIntList(shape, "from_bytes"));
    DType t = ToDType(dtype, DType::kFloat32);
    ONEFLOW_CHECK(static_cast<int64_t>(v.size()) == s.numel() * static_cast<int64_t>(SizeOf(t)),
                  "from_bytes: ", v.size(), " bytes do not hold a ", DTypeName(t),
                  " tensor of shape ", s);
    return fn::from_blob_copy(v.data(), s, t);
  });
  m.def("full", [](py::handle shape, double v, py::handle dtype, py::handle device) {
    return fn::full(Shape(ToIntList(shape, "full")), v, ToDType(dtype, DType::kFloat32),
                    ToDevice(device));
  });
  m.def("empty", [](py::handle shape, py::handle dtype, py::handle device) {
    return fn::empty(Shape(ToIntList(shape, "empty")), ToDType(dtype, DType::kFloat32),
                     ToDevice(device));
  });
  m.def("arange", [](double start, double end, double step, py::handle dtype, py::handle device) {
    return fn::arange(start, end, step, ToDType(dtype, DType::kInt64), ToDevice(device));
  });
  m.def("eye", [](int64_t n, int64_t mm, py::handle dtype, py::handle device) {
    return fn::eye(n, mm, ToDType(dtype, DType::kFloat32), ToDevice(device));
  });
  m.def("rand", [](py::handle shape, py::handle dtype, py::handle device) {
    return fn::rand(Shape(ToIntList(shape, "rand")), ToDType(dtype, DType::kFloat32),
                    ToDevice(device));
  });
  m.def("randn", [](py::handle shape, py::handle dtype, py::handle device) {
    return fn::randn(Shape(ToIntList(shape, "randn")), ToDType(dtype, DType::kFloat32),
                     ToDevice(device));
  });
  m.def("randint",
        [](int64_t lo, int64_t hi, py::handle shape, py::handle dtype, py::handle device) {
          return fn::randint(lo, hi, Shape(ToIntList(shape, "randint")),
                             ToDType(dtype, DType::kInt64), ToDevice(device));
        });
  m.def("randperm", [](int64_t n, py::handle device) { return fn::randperm(n, ToDevice(device)); });
  m.def("uniform_", [](Tensor& t, double lo, double hi) {
    InPlace(
        t, [&](const Tensor&) { return fn::uniform(t.shape(), lo, hi, t.dtype(), t.device()); },
        "uniform_");
  });
  m.def("normal_", [](Tensor& t, double mean, double std) {
    InPlace(
        t, [&](const Tensor&) { return fn::normal(t.shape(), mean, std, t.dtype(), t.device()); },
        "normal_");
  });
  m.def(
      "_backward",
      [](const std::vector<Tensor>& tensors, const std::vector<py::object>& grads,
         py::object retain_graph, bool create_graph, const std::vector<Tensor>& inputs) {
        std::vector<Tensor> gs;
        for (const py::object& g : grads) gs.push_back(OptTensor(g));
        bool retain = retain_graph.is_none() ? create_graph : retain_graph.cast<bool>();
        Backward(tensors, gs, retain, create_graph, inputs);
      },
      py::arg("tensors"), py::arg("grads"), py::arg("retain_graph"), py::arg("create_graph"),
      py::arg("inputs"));
  m.def(
      "_grad",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
         const std::vector<py::object>& grad_outputs, py::object retain_graph, bool create_graph,
         bool allow_unused) {
        std::vector<Tensor> gos;
        for (const py::object& g : grad_outputs) gos.push_back(OptTensor(g));
        std::optional<bool> retain;
        if (!retain_graph.is_none()) retain = retain_graph.cast<bool>();
        std::vector<Tensor> r = Grad(outputs, inputs, gos, retain, create_graph, allow_unused);
        py::tuple out(r.size());
        for (size_t i = 0; i < r.size(); ++i) out[i] = TensorOrNone(r[i]);
        return out;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs"), py::arg("retain_graph"),
      py::arg("create_graph"), py::arg("allow_unused"));

  m.def("add", [](const Tensor& a, py::handle b) { return fn::add(a, ScalarOrTensor(b, a)); });
  m.def("sub", [](const Tensor& a, py::handle b) { return fn::sub(a, ScalarOrTensor(b, a)); });
  m.def("mul", [](const Tensor& a, py::handle b) { return fn::mul(a, ScalarOrTensor(b, a)); });
  m.def("div", [](const Tensor& a, py::handle b) { return fn::div(a, ScalarOrTensor(b, a)); });
  m.def("pow", [](const Tensor& a, py::handle b) { return fn::pow(a, ScalarOrTensor(b, a)); });
  m.def("maximum", &fn::maximum);
  m.def("remainder", [](const Tensor& a, py::handle b) { return fn::remainder(a, ScalarOrTensor(b, a)); });
  m.def("rremainder", [](const Tensor& b, py::handle a) { return fn::remainder(ScalarOrTensor(a, b), b); });
  m.def("minimum", &fn::minimum);
  m.def("eq", [](const Tensor& a, py::handle b) { return fn::eq(a, ScalarOrTensor(b, a)); });
  m.def("ne", [](const Tensor& a, py::handle b) { return fn::ne(a, ScalarOrTensor(b, a)); });
  m.def("lt", [](const Tensor& a, py::handle b) { return fn::lt(a, ScalarOrTensor(b, a)); });
  m.def("le", [](const Tensor& a, py::handle b) { return fn::le(a, ScalarOrTensor(b, a)); });
  m.def("gt", [](const Tensor& a, py::handle b) { return fn::gt(a, ScalarOrTensor(b, a)); });
  m.def("ge", [](const Tensor& a, py::handle b) { return fn::ge(a, ScalarOrTensor(b, a)); });
  m.def("logical_and",
        [](const Tensor& a, py::handle b) { return fn::logical_and(a, ScalarOrTensor(b, a)); });
  m.def("logical_or",
        [](const Tensor& a, py::handle b) { return fn::logical_or(a, ScalarOrTensor(b, a)); });
  m.def("logical_not", &fn::logical_not);
  // (n, ndim) int64 coordinates of x's nonzero elements, in row-major order.
  m.def("nonzero", [](const Tensor& x) {
    if (x.is_global()) {
      throw Error("nonzero: not supported on a global tensor; use to_local() (each shard's "
                  "coordinates) or gather it first (to_global(sbp=broadcast))");
    }
    Tensor out = TrueCoordinates(x.dtype() == DType::kBool ? x : fn::to_dtype(x.detach(), DType::kBool));
    return x.is_cpu() ? out : fn::to_device(out, x.device());
  });
  m.def("where", [](const Tensor& c, py::handle a, py::handle b) {
    Tensor ta = py::isinstance<Tensor>(a) ? a.cast<Tensor>() : Tensor();
    Tensor tb = py::isinstance<Tensor>(b) ? b.cast<Tensor>() : Tensor();
    const Tensor& like = ta.defined() ? ta : tb.defined() ? tb : c;
    if (!ta.defined())
      ta = ScalarOrTensor(a, tb.defined()
                                 ? tb
                                 : fn::scalar_like(0, fn::to_dtype(like, IsFloating(like.dtype())
                                                                             ? like.dtype()
                                                                             : DType::kFloat32)));
    if (!tb.defined()) tb = ScalarOrTensor(b, ta);
    return fn::where(c, ta, tb);
  });
  m.def("neg", &fn::neg);
  m.def("exp", &fn::exp);
  m.def("log", &fn::log);
  m.def("sqrt", &fn::sqrt);
  m.def("rsqrt", &fn::rsqrt);
  m.def("abs", &fn::abs);
  m.def("sign", &fn::sign);
  m.def("square", &fn::square);
  m.def("relu", &fn::relu);
  m.def("relu6", &fn::relu6);
  m.def("sigmoid", &fn::sigmoid);
  m.def("tanh", &fn::tanh);
  m.def("gelu", &fn::gelu);
  // The unary table (core/ops/unary_table.cc).
  for (auto [name, f] : std::initializer_list<std::pair<const char*, Tensor (*)(const Tensor&)>>{
           {"log1p", &fn::log1p},         {"expm1", &fn::expm1},
           {"log2", &fn::log2},           {"log10", &fn::log10},
           {"reciprocal", &fn::reciprocal}, {"sin", &fn::sin},
           {"cos", &fn::cos},             {"tan", &fn::tan},
           {"asin", &fn::asin},           {"acos", &fn::acos},
           {"atan", &fn::atan},           {"sinh", &fn::sinh},
           {"cosh", &fn::cosh},           {"asinh", &fn::asinh},
           {"atanh", &fn::atanh},         {"erf", &fn::erf},
           {"erfc", &fn::erfc},           {"erfinv", &fn::erfinv},
           {"floor", &fn::floor},         {"ceil", &fn::ceil},
           {"round", &fn::round},         {"trunc", &fn::trunc},
           {"silu", &fn::silu},           {"mish", &fn::mish},
           {"hardswish", &fn::hardswish}, {"hardsigmoid", &fn::hardsigmoid},
           {"logsigmoid", &fn::logsigmoid}, {"softsign", &fn::softsign},
           {"selu", &fn::selu},           {"gelu_tanh", &fn::gelu_tanh}}) {
    m.def(name, f);
  }
  m.def("leaky_relu", &fn::leaky_relu);
  m.def("elu", &fn::elu);
  m.def("celu", &fn::celu);
  m.def("softplus", &fn::softplus);
  m.def("softshrink", &fn::softshrink);
  m.def("hardshrink", &fn::hardshrink);
  m.def("threshold", &fn::threshold);
  m.def("clamp", [](const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
    return fn::clamp(x, lo, hi);
  });
  m.def("sum", [](const Tensor& x, const IntList& dims, bool keepdim) {
    return fn::sum(x, dims, keepdim);
  });
  m.def("mean", [](const Tensor& x, const IntList& dims, bool keepdim) {
    return fn::mean(x, dims, keepdim);
  });
  m.def("prod", [](const Tensor& x, const IntList& dims, bool keepdim) {
    return fn::prod(x, dims, keepdim);
  });
  m.def("amax", [](const Tensor& x, const IntList& dims, bool keepdim) {
    return fn::amax(x, dims, keepdim);
  });
  m.def("amin", [](const Tensor& x, const IntList& dims, bool keepdim) {
    return fn::amin(x, dims, keepdim);
  });
  m.def("layer_norm", [](const Tensor& x, const IntList& shape, py::object w, py::object b,
                         double eps) { return fn::layer_norm(x, shape, OptTensor(w), OptTensor(b), eps); });
  m.def("max_dim",
        [](const Tensor& x, int64_t dim, bool keepdim) { return fn::max(x, dim, keepdim); });
  m.def("min_dim",
        [](const Tensor& x, int64_t dim, bool keepdim) { return fn::min(x, dim, keepdim); });
  m.def("max_all", &fn::max_all);
  m.def("min_all", &fn::min_all);
  m.def("argmax", &fn::argmax);
  m.def("argmin", &fn::argmin);
  m.def("matmul", &fn::matmul);
  m.def("linear", [](const Tensor& x, const Tensor& w, py::object b) {
    return fn::linear(x, w, OptTensor(b));
  });
  m.def("reshape", &fn::reshape);
  m.def("view", &fn::view);
  m.def("permute", &fn::permute);
  m.def("transpose", &fn::transpose);
  m.def("slice", &fn::slice);
  m.def("select", &fn::select);
  m.def("expand", &fn::expand);
  m.def("squeeze", &fn::squeeze);
  m.def("unsqueeze", &fn::unsqueeze);
  m.def("flatten", &fn::flatten);
  m.def("cat", &fn::cat);
  m.def("stack", &fn::stack);
  m.def("index_select", &fn::index_select);
  m.def("gather", &fn::gather);
  m.def("conv2d", [](const Tensor& x, const Tensor& w, py::object b, const IntList& stride,
                     const IntList& padding, const IntList& dilation, int64_t groups) {
    return fn::conv2d(x, w, OptTensor(b), stride, padding, dilation, groups);
  });
  m.def("conv_transpose2d",
        [](const Tensor& x, const Tensor& w, py::object b, const IntList& stride,
           const IntList& padding, const IntList& output_padding, int64_t groups,
           const IntList& dilation) {
          return fn::conv_transpose2d(x, w, OptTensor(b), stride, padding, output_padding, groups,
                                      dilation);
        });
  m.def("max_pool2d", &fn::max_pool2d);
  m.def("max_pool2d_with_indices", &fn::max_pool2d_with_indices);
  m.def("avg_pool2d", &fn::avg_pool2d);
  m.def("adaptive_avg_pool2d", &fn::adaptive_avg_pool2d);
  m.def("batch_norm", [](const Tensor& x, py::object rm, py::object rv, py::object w, py::object b,
                         bool training, double momentum, double eps) {
    return fn::batch_norm(x, OptTensor(rm), OptTensor(rv), OptTensor(w), OptTensor(b), training,
                          momentum, eps);
  });
  m.def("dropout", &fn::dropout);
  m.def("softmax", &fn::softmax);
  m.def("log_softmax", &fn::log_softmax);
  m.def("nll_loss", &fn::nll_loss);
  m.def("cross_entropy", &fn::cross_entropy);
  m.def("mse_loss", &fn::mse_loss);
  m.def(
      "sgd_update_",
      [](const Tensor& p, const Tensor& g, py::object buf, double lr, double momentum,
         double dampening, bool nesterov, double wd, bool first_step, bool maximize) {
        optim::SgdUpdate(p, g, OptTensor(buf), lr, momentum, dampening, nesterov, wd, first_step,
                         maximize);
      },
      py::arg("param"), py::arg("grad"), py::arg("buf"), py::arg("lr"), py::arg("momentum"),
      py::arg("dampening"), py::arg("nesterov"), py::arg("weight_decay"), py::arg("first_step"),
      py::arg("maximize") = false);
  m.def("adam_update_", [](const Tensor& p, const Tensor& g, const Tensor& m1, const Tensor& m2,
                           py::object vmax, int64_t step, double lr, double b1, double b2,
                           double eps, double wd, bool amsgrad, bool decoupled) {
    optim::AdamUpdate(p, g, m1, m2, OptTensor(vmax), step, lr, b1, b2, eps, wd, amsgrad, decoupled);
  });
  // ---- everyday API (core/functional.h's everyday block); Python signatures in _tensor_api.py
  m.def("linspace", [](double start, double end, int64_t steps, py::handle dtype, py::handle device) {
    return fn::linspace(start, end, steps, ToDType(dtype, DType::kFloat32), ToDevice(device));
  });
  m.def("meshgrid", &fn::meshgrid);
  m.def("diag", &fn::diag);
  m.def("diagonal", &fn::diagonal);
  m.def("split", &fn::split);
  m.def("split_with_sizes", &fn::split_with_sizes);
  m.def("chunk", &fn::chunk);
  m.def("narrow", &fn::narrow);
  m.def("unflatten", &fn::unflatten);
  m.def("flip", &fn::flip);
  m.def("roll", &fn::roll);
  m.def("repeat", &fn::repeat);
  m.def("repeat_interleave", [](const Tensor& x, py::handle repeats, std::optional<int64_t> dim) {
    if (py::isinstance<Tensor>(repeats)) return fn::repeat_interleave(x, repeats.cast<Tensor>(), dim);
    return fn::repeat_interleave(x, repeats.cast<int64_t>(), dim);
  });
  m.def("tril", &fn::tril);
  m.def("triu", &fn::triu);
  m.def("take_along_dim", &fn::take_along_dim);
  m.def("scatter", [](const Tensor& x, int64_t dim, const Tensor& index, py::handle src) {
    if (py::isinstance<Tensor>(src)) return fn::scatter(x, dim, index, src.cast<Tensor>());
    return fn::scatter(x, dim, index, src.cast<double>());
  });
  m.def("scatter_add", [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    return fn::scatter_add(x, dim, index, src);
  });
  m.def("one_hot", &fn::one_hot);
  m.def("cumsum", &fn::cumsum);
  m.def("cumprod", &fn::cumprod);
  m.def("sort", &fn::sort);
  m.def("argsort", &fn::argsort);
  m.def("topk", &fn::topk);
  m.def("all", &fn::all);
  m.def("any", &fn::any);
  m.def("median_all", &fn::median_all);
  m.def("median", &fn::median);
  m.def("mode", &fn::mode);
  m.def("unique", [](const Tensor& x) {
    fn::UniqueResult r = fn::unique(x);
    return py::make_tuple(r.values, r.inverse, r.counts);
  });
  m.def("multinomial", &fn::multinomial);
  m.def("bmm", &fn::bmm);
  m.def("addmm", &fn::addmm);
  m.def("baddbmm", &fn::baddbmm);
  m.def("outer", &fn::outer);
  m.def("einsum", &fn::einsum);
  m.def("registered_ops", []() {
    std::vector<std::string> names;
    for (const auto& kv : OpRegistry::Global().ops()) names.push_back(kv.first);
    return names;
  });
  BindComm(m);
  BindGlobal(m);
  BindDdp(m);
  BindCuda(m);
}

}  // namespace python
}  // namespace oneflow
