"""oneflow.cuda: CUDA device queries, as torch.cuda.

    flow.cuda.is_available()     # False on a machine without a GPU or a build without CUDA
    flow.cuda.device_count()
    x = flow.ones(2, 3).to("cuda")  # "cuda" is the current device: cuda:<local rank> under the launcher
    flow.cuda.synchronize()

Random numbers on CUDA are drawn by the same generator as on CPU (and copied), so a seed gives
the same numbers on every device; flow.manual_seed seeds both.
"""

import oneflow._oneflow_internal as _C
from oneflow._tensor_types import cuda_types

globals().update(cuda_types)  # flow.cuda.FloatTensor, flow.cuda.LongTensor, ... (legacy constructors)


def is_available():
    return _C.cuda_device_count() > 0


def device_count():
    return _C.cuda_device_count()


def unavailable_reason():
    """Why is_available() is False ('' when it is True)."""
    return _C.cuda_unavailable()


def current_device():
    if not is_available():
        raise RuntimeError(
            "oneflow.cuda.current_device: CUDA is not available (%s)" % _C.cuda_unavailable()
        )
    return _C.cuda_current_index()


def set_device(device):
    _C.cuda_set_device(_index(device))


def _index(device):
    if device is None:
        return _C.cuda_current_index()
    if isinstance(device, int):
        return device
    import oneflow

    d = oneflow.device(device) if isinstance(device, str) else device
    if d.type != "cuda":
        raise ValueError("oneflow.cuda: expected a cuda device, got %s" % d)
    return d.index


def synchronize(device=None):
    _C.cuda_synchronize(_index(device))


def memory_allocated(device=None):
    return _C.cuda_memory_allocated(_index(device))


def memory_reserved(device=None):
    return _C.cuda_memory_reserved(_index(device))


def empty_cache():
    _C.cuda_empty_cache()


def manual_seed_all(seed):
    # CUDA draws from the CPU generator (see the module docstring).
    import oneflow

    oneflow.manual_seed(seed)


def manual_seed(seed):
    manual_seed_all(seed)


def _use_local_rank_device():
    # Under the launcher each process of a node takes the GPU of its local rank (several ranks
    # share GPUs round-robin when there are fewer GPUs than processes). Only multi-process jobs
    # pay for the device query at import.
    info = _C.world_info()
    if info["local_world_size"] > 1 and _C.cuda_built():
        n = _C.cuda_device_count()
        if n > 0:
            _C.cuda_set_device(info["local_rank"] % n)


_use_local_rank_device()
from oneflow.cuda import amp  # noqa: E402,F401  (autocast, GradScaler as torch.cuda.amp)
