#include "oneflow/api/cpp/nn.h"

#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "oneflow/global/global_tensor.h"

namespace oneflow {
namespace nn {
namespace {

// PyTorch's default for Linear and Conv2d: kaiming_uniform(a = sqrt(5)) on the weight, which is
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), then the bias from the same range; drawn in that order.
std::pair<Tensor, Tensor> DefaultInit(const Shape& weight_shape, int64_t bias_size) {
  int64_t fan_in = 1;
  for (int64_t d = 1; d < weight_shape.ndim(); ++d) fan_in *= weight_shape[d];
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  Tensor w = fn::uniform(weight_shape, -bound, bound);
  Tensor b;
  if (bias_size > 0) b = fn::uniform(Shape({bias_size}), -bound, bound);
  return {w, b};
}

std::string ShapeText(const Shape& s) { return s.ToString(); }

}  // namespace

Tensor* Module::register_parameter(const std::string& name, Tensor t) {
  t.set_requires_grad(true);
  params_.emplace_back(name, std::move(t));
  return &params_.back().second;
}

Tensor* Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, std::move(t));
  return &buffers_.back().second;
}

void Module::Collect(const std::string& prefix, bool params, bool buffers, StateDict* out) const {
  if (params) {
    for (const auto& [n, t] : params_) out->emplace_back(prefix + n, t);
  }
  if (buffers) {
    for (const auto& [n, t] : buffers_) out->emplace_back(prefix + n, t);
  }
  for (const auto& [n, m] : children_) m->Collect(prefix + n + ".", params, buffers, out);
}

void Module::Slots(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>* out,
                   bool params_only) {
  for (auto& [n, t] : params_) out->emplace_back(prefix + n, &t);
  if (!params_only) {
    for (auto& [n, t] : buffers_) out->emplace_back(prefix + n, &t);
  }
  for (auto& [n, m] : children_) m->Slots(prefix + n + ".", out, params_only);
}

