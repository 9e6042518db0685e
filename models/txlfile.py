"""Read and write txlgen model files (safetensors with 64-byte alignment).

Layout (see man/txlgen-model.5):
  u64 little-endian N | N bytes of JSON header, space-padded so that the
  data starts at a multiple of 64 | tensor data.
The header maps tensor names to {"dtype", "shape", "data_offsets": [b, e]}
(offsets relative to the start of the data); "__metadata__" holds the
hyperparameters and the format version as strings.  Every tensor starts at
a multiple of 64 bytes; the gaps are covered by U8 tensors named
"__pad__.K" so that the data stays contiguous, as safetensors requires.
The SentencePiece model proto is the U8 tensor "tokenizer.model".
Tensor names are those of the original PyTorch state_dict; tied weights
are stored once (the output weight is absent when tie_weight is true).
"""

import json
import struct

import numpy as np

FORMAT = "txlgen-model"
FORMAT_VERSION = 1
ALIGN = 64

_NP_DTYPES = {"F32": np.float32, "F16": np.float16, "U8": np.uint8}


def _to_bytes(arr, dtype):
    """A numpy array (or torch tensor) as little-endian bytes of dtype."""
    if hasattr(arr, "detach"):
        import torch
        t = arr.detach().cpu()
        if dtype == "BF16":
            return t.to(torch.bfloat16).contiguous().view(torch.int16) \
                    .numpy().astype("<i2").tobytes()
        arr = t.numpy() if t.dtype != torch.bfloat16 else t.float().numpy()
    arr = np.asarray(arr)
    if dtype == "BF16":
        f = arr.astype("<f4")
        bits = f.view("<u4").astype(np.uint64)
        # round to nearest even, as torch does
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return bits.astype("<u2").tobytes()
    return arr.astype(np.dtype(_NP_DTYPES[dtype]).newbyteorder("<")).tobytes()


def meta_value(v):
    """Metadata values are strings: ints as decimal, bools as true/false,
    lists as JSON."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return json.dumps(list(v))
    return str(v)


def write(path, hparams, tensors, tokenizer_proto, dtype="F32", extra=None):
    """Write a model file.

    hparams: dict of the HPARAM_NAMES values; tensors: name -> array or
    torch tensor (float); tokenizer_proto: bytes of a SentencePiece model;
    dtype: storage type of float tensors (F32, F16 or BF16); extra: more
    metadata strings (e.g. description).  Written to a temporary file, then
    renamed, so that a reader never sees half a file.
    """
    import os
    import tempfile

    meta = {"format": FORMAT, "format_version": str(FORMAT_VERSION)}
    meta.update({k: meta_value(v) for k, v in hparams.items()})
    meta.update({k: str(v) for k, v in (extra or {}).items()})

    blobs = [(name, dtype, list(np.shape(t) if not hasattr(t, "shape")
                                else tuple(t.shape)), _to_bytes(t, dtype))
             for name, t in tensors.items()]
    blobs.append(("tokenizer.model", "U8", [len(tokenizer_proto)],
                  bytes(tokenizer_proto)))

    header, data, pos, npad = {"__metadata__": meta}, [], 0, 0
    for name, dt, shape, raw in blobs:
        gap = -pos % ALIGN
        if gap:
            header[f"__pad__.{npad}"] = {"dtype": "U8", "shape": [gap],
                                         "data_offsets": [pos, pos + gap]}
            data.append(b"\0" * gap)
            pos += gap
            npad += 1
        header[name] = {"dtype": dt, "shape": shape,
                        "data_offsets": [pos, pos + len(raw)]}
        data.append(raw)
        pos += len(raw)

    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-(8 + len(hjson)) % ALIGN)

    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".txl-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(hjson)))
            f.write(hjson)
            for raw in data:
                f.write(raw)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read(path):
    """Return (metadata dict, {name: numpy array}); float tensors as
    float32, the tokenizer as bytes under "tokenizer.model"."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    base, out = 8 + n, {}
    for name, info in header.items():
        if name.startswith("__pad__."):
            continue
        b, e = info["data_offsets"]
        raw = blob[base + b:base + e]
        dt = info["dtype"]
        if name == "tokenizer.model":
            out[name] = raw
        elif dt == "BF16":
            u = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
            out[name] = u.view(np.float32).reshape(info["shape"])
        else:
            out[name] = np.frombuffer(raw, np.dtype(_NP_DTYPES[dt])
                                      .newbyteorder("<")) \
                .astype(np.float32).reshape(info["shape"])
    return meta, out
