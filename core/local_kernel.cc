#include "core/local_kernel.h"

#include "core/autocast.h"
#include "core/profiler.h"
#include "core/size_check.h"

namespace oneflow {

namespace {

// The widening and rounding casts of the float32 fallback: kernel work, so a plain local run
// (the op call around it records and traces nothing inside its kernel), shown by the profiler
// as the cast ops they are.
Tensor CastLocal(const Tensor& t, DType dtype) {
  static const OpDef& cast = OpRegistry::Global().Get("cast");
  profiler::Range prof(profiler::Kind::kOp, "cast");
  Attrs a;
  a.Set("dtype", dtype);
  return RunLocalKernel(cast, {t}, a)[0];
}

// dst (a half tensor) = src (float32 of its shape): the write-back of an in-place kernel.
void StoreHalf(const Tensor& dst, const Tensor& src, const char* op) {
  ONEFLOW_CHECK(dst.is_contiguous() && src.is_contiguous() && dst.numel() == src.numel(), op,
                ": writing in place into a non-contiguous ", DTypeName(dst.dtype()),
                " tensor is not supported on cpu");
  const float* s = src.data<float>();
  DispatchWithHalf(dst.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* d = dst.data<T>();
      for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] = T(s[i]);
    }
  });
  dst.storage()->bump_version();
}

}  // namespace

std::vector<Tensor> RunKernelInFloat32(const OpDef& op, KernelFn kernel,
                                       const std::vector<Tensor>& inputs, const Attrs& attrs,
                                       const std::vector<TensorMeta>& outputs) {
  std::vector<Tensor> wide(inputs);
  std::vector<uint64_t> versions(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!IsHalf(inputs[i].dtype())) continue;
    wide[i] = CastLocal(inputs[i], DType::kFloat32);
    versions[i] = wide[i].storage()->version();
  }
  std::vector<TensorMeta> wide_out(outputs);
  for (TensorMeta& m : wide_out) {
    if (IsHalf(m.dtype)) m.dtype = DType::kFloat32;
  }
  std::vector<Tensor> result = kernel(wide, attrs, wide_out);
  // A kernel that writes an input (an optimizer update with its state, returning the
  // parameter) wrote the float32 copy: every widened input goes back into its half tensor.
  bool in_place = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (wide[i].impl() == inputs[i].impl()) continue;
    in_place |= wide[i].storage()->version() != versions[i];
    for (const Tensor& o : result) in_place |= o.storage() == wide[i].storage();
  }
  for (size_t i = 0; in_place && i < inputs.size(); ++i) {
    if (wide[i].impl() != inputs[i].impl()) StoreHalf(inputs[i], wide[i], op.name.c_str());
  }
  for (size_t k = 0; k < result.size(); ++k) {
    if (!IsHalf(outputs[k].dtype)) continue;
    size_t alias = inputs.size();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (wide[i].impl() != inputs[i].impl() && result[k].impl() == wide[i].impl() &&
          result[k].shape() == inputs[i].shape()) {
        alias = i;  // the kernel returned its (written) input: return the half tensor itself
      }
    }
    result[k] = alias < inputs.size() ? inputs[alias] : CastLocal(result[k], outputs[k].dtype);
  }
  return result;
}

namespace {

// Ops whose kernels do not take complex dtypes say so, rather than reading pairs as reals.
void RefuseComplex(const OpDef& op, const std::vector<TensorMeta>& metas, const char* what) {
  for (size_t i = 0; i < metas.size(); ++i) {
    if (!IsComplex(metas[i].dtype)) continue;
    throw Error(StrCat(op.name, ": does not support complex dtypes, got a ",
                       DTypeName(metas[i].dtype), " ", what, " (", what, " ", i, ")"));
  }
}

}  // namespace

std::vector<Tensor> RunLocalKernel(const OpDef& op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const Tensor& t : inputs) metas.push_back(t.meta());
  Device device = inputs.empty() ? Device::CPU() : metas[0].device;
  for (size_t i = 1; i < metas.size(); ++i) {
    if (metas[i].device != device) {
      throw Error(StrCat(op.name, ": expected all tensors on one device, got ", device.ToString(),
                         " (input 0) and ", metas[i].device.ToString(), " (input ", i, ")"));
    }
  }
  if (!op.complex) RefuseComplex(op, metas, "input");
  std::vector<TensorMeta> out = op.infer(metas, attrs);
  if (!op.complex) RefuseComplex(op, out, "output");
  for (const TensorMeta& m : out) CheckShape(m.shape, m.dtype, op.name.c_str());
  SizeCheckOpScope size_check_op(op.name.c_str());
  if (inputs.empty() && attrs.Has("device"))
    device = Device::Parse(attrs.Get<std::string>("device"));
  if (device.type == DeviceType::kMeta) {  // shapes and dtypes only: no kernel, no memory
    std::vector<Tensor> empty;
    for (const TensorMeta& m : out) empty.push_back(Tensor::Empty(m.shape, m.dtype, device));
    return empty;
  }
  // The stand-in CUDA device runs the CPU kernels on its host memory.
  const DeviceType kernel_type = OnHost(device) ? DeviceType::kCPU : device.type;
  KernelFn kernel = op.kernels[static_cast<int>(kernel_type)];
  if (!kernel) {
    throw Error(StrCat(op.name, ": no kernel for device ", device.ToString(), " in this build"));
  }
  AutocastSuspendGuard no_autocast;  // ops the kernel calls are its own business
  if (kernel_type == DeviceType::kCPU && !op.cpu_half) {
    bool half = false;
    for (const TensorMeta& m : metas) half |= IsHalf(m.dtype);
    for (const TensorMeta& m : out) half |= IsHalf(m.dtype);
    if (half) return RunKernelInFloat32(op, kernel, inputs, attrs, out);
  }
  return kernel(inputs, attrs, out);
}

}  // namespace oneflow
