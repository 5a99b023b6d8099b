#include "oneflow/api/python/convert.h"

#include <pybind11/stl.h>

#include <cstring>

#include "core/dispatch.h"
#include "core/size_check.h"

namespace oneflow {
namespace python {

const PyDType& DTypeObject(DType t) {
  static PyDType objs[kNumDTypes] = {{DType::kBool},      {DType::kUInt8},     {DType::kInt8},
                                     {DType::kInt32},     {DType::kInt64},     {DType::kFloat16},
                                     {DType::kBFloat16},  {DType::kFloat32},   {DType::kFloat64},
                                     {DType::kComplex64}, {DType::kComplex128}};
  return objs[static_cast<int>(t)];
}

std::string ShortRepr(py::handle obj) {
  if (py::isinstance<Tensor>(obj)) {
    const Tensor& t = obj.cast<const Tensor&>();
    return StrCat("a ", DTypeName(t.dtype()), " Tensor of shape ", t.shape());
  }
  std::string r = py::repr(obj);
  for (char& c : r) {
    if (c == '\n') c = ' ';
  }
  return r.size() > 80 ? r.substr(0, 77) + "..." : r;
}

DType ToDType(py::handle obj, DType fallback) {
  if (obj.is_none()) return fallback;
  if (py::isinstance<PyDType>(obj)) return obj.cast<const PyDType&>().dtype;
  if (py::isinstance<py::str>(obj)) {
    std::string s = obj.cast<std::string>();
    if (s.rfind("oneflow.", 0) == 0) s = s.substr(8);
    return DTypeFromName(s);
  }
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return DType::kFloat32;
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return DType::kInt64;
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return DType::kBool;
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyComplex_Type)) return DType::kComplex64;
  throw TypeError(
      StrCat("dtype: expected a oneflow dtype such as oneflow.float32, got ", ShortRepr(obj)));
}

std::vector<Device>& DefaultDevices() {
  static std::vector<Device> stack;
  return stack;
}

Device ToDevice(py::handle obj) {
  if (obj.is_none()) return DefaultDevices().empty() ? Device::CPU() : DefaultDevices().back();
  if (py::isinstance<Device>(obj)) return obj.cast<Device>();
  if (py::isinstance<py::str>(obj)) return Device::Parse(obj.cast<std::string>());
  if (py::isinstance<py::int_>(obj)) return Device::CUDA(obj.cast<int>());
  throw TypeError(
      StrCat("device: expected a device or a string such as 'cpu', got ", ShortRepr(obj)));
}

int64_t ToInt64(py::handle obj, const char* what) {
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!index) {
    PyErr_Clear();
    throw TypeError(StrCat(what, ": expected an int, got ", Py_TYPE(obj.ptr())->tp_name));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) {
    throw Error(StrCat(what, ": ", py::str(index).cast<std::string>(),
                       " does not fit int64 (expected an int in [-9223372036854775808, "
                       "9223372036854775807])"));
  }
  return v;
}

std::vector<int64_t> ToIntList(py::handle obj, const char* what) {
  if (py::isinstance<py::int_>(obj)) return {ToInt64(obj, what)};
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj)) {
    throw TypeError(StrCat(what, ": expected a sequence of ints, got ", ShortRepr(obj)));
  }
  std::vector<int64_t> out;
  for (py::handle h : obj) {
    if (py::isinstance<Tensor>(h)) {
      out.push_back(ToInt64(Item(h.cast<const Tensor&>()), what));
    } else if (!py::isinstance<py::int_>(h) && !py::hasattr(h, "__index__")) {
      throw TypeError(StrCat(what, ": expected ints, got ", ShortRepr(h), " in ", ShortRepr(obj)));
    } else {
      out.push_back(ToInt64(h, what));
    }
  }
  return out;
}

std::vector<int64_t> SizeFromArgs(const py::args& args, const char* what) {
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) return ToIntList(args[0], what);
  return ToIntList(args, what);
}

