// Random ops on a counter-based generator: element i of a draw at counter offset o is a hash
// of (seed, o + i), i its row-major index in the logical tensor. The same seed gives the same
// numbers on every run, thread and process, and a rank drawing only its shard of a global
// tensor (a shard window, core/shard_window.h: attrs "logical_shape" and "shard_start") draws
// the numbers one process drawing the whole tensor holds there. The generator's functions are
// core/ops/counter_rng.h, which the CUDA kernels (core/kernels/cuda/random.cu) share.
#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/ops/counter_rng.h"
#include "core/ops/op_util.h"
#include "core/ops/random_state.h"
#include "core/shard_window.h"

namespace oneflow {

namespace {

struct Generator {
  std::mutex mu;
  uint64_t seed = 0x2545F4914F6CDD1Dull;
  uint64_t offset = 0;
};
Generator& DefaultGenerator() {
  static Generator* g = new Generator;
  return *g;
}

using rng::Uniform01;

Device AttrDevice(const Attrs& a) { return Device::Parse(a.Get<std::string>("device")); }

std::vector<TensorMeta> InferRandom(const std::vector<TensorMeta>&, const Attrs& a) {
  return {{AttrShape(a, "shape"), a.Get<DType>("dtype"), AttrDevice(a)}};
}

// Calls f(i, g) for each element i of t, g its index in the logical tensor (t's own index
// unless the draw is a shard window's).
template <typename F>
void ForEachDraw(const Tensor& t, const Attrs& a, F f) {
  if (!a.Has("shard_start")) {
    for (int64_t i = 0; i < t.numel(); ++i) f(i, i);
    return;
  }
  ForEachLogicalIndex(AttrShape(a, "logical_shape"), a.Get<std::vector<int64_t>>("shard_start"),
                      t.shape(), f);
}

// The window a draw of `logical` takes under a shard window scope, as attrs of its op.
void SetWindow(Attrs* a, const Shape& logical, const std::optional<ShardWindow>& w) {
  if (!w) return;
  a->Set("shape", w->local.dims())
      .Set("logical_shape", logical.dims())
      .Set("shard_start", w->start);
}

uint64_t Seed(const Attrs& a) { return static_cast<uint64_t>(a.Get<int64_t>("seed")); }
uint64_t Offset(const Attrs& a) { return static_cast<uint64_t>(a.Get<int64_t>("offset")); }

// The kernel's seed and offset: its attrs', or an active RngCapture's state (random_state.h).
void SeedAndOffset(const Attrs& a, const Tensor& t, uint64_t* seed, uint64_t* offset) {
  const rng::Source src = RngSource(a, t.device());
  *seed = src.Seed();
  *offset = src.Offset();
}

std::vector<Tensor> UniformCpu(const std::vector<Tensor>&, const Attrs& a,
                               const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  double low = a.Get<double>("low"), high = a.Get<double>("high");
  uint64_t seed = 0, off = 0;
  SeedAndOffset(a, t, &seed, &off);
  DispatchFloating(t.dtype(), "uniform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    ForEachDraw(t, a, [&](int64_t i, int64_t g) {
      p[i] = static_cast<T>(rng::UniformValue(seed, off + g, low, high));
    });
  });
  return {t};
}

std::vector<Tensor> NormalCpu(const std::vector<Tensor>&, const Attrs& a,
                              const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  double mean = a.Get<double>("mean"), std = a.Get<double>("std");
  uint64_t seed = 0, off = 0;
  SeedAndOffset(a, t, &seed, &off);
  DispatchFloating(t.dtype(), "normal", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    ForEachDraw(t, a, [&](int64_t i, int64_t g) {
      p[i] = static_cast<T>(rng::NormalValue(seed, off + g, mean, std));
    });
  });
  return {t};
}

std::vector<TensorMeta> InferRandint(const std::vector<TensorMeta>& in, const Attrs& a) {
  int64_t low = a.Get<int64_t>("low"), high = a.Get<int64_t>("high");
  ONEFLOW_CHECK(low < high, "randint: expected low < high, got low=", low, ", high=", high);
  return InferRandom(in, a);
}

std::vector<Tensor> RandintCpu(const std::vector<Tensor>&, const Attrs& a,
                               const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  int64_t low = a.Get<int64_t>("low"), high = a.Get<int64_t>("high");
  uint64_t seed = 0, off = 0;
  SeedAndOffset(a, t, &seed, &off);
  DispatchAll(t.dtype(), "randint", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    ForEachDraw(t, a, [&](int64_t i, int64_t g) {
      p[i] = static_cast<T>(rng::RandintValue(seed, off + g, low, high));
    });
  });
  return {t};
}

