"""examples/lenet_ddp.py's training on N ranks, replayed in one process in the same arithmetic.

    lenet_ddp_reference.py --world N [lenet_ddp.py's arguments]

What DistributedDataParallel promises: every rank computes the gradient of the mean loss over
its own batch, the gradients are averaged over the ranks, and every rank takes the same step.
This script does that by hand: one model, each step the N ranks' batches (the same
DistributedSampler shards and DataLoaders the example builds on each rank) go through it one
after the other, their gradients are summed in rank order and divided by N, and the example's
optimizer steps. The forward and backward of each batch are the kernels a launched rank runs
(one thread, the same batch size), and for N = 2 the average (g0 + g1) / 2 rounds as the
all-reduce does, so the example on 2 ranks must match this to the last bit -- whatever the
seed, unlike one process with the doubled batch, whose different rounding can flip a max-pool
choice or ReLU mask and part ways (tests/python/test_tutorials.py).

Prints the example's lines that the test compares ("Epoch: [e] ... train loss: L",
"Test: [e]  Acc@1 ...", "final test accuracy: A") and saves the model's state_dict to
--output-dir/checkpoint.pt.
"""

import importlib.util
import os
import sys

import oneflow as flow
from oneflow import nn
from oneflow.utils.data import DataLoader, DistributedSampler
from oneflow.utils.vision import datasets

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "..", "examples", "lenet_ddp.py")
spec = importlib.util.spec_from_file_location("lenet_ddp", EXAMPLE)
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


def main():
    argv = sys.argv[1:]
    world = int(argv[argv.index("--world") + 1])
    del argv[argv.index("--world"):argv.index("--world") + 2]
    args = example.get_args_parser().parse_args(argv)
    if args.fake:
        from oneflow.utils.vision.fake_data import write_fake_cifar10

        write_fake_cifar10(args.data, n_per_batch=args.fake_per_batch, seed=args.seed)

    flow.manual_seed(args.seed)
    dataset = datasets.CIFAR10(args.data, train=True)
    dataset_test = datasets.CIFAR10(args.data, train=False)
    samplers = [DistributedSampler(dataset, num_replicas=world, rank=r, shuffle=not args.no_shuffle,
                                   seed=args.seed) for r in range(world)]
    loaders = [DataLoader(dataset, batch_size=args.batch_size, sampler=s) for s in samplers]
    test_loaders = [DataLoader(dataset_test, batch_size=args.batch_size,
                               sampler=range(r, len(dataset_test), world)) for r in range(world)]
    model = example.LeNet()
    criterion = nn.CrossEntropyLoss()
    if args.optimizer == "sgd":
        optimizer = flow.optim.SGD(model.parameters(), lr=args.lr or 0.01, momentum=args.momentum)
    else:
        optimizer = flow.optim.Adam(model.parameters(), lr=args.lr or 1e-3)
    params = list(model.parameters())

    steps, accuracy = 0, 0.0
    for epoch in range(args.epochs):
        for s in samplers:
            s.set_epoch(epoch)
        model.train()
        loss_sum, seen = [0.0] * world, [0] * world
        for batches in zip(*loaders):
            if args.max_steps and steps == args.max_steps:
                break
            grads = []
            for r, (image, target) in enumerate(batches):
                optimizer.zero_grad()
                loss = criterion(model(image), target)
                loss.backward()
                grads.append([p.grad.clone() for p in params])
                loss_sum[r] += loss.item() * len(target)
                seen[r] += len(target)
            with flow.no_grad():
                for i, p in enumerate(params):
                    total = grads[0][i]
                    for g in grads[1:]:
                        total = total + g[i]
                    p.grad = total / world
            optimizer.step()
            steps += 1
        print(f"Epoch: [{epoch}] done  train loss: {sum(loss_sum) / max(sum(seen), 1):.6f}")

        model.eval()
        correct, total, test_loss = 0, 0, 0.0
        with flow.no_grad():
            for loader in test_loaders:
                for image, target in loader:
                    output = model(image)
                    test_loss += criterion(output, target).item() * len(target)
                    correct += (output.argmax(1) == target).sum().item()
                    total += len(target)
        accuracy = correct / total
        print(f"Test: [{epoch}]  Acc@1 {accuracy:.4f} ({correct}/{total})")
        if args.max_steps and steps >= args.max_steps:
            break
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        flow.save({"model": model.state_dict(), "steps": steps},
                  os.path.join(args.output_dir, "checkpoint.pt"))
    print(f"final test accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
