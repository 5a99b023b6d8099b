// The distribution vocabulary's Python face: sbp/sbp.h's Sbp and Placement bound as
// oneflow.sbp.sbp and oneflow.placement (an NdSbp crosses as a tuple of Sbp), so Python, C++
// and the tests share one value type.
//
//   P = flow.placement("cpu", ranks=[[0, 1], [2, 3]])   # a 2x2 mesh
//   x.to_global(placement=P, sbp=(flow.sbp.split(0), flow.sbp.broadcast))
#include "sbp/sbp.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <set>

#include "oneflow/api/python/convert.h"
#include "runtime/world.h"

namespace oneflow {
namespace python {
namespace {

using sbp::Placement;
using sbp::Sbp;

bool IsInt(py::handle o) { return PyLong_Check(o.ptr()); }  // bool too, as isinstance(o, int)

// A numpy array or integer as the Python list / int it holds (OneFlow accepts both for ranks).
py::object Plain(py::handle o) {
  if (!IsInt(o) && !py::isinstance<py::list>(o) && !py::isinstance<py::tuple>(o) &&
      py::hasattr(o, "tolist")) {
    return o.attr("tolist")();
  }
  return py::reinterpret_borrow<py::object>(o);
}

// ranks (an int, a list of ints or nested lists of them) as flat ints and the array's shape.
void Flatten(py::handle ranks_in, std::vector<py::object>& flat, std::vector<int64_t>& shape) {
  py::object ranks = Plain(ranks_in);
  if (IsInt(ranks)) {
    flat = {ranks};
    shape = {};
    return;
  }
  if (!py::isinstance<py::iterable>(ranks) || py::isinstance<py::str>(ranks)) {
    throw py::value_error(StrCat("placement: ranks must be non-negative ints, got ",
                                 py::repr(ranks).cast<std::string>()));
  }
  std::vector<py::object> rows;
  for (py::handle r : ranks) rows.push_back(Plain(r));
  if (!rows.empty() && std::all_of(rows.begin(), rows.end(), IsInt)) {
    flat = rows;
    shape = {static_cast<int64_t>(rows.size())};
    return;
  }
  flat.clear();
  std::optional<std::vector<int64_t>> inner;
  for (const py::object& r : rows) {
    std::vector<py::object> f;
    std::vector<int64_t> s;
    Flatten(r, f, s);
    if (inner && s != *inner) {
      throw py::value_error(StrCat("placement: ranks ", py::str(ranks).cast<std::string>(),
                                   " are not a rectangular array"));
    }
    inner = s;
    flat.insert(flat.end(), f.begin(), f.end());
  }
  shape = {static_cast<int64_t>(rows.size())};
  if (inner) shape.insert(shape.end(), inner->begin(), inner->end());
}

// flow.placement(type, ranks, hierarchy): ranks as in Flatten, or the old form {node: [device,
// ...]}. As OneFlow's ParallelDesc, parallel ids follow the sorted ranks, so ranks=[0, 2, 1, 3]
// is the placement [0, 1, 2, 3] (the hierarchy keeps its shape).
Placement MakePlacement(const py::object& type, const py::object& ranks,
                        const py::object& hierarchy) {
  DeviceType device = DeviceType::kCPU;
  if (py::isinstance<py::str>(type)) {
    std::string name = type.cast<std::string>();
    if (name != "cpu" && name != "cuda") {
      throw py::value_error(StrCat("placement: type must be 'cpu' or 'cuda', got ",
                                   py::repr(type).cast<std::string>()));
    }
    device = name == "cpu" ? DeviceType::kCPU : DeviceType::kCUDA;
  } else {
    device = ToDevice(type).type;  // a flow.device
  }
  if (ranks.is_none()) {
    throw py::value_error("placement: ranks are required, e.g. placement('cpu', ranks=[0, 1])");
  }
  std::vector<py::object> flat;
  std::vector<int64_t> shape;
  if (py::isinstance<py::dict>(ranks)) {
    const int per_node = runtime::WorldFromEnv().local_world_size;
    std::vector<std::pair<py::object, py::object>> items;
    for (auto kv : ranks.cast<py::dict>()) {
      items.emplace_back(py::reinterpret_borrow<py::object>(kv.first),
                         py::reinterpret_borrow<py::object>(kv.second));
    }
    std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
      return a.first.attr("__lt__")(b.first).template cast<bool>();
    });
    for (auto& [node, devs] : items) {
      for (py::handle dev : devs) {
        // int(node) * per_node + int(dev), as Python's int() reads them
        const auto as_int = [](py::handle o) {
          return py::reinterpret_steal<py::object>(PyNumber_Long(o.ptr())).cast<int64_t>();
        };
        flat.push_back(py::int_(as_int(node) * per_node + as_int(dev)));
      }
    }
    shape = {static_cast<int64_t>(flat.size())};
  } else {
    Flatten(ranks, flat, shape);
  }
  if (!hierarchy.is_none()) shape = hierarchy.cast<std::vector<int64_t>>();
  std::vector<int> ints;
  for (const py::object& r : flat) {
    if (!IsInt(r) || r.cast<int64_t>() < 0) {
      throw py::value_error(StrCat("placement: ranks must be non-negative ints, got ",
                                   py::repr(r).cast<std::string>()));
    }
    ints.push_back(r.cast<int>());
  }
  if (std::set<int>(ints.begin(), ints.end()).size() != ints.size()) {
    throw py::value_error(
        StrCat("placement: a rank appears twice in ", py::str(ranks).cast<std::string>()));
  }
  std::sort(ints.begin(), ints.end());
  return Placement(device, std::move(ints), std::move(shape));
}

// "[0, 1]" or "[[0, 1], [2, 3]]": the ranks as ToString prints them, without the device.
std::string RanksText(const Placement& p) {
  std::string s = p.ToString();
  return s.substr(s.find(':') + 1);
}

size_t HashPlacement(const Placement& p) {
  size_t h = static_cast<size_t>(p.device());
  for (int r : p.ranks()) h = h * 1000003 + static_cast<size_t>(r);
  for (int64_t d : p.hierarchy()) h = h * 31 + static_cast<size_t>(d);
  return h;
}

std::string SbpRepr(const Sbp& s) {
  if (s.is_split()) return StrCat("oneflow.sbp.split(dim=", s.axis(), ")");
  return s.is_broadcast() ? "oneflow.sbp.broadcast" : "oneflow.sbp.partial_sum";
}

}  // namespace

