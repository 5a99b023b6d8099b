"""PyTorch's checkpoint formats, read and written without PyTorch installed.

    state = flow.load("resnet18.pth")                       # torch.save's zip or legacy file
    flow.save(model.state_dict(), "m.pt", torch_format=True)  # torch.load reads it

What torch.save writes (torch/serialization.py, format version 3):
- zip (default since 1.6): stored, uncompressed records `<archive>/data.pkl` (a protocol-2
  pickle), `<archive>/data/<key>` (one raw little-endian storage per key), `<archive>/version`;
  the pickle names storages by persistent id ('storage', torch.<T>Storage, key, location,
  numel) and tensors by `torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
  requires_grad, hooks)`.
- legacy (`_use_new_zipfile_serialization=False`): pickles of the magic number, the protocol
  version and system info, then the object (persistent ids as above with one more field),
  then the list of storage keys, then each storage as an int64 element count and its bytes.

Both are read through the restricted unpickler: the torch names below map to our own
functions, anything else is refused before it is built.
"""

import collections
import io
import pickle
import struct
import zipfile

import oneflow as flow
from oneflow._api_util import _check_tensor_size
from oneflow._checkpoint_io import _place
from oneflow._dtype_util import dtype_name
from oneflow._parameter import Parameter
from oneflow._safe_unpickle import BASIC_GLOBALS, RestrictedUnpickler, Unsupported

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
_ARCHIVE = "archive"
_ALIGN = 64  # torch.save aligns each storage record's data to 64 bytes (for mmap)

# torch storage class name <-> our dtype name; element sizes in bytes.
_STORAGES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "UntypedStorage": "uint8",
}
_STORAGE_OF = {d: s for s, d in _STORAGES.items() if s != "UntypedStorage"}
# Storages PyTorch has and oneflow does not: named when a file holds one.
_LACKING = {"ShortStorage": "int16", "ComplexFloatStorage": "complex64",
            "ComplexDoubleStorage": "complex128", "ComplexHalfStorage": "complex32",
            "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32"}
_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
             "int8": 1, "uint8": 1, "bool": 1}
# torch dtypes a pickle may name (torch.float32 is pickled as the global 'torch.float32').
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
                  "int": "int32"}


class _StorageType:
    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype


class _Storage:
    """One storage of the file: dtype and raw bytes (read when first used)."""

    def __init__(self, dtype, key, read, location):
        self.dtype, self.key, self.location = dtype, key, location
        self._read, self._data = read, None

    def data(self):
        if self._data is None:
            self._data = self._read()
        return self._data


