"""oneflow.one_embedding: OneFlow's FTRL optimizer (a plain optimizer over dense parameters).
OneFlow's embedding tables (MultiTableEmbedding and their stores) are not part of this build.

    opt = flow.one_embedding.Ftrl(model.parameters(), lr=0.1, lr_power=-0.5, lambda1=1e-3)
"""

from oneflow._grad_mode import no_grad
from oneflow.optim.optimizer import Optimizer


class Ftrl(Optimizer):
    """FTRL-proximal with OneFlow's update rule (lr_power negative, -0.5 by default):
    d = g + weight_decay * p; n' = n + d^2; sigma = (n'^lr_power - n^lr_power) / lr;
    z += d - sigma * p; p = 0 where |z| < lambda1, else
    (sign(z) * lambda1 - z) / ((beta + n'^lr_power) / lr + lambda2).
    State: accumulator_value (starts at initial_accumulator_value) and z, OneFlow's keys."""

    _op = "ftrl_update"
    _counts_steps = False

    def __init__(self, params, lr=1e-3, weight_decay=0.0, lr_power=-0.5, initial_accumulator_value=0.1,
                 lambda1=0.0, lambda2=0.0, beta=0.0):
        if lr <= 0.0:
            raise ValueError(f"Ftrl: invalid learning rate {lr} (expected lr > 0)")
        if weight_decay < 0.0:
            raise ValueError(f"Ftrl: invalid weight_decay value {weight_decay} (expected weight_decay >= 0)")
        defaults = dict(lr=lr, weight_decay=weight_decay, lr_power=lr_power,
                        initial_accumulator_value=initial_accumulator_value, lambda1=lambda1,
                        lambda2=lambda2, beta=beta)
        super().__init__(params, defaults)

    def _state_names(self, group):
        return ["accumulator_value", "z"]

    def _hyper_values(self, group):
        return {k: float(v) for k, v in (("lr", self._lr(group)), ("lr_power", group["lr_power"]),
                                         ("lambda1", group["lambda1"]), ("lambda2", group["lambda2"]),
                                         ("beta", group["beta"]),
                                         ("weight_decay", group["weight_decay"]))}

    def _init_state(self, group, p, state, zeros):
        if state.get("accumulator_value") is None:
            acc = zeros()
            with no_grad():
                acc.fill_(float(group["initial_accumulator_value"]))
            state["accumulator_value"] = acc
        if state.get("z") is None:
            state["z"] = zeros()