std::vector<TensorMeta> InferRandperm(const std::vector<TensorMeta>&, const Attrs& a) {
  int64_t n = a.Get<int64_t>("n");
  ONEFLOW_CHECK(n >= 0, "randperm: expected n >= 0, got ", n);
  return {{Shape({n}), DType::kInt64, AttrDevice(a)}};
}

std::vector<Tensor> RandpermCpu(const std::vector<Tensor>&, const Attrs& a,
                                const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  int64_t n = t.numel();
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  uint64_t seed = 0, off = 0;
  SeedAndOffset(a, t, &seed, &off);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(p[i], p[rng::PermutationPick(seed, off + i, i)]);
  }
  return {t};
}

std::vector<TensorMeta> InferDropoutMask(const std::vector<TensorMeta>& in, const Attrs& a) {
  double p = a.Get<double>("p");
  ONEFLOW_CHECK(p >= 0 && p < 1, "dropout: probability must be in [0, 1), got ", p);
  return {in[0]};
}

std::vector<Tensor> DropoutMaskCpu(const std::vector<Tensor>&, const Attrs& a,
                                   const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  double p = a.Get<double>("p");
  double scale = 1.0 / (1.0 - p);
  uint64_t seed = 0, off = 0;
  SeedAndOffset(a, t, &seed, &off);
  DispatchFloating(t.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* q = t.data<T>();
    ForEachDraw(t, a, [&](int64_t i, int64_t g) {
      q[i] = rng::DropoutKeep(seed, off + g, p) ? static_cast<T>(scale) : T(0);
    });
  });
  return {t};
}

// The generator advances by the logical tensor's draws, also where a shard window builds less.
Attrs RandomAttrs(const Shape& shape, DType dtype, const Device& device, uint64_t draws) {
  Attrs a;
  a.Set("shape", shape.dims()).Set("dtype", dtype).Set("device", device.ToString());
  a.Set("seed", static_cast<int64_t>(fn::initial_seed()));
  // A meta draw makes no numbers: a module built on meta and materialised later draws then
  // what it would have drawn at construction.
  a.Set("offset",
        static_cast<int64_t>(device.type == DeviceType::kMeta ? 0 : fn::generator_advance(draws)));
  SetWindow(&a, shape, TakeShardWindow(shape));
  return a;
}

}  // namespace

ONEFLOW_REGISTER_OP(uniform)
    .Inputs(0)
    .Infer(InferRandom)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, UniformCpu);
ONEFLOW_REGISTER_OP(normal)
    .Inputs(0)
    .Infer(InferRandom)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, NormalCpu);
ONEFLOW_REGISTER_OP(randint)
    .Inputs(0)
    .Infer(InferRandint)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, RandintCpu);
ONEFLOW_REGISTER_OP(randperm)
    .Inputs(0)
    .Infer(InferRandperm)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, RandpermCpu);
// The input only gives the mask its shape, dtype and device.
ONEFLOW_REGISTER_OP(dropout_mask)
    .Inputs(1)
    .Infer(InferDropoutMask)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, DropoutMaskCpu);

namespace fn {

void manual_seed(uint64_t seed) {
  Generator& g = DefaultGenerator();
  std::lock_guard<std::mutex> lock(g.mu);
  g.seed = seed;
  g.offset = 0;
}

uint64_t initial_seed() {
  Generator& g = DefaultGenerator();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.seed;
}

std::pair<uint64_t, uint64_t> generator_state() {
  Generator& g = DefaultGenerator();
  std::lock_guard<std::mutex> lock(g.mu);
  return {g.seed, g.offset};
}

void set_generator_state(uint64_t seed, uint64_t offset) {
  Generator& g = DefaultGenerator();
  std::lock_guard<std::mutex> lock(g.mu);
  g.seed = seed;
  g.offset = offset;
}

uint64_t generator_advance(uint64_t n) {
  Generator& g = DefaultGenerator();
  std::lock_guard<std::mutex> lock(g.mu);
  uint64_t start = g.offset;
  g.offset += 2 * n;  // normal draws use two counters per element
  return start;
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, const Device& device) {
  Attrs a = RandomAttrs(shape, dtype, device, shape.numel());
  a.Set("low", low).Set("high", high);
  return CallOp1(OP(uniform), {}, a);
}
Tensor rand(const Shape& shape, DType dtype, const Device& device) {
  return uniform(shape, 0.0, 1.0, dtype, device);
}
Tensor normal(const Shape& shape, double mean, double std, DType dtype, const Device& device) {
  Attrs a = RandomAttrs(shape, dtype, device, shape.numel());
  a.Set("mean", mean).Set("std", std);
  return CallOp1(OP(normal), {}, a);
}
Tensor randn(const Shape& shape, DType dtype, const Device& device) {
  return normal(shape, 0.0, 1.0, dtype, device);
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, const Device& device) {
  Attrs a = RandomAttrs(shape, dtype, device, shape.numel());
  a.Set("low", low).Set("high", high);
  return CallOp1(OP(randint), {}, a);
}
Tensor randperm(int64_t n, const Device& device) {
  // Every element depends on the whole permutation: built whole under a shard window (the
  // global layer then slices it), never as a window of the wrong size.
  ShardWindowPause pause;
  Attrs a = RandomAttrs(Shape({n}), DType::kInt64, device, n);
  a.Set("n", n);
  return CallOp1(OP(randperm), {}, a);
}
Tensor dropout_mask(const Tensor& x, double p) {
  Attrs a;
  a.Set("p", p).Set("seed", static_cast<int64_t>(initial_seed()));
  a.Set("offset", static_cast<int64_t>(generator_advance(x.numel())));
  return CallOp1(OP(dropout_mask), {x}, a);
}

}  // namespace fn

