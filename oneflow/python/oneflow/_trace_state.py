"""Whether an nn.Graph trace runs on this process, and where the calls it must see go: the one
place that eager code asks (a leaf: it imports nothing of oneflow).

    from oneflow import _trace_state
    if _trace_state.is_tracing():        # inside nn.Graph's build
        ...

nn.Graph's trace (nn/graph/tracing.py) installs itself with begin(trace) and end(); while it is
installed, Tensor.backward and the Tensor methods that read a value on the host (numpy, item,
tolist, __bool__, __float__, __int__, __index__; installed once by _tensor_methods) hand the
call to trace.backward(tensor, run, args, kwargs) and trace.read(tensor, method), and module
calls reach it through nn.Module.__call__'s hook list (nn/modules/module.py). Nothing is
patched while a graph builds.
"""

_active = None


def is_tracing():
    """True while an nn.Graph's build is traced (a compile)."""
    return _active is not None


def current():
    """The trace that runs, or None."""
    return _active


def begin(trace):
    global _active
    _active = trace


def end():
    global _active
    _active = None
