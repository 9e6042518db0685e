"""Read Transformer-XL checkpoints without running anything from them.

Three forms (see models/README.md):
  - a whole-model pickle, torch.save(model) of the original code's
    MemTransformerLM (its train.py writes model.pt that way);
  - a Hugging Face TransfoXL directory: config.json and pytorch_model.bin
    or model.safetensors (its vocabulary: txlgen.vocab);
  - a bare state_dict, torch.save(model.state_dict()).

torch.save files are pickles, and a pickle is a program: unpickling calls
whatever functions it names.  So nothing here uses pickle.load or
torch.load.  RestrictedUnpickler resolves a short allow-list of names:
tensors, storages, dicts, lists, sets, Counter/OrderedDict, and the known
classes of the original code and of torch.nn, which it rebuilds as inert
StandIn objects holding their plain attributes (no class of theirs is
imported, no method of theirs runs).  Every other global is refused with
CheckpointError, before anything it names is called.  (torch.load's own
weights_only mode is not used: before torch 2.6 it could be made to run
code, CVE-2025-32434, and Debian ships older.)

Both torch.save containers are read: the zip archive (torch >= 1.6) and
the legacy sequential format (older torch, and many published files).

What a file declares is checked against what it holds before anything is
allocated for it: a storage's size against the bytes the file has for it
(zip entries must be stored, not compressed, as torch.save writes them:
a compressed one could inflate to anything), a tensor's size, stride and
offset against its storage (no zero strides, nothing outside it, never
more elements than it), and the tensors used from one file together
against its storages (one storage read as many tensors: at most twice
what the storages hold).  Tensors are built only when used
(Checkpoint.state is a State), and a storage's bytes are read from the
file only then: the optimizer state of a training checkpoint, often
larger than the model, is never read.  A pickle's opcodes are walked before it
is unpickled (every argument inside the file, none of protocol 5's
buffers).  Nested structures are walked to a fixed depth, and a module
that contains itself is refused.  Only regular files are read.

read_checkpoint(path) -> Checkpoint(hparams, state, source): state maps
the ORIGINAL code's state_dict names (txl_ref uses the same) to numpy
arrays (BF16 widened to float32); hparams holds what the checkpoint says
about itself, with the original names (n_token n_layer ... tie_weight
tie_projs untie_r).  Every problem is an InputError (a CheckpointError
but for files that cannot be opened) naming the file.  Standard library
and numpy only: no PyTorch.
"""

import collections
import collections.abc
import contextlib
import io
import json
import math
import mmap
import os
import pickle
import pickletools
import struct
import weakref
import zipfile
import zlib

import numpy as np

from .conventions import LAYER_NORM_EPS, REL_PARTIAL, TABLE_KINDS
from .errors import InputError, describe, open_input
from .hparams import as_bool, as_float32, is_int


class CheckpointError(InputError):
    pass


# Containers walked from the top of a file (a state_dict inside a
# checkpoint dict) and modules inside modules: deeper is not a checkpoint.
MAX_DEPTH = 32
# Dimensions of a tensor: a checkpoint's have at most 4 (numpy takes 32;
# the bytes of its nonzero dimensions must fit numpy's index type, even
# where another dimension is 0).
MAX_DIMS, MAX_BYTES = 8, 1 << 62


def _too_big(shape, itemsize):
    return math.prod(d for d in shape if d) * itemsize >= MAX_BYTES
# config.json, vocab pickles, data.pkl: kilobytes to megabytes in real
# files; JSON and pickles take many times their size in memory.
MAX_JSON = 1 << 20


def read_json(path, what="JSON"):
    """A JSON object from a file of at most MAX_JSON bytes."""
    try:
        with open_input(path) as f:
            raw = f.read(MAX_JSON + 1)
    except OSError as e:
        raise CheckpointError(f"{path}: {e.strerror or e}")
    return parse_json(raw, path, what)


def parse_json(raw, path, what="JSON"):
    """A JSON object from the bytes of file path."""
    if len(raw) > MAX_JSON:
        raise CheckpointError(f"{path}: more than {MAX_JSON} bytes: not a "
                              f"{what} file")
    try:
        obj = json.loads(raw)
    except RecursionError:
        raise CheckpointError(f"{path}: JSON nested too deeply")
    except ValueError as e:              # also UnicodeDecodeError
        raise CheckpointError(f"{path}: not JSON ({e})")
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: not a JSON object")
    return obj


# ---------------------------------------------------------------------------
# The restricted unpickler

class StandIn:
    """An instance of a known class, rebuilt as plain data: its pickled
    __dict__ and nothing else (_cls names the class it stands for)."""

    _cls = "?"

    def __setstate__(self, state):
        # nn.Module and plain objects pickle their __dict__; (dict, slots)
        # for classes with __slots__
        if isinstance(state, tuple) and len(state) == 2 and \
                all(isinstance(x, (dict, type(None))) for x in state):
            state = dict(state[0] or {}, **(state[1] or {}))
        if not isinstance(state, dict):
            raise CheckpointError(f"{self._cls}: unexpected pickled state "
                                  f"({describe(state)})")
        for k in state:
            # dunder names would reach Python's own protocols (a later
            # BUILD looks up __setstate__ on the instance)
            if not isinstance(k, str) or k.startswith("__") or k == "_cls":
                raise CheckpointError(f"{self._cls}: pickled attribute "
                                      f"{describe(k)}")
        self.__dict__.update(state)

    def __repr__(self):
        return f"<{self._cls}>"


class _Inert:
    """Objects the unpickler makes itself: their state is never set from
    the pickle (torch.save never sets it; BUILD on them is an attack)."""

    def __setstate__(self, state):
        raise CheckpointError(f"the pickle sets the state of a "
                              f"{self.what}, which torch.save never does")


# Classes rebuilt as StandIn: the original code's (module names as its
# train.py imports them, with utils/ on sys.path), torch.nn's modules it
# uses, and the corpus cache.
_ORIG_MODEL = ("PositionalEmbedding PositionwiseFF MultiHeadAttn "
               "RelMultiHeadAttn RelPartialLearnableMultiHeadAttn "
               "RelLearnableMultiHeadAttn DecoderLayer "
               "RelLearnableDecoderLayer RelPartialLearnableDecoderLayer "
               "AdaptiveEmbedding MemTransformerLM").split()
KNOWN_CLASSES = set(
    [f"mem_transformer.{c}" for c in _ORIG_MODEL] +
    [f"{m}.ProjectedAdaptiveLogSoftmax" for m in
     ("proj_adaptive_softmax", "utils.proj_adaptive_softmax")] +
    [f"{m}.LogUniformSampler" for m in
     ("log_uniform_sampler", "utils.log_uniform_sampler")] +
    [f"torch.nn.modules.{c}" for c in (
        "module.Module", "container.ModuleList", "container.ParameterList",
        "container.Sequential", "container.ModuleDict",
        "container.ParameterDict", "linear.Linear", "sparse.Embedding",
        "normalization.LayerNorm", "dropout.Dropout", "activation.ReLU")] +
    ["data_utils.Corpus", "utils.vocabulary.Vocab", "vocabulary.Vocab",
     "data_utils.LMOrderedIterator"])

_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64",
    "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
}
# their little-endian layout in numpy (bfloat16: its raw 16 bits)
_NP_DTYPES = {
    "float32": "<f4", "float64": "<f8", "float16": "<f2", "bfloat16": "<u2",
    "int64": "<i8", "int32": "<i4", "int16": "<i2", "int8": "i1",
    "uint8": "u1", "bool": "?",
}


def _itemsize(dtype):
    return np.dtype(_NP_DTYPES[dtype]).itemsize


