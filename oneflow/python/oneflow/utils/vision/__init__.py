"""Vision datasets and transforms (torchvision's names), reading local files only.

    from oneflow.utils.vision import datasets, transforms
    train = datasets.CIFAR10("./data/cifar10", train=True)

``oneflow.utils.vision.fake_data`` writes tiny files in the real formats for
tests and examples; it is not imported here.
"""
from oneflow.utils.vision import datasets
from oneflow.utils.vision import transforms

__all__ = ["datasets", "transforms"]
