"""oneflow.save / oneflow.load: pickle files in which every tensor is stored as plain data.

    flow.save(model.state_dict(), "model.pt")
    model.load_state_dict(flow.load("model.pt"))

Any picklable object can be saved (dicts, lists, a whole Module, an optimizer's
state_dict...). Tensors are found wherever they sit in the object and stored as a record of
dtype name, shape, raw bytes, requires_grad and device, so a file never depends on how the
C++ Tensor class is laid out. A tensor that appears twice in the object is stored once and
comes back as one tensor (tied weights stay tied).

Loading never runs code from the file: `load` reads with a restricted unpickler that builds
only tensors, dtypes, devices, placements, SBPs, numbers, strings and plain containers, and
refuses anything else (a whole Module, a function) before it is built, naming it. Files you
trust that hold other objects load with `weights_only=False`.

PyTorch's files (torch.save's zip format and its legacy format) load through the same
restricted reader, without PyTorch installed; `save(..., torch_format=True)` writes a file
torch.load reads. safetensors files: oneflow.utils.safetensors.

Sharded checkpoints: `save(state, "ckpt_dir", sharded=True)` writes each rank's shards of global
tensors plus one metadata.json (raw bytes and JSON, no pickle), atomically; `load("ckpt_dir")`
reads it back into any layout or world size (oneflow/_sharded_checkpoint.py).
"""

import collections
import io
import os
import pickle
import warnings

import oneflow as flow
from oneflow import _sharded_checkpoint, _torch_format
from oneflow._checkpoint_io import _place, _whole_bytes, _write_atomically
from oneflow._api_util import INT64_MAX
from oneflow._dtype_util import dtype_by_name, dtype_name
from oneflow._parameter import Parameter
from oneflow._safe_unpickle import (BASIC_GLOBALS, RefusedGlobal, RestrictedUnpickler,
                                    Unsupported)

_FORMAT_KEY = "__oneflow_save_format__"
_FORMAT_VERSION = 1
_PID_TAG = "oneflow.Tensor"
_DTYPE_TAG = "oneflow.dtype"
_DEVICE_TAG = "oneflow.device"
_PLACEMENT_TAG = "oneflow.placement"
_SBP_TAG = "oneflow.sbp"


def _tensor_record(t):
    """(dtype name, shape, raw bytes, requires_grad, is_parameter, device) of a tensor."""
    device = t.placement.type if t.is_global else str(t.device)
    return (
        dtype_name(t.dtype),
        tuple(t.shape),
        _whole_bytes(t),
        bool(t.requires_grad),
        isinstance(t, Parameter),
        device,
    )


class BadRecord(Exception):
    """A tensor record that no tensor can have written (raised before anything is built)."""


def _check_record(key, record):
    """(dtype, shape, raw) of a tensor record once its fields agree: sizes >= 0, an element
    count within int64, and exactly numel * itemsize bytes."""
    if not (isinstance(record, tuple) and len(record) == 6):
        raise BadRecord(f"tensor record {key} is not a 6-field tuple")
    name, shape, raw = record[0], record[1], record[2]
    if not isinstance(name, str):
        raise BadRecord(f"tensor record {key} has dtype {str(name)[:40]!r}; expected a name")
    try:
        dtype = dtype_by_name(name)
    except ValueError as ex:
        raise BadRecord(f"tensor record {key}: {ex}") from None
    if not (isinstance(shape, (tuple, list)) and len(shape) <= 64 and all(
            isinstance(d, int) and not isinstance(d, bool) for d in shape)):
        raise BadRecord(f"tensor record {key} has shape {str(shape)[:60]}; expected ints")
    if any(d < 0 for d in shape):
        raise BadRecord(f"tensor record {key} has shape {tuple(shape)}; expected sizes >= 0")
    numel = 1
    for d in shape:
        numel *= d
    if numel > INT64_MAX:
        raise BadRecord(f"tensor record {key} has shape {tuple(shape)} of {numel} elements, "
                        f"more than int64 can count")
    if not isinstance(raw, (bytes, bytearray)):
        raise BadRecord(f"tensor record {key} holds a {type(raw).__name__}, not bytes")
    need = numel * dtype.itemsize
    if len(raw) != need:
        raise BadRecord(f"tensor record {key} of shape {tuple(shape)} and dtype {name} needs "
                        f"{need} bytes, holds {len(raw)}")
    return dtype, tuple(shape), raw