def bf16_to_f32(raw):
    """float32 values of bfloat16 bits (uint16 array): exact."""
    return (np.asarray(raw, np.uint32) << 16).view(np.float32)


class _StorageType(_Inert):
    what = "storage type"

    def __init__(self, name):
        self.dtype = _STORAGE_DTYPES[name]


class _Archive:
    """What one file's storages hold, and what its tensors have taken of
    it: the bound on the arrays used from it.  read(offset, n) reads the
    file's bytes, for the storages read only when a tensor of theirs is
    used (a checkpoint of the adaptive-span code is mostly optimizer
    state, which is never read)."""

    def __init__(self, path, size, read=None):
        self.path, self.size, self.read = path, size, read
        self.storage_elems = 0          # in all its storages
        self.used_elems = 0             # in the tensors used so far
        self.views = {}                 # (storage, view) -> array

    def use(self, n):
        """n more values used: at most twice what the storages hold (tied
        weights are used twice; a storage read as many tensors is not a
        checkpoint, and could make a file of megabytes gigabytes)."""
        if self.used_elems + n > 2 * self.storage_elems + (1 << 16):
            raise CheckpointError(
                "the tensors hold more than the file's storages (with "
                f"this one {self.used_elems + n:,} values, the storages "
                f"{self.storage_elems:,}): one storage read as many "
                "tensors")
        self.used_elems += n


class _Storage(_Inert):
    """Raw bytes of one torch storage: where they lie in the file (`at`,
    known once the file has been walked: the legacy format's data follows
    the pickle), read the first time a tensor of it is built."""
    what = "storage"

    def __init__(self, dtype, numel, archive):
        self.dtype, self.numel, self.archive = dtype, numel, archive
        self.data = None
        self.at = None                  # offset of its bytes in the file
        archive.storage_elems += numel

    def bytes(self):
        if self.data is None and self.at is not None:
            n = self.numel * _itemsize(self.dtype)
            data = self.archive.read(self.at, n)
            if len(data) != n:
                raise CheckpointError("the file is shorter than when it "
                                      "was opened (truncated?)")
            self.data = data
        return self.data


class TensorRef(_Inert):
    """A tensor as the pickle describes it, checked against its storage;
    .array() builds it as a numpy array (once per view, so that two
    references to one tensor stay one object: tied weights)."""
    what = "tensor"

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset = storage, offset
        self.size, self.stride = size, stride

    def array(self):
        st = self.storage
        key = (id(st), self.offset, self.size, self.stride)
        a = st.archive.views.get(key)
        if a is not None:
            return a
        data = st.bytes()
        if data is None:
            raise CheckpointError("tensor data missing from the file")
        n = math.prod(self.size)
        item = _itemsize(st.dtype)
        flat = np.frombuffer(data, _NP_DTYPES[st.dtype])
        if n == 0:
            a = np.zeros(self.size, flat.dtype)
        else:
            a = np.lib.stride_tricks.as_strided(
                flat[self.offset:], self.size,
                [s * item for s in self.stride], writeable=False)
        a = a.astype(a.dtype.newbyteorder("="))           # a copy
        if st.dtype == "bfloat16":
            a = bf16_to_f32(a)
        st.archive.views[key] = a
        return a


def _small_int(v):
    """An int a storage key may be (str() refuses those of 4,300 digits
    and more)."""
    return is_int(v) and abs(v) < 1 << 63


def _ints(v, what):
    if not isinstance(v, (tuple, list)) or not all(is_int(x) for x in v):
        raise CheckpointError(f"tensor {what} {describe(v)} is not a list "
                              "of integers")
    return tuple(v)


def _rebuild_tensor(storage, offset, size, stride, *_):
    """torch._utils._rebuild_tensor(_v2): a view of a storage, checked
    before anything is built from it."""
    if not isinstance(storage, _Storage):
        raise CheckpointError("tensor without storage")
    if not is_int(offset) or offset < 0:
        raise CheckpointError(f"tensor offset {describe(offset)}")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride):
        raise CheckpointError(f"tensor of {len(size)} dimensions with "
                              f"{len(stride)} strides")
    if len(size) > MAX_DIMS:
        raise CheckpointError(f"tensor of {len(size)} dimensions (at most "
                              f"{MAX_DIMS})")
    if any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise CheckpointError("tensor with a negative size or stride")
    if _too_big(size, _itemsize(storage.dtype)) or \
            any(s >= MAX_BYTES for s in stride):
        raise CheckpointError(f"tensor of size {list(size)}, stride "
                              f"{list(stride)}: too large for any file")
    if any(s == 0 and n > 1 for n, s in zip(size, stride)):
        raise CheckpointError(f"tensor of size {list(size)} has a zero "
                              "stride (one value read many times)")
    n = math.prod(size)
    if n > storage.numel:
        raise CheckpointError(f"tensor of size {list(size)} is larger than "
                              f"its storage ({storage.numel} values)")
    if n and offset + sum((k - 1) * s for k, s in zip(size, stride)) >= \
            storage.numel:
        raise CheckpointError(f"tensor of size {list(size)}, stride "
                              f"{list(stride)}, offset {offset} lies outside "
                              f"its storage ({storage.numel} values)")
    return TensorRef(storage, offset, size, stride)


def _rebuild_parameter(data, *_):
    if not isinstance(data, TensorRef):
        raise CheckpointError("parameter without tensor")
    return data


def _reconstructor(cls, base, state):
    # copyreg._reconstructor(cls, object, None): cls.__new__ of a StandIn
    if not (isinstance(cls, type) and issubclass(cls, StandIn)) or \
            base is not object or state is not None:
        raise CheckpointError("copyreg._reconstructor of an unknown class")
    return cls.__new__(cls)


class _Function(_Inert):
    """One of the functions below as the pickle sees it: a Python
    function's __dict__ could be written by BUILD, for every later file
    read in this process."""
    what = "function"

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


_FUNCTIONS = {
    "collections.OrderedDict": collections.OrderedDict,
    "collections.Counter": collections.Counter,
    "builtins.set": set, "builtins.frozenset": frozenset,
    "builtins.dict": dict, "builtins.list": list, "builtins.tuple": tuple,
    "builtins.object": object,          # only for copyreg._reconstructor
    "copyreg._reconstructor": _Function(_reconstructor),
    "torch._utils._rebuild_tensor": _Function(_rebuild_tensor),
    "torch._utils._rebuild_tensor_v2": _Function(_rebuild_tensor),
    "torch._utils._rebuild_parameter": _Function(_rebuild_parameter),
    "torch._utils._rebuild_parameter_with_state":
        _Function(_rebuild_parameter),
    "torch.Size": tuple,
}



# How each opcode's argument is laid out, by opcode byte: its bytes
# (>= 0), up to a newline (-1; GLOBAL and INST: two lines, _PAIR), or
# counted by the 1, 4 (signed), 4 or 8 bytes before it (-2 .. -5, as
# pickletools numbers them); None for an opcode refused or unknown:
# protocol 5's out-of-band buffers are in no checkpoint, and an absurd
# BYTEARRAY8 length makes CPython 3.11's unpickler print a SystemError
# of its own (PyByteArray_FromStringAndSize frees an object it has not
# set up).
_PAIR, _STOP = -6, -7
_ARGS = [None] * 256
for _op in pickletools.opcodes:
    if _op.name not in ("BYTEARRAY8", "NEXT_BUFFER", "READONLY_BUFFER"):
        _ARGS[ord(_op.code)] = (
            _STOP if _op.name == "STOP" else
            _PAIR if _op.name in ("GLOBAL", "INST") else
            _op.arg.n if _op.arg else 0)
