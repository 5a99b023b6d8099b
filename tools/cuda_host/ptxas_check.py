#!/usr/bin/env python3
"""ptxas's resource report of our CUDA kernels for sm_90 (what the build ships as SASS), checked.

Compiles the core/kernels/cuda/*.cu files that include a core/kernels/cuda/kernels/*.cuh header
(--all: every .cu) to PTX (nvcc --ptx, device code only: seconds per file, cached by content in
~/.cache/oneflow_cuda_host/ptx) and runs `ptxas -arch=sm_90 -v` on it.

Strict for the kernels of core/kernels/cuda/kernels/*.cuh (every instantiation):
  - no local-memory spill (0 bytes spill stores and loads);
  - registers that let the kernel's block size launch: ceil(regs*32, 256) per warp times the
    warps of a block <= 65536. The block size is __launch_bounds__'s first argument, else a
    `// ptxas_check: block N` line above the kernel, else 1024;
  - static shared memory <= 48 KiB;
  - a kernel marked `// ptxas_check: vector_loads` (a comment line above its __global__) has a
    16-byte global load (ld.global[.nc...].v4.{b,f,u,s}32 or .v2.{b,f,u,s}64) in the PTX of every
    instantiation.
Reported only (they fail nothing): the other kernels' spills, stack frames and registers.

  tools/cuda_host/ptxas_check.py               # check; exit 1 naming what fails
  tools/cuda_host/ptxas_check.py --report      # also list every kernel's figures
  tools/cuda_host/ptxas_check.py --all         # the other .cu files too (reported only)
  tools/cuda_host/ptxas_check.py --self-test   # shows the check failing on broken kernels

Prints "ptxas_check: SKIPPED: <why>" and exits 0 without nvcc/ptxas.
"""
import argparse
import hashlib
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CUDA = os.environ.get("CUDA_PATH", "/usr/local/cuda")
NVCC = os.path.join(CUDA, "bin", "nvcc")
PTXAS = os.path.join(CUDA, "bin", "ptxas")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                     "oneflow_cuda_host", "ptx")
# Device-side flags of tools/cuda/cuda.bzl (the host-compiler ones do not change the PTX).
NVCC_FLAGS = ["-std=c++17", "-O3", "--expt-relaxed-constexpr", "-arch=compute_90",
              "-DONEFLOW_WITH_CUDA", "-I.", "-Wno-deprecated-gpu-targets"]
ARCH = "sm_90"
REGS_PER_SM, SMEM_STATIC_MAX = 65536, 48 * 1024
KERNEL_DIR = "core/kernels/cuda/kernels"


# Spills known and not yet fixed (float64 / int64 instantiations of the row kernels, 4-28 bytes):
# printed on every run, not failed; any other spill fails. Fix one, then delete its entry.
KNOWN_SPILLS = {
    "oneflow::cuda::embedding::GradRunsKernel<double>",
    "oneflow::cuda::embedding::GradRunsKernel<long>",
    "oneflow::cuda::norm::NormWarpKernel<double, 1, 32>",
    "oneflow::cuda::softmax::SoftmaxGradWarpKernel<double, 2, 2>",
}


def header_constants(d):
    """{name: int} of the `constexpr int NAME = <literal>;` lines of the kernel headers, so
    __launch_bounds__(row::kWarpBlockThreads) reads as its value."""
    out = {}
    for header in sorted(os.listdir(d)):
        if header.endswith(".cuh"):
            for m in re.finditer(r"constexpr\s+int\s+(\w+)\s*=\s*(\d+)\s*;",
                                 open(os.path.join(d, header)).read()):
                out[m.group(1)] = int(m.group(2))
    return out


