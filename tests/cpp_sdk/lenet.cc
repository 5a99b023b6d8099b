// The LeNet of examples/lenet_cifar10.py in C++, built against the installed SDK: the same
// layers under the same names, so state dicts move between the two. Trains 5 SGD steps on a
// fixed random batch (seed 0) printing each loss, saves its state dict to argv[1]; then loads
// the state dict at argv[2] (written by Python) into a fresh LeNet and prints its outputs on
// the batch. lenet.py is the same program in Python.
#include <cstdio>
#include <memory>
#include <string>

#include "oneflow/api/cpp/oneflow.h"

using namespace oneflow;  // NOLINT: a user's program

class LeNet : public nn::Module {
 public:
  LeNet() {
    conv1_ = register_module("conv1", std::make_shared<nn::Conv2d>(3, 6, fn::IntList{5}));
    conv2_ = register_module("conv2", std::make_shared<nn::Conv2d>(6, 16, fn::IntList{5}));
    pool_ = register_module("pool", std::make_shared<nn::MaxPool2d>(fn::IntList{2, 2}));
    relu_ = register_module("relu", std::make_shared<nn::ReLU>());
    flatten_ = register_module("flatten", std::make_shared<nn::Flatten>());
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(16 * 5 * 5, 120));
    fc2_ = register_module("fc2", std::make_shared<nn::Linear>(120, 84));
    fc3_ = register_module("fc3", std::make_shared<nn::Linear>(84, 10));
  }
  Tensor forward(const Tensor& input) override {
    Tensor x = pool_->forward(relu_->forward(conv1_->forward(input)));
    x = pool_->forward(relu_->forward(conv2_->forward(x)));
    x = flatten_->forward(x);
    x = relu_->forward(fc1_->forward(x));
    x = relu_->forward(fc2_->forward(x));
    return fc3_->forward(x);
  }
  std::string name() const override { return "LeNet"; }

 private:
  std::shared_ptr<nn::Module> conv1_, conv2_, pool_, relu_, flatten_, fc1_, fc2_, fc3_;
};

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: lenet OUT.safetensors IN.safetensors\n");
    return 2;
  }
  oneflow::Init();
  fn::manual_seed(0);
  auto net = std::make_shared<LeNet>();
  Tensor x = fn::randn({16, 3, 32, 32});
  Tensor y = fn::randint(0, 10, {16});
  optim::SGDOptions options;
  options.lr = 0.01;
  options.momentum = 0.9;
  optim::SGD opt(net->parameters(), options);
  for (int step = 0; step < 5; ++step) {
    Tensor loss = fn::cross_entropy(net->forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    std::printf("step %d loss %.8f\n", step, loss.data<float>()[0]);
  }
  nn::SaveStateDict(net->state_dict(), argv[1]);

  auto other = std::make_shared<LeNet>();
  other->load_state_dict(nn::LoadStateDict(argv[2]));
  other->eval();
  Tensor out = fn::contiguous(other->forward(x));
  for (int64_t i = 0; i < out.numel(); ++i) std::printf("%.8f\n", out.data<float>()[i]);
  return 0;
}
