"""Data-parallel MobileNetV2 on CIFAR-10 with global tensors (the OneFlow tutorial pattern).

The model is made global once, broadcast to every rank; each batch is made global split along
the batch axis, so every rank computes on its share of the batch and the gradients of the
broadcast parameters are all-reduced by the framework. Run it with the launcher:

    tools/python -m oneflow.distributed.launch --nproc_per_node 2 --master_port 29512 \\
        examples/mobilenetv2_global.py --fake --epochs 2
    tools/python -m oneflow.distributed.launch --nproc_per_node 2 --master_port 29512 \\
        examples/mobilenetv2_global.py --data ~/data/cifar10 --width 1.0 --epochs 10

It also runs as a single process (a world of one). Reads the CIFAR-10 binary version
(data_batch_1.bin .. data_batch_5.bin, test_batch.bin) from --data or
--data/cifar-10-batches-bin; nothing is downloaded. With --fake, rank 0 first writes small
learnable CIFAR-format files there.

Every rank loads the same full batch (same seed, same shuffle order) and to_global turns it
into a broadcast tensor and then into split(0): each rank keeps its slice. With --check-local
every rank also trains an identical local (non-global) copy on the same full batches (the same
dropout masks too) and the largest loss difference is printed; the run fails when it exceeds
1e-4.

--check-local trains in float64 unless --dtype says otherwise. The global run adds the same
numbers in another order (per-rank partial gradients, then an all-reduce), so float32 results
differ from one process's in the last bits; MobileNetV2 amplifies such differences within a few
steps (a ReLU6 input on the other side of 0 switches that element's gradient on or off, and
batch norm spreads it over the channel): at the defaults in float32 the losses differ by 2e-3
at step 3 and 0.15 by step 8, though both compute the same function (float32 one-process runs
with different thread counts differ likewise). In float64 they agree to 1e-8 or better.
"""
import argparse
import sys
import time

import numpy as np

import oneflow as flow
from oneflow import nn
from oneflow.utils.data import DataLoader
from oneflow.utils.vision import datasets