StateDict Module::named_parameters() const {
  StateDict out;
  Collect("", true, false, &out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

StateDict Module::named_buffers() const {
  StateDict out;
  Collect("", false, true, &out);
  return out;
}

StateDict Module::state_dict() const {
  // Python's order: each module's parameters, then its buffers, then its children.
  StateDict out;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m,
                                                                    const std::string& prefix) {
    for (const auto& [n, t] : m.params_) out.emplace_back(prefix + n, t.detach());
    for (const auto& [n, t] : m.buffers_) out.emplace_back(prefix + n, t.detach());
    for (const auto& [n, c] : m.children_) walk(*c, prefix + n + ".");
  };
  walk(*this, "");
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  Slots("", &slots);
  std::map<std::string, const Tensor*> given;
  for (const auto& [n, t] : state) given[n] = &t;
  std::vector<std::string> missing, problems;
  std::vector<std::pair<Tensor*, const Tensor*>> copies;
  std::map<std::string, bool> known;
  for (auto& [n, slot] : slots) {
    known[n] = true;
    auto it = given.find(n);
    if (it == given.end()) {
      missing.push_back(n);
      continue;
    }
    const Tensor& src = *it->second;
    if (src.shape() != slot->shape()) {
      problems.push_back(StrCat("size mismatch for ", n, ": checkpoint has shape ",
                                ShapeText(src.shape()), ", model has shape ",
                                ShapeText(slot->shape())));
    } else if (src.dtype() != slot->dtype()) {
      problems.push_back(StrCat("dtype mismatch for ", n, ": checkpoint has ",
                                DTypeName(src.dtype()), ", model has ", DTypeName(slot->dtype())));
    } else {
      copies.emplace_back(slot, &src);
    }
  }
  std::vector<std::string> unexpected;
  for (const auto& [n, t] : state) {
    if (!known.count(n)) unexpected.push_back(n);
  }
  std::string msg;
  auto list = [](const std::vector<std::string>& names) {
    std::string s = "[";
    for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
    return s + "]";
  };
  if (strict && !missing.empty()) msg += StrCat("missing keys ", list(missing));
  if (strict && !unexpected.empty()) {
    msg += StrCat(msg.empty() ? "" : "; ", "unexpected keys ", list(unexpected));
  }
  for (const auto& p : problems) msg += (msg.empty() ? "" : "; ") + p;
  if (!msg.empty()) throw Error(StrCat(name(), ".load_state_dict: ", msg));
  for (auto& [slot, src] : copies) {
    if (slot->is_global() && !src->is_global()) {
      // A whole tensor from a file into a global parameter: keep this rank's slice.
      const auto& meta = global::Meta(*slot);
      fn::copy_(global::ToLocal(*slot),
                global::ToLocal(global::FromWhole(*src, meta.placement, meta.nd_sbp)));
    } else {
      fn::copy_(*slot, *src);
    }
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

void Module::zero_grad() {
  for (auto& [n, p] : params_) p.set_grad(Tensor());
  for (auto& [n, m] : children_) m->zero_grad();
}

void Module::to_global(const sbp::Placement& placement, const sbp::NdSbp& nd_sbp) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  Slots("", &slots);
  std::vector<std::pair<std::string, Tensor*>> params;
  Slots("", &params, /*params_only=*/true);
  std::set<const Tensor*> is_param;
  for (auto& [n, p] : params) is_param.insert(p);
  for (auto& [n, slot] : slots) {
    Tensor g = global::FromWhole(slot->detach(), placement, nd_sbp);
    if (is_param.count(slot)) g.set_requires_grad(true);
    *slot = g;
  }
}

// ---- layers ----

Linear::Linear(int64_t in_features, int64_t out_features, bool bias) {
  auto [w, b] = DefaultInit(Shape({out_features, in_features}), bias ? out_features : 0);
  weight_ = register_parameter("weight", w);
  if (bias) bias_ = register_parameter("bias", b);
}

Tensor Linear::forward(const Tensor& x) {
  return fn::linear(x, *weight_, bias_ ? *bias_ : Tensor());
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, fn::IntList kernel_size,
               Conv2dOptions options)
    : options_(std::move(options)) {
  if (kernel_size.size() == 1) kernel_size.push_back(kernel_size[0]);
  if (kernel_size.size() != 2) {
    throw Error(StrCat("Conv2d: kernel_size needs 1 or 2 values, got ", kernel_size.size()));
  }
  if (options_.groups < 1 || in_channels % options_.groups || out_channels % options_.groups) {
    throw Error(StrCat("Conv2d: in_channels ", in_channels, " and out_channels ", out_channels,
                       " must be divisible by groups ", options_.groups));
  }
  auto [w, b] = DefaultInit(
      Shape({out_channels, in_channels / options_.groups, kernel_size[0], kernel_size[1]}),
      options_.bias ? out_channels : 0);
  weight_ = register_parameter("weight", w);
  if (options_.bias) bias_ = register_parameter("bias", b);
}

Tensor Conv2d::forward(const Tensor& x) {
  return fn::conv2d(x, *weight_, bias_ ? *bias_ : Tensor(), options_.stride, options_.padding,
                    options_.dilation, options_.groups);
}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum)
    : eps_(eps), momentum_(momentum) {
  weight_ = register_parameter("weight", fn::ones(Shape({num_features})));
  bias_ = register_parameter("bias", fn::zeros(Shape({num_features})));
  running_mean_ = register_buffer("running_mean", fn::zeros(Shape({num_features})));
  running_var_ = register_buffer("running_var", fn::ones(Shape({num_features})));
  num_batches_tracked_ =
      register_buffer("num_batches_tracked", fn::zeros(Shape({}), DType::kInt64));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (x.ndim() != 4) {
    throw Error(StrCat("BatchNorm2d: expected 4D input (got ", x.ndim(), "D input)"));
  }
  if (is_training()) fn::copy_(*num_batches_tracked_, fn::add_scalar(*num_batches_tracked_, 1));
  return fn::batch_norm(x, *running_mean_, *running_var_, *weight_, *bias_, is_training(),
                        momentum_, eps_);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim)
    : num_embeddings_(num_embeddings) {
  weight_ = register_parameter("weight", fn::normal(Shape({num_embeddings, embedding_dim}), 0, 1));
}

Tensor Embedding::forward(const Tensor& indices) {
  if (indices.dtype() != DType::kInt64 && indices.dtype() != DType::kInt32) {
    throw Error(
        StrCat("Embedding: indices must be int64 or int32, got ", DTypeName(indices.dtype())));
  }
  std::vector<int64_t> out_dims = indices.shape().dims();
  out_dims.push_back(weight_->size(1));
  Tensor flat = fn::reshape(indices, {indices.numel()});
  return fn::reshape(fn::index_select(*weight_, 0, flat), out_dims);
}

LayerNorm::LayerNorm(fn::IntList normalized_shape, double eps)
    : shape_(std::move(normalized_shape)), eps_(eps) {
  weight_ = register_parameter("weight", fn::ones(Shape(shape_)));
  bias_ = register_parameter("bias", fn::zeros(Shape(shape_)));
}

Tensor LayerNorm::forward(const Tensor& x) {
  const int64_t k = static_cast<int64_t>(shape_.size());
  for (int64_t i = 0; i < k; ++i) {
    if (x.ndim() < k || x.size(x.ndim() - k + i) != shape_[i]) {
      throw Error(StrCat("LayerNorm: input of shape ", ShapeText(x.shape()),
                         " does not end with normalized_shape ", ShapeText(Shape(shape_))));
    }
  }
  fn::IntList dims;
  for (int64_t i = x.ndim() - k; i < x.ndim(); ++i) dims.push_back(i);
  Tensor mean = fn::mean(x, dims, true);
  Tensor centered = fn::sub(x, mean);
  Tensor var = fn::mean(fn::square(centered), dims, true);
  Tensor normed = fn::mul(centered, fn::rsqrt(fn::add_scalar(var, eps_)));
  return fn::add(fn::mul(normed, *weight_), *bias_);
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(children().size()), std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& [n, m] : children()) y = m->forward(y);
  return y;
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(children().size()), std::move(m));
}

Tensor ModuleList::forward(const Tensor&) {
  throw Error("ModuleList: has no forward; call its modules in your own forward");
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> m) {
  for (const auto& [n, c] : children()) {
    if (n == key) throw Error(StrCat("ModuleDict: key '", key, "' is already taken"));
  }
  register_module(key, std::move(m));
}

Tensor ModuleDict::forward(const Tensor&) {
  throw Error("ModuleDict: has no forward; call its modules in your own forward");
}

Module& ModuleDict::operator[](const std::string& key) const {
  for (const auto& [n, c] : children()) {
    if (n == key) return *c;
  }
  throw Error(StrCat("ModuleDict: no module named '", key, "'"));
}

}  // namespace nn
}  // namespace oneflow
