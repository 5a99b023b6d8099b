// cuBLAS, cuDNN and NCCL, opened at first use: importing oneflow or running a CPU job never
// loads them (libcublasLt alone is half a gigabyte), and a machine without them still runs
// everything on CPU. Call a library function through its macro:
//
//   CUBLAS(cublasSgemm_v2)(handle, ...);   // the function of cublas_v2.h, same signature
//   CUDNN(cudnnConvolutionForward)(...);
//   NCCL(ncclAllReduce)(...);
//
// The first call of each function resolves it; a missing library or symbol throws
// "cuda: cannot load libcudnn.so.9: looked in already loaded, $LD_LIBRARY_PATH, <dir>, ...,
// the system's library path, /usr/local/cuda/lib64 (<dlerror>)".
// The loader is plain C++ (dlopen) and built with or without CUDA, so where it looks can be
// tested on any machine: OpenLibrary("libnccl.so.2") then OpenedLibraryPath("libnccl.so.2").
#pragma once

#include <string>
#include <vector>

namespace oneflow {
namespace cuda {

// Folders searched after $LD_LIBRARY_PATH and before the system's library path (ld.so's cache,
// /usr/lib...) and $CUDA_PATH/lib64: the Python package adds pip's nvidia packages here
// (site-packages/nvidia/{cu13,cudnn,nccl}/lib), so a venv's libraries win over a toolkit
// installed system-wide.
void AddLibraryDirs(const std::vector<std::string>& dirs);
// Where a library is looked for, in order, as one line: "already loaded, $LD_LIBRARY_PATH,
// <dir>, ..., the system's library path, <$CUDA_PATH>/lib64".
std::string LibrarySearchPath();

// The lib folders of pip's NVIDIA packages under one site-packages folder, sorted:
// <site_packages>/nvidia/*/lib (nvidia-cublas, nvidia-cudnn-cu13, nvidia-nccl-cu13... put their
// libraries there). Empty where there is no such folder.
std::vector<std::string> PipLibraryDirs(const std::string& site_packages);
// The site-packages folder this library was loaded from (two levels above the file holding
// this code, e.g. <venv>/lib/python3.11/site-packages for .../site-packages/oneflow/x.so):
// its PipLibraryDirs are searched after the added folders, so an embedding program that never
// ran the Python package's search still finds the venv's NVIDIA packages.
std::string OwnSitePackages();

// Opens `soname` once (a copy already loaded, $LD_LIBRARY_PATH, the added folders,
// PipLibraryDirs(OwnSitePackages()), the system's library path, then $CUDA_PATH/lib64 or
// /usr/local/cuda/lib64) and returns its handle; throws "cuda: cannot load ..." naming where it
// looked.
void* OpenLibrary(const char* soname);
// The file OpenLibrary(soname) opened, as the dynamic loader names it (a full path unless it
// was found by name on the loader's path).
std::string OpenedLibraryPath(const char* soname);
// The address of `symbol` in OpenLibrary(soname).
void* LibrarySymbol(const char* soname, const char* symbol);

}  // namespace cuda
}  // namespace oneflow

#define ONEFLOW_CUDA_LIB_FN(soname, fn)                                                 \
  ([]() {                                                                               \
    static const auto p =                                                               \
        reinterpret_cast<decltype(&::fn)>(::oneflow::cuda::LibrarySymbol(soname, #fn)); \
    return p;                                                                           \
  }())
#define CUBLAS(fn) ONEFLOW_CUDA_LIB_FN("libcublas.so.13", fn)
#define CUBLASLT(fn) ONEFLOW_CUDA_LIB_FN("libcublasLt.so.13", fn)
#define CUDNN(fn) ONEFLOW_CUDA_LIB_FN("libcudnn.so.9", fn)
#define NCCL(fn) ONEFLOW_CUDA_LIB_FN("libnccl.so.2", fn)
