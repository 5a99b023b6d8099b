#include "core/kernels/cuda/cuda_libs.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "core/error.h"

namespace oneflow {
namespace cuda {

namespace {

void* Open(const std::string& soname) {
  static std::mutex mu;
  static std::map<std::string, void*> handles;
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(soname);
  if (it != handles.end()) return it->second;
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_GLOBAL);
  std::string first_error = h ? "" : dlerror();
  if (!h) {
    const char* root = std::getenv("CUDA_PATH");
    std::string path = std::string(root ? root : "/usr/local/cuda") + "/lib64/" + soname;
    h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  }
  if (!h) throw Error(StrCat("cuda: cannot load ", soname, ": ", first_error));
  handles[soname] = h;
  return h;
}

}  // namespace

void* LibrarySymbol(const char* soname, const char* symbol) {
  void* h = Open(soname);
  void* p = dlsym(h, symbol);
  if (!p) throw Error(StrCat("cuda: ", soname, " has no symbol ", symbol));
  return p;
}

}  // namespace cuda
}  // namespace oneflow
