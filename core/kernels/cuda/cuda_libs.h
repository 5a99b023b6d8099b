// cuBLAS, cuDNN and NCCL, opened at first use: importing oneflow or running a CPU job never
// loads them (libcublasLt alone is half a gigabyte), and a machine without them still runs
// everything on CPU. Call a library function through its macro:
//
//   CUBLAS(cublasSgemm_v2)(handle, ...);   // the function of cublas_v2.h, same signature
//   CUDNN(cudnnConvolutionForward)(...);
//   NCCL(ncclAllReduce)(...);
//
// The first call of each function resolves it; a missing library or symbol throws
// "cuda: cannot load libcudnn.so.9: <dlerror>".
#pragma once

namespace oneflow {
namespace cuda {

// dlopen's `soname` (searched by the dynamic loader, then under the toolkit's lib64) once and
// returns the address of `symbol` in it.
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
