// What the layers above core install at start-up so that core works on global tensors and on
// CUDA devices without knowing ranks, SBP or the CUDA runtime: with core/trace.h, core's
// inversion points (DESIGN.md, Layers). Any file in core may read them; this file calls
// nothing in core back.
//
//   if (t.is_global() && GetGlobalHooks().whole) t = GetGlobalHooks().whole(t);
//   Tensor y = GetDeviceHooks().copy_to(x, Device::CPU());  // a copy to another device
#pragma once

#include <vector>

#include "core/attrs.h"
#include "core/tensor.h"

namespace oneflow {

struct OpDef;

// The one inversion point from core to the layer above: what oneflow/global installs at
// start-up so that core's dispatch and autograd work on global tensors without knowing ranks
// or SBP (DESIGN.md). Unset (null) members: no global tensors exist.
struct GlobalHooks {
  // Runs an op whose inputs include a global tensor and returns global outputs; CallOp records
  // autograd around it.
  std::vector<Tensor> (*interpret)(const OpDef& op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs) = nullptr;
  // Adapts a gradient before it reaches a leaf (boxes it to the leaf's nd_sbp). `accumulating`:
  // it goes into leaf's .grad (backward), not back to a caller (autograd.grad); the hook may
  // then leave .grad to be finished by a callback it queues for the end of the pass
  // (QueueBackwardCallback), as bucketed gradient all-reduces do.
  Tensor (*leaf_grad)(const Tensor& leaf, const Tensor& grad, bool accumulating) = nullptr;
  // A tensor of a value laid out like a global one (autograd's seeds and zero gradients).
  Tensor (*full_like)(const Tensor& like, double value) = nullptr;
  // In-place copy and fill of global tensors (fn::copy_ and fn::fill_ hand those over).
  void (*copy)(const Tensor& dst, const Tensor& src) = nullptr;
  void (*fill)(const Tensor& dst, double value) = nullptr;
  // `local` (the same values on every rank) as a broadcast tensor on like's placement:
  // composites in core lift the constants they make (positions, ones) with it.
  Tensor (*on_placement_of)(const Tensor& like, const Tensor& local) = nullptr;
  // The whole value of a global tensor as a local one, on every rank (collective): how core
  // reads a global scalar on the host.
  Tensor (*whole)(const Tensor& global) = nullptr;
};
void SetGlobalHooks(const GlobalHooks& hooks);
const GlobalHooks& GetGlobalHooks();

// What the CUDA backend installs at start-up for device-agnostic code in core (null in a
// build without CUDA): copies between devices, and strided copies on a device. Under the
// stand-in CUDA device (FakeCuda()) GetDeviceHooks gives its byte copies instead, whatever was
// installed; copy_strided is then null (its memory is host memory: see OnHost).
struct DeviceHooks {
  // A contiguous copy of contiguous `src` on another device.
  Tensor (*copy_to)(const Tensor& src, const Device& device) = nullptr;
  // dst (any strides) = src (broadcast to dst's shape, converted to its dtype), one CUDA device.
  void (*copy_strided)(const Tensor& dst, const Tensor& src) = nullptr;
};
void SetDeviceHooks(const DeviceHooks& hooks);
const DeviceHooks& GetDeviceHooks();

}  // namespace oneflow
