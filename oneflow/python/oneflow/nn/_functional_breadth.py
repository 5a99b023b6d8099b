"""nn.functional's 1-D and 3-D convolution and pooling, and prelu (issue 38), composed exactly
from the 2-D kernels: a 3-D convolution is the sum over the kernel's depth of 2-D convolutions of
depth slices; max, average and adaptive average pooling are separable (a box's max is the max
of per-axis maxima; PyTorch's divisors are products of per-axis counts), so 3-D pooling is a
2-D pool over (H, W) followed by one over D, and 1-D pooling a 2-D pool over a height of 1.
Gradients, SBP rules and CUDA kernels come from the 2-D ops.

    F.conv3d(x, w, stride=2, padding=1)           # x (N, C, D, H, W), w (O, C/groups, kd, kh, kw)
    F.max_pool3d(x, 3, stride=2, padding=1), F.avg_pool1d(x, 2), F.adaptive_avg_pool3d(x, 1)
    F.prelu(x, weight), F.affine_grid(theta, (N, C, H, W), align_corners=False)
    F.unfold(x, 3, padding=1), F.fold(cols, (8, 8), 3, padding=1)   # im2col and its adjoint
"""

import oneflow._oneflow_internal as _C

__all__ = ["conv3d", "max_pool1d", "max_pool3d", "avg_pool1d", "avg_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool3d", "prelu", "affine_grid", "instance_norm",
           "max_unpool1d", "max_unpool2d", "max_unpool3d", "unfold", "fold"]


def _ints(op, name, value, n):
    if isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
        raise TypeError(f"{op}: {name} must be an int or {n} ints, got {value!r}")
    if isinstance(value, int):
        return [value] * n
    value = list(value)
    if len(value) == 1 and n > 1:
        value = value * n
    if len(value) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TypeError(f"{op}: {name} must be an int or {n} ints, got {tuple(value)}")
    return value


def _dims(op, input, allowed):
    if input.dim() not in allowed:
        wanted = " or ".join(f"{d}-D" for d in allowed)
        raise ValueError(f"{op}: expected a {wanted} input, got shape {tuple(input.shape)}")


def _batched(input, n_spatial):
    """(input with a batch dim, whether one was added)."""
    if input.dim() == n_spatial + 1:
        return input.unsqueeze(0), True
    return input, False


def _no_stride(stride):
    return stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)


