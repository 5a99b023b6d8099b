// DistributedDataParallel of a C++ module, built against the installed SDK: each rank trains
// its half of every batch through DDP (gradients averaged during backward), and a local twin
// trains on the whole batch in one process; after every step their parameters must agree.
//   python3 -m oneflow.distributed.launch --nproc_per_node 2 --no_python ./ddp_mlp
#include <cmath>
#include <cstdio>
#include <memory>

#include "oneflow/api/cpp/oneflow.h"

using namespace oneflow;  // NOLINT: a user's program

std::shared_ptr<nn::Sequential> Mlp() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 4)});
}

int main() {
  oneflow::Init();
  runtime::Env& env = runtime::Env::Get();
  const int rank = env.rank(), world = env.world_size();
  fn::manual_seed(0);
  auto net = Mlp();  // same seed: the same weights on every rank (DDP broadcasts rank 0's anyway)
  fn::manual_seed(0);
  auto whole = Mlp();
  auto ddp = std::make_shared<nn::DistributedDataParallel>(net);
  optim::SGDOptions options;
  options.lr = 0.2;
  options.momentum = 0.9;
  optim::SGD opt(ddp->parameters(), options), ref_opt(whole->parameters(), options);
  optim::StepLR sched(opt.options().lr, 2, 0.5), ref_sched(ref_opt.options().lr, 2, 0.5);
  const int64_t batch = 8 * world;
  for (int step = 0; step < 6; ++step) {
    Tensor x = fn::randn({batch, 6});  // every rank draws the same batch
    Tensor y = fn::randint(0, 4, {batch});
    Tensor mine_x = fn::slice(x, 0, rank * 8, rank * 8 + 8);
    Tensor mine_y = fn::slice(y, 0, rank * 8, rank * 8 + 8);
    Tensor loss = fn::cross_entropy(ddp->forward(mine_x), mine_y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    sched.step();
    Tensor ref_loss = fn::cross_entropy(whole->forward(x), y);
    ref_opt.zero_grad();
    ref_loss.backward();
    ref_opt.step();
    ref_sched.step();
    auto a = ddp->module().named_parameters(), b = whole->named_parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      Tensor d = fn::contiguous(fn::abs(fn::sub(a[i].second, b[i].second)));
      for (int64_t k = 0; k < d.numel(); ++k) {
        if (!(d.data<float>()[k] <= 1e-5f)) {
          std::printf("rank %d: step %d: %s differs from one-process training by %g\n", rank, step,
                      a[i].first.c_str(), d.data<float>()[k]);
          return 1;
        }
      }
    }
  }
  std::printf("rank %d: C++ DDP equals one process after 6 steps (lr now %g)\n", rank,
              opt.options().lr);
  return 0;
}
