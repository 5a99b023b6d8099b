// oneflow.cuda: device queries, synchronisation, memory statistics and the TF32 switch (and
// oneflow.cpu's memory statistics, in the same dict). In a
// build without CUDA every query answers "none" and says why. Under the stand-in CUDA device
// (ONEFLOW_FAKE_CUDA=1, core/device.h) the queries answer for it, whatever the build.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/cuda_graph.h"
#include "core/device.h"
#include "core/error.h"
#include "core/kernels/cuda/cuda_libs.h"
#include "core/storage.h"
#include "core/sync_check.h"
#include "oneflow/api/python/convert.h"
#ifdef ONEFLOW_WITH_CUDA
#include "core/kernels/cuda/cuda_util.h"
#endif

namespace py = pybind11;

namespace oneflow {
namespace python {
namespace {

// Throws "<op>: invalid device ordinal N ..." for a CUDA device that does not exist.
void RequireCuda(int index, const char* op) {
  if (FakeCuda()) {
    if (index < 0 || index >= FakeCudaDeviceCount()) {
      throw Error(StrCat(op, ": invalid device ordinal ", index, ": the stand-in CUDA device ",
                         "(ONEFLOW_FAKE_CUDA=1) has ", FakeCudaDeviceCount(), " devices"));
    }
    return;
  }
#ifdef ONEFLOW_WITH_CUDA
  cuda::RequireDevice(index, op);
#else
  throw Error(StrCat(op, ": this build has no CUDA support"));
#endif
}

int DeviceCount() {
  if (FakeCuda()) return FakeCudaDeviceCount();
#ifdef ONEFLOW_WITH_CUDA
  return cuda::DeviceCount();
#else
  return 0;
#endif
}

// Statistics of a device (zeros where CUDA is unavailable, as torch.cuda answers).
MemoryStats Stats(int index, const char* op) {
  if (DeviceCount() == 0) return MemoryStats();
  RequireCuda(index, op);
  return GetAllocator(DeviceType::kCUDA)->Stats(index);
}

// torch.cuda.memory_stats's flat dict ("allocated_bytes.all.current", ...).
py::dict StatsDict(const MemoryStats& s) {
  py::dict d;
  const std::pair<const char*, const MemoryStat*> stats[] = {
      {"allocated_bytes", &s.allocated_bytes},
      {"reserved_bytes", &s.reserved_bytes},
      {"allocation", &s.allocation},
      {"segment", &s.segment}};
  for (const auto& [name, stat] : stats) {
    const std::string prefix = std::string(name) + ".all.";
    d[py::str(prefix + "current")] = stat->current;
    d[py::str(prefix + "peak")] = stat->peak;
    d[py::str(prefix + "allocated")] = stat->allocated;
    d[py::str(prefix + "freed")] = stat->freed;
  }
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  // The private pools of captured CUDA graphs (oneflow.cuda.CUDAGraph, nn.Graph's
  // enable_cuda_graph), counted in the totals above too.
  for (const auto& [name, stat] :
       {std::pair<const char*, const MemoryStat*>{"allocated_bytes", &s.graph_pool_allocated_bytes},
        {"reserved_bytes", &s.graph_pool_reserved_bytes}}) {
    const std::string prefix = std::string(name) + ".graph_pools.";
    d[py::str(prefix + "current")] = stat->current;
    d[py::str(prefix + "peak")] = stat->peak;
  }
  d["num_graph_pools"] = s.graph_pools;
  return d;
}

// Sync debug mode "warn": a Python UserWarning at the caller's line (an error when the warnings
// filter makes it one).
void WarnInPython(const std::string& message) {
  py::gil_scoped_acquire gil;
  if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) throw py::error_already_set();
}

}  // namespace

void BindCuda(py::module_& m) {
  SetSyncWarnHandler(WarnInPython);
  m.def("cuda_set_sync_debug_mode", [](int mode) {
    ONEFLOW_CHECK(mode >= 0 && mode <= 2,
                  "oneflow.cuda.set_sync_debug_mode: expected 0, 1 or 2, got ", mode);
    SetSyncDebugMode(static_cast<SyncDebugMode>(mode));
  });
  m.def("cuda_get_sync_debug_mode", []() { return static_cast<int>(GetSyncDebugMode()); });
  // OneFlow's build flags (_oneflow_internal.flags.cuda_version(): 11080 for CUDA 11.8, 0 in a
  // build without CUDA), as OneFlow's own tests read them.
  py::module_ flags = m.def_submodule("flags", "How this build was made.");
#ifdef ONEFLOW_WITH_CUDA
  flags.def("with_cuda", []() { return true; });
  flags.def("cuda_version", []() { return CUDART_VERSION; });
#else
  flags.def("with_cuda", []() { return false; });
  flags.def("cuda_version", []() { return 0; });
#endif
  // The library loader is built with or without CUDA (opening a library needs no GPU).
  m.def("cuda_add_library_dirs",
        [](const std::vector<std::string>& dirs) { cuda::AddLibraryDirs(dirs); });
  m.def("cuda_library_search_path", []() { return cuda::LibrarySearchPath(); });
  m.def("cuda_open_library",
        [](const std::string& soname) { return cuda::OpenedLibraryPath(soname.c_str()); });
#ifdef ONEFLOW_WITH_CUDA
  m.def("cuda_built", []() { return true; });
  m.def("cuda_unavailable", []() { return FakeCuda() ? std::string() : cuda::Unavailable(); });
  m.def("cuda_synchronize", [](int index) {
    RequireCuda(index, "oneflow.cuda.synchronize");
    if (FakeCuda()) return;  // its kernels ran on the host, in order
    py::gil_scoped_release release;
    cuda::Synchronize(index);
  });
  m.def("cuda_empty_cache", []() {
    if (FakeCuda()) {
      CudaAllocator().EmptyCache(-1);
    } else {
      cuda::EmptyCache();
    }
  });
  m.def("cuda_allow_tf32", []() { return cuda::AllowTf32(); });
  m.def("cuda_set_allow_tf32", [](bool allow) { cuda::SetAllowTf32(allow); });
  m.def("cudnn_allow_tf32", []() { return cuda::AllowCudnnTf32(); });
  m.def("cudnn_set_allow_tf32", [](bool allow) { cuda::SetAllowCudnnTf32(allow); });
#else
  m.def("cuda_built", []() { return false; });
  m.def("cuda_unavailable", []() {
    if (FakeCuda()) return std::string();
    return std::string("this build has no CUDA support (built where the CUDA toolkit was ") +
           "missing, or with ONEFLOW_CUDA=0)";
  });
  m.def("cuda_synchronize", [](int index) { RequireCuda(index, "oneflow.cuda.synchronize"); });
  m.def("cuda_empty_cache", []() {
    if (FakeCuda()) CudaAllocator().EmptyCache(-1);
  });
  m.def("cuda_allow_tf32", []() { return false; });
  m.def("cuda_set_allow_tf32", [](bool) {});
  m.def("cudnn_allow_tf32", []() { return true; });
  m.def("cudnn_set_allow_tf32", [](bool) {});
#endif
  m.def("cuda_fake", []() { return FakeCuda(); });
  // oneflow.cuda.CUDAGraph (oneflow/python/oneflow/cuda/graphs.py) and its pools.
  py::class_<CudaGraph>(m, "CudaGraph")
      .def(py::init<>())
      .def("capture_begin",
           [](CudaGraph& g, int index, PoolId pool) {
             RequireCuda(index, "oneflow.cuda.graph");
             g.CaptureBegin(index, pool, /*eager=*/true);
           })
      .def("capture_end", &CudaGraph::CaptureEnd)
      .def("capture_abort", &CudaGraph::CaptureAbort)
      .def("replay",
           [](CudaGraph& g) {
             py::gil_scoped_release release;
             g.Replay();
           })
      .def("reset", &CudaGraph::Reset)
      .def("pool", &CudaGraph::pool)
      .def("captured", &CudaGraph::captured)
      .def("capturing", &CudaGraph::capturing)
      .def("num_launches", &CudaGraph::num_launches)
      .def_static("capture_runs", &CudaGraph::CaptureRuns);
  m.def("cuda_graph_pool_handle", [](int index) {
    RequireCuda(index, "oneflow.cuda.graph_pool_handle");
    return CudaAllocator().NewPool(index);
  });
  m.def("cuda_graph_pool_retain",
        [](int index, PoolId pool) { CudaAllocator().RetainPool(index, pool); });
  m.def("cuda_graph_pool_release",
        [](int index, PoolId pool) { CudaAllocator().ReleasePool(index, pool); });
  m.def("cuda_pool_of", [](const Tensor& t) {
    ONEFLOW_CHECK(t.device().type == DeviceType::kCUDA, "cuda_pool_of: expected a cuda tensor");
    return CudaAllocator().PoolOf(t.storage()->data(), t.device().index);
  });
  m.def("cuda_device_count", []() { return DeviceCount(); });
  m.def("cuda_set_device", [](int index) {
    RequireCuda(index, "oneflow.cuda.set_device");
    SetCurrentCudaIndex(index);
  });
  m.def("cuda_current_index", []() { return CurrentCudaIndex(); });
  m.def("cuda_memory_stats",
        [](int index) { return StatsDict(Stats(index, "oneflow.cuda.memory_stats")); });
  m.def("cpu_memory_stats", []() { return StatsDict(GetAllocator(DeviceType::kCPU)->Stats(0)); });
  m.def("cpu_reset_peak_memory_stats", []() { GetAllocator(DeviceType::kCPU)->ResetPeakStats(0); });
  m.def("cuda_reset_peak_memory_stats", [](int index) {
    if (DeviceCount() == 0) return;
    RequireCuda(index, "oneflow.cuda.reset_peak_memory_stats");
    GetAllocator(DeviceType::kCUDA)->ResetPeakStats(index);
  });
}

}  // namespace python
}  // namespace oneflow
