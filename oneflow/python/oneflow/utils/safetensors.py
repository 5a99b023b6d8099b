"""safetensors files: the names `safetensors.torch` offers, for oneflow tensors.

    from oneflow.utils.safetensors import save_file, load_file, safe_open
    save_file(model.state_dict(), "model.safetensors", metadata={"step": "100"})
    model.load_state_dict(load_file("model.safetensors"))
    with safe_open("model.safetensors", framework="pt") as f:
        print(f.keys(), f.metadata())
        w = f.get_tensor("fc.weight")

The format (huggingface/safetensors, "Format"): an 8-byte little-endian header length N, N
bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
{str: str}}, then the raw little-endian data, offsets counted from the end of the header.
Reading holds no code at all; a header that does not describe the data exactly (offsets past
the end, overlapping or leaving holes, unknown dtypes, sizes that do not match the shape) is
refused with one line before any tensor is made.
"""

import json
import os
import struct

_MAX_HEADER = 100_000_000  # the reference implementation's limit
# safetensors dtype -> (our dtype name, bytes per element); None: a dtype oneflow lacks.
_DTYPES = {
    "BOOL": ("bool", 1), "U8": ("uint8", 1), "I8": ("int8", 1), "I32": ("int32", 4),
    "I64": ("int64", 8), "F16": ("float16", 2), "BF16": ("bfloat16", 2), "F32": ("float32", 4),
    "F64": ("float64", 8),
    "I16": None, "U16": None, "U32": None, "U64": None, "F8_E4M3": None, "F8_E5M2": None,
    "F8_E8M0": None, "F4": None, "F6_E2M3": None, "F6_E3M2": None, "C64": None,
}
_CODE_OF = {v[0]: k for k, v in _DTYPES.items() if v is not None}


def _refuse(what, why):
    raise ValueError(f"{what}: {why}")


def _parse_header(buffer_size, read_prefix, what):
    """(entries {name: (dtype, shape, begin, end)}, metadata, data start) from a file of
    buffer_size bytes; read_prefix(n) returns its first n bytes."""
    if buffer_size < 8:
        _refuse(what, f"the file holds {buffer_size} bytes, less than the 8-byte header length")
    (n,) = struct.unpack("<Q", read_prefix(8))
    if n > _MAX_HEADER:
        _refuse(what, f"header length {n} exceeds the limit of {_MAX_HEADER} bytes")
    if 8 + n > buffer_size:
        _refuse(what, f"header length {n} runs past the end of the file ({buffer_size} bytes)")
    raw = read_prefix(8 + n)[8:]
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as ex:
        _refuse(what, f"the header is not JSON ({ex})")
    except RecursionError:
        _refuse(what, "the header nests JSON too deeply to parse (a safetensors header is an "
                      "object of objects of lists, 3 levels)")
    if not isinstance(header, dict):
        _refuse(what, f"the header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        _refuse(what, "__metadata__ must map strings to strings")
    entries = {}
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            _refuse(what, f"tensor '{name}' needs exactly dtype, shape and data_offsets")
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if code not in _DTYPES:
            _refuse(what, f"tensor '{name}' has unknown dtype {code!r}")
        if _DTYPES[code] is None:
            _refuse(what, f"tensor '{name}' has dtype {code}, which oneflow does not have")
        if not (isinstance(shape, list) and all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            _refuse(what, f"tensor '{name}' has shape {shape!r}; expected a list of sizes >= 0")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(
                isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)):
            _refuse(what, f"tensor '{name}' has data_offsets {offsets!r}; expected [begin, end]")
        dtype, itemsize = _DTYPES[code]
        numel = 1
        for d in shape:
            numel *= d
        begin, end = offsets
        if end - begin != numel * itemsize:
            _refuse(what, f"tensor '{name}' of shape {tuple(shape)} and dtype {code} needs "
                          f"{numel * itemsize} bytes but data_offsets {offsets} span {end - begin}")
        entries[name] = (dtype, tuple(shape), begin, end)
    data_size = buffer_size - 8 - n
    position = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda e: e[1][2:]):
        if begin != position:
            what_happens = "overlaps the tensor before it" if begin < position else (
                f"leaves bytes {position}..{begin} unused")
            _refuse(what, f"tensor '{name}' at data_offsets [{begin}, {end}] {what_happens}")
        position = end
    if position != data_size:
        _refuse(what, f"the tensors end at byte {position} of the data but the file holds "
                      f"{data_size} bytes of data" + (" (truncated?)" if position > data_size
                                                      else ""))
    return entries, metadata, 8 + n


