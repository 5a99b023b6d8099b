// Creation ops: full (zeros/ones), arange, eye, and host copies. They take no tensor inputs;
// the device comes from the "device" attribute.
#include <cmath>
#include <cstring>

#include "core/ops/op_util.h"
#include "core/shard_window.h"

namespace oneflow {

namespace {

Device AttrDevice(const Attrs& a) { return Device::Parse(a.Get<std::string>("device")); }

std::vector<TensorMeta> InferFull(const std::vector<TensorMeta>&, const Attrs& a) {
  for (int64_t d : a.Get<std::vector<int64_t>>("shape")) {
    ONEFLOW_CHECK(d >= 0, "full: negative dimension ", d, " in shape ", AttrShape(a, "shape"));
  }
  return {{AttrShape(a, "shape"), a.Get<DType>("dtype"), AttrDevice(a)}};
}

std::vector<Tensor> FullCpu(const std::vector<Tensor>&, const Attrs& a,
                            const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  fn::fill_(t, a.Get<double>("value"));
  return {t};
}

int64_t ArangeLength(const Attrs& a) {
  double start = a.Get<double>("start"), end = a.Get<double>("end"), step = a.Get<double>("step");
  ONEFLOW_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
                "arange: expected finite start, end and step, got ", start, ", ", end, ", ", step);
  ONEFLOW_CHECK(step != 0, "arange: step must be nonzero");
  ONEFLOW_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange: range [", start,
                ", ", end, ") is inconsistent with step ", step);
  const double n = std::ceil((end - start) / step);
  // 2**63 is the first double past int64: the length must be below it.
  ONEFLOW_CHECK(n < 9223372036854775808.0, "arange: [", start, ", ", end, ") in steps of ", step,
                " has ", n, " elements, more than int64 can count");
  return static_cast<int64_t>(n);
}

// Under a shard window (attrs "shape", "shard_start"): the window's part of the range.
std::vector<TensorMeta> InferArange(const std::vector<TensorMeta>&, const Attrs& a) {
  const int64_t n = ArangeLength(a);
  return {
      {a.Has("shape") ? AttrShape(a, "shape") : Shape({n}), a.Get<DType>("dtype"), AttrDevice(a)}};
}

std::vector<Tensor> ArangeCpu(const std::vector<Tensor>&, const Attrs& a,
                              const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  double start = a.Get<double>("start"), step = a.Get<double>("step");
  const int64_t first = a.Has("shard_start") ? a.Get<std::vector<int64_t>>("shard_start")[0] : 0;
  DispatchAll(t.dtype(), "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(start + (first + i) * step);
  });
  return {t};
}

// Under a shard window (attrs "shape", "shard_start"): the window's part of the matrix.
std::vector<TensorMeta> InferEye(const std::vector<TensorMeta>&, const Attrs& a) {
  int64_t n = a.Get<int64_t>("n"), m = a.Get<int64_t>("m");
  ONEFLOW_CHECK(n >= 0 && m >= 0, "eye: expected non-negative sizes, got n=", n, ", m=", m);
  return {{a.Has("shape") ? AttrShape(a, "shape") : Shape({n, m}), a.Get<DType>("dtype"),
           AttrDevice(a)}};
}

std::vector<Tensor> EyeCpu(const std::vector<Tensor>&, const Attrs& a,
                           const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  fn::fill_(t, 0.0);
  const int64_t m = t.shape()[1];
  const auto [first, count] =
      WindowDiagonal(a.Has("shard_start") ? a.Get<std::vector<int64_t>>("shard_start")
                                          : std::vector<int64_t>{0, 0},
                     t.shape());
  DispatchAll(t.dtype(), "eye", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>() + first;
    for (int64_t i = 0; i < count; ++i) p[i * (m + 1)] = static_cast<T>(1);
  });
  return {t};
}

// Under a shard window scope (core/shard_window.h) the window's shape.
Attrs CreationAttrs(const Shape& shape, DType dtype, const Device& device) {
  Attrs a;
  std::optional<ShardWindow> w = TakeShardWindow(shape);
  a.Set("shape", (w ? w->local : shape).dims())
      .Set("dtype", dtype)
      .Set("device", device.ToString());
  return a;
}

}  // namespace

ONEFLOW_REGISTER_OP(full).Inputs(0).Infer(InferFull).NonDifferentiable().CpuHalf().Complex().Kernel(
    DeviceType::kCPU, FullCpu);
