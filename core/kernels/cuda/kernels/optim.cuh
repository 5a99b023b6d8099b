// Multi-tensor optimizer updates (core/kernels/cuda/optim.cu): SGD and Adam/AdamW over many
// parameters in one launch. A launch takes a list of up to kOptimMaxTensors tensors and up to
// kOptimMaxBlocks blocks; block b updates chunk block_chunk[b] (kOptimChunk elements) of tensor
// block_tensor[b]. The arithmetic is the CPU kernels' (core/optim.cc) in Acc<T> (float for the
// half types, whose parameters are read and written in their own type), so results agree up to
// rounding. The hyper-parameters are 0-dim float64 tensors on the device (no host read); step
// counts are incremented by IncrementStepsKernel before the update launches read them.
//
//   OptimList<float, 2> list{};   // p, g, exp_avg, exp_avg_sq, step, n of each tensor
//   OF_CUDA_LAUNCH(AdamMultiKernel<float, false>, blocks, kOptimThreads, 0, stream, list, hyper);
#pragma once

#include <cstdint>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/launch.cuh"

namespace oneflow {
namespace cuda {

// The list stays under 4 KiB of kernel arguments (the limit before CUDA 12.1).
constexpr int kOptimMaxTensors = 24;
constexpr int kOptimMaxBlocks = 160;
constexpr int64_t kOptimChunk = 16384;
constexpr int kOptimThreads = 256;

// The tensors of one launch. kState: state tensors per parameter (SGD 1, Adam 2 or 3).
template <typename T, int kState>
struct OptimList {
  T* p[kOptimMaxTensors];
  const T* g[kOptimMaxTensors];
  T* state[kState][kOptimMaxTensors];
  const double* step[kOptimMaxTensors];  // the count after this step's increment; Adam only
  int64_t n[kOptimMaxTensors];
  int block_tensor[kOptimMaxBlocks];
  int block_chunk[kOptimMaxBlocks];
};

// Host side: packs the chunks of tensors k < count (numel(k) elements) into lists and calls
// launch(list, blocks) whenever a list is full (kOptimMaxTensors tensors or kOptimMaxBlocks
// blocks) and at the end; fill(list, slot, k) writes tensor k's pointers and n into the slot.
// A tensor whose chunks overflow a list goes on in the next one, in slot 0.
template <typename List, typename NumelFn, typename FillFn, typename LaunchFn>
void ForEachOptimLaunch(int64_t count, NumelFn&& numel, FillFn&& fill, LaunchFn&& launch) {
  List list{};
  int tensors = 0, blocks = 0;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t n = numel(k);
    if (n == 0) continue;
    if (tensors == kOptimMaxTensors) {
      launch(list, blocks);  // blocks > 0: every tensor in the list has some
      tensors = blocks = 0;
    }
    int slot = tensors++;
    fill(&list, slot, k);
    const int64_t chunks = (n + kOptimChunk - 1) / kOptimChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      if (blocks == kOptimMaxBlocks) {
        launch(list, blocks);
        blocks = 0;
        tensors = 1;
        slot = 0;
        fill(&list, slot, k);
      }
      list.block_tensor[blocks] = slot;
      list.block_chunk[blocks] = static_cast<int>(c);
      ++blocks;
    }
  }
  if (blocks > 0) launch(list, blocks);
}

// Step counts to increment, one thread each.
constexpr int kOptimMaxSteps = 64;
struct StepList {
  double* step[kOptimMaxSteps];
  int count;
};

// ptxas_check: block 64
__global__ void IncrementStepsKernel(StepList s) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < s.count) *s.step[i] += 1;
}

// SGD (OneFlow's sgd_update): d = g + wd p; without momentum p -= lr d; with it
// b = momentum b + (1 - dampening) d and p -= lr (nesterov ? d + momentum b : b). lr carries
// the sign of maximize, as on CPU.
struct SgdHyper {
  const double* lr;
  const double* weight_decay;
  const double* momentum;   // with momentum only
  const double* dampening;  // with momentum only
  double sign;
  bool nesterov;
};