namespace {

// A 0-dim tensor of value on device: filled there by a kernel taking the value as its argument
// (a host tensor copied over would make the host wait for the copy).
Tensor ScalarOn(double value, DType dtype, const Device& device) {
  if (device.type != DeviceType::kCPU) return Full(TensorMeta{Shape(), dtype, device}, value);
  Tensor s = Tensor::Empty(Shape(), dtype, Device::CPU());
  fn::fill_(s, value);
  return s;
}

}  // namespace

Tensor ComplexScalarOn(double re, double im, DType dtype, const Device& device) {
  Tensor s = Tensor::Empty(Shape(), dtype, Device::CPU());
  DispatchWithComplex(dtype, "tensor", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, std::complex<float>> ||
                  std::is_same_v<T, std::complex<double>>) {
      *s.data<T>() =
          T(static_cast<typename T::value_type>(re), static_cast<typename T::value_type>(im));
    } else {
      throw Error(StrCat("tensor: a complex number needs a complex dtype, got ", DTypeName(dtype)));
    }
  });
  return fn::to_device(s, device);
}

Tensor ScalarOrTensor(py::handle other, const Tensor& x) {
  if (py::isinstance<Tensor>(other)) return other.cast<Tensor>();
  DType t = x.dtype();
  if (py::isinstance<py::bool_>(other)) {
    return fn::scalar_like(other.cast<bool>() ? 1.0 : 0.0, x);
  }
  if (py::isinstance<py::int_>(other)) {
    if (t == DType::kBool) t = DType::kInt64;
    return ScalarOn(static_cast<double>(ToInt64(other, "tensor operand")), t, x.device());
  }
  if (py::isinstance<py::float_>(other)) {
    if (!IsFloating(t) && !IsComplex(t)) t = DType::kFloat32;
    return ScalarOn(other.cast<double>(), t, x.device());
  }
  if (PyComplex_Check(other.ptr())) {  // a Python complex: a 0-dim complex tensor
    const Py_complex v = PyComplex_AsCComplex(other.ptr());
    return ComplexScalarOn(v.real, v.imag, ComplexOf(t), x.device());
  }
  // A numpy array or scalar (numpy is loaded when one exists): the number or tensor it stands
  // for, where x lives (oneflow._tensor_methods._numpy_operand decides). Off the hot path.
  py::object np = py::module_::import("sys").attr("modules").attr("get")("numpy");
  if (!np.is_none() &&
      (py::isinstance(other, np.attr("ndarray")) || py::isinstance(other, np.attr("generic")))) {
    py::object v =
        py::module_::import("oneflow._tensor_methods").attr("_numpy_operand")(other, py::cast(x));
    return ScalarOrTensor(v, x);
  }
  throw TypeError(StrCat("unsupported operand type ", py::str(other.get_type()).cast<std::string>(),
                         " for a oneflow tensor"));
}