def header_kernels(root):
    """{kernel name: {"file", "block", "vector_loads"}} from core/kernels/cuda/kernels/*.cuh."""
    out = {}
    d = os.path.join(root, KERNEL_DIR)
    if not os.path.isdir(d):
        return out
    constants = header_constants(d)
    for header in sorted(os.listdir(d)):
        if not header.endswith(".cuh"):
            continue
        path = os.path.join(d, header)
        # Comments dropped (a usage example is no kernel), except the marks.
        text = "\n".join("" if l.lstrip().startswith("//") and "ptxas_check:" not in l
                         else l.split("//")[0] if "ptxas_check:" not in l else l
                         for l in open(path).read().splitlines())
        marks = []
        for m in re.finditer(r"//\s*ptxas_check:\s*([^\n]*)|__global__", text):
            if m.group(1) is not None:
                marks.append(m.group(1).strip())
                continue
            window = text[m.start():m.start() + 600]
            lb = re.search(r"__launch_bounds__\s*\(\s*(?:\w+::)*(\w+)[^)]*\)", window)
            decl = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", window)
            name = re.match(r"__global__[^(;{]*?\b(\w+)\s*\(", decl)
            if not name:
                continue
            kernel = name.group(1)
            info = {"file": os.path.join(KERNEL_DIR, header), "block": 1024, "vector_loads": False}
            for mark in marks:
                if mark == "vector_loads":
                    info["vector_loads"] = True
                elif re.fullmatch(r"block\s+\d+", mark):
                    info["block"] = int(mark.split()[1])
                else:
                    sys.exit(f"ptxas_check: {path}: unknown mark '// ptxas_check: {mark}' before "
                             f"{kernel} (known: vector_loads, block N)")
            if lb and (lb.group(1).isdigit() or lb.group(1) in constants):
                info["block"] = int(lb.group(1)) if lb.group(1).isdigit() else constants[lb.group(1)]
            marks = []
            out[kernel] = info
    return out


def cache_key(root, src):
    h = hashlib.sha1()
    h.update(" ".join(NVCC_FLAGS).encode())
    h.update(open(NVCC, "rb").read(1 << 16))
    for base, _, files in os.walk(os.path.join(root, "core")):
        for f in sorted(files):
            if f.endswith((".h", ".cuh")):
                h.update(f.encode())
                h.update(open(os.path.join(base, f), "rb").read())
    h.update(open(src, "rb").read())
    return h.hexdigest()[:16]


def compile_ptx(root, src, out_dir=None):
    """PTX text of src (cached)."""
    os.makedirs(out_dir or CACHE, exist_ok=True)
    ptx = os.path.join(out_dir or CACHE, f"{os.path.basename(src)}.{cache_key(root, src)}.ptx")
    if not os.path.exists(ptx):
        tmp = ptx + f".tmp{os.getpid()}"
        r = subprocess.run([NVCC, "--ptx", *NVCC_FLAGS, "-o", tmp, src], cwd=root,
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"ptxas_check: FAILED: nvcc cannot compile {os.path.relpath(src, root)}:\n"
                     f"{r.stdout}{r.stderr}")
        os.replace(tmp, ptx)
    return ptx


def demangle(names):
    if not names:
        return {}
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                       check=True)
    return dict(zip(names, r.stdout.splitlines()))


def base_name(demangled):
    """oneflow::cuda::Foo<float, 4>(float const*, ...) -> Foo."""
    s = demangled.split("(")[0]
    depth, cut = 0, len(s)
    for i in range(len(s) - 1, -1, -1):  # drop a trailing template argument list
        if s[i] == ">":
            depth += 1
        elif s[i] == "<":
            depth -= 1
            if depth == 0:
                cut = i
                break
        elif depth == 0:
            break
    return s[:cut].split("::")[-1].strip()


