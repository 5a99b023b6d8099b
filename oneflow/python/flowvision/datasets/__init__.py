"""torchvision's datasets in their on-disk layouts, read from local files (no network).

    import flowvision
    import flowvision.transforms as transforms
    train = flowvision.datasets.CIFAR10(root="data", train=True, transform=transforms.ToTensor(),
                                        download=True)

MNIST / FashionMNIST / KMNIST read idx files (gzipped or not) under root/<Name>/raw; CIFAR10 and
CIFAR100 read the python-version pickles under root/cifar-10-batches-py and root/cifar-100-python
or the .tar.gz archives as downloaded. download=True uses files already there.
"""
from flowvision.datasets.cifar import CIFAR10, CIFAR100
from flowvision.datasets.mnist import MNIST, FashionMNIST, KMNIST
from flowvision.datasets.vision import VisionDataset

__all__ = ["CIFAR10", "CIFAR100", "FashionMNIST", "KMNIST", "MNIST", "VisionDataset"]
