"""LAMB (layer-wise adaptive moments) with OneFlow's update rule: Adam's direction
r = m_hat / (sqrt(v_hat) + eps), scaled by the trust ratio ||p|| / ||r|| (1 when either is 0):
p -= lr * trust * (r + weight_decay * p) with adam_w_mode (the default); without it the weight
decay joins the gradient instead.

    opt = optim.LAMB(model.parameters(), lr=1e-3, weight_decay=1e-2)
"""

from oneflow.optim.adam import _adam_hypers, _check_adam_args, _init_moments
from oneflow.optim.optimizer import Optimizer, _refuse_flags


class LAMB(Optimizer):
    _op = "lamb_update"
    # The trust ratio needs the whole parameter's norms: ZeRO cannot shard LAMB's state.
    _elementwise = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, adam_w_mode=True,
                 do_bias_correction=True, amsgrad=False, contiguous_params=False):
        if amsgrad:
            raise ValueError("LAMB: amsgrad=True is not supported (LAMB has no AMSGrad variant)")
        _check_adam_args("LAMB", lr, betas, eps, weight_decay)
        _refuse_flags("LAMB", contiguous_params=contiguous_params)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        adam_w_mode=adam_w_mode, do_bias_correction=do_bias_correction, amsgrad=False)
        super().__init__(params, defaults)

    def _flags(self, group):
        if group["amsgrad"]:
            raise ValueError("LAMB: amsgrad=True is not supported (LAMB has no AMSGrad variant)")
        return {"decoupled": bool(group["adam_w_mode"]),
                "do_bias_correction": bool(group["do_bias_correction"])}

    def _state_names(self, group):
        return ["exp_avg", "exp_avg_sq"]

    def _hyper_values(self, group):
        return _adam_hypers(self, group)

    def _init_state(self, group, p, state, zeros):
        _init_moments(state, zeros)
