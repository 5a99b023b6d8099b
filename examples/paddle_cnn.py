"""A small CNN on MNIST trained data-parallel, written like PaddlePaddle's paddle.DataParallel
tutorial (init_parallel_env, DistributedBatchSampler, DataParallel, rank-0 logs).

    tools/python -m oneflow.distributed.launch --nproc_per_node 2 examples/paddle_cnn.py --fake
    tools/python examples/paddle_cnn.py --fake          # one process: world size 1

Reads MNIST's idx files (train-images-idx3-ubyte ... , optionally .gz) from --data or
--data/MNIST/raw; nothing is downloaded. With --fake, rank 0 first writes small learnable
MNIST-format files there.

Where Paddle's single-card script and its multi-card one differ, this script does the
multi-card thing:
  * dist.init_parallel_env()              -> flow.env.init()
  * DistributedBatchSampler + DataLoader(batch_sampler=...) instead of DataLoader(shuffle=True)
  * paddle.DataParallel(model)            -> DistributedDataParallel(model)
  * logs on rank 0 only (dist.get_rank() == 0)
"""
import argparse

import oneflow as flow
import oneflow.nn as nn
from oneflow.nn.parallel import DistributedDataParallel
from oneflow.utils.data import DataLoader, DistributedBatchSampler
from oneflow.utils.vision import datasets


class ConvBNReLUPool(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

    def forward(self, x):
        return self.pool(self.relu(self.bn(self.conv(x))))


class SimpleCNN(nn.Module):
    """1x28x28 -> 16x14x14 -> 32x7x7 -> 10 classes."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(ConvBNReLUPool(1, 16), ConvBNReLUPool(16, 32))
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(32 * 7 * 7, num_classes)

    def forward(self, x):
        return self.fc(self.flatten(self.features(x)))


def accuracy(logits, label):
    """paddle.metric.accuracy(input, label) for k=1: the fraction of correct top-1 predictions."""
    return (logits.argmax(1) == label).float().mean()


def evaluate(model, test_loader):
    model.eval()
    correct, total = 0, 0
    with flow.no_grad():
        for img, label in test_loader:
            correct += (model(img).argmax(1) == label).sum().item()
            total += len(label)
    model.train()
    return correct / total


def train(args):
    # 1. initialize the parallel environment (paddle.distributed.init_parallel_env()).
    flow.env.init()
    rank, world_size = flow.env.get_rank(), flow.env.get_world_size()

    if args.fake:
        if rank == 0:
            from oneflow.utils.vision.fake_data import write_fake_mnist

            write_fake_mnist(args.data, n_train=args.fake_train, n_test=args.fake_test, seed=args.seed)
            print(f"wrote fake MNIST ({args.fake_train} train, {args.fake_test} test) to {args.data}")
        flow.comm.barrier()  # the other ranks read the files only once they are written

    flow.manual_seed(args.seed)
    train_dataset = datasets.MNIST(args.data, train=True)
    test_dataset = datasets.MNIST(args.data, train=False)

    # 2. every rank reads its own batches: DistributedBatchSampler shuffles the whole dataset the
    #    same way on every rank (a new order each epoch) and deals out batch_size blocks in turn.
    train_sampler = DistributedBatchSampler(train_dataset, args.batch_size, shuffle=True,
                                            drop_last=args.drop_last)
    train_loader = DataLoader(train_dataset, batch_sampler=train_sampler)
    test_loader = DataLoader(test_dataset, batch_size=256)

    # 3. wrap the model: paddle.DataParallel(model). It copies rank 0's parameters to every rank
    #    and, during backward, all-reduces the gradients and divides them by the number of ranks
    #    -- which is what DistributedDataParallel does.
    model = SimpleCNN()
    model = DistributedDataParallel(model)
    optim = flow.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    step = 0
    for epoch in range(args.epochs):
        model.train()
        for batch_id, (img, label) in enumerate(train_loader):
            predicts = model(img)
            loss = loss_fn(predicts, label)
            acc = accuracy(predicts, label)
            loss.backward()
            optim.step()
            optim.zero_grad()  # optim.clear_grad()
            step += 1
            if rank == 0 and batch_id % args.log_every == 0:
                print(f"epoch: {epoch}, batch_id: {batch_id}, loss is: {loss.item():.5f}, "
                      f"acc is: {acc.item():.4f}")
            if step == args.max_steps:
                break
        if step == args.max_steps:
            break

    # Every rank holds the same parameters; rank 0 evaluates and reports. (BatchNorm's running
    # statistics are rank 0's as of the last forward: DDP sends them out before each forward.)
    if rank == 0:
        test_acc = evaluate(model, test_loader)
        print(f"{step} steps on {world_size} rank(s), batch {args.batch_size} per rank")
        print(f"final test accuracy: {test_acc:.4f}")


def main():
    parser = argparse.ArgumentParser(description="Data-parallel CNN on MNIST, paddle.DataParallel style")
    parser.add_argument("--data", default="./data", help="folder with MNIST/raw/ (or the idx files)")
    parser.add_argument("--fake", action="store_true", help="first write small fake MNIST files to --data")
    parser.add_argument("--fake-train", type=int, default=1000)
    parser.add_argument("--fake-test", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drop-last", action="store_true")
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    parser.add_argument("--log-every", type=int, default=10, help="log every N batches")
    train(parser.parse_args())


if __name__ == "__main__":
    main()
