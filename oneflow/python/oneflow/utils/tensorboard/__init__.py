"""oneflow.utils.tensorboard: SummaryWriter, as torch.utils.tensorboard's, writing TensorBoard
event files without TensorFlow.

    from oneflow.utils.tensorboard import SummaryWriter
    with SummaryWriter("runs/exp") as w:
        w.add_scalar("loss", 0.5, 1)
"""
from oneflow.utils.tensorboard.writer import SummaryWriter

__all__ = ["SummaryWriter"]
