"""TensorFlow checkpoints (the V2 tensor bundle) read without TensorFlow.

A checkpoint PREFIX (model.ckpt-N) is PREFIX.index, a LevelDB-format
table, and the shards PREFIX.data-SSSSS-of-NNNNN that hold the tensors'
raw little-endian bytes.  The table:

  data blocks    entries of prefix-compressed keys: varint shared,
                 varint unshared, varint value length, the key's unshared
                 bytes, the value; then uint32 restart offsets and their
                 count.  Each block is followed by a compression byte (0
                 none, 1 snappy) and the masked crc32c of the block's
                 stored bytes and that byte.
  metaindex      a block (empty in a bundle)
  index block    key: a key >= every key of a data block; value: that
                 block's handle (varint offset, varint size)
  footer         48 bytes: the metaindex and index handles, zero padding,
                 the magic 0xdb4775248b80fb57 (little-endian)

Key "" holds a BundleHeaderProto (num_shards, endianness, version); each
variable's key its BundleEntryProto (dtype, shape, shard_id, offset,
size, the masked crc32c of its bytes, slices).  They are read by the few
lines of protobuf wire format below (no generated code, no protobuf
package): the fields txlgen needs, every other field skipped by its wire
type.

Everything is checked before it is used: the footer's magic, every
block's crc32c and handle (inside the table, before the footer), the
snappy lengths of all data blocks before any is decompressed (a block
of at most MAX_BLOCK bytes, all of them MAX_INFLATED), every entry
inside its block and its key's shared prefix inside the key before, the
restart array (increasing, each point at an entry that shares nothing),
keys in strictly increasing order as they are read, at most MAX_ENTRIES
entries and MAX_KEPT bytes of keys and values rebuilt, the header's shard count and byte
order, each tensor's dtype (by name: float, double, half, bfloat16,
int32, int64; anything else refused), its shape (at most MAX_DIMS sizes,
their product with the item size the entry's size, no overflow: Python
integers), its shard (present), its offset and size (inside the shard),
and, when the tensor is read, the crc32c of its bytes.  A tensor is read
only when it is used: the optimizer's slots (.../Adam, .../Adam_1),
global_step and beta1_power / beta2_power, as a training checkpoint
holds them beside the model, are listed but never read.

crc32c and snappy come from Debian's python3-crc32c and python3-snappy
(C code: the crc32c of lm1b's 3.4 GB of weights takes seconds, where a
crc32c in Python would take hours; snappy's blocks are small, but its
decoder in C is Debian's, maintained and fuzzed, not another one to
trust here).  setup.sh installs both.

Every problem is a CheckpointError that names the file; nothing here
needs PyTorch.
"""

import collections
import collections.abc
import math
import os
import re
import struct

import numpy as np

from .checkpoint import CheckpointError, MAX_DIMS, bf16_to_f32
from .errors import open_input
from .proto import ProtoError, fields as proto_fields, read_varint as varint

MAGIC = 0xdb4775248b80fb57
FOOTER = 48
# A block of a bundle's table is 4 KiB before compression as TensorFlow
# writes it (plus one entry past that); an index of thousands of tensors
# stays far below these.  They bound what parsing keeps: the entries (a
# few per tensor), the bytes of their keys and values as rebuilt (a
# 5-byte entry may share a long prefix), every block's inflated size and
# their sum (the snappy lengths checked before anything is inflated), so
# an index of a few MB of repeated entries cannot need gigabytes.
MAX_BLOCK = 1 << 24
MAX_INFLATED = 1 << 28
MAX_INDEX = MAX_INFLATED
MAX_ENTRIES = 1000000
MAX_KEY = 1 << 16
MAX_KEPT = 1 << 26

# DataType by number (tensorflow/core/framework/types.proto): the dtypes
# read by name; every other is refused.
DTYPES = {1: ("float", "<f4"), 2: ("double", "<f8"), 3: ("int32", "<i4"),
          9: ("int64", "<i8"), 14: ("bfloat16", "<u2"), 19: ("half", "<f2")}
