"""Gradients of parameters cleared: the one body behind nn.Module.zero_grad and
optim.Optimizer.zero_grad (and so ZeroRedundancyOptimizer's, which calls the latter).

    zero_grads(model.parameters(), set_to_none=True)   # p.grad = None
    zero_grads(params, set_to_none=False)              # p.grad.zero_() where there is one
"""

from oneflow._grad_mode import no_grad


def zero_grads(params, set_to_none=True):
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            with no_grad():
                p.grad.zero_()
