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

from .conventions import REL_PARTIAL
from .proto import field, varint
from .tfckpt import MAGIC, mask, crc32c, shard_path

BLOCK_SIZE = 4096
RESTART_INTERVAL = 16
# DataType numbers by numpy dtype
_TF_DTYPES = {"<f4": 1, "<f8": 2, "<i4": 3, "<i8": 9, "<f2": 19}


def _field(num, wt, v):
    return field(num, v, fixed32=wt == 5)


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
        self.buf += (varint(shared) + varint(len(key) - shared) +
                     varint(len(value)) + key[shared:] + value)
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
        handle = varint(len(out)) + varint(len(raw))
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


def string_tensor(data):
    """(stored bytes, masked crc32c) of a scalar string tensor as
    BundleWriter's WriteStringTensor writes it: varint length, the masked
    crc32c of the length as a 4-byte integer, the bytes; the crc32c over
    that integer, the length's checksum and the bytes."""
    n = struct.pack("<I", len(data))
    lcrc = struct.pack("<I", mask(crc32c(n)))
    return varint(len(data)) + lcrc + data, mask(crc32c(data,
                                                        crc32c(n + lcrc)))


def write_bundle(prefix, tensors, num_shards=1, bad_tensor_crc=None,
                 corrupt_block=None, block_size=BLOCK_SIZE, shard_of=None):
    """Write name -> numpy array (float32, float64, int32, int64, float16;
    or a function that makes it, called when it is written; bytes: a
    scalar string) as PREFIX.index + its data shards: with shard_of (name
    -> shard), each tensor in its shard of num_shards, as
    MergeV2Checkpoints leaves a sharded save; without, one shard 0
    (num_shards only as the header says it).  bad_tensor_crc names a
    tensor whose crc32c is spoiled."""
    entries, pos = [], {}
    files = {}
    try:
        for k in (range(num_shards) if shard_of else [0]):
            files[k] = open(shard_path(prefix, k, num_shards), "wb")
            pos[k] = 0
        for name in sorted(tensors):
            k = shard_of(name) if shard_of else 0
            a = tensors[name]
            if isinstance(a, bytes):
                raw, crc = string_tensor(a)
                dt, shape = 7, ()
            else:
                a = np.asarray(a() if callable(a) else a)
                a = a.astype(a.dtype.newbyteorder("<"), copy=False)
                dt, shape = _TF_DTYPES[a.dtype.str], a.shape
                raw = memoryview(np.ascontiguousarray(a)).cast("B")
                crc = mask(crc32c(raw))
            if name == bad_tensor_crc:
                crc ^= 1
            entries.append((name.encode(), entry_proto(
                dt, shape, k, pos[k], len(raw), crc)))
            files[k].write(raw)
            pos[k] += len(raw)
            del a, raw
    finally:
        for f in files.values():
            f.close()
    index = table([(b"", header_proto(num_shards))] + entries,
                  block_size=block_size, corrupt=corrupt_block)
    with open(prefix + ".index", "wb") as f:
        f.write(index)
    return len(entries)


# ---------------------------------------------------------------------------
# Python 2 pickles (protocol 2), as the TF code's data_utils.py writes its
# cache.pkl

class Py2Object:
    """An instance of class module.name with attribute dict state, pickled
    as Python 2 pickles a new-style object (NEWOBJ, then BUILD)."""

    def __init__(self, module, name, state):
        self.module, self.name, self.state = module, name, state


class Py2Reduce:
    """callable(*args) of module.name, pickled with REDUCE."""

    def __init__(self, module, name, args, state=None):
        self.module, self.name, self.args, self.state = \
            module, name, args, state


def py2_str(s):
    """A Python 2 str: bytes (UTF-8 for a text)."""
    return s.encode("utf-8") if isinstance(s, str) else bytes(s)


