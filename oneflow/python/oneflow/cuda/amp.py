"""oneflow.cuda.amp: torch.cuda.amp's autocast (float16 by default) and GradScaler."""

import oneflow as flow
from oneflow.amp import GradScaler as _GradScaler
from oneflow.amp import autocast as _autocast


class GradScaler(_GradScaler):
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


class autocast(_autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=None):
        super().__init__("cuda", dtype=flow.float16 if dtype is None else dtype, enabled=enabled,
                         cache_enabled=cache_enabled)