ONEFLOW_REGISTER_OP(arange)
    .Inputs(0)
    .Infer(InferArange)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, ArangeCpu);
ONEFLOW_REGISTER_OP(eye).Inputs(0).Infer(InferEye).NonDifferentiable().Kernel(DeviceType::kCPU,
                                                                              EyeCpu);

namespace fn {

Tensor empty(const Shape& shape, DType dtype, const Device& device) {
  std::optional<ShardWindow> w = TakeShardWindow(shape);
  return Tensor::Empty(w ? w->local : shape, dtype, device);
}

Tensor full(const Shape& shape, double value, DType dtype, const Device& device) {
  Attrs a = CreationAttrs(shape, dtype, device);
  a.Set("value", value);
  return CallOp1(OP(full), {}, a);
}
Tensor zeros(const Shape& shape, DType dtype, const Device& device) {
  return full(shape, 0.0, dtype, device);
}
Tensor ones(const Shape& shape, DType dtype, const Device& device) {
  return full(shape, 1.0, dtype, device);
}
// A global t gives a global result laid out like t (FullLike's hook).
Tensor zeros_like(const Tensor& t) { return full_like(t, 0.0); }
Tensor ones_like(const Tensor& t) { return full_like(t, 1.0); }
Tensor full_like(const Tensor& t, double value) {
  if (t.is_global()) return FullLike(t, value);
  return full(t.shape(), value, t.dtype(), t.device());
}

Tensor scalar_like(double value, const Tensor& like) {
  if (like.device().type != DeviceType::kCPU) {
    // Filled on the device by a kernel that takes the value as its argument: a host tensor
    // copied over would make the host wait for the copy (cuda::CopyBytes).
    return Full(TensorMeta{Shape(), like.dtype(), like.device()}, value);
  }
  // Direct fill: this sits on the hot path of `x + 1` and needs no op machinery.
  Tensor t = Tensor::Empty(Shape(), like.dtype(), Device::CPU());
  fill_(t, value);
  return t;
}

Tensor constant_like(const Tensor& like, const Shape& shape, double value, DType dtype) {
  Tensor t = full(shape, value, dtype, like.device());
  // A 0-dim constant joins a global call as it is, as a Python number does: the interpreter
  // lifts it onto the placement's device, broadcast (global::World::Lift).
  return shape.ndim() == 0 ? t : place_like(like, t);
}

Tensor place_like(const Tensor& like, const Tensor& values) {
  if (like.is_global()) {
    const GlobalHooks& hooks = GetGlobalHooks();
    ONEFLOW_CHECK(hooks.on_placement_of, "a global tensor exists but no global layer is installed");
    return hooks.on_placement_of(like, values);
  }
  return to_device(values, like.device());
}

Tensor arange(double start, double end, double step, DType dtype, const Device& device) {
  Attrs a;
  a.Set("start", start).Set("end", end).Set("step", step).Set("dtype", dtype);
  a.Set("device", device.ToString());
  if (step != 0 && ((step > 0 && end >= start) || (step < 0 && end <= start))) {
    const Shape whole({static_cast<int64_t>(std::ceil((end - start) / step))});
    if (std::optional<ShardWindow> w = TakeShardWindow(whole)) {
      a.Set("shape", w->local.dims()).Set("shard_start", w->start);
    }
  }
  return CallOp1(OP(arange), {}, a);
}

Tensor eye(int64_t n, int64_t m, DType dtype, const Device& device) {
  Attrs a;
  a.Set("n", n).Set("m", m).Set("dtype", dtype).Set("device", device.ToString());
  if (n >= 0 && m >= 0) {
    if (std::optional<ShardWindow> w = TakeShardWindow(Shape({n, m}))) {
      a.Set("shape", w->local.dims()).Set("shard_start", w->start);
    }
  }
  return CallOp1(OP(eye), {}, a);
}

Tensor from_blob_copy(const void* data, const Shape& shape, DType dtype, const Device& device) {
  Tensor t = Tensor::Empty(shape, dtype, Device::CPU());
  if (t.numel()) std::memcpy(t.raw_data(), data, t.numel() * SizeOf(dtype));
  return device.type == DeviceType::kCPU ? t : to_device(t, device);
}

}  // namespace fn
}  // namespace oneflow