def ptxas_usage(ptx):
    """{mangled: {"regs", "spill_st", "spill_ld", "stack", "smem"}} from ptxas -v."""
    r = subprocess.run([PTXAS, f"-arch={ARCH}", "-v", ptx, "-o", os.devnull],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ptxas_check: ptxas failed on {ptx}:\n{r.stderr}")
    out, cur = {}, None
    for line in r.stderr.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            cur = out.setdefault(m.group(1), {"regs": 0, "spill_st": 0, "spill_ld": 0,
                                              "stack": 0, "smem": 0})
            continue
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = out.setdefault(m.group(1), {"regs": 0, "spill_st": 0, "spill_ld": 0,
                                              "stack": 0, "smem": 0})
            cur["entry"] = True
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m:
            cur["stack"], cur["spill_st"], cur["spill_ld"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur["regs"] = int(m.group(1))
            m2 = re.search(r"(\d+) bytes smem", line)
            cur["smem"] = int(m2.group(1)) if m2 else 0
    return {k: v for k, v in out.items() if v.get("entry")}


def entry_bodies(ptx_text):
    """{mangled entry: its PTX body}."""
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(", ptx_text):
        start = ptx_text.find("{", m.end())
        depth, i = 0, start
        while i < len(ptx_text):
            if ptx_text[i] == "{":
                depth += 1
            elif ptx_text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        out[m.group(1)] = ptx_text[start:i + 1]
    return out


VEC16 = re.compile(r"\bld\.global(?:\.[\w:]+)*\.(?:v4\.[bfus]32|v2\.[bfus]64|v8\.[bfus]32)\b")


def regs_fit(regs, threads):
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(max(regs, 1) * 32 / 256) * 256
    return warps * per_warp <= REGS_PER_SM, warps * per_warp


def check(root, sources, strict, report, out_dir=None, require_all=True):
    """Returns the list of failures (strings); prints the report."""
    failures, rows, seen = [], [], set()
    for src in sources:
        ptx = compile_ptx(root, src, out_dir)
        usage = ptxas_usage(ptx)
        bodies = entry_bodies(open(ptx).read())
        names = demangle(sorted(usage))
        for mangled, u in sorted(usage.items(), key=lambda kv: names[kv[0]]):
            base = base_name(names[mangled])
            info = strict.get(base)
            where = os.path.relpath(src, root)
            rows.append((where, names[mangled], u, info is not None))
            if info is None:
                continue
            seen.add(base)
            what = f"{names[mangled]} ({where}, kernel of {info['file']})"
            if (u["spill_st"] or u["spill_ld"]) and names[mangled].split("(")[0].replace(
                    "void ", "", 1) in KNOWN_SPILLS:
                print(f"ptxas_check: known spill, not yet fixed: {what}: {u['spill_st']} bytes "
                      f"stored, {u['spill_ld']} loaded")
            elif u["spill_st"] or u["spill_ld"]:
                failures.append(f"{what}: spills {u['spill_st']} bytes stored, {u['spill_ld']} "
                                f"loaded to local memory")
            ok, need = regs_fit(u["regs"], info["block"])
            if not ok:
                failures.append(f"{what}: {u['regs']} registers x {info['block']} threads need "
                                f"{need} of the SM's {REGS_PER_SM}: lower the block size "
                                f"(__launch_bounds__ / '// ptxas_check: block N') or registers")
            if u["smem"] > SMEM_STATIC_MAX:
                failures.append(f"{what}: {u['smem']} bytes of static shared memory, at most "
                                f"{SMEM_STATIC_MAX}")
            if info["vector_loads"] and not VEC16.search(bodies.get(mangled, "")):
                failures.append(f"{what}: marked vector_loads but its PTX has no 16-byte global "
                                f"load (ld.global.v4.*32 / .v2.*64)")
    for base, info in sorted(strict.items()):
        if require_all and base not in seen:
            failures.append(f"{base} ({info['file']}): instantiated by none of the compiled .cu "
                            f"files, so its resources are unchecked")
    spilling = [r for r in rows if not r[3] and (r[2]["spill_st"] or r[2]["spill_ld"])]
    if report or spilling:
        print(f"ptxas_check: {len(spilling)} kernel(s) outside {KERNEL_DIR} spill (reported, "
              f"not failed):" if not report else "ptxas_check: every kernel (sm_90):")
        for where, name, u, is_strict in rows:
            if report or (not is_strict and (u["spill_st"] or u["spill_ld"])):
                print(f"  {'strict ' if is_strict else 'report '} {where}: {name[:110]}: "
                      f"{u['regs']} regs, {u['smem']} B smem, stack {u['stack']} B, spill "
                      f"{u['spill_st']}/{u['spill_ld']} B")
    return failures, rows


SELF_TEST_HEADER = r"""
#pragma once
// ptxas_check: vector_loads
__global__ void __launch_bounds__(128) CopyV4(const float4* x, float4* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
// ptxas_check: vector_loads
__global__ void CopyScalar(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
// ptxas_check: block 1024
__global__ void ManyRegs(const float* x, float* y, int n) {
  float acc[64];
  #pragma unroll
  for (int k = 0; k < 64; ++k) acc[k] = x[threadIdx.x + k * n];
  float s = 0;
  #pragma unroll
  for (int k = 0; k < 64; ++k) s += acc[k] * acc[(k * 7) % 64];
  #pragma unroll
  for (int k = 0; k < 64; ++k) y[threadIdx.x + k * n] = acc[k] + s;
}
__global__ void __launch_bounds__(1024, 2) Spills(const float* x, float* y, int n) {
  float acc[96];
  #pragma unroll
  for (int k = 0; k < 96; ++k) acc[k] = x[threadIdx.x + k * n];
  float s = 0;
  #pragma unroll
  for (int k = 0; k < 96; ++k) s += acc[k] * acc[(k * 5) % 96];
  #pragma unroll
  for (int k = 0; k < 96; ++k) y[threadIdx.x + k * n] = acc[k] * s;
}
"""


def self_test():
    """The check must fail on a scalar copy marked vector_loads, on 1024 threads of a kernel with
    many registers, and on a spilling kernel; and pass the float4 copy."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, KERNEL_DIR))
        with open(os.path.join(d, KERNEL_DIR, "selftest.cuh"), "w") as f:
            f.write(SELF_TEST_HEADER)
        src = os.path.join(d, "selftest.cu")
        with open(src, "w") as f:
            f.write('#include "core/kernels/cuda/kernels/selftest.cuh"\n')
        os.makedirs(os.path.join(d, "core"), exist_ok=True)
        strict = header_kernels(d)
        assert set(strict) == {"CopyV4", "CopyScalar", "ManyRegs", "Spills"}, strict
        assert strict["CopyV4"]["block"] == 128 and strict["CopyV4"]["vector_loads"], strict
        assert strict["ManyRegs"]["block"] == 1024 and not strict["ManyRegs"]["vector_loads"]
        failures, rows = check(d, [src], strict, report=True, out_dir=d)
        by = {base_name(r[1]): r[2] for r in rows}
        want = {
            "CopyScalar": "has no 16-byte global load",
            "Spills": "spills",
        }
        if by["ManyRegs"]["regs"] > 64:
            want["ManyRegs"] = "registers x 1024 threads"
        bad = []
        for kernel, text in want.items():
            if not any(f.startswith(kernel) and text in f for f in failures):
                bad.append(f"{kernel}: expected a failure with '{text}'")
        if any(f.startswith("CopyV4") for f in failures):
            bad.append("CopyV4 (float4 copy) failed: " + "; ".join(failures))
        for f in failures:
            print(f"ptxas_check: self-test: caught as it must: {f}")
        if bad:
            sys.exit("ptxas_check: self-test FAILED: " + "; ".join(bad))
        print("ptxas_check: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", action="store_true", help="list every kernel's figures")
    ap.add_argument("--self-test", action="store_true", help="show the check failing")
    ap.add_argument("--all", action="store_true", help="compile every core/kernels/cuda/*.cu")
    ap.add_argument("sources", nargs="*", help="the .cu files (default: core/kernels/cuda/*.cu)")
    args = ap.parse_args()
    for tool in (NVCC, PTXAS):
        if not os.access(tool, os.X_OK):
            print(f"ptxas_check: SKIPPED: no {tool} (the CUDA toolkit is not installed)")
            return 0
    if args.self_test:
        self_test()
        return 0
    d = os.path.join(ROOT, "core/kernels/cuda")
    sources = [os.path.abspath(s) for s in args.sources] or sorted(
        os.path.join(d, f) for f in os.listdir(d) if f.endswith(".cu") and (
            args.all or KERNEL_DIR + "/" in open(os.path.join(d, f)).read()))
    strict = header_kernels(ROOT)
    # Named sources check what they instantiate; the default set must instantiate every kernel.
    failures, rows = check(ROOT, sources, strict, args.report, require_all=not args.sources)
    n_strict = sum(1 for r in rows if r[3])
    if failures:
        print("ptxas_check: FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    print(f"ptxas_check: {len(rows)} kernel instantiations in {len(sources)} files for {ARCH}; "
          f"{n_strict} of {KERNEL_DIR}/*.cuh ({len(strict)} kernels) without spills, within "
          f"the register file at their block size, vector loads where marked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
