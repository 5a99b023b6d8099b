#include "core/kernels/cuda/cuda_libs.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
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

std::map<std::string, void*>& Handles() {
  static std::map<std::string, void*> handles;
  return handles;
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The added folders, then the pip folders next to this library.
// REQUIRES: Mutex() held.
std::vector<std::string> SearchDirsLocked() {
  std::vector<std::string> dirs = ExtraDirs();
  for (const std::string& d : PipLibraryDirs(OwnSitePackages())) {
    if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  }
  return dirs;
}

std::string ToolkitDir() {
  const char* root = std::getenv("CUDA_PATH");
  return std::string(root && *root ? root : "/usr/local/cuda") + "/lib64";
}

// The folders of $LD_LIBRARY_PATH, in order.
std::vector<std::string> LdLibraryPathDirs() {
  std::vector<std::string> dirs;
  const char* env = std::getenv("LD_LIBRARY_PATH");
  std::string rest = env ? env : "";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string d = rest.substr(0, colon);
    if (!d.empty()) dirs.push_back(d);
    rest = colon == std::string::npos ? "" : rest.substr(colon + 1);
  }
  return dirs;
}

// REQUIRES: Mutex() held.
std::string SearchPathLocked() {
  std::string out = "already loaded, $LD_LIBRARY_PATH";
  for (const std::string& d : SearchDirsLocked()) out += ", " + d;
  return out + ", the system's library path, " + ToolkitDir();
}

}  // namespace

std::vector<std::string> PipLibraryDirs(const std::string& site_packages) {
  std::vector<std::string> dirs;
  const std::string nvidia = site_packages + "/nvidia";
  DIR* d = opendir(nvidia.c_str());
  if (!d) return dirs;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string lib = nvidia + "/" + name + "/lib";
    DIR* l = opendir(lib.c_str());
    if (!l) continue;
    closedir(l);
    dirs.push_back(lib);
  }
  closedir(d);
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::string OwnSitePackages() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&PipLibraryDirs), &info) || !info.dli_fname) return "";
  char* real = realpath(info.dli_fname, nullptr);
  if (!real) return "";
  const std::string path = real;
  free(real);
  return Dirname(Dirname(path));
}

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
  std::map<std::string, void*>& handles = Handles();
  std::lock_guard<std::mutex> lock(Mutex());
  auto it = handles.find(soname);
  if (it != handles.end()) return it->second;
  // A copy already loaded (by PyTorch, say) wins, then $LD_LIBRARY_PATH (the user's choice),
  // then the added and pip folders (this Python's packages: before a system-wide toolkit the
  // loader's cache may know), then the loader's own search by name, then $CUDA_PATH/lib64.
  void* h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  std::string errors;
  auto try_dir = [&](const std::string& dir) {
    const std::string path = dir + "/" + soname;
    h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    // A file that is there but does not load (a dependency missing) says why.
    if (!h && access(path.c_str(), F_OK) == 0) errors += StrCat("; ", dlerror());
  };
  for (const std::string& d : LdLibraryPathDirs()) {
    if (!h) try_dir(d);
  }
  for (const std::string& d : SearchDirsLocked()) {
    if (!h) try_dir(d);
  }
  if (!h) {
    h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
    if (!h) errors += StrCat("; ", dlerror());
  }
  if (!h) try_dir(ToolkitDir());
  if (!h) {
    throw Error(StrCat("cuda: cannot load ", soname, ": looked in ", SearchPathLocked(), " (",
                       errors.substr(errors.empty() ? 0 : 2), ")"));
  }
  handles[soname] = h;
  return h;
}

std::string OpenedLibraryPath(const char* soname) {
  void* h = OpenLibrary(soname);
  link_map* map = nullptr;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) {
    throw Error(StrCat("cuda: cannot tell where ", soname, " was loaded from: ", dlerror()));
  }
  return map->l_name;
}

void* LibrarySymbol(const char* soname, const char* symbol) {
  void* h = OpenLibrary(soname);
  void* p = dlsym(h, symbol);
  if (!p) throw Error(StrCat("cuda: ", soname, " has no symbol ", symbol));
  return p;
}

}  // namespace cuda
}  // namespace oneflow
