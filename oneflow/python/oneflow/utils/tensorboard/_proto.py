"""The few protobuf messages of TensorBoard's event files (tensorflow/core/util/event.proto,
framework/summary.proto, tensor.proto), encoded by hand: field numbers as in those files.

    event(wall_time, step, summary=summary([scalar_value("loss", 0.5)]))  # -> bytes
"""
import struct


def _varint(n):
    n &= (1 << 64) - 1  # negative int64 as two's complement, ten bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def _bytes(field, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return _key(field, 2) + _varint(len(data)) + data


def _int(field, n):
    return _key(field, 0) + _varint(int(n))


def _double(field, x):
    return _key(field, 1) + struct.pack("<d", float(x))


def _float(field, x):
    return _key(field, 5) + struct.pack("<f", float(x))


def _packed_doubles(field, xs):
    return _bytes(field, b"".join(struct.pack("<d", float(x)) for x in xs))


def event(wall_time, step, file_version=None, summary=None, graph_def=None):
    """Event: wall_time = 1, step = 2, file_version = 3, graph_def = 4 (a GraphDef's bytes),
    summary = 5."""
    out = _double(1, wall_time) + _int(2, step)
    if file_version is not None:
        out += _bytes(3, file_version)
    if graph_def is not None:
        out += _bytes(4, graph_def)
    if summary is not None:
        out += _bytes(5, summary)
    return out


def summary(values):
    """Summary: repeated Value value = 1."""
    return b"".join(_bytes(1, v) for v in values)


def scalar_value(tag, x):
    """Summary.Value: tag = 1, simple_value = 2."""
    return _bytes(1, tag) + _float(2, x)


def histogram_value(tag, lo, hi, num, total, sum_squares, bucket_limit, bucket):
    """Summary.Value: tag = 1, histo = 5 (HistogramProto: min 1, max 2, num 3, sum 4,
    sum_squares 5, bucket_limit 6 packed, bucket 7 packed)."""
    histo = (_double(1, lo) + _double(2, hi) + _double(3, num) + _double(4, total) +
             _double(5, sum_squares) + _packed_doubles(6, bucket_limit) +
             _packed_doubles(7, bucket))
    return _bytes(1, tag) + _bytes(5, histo)


def text_value(tag, text):
    """Summary.Value for the text plugin: tag = 1, metadata = 9 (SummaryMetadata.plugin_data = 1:
    PluginData plugin_name = 1), tensor = 8 (TensorProto: dtype = 1 DT_STRING (7),
    tensor_shape = 2 (dim = 2: size = 1), string_val = 8)."""
    metadata = _bytes(1, _bytes(1, "text"))
    shape = _bytes(2, _int(1, 1))
    tensor = _int(1, 7) + _bytes(2, shape) + _bytes(8, text)
    return _bytes(1, tag) + _bytes(9, metadata) + _bytes(8, tensor)
