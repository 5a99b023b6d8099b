// Optimizers: SGD (momentum, dampening, nesterov, weight decay), Adam and AdamW, with
// OneFlow's update rules, and the update ops that Python's oneflow.optim calls too (SGD, Adam,
// LAMB, Adagrad, RMSprop, Adadelta, FTRL). See DESIGN.md for how ops are declared.
//
//   optim::SGD opt(model_params, {.lr = 0.1, .momentum = 0.9});
//   loss.backward(); opt.step(); opt.zero_grad();
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/tensor.h"

namespace oneflow {
namespace optim {

// The update ops (one fused pass over param, grad and state, in place, outside autograd), with
// OneFlow's update rules. Every op takes its tensors as
//   (param, grad, state tensors..., hyper-parameters...)
// where each hyper-parameter (learning rate, betas, weight decay, ...) and the step count is a
// 0-dim float64 tensor on the parameter's device: nn.Graph's trace captures them like any
// tensor, so a new learning rate is a new value in the same tensor, never an edit of the op.
// Which state and hyper-parameters an op takes follows from its bool attrs (UpdateLayout).
// Step counts are incremented by the op before it uses them (they count from 0 before the first
// update). Python's oneflow.optim calls the ops through `_C.optim_update_(name, tensors, attrs)`.
//
//   sgd_update       attrs momentum, nesterov, maximize
//                    state [momentum_buffer]; hyper lr, weight_decay[, momentum, dampening]
//   adam_update      attrs amsgrad, decoupled, do_bias_correction, maximize
//                    state exp_avg, exp_avg_sq[, max_exp_avg_sq];
//                    hyper step, lr, beta1, beta2, eps, weight_decay
//   lamb_update      attrs decoupled, do_bias_correction
//                    state exp_avg, exp_avg_sq; hyper step, lr, beta1, beta2, eps, weight_decay
//   adagrad_update   attrs maximize;  state sum; hyper step, lr, lr_decay, eps, weight_decay
//   rmsprop_update   attrs centered, momentum, maximize
//                    state square_avg[, grad_avg][, momentum_buffer];
//                    hyper step, lr, alpha, eps, weight_decay[, momentum]
//   adadelta_update  attrs maximize;  state square_avg, acc_delta;
//                    hyper step, lr, rho, eps, weight_decay
//   ftrl_update      state accumulate, z; hyper lr, lr_power, lambda1, lambda2, beta,
//                    weight_decay
struct UpdateLayout {
  std::vector<std::string> state;  // names of the state inputs, in order
  std::vector<std::string> hyper;  // names of the 0-dim hyper-parameter inputs, in order
};
// The layout of update op `op` under attrs; throws naming the op when it is not an update op.
UpdateLayout LayoutOf(const std::string& op, const Attrs& attrs);
// The attrs of update op `op` from flag names and values (names from Python: each must be one of
// the op's flags, else one line naming the op and the flag).
Attrs UpdateFlags(const std::string& op, const std::map<std::string, bool>& flags);
// Runs update op `op` on (param, grad, state..., hyper...), checking the count first.
void Update(const std::string& op, const std::vector<Tensor>& tensors, const Attrs& attrs);
// Runs the multi-tensor form of `op` (sgd_update or adam_update: multi_tensor_sgd_update,
// multi_tensor_adam_update) on `count` records (param, grad, state...[, step]) followed by the
// op's other hyper-parameters, shared: on CUDA every parameter in one launch per chunk list.
// Every parameter must have one dtype and device.
void MultiUpdate(const std::string& op, const std::vector<Tensor>& tensors, int64_t count,
                 const Attrs& attrs);
// A 0-dim float64 hyper-parameter tensor on t's device (or placement, broadcast).
Tensor HyperLike(const Tensor& t, double value);

// Convenience forms with plain numbers (hyper tensors made on the spot). SGD: buf undefined
// when momentum == 0; the buffer starts at zero, so the first step stores (1 - dampening) * d.
void SgdUpdate(const Tensor& param, const Tensor& grad, const Tensor& buf, double lr,
               double momentum, double dampening, bool nesterov, double weight_decay,
               bool maximize = false);
// One Adam step (AdamW when decoupled); step: the count before this update (0 for the first),
// incremented in place. max_exp_avg_sq: amsgrad only.
void AdamUpdate(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const Tensor& step,
                double lr, double beta1, double beta2, double eps, double weight_decay,
                bool amsgrad, bool decoupled);

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
  std::vector<Tensor> step_, exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
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
