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

Storage types (write(dtype=...)): F32, or a compact type for the weight
matrices, which txlgen computes with as stored: F16, BF16, Q8_0 (blocks of 32
int8 values along a row with one F16 scale, as GGUF's block_q8_0; 34 bytes per
32 weights) or Q4_0 (the same in 4 bits, as GGUF's block_q4_0; 18 bytes per 32
weights; each block's scale the one of least squared error among 21 candidates,
quantize_q4_0_weights).  Only the matrices that hold the parameters and the
time are compact: the 2-D "*.weight" tensors (embedding, output layer, qkv_net,
r_net, o_net, the two feed-forward layers).  Everything else stays F32: biases,
LayerNorm gains, r_w_bias and r_r_bias (a few thousand values, and
precision-sensitive: they shift every activation), and the d_embed != d_model
projections, which are small and which txlgen reads transposed.  A Q8_0 or Q4_0
matrix whose rows are not a multiple of 32 long is stored as F16.

As a program, it re-stores a model file in another type:

  txlfile.py --dtype Q8_0 IN.bin OUT.bin
"""

import json
import math
import struct
import sys

import numpy as np

from . import loadable
from .loadable import FORMAT, FORMAT_VERSION, meta_value  # noqa: F401
from .errors import (InputError, OneLineParser, describe, open_input,
                     run_tool)
from .hparams import as_float32, is_int  # noqa: F401 (txlfile.as_float32)
from . import needs
from .progress import Progress, human_size

ALIGN = 64

QK = 32                 # values per Q8_0 and Q4_0 block
_NP_DTYPES = {"F32": np.float32, "F16": np.float16, "U8": np.uint8}
_Q8_0 = np.dtype([("d", "<f2"), ("qs", "i1", QK)])     # 34 bytes, packed
_Q4_0 = np.dtype([("d", "<f2"), ("qs", "u1", QK // 2)])  # 18 bytes
QKK = 128               # values per Q4_K super-block: 4 sub-blocks of 32
_Q4_K = np.dtype([("d", "<f2"), ("sz", "u1", 6), ("qs", "u1", QKK // 2)])
# The types a file holds: {name: (values, bytes) per block}, from lib/'s
# headers (DTYPES, those this module writes, follows _CODECS below).
_FILE_DTYPES = loadable.storage_types()


def dtype_arg(name):
    """A storage type's name in any case ("q8_0"), for --dtype."""
    return name.upper()


class ModelFileError(InputError):
    pass


def stored_dtype(name, shape, dtype):
    """The type tensor `name` of this shape is stored in when a file is
    written with `dtype` (see the module's docstring)."""
    if dtype == "F32" or len(shape) != 2 or not name.endswith(".weight"):
        return "F32"
    block = _FILE_DTYPES[dtype][0]
    if block > 1 and shape[-1] % block != 0:
        return "F16"
    return dtype


def quantize_q8_0(arr):
    """Q8_0 blocks of a float array whose last dimension is a multiple of
    32: d = max|x| / 127 rounded to F16, q = x / d rounded half away from
    zero (as GGUF's quantize_row_q8_0, but dividing by the stored d, so
    that q * d is the nearest value the block can hold)."""
    x = np.asarray(arr, np.float32).reshape(-1, QK)
    d = (np.abs(x).max(axis=1) / 127).astype(np.float16)
    if not np.isfinite(d).all():
        raise ValueError("Q8_0: a weight is too large for an F16 scale")
    df = d.astype(np.float32)
    inv = np.divide(1.0, df, out=np.zeros_like(df), where=df > 0)
    v = x * inv[:, None]
    q = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -127, 127)
    blocks = np.empty(len(x), _Q8_0)
    blocks["d"] = d
    blocks["qs"] = q.astype(np.int8)
    return blocks


def dequantize_q8_0(raw, shape):
    """The float32 values of Q8_0 bytes (exact: q * d needs at most 18
    significant bits)."""
    blocks = np.frombuffer(raw, _Q8_0)
    x = blocks["qs"].astype(np.float32) * \
        blocks["d"].astype(np.float32)[:, None]
    return x.reshape(shape)


