// The C++ API in one header: tensors and ops (fn::), autograd, optimizers, the runtime
// (ranks, collectives) and global tensors (placements, SBP, to_global/to_local).
//
//   #include "oneflow/api/cpp/oneflow.h"
//   using namespace oneflow;
//   sbp::Placement world(DeviceType::kCPU, {0, 1});
//   Tensor x = global::FromWhole(fn::rand({64, 2}), world, {sbp::Sbp::Split(0)});
//   Tensor w = global::LocalToGlobal(fn::zeros({2, 1}), world, {sbp::Sbp::Broadcast()});
//   ... fn::matmul(x, w), loss.backward(), optim::SGD over {w} ...
#pragma once

#include "core/autograd.h"
#include "core/functional.h"
#include "core/ops/nn/nn.h"
#include "core/optim.h"
#include "oneflow/ddp/reducer.h"
#include "oneflow/global/global_tensor.h"
#include "runtime/env.h"
#include "sbp/sbp.h"
