// CUDA kernels of the elementwise ops (core/ops/elementwise.cc) and of copy and cast
// (core/ops/shape.cc), and cuda::CopyStrided behind them. The functors are the CPU kernels'
// own (core/ops/binary_functors.h, core/ops/unary_functors.h), so both devices compute one
// expression; every kernel also takes float16 and bfloat16, computed in float (cuda::Acc).
// The kernels themselves are core/kernels/cuda/kernels/elementwise.cuh's.
#include <cmath>
#include <type_traits>

#include "core/kernels/cuda/elementwise.cuh"
#include "core/op_registry.h"
#include "core/ops/binary_functors.h"
#include "core/ops/op_util.h"
#include "core/ops/unary_functors.h"

namespace oneflow {

namespace {

using cuda::Map;
using cuda::MapContiguous;

// Which element types a kernel accepts, the half types always among them; the error for
// the others is the CPU kernel's.
enum class Types { kAll, kFloating };

template <Types kTypes, typename Fn>
void Dispatch(DType t, const char* op, Fn&& fn) {
  if constexpr (kTypes == Types::kAll) {
    DispatchWithHalf(t, op, fn);
  } else {
    DispatchFloatingWithHalf(t, op, fn);
  }
}

// ---------------------------------------------------------------- binary

using namespace functors;  // NOLINT: the shared functors (binary_ and unary_functors.h)

// The CPU computes integer powers with std::pow in double and casts back. Device pow is not
// correctly rounded, so an exact power could land just below the integer and truncate one
// lower: integer powers are multiplied out instead, wrapping on overflow as the CPU's cast of
// an out-of-range double does on x86. A negative exponent leaves 1, -1 or 0 (from 1, -1 and
// any other base; the CPU's 0 ** -1 is an infinity cast to an integer, undefined).
struct PowF {
  template <typename T>
  __device__ auto operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, float>) {
      return powf(a, b);
    } else if constexpr (std::is_floating_point_v<T>) {
      return pow(a, b);
    } else {
      const int64_t base = static_cast<int64_t>(a);
      if constexpr (std::is_signed_v<T>) {
        if (b < 0)
          return base == 1    ? int64_t{1}
                 : base == -1 ? (b % 2 ? int64_t{-1} : int64_t{1})
                              : int64_t{0};
      }
      uint64_t x = static_cast<uint64_t>(base), r = 1;
      for (uint64_t e = static_cast<uint64_t>(b); e; e >>= 1) {
        if (e & 1) r *= x;
        x *= x;
      }
      return static_cast<int64_t>(r);
    }
  }
};

template <typename F, bool kToBool, Types kTypes>
std::vector<Tensor> BinaryCuda(const std::vector<Tensor>& in, const Attrs&,
                               const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  Dispatch<kTypes>(in[0].dtype(), "binary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using O = std::conditional_t<kToBool, bool, T>;
    Map<O, T, T>("binary op", o, F{}, in[0], in[1]);
  });
  return {o};
}

std::vector<Tensor> RemainderCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  CheckNoIntegerZero(in[1], "remainder");  // a device % by zero would not trap
  return BinaryCuda<RemF, false, Types::kAll>(in, attrs, out);
}

// ---------------------------------------------------------------- where

struct WhereF {
  template <typename T>
  __device__ T operator()(bool c, T a, T b) const {
    return c ? a : b;
  }
};

std::vector<Tensor> WhereCuda(const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  DispatchWithHalf(o.dtype(), "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    Map<T, bool, T, T>("where", o, WhereF{}, in[0], in[1], in[2]);
  });
  return {o};
}

// ---------------------------------------------------------------- unary

template <typename F, Types kTypes, bool kToBool = false>
std::vector<Tensor> UnaryCuda(const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  Dispatch<kTypes>(in[0].dtype(), "unary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using O = std::conditional_t<kToBool, bool, T>;
    Map<O, T>("unary op", o, F{}, in[0]);
  });
  return {o};
}

std::vector<Tensor> ClampCuda(const std::vector<Tensor>& in, const Attrs& a,
                              const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  bool has_min = a.Get<bool>("has_min"), has_max = a.Get<bool>("has_max");
  double lo = a.Get<double>("min"), hi = a.Get<double>("max");
  DispatchWithHalf(in[0].dtype(), "clamp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = cuda::Acc<cuda::DevT<T>>;  // float for the half types: bounds compared in float
    ClampF<A> f{has_min, has_max, static_cast<A>(lo), static_cast<A>(hi)};
    Map<T, T>("clamp", o, f, in[0]);
  });
  return {o};
}

template <typename F, Types kTypes>
std::vector<Tensor> ActivationGradCuda(const char* op, const std::vector<Tensor>& in,
                                       const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  Dispatch<kTypes>(in[0].dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Map<T, T, T>(op, o, F{}, in[0], in[1]);
  });
  return {o};
}

std::vector<Tensor> ReluGradCuda(const std::vector<Tensor>& in, const Attrs&,
                                 const std::vector<TensorMeta>& out) {
  return ActivationGradCuda<ReluGradF, Types::kFloating>("relu_grad", in, out);
}

std::vector<Tensor> GeluGradCuda(const std::vector<Tensor>& in, const Attrs&,
                                 const std::vector<TensorMeta>& out) {
  return ActivationGradCuda<GeluGradF, Types::kFloating>("gelu_grad", in, out);
}

// ---------------------------------------------------------------- copy and cast

// Map stores f's result with Store, which converts exactly as the CPU's ConvertValue: the
// half types through float, the others with static_cast.
struct ConvertF {
  template <typename A>
  __device__ A operator()(A v) const {
    return v;
  }
};

