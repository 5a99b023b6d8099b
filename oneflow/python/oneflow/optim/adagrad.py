"""Adagrad with PyTorch's update rule (lr decay, weight decay, initial accumulator).

    opt = optim.Adagrad(model.parameters(), lr=1e-2, lr_decay=1e-3)
"""

import oneflow as flow
from oneflow.optim.optimizer import Optimizer
from oneflow.optim.rmsprop import _step_count


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 maximize=False):
        for name, value in (("lr", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
                            ("initial_accumulator_value", initial_accumulator_value), ("eps", eps)):
            if value < 0.0:
                raise ValueError(f"Adagrad: invalid {name} value {value} (expected {name} >= 0)")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        # The accumulator starts at initial_accumulator_value as soon as the parameter joins (as
        # in PyTorch, so a state_dict taken before any step has it).
        group = self.param_groups[-1]
        for p in group["params"]:
            if p not in self.state:
                self.state[p] = {"step": 0, "sum": flow.full_like(p, float(group["initial_accumulator_value"]))}

    def step(self, closure=None):
        loss = self._run_closure(closure)
        with flow.no_grad():
            for group in self.param_groups:
                weight_decay, eps = float(group["weight_decay"]), float(group["eps"])
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad * -1.0 if group["maximize"] else p.grad
                    state = self.state[p]
                    if "sum" not in state:
                        state["sum"] = flow.full_like(p, float(group["initial_accumulator_value"]))
                    step = _step_count(state) + 1
                    state["step"] = step
                    if weight_decay != 0:
                        grad = grad + p * weight_decay
                    clr = float(group["lr"]) / (1 + (step - 1) * float(group["lr_decay"]))
                    state["sum"].add_(grad * grad)
                    p.sub_(grad / (state["sum"].sqrt() + eps) * clr)
        return loss