def _restore_tensor(key, record, map_location):
    dtype, shape, raw = _check_record(key, record)
    _, _, _, requires_grad, is_parameter, device = record
    t = _place(flow._C.from_bytes(raw, shape, dtype), device,
               map_location)
    if is_parameter:
        return Parameter(t, requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _make_pickler(file):
    class _Pickler(pickle.Pickler):
        def __init__(self, f):
            super().__init__(f, protocol=4)
            self._keys = {}  # id(tensor) -> key
            self._alive = []  # keeps the tensors alive so their ids stay unique while saving
            self.saw_global = False  # a global tensor was gathered: the file is a collective's

        def persistent_id(self, obj):
            # Binding objects do not pickle, and the restricted reader builds no classes:
            # dtypes, devices, placements and SBPs are stored as plain values.
            if isinstance(obj, flow.dtype):
                return (_DTYPE_TAG, dtype_name(obj), None)
            if isinstance(obj, flow.device):
                return (_DEVICE_TAG, str(obj), None)
            if isinstance(obj, flow.placement):
                return (_PLACEMENT_TAG, obj.__getstate__(), None)  # (type, ranks, hierarchy)
            if isinstance(obj, flow.sbp.sbp):
                return (_SBP_TAG, obj.__getstate__(), None)  # (kind, axis), kind 0/1/2 = S/B/P
            if not isinstance(obj, flow.Tensor):
                return None
            key = self._keys.get(id(obj))
            if key is not None:
                return (_PID_TAG, key, None)
            key = len(self._keys)
            self._keys[id(obj)] = key
            self._alive.append(obj)
            self.saw_global |= obj.is_global
            # Pickling and unpickling walk the object in the same order, so the first
            # occurrence carries the data and later ones refer to it by key.
            return (_PID_TAG, key, _tensor_record(obj))

    return _Pickler(file)


class _PersistentLoad:
    """Rebuilds what the pickler stored by persistent id: tensors, dtypes, devices, placements
    and SBPs (the only objects of our files that are not plain data)."""

    def __init__(self, map_location):
        self._map_location = map_location
        self._tensors = {}

    def __call__(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 3 and isinstance(pid[0], str)):
            raise pickle.UnpicklingError(f"unknown persistent id {str(pid)[:60]!r}")
        tag, value, record = pid
        if tag == _DTYPE_TAG:
            return dtype_by_name(value)
        if tag == _DEVICE_TAG:
            return flow.device(str(value))
        if tag == _PLACEMENT_TAG:
            type_, ranks, hierarchy = value
            return flow.placement(type_, ranks, hierarchy=hierarchy)
        if tag == _SBP_TAG:
            kind, axis = value
            return flow.sbp.split(axis) if kind == 0 else (
                flow.sbp.broadcast if kind == 1 else flow.sbp.partial_sum)
        if tag != _PID_TAG:
            raise pickle.UnpicklingError(f"unknown persistent id {str(pid)[:60]!r}")
        if record is not None:
            self._tensors[value] = _restore_tensor(value, record, self._map_location)
        return self._tensors[value]


class _Unpickler(pickle.Unpickler):
    """pickle's Unpickler with our persistent_load: from Python 3.13 on, a plain Unpickler's
    persistent_load is read-only; a subclass's instance takes one."""

    def __init__(self, file, persistent_load):
        super().__init__(file)
        self.persistent_load = persistent_load


def _make_unpickler(file, map_location, what, weights_only):
    if weights_only:
        return RestrictedUnpickler(file, BASIC_GLOBALS, what, _PersistentLoad(map_location))
    return _Unpickler(file, _PersistentLoad(map_location))


def save(obj, path, global_dst_rank=None, torch_format=False, sharded=False):
    """Writes obj to path atomically: readers see the old file or the new one, never a part.

    Global tensors are saved whole (gathered from their shards), so every rank of the job must
    call save; rank global_dst_rank (default 0) alone writes the file, and save returns on every
    rank once the file is complete. The file loads in one process like any other.
    torch_format=True writes PyTorch's zip format instead (tensors, dtypes and plain data only),
    which torch.load reads, also with weights_only=True.
    sharded=True: path is a directory; every rank writes only the shards it holds (no
    gathering), plus one metadata file; a collective, every rank calls it. Partial-sum tensors
    are reduced first. See oneflow/_sharded_checkpoint.py.
    """
    if sharded:
        if torch_format or global_dst_rank is not None:
            raise ValueError(
                "oneflow.save: sharded=True writes every rank's own shards; it takes neither "
                f"torch_format=True nor global_dst_rank (got torch_format={torch_format!r}, "
                f"global_dst_rank={global_dst_rank!r})")
        _sharded_checkpoint.save(obj, path)
        return
    # Serialized in memory first: only the pickler finds every (possibly global) tensor,
    # wherever it sits in obj, and a global tensor decides who writes.
    saw_global = []

    def whole_bytes(t):
        saw_global.append(t.is_global)
        return _whole_bytes(t)

    if torch_format:
        data = _torch_format.save_zip(obj, whole_bytes)
        saw_global = any(saw_global)
    else:
        buf = io.BytesIO()
        pickler = _make_pickler(buf)
        pickler.dump({_FORMAT_KEY: _FORMAT_VERSION, "object": obj})
        data, saw_global = buf.getbuffer(), pickler.saw_global
    if not saw_global and global_dst_rank is None:
        _write_atomically(path, lambda f: f.write(data))
        return
    dst = 0 if global_dst_rank is None else int(global_dst_rank)
    world = flow.env.get_world_size()
    if not 0 <= dst < world:
        raise ValueError(f"oneflow.save: global_dst_rank {dst} is not a rank of this job "
                         f"(world size {world})")
    if flow.env.get_rank() == dst:
        _write_atomically(path, lambda f: f.write(data))
    if world > 1:
        flow.comm.barrier()


_warned_unsafe = []


def load(path, map_location=None, global_src_rank=None, weights_only=True):
    """Reads an object written by save, a file torch.save wrote (zip or legacy format), or a
    safetensors file (the C++ API's nn::SaveStateDict writes those): {name: tensor}, or a
    directory written by save(..., sharded=True): in a single process its tensors come back
    local and whole; in a job of several ranks as LazyTensor placeholders that
    load_state_dict reads in the layout of the tensors they are loaded into.

    map_location: None (tensors go back to the device they were saved from), a device or a
    device string such as "cpu", a dict {"cuda:0": "cpu"}, or a callable(tensor, device_str)
    returning the tensor to use.
    global_src_rank: only that rank reads the file (the others need not see it) and sends its
    bytes to every rank (a collective: every rank calls load). Tensors come back whole and
    local; `global_module.load_state_dict(...)` keeps each parameter's placement and sbp.
    weights_only (default True): build only tensors, dtypes, devices, placements, SBPs and plain
    data; anything else in the file is refused before it is built. False runs whatever the file
    asks pickle to run: only for files you trust (a whole Module, for instance).
    """
    if not weights_only and not _warned_unsafe:
        _warned_unsafe.append(True)
        warnings.warn(
            "oneflow.load(weights_only=False) runs any code the file contains; use it only for "
            "files you trust", UserWarning, stacklevel=2)
    if not hasattr(path, "read") and os.path.isdir(os.fspath(path)):
        if global_src_rank is not None:
            raise ValueError(
                f"oneflow.load: '{os.fspath(path)}' is a directory (a sharded checkpoint), which "
                f"every rank reads its own part of; global_src_rank={global_src_rank!r} is only "
                f"for single files")
        return _sharded_checkpoint.load(os.fspath(path), map_location)
    if global_src_rank is not None:
        src = int(global_src_rank)
        if flow.env.get_rank() == src:
            with open(os.fspath(path), "rb") as f:
                data = f.read()
            size = flow.tensor([len(data)], dtype=flow.int64)
        else:
            size = flow.zeros(1, dtype=flow.int64)
        flow.comm.broadcast(size, src)
        if flow.env.get_rank() == src:
            payload = flow._C.from_bytes(data, (len(data),), flow.uint8)
        else:
            payload = flow.zeros(int(size.item()), dtype=flow.uint8)
        flow.comm.broadcast(payload, src)
        # Every rank unpickles (and so checks) the bytes it received.
        f = io.BytesIO(payload._raw_bytes())
        f.name = os.fspath(path)
        return load(f, map_location, weights_only=weights_only)

    if hasattr(path, "read"):
        name = getattr(path, "name", "<file object>")
        if not (hasattr(path, "seekable") and path.seekable()):
            path = io.BytesIO(path.read())
        return _load_from(path, name, map_location, weights_only)

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"oneflow.load: no such file '{path}'")
    with open(path, "rb") as f:
        return _load_from(f, path, map_location, weights_only)


