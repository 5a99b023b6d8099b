"""TFRecord framing (what TensorBoard's event files are made of) and the masked CRC-32C it
checks each length and payload with.

    f.write(frame(payload))   # u64 length, masked crc of it, payload, masked crc of payload
"""
import struct

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def _table():
    t = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _table()


def crc32c(data):
    c = 0xFFFFFFFF
    t = _TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload):
    header = struct.pack("<Q", len(payload))
    return (header + struct.pack("<I", masked_crc32c(header)) + payload +
            struct.pack("<I", masked_crc32c(payload)))
