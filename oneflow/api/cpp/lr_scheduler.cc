#include "oneflow/api/cpp/lr_scheduler.h"

#include <cmath>

#include "core/error.h"

namespace oneflow {
namespace optim {

StepLR::StepLR(double& lr, int64_t step_size, double gamma)
    : LRScheduler(lr), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1) throw Error(StrCat("StepLR: step_size must be at least 1, got ", step_size));
}

double StepLR::LrAt(int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(double& lr, int64_t t_max, double eta_min)
    : LRScheduler(lr), t_max_(t_max), eta_min_(eta_min) {
  if (t_max < 1) throw Error(StrCat("CosineAnnealingLR: T_max must be at least 1, got ", t_max));
}

double CosineAnnealingLR::LrAt(int64_t epoch) const {
  const double pi = std::acos(-1.0);
  return eta_min_ +
         (base_lr() - eta_min_) *
             (1 + std::cos(pi * static_cast<double>(epoch) / static_cast<double>(t_max_))) / 2;
}

double ExponentialLR::LrAt(int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch));
}

}  // namespace optim
}  // namespace oneflow
