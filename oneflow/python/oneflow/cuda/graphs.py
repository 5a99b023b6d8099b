"""CUDA graphs, as torch.cuda's: device work captured once and replayed with one launch.

    g = flow.cuda.CUDAGraph()
    static_x = flow.randn(8, 16, device="cuda")
    with flow.cuda.graph(g):
        static_y = model(static_x)
    static_x.copy_(new_x)
    g.replay()                     # static_y now holds model(new_x)

What the capture allocates comes from a private memory pool of the caching allocator (core/
caching_allocator.h) that eager code never gets while the graph lives; graphs share one with
pool=graph_pool_handle() or pool=other_graph.pool(); memory_stats() counts it under
"reserved_bytes.graph_pools.current". What a graph cannot contain fails in one line naming it: a
random op (the generator's state is not on the device yet), a host read or write of device
memory (.item(), .numpy(), printing), a copy between host and device, a global tensor.

On a GPU the capture only records (replay runs the work), as PyTorch's does; on the stand-in
device (ONEFLOW_FAKE_CUDA=1) the kernels run on the host as they are captured, so the tensors
made in the capture hold values at once there.
"""

import gc

import oneflow._oneflow_internal as _C


class _Pool:
    """A hold on a private memory pool: while it lives, the pool stays for graphs to share."""

    def __init__(self, device, pool_id):
        self.device, self.id = device, pool_id

    def __del__(self):
        try:
            _C.cuda_graph_pool_release(self.device, self.id)
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return f"graph_pool(cuda:{self.device}, {self.id})"


def graph_pool_handle():
    """A new private memory pool for graphs to share (pass it as pool=)."""
    index = _C.cuda_current_index()
    return _Pool(index, _C.cuda_graph_pool_handle(index))


def _pool_id(pool, index, op):
    if pool is None:
        return 0
    if not isinstance(pool, _Pool):
        raise TypeError(f"{op}: pool expects oneflow.cuda.graph_pool_handle() or a graph's "
                        f"pool(), got {type(pool).__name__}")
    if pool.device != index:
        raise ValueError(f"{op}: the pool belongs to cuda:{pool.device} but the capture runs on "
                         f"cuda:{index}")
    return pool.id


class CUDAGraph:
    """A captured sequence of device work (torch.cuda.CUDAGraph)."""

    def __init__(self):
        self._graph = _C.CudaGraph()
        self._device = None

    def capture_begin(self, pool=None):
        index = _C.cuda_current_index()
        self._graph.capture_begin(index, _pool_id(pool, index, "oneflow.cuda.CUDAGraph"))
        self._device = index

    def capture_end(self):
        self._graph.capture_end()

    def replay(self):
        """Runs the captured work again, on the tensors it was captured with."""
        self._graph.replay()

    def reset(self):
        """Drops the captured work and lets its memory pool go."""
        self._graph.reset()

    def pool(self):
        """The graph's memory pool, for another capture to share (pool=)."""
        if self._device is None or not (self._graph.captured() or self._graph.capturing()):
            raise RuntimeError("oneflow.cuda.CUDAGraph.pool: the graph has no pool before a "
                               "capture (or after reset)")
        _C.cuda_graph_pool_retain(self._device, self._graph.pool())
        return _Pool(self._device, self._graph.pool())


class graph:
    """with flow.cuda.graph(g): captures the block's device work into g (torch.cuda.graph)."""

    def __init__(self, cuda_graph, pool=None, stream=None):
        if not isinstance(cuda_graph, CUDAGraph):
            raise TypeError(f"oneflow.cuda.graph: expected a oneflow.cuda.CUDAGraph, got "
                            f"{type(cuda_graph).__name__}")
        if stream is not None:
            raise ValueError("oneflow.cuda.graph: stream= is not supported: a capture runs on "
                             "the device's compute stream")
        self.cuda_graph, self.pool = cuda_graph, pool

    def __enter__(self):
        _C.cuda_synchronize(_C.cuda_current_index())  # work queued before is not captured
        gc.collect()  # tensors freed now are not freed into the capture
        self.cuda_graph.capture_begin(pool=self.pool)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.cuda_graph.capture_end()
        else:
            self.cuda_graph._graph.capture_abort()
        return False


