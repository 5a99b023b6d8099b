"""oneflow.utils: data loading (``oneflow.utils.data``), vision datasets
(``oneflow.utils.vision``), as in ``torch.utils.data`` and torchvision, and safetensors files
(``oneflow.utils.safetensors``, the names of ``safetensors.torch``), global views of whole
structures (``oneflow.utils.global_view``: to_global / to_local of state dicts, global_mode), and
activation checkpointing (``oneflow.utils.checkpoint``, as ``torch.utils.checkpoint``), and
TensorBoard event files (``oneflow.utils.tensorboard.SummaryWriter``).

They import only the standard library at import time, so
``import oneflow`` stays fast; numpy and gzip are imported inside functions.
"""
from oneflow.utils import data
from oneflow.utils import safetensors
from oneflow.utils import vision

__all__ = ["data", "safetensors", "tensorboard", "vision", "global_view", "checkpoint", "tensor"]


def __getattr__(name):  # global_view and checkpoint import layers that load after utils
    if name in ("global_view", "checkpoint", "tensor", "tensorboard"):  # tensorboard: socket
        import importlib
        return importlib.import_module("oneflow.utils." + name)
    raise AttributeError(f"module 'oneflow.utils' has no attribute {name!r}")
