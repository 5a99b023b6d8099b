"""Finds the CUDA toolkit (nvcc, cuDNN, NCCL) and writes @local_config_cuda.

ONEFLOW_CUDA=0 leaves CUDA out, ONEFLOW_CUDA=1 requires it (the build fails with the missing
file), unset detects it: CUDA is in when $CUDA_PATH (default /usr/local/cuda) has nvcc, the
CUDA runtime, cuBLAS, cuDNN and NCCL headers and the static CUDA runtime. The repository
exposes CUDA_ENABLED and CUDA_PATH (defs.bzl) and //:cuda, the headers and the static runtime.
"""

_NEEDED = [
    "bin/nvcc",
    "include/cuda_runtime.h",
    "include/cublas_v2.h",
    "include/cudnn.h",
    "include/nccl.h",
    "lib64/libcudart_static.a",
]

def _cuda_configure_impl(ctx):
    mode = ctx.os.environ.get("ONEFLOW_CUDA", "auto")
    path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    missing = [f for f in _NEEDED if not ctx.path(path + "/" + f).exists]
    if mode == "1" and missing:
        fail("ONEFLOW_CUDA=1 but %s lacks %s" % (path, ", ".join(missing)))
    enabled = mode != "0" and not missing
    ctx.file("defs.bzl", "CUDA_ENABLED = %s\nCUDA_PATH = %r\n" % (enabled, path))
    if enabled:
        ctx.symlink(path + "/include", "include")
        ctx.symlink(path + "/lib64/libcudart_static.a", "libcudart_static.a")
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

# CUDA headers and the static CUDA runtime: linking it needs no GPU and no driver at build
# time, and a process without a driver still starts (cudaGetDeviceCount reports the error).
# cuBLAS, cuDNN and NCCL are opened at first use (core/kernels/cuda/cuda_libs.cc).
cc_library(
    name = "cuda",
    hdrs = glob(["include/**"]),
    includes = ["include"],
    srcs = ["libcudart_static.a"],
    linkopts = ["-ldl", "-lrt", "-lpthread"],
)
""")
    else:
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

# Built without CUDA (%s).
cc_library(name = "cuda")
""" % ("ONEFLOW_CUDA=0" if mode == "0" else "missing under %s: %s" % (path, ", ".join(missing))))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["ONEFLOW_CUDA", "CUDA_PATH"],
    local = True,
)
