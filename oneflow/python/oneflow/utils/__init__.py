"""oneflow.utils: data loading (``oneflow.utils.data``), vision datasets
(``oneflow.utils.vision``), as in ``torch.utils.data`` and torchvision, and safetensors files
(``oneflow.utils.safetensors``, the names of ``safetensors.torch``).

They import only the standard library at import time, so
``import oneflow`` stays fast; numpy and gzip are imported inside functions.
"""
from oneflow.utils import data
from oneflow.utils import safetensors
from oneflow.utils import vision

__all__ = ["data", "safetensors", "vision"]
