"""Stochastic weight averaging, as OneFlow's (and PyTorch's) swa_utils: AveragedModel keeps a
running average of a model's parameters, SWALR anneals each group's lr to its swa_lr, update_bn
recomputes BatchNorm statistics for the averaged weights.

    swa_model = swa_utils.AveragedModel(model)
    swa_sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=5)
    ...; swa_model.update_parameters(model); swa_sched.step()
    swa_utils.update_bn(loader, swa_model)
"""

import itertools
import math
from copy import deepcopy

import oneflow as flow
from oneflow.nn.modules.batchnorm import _BatchNorm
from oneflow.nn.modules.module import Module
from oneflow.optim.lr_scheduler import LRScheduler

__all__ = ["AveragedModel", "update_bn", "SWALR"]


def _mean_of(averaged, current, num_averaged):
    return averaged + (current - averaged) / (num_averaged + 1)


class AveragedModel(Module):
    """A copy of model whose parameters (and buffers with use_buffers) are the average of the
    values update_parameters saw (avg_fn(averaged, current, n) picks another average)."""

    def __init__(self, model, device=None, avg_fn=None, use_buffers=False):
        super().__init__()
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", flow.tensor(0, dtype=flow.int64, device=device))
        self.avg_fn = _mean_of if avg_fn is None else avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        mine = itertools.chain(self.module.parameters(), self.module.buffers()) if self.use_buffers \
            else self.module.parameters()
        theirs = itertools.chain(model.parameters(), model.buffers()) if self.use_buffers \
            else model.parameters()
        n = int(self.n_averaged.item())
        with flow.no_grad():
            for p_swa, p_model in zip(mine, theirs):
                current = p_model.detach().to(p_swa.device)
                if n == 0:
                    p_swa.copy_(current)
                else:
                    p_swa.copy_(self.avg_fn(p_swa.detach(), current, self.n_averaged.to(p_swa.device)))
            if not self.use_buffers:  # buffers follow the model (update_bn recomputes BN's)
                for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                    b_swa.copy_(b_model.detach().to(b_swa.device))
            self.n_averaged.add_(1)


def update_bn(loader, model, device=None):
    """One pass over loader in train mode with each BatchNorm's statistics reset and averaged
    over the whole pass (momentum None), then the momenta and mode restored."""
    momenta = {}
    with flow.no_grad():
        for module in model.modules():
            if isinstance(module, _BatchNorm) and module.running_mean is not None:
                module.running_mean.zero_()
                module.running_var.fill_(1.0)
                momenta[module] = module.momentum
        if not momenta:
            return
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None
            if module.num_batches_tracked is not None:
                module.num_batches_tracked.zero_()
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr from its value to swa_lr over anneal_epochs steps ("cos" or
    "linear"), then holds swa_lr."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        groups = optimizer.param_groups
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
        if len(swa_lrs) != len(groups):
            raise ValueError(f"SWALR: swa_lr has {len(swa_lrs)} values for {len(groups)} param groups")
        for value, group in zip(swa_lrs, groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"SWALR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"SWALR: anneal_epochs must be an int >= 0, got {anneal_epochs!r}")
        self.anneal_strategy, self.anneal_epochs = anneal_strategy, anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t):
        return (1 - math.cos(math.pi * t)) / 2 if self.anneal_strategy == "cos" else t

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        lrs = []
        for group in self.optimizer.param_groups:
            swa = group["swa_lr"]
            # The lr annealing started from: undo the previous step's mix.
            start = swa if prev_alpha == 1 else (group["lr"] - prev_alpha * swa) / (1 - prev_alpha)
            lrs.append(swa * alpha + start * (1 - alpha))
        return lrs