void BindSbp(py::module_& m) {
  py::class_<Placement>(m, "placement",
                        "Where a global tensor lives: a device type and the ranks holding it, "
                        "possibly as an n-D array (ranks=[[0, 1], [2, 3]] is a 2x2 mesh). The old "
                        "form placement(\"cuda\", {0: [0, 1]}) means node 0, devices 0 and 1.")
      .def(py::init(&MakePlacement), py::arg("type") = "cpu", py::arg("ranks") = py::none(),
           py::arg("hierarchy") = py::none())
      .def_property_readonly("type", [](const Placement& p) { return DeviceTypeName(p.device()); })
      .def_property_readonly("device_type",
                             [](const Placement& p) { return DeviceTypeName(p.device()); })
      // The ranks as a numpy array shaped like the hierarchy (as in OneFlow).
      .def_property_readonly("ranks",
                             [](const Placement& p) {
                               py::module_ np = py::module_::import("numpy");
                               return np.attr("array")(py::cast(p.ranks()), "int64")
                                   .attr("reshape")(py::tuple(py::cast(p.hierarchy())));
                             })
      .def_property_readonly("hierarchy",
                             [](const Placement& p) { return py::tuple(py::cast(p.hierarchy())); })
      .def("__eq__",
           [](const Placement& a, py::handle b) {
             return py::isinstance<Placement>(b) && a == b.cast<const Placement&>();
           })
      .def("__hash__", &HashPlacement)
      .def("__repr__",
           [](const Placement& p) {
             return StrCat("oneflow.placement(type=\"", DeviceTypeName(p.device()),
                           "\", ranks=", RanksText(p), ")");
           })
      .def(py::pickle(
          [](const Placement& p) {
            return py::make_tuple(DeviceTypeName(p.device()), p.ranks(), p.hierarchy());
          },
          [](const py::tuple& s) {
            return Placement(Device::Parse(s[0].cast<std::string>()).type,
                             s[1].cast<std::vector<int>>(), s[2].cast<std::vector<int64_t>>());
          }))
      .def_static(
          "all",
          [](const py::object& device_type) {
            py::list ranks;
            for (int r = 0; r < runtime::WorldFromEnv().world_size; ++r) ranks.append(r);
            return MakePlacement(device_type, ranks, py::none());
          },
          py::arg("device_type") = "cpu");

  py::module_ s = m.def_submodule("sbp",
                                  "Split, broadcast and partial-sum layouts of global "
                                  "tensors.");
  py::class_<Sbp>(s, "sbp")
      // flow.sbp.broadcast() works like flow.sbp.broadcast
      .def("__call__", [](const Sbp& x) { return x; })
      .def_property_readonly("is_split", &Sbp::is_split)
      .def_property_readonly("is_broadcast", &Sbp::is_broadcast)
      .def_property_readonly("is_partial_sum", &Sbp::is_partial)
      .def_property_readonly("axis", &Sbp::axis)  // -1 unless split
      .def("__eq__",
           [](const Sbp& a, py::handle b) {
             return py::isinstance<Sbp>(b) && a == b.cast<const Sbp&>();
           })
      .def("__hash__", &Sbp::Hash)
      .def("__repr__", &SbpRepr)
      .def(py::pickle(
          [](const Sbp& x) { return py::make_tuple(static_cast<int>(x.kind()), x.axis()); },
          [](const py::tuple& t) {
            int kind = t[0].cast<int>();
            return kind == 0   ? Sbp::Split(t[1].cast<int>())
                   : kind == 1 ? Sbp::Broadcast()
                               : Sbp::PartialSum();
          }));
  s.def(
      "split",
      [](py::handle dim) {
        if (!IsInt(dim) || PyBool_Check(dim.ptr())) {
          throw py::type_error(StrCat("sbp.split: dim must be an int, got ",
                                      dim.attr("__class__").attr("__name__").cast<std::string>()));
        }
        // OneFlow's bounds and wording: a split axis is one of a tensor's first 6 axes.
        const int axis = dim.cast<int>();
        if (axis < 0) {
          throw std::runtime_error(StrCat("sbp.split: Split axis must not be negative, but got ",
                                          axis, "! (expected 0 <= axis < 6)"));
        }
        if (axis >= 6) {
          throw std::runtime_error(
              StrCat("sbp.split: Expected split axis to be less than the "
                     "supported maximum axis (6), but got ",
                     axis, "!"));
        }
        return Sbp::Split(axis);
      },
      py::arg("dim"));
  s.attr("broadcast") = Sbp::Broadcast();
  s.attr("partial_sum") = Sbp::PartialSum();
}

}  // namespace python
}  // namespace oneflow
