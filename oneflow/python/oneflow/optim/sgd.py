"""SGD with OneFlow's momentum: the buffer starts at zero, so the first step stores
(1 - dampening) * grad; nesterov is allowed with any dampening; weight decay is added to the
gradient; maximize ascends (with momentum only: OneFlow ignores it without, and warns).

    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
"""

import warnings

from oneflow.optim.optimizer import Optimizer, _refuse_flags


class SGD(Optimizer):
    _op = "sgd_update"
    _counts_steps = False
    _state_aliases = {"momentum_buf": "momentum_buffer"}  # OneFlow's key loads too

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False, contiguous_params=False, fused=False):
        if lr < 0.0:
            raise ValueError(f"SGD: invalid learning rate {lr} (expected lr >= 0)")
        if momentum < 0.0:
            raise ValueError(f"SGD: invalid momentum value {momentum} (expected momentum >= 0)")
        if weight_decay < 0.0:
            raise ValueError(f"SGD: invalid weight_decay value {weight_decay} (expected weight_decay >= 0)")
        _refuse_flags("SGD", contiguous_params=contiguous_params, fused=fused)
        if maximize and momentum == 0:
            warnings.warn("SGD: maximize takes effect only with momentum > 0 (as in OneFlow); this "
                          "SGD descends", UserWarning, stacklevel=2)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _flags(self, group):
        return {"momentum": group["momentum"] != 0, "nesterov": bool(group["nesterov"]),
                "maximize": bool(group["maximize"]) and group["momentum"] != 0}

    def _state_names(self, group):
        return ["momentum_buffer"] if group["momentum"] != 0 else []

    def _hyper_values(self, group):
        values = {"lr": self._lr(group), "weight_decay": float(group["weight_decay"])}
        if group["momentum"] != 0:
            values.update(momentum=float(group["momentum"]), dampening=float(group["dampening"]))
        return values

    def _init_state(self, group, p, state, zeros):
        if group["momentum"] != 0 and state.get("momentum_buffer") is None:
            state["momentum_buffer"] = zeros()
