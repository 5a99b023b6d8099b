"""cuda_library: .cu sources compiled by nvcc, linked like a cc_library.

Each .cu file becomes one object, compiled position-independent for the H100/H200 (sm_90)
and as compute_80 PTX, which the driver compiles for any later GPU (A100 included). Sources
see the workspace root and the toolkit's headers; every header they include must be listed in
hdrs or come from deps' sources (spawn_strategy=local runs nvcc in the execution root).
Without CUDA (see cuda_configure.bzl) the library is empty.
"""

load("@local_config_cuda//:defs.bzl", "CUDA_ENABLED", "CUDA_PATH")

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    # Source lines in the device code (no effect on its speed): compute-sanitizer, cuda-gdb and
    # Nsight name the .cu line of a fault.
    "-lineinfo",
    "--expt-relaxed-constexpr",
    "-Xcompiler=-fPIC,-O3,-march=x86-64-v3",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_80,code=compute_80",
    "-DONEFLOW_WITH_CUDA",
    "-I.",
    "-Wno-deprecated-gpu-targets",
]

def cuda_library(name, srcs = [], hdrs = [], deps = [], **kwargs):
    objs = []
    if CUDA_ENABLED:
        for src in srcs:
            stem = src[:-len(".cu")].replace("/", "_")
            obj = "_cuda_objs/%s/%s.pic.o" % (name, stem)
            native.genrule(
                name = "%s_%s_nvcc" % (name, stem),
                srcs = depset([src] + hdrs + native.glob(["**/*.h", "**/*.cuh"])).to_list(),
                outs = [obj],
                cmd = "%s/bin/nvcc %s -c $(location %s) -o $@" % (
                    CUDA_PATH,
                    " ".join(NVCC_FLAGS),
                    src,
                ),
                message = "nvcc %s" % src,
            )
            objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + (["@local_config_cuda//:cuda"] if CUDA_ENABLED else []),
        alwayslink = True,
        **kwargs
    )
