// Bindings of global tensors: conversions, metadata and the planner, for oneflow/_global.py,
// which gives them OneFlow's Python names (flow.placement, flow.sbp, Tensor.to_global).
// Placements cross as (device, ranks, hierarchy) and Sbps as (kind, axis) pairs with kind
// 0 = split, 1 = broadcast, 2 = partial_sum.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "boxing/plan.h"
#include "oneflow/api/python/convert.h"
#include "oneflow/global/global_tensor.h"
#include "sbp/rules.h"

namespace oneflow {
namespace python {
namespace {

using sbp::NdSbp;
using sbp::Placement;
using sbp::Sbp;
using SbpPairs = std::vector<std::pair<int, int>>;

Placement ToPlacement(const std::string& device, const std::vector<int>& ranks,
                      const std::vector<int64_t>& hierarchy) {
  DeviceType type = Device::Parse(device).type;
  return Placement(type, ranks, hierarchy);
}

NdSbp ToNdSbp(const SbpPairs& pairs) {
  NdSbp nd;
  for (auto [kind, axis] : pairs) {
    nd.push_back(kind == 0 ? Sbp::Split(axis) : kind == 1 ? Sbp::Broadcast() : Sbp::PartialSum());
  }
  return nd;
}

SbpPairs FromNdSbp(const NdSbp& nd) {
  SbpPairs out;
  for (const Sbp& s : nd) out.emplace_back(static_cast<int>(s.kind()), s.axis());
  return out;
}

}  // namespace

void BindGlobal(py::module_& m) {
  m.def(
      "to_global",
      [](const Tensor& t, const std::string& device, const std::vector<int>& ranks,
         const std::vector<int64_t>& hierarchy, const SbpPairs& sbp, bool check_meta,
         std::optional<std::vector<int64_t>> shape) {
        Placement pl = ToPlacement(device, ranks, hierarchy);
        NdSbp nd = ToNdSbp(sbp);
        std::optional<Shape> known;
        if (shape) known = Shape(*shape);
        py::gil_scoped_release release;
        return t.is_global() ? global::ToGlobal(t, pl, nd)
                             : global::LocalToGlobal(t, pl, nd, check_meta,
                                                     known ? &*known : nullptr);
      },
      py::arg("tensor"), py::arg("device"), py::arg("ranks"), py::arg("hierarchy"),
      py::arg("sbp"), py::arg("check_meta") = false, py::arg("shape") = py::none());
  m.def(
      "global_from_whole",
      [](const Tensor& whole, const std::string& device, const std::vector<int>& ranks,
         const std::vector<int64_t>& hierarchy, const SbpPairs& sbp) {
        return global::FromWhole(whole, ToPlacement(device, ranks, hierarchy), ToNdSbp(sbp));
      });
  // The address of the tensor's implementation: equal for two Python handles of one tensor.
  m.def("tensor_impl_id",
        [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.impl()); });
  m.def("to_local", [](const Tensor& t) {
    if (!t.is_global()) return t;
    return global::ToLocal(t);
  });
  m.def("global_info", [](const Tensor& t) -> py::object {
    if (!t.is_global()) return py::none();
    const global::GlobalMeta& g = global::Meta(t);
    return py::make_tuple(g.placement.device() == DeviceType::kCPU ? "cpu" : "cuda",
                          g.placement.ranks(), g.placement.hierarchy(), FromNdSbp(g.nd_sbp));
  });
  m.def("boxing_plan", [](const std::string& device, const std::vector<int>& src_ranks,
                          const std::vector<int64_t>& src_h, const SbpPairs& from,
                          const std::vector<int>& dst_ranks, const std::vector<int64_t>& dst_h,
                          const SbpPairs& to, const std::vector<int64_t>& shape) {
    auto plan = boxing::PlanBoxing(ToPlacement(device, src_ranks, src_h), ToNdSbp(from),
                                   ToPlacement(device, dst_ranks, dst_h), ToNdSbp(to),
                                   Shape(shape), DType::kFloat32);
    return py::make_tuple(plan.ToString(), plan.cost);
  });
  m.def("sbp_rule_names", &sbp::SbpRuleNames);
}

}  // namespace python
}  // namespace oneflow