def make_divisible(value, divisor=8):
    """torchvision's channel rounding: the nearest multiple of divisor, never 10% below value."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


def conv_bn_relu6(inp, out, kernel, stride, groups=1):
    return nn.Sequential(
        nn.Conv2d(inp, out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out),
        nn.ReLU6(),
    )


class InvertedResidual(nn.Module):
    """1x1 expansion, 3x3 depthwise (groups=channels), 1x1 linear projection; a skip
    connection when the shape is kept."""

    def __init__(self, inp, out, stride, expand_ratio):
        super().__init__()
        hidden = int(round(inp * expand_ratio))
        self.use_residual = stride == 1 and inp == out
        layers = []
        if expand_ratio != 1:
            layers.append(conv_bn_relu6(inp, hidden, 1, 1))
        layers += [
            conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, out, 1, 1, 0, bias=False),
            nn.BatchNorm2d(out),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        y = self.conv(x)
        return x + y if self.use_residual else y


class MobileNetV2(nn.Module):
    """MobileNetV2 for 3x32x32 inputs: the stem and the first two stages keep stride 1 (as the
    usual CIFAR variants do), so the features end at 4x4 before the global average pool.
    width scales every layer, the last 1x1 conv included (1280 * width)."""

    # expansion t, output channels c, repeats n, first stride s
    settings = [
        (1, 16, 1, 1),
        (6, 24, 2, 1),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]

    def __init__(self, num_classes=10, width=1.0, dropout=0.2):
        super().__init__()
        inp = make_divisible(32 * width)
        self.last_channel = make_divisible(1280 * width)
        layers = [conv_bn_relu6(3, inp, 3, 1)]
        for t, c, n, s in self.settings:
            out = make_divisible(c * width)
            for i in range(n):
                layers.append(InvertedResidual(inp, out, s if i == 0 else 1, t))
                inp = out
        layers.append(conv_bn_relu6(inp, self.last_channel, 1, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(self.last_channel, num_classes))

    def forward(self, x):
        return self.classifier(self.flatten(self.pool(self.features(x))))


def make_model(args, dtype=flow.float32):
    flow.manual_seed(args.seed)  # the same initial weights on every rank and for the local copy
    return MobileNetV2(num_classes=10, width=args.width, dropout=args.dropout).to(dtype)


def make_optimizer(args, params):
    if args.optimizer == "adam":
        return flow.optim.Adam(params, lr=args.lr or 1e-3)
    return flow.optim.SGD(params, lr=args.lr or 0.02, momentum=args.momentum)


def to_global_batch(t, P):
    # Every rank holds the same full batch: declare it broadcast, then keep this rank's slice.
    return t.to_global(placement=P, sbp=flow.sbp.broadcast).to_global(sbp=flow.sbp.split(0))


def main():
    parser = argparse.ArgumentParser(description="Data-parallel MobileNetV2 on CIFAR-10 with global tensors")
    parser.add_argument("--data", default="./data/cifar10", help="folder with cifar-10-batches-bin/")
    parser.add_argument("--fake", action="store_true", help="first write small fake CIFAR-10 files to --data")
    parser.add_argument("--fake-per-batch", type=int, default=200, help="records per fake batch file")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many training steps")
    parser.add_argument("--batch-size", type=int, default=32, help="global batch size (split over the ranks)")
    parser.add_argument("--width", type=float, default=0.5, help="width multiplier")
    parser.add_argument("--dropout", type=float, default=0.2, help="dropout before the classifier")
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    parser.add_argument("--lr", type=float, default=None, help="default: 0.02 for sgd, 1e-3 for adam")
    parser.add_argument("--momentum", type=float, default=0.9, help="for sgd")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=10, help="print the loss every N steps")
    parser.add_argument("--check-local", action="store_true",
                        help="also train a local copy on the full batches and compare the losses")
    parser.add_argument("--dtype", choices=["float32", "float64"], default=None,
                        help="parameter and input dtype; default float32, float64 with --check-local")
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None,
                        help="placement device type; default cuda when a GPU is there")
    args = parser.parse_args()
    if args.device is None:
        args.device = "cuda" if flow.cuda.is_available() else "cpu"
    if args.dtype is None:
        args.dtype = "float64" if args.check_local else "float32"
    dtype = getattr(flow, args.dtype)

    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    P = flow.placement(args.device, ranks=list(range(world)))

    def log(*what):
        if rank == 0:
            print(*what, flush=True)

    if args.fake:
        if rank == 0:
            from oneflow.utils.vision.fake_data import write_fake_cifar10

            write_fake_cifar10(args.data, n_per_batch=args.fake_per_batch, seed=args.seed)
            log(f"Wrote fake CIFAR-10 files ({5 * args.fake_per_batch} train, "
                f"{args.fake_per_batch} test) to {args.data}")
        flow.comm.barrier()  # the others read only once rank 0 has written

    training_data = datasets.CIFAR10(args.data, train=True)
    test_data = datasets.CIFAR10(args.data, train=False)
    flow.manual_seed(args.seed)
    # The same seed on every rank: the same shuffle order, so the same full batches everywhere.
    # drop_last: batch norm needs more than one sample per channel.
    train_dataloader = DataLoader(training_data, batch_size=args.batch_size, shuffle=True, drop_last=True)
    test_dataloader = DataLoader(test_data, batch_size=args.batch_size)

    model = make_model(args, dtype).to_global(placement=P, sbp=flow.sbp.broadcast)
    optimizer = make_optimizer(args, model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    if args.check_local:
        ref = make_model(args, dtype)
        ref_optimizer = make_optimizer(args, ref.parameters())
    n_params = sum(p.numel() for p in model.parameters())
    log(f"MobileNetV2 width {args.width}: {n_params:,} {args.dtype} parameters on {P}, "
        f"batch {args.batch_size} split over {world} rank(s)")

    step, max_diff = 0, 0.0
    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        if args.check_local:
            ref.train()
        total_loss, correct, seen, batches = 0.0, 0, 0, 0
        for X, y in train_dataloader:
            X = X.to(dtype)
            step_seed = args.seed * 1000003 + step  # the same dropout mask for both copies
            if args.check_local:
                flow.manual_seed(step_seed)
                ref_loss = loss_fn(ref(X), y)
                ref_optimizer.zero_grad()
                ref_loss.backward()
                ref_optimizer.step()

            flow.manual_seed(step_seed)
            gX, gy = to_global_batch(X, P), to_global_batch(y, P)
            pred = model(gX)
            loss = loss_fn(pred, gy)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            loss_value = loss.item()
            total_loss += loss_value
            correct += (pred.argmax(1) == gy).sum().item()
            seen += len(y)
            batches += 1
            step += 1
            if args.check_local:
                diff = abs(loss_value - ref_loss.item())
                max_diff = max(max_diff, diff)
            if step % args.log_every == 0:
                extra = f"  local {ref_loss.item():.6f}" if args.check_local else ""
                log(f"step {step:>4d}  loss {loss_value:.6f}{extra}")
            if args.steps is not None and step >= args.steps:
                break

        test_loss, test_acc = evaluate(test_dataloader, model, loss_fn, P, dtype)
        log(f"epoch {epoch + 1}  train loss {total_loss / max(batches, 1):.4f}  "
            f"train acc {correct / max(seen, 1):.3f}  test loss {test_loss:.4f}  "
            f"test acc {test_acc:.3f}  {time.time() - start:.1f}s")
        if args.steps is not None and step >= args.steps:
            break

    if args.check_local:
        # numpy() of a broadcast global tensor is the whole tensor, on every rank.
        max_param_diff = max(
            float(np.abs(p.detach().numpy() - q.detach().numpy()).max())
            for p, q in zip(model.parameters(), ref.parameters())
        )
        agree = max_diff <= 1e-4
        log(f"global vs local: max |loss difference| over {step} steps = {max_diff:.3e} "
            f"({'agree' if agree else 'DISAGREE'}, tolerance 1e-4); "
            f"max |parameter difference| = {max_param_diff:.3e}")
        if not agree:
            sys.exit(1)


def evaluate(dataloader, model, loss_fn, P, dtype):
    model.eval()
    total, correct, seen, batches = 0.0, 0, 0, 0
    with flow.no_grad():
        for X, y in dataloader:
            # A last batch smaller than the world leaves some ranks an empty slice: fine.
            gX, gy = to_global_batch(X.to(dtype), P), to_global_batch(y, P)
            pred = model(gX)
            total += loss_fn(pred, gy).item()
            correct += (pred.argmax(1) == gy).sum().item()
            seen += len(y)
            batches += 1
    return total / max(batches, 1), correct / max(seen, 1)


if __name__ == "__main__":
    main()
