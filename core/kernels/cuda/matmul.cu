// CUDA kernels of matmul, linear and linear_grad_weight_bias (core/ops/matmul.cc) on cuBLAS and
// cuBLASLt: linear's bias is cuBLASLt's bias epilogue (added as the GEMM writes its output), and
// the bias gradient of its backward is the bias-gradient epilogue of the weight gradient's GEMM
// (CUBLASLT_EPILOGUE_BGRADB: the column sums of g, read once by the GEMM itself). Where cuBLASLt
// offers no algorithm for a case (double, an alignment or layout its epilogues do not take),
// the bias is written first and the GEMM adds to it (beta = 1), and the bias gradient is a sum.
//
// cuBLAS is column-major: a row-major (m, n) matrix with leading dimension ld is, read in place,
// its (n, m) transpose. So row-major C = A B is computed as the column-major C^T = B^T A^T with
// the operands swapped and no copy. Transposed views (x @ w.T, the gradients of matmul) become
// transpose flags as on CPU; other non-contiguous matrices are copied first. Broadcast batch dims
// go to one strided-batched call where their strides allow it, else to a host loop of them.
// Integer matmul (no cuBLAS for it) runs a plain kernel.

#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/caching_allocator.h"
#include "core/functional.h"
#include "core/kernels/cuda/cuda_dispatch.h"
#include "core/kernels/cuda/cuda_libs.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/op_registry.h"

namespace oneflow {

namespace {

using cuda::DevT;

void CheckBlas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(StrCat("cuda: ", what, " failed: ", CUBLAS(cublasGetStatusString)(status), " (",
                     static_cast<int>(status), ")"));
}

// ---------------------------------------------------------------- the cuBLAS handle

// cuBLAS's recommended workspace for Hopper (it asks for 4 MiB on earlier GPUs).
constexpr int64_t kBlasWorkspaceBytes = int64_t(32) << 20;

// A device's cuBLAS or cuBLASLt workspace, from the caching allocator's default pool: the first
// call may be inside a CUDA graph capture, and the workspace outlives that graph.
Tensor MakeWorkspace(const Device& device) {
  CachingAllocator::DefaultPoolScope eager(GetAllocator(DeviceType::kCUDA), device.index);
  return Tensor::Empty(Shape({kBlasWorkspaceBytes}), DType::kUInt8, device);
}

// The cuBLAS handle of a device with its workspace (cuda::PerDevice).
struct BlasContext {
  std::mutex mu;  // a handle's stream, workspace and math mode are set per call
  cublasHandle_t handle = nullptr;
  Tensor workspace;  // from the caching allocator; only ever used on the device's stream
};

// Runs f(handle) with the device's handle bound to its compute stream and workspace in `math`
// mode, holding the handle's lock.
template <typename F>
void WithBlas(const Device& device, cublasMath_t math, F&& f) {
  cudaStream_t stream = cuda::StreamFor(device);  // checks the device and makes it current
  BlasContext& ctx = cuda::PerDevice<BlasContext>(device.index);
  std::lock_guard<std::mutex> lock(ctx.mu);
  if (!ctx.handle) {
    ctx.workspace = MakeWorkspace(device);
    CheckBlas(CUBLAS(cublasCreate_v2)(&ctx.handle), "cublasCreate");
  }
  CheckBlas(CUBLAS(cublasSetStream_v2)(ctx.handle, stream), "cublasSetStream");
  // After the stream: setting a stream resets the handle to cuBLAS's own workspace pool.
  CheckBlas(CUBLAS(cublasSetWorkspace_v2)(ctx.handle, ctx.workspace.raw_data(),
                                          static_cast<size_t>(kBlasWorkspaceBytes)),
            "cublasSetWorkspace");
  CheckBlas(CUBLAS(cublasSetMathMode)(ctx.handle, math), "cublasSetMathMode");
  f(ctx.handle);
}

// ---------------------------------------------------------------- gemm

// One column-major strided-batched gemm: C_i = op(A_i) op(B_i) + beta C_i for i < batch, with
// op(A) m x k and op(B) k x n.
struct Gemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  bool accumulate = false;  // beta = 1 (C holds the bias rows) rather than 0
};

