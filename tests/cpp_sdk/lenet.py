"""lenet.cc in Python: examples/lenet_cifar10.py's LeNet, the same seed, batch and steps.
usage: lenet.py OUT.safetensors   (prints each step's loss, saves the trained state dict)"""
import importlib.util
import os
import sys

import oneflow as flow
from oneflow.utils.safetensors import save_file

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("lenet_example", os.environ["LENET_EXAMPLE"])
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)

flow.manual_seed(0)
net = example.LeNet()
x, y = flow.randn(16, 3, 32, 32), flow.randint(0, 10, (16,))
opt = flow.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
for step in range(5):
    loss = flow.nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.8f}")
save_file(dict(net.state_dict()), sys.argv[1])
