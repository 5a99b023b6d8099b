#include "tests/op_samples.h"

#include <string>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "core/op_registry.h"
#include "core/ops/unary_functors.h"
#include "tests/test_util.h"

namespace oneflow {
namespace testing {

double Rng::Uniform(double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(gen_);
}

int64_t Rng::Int(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi - 1)(gen_);
}

Tensor Rng::Floats(const Shape& s, double lo, double hi, DType dt) {
  std::vector<double> v(s.numel());
  for (double& x : v) x = Uniform(lo, hi);
  return FromVector(v, s, dt);
}

Tensor Rng::Ints(const Shape& s, int64_t lo, int64_t hi, DType dt) {
  std::vector<double> v(s.numel());
  for (double& x : v) x = static_cast<double>(Int(lo, hi));
  return FromVector(v, s, dt);
}

namespace {

using IntList = std::vector<int64_t>;

Attrs Pool(IntList kernel, IntList stride, IntList padding, bool ceil_mode) {
  Attrs a;
  a.Set("kernel", kernel).Set("stride", stride).Set("padding", padding);
  a.Set("ceil_mode", ceil_mode);
  return a;
}

Attrs Conv(IntList stride, IntList padding, int64_t groups) {
  Attrs a;
  a.Set("stride", stride).Set("padding", padding).Set("dilation", IntList{1, 1});
  a.Set("groups", groups);
  return a;
}

Attrs WithShape(Attrs a, const char* name, IntList shape) {
  a.Set(name, std::move(shape));
  return a;
}

}  // namespace

std::vector<Sample> MakeSamples() {
  Rng r(20240611);
  std::vector<Sample> s;
  auto add = [&](const char* op, std::string what, std::vector<Tensor> in, Attrs a = Attrs(),
                 int line = __builtin_LINE()) {
    s.push_back(
        Sample{op, std::move(what), std::move(in), std::move(a), StrCat(__FILE__, ":", line)});
  };
  const DType f32 = DType::kFloat32, f64 = DType::kFloat64, i64 = DType::kInt64;
  const std::string cpu = Device::CPU().ToString();

  // ---- elementwise, unary
  for (const char* op :
       {"neg", "exp", "abs", "sign", "square", "relu", "sigmoid", "tanh", "gelu"}) {
    add(op, "[5, 7] f32", {r.Floats({5, 7})});
  }
  for (const char* op : {"log", "sqrt", "rsqrt"})
    add(op, "[5, 7] f32 > 0", {r.Floats({5, 7}, 0.2, 3)});
  add("relu", "[3, 5, 4] f64", {r.Floats({3, 5, 4}, -2, 2, f64)});
  add("neg", "[6, 5] int64", {r.Ints({6, 5}, -9, 9)});
  add("neg", "[5, 6] bool", {r.Bools({5, 6})});
  add("abs", "[5, 6] int64", {r.Ints({5, 6}, -9, 9)});
  add("clamp", "[5, 7] min and max", {r.Floats({5, 7})},
      Attrs().Set("has_min", true).Set("min", -0.5).Set("has_max", true).Set("max", 1.0));
  add("clamp", "[5, 7] max only", {r.Floats({5, 7})},
      Attrs().Set("has_min", false).Set("min", 0.0).Set("has_max", true).Set("max", 0.5));
  add("logical_not", "[5, 6] bool", {r.Bools({5, 6})});

  // ---- elementwise, binary (0-dim operands are Python scalars: they join as B)
  add("add", "[5, 6] + [6]", {r.Floats({5, 6}), r.Floats({6})});
  add("add", "[5, 1, 4] + [3, 4]", {r.Floats({5, 1, 4}), r.Floats({3, 4})});
  add("add", "[4, 6] + 0-dim", {r.Floats({4, 6}), r.Floats({})});
  add("add", "[5, 6] + [5, 6] int64", {r.Ints({5, 6}, -9, 9), r.Ints({5, 6}, -9, 9)});
  add("add", "[5, 6] + [6] bool", {r.Bools({5, 6}), r.Bools({6})});
  add("sub", "[5, 6] - [5, 1]", {r.Floats({5, 6}), r.Floats({5, 1})});
  add("sub", "[6, 5] - [6, 5] int64", {r.Ints({6, 5}, -9, 9), r.Ints({6, 5}, -9, 9)});
  add("sub", "[5, 6] - [5, 6] bool", {r.Bools({5, 6}), r.Bools({5, 6})});
  add("mul", "[5, 6] * [5, 6]", {r.Floats({5, 6}), r.Floats({5, 6})});
  add("mul", "[4, 7] * 0-dim", {r.Floats({4, 7}), r.Floats({})});
  add("mul", "[5, 6] * [6] int64", {r.Ints({5, 6}, -9, 9), r.Ints({6}, -9, 9)});
  add("mul", "[5, 6] * [5, 6] bool", {r.Bools({5, 6}), r.Bools({5, 6})});
  add("div", "[5, 6] / [6]", {r.Floats({5, 6}), r.Floats({6}, 0.5, 2)});
  add("div", "[5, 6] / [5, 6] int64", {r.Ints({5, 6}, -20, 20), r.Ints({5, 6}, 1, 6)});
  add("pow", "[5, 6] ** [6]", {r.Floats({5, 6}, 0.5, 2), r.Floats({6}, -1, 2)});
  add("pow", "[5, 6] ** 0-dim", {r.Floats({5, 6}, 0.5, 2), r.Floats({}, 1, 3)});
  add("remainder", "[5, 6] % [6]", {r.Floats({5, 6}, -9, 9), r.Floats({6}, 0.5, 2)});
  add("remainder", "[5, 6] % 0-dim < 0", {r.Floats({5, 6}, -9, 9), r.Floats({}, -3, -1)});
  add("remainder", "[5, 6] % [5, 6] int64", {r.Ints({5, 6}, -20, 20), r.Ints({5, 6}, 1, 6)});
  add("remainder", "[5, 6] % [6] int64 < 0", {r.Ints({5, 6}, -20, 20), r.Ints({6}, -6, -1)});
  for (const char* op : {"maximum", "minimum"}) {
    add(op, "[5, 6] vs [1, 6] with ties", {r.Ints({5, 6}, -2, 3, f32), r.Ints({1, 6}, -2, 3, f32)});
  }
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    add(op, "[5, 6] vs [5, 6]", {r.Ints({5, 6}, -2, 3, f32), r.Ints({5, 6}, -2, 3, f32)});
  }
  add("eq", "[5, 6] vs [6] int64", {r.Ints({5, 6}, 0, 3), r.Ints({6}, 0, 3)});
  for (const char* op : {"logical_and", "logical_or"}) {
    add(op, "[5, 6] vs [6] bool", {r.Bools({5, 6}), r.Bools({6})});
  }
  add("where", "[5, 6] ? [5, 6] : [6]", {r.Bools({5, 6}), r.Floats({5, 6}), r.Floats({6})});
  add("where", "[5, 1] ? [5, 6] : 0-dim", {r.Bools({5, 1}), r.Floats({5, 6}), r.Floats({})});
  // ---- the unary table: each op and its gradient op, x inside the op's domain
#define ONEFLOW_TABLE_SAMPLES(name, F, lo, hi)                                                 \
  add(#name, "[5, 7] f32", {r.Floats({5, 7}, lo, hi)}, functors::DefaultAttrs<functors::F>()); \
  add(#name "_grad", "[5, 7] f32", {r.Floats({5, 7}), r.Floats({5, 7}, lo, hi)},               \
      functors::DefaultAttrs<functors::F>());
  ONEFLOW_UNARY_TABLE_OPS(ONEFLOW_TABLE_SAMPLES)
#undef ONEFLOW_TABLE_SAMPLES
  add("relu_grad", "[5, 6]", {r.Floats({5, 6}), r.Floats({5, 6})});
  add("gelu_grad", "[5, 6]", {r.Floats({5, 6}), r.Floats({5, 6})});
  add("copy", "[5, 7] f32", {r.Floats({5, 7})});
  add("copy", "[4, 5] int64", {r.Ints({4, 5}, -9, 9)});
  add("copy", "[5, 6] bool", {r.Bools({5, 6})});
  add("cast", "f32 -> f64", {r.Floats({5, 6})}, Attrs().Set("dtype", f64));
  add("cast", "f32 -> int64", {r.Floats({5, 6}, -5, 5)}, Attrs().Set("dtype", i64));
  add("cast", "f32 -> bool", {r.Ints({5, 6}, -1, 2, f32)}, Attrs().Set("dtype", DType::kBool));
  add("cast", "int64 -> f32", {r.Ints({5, 6}, -9, 9)}, Attrs().Set("dtype", f32));
  add("cast", "int64 -> int32", {r.Ints({5, 6}, -9, 9)}, Attrs().Set("dtype", DType::kInt32));
  add("cast", "bool -> f32", {r.Bools({5, 6})}, Attrs().Set("dtype", f32));

  // ---- layer_norm: forward over the last one and two dims; backward from a forward's stats
  for (int64_t k : {1, 2}) {
    Shape norm = k == 1 ? Shape({6}) : Shape({4, 6});
    Attrs a = Attrs().Set("normalized_ndim", k).Set("eps", 1e-5);
    Tensor x = r.Floats({5, 4, 6}), w = r.Floats(norm), b = r.Floats(norm);
    add("layer_norm", "[5, 4, 6] over " + std::to_string(k) + " dims", {x, w, b}, a);
    auto fwd = RunLocalKernel(OpRegistry::Global().Get("layer_norm"), {x, w, b}, a);
    add("layer_norm_grad", "[5, 4, 6] over " + std::to_string(k) + " dims",
        {r.Floats({5, 4, 6}), x, fwd[1], fwd[2], w}, a);
  }
  // layer_norm: rows in registers (768 with 16-byte packs, 33 without), a block per long row
  // (1025), the half types.
  for (int64_t d : {33, 768, 1025}) {
    Attrs a = Attrs().Set("normalized_ndim", int64_t{1}).Set("eps", 1e-5);
    Tensor x = r.Floats({3, d}), w = r.Floats({d}), b = r.Floats({d});
    add("layer_norm", StrCat("[3, ", d, "]"), {x, w, b}, a);
    auto fwd = RunLocalKernel(OpRegistry::Global().Get("layer_norm"), {x, w, b}, a);
    add("layer_norm_grad", StrCat("[3, ", d, "]"), {r.Floats({3, d}), x, fwd[1], fwd[2], w}, a);
  }
  for (DType h : {DType::kFloat16, DType::kBFloat16}) {
    Attrs a = Attrs().Set("normalized_ndim", int64_t{1}).Set("eps", 1e-5);
    Tensor x = r.Floats({4, 64}, -2, 2, h), w = r.Floats({64}, 0.5, 1.5, h),
           b = r.Floats({64}, -1, 1, h);
    add("layer_norm", StrCat("[4, 64] ", DTypeName(h)), {x, w, b}, a);
    auto fwd = RunLocalKernel(OpRegistry::Global().Get("layer_norm"), {x, w, b}, a);
    add("layer_norm_grad", StrCat("[4, 64] ", DTypeName(h)),
        {r.Floats({4, 64}, -1, 1, h), x, fwd[1], fwd[2], w}, a);
  }
  // rms_norm: over one and two dims, warp rows (768), block rows (1025), the half types.
  for (int64_t d : {6, 768, 1025}) {
    Attrs a = Attrs().Set("normalized_ndim", int64_t{1}).Set("eps", 1e-6);
    Tensor x = r.Floats({3, d}), w = r.Floats({d});
    add("rms_norm", StrCat("[3, ", d, "]"), {x, w}, a);
    auto fwd = RunLocalKernel(OpRegistry::Global().Get("rms_norm"), {x, w}, a);
    add("rms_norm_grad", StrCat("[3, ", d, "]"), {r.Floats({3, d}), x, fwd[1], w}, a);
  }
  {
    Attrs a = Attrs().Set("normalized_ndim", int64_t{2}).Set("eps", 1e-6);
    Tensor x = r.Floats({5, 4, 6}), w = r.Floats({4, 6});
    add("rms_norm", "[5, 4, 6] over 2 dims", {x, w}, a);
    auto fwd = RunLocalKernel(OpRegistry::Global().Get("rms_norm"), {x, w}, a);
    add("rms_norm_grad", "[5, 4, 6] over 2 dims", {r.Floats({5, 4, 6}), x, fwd[1], w}, a);
  }
  for (DType h : {DType::kFloat16, DType::kBFloat16}) {
    Attrs a = Attrs().Set("normalized_ndim", int64_t{1}).Set("eps", 1e-5);
    Tensor x = r.Floats({4, 64}, -2, 2, h), w = r.Floats({64}, 0.5, 1.5, h);
    add("rms_norm", StrCat("[4, 64] ", DTypeName(h)), {x, w}, a);
  }
  // ---- scaled_dot_product_attention: q [2, 3, 5, 4], k [2, 3, 6, 4], v [2, 3, 6, 3]; plain,
  // causal (L < S), a bool mask over [L, S] (a kept element in every row), a float mask over
  // [2, 1, L, S], dropout; the backward from each forward's out and lse
  {
    auto att = [](double scale, bool causal, double p) {
      Attrs a;
      a.Set("scale", scale).Set("is_causal", causal).Set("dropout_p", p);
      a.Set("seed", int64_t{11}).Set("offset", int64_t{4}).Set("batch_offset", int64_t{0});
      return a;
    };
    std::vector<double> keep;
    for (int i = 0; i < 5; ++i) {
      for (int j = 0; j < 6; ++j) keep.push_back((i * 7 + j * 3) % 4 != 0 || i == j ? 1 : 0);
    }
    const Tensor bool_mask = FromVector(keep, Shape({5, 6}), DType::kBool);
    const Tensor float_mask = r.Floats({2, 1, 5, 6}, -2, 1);
    struct Case {
      const char* what;
      Attrs a;
      Tensor mask;
    };
    for (const Case& c :
         {Case{"plain", att(0.5, false, 0), Tensor()}, Case{"causal", att(0.5, true, 0), Tensor()},
          Case{"bool mask [5, 6]", att(0.7, false, 0), bool_mask},
          Case{"float mask [2, 1, 5, 6]", att(0.5, false, 0), float_mask},
          Case{"dropout 0.3", att(0.5, false, 0.3), Tensor()}}) {
      Tensor q = r.Floats({2, 3, 5, 4}), k = r.Floats({2, 3, 6, 4}), v = r.Floats({2, 3, 6, 3});
      std::vector<Tensor> in = {q, k, v};
      if (c.mask.defined()) in.push_back(c.mask);
      const std::string what = std::string("[2, 3, 5, 4] S 6 Ev 3 ") + c.what;
      add("scaled_dot_product_attention", what, in, c.a);
      auto fwd = RunLocalKernel(OpRegistry::Global().Get("scaled_dot_product_attention"), in, c.a);
      std::vector<Tensor> gin = {r.Floats({2, 3, 5, 3}), q, k, v, fwd[0], fwd[1]};
      if (c.mask.defined()) gin.push_back(c.mask);
      add("scaled_dot_product_attention_grad", what, gin, c.a);
    }
  }
  // ---- reductions
  add("prod", "[5, 6, 4] dim 1 keepdim", {r.Floats({5, 6, 4}, 0.5, 1.5)},
      Attrs().Set("dims", IntList{1}).Set("keepdim", true));
  add("prod", "[4, 6] all", {r.Floats({4, 6}, 0.7, 1.3)},
      Attrs().Set("dims", IntList{}).Set("keepdim", false));
  add("prod", "[5, 6] dims (0) int64", {r.Ints({5, 6}, -3, 4)},
      Attrs().Set("dims", IntList{0}).Set("keepdim", false));
  add("sum", "[5, 6, 4] all", {r.Floats({5, 6, 4})},
      Attrs().Set("dims", IntList{}).Set("keepdim", false));
  add("sum", "[5, 6, 4] dim 1 keepdim", {r.Floats({5, 6, 4})},
      Attrs().Set("dims", IntList{1}).Set("keepdim", true));
  add("sum", "[5, 6, 4] dims (0, -1)", {r.Floats({5, 6, 4})},
      Attrs().Set("dims", IntList{0, -1}).Set("keepdim", false));
  add("sum", "[5, 6] dim 1 int64", {r.Ints({5, 6}, -9, 9)},
      Attrs().Set("dims", IntList{1}).Set("keepdim", false));
  add("sum", "[5, 6] all int32", {r.Ints({5, 6}, -9, 9, DType::kInt32)},
      Attrs().Set("dims", IntList{}).Set("keepdim", false));
  add("sum", "[5, 6] dim 0 bool", {r.Bools({5, 6})},
      Attrs().Set("dims", IntList{0}).Set("keepdim", false));
  add("sum", "[5, 6, 4] dims (0, 2) bfloat16", {r.Floats({5, 6, 4}, -1, 1, DType::kBFloat16)},
      Attrs().Set("dims", IntList{0, 2}).Set("keepdim", false));
  add("sum", "[5, 6] all float16", {r.Floats({5, 6}, -1, 1, DType::kFloat16)},
      Attrs().Set("dims", IntList{}).Set("keepdim", false));
  add("prod", "[4, 6] dim 1 bfloat16", {r.Floats({4, 6}, 0.7, 1.3, DType::kBFloat16)},
      Attrs().Set("dims", IntList{1}).Set("keepdim", false));
  for (const char* op : {"max_dim", "min_dim"}) {
    add(op, "[5, 6, 4] dim 1 bfloat16", {r.Floats({5, 6, 4}, -1, 1, DType::kBFloat16)},
        Attrs().Set("dim", 1).Set("keepdim", false));
    add(op, "[5, 6, 4] dim 1", {r.Floats({5, 6, 4})}, Attrs().Set("dim", 1).Set("keepdim", false));
    add(op, "[5, 7] dim -1 keepdim", {r.Floats({5, 7})},
        Attrs().Set("dim", -1).Set("keepdim", true));
    add(op, "[6, 5] dim 0 int64 with ties", {r.Ints({6, 5}, 0, 3)},
        Attrs().Set("dim", 0).Set("keepdim", false));
  }

  // ---- shape and view ops ("shape" is rewritten to the local shard's shape)
  add("reshape", "[4, 6] -> [4, 2, 3]", {r.Floats({4, 6})}, Attrs().Set("shape", IntList{4, 2, 3}));
  add("reshape", "[2, 3, 5] -> [6, 5]", {r.Floats({2, 3, 5})}, Attrs().Set("shape", IntList{6, 5}));
  add("reshape", "[6, 5] -> [-1]", {r.Floats({6, 5})}, Attrs().Set("shape", IntList{-1}));
  add("reshape", "[5, 6] -> [5, -1, 2]", {r.Floats({5, 6})},
      Attrs().Set("shape", IntList{5, -1, 2}));
  // Rows split evenly become a split of a smaller leading axis, and on a 2x2 mesh (S(0), S(0))
  // becomes (S(0), S(1)) (OneFlow's test_reshape_nd_sbp).
  add("reshape", "[8, 4] -> [2, 4, 4]", {r.Floats({8, 4})}, Attrs().Set("shape", IntList{2, 4, 4}));
  add("reshape", "[2, 6, 3] -> [4, 9]", {r.Floats({2, 6, 3})}, Attrs().Set("shape", IntList{4, 9}));
  add("reshape", "[3, 1, 5] -> [3, 5]", {r.Floats({3, 1, 5})}, Attrs().Set("shape", IntList{3, 5}));
  add("reshape", "[4, 6] -> [24] bool", {r.Bools({4, 6})}, Attrs().Set("shape", IntList{24}));
  add("permute", "[3, 5, 7] (2, 0, 1)", {r.Floats({3, 5, 7})},
      Attrs().Set("dims", IntList{2, 0, 1}));
  add("permute", "[4, 5] (-1, 0)", {r.Floats({4, 5})}, Attrs().Set("dims", IntList{-1, 0}));
  auto slice_attrs = [](int64_t dim, int64_t start, int64_t end, int64_t step) {
    return Attrs().Set("dim", dim).Set("start", start).Set("end", end).Set("step", step);
  };
  add("slice", "[7, 5] dim 0 1:6:2", {r.Floats({7, 5})}, slice_attrs(0, 1, 6, 2));
  add("slice", "[5, 7] dim -1 -5:100", {r.Floats({5, 7})}, slice_attrs(-1, -5, 100, 1));
  add("slice", "[4, 6, 5] dim 1 0:4:3", {r.Floats({4, 6, 5})}, slice_attrs(1, 0, 4, 3));
  add("slice_grad", "[3, 5] into [7, 5] dim 0 1:6:2", {r.Floats({3, 5})},
      WithShape(slice_attrs(0, 1, 6, 2), "shape", {7, 5}));
  add("slice_grad", "[5, 5] into [5, 7] dim 1 2:7", {r.Floats({5, 5})},
      WithShape(slice_attrs(1, 2, 7, 1), "shape", {5, 7}));
  add("expand", "[5, 1] -> [4, 5, 6]", {r.Floats({5, 1})}, Attrs().Set("shape", IntList{4, 5, 6}));
  add("expand", "[1, 6] -> [5, -1]", {r.Floats({1, 6})}, Attrs().Set("shape", IntList{5, -1}));
  add("expand", "[3, 1, 4] -> [3, 5, 4]", {r.Floats({3, 1, 4})},
      Attrs().Set("shape", IntList{3, 5, 4}));
  add("cat", "dim 1 [4, 5] [4, 3] [4, 2]", {r.Floats({4, 5}), r.Floats({4, 3}), r.Floats({4, 2})},
      Attrs().Set("dim", 1));
  add("cat", "dim 0 [2, 5] [3, 5]", {r.Floats({2, 5}), r.Floats({3, 5})}, Attrs().Set("dim", 0));
  add("cat", "dim 0 bool [3, 4] [2, 4]", {r.Bools({3, 4}), r.Bools({2, 4})}, Attrs().Set("dim", 0));
  add("cat", "dim -1 int64 [5, 3] [5, 4]", {r.Ints({5, 3}, -9, 9), r.Ints({5, 4}, -9, 9)},
      Attrs().Set("dim", -1));

  // ---- index ops
  add("gather", "[5, 6] dim 1 index [5, 4]", {r.Floats({5, 6}), r.Ints({5, 4}, 0, 6)},
      Attrs().Set("dim", 1));
  add("gather", "[5, 6] dim 0 index [7, 6]", {r.Floats({5, 6}), r.Ints({7, 6}, 0, 5)},
      Attrs().Set("dim", 0));
  add("scatter_add", "[5, 4] into [5, 6] dim 1", {r.Ints({5, 4}, 0, 6), r.Floats({5, 4})},
      Attrs().Set("dim", 1).Set("shape", IntList{5, 6}));
  add("scatter_add", "[3, 6] into [5, 6] dim 0", {r.Ints({3, 6}, 0, 5), r.Floats({3, 6})},
      Attrs().Set("dim", 0).Set("shape", IntList{5, 6}));
  add("scatter_add", "[5, 3] int64 into [5, 4] dim 1",
      {r.Ints({5, 3}, 0, 4), r.Ints({5, 3}, -9, 9)},
      Attrs().Set("dim", 1).Set("shape", IntList{5, 4}));
  add("index_select", "[5, 6] dim 1 index [4]", {r.Floats({5, 6}), r.Ints({4}, 0, 6)},
      Attrs().Set("dim", 1));
  add("index_select", "[5, 6] dim 0 index [7]", {r.Floats({5, 6}), r.Ints({7}, 0, 5)},
      Attrs().Set("dim", 0));
  add("index_select", "[5, 6] dim 0 0-dim index", {r.Floats({5, 6}), r.Ints({}, 0, 5)},
      Attrs().Set("dim", 0));
  add("index_select", "0-dim x, 0-dim index", {r.Floats({}), r.Ints({}, 0, 1)},
      Attrs().Set("dim", 0));
  // The embedding lookup: rows of 32 floats (16-byte packs), negative indices.
  add("index_select", "[6, 32] dim 0 index [9] with -1",
      {r.Floats({6, 32}), FromVector({0, 5, -1, 2, 2, 0, -6, 3, 1}, {9}, i64)},
      Attrs().Set("dim", 0));
  add("index_select", "[6, 40] f16 dim 0 int32 index [5]",
      {r.Floats({6, 40}, -2, 2, DType::kFloat16), r.Ints({5}, 0, 6, DType::kInt32)},
      Attrs().Set("dim", 0));
  auto isg = [](int64_t dim, IntList shape) { return Attrs().Set("dim", dim).Set("shape", shape); };
  // index_select_grad: repeated and negative indices, rows no index names, dims 0 and 1.
  add("index_select_grad", "[9, 6] into [5, 6] dim 0, repeats",
      {r.Floats({9, 6}), FromVector({0, 4, -1, 2, 2, 0, -5, 4, 0}, {9}, i64)}, isg(0, {5, 6}));
  add("index_select_grad", "[5, 4] into [5, 7] dim 1",
      {r.Floats({5, 4}), FromVector({6, 1, 6, 3}, {4}, i64)}, isg(1, {5, 7}));
  add("index_select_grad", "[1, 6] 0-dim int32 index into [4, 6] dim 0",
      {r.Floats({1, 6}), r.Ints({}, 0, 4, DType::kInt32)}, isg(0, {4, 6}));
  add("index_select_grad", "[7, 40] bf16 into [6, 40] dim 0",
      {r.Floats({7, 40}, -2, 2, DType::kBFloat16), r.Ints({7}, 0, 6)}, isg(0, {6, 40}));

  // ---- everyday-API kernels: sort and scans, tril/triu, flip, scatter, multinomial
  for (bool desc : {false, true}) {
    add("sort", desc ? "[5, 6, 4] dim 1 descending" : "[5, 6, 4] dim 1", {r.Floats({5, 6, 4})},
        Attrs().Set("dim", 1).Set("descending", desc));
  }
  add("sort", "[6, 5] dim -1 int64 with ties", {r.Ints({6, 5}, 0, 3)},
      Attrs().Set("dim", -1).Set("descending", false));
  add("sort", "[6, 5] dim 0 f32 with ties", {r.Ints({6, 5}, 0, 3, f32)},
      Attrs().Set("dim", 0).Set("descending", true));
  add("cumsum", "[5, 6] dim 1", {r.Floats({5, 6})}, Attrs().Set("dim", 1).Set("reverse", false));
  add("cumsum", "[4, 5, 3] dim 0 reverse", {r.Floats({4, 5, 3})},
      Attrs().Set("dim", 0).Set("reverse", true));
  add("cumsum", "[5, 6] dim -1 int64", {r.Ints({5, 6}, -9, 9)},
      Attrs().Set("dim", -1).Set("reverse", false));
  add("cumsum", "[5, 6] dim 0 bool", {r.Bools({5, 6})},
      Attrs().Set("dim", 0).Set("reverse", false));
  add("cumprod", "[5, 6] dim 1", {r.Floats({5, 6}, 0.5, 1.5)}, Attrs().Set("dim", 1));
  add("cumprod", "[4, 5, 3] dim 0 int64", {r.Ints({4, 5, 3}, -3, 4)}, Attrs().Set("dim", 0));
  add("tril", "[5, 6] diagonal 0", {r.Floats({5, 6})}, Attrs().Set("diagonal", 0));
  add("tril", "[3, 5, 4] diagonal -1", {r.Floats({3, 5, 4})}, Attrs().Set("diagonal", -1));
  add("triu", "[5, 6] diagonal 1", {r.Floats({5, 6})}, Attrs().Set("diagonal", 1));
  add("triu", "[2, 3, 4, 5] diagonal 0 int64", {r.Ints({2, 3, 4, 5}, -9, 9)},
      Attrs().Set("diagonal", 0));
  add("flip", "[5, 6, 4] dims (0, 2)", {r.Floats({5, 6, 4})}, Attrs().Set("dims", IntList{0, 2}));
  add("flip", "[5, 6] dims (-1)", {r.Floats({5, 6})}, Attrs().Set("dims", IntList{-1}));
  add("flip", "[4, 6] bool dims (0)", {r.Bools({4, 6})}, Attrs().Set("dims", IntList{0}));
  {
    // scatter without reduction: distinct places per row, so no winner among duplicates.
    std::vector<double> rows;
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 4; ++j) rows.push_back(static_cast<double>((i + j) % 6));
    Tensor distinct = FromVector(rows, {5, 4}, i64);
    auto scatter = [](int64_t dim, const char* reduce) {
      return Attrs().Set("dim", dim).Set("reduce", std::string(reduce));
    };
    add("scatter", "[5, 6] dim 1 index [5, 4]", {r.Floats({5, 6}), distinct, r.Floats({5, 4})},
        scatter(1, "none"));
    std::vector<double> cols;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) cols.push_back(static_cast<double>((2 * i + j) % 5));
    add("scatter", "[5, 6] dim 0 index [3, 5]",
        {r.Floats({5, 6}), FromVector(cols, {3, 5}, i64), r.Floats({3, 5})}, scatter(0, "none"));
    add("scatter", "[5, 6] add dim 1 index [5, 4]",
        {r.Floats({5, 6}), r.Ints({5, 4}, 0, 6), r.Floats({5, 4})}, scatter(1, "add"));
    add("scatter", "[5, 6] add dim 0 index [3, 6] int64",
        {r.Ints({5, 6}, -9, 9), r.Ints({3, 6}, 0, 5), r.Ints({3, 6}, -9, 9)}, scatter(0, "add"));
  }
  {
    auto draw = [](int64_t n, bool replacement) {
      return Attrs()
          .Set("num_samples", n)
          .Set("replacement", replacement)
          .Set("seed", int64_t{5})
          .Set("offset", int64_t{8});
    };
    add("multinomial", "[4, 6] 3 without replacement", {r.Floats({4, 6}, 0, 1)}, draw(3, false));
    add("multinomial", "[6] 8 with replacement", {r.Floats({6}, 0, 1)}, draw(8, true));
  }

  // ---- matmul and linear
  add("matmul", "[5, 4] @ [4, 6]", {r.Floats({5, 4}), r.Floats({4, 6})});
  add("matmul", "[3, 5, 4] @ [4, 6]", {r.Floats({3, 5, 4}), r.Floats({4, 6})});
  add("matmul", "[3, 5, 4] @ [3, 4, 6]", {r.Floats({3, 5, 4}), r.Floats({3, 4, 6})});
  add("matmul", "[1, 5, 4] @ [3, 4, 6]", {r.Floats({1, 5, 4}), r.Floats({3, 4, 6})});
  add("matmul", "[2, 3, 5, 4] @ [3, 4, 6]", {r.Floats({2, 3, 5, 4}), r.Floats({3, 4, 6})});
  add("matmul", "[5, 4] @ [4, 3] int64", {r.Ints({5, 4}, -5, 5), r.Ints({4, 3}, -5, 5)});
  add("linear", "[5, 4] [6, 4] [6]", {r.Floats({5, 4}), r.Floats({6, 4}), r.Floats({6})});
  add("linear", "[7, 4] [5, 4] no bias", {r.Floats({7, 4}), r.Floats({5, 4})});
  for (DType half : {DType::kFloat16, DType::kBFloat16}) {
    const std::string name = DTypeName(half);
    add("linear", "[9, 16] [8, 16] [8] " + name,
        {r.Floats({9, 16}, -1, 1, half), r.Floats({8, 16}, -1, 1, half),
         r.Floats({8}, -1, 1, half)});
    add("linear_grad_weight_bias", "g [9, 8] x [9, 16] " + name,
        {r.Floats({9, 8}, -1, 1, half), r.Floats({9, 16}, -1, 1, half)});
  }
  add("linear", "[33, 20] [12, 20] [12] odd sizes",
      {r.Floats({33, 20}), r.Floats({12, 20}), r.Floats({12})});
  add("linear_grad_weight_bias", "g [6, 5] x [6, 4]", {r.Floats({6, 5}), r.Floats({6, 4})});
  add("linear_grad_weight_bias", "g [33, 12] x [33, 20]", {r.Floats({33, 12}), r.Floats({33, 20})});
  add("linear_grad_weight_bias", "g [4, 3] x [4, 2] f64",
      {r.Floats({4, 3}, -1, 1, f64), r.Floats({4, 2}, -1, 1, f64)});

  // ---- softmax and losses
  for (const char* op : {"softmax", "log_softmax"}) {
    add(op, "[5, 6, 4] dim 1", {r.Floats({5, 6, 4})}, Attrs().Set("dim", 1));
    add(op, "[5, 7] dim -1", {r.Floats({5, 7})}, Attrs().Set("dim", -1));
  }
  for (const char* op : {"softmax", "log_softmax"}) {
    // Rows in registers (33: one pack per lane, 4 aligned columns), a block per long row (1025),
    // and the half types.
    add(op, "[3, 33] dim 1", {r.Floats({3, 33}, -6, 6)}, Attrs().Set("dim", 1));
    add(op, "[2, 1025] dim 1", {r.Floats({2, 1025}, -6, 6)}, Attrs().Set("dim", 1));
    add(op, "[4, 64] dim 1 f16", {r.Floats({4, 64}, -4, 4, DType::kFloat16)},
        Attrs().Set("dim", 1));
    add(op, "[3, 2, 40] dim 2 bf16", {r.Floats({3, 2, 40}, -4, 4, DType::kBFloat16)},
        Attrs().Set("dim", 2));
  }
  for (const char* op : {"softmax_grad", "log_softmax_grad"}) {
    add(op, "y [5, 6, 4] dy, dim 1", {r.Floats({5, 6, 4}), r.Floats({5, 6, 4})},
        Attrs().Set("dim", 1));
    add(op, "y [5, 7] dy, dim -1", {r.Floats({5, 7}), r.Floats({5, 7})}, Attrs().Set("dim", -1));
  }
  {
    Attrs ls;
    ls.Set("dim", 1);
    Tensor lp = RunLocalKernel(OpRegistry::Global().Get("log_softmax"), {r.Floats({5, 4})}, ls)[0];
    Tensor lp3 =
        RunLocalKernel(OpRegistry::Global().Get("log_softmax"), {r.Floats({5, 4, 3})}, ls)[0];
    // One target of the 2-D batch is ignore_index; in the 3-D one, class 1 is ignored.
    Tensor t = FromVector({2, -100, 0, 3, 1}, {5}, i64);
    Tensor t3 = r.Ints({5, 3}, 0, 4);
    auto nll = [](const char* reduction, int64_t ignore) {
      return Attrs().Set("reduction", std::string(reduction)).Set("ignore_index", ignore);
    };
    for (const char* red : {"none", "sum", "mean"}) {
      add("nll_loss", std::string("[5, 4] ") + red, {lp, t}, nll(red, -100));
      Tensor dy = std::string(red) == "none" ? r.Floats({5}) : r.Floats({});
      add("nll_loss_grad", std::string("[5, 4] ") + red, {dy, t},
          WithShape(nll(red, -100), "input_shape", {5, 4}));
    }
    add("nll_loss", "[5, 4, 3] mean", {lp3, t3}, nll("mean", 1));
    add("nll_loss", "[5, 4, 3] none", {lp3, t3}, nll("none", 1));
    add("nll_loss_grad", "[5, 4, 3] mean", {r.Floats({}), t3},
        WithShape(nll("mean", 1), "input_shape", {5, 4, 3}));
  }
  {
    // cross_entropy fused: 2-D and unbatched, ignore_index, label smoothing; warp rows (4, 33
    // classes) and block rows (1025 classes), the half types.
    auto ce = [](const char* reduction, int64_t ignore, double smoothing) {
      return Attrs()
          .Set("reduction", std::string(reduction))
          .Set("ignore_index", ignore)
          .Set("label_smoothing", smoothing);
    };
    Tensor t = FromVector({2, -100, 0, 3, 1}, {5}, i64);
    for (const char* red : {"none", "sum", "mean"}) {
      const std::string what = std::string("[5, 4] ") + red;
      add("cross_entropy", what, {r.Floats({5, 4}), t}, ce(red, -100, 0.0));
      Tensor x = r.Floats({5, 4});
      Tensor lse =
          RunLocalKernel(OpRegistry::Global().Get("cross_entropy"), {x, t}, ce(red, -100, 0.0))[1];
      Tensor dy = std::string(red) == "none" ? r.Floats({5}) : r.Floats({});
      add("cross_entropy_grad", what, {dy, x, t, lse}, ce(red, -100, 0.0));
    }
    add("cross_entropy", "[4] unbatched, smoothing 0.1", {r.Floats({4}), FromVector({3}, {}, i64)},
        ce("mean", -100, 0.1));
    for (int64_t c : {33, 1025}) {
      Tensor x = r.Floats({3, c}, -4, 4), tc = FromVector({0, double(c - 1), 5}, {3}, i64);
      const std::string what = StrCat("[3, ", c, "] mean, smoothing 0.2");
      add("cross_entropy", what, {x, tc}, ce("mean", 5, 0.2));
      Tensor lse =
          RunLocalKernel(OpRegistry::Global().Get("cross_entropy"), {x, tc}, ce("mean", 5, 0.2))[1];
      add("cross_entropy_grad", what, {r.Floats({}), x, tc, lse}, ce("mean", 5, 0.2));
    }
    for (DType h : {DType::kFloat16, DType::kBFloat16}) {
      add("cross_entropy", StrCat("[6, 40] sum ", DTypeName(h)),
          {r.Floats({6, 40}, -3, 3, h), r.Ints({6}, 0, 40)}, ce("sum", -100, 0.0));
    }
  }

  // ---- convolution ("input_shape" / "weight_shape" are rewritten to the local shard's shape)
  add("conv2d", "[5, 4, 6, 6] * [6, 4, 3, 3] + bias, pad 1",
      {r.Floats({5, 4, 6, 6}), r.Floats({6, 4, 3, 3}), r.Floats({6})}, Conv({1, 1}, {1, 1}, 1));
  add("conv2d", "[5, 4, 7, 7] * [6, 2, 3, 3] groups 2, stride 2",
      {r.Floats({5, 4, 7, 7}), r.Floats({6, 2, 3, 3})}, Conv({2, 2}, {0, 0}, 2));
  add("conv2d_grad_input", "dy [5, 6, 6, 6] w [6, 4, 3, 3]",
      {r.Floats({5, 6, 6, 6}), r.Floats({6, 4, 3, 3})},
      WithShape(Conv({1, 1}, {1, 1}, 1), "input_shape", {5, 4, 6, 6}));
  add("conv2d_grad_input", "dy [5, 6, 3, 3] w [6, 2, 3, 3] groups 2",
      {r.Floats({5, 6, 3, 3}), r.Floats({6, 2, 3, 3})},
      WithShape(Conv({2, 2}, {0, 0}, 2), "input_shape", {5, 4, 7, 7}));
  add("conv2d_grad_weight", "dy [5, 6, 6, 6] x [5, 4, 6, 6]",
      {r.Floats({5, 6, 6, 6}), r.Floats({5, 4, 6, 6})},
      WithShape(Conv({1, 1}, {1, 1}, 1), "weight_shape", {6, 4, 3, 3}));
  add("conv2d_grad_weight", "dy [5, 6, 3, 3] x [5, 4, 7, 7] groups 2",
      {r.Floats({5, 6, 3, 3}), r.Floats({5, 4, 7, 7})},
      WithShape(Conv({2, 2}, {0, 0}, 2), "weight_shape", {6, 2, 3, 3}));

  // ---- pooling
  {
    Attrs mp = Pool({2, 2}, {2, 2}, {0, 0}, false);
    mp.Set("dilation", IntList{1, 1});
    Attrs mp3 = Pool({3, 3}, {2, 2}, {1, 1}, true);
    mp3.Set("dilation", IntList{1, 1});
    add("max_pool2d", "[5, 4, 6, 6] 2x2", {r.Floats({5, 4, 6, 6})}, mp);
    add("max_pool2d", "[5, 4, 7, 7] 3x3 stride 2 pad 1 ceil", {r.Floats({5, 4, 7, 7})}, mp3);
    // The indices of a real forward, so that they are valid.
    std::vector<Tensor> fwd =
        RunLocalKernel(OpRegistry::Global().Get("max_pool2d"), {r.Floats({5, 4, 7, 7})}, mp3);
    add("max_pool2d_grad", "dy [5, 4, 4, 4] into [5, 4, 7, 7]", {r.Floats({5, 4, 4, 4}), fwd[1]},
        WithShape(mp3, "input_shape", {5, 4, 7, 7}));
    Attrs ap = Pool({3, 3}, {2, 2}, {1, 1}, false);
    ap.Set("count_include_pad", false);
    add("avg_pool2d", "[5, 4, 7, 7] 3x3 stride 2 pad 1", {r.Floats({5, 4, 7, 7})}, ap);
    add("avg_pool2d_grad", "dy [5, 4, 4, 4] into [5, 4, 7, 7]", {r.Floats({5, 4, 4, 4})},
        WithShape(ap, "input_shape", {5, 4, 7, 7}));
    Attrs aap;
    aap.Set("output_size", IntList{3, 2});
    add("adaptive_avg_pool2d", "[5, 4, 7, 6] -> (3, 2)", {r.Floats({5, 4, 7, 6})}, aap);
    add("adaptive_avg_pool2d_grad", "dy [5, 4, 3, 2] into [5, 4, 7, 6]", {r.Floats({5, 4, 3, 2})},
        WithShape(aap, "input_shape", {5, 4, 7, 6}));
  }

  // ---- batch norm
  {
    Attrs eps;
    eps.Set("eps", 1e-5);
    auto c = [&](double lo = -1, double hi = 1) { return r.Floats({4}, lo, hi); };
    add("batch_norm_train", "[5, 4, 3]", {r.Floats({5, 4, 3}), c(), c()}, eps);
    add("batch_norm_train_grad", "[5, 4, 3]",
        {r.Floats({5, 4, 3}), c(), c(), r.Floats({5, 4, 3}), c(), c(0.5, 2), c()}, eps);
    add("batch_norm_elemt", "[5, 4, 3]", {r.Floats({5, 4, 3}), c(), c(0.5, 2), c(), c()}, eps);
    add("batch_norm_elemt", "[6, 4] f64",
        {r.Floats({6, 4}, -2, 2, f64), r.Floats({4}, -1, 1, f64), r.Floats({4}, 0.5, 2, f64),
         r.Floats({4}, -1, 1, f64), r.Floats({4}, -1, 1, f64)},
        eps);
    add("batch_norm_elemt_grad", "[5, 4, 3]",
        {r.Floats({5, 4, 3}), r.Floats({5, 4, 3}), c(), c(0.5, 2), c()}, eps);
    // Training with running statistics, updated in place (inside cuDNN on CUDA).
    Attrs mom = eps;
    mom.Set("momentum", AttrValue(0.1));
    add("batch_norm_train", "[5, 4, 3] running stats",
        {r.Floats({5, 4, 3}), c(), c(), c(), c(0.5, 2)}, mom);
    add("batch_norm_train", "[6, 4, 2, 3] running stats",
        {r.Floats({6, 4, 2, 3}, -2, 3), c(), c(), c(), c(0.5, 2)}, mom);
    add("batch_norm_train", "[7, 4] f64",
        {r.Floats({7, 4}, -2, 2, f64), r.Floats({4}, -1, 1, f64), r.Floats({4}, -1, 1, f64)}, eps);
    // Mixed precision (autocast): a bfloat16 input, float32 weight and statistics.
    add("batch_norm_train", "[5, 4, 3] bfloat16, float32 running stats",
        {r.Floats({5, 4, 3}, -1, 1, DType::kBFloat16), c(), c(), c(), c(0.5, 2)}, mom);
    add("batch_norm_train_grad", "[5, 4, 3] bfloat16, float32 statistics",
        {r.Floats({5, 4, 3}, -1, 1, DType::kBFloat16), c(), c(),
         r.Floats({5, 4, 3}, -1, 1, DType::kBFloat16), c(), c(0.5, 2), c()},
        eps);
    add("batch_norm_elemt", "[5, 4, 3] float16, float32 statistics",
        {r.Floats({5, 4, 3}, -1, 1, DType::kFloat16), c(), c(0.5, 2), c(), c()}, eps);
    for (DType half : {DType::kFloat16, DType::kBFloat16}) {
      const std::string name = DTypeName(half);
      auto h = [&](double lo = -1, double hi = 1) { return r.Floats({4}, lo, hi, half); };
      add("batch_norm_train", "[5, 4, 3] running stats " + name,
          {r.Floats({5, 4, 3}, -1, 1, half), h(), h(), h(), h(0.5, 2)}, mom);
      add("batch_norm_train_grad", "[5, 4, 3] " + name,
          {r.Floats({5, 4, 3}, -1, 1, half), h(), h(), r.Floats({5, 4, 3}, -1, 1, half), h(),
           h(0.5, 2), h()},
          eps);
      add("batch_norm_elemt", "[5, 4, 3] " + name,
          {r.Floats({5, 4, 3}, -1, 1, half), h(), h(0.5, 2), h(), h()}, eps);
      add("batch_norm_elemt_grad", "[5, 4, 3] " + name,
          {r.Floats({5, 4, 3}, -1, 1, half), r.Floats({5, 4, 3}, -1, 1, half), h(), h(0.5, 2), h()},
          eps);
    }
  }

  // ---- creation and random ops: deterministic given seed and offset
  {
    auto creation = [&](IntList shape, DType dtype) {
      return Attrs().Set("shape", shape).Set("dtype", dtype).Set("device", cpu);
    };
    add("full", "[5, 6] f32", {}, creation({5, 6}, f32).Set("value", 1.5));
    add("arange", "1:12:2 int64", {},
        Attrs()
            .Set("start", 1.0)
            .Set("end", 12.0)
            .Set("step", 2.0)
            .Set("dtype", i64)
            .Set("device", cpu));
    add("eye", "5 x 4", {},
        Attrs().Set("n", int64_t{5}).Set("m", int64_t{4}).Set("dtype", f32).Set("device", cpu));
    auto random = [&](IntList shape, DType dtype) {
      return creation(shape, dtype).Set("seed", int64_t{7}).Set("offset", int64_t{12});
    };
    add("uniform", "[5, 6]", {}, random({5, 6}, f32).Set("low", -1.0).Set("high", 1.0));
    add("normal", "[5, 6]", {}, random({5, 6}, f64).Set("mean", 0.5).Set("std", 2.0));
    add("randint", "[5, 6] in [0, 10)", {},
        random({5, 6}, i64).Set("low", int64_t{0}).Set("high", int64_t{10}));
    add("randperm", "7", {}, random({7}, i64).Set("n", int64_t{7}));
    Attrs drop;
    drop.Set("p", 0.3).Set("seed", int64_t{11}).Set("offset", int64_t{4});
    add("dropout_mask", "[5, 6] f32", {r.Floats({5, 6})}, drop);
    add("dropout_mask", "[4, 5, 6] f64", {r.Floats({4, 5, 6}, -1, 1, f64)}, drop);
  }

  // ---- optimizer updates (in place on the parameter and state)
  {
    // (param, grad, state..., 0-dim float64 hyper-parameters...), core/optim.h.
    auto h = [](std::vector<double> values) {
      std::vector<Tensor> out;
      for (double v : values) out.push_back(fn::full(Shape({}), v, DType::kFloat64));
      return out;
    };
    auto join = [](std::vector<Tensor> a, const std::vector<Tensor>& b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    Attrs sgd;
    sgd.Set("momentum", false).Set("nesterov", false).Set("maximize", false);
    add("sgd_update", "[5, 6] plain", join({r.Floats({5, 6}), r.Floats({5, 6})}, h({0.1, 0.01})),
        sgd);
    Attrs sgdm = sgd;
    sgdm.Set("momentum", true).Set("nesterov", true);
    add("sgd_update", "[5, 6] nesterov momentum",
        join({r.Floats({5, 6}), r.Floats({5, 6}), r.Floats({5, 6})}, h({0.1, 0.01, 0.9, 0.1})),
        sgdm);
    Attrs adam;
    adam.Set("amsgrad", false).Set("decoupled", true).Set("do_bias_correction", true);
    const std::vector<double> adam_h = {2, 0.01, 0.9, 0.999, 1e-8, 0.01};
    add("adam_update", "[5, 6] AdamW",
        join({r.Floats({5, 6}), r.Floats({5, 6}), r.Floats({5, 6}), r.Floats({5, 6}, 0, 1)},
             h(adam_h)),
        adam);
    Attrs ams = adam;
    ams.Set("decoupled", false).Set("amsgrad", true);
    add("adam_update", "[6, 5] amsgrad",
        join({r.Floats({6, 5}), r.Floats({6, 5}), r.Floats({6, 5}), r.Floats({6, 5}, 0, 1),
              r.Floats({6, 5}, 0.5, 1)},
             h(adam_h)),
        ams);
    // Multi-tensor forms: records (param, grad, state...[, step]) then the shared hypers; the
    // third parameter spans three chunks of the CUDA kernel.
    {
      const std::vector<Shape> shapes = {Shape({5, 6}), Shape({3, 4}), Shape({300, 130})};
      std::vector<Tensor> sgd_in, adam_in;
      for (const Shape& sh : shapes) {
        sgd_in = join(sgd_in, {r.Floats(sh), r.Floats(sh), r.Floats(sh)});
        adam_in = join(adam_in, {r.Floats(sh), r.Floats(sh), r.Floats(sh), r.Floats(sh, 0, 1)});
        adam_in.push_back(fn::full(Shape({}), 3, DType::kFloat64));
      }
      Attrs multi_sgd = sgdm;
      multi_sgd.Set("count", int64_t{3});
      add("multi_tensor_sgd_update", "3 parameters, momentum",
          join(sgd_in, h({0.1, 0.01, 0.9, 0.1})), multi_sgd);
      Attrs multi_adam = adam;
      multi_adam.Set("count", int64_t{3});
      add("multi_tensor_adam_update", "3 parameters, AdamW",
          join(adam_in, h({0.01, 0.9, 0.999, 1e-8, 0.01})), multi_adam);
      std::vector<Tensor> bf;
      for (const Shape& sh : {Shape({5, 6}), Shape({4, 7})}) {
        bf =
            join(bf, {r.Floats(sh, -1, 1, DType::kBFloat16), r.Floats(sh, -1, 1, DType::kBFloat16),
                      r.Floats(sh, -1, 1, DType::kBFloat16), r.Floats(sh, 0, 1, DType::kBFloat16)});
        bf.push_back(fn::full(Shape({}), 1, DType::kFloat64));
      }
      Attrs multi_bf = adam;
      multi_bf.Set("count", int64_t{2});
      add("multi_tensor_adam_update", "2 bfloat16 parameters, AdamW",
          join(bf, h({0.01, 0.9, 0.999, 1e-8, 0.01})), multi_bf);
      Attrs single_half = sgd;
      add("sgd_update", "[5, 6] float16",
          join({r.Floats({5, 6}, -1, 1, DType::kFloat16), r.Floats({5, 6}, -1, 1, DType::kFloat16)},
               h({0.1, 0.01})),
          single_half);
    }
    add("lamb_update", "[5, 6]",
        join({r.Floats({5, 6}), r.Floats({5, 6}), r.Floats({5, 6}), r.Floats({5, 6}, 0, 1)},
             h(adam_h)),
        Attrs().Set("decoupled", true).Set("do_bias_correction", true));
    add("adagrad_update", "[5, 6]",
        join({r.Floats({5, 6}), r.Floats({5, 6}), r.Floats({5, 6}, 0, 1)},
             h({1, 0.1, 0.01, 1e-10, 0.01})),
        Attrs().Set("maximize", false));
    add("rmsprop_update", "[5, 6] centered momentum",
        join({r.Floats({5, 6}), r.Floats({5, 6}), r.Floats({5, 6}, 1, 2),
              r.Floats({5, 6}, -0.5, 0.5), r.Floats({5, 6})},
             h({1, 0.01, 0.99, 1e-8, 0.01, 0.9})),
        Attrs().Set("centered", true).Set("momentum", true).Set("maximize", false));
    add("adadelta_update", "[5, 6]",
        join({r.Floats({5, 6}), r.Floats({5, 6}), r.Floats({5, 6}, 0, 1), r.Floats({5, 6}, 0, 1)},
             h({1, 1.0, 0.9, 1e-6, 0.01})),
        Attrs().Set("maximize", false));
    add("ftrl_update", "[5, 6]",
        join({r.Floats({5, 6}), r.Floats({5, 6}), r.Floats({5, 6}, 0.1, 1), r.Floats({5, 6})},
             h({0.1, -0.5, 0.01, 0.01, 0.1, 0.01})),
        Attrs());
  }
  // ---- complex tensors (core/ops/complex.h): the two pair views
  add("view_as_complex", "[4, 3, 2] f32", {r.Floats({4, 3, 2})});
  add("view_as_complex", "[2, 3, 2] f64", {r.Floats({2, 3, 2}, -2, 2, f64)});
  add("view_as_real", "[4, 3] complex64", {fn::view_as_complex(r.Floats({4, 3, 2}))});

  return s;
}

const std::vector<Sample>& Samples() {
  static const auto* samples = new std::vector<Sample>(MakeSamples());
  return *samples;
}

}  // namespace testing
}  // namespace oneflow