namespace {

// What ScanNested learns of nested data: its shape, the widest element kind (0 bool, 1 int,
// 2 float, 3 complex) and the depth of its numbers (-1 before the first), which must be the same
// for every number: FillNested writes exactly shape.numel() elements only for rectangular data.
struct NestedScan {
  std::vector<int64_t> shape;
  int kind = 0;
  int64_t leaf_depth = -1;
};

[[noreturn]] void Ragged(size_t depth, const std::string& got) {
  throw Error(StrCat("tensor: nested data must be rectangular, got ", got, " at dim ", depth,
                     " where other elements differ (a list of tensors must hold equal shapes)"));
}

void Leaf(NestedScan& scan, size_t depth) {
  if (scan.leaf_depth == -1) scan.leaf_depth = static_cast<int64_t>(depth);
  if (scan.leaf_depth != static_cast<int64_t>(depth) ||
      scan.shape.size() > static_cast<size_t>(depth)) {
    Ragged(depth, "a number");
  }
}

// Walks nested sequences, recording the shape and the widest element kind.
void ScanNested(py::handle obj, size_t depth, NestedScan& scan) {
  std::vector<int64_t>& shape = scan.shape;
  if (py::isinstance<py::bool_>(obj)) return Leaf(scan, depth);
  if (py::isinstance<py::int_>(obj)) {
    scan.kind = std::max(scan.kind, 1);
    return Leaf(scan, depth);
  }
  if (py::isinstance<py::float_>(obj)) {
    scan.kind = std::max(scan.kind, 2);
    return Leaf(scan, depth);
  }
  if (PyComplex_Check(obj.ptr())) {
    scan.kind = 3;
    return Leaf(scan, depth);
  }
  if (py::isinstance<Tensor>(obj)) {
    const Tensor& t = obj.cast<const Tensor&>();
    const size_t end = depth + t.shape().dims().size();
    if (scan.leaf_depth != -1 && scan.leaf_depth != static_cast<int64_t>(end)) {
      Ragged(depth, StrCat("a tensor of shape ", t.shape()));
    }
    for (int64_t d : t.shape().dims()) {
      if (shape.size() <= depth) {
        shape.push_back(d);
      } else if (shape[depth] != d) {
        Ragged(depth, StrCat("a tensor of shape ", t.shape()));
      }
      ++depth;
    }
    Leaf(scan, end);
    scan.kind = std::max(scan.kind, IsComplex(t.dtype())        ? 3
                                    : IsFloating(t.dtype())     ? 2
                                    : t.dtype() == DType::kBool ? 0
                                                                : 1);
    return;
  }
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj)) {
    // Number-like objects (numpy scalars): integers through __index__, reals through __float__.
    if (py::hasattr(obj, "__index__")) {
      scan.kind = std::max(scan.kind, 1);
      return Leaf(scan, depth);
    }
    if (py::hasattr(obj, "__float__")) {
      scan.kind = std::max(scan.kind, 2);
      return Leaf(scan, depth);
    }
    if (py::hasattr(obj, "__complex__")) {  // numpy complex scalars
      scan.kind = 3;
      return Leaf(scan, depth);
    }
    throw TypeError(StrCat("tensor: could not convert ", ShortRepr(obj), " (",
                           Py_TYPE(obj.ptr())->tp_name, ") to a tensor element"));
  }
  if (scan.leaf_depth != -1 && static_cast<int64_t>(depth) >= scan.leaf_depth) {
    Ragged(depth, "a sequence");
  }
  py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
  int64_t n = static_cast<int64_t>(seq.size());
  if (shape.size() <= depth) {
    shape.push_back(n);
  } else if (shape[depth] != n) {
    throw Error(StrCat("tensor: expected a sequence of length ", shape[depth], " at dim ", depth,
                       ", got ", n, " (nested lists must be rectangular)"));
  }
  for (py::handle h : seq) ScanNested(h, depth + 1, scan);
}

void FillNested(py::handle obj, double*& out) {
  // Tensors first: a tensor also looks like a sequence.
  if (py::isinstance<Tensor>(obj)) {
    Tensor c = fn::contiguous(fn::to_dtype(obj.cast<Tensor>().detach(), DType::kFloat64));
    std::memcpy(out, c.data<double>(), c.numel() * sizeof(double));
    out += c.numel();
  } else if (py::isinstance<py::sequence>(obj) && !py::isinstance<py::str>(obj)) {
    for (py::handle h : obj) FillNested(h, out);
  } else {
    *out++ = obj.cast<double>();
  }
}

void FillNestedComplex(py::handle obj, std::complex<double>*& out) {
  // Tensors first: a tensor also looks like a sequence.
  if (py::isinstance<Tensor>(obj)) {
    Tensor c = fn::contiguous(fn::to_dtype(obj.cast<Tensor>().detach(), DType::kComplex128));
    std::memcpy(out, c.data<std::complex<double>>(), c.numel() * sizeof(std::complex<double>));
    out += c.numel();
  } else if (py::isinstance<py::sequence>(obj) && !py::isinstance<py::str>(obj)) {
    for (py::handle h : obj) FillNestedComplex(h, out);
  } else {
    const Py_complex v = PyComplex_AsCComplex(obj.ptr());
    if (PyErr_Occurred()) throw py::error_already_set();
    *out++ = std::complex<double>(v.real, v.imag);
  }
}

