"""Train LeNet on CIFAR-10 in one process.

Reads the CIFAR-10 binary version (data_batch_1.bin .. data_batch_5.bin,
test_batch.bin) from --data or --data/cifar-10-batches-bin; nothing is
downloaded. With --fake, small learnable CIFAR-format files are written
there first:

    tools/python examples/lenet_cifar10.py --fake --epochs 1
    tools/python examples/lenet_cifar10.py --data ~/data/cifar10 --epochs 10 --optimizer sgd --lr 0.01
"""
import argparse

import oneflow as flow
from oneflow import nn
from oneflow.utils.data import DataLoader
from oneflow.utils.vision import datasets


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)  # 3x32x32 -> 6x28x28, pooled to 6x14x14
        self.conv2 = nn.Conv2d(6, 16, 5)  # -> 16x10x10, pooled to 16x5x5
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = self.flatten(x)
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


def train(dataloader, model, loss_fn, optimizer, log_every):
    size = len(dataloader.dataset)
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        pred = model(X)
        loss = loss_fn(pred, y)

        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

        if batch % log_every == 0:
            loss, current = loss.item(), (batch + 1) * len(X)
            print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")


def test(dataloader, model, loss_fn):
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    model.eval()
    test_loss, correct = 0.0, 0
    with flow.no_grad():
        for X, y in dataloader:
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).sum().item()
    test_loss /= num_batches
    accuracy = correct / size
    print(f"Test Error: \n Accuracy: {(100 * accuracy):>0.1f}%, Avg loss: {test_loss:>8f} \n")
    return accuracy


def main():
    parser = argparse.ArgumentParser(description="LeNet on CIFAR-10 (binary version) with oneflow")
    parser.add_argument("--data", default="./data/cifar10", help="folder with cifar-10-batches-bin/")
    parser.add_argument("--fake", action="store_true", help="first write small fake CIFAR-10 files to --data")
    parser.add_argument("--fake-per-batch", type=int, default=200, help="records per fake batch file")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--lr", type=float, default=None, help="default: 1e-3 for adam, 1e-2 for sgd")
    parser.add_argument("--momentum", type=float, default=0.9, help="for sgd")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=50, help="print the loss every N batches")
    args = parser.parse_args()

    if args.fake:
        from oneflow.utils.vision.fake_data import write_fake_cifar10

        write_fake_cifar10(args.data, n_per_batch=args.fake_per_batch, seed=args.seed)
        print(f"Wrote fake CIFAR-10 files ({5 * args.fake_per_batch} train, {args.fake_per_batch} test) to {args.data}")

    flow.manual_seed(args.seed)  # fixes the initial weights and the shuffling order
    training_data = datasets.CIFAR10(args.data, train=True)
    test_data = datasets.CIFAR10(args.data, train=False)
    train_dataloader = DataLoader(training_data, batch_size=args.batch_size, shuffle=True)
    test_dataloader = DataLoader(test_data, batch_size=args.batch_size)

    model = LeNet()
    loss_fn = nn.CrossEntropyLoss()
    if args.optimizer == "adam":
        optimizer = flow.optim.Adam(model.parameters(), lr=args.lr or 1e-3)
    else:
        optimizer = flow.optim.SGD(model.parameters(), lr=args.lr or 1e-2, momentum=args.momentum)

    accuracy = 0.0
    for t in range(args.epochs):
        print(f"Epoch {t + 1}\n-------------------------------")
        train(train_dataloader, model, loss_fn, optimizer, args.log_every)
        accuracy = test(test_dataloader, model, loss_fn)
    print(f"Final test accuracy: {(100 * accuracy):>0.1f}%")


if __name__ == "__main__":
    main()
