"""Data-parallel LeNet on CIFAR-10, the way PyTorch's DDP tutorial and torchvision's reference
scripts do it: one process per rank, each training on its own shard of every epoch, gradients
averaged by DistributedDataParallel.

    # two processes (the launcher sets RANK / WORLD_SIZE / LOCAL_RANK, as torchrun does)
    tools/python -m oneflow.distributed.launch --nproc_per_node 2 examples/lenet_ddp.py --fake
    # the same script in one process: world size 1, DDP is plain training
    tools/python examples/lenet_ddp.py --fake --batch-size 64

Reads the CIFAR-10 binary version (data_batch_1.bin .. data_batch_5.bin, test_batch.bin) from
--data or --data/cifar-10-batches-bin; nothing is downloaded. With --fake, rank 0 first writes
small learnable CIFAR-format files there.

Compared with one-process training (examples/lenet_cifar10.py) only these things change:
  * init_distributed_mode: join the job, and let only rank 0 print (setup_for_distributed);
  * the training DataLoader takes a DistributedSampler, and set_epoch(epoch) reshuffles it;
  * the model is wrapped in DistributedDataParallel (and saved through model_without_ddp);
  * evaluation counts on a shard of the test set and sums the counts over ranks with
    flow.comm.all_reduce, so every rank knows the same global accuracy.
--batch-size is per process: two ranks with --batch-size B take the steps of one process with
2B -- over the same order of samples, the same steps up to float rounding (see
tests/python/test_tutorials.py).
"""
import argparse
import builtins
import os
import time

import oneflow as flow
from oneflow import nn
from oneflow.nn.parallel import DistributedDataParallel as DDP
from oneflow.utils.data import DataLoader, DistributedSampler
from oneflow.utils.vision import datasets


# ---------------------------------------------------------------- distributed helpers (torchvision
# references/classification/utils.py)
def setup_for_distributed(is_master):
    """Disables printing when not in the master process; print(..., force=True) still prints."""
    builtin_print = builtins.print

    def print(*args, **kwargs):
        force = kwargs.pop("force", False)
        if is_master or force:
            builtin_print(*args, **kwargs)

    builtins.print = print


def get_world_size():
    return flow.env.get_world_size()


def get_rank():
    return flow.env.get_rank()


def is_main_process():
    return get_rank() == 0


def save_on_master(*args, **kwargs):
    if is_main_process():
        flow.save(*args, **kwargs)


def init_distributed_mode(args):
    # flow.env reads RANK / WORLD_SIZE / LOCAL_RANK from the launcher (world size 1 without it).
    args.rank = get_rank()
    args.world_size = get_world_size()
    args.distributed = args.world_size > 1
    if not args.distributed:
        print("Not using distributed mode")
        setup_for_distributed(True)  # print(..., force=True) works in one process too
        return
    print(f"| distributed init (rank {args.rank} of {args.world_size})", flush=True)
    flow.env.init()  # init_process_group: rank 0 serves the job, the others connect
    flow.comm.barrier()
    setup_for_distributed(args.rank == 0)


# ---------------------------------------------------------------- the model (as in lenet_cifar10.py)
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


def train_one_epoch(model, criterion, optimizer, data_loader, epoch, args, steps_left):
    """One pass over this rank's shard (at most steps_left steps); returns
    (steps taken, mean training loss over every rank's samples, samples this rank saw)."""
    model.train()
    # The loss of this rank's samples, summed, and their number: all-reduced at the end so the
    # printed loss is the mean over the whole global batch stream, not rank 0's part of it.
    loss_sum, seen, steps = 0.0, 0, 0
    start = time.time()
    for i, (image, target) in enumerate(data_loader):
        if steps == steps_left:
            break
        output = model(image)
        loss = criterion(output, target)

        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients over ranks during backward
        optimizer.step()

        steps += 1
        loss_sum += loss.item() * len(target)
        seen += len(target)
        if i % args.print_freq == 0:
            print(f"Epoch: [{epoch}]  [{i:>3d}/{len(data_loader)}]  loss: {loss.item():.4f}")
    totals = flow.tensor([loss_sum, float(seen)], dtype=flow.float64)
    flow.comm.all_reduce(totals)
    mean_loss = totals[0].item() / max(totals[1].item(), 1.0)
    print(f"Epoch: [{epoch}] done in {time.time() - start:.1f}s  train loss: {mean_loss:.6f}")
    return steps, mean_loss, seen


