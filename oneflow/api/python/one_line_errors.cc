#include "oneflow/api/python/one_line_errors.h"

#include <string>
#include <vector>

namespace oneflow {
namespace python {

namespace py = pybind11;

namespace {

// "oneflow._oneflow_internal.Tensor" -> "Tensor"; "List[int]" stays.
std::string Short(std::string s) {
  const std::string prefix = "oneflow._oneflow_internal.";
  for (size_t at; (at = s.find(prefix)) != std::string::npos;) s.erase(at, prefix.size());
  // py::handle parameters take any object: pybind11 names their type "handle".
  for (size_t at = 0; (at = s.find("handle", at)) != std::string::npos; at += 6) {
    const bool word = (at == 0 || !isalnum(static_cast<unsigned char>(s[at - 1]))) &&
                      (at + 6 == s.size() || !isalnum(static_cast<unsigned char>(s[at + 6])));
    if (word) s.replace(at, 6, "object");
  }
  return s;
}

// The argument lists of pybind11's "    1. (arg0: T, arg1: U) -> R" lines, short and joined.
std::string Expected(const std::string& msg) {
  std::vector<std::string> sigs;
  size_t pos = 0;
  while ((pos = msg.find(". (", pos)) != std::string::npos) {
    const size_t open = pos + 2, arrow = msg.find(") -> ", open);
    const size_t line_end = msg.find('\n', open);
    if (arrow == std::string::npos || (line_end != std::string::npos && arrow > line_end)) break;
    std::string args = msg.substr(open, arrow + 1 - open);
    std::string kept;  // drop the "argN: " names pybind11 invents
    for (size_t i = 0; i < args.size();) {
      if (args.compare(i, 3, "arg") == 0) {
        size_t j = i + 3;
        while (j < args.size() && isdigit(static_cast<unsigned char>(args[j]))) ++j;
        if (args.compare(j, 2, ": ") == 0) {
          i = j + 2;
          continue;
        }
      }
      kept += args[i++];
    }
    sigs.push_back(Short(kept));
    pos = arrow;
  }
  std::string out;
  for (size_t i = 0; i < sigs.size(); ++i) out += (i ? " or " : "") + sigs[i];
  return out;
}

std::string Got(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, bool method) {
  std::string s = "(";
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = method ? 1 : 0; i < nargs + nkw; ++i) {
    if (s.size() > 1) s += ", ";
    if (i >= nargs) s += std::string(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i - nargs))) + "=";
    s += Short(Py_TYPE(args[i])->tp_name);
  }
  return s + ")";
}

struct Wrapped {
  PyObject* fn;  // the pybind11 function (owned)
  std::string name;
  bool method;
};

void Free(PyObject* capsule) {
  auto* w = static_cast<Wrapped*>(PyCapsule_GetPointer(capsule, "oneflow.one_line_errors"));
  Py_XDECREF(w->fn);
  delete w;
}

PyObject* Call(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  auto* w = static_cast<Wrapped*>(PyCapsule_GetPointer(self, "oneflow.one_line_errors"));
  PyObject* result = PyObject_Vectorcall(w->fn, args, nargs, kwnames);
  if (result ||
      !(PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_RuntimeError))) {
    return result;
  }
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* text = value ? PyObject_Str(value) : nullptr;
  const char* utf8 = text ? PyUnicode_AsUTF8(text) : nullptr;
  const std::string msg = utf8 ? utf8 : "";
  Py_XDECREF(text);
  std::string line;
  if (msg.find("incompatible function arguments") != std::string::npos) {
    line =
        w->name + ": got " + Got(args, nargs, kwnames, w->method) + "; expected " + Expected(msg);
  } else if (msg.rfind("Unable to cast Python instance of type ", 0) == 0) {
    // "Unable to cast Python instance of type <class 'int'> to C++ type 'long'"
    const std::string rest =
        msg.substr(std::string("Unable to cast Python instance of type ").size());
    const size_t to = rest.find(" to C++ type ");
    line = w->name + ": an argument of Python type " + rest.substr(0, to) +
           (to == std::string::npos ? std::string()
                                    : " does not fit C++ type " + rest.substr(to + 13)) +
           " (an int too large for it?)";
  }
  if (line.empty()) {
    PyErr_Restore(type, value, tb);
    return nullptr;
  }
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_SetString(type, line.c_str());
  Py_XDECREF(type);
  return nullptr;
}

PyMethodDef g_call = {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Call)),
                      METH_FASTCALL | METH_KEYWORDS, nullptr};

// A builtin that calls fn and rewrites its binding errors; it keeps fn's name and doc.
py::object Wrap(py::handle fn, const std::string& name, bool method) {
  auto* w = new Wrapped{fn.inc_ref().ptr(), name, method};
  py::object capsule =
      py::reinterpret_steal<py::object>(PyCapsule_New(w, "oneflow.one_line_errors", &Free));
  auto* def = new PyMethodDef(g_call);  // lives as long as the module: one per function
  py::str fn_name = fn.attr("__name__");
  def->ml_name = strdup(fn_name.cast<std::string>().c_str());
  py::object doc = fn.attr("__doc__");
  def->ml_doc = doc.is_none() ? nullptr : strdup(doc.cast<std::string>().c_str());
  // __module__ as pybind11 gives it (OneFlow's autotest reads a method's __module__)
  py::object module = py::getattr(fn, "__module__", py::none());
  if (!py::isinstance<py::str>(module)) module = py::str("oneflow._oneflow_internal");
  return py::reinterpret_steal<py::object>(PyCFunction_NewEx(def, capsule.ptr(), module.ptr()));
}

bool IsPybindFunction(py::handle f) {
  return PyCFunction_Check(f.ptr()) && py::hasattr(f, "__self__") &&
         py::isinstance<py::capsule>(f.attr("__self__"));
}

void WrapClass(py::handle cls) {
  const std::string cls_name = cls.attr("__name__").cast<std::string>();
  py::dict members = cls.attr("__dict__");
  for (auto item : members) {
    const std::string name = item.first.cast<std::string>();
    if (name.rfind("__", 0) == 0) continue;  // operators answer NotImplemented, not an error
    PyObject* v = item.second.ptr();
    if (!PyInstanceMethod_Check(v)) continue;
    py::handle fn = PyInstanceMethod_GET_FUNCTION(v);
    if (!IsPybindFunction(fn)) continue;
    py::object wrapped = Wrap(fn, cls_name + "." + name, /*method=*/true);
    py::setattr(cls, name.c_str(),
                py::reinterpret_steal<py::object>(PyInstanceMethod_New(wrapped.ptr())));
  }
}

}  // namespace

void WrapForOneLineErrors(py::module_& m) {
  py::dict names = m.attr("__dict__");
  std::vector<std::pair<std::string, py::object>> replace;
  for (auto item : names) {
    const std::string name = item.first.cast<std::string>();
    if (name.rfind("__", 0) == 0) continue;
    if (IsPybindFunction(item.second)) {
      replace.emplace_back(name, Wrap(item.second, name, /*method=*/false));
    } else if (PyType_Check(item.second.ptr()) &&
               py::str(item.second.attr("__module__")).cast<std::string>() ==
                   "oneflow._oneflow_internal") {
      WrapClass(item.second);
    }
  }
  for (auto& [name, fn] : replace) m.attr(name.c_str()) = fn;
}

}  // namespace python
}  // namespace oneflow
