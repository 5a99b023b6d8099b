"""torchvision.transforms' names (the implementation is oneflow.utils.vision.transforms).

    import flowvision.transforms as transforms
    pipeline = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
"""
from oneflow.utils.vision.transforms import *  # noqa: F401,F403
from oneflow.utils.vision.transforms import __all__  # noqa: F401
from flowvision.transforms import functional  # noqa: F401