_COUNTS = {-2: (1, False), -3: (4, True), -4: (4, False), -5: (8, False)}
# What each opcode does to the bounds below, by protocol (a pickle may
# use the opcodes of its own protocol, its PROTO opcode's or 1 without
# one, and below): None where it may not, 0 where it pushes nothing new
# (it fills or pops what is on the stack, or memoizes it), 2 where it
# makes a dict or a set, 1 where it pushes any other object (made, found
# or shared).
_PROTO, _NAMES = [9] * 256, [""] * 256
for _op in pickletools.opcodes:
    _PROTO[ord(_op.code)], _NAMES[ord(_op.code)] = _op.proto, _op.name
_KIND = [None if a is None else 1 for a in _ARGS]
for _op in pickletools.opcodes:
    if _op.name in ("APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS",
                    "BUILD", "POP", "POP_MARK", "PUT", "BINPUT",
                    "LONG_BINPUT", "MEMOIZE", "PROTO", "FRAME", "STOP"):
        _KIND[ord(_op.code)] = 0
    elif _op.name in ("EMPTY_DICT", "DICT", "EMPTY_SET", "FROZENSET"):
        _KIND[ord(_op.code)] = 2
_KINDS = [[k if _PROTO[c] <= p or c == 0x80 else None
           for c, k in enumerate(_KIND)] for p in range(256)]
# At most this many objects pushed by one pickle: a corpus cache's
# vocabulary pushes a few per word (wt103's 267,735 words with their
# counts 1.9 million, lm1b's 793,471 5.6 million), a checkpoint's state
# dict a few per tensor.  Dicts and sets, which cost 100 to 230 bytes
# even empty (16 MB of EMPTY_SET took 3.8 GB), are few in either (a
# vocabulary's few, a state dict's metadata one per module): at most
# MAX_MAPS.  Together they bound what the unpickler builds to about a
# gigabyte whatever the pickle's size.
MAX_OBJECTS = 12000000
MAX_MAPS = 1 << 20


def _skip_arg(buf, pos, n, find):
    """The position after the argument at buf[pos:] of an opcode of kind
    @n (an _ARGS value other than None and _STOP; find is buf.find), 0
    where the argument runs past the end."""
    if n >= 0:
        return pos + n
    if n == -1 or n == _PAIR:
        pos = find(b"\n", pos) + 1
        if pos and n == _PAIR:
            pos = find(b"\n", pos) + 1
        return pos
    k, signed = _COUNTS[n]
    count = int.from_bytes(buf[pos:pos + k], "little", signed=signed)
    return 0 if count < 0 else pos + k + count


def _refused_opcode(what, code, proto, at):
    if _ARGS[code] is not None:
        name = (f"{_NAMES[code]}, of protocol {_PROTO[code]}, in a pickle "
                f"of protocol {proto}")
    else:
        name = {0x96: "BYTEARRAY8", 0x97: "NEXT_BUFFER",
                0x98: "READONLY_BUFFER"}.get(code,
                                             f"unknown opcode 0x{code:02x}")
    return CheckpointError(f"{what}: not a readable pickle ({name} at byte "
                           f"{at})")


def _too_many(what, objects, maps):
    if maps > MAX_MAPS:
        return CheckpointError(f"{what}: a pickle of more than "
                               f"{MAX_MAPS:,} dicts and sets")
    return CheckpointError(f"{what}: a pickle of more than "
                           f"{MAX_OBJECTS:,} objects")


def _check_opcodes(buf, pos, what):
    """Walk the opcodes of the pickle at buf[pos:] (bytes or a mapping of
    the file) before the unpickler runs: every opcode known and not
    refused, every argument and frame inside the file, and no memo index
    past the pickle's bytes so far (CPython's unpickler makes its memo as
    long as the largest index, zeroed: LONG_BINPUT 2^31 in a 10-byte
    pickle asks for 16 GB), no opcode of a protocol above the pickle's
    own, at most MAX_OBJECTS objects pushed and MAX_MAPS dicts and sets
    made (each opcode makes a new one: a few bytes of pickle, a few
    hundred of memory).  Skips the arguments without decoding them
    (under a microsecond an opcode)."""
    start, end, args, find = pos, len(buf), _ARGS, buf.find
    proto, objects, maps = 1, 0, 0
    kinds = _KINDS[proto]
    while pos < end:
        code = buf[pos]
        n = args[code]
        kind = kinds[code]
        pos += 1
        if kind is None:
            raise _refused_opcode(what, code, proto, pos - 1)
        if kind:
            objects += 1
            maps += kind == 2
            if objects > MAX_OBJECTS or maps > MAX_MAPS:
                raise _too_many(what, objects, maps)
        elif code == 0x80 and pos < end:          # PROTO
            proto = buf[pos]
            kinds = _KINDS[proto]
        if code in (0x70, 0x72, 0x95):        # PUT, LONG_BINPUT, FRAME
            if code == 0x95:
                if int.from_bytes(buf[pos:pos + 8], "little") > \
                        end - pos - 8:
                    break                       # longer than the file
            elif code == 0x72:
                index = int.from_bytes(buf[pos:pos + 4], "little")
            else:
                # a decimal line, read as the unpickler reads it: up to a
                # NUL (PyLong_FromString), with spaces and underscores
                line = buf[pos:find(b"\n", pos)].split(b"\0")[0]
                try:
                    index = int(line) if len(line) < 4000 else end
                except ValueError:
                    index = 0                   # the unpickler refuses it
            if code != 0x95 and index > pos - start:
                raise CheckpointError(f"{what}: not a readable pickle "
                                      f"(memo index {index} at byte "
                                      f"{pos - 1})")
        if n == _STOP:
            return
        pos = _skip_arg(buf, pos, n, find)
        if not pos:
            break
    raise CheckpointError(f"{what}: not a readable pickle (truncated)")


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the names above; refuses every other global.  The
    storages it meets are checked against archive (what the file holds:
    its size) and placed with storage_loader(key, nbytes), which says
    where in the file their bytes are (the zip archive's entries)."""

    def __init__(self, f, buf, archive, storages=None, storage_loader=None):
        super().__init__(f, encoding="latin1")
        self.f, self.buf = f, buf
        self.archive, self.what = archive, archive.path
        self.storages = {} if storages is None else storages
        self.storage_loader = storage_loader
        self.standins = {}

    def find_class(self, module, name):
        # protocol 2 pickles name Python 2's modules
        module = {"__builtin__": "builtins", "copy_reg": "copyreg"}.get(
            module, module)
        full = f"{module}.{name}"
        if full in _FUNCTIONS:
            return _FUNCTIONS[full]
        if full == "_codecs.encode":        # bytes, at protocol 2
            return _Function(_codecs_encode)
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if full in KNOWN_CLASSES:
            cls = self.standins.get(full)
            if cls is None:
                cls = type(name, (StandIn,), {"_cls": full})
                self.standins[full] = cls
            return cls
        raise CheckpointError(
            f"{self.what}: refused: the pickle names {full[:100]!r}, which "
            "is not a tensor, a container or a known class of a "
            "Transformer-XL checkpoint (a pickle can run code; nothing in "
            "it was run)")

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) == 4 and pid[0] == "module":
            # legacy torch.save: a module class with its source code (never
            # used); the class itself came through find_class
            if not (isinstance(pid[1], type) and issubclass(pid[1], StandIn)):
                raise CheckpointError(f"{self.what}: unknown module class")
            return pid[1]
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage" \
                or not isinstance(pid[1], _StorageType):
            raise CheckpointError(f"{self.what}: unknown persistent id")
        key, numel = pid[2], pid[4]
        if not isinstance(key, str) and not _small_int(key):
            raise CheckpointError(f"{self.what}: storage key "
                                  f"{describe(key)}")
        key = str(key)
        if not is_int(numel) or numel < 0:
            raise CheckpointError(f"{self.what}: bad storage size "
                                  f"{describe(numel)}")
        nbytes = numel * _itemsize(pid[1].dtype)
        if nbytes > self.archive.size:
            raise CheckpointError(f"{self.what}: storage {key!r} of "
                                  f"{nbytes:,} bytes, more than the file "
                                  f"holds ({self.archive.size:,})")
        if len(pid) >= 6 and pid[5] is not None:
            raise CheckpointError(f"{self.what}: storage views (torch < "
                                  "0.4 files) are not supported")
        st = self.storages.get(key)
        if st is None:
            st = _Storage(pid[1].dtype, numel, self.archive)
            if self.storage_loader:
                st.at = self.storage_loader(key, nbytes)
            self.storages[key] = st
        elif (st.dtype, st.numel) != (pid[1].dtype, numel):
            raise CheckpointError(f"{self.what}: storage {key!r} declared "
                                  "twice, differently")
        return st

    def load(self):
        try:
            _check_opcodes(self.buf, self.f.tell(), self.what)
            return super().load()
        except CheckpointError as e:
            if str(e).startswith(self.what):
                raise
            raise CheckpointError(f"{self.what}: {e}")
        except (pickle.UnpicklingError, EOFError, TypeError, ValueError,
                AttributeError, IndexError, KeyError, struct.error,
                OverflowError, RecursionError, MemoryError) as e:
            raise CheckpointError(f"{self.what}: not a readable pickle "
                                  f"({type(e).__name__}: "
                                  f"{str(e)[:200]})")