def _load_from(f, name, map_location, weights_only):
    """Reads a seekable file in whichever of the three formats it is."""
    what = f"oneflow.load: '{name}'"
    start = f.tell()
    head = f.read(32)
    f.seek(start)
    if len(head) > 8 and head[8:9] == b"{":  # safetensors: a length, then a JSON header
        from oneflow.utils import safetensors

        try:
            tensors = safetensors.load(f.read())
        except ValueError as ex:
            raise RuntimeError(f"{what}: {str(ex).split(': ', 1)[-1]}") from None
        return collections.OrderedDict(
            (k, _place(t, "cpu", map_location)) for k, t in tensors.items())
    try:
        if _torch_format.is_zip(head):
            return _torch_format.load_zip(f, what, map_location)
        if _torch_format.is_legacy(head):
            return _torch_format.load_legacy(f, what, map_location)
        wrapped = _make_unpickler(f, map_location, what, weights_only).load()
    except RefusedGlobal as ex:
        raise RefusedGlobal(str(ex)) from None
    except (Unsupported, BadRecord) as ex:
        raise RuntimeError(f"{what}: {ex}") from None
    except Exception as ex:  # whatever truncated or random bytes make the reader raise
        if not head:
            reason = "the file is empty"
        else:
            reason = f"{type(ex).__name__}: {ex}" if str(ex) else type(ex).__name__
        raise RuntimeError(
            f"{what} is not a file written by oneflow.save or torch.save ({reason})"
        ) from None
    return _unwrap(wrapped, name)


def _unwrap(wrapped, name):
    if not isinstance(wrapped, dict) or _FORMAT_KEY not in wrapped:
        raise RuntimeError(f"oneflow.load: '{name}' is not a file written by oneflow.save")
    version = wrapped[_FORMAT_KEY]
    if not isinstance(version, int) or version > _FORMAT_VERSION:
        raise RuntimeError(
            f"oneflow.load: '{name}' has format version {version!r}; this oneflow reads up to "
            f"{_FORMAT_VERSION}"
        )
    return wrapped["object"]
