// Bindings of global tensors: conversions, metadata and the planner, for oneflow/_global.py,
// which gives them OneFlow's Python signatures (Tensor.to_global, creation with placement/sbp).
// Placements and Sbps cross as the bound values of sbp.cc; an NdSbp as a tuple of Sbp.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "boxing/plan.h"
#include "core/shard_window.h"
#include "oneflow/api/python/convert.h"
#include "oneflow/api/python/module.h"
#include "oneflow/global/global_tensor.h"
#include "runtime/env.h"
#include "sbp/rules.h"

namespace oneflow {
namespace python {
namespace {

using sbp::NdSbp;
using sbp::Placement;

// The NdSbp as Python sees it: a tuple, as tensor.sbp is in OneFlow.
py::tuple SbpTuple(const NdSbp& nd) { return py::tuple(py::cast(nd)); }

}  // namespace

// numpy(), item(), float() and printing of a global tensor read it: collective, every rank of the
// job calls them.
Tensor Whole(const Tensor& t) {
  if (!t.is_global()) return t;
  py::gil_scoped_release release;
  return global::Whole(t);
}

void BindGlobal(py::module_& m) {
  m.def(
      "to_global",
      [](const Tensor& t, const Placement& pl, const NdSbp& nd, bool check_meta,
         std::optional<std::vector<int64_t>> shape) {
        std::optional<Shape> known;
        if (shape) known = Shape(*shape);
        py::gil_scoped_release release;
        return t.is_global()
                   ? global::ToGlobal(t, pl, nd)
                   : global::LocalToGlobal(t, pl, nd, check_meta, known ? &*known : nullptr);
      },
      py::arg("tensor"), py::arg("placement"), py::arg("sbp"), py::arg("check_meta") = false,
      py::arg("shape") = py::none());
  m.def("global_from_whole", [](const Tensor& whole, const Placement& placement, const NdSbp& sbp) {
    return global::FromWhole(whole, placement, sbp);
  });
  m.def("global_build",
        [](const py::function& build, const Placement& placement, const NdSbp& sbp) {
          return global::BuildGlobal([&] { return build().cast<Tensor>(); }, placement, sbp);
        });
  // Inside global_build: this rank's window of a logical shape, (start, shape) per axis, taken
  // as a creation op takes it (core/shard_window.h); None outside a build or once taken.
  // flow.tensor(numpy array, placement=...) converts only its window.
  m.def("take_shard_window", [](const std::vector<int64_t>& logical) -> py::object {
    std::optional<ShardWindow> w = TakeShardWindow(Shape(logical));
    if (!w) return py::none();
    return py::make_tuple(w->start, w->local.dims());
  });
  // The address of the tensor's implementation: equal for two Python handles of one tensor.
  m.def("tensor_impl_id",
        [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.impl()); });
  m.def("whole", &Whole);
  m.def("to_local", [](const Tensor& t) {
    if (!t.is_global()) return t;
    return global::ToLocal(t);
  });
  m.def("global_info", [](const Tensor& t) -> py::object {
    if (!t.is_global()) return py::none();
    const global::GlobalMeta& g = global::Meta(t);
    return py::make_tuple(g.placement, SbpTuple(g.nd_sbp));
  });
  m.def("boxing_plan", [](const Placement& src, const NdSbp& from, const Placement& dst,
                          const NdSbp& to, const std::vector<int64_t>& shape) {
    auto plan = boxing::PlanBoxing(src, from, dst, to, Shape(shape), DType::kFloat32);
    return py::make_tuple(plan.ToString(), plan.cost);
  });
  m.def("sbp_rule_names", &sbp::SbpRuleNames);
}

}  // namespace python
}  // namespace oneflow