def _zip_entry(z, info, path, size):
    """The bytes of one entry, as torch.save writes them: stored, not
    compressed (a compressed entry could inflate to anything), and inside
    the file of size bytes."""
    _zip_entry_at(z, info, path, size)
    return z.read(info)


_LOCAL_HEADER = struct.Struct("<4s5H3L2H")      # a zip entry's, 30 bytes


def _zip_entry_at(z, info, path, size):
    """Where the bytes of one entry start in the file, its local header
    checked (stored, inside the file of size bytes)."""
    if info.compress_type != zipfile.ZIP_STORED:
        raise CheckpointError(f"{path}: {info.filename} is compressed "
                              "(torch.save stores its entries as they are)")
    if info.file_size != info.compress_size or \
            info.header_offset + _LOCAL_HEADER.size + info.compress_size > \
            size:
        raise CheckpointError(f"{path}: {info.filename} claims more bytes "
                              "than the file holds")
    z.fp.seek(info.header_offset)
    raw = z.fp.read(_LOCAL_HEADER.size)
    if len(raw) != _LOCAL_HEADER.size or raw[:4] != b"PK\x03\x04":
        raise CheckpointError(f"{path}: {info.filename}: bad zip entry "
                              "header")
    fields = _LOCAL_HEADER.unpack(raw)
    at = info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]
    if at + info.file_size > size:
        raise CheckpointError(f"{path}: {info.filename} claims more bytes "
                              "than the file holds")
    return at


def _load_zip(path, f, size, read):
    archive = _Archive(path, size, read)
    try:
        z = zipfile.ZipFile(f)
        names = z.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl")]
        if len(pkl) != 1:
            raise CheckpointError(f"{path}: not a torch.save archive "
                                  "(no single data.pkl)")
        prefix = pkl[0][:-len("data.pkl")]
        order = prefix + "byteorder"
        if order in names and _zip_entry(z, z.getinfo(order), path, size) \
                .strip() not in (b"little", b""):
            raise CheckpointError(f"{path}: big-endian tensors not "
                                  "supported")

        def loader(key, nbytes):
            name = f"{prefix}data/{key}"
            try:
                info = z.getinfo(name)
            except KeyError:
                raise CheckpointError(f"{path}: storage {key!r} missing")
            if info.file_size != nbytes:
                raise CheckpointError(f"{path}: storage {key!r} holds "
                                      f"{info.file_size} bytes, not "
                                      f"{nbytes}")
            return _zip_entry_at(z, info, path, size)
        data = _zip_entry(z, z.getinfo(pkl[0]), path, size)
        return RestrictedUnpickler(io.BytesIO(data), data, archive,
                                   storage_loader=loader).load()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError,
            RuntimeError, ValueError, EOFError, zlib.error, struct.error,
            KeyError, OverflowError) as e:
        raise CheckpointError(f"{path}: bad torch zip archive "
                              f"({type(e).__name__}: {str(e)[:200]})")


_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


def _load_legacy(path, f, buf, size, read):
    """torch.save before 1.6: pickled magic, version, sys_info, the object,
    the storage keys, then each storage as int64 count + raw data (its
    place noted, its bytes skipped)."""
    archive = _Archive(path, size, read)
    if RestrictedUnpickler(f, buf, archive).load() != _LEGACY_MAGIC:
        raise CheckpointError(f"{path}: not a torch.save file")
    if RestrictedUnpickler(f, buf, archive).load() != 1001:
        raise CheckpointError(f"{path}: unknown torch.save version")
    info = RestrictedUnpickler(f, buf, archive).load()
    if isinstance(info, dict) and info.get("little_endian", True) is not True:
        raise CheckpointError(f"{path}: big-endian tensors not supported")
    storages = {}
    obj = RestrictedUnpickler(f, buf, archive, storages).load()
    keys = RestrictedUnpickler(f, buf, archive).load()
    if not isinstance(keys, list) or \
            not all(isinstance(k, str) or _small_int(k) for k in keys):
        raise CheckpointError(f"{path}: bad storage list")
    for key in keys:
        st = storages.get(str(key))
        if st is None:
            raise CheckpointError(f"{path}: unknown storage {str(key)!r}")
        raw = f.read(8)
        if len(raw) != 8:
            raise CheckpointError(f"{path}: truncated")
        (n,) = struct.unpack("<q", raw)
        if n != st.numel:
            raise CheckpointError(f"{path}: storage {key} size mismatch")
        nbytes = n * _itemsize(st.dtype)
        left = size - f.tell()
        if nbytes > left:
            raise CheckpointError(f"{path}: storage {key} of {nbytes:,} "
                                  f"bytes, the file holds {left:,} more "
                                  "(truncated?)")
        st.at = f.tell()
        f.seek(nbytes, io.SEEK_CUR)
    return obj


def _reader(f):
    """read(offset, n) of the open file f, valid after f is closed: a
    duplicate of its descriptor, closed with the last storage that reads
    it; io.BytesIO's bytes."""
    if isinstance(f, io.BytesIO):
        data = f.getvalue()
        return lambda at, n: data[at:at + n]
    fd = os.dup(f.fileno())

    def read(at, n):
        out = bytearray()
        while len(out) < n:
            chunk = os.pread(fd, min(n - len(out), 1 << 30), at + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)
    weakref.finalize(read, os.close, fd)
    return read


def load_pickle_file(path):
    """The object a torch.save file (or a plain pickle) holds, rebuilt
    from the allow-list only.  Tensors come back as TensorRef, their
    storages read from the file when they are built."""
    try:
        with open_input(path) as f:
            return load_pickle(f, path, os.fstat(f.fileno()).st_size)
    except OSError as e:
        raise CheckpointError(f"{path}: {e.strerror or e}")