// T is the device type: float, double, __half or __nv_bfloat16.
template <typename T>
void RunGemm(const Device& device, const Gemm& g) {
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  if constexpr (std::is_same_v<T, float>) {
    type = CUDA_R_32F;
    if (cuda::AllowTf32()) {
      compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      math = CUBLAS_TF32_TENSOR_OP_MATH;
    }
  } else if constexpr (std::is_same_v<T, double>) {
    type = CUDA_R_64F;
    compute = CUBLAS_COMPUTE_64F;
  } else if constexpr (std::is_same_v<T, __half>) {
    type = CUDA_R_16F;  // accumulates in float
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "RunGemm: unsupported type");
    type = CUDA_R_16BF;
  }
  // alpha and beta have the compute type's precision.
  using Scalar = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Scalar alpha = 1, beta = g.accumulate ? 1 : 0;
  auto op = [](bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
  WithBlas(device, math, [&](cublasHandle_t handle) {
    CheckBlas(CUBLAS(cublasGemmStridedBatchedEx_64)(
                  handle, op(g.trans_a), op(g.trans_b), g.m, g.n, g.k, &alpha, g.a, type, g.lda,
                  g.stride_a, g.b, type, g.ldb, g.stride_b, &beta, g.c, type, g.ldc, g.stride_c,
                  g.batch, compute, CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
  });
}

// How gemm can read the last two dims of t (as in the CPU kernel): row-major with a leading
// dimension, maybe transposed; ld = 0 when neither stride is 1 and t needs a copy.
struct MatView {
  bool trans = false;
  int64_t ld = 0;
};
MatView ViewOf(const Tensor& t) {
  const int64_t nd = t.ndim();
  const int64_t rows = t.shape()[nd - 2], cols = t.shape()[nd - 1];
  const int64_t rs = t.strides()[nd - 2], cs = t.strides()[nd - 1];
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(cols, 1)) return {false, rs};
  if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(rows, 1)) return {true, cs};
  return {};
}

