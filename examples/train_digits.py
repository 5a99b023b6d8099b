"""Data-parallel training of a classifier on the UCI handwritten digits (1,797 8x8 images).

The data is the copy Debian ships in python3-sklearn, read directly (no scikit-learn import).
Its rows come grouped by writer, so they are shuffled with a fixed seed before a test set is
held out. Each rank trains a DistributedDataParallel replica on its DistributedSampler share
(--batch-size per rank); rank 0 prints one line per epoch with the loss and accuracy over all
ranks and the samples/s of the whole job. On a machine with a GPU each rank uses CUDA.

    tools/main                                   # 2 CPU ranks through the launcher
    tools/main --tensorboard runs/digits         # and TensorBoard event files (rank 0)
    tools/python -m oneflow.distributed.launch --nproc_per_node 2 examples/train_digits.py
    tools/python examples/train_digits.py        # one process

On a terminal rank 0 shows a tqdm progress bar over the whole training (Debian's python3-tqdm)
with the epoch lines above it; otherwise (a pipe, a log file) it prints the epoch lines alone.
Under the launcher a rank's stdout is a pipe, so tools/main names its terminal in
ONEFLOW_PROGRESS_TTY and the bar is drawn there.
"""

import argparse
import gzip
import os
import random
import sys
import time

import oneflow as flow
import oneflow.nn as nn
from oneflow.nn.parallel import DistributedDataParallel as DDP
from oneflow.utils.data import DataLoader, DistributedSampler, TensorDataset
from oneflow.utils.tensorboard import SummaryWriter

DIGITS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def load_digits(path, test_fraction, seed):
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"train_digits: {path} is missing; install it with `apt-get install python3-sklearn`")
    with gzip.open(path, "rt") as f:
        rows = [[int(v) for v in line.split(",")] for line in f if line.strip()]
    random.Random(seed).shuffle(rows)
    images = flow.tensor([r[:64] for r in rows], dtype=flow.float32) / 16.0
    labels = flow.tensor([r[64] for r in rows], dtype=flow.int64)
    n_test = int(len(rows) * test_fraction)
    return (images[n_test:], labels[n_test:]), (images[:n_test], labels[:n_test])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(128, 64), nn.ReLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x):
        return self.layers(x)


def evaluate(model, images, labels):
    model.eval()
    with flow.no_grad():
        pred = model(images).argmax(1)
    model.train()
    return (pred == labels).sum().item() / len(labels)


def progress_stream(rank):
    """The terminal rank 0 draws its progress bar on, or None for plain lines."""
    if rank != 0:
        return None
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return None
    if sys.stdout.isatty():
        return sys.stdout
    path = os.environ.get("ONEFLOW_PROGRESS_TTY")
    if not path:
        return None
    try:  # O_NOCTTY: a rank leads its own session and must not adopt the terminal
        stream = os.fdopen(os.open(path, os.O_WRONLY | os.O_NOCTTY), "w")
    except OSError:
        return None
    if stream.isatty():
        return stream
    stream.close()
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.002)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=DIGITS)
    parser.add_argument("--tensorboard", metavar="DIR",
                        help="rank 0 writes each epoch's loss, accuracy and samples/s and the test "
                        "accuracy as TensorBoard event files here")
    args = parser.parse_args()

    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    device = "cuda" if flow.cuda.is_available() else "cpu"
    flow.manual_seed(args.seed)  # the same initial weights everywhere (DDP broadcasts rank 0's)
    (train_x, train_y), (test_x, test_y) = load_digits(args.data, test_fraction=0.2, seed=args.seed)
    train_set = TensorDataset(train_x, train_y)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    model = DDP(Net().to(device))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = flow.optim.Adam(model.parameters(), lr=args.lr)
    if rank == 0:
        print(f"digits: {len(train_y)} training and {len(test_y)} test images, "
              f"{sum(p.numel() for p in model.parameters())} parameters, {world} rank(s) on {device}")

    writer = SummaryWriter(args.tensorboard) if args.tensorboard and rank == 0 else None
    stream = progress_stream(rank)
    bar = None
    if stream is not None:
        from tqdm import tqdm

        sys.stdout.flush()
        if stream is not sys.stdout:
            time.sleep(0.2)  # the launcher relays the header line first; the bar goes below it
        bar = tqdm(total=args.epochs * len(loader), file=stream, unit="batch", dynamic_ncols=True,
                   desc="train")
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        # Loss sum, correct and seen over this rank's batches, summed over ranks at the end.
        totals = flow.zeros(3, dtype=flow.float64)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            loss = loss_fn(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            totals += flow.tensor([loss.item() * len(y), (logits.argmax(1) == y).sum().item(), len(y)],
                                  dtype=flow.float64)
            if bar is not None:
                bar.update(1)
        flow.comm.all_reduce(totals)
        total_loss, correct, seen = totals.tolist()
        rate = seen / (time.perf_counter() - start)
        if writer is not None:
            writer.add_scalar("train/loss", total_loss / seen, epoch)
            writer.add_scalar("train/accuracy", correct / seen, epoch)
            writer.add_scalar("train/samples_per_s", rate, epoch)
        if rank == 0:
            line = (f"epoch {epoch:3d}  loss {total_loss / seen:.4f}  train acc {correct / seen:.4f}  "
                    f"{rate:,.0f} samples/s")
            if bar is None:
                print(line)
            else:
                bar.write(line, file=stream)
                bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{correct / seen:.4f}")
    if bar is not None:
        bar.close()

    acc = evaluate(model, test_x.to(device), test_y.to(device))
    if rank == 0:
        print(f"test accuracy: {acc:.4f}")
    if writer is not None:
        writer.add_scalar("test/accuracy", acc, args.epochs)
        writer.close()
    if acc < 0.95:
        raise SystemExit(f"train_digits: test accuracy {acc:.4f} is below 0.95")


if __name__ == "__main__":
    main()
