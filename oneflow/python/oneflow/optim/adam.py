"""Adam and AdamW (decoupled weight decay), with PyTorch's update rules.

    opt = optim.Adam(model.parameters(), lr=1e-3)
    opt = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
"""

import oneflow as flow
from oneflow.optim.optimizer import Optimizer


def _check_adam_args(name, lr, betas, eps, weight_decay):
    if lr < 0.0:
        raise ValueError(f"{name}: invalid learning rate {lr} (expected lr >= 0)")
    if eps < 0.0:
        raise ValueError(f"{name}: invalid epsilon value {eps} (expected eps >= 0)")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"{name}: invalid beta parameter at index {i}: {beta} (expected 0 <= beta < 1)")
    if weight_decay < 0.0:
        raise ValueError(f"{name}: invalid weight_decay value {weight_decay} (expected weight_decay >= 0)")


class Adam(Optimizer):
    # AdamW sets this: weight decay scales the parameter instead of adding to the gradient.
    _decoupled = False

    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False
    ):
        _check_adam_args(type(self).__name__, lr, betas, eps, weight_decay)
        defaults = dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize
        )
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._run_closure(closure)
        with flow.no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                amsgrad = bool(group["amsgrad"])
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad * -1.0 if group["maximize"] else p.grad
                    state = self.state.setdefault(p, {})
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = flow.zeros_like(p)
                        state["exp_avg_sq"] = flow.zeros_like(p)
                        if amsgrad:
                            state["max_exp_avg_sq"] = flow.zeros_like(p)
                    if amsgrad and "max_exp_avg_sq" not in state:
                        # amsgrad switched on after some steps (a group edit or a loaded state).
                        state["max_exp_avg_sq"] = state["exp_avg_sq"].clone()
                    step = state["step"]
                    if isinstance(step, flow.Tensor):  # a state dict written by PyTorch
                        step = step.item()
                    state["step"] = int(step) + 1
                    flow._C.adam_update_(
                        p,
                        grad,
                        state["exp_avg"],
                        state["exp_avg_sq"],
                        state["max_exp_avg_sq"] if amsgrad else None,
                        state["step"],
                        float(group["lr"]),
                        float(beta1),
                        float(beta2),
                        float(group["eps"]),
                        float(group["weight_decay"]),
                        amsgrad,
                        self._decoupled,
                    )
        return loss


class AdamW(Adam):
    _decoupled = True

    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False
    ):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