def _zero_pad(x, dim, left, right):
    """x with left and right zeros along dim."""
    parts = []
    for n in (left, right):
        shape = list(x.shape)
        shape[dim] = n
        parts.append(_C.full(shape, 0.0, x.dtype, x._device) if n else None)
    return _C.cat([p for p in (parts[0], x, parts[1]) if p is not None], dim)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    _dims("conv3d", input, (4, 5))
    if weight.dim() != 5:
        raise ValueError(f"conv3d: expected weight of shape (out_channels, in_channels / groups, "
                         f"kd, kh, kw), got {tuple(weight.shape)}")
    x, unbatched = _batched(input, 3)
    stride = _ints("conv3d", "stride", stride, 3)
    dilation = _ints("conv3d", "dilation", dilation, 3)
    k = list(weight.shape[2:])
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"conv3d: padding must be 'valid', 'same' or ints, got {padding!r}")
        if padding == "same":
            if stride != [1, 1, 1]:
                raise ValueError("conv3d: padding='same' is not supported for strided "
                                 "convolutions")
            for i, (d, kk) in enumerate(zip(dilation, k)):  # odd totals: one more on the right
                total = d * (kk - 1)
                x = _zero_pad(x, 2 + i, total // 2, total - total // 2)
        padding = [0, 0, 0]
    else:
        padding = _ints("conv3d", "padding", padding, 3)
    n, c, d, h, w = x.shape
    if c != weight.shape[1] * groups:
        raise ValueError(f"conv3d: input has {c} channels, the weight expects "
                         f"{weight.shape[1] * groups} ({weight.shape[1]} x groups={groups})")
    if padding[0]:
        x = _zero_pad(x, 2, padding[0], padding[0])
        d += 2 * padding[0]
    d_out = (d - dilation[0] * (k[0] - 1) - 1) // stride[0] + 1
    if d_out <= 0:
        raise ValueError(f"conv3d: the kernel ({k[0]} with dilation {dilation[0]}) is larger than "
                         f"the padded depth {d}")
    out = None
    for kd in range(k[0]):
        start = kd * dilation[0]
        sl = x[:, :, start:start + (d_out - 1) * stride[0] + 1:stride[0]]  # (n, c, d_out, h, w)
        sl = sl.permute(0, 2, 1, 3, 4).reshape(n * d_out, c, h, w)
        y = _C.conv2d(sl, weight[:, :, kd], None, stride[1:], padding[1:], dilation[1:], groups)
        out = y if out is None else out + y
    o, ho, wo = out.shape[1], out.shape[2], out.shape[3]
    out = out.reshape(n, d_out, o, ho, wo).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def _pool2d(kind, x, kernel, stride, padding, dilation, ceil_mode, count_include_pad):
    if kind == "max":
        return _C.max_pool2d(x, kernel, stride, padding, dilation, bool(ceil_mode))
    return _C.avg_pool2d(x, kernel, stride, padding, bool(ceil_mode), bool(count_include_pad))


def _pool1d(kind, op, input, kernel_size, stride, padding, dilation, ceil_mode,
            count_include_pad):
    _dims(op, input, (2, 3))
    x, unbatched = _batched(input, 1)
    k = _ints(op, "kernel_size", kernel_size, 1)
    s = k if _no_stride(stride) else _ints(op, "stride", stride, 1)
    p = _ints(op, "padding", padding, 1)
    dl = _ints(op, "dilation", dilation, 1)
    y = _pool2d(kind, x.unsqueeze(2), [1] + k, [1] + s, [0] + p, [1] + dl, ceil_mode,
                count_include_pad).squeeze(2)
    return y.squeeze(0) if unbatched else y


def _pool3d(kind, op, input, kernel_size, stride, padding, dilation, ceil_mode,
            count_include_pad):
    _dims(op, input, (4, 5))
    x, unbatched = _batched(input, 3)
    k = _ints(op, "kernel_size", kernel_size, 3)
    s = k if _no_stride(stride) else _ints(op, "stride", stride, 3)
    p = _ints(op, "padding", padding, 3)
    dl = _ints(op, "dilation", dilation, 3)
    n, c, d, h, w = x.shape
    hw = _pool2d(kind, x.reshape(n, c * d, h, w), k[1:], s[1:], p[1:], dl[1:], ceil_mode,
                 count_include_pad)
    ho, wo = hw.shape[2], hw.shape[3]
    y = _pool2d(kind, hw.reshape(n, c, d, ho * wo), [k[0], 1], [s[0], 1], [p[0], 0],
                [dl[0], 1], ceil_mode, count_include_pad)
    y = y.reshape(n, c, y.shape[2], ho, wo)
    return y.squeeze(0) if unbatched else y


def _no_indices(op, return_indices):
    if return_indices:
        raise ValueError(f"{op}: return_indices=True is not supported")


def _pool_out_size(length, k, s, p, ceil_mode):
    """PyTorch's pooling output length (in ceil mode the last window must start inside the
    input or its left padding)."""
    o = (length + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
    return o - 1 if ceil_mode and (o - 1) * s >= length + p else o


def _divided_avg_pool(op, input, kernel_size, stride, padding, ceil_mode, divisor, n_spatial):
    """Average pooling with divisor_override: each window's sum / divisor. The sum is the
    average with count_include_pad=True over full windows times the window size: in ceil mode
    the input is extended by zeros until the last window is whole (zeros add nothing), so every
    divisor is the window size."""
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor == 0:
        raise ValueError(f"{op}: divisor_override must be a non-zero int, got {divisor!r}")
    _dims(op, input, (n_spatial + 1, n_spatial + 2))
    x, unbatched = _batched(input, n_spatial)
    k = _ints(op, "kernel_size", kernel_size, n_spatial)
    s = k if _no_stride(stride) else _ints(op, "stride", stride, n_spatial)
    p = _ints(op, "padding", padding, n_spatial)
    for i in range(n_spatial):
        dim = 2 + i
        length = x.shape[dim]
        o = _pool_out_size(length, k[i], s[i], p[i], ceil_mode)
        need = (o - 1) * s[i] + k[i] - (length + 2 * p[i])
        if ceil_mode and need > 0:
            shape = list(x.shape)
            shape[dim] = need
            x = _C.cat([x, x.new_zeros(shape)], dim)
    if n_spatial == 2:
        y = _pool2d("avg", x, k, s, p, [1, 1], False, True)
    else:
        y = _pool3d("avg", op, x, k, s, p, 1, False, True)
    window = 1
    for v in k:
        window *= v
    y = y * (window / divisor)
    return y.squeeze(0) if unbatched else y


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    if return_indices:  # a plane of height 1: the flat positions are the positions along L
        _dims("max_pool1d", input, (2, 3))
        x, unbatched = _batched(input, 1)
        k = _ints("max_pool1d", "kernel_size", kernel_size, 1)
        s = k if _no_stride(stride) else _ints("max_pool1d", "stride", stride, 1)
        y, idx = _C.max_pool2d_with_indices(
            x.unsqueeze(2), [1] + k, [1] + s, [0] + _ints("max_pool1d", "padding", padding, 1),
            [1] + _ints("max_pool1d", "dilation", dilation, 1), bool(ceil_mode))
        y, idx = y.squeeze(2), idx.squeeze(2)
        return (y.squeeze(0), idx.squeeze(0)) if unbatched else (y, idx)
    return _pool1d("max", "max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode,
                   True)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    _no_indices("max_pool3d", return_indices)
    return _pool3d("max", "max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode,
                   True)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return _pool1d("avg", "avg_pool1d", input, kernel_size, stride, padding, 1, ceil_mode,
                   count_include_pad)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    if divisor_override is not None:
        return _divided_avg_pool("avg_pool3d", input, kernel_size, stride, padding, ceil_mode,
                                 divisor_override, 3)
    return _pool3d("avg", "avg_pool3d", input, kernel_size, stride, padding, 1, ceil_mode,
                   count_include_pad)


def _adaptive_sizes(op, output_size, spatial):
    n = len(spatial)
    if isinstance(output_size, int) or output_size is None:
        output_size = [output_size] * n
    output_size = list(output_size)
    if len(output_size) != n:
        raise TypeError(f"{op}: output_size must be an int or {n} ints, got {tuple(output_size)}")
    return [spatial[i] if s is None else s for i, s in enumerate(output_size)]


def adaptive_avg_pool1d(input, output_size):
    _dims("adaptive_avg_pool1d", input, (2, 3))
    x, unbatched = _batched(input, 1)
    (lo,) = _adaptive_sizes("adaptive_avg_pool1d", output_size, [x.shape[2]])
    y = _C.adaptive_avg_pool2d(x.unsqueeze(2), [1, lo]).squeeze(2)
    return y.squeeze(0) if unbatched else y


def adaptive_avg_pool3d(input, output_size):
    _dims("adaptive_avg_pool3d", input, (4, 5))
    x, unbatched = _batched(input, 3)
    n, c, d, h, w = x.shape
    do, ho, wo = _adaptive_sizes("adaptive_avg_pool3d", output_size, [d, h, w])
    hw = _C.adaptive_avg_pool2d(x.reshape(n, c * d, h, w), [ho, wo])
    y = _C.adaptive_avg_pool2d(hw.reshape(n, c, d, ho * wo), [do, ho * wo])
    y = y.reshape(n, c, do, ho, wo)
    return y.squeeze(0) if unbatched else y


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight of 1 element or one per channel (dim 1)."""
    if weight.numel() != 1:
        if input.dim() < 2 or input.shape[1] != weight.numel():
            raise ValueError(f"prelu: weight has {weight.numel()} elements; expected 1 or the "
                             f"{input.shape[1] if input.dim() > 1 else 1} channels of dim 1 of "
                             f"the input of shape {tuple(input.shape)}")
        weight = weight.reshape([1, -1] + [1] * (input.dim() - 2))
    else:
        weight = weight.reshape([])
    return _C.where(input >= 0, input, weight * input)


def _grid_axis(n, align_corners, like):
    """The normalised coordinates of n points along an axis, in [-1, 1]."""
    if n == 1:
        return _C.full([1], 0.0, like.dtype, like._device)
    ramp = _C.arange(0.0, float(n), 1.0, like.dtype, like._device)
    if align_corners:
        return ramp * (2.0 / (n - 1)) - 1.0
    return (ramp * 2.0 + 1.0) / n - 1.0


def affine_grid(theta, size, align_corners=False):
    """The sampling grid of affine transforms theta (N, 2, 3) or (N, 3, 4) for an output of
    size (N, C, H, W) or (N, C, D, H, W): each output point's (x, y[, z], 1) times theta^T."""
    size = list(size)
    if len(size) == 4:
        if theta.dim() != 3 or tuple(theta.shape[1:]) != (2, 3):
            raise ValueError(f"affine_grid: a 4-D size needs theta of shape (N, 2, 3), got "
                             f"{tuple(theta.shape)}")
        n, _, h, w = size
        xs = _grid_axis(w, align_corners, theta).reshape(1, w).expand(h, w)
        ys = _grid_axis(h, align_corners, theta).reshape(h, 1).expand(h, w)
        base = _C.stack([xs, ys, _C.full([h, w], 1.0, theta.dtype, theta._device)], -1)
        out_shape = [n, h, w, 2]
    elif len(size) == 5:
        if theta.dim() != 3 or tuple(theta.shape[1:]) != (3, 4):
            raise ValueError(f"affine_grid: a 5-D size needs theta of shape (N, 3, 4), got "
                             f"{tuple(theta.shape)}")
        n, _, d, h, w = size
        xs = _grid_axis(w, align_corners, theta).reshape(1, 1, w).expand(d, h, w)
        ys = _grid_axis(h, align_corners, theta).reshape(1, h, 1).expand(d, h, w)
        zs = _grid_axis(d, align_corners, theta).reshape(d, 1, 1).expand(d, h, w)
        base = _C.stack([xs, ys, zs, _C.full([d, h, w], 1.0, theta.dtype, theta._device)], -1)
        out_shape = [n, d, h, w, 3]
    else:
        raise ValueError(f"affine_grid: size must have 4 or 5 elements, got {tuple(size)}")
    if theta.shape[0] != n:
        raise ValueError(f"affine_grid: theta holds {theta.shape[0]} transforms for a batch of {n}")
    points = _placed(base, theta).reshape(1, -1, base.shape[-1]).expand(n, -1, -1)
    return _C.matmul(points, theta.transpose(1, 2)).reshape(out_shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Each (sample, channel) normalised over its own spatial values (biased variance); with
    use_input_stats the running statistics (when given) move toward the batch's average of the
    instance statistics (unbiased variance), otherwise they normalise."""
    if input.dim() < 3:
        raise ValueError(f"instance_norm: expected an input of at least 3 dims (N, C, ...), got "
                         f"shape {tuple(input.shape)}")
    c = input.shape[1]
    dims = list(range(2, input.dim()))
    bshape = [1, c] + [1] * len(dims)
    if use_input_stats:
        mean = input.mean(dims, keepdim=True)
        dev = input - mean
        var = (dev * dev).mean(dims, keepdim=True)
        if running_mean is not None and running_var is not None:
            count = 1
            for d in dims:
                count *= input.shape[d]
            from oneflow import _grad_mode

            with _grad_mode.no_grad():
                batch_mean = mean.detach().mean(0).reshape(c)
                unbiased = var.detach().mean(0).reshape(c) * (count / max(count - 1, 1))
                running_mean.mul_(1 - momentum).add_(batch_mean * momentum)
                running_var.mul_(1 - momentum).add_(unbiased * momentum)
        out = dev / _C.sqrt(var + eps)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: use_input_stats=False needs running_mean and "
                             "running_var")
        out = (input - running_mean.reshape(bshape)) / _C.sqrt(running_var.reshape(bshape) + eps)
    if weight is not None:
        out = out * weight.reshape(bshape)
    if bias is not None:
        out = out + bias.reshape(bshape)
    return out


def _max_unpool(op, n, input, indices, kernel_size, stride, padding, output_size):
    _dims(op, input, (n + 1, n + 2))
    x, unbatched = _batched(input, n)
    idx = indices.unsqueeze(0) if unbatched else indices
    k = _ints(op, "kernel_size", kernel_size, n)
    s = k if _no_stride(stride) else _ints(op, "stride", stride, n)
    p = _ints(op, "padding", padding, n)
    spatial = [(x.shape[2 + i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(n)]
    if output_size is not None:
        spatial = list(output_size)[-n:]
    if tuple(idx.shape) != tuple(x.shape):
        raise ValueError(f"{op}: indices of shape {tuple(idx.shape)} must match the input's "
                         f"{tuple(x.shape)}")
    plane = 1
    for v in spatial:
        plane *= v
    nb, c = x.shape[0], x.shape[1]
    flat = _C.full([nb, c, plane], 0.0, x.dtype, x._device)
    out = _C.scatter(flat, 2, idx.reshape(nb, c, -1).to(_C.int64), x.reshape(nb, c, -1))
    out = out.reshape([nb, c] + spatial)
    return out.squeeze(0) if unbatched else out


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d(return_indices=True): each value at its index, zeros elsewhere."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d(return_indices=True): each value at its flat (H, W) index."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Each value at its flat (D, H, W) index, zeros elsewhere (indices as PyTorch's
    max_pool3d gives them)."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)


def _placed(t, like):
    """t (made on like's device) where like lives: for a global like, broadcast on its
    placement (constants of composites join the global call as the inputs do)."""
    if like.is_global:
        return t.to_global(placement=like.placement, sbp=[_C.sbp.broadcast] * len(like.sbp))
    return t


def _window_picker(op, channels, kernel, like):
    """The (C * kh * kw, 1, kh, kw) weight whose grouped convolution copies each window of each
    channel into C * kh * kw channels, in unfold's order (channel, kernel row, kernel column):
    entries are 0 and 1, so the convolution is an exact gather, and its transpose an exact sum."""
    k = kernel[0] * kernel[1]
    eye = _C.eye(k, k, like.dtype, like._device).reshape(1, k, 1, kernel[0], kernel[1])
    return _placed(eye.expand(channels, k, 1, kernel[0], kernel[1]).reshape(
        channels * k, 1, kernel[0], kernel[1]), like)


def _fold_args(op, kernel_size, dilation, padding, stride):
    k = _ints(op, "kernel_size", kernel_size, 2)
    d = _ints(op, "dilation", dilation, 2)
    p = _ints(op, "padding", padding, 2)
    s = _ints(op, "stride", stride, 2)
    if min(k + d + s) <= 0 or min(p) < 0:
        raise ValueError(f"{op}: kernel_size, dilation and stride must be positive and padding "
                         f"non-negative, got kernel_size={tuple(k)}, dilation={tuple(d)}, "
                         f"padding={tuple(p)}, stride={tuple(s)}")
    return k, d, p, s


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C * kh * kw, L), each column one window (L windows), as
    PyTorch's F.unfold; a grouped convolution with 0/1 weights (_window_picker)."""
    _dims("unfold", input, (3, 4))
    x, unbatched = _batched(input, 2)
    k, d, p, s = _fold_args("unfold", kernel_size, dilation, padding, stride)
    c = x.shape[1]
    cols = _C.conv2d(x, _window_picker("unfold", c, k, x), None, s, p, d, c)
    cols = cols.reshape(cols.shape[0], cols.shape[1], -1)
    return cols.squeeze(0) if unbatched else cols


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: (N, C * kh * kw, L) -> (N, C, H, W), each window's
    values summed into place, as PyTorch's F.fold (a transposed grouped convolution)."""
    _dims("fold", input, (2, 3))
    x, unbatched = (input.unsqueeze(0), True) if input.dim() == 2 else (input, False)
    size = _ints("fold", "output_size", output_size, 2)
    k, d, p, s = _fold_args("fold", kernel_size, dilation, padding, stride)
    blocks = [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    kk = k[0] * k[1]
    n, ck, length = x.shape
    if ck % kk != 0:
        raise RuntimeError(f"fold: expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size {tuple(k)} ({kk}), got {ck}")
    if min(blocks) <= 0 or length != blocks[0] * blocks[1]:
        raise RuntimeError(f"fold: output_size {tuple(size)}, kernel_size {tuple(k)}, dilation "
                           f"{tuple(d)}, padding {tuple(p)} and stride {tuple(s)} give "
                           f"{blocks[0]} x {blocks[1]} blocks, but the input has {length} "
                           f"(its dimension 2)")
    c = ck // kk
    base = [(blocks[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1 for i in range(2)]
    y = _C.conv_transpose2d(x.reshape(n, ck, blocks[0], blocks[1]),
                            _window_picker("fold", c, k, x), None, s, p,
                            [size[0] - base[0], size[1] - base[1]], c, d)
    return y.squeeze(0) if unbatched else y
