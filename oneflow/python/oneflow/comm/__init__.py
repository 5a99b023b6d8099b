"""Collectives on local tensors across the ranks of the job, as OneFlow's `flow.comm` and
PyTorch's `torch.distributed` spell them.

    t = flow.ones(4) * (flow.env.get_rank() + 1)
    flow.comm.all_reduce(t)                 # in place: every rank holds the sum
    outs = [flow.empty(4) for _ in range(flow.env.get_world_size())]
    flow.comm.all_gather(outs, t)
    work = flow.comm.all_reduce(t, async_op=True); ...; work.wait()

Ranks on one machine exchange data through shared memory, others through Gloo over TCP. Every
call is bounded by ONEFLOW_TIMEOUT_SECONDS and names the rank and group when it gives up.
`group` is a list of global ranks (None: every rank); each member must make the same calls.
"""

import oneflow._oneflow_internal as _C
from oneflow import _creation, env as _env
from oneflow._creation import empty, zeros
from oneflow._grad_mode import no_grad
from oneflow._ops import cat


class ReduceOp:
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    AVG = "avg"
    # PyTorch's other ops: named, so that a script using one is told it is not supported.
    PRODUCT = "product"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"


_REDUCE_NAMES = {"sum": "sum", "max": "max", "min": "min", "avg": "avg", "mean": "avg"}
_UNSUPPORTED = {"product", "band", "bor", "bxor", "premul_sum"}


def _op(op, name):
    key = str(op).lower().split(".")[-1]
    if key in _UNSUPPORTED:
        raise ValueError(f"{name}: ReduceOp.{key.upper()} is not supported, use SUM, AVG, MIN or MAX")
    if key not in _REDUCE_NAMES:
        raise ValueError(f"{name}: unknown reduce op {op!r}, expected one of SUM, MAX, MIN, AVG")
    return _REDUCE_NAMES[key]


def _check_tensor(t, name, what="tensor"):
    if not isinstance(t, _C.Tensor):
        raise TypeError(f"{name}: {what} must be a oneflow.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{name}: {what} is on {t.device}, only CPU tensors are supported")


def _group_size(group):
    return _env.get_world_size() if group is None else len(group)


def _join():
    _env.init()


class _Done:
    """What an async call returns when its work already happened (a copy back was needed)."""

    def __init__(self, work, after=None):
        self._work, self._after = work, after

    def wait(self):
        if self._work is not None:
            self._work.wait()
            self._work = None
            if self._after is not None:
                self._after()
        return True

    def is_completed(self):
        return self._work is None or self._work.is_completed()


def _then(work, after, async_op):
    """Runs after() once the collective is done: now, or at the returned handle's wait()."""
    if async_op:
        return _Done(work, after)
    after()
    return None


def _copy_pieces(outputs, flat, counts):
    """outputs[i] = the i-th piece (counts[i] rows) of flat, in order."""
    start = 0
    with no_grad():
        for out, c in zip(outputs, counts):
            out.copy_(flat[start:start + c].reshape(out.shape))
            start += c


