"""flowvision: torchvision's datasets, transforms and models for oneflow (OneFlow's package of
that name mirrors torchvision; this one ships with the project).

    import flowvision
    import flowvision.transforms as transforms

    training_data = flowvision.datasets.CIFAR10(root="data", train=True,
                                                transform=transforms.ToTensor(), download=True)
    model = flowvision.models.mobilenet_v2()
    model.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(model.last_channel, 10))

Files are read from disk only (no network): see flowvision.datasets for the layouts. Under
oneflow.mock_torch, ``import torchvision`` gives this package.
"""
from flowvision import datasets, models, transforms

__version__ = "0.1.0"
__all__ = ["datasets", "models", "transforms"]
