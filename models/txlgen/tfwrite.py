"""Write TensorFlow checkpoints (the V2 tensor bundle) without TensorFlow,
for the tests: the format txlgen/tfckpt.py reads, laid out as
TensorFlow's BundleWriter lays it out.

write_bundle(prefix, tensors) writes PREFIX.index and
PREFIX.data-00000-of-00001: the tensors' raw little-endian bytes in the
order of their names, and a LevelDB-format table of 4 KiB blocks (a
restart point every 16 keys, index block one per key), each block
snappy-compressed when that saves at least an eighth of it, as LevelDB's
TableBuilder decides, with its masked crc32c; key "" the
BundleHeaderProto, each name a BundleEntryProto.  Options make the broken
files of the tests (a block or tensor crc, where the shards are).
"""

import math
import struct

import numpy as np

from .tfckpt import MAGIC, mask, crc32c, shard_path

BLOCK_SIZE = 4096
RESTART_INTERVAL = 16
# DataType numbers by numpy dtype
_TF_DTYPES = {"<f4": 1, "<f8": 2, "<i4": 3, "<i8": 9, "<f2": 19}


def _varint(v):
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        c = v & 0x7f
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(num, wt, v):
    key = _varint(num << 3 | wt)
    if wt == 0:
        return key + _varint(v)
    if wt == 5:
        return key + struct.pack("<I", v)
    return key + _varint(len(v)) + v


def header_proto(num_shards=1, endianness=0):
    version = _field(1, 0, 1)                          # producer 1
    return (_field(1, 0, num_shards) +
            (_field(2, 0, endianness) if endianness else b"") +
            _field(3, 2, version))


def entry_proto(dtype, shape, shard, offset, size, crc):
    dims = b"".join(_field(2, 2, _field(1, 0, d) if d else b"")
                    for d in shape)
    out = _field(1, 0, dtype) + _field(2, 2, dims)
    if shard:
        out += _field(3, 0, shard)
    if offset:
        out += _field(4, 0, offset)
    if size:
        out += _field(5, 0, size)
    return out + _field(6, 5, crc)


class _Block:
    def __init__(self, restart_interval):
        self.buf, self.restarts = bytearray(), [0]
        self.interval, self.count, self.last = restart_interval, 0, b""

    def add(self, key, value):
        shared = 0
        if self.count < self.interval:
            n = min(len(key), len(self.last))
            while shared < n and key[shared] == self.last[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.count = 0
        self.buf += (_varint(shared) + _varint(len(key) - shared) +
                     _varint(len(value)) + key[shared:] + value)
        self.count += 1
        self.last = key

    def finish(self):
        return bytes(self.buf) + b"".join(
            struct.pack("<I", r) for r in self.restarts) + \
            struct.pack("<I", len(self.restarts))

    def size(self):
        return len(self.buf) + 4 * len(self.restarts) + 4


def table(entries, block_size=BLOCK_SIZE, compress=True, corrupt=None):
    """The bytes of a LevelDB-format table of (key, value) entries (keys
    sorted); corrupt=i spoils the crc32c of the i-th data block."""
    import snappy
    out = bytearray()

    def write_block(raw):
        kind = 0
        if compress:
            c = snappy.compress(raw)
            if len(c) < len(raw) - len(raw) // 8:
                raw, kind = c, 1
        handle = _varint(len(out)) + _varint(len(raw))
        stored = raw + bytes([kind])
        crc = mask(crc32c(stored))
        if corrupt is not None and corrupt == n_blocks[0]:
            crc ^= 1
        out.extend(stored + struct.pack("<I", crc))
        return handle

    n_blocks = [0]
    index = _Block(1)
    block = _Block(RESTART_INTERVAL)
    for key, value in entries:
        block.add(key, value)
        if block.size() >= block_size:
            index.add(key, write_block(block.finish()))
            n_blocks[0] += 1
            block = _Block(RESTART_INTERVAL)
    if block.count:
        index.add(block.last, write_block(block.finish()))
        n_blocks[0] += 1
    n_blocks[0] = -1
    meta = write_block(_Block(RESTART_INTERVAL).finish())
    idx = write_block(index.finish())
    footer = meta + idx
    footer += b"\0" * (40 - len(footer)) + struct.pack("<Q", MAGIC)
    return bytes(out + footer)


def write_bundle(prefix, tensors, num_shards=1, bad_tensor_crc=None,
                 corrupt_block=None, block_size=BLOCK_SIZE):
    """Write name -> numpy array (float32, float64, int32, int64, float16)
    as PREFIX.index + one data shard (num_shards only as the header says
    it); bad_tensor_crc names a tensor whose crc32c is spoiled."""
    data, entries = bytearray(), []
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        a = a.astype(a.dtype.newbyteorder("<"))
        dt = _TF_DTYPES[a.dtype.str]
        raw = a.tobytes()
        crc = mask(crc32c(raw))
        if name == bad_tensor_crc:
            crc ^= 1
        entries.append((name.encode(), entry_proto(
            dt, a.shape, 0, len(data), len(raw), crc)))
        data += raw
    index = table([(b"", header_proto(num_shards))] + entries,
                  block_size=block_size, corrupt=corrupt_block)
    with open(shard_path(prefix, 0, num_shards), "wb") as f:
        f.write(data)
    with open(prefix + ".index", "wb") as f:
        f.write(index)
    return len(entries)