def _make(raw, dtype, shape, device):
    import oneflow as flow

    t = flow._C.from_bytes(bytes(raw), shape, getattr(flow, dtype))
    return t if str(device) == "cpu" else t.to(device)


def load(data):
    """{name: tensor} from the bytes of a safetensors file."""
    data = memoryview(data)
    entries, _, start = _parse_header(len(data), lambda k: bytes(data[:k]), "safetensors.load")
    return {name: _make(data[start + b:start + e], dt, shape, "cpu")
            for name, (dt, shape, b, e) in entries.items()}


def save(tensors, metadata=None):
    """The bytes of a safetensors file holding tensors ({name: tensor}) and metadata."""
    from oneflow._checkpoint_io import _whole_bytes
    from oneflow._dtype_util import dtype_name
    import oneflow as flow

    what = "safetensors.save"
    if not isinstance(tensors, dict):
        _refuse(what, f"expected a dict of tensors, got {type(tensors).__name__}")
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        _refuse(what, "metadata must map strings to strings")
    items = []
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            _refuse(what, f"tensor names must be strings other than __metadata__, got {name!r}")
        if not isinstance(t, flow.Tensor):
            _refuse(what, f"'{name}' is a {type(t).__name__}, not a tensor")
        items.append((name, _CODE_OF[dtype_name(t.dtype)], tuple(t.shape), _whole_bytes(t)))
    # Largest elements first, then by name, so every tensor stays aligned (as the reference
    # writer orders them).
    items.sort(key=lambda i: (-_DTYPES[i[1]][1], i[0]))
    header, position = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, code, shape, raw in items:
        header[name] = {"dtype": code, "shape": list(shape),
                        "data_offsets": [position, position + len(raw)]}
        position += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return b"".join([struct.pack("<Q", len(text)), text] + [i[3] for i in items])


def save_file(tensors, filename, metadata=None):
    """Writes tensors ({name: tensor}) and metadata ({str: str}) to filename atomically."""
    from oneflow._checkpoint_io import _write_atomically

    data = save(tensors, metadata)
    _write_atomically(filename, lambda f: f.write(data))


def load_file(filename, device="cpu"):
    """{name: tensor} of a safetensors file, on device."""
    with safe_open(filename, framework="pt", device=device) as f:
        return {name: f.get_tensor(name) for name in f.keys()}


class safe_open:
    """Reads a safetensors file's header, then its tensors one at a time:

        with safe_open("model.safetensors", framework="pt") as f:
            for name in f.keys():
                t = f.get_tensor(name)
    """

    def __init__(self, filename, framework="pt", device="cpu"):
        if framework not in ("pt", "torch", "flow", "oneflow"):
            raise ValueError(f"safe_open: framework {framework!r} is not supported; use 'pt'")
        self._name = os.fspath(filename)
        self._device = device
        self._what = f"safe_open: '{self._name}'"
        try:
            self._file = open(self._name, "rb")
        except FileNotFoundError:
            raise FileNotFoundError(f"safe_open: no such file '{self._name}'") from None
        try:
            size = os.fstat(self._file.fileno()).st_size

            def prefix(k):
                self._file.seek(0)
                return self._file.read(k)

            self._entries, self._metadata, self._start = _parse_header(size, prefix, self._what)
        except BaseException:
            self._file.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()

    def keys(self):
        return sorted(self._entries)

    def metadata(self):
        return None if self._metadata is None else dict(self._metadata)

    def get_tensor(self, name):
        entry = self._entries.get(name)
        if entry is None:
            raise KeyError(f"{self._what} has no tensor '{name}'")
        dtype, shape, begin, end = entry
        self._file.seek(self._start + begin)
        return _make(self._file.read(end - begin), dtype, shape, self._device)
