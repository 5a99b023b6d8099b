// Bindings of the runtime: the process world, the job's Env and the collectives on local
// tensors. Python's oneflow.env and oneflow.comm give them their user-facing signatures.
// Every call that talks to other ranks releases the GIL.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "oneflow/api/python/convert.h"
#include "runtime/env.h"

namespace oneflow {
namespace python {
namespace {

using runtime::Communicator;
using runtime::Env;
using runtime::ReduceOp;
using runtime::Work;

ReduceOp ToReduceOp(const std::string& op) {
  if (op == "sum") return ReduceOp::kSum;
  if (op == "max") return ReduceOp::kMax;
  if (op == "min") return ReduceOp::kMin;
  if (op == "avg" || op == "mean") return ReduceOp::kAvg;
  throw Error(StrCat("all_reduce: unknown reduce op '", op, "', expected sum, max, min or avg"));
}

// Runs fn now (GIL released) or queues it and returns its Work.
py::object Run(Communicator& c, bool async_op, std::function<void(Communicator&)> fn) {
  if (async_op) return py::cast(c.Async(std::move(fn)));
  py::gil_scoped_release release;
  fn(c);
  return py::none();
}

}  // namespace

// Joining and creating a communicator wait for other ranks: without the GIL.
Communicator& CommOf(const py::object& ranks) {
  const bool world = ranks.is_none();
  std::vector<int> rs;
  if (!world) rs = ranks.cast<std::vector<int>>();
  py::gil_scoped_release release;
  Env& env = Env::Get();
  return world ? env.WorldComm() : env.Comm(rs);
}

void BindComm(py::module_& m) {
  m.def("world_info", [] {
    runtime::WorldInfo w = runtime::WorldFromEnv();
    py::dict d;
    d["rank"] = w.rank;
    d["world_size"] = w.world_size;
    d["local_rank"] = w.local_rank;
    d["local_world_size"] = w.local_world_size;
    d["node_size"] = (w.world_size + w.local_world_size - 1) / w.local_world_size;
    d["master_addr"] = w.master_addr;
    d["master_port"] = w.master_port;
    d["timeout_seconds"] = w.timeout_seconds;
    d["source"] = w.source;
    return d;
  });
  m.def("env_init", [] {
    py::gil_scoped_release release;
    Env::Get();
  });
  m.def("env_started", &Env::Started);
  m.def("env_shutdown", [] {
    if (!Env::Started()) return;
    py::gil_scoped_release release;
    Env::Get().Shutdown();
  });
  m.def("env_abort", [](const std::string& reason) {
    if (!Env::Started()) return;
    py::gil_scoped_release release;
    Env::Get().Abort(reason);
  });

  py::class_<Work, std::shared_ptr<Work>>(m, "Work")
      .def("wait",
           [](Work& w) {
             py::gil_scoped_release release;
             w.Wait();
             return true;
           })
      .def("is_completed", &Work::IsCompleted);

  // OneFlow's cpu_broadcast(bytes or None, src): rank src's bytes on every rank of the world
  // (OneFlow's test helpers pickle Python objects through it); in a one-rank world the bytes
  // themselves. Collective: every rank calls it.
  m.def(
      "cpu_broadcast",
      [](const py::object& data, int src) -> py::bytes {
        runtime::WorldInfo w = runtime::WorldFromEnv();
        ONEFLOW_CHECK(src >= 0 && src < w.world_size, "cpu_broadcast: src ", src,
                      " is not a rank of this world of ", w.world_size);
        const bool mine = w.rank == src;
        ONEFLOW_CHECK(!mine || py::isinstance<py::bytes>(data), "cpu_broadcast: rank src (", src,
                      ") must give bytes, got ", py::str(data.get_type()).cast<std::string>());
        if (w.world_size == 1) return data.cast<py::bytes>();
        std::string bytes = mine ? data.cast<std::string>() : std::string();
        int64_t n = static_cast<int64_t>(bytes.size());
        Tensor size = fn::from_blob_copy(&n, Shape({1}), DType::kInt64);
        {
          py::gil_scoped_release release;
          Env::Get().WorldComm().Broadcast(size, src);
        }
        n = *static_cast<const int64_t*>(size.raw_data());
        if (!mine) bytes.assign(static_cast<size_t>(n), '\0');
        Tensor payload = fn::from_blob_copy(bytes.data(), Shape({n}), DType::kUInt8);
        {
          py::gil_scoped_release release;
          Env::Get().WorldComm().Broadcast(payload, src);
        }
        return py::bytes(static_cast<const char*>(payload.raw_data()), static_cast<size_t>(n));
      },
      py::arg("data"), py::arg("src") = 0);

  const auto ranks = py::arg("ranks") = py::none();
  const auto async_op = py::arg("async_op") = false;
  m.def(
      "comm_transport", [](const py::object& r) { return std::string(CommOf(r).transport()); },
      ranks);
  m.def(
      "comm_all_reduce",
      [](Tensor t, const std::string& op, const py::object& r, bool async) {
        ReduceOp rop = ToReduceOp(op);
        return Run(CommOf(r), async, [t, rop](Communicator& c) mutable { c.AllReduce(t, rop); });
      },
      py::arg("tensor"), py::arg("op") = "sum", ranks, async_op);
  m.def(
      "comm_broadcast",
      [](Tensor t, int src, const py::object& r, bool async) {
        return Run(CommOf(r), async, [t, src](Communicator& c) mutable { c.Broadcast(t, src); });
      },
      py::arg("tensor"), py::arg("src"), ranks, async_op);
  // out has sum(counts) rows; counts None: every rank gives in's rows.
  m.def(
      "comm_all_gather",
      [](Tensor out, Tensor in, const py::object& counts, const py::object& r, bool async) {
        if (counts.is_none()) {
          return Run(CommOf(r), async,
                     [out, in](Communicator& c) mutable { c.AllGather(in, out); });
        }
        auto cs = counts.cast<std::vector<int64_t>>();
        return Run(CommOf(r), async,
                   [out, in, cs](Communicator& c) mutable { c.AllGatherV(in, out, cs); });
      },
      py::arg("out"), py::arg("input"), py::arg("counts") = py::none(), ranks, async_op);
  m.def(
      "comm_reduce_scatter",
      [](Tensor out, Tensor in, const std::string& op, const py::object& counts,
         const py::object& r, bool async) {
        ReduceOp rop = ToReduceOp(op);
        if (counts.is_none()) {
          return Run(CommOf(r), async,
                     [out, in, rop](Communicator& c) mutable { c.ReduceScatter(in, out, rop); });
        }
        auto cs = counts.cast<std::vector<int64_t>>();
        return Run(CommOf(r), async, [out, in, cs, rop](Communicator& c) mutable {
          c.ReduceScatterV(in, out, cs, rop);
        });
      },
      py::arg("out"), py::arg("input"), py::arg("op") = "sum", py::arg("counts") = py::none(),
      ranks, async_op);
  m.def(
      "comm_all_to_all",
      [](Tensor out, Tensor in, const py::object& in_counts, const py::object& out_counts,
         const py::object& r, bool async) {
        if (in_counts.is_none()) {
          return Run(CommOf(r), async, [out, in](Communicator& c) mutable { c.AllToAll(in, out); });
        }
        auto ic = in_counts.cast<std::vector<int64_t>>();
        auto oc = out_counts.cast<std::vector<int64_t>>();
        return Run(CommOf(r), async,
                   [out, in, ic, oc](Communicator& c) mutable { c.AllToAllV(in, out, ic, oc); });
      },
      py::arg("out"), py::arg("input"), py::arg("in_counts") = py::none(),
      py::arg("out_counts") = py::none(), ranks, async_op);
  m.def(
      "comm_send",
      [](Tensor t, int dst, uint32_t tag, const py::object& r) {
        Run(CommOf(r), false, [t, dst, tag](Communicator& c) { c.Send(t, dst, tag); });
      },
      py::arg("tensor"), py::arg("dst"), py::arg("tag") = 0, ranks);
  m.def(
      "comm_recv",
      [](Tensor t, int src, uint32_t tag, const py::object& r) {
        Run(CommOf(r), false, [t, src, tag](Communicator& c) mutable { c.Recv(t, src, tag); });
      },
      py::arg("tensor"), py::arg("src"), py::arg("tag") = 0, ranks);
  m.def(
      "comm_barrier",
      [](const py::object& r) { Run(CommOf(r), false, [](Communicator& c) { c.Barrier(); }); },
      ranks);
}

}  // namespace python
}  // namespace oneflow
