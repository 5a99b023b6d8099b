"""oneflow.cpu.amp: torch.cpu.amp's autocast (bfloat16 by default)."""

import oneflow as flow
from oneflow.amp import autocast as _autocast


class autocast(_autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=None):
        super().__init__("cpu", dtype=flow.bfloat16 if dtype is None else dtype, enabled=enabled,
                         cache_enabled=cache_enabled)
