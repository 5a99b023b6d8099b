"""oneflow.cuda: CUDA device queries, as torch.cuda.

    flow.cuda.is_available()     # False on a machine without a GPU or a build without CUDA
    flow.cuda.device_count()
    x = flow.ones(2, 3).to("cuda")  # "cuda" is the current device: cuda:<local rank> under the launcher
    flow.cuda.synchronize()

Random numbers on CUDA are drawn on the device by the same counter-based generator as on CPU, so
a seed gives the same numbers on every device (bit for bit, but for float64 normal draws' last
bits); flow.manual_seed seeds both. set_sync_debug_mode("warn" | "error") reports each host wait
on CUDA work, naming the op, as torch.cuda's does.
"""

import os
import sys

import oneflow._oneflow_internal as _C
from oneflow._tensor_types import cuda_types

globals().update(cuda_types)  # flow.cuda.FloatTensor, flow.cuda.LongTensor, ... (legacy constructors)


def _pip_library_dirs():
    """The lib folders of pip's NVIDIA packages next to this interpreter (nvidia-cublas,
    nvidia-cudnn, nvidia-nccl...: site-packages/nvidia/{cu13,cublas,cudnn,nccl,...}/lib), where
    PyTorch's wheels find their CUDA libraries; searched after $LD_LIBRARY_PATH, before the
    system's library path."""
    dirs = []
    for entry in sys.path:
        nvidia = os.path.join(entry or ".", "nvidia")
        if not os.path.isdir(nvidia):
            continue
        for name in sorted(os.listdir(nvidia)):
            lib = os.path.join(os.path.abspath(nvidia), name, "lib")
            if os.path.isdir(lib) and lib not in dirs:
                dirs.append(lib)
    return dirs


_C.cuda_add_library_dirs(_pip_library_dirs())


def is_available():
    """True where CUDA tensors can be made: a GPU with a working driver in a CUDA build, or the
    stand-in device (ONEFLOW_FAKE_CUDA=1 in the environment before the process starts: "cuda"
    tensors in host memory running the CPU kernels, for tests of where tensors go on machines
    without a GPU; is_fake() tells)."""
    return _C.cuda_device_count() > 0


def is_fake():
    """True under the stand-in CUDA device (ONEFLOW_FAKE_CUDA=1)."""
    return _C.cuda_fake()


def device_count():
    return _C.cuda_device_count()


def unavailable_reason():
    """Why is_available() is False ('' when it is True). Besides a driver or a device, cuBLAS
    and cuDNN must load: they are looked for on $LD_LIBRARY_PATH, in pip's NVIDIA packages, on
    the system's library path, then under $CUDA_PATH/lib64 (library_search_path())."""
    return _C.cuda_unavailable()


def library_search_path():
    """Where cuBLAS, cuDNN and NCCL are looked for, in order, as one line."""
    return _C.cuda_library_search_path()


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
    """Waits for the device's queued work. Not reported by set_sync_debug_mode (the user asked
    for the wait), as torch.cuda.synchronize."""
    _C.cuda_synchronize(_index(device))


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode):
    """torch.cuda.set_sync_debug_mode: "default" (0) lets host waits on CUDA work pass, "warn"
    (1) warns and "error" (2) raises at each one, naming the op: a copy between a CUDA device
    and the host (Tensor.item, numpy, tolist, bool(t), .to("cpu"), a tensor made from host data
    on a CUDA device), a peer copy, an op whose CUDA kernel reads device values on the host
    (nonzero, unique, repeat_interleave with tensor repeats, multinomial, ...). Not reported:
    flow.cuda.synchronize() and the allocator's empty_cache, as in PyTorch. The stand-in
    device (ONEFLOW_FAKE_CUDA=1) reports its host copies the same way."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError(
                "oneflow.cuda.set_sync_debug_mode: expected one of 'default', 'warn', 'error' "
                f"(or 0, 1, 2), got {debug_mode!r}"
            )
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    elif isinstance(debug_mode, bool) or not isinstance(debug_mode, int):
        raise RuntimeError(
            "oneflow.cuda.set_sync_debug_mode: expected one of 'default', 'warn', 'error' "
            f"(or 0, 1, 2), got {type(debug_mode).__name__} {debug_mode!r}"
        )
    _C.cuda_set_sync_debug_mode(debug_mode)


def get_sync_debug_mode():
    """The sync debug mode as PyTorch returns it: 0 (default), 1 (warn) or 2 (error)."""
    return _C.cuda_get_sync_debug_mode()


def memory_stats(device=None):
    """The caching allocator's statistics of a device, with torch.cuda.memory_stats's keys
    ("allocated_bytes.all.current", "reserved_bytes.all.peak", "allocation.all.allocated",
    "segment.all.freed", "num_alloc_retries", "num_ooms", ...); zeros without CUDA."""
    return _C.cuda_memory_stats(_index(device))


def memory_allocated(device=None):
    """Bytes held by tensors on the device now."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    """The most bytes tensors held on the device since the start or reset_peak_memory_stats."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    """Bytes taken from the device: the tensors' blocks and the allocator's cache."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    """Peaks start again from the current values."""
    _C.cuda_reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device=None):
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None):
    reset_peak_memory_stats(device)


def empty_cache():
    _C.cuda_empty_cache()


def manual_seed_all(seed):
    # CUDA draws with the CPU's generator (see the module docstring).
    import oneflow

    oneflow.manual_seed(seed)


def manual_seed(seed):
    manual_seed_all(seed)


def _use_local_rank_device():
    # Under the launcher each process of a node takes the GPU of its local rank (several ranks
    # share GPUs round-robin when there are fewer GPUs than processes). Only multi-process jobs
    # pay for the device query at import.
    info = _C.world_info()
    if info["local_world_size"] > 1 and (_C.cuda_built() or _C.cuda_fake()):
        n = _C.cuda_device_count()
        if n > 0:
            _C.cuda_set_device(info["local_rank"] % n)


_use_local_rank_device()
from oneflow.cuda import amp  # noqa: E402,F401  (autocast, GradScaler as torch.cuda.amp)
from oneflow.cuda.graphs import (  # noqa: E402,F401
    CUDAGraph, graph, graph_pool_handle, make_graphed_callables)
