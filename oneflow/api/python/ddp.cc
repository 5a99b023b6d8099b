// Bindings for what oneflow.autograd.Function and oneflow.nn.parallel build on: graph nodes
// whose backward is a Python callable, backward-end callbacks, and DDP's gradient reducer.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/autograd.h"
#include "core/dispatch.h"
#include "oneflow/api/python/convert.h"
#include "oneflow/ddp/reducer.h"
#include "runtime/env.h"

namespace oneflow {
namespace python {
namespace {

// A node recorded by autograd.Function.apply: backward(*grads) returns one tensor or None per
// input edge. The callable (holding ctx and its saved tensors) is dropped, under the GIL, when
// backward ran without retain_graph or the graph dies.
class PyFunctionNode : public Node {
 public:
  PyFunctionNode(py::function backward, std::string name)
      : backward_(std::make_unique<py::object>(std::move(backward))), name_(std::move(name)) {}
  ~PyFunctionNode() override { Drop(); }

  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override {
    py::gil_scoped_acquire gil;
    if (!backward_) {
      throw Error(StrCat("backward: trying to backward through the graph a second time: the ",
                         "saved state of '", name_, "' was freed by the first backward; pass ",
                         "retain_graph=True to the first backward"));
    }
    py::tuple args(grads.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      Tensor g = grads[i].defined() ? grads[i] : Full(output_metas[i], 0.0);
      args[i] = py::cast(g);
    }
    py::object result = (*backward_)(*args);
    py::sequence seq = result.cast<py::sequence>();
    if (seq.size() != next_edges.size()) {
      throw Error(StrCat(name_, ".backward: returned ", seq.size(), " gradients for ",
                         next_edges.size(), " tensor inputs"));
    }
    std::vector<Tensor> out;
    for (size_t i = 0; i < seq.size(); ++i) {
      py::object g = seq[i];
      out.push_back(g.is_none() ? Tensor() : g.cast<Tensor>());
    }
    return out;
  }
  std::string name() const override { return name_; }
  void Release() override { Drop(); }

 private:
  void Drop() {
    if (!backward_ || !Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    backward_.reset();
  }

  std::unique_ptr<py::object> backward_;
  std::string name_;
};

py::dict StatsDict(const ddp::ReducerStats& s) {
  py::dict d;
  d["reductions"] = s.reductions;
  d["comm_seconds"] = s.comm_seconds;
  d["exposed_seconds"] = s.exposed_seconds;
  d["copied_bytes"] = s.copied_bytes;
  return d;
}

}  // namespace

void BindDdp(py::module_& m) {
  // Makes `outputs` (computed without grad) the outputs of a node over `inputs`; returns the
  // outputs to hand out (an output that is an input comes back detached, so it gets a node).
  m.def("_function_attach", [](std::vector<Tensor> outputs, const std::vector<Tensor>& inputs,
                               py::function backward, const std::string& name) {
    auto node = std::make_shared<PyFunctionNode>(std::move(backward), name);
    for (const Tensor& in : inputs) {
      node->next_edges.push_back(in.requires_grad() ? GradientEdge(in) : Edge{});
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      Tensor& out = outputs[i];
      if (out.requires_grad()) out = out.detach();  // an input handed back as is
      node->output_metas.push_back(out.meta());
      if (!IsFloating(out.dtype())) continue;
      AutogradMeta& am = out.impl()->mutable_autograd();
      am.requires_grad = true;
      am.grad_fn = node;
      am.output_nr = static_cast<int>(i);
    }
    return outputs;
  });
  m.def("_queue_backward_callback", [](py::function cb) {
    QueueBackwardCallback([cb] {
      py::gil_scoped_acquire gil;
      cb();
    });
  });

  py::class_<ddp::Reducer, std::shared_ptr<ddp::Reducer>>(m, "Reducer")
      .def(py::init([](std::vector<Tensor> params, std::vector<std::string> names,
                       const py::object& ranks, int64_t bucket_cap_bytes,
                       int64_t first_bucket_cap_bytes, bool find_unused_parameters,
                       const py::object& overlap) {
             ddp::ReducerOptions o;
             o.overlap = overlap.is_none()
                             ? ddp::OverlapPaysOff(runtime::Env::Get().world().local_world_size)
                             : overlap.cast<bool>();
             o.bucket_cap_bytes = bucket_cap_bytes;
             o.first_bucket_cap_bytes = first_bucket_cap_bytes;
             o.find_unused_parameters = find_unused_parameters;
             runtime::Communicator& comm = CommOf(ranks);
             return ddp::Reducer::Create(std::move(params), std::move(names), comm, o);
           }),
           py::arg("params"), py::arg("names"), py::arg("ranks"), py::arg("bucket_cap_bytes"),
           py::arg("first_bucket_cap_bytes"), py::arg("find_unused_parameters"),
           py::arg("overlap") = py::none())
      .def("prepare_for_backward", &ddp::Reducer::PrepareForBackward)
      .def_property("sync", &ddp::Reducer::sync, &ddp::Reducer::set_sync)
      .def("bucket_indices", &ddp::Reducer::bucket_indices)
      .def_property_readonly("overlap", &ddp::Reducer::overlap)
      .def("stats", [](const ddp::Reducer& r) { return StatsDict(r.stats()); });

  m.def(
      "ddp_verify_param_shapes",
      [](const std::vector<Tensor>& params, const std::vector<std::string>& names,
         const py::object& ranks) {
        runtime::Communicator& comm = CommOf(ranks);
        py::gil_scoped_release release;
        ddp::VerifyParamShapes(comm, params, names);
      },
      py::arg("params"), py::arg("names"), py::arg("ranks") = py::none());
  m.def(
      "ddp_broadcast_coalesced",
      [](const std::vector<Tensor>& tensors, int root, const py::object& ranks) {
        runtime::Communicator& comm = CommOf(ranks);
        py::gil_scoped_release release;
        ddp::BroadcastCoalesced(comm, tensors, root);
      },
      py::arg("tensors"), py::arg("root"), py::arg("ranks") = py::none());
}

}  // namespace python
}  // namespace oneflow
