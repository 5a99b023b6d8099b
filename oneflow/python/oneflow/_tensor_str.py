"""Printing of tensors: `repr(t)` and `str(t)` in the C++ binding call `_repr(t)`.

The layout follows PyTorch's torch/_tensor_str.py (same number formats, widths, line
wrapping and summarisation), and the suffixes follow OneFlow, which always names the dtype:

    >>> flow.tensor([[2.0], [3.0]])
    tensor([[2.],
            [3.]], dtype=oneflow.float32)
"""

import math

import oneflow._oneflow_internal as _C
from oneflow._dtype_util import dtype_name, is_complex, is_floating

# PyTorch's default print options.
_PRECISION = 4
_THRESHOLD = 1000  # more elements than this are summarised with "..."
_EDGEITEMS = 3  # elements kept at each end of a summarised dimension
_LINEWIDTH = 80
_SCI_MODE = None  # True / False force scientific notation on / off (flow.set_printoptions)


class _Skip:
    """Marks where a summarised dimension left elements out."""


_SKIP = _Skip()


def _leaves(data, out):
    """Appends the scalars of a nested list (skipping _SKIP markers) to out."""
    if isinstance(data, list):
        for item in data:
            _leaves(item, out)
    elif data is not _SKIP:
        out.append(data)
    return out


class _Formatter:
    """Chooses one number format and one width for all printed elements (PyTorch's rules)."""

    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1

        if not floating:
            for value in values:
                self.max_width = max(self.max_width, len(str(value)))
            return

        finite = [v for v in values if math.isfinite(v) and v != 0]
        if not finite:
            return
        abs_values = [abs(v) for v in finite]
        abs_min, abs_max = min(abs_values), max(abs_values)
        self.int_mode = all(v == math.ceil(v) for v in finite)
        # An integral float tensor may still need scientific notation, but not for small values.
        if self.int_mode:
            self.sci_mode = abs_max / abs_min > 1000.0 or abs_max > 1.0e8
        else:
            self.sci_mode = abs_max / abs_min > 1000.0 or abs_max > 1.0e8 or abs_min < 1.0e-4

        for value in finite:
            if self.sci_mode:
                width = len("{:.{p}e}".format(value, p=_PRECISION))
            elif self.int_mode:
                width = len("{:.0f}".format(value)) + 1  # the trailing "."
            else:
                width = len("{:.{p}f}".format(value, p=_PRECISION))
            self.max_width = max(self.max_width, width)
        # A forced mode applies after the widths are chosen, as in PyTorch.
        if _SCI_MODE is not None:
            self.sci_mode = _SCI_MODE

    def format(self, value):
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = "{:{w}.{p}e}".format(value, w=self.max_width, p=_PRECISION)
        elif self.int_mode:
            text = "{:.0f}".format(value)
            if math.isfinite(value):
                text += "."
        else:
            text = "{:.{p}f}".format(value, p=_PRECISION)
        return text.rjust(self.max_width)


class _ComplexFormatter:
    """Complex elements as PyTorch prints them: "1.5000+2.0000j", real and imaginary parts each
    with its own _Formatter."""

    def __init__(self, values):
        self.real = _Formatter([v.real for v in values], True)
        self.imag = _Formatter([v.imag for v in values], True)
        self.max_width = self.real.max_width + self.imag.max_width + 2

    def format(self, value):
        imag = (self.imag.format(value.imag) + "j").lstrip()
        if imag[0] not in "+-":
            imag = "+" + imag
        return self.real.format(value.real) + imag


def _formatter(values, dtype):
    if is_complex(dtype):
        return _ComplexFormatter(values)
    return _Formatter(values, is_floating(dtype))


def _summarized_list(t):
    """Nested lists of t's elements keeping _EDGEITEMS at each end of every long dimension."""
    n = t.size(0)
    if t.dim() == 1:
        if n > 2 * _EDGEITEMS:
            return t[:_EDGEITEMS].tolist() + [_SKIP] + t[n - _EDGEITEMS :].tolist()
        return t.tolist()
    if n > 2 * _EDGEITEMS:
        head = [_summarized_list(t[i]) for i in range(_EDGEITEMS)]
        tail = [_summarized_list(t[i]) for i in range(n - _EDGEITEMS, n)]
        return head + [_SKIP] + tail
    return [_summarized_list(t[i]) for i in range(n)]


def _vector_str(data, indent, formatter):
    # Each element takes its width plus ", ".
    element_length = formatter.max_width + 2
    per_line = max(1, (_LINEWIDTH - indent) // element_length)
    items = [" ..." if v is _SKIP else formatter.format(v) for v in data]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_str(data, ndim, indent, formatter):
    if ndim == 1:
        return _vector_str(data, indent, formatter)
    parts = ["..." if d is _SKIP else _nested_str(d, ndim - 1, indent + 1, formatter) for d in data]
    # Blocks of higher rank are separated by more blank lines, as in PyTorch.
    return "[" + ("," + "\n" * (ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _tensor_str(t, indent):
    """The bracketed contents of t, formatted for a prefix of width indent."""
    if t.dim() == 0:
        value = t.item()
        return _formatter([value], t.dtype).format(value)
    if t.numel() > _THRESHOLD:
        data = _summarized_list(t)
    else:
        data = t.tolist()
    formatter = _formatter(_leaves(data, []), t.dtype)
    return _nested_str(data, t.dim(), indent, formatter)


def _add_suffixes(text, suffixes, indent):
    # A suffix that would run past the line width starts a new line under the contents.
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > _LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def _repr(t):
    """repr(t) / str(t) for a oneflow.Tensor."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []

    if getattr(t, "is_global", False):
        # A global tensor prints its logical value and where it lives, as in OneFlow.
        suffixes.append("placement=" + str(t.placement))
        suffixes.append("sbp=" + str(t.sbp))
    else:
        device = str(t._device)
        if device != "cpu":
            suffixes.append("device='" + device + "'")

    # Printing reads values only; keep it out of any autograd graph.
    data = t.detach()
    if t.is_meta:  # no values: "..." as PyTorch prints (a global meta tensor too)
        suffixes.insert(0, "size=" + str(tuple(data.shape)))
        return prefix + "..., " + ", ".join(suffixes + ["dtype=oneflow." + dtype_name(t.dtype)]) + ")"
    if getattr(t, "is_global", False):
        data = _C.whole(data)
    if data.numel() == 0:
        # No element shows the shape, so print it unless it is the plain (0,).
        if data.dim() != 1:
            suffixes.append("size=" + str(tuple(data.shape)))
        contents = "[]"
    else:
        contents = _tensor_str(data, indent)
    suffixes.append("dtype=oneflow." + dtype_name(t.dtype))

    grad_fn = t.grad_fn
    if grad_fn is not None:
        suffixes.append("grad_fn=<" + grad_fn.name() + ">")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")

    return _add_suffixes(prefix + contents, suffixes, indent)
