"""LeNet trained in oneflow must follow PyTorch step for step: same initial
weights (copied from torch), same fake CIFAR-10 batches, same optimizer.
Also runs examples/lenet_cifar10.py end to end."""
import itertools
import os
import re
import subprocess

import numpy as np
import pytest

import oneflow as flow
from oneflow.utils.data import DataLoader
from oneflow.utils.vision import datasets
from oneflow.utils.vision.fake_data import write_fake_cifar10

torch = pytest.importorskip("torch")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 5
BATCH_SIZE = 16


def make_lenet(nn):
    """The same LeNet for either framework (`nn` is torch.nn or oneflow.nn), so
    the state_dict keys match."""

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.pool = nn.MaxPool2d(2)
            self.relu = nn.ReLU()
            self.flatten = nn.Flatten()
            self.fc1 = nn.Linear(400, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = self.pool(self.relu(self.conv1(x)))
            x = self.pool(self.relu(self.conv2(x)))
            x = self.flatten(x)
            x = self.relu(self.fc1(x))
            x = self.relu(self.fc2(x))
            return self.fc3(x)

    return LeNet()


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    """The first STEPS batches of fake CIFAR-10 in file order, as numpy arrays."""
    root = tmp_path_factory.mktemp("cifar10")
    write_fake_cifar10(root, n_per_batch=BATCH_SIZE, seed=0)  # 5 files: STEPS batches
    loader = DataLoader(datasets.CIFAR10(root, train=True), batch_size=BATCH_SIZE, shuffle=False)
    result = [(X.numpy(), y.numpy()) for X, y in itertools.islice(loader, STEPS)]
    assert len(result) == STEPS
    return result


def train_torch(model, optimizer, batches):
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []
    for X, y in batches:
        loss = loss_fn(model(torch.from_numpy(X)), torch.from_numpy(y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    X, y = batches[0]
    with torch.no_grad():
        final = loss_fn(model(torch.from_numpy(X)), torch.from_numpy(y)).item()
    return losses, final


def train_flow(model, optimizer, batches):
    loss_fn = flow.nn.CrossEntropyLoss()
    losses = []
    for X, y in batches:
        loss = loss_fn(model(flow.tensor(X)), flow.tensor(y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    X, y = batches[0]
    with flow.no_grad():
        final = loss_fn(model(flow.tensor(X)), flow.tensor(y)).item()
    return losses, final


OPTIMIZERS = {
    "sgd_momentum": (
        lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
        lambda params: flow.optim.SGD(params, lr=0.05, momentum=0.9),
    ),
    "adam": (
        lambda params: torch.optim.Adam(params, lr=1e-3),
        lambda params: flow.optim.Adam(params, lr=1e-3),
    ),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_lenet_training_matches_torch(batches, name):
    make_torch_optimizer, make_flow_optimizer = OPTIMIZERS[name]
    torch.manual_seed(0)
    torch_model = make_lenet(torch.nn)
    flow_model = make_lenet(flow.nn)
    flow_model.load_state_dict(
        {key: flow.tensor(value.detach().numpy()) for key, value in torch_model.state_dict().items()}
    )
    for key, value in flow_model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), torch_model.state_dict()[key].numpy())

    torch_losses, torch_final = train_torch(torch_model, make_torch_optimizer(torch_model.parameters()), batches)
    flow_losses, flow_final = train_flow(flow_model, make_flow_optimizer(flow_model.parameters()), batches)

    for step, (ours, theirs) in enumerate(zip(flow_losses, torch_losses)):
        assert abs(ours - theirs) < 1e-4, f"{name} step {step}: oneflow loss {ours} vs torch {theirs}"
    assert abs(flow_final - torch_final) < 1e-4, f"{name} after training: {flow_final} vs {torch_final}"
    # Learning happened: the first batch's loss is lower after the 5 updates.
    assert flow_final < flow_losses[0], f"{name}: loss on batch 0 went {flow_losses[0]} -> {flow_final}"


def test_example_script_runs(tmp_path):
    launcher = os.path.join(REPO, "tools", "python")
    script = os.path.join(REPO, "examples", "lenet_cifar10.py")
    assert os.path.exists(launcher), f"missing {launcher}, the launcher that puts oneflow on the path"
    command = [
        launcher, script, "--fake", "--epochs", "1", "--fake-per-batch", "40",
        "--batch-size", "16", "--data", str(tmp_path / "cifar10"),
    ]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert re.search(r"^loss: +\d+\.\d{6}  \[ +16/  200\]$", result.stdout, re.M), result.stdout
    assert re.search(r"^ Accuracy: \d+\.\d%, Avg loss: +\d+\.\d{6} $", result.stdout, re.M), result.stdout
    assert re.search(r"^Final test accuracy: \d+\.\d%$", result.stdout, re.M), result.stdout