// t's strides over the output's batch dims `batch`: 0 on dims t lacks or broadcasts.
std::vector<int64_t> BatchStrides(const Tensor& t, const Shape& batch) {
  std::vector<int64_t> s(batch.ndim(), 0);
  const int64_t lead = batch.ndim() - (t.ndim() - 2);
  for (int64_t i = 0; i < t.ndim() - 2; ++i) {
    s[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return s;
}

// Whether dims [from, end) of `batch`, flattened row-major, step through memory by one fixed
// stride (stored in *step; 0 for a broadcast operand): what a strided-batched gemm can take.
bool UniformStride(const Shape& batch, const std::vector<int64_t>& strides, int64_t from,
                   int64_t* step) {
  bool known = false;
  int64_t unit = 0, count = 1;  // count: elements of the dims after d
  for (int64_t d = batch.ndim() - 1; d >= from; --d) {
    if (batch[d] != 1) {
      if (!known) {
        unit = strides[d];  // every later dim has size 1, so count is 1 here
        known = true;
      } else if (strides[d] != unit * count) {
        return false;
      }
    }
    count *= batch[d];
  }
  *step = unit;
  return true;
}

// ---------------------------------------------------------------- integer matmul

// c (batch, m, n) contiguous; a and b addressed by batch geometry plus row/column strides.
template <typename T>
__global__ void IntegerMatmulKernel(int64_t total, int64_t m, int64_t n, int64_t k, const T* a,
                                    cuda::Geometry ga, int64_t a_rs, int64_t a_cs, const T* b,
                                    cuda::Geometry gb, int64_t b_rs, int64_t b_cs, T* c) {
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t bi = i / (m * n), r = i % (m * n);
    const int64_t row = r / n, col = r % n;
    const T* pa = a + cuda::OffsetOf(ga, bi) + row * a_rs;
    const T* pb = b + cuda::OffsetOf(gb, bi) + col * b_cs;
    T s = 0;
    for (int64_t p = 0; p < k; ++p) s += pa[p * a_cs] * pb[p * b_rs];
    c[i] = s;
  }
}

template <typename T>
void IntegerMatmul(const Tensor& a, const Tensor& b, const Tensor& o, cudaStream_t stream) {
  const Shape& os = o.shape();
  const int64_t nd = os.ndim();
  Shape batch(std::vector<int64_t>(os.dims().begin(), os.dims().end() - 2));
  if (batch.ndim() > cuda::kMaxDims) {
    throw Error(StrCat("matmul: integer tensors on CUDA take at most ", cuda::kMaxDims,
                       " batch dims, got output shape ", os));
  }
  auto geometry = [&](const Tensor& t) {
    cuda::Geometry g;
    g.ndim = static_cast<int>(batch.ndim());
    std::vector<int64_t> s = BatchStrides(t, batch);
    for (int d = 0; d < g.ndim; ++d) {
      g.sizes[d] = batch[d];
      g.strides[d] = s[d];
    }
    return g;
  };
  const int64_t m = os[nd - 2], n = os[nd - 1], k = a.shape()[a.ndim() - 1];
  const int64_t ad = a.ndim(), bd = b.ndim();
  IntegerMatmulKernel<T><<<cuda::Blocks(o.numel()), cuda::kThreads, 0, stream>>>(
      o.numel(), m, n, k, a.data<T>(), geometry(a), a.strides()[ad - 2], a.strides()[ad - 1],
      b.data<T>(), geometry(b), b.strides()[bd - 2], b.strides()[bd - 1], o.data<T>());
  ONEFLOW_CUDA_CHECK(cudaGetLastError());
}

// ---------------------------------------------------------------- matmul

// o = a @ b for floating a and b, o contiguous and non-empty, k > 0.
template <typename T>
void FloatingMatmul(Tensor a, Tensor b, const Tensor& o) {
  if (!ViewOf(a).ld) a = fn::contiguous(a);
  if (!ViewOf(b).ld) b = fn::contiguous(b);
  const MatView va = ViewOf(a), vb = ViewOf(b);
  const Shape& os = o.shape();
  const int64_t nd = os.ndim();
  const int64_t m = os[nd - 2], n = os[nd - 1], k = a.shape()[a.ndim() - 1];
  Shape batch(std::vector<int64_t>(os.dims().begin(), os.dims().end() - 2));
  const std::vector<int64_t> sa = BatchStrides(a, batch), sb = BatchStrides(b, batch);
  // Batch dims [split, end) go to one strided-batched call, dims [0, split) to a host loop
  // (only when broadcasting interleaves the operands' batch strides).
  int64_t split = batch.ndim(), step_a = 0, step_b = 0;
  while (split > 0) {
    int64_t ta, tb;
    if (!UniformStride(batch, sa, split - 1, &ta) || !UniformStride(batch, sb, split - 1, &tb)) {
      break;
    }
    --split;
    step_a = ta;
    step_b = tb;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < batch.ndim(); ++d) (d < split ? outer : inner) *= batch[d];
  const DevT<T>* pa = cuda::Ptr<T>(a);
  const DevT<T>* pb = cuda::Ptr<T>(b);
  DevT<T>* po = cuda::Ptr<T>(o);
  for (int64_t bo = 0; bo < outer; ++bo) {
    int64_t oa = 0, ob = 0, rem = bo;
    for (int64_t d = split - 1; d >= 0; --d) {
      const int64_t i = rem % batch[d];
      rem /= batch[d];
      oa += i * sa[d];
      ob += i * sb[d];
    }
    // Column-major C^T (n, m) = B^T (n, k) A^T (k, m).
    Gemm g;
    g.trans_a = vb.trans;
    g.trans_b = va.trans;
    g.m = n, g.n = m, g.k = k;
    g.a = pb + ob, g.lda = vb.ld, g.stride_a = step_b;
    g.b = pa + oa, g.ldb = va.ld, g.stride_b = step_a;
    g.c = po + bo * inner * m * n, g.ldc = n, g.stride_c = m * n;
    g.batch = inner;
    RunGemm<DevT<T>>(o.device(), g);
  }
}

std::vector<Tensor> MatmulCuda(const std::vector<Tensor>& in, const Attrs&,
                               const std::vector<TensorMeta>& out) {
  const Tensor &a = in[0], &b = in[1];
  Tensor o = Tensor::Empty(out[0]);
  if (o.numel() == 0) return {o};
  cudaStream_t stream = cuda::StreamFor(o.device());
  if (a.shape()[a.ndim() - 1] == 0) {
    ONEFLOW_CUDA_CHECK(
        cudaMemsetAsync(o.raw_data(), 0, o.numel() * SizeOf(o.dtype()), stream));  // zero bits
    return {o};
  }
  DispatchWithHalf(a.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("matmul: bool tensors are not supported; convert to a number type first");
    } else if constexpr (std::is_integral_v<T>) {
      IntegerMatmul<T>(a, b, o, stream);
    } else {
      FloatingMatmul<T>(a, b, o);
    }
  });
  return {o};
}

