// Optimizers: SGD (momentum, dampening, nesterov, weight decay), Adam and AdamW, with
// PyTorch's update rules. The per-parameter updates are registered ops (sgd_update,
// adam_update) that work in place outside autograd; Python's oneflow.optim calls the same ops.
//
//   optim::SGD opt(model_params, {.lr = 0.1, .momentum = 0.9});
//   loss.backward(); opt.step(); opt.zero_grad();
#pragma once

#include <vector>

#include "core/tensor.h"

namespace oneflow {
namespace optim {

// One SGD step on param (in place). buf: momentum buffer (undefined when momentum == 0);
// first_step sets buf to the gradient, as PyTorch does on a parameter's first update.
void SgdUpdate(const Tensor& param, const Tensor& grad, const Tensor& buf, double lr,
               double momentum, double dampening, bool nesterov, double weight_decay,
               bool first_step, bool maximize = false);
// One Adam step (AdamW when decoupled). step counts from 1. max_exp_avg_sq: amsgrad only.
void AdamUpdate(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, int64_t step, double lr,
                double beta1, double beta2, double eps, double weight_decay, bool amsgrad,
                bool decoupled);

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // set_to_none: drop the gradients (PyTorch's default) instead of zero-filling them.
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& params() const { return params_; }

 protected:
  std::vector<Tensor> params_;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  SGDOptions& options() { return options_; }

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled = false);
  void step() override;
  AdamOptions& options() { return options_; }

 private:
  AdamOptions options_;
  bool decoupled_;
  int64_t step_ = 0;
  std::vector<Tensor> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
};

// Adam with decoupled weight decay (default 1e-2, as PyTorch).
class AdamW : public Adam {
 public:
  static AdamOptions Defaults() {
    AdamOptions o;
    o.weight_decay = 1e-2;
    return o;
  }
  AdamW(std::vector<Tensor> params, AdamOptions options = Defaults())
      : Adam(std::move(params), options, /*decoupled=*/true) {}
};

}  // namespace optim
}  // namespace oneflow
