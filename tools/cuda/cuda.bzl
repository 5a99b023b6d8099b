"""cuda_library: .cu sources compiled by nvcc, linked like a cc_library.

Each .cu file becomes one object, compiled position-independent for the H100/H200 (sm_90)
and as compute_80 PTX, which the driver compiles for any later GPU (A100 included). Sources
see the workspace root and the toolkit's headers. A .cu file's inputs are itself and the
workspace headers it includes (tools/cuda/cu_headers.bzl, written by
tools/cuda/scan_cu_headers.py), so a header change recompiles only the .cu files that read it;
each compile checks nvcc's own list of what it read (-MD) against that and fails naming any
header missing from it (spawn_strategy=local runs nvcc in the execution root, unsandboxed).
Without CUDA (see cuda_configure.bzl) the library is empty.
"""

load("@local_config_cuda//:defs.bzl", "CUDA_ENABLED", "CUDA_PATH")
load("//tools/cuda:cu_headers.bzl", "INCLUDES")

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

# Fails the compile when nvcc read a workspace file ($$f, from the depfile $@.d) that is not among
# the declared inputs (DECLARED, space-separated paths from the workspace root).
_CHECK_DEPS = (
    "for f in $$(sed -e 's/^[^:]*://' -e 's/\\\\$$//' $@.d | tr ' ' '\\n' | sed -n 's#^\\./##; /^[a-z]/p'); do " +
    "case \" %s %s \" in *\" $$f \"*) ;; *) echo \"nvcc %s: includes $$f, which " +
    "tools/cuda/cu_headers.bzl does not list: run python3 tools/cuda/scan_cu_headers.py\" >&2; " +
    "exit 1;; esac; done"
)

def _headers_of(path):
    """The workspace headers path reaches through its includes (INCLUDES, followed)."""
    seen = {}
    todo = list(INCLUDES[path])
    for _ in range(len(INCLUDES)):  # each round takes the files one include deeper
        if not todo:
            break
        next_todo = []
        for f in todo:
            if f not in seen:
                seen[f] = True
                next_todo += INCLUDES.get(f, [])
        todo = next_todo
    return sorted(seen.keys())

def cuda_library(name, srcs = [], hdrs = [], deps = [], **kwargs):
    objs = []
    if CUDA_ENABLED:
        package = native.package_name()
        for src in srcs:
            path = "%s/%s" % (package, src)
            if path not in INCLUDES:
                fail("cuda_library %s: %s is not in tools/cuda/cu_headers.bzl: run " % (name, path) +
                     "python3 tools/cuda/scan_cu_headers.py")
            stem = src[:-len(".cu")].replace("/", "_")
            obj = "_cuda_objs/%s/%s.pic.o" % (name, stem)
            reached = _headers_of(path)
            for h in reached:
                if not h.startswith(package + "/"):
                    fail("cuda_library %s: %s includes %s, outside package %s" % (name, path, h, package))
            headers = [h[len(package) + 1:] for h in reached]
            declared = " ".join(reached)
            native.genrule(
                name = "%s_%s_nvcc" % (name, stem),
                srcs = [src] + headers,
                outs = [obj],
                cmd = "%s/bin/nvcc %s -MD -MF $@.d -c $(location %s) -o $@ && %s" % (
                    CUDA_PATH,
                    " ".join(NVCC_FLAGS),
                    src,
                    _CHECK_DEPS % (path, declared, src),
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
