// The Tensor class for Python with its hot methods and operators in C++ (the flexible
// signatures are installed by the Python package, oneflow/_tensor_methods.py), and autograd nodes.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/autograd.h"
#include "core/inplace.h"
#include "core/size_check.h"
#include "oneflow/api/python/convert.h"
#include "oneflow/api/python/indexing.h"
#include "oneflow/api/python/module.h"

namespace oneflow {
namespace python {
namespace {

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

// Holds the copy that numpy() returns and lends it to numpy through the buffer protocol
// (PEP 3118): the extension uses no numpy C structure, so one build serves numpy 1 and 2.
struct HostCopy {
  std::vector<char> bytes;
  std::string format;  // struct-module format of one element: "f", "q", "?", ...
  size_t itemsize = 0;
  std::vector<py::ssize_t> shape;
};

// As OneFlow's numpy(): a copy of the values, also of a tensor that requires grad.
py::object ToNumpy(const Tensor& t) {
  py::module_ np = py::module_::import("numpy");
  SizeCheckOpScope op("Tensor.numpy");  // names the host read (core/sync_check.h)
  Tensor c = fn::contiguous(Whole(t).detach());
  if (!c.is_cpu()) c = fn::to_device(c, Device::CPU());
  if (c.dtype() == DType::kBFloat16) c = fn::to_dtype(c, DType::kFloat32);  // numpy has none
  auto copy = std::make_unique<HostCopy>();
  switch (c.dtype()) {
    case DType::kBool:
      copy->format = "?";
      break;
    case DType::kUInt8:
      copy->format = "B";
      break;
    case DType::kInt8:
      copy->format = "b";
      break;
    case DType::kInt32:
      copy->format = "i";
      break;
    case DType::kInt64:
      copy->format = "q";
      break;
    case DType::kFloat16:
      copy->format = "e";
      break;
    case DType::kFloat32:
    case DType::kBFloat16:  // converted above
      copy->format = "f";
      break;
    case DType::kFloat64:
      copy->format = "d";
      break;
    case DType::kComplex64:
      copy->format = "Zf";
      break;
    case DType::kComplex128:
      copy->format = "Zd";
      break;
  }
  copy->itemsize = SizeOf(c.dtype());
  copy->shape.assign(c.shape().dims().begin(), c.shape().dims().end());
  const char* data = static_cast<const char*>(c.raw_data());
  copy->bytes.reserve(1);  // a valid address for an empty tensor too
  copy->bytes.assign(data, data + c.numel() * copy->itemsize);
  // The array owns the copy (as its base): numpy users can keep it after the tensor changes.
  return np.attr("asarray")(py::cast(std::move(copy)));
}
}  // namespace

void BindTensor(py::module_& m) {
  // OneFlow's TensorTuple, the sequence of tensors its hooks and autograd functions pass around:
  // a Python tuple here (module hooks receive tuples), so isinstance(x, TensorTuple) holds.
  m.attr("TensorTuple") =
      py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(&PyTuple_Type));
  py::class_<HostCopy>(m, "_HostCopy", py::buffer_protocol()).def_buffer([](HostCopy& h) {
    std::vector<py::ssize_t> strides(h.shape.size());
    py::ssize_t stride = static_cast<py::ssize_t>(h.itemsize);
    for (size_t i = h.shape.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= h.shape[i];
    }
    return py::buffer_info(h.bytes.data(), static_cast<py::ssize_t>(h.itemsize), h.format,
                           static_cast<py::ssize_t>(h.shape.size()), h.shape, strides);
  });
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
      // The device of the local data (of the shard, for a global tensor); Tensor.device is
      // oneflow/_tensor_methods.py's (a global tensor has a placement, not a device).
      .def_property_readonly("_device", [](const Tensor& t) { return t.device(); })
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
      .def_property_readonly("is_cuda",
                             [](const Tensor& t) { return t.device().type == DeviceType::kCUDA; })
      .def_property_readonly("is_meta",
                             [](const Tensor& t) { return t.device().type == DeviceType::kMeta; })
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
            // The seed in t's dtype, as OneFlow and PyTorch cast it (a float64 seed, float32 t).
            Tensor seed = OptTensor(gradient);
            if (seed.defined() && seed.dtype() != t.dtype()) seed = fn::to_dtype(seed, t.dtype());
            Backward({t}, {seed}, retain, create_graph, in);
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(),
          py::arg("create_graph") = false, py::arg("inputs") = py::none())
      .def("detach", &Tensor::detach)
      // OneFlow's x.is_view(): x shares the storage of the tensor it was made from by a view op
      .def("is_view", [](const Tensor& t) { return t.view_base().defined(); })
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
      .def("item", [](const Tensor& t) { return Item(Whole(t)); })
      .def("tolist", [](const Tensor& t) { return ToList(Whole(t)); })
      .def("numpy", &ToNumpy)
      .def("_raw_bytes",
           [](const Tensor& t) {
             Tensor c = fn::contiguous(t.detach());
             return py::bytes(static_cast<const char*>(c.raw_data()),
                              c.numel() * SizeOf(c.dtype()));
           })
      .def("__float__", [](const Tensor& t) { return py::float_(Item(Whole(t))); })
      .def("__int__", [](const Tensor& t) { return py::int_(Item(Whole(t))); })
      .def("__index__",
           [](const Tensor& x) {
             Tensor t = Whole(x);
             ONEFLOW_CHECK(IsIntegral(t.dtype()),
                           "__index__: only integer tensors can be used as an index");
             return py::int_(Item(t));
           })
      .def("__bool__",
           [](const Tensor& x) {
             Tensor t = Whole(x);
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
}

}  // namespace python
}  // namespace oneflow