// Copies of one dtype move elements of its size as unsigned integers: four kernels for all
// dtypes, bit exact (NaN payloads included). A source with its last two dims swapped goes
// through shared-memory tiles; past 32-bit offsets the copies (alone) use 64-bit indexing.
template <typename U>
void CopySameType(const Tensor& dst, const Tensor& src) {
  const cuda::ElementwiseOperand ops[] = {cuda::OperandOf(dst), cuda::OperandOf(src)};
  const int sms = cuda::MultiprocessorCount(dst.device().index);
  cudaStream_t stream = cuda::StreamFor(dst.device());
  cuda::TransposeGeometry g;
  int64_t batches = 0;
  if (cuda::TransposeLayout(ops, g, batches)) {
    return cuda::LaunchTranspose<U>(g, batches, src.raw_data(), dst.raw_data(), sms, stream);
  }
  ONEFLOW_CHECK((cuda::LaunchElementwise<cuda::StridedKernels::k32And64, U, U>(
                     ConvertF{}, ops, sms, stream) == cuda::ElementwiseStatus::kDone),
                "copy_: CUDA kernels take at most ", cuda::kMaxDims,
                " dims after merging contiguous ones, got shape ", dst.shape());
}

std::vector<Tensor> CopyCuda(const std::vector<Tensor>& in, const Attrs&,
                             const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  cuda::CopyStrided(o, in[0]);
  return {o};
}

}  // namespace

namespace cuda {

void CopyStrided(const Tensor& dst, const Tensor& src) {
  ONEFLOW_CHECK(!dst.is_cpu() && dst.device() == src.device(),
                "copy_: expected both tensors on one CUDA device, got source on ",
                src.device().ToString(), " and destination on ", dst.device().ToString());
  ONEFLOW_CHECK(BroadcastShapes(dst.shape(), src.shape(), "copy_") == dst.shape(),
                "copy_: cannot broadcast source of shape ", src.shape(),
                " into destination of shape ", dst.shape());
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype()) {
    if (dst.is_contiguous() && src.is_contiguous() && dst.shape() == src.shape()) {
      ONEFLOW_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(),
                                         dst.numel() * SizeOf(dst.dtype()),
                                         cudaMemcpyDeviceToDevice, StreamFor(dst.device())));
      return;
    }
    switch (SizeOf(dst.dtype())) {
      case 1:
        return CopySameType<uint8_t>(dst, src);
      case 2:
        return CopySameType<uint16_t>(dst, src);
      case 4:
        return CopySameType<uint32_t>(dst, src);
      default:
        return CopySameType<uint64_t>(dst, src);
    }
  }
  DispatchWithHalf(dst.dtype(), "copy_", [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    DispatchWithHalf(src.dtype(), "copy_", [&](auto stag) {
      using S = typename decltype(stag)::type;
      // Conversions of views copy them contiguous first (half the kernels to compile).
      if constexpr (!std::is_same_v<D, S>) MapContiguous<D, S>("copy_", dst, ConvertF{}, src);
    });
  });
}

}  // namespace cuda

#define REGISTER_BINARY(name, F, cpu_grad, types) \
  ONEFLOW_REGISTER_KERNEL(name, kCUDA, (BinaryCuda<F, false, Types::types>));
#define REGISTER_COMPARE(name, F) \
  ONEFLOW_REGISTER_KERNEL(name, kCUDA, (BinaryCuda<F, true, Types::kAll>));
ONEFLOW_BINARY_TABLE_OPS(REGISTER_BINARY)
ONEFLOW_COMPARE_TABLE_OPS(REGISTER_COMPARE)
#undef REGISTER_BINARY
#undef REGISTER_COMPARE

ONEFLOW_REGISTER_KERNEL(where, kCUDA, WhereCuda);
ONEFLOW_REGISTER_KERNEL(remainder, kCUDA, RemainderCuda);

#define REGISTER_UNARY(name, F, types) \
  ONEFLOW_REGISTER_KERNEL(name, kCUDA, (UnaryCuda<F, Types::types>))
REGISTER_UNARY(neg, NegF, kAll);
REGISTER_UNARY(exp, ExpF, kFloating);
REGISTER_UNARY(log, LogF, kFloating);
REGISTER_UNARY(sqrt, SqrtF, kFloating);
REGISTER_UNARY(rsqrt, RsqrtF, kFloating);
REGISTER_UNARY(abs, AbsF, kAll);
REGISTER_UNARY(sign, SignF, kAll);
REGISTER_UNARY(square, SquareF, kAll);
REGISTER_UNARY(relu, ReluF, kAll);
REGISTER_UNARY(sigmoid, SigmoidF, kFloating);
REGISTER_UNARY(tanh, TanhF, kFloating);
REGISTER_UNARY(gelu, GeluF, kFloating);
#undef REGISTER_UNARY
ONEFLOW_REGISTER_KERNEL(logical_not, kCUDA, (UnaryCuda<NotF, Types::kAll, true>));
ONEFLOW_REGISTER_KERNEL(clamp, kCUDA, ClampCuda);
ONEFLOW_REGISTER_KERNEL(relu_grad, kCUDA, ReluGradCuda);
ONEFLOW_REGISTER_KERNEL(gelu_grad, kCUDA, GeluGradCuda);

ONEFLOW_REGISTER_KERNEL(copy, kCUDA, CopyCuda);
ONEFLOW_REGISTER_KERNEL(cast, kCUDA, CopyCuda);

}  // namespace oneflow
