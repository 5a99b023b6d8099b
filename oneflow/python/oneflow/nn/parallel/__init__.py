"""oneflow.nn.parallel: data parallelism over local modules.

    from oneflow.nn.parallel import DistributedDataParallel as ddp
    model = ddp(model)        # under the launcher; gradients are averaged across ranks
"""

from oneflow.nn.parallel.distributed import DistributedDataParallel
from oneflow.nn.parallel.pipeline import Pipeline

__all__ = ["DistributedDataParallel", "Pipeline"]
