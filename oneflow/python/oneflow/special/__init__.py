"""oneflow.special: OneFlow's names for special functions (as torch.special), the same functions
as the flow.* ones.

    import oneflow as flow
    flow.special.erfinv(x), flow.special.exp2(x), flow.special.softmax(x, dim=1)
    flow.special.digamma(x) (= psi), flow.special.gammaln(x) (= flow.lgamma)

zeta is not provided yet (no kernel): it raises AttributeError.
"""

from oneflow._breadth_ops import exp2
from oneflow._math_api import digamma, erf, erfc, erfinv, expm1, lgamma, log1p, logsumexp, round
from oneflow._ops import log_softmax, softmax

__all__ = ["digamma", "erf", "erfc", "erfinv", "exp2", "expm1", "gammaln", "log1p",
           "log_softmax", "logsumexp", "psi", "round", "softmax"]

psi = digamma
gammaln = lgamma
