"""An MLP on MNIST trained data-parallel, written like MindSpore's data-parallel tutorial
(init(), a dataset sharded with num_shards / shard_id, gradients averaged over devices).

    tools/python -m oneflow.distributed.launch --nproc_per_node 2 examples/mindspore_mlp.py --fake
    tools/python examples/mindspore_mlp.py --fake        # one process: one shard, world size 1

Reads MNIST's idx files from --data or --data/MNIST/raw; nothing is downloaded. With --fake,
rank 0 first writes small learnable MNIST-format files there.

What the multi-device version adds to MindSpore's single-device script, and its counterpart:
  * init() and get_rank() / get_group_size()        -> flow.env.init(), flow.env.get_rank() ...
  * MnistDataset(path, num_shards=rank_size, shard_id=rank_id)
                                                    -> create_dataset below
  * set_auto_parallel_context(parallel_mode=DATA_PARALLEL, gradients_mean=True), i.e. the
    gradients all-reduced and divided by the number of devices (DistributedGradReducer)
                                                    -> DistributedDataParallel, which averages
"""
import argparse

import oneflow as flow
from oneflow import nn
from oneflow.nn.parallel import DistributedDataParallel
from oneflow.utils.data import DataLoader, DistributedSampler, Subset
from oneflow.utils.vision import datasets, transforms


def create_dataset(data_path, batch_size, train=True, num_shards=None, shard_id=None):
    """MnistDataset(data_path, num_shards, shard_id) -> map(Rescale, Normalize) -> batch.

    Sharding as MindSpore's DistributedSampler does it: shard k holds samples k, k + num_shards,
    k + 2 * num_shards, ... (sample (num_shards * i + k) % len(dataset)), so when the dataset does
    not divide evenly the last round wraps around to the first samples and every shard has the
    same size -- every rank takes the same number of steps, which data parallelism needs.
    DistributedSampler(shuffle=False) deals out exactly these indices.

    The shard is fixed, as with MnistDataset(..., shuffle=False); training reshuffles it within
    itself every epoch (dataset.shuffle(buffer_size)) and drops the last partial batch
    (batch(batch_size, drop_remainder=True)). MindSpore's default shuffle=True would instead
    deal out a fresh permutation of the whole dataset each epoch: DistributedSampler(shuffle=True)
    with set_epoch(epoch) does that.
    """
    # Rescale(1/255) happens when MNIST fetches an image; then Normalize with MNIST's statistics.
    transform = transforms.Normalize(mean=(0.1307,), std=(0.3081,))
    dataset = datasets.MNIST(data_path, train=train, transform=transform)
    if num_shards is not None:
        shard = DistributedSampler(dataset, num_replicas=num_shards, rank=shard_id, shuffle=False)
        dataset = Subset(dataset, list(shard))
    return DataLoader(dataset, batch_size=batch_size, shuffle=train, drop_last=train)


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.dense_relu_sequential = nn.Sequential(
            nn.Linear(28 * 28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.dense_relu_sequential(x)
        return logits


def main():
    parser = argparse.ArgumentParser(description="Data-parallel MLP on MNIST, MindSpore style")
    parser.add_argument("--data", default="./data", help="folder with MNIST/raw/ (or the idx files)")
    parser.add_argument("--fake", action="store_true", help="first write small fake MNIST files to --data")
    parser.add_argument("--fake-train", type=int, default=1000)
    parser.add_argument("--fake-test", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32, help="per device")
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    parser.add_argument("--log-every", type=int, default=10, help="print the loss every N steps")
    args = parser.parse_args()

    flow.env.init()  # init()
    rank_id = flow.env.get_rank()
    rank_size = flow.env.get_world_size()

    if args.fake:
        if rank_id == 0:
            from oneflow.utils.vision.fake_data import write_fake_mnist

            write_fake_mnist(args.data, n_train=args.fake_train, n_test=args.fake_test, seed=args.seed)
            print(f"wrote fake MNIST ({args.fake_train} train, {args.fake_test} test) to {args.data}")
        flow.comm.barrier()

    flow.manual_seed(args.seed)  # ms.set_seed(seed)
    data_set = create_dataset(args.data, args.batch_size, num_shards=rank_size, shard_id=rank_id)
    net = Network()
    # gradients_mean=True: each device's gradients are summed over devices and divided by the
    # device count, so a step is the step of one device on the union of the devices' batches.
    # DistributedDataParallel's all-reduce averages the same way (and copies device 0's initial
    # weights to the others, as MindSpore's broadcast of parameters at the start does).
    net = DistributedDataParallel(net)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = flow.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum)  # nn.Momentum

    def train_step(inputs, labels):
        logits = net(inputs)
        loss = loss_fn(logits, labels)
        optimizer.zero_grad()
        loss.backward()  # grad_fn + grad_reducer: local gradients, then their mean over devices
        optimizer.step()
        return loss

    # As in MindSpore, every device logs its own loss (on its own shard).
    steps = 0
    for epoch in range(args.epochs):
        net.train()
        for i, (image, label) in enumerate(data_set):
            loss_output = train_step(image, label)
            if i % args.log_every == 0:
                print(f"epoch: {epoch}, step: {i}, loss is {loss_output.item():.6f}")
            steps += 1
            if steps == args.max_steps:
                break
        if steps == args.max_steps:
            break

    # model.eval(test_set, {"Accuracy"}): every device holds the same weights and evaluates the
    # whole (unsharded) test set; device 0 reports.
    net.eval()
    correct, total = 0, 0
    with flow.no_grad():
        for image, label in create_dataset(args.data, 256, train=False):
            correct += (net(image).argmax(1) == label).sum().item()
            total += len(label)
    if rank_id == 0:
        print(f"{steps} steps per device on {rank_size} device(s), batch {args.batch_size} per device")
        print(f"final test accuracy: {correct / total:.4f}")


if __name__ == "__main__":
    main()
