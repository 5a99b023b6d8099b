// The functional ops for Python (oneflow._C.add, ...), creation, random state and grad mode.
// Flexible Python signatures (flow.zeros(2, 3, dtype=...)) live in the Python package on top.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/inplace.h"
#include "core/kernels/cpu/blas.h"
#include "core/op_registry.h"
#include "core/ops/nn/nn.h"
#include "core/optim.h"
#include "core/size_check.h"
#include "oneflow/api/python/convert.h"
#include "oneflow/api/python/indexing.h"
#include "oneflow/api/python/module.h"
#include "oneflow/global/global_tensor.h"

namespace oneflow {
namespace python {

using IntList = std::vector<int64_t>;

namespace {

// The values an in-place draw writes into t: for a global t, laid out as t is, each rank
// drawing only its shard (the same logical values for every layout).
Tensor Drawn(const Tensor& t, const std::function<Tensor()>& draw) {
  if (!t.is_global()) return draw();
  const global::GlobalMeta& m = global::Meta(t);
  return global::BuildGlobal(draw, m.placement, m.nd_sbp);
}

}  // namespace

void BindFunctional(py::module_& m) {
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
  m.def("from_numpy", &TensorSharingNumpy);
  m.def("from_bytes", [](py::bytes b, py::handle shape, py::handle dtype) {
    std::string_view v = b;
    Shape s(ToIntList(shape, "from_bytes"));
    DType t = ToDType(dtype, DType::kFloat32);
    ONEFLOW_CHECK(static_cast<int64_t>(v.size()) == s.numel() * static_cast<int64_t>(SizeOf(t)),
                  "from_bytes: ", v.size(), " bytes do not hold a ", DTypeName(t),
                  " tensor of shape ", s);
    return fn::from_blob_copy(v.data(), s, t);
  });
  // The size check every tensor passes (core/size_check.h), for front doors that build a
  // tensor in several steps (nn modules' parameters): one line naming op before any work.
  m.def("_check_allocation", [](py::handle shape, py::handle dtype, const std::string& op) {
    return CheckAllocation(Shape(ToIntList(shape, op.c_str())), ToDType(dtype, DType::kFloat32),
                           op.c_str());
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
  m.def("normal",
        [](py::handle shape, double mean, double std, py::handle dtype, py::handle device) {
          return fn::normal(Shape(ToIntList(shape, "normal")), mean, std,
                            ToDType(dtype, DType::kFloat32), ToDevice(device));
        });
  m.def("randint",
        [](int64_t lo, int64_t hi, py::handle shape, py::handle dtype, py::handle device) {
          return fn::randint(lo, hi, Shape(ToIntList(shape, "randint")),
                             ToDType(dtype, DType::kInt64), ToDevice(device));
        });
  m.def("randperm", [](int64_t n, py::handle device) { return fn::randperm(n, ToDevice(device)); });
  m.def("uniform_", [](Tensor& t, double lo, double hi) {
    InPlace(
        t,
        [&](const Tensor&) {
          return Drawn(t, [&] { return fn::uniform(t.shape(), lo, hi, t.dtype(), t.device()); });
        },
        "uniform_");
  });
  m.def("normal_", [](Tensor& t, double mean, double std) {
    InPlace(
        t,
        [&](const Tensor&) {
          return Drawn(t, [&] { return fn::normal(t.shape(), mean, std, t.dtype(), t.device()); });
        },
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
  // a number first (OneFlow's flow.add(1, x), flow.div(2, x)): the number as a tensor like b's
  m.def("add", [](py::handle a, const Tensor& b) { return fn::add(ScalarOrTensor(a, b), b); });
  m.def("sub", [](py::handle a, const Tensor& b) { return fn::sub(ScalarOrTensor(a, b), b); });
  m.def("mul", [](py::handle a, const Tensor& b) { return fn::mul(ScalarOrTensor(a, b), b); });
  m.def("div", [](py::handle a, const Tensor& b) { return fn::div(ScalarOrTensor(a, b), b); });
  m.def("pow", [](const Tensor& a, py::handle b) { return fn::pow(a, ScalarOrTensor(b, a)); });
  m.def("maximum", &fn::maximum);
  m.def("remainder",
        [](const Tensor& a, py::handle b) { return fn::remainder(a, ScalarOrTensor(b, a)); });
  m.def("rremainder",
        [](const Tensor& b, py::handle a) { return fn::remainder(ScalarOrTensor(a, b), b); });
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
      throw Error(
          "nonzero: not supported on a global tensor; use to_local() (each shard's "
          "coordinates) or gather it first (to_global(sbp=broadcast))");
    }
    Tensor out =
        TrueCoordinates(x.dtype() == DType::kBool ? x : fn::to_dtype(x.detach(), DType::kBool));
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
           {"log1p", &fn::log1p},
           {"expm1", &fn::expm1},
           {"log2", &fn::log2},
           {"log10", &fn::log10},
           {"reciprocal", &fn::reciprocal},
           {"sin", &fn::sin},
           {"cos", &fn::cos},
           {"tan", &fn::tan},
           {"asin", &fn::asin},
           {"acos", &fn::acos},
           {"atan", &fn::atan},
           {"sinh", &fn::sinh},
           {"cosh", &fn::cosh},
           {"asinh", &fn::asinh},
           {"atanh", &fn::atanh},
           {"erf", &fn::erf},
           {"erfc", &fn::erfc},
           {"erfinv", &fn::erfinv},
           {"lgamma", &fn::lgamma},
           {"digamma", &fn::digamma},
           {"floor", &fn::floor},
           {"ceil", &fn::ceil},
           {"round", &fn::round},
           {"trunc", &fn::trunc},
           {"silu", &fn::silu},
           {"mish", &fn::mish},
           {"hardswish", &fn::hardswish},
           {"hardsigmoid", &fn::hardsigmoid},
           {"logsigmoid", &fn::logsigmoid},
           {"softsign", &fn::softsign},
           {"selu", &fn::selu},
           {"gelu_tanh", &fn::gelu_tanh}}) {
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
  m.def("layer_norm",
        [](const Tensor& x, const IntList& shape, py::object w, py::object b, double eps) {
          return fn::layer_norm(x, shape, OptTensor(w), OptTensor(b), eps);
        });
  m.def("rms_norm", [](const Tensor& x, const IntList& shape, py::object w, double eps) {
    return fn::rms_norm(x, shape, OptTensor(w), eps);
  });
  m.def("scaled_dot_product_attention", [](const Tensor& q, const Tensor& k, const Tensor& v,
                                           py::object mask, double dropout_p, bool is_causal,
                                           std::optional<double> scale) {
    return fn::scaled_dot_product_attention(q, k, v, OptTensor(mask), dropout_p, is_causal, scale);
  });
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
  // OneFlow's _C.dropout(x, p=0.5, training=True, generator=None, addend=None); a generator or
  // an addend goes through F.dropout, which draws from that generator's stream
  m.def(
      "dropout",
      [](const Tensor& x, double p, bool training, py::object generator, py::object addend) {
        if (generator.is_none() && addend.is_none()) return fn::dropout(x, p, training);
        return py::module_::import("oneflow.nn.functional")
            .attr("dropout")(x, p, training, false, generator, addend)
            .cast<Tensor>();
      },
      py::arg("input"), py::arg("p") = 0.5, py::arg("training") = true,
      py::arg("generator") = py::none(), py::arg("addend") = py::none());
  m.def("softmax", &fn::softmax);
  m.def("log_softmax", &fn::log_softmax);
  m.def("nll_loss", &fn::nll_loss);
  m.def("cross_entropy", &fn::cross_entropy, py::arg("input"), py::arg("target"),
        py::arg("reduction") = "mean", py::arg("ignore_index") = -100,
        py::arg("label_smoothing") = 0.0);
  m.def("mse_loss", &fn::mse_loss);
  // The optimizer update ops (core/optim.h): tensors (param, grad, state..., hyper...) and
  // the op's bool attrs.
  m.def("optim_update_", [](const std::string& op, const std::vector<Tensor>& tensors,
                            const std::map<std::string, bool>& flags) {
    optim::Update(op, tensors, optim::UpdateFlags(op, flags));
  });
  // The multi-tensor form (sgd_update, adam_update): `count` records, then shared hypers.
  m.def("optim_update_multi_", [](const std::string& op, const std::vector<Tensor>& tensors,
                                  int64_t count, const std::map<std::string, bool>& flags) {
    optim::MultiUpdate(op, tensors, count, optim::UpdateFlags(op, flags));
  });
  // ---- everyday API (core/functional.h's everyday block); Python signatures in _ops.py and the
  // API modules
  m.def("linspace",
        [](double start, double end, int64_t steps, py::handle dtype, py::handle device) {
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
    if (py::isinstance<Tensor>(repeats))
      return fn::repeat_interleave(x, repeats.cast<Tensor>(), dim);
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
  m.def("nms", &fn::nms);
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

  // Complex tensors (core/ops/complex.h).
  m.def("view_as_real", &fn::view_as_real);
  m.def("view_as_complex", &fn::view_as_complex);
  m.def("real", &fn::real);
  m.def("imag", &fn::imag);
  m.def("conj", &fn::conj);
  m.def("angle", &fn::angle);
  m.def("complex", &fn::complex);
  m.def("complex_full",
        [](py::handle shape, py::handle value, py::handle dtype, py::handle device) {
          const Py_complex v = PyComplex_AsCComplex(value.ptr());
          if (PyErr_Occurred()) throw py::error_already_set();
          const DType t = ToDType(dtype, DType::kComplex64);
          ONEFLOW_CHECK(IsComplex(t), "full: a complex fill value needs a complex dtype, got ",
                        DTypeName(t));
          Tensor z = fn::full(Shape(ToIntList(shape, "full")), 0.0, t, ToDevice(device));
          return fn::add(z, ComplexScalarOn(v.real, v.imag, t, z.device()));
        });
}

}  // namespace python
}  // namespace oneflow
