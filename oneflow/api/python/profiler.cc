// The recorder of core/profiler.h for oneflow.profiler: start/stop, the events as tuples,
// ranges opened from Python (record_function, profiler steps, DataLoader waits), and this
// rank's clock offset to rank 0 for merging the ranks' timelines.
#include "core/profiler.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "core/error.h"
#include "oneflow/api/python/module.h"
#include "runtime/env.h"

namespace oneflow {
namespace python {

namespace {

// A range Python opens and closes (record_function's __enter__/__exit__).
class PyRange {
 public:
  explicit PyRange(const std::string& name) : range_(profiler::Kind::kUser, name) {}
  void End() {
    if (range_.active()) range_.End();
  }

 private:
  profiler::Range range_;
};

py::tuple EventTuple(const profiler::Event& e) {
  return py::make_tuple(profiler::KindName(e.kind), e.name, e.start_ns, e.end_ns, e.thread,
                        e.shapes, e.detail, e.bytes, e.memory[0], e.memory[1], e.device,
                        e.device_start_ns, e.device_end_ns, e.stack);
}

// with_stack: frames of files under this folder (the oneflow package) are left out, so an op's
// stack starts at its call site in the user's code. Set by _profiler_start.
std::string g_stack_skip;
constexpr int kMaxStackFrames = 32;

// The Python stack of this thread (profiler::StackProvider), innermost frame first; empty on a
// thread that does not hold the GIL (an op called from C++).
std::string PythonStack() {
  if (!PyGILState_Check()) return std::string();
  std::string out;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  for (int n = 0; frame != nullptr && n < kMaxStackFrames;) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* name = PyUnicode_AsUTF8(code->co_name);
    if (file && name && std::strncmp(file, g_stack_skip.c_str(), g_stack_skip.size()) != 0) {
      out += StrCat(n ? "\n" : "", file, "(", PyFrame_GetLineNumber(frame), "): ", name);
      ++n;
    }
    if (!file || !name) PyErr_Clear();
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  return out;
}

}  // namespace

void BindProfiler(py::module_& m) {
  m.def(
      "_profiler_start",
      [](bool record_shapes, bool profile_memory, bool cuda, bool with_stack,
         const std::string& stack_skip) {
        profiler::Options o;
        o.record_shapes = record_shapes;
        o.profile_memory = profile_memory;
        o.cuda = cuda;
        o.with_stack = with_stack;
        g_stack_skip = stack_skip;
        profiler::Start(o);
      },
      py::arg("record_shapes"), py::arg("profile_memory"), py::arg("cuda"),
      py::arg("with_stack") = false, py::arg("stack_skip") = "");
  profiler::SetStackProvider(&PythonStack);
  // (kind, name, start_ns, end_ns, thread, shapes, detail, bytes, cpu_memory, cuda_memory,
  //  device, device_start_ns, device_end_ns, stack) per event, ordered by start.
  m.def("_profiler_stop", [] {
    std::vector<profiler::Event> events;
    {
      py::gil_scoped_release release;  // the device timer may wait for the GPU
      events = profiler::Stop();
    }
    py::list out;
    for (const profiler::Event& e : events) out.append(EventTuple(e));
    return out;
  });
  m.def("_profiler_enabled", &profiler::Enabled);
  m.def("_profiler_now_ns", &profiler::NowNs);
  m.def("_profiler_thread_id", &profiler::ThreadId);
  // (this rank's steady clock minus rank 0's, round trip) in ns; (0, 0) in a job of one process
  // or before the job was joined.
  m.def("_profiler_clock_offset_ns", [](int samples) {
    if (!runtime::Env::Started() || !runtime::Env::Get().control()) {
      return std::pair<int64_t, int64_t>(0, 0);
    }
    py::gil_scoped_release release;
    return runtime::Env::Get().control()->MasterClockOffset(samples);
  });
  py::class_<PyRange>(m, "_ProfilerRange")
      .def(py::init<const std::string&>())
      .def("end", &PyRange::End);
}

}  // namespace python
}  // namespace oneflow