// ---------------------------------------------------------------- cuBLASLt

// Descriptors destroyed with their owner.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtDescs() = default;
  LtDescs(const LtDescs&) = delete;
  LtDescs& operator=(const LtDescs&) = delete;
  ~LtDescs() {
    if (op) CUBLASLT(cublasLtMatmulDescDestroy)(op);
    if (a) CUBLASLT(cublasLtMatrixLayoutDestroy)(a);
    if (b) CUBLASLT(cublasLtMatrixLayoutDestroy)(b);
    if (d) CUBLASLT(cublasLtMatrixLayoutDestroy)(d);
    if (pref) CUBLASLT(cublasLtMatmulPreferenceDestroy)(pref);
  }
};

// One geometry's descriptors and algorithm (none: cuBLASLt has no algorithm for it), made once:
// a call then only sets its bias pointer.
struct LtPlan {
  std::unique_ptr<LtDescs> desc;
  std::optional<cublasLtMatmulAlgo_t> algo;
};

// The cuBLASLt handle of a device with its workspace and its plans by geometry.
using LtKey = std::array<int64_t, 16>;
struct LtContext {
  std::mutex mu;  // held while a plan's bias pointer is set and its GEMM enqueued
  cublasLtHandle_t handle = nullptr;
  Tensor workspace;  // from the caching allocator; only ever used on the device's stream
  std::map<LtKey, LtPlan> plans;
};

// The largest power of two up to 256 that divides p's address (cuBLASLt's heuristic assumes 256
// unless told).
uint32_t AlignmentOf(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// One column-major GEMM D (m, n) = op(A) op(B) with an epilogue: CUBLASLT_EPILOGUE_BIAS adds
// bias (m,) to every column; CUBLASLT_EPILOGUE_BGRADB writes bias (n,) = the sums of op(B)'s
// columns over k. A, B and D have T's type; bias too.
struct LtGemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
};