def load_pickle(f, path, size):
    """load_pickle_file() of the open file f (seekable, size bytes; a
    file on disk, or io.BytesIO)."""
    try:
        is_zip = zipfile.is_zipfile(f)
    except (zipfile.BadZipFile, ValueError, EOFError, struct.error) as e:
        # the end of the file looks like a zip archive's, but is not one
        raise CheckpointError(f"{path}: bad torch zip archive "
                              f"({type(e).__name__}: {str(e)[:200]})")
    if is_zip:
        f.seek(0)
        return _load_zip(path, f, size, _reader(f))
    f.seek(0)
    start = f.read(2)
    f.seek(0)
    if start[:1] != b"\x80":
        raise CheckpointError(f"{path}: not a pickle or torch.save file")
    # the pickles' opcodes are checked in the file's bytes, mapped
    if isinstance(f, io.BytesIO):
        buf = contextlib.nullcontext(f.getvalue())
    else:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with buf as buf:
        # a legacy torch file starts with the pickled magic number;
        # anything else is a plain pickle (HF's vocab.pkl)
        obj = RestrictedUnpickler(f, buf, _Archive(path, size)).load()
        if obj == _LEGACY_MAGIC:
            f.seek(0)
            return _load_legacy(path, f, buf, size, _reader(f))
        return obj


# ---------------------------------------------------------------------------
# From the object graph to hyperparameters and a state_dict

class State(collections.abc.Mapping):
    """name -> array of a checkpoint, each array built the first time it
    is used (a tensor the converter has no place for is never built), the
    values of the names used bounded by the file's storages
    (_Archive.use)."""

    def __init__(self, refs, path):
        self._refs, self.path = refs, path
        self._used = set()

    def __getitem__(self, name):
        v = self._refs[name]
        if not isinstance(v, TensorRef):
            return v
        try:
            if name not in self._used:
                v.storage.archive.use(math.prod(v.size))
                self._used.add(name)
            return v.array()
        except CheckpointError as e:
            raise CheckpointError(f"{self.path}: tensor {name!r}: {e}")
        except (ValueError, MemoryError) as e:
            raise CheckpointError(f"{self.path}: tensor {name!r} cannot be "
                                  f"built ({type(e).__name__}: {e})")

    def __iter__(self):
        return iter(self._refs)

    def __len__(self):
        return len(self._refs)

    def renamed(self, rename):
        return State(collections.OrderedDict(
            (rename(k), v) for k, v in self._refs.items()), self.path)

    def replaced(self, arrays):
        """The same with the tensors of some names replaced by arrays."""
        refs = collections.OrderedDict(self._refs)
        refs.update(arrays)
        st = State(refs, self.path)
        st._used = set(self._used)
        return st


def _table(mod, name, path):
    """A module's _parameters, _buffers or _modules: a dict with string
    keys (empty if absent)."""
    d = mod.__dict__.get(name)
    if d is None:
        return {}
    if not isinstance(d, dict) or not all(isinstance(k, str) for k in d):
        raise CheckpointError(f"{path}: {mod._cls}.{name} is "
                              f"{describe(d)}, not a dict of names")
    return d


def module_state(model, path):
    """The state_dict of a rebuilt nn.Module: its parameters and persistent
    buffers under dotted names, as TensorRef (shared ones stay shared).
    A module met twice (a cycle) is refused, as is nesting deeper than
    MAX_DEPTH."""
    out = collections.OrderedDict()
    seen = set()
    stack = [(model, "", 0)]
    while stack:
        mod, prefix, depth = stack.pop()
        if id(mod) in seen:
            raise CheckpointError(f"{path}: module {prefix[:-1]!r} "
                                  "appears more than once in the model (a "
                                  "cycle)")
        if depth > MAX_DEPTH:
            raise CheckpointError(f"{path}: modules nested more than "
                                  f"{MAX_DEPTH} deep")
        seen.add(id(mod))
        nonpersistent = mod.__dict__.get("_non_persistent_buffers_set")
        if not isinstance(nonpersistent, (set, frozenset)):
            nonpersistent = set()
        for kind in ("_parameters", "_buffers"):
            for name, p in _table(mod, kind, path).items():
                if p is None or (kind == "_buffers" and name in
                                 nonpersistent):
                    continue
                if not isinstance(p, TensorRef):
                    raise CheckpointError(f"{path}: {prefix}{name} is "
                                          f"{describe(p)}, not a tensor")
                out[prefix + name] = p
        subs = [(name, sub) for name, sub in
                _table(mod, "_modules", path).items()
                if isinstance(sub, StandIn)]
        for name, sub in reversed(subs):          # in order, depth first
            stack.append((sub, f"{prefix}{name}.", depth + 1))
    return out


def _sub(mod, path, *names):
    for name in names:
        if mod is None:
            return None
        mod = _table(mod, "_modules", path).get(str(name))
        if not isinstance(mod, StandIn):
            return None
    return mod


def _param(mod, name, path):
    return _table(mod, "_parameters", path).get(name) if mod else None


def whole_model_hparams(model, path):
    """Hyperparameters of a rebuilt MemTransformerLM, from its attributes
    and the sharing of its parameters (tie_weight, tie_projs); their
    types are checked by the caller (hparams.typed)."""
    a = model.__dict__
    missing = [k for k in ("n_token", "n_layer", "n_head", "d_model",
                           "d_head", "d_embed") if k not in a]
    if missing:
        raise CheckpointError(f"{path}: MemTransformerLM without "
                              f"{', '.join(missing)}")
    ss = a.get("sample_softmax", -1)
    if not is_int(ss):
        raise CheckpointError(f"{path}: MemTransformerLM.sample_softmax is "
                              f"{describe(ss)}, expected an integer")
    if ss > 0:
        raise CheckpointError(f"{path}: sample_softmax models are not "
                              "supported")
    emb, crit = _sub(model, path, "word_emb"), _sub(model, path, "crit")
    layer0 = _sub(model, path, "layers", 0)
    if emb is None or crit is None or layer0 is None:
        raise CheckpointError(f"{path}: MemTransformerLM without word_emb, "
                              "crit or layers")
    ff, attn = _sub(layer0, path, "pos_ff"), _sub(layer0, path, "dec_attn")
    ends = emb.__dict__.get("cutoffs", [a["n_token"]])
    if not isinstance(ends, (list, tuple)) or not ends:
        raise CheckpointError(f"{path}: AdaptiveEmbedding.cutoffs is "
                              f"{describe(ends)}, expected a list")
    cutoffs = list(ends)[:-1]
    div_val = emb.__dict__.get("div_val", 1)
    out_layers = _sub(crit, path, "out_layers")
    n_out = len(_table(out_layers, "_modules", path)) if out_layers else 0

    def shared(i):
        w = _param(_sub(crit, path, "out_layers", i), "weight", path)
        return w is not None and \
            w is _param(_sub(emb, path, "emb_layers", i), "weight", path)
    tie_weight = n_out > 0 and all(shared(i) for i in range(n_out))
    emb_projs = _sub(emb, path, "emb_projs")
    out_projs = _sub(crit, path, "out_projs")
    tie_projs = []
    for i in range(len(cutoffs) + 1):
        p = _param(out_projs, str(i), path)
        e = _param(emb_projs, "0" if div_val == 1 else str(i), path)
        tie_projs.append(p is not None and p is e)
    rw = _param(model, "r_w_bias", path)
    attn_type = a.get("attn_type", REL_PARTIAL)
    hp = dict(n_token=a["n_token"], n_layer=a["n_layer"],
              n_head=a["n_head"], d_model=a["d_model"], d_head=a["d_head"],
              d_inner=(ff.__dict__.get("d_inner") if ff else None),
              d_embed=a["d_embed"], div_val=div_val, cutoffs=cutoffs,
              tie_weight=tie_weight, tie_projs=tie_projs,
              pre_lnorm=attn.__dict__.get("pre_lnorm", False)
              if attn else False,
              attn_type=attn_type, tgt_len=a.get("tgt_len"),
              ext_len=a.get("ext_len", 0), mem_len=a.get("mem_len"),
              clamp_len=a.get("clamp_len", -1),
              same_length=a.get("same_length", False),
              untie_r=isinstance(rw, TensorRef) and len(rw.size) == 3 and
              attn_type == REL_PARTIAL)
    if attn_type in TABLE_KINDS:
        hp["max_klen"] = a.get("max_klen")
    return {k: v for k, v in hp.items() if v is not None}


