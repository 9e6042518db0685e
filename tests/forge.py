"""Checkpoints written byte by byte, for tests of what torch.save never
writes: pickles opcode by opcode, torch.save's zip and legacy containers,
safetensors files.  Standard library only (no torch), so that the tests
that use it run where the converter runs.

    p = Pickle()
    p.state_dict({"w": p.tensor("0", numel=4, size=[4], stride=[1])})
    zip_checkpoint(path, p.done(), {"0": bytes(16)})
    legacy_checkpoint(path, p.done(), {"0": (4, bytes(16))})

Every method of Pickle pushes one value (a few opcodes); the arguments
that are themselves values are functions that push them (or plain
Python values: int, str, bool, None, lists and tuples of them).
"""

import json
import pickle
import struct
import zipfile
import zlib

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


class Pickle:
    """A protocol 2 pickle, opcode by opcode."""

    def __init__(self):
        self.b = bytearray(b"\x80\x02")

    def op(self, raw):
        self.b += raw
        return self

    def push(self, v):
        """A plain value, a function that pushes one, or a Pickle method's
        result (already pushed: None)."""
        if callable(v):
            v()
        elif v is None:
            self.op(b"N")
        elif v is True or v is False:
            self.op(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            n = (v.bit_length() + 8) // 8
            self.op(b"\x8a" + bytes([n]) + v.to_bytes(n, "little",
                                                      signed=True))
        elif isinstance(v, float):
            self.op(b"G" + struct.pack(">d", v))
        elif isinstance(v, str):
            e = v.encode()
            self.op(b"X" + struct.pack("<I", len(e)) + e)
        elif isinstance(v, (list, tuple)):
            self.op(b"(")
            for x in v:
                self.push(x)
            self.op(b"t" if isinstance(v, tuple) else b"l")
        elif isinstance(v, dict):
            self.dict(v)
        else:
            raise TypeError(type(v).__name__)
        return None

    def glob(self, module, name):
        return self.op(f"c{module}\n{name}\n".encode())

    def call(self, module, name, *args):
        """module.name(*args) (REDUCE)."""
        self.glob(module, name)
        self.push(tuple(args))
        return self.op(b"R")

    def dict(self, items, ordered=False):
        if ordered:
            self.call("collections", "OrderedDict")
        else:
            self.op(b"}")
        if items:
            self.op(b"(")
            for k, v in items.items():
                self.push(k)
                self.push(v)
            self.op(b"u")
        return self

    def state_dict(self, items):
        return self.dict(items, ordered=True)

    def storage(self, key, numel, dtype="FloatStorage"):
        """A persistent id of torch.save: ("storage", type, key, device,
        numel)."""
        self.push(("storage", lambda: self.glob("torch", dtype), key, "cpu",
                   numel))
        return self.op(b"Q")

    def tensor(self, key, numel, size, stride, offset=0,
               dtype="FloatStorage"):
        """torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
        requires_grad, hooks): what torch.save writes for a tensor."""
        return lambda: self.call(
            "torch._utils", "_rebuild_tensor_v2",
            lambda: self.storage(key, numel, dtype), offset, tuple(size),
            tuple(stride), False,
            lambda: self.call("collections", "OrderedDict"))

    def new(self, cls):
        """cls.__new__(cls) (NEWOBJ), cls = "module.Class"."""
        module, name = cls.rsplit(".", 1)
        return self.glob(module, name).op(b")\x81")

    def standin(self, cls, attrs):
        """An instance of a known class (module.Class) with its __dict__,
        as torch.save(model) writes an nn.Module."""
        return lambda: (self.new(cls), self.build(attrs))

    def put(self, i):
        """Memoize the value on top of the stack as i."""
        return self.op(b"q" + bytes([i]))

    def get(self, i):
        return lambda: self.op(b"h" + bytes([i]))

    def build(self, state):
        """BUILD: set the state of the value on top of the stack."""
        self.push(state)
        return self.op(b"b")

    def done(self):
        return bytes(self.b + b".")


def zip_checkpoint(path, data_pkl, storages, compressed=()):
    """torch.save's zip archive (torch >= 1.6): archive/data.pkl and
    archive/data/KEY; the names in compressed deflated."""
    with zipfile.ZipFile(path, "w") as z:
        for name, data in [("archive/data.pkl", data_pkl),
                           ("archive/version", b"3\n")] + \
                [(f"archive/data/{k}", v) for k, v in storages.items()]:
            z.writestr(name, data, zipfile.ZIP_DEFLATED
                       if name in compressed else zipfile.ZIP_STORED)


def zip_bomb_checkpoint(path, data_pkl, key, zero_bytes):
    """A zip archive whose storage KEY is zero_bytes zeros, deflated into
    about a thousandth of that (zero_bytes a multiple of 1 MiB, below 4
    GiB): written by hand, block by block, with the right CRC."""
    mib = bytes(1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH) == block
    end = c.flush()
    n = zero_bytes >> 20
    crc, big = 0, bytes(64 << 20)
    for _ in range(n >> 6):
        crc = zlib.crc32(big, crc)
    for _ in range(n & 63):
        crc = zlib.crc32(mib, crc)
    entries = [("archive/data.pkl", 0, data_pkl, zlib.crc32(data_pkl),
                len(data_pkl)),
               ("archive/version", 0, b"3\n", zlib.crc32(b"3\n"), 2),
               (f"archive/data/{key}", 8, None, crc, zero_bytes)]
    with open(path, "wb") as f:
        central = b""
        for name, method, data, crc, size in entries:
            off = f.tell()
            body_len = len(data) if data is not None else \
                n * len(block) + len(end)
            head = struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, method, 0,
                               0, crc, body_len, size, len(name), 0)
            f.write(head + name.encode())
            if data is not None:
                f.write(data)
            else:
                for _ in range(n):
                    f.write(block)
                f.write(end)
            central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20,
                                   0, method, 0, 0, crc, body_len, size,
                                   len(name), 0, 0, 0, 0, 0, off) + \
                name.encode()
        start = f.tell()
        f.write(central)
        f.write(struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, len(entries),
                            len(entries), len(central), start, 0))


def legacy_checkpoint(path, obj_pkl, storages, keys=None):
    """torch.save's legacy format (torch < 1.6): pickled magic number,
    protocol version, sys_info, the object, the list of storage keys, then
    each storage as an int64 count and its bytes.  storages: key ->
    (count, bytes); keys: the list written (default: storages' keys)."""
    with open(path, "wb") as f:
        f.write(pickle.dumps(LEGACY_MAGIC, 2))
        f.write(pickle.dumps(1001, 2))
        f.write(pickle.dumps({"protocol_version": 1001,
                              "little_endian": True,
                              "type_sizes": {"short": 2, "int": 4,
                                             "long": 4}}, 2))
        f.write(obj_pkl)
        f.write(pickle.dumps(list(storages) if keys is None else keys, 2))
        for count, data in storages.values():
            f.write(struct.pack("<q", count) + data)


def safetensors(path, header, data=b"", header_len=None):
    """A safetensors file: u64 header length (default: the header's), the
    header (a JSON value, or raw bytes as they are), the data."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    n = len(raw) if header_len is None else header_len
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n) + raw + data)
