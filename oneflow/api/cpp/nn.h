// Modules for C++ training, as Python's oneflow.nn (and PyTorch's) has them: a Module owns named
// parameters, buffers and child modules; state_dict() names them with dotted paths
// ("0.weight", "bn.running_mean"), the same names Python's model of the same structure uses,
// so a state dict moves between the two (see serialize.h). Parameters are initialised as
// Python's (and PyTorch's) are, drawing from the same generator in the same order: with the same
// fn::manual_seed, a C++ model and its Python twin start from the same weights.
//
//   auto model = std::make_shared<nn::Sequential>();
//   model->push_back(std::make_shared<nn::Linear>(784, 128));
//   model->push_back(std::make_shared<nn::ReLU>());
//   model->push_back(std::make_shared<nn::Linear>(128, 10));
//   optim::SGD opt(model->parameters(), {.lr = 0.1});
//   Tensor loss = fn::cross_entropy(model->forward(x), y);
//   opt.zero_grad(); loss.backward(); opt.step();
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/functional.h"
#include "sbp/sbp.h"

namespace oneflow {
namespace nn {

// Ordered (name, tensor) pairs, as Python's OrderedDict state dict.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
  // The class name, for messages ("Linear").
  virtual std::string name() const = 0;

  // Recursive, in registration order, children's entries after this module's own.
  StateDict named_parameters() const;
  std::vector<Tensor> parameters() const;
  StateDict named_buffers() const;
  // Parameters and buffers (detached views of them: they share storage).
  StateDict state_dict() const;
  // Copies every entry into the module's tensors in place, after checking all of them: a
  // missing or unexpected key (strict), a shape or dtype mismatch is one error naming every
  // problem, and then nothing has been copied.
  void load_state_dict(const StateDict& state, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();
  // Replaces every parameter and buffer by a global tensor on placement with layout nd_sbp
  // (broadcast: data parallel), built from this rank's values (rank order decides nothing for
  // broadcast: every rank must hold the same values, as after the same seed).
  void to_global(const sbp::Placement& placement, const sbp::NdSbp& nd_sbp);

 protected:
  // The returned pointer stays valid for the module's life and follows to_global.
  Tensor* register_parameter(const std::string& name, Tensor t);
  Tensor* register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }

 private:
  void Collect(const std::string& prefix, bool params, bool buffers, StateDict* out) const;
  // Every parameter and buffer slot, by dotted name (what load_state_dict and to_global write).
  void Slots(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>* out,
             bool params_only = false);

  std::deque<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// y = x W^T + b; weight (out, in). Init: kaiming_uniform(a = sqrt(5)), bias U(-1/sqrt(in), ..).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Linear"; }
  const Tensor& weight() const { return *weight_; }

 private:
  Tensor* weight_;
  Tensor* bias_ = nullptr;
};

struct Conv2dOptions {
  fn::IntList stride = {1, 1};
  fn::IntList padding = {0, 0};
  fn::IntList dilation = {1, 1};
  int64_t groups = 1;
  bool bias = true;
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, fn::IntList kernel_size,
         Conv2dOptions options = {});
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Conv2d"; }

 private:
  Conv2dOptions options_;
  Tensor* weight_;
  Tensor* bias_ = nullptr;
};

// Batch statistics in training (running statistics updated with momentum), running
// statistics in eval; buffers running_mean, running_var, num_batches_tracked (int64).
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "BatchNorm2d"; }

 private:
  double eps_, momentum_;
  Tensor *weight_, *bias_, *running_mean_, *running_var_, *num_batches_tracked_;
};

// Rows of weight (num_embeddings, embedding_dim) picked by integer indices of any shape.
// Init: N(0, 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) override;
  std::string name() const override { return "Embedding"; }

 private:
  int64_t num_embeddings_;
  Tensor* weight_;
};

// Normalises over the last normalized_shape.size() dims (biased variance), then weight and
// bias (ones and zeros).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(fn::IntList normalized_shape, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "LayerNorm"; }

 private:
  fn::IntList shape_;
  double eps_;
  Tensor *weight_, *bias_;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return fn::relu(x); }
  std::string name() const override { return "ReLU"; }
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override { return fn::flatten(x, start_, end_); }
  std::string name() const override { return "Flatten"; }

 private:
  int64_t start_, end_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(fn::IntList kernel_size, fn::IntList stride = {})
      : kernel_(std::move(kernel_size)), stride_(stride.empty() ? kernel_ : std::move(stride)) {}
  Tensor forward(const Tensor& x) override {
    return fn::max_pool2d(x, kernel_, stride_, {0, 0}, {1, 1}, false);
  }
  std::string name() const override { return "MaxPool2d"; }

 private:
  fn::IntList kernel_, stride_;
};

// Any function of one tensor as a module (no parameters): nn::Functional(fn::sigmoid).
class Functional : public Module {
 public:
  explicit Functional(std::function<Tensor(const Tensor&)> f) : f_(std::move(f)) {}
  Tensor forward(const Tensor& x) override { return f_(x); }
  std::string name() const override { return "Functional"; }

 private:
  std::function<Tensor(const Tensor&)> f_;
};

// Children named "0", "1", ... applied in order.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Sequential"; }
  size_t size() const { return children().size(); }
  Module& operator[](size_t i) const { return *children().at(i).second; }
};

// Children named "0", "1", ..., held (not applied): forward is the caller's loop.
class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;  // an error: a ModuleList has no forward
  std::string name() const override { return "ModuleList"; }
  size_t size() const { return children().size(); }
  Module& operator[](size_t i) const { return *children().at(i).second; }
};

// Children by name, held.
class ModuleDict : public Module {
 public:
  void insert(const std::string& key, std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;  // an error: a ModuleDict has no forward
  std::string name() const override { return "ModuleDict"; }
  Module& operator[](const std::string& key) const;
};

}  // namespace nn
}  // namespace oneflow
