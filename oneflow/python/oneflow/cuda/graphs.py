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