def _as_tuple(value, op):
    from oneflow._tensor_types import Tensor

    outs = (value,) if isinstance(value, Tensor) else tuple(value)
    if not all(isinstance(o, Tensor) for o in outs):
        raise TypeError(f"{op}: the callable must return a tensor or a tuple of tensors, got "
                        f"{[type(o).__name__ for o in outs]}")
    return outs


def _graphed(fn, args, num_warmup_iters, allow_unused_input, pool):
    """fn's forward and backward captured into two graphs of one pool, behind an
    autograd.Function that replays them."""
    from oneflow._creation import empty_like, ones_like
    from oneflow._tensor_types import Tensor
    from oneflow.autograd import Function
    from oneflow.autograd import grad as autograd_grad

    op = "oneflow.cuda.make_graphed_callables"
    for a in args:
        if not isinstance(a, Tensor) or a.is_global or a.device.type != "cuda":
            raise TypeError(f"{op}: sample_args must be local cuda tensors, got "
                            f"{a if not isinstance(a, Tensor) else a.device}")
    params = tuple(p for p in fn.parameters() if p.requires_grad) \
        if hasattr(fn, "parameters") else ()
    static_inputs = tuple(args)  # the sample arguments are the graphs' input buffers
    diff = [t for t in static_inputs + params if t.requires_grad]

    def backward_of(outs, grad_outputs):
        douts = [o for o in outs if o.requires_grad]
        if not douts or not diff:
            return ()
        return autograd_grad(douts, diff, grad_outputs=grad_outputs(douts),
                             allow_unused=allow_unused_input)

    for _ in range(num_warmup_iters):  # lazy initialisations happen outside the capture
        backward_of(_as_tuple(fn(*static_inputs), op), lambda ds: [ones_like(d) for d in ds])
    fwd, bwd = CUDAGraph(), CUDAGraph()
    with graph(fwd, pool=pool):
        static_outputs = _as_tuple(fn(*static_inputs), op)
    static_grad_outputs = [empty_like(o) for o in static_outputs if o.requires_grad]
    with graph(bwd, pool=pool):
        static_grads = backward_of(static_outputs, lambda ds: static_grad_outputs)
    differentiable = [i for i, o in enumerate(static_outputs) if o.requires_grad]
    n_inputs = len(static_inputs)

    class Graphed(Function):
        @staticmethod
        def forward(ctx, *inputs):
            for buffer, x in zip(static_inputs, inputs[:n_inputs]):
                if x is not buffer:
                    buffer.copy_(x)
            fwd.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        def backward(ctx, *grads):
            for buffer, i in zip(static_grad_outputs, differentiable):
                buffer.copy_(grads[i])
            bwd.replay()
            # One gradient per argument (the inputs, then the parameters), as copies: the
            # graph's buffers change on the next replay.
            it = iter(static_grads)
            res = []
            for t in static_inputs + params:
                g = next(it) if t.requires_grad else None
                res.append(None if g is None else g.clone())
            return tuple(res)

    def run(*user_args):
        if len(user_args) != n_inputs:
            raise TypeError(f"{op}: the graphed callable takes {n_inputs} tensors (as its "
                            f"sample_args), got {len(user_args)}")
        out = Graphed.apply(*(tuple(user_args) + params))
        return out[0] if len(static_outputs) == 1 else out

    run._graphs = (fwd, bwd)  # the graphs live as long as the callable
    return run


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False):
    """Each callable (a module or a function of tensors) with its forward and its backward
    captured into CUDA graphs after num_warmup_iters eager iterations, as
    torch.cuda.make_graphed_callables: calling the result copies the arguments into the
    sample_args' memory and replays the forward graph; backward replays the backward graph.
    Its outputs and gradients live in the graphs' memory until the next replay (gradients are
    handed on as copies). One callable and a tuple of sample tensors, or tuples of both."""
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(f"oneflow.cuda.make_graphed_callables: got {len(callables)} callables "
                         f"and {len(sample_args)} sample_args")
    pool = graph_pool_handle()
    out = tuple(_graphed(fn, tuple(args), num_warmup_iters, allow_unused_input, pool)
                for fn, args in zip(callables, sample_args))
    return out[0] if single else out
