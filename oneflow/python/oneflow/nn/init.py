"""oneflow.nn.init: in-place initialisers with PyTorch's formulas.

    nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5))
    nn.init.zeros_(linear.bias)

Each one fills the tensor under no_grad (an initialisation is not part of any graph) and
returns it (the tensor itself, whatever the in-place method returns).
"""

import math
import warnings

import oneflow as flow


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear_fns = [
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    ]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            negative_slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
            f"(got shape {tuple(tensor.shape)})"
        )
    receptive_field_size = 1
    for i in range(2, tensor.dim()):
        receptive_field_size *= tensor.size(i)
    fan_in = tensor.size(1) * receptive_field_size
    fan_out = tensor.size(0) * receptive_field_size
    return fan_in, fan_out


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"init: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0):
    with flow.no_grad():
        tensor.uniform_(a, b)
    return tensor


def normal_(tensor, mean=0.0, std=1.0):
    with flow.no_grad():
        tensor.normal_(mean, std)
    return tensor


def constant_(tensor, val):
    with flow.no_grad():
        tensor.fill_(val)
    return tensor


def zeros_(tensor):
    with flow.no_grad():
        tensor.zero_()
    return tensor


def ones_(tensor):
    with flow.no_grad():
        tensor.fill_(1.0)
    return tensor


def eye_(tensor):
    """Fills a 2-D tensor with the identity (ones on the diagonal), in place."""
    if tensor.dim() != 2:
        raise ValueError(f"eye_: only 2-D tensors are supported, got shape {tuple(tensor.shape)}")
    with flow.no_grad():
        tensor.copy_(flow.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))
    return tensor


def _has_zero_dim(tensor):
    return any(tensor.size(i) == 0 for i in range(tensor.dim()))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if _has_zero_dim(tensor):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std  # a uniform(-b, b) has std b / sqrt(3)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if _has_zero_dim(tensor):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std)


def xavier_uniform_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std)


# Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9),
# evaluated in float64 with tensor ops; the library has no erfinv.
_ACKLAM_A = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
             -3.066479806614716e01, 2.506628277459239e00)
_ACKLAM_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
             -1.328068155288572e01, 1.0)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
             4.374664141464968e00, 2.938163982698783e00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00, 1.0)


def _polyval(coefs, x):
    result = x * 0.0 + coefs[0]
    for c in coefs[1:]:
        result = result * x + c
    return result


def _normal_quantile(p):
    """The standard normal quantile of each element of p (float64, in (0, 1))."""
    p_low = 0.02425
    q = p - 0.5
    r = q * q
    central = _polyval(_ACKLAM_A, r) * q / _polyval(_ACKLAM_B, r)
    # The tails use the smaller of p and 1 - p; clamping keeps the unused branches finite.
    tail_p = flow.minimum(p, 1.0 - p).clamp(min=1e-300)
    t = (tail_p.log() * -2.0).sqrt()
    tail = _polyval(_ACKLAM_C, t) / _polyval(_ACKLAM_D, t)  # negative: the lower tail
    tail = flow.where(p > 0.5, tail * -1.0, tail)
    return flow.where((p >= p_low) & (p <= 1.0 - p_low), central, tail)


def _norm_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Fills tensor with a normal(mean, std) truncated to [a, b] (absolute bounds, as in
    PyTorch), by inverting the normal CDF on uniform draws between the bounds' CDF values."""
    if std <= 0:
        raise ValueError(f"trunc_normal_: std must be positive, got {std}")
    if not a < b:
        raise ValueError(f"trunc_normal_: the bounds need a < b, got a={a}, b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    lo, hi = _norm_cdf((a - mean) / std), _norm_cdf((b - mean) / std)
    with flow.no_grad():
        u = flow.empty_like(tensor, dtype=flow.float64).uniform_(lo, hi)
        u = u.clamp(min=1e-300, max=1.0 - 1e-16)
        values = (_normal_quantile(u) * float(std) + float(mean)).clamp(min=float(a), max=float(b))
        tensor.copy_(values.to(tensor.dtype))
    return tensor


def _reset_weight_and_bias_(weight, bias):
    """PyTorch's default initialisation of Linear and convolution layers: kaiming_uniform with
    a=sqrt(5) for the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        if fan_in != 0:
            bound = 1 / math.sqrt(fan_in)
            uniform_(bias, -bound, bound)
