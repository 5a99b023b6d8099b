#include "core/kernels/cuda/cuda_libs.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/error.h"

namespace oneflow {
namespace cuda {

namespace {

std::mutex& Mutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::string>& ExtraDirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

std::string ToolkitDir() {
  const char* root = std::getenv("CUDA_PATH");
  return std::string(root && *root ? root : "/usr/local/cuda") + "/lib64";
}

// REQUIRES: Mutex() held.
std::string SearchPathLocked() {
  std::string out = "the loader's path";
  for (const std::string& d : ExtraDirs()) out += ", " + d;
  return out + ", " + ToolkitDir();
}

}  // namespace

void AddLibraryDirs(const std::vector<std::string>& dirs) {
  std::lock_guard<std::mutex> lock(Mutex());
  for (const std::string& d : dirs) {
    auto& have = ExtraDirs();
    if (std::find(have.begin(), have.end(), d) == have.end()) have.push_back(d);
  }
}

std::string LibrarySearchPath() {
  std::lock_guard<std::mutex> lock(Mutex());
  return SearchPathLocked();
}

void* OpenLibrary(const char* soname) {
  static std::map<std::string, void*> handles;
  std::lock_guard<std::mutex> lock(Mutex());
  auto it = handles.find(soname);
  if (it != handles.end()) return it->second;
  // By name first: a copy already loaded (by PyTorch, say) or one on LD_LIBRARY_PATH wins.
  void* h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
  std::string errors = h ? "" : dlerror();
  std::vector<std::string> dirs = ExtraDirs();
  dirs.push_back(ToolkitDir());
  for (size_t i = 0; !h && i < dirs.size(); ++i) {
    const std::string path = dirs[i] + "/" + soname;
    h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    // A file that is there but does not load (a dependency missing) says why.
    if (!h && access(path.c_str(), F_OK) == 0) errors += StrCat("; ", dlerror());
  }
  if (!h) {
    throw Error(StrCat("cuda: cannot load ", soname, ": looked in ", SearchPathLocked(), " (",
                       errors, ")"));
  }
  handles[soname] = h;
  return h;
}

void* LibrarySymbol(const char* soname, const char* symbol) {
  void* h = OpenLibrary(soname);
  void* p = dlsym(h, symbol);
  if (!p) throw Error(StrCat("cuda: ", soname, " has no symbol ", symbol));
  return p;
}

}  // namespace cuda
}  // namespace oneflow
