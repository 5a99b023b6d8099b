"""RMSprop with OneFlow's update rule: eps inside the square root, p -= lr * g / sqrt(v + eps)
(centered: v - mean(g)^2); weight decay in the gradient. With momentum (which OneFlow refuses
and PyTorch has) the buffer accumulates g / sqrt(v + eps).

    opt = optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.99, centered=True)
"""

from oneflow.optim.optimizer import Optimizer, _refuse_flags


class RMSprop(Optimizer):
    _op = "rmsprop_update"

    def __init__(self, params, lr=1e-3, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 maximize=False, contiguous_params=False):
        for name, value in (("lr", lr), ("alpha", alpha), ("eps", eps), ("weight_decay", weight_decay),
                            ("momentum", momentum)):
            if value < 0.0:
                raise ValueError(f"RMSprop: invalid {name} value {value} (expected {name} >= 0)")
        _refuse_flags("RMSprop", contiguous_params=contiguous_params)
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered, maximize=maximize)
        super().__init__(params, defaults)

    def _flags(self, group):
        return {"centered": bool(group["centered"]), "momentum": group["momentum"] > 0,
                "maximize": bool(group["maximize"])}

    def _state_names(self, group):
        names = ["square_avg"]
        if group["centered"]:
            names.append("grad_avg")
        if group["momentum"] > 0:
            names.append("momentum_buffer")
        return names

    def _hyper_values(self, group):
        values = {"lr": self._lr(group), "alpha": float(group["alpha"]), "eps": float(group["eps"]),
                  "weight_decay": float(group["weight_decay"])}
        if group["momentum"] > 0:
            values["momentum"] = float(group["momentum"])
        return values

    def _init_state(self, group, p, state, zeros):
        # Buffers for options switched on later (a group edit) start at zero, as in PyTorch.
        for key in self._state_names(group):
            if state.get(key) is None:
                state[key] = zeros()
