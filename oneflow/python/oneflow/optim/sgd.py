"""SGD with PyTorch's momentum, dampening, Nesterov and weight decay.

    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
"""

import oneflow as flow
from oneflow.optim.optimizer import Optimizer, required


class SGD(Optimizer):
    def __init__(
        self, params, lr=required, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False
    ):
        if lr is not required and lr < 0.0:
            raise ValueError(f"SGD: invalid learning rate {lr} (expected lr >= 0)")
        if momentum < 0.0:
            raise ValueError(f"SGD: invalid momentum value {momentum} (expected momentum >= 0)")
        if weight_decay < 0.0:
            raise ValueError(f"SGD: invalid weight_decay value {weight_decay} (expected weight_decay >= 0)")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                "SGD: nesterov momentum requires a momentum > 0 and zero dampening "
                f"(got momentum={momentum}, dampening={dampening})"
            )
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._run_closure(closure)
        with flow.no_grad():
            for group in self.param_groups:
                momentum = group["momentum"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    # Maximising is descending on the negated gradient (PyTorch negates first).
                    grad = p.grad * -1.0 if group["maximize"] else p.grad
                    state = self.state.setdefault(p, {})
                    buf = None
                    first_step = False
                    if momentum != 0:
                        buf = state.get("momentum_buffer")
                        if buf is None:
                            # PyTorch starts the buffer at the first (decayed) gradient; the
                            # kernel does that when first_step is set.
                            buf = flow.zeros_like(p)
                            state["momentum_buffer"] = buf
                            first_step = True
                        elif state.pop("_first_step", False):
                            # nn.Graph made the buffer before its trace (so that the plan
                            # holds it); this is still the parameter's first update.
                            first_step = True
                    flow._C.sgd_update_(
                        p,
                        grad,
                        buf,
                        float(group["lr"]),
                        float(momentum),
                        float(group["dampening"]),
                        bool(group["nesterov"]),
                        float(group["weight_decay"]),
                        first_step,
                    )
        return loss