# DT_STRING: TF 2's object graph (OBJECT_GRAPH), read as bytes only
DT_STRING = 7
OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
MAX_STRING = 1 << 26
# Variables of training beside the model's: never read.
TRAINING = re.compile(r"(^|/)(global_step|beta[12]_power(_\d+)?)$|"
                      r"/(Adam|Adam_\d+|Momentum|RMSProp(_\d+)?|"
                      r"Adagrad|ExponentialMovingAverage)$")


def _crc_module():
    try:
        import crc32c
    except ImportError:
        raise CheckpointError("reading TensorFlow checkpoints needs "
                              "crc32c's Python module: apt-get install "
                              "python3-crc32c")
    return crc32c


def _snappy_module():
    try:
        import snappy
    except ImportError:
        raise CheckpointError("reading TensorFlow checkpoints needs "
                              "snappy's Python module: apt-get install "
                              "python3-snappy")
    return snappy


def crc32c(data, value=0):
    return _crc_module().crc32c(data, value) & 0xffffffff


def mask(crc):
    """LevelDB's and TensorFlow's masked crc32c."""
    return (((crc >> 15) | (crc << 17)) + 0xa282ead8) & 0xffffffff


# ---------------------------------------------------------------------------
# protobuf wire format, the little a bundle needs

def fields(b):
    """(field number, wire type, value) of a message: an int for varint
    and fixed fields, bytes for length-delimited ones."""
    for num, wt, v, _ in proto_fields(b):
        if num == 0:
            raise ProtoError("field number 0")
        yield num, wt, v


def _signed64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


Entry = collections.namedtuple("Entry",
                               "name dtype shape shard offset size crc")


def parse_header(b):
    """(num_shards, endianness) of a BundleHeaderProto."""
    shards, endian = 1, 0
    for num, wt, v in fields(b):
        if num == 1 and wt == 0:
            shards = _signed64(v)
        elif num == 2 and wt == 0:
            endian = v
    return shards, endian


def parse_shape(b):
    dims, unknown = [], False
    for num, wt, v in fields(b):
        if num == 2 and wt == 2:
            size = None
            for n2, w2, v2 in fields(v):
                if n2 == 1 and w2 == 0:
                    size = _signed64(v2)
            dims.append(0 if size is None else size)
        elif num == 3 and wt == 0:
            unknown = bool(v)
    if unknown:
        raise ProtoError("a shape of unknown rank")
    return dims


def parse_entry(name, b):
    """An Entry of a BundleEntryProto (dtype as its number)."""
    dtype, shape, shard, offset, size, crc, sliced = 0, [], 0, 0, 0, None, \
        False
    for num, wt, v in fields(b):
        if num == 1 and wt == 0:
            dtype = v
        elif num == 2 and wt == 2:
            shape = parse_shape(v)
        elif num == 3 and wt == 0:
            shard = _signed64(v)
        elif num == 4 and wt == 0:
            offset = _signed64(v)
        elif num == 5 and wt == 0:
            size = _signed64(v)
        elif num == 6 and wt == 5:
            crc = v
        elif num == 7 and wt == 2:
            sliced = True
    if sliced:
        raise ProtoError("a partitioned variable (slices): not supported")
    return Entry(name, dtype, tuple(shape), shard, offset, size, crc)


# ---------------------------------------------------------------------------
# The LevelDB table

class _Budget:
    """What a table's parse may still keep: entries, and bytes of keys
    and values."""

    def __init__(self, path):
        self.path, self.entries, self.kept = path, 0, 0

    def take(self, what, nbytes):
        self.entries += 1
        self.kept += nbytes
        if self.entries > MAX_ENTRIES:
            raise CheckpointError(f"{what}: more than {MAX_ENTRIES:,} "
                                  "entries (a tensor bundle has a few per "
                                  "tensor)")
        if self.kept > MAX_KEPT:
            raise CheckpointError(f"{what}: more than {MAX_KEPT:,} bytes "
                                  "of keys and values")