void FillNestedInt(py::handle obj, int64_t*& out) {
  // Tensors first: a tensor also looks like a sequence.
  if (py::isinstance<Tensor>(obj)) {
    Tensor c = fn::contiguous(fn::to_dtype(obj.cast<Tensor>().detach(), DType::kInt64));
    std::memcpy(out, c.data<int64_t>(), c.numel() * sizeof(int64_t));
    out += c.numel();
  } else if (py::isinstance<py::sequence>(obj) && !py::isinstance<py::str>(obj)) {
    for (py::handle h : obj) FillNestedInt(h, out);
  } else {
    *out++ = ToInt64(obj, "tensor");
  }
}

// From numpy's Python-level dtype attributes, which numpy 1 and 2 share.
DType FromNumpyKind(py::handle dt) {
  char k = dt.attr("kind").cast<std::string>()[0];
  size_t sz = dt.attr("itemsize").cast<size_t>();
  if (k == 'b') return DType::kBool;
  if (k == 'u' && sz == 1) return DType::kUInt8;
  if (k == 'i' && sz == 1) return DType::kInt8;
  if (k == 'i' && sz == 4) return DType::kInt32;
  if (k == 'i' && sz == 8) return DType::kInt64;
  if (k == 'f' && sz == 2) return DType::kFloat16;
  if (k == 'f' && sz == 4) return DType::kFloat32;
  if (k == 'f' && sz == 8) return DType::kFloat64;
  if (k == 'c' && sz == 8) return DType::kComplex64;
  if (k == 'c' && sz == 16) return DType::kComplex128;
  throw TypeError(StrCat("tensor: unsupported numpy dtype ", py::repr(dt).cast<std::string>()));
}

// numpy if the user already imported it (`import oneflow` stays light), else None.
py::object ImportedNumpy() {
  py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("numpy")) return py::none();
  return modules["numpy"];
}

bool IsNumpyArray(py::handle obj) {
  py::object np = ImportedNumpy();
  if (np.is_none()) return false;
  return py::isinstance(obj, np.attr("ndarray")) || py::isinstance(obj, np.attr("generic"));
}

}  // namespace

Tensor TensorFromData(py::handle data, py::handle dtype_obj, const Device& device) {
  Tensor t;
  if (py::isinstance<Tensor>(data)) {
    t = fn::clone(data.cast<Tensor>().detach());
  } else if (IsNumpyArray(data)) {
    // Read through the buffer protocol (PEP 3118), not numpy's C structures, which numpy 2
    // changed: one build serves numpy 1 and 2.
    py::object arr = ImportedNumpy().attr("asarray")(data, py::arg("order") = "C");
    DType dt = FromNumpyKind(arr.attr("dtype"));
    py::buffer_info buf = py::reinterpret_borrow<py::buffer>(arr).request();
    std::vector<int64_t> shape(buf.shape.begin(), buf.shape.end());
    t = fn::from_blob_copy(buf.ptr, Shape(shape), dt);
  } else {
    NestedScan scan;
    ScanNested(data, 0, scan);
    if (scan.leaf_depth != -1 && scan.leaf_depth != static_cast<int64_t>(scan.shape.size())) {
      Ragged(scan.shape.size(), "a sequence");
    }
    const int kind = scan.kind;
    Shape s(scan.shape);
    if (kind == 3) {
      Tensor d = Tensor::Empty(s, DType::kComplex128, Device::CPU());
      std::complex<double>* p = d.data<std::complex<double>>();
      FillNestedComplex(data, p);
      // Python complex numbers are double pairs: complex64 unless asked otherwise.
      t = dtype_obj.is_none() ? fn::to_dtype(d, DType::kComplex64) : d;
    } else if (kind == 2) {
      Tensor d = Tensor::Empty(s, DType::kFloat64, Device::CPU());
      double* p = d.data<double>();
      FillNested(data, p);
      // Python floats are doubles: convert once, to the dtype asked for (float32 by default),
      // so float64 keeps every digit instead of passing through float32.
      t = dtype_obj.is_none() ? fn::to_dtype(d, DType::kFloat32) : d;
    } else {
      Tensor d = Tensor::Empty(s, DType::kInt64, Device::CPU());
      int64_t* p = d.data<int64_t>();
      FillNestedInt(data, p);
      t = kind == 0 ? fn::to_dtype(d, DType::kBool) : d;
    }
  }
  if (!dtype_obj.is_none()) t = fn::to_dtype(t, ToDType(dtype_obj, t.dtype()));
  return fn::to_device(t, device);
}

