"""oneflow.cuda.amp: torch.cuda.amp's autocast (float16 by default) and GradScaler."""

import oneflow as flow
from oneflow.amp import GradScaler  # noqa: F401
from oneflow.amp import autocast as _autocast


class autocast(_autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=None):
        super().__init__("cuda", dtype=flow.float16 if dtype is None else dtype, enabled=enabled,
                         cache_enabled=cache_enabled)
