// Every registered op declares inference, a gradient (or says it has none), a CPU kernel and,
// in a build with CUDA, a CUDA kernel (checked without a GPU: registration needs none).
#include "core/op_registry.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

TEST_CASE("every op in the registry is complete") {
  const auto& ops = OpRegistry::Global().ops();
  REQUIRE(ops.size() > 50);
  for (const auto& [name, def] : ops) {
    INFO("op " << name);
    CHECK(def.infer != nullptr);
    CHECK((def.grad != nullptr || !def.differentiable));
    CHECK(def.kernels[static_cast<int>(DeviceType::kCPU)] != nullptr);
#ifdef ONEFLOW_WITH_CUDA
    CHECK(def.kernels[static_cast<int>(DeviceType::kCUDA)] != nullptr);
#endif
  }
}

TEST_CASE("every facet of an op says where it was registered (tools/op_facets)") {
  for (const auto& [name, def] : OpRegistry::Global().ops()) {
    INFO("op " << name);
    CHECK_THAT(def.infer_at, Catch::Matches("core/.+\\.(cc|cu):[0-9]+"));
    if (def.grad != nullptr) CHECK_THAT(def.grad_at, Catch::Matches("core/.+\\.cc:[0-9]+"));
    CHECK_THAT(def.kernel_at[static_cast<int>(DeviceType::kCPU)],
               Catch::Matches("core/.+\\.cc:[0-9]+"));
#ifdef ONEFLOW_WITH_CUDA
    CHECK_THAT(def.kernel_at[static_cast<int>(DeviceType::kCUDA)],
               Catch::Matches("core/.+\\.(cc|cu):[0-9]+"));  // views: one kernel, both devices
#endif
  }
}

TEST_CASE("ops the tutorial models need are registered") {
  for (const char* name : {"add",
                           "sub",
                           "mul",
                           "div",
                           "pow",
                           "exp",
                           "log",
                           "sqrt",
                           "abs",
                           "relu",
                           "sigmoid",
                           "tanh",
                           "gelu",
                           "where",
                           "eq",
                           "sum",
                           "max_dim",
                           "matmul",
                           "conv2d",
                           "max_pool2d",
                           "avg_pool2d",
                           "adaptive_avg_pool2d",
                           "batch_norm_train",
                           "softmax",
                           "log_softmax",
                           "nll_loss",
                           "cat",
                           "index_select",
                           "reshape",
                           "permute",
                           "slice",
                           "expand",
                           "copy",
                           "cast",
                           "full",
                           "arange",
                           "eye",
                           "uniform",
                           "normal",
                           "randint",
                           "dropout_mask",
                           "sgd_update",
                           "adam_update"}) {
    INFO("op " << name);
    CHECK(OpRegistry::Global().ops().count(name) == 1);
  }
  REQUIRE_THROWS_WITH(OpRegistry::Global().Get("no_such_op"),
                      "op registry: no op named 'no_such_op'");
}

}  // namespace
}  // namespace oneflow