// ptxas_check: block 256
template <typename T, bool kMomentum>
__global__ void SgdMultiKernel(OptimList<T, 1> l, SgdHyper h) {  // state[0]: the momentum buffer
  using A = Acc<T>;
  const int t = l.block_tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(l.block_chunk[blockIdx.x]) * kOptimChunk;
  const int64_t end = begin + kOptimChunk < l.n[t] ? begin + kOptimChunk : l.n[t];
  T* p = l.p[t];
  const T* g = l.g[t];
  const A lr = static_cast<A>(*h.lr * h.sign), wd = static_cast<A>(*h.weight_decay);
  if constexpr (!kMomentum) {
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const A pi = Load(p[i]);
      p[i] = Store<T>(pi - lr * (Load(g[i]) + wd * pi));
    }
  } else {
    T* buf = l.state[0][t];
    const A beta = static_cast<A>(*h.momentum), keep = static_cast<A>(1 - *h.dampening);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const A pi = Load(p[i]);
      const A d = Load(g[i]) + wd * pi;
      const A b = beta * Load(buf[i]) + keep * d;
      buf[i] = Store<T>(b);
      p[i] = Store<T>(pi - lr * (h.nesterov ? d + beta * b : b));
    }
  }
}

// Adam (OneFlow's adam_update): d = sign g + l2 p; m = b1 m + (1 - b1) d;
// v = b2 v + (1 - b2) d^2 (vmax = max(vmax, v) with amsgrad);
// p -= lr (m / bc1) / (sqrt(v) / sqrt(bc2) + eps) + lr wd p, with l2 = weight_decay unless
// decoupled (AdamW: the lr wd p term instead), bc = 1 - beta^step unless bias correction is off.
struct AdamHyper {
  const double* lr;
  const double* beta1;
  const double* beta2;
  const double* eps;
  const double* weight_decay;
  double sign;
  bool decoupled, correct;
};

// ptxas_check: block 256
template <typename T, bool kAmsgrad>
__global__ void AdamMultiKernel(OptimList<T, kAmsgrad ? 3 : 2> l, AdamHyper h) {
  using A = Acc<T>;
  const int t = l.block_tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(l.block_chunk[blockIdx.x]) * kOptimChunk;
  const int64_t end = begin + kOptimChunk < l.n[t] ? begin + kOptimChunk : l.n[t];
  const double step = *l.step[t], lr = *h.lr, wd = *h.weight_decay;
  const double db1 = *h.beta1, db2 = *h.beta2;
  const A b1 = static_cast<A>(db1), b2 = static_cast<A>(db2);
  const A c1 = static_cast<A>(1 - db1), c2 = static_cast<A>(1 - db2);
  const A bc1 = static_cast<A>(h.correct ? 1 - pow(db1, step) : 1.0);
  const A sq_bc2 = static_cast<A>(sqrt(h.correct ? 1 - pow(db2, step) : 1.0));
  const A eps = static_cast<A>(*h.eps), tlr = static_cast<A>(lr), sign = static_cast<A>(h.sign);
  const A l2 = h.decoupled ? A(0) : static_cast<A>(wd);
  const A dwd = h.decoupled ? static_cast<A>(lr * wd) : A(0);
  T* p = l.p[t];
  const T* g = l.g[t];
  T* m = l.state[0][t];
  T* v = l.state[1][t];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const A pi = Load(p[i]);
    const A d = sign * Load(g[i]) + l2 * pi;
    const A mi = b1 * Load(m[i]) + c1 * d;
    const A vi = b2 * Load(v[i]) + c2 * d * d;
    m[i] = Store<T>(mi);
    v[i] = Store<T>(vi);
    A vv = vi;
    if constexpr (kAmsgrad) {
      T* vmax = l.state[2][t];
      const A old = Load(vmax[i]);
      vv = old < vi ? vi : old;
      vmax[i] = Store<T>(vv);
    }
    p[i] = Store<T>(pi - tlr * ((mi / bc1) / (sqrt(vv) / sq_bc2 + eps)) - dwd * pi);
  }
}

}  // namespace cuda
}  // namespace oneflow
