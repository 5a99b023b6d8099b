# PyTorch's distributed data-parallel tutorial, main.py: CIFAR-10 with the tutorial's network,
# DistributedSampler, DistributedDataParallel, and rank 0 printing one line per epoch. It is
# PyTorch code; under oneflow.mock_torch it runs on oneflow unchanged:
#     eval $(python3 -m oneflow.mock_torch)
#     python3 -m oneflow.distributed.launch --nproc_per_node 2 main.py --data ./data
# (torchrun --nproc_per_node 2 main.py runs it on PyTorch.) Only what PyTorch itself needs on
# a machine without GPUs differs from the tutorial, each marked "CPU:": the gloo backend instead
# of nccl, no torch.cuda.set_device, the model on the CPU and no device_ids (PyTorch refuses
# device_ids for a CPU module).
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torchvision
import torchvision.transforms as transforms
from torch.distributed import ReduceOp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def reduce_mean(tensor, world_size):
    rt = tensor.clone()
    dist.all_reduce(rt, op=ReduceOp.SUM)
    rt /= world_size
    return rt


def evaluate(model, loader, device):
    model.eval()
    correct = torch.zeros(1, device=device)
    total = torch.zeros(1, device=device)
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            outputs = model(images)
            _, predicted = torch.max(outputs, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    dist.all_reduce(correct, op=ReduceOp.SUM)
    dist.all_reduce(total, op=ReduceOp.SUM)
    return (correct / total).item()


def main():
    parser = argparse.ArgumentParser(description="PyTorch DDP CIFAR-10")
    parser.add_argument("--data", default="./data", type=str)
    parser.add_argument("--epochs", default=2, type=int)
    parser.add_argument("--batch_size", default=32, type=int, help="per process")
    parser.add_argument("--lr", default=0.01, type=float)
    parser.add_argument("--seed", default=0, type=int)
    parser.add_argument("--num_workers", default=2, type=int)
    parser.add_argument("--save", default="model.pt", type=str)
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])

    # CPU: the tutorial calls torch.cuda.set_device(local_rank) here.
    dist.init_process_group(backend="gloo", init_method="env://",  # CPU: "nccl" in the tutorial
                            world_size=world_size, rank=rank)
    dist.barrier()
    torch.manual_seed(args.seed)
    device = torch.device("cpu")  # CPU: torch.device("cuda", local_rank) in the tutorial

    transform = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    ])
    if rank == 0:  # one process downloads, the others wait for it
        torchvision.datasets.CIFAR10(root=args.data, train=True, download=True)
    dist.barrier()
    trainset = torchvision.datasets.CIFAR10(root=args.data, train=True, download=False, transform=transform)
    testset = torchvision.datasets.CIFAR10(root=args.data, train=False, download=False, transform=transform)

    train_sampler = DistributedSampler(trainset, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    test_sampler = DistributedSampler(testset, num_replicas=world_size, rank=rank, shuffle=False)
    trainloader = DataLoader(trainset, batch_size=args.batch_size, sampler=train_sampler,
                             num_workers=args.num_workers, pin_memory=True)
    testloader = DataLoader(testset, batch_size=args.batch_size, sampler=test_sampler,
                            num_workers=args.num_workers, pin_memory=True)

    model = Net().to(device)
    model = DDP(model)  # CPU: device_ids=[local_rank], output_device=local_rank in the tutorial
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        running_loss = torch.zeros(1, device=device)
        steps = 0
        for images, labels in trainloader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            outputs = model(images)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.detach()
            steps += 1
        epoch_loss = reduce_mean(running_loss / steps, world_size).item()
        accuracy = evaluate(model, testloader, device)
        if rank == 0:
            print(f"Epoch {epoch + 1}/{args.epochs}, loss: {epoch_loss:.6f}, test accuracy: {accuracy:.4f}")

    if rank == 0:
        torch.save(model.module.state_dict(), args.save)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
