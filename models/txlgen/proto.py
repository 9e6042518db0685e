"""The protobuf wire format, the little of it txlgen reads and writes
without generated code: SentencePiece's ModelProto (vocab, train,
loadable) and TensorFlow's BundleHeaderProto and BundleEntryProto
(tfckpt, tfwrite).  Standard library only."""

import os
import struct


class ProtoError(ValueError):
    """A malformed message: what is wrong, without where (the caller
    names the file)."""


def varint(v):
    """The bytes of the varint @v (a negative int as its 64-bit two's
    complement, as protobuf writes an int32 or int64)."""
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        c = v & 0x7f
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def read_varint(b, i, end=None):
    """(value, next position) of the varint at b[i:] (at most 10 bytes,
    inside b[:end])."""
    end = len(b) if end is None else end
    v = shift = 0
    for _ in range(10):
        if i >= end:
            raise ProtoError("a varint runs past its end")
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i
    raise ProtoError("a varint longer than 10 bytes")


def field(num, value, fixed32=False):
    """The bytes of field @num: str (as UTF-8), bytes or a list of byte
    values as a length-delimited field, a float as a fixed 32-bit float,
    an integer or a bool as a varint (with @fixed32, as a fixed 32-bit
    field)."""
    if isinstance(value, float):
        return varint(num << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview, list)):
        return varint(num << 3 | 2) + varint(len(value)) + bytes(value)
    if fixed32:
        return varint(num << 3 | 5) + struct.pack("<I", int(value))
    return varint(num << 3) + varint(int(value))


def fields(b):
    """(field number, wire type, value, the field's whole bytes) of each
    field of the message @b in order: the value an int for varint and
    fixed fields, bytes for length-delimited ones.  ProtoError where the
    message is malformed."""
    i, n = 0, len(b)
    while i < n:
        start = i
        key, i = read_varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(b, i)
        elif wt == 1 or wt == 5:
            k = 8 if wt == 1 else 4
            if i + k > n:
                raise ProtoError("a fixed field runs past its end")
            v = int.from_bytes(b[i:i + k], "little")
            i += k
        elif wt == 2:
            k, i = read_varint(b, i)
            if k > n - i:
                raise ProtoError("a field longer than its message")
            v = bytes(b[i:i + k])
            i += k
        else:
            raise ProtoError(f"wire type {wt}")
        yield num, wt, v, bytes(b[start:i])


def edit(b, num, fn):
    """The message @b with the value of each field @num replaced by
    fn(value) (as field() writes it; None drops the field), the other
    fields as they are."""
    out = bytearray()
    for n, wt, v, raw in fields(b):
        new = fn(v) if n == num else v
        if new is v:
            out += raw
        elif new is not None:
            out += field(n, new, fixed32=wt == 5)
    return bytes(out)


def spm_strip_paths(model):
    """The SentencePiece model @model (bytes) with the training input and
    model_prefix (TrainerSpec fields 1 and 2, inside ModelProto field 2)
    cut to their base names: the model files we ship must not carry the
    paths of the machine that trained them."""
    def base(path):
        return os.path.basename(path.decode())

    return edit(model, 2, lambda spec: edit(edit(spec, 1, base), 2, base))
