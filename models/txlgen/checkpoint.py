"""Read Transformer-XL checkpoints without running anything from them.

Three forms (see models/README.md):
  - a whole-model pickle, torch.save(model) of the original code's
    MemTransformerLM (its train.py writes model.pt that way);
  - a Hugging Face TransfoXL directory: config.json and pytorch_model.bin
    or model.safetensors (its vocabulary: models/vocab.py);
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

read_checkpoint(path) -> Checkpoint(hparams, state, source): state maps
the ORIGINAL code's state_dict names (txl_ref uses the same) to numpy
arrays (BF16 widened to float32); hparams holds what the checkpoint says
about itself, with the original names (n_token n_layer ... tie_weight
tie_projs untie_r).  Standard library and numpy only: no PyTorch.
"""

import collections
import io
import json
import os
import pickle
import struct
import zipfile

import numpy as np


class CheckpointError(Exception):
    pass


# ---------------------------------------------------------------------------
# The restricted unpickler

class StandIn:
    """An instance of a known class, rebuilt as plain data: its pickled
    __dict__ and nothing else (_cls names the class it stands for)."""

    _cls = "?"

    def __setstate__(self, state):
        # nn.Module and plain objects pickle their __dict__; (dict, slots)
        # for classes with __slots__
        if isinstance(state, tuple) and len(state) == 2:
            state = dict(state[0] or {}, **(state[1] or {}))
        if not isinstance(state, dict):
            raise CheckpointError(f"{self._cls}: unexpected pickled state "
                                  f"{type(state).__name__}")
        self.__dict__.update(state)

    def __repr__(self):
        return f"<{self._cls}>"


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


class _StorageType:
    def __init__(self, name):
        self.name, self.dtype = name, _STORAGE_DTYPES[name]


class _Storage:
    """Raw bytes of one torch storage (filled in later for the legacy
    format, whose data follows the pickle)."""

    def __init__(self, dtype, numel):
        self.dtype, self.numel, self.data = dtype, numel, None


class TensorRef:
    """A tensor as the pickle describes it; .tensor() builds it as a numpy
    array (once, so that two references to one tensor stay one object:
    tied weights)."""

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset = storage, offset
        self.size, self.stride = tuple(size), tuple(stride)
        self._t = None

    def tensor(self):
        if self._t is None:
            st = self.storage
            if st.data is None:
                raise CheckpointError("tensor data missing from the file")
            item = _itemsize(st.dtype)
            if len(st.data) != st.numel * item:
                raise CheckpointError("storage has the wrong size")
            flat = np.frombuffer(st.data, _NP_DTYPES[st.dtype])
            need = self.offset + sum((n - 1) * s for n, s in
                                     zip(self.size, self.stride)) + 1
            if any(n < 0 for n in self.size) or \
                    any(s < 0 for s in self.stride) or self.offset < 0 or \
                    (0 not in self.size and need > st.numel):
                raise CheckpointError("tensor lies outside its storage")
            if 0 in self.size:
                t = np.zeros(self.size, flat.dtype)
            else:
                t = np.lib.stride_tricks.as_strided(
                    flat[self.offset:], self.size,
                    [s * item for s in self.stride], writeable=False)
            t = t.astype(t.dtype.newbyteorder("="))       # a copy
            self._t = bf16_to_f32(t) if st.dtype == "bfloat16" else t
        return self._t


def _rebuild_tensor(storage, offset, size, stride, *_):
    if not isinstance(storage, _Storage):
        raise CheckpointError("tensor without storage")
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