class _Reader:
    """Builds our tensors from torch's rebuild calls; one per file being read.

    dry: only walk the pickle (legacy files store the storages after it, so their pickle is
    read twice: once to reach the storages, once to build the tensors)."""

    def __init__(self, what, map_location, read_storage, dry=False):
        self.what, self.map_location, self.dry = what, map_location, dry
        self._read_storage = read_storage
        self.storages = {}
        self._built = {}  # (storage key, offset, size, stride) -> tensor: views read once

    def globals(self):
        table = dict(BASIC_GLOBALS)
        table[("torch._utils", "_rebuild_tensor_v2")] = self.rebuild_tensor
        table[("torch._utils", "_rebuild_parameter")] = self.rebuild_parameter
        table[("torch._utils", "_rebuild_parameter_with_state")] = self.rebuild_parameter
        for storage, dtype in list(_STORAGES.items()) + list(_LACKING.items()):
            table[("torch", storage)] = _StorageType(storage, dtype)
        for name in _ITEMSIZE:
            table[("torch", name)] = getattr(flow, name)
        for alias, name in _DTYPE_ALIASES.items():
            table[("torch", alias)] = getattr(flow, name)
        return table

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id {str(pid)[:60]!r}")
        storage_type, key, location, numel = pid[1:5]
        if len(pid) == 6 and pid[5] is not None:
            raise pickle.UnpicklingError("storage views of pre-1.0 PyTorch files")
        if not isinstance(storage_type, _StorageType) or not isinstance(numel, int):
            raise pickle.UnpicklingError(f"a malformed storage id {str(pid)[:60]!r}")
        if storage_type.name in _LACKING:
            raise Unsupported(f"torch.{storage_type.name} ({storage_type.dtype}) has no oneflow "
                              f"dtype; convert the tensor in PyTorch first")
        key = str(key)
        storage = self.storages.get(key)
        if storage is None:
            dtype = storage_type.dtype
            size = numel * _ITEMSIZE[dtype]
            storage = _Storage(dtype, key, lambda: self._read_storage(key, dtype, size),
                               str(location))
            self.storages[key] = storage
        return storage

    def rebuild_tensor(self, storage, offset, size, stride, requires_grad, hooks, *metadata):
        import numpy as np

        if not isinstance(storage, _Storage):
            raise pickle.UnpicklingError("_rebuild_tensor_v2 without a storage")
        if self.dry:
            return None
        size, stride, offset = tuple(int(s) for s in size), tuple(int(s) for s in stride), \
            int(offset)
        cache_key = (storage.key, offset, size, stride)
        t = self._built.get(cache_key)
        if t is None:
            itemsize = _ITEMSIZE[storage.dtype]
            raw = storage.data()
            stored = len(raw) // itemsize
            empty = any(n == 0 for n in size)
            last = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if any(n < 0 for n in size):
                raise pickle.UnpicklingError(f"a tensor of size {size}: sizes must be >= 0")
            # Sizes whose product overflows int64 or exceeds memory (a stride-0 view of a
            # small storage can claim any size) are refused before numpy copies them.
            _check_tensor_size("torch tensor", size, getattr(flow, storage.dtype))
            if len(size) != len(stride) or min(stride, default=0) < 0 or offset < 0 or (
                    not empty and last >= stored):
                raise pickle.UnpicklingError(
                    f"a tensor of size {size}, stride {stride} and offset {offset} does not "
                    f"fit its storage of {stored} elements")
            data = b""
            if not empty:
                words = np.frombuffer(raw, dtype=f"<u{itemsize}")[offset:]
                view = np.lib.stride_tricks.as_strided(
                    words, shape=size, strides=[s * itemsize for s in stride], writeable=False)
                data = np.ascontiguousarray(view).tobytes()
            t = flow._C.from_bytes(data, size, getattr(flow, storage.dtype))
            t = _place(t, storage.location, self.map_location)
            self._built[cache_key] = t
        if requires_grad:
            t.requires_grad_(True)
        return t

    def rebuild_parameter(self, data, requires_grad, hooks, *state):
        return None if self.dry else Parameter(data.detach(), bool(requires_grad))


def is_zip(head):
    return head[:4] == b"PK\x03\x04"


def is_legacy(head):
    return head.startswith(pickle.dumps(LEGACY_MAGIC, protocol=2)[:-1])


def load_zip(file, what, map_location):
    """The object of a torch.save zip file (file: a seekable binary file)."""
    with zipfile.ZipFile(file) as archive:
        names = set(archive.namelist())
        pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkl) != 1:
            raise pickle.UnpicklingError("a zip file without one <archive>/data.pkl record")
        prefix = pkl[0][: -len("data.pkl")]

        def read_storage(key, dtype, size):
            name = f"{prefix}data/{key}"
            if name not in names:
                raise pickle.UnpicklingError(f"storage record '{name}' is missing")
            raw = archive.read(name)
            if len(raw) < size:
                raise pickle.UnpicklingError(
                    f"storage record '{name}' holds {len(raw)} bytes, the pickle says {size}")
            return raw[:size]

        reader = _Reader(what, map_location, read_storage)
        return RestrictedUnpickler(io.BytesIO(archive.read(pkl[0])), reader.globals(), what,
                                   reader.persistent_load).load()


def load_legacy(file, what, map_location):
    """The object of a torch.save file written with _use_new_zipfile_serialization=False
    (file: a seekable binary file)."""

    def plain():
        return RestrictedUnpickler(file, BASIC_GLOBALS, what).load()

    if plain() != LEGACY_MAGIC:
        raise pickle.UnpicklingError("wrong magic number")
    version = plain()
    if version != LEGACY_PROTOCOL:
        raise pickle.UnpicklingError(f"legacy protocol version {version!r}")
    info = plain()
    if not isinstance(info, dict) or not info.get("little_endian", True):
        raise pickle.UnpicklingError("a big-endian file")
    start = file.tell()
    walk = _Reader(what, map_location, None, dry=True)
    RestrictedUnpickler(file, walk.globals(), what, walk.persistent_load).load()
    keys = plain()
    if not isinstance(keys, list):
        raise pickle.UnpicklingError("no list of storage keys")
    raw_of = {}
    for key in keys:
        storage = walk.storages.get(str(key))
        if storage is None:
            raise pickle.UnpicklingError(f"storage key {key!r} is not used by the object")
        count = file.read(8)
        if len(count) != 8:
            raise EOFError("the file ends before its storages")
        nbytes = struct.unpack("<q", count)[0] * _ITEMSIZE[storage.dtype]
        raw = file.read(max(nbytes, 0))
        if nbytes < 0 or len(raw) != nbytes:
            raise EOFError("the file ends inside a storage")
        raw_of[str(key)] = raw

    def read_storage(key, dtype, size):
        raw = raw_of.get(key)
        if raw is None or len(raw) < size:
            raise pickle.UnpicklingError(f"storage {key!r} is missing or short")
        return raw[:size]

    file.seek(start)
    reader = _Reader(what, map_location, read_storage)
    return RestrictedUnpickler(file, reader.globals(), what, reader.persistent_load).load()