// Runs g on the device's compute stream; false (nothing run) when cuBLASLt has no algorithm for
// it. T: float, __half or __nv_bfloat16. `op` names the caller in errors.
template <typename T>
bool RunLt(const Device& device, const LtGemm& g, const char* op) {
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if constexpr (std::is_same_v<T, float>) {
    if (cuda::AllowTf32()) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  } else if constexpr (std::is_same_v<T, __half>) {
    type = CUDA_R_16F;
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "RunLt: unsupported type");
    type = CUDA_R_16BF;
  }
  auto check = [op](cublasStatus_t status, const char* call) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    throw Error(StrCat(op, ": ", call, " failed: ", CUBLAS(cublasGetStatusString)(status), " (",
                       static_cast<int>(status), ")"));
  };
  cudaStream_t stream = cuda::StreamFor(device);  // checks the device and makes it current
  LtContext& ctx = cuda::PerDevice<LtContext>(device.index);
  std::lock_guard<std::mutex> lock(ctx.mu);
  if (!ctx.handle) {
    ctx.workspace = MakeWorkspace(device);
    check(CUBLASLT(cublasLtCreate)(&ctx.handle), "cublasLtCreate");
  }
  const int32_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint32_t epilogue = g.epilogue;
  const uint32_t align_a = AlignmentOf(g.a), align_b = AlignmentOf(g.b);
  const uint32_t align_d = AlignmentOf(g.d), align_bias = AlignmentOf(g.bias);
  const LtKey key = {static_cast<int64_t>(type),
                     static_cast<int64_t>(compute),
                     ta,
                     tb,
                     g.m,
                     g.n,
                     g.k,
                     g.lda,
                     g.ldb,
                     g.ldd,
                     epilogue,
                     align_a,
                     align_b,
                     align_d,
                     align_bias,
                     g.bias != nullptr};
  auto found = ctx.plans.find(key);
  if (found == ctx.plans.end()) {
    LtPlan plan;
    plan.desc = std::make_unique<LtDescs>();
    LtDescs& desc = *plan.desc;
    check(CUBLASLT(cublasLtMatmulDescCreate)(&desc.op, compute, CUDA_R_32F),
          "cublasLtMatmulDescCreate");
    check(CUBLASLT(cublasLtMatmulDescSetAttribute)(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                   sizeof(ta)),
          "cublasLtMatmulDescSetAttribute(TRANSA)");
    check(CUBLASLT(cublasLtMatmulDescSetAttribute)(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                   sizeof(tb)),
          "cublasLtMatmulDescSetAttribute(TRANSB)");
    check(CUBLASLT(cublasLtMatmulDescSetAttribute)(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                   &epilogue, sizeof(epilogue)),
          "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    if (g.bias) {  // the heuristic reads its alignment
      check(CUBLASLT(cublasLtMatmulDescSetAttribute)(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &g.bias, sizeof(g.bias)),
            "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    }
    // Stored column-major: op(A) is m x k, so A is (m, k) or, transposed, (k, m); likewise B.
    check(CUBLASLT(cublasLtMatrixLayoutCreate)(&desc.a, type, g.trans_a ? g.k : g.m,
                                               g.trans_a ? g.m : g.k, g.lda),
          "cublasLtMatrixLayoutCreate(A)");
    check(CUBLASLT(cublasLtMatrixLayoutCreate)(&desc.b, type, g.trans_b ? g.n : g.k,
                                               g.trans_b ? g.k : g.n, g.ldb),
          "cublasLtMatrixLayoutCreate(B)");
    check(CUBLASLT(cublasLtMatrixLayoutCreate)(&desc.d, type, g.m, g.n, g.ldd),
          "cublasLtMatrixLayoutCreate(D)");
    check(CUBLASLT(cublasLtMatmulPreferenceCreate)(&desc.pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t max_workspace = kBlasWorkspaceBytes;
    check(CUBLASLT(cublasLtMatmulPreferenceSetAttribute)(desc.pref,
                                                         CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &max_workspace, sizeof(max_workspace)),
          "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}};
    for (const auto& [attr, value] : aligns) {
      check(CUBLASLT(cublasLtMatmulPreferenceSetAttribute)(desc.pref, attr, &value, sizeof(value)),
            "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
    }
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t status = CUBLASLT(cublasLtMatmulAlgoGetHeuristic)(
        ctx.handle, desc.op, desc.a, desc.b, desc.d, desc.d, desc.pref, 1, &result, &count);
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) check(status, "cublasLtMatmulAlgoGetHeuristic");
    if (status == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
        result.workspaceSize <= kBlasWorkspaceBytes) {
      plan.algo = result.algo;
    }
    found = ctx.plans.emplace(key, std::move(plan)).first;
  }
  LtPlan& plan = found->second;
  if (!plan.algo) return false;
  if (g.bias) {
    check(CUBLASLT(cublasLtMatmulDescSetAttribute)(plan.desc->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &g.bias, sizeof(g.bias)),
          "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  const float alpha = 1, beta = 0;
  const LtDescs& desc = *plan.desc;
  const cublasStatus_t status = CUBLASLT(cublasLtMatmul)(
      ctx.handle, desc.op, &alpha, g.a, desc.a, g.b, desc.b, &beta, g.d, desc.d, g.d, desc.d,
      &*plan.algo, ctx.workspace.raw_data(), static_cast<size_t>(kBlasWorkspaceBytes), stream);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {  // the heuristic's algorithm refused: never again
    plan.algo.reset();
    return false;
  }
  check(status, "cublasLtMatmul");
  return true;
}

// ---------------------------------------------------------------- linear

// linear(x (m, k), w (n, k)[, bias (n,)]) = x @ w.T + bias: one cuBLASLt GEMM with the bias
// epilogue; without a bias, or where cuBLASLt has no algorithm, a cuBLAS GEMM (after the bias
// rows are written, with beta = 1).
std::vector<Tensor> LinearCuda(const std::vector<Tensor>& in, const Attrs&,
                               const std::vector<TensorMeta>& out) {
  Tensor x = in[0], w = in[1];
  if (!ViewOf(x).ld) x = fn::contiguous(x);
  if (!ViewOf(w).ld) w = fn::contiguous(w);
  const MatView vx = ViewOf(x), vw = ViewOf(w);
  Tensor o = Tensor::Empty(out[0]);
  const int64_t m = o.shape()[0], n = o.shape()[1], k = x.shape()[1];
  if (o.numel() == 0) return {o};
  const bool has_bias = in.size() == 3;
  if (k == 0) {
    if (has_bias) {
      fn::copy_(o, in[2]);  // broadcast over the rows
    } else {
      cuda::ZeroFill(o, cuda::StreamFor(o.device()));
    }
    return {o};
  }
  cuda::DispatchFloatingWithHalf(o.dtype(), "linear", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Column-major C^T (n, m) = W (n, k) X^T (k, m); w read in place is W^T unless transposed.
    if constexpr (!std::is_same_v<T, double>) {
      if (has_bias) {
        Tensor bias = fn::contiguous(in[2]);
        LtGemm g;
        g.trans_a = !vw.trans;
        g.trans_b = vx.trans;
        g.m = n, g.n = m, g.k = k;
        g.a = cuda::Ptr<T>(w), g.lda = vw.ld;
        g.b = cuda::Ptr<T>(x), g.ldb = vx.ld;
        g.d = cuda::Ptr<T>(o), g.ldd = n;
        g.epilogue = CUBLASLT_EPILOGUE_BIAS;
        g.bias = bias.raw_data();
        if (RunLt<DevT<T>>(o.device(), g, "linear")) return;
      }
    }
    if (has_bias) fn::copy_(o, in[2]);  // the bias rows, which the GEMM adds to
    Gemm g;
    g.trans_a = !vw.trans;
    g.trans_b = vx.trans;
    g.m = n, g.n = m, g.k = k;
    g.a = cuda::Ptr<T>(w), g.lda = vw.ld;
    g.b = cuda::Ptr<T>(x), g.ldb = vx.ld;
    g.c = cuda::Ptr<T>(o), g.ldc = n;
    g.accumulate = has_bias;
    RunGemm<DevT<T>>(o.device(), g);
  });
  return {o};
}

// linear_grad_weight_bias(g (m, n), x (m, k)) -> (dw = g.T @ x (n, k), db = g.sum(0) (n,)): one
// cuBLASLt GEMM whose bias-gradient epilogue sums g as it reads it. Column-major:
// dW^T (k, n) = X^T (k, m) G (m, n), G being g read in place transposed.
std::vector<Tensor> LinearGradWeightBiasCuda(const std::vector<Tensor>& in, const Attrs&,
                                             const std::vector<TensorMeta>& out) {
  Tensor g = in[0], x = in[1];
  if (!ViewOf(g).ld) g = fn::contiguous(g);
  if (!ViewOf(x).ld) x = fn::contiguous(x);
  const MatView vg = ViewOf(g), vx = ViewOf(x);
  Tensor dw = Tensor::Empty(out[0]), db = Tensor::Empty(out[1]);
  const int64_t m = g.shape()[0], n = g.shape()[1], k = x.shape()[1];
  if (n == 0) return {dw, db};
  cudaStream_t stream = cuda::StreamFor(dw.device());
  if (m == 0) {  // sums of nothing
    cuda::ZeroFill(dw, stream);
    cuda::ZeroFill(db, stream);
    return {dw, db};
  }
  cuda::DispatchFloatingWithHalf(dw.dtype(), "linear_grad_weight_bias", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, double>) {
      if (k > 0) {
        LtGemm lt;
        lt.trans_a = vx.trans;
        lt.trans_b = !vg.trans;
        lt.m = k, lt.n = n, lt.k = m;
        lt.a = cuda::Ptr<T>(x), lt.lda = vx.ld;
        lt.b = cuda::Ptr<T>(g), lt.ldb = vg.ld;
        lt.d = cuda::Ptr<T>(dw), lt.ldd = k;
        lt.epilogue = CUBLASLT_EPILOGUE_BGRADB;
        lt.bias = db.raw_data();
        if (RunLt<DevT<T>>(dw.device(), lt, "linear_grad_weight_bias")) return;
      }
    }
    if (k > 0) {
      Gemm c;
      c.trans_a = vx.trans;
      c.trans_b = !vg.trans;
      c.m = k, c.n = n, c.k = m;
      c.a = cuda::Ptr<T>(x), c.lda = vx.ld;
      c.b = cuda::Ptr<T>(g), c.ldb = vg.ld;
      c.c = cuda::Ptr<T>(dw), c.ldc = k;
      RunGemm<DevT<T>>(dw.device(), c);
    }
    fn::copy_(db, fn::sum(IsHalf(g.dtype()) ? fn::to_dtype(g, DType::kFloat32) : g, {0}));
  });
  return {dw, db};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(matmul, kCUDA, MatmulCuda);
ONEFLOW_REGISTER_KERNEL(linear, kCUDA, LinearCuda);
ONEFLOW_REGISTER_KERNEL(linear_grad_weight_bias, kCUDA, LinearGradWeightBiasCuda);

}  // namespace oneflow