def block_entries(block, what, budget=None, after=None):
    """(key, value) of a block's entries, keys rebuilt from their shared
    prefixes, each key after the one before (and after @after, the last
    key of the block before); the restart array checked: increasing
    offsets, the first at 0, each at an entry that shares nothing, and
    no entry past the last that shares nothing outside them.  @budget (a
    _Budget) bounds what is kept."""
    n = len(block)
    if n < 4:
        raise CheckpointError(f"{what}: a block of {n} bytes")
    (restarts,) = struct.unpack_from("<I", block, n - 4)
    if restarts < 1 or 4 + 4 * restarts > n:
        raise CheckpointError(f"{what}: a block with {restarts} restart "
                              "points does not fit its bytes")
    end = n - 4 - 4 * restarts
    points = struct.unpack_from(f"<{restarts}I", block, end)
    if end and (points[0] != 0 or
                any(a >= b for a, b in zip(points, points[1:])) or
                points[-1] >= end):
        raise CheckpointError(f"{what}: restart points out of order or "
                              "past the entries")
    out, key, i, r = [], b"", 0, 0
    try:
        while i < end:
            at_restart = r < restarts and points[r] == i
            if r < restarts and points[r] < i:
                raise CheckpointError(f"{what}: a restart point inside "
                                      "an entry")
            shared, i = varint(block, i, end)
            unshared, i = varint(block, i, end)
            vlen, i = varint(block, i, end)
            if shared > len(key) or unshared > end - i or \
                    vlen > end - i - unshared:
                raise CheckpointError(f"{what}: an entry runs past its "
                                      "block")
            if at_restart and shared:
                raise CheckpointError(f"{what}: an entry at a restart "
                                      "point shares a prefix")
            if shared + unshared > MAX_KEY:
                raise CheckpointError(f"{what}: a key of "
                                      f"{shared + unshared:,} bytes")
            if budget is not None:
                budget.take(what, shared + unshared + vlen)
            prev = key if out else after
            key = key[:shared] + bytes(block[i:i + unshared])
            if prev is not None and not prev < key:
                raise CheckpointError(f"{what}: keys out of order "
                                      f"({prev[:80]!r}, {key[:80]!r})")
            i += unshared
            out.append((key, bytes(block[i:i + vlen])))
            i += vlen
            r += at_restart
    except ProtoError as e:
        raise CheckpointError(f"{what}: {e}")
    if end and r != restarts:
        raise CheckpointError(f"{what}: a restart point inside an entry")
    return out


