#include "oneflow/api/cpp/ddp.h"

#include "core/error.h"
#include "runtime/env.h"

namespace oneflow {
namespace nn {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 ddp::ReducerOptions options,
                                                 runtime::Communicator* comm)
    : module_(register_module("module", std::move(module))),
      comm_(comm ? *comm : runtime::Env::Get().WorldComm()) {
  std::vector<Tensor> params;
  std::vector<std::string> names;
  for (auto& [n, p] : module_->named_parameters()) {
    if (p.is_global()) {
      throw Error(StrCat("DistributedDataParallel: parameter '", n,
                         "' is global; DDP wraps a "
                         "local module (a global module with broadcast parameters is already "
                         "data parallel)"));
    }
    params.push_back(p);
    names.push_back(n);
  }
  for (auto& [n, b] : module_->named_buffers()) buffers_.push_back(b);
  ddp::VerifyParamShapes(comm_, params, names);
  std::vector<Tensor> synced = params;
  synced.insert(synced.end(), buffers_.begin(), buffers_.end());
  ddp::BroadcastCoalesced(comm_, synced, comm_.ranks().front());
  reducer_ = ddp::Reducer::Create(params, names, comm_, options);
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  if (module_->is_training() && !buffers_.empty()) {
    ddp::BroadcastCoalesced(comm_, buffers_, comm_.ranks().front());
  }
  if (module_->is_training()) reducer_->PrepareForBackward();
  return module_->forward(x);
}

}  // namespace nn
}  // namespace oneflow
