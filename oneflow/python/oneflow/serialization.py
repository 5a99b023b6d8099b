"""oneflow.save / oneflow.load: pickle files in which every tensor is stored as plain data.

    flow.save(model.state_dict(), "model.pt")
    model.load_state_dict(flow.load("model.pt"))

Any picklable object can be saved (dicts, lists, a whole Module, an optimizer's
state_dict...). Tensors are found wherever they sit in the object and stored as a record of
dtype name, shape, raw bytes, requires_grad and device, so a file never depends on how the
C++ Tensor class is laid out. A tensor that appears twice in the object is stored once and
comes back as one tensor (tied weights stay tied).

Loading runs pickle, which can execute code from the file: load only files you trust (the
same caveat as torch.load).
"""

import os

import oneflow as flow
from oneflow._dtype_util import dtype_name

_FORMAT_KEY = "__oneflow_save_format__"
_FORMAT_VERSION = 1
_PID_TAG = "oneflow.Tensor"
_DTYPE_TAG = "oneflow.dtype"


def _tensor_record(t):
    """(dtype name, shape, raw bytes, requires_grad, is_parameter, device) of a tensor."""
    from oneflow.nn import Parameter

    data = t.detach()
    if data.is_global:
        # Gathered into the whole tensor (a collective: every rank of the placement saves).
        device = data.placement.type
        data = data.to_global(sbp=[flow.sbp.broadcast] * len(data.sbp)).to_local()
    else:
        device = str(data.device)
    if device != "cpu":
        data = data.to("cpu")
    return (
        dtype_name(t.dtype),
        tuple(t.shape),
        data._raw_bytes(),
        bool(t.requires_grad),
        isinstance(t, Parameter),
        device,
    )


def _restore_tensor(record, map_location):
    from oneflow.nn import Parameter

    dtype_name, shape, raw, requires_grad, is_parameter, device = record
    t = flow._C.from_bytes(raw, tuple(shape), getattr(flow, dtype_name))
    target = _map_device(device, map_location)
    if target is not None and str(target) != "cpu":
        t = t.to(target)
    if callable(map_location):
        t = map_location(t, device)
    if is_parameter:
        return Parameter(t, requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _map_device(saved_device, map_location):
    """The device a tensor saved on saved_device is loaded onto (None: leave it on cpu)."""
    if map_location is None:
        return saved_device
    if isinstance(map_location, dict):
        return map_location.get(saved_device, saved_device)
    if callable(map_location):
        return None  # the callable receives the cpu tensor and moves it itself
    return map_location


def _make_pickler(file):
    import pickle

    class _Pickler(pickle.Pickler):
        def __init__(self, f):
            super().__init__(f, protocol=4)
            self._keys = {}  # id(tensor) -> key
            self._alive = []  # keeps the tensors alive so their ids stay unique while saving
            self.saw_global = False  # a global tensor was gathered: the file is a collective's

        def persistent_id(self, obj):
            if isinstance(obj, flow.dtype):  # binding objects do not pickle; their names do
                return (_DTYPE_TAG, dtype_name(obj), None)
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


def _make_unpickler(file, map_location):
    import pickle

    class _Unpickler(pickle.Unpickler):
        def __init__(self, f):
            super().__init__(f)
            self._tensors = {}

        def persistent_load(self, pid):
            if isinstance(pid, tuple) and len(pid) == 3 and pid[0] == _DTYPE_TAG:
                return getattr(flow, pid[1])
            if not (isinstance(pid, tuple) and len(pid) == 3 and pid[0] == _PID_TAG):
                raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
            _, key, record = pid
            if record is not None:
                self._tensors[key] = _restore_tensor(record, map_location)
            return self._tensors[key]

    return _Unpickler(file)


def save(obj, path, global_dst_rank=None):
    """Writes obj to path atomically: readers see the old file or the new one, never a part.

    Global tensors are saved whole (gathered from their shards), so every rank of the job must
    call save; rank global_dst_rank (default 0) alone writes the file, and save returns on every
    rank once the file is complete. The file loads in one process like any other.
    """
    import io

    # Pickled in memory first: only the pickler finds every (possibly global) tensor, wherever
    # it sits in obj, and a global tensor decides who writes.
    buf = io.BytesIO()
    pickler = _make_pickler(buf)
    pickler.dump({_FORMAT_KEY: _FORMAT_VERSION, "object": obj})
    if not pickler.saw_global and global_dst_rank is None:
        _write_atomically(path, lambda f: f.write(buf.getbuffer()))
        return
    dst = 0 if global_dst_rank is None else int(global_dst_rank)
    world = flow.env.get_world_size()
    if not 0 <= dst < world:
        raise ValueError(f"oneflow.save: global_dst_rank {dst} is not a rank of this job "
                         f"(world size {world})")
    if flow.env.get_rank() == dst:
        _write_atomically(path, lambda f: f.write(buf.getbuffer()))
    if world > 1:
        flow.comm.barrier()


def _write_atomically(path, write):
    if hasattr(path, "write"):  # an open file or io.BytesIO
        write(path)
        return
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"oneflow.save: cannot write '{path}': directory '{directory}' does not exist"
        )
    # A unique temporary name in the same directory, so os.replace is a rename on one file
    # system. os.open with mode 0o666 lets the umask decide the permissions, as open() would.
    tmp_path = os.path.join(
        directory, f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    )
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def _fsync_directory(directory):
    # Makes the rename itself durable; not every platform can open a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load(path, map_location=None, global_src_rank=None):
    """Reads an object written by save.

    map_location: None (tensors go back to the device they were saved from), a device or a
    device string such as "cpu", a dict {"cuda:0": "cpu"}, or a callable(tensor, device_str)
    returning the tensor to use.
    global_src_rank: only that rank reads the file (the others need not see it) and sends its
    bytes to every rank (a collective: every rank calls load). Tensors come back whole and
    local; `global_module.load_state_dict(...)` keeps each parameter's placement and sbp.
    """
    import pickle

    if global_src_rank is not None:
        import io

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
        f = io.BytesIO(payload._raw_bytes())
        f.name = os.fspath(path)
        return load(f, map_location)

    if hasattr(path, "read"):
        name = getattr(path, "name", "<file object>")
        return _unwrap(_make_unpickler(path, map_location).load(), name)

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"oneflow.load: no such file '{path}'")
    if os.path.isdir(path):
        raise IsADirectoryError(
            f"oneflow.load: '{path}' is a directory, expected a file written by oneflow.save"
        )
    with open(path, "rb") as f:
        try:
            wrapped = _make_unpickler(f, map_location).load()
        except (pickle.UnpicklingError, EOFError) as ex:
            raise RuntimeError(
                f"oneflow.load: '{path}' is not a file written by oneflow.save ({ex})"
            ) from None
    return _unwrap(wrapped, path)


def _unwrap(wrapped, name):
    if not isinstance(wrapped, dict) or _FORMAT_KEY not in wrapped:
        raise RuntimeError(f"oneflow.load: '{name}' is not a file written by oneflow.save")
    version = wrapped[_FORMAT_KEY]
    if version > _FORMAT_VERSION:
        raise RuntimeError(
            f"oneflow.load: '{name}' has format version {version}; this oneflow reads up to {_FORMAT_VERSION}"
        )
    return wrapped["object"]