class Table:
    """The (key, value) entries of a LevelDB-format table file, every
    block checked."""

    def __init__(self, path):
        self.path = path
        try:
            with open_input(path) as f:
                self.size = os.fstat(f.fileno()).st_size
                if self.size > MAX_INDEX:
                    raise CheckpointError(f"{path}: {self.size:,} bytes: "
                                          "not a checkpoint's index")
                self.raw = f.read()
        except OSError as e:
            raise CheckpointError(f"{path}: {e.strerror or e}")
        if len(self.raw) < FOOTER:
            raise CheckpointError(f"{path}: {len(self.raw)} bytes, shorter "
                                  "than a table's footer (truncated?)")
        foot = self.raw[-FOOTER:]
        (magic,) = struct.unpack_from("<Q", foot, 40)
        if magic != MAGIC:
            raise CheckpointError(f"{path}: not a TensorFlow checkpoint "
                                  "index (no table magic at its end: "
                                  "truncated?)")
        try:
            meta_off, i = varint(foot, 0, 40)
            meta_size, i = varint(foot, i, 40)
            index_off, i = varint(foot, i, 40)
            index_size, i = varint(foot, i, 40)
        except ProtoError as e:
            raise CheckpointError(f"{path}: bad footer ({e})")
        self.block((meta_off, meta_size), "metaindex")
        index = block_entries(self.block((index_off, index_size),
                                         "index block"),
                              f"{path}: index block")
        handles = []
        for sep, handle in index:
            try:
                off, i = varint(handle, 0)
                size, i = varint(handle, i)
            except ProtoError as e:
                raise CheckpointError(f"{path}: bad block handle ({e})")
            handles.append((sep, off, size))
        # every data block's inflated size before any is inflated
        total = 0
        for _, off, size in handles:
            total += self.inflated_size((off, size), "data block")
            if total > MAX_INFLATED:
                raise CheckpointError(f"{path}: data blocks of more than "
                                      f"{MAX_INFLATED:,} bytes inflated")
        budget = _Budget(path)
        self.entries = []
        for sep, off, size in handles:
            block = self.block((off, size), "data block")
            last = self.entries[-1][0] if self.entries else None
            for k, v in block_entries(block, f"{path}: data block at {off}",
                                      budget, last):
                if k > sep:
                    raise CheckpointError(f"{path}: key {k[:80]!r} past "
                                          "its block's index key")
                self.entries.append((k, v))
            del block

    def inflated_size(self, handle, what):
        """The bytes the block at handle inflates to, as its stored
        bytes say (the snappy length), checked against MAX_BLOCK."""
        off, size = self.check_handle(handle, what)
        if self.raw[off + size] == 1:
            try:
                n, _ = varint(self.raw, off, off + size)
            except ProtoError as e:
                raise CheckpointError(f"{self.path}: the {what} at {off}: "
                                      f"bad snappy length ({e})")
        else:
            n = size
        if n > MAX_BLOCK:
            raise CheckpointError(f"{self.path}: the {what} at {off} "
                                  f"inflates to {n:,} bytes")
        return n

    def check_handle(self, handle, what):
        off, size = handle
        limit = len(self.raw) - FOOTER
        if off > limit or size > limit - off or 5 > limit - off - size:
            raise CheckpointError(f"{self.path}: the {what} at {off} of "
                                  f"{size} bytes lies past the end of the "
                                  "table (truncated?)")
        if size > MAX_BLOCK:
            raise CheckpointError(f"{self.path}: a {what} of {size:,} "
                                  "bytes")
        return off, size

    def block(self, handle, what):
        off, size = self.check_handle(handle, what)
        stored = self.raw[off:off + size + 1]
        (crc,) = struct.unpack_from("<I", self.raw, off + size + 1)
        if mask(crc32c(stored)) != crc:
            raise CheckpointError(f"{self.path}: the {what} at {off} fails "
                                  "its crc32c (a damaged file)")
        kind = stored[-1]
        data = stored[:-1]
        if kind == 0:
            return data
        if kind != 1:
            raise CheckpointError(f"{self.path}: the {what} at {off} has "
                                  f"compression {kind} (0 none, 1 snappy)")
        try:
            n, _ = varint(data, 0)
        except ProtoError as e:
            raise CheckpointError(f"{self.path}: the {what} at {off}: bad "
                                  f"snappy length ({e})")
        if n > MAX_BLOCK:
            raise CheckpointError(f"{self.path}: the {what} at {off} "
                                  f"inflates to {n:,} bytes")
        snappy = _snappy_module()
        try:
            out = snappy.uncompress(data)
        except Exception as e:          # noqa: BLE001 (UncompressError...)
            raise CheckpointError(f"{self.path}: the {what} at {off}: bad "
                                  f"snappy data ({type(e).__name__})")
        if len(out) != n:
            raise CheckpointError(f"{self.path}: the {what} at {off}: "
                                  "snappy data of the wrong length")
        return out


# ---------------------------------------------------------------------------
# The bundle

