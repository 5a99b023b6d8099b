"""LeNet-5 as PyTorch's CIFAR-10 tutorial builds it (torchvision has no LeNet): two 5x5
convolutions with 2x2 max pooling, then 120-84-num_classes fully connected layers.

    model = flowvision.models.lenet(num_classes=10)                               # 3x32x32
    model = flowvision.models.lenet(num_classes=10, in_channels=1, image_size=28)  # MNIST
"""
import oneflow as flow
from oneflow import nn
from flowvision.models._utils import check_no_pretrained

__all__ = ["LeNet", "lenet"]


class LeNet(nn.Module):
    def __init__(self, num_classes=10, in_channels=3, image_size=32):
        super().__init__()
        side = ((image_size - 4) // 2 - 4) // 2  # two valid 5x5 convolutions, each pooled by 2
        if side < 1:
            raise ValueError(f"LeNet: image_size must be at least 16, got {image_size}")
        self.conv1 = nn.Conv2d(in_channels, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.relu = nn.ReLU()
        self.fc1 = nn.Linear(16 * side * side, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = flow.flatten(x, 1)
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


def lenet(pretrained=False, progress=True, **kwargs):
    check_no_pretrained("lenet", pretrained)
    return LeNet(**kwargs)
