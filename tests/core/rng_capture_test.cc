// Random numbers for CUDA graphs (core/ops/random_state.h): ops captured under an RngCapture
// draw what eager code draws, and each replay draws fresh numbers, the ones eager code would
// draw in its place, from the seed and offset the state holds on the device. Runs on the CPU
// and on the stand-in CUDA device (ONEFLOW_FAKE_CUDA=1, set by the BUILD rule) or a GPU.
#include "core/device.h"
#include "core/dispatch.h"
#include "core/functional.h"
#include "core/ops/random_state.h"
#ifdef ONEFLOW_WITH_CUDA
#include "core/kernels/cuda/cuda_util.h"
#endif
#include "core/op_registry.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

// A uniform draw's attrs as fn::uniform makes them (the generator's next counters).
Attrs UniformAttrs(int64_t n, const Device& device) {
  Attrs a;
  a.Set("shape", std::vector<int64_t>{n}).Set("dtype", DType::kFloat32);
  a.Set("device", device.ToString()).Set("low", 0.0).Set("high", 1.0);
  a.Set("seed", static_cast<int64_t>(fn::initial_seed()));
  a.Set("offset", static_cast<int64_t>(fn::generator_advance(n)));
  return a;
}

std::vector<float> Values(const Tensor& t) {
  Tensor c = fn::contiguous(fn::to_device(t, Device::CPU()));
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

}  // namespace

TEST_CASE("a captured draw replays fresh numbers, eager's in its place") {
  std::vector<Device> devices = {Device::CPU()};
  bool cuda = FakeCuda();
#ifdef ONEFLOW_WITH_CUDA
  cuda = cuda || cuda::DeviceCount() > 0;  // a GPU: the kernels read the state on the device
#endif
  if (cuda) devices.push_back(Device::CUDA(0));
  for (const Device& device : devices) {
    INFO(device.ToString());
    const OpDef& uniform = OpRegistry::Global().Get("uniform");
    fn::manual_seed(7);
    fn::rand(Shape({3}), DType::kFloat32, device);  // the capture starts at a nonzero offset
    RngCapture rng(device);
    rng.Begin();
    const Attrs captured = UniformAttrs(5, device);
    const std::vector<float> in_capture = Values(CallOp1(uniform, {}, captured));
    rng.End();
    CHECK(rng.draws() == 10);  // generator_advance(n) reserves 2n counters

    fn::set_generator_state(7, 6);  // where the capture started
    CHECK(Values(fn::rand(Shape({5}), DType::kFloat32, device)) == in_capture);

    // Eager draws between replays move the generator; each replay starts where it is.
    fn::rand(Shape({4}), DType::kFloat32, device);
    std::vector<std::vector<float>> replays;
    for (int r = 0; r < 3; ++r) {
      const uint64_t start = rng.PrepareReplay();
      rng.BeginReplay();
      replays.push_back(Values(CallOp1(uniform, {}, captured)));  // the capture's attrs
      rng.End();
      const auto after = fn::generator_state();
      fn::set_generator_state(7, start);
      CHECK(Values(fn::rand(Shape({5}), DType::kFloat32, device)) == replays.back());
      fn::set_generator_state(after.first, after.second);
    }
    CHECK(replays[0] != in_capture);
    CHECK(replays[1] != replays[0]);
    CHECK(replays[2] != replays[1]);

    // A new seed reaches the state too.
    fn::manual_seed(8);
    rng.PrepareReplay();
    rng.BeginReplay();
    const std::vector<float> seeded = Values(CallOp1(uniform, {}, captured));
    rng.End();
    fn::manual_seed(8);
    CHECK(Values(fn::rand(Shape({5}), DType::kFloat32, device)) == seeded);
  }
}

TEST_CASE("RngCapture refuses a replay during its capture") {
  RngCapture rng(Device::CPU());
  rng.Begin();
  CHECK_THROWS_WITH(rng.PrepareReplay(), "RngCapture: PrepareReplay during the capture on cpu");
  rng.End();
}

}  // namespace oneflow