_FUNCTIONS = {
    "collections.OrderedDict": collections.OrderedDict,
    "collections.Counter": collections.Counter,
    "builtins.set": set, "builtins.frozenset": frozenset,
    "builtins.dict": dict, "builtins.list": list, "builtins.tuple": tuple,
    "copyreg._reconstructor": _reconstructor,
    "torch._utils._rebuild_tensor": _rebuild_tensor,
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch._utils._rebuild_parameter_with_state": _rebuild_parameter,
    "torch.Size": tuple,
}


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the names above; refuses every other global."""

    def __init__(self, f, what, storages=None, storage_loader=None):
        super().__init__(f, encoding="latin1")
        self.what = what
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
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if full in KNOWN_CLASSES:
            cls = self.standins.get(full)
            if cls is None:
                cls = type(name, (StandIn,), {"_cls": full})
                self.standins[full] = cls
            return cls
        raise CheckpointError(
            f"{self.what}: refused: the pickle names {full!r}, which is not "
            "a tensor, a container or a known class of a Transformer-XL "
            "checkpoint (a pickle can run code; nothing in it was run)")

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
        key, numel = str(pid[2]), pid[4]
        if not isinstance(numel, int) or numel < 0:
            raise CheckpointError(f"{self.what}: bad storage size")
        st = self.storages.get(key)
        if st is None:
            st = _Storage(pid[1].dtype, numel)
            if self.storage_loader:
                st.data = self.storage_loader(key, numel * _itemsize(
                    st.dtype))
            self.storages[key] = st
        if len(pid) >= 6 and pid[5] is not None:
            raise CheckpointError(f"{self.what}: storage views (torch < "
                                  "0.4 files) are not supported")
        return st

    def load(self):
        try:
            return super().load()
        except CheckpointError:
            raise
        except (pickle.UnpicklingError, EOFError, TypeError, ValueError,
                AttributeError, IndexError, KeyError, struct.error) as e:
            raise CheckpointError(f"{self.what}: not a readable pickle "
                                  f"({type(e).__name__}: {e})")


def _load_zip(path, f):
    try:
        z = zipfile.ZipFile(f)
        names = z.namelist()
    except (zipfile.BadZipFile, OSError) as e:
        raise CheckpointError(f"{path}: bad torch zip archive ({e})")
    pkl = [n for n in names if n.endswith("/data.pkl")]
    if len(pkl) != 1:
        raise CheckpointError(f"{path}: not a torch.save archive "
                              "(no single data.pkl)")
    prefix = pkl[0][:-len("data.pkl")]
    order = prefix + "byteorder"
    if order in names and z.read(order).strip() not in (b"little", b""):
        raise CheckpointError(f"{path}: big-endian tensors not supported")

    def loader(key, nbytes):
        name = f"{prefix}data/{key}"
        try:
            info = z.getinfo(name)
        except KeyError:
            raise CheckpointError(f"{path}: storage {key!r} missing")
        # checked before reading: a compressed entry could be a bomb
        if info.file_size != nbytes:
            raise CheckpointError(f"{path}: storage {key!r} holds "
                                  f"{info.file_size} bytes, not {nbytes}")
        return z.read(name)
    up = RestrictedUnpickler(io.BytesIO(z.read(pkl[0])), path,
                             storage_loader=loader)
    return up.load()


_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


def _load_legacy(path, f):
    """torch.save before 1.6: pickled magic, version, sys_info, the object,
    the storage keys, then each storage as int64 count + raw data."""
    head = RestrictedUnpickler(f, path)
    if head.load() != _LEGACY_MAGIC:
        raise CheckpointError(f"{path}: not a torch.save file")
    if RestrictedUnpickler(f, path).load() != 1001:
        raise CheckpointError(f"{path}: unknown torch.save version")
    info = RestrictedUnpickler(f, path).load()
    if isinstance(info, dict) and not info.get("little_endian", True):
        raise CheckpointError(f"{path}: big-endian tensors not supported")
    storages = {}
    obj = RestrictedUnpickler(f, path, storages).load()
    keys = RestrictedUnpickler(f, path).load()
    if not isinstance(keys, list):
        raise CheckpointError(f"{path}: bad storage list")
    for key in keys:
        st = storages.get(str(key))
        if st is None:
            raise CheckpointError(f"{path}: unknown storage {key!r}")
        raw = f.read(8)
        if len(raw) != 8:
            raise CheckpointError(f"{path}: truncated")
        (n,) = struct.unpack("<q", raw)
        if n != st.numel:
            raise CheckpointError(f"{path}: storage {key} size mismatch")
        size = n * _itemsize(st.dtype)
        st.data = f.read(size)
        if len(st.data) != size:
            raise CheckpointError(f"{path}: truncated")
    return obj


def load_pickle_file(path):
    """The object a torch.save file (or a plain pickle) holds, rebuilt
    from the allow-list only.  Tensors come back as TensorRef."""
    try:
        with open(path, "rb") as f:
            if zipfile.is_zipfile(f):
                f.seek(0)
                return _load_zip(path, f)
            f.seek(0)
            start = f.read(2)
            f.seek(0)
            if start[:1] != b"\x80":
                raise CheckpointError(f"{path}: not a pickle or torch.save "
                                      "file")
            # a legacy torch file starts with the pickled magic number;
            # anything else is a plain pickle (HF's vocab.pkl)
            obj = RestrictedUnpickler(f, path).load()
            if obj == _LEGACY_MAGIC:
                f.seek(0)
                return _load_legacy(path, f)
            return obj
    except OSError as e:
        raise CheckpointError(f"{path}: {e.strerror or e}")


# ---------------------------------------------------------------------------
# From the object graph to hyperparameters and a state_dict

def _tensor(x):
    return x.tensor() if isinstance(x, TensorRef) else x


def module_state(mod, prefix=""):
    """The state_dict of a rebuilt nn.Module: its parameters and persistent
    buffers under dotted names, as TensorRef (shared ones stay shared)."""
    out = collections.OrderedDict()
    d = mod.__dict__
    nonpersistent = d.get("_non_persistent_buffers_set") or set()
    for name, p in (d.get("_parameters") or {}).items():
        if p is not None:
            out[prefix + name] = p
    for name, b in (d.get("_buffers") or {}).items():
        if b is not None and name not in nonpersistent:
            out[prefix + name] = b
    for name, sub in (d.get("_modules") or {}).items():
        if isinstance(sub, StandIn):
            out.update(module_state(sub, f"{prefix}{name}."))
    return out


def _sub(mod, *path):
    for p in path:
        if isinstance(p, int):
            mods = mod.__dict__.get("_modules") or {}
            mod = mods.get(str(p))
        else:
            mod = (mod.__dict__.get("_modules") or {}).get(p)
        if mod is None:
            return None
    return mod


def _param(mod, name):
    return (mod.__dict__.get("_parameters") or {}).get(name) if mod else None


def whole_model_hparams(model, path):
    """Hyperparameters of a rebuilt MemTransformerLM, from its attributes
    and the sharing of its parameters (tie_weight, tie_projs)."""
    a = model.__dict__
    missing = [k for k in ("n_token", "n_layer", "n_head", "d_model",
                           "d_head", "d_embed") if k not in a]
    if missing:
        raise CheckpointError(f"{path}: MemTransformerLM without "
                              f"{', '.join(missing)}")
    if a.get("sample_softmax", -1) > 0:
        raise CheckpointError(f"{path}: sample_softmax models are not "
                              "supported")
    emb, crit = _sub(model, "word_emb"), _sub(model, "crit")
    layer0 = _sub(model, "layers", 0)
    if emb is None or crit is None or layer0 is None:
        raise CheckpointError(f"{path}: MemTransformerLM without word_emb, "
                              "crit or layers")
    ff, attn = _sub(layer0, "pos_ff"), _sub(layer0, "dec_attn")
    cutoffs = list(emb.__dict__.get("cutoffs", [a["n_token"]]))[:-1]
    div_val = emb.__dict__.get("div_val", 1)
    out_layers = _sub(crit, "out_layers")
    n_out = len(out_layers.__dict__.get("_modules") or {}) \
        if out_layers else 0
    tie_weight = n_out > 0 and all(
        _param(_sub(crit, "out_layers", i), "weight") is not None and
        _param(_sub(crit, "out_layers", i), "weight") is
        _param(_sub(emb, "emb_layers", i), "weight") for i in range(n_out))
    emb_projs = _sub(emb, "emb_projs")
    out_projs = _sub(crit, "out_projs")
    tie_projs = []
    for i in range(len(cutoffs) + 1):
        p = _param(out_projs, str(i))
        e = _param(emb_projs, "0" if div_val == 1 else str(i))
        tie_projs.append(p is not None and p is e)
    rw = _param(model, "r_w_bias")
    hp = dict(n_token=a["n_token"], n_layer=a["n_layer"],
              n_head=a["n_head"], d_model=a["d_model"], d_head=a["d_head"],
              d_inner=(ff.__dict__.get("d_inner") if ff else None),
              d_embed=a["d_embed"], div_val=div_val, cutoffs=cutoffs,
              tie_weight=tie_weight, tie_projs=tie_projs,
              pre_lnorm=bool(attn.__dict__.get("pre_lnorm", False))
              if attn else False,
              attn_type=a.get("attn_type", 0), tgt_len=a.get("tgt_len"),
              ext_len=a.get("ext_len", 0), mem_len=a.get("mem_len"),
              clamp_len=a.get("clamp_len", -1),
              same_length=bool(a.get("same_length", False)),
              untie_r=rw is not None and len(rw.size) == 3 and
              a.get("attn_type", 0) == 0)
    if a.get("attn_type", 0) in (1, 3):
        hp["max_klen"] = a.get("max_klen")
    return {k: v for k, v in hp.items() if v is not None}


Checkpoint = collections.namedtuple("Checkpoint", "hparams state source")


def _state_of(obj, path):
    """A state dict (name -> TensorRef) inside what a file held."""
    if isinstance(obj, StandIn):
        if obj._cls.endswith(".MemTransformerLM"):
            return whole_model_hparams(obj, path), module_state(obj)
        raise CheckpointError(f"{path}: holds a {obj._cls}, not a model")
    if isinstance(obj, dict):
        for key in ("model_state_dict", "state_dict", "model"):
            if isinstance(obj.get(key), (dict, StandIn)):
                return _state_of(obj[key], path)
        if obj and all(isinstance(k, str) and isinstance(v, TensorRef)
                       for k, v in obj.items()):
            return {}, obj
    raise CheckpointError(f"{path}: neither a state_dict nor a "
                          "MemTransformerLM")


def _materialize(state, path):
    seen, out = {}, collections.OrderedDict()
    try:
        for k, v in state.items():
            if id(v) not in seen:
                seen[id(v)] = _tensor(v)
            out[k] = seen[id(v)]
    except CheckpointError as e:
        raise CheckpointError(f"{path}: tensor {k!r}: {e}")
    except (TypeError, ValueError, RuntimeError, OverflowError) as e:
        raise CheckpointError(f"{path}: tensor {k!r} cannot be rebuilt "
                              f"({e})")
    return out


# ---------------------------------------------------------------------------
# Hugging Face TransfoXL directories

HF_CONFIG_MAP = {"vocab_size": "n_token", "n_token": "n_token"}
HF_KEYS = ("n_layer n_head d_model d_head d_inner d_embed div_val cutoffs "
           "pre_lnorm attn_type tgt_len ext_len mem_len clamp_len "
           "same_length untie_r tie_projs tie_weight").split()
HF_IGNORED = set(("adaptive dropout dropatt init init_range init_std "
                  "proj_init_std eos_token_id architectures model_type "
                  "transformers_version torch_dtype output_past "
                  "tie_word_embeddings proj_share_all_but_first "
                  "layer_norm_epsilon sample_softmax _name_or_path "
                  "pad_token_id bos_token_id").split())


def hf_hparams(cfg, path):
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    hp = {}
    for k, v in cfg.items():
        if k in HF_CONFIG_MAP:
            hp[HF_CONFIG_MAP[k]] = v
        elif k in HF_KEYS:
            hp[k] = v
    if "n_token" not in hp:
        raise CheckpointError(f"{path}: no vocab_size")
    if cfg.get("sample_softmax", -1) > 0:
        raise CheckpointError(f"{path}: sample_softmax is not supported")
    if abs(cfg.get("layer_norm_epsilon", 1e-5) - 1e-5) > 1e-12:
        raise CheckpointError(f"{path}: layer_norm_epsilon "
                              f"{cfg['layer_norm_epsilon']} (txlgen uses "
                              "1e-5)")
    n_clusters = len(hp.get("cutoffs", [])) + 1
    if "tie_projs" not in hp:
        share = cfg.get("proj_share_all_but_first", True)
        hp["tie_projs"] = [False] + [bool(share)] * (n_clusters - 1)
    if "tie_weight" not in hp:
        hp["tie_weight"] = bool(cfg.get("tie_word_embeddings", True))
    # the HF port's default is untie_r true and same_length true
    hp.setdefault("untie_r", True)
    if not cfg.get("adaptive", True):
        raise CheckpointError(f"{path}: adaptive false (a plain softmax "
                              "over d_model) is not supported")
    return hp


def hf_state(state):
    """HF names -> the original's: strip 'transformer.'; per-layer biases
    keep their layers.N.dec_attn.r_w_bias names (convert.py stacks them)."""
    out = collections.OrderedDict()
    for k, v in state.items():
        if k.startswith("transformer."):
            k = k[len("transformer."):]
        out[k] = v
    return out


def read_safetensors(path):
    """name -> float array of a safetensors file (header checked)."""
    dtypes = {"F32": np.float32, "F16": np.float16, "F64": np.float64,
              "I64": np.int64}
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise CheckpointError(f"{path}: {e.strerror}")
    try:
        (n,) = struct.unpack("<Q", blob[:8])
        if n > len(blob) - 8:
            raise ValueError("header longer than the file")
        header = json.loads(blob[8:8 + n])
        out = collections.OrderedDict()
        for name, info in header.items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            shape, dt = info["shape"], info["dtype"]
            if not 0 <= b <= e <= len(blob) - 8 - n:
                raise ValueError(f"tensor {name!r} outside the file")
            raw = blob[8 + n + b:8 + n + e]
            if dt == "BF16":
                arr = bf16_to_f32(np.frombuffer(raw, "<u2"))
            elif dt in dtypes:
                arr = np.frombuffer(raw, np.dtype(dtypes[dt])
                                    .newbyteorder("<"))
            else:
                raise ValueError(f"tensor {name!r}: dtype {dt}")
            out[name] = arr.astype(arr.dtype.newbyteorder("=")) \
                .reshape(shape)
        return out
    except (ValueError, KeyError, TypeError, struct.error) as e:
        raise CheckpointError(f"{path}: not a safetensors file ({e})")


def write_safetensors(path, tensors):
    """Write name -> tensor (numpy or torch) as an F32 safetensors file, as
    Hugging Face stores model.safetensors (for tests and tools)."""
    from .txlfile import as_float32
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
    try:
        with open(cfg_path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{cfg_path}: {e}")
    hp = hf_hparams(cfg, cfg_path)
    st = os.path.join(path, "model.safetensors")
    pt = os.path.join(path, "pytorch_model.bin")
    if os.path.exists(st):
        state = read_safetensors(st)
    elif os.path.exists(pt):
        _, refs = _state_of(load_pickle_file(pt), pt)
        state = _materialize(refs, pt)
    else:
        raise CheckpointError(f"{path}: no model.safetensors or "
                              "pytorch_model.bin")
    return Checkpoint(hp, hf_state(state), "huggingface")


def read_checkpoint(path):
    """A state dict file, a whole-model pickle or an HF directory."""
    if os.path.isdir(path):
        return read_hf_dir(path)
    obj = load_pickle_file(path)
    hp, refs = _state_of(obj, path)
    state = _materialize(refs, path)
    if any(k.startswith("transformer.") for k in state):
        state = hf_state(state)
    return Checkpoint(hp, state, "whole-model" if hp else "state_dict")