class _TorchName:
    """A global of the torch module written into the pickle (no torch needed to write it)."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce wants a callable
        raise TypeError(f"{self.module}.{self.name} is a stand-in for a torch function")


class _StorageRef:
    def __init__(self, key, dtype, numel):
        self.key, self.dtype, self.numel = key, dtype, numel


class _PlainTensor:
    def __init__(self, tensor):
        self.tensor = tensor


_REBUILD_TENSOR = _TorchName("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _TorchName("torch._utils", "_rebuild_parameter")


class _Writer(pickle._Pickler):  # the Python pickler: its dispatch table can be extended
    def __init__(self, file, whole_bytes):
        super().__init__(file, protocol=2)  # what torch.save writes
        self._whole_bytes = whole_bytes
        self.records = []  # (key, raw bytes)
        self._refs = {}  # id(tensor) -> _StorageRef
        self._alive = []  # keeps tensors alive so their ids stay unique while writing

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", _TorchName("torch", _STORAGE_OF[obj.dtype]), obj.key, "cpu",
                    obj.numel)
        return None

    def _storage_of(self, t):
        ref = self._refs.get(id(t))
        if ref is None:
            name = dtype_name(t.dtype)
            if name not in _STORAGE_OF:
                raise pickle.PicklingError(
                    f"oneflow.save(torch_format=True): PyTorch has no storage for {name}")
            ref = _StorageRef(str(len(self.records)), name, t.numel())
            self.records.append((ref.key, self._whole_bytes(t)))
            self._refs[id(t)] = ref
            self._alive.append(t)
        return ref

    def reducer_override(self, obj):
        if isinstance(obj, Parameter):
            return (_REBUILD_PARAMETER, (_PlainTensor(obj), bool(obj.requires_grad),
                                         collections.OrderedDict()))
        if isinstance(obj, (flow.Tensor, _PlainTensor)):
            t = obj.tensor if isinstance(obj, _PlainTensor) else obj
            shape = tuple(t.shape)
            stride = [1] * len(shape)
            for i in range(len(shape) - 2, -1, -1):
                stride[i] = stride[i + 1] * shape[i + 1]
            return (_REBUILD_TENSOR, (self._storage_of(t), 0, shape, tuple(stride),
                                      bool(t.requires_grad), collections.OrderedDict()))
        if isinstance(obj, (flow.placement, flow.sbp.sbp, flow.device)):
            raise pickle.PicklingError(
                f"oneflow.save(torch_format=True): a PyTorch file cannot hold {obj!r}; save it "
                f"in oneflow's own format")
        return NotImplemented

    def save_torch_name(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("ascii"))
        self.memoize(obj)

    def save_dtype(self, obj):  # torch.float32 pickles as the global torch.float32
        self.write(pickle.GLOBAL + f"torch\n{dtype_name(obj)}\n".encode("ascii"))
        self.memoize(obj)

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[_TorchName] = save_torch_name
    dispatch[type(flow.float32)] = save_dtype


def save_zip(obj, whole_bytes):
    """The bytes of a torch.save zip file holding obj; whole_bytes(t) gives a tensor's data."""
    pkl = io.BytesIO()
    writer = _Writer(pkl, whole_bytes)
    writer.dump(obj)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        _write_record(archive, out, "data.pkl", pkl.getvalue())
        _write_record(archive, out, "byteorder", b"little")
        for key, raw in writer.records:
            _write_record(archive, out, f"data/{key}", raw)
        _write_record(archive, out, "version", b"3\n")
    return out.getvalue()


def _write_record(archive, out, name, data):
    name = f"{_ARCHIVE}/{name}"
    # Local header: 30 bytes + name + extra; pad the extra field ("FB", as torch does) so the
    # data starts on a multiple of _ALIGN.
    start = out.tell() + 30 + len(name.encode()) + 4
    pad = -start % _ALIGN
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    archive.writestr(info, data)