# source: "whole-model", "state_dict", "huggingface" or "train.py" (a
# checkpoint of txlgen's own train.py, whose tokenizer is its SentencePiece
# model's bytes; None for the others)
Checkpoint = collections.namedtuple("Checkpoint",
                                    "hparams state source tokenizer",
                                    defaults=(None,))


def _own_checkpoint(obj):
    """Is @obj what txlgen's train.py saves ({model, config, tokenizer,
    optimizer, ...})?"""
    return isinstance(obj, dict) and isinstance(obj.get("model"), dict) \
        and isinstance(obj.get("config"), dict) and \
        isinstance(obj.get("tokenizer"), bytes) and \
        all(isinstance(k, str) for k in obj["config"])


def _state_of(obj, path):
    """(hyperparameters, name -> TensorRef) inside what a file held: a
    MemTransformerLM, a state_dict, or a dict holding one of them under
    model_state_dict, state_dict or model (at most MAX_DEPTH deep)."""
    for _ in range(MAX_DEPTH):
        if isinstance(obj, StandIn):
            if obj._cls.endswith(".MemTransformerLM"):
                return whole_model_hparams(obj, path), \
                    module_state(obj, path)
            raise CheckpointError(f"{path}: holds a {obj._cls}, not a "
                                  "model")
        if not isinstance(obj, dict):
            break
        inner = [obj[k] for k in ("model_state_dict", "state_dict", "model")
                 if isinstance(obj.get(k), (dict, StandIn))]
        if inner:
            obj = inner[0]
            continue
        if obj and all(isinstance(k, str) and isinstance(v, TensorRef)
                       for k, v in obj.items()):
            return {}, obj
        break
    raise CheckpointError(f"{path}: neither a state_dict nor a "
                          "MemTransformerLM")


# ---------------------------------------------------------------------------
# Hugging Face TransfoXL directories

HF_CONFIG_MAP = {"vocab_size": "n_token", "n_token": "n_token"}
HF_KEYS = ("n_layer n_head d_model d_head d_inner d_embed div_val cutoffs "
           "pre_lnorm attn_type tgt_len ext_len mem_len clamp_len "
           "same_length untie_r tie_projs").split()
HF_IGNORED = set(("adaptive dropout dropatt init init_range init_std "
                  "proj_init_std eos_token_id architectures model_type "
                  "transformers_version torch_dtype output_past "
                  "tie_word_embeddings proj_share_all_but_first "
                  "layer_norm_epsilon sample_softmax _name_or_path "
                  "pad_token_id bos_token_id tie_weight").split())
# What Hugging Face's TransfoXLConfig takes for a key config.json lacks
# (its __init__'s defaults: the wt103 model's), in the original's names.
HF_DEFAULTS = dict(n_token=267735, cutoffs=[20000, 40000, 200000],
                   d_model=1024, d_embed=1024, n_head=16, d_head=64,
                   d_inner=4096, div_val=4, pre_lnorm=False, n_layer=18,
                   mem_len=1600, clamp_len=1000, same_length=True,
                   attn_type=REL_PARTIAL, untie_r=True)


def tf_cluster_rows_to_pytorch(cluster_weight, cluster_bias):
    """The head's tail-cluster rows (crit.cluster_weight [C, d_embed],
    crit.cluster_bias [C]) of a checkpoint of TensorFlow origin -- the TF
    code's and Hugging Face's port of it, which read tail cluster i
    (1-based) from head column cutoffs[0] + i - 1, i.e. row i - 1 -- in
    the order of the PyTorch code, which txlgen's model files keep: tail
    cluster i at column -i, row C - i.  The rows reversed (copies; numpy
    arrays or anything indexable as one).  With one tail cluster the
    orders agree; with three they swap clusters 1 and 3."""
    w, b = np.asarray(cluster_weight), np.asarray(cluster_bias)
    if w.ndim != 2 or b.ndim != 1 or w.shape[0] != b.shape[0]:
        raise CheckpointError(f"cluster rows of shapes {list(w.shape)} and "
                              f"{list(b.shape)}: expected [C, d_embed] and "
                              "[C]")
    return w[::-1].copy(), b[::-1].copy()


def hf_hparams(cfg, path):
    """The original's hyperparameters from HF's config.json, a key it
    lacks taking TransfoXLConfig's default (HF_DEFAULTS), as HF's code
    builds the model (its values' types are checked here for the keys
    read here, by hparams.typed for the rest).  HF ties the output weights
    on tie_word_embeddings (default true), not on tie_weight; its
    LayerNorm epsilon is layer_norm_epsilon (default 1e-5); its
    same_length mask is the PyTorch code's."""
    def get(key, kind, default):
        v = cfg.get(key, default)
        if kind == "bool":
            try:
                return as_bool(key, v)
            except ValueError as e:
                raise CheckpointError(f"{path}: {e}")
        if kind == "int" and not is_int(v):
            raise CheckpointError(f"{path}: {key} is {describe(v)}, "
                                  "expected an integer")
        if kind == "number" and (not isinstance(v, (int, float)) or
                                 isinstance(v, bool) or
                                 not math.isfinite(v)):
            raise CheckpointError(f"{path}: {key} is {describe(v)}, "
                                  "expected a number")
        return v

    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path}: not a JSON object")
    hp = dict(HF_DEFAULTS)
    for k, v in cfg.items():
        if k in HF_CONFIG_MAP:
            hp[HF_CONFIG_MAP[k]] = v
        elif k in HF_KEYS:
            hp[k] = v
    if get("sample_softmax", "int", -1) > 0:
        raise CheckpointError(f"{path}: sample_softmax is not supported")
    eps = get("layer_norm_epsilon", "number",
              LAYER_NORM_EPS["huggingface"])
    if not 0 < eps <= 1:
        raise CheckpointError(f"{path}: layer_norm_epsilon {eps} is not in "
                              "(0, 1]")
    hp["layer_norm_eps"] = float(eps)
    cutoffs = hp.get("cutoffs", [])
    if not isinstance(cutoffs, list):
        raise CheckpointError(f"{path}: cutoffs is {describe(cutoffs)}, "
                              "expected a list of integers")
    if "tie_projs" not in hp:
        share = get("proj_share_all_but_first", "bool", True)
        hp["tie_projs"] = [False] + [share] * len(cutoffs)
    hp["tie_weight"] = get("tie_word_embeddings", "bool", True)
    if not get("adaptive", "bool", True):
        raise CheckpointError(f"{path}: adaptive false (a plain softmax "
                              "over d_model) is not supported")
    return hp


def hf_state(state):
    """HF names -> the original's: strip 'transformer.'; per-layer biases
    keep their layers.N.dec_attn.r_w_bias names (convert.py stacks them);
    the tail-cluster rows in the PyTorch order (HF computes them in the
    TF order: tf_cluster_rows_to_pytorch)."""
    def rename(k):
        return k[len("transformer."):] if k.startswith("transformer.") \
            else k
    if isinstance(state, State):
        out = state.renamed(rename)
    else:
        out = collections.OrderedDict((rename(k), v)
                                      for k, v in state.items())
    w, b = "crit.cluster_weight", "crit.cluster_bias"
    if w in out and b in out:
        tw, tb = out[w], out[b]
        if tw.ndim == 2 and tb.ndim == 1 and tw.shape[0] == tb.shape[0]:
            rw, rb = tf_cluster_rows_to_pytorch(tw, tb)
            if isinstance(out, State):
                out = out.replaced({w: rw, b: rb})
            else:
                out[w], out[b] = rw, rb
        # (other shapes: refused by the converter, naming the tensor)
    return out


