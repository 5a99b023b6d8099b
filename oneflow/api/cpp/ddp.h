// DistributedDataParallel for a C++ module, as Python's: every rank holds a replica; at
// construction the replicas are checked to have the same parameter shapes and take rank 0's
// values (parameters and buffers); each forward arms the gradient reducer, whose buckets are
// all-reduced (averaged) during backward, so after loss.backward() every rank holds the
// gradients of the whole batch. Buffers (BatchNorm's statistics) are broadcast from rank 0
// before each training forward. state_dict() keys carry "module.", as PyTorch's.
//
//   auto model = std::make_shared<nn::DistributedDataParallel>(net);
//   Tensor loss = fn::cross_entropy(model->forward(x_shard), y_shard);
//   opt.zero_grad(); loss.backward(); opt.step();
#pragma once

#include <memory>

#include "oneflow/api/cpp/nn.h"
#include "oneflow/ddp/reducer.h"

namespace oneflow {
namespace nn {

class DistributedDataParallel : public Module {
 public:
  // comm: the group to average over (default: every rank of the job).
  explicit DistributedDataParallel(std::shared_ptr<Module> module, ddp::ReducerOptions options = {},
                                   runtime::Communicator* comm = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "DistributedDataParallel"; }
  Module& module() const { return *module_; }
  // While false (no_sync), gradients accumulate locally and nothing is reduced.
  void set_sync(bool sync) { reducer_->set_sync(sync); }
  ddp::ReducerStats stats() const { return reducer_->stats(); }

 private:
  std::shared_ptr<Module> module_;
  runtime::Communicator& comm_;
  std::vector<Tensor> buffers_;
  std::shared_ptr<ddp::Reducer> reducer_;
};

}  // namespace nn
}  // namespace oneflow