def latest_prefix(d):
    """The prefix of the checkpoint saved in directory @d: the one its
    `checkpoint` file names (found in @d by its base name when the file
    gives a path of the machine that trained it), or the one `.index`
    file in @d when there is no `checkpoint` file."""
    state = os.path.join(d, "checkpoint")
    if not os.path.exists(state):
        idx = sorted(n for n in os.listdir(d) if n.endswith(".index"))
        if len(idx) != 1:
            raise CheckpointError(f"{d}: {len(idx)} .index files "
                                  "and no checkpoint file naming one")
        return os.path.join(d, idx[0][:-len(".index")])
    try:
        with open_input(state) as f:
            text = f.read(1 << 16).decode("utf-8", "replace")
    except OSError as e:
        raise CheckpointError(f"{state}: {e.strerror or e}")
    m = re.search(r'^model_checkpoint_path:\s*"([^"\n]+)"', text, re.M)
    if not m:
        raise CheckpointError(f"{state}: no model_checkpoint_path")
    name = m.group(1)
    prefix = name if os.path.isabs(name) else os.path.join(d, name)
    if os.path.exists(prefix + ".index"):
        return prefix
    alt = os.path.join(d, os.path.basename(name))
    if not os.path.exists(alt + ".index"):
        raise CheckpointError(f"{prefix}.index: no such file (named by "
                              f"{state})")
    return alt


def shard_path(prefix, shard, n):
    return f"{prefix}.data-{shard:05d}-of-{n:05d}"


