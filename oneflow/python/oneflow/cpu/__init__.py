"""oneflow.cpu: as torch.cpu (the autocast of oneflow.cpu.amp)."""

from oneflow.cpu import amp  # noqa: F401