// ---------------------------------------------------------------- device-resident state

namespace {
thread_local const RngCapture* t_capture = nullptr;
}  // namespace

rng::Source RngSource(const Attrs& a, const Device& device) {
  rng::Source src;
  src.seed = Seed(a);
  src.offset = Offset(a);
  if (const RngCapture* c = RngCapture::Active(device)) {
    src.state = c->state().data<int64_t>();
    src.offset = c->Relative(src.offset);
  }
  return src;
}

rng::Window RngWindow(const Attrs& a, const Shape& local, const char* op) {
  rng::Window w;
  if (!a.Has("shard_start")) return w;
  const Shape logical = AttrShape(a, "logical_shape");
  const std::vector<int64_t> start = a.Get<std::vector<int64_t>>("shard_start");
  ONEFLOW_CHECK(local.ndim() <= rng::kMaxWindowDims, op, ": a shard window of at most ",
                rng::kMaxWindowDims, " dims, got ", local.ndim());
  w.ndim = static_cast<int>(local.ndim());
  for (int d = 0; d < w.ndim; ++d) {
    w.local[d] = local[d];
    w.logical[d] = logical[d];
    w.start[d] = start[d];
  }
  return w;
}

namespace {

// state = {seed, base} through a host tensor (a copy: the one host wait of an RngCapture).
void WriteState(const Tensor& state, uint64_t seed, uint64_t base) {
  Tensor host = Tensor::Empty(Shape({2}), DType::kInt64, Device::CPU());
  host.data<int64_t>()[0] = static_cast<int64_t>(seed);
  host.data<int64_t>()[1] = static_cast<int64_t>(base);
  fn::copy_(state, host);
}

}  // namespace

RngCapture::RngCapture(const Device& device)
    : device_(device), state_(Tensor::Empty(Shape({2}), DType::kInt64, device)) {
  const auto [seed, offset] = fn::generator_state();
  seed_ = seed;
  base_ = offset;
  WriteState(state_, seed_, base_);
}

RngCapture::~RngCapture() {
  if (active_ && t_capture == this) t_capture = prev_;
}

void RngCapture::Begin() {
  ONEFLOW_CHECK(!active_, "RngCapture: Begin while already active on ", device_.ToString());
  const auto [seed, offset] = fn::generator_state();
  if (seed != seed_ || offset != base_) {
    // Kernels also run during a capture (always on the stand-in device): the state must give
    // eager's draws.
    seed_ = seed;
    base_ = offset;
    WriteState(state_, seed_, base_);
  }
  begin_offset_ = offset;
  prev_ = t_capture;
  t_capture = this;
  active_ = true;
}

void RngCapture::BeginReplay() {
  ONEFLOW_CHECK(!active_, "RngCapture: BeginReplay while already active on ", device_.ToString());
  prev_ = t_capture;
  t_capture = this;
  active_ = true;
  replaying_ = true;
}

void RngCapture::End() {
  ONEFLOW_CHECK(active_ && t_capture == this, "RngCapture: End without its Begin on ",
                device_.ToString());
  if (!replaying_) draws_ = fn::generator_state().second - begin_offset_;
  t_capture = prev_;
  active_ = false;
  replaying_ = false;
}

uint64_t RngCapture::PrepareReplay() {
  ONEFLOW_CHECK(!active_, "RngCapture: PrepareReplay during the capture on ", device_.ToString());
  // generator_advance(n) reserves 2n counters; a capture's draws are such reservations.
  const uint64_t start = fn::generator_advance(draws_ / 2);
  const uint64_t seed = fn::initial_seed();
  if (seed != seed_) {
    seed_ = seed;
    base_ = start;
    WriteState(state_, seed_, base_);
    return start;
  }
  if (start != base_) {
    // base += start - old base on the device: a kernel taking the difference as its argument.
    const int64_t delta = static_cast<int64_t>(start - base_);
    Tensor b = fn::slice(state_, 0, 1, 2);
    fn::copy_(b, fn::add(b, fn::scalar_like(static_cast<double>(delta), b)));
    base_ = start;
  }
  return start;
}