def _in_place(tensor, name, call, async_op):
    """Runs call(buffer) on a contiguous buffer of tensor and copies back when needed."""
    _check_tensor(tensor, name)
    if tensor.is_contiguous():
        return call(tensor)
    buf = tensor.contiguous()

    def back():
        with no_grad():
            tensor.copy_(buf)

    return _then(call(buf), back, async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces tensor across ranks in place (sum by default)."""
    _join()
    o = _op(op, "all_reduce")
    return _in_place(
        tensor, "all_reduce",
        lambda t: _C.comm_all_reduce(t, o, ranks=group, async_op=async_op), async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Overwrites tensor on every rank with rank src's."""
    _join()
    return _in_place(
        tensor, "broadcast",
        lambda t: _C.comm_broadcast(t, int(src), ranks=group, async_op=async_op), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[i] = rank i's tensor (shapes may differ in dim 0 between ranks)."""
    _join()
    _check_tensor(tensor, "all_gather")
    n = _group_size(group)
    if len(tensor_list) != n:
        raise ValueError(f"all_gather: got {len(tensor_list)} output tensors for {n} ranks")
    for i, out in enumerate(tensor_list):
        _check_tensor(out, "all_gather", f"output {i}")
        if out.dtype != tensor.dtype or tuple(out.shape[1:]) != tuple(tensor.shape[1:]):
            raise ValueError(
                f"all_gather: output {i} is {tuple(out.shape)} {out.dtype}, expected rows like "
                f"the input {tuple(tensor.shape)} {tensor.dtype}")
    src = tensor.contiguous()
    if src.dim() == 0:
        src = src.reshape(1)
        rows = [1] * n
    else:
        rows = [o.shape[0] if o.dim() else 1 for o in tensor_list]
    flat = empty((sum(rows),) + tuple(src.shape[1:]), dtype=tensor.dtype)
    counts = None if all(r == src.shape[0] for r in rows) else rows
    work = _C.comm_all_gather(flat, src, counts, ranks=group, async_op=async_op)
    return _then(work, lambda: _copy_pieces(tensor_list, flat, rows), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor = cat of every rank's input_tensor along dim 0."""
    _join()
    _check_tensor(input_tensor, "all_gather_into_tensor", "input")
    src = input_tensor.contiguous()
    return _in_place(
        output_tensor, "all_gather_into_tensor",
        lambda t: _C.comm_all_gather(t, src, None, ranks=group, async_op=async_op), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output = reduction over ranks of input_list[this rank]."""
    _join()
    n = _group_size(group)
    if len(input_list) != n:
        raise ValueError(f"reduce_scatter: got {len(input_list)} input tensors for {n} ranks")
    for i, x in enumerate(input_list):
        _check_tensor(x, "reduce_scatter", f"input {i}")
    o = _op(op, "reduce_scatter")
    rows = [x.reshape(-1).shape[0] for x in input_list]
    flat = cat([x.reshape(-1) for x in input_list])
    counts = None if len(set(rows)) == 1 else rows
    return _in_place(
        output, "reduce_scatter",
        lambda t: _C.comm_reduce_scatter(t.reshape(-1), flat, o, counts, ranks=group,
                                         async_op=async_op), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """output = rows [r*k, (r+1)*k) of the reduction of input over ranks."""
    _join()
    _check_tensor(input, "reduce_scatter_tensor", "input")
    o = _op(op, "reduce_scatter_tensor")
    src = input.contiguous()
    return _in_place(
        output, "reduce_scatter_tensor",
        lambda t: _C.comm_reduce_scatter(t, src, o, None, ranks=group, async_op=async_op),
        async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """output_tensor_list[j] = what rank j put in its input_tensor_list[this rank]."""
    _join()
    n = _group_size(group)
    if len(input_tensor_list) != n or len(output_tensor_list) != n:
        raise ValueError(f"all_to_all: expected {n} input and {n} output tensors, got "
                         f"{len(input_tensor_list)} and {len(output_tensor_list)}")
    ins = [x.contiguous().reshape(-1) for x in input_tensor_list]
    in_counts = [x.shape[0] for x in ins]
    out_counts = [x.numel() for x in output_tensor_list]
    flat_in = cat(ins)
    flat_out = empty(sum(out_counts), dtype=flat_in.dtype)
    work = _C.comm_all_to_all(flat_out, flat_in, in_counts, out_counts, ranks=group,
                              async_op=async_op)
    return _then(work, lambda: _copy_pieces(output_tensor_list, flat_out, out_counts), async_op)


def barrier(group=None):
    """Returns once every rank of the group called it."""
    _join()
    _C.comm_barrier(ranks=group)


_META_TAG = 1 << 30
_META_LEN = 18  # ndim, dtype index, up to 16 dims


def _dtype_names():
    return ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32",
            "float64"]


def send(tensor, dst, send_meta=True, tag=0):
    """Sends tensor to rank dst. With send_meta (OneFlow's default) its shape and dtype go
    first, so recv(src) needs neither."""
    _join()
    _check_tensor(tensor, "send")
    if send_meta:
        names = _dtype_names()
        if tensor.dim() > _META_LEN - 2:
            raise ValueError(f"send: tensors of more than {_META_LEN - 2} dims are not supported")
        meta = [tensor.dim(), names.index(tensor.dtype.name)] + list(tensor.shape)
        meta += [0] * (_META_LEN - len(meta))
        _C.comm_send(_creation.tensor(meta, dtype=_C.int64), int(dst), _META_TAG + tag)
    _C.comm_send(tensor.contiguous(), int(dst), tag)


def recv(src, shape=None, dtype=None, device=None, *, out=None, tag=0):
    """Receives a tensor from rank src (OneFlow's signature). Without shape and dtype the sender
    must have sent them (send_meta=True). PyTorch's recv(tensor, src) also works: it fills
    tensor and returns the sender's rank."""
    if isinstance(src, _C.Tensor):  # torch.distributed.recv(tensor, src)
        tensor, src = src, shape
        recv(src, out=tensor, tag=tag)
        return src
    _join()
    if shape is None or dtype is None:
        meta = zeros(_META_LEN, dtype=_C.int64)
        _C.comm_recv(meta, int(src), _META_TAG + tag)
        m = meta.tolist()
        got_shape, got_dtype = tuple(m[2:2 + m[0]]), getattr(_C, _dtype_names()[m[1]])
        if shape is not None and tuple(shape) != got_shape:
            raise ValueError(f"recv: expected shape {tuple(shape)} but rank {src} sent {got_shape}")
        if dtype is not None and dtype != got_dtype:
            raise ValueError(f"recv: expected {dtype} but rank {src} sent {got_dtype}")
        shape, dtype = got_shape, got_dtype
    if out is not None:
        _check_tensor(out, "recv", "out")
        if tuple(out.shape) != tuple(shape) or out.dtype != dtype:
            raise ValueError(f"recv: out is {tuple(out.shape)} {out.dtype} but rank {src} sent "
                             f"{tuple(shape)} {dtype}")
        _in_place(out, "recv", lambda t: _C.comm_recv(t, int(src), tag), False)
        return out
    result = empty(tuple(shape), dtype=dtype)
    _C.comm_recv(result, int(src), tag)
    return result


def transport(group=None):
    """How this group moves data: "shm" (one machine), "gloo" (TCP) or "self" (one rank)."""
    _join()
    return _C.comm_transport(ranks=group)
