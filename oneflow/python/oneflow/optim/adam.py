"""Adam and AdamW (decoupled weight decay) with OneFlow's update rule: the gradient plus the
coupled weight decay updates the moments; p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps), and
AdamW also subtracts lr * weight_decay * p (the value before the step). do_bias_correction=False
sets bc1 = bc2 = 1; amsgrad divides by the running maximum of v.

    opt = optim.Adam(model.parameters(), lr=1e-3)
    opt = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2, do_bias_correction=False)
"""

from oneflow.optim.optimizer import Optimizer, _refuse_flags


def _check_adam_args(name, lr, betas, eps, weight_decay):
    if lr < 0.0:
        raise ValueError(f"{name}: invalid learning rate {lr} (expected lr >= 0)")
    if eps < 0.0:
        raise ValueError(f"{name}: invalid epsilon value {eps} (expected eps >= 0)")
    if len(tuple(betas)) != 2:
        raise ValueError(f"{name}: betas must be two numbers, got {betas!r}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"{name}: invalid beta parameter at index {i}: {beta} (expected 0 <= beta < 1)")
    if weight_decay < 0.0:
        raise ValueError(f"{name}: invalid weight_decay value {weight_decay} (expected weight_decay >= 0)")


def _adam_hypers(opt, group):
    beta1, beta2 = group["betas"]
    return {"lr": opt._lr(group), "beta1": float(beta1), "beta2": float(beta2),
            "eps": float(group["eps"]), "weight_decay": float(group["weight_decay"])}


def _init_moments(state, zeros):
    for key in ("exp_avg", "exp_avg_sq"):
        if state.get(key) is None:
            state[key] = zeros()


class Adam(Optimizer):
    _op = "adam_update"
    # AdamW sets this: weight decay scales the parameter instead of adding to the gradient.
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
                 do_bias_correction=True, maximize=False, contiguous_params=False, fused=False):
        name = type(self).__name__
        _check_adam_args(name, lr, betas, eps, weight_decay)
        _refuse_flags(name, contiguous_params=contiguous_params, fused=fused)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        do_bias_correction=do_bias_correction, maximize=maximize)
        super().__init__(params, defaults)

    def _flags(self, group):
        return {"amsgrad": bool(group["amsgrad"]), "decoupled": self._decoupled,
                "do_bias_correction": bool(group["do_bias_correction"]),
                "maximize": bool(group["maximize"])}

    def _state_names(self, group):
        names = ["exp_avg", "exp_avg_sq"]
        return names + ["max_exp_avg_sq"] if group["amsgrad"] else names

    def _hyper_values(self, group):
        return _adam_hypers(self, group)

    def _init_state(self, group, p, state, zeros):
        _init_moments(state, zeros)
        if group["amsgrad"] and state.get("max_exp_avg_sq") is None:
            # amsgrad from the start, or switched on later (a group edit, a loaded state).
            state["max_exp_avg_sq"] = state["exp_avg_sq"].clone()


class AdamW(Adam):
    _decoupled = True

    # OneFlow's default weight decay is 0 (PyTorch's 1e-2).
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 do_bias_correction=True, maximize=False, contiguous_params=False, fused=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, do_bias_correction, maximize,
                         contiguous_params, fused)