const RngCapture* RngCapture::Active(const Device& device) {
  for (const RngCapture* c = t_capture; c; c = c->prev_) {
    if (c->device_ == device) return c;
  }
  return nullptr;
}

}  // namespace oneflow

// ---------------------------------------------------------------- multinomial
// (everyday-API addition) multinomial(probs, num_samples, replacement): per row of a 1-D or
// 2-D tensor of non-negative weights, num_samples category indices. Draw s of row r uses
// counter offset + r * num_samples + s, so flow.manual_seed makes it reproducible.

namespace oneflow {
namespace {

std::vector<TensorMeta> InferMultinomial(const std::vector<TensorMeta>& in, const Attrs& a) {
  const TensorMeta& p = in[0];
  ONEFLOW_CHECK(p.shape.ndim() == 1 || p.shape.ndim() == 2,
                "multinomial: expected a 1-D or 2-D tensor of probabilities, got shape ", p.shape);
  ONEFLOW_CHECK(IsFloating(p.dtype), "multinomial: expected a floating point tensor, got ",
                DTypeName(p.dtype));
  const int64_t n = a.Get<int64_t>("num_samples"), cats = p.shape[p.shape.ndim() - 1];
  ONEFLOW_CHECK(n > 0, "multinomial: num_samples must be positive, got ", n);
  ONEFLOW_CHECK(cats > 0, "multinomial: the probabilities have no categories (shape ", p.shape,
                ")");
  ONEFLOW_CHECK(a.Get<bool>("replacement") || n <= cats, "multinomial: cannot draw ", n,
                " samples without replacement from ", cats, " categories");
  std::vector<int64_t> s = p.shape.dims();
  s.back() = n;
  return {{Shape(s), DType::kInt64, p.device}};
}

std::vector<Tensor> MultinomialCpu(const std::vector<Tensor>& in, const Attrs& a,
                                   const std::vector<TensorMeta>& out) {
  Tensor p = fn::contiguous(fn::to_dtype(in[0], DType::kFloat64));
  Tensor t = Tensor::Empty(out[0]);
  const int64_t cats = p.shape()[p.ndim() - 1], rows = p.numel() / cats;
  const int64_t n = a.Get<int64_t>("num_samples");
  const bool replacement = a.Get<bool>("replacement");
  const uint64_t seed = Seed(a), off = Offset(a);
  const double* pp = p.data<double>();
  int64_t* pt = t.data<int64_t>();
  std::vector<double> w(cats), cdf(cats);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t positive = 0;
    for (int64_t c = 0; c < cats; ++c) {
      w[c] = pp[r * cats + c];
      ONEFLOW_CHECK(std::isfinite(w[c]) && w[c] >= 0,
                    "multinomial: probabilities must be finite and non-negative, got ", w[c]);
      positive += w[c] > 0 ? 1 : 0;
    }
    ONEFLOW_CHECK(positive > 0, "multinomial: the probabilities of row ", r, " sum to 0");
    ONEFLOW_CHECK(replacement || n <= positive, "multinomial: cannot draw ", n,
                  " samples without replacement from row ", r, ", which has ", positive,
                  " nonzero probabilities");
    for (int64_t s = 0; s < n; ++s) {
      double total = 0;
      for (int64_t c = 0; c < cats; ++c) cdf[c] = total += w[c];
      const double u = Uniform01(seed, off + r * n + s) * total;
      int64_t pick = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
      while (pick >= cats || w[pick] == 0) --pick;  // u rounding onto the end or a zero run
      pt[r * n + s] = pick;
      if (!replacement) w[pick] = 0;
    }
  }
  return {t};
}

}  // namespace

ONEFLOW_REGISTER_OP(multinomial)
    .Inputs(1)
    .Infer(InferMultinomial)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, MultinomialCpu);

namespace fn {

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  Attrs a;
  a.Set("num_samples", num_samples).Set("replacement", replacement);
  a.Set("seed", static_cast<int64_t>(initial_seed()));
  const int64_t rows = probs.ndim() == 2 ? probs.shape()[0] : 1;
  a.Set("offset",
        static_cast<int64_t>(generator_advance(rows * std::max<int64_t>(num_samples, 0))));
  return CallOp1(OP(multinomial), {probs}, a);
}

}  // namespace fn
}  // namespace oneflow
