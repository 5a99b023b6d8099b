"""Adagrad with OneFlow's (and PyTorch's) update rule: lr / (1 + (step - 1) * lr_decay), weight
decay in the gradient, the accumulator starting at initial_accumulator_value.

    opt = optim.Adagrad(model.parameters(), lr=1e-2, lr_decay=1e-3)
"""

import oneflow as flow
from oneflow.optim.optimizer import Optimizer, _refuse_flags


class Adagrad(Optimizer):
    _op = "adagrad_update"

    def __init__(self, params, lr=1e-3, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 maximize=False, contiguous_params=False):
        for name, value in (("lr", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
                            ("initial_accumulator_value", initial_accumulator_value), ("eps", eps)):
            if value < 0.0:
                raise ValueError(f"Adagrad: invalid {name} value {value} (expected {name} >= 0)")
        _refuse_flags("Adagrad", contiguous_params=contiguous_params)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        # The accumulator starts at initial_accumulator_value as soon as the parameter joins (as
        # in PyTorch, so a state_dict taken before any step has it).
        group = self.param_groups[-1]
        for p in group["params"]:
            self._init_all(group, p, self.state[p], lambda p=p: flow.zeros_like(p))

    def _flags(self, group):
        return {"maximize": bool(group["maximize"])}

    def _state_names(self, group):
        return ["sum"]

    def _hyper_values(self, group):
        return {"lr": self._lr(group), "lr_decay": float(group["lr_decay"]), "eps": float(group["eps"]),
                "weight_decay": float(group["weight_decay"])}

    def _init_state(self, group, p, state, zeros):
        if state.get("sum") is None:
            total = zeros()
            with flow.no_grad():
                total.fill_(float(group["initial_accumulator_value"]))
            state["sum"] = total
