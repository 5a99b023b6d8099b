// Learning-rate schedules for the C++ optimizers, PyTorch's closed forms. A scheduler holds a
// reference to the optimizer's rate (its options().lr), takes the rate it finds there as the
// base, and sets it on every step() (once per epoch, after the optimizer's steps).
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1});
//   optim::StepLR sched(opt.options().lr, /*step_size=*/30, /*gamma=*/0.1);
//   for (epoch ...) { ... opt.step() ...; sched.step(); }
#pragma once

#include <cstdint>

namespace oneflow {
namespace optim {

class LRScheduler {
 public:
  explicit LRScheduler(double& lr) : lr_(lr), base_lr_(lr) {}
  virtual ~LRScheduler() = default;
  void step() { lr_ = LrAt(++last_epoch_); }
  int64_t last_epoch() const { return last_epoch_; }
  double get_last_lr() const { return lr_; }

 protected:
  virtual double LrAt(int64_t epoch) const = 0;
  double base_lr() const { return base_lr_; }

 private:
  double& lr_;
  double base_lr_;
  int64_t last_epoch_ = 0;
};

// base_lr * gamma ^ (epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(double& lr, int64_t step_size, double gamma = 0.1);

 protected:
  double LrAt(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(double& lr, int64_t t_max, double eta_min = 0);

 protected:
  double LrAt(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// base_lr * gamma ^ epoch
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(double& lr, double gamma) : LRScheduler(lr), gamma_(gamma) {}

 protected:
  double LrAt(int64_t epoch) const override;

 private:
  double gamma_;
};

}  // namespace optim
}  // namespace oneflow
