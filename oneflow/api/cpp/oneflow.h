// The C++ API in one header: tensors and ops (fn::), autograd, optimizers and schedulers,
// modules (nn::), DDP for a module, state dicts on disk, the runtime (ranks, collectives) and
// global tensors (placements, SBP, to_global/to_local with gradients).
//
//   #include "oneflow/api/cpp/oneflow.h"
//   using namespace oneflow;
//   int main() {
//     oneflow::Init();  // joins the job (the launcher's, mpirun's or srun's ranks)
//     sbp::Placement world(DeviceType::kCPU, {0, 1});
//     Tensor x = global::FromWhole(fn::rand({64, 2}), world, {sbp::Sbp::Split(0)});
//     auto model = std::make_shared<nn::Linear>(2, 1);
//     model->to_global(world, {sbp::Sbp::Broadcast()});    // data parallel
//     ... fn::mse_loss(model->forward(x), y), loss.backward(), optim::SGD ...
//     nn::SaveStateDict(model->state_dict(), "model.safetensors");  // Python: flow.load(...)
//   }
//
// Build against the installed SDK (tools/install_sdk.sh): CMake `find_package(OneFlow CONFIG
// REQUIRED)` and `target_link_libraries(app OneFlow::oneflow)`, or
// `g++ -std=c++17 app.cc $(pkg-config --cflags --libs oneflow)`.
#pragma once

#include "core/autograd.h"
#include "core/functional.h"
#include "core/ops/nn/nn.h"
#include "core/optim.h"
#include "oneflow/api/cpp/ddp.h"
#include "oneflow/api/cpp/lr_scheduler.h"
#include "oneflow/api/cpp/nn.h"
#include "oneflow/api/cpp/serialize.h"
#include "oneflow/api/cpp/version.h"
#include "oneflow/ddp/reducer.h"
#include "oneflow/global/global_tensor.h"
#include "runtime/env.h"
#include "sbp/sbp.h"

namespace oneflow {

// Joins the job now (a no-op in a job of one process): rank 0 serves the control plane and
// every rank meets the others, so a rank that a placement leaves out still does its part.
// Call it first thing in main(), as Python does at import.
inline void Init() { runtime::Env::Get(); }

}  // namespace oneflow