def quantize_q4_0(arr):
    """Q4_0 blocks of a float array whose last dimension is a multiple of
    32, by the rule of txl_q4_0_scale() (lib/kernels/txl-kernels.h): d = m / -8
    in float rounded to F16, m the block's first value of largest
    magnitude (so that m itself is exact; a zero block's d is +0); q = x *
    (1 / d) + 8.5 in float, truncated and clipped to [0, 15] (8 where d is
    0); value i < 16 in the low nibble of byte i, value i + 16 in its high
    one.  The scales must be finite."""
    b = np.asarray(arr, np.float32).reshape(-1, QK)
    m = b[np.arange(len(b)), np.argmax(np.abs(b), axis=1)]
    with np.errstate(over="ignore", invalid="ignore"):
        d = (m / np.float32(-8)).astype(np.float16)
    d[m == 0] = 0
    if not np.isfinite(d).all():
        raise ValueError("Q4_0: a weight is too large for an F16 scale")
    df = d.astype(np.float32)
    inv = np.where(df != 0, np.float32(1) / np.where(df != 0, df, 1),
                   np.float32(0)).astype(np.float32)
    v = (b * inv[:, None]).astype(np.float32) + np.float32(8.5)
    q = np.clip(np.trunc(v), 0, 15).astype(np.uint8)
    blocks = np.empty(len(b), _Q4_0)
    blocks["d"] = d
    blocks["qs"] = q[:, :QK // 2] | (q[:, QK // 2:] << 4)
    return blocks


def quantize_q4_0_weights(arr, chunk=1 << 15):
    """Q4_0 blocks of weights: for each block the scale of least squared
    error among 21 candidates, where quantize_q4_0 (the memory's rule,
    which must be quick) takes the first.  Candidate t (-10 .. 10) rounds
    q = x (t / 10 - 8) / m to nearest (m the block's first value of
    largest magnitude) and takes d = sum(x q) / sum(q q) (least squares
    for those q) rounded to F16; the values are then rounded to nearest
    multiples of that d, q - 8 clipped to [-8, 7], and the candidate with
    the smallest error kept.  On the default model it halves the bits per
    byte lost (+0.0011 against +0.0023).  In float32, a chunk of blocks
    at a time (a WikiText-103 model's 285M weights take minutes)."""
    x = np.asarray(arr, np.float32).reshape(-1, QK)
    if not np.isfinite(x).all():
        raise ValueError("Q4_0: a weight is NaN or infinite")
    blocks = np.empty(len(x), _Q4_0)
    f32 = np.float32
    for lo in range(0, len(x), chunk):
        b = x[lo:lo + chunk]
        m = b[np.arange(len(b)), np.argmax(np.abs(b), axis=1)]
        with np.errstate(divide="ignore"):
            inv_m = np.where(m != 0, f32(1) / m, f32(0)).astype(f32)
        best = np.full(len(b), np.inf, f32)
        d_best = np.zeros(len(b), np.float16)
        q_best = np.zeros(b.shape, f32)
        for t in range(-10, 11):
            q = np.clip(np.rint(b * (inv_m * f32(t / 10 - 8))[:, None]),
                        -8, 7)
            qq = np.einsum("ij,ij->i", q, q)
            with np.errstate(divide="ignore", invalid="ignore"), \
                    np.errstate(over="ignore"):
                d16 = np.where(qq > 0, np.einsum("ij,ij->i", b, q) / qq,
                               f32(0)).astype(np.float16)
            if not np.isfinite(d16).all():
                raise ValueError("Q4_0: a weight is too large for an F16 "
                                 "scale")
            df = d16.astype(f32)
            with np.errstate(divide="ignore"):
                inv = np.where(df != 0, f32(1) / df, f32(0)).astype(f32)
            q = np.clip(np.rint(b * inv[:, None]), -8, 7)
            r = b - q * df[:, None]
            err = np.einsum("ij,ij->i", r, r)
            better = err < best
            best = np.where(better, err, best)
            d_best = np.where(better, d16, d_best)
            q_best = np.where(better[:, None], q, q_best)
        qb = (q_best + 8).astype(np.uint8)
        blocks["d"][lo:lo + chunk] = d_best
        blocks["qs"][lo:lo + chunk] = qb[:, :QK // 2] | (qb[:, QK // 2:] << 4)
    return blocks


def _q4_k_range(x, w, steps=20):
    """Per row of x (sub-blocks of 32, weights w >= 0 per value): the
    scale s and minimum m (value = s q - m, q in 0..15, m >= 0, the range
    holding 0) of least weighted squared error among candidates: the
    range [min(x, 0), max(x, 0)] in 15 steps, and for each of 21 step
    counts 14 .. 16 the q it rounds to refitted by weighted least
    squares (the search of GGUF's make_qkx2_quants)."""
    lo = np.minimum(x.min(1), 0)
    hi = np.maximum(x.max(1), 0)
    rng = np.where(hi > lo, hi - lo, 1)
    s = rng / 15
    m = -lo
    q = np.clip(np.rint((x - lo[:, None]) / s[:, None]), 0, 15)
    best = (w * (s[:, None] * q - m[:, None] - x) ** 2).sum(1)
    sw, swx = w.sum(1), (w * x).sum(1)
    for i in range(steps + 1):
        q = np.clip(np.rint((14 + i / 10) / rng[:, None] *
                            (x - lo[:, None])), 0, 15)
        sl, sl2, sxl = (w * q).sum(1), (w * q * q).sum(1), \
            (w * q * x).sum(1)
        det = sw * sl2 - sl * sl
        ok = det > 0
        det = np.where(ok, det, 1)
        s1 = (sw * sxl - swx * sl) / det
        c = (sl2 * swx - sl * sxl) / det      # x ~ s1 q + c
        pos = c > 0                            # keep 0 within the range
        s1 = np.where(pos, sxl / np.where(sl2 > 0, sl2, 1), s1)
        c = np.where(pos, 0, c)
        err = (w * (s1[:, None] * q + c[:, None] - x) ** 2).sum(1)
        b = ok & (err < best) & (s1 > 0)
        best = np.where(b, err, best)
        s = np.where(b, s1, s)
        m = np.where(b, -c, m)
    return s, m


def _q4_k_params(x, w):
    """The super-blocks' F16 scales d, the sub-blocks' 6-bit scales sc and
    zero points z, and their units u = d sc / 4, for x of rows of QKK
    values (weights w per value)."""
    s, m = _q4_k_range(x.reshape(-1, QK), w.reshape(-1, QK))
    s, m = s.reshape(-1, 4), m.reshape(-1, 4)
    d = (s.max(1) / 63).astype(np.float16)
    if not np.isfinite(d).all():
        raise ValueError("Q4_K: a weight is too large for an F16 scale")
    df = d.astype(np.float64)
    sc = np.clip(np.rint(s / np.where(df > 0, df, 1)[:, None]), 0, 63)
    u = df[:, None] * sc / 4
    z = np.clip(np.rint(m / np.where(u > 0, u, 1)), 0, 63)
    return d, sc.astype(np.uint8), z.astype(np.uint8), u


def _q4_k_round(x, u, z):
    """The nibbles of values x under units u and zero points z (the same
    shape, or broadcast): (x / u + z) / 4 to nearest, clipped to 0..15."""
    return np.clip(np.rint((x / np.where(u > 0, u, 1) + z) / 4), 0, 15)


def _q4_k_blocks(d, sc, z, q):
    """Q4_K blocks from d (n,), sc, z (n, 4) and the nibbles q (n, 128)."""
    blocks = np.empty(len(d), _Q4_K)
    blocks["d"] = d
    sz = np.zeros((len(d), 6), np.uint8)
    sz[:, :4] = sc | (z & 3) << 6
    hz = z >> 2
    sz[:, 4] = hz[:, 0] | hz[:, 1] << 4
    sz[:, 5] = hz[:, 2] | hz[:, 3] << 4
    blocks["sz"] = sz
    q = q.astype(np.uint8).reshape(-1, 4, QK)
    blocks["qs"] = (q[:, :, :16] | q[:, :, 16:] << 4).reshape(-1, QKK // 2)
    return blocks


def quantize_q4_k(arr, importance=None, chunk=1 << 13):
    """Q4_K blocks (lib/txl-dtype.h) of a float array whose last dimension
    is a multiple of 128: per sub-block of 32 the scale and minimum of
    least squared error (_q4_k_range; weighted by `importance`, one weight
    per column, where given: the mean square of the activations each
    weight multiplies, models/txlgen/calibrate.py), then d = the largest
    scale / 63 to F16, each scale a 6-bit multiple of it, each minimum
    the nearest quarter step (z) and each value the nearest step."""
    x = np.asarray(arr, np.float32)
    if not np.isfinite(x).all():
        raise ValueError("Q4_K: a weight is NaN or infinite")
    cols = x.shape[-1]
    x = x.reshape(-1, QKK).astype(np.float64)
    if importance is None:
        wt = np.ones((1, QKK))
    else:
        wt = np.asarray(importance, np.float64).reshape(-1, QKK)
    per_row = cols // QKK
    out = []
    for lo in range(0, len(x), chunk):
        b = x[lo:lo + chunk]
        w = np.broadcast_to(wt if importance is None else
                            np.tile(wt, (chunk // per_row + 1, 1))
                            [(lo % per_row):(lo % per_row) + len(b)],
                            b.shape)
        d, sc, z, u = _q4_k_params(b, w)
        q = _q4_k_round(b.reshape(-1, 4, QK), u[:, :, None],
                        z[:, :, None].astype(np.float64))
        out.append(_q4_k_blocks(d, sc, z, q.reshape(-1, QKK)))
    return np.concatenate(out) if out else np.empty(0, _Q4_K)


def gptq_q4_k(arr, xtx, damp=0.01):
    """Q4_K blocks of weight matrix arr (rows x cols, cols a multiple of
    128) given the sum of its inputs' x x^T (cols x cols): each
    super-block's scales and zero points from its columns as the earlier
    columns' errors left them (_q4_k_params, weighted by the
    inputs' mean squares), then column by column the nearest value, its
    error taken out of the later columns through the inverse Hessian's
    Cholesky factor (GPTQ: Frantar et al., 2022): each column's rounding
    error spread over the columns not yet quantized in proportion to how
    the inputs correlate them."""
    W = np.array(arr, np.float64)
    rows, cols = W.shape
    H = np.array(xtx, np.float64)
    dead = np.diag(H) <= 0
    H[dead, dead] = 1
    H += damp * np.mean(np.diag(H)) * np.eye(cols)
    U = np.linalg.cholesky(np.linalg.inv(H)).T     # upper: Hinv = U^T U
    imp = np.diag(H)
    nb = cols // QKK
    d = np.empty((rows, nb), np.float16)
    sc = np.empty((rows, nb, 4), np.uint8)
    z = np.empty((rows, nb, 4), np.uint8)
    q = np.empty((rows, cols))
    for c0 in range(0, cols, QKK):
        b = c0 // QKK
        dd, s1, z1, u = _q4_k_params(
            W[:, c0:c0 + QKK],
            np.broadcast_to(imp[c0:c0 + QKK], (rows, QKK)))
        d[:, b], sc[:, b], z[:, b] = dd, s1, z1
        for c in range(c0, c0 + QKK):
            j = (c - c0) // QK
            qc = _q4_k_round(W[:, c], u[:, j], z1[:, j].astype(np.float64))
            q[:, c] = qc
            err = (W[:, c] - u[:, j] * (4 * qc - z1[:, j])) / U[c, c]
            W[:, c + 1:] -= np.outer(err, U[c, c + 1:])
    return _q4_k_blocks(d.reshape(-1), sc.reshape(-1, 4),
                          z.reshape(-1, 4), q.reshape(-1, QKK))


def dequantize_q4_k(raw, shape):
    """The float32 values of Q4_K bytes: d sc / 4 (4 q - z), exact."""
    blocks = np.frombuffer(raw, _Q4_K)
    sz = blocks["sz"]
    sc = (sz[:, :4] & 63).astype(np.float32)
    z = ((sz[:, :4] >> 6) | (np.stack([sz[:, 4] & 15, sz[:, 4] >> 4,
                                       sz[:, 5] & 15, sz[:, 5] >> 4], 1)
                             << 2)).astype(np.float32)
    qs = blocks["qs"].reshape(-1, 4, QK // 2)
    q = np.concatenate([qs & 15, qs >> 4], axis=2).astype(np.float32)
    u = blocks["d"].astype(np.float32)[:, None] * sc / 4
    x = u[:, :, None] * (4 * q - z[:, :, None])
    return x.reshape(shape)


def dequantize_q4_0(raw, shape):
    """The float32 values of Q4_0 bytes: (q - 8) * d, exact."""
    blocks = np.frombuffer(raw, _Q4_0)
    q = np.concatenate([blocks["qs"] & 15, blocks["qs"] >> 4], axis=1)
    x = (q.astype(np.float32) - 8) * blocks["d"].astype(np.float32)[:, None]
    return x.reshape(shape)


def stored_values(name, arr, dtype):
    """The float32 values txlgen will compute with after writing arr as
    tensor `name` with `dtype`: what a reference must use to agree."""
    a = as_float32(arr)
    dt = stored_dtype(name, a.shape, dtype)
    if dt not in _NP_DTYPES:
        return _from_bytes(_to_bytes(a, dt), dt, a.shape)
    return a.astype(_NP_DTYPES[dt]).astype(np.float32)


class Lazy:
    """A tensor made when it is written (write() takes one for an
    array): its shape known before, its values from make(), so that a
    converter holds one tensor of its input at a time besides what it
    writes."""

    def __init__(self, shape, make):
        self.shape, self.make = tuple(shape), make

    def __call__(self):
        a = self.make()
        if tuple(np.shape(a)) != self.shape:
            raise ValueError(f"made with shape {list(np.shape(a))}, "
                             f"announced {list(self.shape)}")
        return a


def _bf16_bytes(arr):
    f = arr.astype("<f4")
    bits = f.view("<u4").astype(np.uint64)
    # round to nearest even, as torch does
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bits.astype("<u2").tobytes()


def _bf16_values(raw, shape):
    u = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
    return u.view(np.float32).reshape(shape)


# The types beside numpy's own (_NP_DTYPES): {name: (the bytes of an
# array, the float32 values of bytes and a shape)}.  A type of lib/'s
# headers is one of DTYPES, the types this module writes, once it is here.
_CODECS = {
    "BF16": (_bf16_bytes, _bf16_values),
    "Q8_0": (lambda a: quantize_q8_0(a).tobytes(), dequantize_q8_0),
    "Q4_0": (lambda a: quantize_q4_0_weights(a).tobytes(), dequantize_q4_0),
    "Q4_K": (lambda a: quantize_q4_k(a).tobytes(), dequantize_q4_k),
}
DTYPES = tuple(n for n in loadable.number_types()
               if n in _NP_DTYPES or n in _CODECS)


def _from_bytes(raw, dtype, shape):
    if dtype in _CODECS:
        return _CODECS[dtype][1](raw, shape)
    return np.frombuffer(raw, np.dtype(_NP_DTYPES[dtype])
                         .newbyteorder("<")).astype(np.float32) \
        .reshape(shape)


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
    if dtype in _CODECS:
        return _CODECS[dtype][0](arr)
    return arr.astype(np.dtype(_NP_DTYPES[dtype]).newbyteorder("<")).tobytes()


def write(path, hparams, tensors, tokenizer_proto, dtype="F32", extra=None,
          check=True, encode=None, prog=None):
    """Write a model file.

    hparams: dict of the HPARAM_NAMES values; tensors: name -> array or
    torch tensor (float); tokenizer_proto: bytes of a SentencePiece model;
    dtype: storage type of the weight matrices (DTYPES; stored_dtype()
    says which tensors); extra: more metadata strings (e.g. description).
    With check (the default), a file txlgen would not load is refused
    with loadable.NotLoadable before anything is written (the tests make
    broken files with check=False), and so is a weight that is NaN or
    infinite, or that its storage type cannot hold (ValueError naming the
    tensor).  Written to a temporary file, then renamed, so that a reader
    never sees half a file.  encode(name, array, dtype): the bytes of a
    tensor, or None for the type's own quantizer (calibrated ones).
    prog: the program whose progress line shows the tensors made, on a
    terminal.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {DTYPES}")
    import os
    import tempfile

    from .loadable import format_version
    meta = {"format": FORMAT,
            "format_version": str(format_version(hparams))}
    meta.update({k: meta_value(v) for k, v in hparams.items()})
    meta.update({k: str(v) for k, v in (extra or {}).items()})

    specs = {}
    for name, t in tensors.items():
        if name in ("__metadata__", "tokenizer.model") or \
                name.startswith("__pad__."):
            raise ValueError(f"tensor name {name!r} is the file's own")
        shape = list(np.shape(t) if not hasattr(t, "shape")
                     else tuple(t.shape))
        specs[name] = (stored_dtype(name, shape, dtype), shape)
    specs["tokenizer.model"] = ("U8", [len(tokenizer_proto)])
    if check:
        loadable.check(meta, specs, tokenizer_proto)

    blobs = []
    bar = Progress(prog, f"writing {os.path.basename(path)}: tensor",
                   len(tensors)) if prog else None
    for i, (name, t) in enumerate(tensors.items()):
        dt, shape = specs[name]
        if bar:
            bar.update(i, name)
        try:
            if isinstance(t, Lazy):
                t = t()
            if check:
                _check_values(t, dt)
            raw = encode(name, t, dt) if encode else None
            blobs.append((name, dt, shape,
                          raw if raw is not None else _to_bytes(t, dt)))
        except ValueError as e:
            if bar:
                bar.done()
            raise ValueError(f"tensor {name!r}: {e}")
    if bar:
        bar.done()
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
    if check:
        why = _check_header(header, pos)
        if why or len(hjson) > loadable.limits()["TXL_MAX_HEADER"]:
            raise loadable.NotLoadable(why or f"a header of {len(hjson):,} "
                                       "bytes, more than txlgen reads")

    d = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".txl-", dir=d)
    except OSError as e:
        raise ModelFileError(f"{path}: {e.strerror or e}")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(hjson)))
            f.write(hjson)
            for raw in data:
                f.write(raw)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError):
            raise ModelFileError(f"{path}: {e.strerror or e}")
        raise


def _no_duplicates(pairs):
    """A JSON object whose keys are all different (a key given twice
    would mean one thing to txlgen and another to a reader that keeps the
    last)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {dup[:100]!r}")
    return d


def _check_values(t, dt):
    """ValueError if a weight is NaN or infinite, or becomes infinite in
    dt (F16 holds up to 65504; Q8_0 and Q4_0 check their scales)."""
    a = as_float32(t)
    if not np.isfinite(a).all():
        raise ValueError("a weight is NaN or infinite")
    # the magnitudes that round to infinity in dt (F16's largest: 65504)
    inf = {"F16": 65520.0,
           "BF16": float(np.uint32(0x7F7F8000).view(np.float32))}.get(dt)
    if inf is not None and a.size and np.abs(a).max() >= inf:
        raise ValueError(f"a weight of {np.abs(a).max():.6g} is too large "
                         f"for {dt}")


def _check_header(header, data_len):
    """The problem with a parsed header (a JSON value) over data_len bytes
    of data, or None: what txlgen's loader checks of the container
    (lib/model/txl-file.c), so that read() builds no array it would refuse."""
    if not isinstance(header, dict):
        return "the header is not a JSON object"
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or \
            not all(isinstance(v, str) for v in meta.values()):
        return "__metadata__ is not an object of strings"
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        what = f"tensor {name[:100]!r}"
        if not isinstance(info, dict):
            return f"{what} is {describe(info)}"
        dt, shape, offs = (info.get("dtype"), info.get("shape"),
                           info.get("data_offsets"))
        if not isinstance(dt, str) or dt not in _FILE_DTYPES:
            return f"{what} has dtype {describe(dt)}"
        if not isinstance(shape, list) or \
                len(shape) > loadable.limits()["TXL_MAX_DIMS"] or \
                not all(is_int(d) and 0 <= d < 1 << 31 for d in shape) or \
                math.prod(shape) * 16 >= 1 << 64:
            return f"{what} has shape {describe(shape)}"
        if not isinstance(offs, list) or len(offs) != 2 or \
                not all(is_int(o) for o in offs) or \
                not 0 <= offs[0] <= offs[1] <= data_len:
            return f"{what} has data_offsets {describe(offs)} outside the " \
                "data"
        n = math.prod(shape)
        block, size = _FILE_DTYPES[dt]
        if block > 1 and (not shape or shape[-1] % block):
            return f"{what} is {dt} but its last dimension is not a " \
                f"multiple of {block}"
        need = n // block * size
        if offs[1] - offs[0] != need:
            return f"{what} has {offs[1] - offs[0]} bytes, its shape " \
                f"{shape} and dtype {dt} need {need}"
        spans.append((offs[0], offs[1], name))
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            return f"tensors {n0[:100]!r} and {n1[:100]!r} overlap"
    tok = header.get("tokenizer.model")
    if not tok or tok["dtype"] != "U8" or len(tok["shape"]) != 1:
        return "no 1-D U8 tensor 'tokenizer.model' (the tokenizer)"
    return None


def _parse(path):
    """(header, file bytes, data start) of a model file whose container
    is what txlgen's loader takes (lib/model/txl-file.c), else ModelFileError
    naming it."""
    try:
        with open_input(path) as f:
            blob = f.read()
    except OSError as e:
        raise ModelFileError(f"{path}: {e.strerror or e}")

    def bad(why):
        return ModelFileError(f"{path}: not a txlgen model file ({why})")
    if len(blob) < 8:
        raise bad("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8 or n > loadable.limits()["TXL_MAX_HEADER"]:
        raise bad(f"a header of {n:,} bytes in a file of {len(blob):,}")
    try:
        header = json.loads(blob[8:8 + n], object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise bad("the header is nested too deeply")
    except ValueError as e:
        raise bad(f"the header is not JSON: {e}")
    why = _check_header(header, len(blob) - 8 - n)
    if why:
        raise bad(why)
    return header, blob, 8 + n


def read(path):
    """Return (metadata dict, {name: numpy array}); float tensors as
    float32, the tokenizer as bytes under "tokenizer.model".  A file that
    is not a model file is a ModelFileError naming it."""
    header, blob, base = _parse(path)
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        if name.startswith("__pad__."):
            continue
        b, e = info["data_offsets"]
        raw = blob[base + b:base + e]
        dt = info["dtype"]
        if name == "tokenizer.model":
            out[name] = raw
        else:
            out[name] = _from_bytes(raw, dt, info["shape"])
    return meta, out


def check_file(path):
    """The hyperparameters of model file path if txlgen's loader takes it
    (its checks, in Python: the container, the hyperparameters, every
    tensor, the tokenizer); else ModelFileError (the container) or
    loadable.NotLoadable (the model)."""
    header, blob, base = _parse(path)
    meta = header.pop("__metadata__", {})
    specs = {k: (v["dtype"], v["shape"]) for k, v in header.items()}
    b, e = header["tokenizer.model"]["data_offsets"]
    hp = loadable.check(meta, specs, blob[base + b:base + e])
    for name in loadable.tensors(hp):       # in the loader's order
        b, e = header[name]["data_offsets"]
        loadable.check_scales(name, header[name]["dtype"],
                              blob[base + b:base + e])
    return hp


def restore(src, dst, dtype, meta_updates=None, calibrate=None, prog=None):
    """Re-store model file src as dst with the weight matrices in dtype
    (from the values src holds: F32 to anything is one rounding, the type
    src has no rounding at all), with the metadata keys of meta_updates
    set (value None: removed).  calibrate: a text whose activations
    choose the Q4_K weights (calibrate.py); its name, size and sha256 go
    into the metadata (calibration_text, calibration_bytes,
    calibration_sha256)."""
    meta, tensors = read(src)
    encode = None
    if calibrate:
        if dtype != "Q4_K":
            raise ModelFileError(f"--calibrate: for Q4_K, not {dtype}")
        from . import calibrate as cal
        stats = cal.statistics(meta, tensors, calibrate, prog=prog)

        def encode(name, t, dt):
            if dt != "Q4_K" or name not in stats:
                return None
            return gptq_q4_k(t, stats[name][0]).tobytes()
        name, size, digest = cal.text_info(calibrate)
        meta_updates = dict(meta_updates or {}, calibration_text=name,
                            calibration_bytes=str(size),
                            calibration_sha256=digest)
    if not all(isinstance(t, np.ndarray) and t.dtype == np.float32
               for k, t in tensors.items() if k != "tokenizer.model"):
        raise ModelFileError(f"{src}: a U8 tensor other than the "
                             "tokenizer: not a txlgen model file")
    proto = tensors.pop("tokenizer.model")
    hp = {k: v for k, v in meta.items()
          if k not in ("format", "format_version")}
    for k, v in (meta_updates or {}).items():
        if v is None:
            hp.pop(k, None)
        else:
            hp[k] = v
    try:
        write(dst, hp, tensors, proto, dtype=dtype, encode=encode,
              prog=prog)
    except ValueError as e:
        raise ModelFileError(f"{src}: {e}")


def main(argv=None):
    ap = OneLineParser(prog="txlfile.py", description="Re-store a txlgen "
                       "model file with its weight matrices in another "
                       "type, and set or remove metadata.")
    ap.add_argument("--dtype", required=True, choices=DTYPES, type=dtype_arg)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="set a metadata key (KEY= removes it); e.g. "
                    "recommended='{\"temp\": 0.9}'")
    ap.add_argument("--calibrate", metavar="TEXT",
                    help="choose Q4_K's weights for the activations of "
                    "this text (PyTorch; its name, size and sha256 go "
                    "into the metadata)")
    ap.add_argument("input")
    ap.add_argument("output")
    a = ap.parse_args(argv)
    np.seterr(all="ignore")            # (as convert.py: one line per error)
    updates = {}
    for kv in a.set:
        k, eq, v = kv.partition("=")
        if not eq or not k or k in ("format", "format_version"):
            ap.error(f"--set {kv}: expected KEY=VALUE (not format)")
        updates[k] = v if v else None
    if a.calibrate:
        needs.require("txlfile.py", "torch")
    rc = run_tool("txlfile.py", a.input, restore, a.input, a.output,
                  a.dtype, updates, a.calibrate, "txlfile.py")
    if rc == 0:
        print(f"txlfile.py: wrote {a.output} ({wrote(a.output, a.dtype)})",
              file=sys.stderr)
    return rc


def wrote(path, dtype):
    """'SIZE, DTYPE' of the model file just written at @path, for the
    programs' line of success."""
    import os
    return f"{human_size(os.path.getsize(path))}, {dtype}"
