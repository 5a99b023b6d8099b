// Data-parallel MLP with global tensors, built against the installed SDK: parameters broadcast
// (B), the batch split over the ranks (S(0)); boxing all-reduces the gradients. Rank 0 prints
// each step's loss; global_mlp.py is the same program in Python.
//   python3 -m oneflow.distributed.launch --nproc_per_node 2 --no_python ./global_mlp
#include <cstdio>
#include <memory>
#include <numeric>

#include "oneflow/api/cpp/oneflow.h"

using namespace oneflow;  // NOLINT: a user's program

int main() {
  oneflow::Init();
  runtime::Env& env = runtime::Env::Get();
  std::vector<int> ranks(env.world_size());
  std::iota(ranks.begin(), ranks.end(), 0);
  sbp::Placement world(DeviceType::kCPU, ranks);
  const sbp::NdSbp B = {sbp::Sbp::Broadcast()}, S0 = {sbp::Sbp::Split(0)};

  fn::manual_seed(0);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 3)});
  Tensor x = fn::randn({32, 8});
  Tensor y = fn::randint(0, 3, {32});
  model->to_global(world, B);
  Tensor xg = global::FromWhole(x, world, S0), yg = global::FromWhole(y, world, S0);

  optim::SGDOptions options;
  options.lr = 0.1;
  options.momentum = 0.9;
  optim::SGD opt(model->parameters(), options);
  for (int step = 0; step < 5; ++step) {
    Tensor loss = fn::cross_entropy(model->forward(xg), yg);
    opt.zero_grad();
    loss.backward();
    opt.step();
    Tensor whole = global::ToLocal(global::ToGlobal(loss, world, B));
    if (env.rank() == 0) std::printf("step %d loss %.8f\n", step, whole.data<float>()[0]);
  }
  return 0;
}