def evaluate(model, criterion, data_loader, epoch):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with flow.no_grad():
        for image, target in data_loader:
            output = model(image)
            loss_sum += criterion(output, target).item() * len(target)
            correct += (output.argmax(1) == target).sum().item()
            total += len(target)
    # Every rank counted its own shard: sum the counts so every rank holds the global numbers.
    stats = flow.tensor([correct, total], dtype=flow.int64)
    flow.comm.all_reduce(stats)
    losses = flow.tensor([loss_sum], dtype=flow.float64)
    flow.comm.all_reduce(losses)
    correct, total = int(stats[0].item()), int(stats[1].item())
    accuracy = correct / total
    print(f"Test: [{epoch}]  Acc@1 {accuracy:.4f} ({correct}/{total})  "
          f"loss {losses[0].item() / total:.4f}")
    return accuracy


def get_args_parser():
    parser = argparse.ArgumentParser(description="Data-parallel LeNet on CIFAR-10 with oneflow")
    parser.add_argument("--data", default="./data/cifar10", help="folder with cifar-10-batches-bin/")
    parser.add_argument("--fake", action="store_true", help="first write small fake CIFAR-10 files to --data")
    parser.add_argument("--fake-per-batch", type=int, default=200, help="records per fake batch file")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32, help="per process")
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--lr", type=float, default=None, help="default: 1e-3 for adam, 0.01 for sgd")
    parser.add_argument("--momentum", type=float, default=0.9, help="for sgd")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-shuffle", action="store_true", help="train in file order")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="stop after this many optimizer steps in all (0: no limit)")
    parser.add_argument("--print-freq", type=int, default=10, help="print the loss every N steps")
    parser.add_argument("--output-dir", default="", help="save checkpoint.pt here after each epoch")
    return parser


def main(args):
    init_distributed_mode(args)

    if args.fake:
        if is_main_process():  # one writer; the others wait for the files
            from oneflow.utils.vision.fake_data import write_fake_cifar10

            write_fake_cifar10(args.data, n_per_batch=args.fake_per_batch, seed=args.seed)
            print(f"Wrote fake CIFAR-10 files ({5 * args.fake_per_batch} train, "
                  f"{args.fake_per_batch} test) to {args.data}")
        if args.distributed:
            flow.comm.barrier()

    flow.manual_seed(args.seed)  # the same initial weights everywhere (DDP also copies rank 0's)
    dataset = datasets.CIFAR10(args.data, train=True)
    dataset_test = datasets.CIFAR10(args.data, train=False)

    # Each rank gets every world_size-th index of one permutation (the same on every rank);
    # set_epoch below changes the permutation from epoch to epoch.
    train_sampler = DistributedSampler(dataset, shuffle=not args.no_shuffle, seed=args.seed)
    # Evaluation: every world_size-th test image, unpadded, so the summed counts are exact
    # (a DistributedSampler would repeat a few images to even out the shards).
    test_sampler = range(args.rank, len(dataset_test), args.world_size)
    data_loader = DataLoader(dataset, batch_size=args.batch_size, sampler=train_sampler)
    data_loader_test = DataLoader(dataset_test, batch_size=args.batch_size, sampler=test_sampler)

    model = LeNet()
    model_without_ddp = model
    model = DDP(model)  # in one process: plain training
    criterion = nn.CrossEntropyLoss()
    if args.optimizer == "sgd":
        optimizer = flow.optim.SGD(model.parameters(), lr=args.lr or 0.01, momentum=args.momentum)
    else:
        optimizer = flow.optim.Adam(model.parameters(), lr=args.lr or 1e-3)

    print(f"Start training: {len(dataset)} images, {len(train_sampler)} per rank on "
          f"{args.world_size} rank(s), batch {args.batch_size} per rank")
    start_time = time.time()
    accuracy, steps, seen = 0.0, 0, 0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        budget = args.max_steps - steps if args.max_steps else -1
        taken, _, n = train_one_epoch(model, criterion, optimizer, data_loader, epoch, args, budget)
        steps += taken
        seen += n
        accuracy = evaluate(model, criterion, data_loader_test, epoch)
        if args.output_dir:
            os.makedirs(args.output_dir, exist_ok=True)
            checkpoint = {
                "model": model_without_ddp.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch": epoch,
                "steps": steps,
            }
            save_on_master(checkpoint, os.path.join(args.output_dir, "checkpoint.pt"))
        if args.max_steps and steps >= args.max_steps:
            break

    print(f"rank {args.rank}: {steps} steps on {seen} training samples", force=True)
    print(f"Training time {time.time() - start_time:.1f}s")
    print(f"final test accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main(get_args_parser().parse_args())