class Py2Pickler:
    """The opcodes Python 2's pickle.dump(obj, f, protocol=2) writes for
    None, bool, int, float, bytes (Python 2's str: SHORT_BINSTRING and
    BINSTRING), str (unicode: BINUNICODE), lists, tuples, dicts,
    collections.OrderedDict / Counter (as their __reduce__ gives them),
    numpy arrays (numpy.core.multiarray._reconstruct, and their bytes as
    one string) and Py2Object / Py2Reduce; every string and container
    memoized (BINPUT), strings met again by BINGET."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")
        self.memo = {}

    def put(self, key=None):
        i = len(self.memo)
        if key is not None:
            self.memo[key] = i
        else:
            self.memo[object()] = i
        self.out += b"q" + bytes([i]) if i < 256 else \
            b"r" + struct.pack("<I", i)

    def get(self, i):
        self.out += b"h" + bytes([i]) if i < 256 else \
            b"j" + struct.pack("<I", i)

    def glob(self, module, name):
        self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"
        self.put()

    def dump(self, obj):
        import collections
        o = self.out
        if obj is None:
            o += b"N"
        elif obj is True or obj is False:
            o += b"\x88" if obj else b"\x89"
        elif isinstance(obj, int):
            if 0 <= obj < 256:
                o += b"K" + bytes([obj])
            elif 0 <= obj < 65536:
                o += b"M" + struct.pack("<H", obj)
            elif -2 ** 31 <= obj < 2 ** 31:
                o += b"J" + struct.pack("<i", obj)
            else:
                raw = obj.to_bytes((obj.bit_length() + 8) // 8, "little",
                                   signed=True)
                o += b"\x8a" + bytes([len(raw)]) + raw
        elif isinstance(obj, float):
            o += b"G" + struct.pack(">d", obj)
        elif isinstance(obj, (bytes, str)):
            key = (type(obj), obj)
            if key in self.memo:
                return self.get(self.memo[key])
            if isinstance(obj, bytes):
                o += (b"U" + bytes([len(obj)]) if len(obj) < 256 else
                      b"T" + struct.pack("<i", len(obj))) + obj
            else:
                raw = obj.encode("utf-8")
                o += b"X" + struct.pack("<I", len(raw)) + raw
            self.put(key)
        elif isinstance(obj, tuple):
            if not obj:
                o += b")"
            elif len(obj) <= 3:
                for x in obj:
                    self.dump(x)
                o += b"\x85\x86\x87"[len(obj) - 1:len(obj)]
            else:
                o += b"("
                for x in obj:
                    self.dump(x)
                o += b"t"
            self.put()
        elif isinstance(obj, list):
            o += b"]"
            self.put()
            self.items(obj, b"e")
        elif isinstance(obj, collections.Counter):
            self.dump(Py2Reduce("collections", "Counter", (dict(obj),)))
        elif isinstance(obj, collections.OrderedDict):
            self.dump(Py2Reduce("collections", "OrderedDict",
                                ([[k, v] for k, v in obj.items()],)))
        elif isinstance(obj, dict):
            o += b"}"
            self.put()
            self.items([x for kv in obj.items() for x in kv], b"u")
        elif isinstance(obj, np.ndarray):
            self.glob("numpy.core.multiarray", "_reconstruct")
            self.glob("numpy", "ndarray")
            self.dump((0,))
            self.dump(b"b")
            self.out += b"\x87"
            self.put()
            self.out += b"R"
            self.put()
            a = np.ascontiguousarray(obj)
            dt = Py2Reduce("numpy", "dtype", (a.dtype.str[1:], 0, 1),
                           (3, "<" if a.dtype.itemsize > 1 else "|", None,
                            None, None, -1, -1, 0))
            self.dump((1, tuple(a.shape), dt, False,
                       a.astype(a.dtype.newbyteorder("<")).tobytes()))
            self.out += b"b"
        elif isinstance(obj, Py2Reduce):
            self.glob(obj.module, obj.name)
            self.dump(tuple(obj.args))
            self.out += b"R"
            self.put()
            if obj.state is not None:
                self.dump(obj.state)
                self.out += b"b"
        elif isinstance(obj, Py2Object):
            self.glob(obj.module, obj.name)
            self.out += b")\x81"
            self.put()
            self.dump(obj.state)
            self.out += b"b"
        else:
            raise TypeError(f"cannot pickle {type(obj).__name__}")

    def items(self, xs, op):
        step = 2 if op == b"u" else 1
        for i in range(0, len(xs), 1000 * step):
            chunk = xs[i:i + 1000 * step]
            if len(chunk) == step:
                for x in chunk:
                    self.dump(x)
                self.out += b"s" if op == b"u" else b"a"
            else:
                self.out += b"("
                for x in chunk:
                    self.dump(x)
                self.out += op

    def done(self):
        return bytes(self.out + b".")


def py2_pickle(obj):
    p = Py2Pickler()
    p.dump(obj)
    return p.done()


# ---------------------------------------------------------------------------
# A model of the PyTorch code in the TF code's names and layouts

def tf_tensors(state, cfg, slots=True, seed=0, proj_same_dim=True):
    """name -> array of the TF code's checkpoint (tf/model.py's variables)
    holding the model whose PyTorch state_dict (numpy arrays) is state:
    dense kernels [in, out] (the PyTorch weights transposed), projections
    [d_emb_i, d_model], the tail clusters' rows of cluster_W in the TF
    order (tail cluster i at row i - 1; the PyTorch code's at row C - i),
    a projection tied to the embedding's (cfg.tie_projs) or none left out
    as the TF code leaves it out, and with slots the optimizer's state a
    training checkpoint holds beside them (Adam's two slots per variable,
    global_step, beta1_power, beta2_power).  The TF code always ties the
    softmax weights to the embedding tables and has no pre_lnorm: cfg
    must too.  proj_same_dim False (the lm1b run): a cluster whose
    embedding has d_model values has no projection (its PyTorch ones
    must be the identity)."""
    if not cfg.tie_weight or cfg.pre_lnorm or cfg.attn_type != REL_PARTIAL:
        raise ValueError("the TF code builds tied, post-LN attn_type 0 "
                         "models only")
    T = "transformer/"
    out = {T + "r_w_bias": state["r_w_bias"],
           T + "r_r_bias": state["r_r_bias"]}
    E, S = T + "adaptive_embed/", T + "adaptive_softmax/"
    has_proj = cfg.div_val > 1 or cfg.d_embed != cfg.d_model

    def none(i, name):
        """No projection for cluster i: proj_same_dim off and d_model
        values (then the PyTorch one must be the identity)."""
        if proj_same_dim or cfg.d_emb(i) != cfg.d_model:
            return False
        if not np.array_equal(state[name], np.eye(cfg.d_model)):
            raise ValueError(f"{name} is not the identity")
        return True
    if cfg.div_val == 1:
        out[E + "lookup_table"] = state["word_emb.emb_layers.0.weight"]
        if has_proj:
            out[E + "proj_W"] = state["word_emb.emb_projs.0"].T
    else:
        for i in range(len(cfg.cutoffs) + 1):
            out[E + f"cutoff_{i}/lookup_table"] = \
                state[f"word_emb.emb_layers.{i}.weight"]
            if none(i, f"word_emb.emb_projs.{i}"):
                continue
            out[E + f"cutoff_{i}/proj_W"] = state[f"word_emb.emb_projs.{i}"].T
    if not cfg.cutoffs:
        out[S + "bias"] = state["crit.out_layers.0.bias"]
        if has_proj and not cfg.tie_projs[0]:
            out[S + "proj"] = state["crit.out_projs.0"].T
    else:
        bounds = [0] + list(cfg.cutoffs) + [cfg.n_token]
        for i in range(len(cfg.cutoffs) + 1):
            if cfg.div_val == 1:
                out[S + f"cutoff_{i}/b"] = \
                    state["crit.out_layers.0.bias"][bounds[i]:bounds[i + 1]]
            else:
                out[S + f"cutoff_{i}/b"] = state[f"crit.out_layers.{i}.bias"]
            if has_proj and not cfg.tie_projs[i] and \
                    not (cfg.div_val > 1 and
                         none(i, f"crit.out_projs.{i}")):
                out[S + f"cutoff_{i}/proj"] = state[f"crit.out_projs.{i}"].T
        out[S + "cutoff_0/cluster_W"] = state["crit.cluster_weight"][::-1]
        out[S + "cutoff_0/cluster_b"] = state["crit.cluster_bias"][::-1]
    for i in range(cfg.n_layer):
        L, P = f"{T}layer_{i}/", f"layers.{i}."
        out[L + "rel_attn/qkv/kernel"] = state[P + "dec_attn.qkv_net.weight"].T
        out[L + "rel_attn/r/kernel"] = state[P + "dec_attn.r_net.weight"].T
        out[L + "rel_attn/o/kernel"] = state[P + "dec_attn.o_net.weight"].T
        out[L + "rel_attn/LayerNorm/gamma"] = \
            state[P + "dec_attn.layer_norm.weight"]
        out[L + "rel_attn/LayerNorm/beta"] = \
            state[P + "dec_attn.layer_norm.bias"]
        for k, n in ((1, 0), (2, 3)):
            out[L + f"ff/layer_{k}/kernel"] = \
                state[P + f"pos_ff.CoreNet.{n}.weight"].T
            out[L + f"ff/layer_{k}/bias"] = \
                state[P + f"pos_ff.CoreNet.{n}.bias"]
        out[L + "ff/LayerNorm/gamma"] = state[P + "pos_ff.layer_norm.weight"]
        out[L + "ff/LayerNorm/beta"] = state[P + "pos_ff.layer_norm.bias"]
    out = {k: np.ascontiguousarray(v, dtype=np.float32)
           for k, v in out.items()}
    if slots:
        rng = np.random.default_rng(seed)
        for k, v in list(out.items()):
            out[k + "/Adam"] = rng.standard_normal(v.shape).astype(
                np.float32)
            out[k + "/Adam_1"] = np.abs(rng.standard_normal(
                v.shape)).astype(np.float32)
        out["global_step"] = np.array(400000, np.int64)
        out["beta1_power"] = np.array(0.9 ** 10, np.float32)
        out["beta2_power"] = np.array(0.999 ** 10, np.float32)
    return out


def tf_vocab(symbols, special=(), lower_case=False, vocab_file=None,
             counts=None):
    """A vocabulary.Vocab of the TF code as Python 2 pickles it (symbols
    as str, i.e. UTF-8 bytes), idx2sym = symbols."""
    import collections
    syms = [py2_str(s) for s in symbols]
    state = {"counter": collections.Counter(
                 {py2_str(k): v for k, v in (counts or {}).items()}),
             "special": [py2_str(s) for s in special],
             "min_freq": 0, "max_size": None, "lower_case": lower_case,
             "delimiter": None, "vocab_file": vocab_file,
             "idx2sym": syms,
             "sym2idx": collections.OrderedDict(
                 (s, i) for i, s in enumerate(syms))}
    for s in special:
        state[s.strip("<>") + "_idx"] = symbols.index(s)
    if "<UNK>" in symbols:
        state["unk_idx"] = symbols.index("<UNK>")
    return Py2Object("vocabulary", "Vocab", state)


def tf_corpus(dataset, vocab, arrays, cutoffs, module="data_utils"):
    """A data_utils.Corpus of the TF code (train, valid, test: numpy arrays
    of ids, or for lm1b train a list of paths)."""
    state = {"dataset": py2_str(dataset), "vocab": vocab,
             "cutoffs": list(cutoffs)}
    state.update(arrays)
    return Py2Object(module, "Corpus", state)


def write_tf_dir(path, tensors, corpus_pickle, info, step=0, **bundle_kw):
    """A directory as the authors' tf/sota/download.sh lays it out:
    data/cache.pkl, data/corpus-info.json, model/checkpoint,
    model/model.ckpt-STEP.{index,data-00000-of-00001,meta}."""
    import json
    import os
    os.makedirs(os.path.join(path, "data"), exist_ok=True)
    os.makedirs(os.path.join(path, "model"), exist_ok=True)
    with open(os.path.join(path, "data", "cache.pkl"), "wb") as f:
        f.write(corpus_pickle)
    with open(os.path.join(path, "data", "corpus-info.json"), "w") as f:
        json.dump(info, f)
    name = f"model.ckpt-{step}"
    with open(os.path.join(path, "model", "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{name}"\n'
                f'all_model_checkpoint_paths: "{name}"\n')
    # the graph: not read by the converter (a placeholder of the name)
    with open(os.path.join(path, "model", name + ".meta"), "wb") as f:
        f.write(b"\n\x00")
    write_bundle(os.path.join(path, "model", name), tensors, **bundle_kw)
    return os.path.join(path, "model", name)