_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8",
                       "BF16": "<u2"}


def read_safetensors(path):
    """name -> float array of a safetensors file: the header checked
    (a JSON object of tensors whose byte ranges lie inside the data, fit
    their shape and dtype and overlap no other) before any array is
    made."""
    try:
        with open_input(path) as f:
            blob = f.read()
    except OSError as e:
        raise CheckpointError(f"{path}: {e.strerror or e}")
    return parse_safetensors(blob, path)


def parse_safetensors(blob, path):
    """read_safetensors() of the bytes of file path."""
    def bad(why):
        return CheckpointError(f"{path}: not a safetensors file ({why})")
    if len(blob) < 8:
        raise bad("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise bad(f"header of {n:,} bytes, longer than the file")
    try:
        header = json.loads(blob[8:8 + n])
    except RecursionError:
        raise bad("header nested too deeply")
    except ValueError as e:
        raise bad(f"header: {e}")
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    data = memoryview(blob)[8 + n:]
    spans, out = [], collections.OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise bad(f"tensor {name[:100]!r} is {describe(info)}")
        dt, shape, offs = (info.get("dtype"), info.get("shape"),
                           info.get("data_offsets"))
        if not isinstance(dt, str) or dt not in _SAFETENSORS_DTYPES:
            raise bad(f"tensor {name[:100]!r}: dtype {describe(dt)}")
        item = np.dtype(_SAFETENSORS_DTYPES[dt]).itemsize
        if not isinstance(shape, list) or len(shape) > MAX_DIMS or \
                not all(is_int(d) and d >= 0 for d in shape) or \
                _too_big(shape, item):
            said = str(shape) if isinstance(shape, list) and \
                len(shape) <= MAX_DIMS and all(map(is_int, shape)) else \
                describe(shape)
            raise bad(f"tensor {name[:100]!r}: shape {said[:100]} is not "
                      f"at most {MAX_DIMS} sizes that a file can hold")
        if not isinstance(offs, list) or len(offs) != 2 or \
                not all(is_int(o) for o in offs) or \
                not 0 <= offs[0] <= offs[1] <= len(data):
            raise bad(f"tensor {name[:100]!r}: data_offsets "
                      f"{describe(offs)} do not lie inside the data")
        need = math.prod(shape) * item
        if offs[1] - offs[0] != need:
            raise bad(f"tensor {name[:100]!r}: shape {shape} of {dt} needs "
                      f"{need} bytes, data_offsets give "
                      f"{offs[1] - offs[0]}")
        spans.append((offs[0], offs[1], name))
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise bad(f"tensors {n0[:100]!r} and {n1[:100]!r} overlap")
    for b, e, name in spans:
        info = header[name]
        arr = np.frombuffer(data[b:e], _SAFETENSORS_DTYPES[info["dtype"]])
        arr = bf16_to_f32(arr) if info["dtype"] == "BF16" else \
            arr.astype(arr.dtype.newbyteorder("="))
        out[name] = arr.reshape(info["shape"])
    return out


def write_safetensors(path, tensors):
    """Write name -> tensor (numpy or torch) as an F32 safetensors file, as
    Hugging Face stores model.safetensors (for tests and tools)."""
    header, blobs, pos = {}, [], 0
    for k, v in tensors.items():
        raw = as_float32(v).astype("<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape),
                     "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_hf_dir(path):
    cfg_path = os.path.join(path, "config.json")
    hp = hf_hparams(read_json(cfg_path, "config.json"), cfg_path)
    st = os.path.join(path, "model.safetensors")
    pt = os.path.join(path, "pytorch_model.bin")
    if os.path.exists(st):
        state = read_safetensors(st)
    elif os.path.exists(pt):
        _, refs = _state_of(load_pickle_file(pt), pt)
        state = State(refs, pt)
    else:
        raise CheckpointError(f"{path}: no model.safetensors or "
                              "pytorch_model.bin")
    return Checkpoint(hp, hf_state(state), "huggingface")


def read_checkpoint(path):
    """A state dict file, a whole-model pickle or an HF directory."""
    if os.path.isdir(path):
        return read_hf_dir(path)
    return checkpoint_of(load_pickle_file(path), path)


def checkpoint_of(obj, path):
    """The Checkpoint in what a pickle file (path) held.  The names of a
    model saved inside DataParallel (every one "module." first, as the
    adaptive-span code's trainer saves them) are the model's own."""
    if _own_checkpoint(obj):
        _, refs = _state_of(obj["model"], path)
        return Checkpoint(dict(obj["config"]), State(refs, path), "train.py",
                          obj["tokenizer"])
    hp, refs = _state_of(obj, path)
    state = State(refs, path)
    source = "whole-model" if hp else "state_dict"
    if any(k.startswith("transformer.") for k in state):
        # Hugging Face's names: its state_dict, computed as HF does
        state = hf_state(state)
        source = "huggingface"
    if state and all(k.startswith("module.") for k in state):
        state = state.renamed(lambda k: k[len("module."):])
    return Checkpoint(hp, state, source)


# ---------------------------------------------------------------------------
# Corpus caches: plain pickles whose arrays are skipped, never read

# A string of the pickle longer than this is not read: the unpickler sees
# a placeholder that knows only where the bytes lie and how many there
# are.  A corpus cache's symbols are short; its arrays of token ids (a
# numpy array's bytes are one string) are what is long, up to gigabytes.
SKIP_STRING = 1 << 16
# What is left of a cache's pickle without those strings: its vocabulary
# (lm1b's 793,471 words take tens of megabytes).  More is not a corpus
# cache: a list of ids as a Python list, which would have to be built.
MAX_CACHE_REST = 256 << 20
# BINSTRING BINUNICODE BINBYTES (4-byte length), BINUNICODE8 BINBYTES8
_LONG_STRINGS = {0x54: (4, True), 0x58: (4, False), 0x42: (4, False),
                 0x8d: (8, False), 0x8e: (8, False)}
# SHORT_BINSTRING BINSTRING STRING: Python 2's str (bytes)
_PY2_STRINGS = (0x55, 0x54, 0x53)


class Skipped(_Inert):
    """A long string of the pickle, not read: where its bytes lie.
    latin1: the UTF-8 of a text whose latin-1 encoding is the bytes meant
    (Python 3 pickles bytes so at protocol 2: _codecs.encode(text,
    'latin1')), n bytes of it for n / 2 to n bytes meant."""
    what = "skipped string"

    def __init__(self, at, n, latin1=False):
        self.at, self.n, self.latin1 = at, n, latin1


def _codecs_encode(text, encoding="utf-8", errors="strict"):
    """_codecs.encode as Python 3 pickles bytes at protocol 2: a latin-1
    text's bytes (a skipped one stays skipped)."""
    if encoding not in ("latin1", "latin-1") or errors != "strict":
        raise CheckpointError(f"_codecs.encode to {describe(encoding)}")
    if isinstance(text, Skipped):
        return Skipped(text.at, text.n, latin1=True)
    if not isinstance(text, str):
        raise CheckpointError(f"_codecs.encode of {describe(text)}")
    return text.encode("latin-1")


# numpy dtypes as a pickle names them (numpy.dtype('i8', 0, 1)): the
# kinds a corpus array can have, and their item sizes
_NP_KINDS = {"i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8),
             "b": (1,)}


class NumpyDType(_Inert):
    what = "numpy dtype"

    def __init__(self, name):
        if not isinstance(name, str) or len(name) < 2 or \
                name[0] not in _NP_KINDS or not name[1:].isdigit() or \
                int(name[1:]) not in _NP_KINDS[name[0]]:
            raise CheckpointError(f"a numpy array of dtype {describe(name)}"
                                  " (a corpus holds integers)")
        self.name, self.itemsize = name, int(name[1:])

    def __setstate__(self, state):
        # (version, byte order, subarray, names, fields, elsize,
        # alignment, flags)
        if not isinstance(state, tuple) or len(state) < 2 or \
                state[1] not in ("<", "|", "="):
            raise CheckpointError(f"numpy dtype {self.name}: byte order "
                                  f"{describe(state)} (little-endian only)")


class NumpyArray(_Inert):
    """A numpy array of a corpus cache: its shape and dtype, checked
    against the bytes the pickle holds for it; its values never read."""
    what = "numpy array"
    shape, dtype, nbytes = (), None, 0

    def __setstate__(self, state):
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise CheckpointError(f"a numpy array's state is "
                                  f"{describe(state)}")
        shape, dtype, _, data = state[-4:]
        if not isinstance(shape, tuple) or len(shape) > MAX_DIMS or \
                not all(is_int(d) and d >= 0 for d in shape):
            raise CheckpointError(f"a numpy array of shape "
                                  f"{describe(shape)}")
        if not isinstance(dtype, NumpyDType):
            raise CheckpointError(f"a numpy array of dtype "
                                  f"{describe(dtype)}")
        n = data.n if isinstance(data, Skipped) else \
            len(data) if isinstance(data, (str, bytes)) else None
        if n is None:
            raise CheckpointError(f"a numpy array whose data is "
                                  f"{describe(data)} (objects, not numbers)")
        need = math.prod(shape) * dtype.itemsize
        if isinstance(data, Skipped) and data.latin1 and \
                need <= n <= 2 * need:
            n = need                    # (each byte 1 or 2 in UTF-8)
        if need != n:
            shown = str(list(shape)) if len(str(list(shape))) < 200 else \
                "of a size"
            raise CheckpointError(f"a numpy array of shape {shown} of "
                                  f"{dtype.name} needs {need:,} bytes, the "
                                  f"pickle holds {n:,}")
        self.shape, self.dtype, self.nbytes = shape, dtype, n


class _NDArrayType(_Inert):
    what = "numpy.ndarray"


def _np_reconstruct(cls, shape, typecode):
    if not isinstance(cls, _NDArrayType):
        raise CheckpointError("numpy _reconstruct of another class than "
                              "ndarray")
    return NumpyArray()


def _np_dtype(name, align=0, copy=0):
    return NumpyDType(name)


class CacheUnpickler(RestrictedUnpickler):
    """RestrictedUnpickler of a corpus cache: numpy arrays (their shapes,
    not their values), and the placeholders of the long strings; the
    Corpus class also by the name a pickle gives it when data_utils.py ran
    as a script (__main__.Corpus)."""

    def __init__(self, f, buf, archive, skip_module, skipped):
        super().__init__(f, buf, archive)
        self.skip_module, self.skipped = skip_module, skipped
        self.ndarray = _NDArrayType()

    def find_class(self, module, name):
        if module == self.skip_module:
            return self.skipped[int(name)]
        full = f"{module}.{name}"
        if full in ("numpy.core.multiarray._reconstruct",
                    "numpy._core.multiarray._reconstruct"):
            return _Function(_np_reconstruct)
        if full == "numpy.ndarray":
            return self.ndarray
        if full == "numpy.dtype":
            return _Function(_np_dtype)
        if full == "__main__.Corpus":
            return super().find_class("data_utils", "Corpus")
        return super().find_class(module, name)


def _without_long_strings(buf, path, skip_module):
    """(the pickle at buf[0:] with every string longer than SKIP_STRING
    replaced by a GLOBAL naming its placeholder, the placeholders, whether
    it holds Python 2 strings): one pass over the opcodes, which are
    checked by the unpickler's own walk afterwards (their protocols and
    the objects they make also here, before anything is copied).  FRAME opcodes are
    dropped (frames are optional; they would no longer fit)."""
    out, skipped = bytearray(), []
    pos, seg, end, args, find = 0, 0, len(buf), _ARGS, buf.find
    py2, proto, objects, maps = False, 1, 0, 0
    kinds = _KINDS[proto]
    while pos < end:
        code = buf[pos]
        n = args[code]
        kind = kinds[code]
        at = pos
        pos += 1
        if kind is None:
            raise _refused_opcode(path, code, proto, at)
        if kind:
            objects += 1
            maps += kind == 2
            if objects > MAX_OBJECTS or maps > MAX_MAPS:
                raise _too_many(path, objects, maps)
        elif code == 0x80 and pos < end:          # PROTO
            proto = buf[pos]
            kinds = _KINDS[proto]
        if code in _PY2_STRINGS:
            py2 = True
        if code in _LONG_STRINGS:
            k, signed = _LONG_STRINGS[code]
            count = int.from_bytes(buf[pos:pos + k], "little", signed=signed)
            if count < 0 or count > end - pos - k:
                raise CheckpointError(f"{path}: not a readable pickle (a "
                                      f"string at byte {at} runs past the "
                                      "end)")
            if count > SKIP_STRING:
                out += buf[seg:at]
                out += b"c%s\n%d\n" % (skip_module.encode(), len(skipped))
                skipped.append(Skipped(pos + k, count))
                pos += k + count
                seg = pos
                if len(out) > MAX_CACHE_REST:
                    break
                continue
        if code == 0x95:                        # FRAME: dropped
            out += buf[seg:at]
            pos += 8
            seg = pos
            continue
        if n == _STOP:
            out += buf[seg:pos]
            if len(out) > MAX_CACHE_REST:
                break
            return bytes(out), skipped, py2
        pos = _skip_arg(buf, pos, n, find)
        if not pos:
            break
        if pos - seg > MAX_CACHE_REST or len(out) > MAX_CACHE_REST:
            break
    if len(out) + pos - seg > MAX_CACHE_REST:
        raise CheckpointError(
            f"{path}: more than {MAX_CACHE_REST:,} bytes of pickle "
            "besides its arrays' data: not a corpus cache (a corpus as "
            "lists of ids would have to be built in memory; the original "
            "code stores numpy arrays)")
    raise CheckpointError(f"{path}: not a readable pickle (truncated)")


def load_corpus_cache(path):
    """(object, py2) of a corpus cache (the TF code's cache.pkl, a Python
    2 pickle of data_utils.Corpus; any plain pickle): rebuilt from the
    allow-list and numpy arrays' shapes, the arrays' bytes skipped
    without being read (the file is mapped; only the rest of the pickle
    is copied).  py2: the pickle holds Python 2 strings, which the
    unpickler reads as latin-1 (their bytes)."""
    import secrets
    try:
        with open_input(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise CheckpointError(f"{path}: empty")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                if buf[:1] != b"\x80":
                    raise CheckpointError(f"{path}: not a pickle (protocol "
                                          "2 or later)")
                module = f"txlgen-skipped-{secrets.token_hex(8)}"
                rest, skipped, py2 = _without_long_strings(buf, path, module)
    except OSError as e:
        raise CheckpointError(f"{path}: {e.strerror or e}")
    archive = _Archive(path, size)
    obj = CacheUnpickler(io.BytesIO(rest), rest, archive, module,
                         skipped).load()
    return obj, py2