Tensor TensorSharingNumpy(py::handle data) {
  ONEFLOW_CHECK(IsNumpyArray(data) && !py::isinstance(data, ImportedNumpy().attr("generic")),
                "from_numpy: expected a numpy.ndarray, got ",
                py::str(py::type::of(data).attr("__name__")).cast<std::string>());
  py::object arr = py::reinterpret_borrow<py::object>(data);
  DType dt = FromNumpyKind(arr.attr("dtype"));
  py::buffer_info buf = py::reinterpret_borrow<py::buffer>(arr).request();
  const int64_t item = buf.itemsize;
  std::vector<int64_t> shape(buf.shape.begin(), buf.shape.end());
  std::vector<int64_t> strides;
  bool shareable = arr.attr("flags").attr("writeable").cast<bool>() && item > 0;
  int64_t extent = 1;  // elements from the first to the last one, both included
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t st = buf.strides[i];
    if (st < 0 || st % item != 0) shareable = false;
    strides.push_back(item > 0 ? st / item : 0);
    if (shape[i] == 0) extent = 0;
  }
  for (size_t i = 0; i < shape.size() && extent > 0; ++i) extent += (shape[i] - 1) * strides[i];
  if (!shareable || extent == 0) return TensorFromData(data, py::none(), Device::CPU());
  // The array is released under the GIL, whichever thread drops the tensor's last reference.
  std::shared_ptr<void> owner(new py::object(arr), [](void* p) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing to release
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      Storage::Borrow(buf.ptr, static_cast<size_t>(extent * item), Device::CPU(), std::move(owner));
  impl->shape = Shape(shape);
  impl->strides = std::move(strides);
  impl->dtype = dt;
  return Tensor(std::move(impl));
}

namespace {

py::object ElementAt(const Tensor& c, int64_t i) {
  if (IsComplex(c.dtype())) {
    const std::complex<double> v = c.dtype() == DType::kComplex64
                                       ? std::complex<double>(c.data<std::complex<float>>()[i])
                                       : c.data<std::complex<double>>()[i];
    return py::reinterpret_steal<py::object>(PyComplex_FromDoubles(v.real(), v.imag()));
  }
  return DispatchAll(c.dtype(), "tolist", [&](auto tag) -> py::object {
    using T = typename decltype(tag)::type;
    T v = c.data<T>()[i];
    if constexpr (std::is_same_v<T, bool>) {
      return py::bool_(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      return py::float_(static_cast<double>(v));
    } else {
      return py::int_(static_cast<int64_t>(v));
    }
  });
}

py::object ListRec(const Tensor& c, int64_t dim, int64_t& pos) {
  if (dim == c.ndim()) return ElementAt(c, pos++);
  py::list l(c.shape()[dim]);
  for (int64_t i = 0; i < c.shape()[dim]; ++i) l[i] = ListRec(c, dim + 1, pos);
  return l;
}

Tensor HostReadable(const Tensor& t) {
  Tensor c = fn::contiguous(t.detach());
  if (!c.is_cpu()) c = fn::to_device(c, Device::CPU());
  if (c.dtype() == DType::kFloat16 || c.dtype() == DType::kBFloat16) {
    c = fn::to_dtype(c, DType::kFloat32);
  }
  return c;
}

}  // namespace

py::object ToList(const Tensor& t) {
  SizeCheckOpScope op("Tensor.tolist");  // names the host read (core/sync_check.h)
  Tensor c = HostReadable(t);
  int64_t pos = 0;
  return ListRec(c, 0, pos);
}

py::object Item(const Tensor& t) {
  if (t.numel() != 1) {
    throw Error(
        StrCat("item: only a tensor with one element can be converted to a Python number, "
               "got shape ",
               t.shape()));
  }
  SizeCheckOpScope op("Tensor.item");  // names the host read (core/sync_check.h)
  return ElementAt(HostReadable(t), 0);
}

}  // namespace python
}  // namespace oneflow