class Bundle(collections.abc.Mapping):
    """name -> float32 numpy array of a checkpoint's model variables
    (training variables, TRAINING, left out: .training lists them); each
    tensor read from its shard and its crc32c checked when it is used."""

    def __init__(self, prefix):
        self.prefix = prefix
        index = prefix + ".index"
        table = Table(index)
        if not table.entries or table.entries[0][0] != b"":
            raise CheckpointError(f"{index}: no bundle header (key \"\"): "
                                  "not a tensor bundle")
        try:
            shards, endian = parse_header(table.entries[0][1])
        except ProtoError as e:
            raise CheckpointError(f"{index}: bad bundle header ({e})")
        if endian != 0:
            raise CheckpointError(f"{index}: big-endian tensors are not "
                                  "supported")
        if not 1 <= shards <= 1 << 16:
            raise CheckpointError(f"{index}: {shards} shards")
        self.n_shards = shards
        self.shard_sizes = {}
        self.entries = collections.OrderedDict()
        self.strings = {}           # the object graph: string()
        self.training = []
        for key, value in table.entries[1:]:
            try:
                name = key.decode("utf-8")
            except UnicodeDecodeError:
                raise CheckpointError(f"{index}: a tensor name that is not "
                                      "UTF-8")
            try:
                e = parse_entry(name, value)
            except ProtoError as err:
                raise CheckpointError(f"{index}: tensor {name[:100]!r}: "
                                      f"{err}")
            if TRAINING.search(name):
                self.training.append(name)
                continue
            if e.dtype == DT_STRING and name == OBJECT_GRAPH:
                self.strings[name] = self._check(e, index)
                continue
            self.entries[name] = self._check(e, index)

    def _check(self, e, index):
        what = f"{index}: tensor {e.name[:100]!r}"
        if e.dtype == DT_STRING and e.name == OBJECT_GRAPH:
            if e.shape != () or not 5 <= e.size <= MAX_STRING:
                raise CheckpointError(f"{what}: a string tensor of shape "
                                      f"{list(e.shape)[:10]} and {e.size:,} "
                                      "bytes: only a scalar string of at "
                                      f"most {MAX_STRING:,} bytes is read")
            return self._check_place(e, index, what)
        if e.dtype not in DTYPES:
            raise CheckpointError(f"{what}: dtype {e.dtype} is none of "
                                  f"{', '.join(n for n, _ in DTYPES.values())}")
        if len(e.shape) > MAX_DIMS or any(d < 0 for d in e.shape):
            raise CheckpointError(f"{what}: shape {list(e.shape)[:10]} is "
                                  f"not at most {MAX_DIMS} sizes >= 0")
        item = np.dtype(DTYPES[e.dtype][1]).itemsize
        need = math.prod(e.shape) * item
        if need >= 1 << 62:
            raise CheckpointError(f"{what}: shape {list(e.shape)} of "
                                  f"{DTYPES[e.dtype][0]} is larger than any "
                                  "file (its size overflows)")
        if e.size != need:
            raise CheckpointError(f"{what}: shape {list(e.shape)} of "
                                  f"{DTYPES[e.dtype][0]} needs {need:,} "
                                  f"bytes, the entry says {e.size:,}")
        return self._check_place(e, index, what)

    def _check_place(self, e, index, what):
        """e's shard present and its bytes inside it, its crc32c given."""
        if not 0 <= e.shard < self.n_shards:
            raise CheckpointError(f"{what}: shard {e.shard} of "
                                  f"{self.n_shards}")
        path = shard_path(self.prefix, e.shard, self.n_shards)
        size = self.shard_sizes.get(e.shard)
        if size is None:
            try:
                st = os.stat(path)
            except OSError as err:
                raise CheckpointError(f"{path}: {err.strerror or err} (a "
                                      "missing shard of the checkpoint)")
            size = self.shard_sizes[e.shard] = st.st_size
        if e.offset < 0 or e.offset > size or e.size > size - e.offset:
            raise CheckpointError(f"{path}: tensor {e.name[:100]!r} at "
                                  f"{e.offset:,} of {e.size:,} bytes lies "
                                  f"past the shard's end ({size:,} bytes: "
                                  "truncated?)")
        if e.crc is None and e.size:
            raise CheckpointError(f"{what}: no crc32c")
        return e

    def _read(self, e, check=True):
        """The bytes of entry e, their crc32c checked (check)."""
        name = e.name
        path = shard_path(self.prefix, e.shard, self.n_shards)
        try:
            with open_input(path) as f:
                f.seek(e.offset)
                raw = bytearray(e.size)
                got = f.readinto(raw) if e.size else 0
        except OSError as err:
            raise CheckpointError(f"{path}: {err.strerror or err}")
        if got != e.size:
            raise CheckpointError(f"{path}: tensor {name[:100]!r}: the "
                                  "shard is shorter than when it was "
                                  "opened (truncated?)")
        if check and mask(crc32c(raw)) != e.crc:
            raise CheckpointError(f"{path}: tensor {name[:100]!r} fails its "
                                  "crc32c (a damaged file)")
        return raw

    def string(self, name):
        """The bytes of the scalar string tensor name, as TensorFlow's
        BundleWriter writes one (WriteStringTensor): the varint length,
        the masked crc32c of the length (as a 4-byte integer), the bytes;
        the entry's crc32c covers that integer, that checksum and the
        bytes."""
        e = self.strings[name]
        raw = self._read(e, check=False)
        path = shard_path(self.prefix, e.shard, self.n_shards)
        what = f"{path}: string tensor {name[:100]!r}"
        try:
            n, i = varint(raw, 0)
        except ProtoError as err:
            raise CheckpointError(f"{what}: bad length ({err})")
        if n != len(raw) - i - 4:
            raise CheckpointError(f"{what}: a length of {n:,} in "
                                  f"{len(raw):,} bytes")
        (lcrc,) = struct.unpack_from("<I", raw, i)
        if mask(crc32c(struct.pack("<I", n))) != lcrc:
            raise CheckpointError(f"{what}: its length fails its crc32c "
                                  "(a damaged file)")
        if mask(crc32c(raw[i + 4:], crc32c(struct.pack("<I", n) +
                                           raw[i:i + 4]))) != e.crc:
            raise CheckpointError(f"{what} fails its crc32c (a damaged "
                                  "file)")
        return bytes(raw[i + 4:])

    def __getitem__(self, name):
        e = self.entries[name]
        raw = self._read(e)
        kind, np_dtype = DTYPES[e.dtype]
        a = np.frombuffer(raw, np_dtype)
        if kind == "bfloat16":
            a = bf16_to_f32(a)
        elif kind != "float" or a.dtype != np.float32:
            a = a.astype(np.float32)        # (float32: the bytes read)
        return a.reshape(e.shape)

    def __iter__(self):
        return iter(self.entries)

    def __len__(self):
        return len(self.entries)

    def shape(self, name):
        return self.entries[name].shape
