"""RMSprop with PyTorch's update rule (smoothing alpha, optional momentum and centering).

    opt = optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.99, momentum=0.9, centered=True)
"""

import oneflow as flow
from oneflow.optim.optimizer import Optimizer


def _step_count(state):
    step = state.get("step", 0)
    if isinstance(step, flow.Tensor):  # a state dict written by PyTorch keeps a tensor
        step = step.item()
    return int(step)


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 maximize=False):
        for name, value in (("lr", lr), ("alpha", alpha), ("eps", eps), ("weight_decay", weight_decay),
                            ("momentum", momentum)):
            if value < 0.0:
                raise ValueError(f"RMSprop: invalid {name} value {value} (expected {name} >= 0)")
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._run_closure(closure)
        with flow.no_grad():
            for group in self.param_groups:
                alpha, eps = float(group["alpha"]), float(group["eps"])
                momentum, weight_decay = float(group["momentum"]), float(group["weight_decay"])
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad * -1.0 if group["maximize"] else p.grad
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["square_avg"] = flow.zeros_like(p)
                    # Buffers for options switched on later (a group edit) start at zero, as in
                    # PyTorch when its state is first created with them.
                    if momentum > 0 and "momentum_buffer" not in state:
                        state["momentum_buffer"] = flow.zeros_like(p)
                    if group["centered"] and "grad_avg" not in state:
                        state["grad_avg"] = flow.zeros_like(p)
                    state["step"] = _step_count(state) + 1
                    if weight_decay != 0:
                        grad = grad + p * weight_decay
                    square_avg = state["square_avg"]
                    square_avg.mul_(alpha).add_(grad * grad * (1 - alpha))
                    if group["centered"]:
                        grad_avg = state["grad_avg"]
                        grad_avg.mul_(alpha).add_(grad * (1 - alpha))
                        avg = (square_avg - grad_avg * grad_avg).sqrt() + eps
                    else:
                        avg = square_avg.sqrt() + eps
                    if momentum > 0:
                        buf = state["momentum_buffer"]
                        buf.mul_(momentum).add_(grad / avg)
                        p.sub_(buf * float(group["lr"]))
                    else:
                        p.sub_(grad / avg * float(group["lr"]))
        return loss
