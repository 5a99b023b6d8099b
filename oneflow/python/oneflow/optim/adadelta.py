"""Adadelta with OneFlow's (and PyTorch's) update rule: v = rho v + (1 - rho) g^2,
delta = sqrt(u + eps) / sqrt(v + eps) * g, u = rho u + (1 - rho) delta^2, p -= lr * delta;
weight decay in the gradient. State keys are PyTorch's (square_avg, acc_delta); OneFlow's
(square_avgs, acc_deltas) load too.

    opt = optim.Adadelta(model.parameters(), lr=1.0, rho=0.9)
"""

from oneflow.optim.optimizer import Optimizer, _refuse_flags


class Adadelta(Optimizer):
    _op = "adadelta_update"
    _state_aliases = {"square_avgs": "square_avg", "acc_deltas": "acc_delta"}

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False,
                 contiguous_params=False):
        for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            if value < 0.0:
                raise ValueError(f"Adadelta: invalid {name} value {value} (expected {name} >= 0)")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Adadelta: invalid rho value {rho} (expected 0 <= rho <= 1)")
        _refuse_flags("Adadelta", contiguous_params=contiguous_params)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _flags(self, group):
        return {"maximize": bool(group["maximize"])}

    def _state_names(self, group):
        return ["square_avg", "acc_delta"]

    def _hyper_values(self, group):
        return {"lr": self._lr(group), "rho": float(group["rho"]), "eps": float(group["eps"]),
                "weight_decay": float(group["weight_decay"])}

    def _init_state(self, group, p, state, zeros):
        for key in ("square_avg", "acc_delta"):
            if state.get(key) is None:
                state[key] = zeros()
