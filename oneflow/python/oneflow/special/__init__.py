"""oneflow.special: OneFlow's names for special functions (as torch.special), the same functions
as the flow.* ones.

    import oneflow as flow
    flow.special.erfinv(x), flow.special.exp2(x), flow.special.softmax(x, dim=1)

digamma, psi and zeta are not provided yet (no kernel): they raise AttributeError.
"""

from oneflow._breadth_ops import exp2
from oneflow._math_api import erf, erfc, erfinv, expm1, log1p, logsumexp, round
from oneflow._ops import log_softmax, softmax

__all__ = ["erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "log_softmax", "logsumexp",
           "round", "softmax"]
