#!/usr/bin/python3
"""Broken model files: a clear one-line error and exit status 3, never a
crash.

From a valid small model file (tests/make_random_model.py, converted with
models/convert.py) this builds a corpus of broken files, each with one
defect and otherwise valid, and runs

  txlgen --model BAD --text hello -n 1
  txlgen --model BAD --score TEXT

on each.  Both must exit with status 3 ("bad model or config", txlgen(1)),
not by a signal, print nothing on stdout and exactly one line on stderr
that names the file and says what is wrong (a key phrase per case,
case-insensitive).  Under an ASan/UBSan build (CI runs the suite so) any
sanitizer report adds lines to stderr or changes the status, so the same
assertions catch memory errors in the loader.

Also checked: the valid file loads (the corpus differs from it by one
defect), a directory, a FIFO and a device are refused at once (a FIFO
without a writer used to make txlgen wait forever), and a valid but
unaligned safetensors file (header not padded, no __pad__ tensors, as
other tools write them) loads and scores exactly like the aligned one.

The txlgen binary: $TXLGEN (set by meson test), else build/cmd/txlgen.
"""

import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import proto, random_model as mrm, txlfile, vocab
from txlgen.conventions import (ABS_LEARNED, ABS_SINUSOID, ADAPTIVE_SPAN,
                                ATTN_KINDS, REL_LEARNED)

EXIT_BADMODEL = 3


TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")
_tmp = None
_valid = None          # RandomModel
_text = None           # a text file to --score


# ---------------------------------------------------------------------------
# Taking a model file apart and putting it back together

def split(blob):
    """(header dict, data bytes) of a well-formed file."""
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def assemble(header, data, align=64):
    """A file from a header (dict, or raw bytes used as they are) and the
    data; the header is space-padded so the data starts at a multiple of
    align (None: no padding)."""
    raw = header if isinstance(header, bytes) else \
        json.dumps(header, separators=(",", ":")).encode()
    if align:
        raw += b" " * (-(8 + len(raw)) % align)
    return struct.pack("<Q", len(raw)) + raw + data


def tensors(header):
    return {k: v for k, v in header.items() if k != "__metadata__"}


def unaligned(blob):
    """The file as other safetensors writers make it: no alignment, no
    padding tensors."""
    header, data = split(blob)
    meta = header.pop("__metadata__")
    new, chunks, pos = {"__metadata__": meta}, [], 0
    for name, info in sorted(tensors(header).items(),
                             key=lambda kv: kv[1]["data_offsets"][0]):
        if name.startswith("__pad__."):
            continue
        b, e = info["data_offsets"]
        new[name] = dict(info, data_offsets=[pos, pos + e - b])
        chunks.append(data[b:e])
        pos += e - b
    return assemble(new, b"".join(chunks), align=None)


# ---------------------------------------------------------------------------
# The corpus: name -> (function(valid bytes, header, data) -> bytes,
#                      regular expression the error line must match)
# Each function changes one thing; everything else stays valid.

def _edit(fn):
    """Wrap a header edit: fn(header, data) mutates or returns new data."""
    def make(blob, header, data):
        h = json.loads(json.dumps(header))
        d = fn(h, data)
        return assemble(h, data if d is None else d)
    return make


def _vocab_mismatch(blob, header, data):
    """n_token 321 everywhere (metadata and shapes) but a tokenizer of 320
    pieces: a file convert.py refuses to write, made with txlfile."""
    meta, ts = txlfile.read(os.path.join(_tmp, "valid.bin"))
    proto = ts.pop("tokenizer.model")
    import numpy as np
    for name in ("word_emb.emb_layers.0.weight", "crit.out_layers.0.weight",
                 "crit.out_layers.0.bias"):
        if name in ts:
            t = ts[name]
            ts[name] = np.concatenate([t, t[:1]], axis=0)
    hp = dict(meta)
    for k in ("format", "format_version"):
        hp.pop(k)
    hp["n_token"] = "321"
    path = os.path.join(_tmp, "vocab.tmp")
    txlfile.write(path, hp, ts, proto, check=False)
    with open(path, "rb") as f:
        return f.read()


def _garbage_tokenizer(blob, header, data):
    b, e = header["tokenizer.model"]["data_offsets"]
    junk = random.Random(1).randbytes(e - b)
    return assemble(header, data[:b] + junk + data[e:])


def _with_tokenizer(make_proto):
    """The valid model with its tokenizer replaced by make_proto(proto)."""
    def make(blob, header, data):
        meta, ts = txlfile.read(os.path.join(_tmp, "valid.bin"))
        proto = make_proto(ts.pop("tokenizer.model"))
        hp = {k: v for k, v in meta.items()
              if k not in ("format", "format_version")}
        path = os.path.join(_tmp, "tok.tmp")
        txlfile.write(path, hp, ts, proto, check=False)
        with open(path, "rb") as f:
            return f.read()
    return make


def _charsmap(edit):
    """The tokenizer's normalizer_spec.precompiled_charsmap (ModelProto
    field 3, its field 2) replaced by edit(charsmap): the table
    SentencePiece uses without checking (a broken one once crashed txlgen
    on the first text it tokenized)."""
    def model(p):
        return proto.edit(p, 3, lambda spec: proto.edit(spec, 2, edit))
    return _with_tokenizer(model)


def _units(cm):
    (size,) = struct.unpack("<I", cm[:4])
    return size, list(struct.unpack(f"<{size // 4}I", cm[4:4 + size]))


def _set_unit(i, fn):
    """unit i of the trie replaced by fn(unit, number of units)"""
    def edit(cm):
        size, u = _units(cm)
        u[i] = fn(u[i], len(u))
        return cm[:4] + struct.pack(f"<{len(u)}I", *u) + cm[4 + size:]
    return edit


def _root_far(u, n):
    # the root's offset as far as it goes: bits 10..31 shifted left by 8
    # (bit 9): about 2^30 units, 4 GB past the table
    return (u & 0x1FF) | (1 << 9) | (0x3FFFFF << 10)


def _no_strings(cm):
    size, _ = _units(cm)
    return cm[:4 + size] + b"x"          # the pool: one byte, no NUL


def _missing_tensor(h, data):
    # renamed to a padding tensor: the bytes stay covered, the name is gone
    name = "layers.1.pos_ff.CoreNet.3.bias"
    info = h.pop(name)
    b, e = info["data_offsets"]
    h["__pad__.999"] = {"dtype": "U8", "shape": [e - b],
                        "data_offsets": [b, e]}


def _overlap(h, data):
    # a tensor pointing at another one's bytes (same size); its own range
    # becomes a padding tensor so that only the overlap is wrong
    a = h["layers.0.pos_ff.layer_norm.weight"]
    b = h["layers.0.pos_ff.layer_norm.bias"]
    h["__pad__.998"] = {"dtype": "U8",
                        "shape": [b["data_offsets"][1] - b["data_offsets"][0]],
                        "data_offsets": list(b["data_offsets"])}
    b["data_offsets"] = list(a["data_offsets"])


def _overlap_partial(h, data):
    # two tensors sharing part of their bytes, total size unchanged
    a = h["layers.0.dec_attn.layer_norm.weight"]
    a["data_offsets"] = [a["data_offsets"][0] + 4, a["data_offsets"][1] + 4]


def _beyond_end(h, data):
    # the last tensor claims 1000 more bytes than the file has
    last = max(tensors(h).values(), key=lambda t: t["data_offsets"][1])
    last["shape"] = [last["shape"][0] + 1000]
    last["data_offsets"][1] += 1000


def _offsets_far(h, data):
    t = h["r_w_bias"]
    t["data_offsets"] = [2 ** 62, 2 ** 62 + t["data_offsets"][1] -
                         t["data_offsets"][0]]


def _size_mismatch(h, data):
    # tokenizer: shape one byte shorter than its data_offsets
    t = h["tokenizer.model"]
    t["shape"] = [t["shape"][0] - 1]


def _size_mismatch_weight(h, data):
    # a weight whose data_offsets cover 4 bytes less than shape x F32
    t = h["layers.0.dec_attn.qkv_net.weight"]
    t["data_offsets"][1] -= 4


def _offsets_reversed(h, data):
    t = h["r_r_bias"]
    t["data_offsets"] = t["data_offsets"][::-1]


def _offsets_not_numbers(h, data):
    h["r_r_bias"]["data_offsets"] = ["0", "16"]


def _transposed(h, data):
    t = h["layers.0.dec_attn.qkv_net.weight"]
    t["shape"] = t["shape"][::-1]


def _reshaped(h, data):
    t = h["layers.1.dec_attn.layer_norm.weight"]
    t["shape"] = [4, t["shape"][0] // 4]


def _dtype(name):
    def f(h, data):
        h["layers.0.dec_attn.o_net.weight"]["dtype"] = name
    return f


def _blocked(dtype, name, nbytes=None):
    """Tensor `name` declared Q8_0 or Q4_0 (dtype), with nbytes of data if
    given (the rest of its bytes become a padding tensor)."""
    def f(h, data):
        t = h[name]
        t["dtype"] = dtype
        if nbytes is not None:
            b, e = t["data_offsets"]
            t["data_offsets"] = [b, b + nbytes]
            h["__pad__.996"] = {"dtype": "U8", "shape": [e - b - nbytes],
                                "data_offsets": [b + nbytes, e]}
    return f


def _blocked_scales(dtype, name, bad=None):
    """Tensor `name` rewritten as valid Q8_0 or Q4_0 blocks (scale 1/16,
    random values) except that block `bad[0]` gets the F16 scale `bad[1]`
    (None: every scale finite)."""
    def f(h, data):
        t = h[name]
        rows, cols = t["shape"]
        per = 34 if dtype == "Q8_0" else 18
        rng = random.Random(3)
        blocks = []
        for i in range(rows * cols // 32):
            scale = bad[1] if bad and i == bad[0] else 0x2c00
            blocks.append(struct.pack("<H", scale) +
                          rng.randbytes(per - 2))
        new = b"".join(blocks)
        _blocked(dtype, name, len(new))(h, data)
        b = t["data_offsets"][0]
        return data[:b] + new + data[b + len(new):]
    return f


def _floats(dtype, name, at=None, bits=None, fill=None):
    """Tensor `name` (F32) rewritten as dtype (F32, F16 or BF16: the same
    values, rounded), its element `at` given the bit pattern `bits`, or
    every element i the bit pattern fill(i)."""
    def f(h, data):
        t = h[name]
        b, e = t["data_offsets"]
        vals = struct.unpack(f"<{(e - b) // 4}f", data[b:e])
        if dtype == "F32":
            new = bytearray(data[b:e])
        elif dtype == "F16":
            new = bytearray(struct.pack(f"<{len(vals)}e", *vals))
        else:
            u = struct.unpack(f"<{len(vals)}I", data[b:e])
            new = bytearray(struct.pack(f"<{len(u)}H",
                                        *(x >> 16 for x in u)))
        fmt, size = ("<I", 4) if dtype == "F32" else ("<H", 2)
        for i in range(len(vals)) if fill is not None else [at]:
            struct.pack_into(fmt, new, size * i, bits if fill is None
                             else fill(i))
        _blocked(dtype, name, len(new))(h, data)
        return data[:b] + bytes(new) + data[b + len(new):]
    return f


def _meta(key, value):
    def f(h, data):
        if value is None:
            del h["__metadata__"][key]
        else:
            h["__metadata__"][key] = value
    return f


def _metas(**kv):
    def f(h, data):
        h["__metadata__"].update(kv)
    return f


def _no_metadata(h, data):
    del h["__metadata__"]


def _duplicate_key(blob, header, data):
    raw = json.dumps(header, separators=(",", ":"))
    entry = '"r_w_bias":' + json.dumps(header["r_w_bias"],
                                       separators=(",", ":"))
    return assemble(raw[:-1].encode() + b"," + entry.encode() + b"}", data)


def _duplicate_meta(blob, header, data):
    # the same metadata key twice, the second with another value: readers
    # keeping the first or the last would see different models
    raw = json.dumps(header, separators=(",", ":"))
    meta = '"__metadata__":{'
    assert meta in raw
    raw = raw.replace(meta, meta + '"n_layer":"1",', 1)
    return assemble(raw.encode(), data)


def _stray_layer_tensor(h, data):
    # a tensor the architecture does not have, inside a valid layer (empty,
    # so that it overlaps nothing and nothing else is wrong)
    h["layers.0.dec_attn.q_net.weight"] = {"dtype": "F32", "shape": [0],
                                            "data_offsets": [0, 0]}


def _header_len(value):
    def f(blob, header, data):
        return struct.pack("<Q", value) + blob[8:]
    return f


def _big_header(blob, header, data):
    """A valid file but for a header (padded with spaces) over 16 MiB."""
    raw = json.dumps(header, separators=(",", ":")).encode()
    return assemble(raw + b" " * ((16 << 20) + 64 - len(raw)), data)


def _raw_header(text):
    def f(blob, header, data):
        (n,) = struct.unpack("<Q", blob[:8])
        raw = text(blob[8:8 + n].decode())
        # keep the length so that the data stays where it is
        raw = raw.encode().ljust(n)[:n] if len(raw) <= n else raw.encode()
        return struct.pack("<Q", len(raw)) + raw + data
    return f


def _truncate(where):
    def f(blob, header, data):
        (n,) = struct.unpack("<Q", blob[:8])
        return blob[:where(len(blob), n)]
    return f


TRUNC = r"truncat|too short|short|end of (the )?file|beyond|past|exceed|" \
        r"larger|outside|ends at|does not fit|smaller"
OFFS = r"offset|beyond|past|exceed|outside|ends at|end of (the )?file|" \
       r"truncat|larger"
def _block_cases(dt, block, need):
    """The cases of @dt, a type of @block bytes per 32 values: a matrix
    of the wrong size (its shape needs @need bytes), a tensor whose rows
    are not a multiple of 32 long, a vector in it."""
    d = dt.lower()
    return {
        f"dtype_{d}_size": (_edit(_blocked(
            dt, "layers.0.dec_attn.qkv_net.weight")),
            r"qkv_net.weight' has 6144 bytes, its shape and "
            rf"dtype need {need}"),
        f"dtype_{d}_rows": (_edit(_blocked(dt, "r_w_bias", block)),
                            rf"r_w_bias' is {dt} but its last dimension is "
                            r"not a multiple of 32"),
        f"dtype_{d}_vector": (_edit(_blocked(
            dt, "layers.0.pos_ff.CoreNet.3.bias", block)),
            rf"CoreNet.3.bias' has dtype {dt}, expected F32, F16 or BF16$"),
    }


CASES = {
    # truncated at several points
    "trunc_in_length": (_truncate(lambda size, n: 4), TRUNC),
    "trunc_after_length": (_truncate(lambda size, n: 8), TRUNC + "|header"),
    "trunc_in_json": (_truncate(lambda size, n: 8 + n // 2), TRUNC),
    "trunc_after_header": (_truncate(lambda size, n: 8 + n), TRUNC),
    "trunc_in_data": (_truncate(lambda size, n: 8 + n + (size - 8 - n) // 2),
                      TRUNC),
    "trunc_last_byte": (_truncate(lambda size, n: size - 1), TRUNC),
    "empty": (lambda blob, h, d: b"", TRUNC + "|empty"),
    # header length
    "header_len_past_end": (_header_len(10 ** 6), r"header|" + TRUNC),
    "header_len_zero": (_header_len(0), r"header|json"),
    "header_len_absurd": (_header_len(2 ** 64 - 1), r"header|" + TRUNC),
    "header_len_2_63": (_header_len(2 ** 63), r"header|" + TRUNC),
    # within the file, but beyond the 16 MiB a header may have: said so,
    # not "does not fit the file"
    "header_too_long": (_big_header, r"header of 167773\d\d bytes, more "
                        r"than the 16777216 a model file may have$"),
    # JSON
    "json_malformed": (_raw_header(lambda s: s.rstrip()[:-1]), r"json"),
    "json_garbage": (_raw_header(lambda s: "\x01\x02not json at all"),
                     r"json"),
    "json_not_object": (_raw_header(lambda s: "[1, 2, 3]"), r"object"),
    "json_trailing": (_raw_header(lambda s: s.rstrip() + " {}"),
                      r"json|after|trailing|unexpected"),
    "json_duplicate": (_duplicate_key, r"duplicate"),
    "json_tensor_not_object": (_edit(lambda h, d: h.__setitem__(
        "r_w_bias", [1, 2])), r"r_w_bias"),
    # dtypes
    "dtype_unknown": (_edit(_dtype("Q3_K")), r"dtype|type"),
    "dtype_int32": (_edit(_dtype("I32")), r"dtype|type"),
    "dtype_not_string": (_edit(_dtype(7)), r"dtype|type"),
    # Q8_0 and Q4_0: 34 and 18 bytes per 32 values, along rows that are a
    # multiple of 32 long, for weight matrices only
    **_block_cases("Q8_0", 34, 1632),
    **_block_cases("Q4_0", 18, 864),
    # Q4_K: 72 bytes per 128 values, along rows a multiple of 128 long
    "dtype_q4_k_rows": (_edit(_blocked("Q4_K", "r_w_bias", 72)),
                        r"r_w_bias' is Q4_K but its last dimension is not "
                        r"a multiple of 128"),
    # a non-finite block scale makes every product with the block NaN,
    # and so every logit (NaN: 0x7e00, 0xfe00; inf: 0x7c00, 0xfc00)
    "q4_0_scale_nan": (_edit(_blocked_scales(
        "Q4_0", "layers.0.dec_attn.qkv_net.weight", (17, 0x7e00))),
        r"qkv_net.weight' is Q4_0 with a non-finite scale \(NaN\) in "
        r"block 17"),
    "q4_0_scale_inf": (_edit(_blocked_scales(
        "Q4_0", "layers.1.pos_ff.CoreNet.0.weight", (0, 0xfc00))),
        r"CoreNet.0.weight' is Q4_0 with a non-finite scale \(inf\) in "
        r"block 0"),
    "q8_0_scale_nan": (_edit(_blocked_scales(
        "Q8_0", "layers.0.dec_attn.qkv_net.weight", (47, 0xfe01))),
        r"qkv_net.weight' is Q8_0 with a non-finite scale \(NaN\) in "
        r"block 47"),
    "q8_0_scale_inf": (_edit(_blocked_scales(
        "Q8_0", "layers.0.dec_attn.qkv_net.weight", (3, 0x7c00))),
        r"is Q8_0 with a non-finite scale \(inf\)"),
    # a NaN or inf weight makes the logits NaN: refused at load, in every
    # float type, matrices and vectors
    "f32_nan": (_edit(_floats("F32", "layers.0.dec_attn.o_net.weight", 37,
                              0x7fc00000)),
                r"o_net.weight' is F32 with a non-finite value \(NaN\) at "
                r"element 37: a damaged file"),
    "f32_inf_vector": (_edit(_floats("F32", "r_w_bias", 0, 0xff800000)),
                       r"r_w_bias' is F32 with a non-finite value \(inf\) "
                       r"at element 0"),
    "f16_nan": (_edit(_floats("F16", "layers.1.pos_ff.CoreNet.0.weight",
                              1500, 0x7e00)),
                r"CoreNet.0.weight' is F16 with a non-finite value \(NaN\) "
                r"at element 1500"),
    "f16_inf": (_edit(_floats("F16", "layers.0.dec_attn.qkv_net.weight",
                              1, 0xfc00)),
                r"qkv_net.weight' is F16 with a non-finite value \(inf\) "
                r"at element 1"),
    "bf16_nan": (_edit(_floats("BF16", "layers.0.dec_attn.o_net.weight",
                               511, 0xffc1)),
                 r"o_net.weight' is BF16 with a non-finite value \(NaN\) "
                 r"at element 511"),
    "bf16_inf": (_edit(_floats("BF16", "layers.1.pos_ff.CoreNet.3.weight",
                               7, 0x7f80)),
                 r"CoreNet.3.weight' is BF16 with a non-finite value "
                 r"\(inf\) at element 7"),
    # shapes
    "shape_transposed": (_edit(_transposed), r"shape|expected"),
    "shape_rank": (_edit(_reshaped), r"shape|expected|dimension"),
    "tensor_missing": (_edit(_missing_tensor),
                       r"layers\.1\.pos_ff\.CoreNet\.3\.bias"),
    # offsets
    "offsets_beyond_end": (_edit(_beyond_end), OFFS),
    "offsets_far": (_edit(_offsets_far), OFFS),
    "offsets_overlap": (_edit(_overlap), r"overlap"),
    "offsets_overlap_partial": (_edit(_overlap_partial),
                                r"overlap|bytes|size|offset"),
    "offsets_reversed": (_edit(_offsets_reversed), r"offset|bytes|size"),
    "offsets_not_numbers": (_edit(_offsets_not_numbers), r"offset"),
    "offsets_size_tokenizer": (_edit(_size_mismatch),
                               r"bytes|size|offset|shape"),
    "offsets_size_weight": (_edit(_size_mismatch_weight),
                            r"bytes|size|offset|shape"),
    # metadata
    "meta_missing": (_edit(_meta("d_inner", None)), r"d_inner"),
    "meta_not_numeric": (_edit(_meta("n_head", "two")), r"n_head"),
    "meta_zero": (_edit(_meta("n_layer", "0")), r"n_layer"),
    "meta_negative": (_edit(_meta("d_model", "-32")), r"d_model"),
    "meta_huge": (_edit(_meta("n_token", "99999999999999999999")),
                  r"n_token"),
    "meta_not_string": (_edit(_meta("n_head", 2)), r"n_head|string"),
    "meta_absent": (_edit(_no_metadata), r"metadata|format"),
    "format_name": (_edit(_meta("format", "gguf")), r"format"),
    "format_missing": (_edit(_meta("format", None)), r"format"),
    "format_version": (_edit(_meta("format_version", "99")), r"version"),
    "attn_type": (_edit(_meta("attn_type", str(len(ATTN_KINDS)))),
                  r"attn_type"),
    # how the checkpoint's code computes
    "layer_norm_eps_text": (_edit(_meta("layer_norm_eps", "small")),
                            r"metadata 'layer_norm_eps' is 'small'"),
    "layer_norm_eps_zero": (_edit(_meta("layer_norm_eps", "0")),
                            r"'layer_norm_eps' is '0', expected a number "
                            r"in \(0, 1\]"),
    "layer_norm_eps_nan": (_edit(_meta("layer_norm_eps", "nan")),
                           r"'layer_norm_eps' is 'nan'"),
    "same_length_mask": (_edit(_meta("same_length_mask", "tensorflow")),
                         r"'same_length_mask' is 'tensorflow', expected "
                         r"'pytorch' or 'tf'"),
    # attn_type 2 wants other tensors than the file's (type 0) ones
    "attn_type_tensors": (_edit(_meta("attn_type", str(ABS_SINUSOID))),
                          r"missing tensor 'layers.0.dec_attn.q_net"),
    # the variants' hyperparameters; the file is attn_type 0
    # with a full softmax, n_token 320, d_model 32, n_head 2, d_head 8
    "max_klen_missing": (_edit(_meta("attn_type", str(REL_LEARNED))),
                         r"metadata lacks 'max_klen'"),
    "max_klen_zero": (_edit(_metas(attn_type=str(ABS_LEARNED),
                                    max_klen="0")),
                      r"metadata 'max_klen' is '0'"),
    "attn3_width": (_edit(_metas(attn_type=str(ABS_LEARNED),
                                  max_klen="16")),
                    r"attn_type 3 needs n_head \* d_head"),
    "attn1_tables": (_edit(_metas(attn_type=str(REL_LEARNED),
                                   max_klen="16")),
                     r"missing tensor 'r_emb'"),
    # the adaptive span (attn_type 4): its metadata, then its tensors
    "attn_span_missing": (_edit(_meta("attn_type", str(ADAPTIVE_SPAN))),
                          r"metadata lacks 'attn_span'"),
    "span_ramp_zero": (_edit(_metas(attn_type=str(ADAPTIVE_SPAN),
                                    attn_span="64",
                                    span_ramp="0")),
                       r"metadata 'span_ramp' is '0'"),
    "span_same_length": (_edit(_metas(attn_type="4", attn_span="64",
                                      span_ramp="32", same_length="true")),
                         r"neither same_length nor clamp_len"),
    "span_tables": (_edit(_metas(attn_type="4", attn_span="64",
                                 span_ramp="32")),
                    r"missing tensor 'key_pe'"),
    "cutoffs_unsorted": (_edit(_meta("cutoffs", "[100, 50]")),
                         r"cutoffs 100 and 50 are not increasing"),
    "cutoffs_equal": (_edit(_meta("cutoffs", "[100, 100]")),
                      r"cutoffs 100 and 100 are not increasing"),
    "cutoffs_zero": (_edit(_meta("cutoffs", "[0, 100]")),
                     r"'cutoffs'.*entry 0 is not an integer in range"),
    "cutoffs_n_token": (_edit(_meta("cutoffs", "[100, 320]")),
                        r"'cutoffs'.*entry 1 is not an integer in range"),
    "cutoffs_fraction": (_edit(_meta("cutoffs", "[100.5]")),
                         r"'cutoffs'.*entry 0 is not an integer"),
    "cutoffs_not_list": (_edit(_meta("cutoffs", "100")),
                         r"'cutoffs' is '100', expected a JSON list"),
    "cutoffs_too_many": (_edit(_meta("cutoffs", json.dumps(
        list(range(10, 170, 10))))), r"'cutoffs' has more than 15"),
    "cutoffs_tensors": (_edit(_metas(cutoffs="[100]",
                                     tie_projs="[false, false]")),
                        r"missing tensor 'crit.cluster_weight'"),
    "tie_projs_length": (_edit(_meta("tie_projs", "[false, true]")),
                         r"tie_projs has 2 entries, expected one per "
                         r"cluster \(1\)"),
    "tie_projs_not_bool": (_edit(_meta("tie_projs", "[0]")),
                           r"'tie_projs'.*entry 0 is not true or false"),
    "div_val_zero": (_edit(_meta("div_val", "0")), r"'div_val' is '0'"),
    "div_val_no_dims": (_edit(_metas(div_val="64", cutoffs="[100]",
                                     tie_projs="[false, false]")),
                        r"div_val 64 leaves cluster 1 .* no dimension"),
    "div_val_tensors": (_edit(_meta("div_val", "2")),
                        r"missing tensor 'word_emb.emb_projs.0'"),
    # tokenizer
    "vocab_mismatch": (_vocab_mismatch,
                       r"vocab|n_token|piece|tokenizer"),
    # the message must say that the tokenizer is bad, in words (the
    # source file name of SentencePiece does not count)
    "tokenizer_garbage": (_garbage_tokenizer,
                          r"tokenizer|sentencepiece model"),
    "tokenizer_missing": (_edit(lambda h, d: h.__setitem__(
        "__pad__.997", h.pop("tokenizer.model") | {"dtype": "U8"})),
        r"tokenizer"),
    # a malformed normalisation table in the tokenizer proto: refused at
    # load, never handed to SentencePiece
    "charsmap_root_far": (_charsmap(_set_unit(0, _root_far)),
                          r"tokenizer.*normali[sz]ation table.*root"),
    "charsmap_trie_size": (_charsmap(lambda cm: struct.pack(
        "<I", len(cm)) + cm[4:]), r"normali[sz]ation table.*trie size"),
    "charsmap_truncated": (_charsmap(lambda cm: cm[:3]),
                           r"normali[sz]ation table.*truncated"),
    "charsmap_no_strings": (_charsmap(_no_strings),
                            r"normali[sz]ation table.*rule"),
    # a string quoted from the file (here a dtype holding a newline and a
    # terminal escape) must not break the one-line error
    "dtype_control_chars": (_edit(_dtype("F32\n\x1b[2J")), r"dtype|type"),
    "meta_duplicate": (_duplicate_meta, r"duplicate metadata 'n_layer'"),
    "stray_layer_tensor": (_edit(_stray_layer_tensor),
                           r"unexpected tensor 'layers.0.dec_attn.q_net"),
}


def setUpModule():
    global _tmp, _valid, _text
    if TXLGEN is None:
        raise unittest.SkipTest("no txlgen binary (set TXLGEN)")
    if not os.access(TXLGEN, os.X_OK):
        raise RuntimeError(f"TXLGEN={TXLGEN} is not an executable")
    _tmp = tempfile.mkdtemp(prefix="txl-badfiles-")
    _valid = mrm.build(os.path.join(_tmp, "model"), n_layer=2, d_model=32,
                       n_head=2, d_head=8, d_inner=48)
    shutil.copy(_valid.path, os.path.join(_tmp, "valid.bin"))
    _text = os.path.join(_tmp, "text.txt")
    with open(_text, "w") as f:
        f.write("hello world, this is a short text to score.\n")


def tearDownModule():
    if _tmp:
        shutil.rmtree(_tmp, ignore_errors=True)


def run(argv, timeout=60):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    env.pop("TXLGEN_MODEL", None)
    return subprocess.run(argv, capture_output=True, timeout=timeout,
                          env=env, stdin=subprocess.DEVNULL)


def commands(model):
    return ([TXLGEN, "--model", model, "--text", "hello", "-n", "1",
             "--seed", "1"],
            [TXLGEN, "--model", model, "--score", _text])


class TestBadFiles(unittest.TestCase):
    def check_rejected(self, path, phrase, timeout=60):
        for argv in commands(path):
            cmd = " ".join(argv[1:])
            try:
                r = run(argv, timeout)
            except subprocess.TimeoutExpired:
                self.fail(f"{cmd}: still running after {timeout} s")
            err = r.stderr.decode(errors="replace")
            self.assertGreaterEqual(r.returncode, 0,
                                    f"{cmd}: killed by signal "
                                    f"{-r.returncode}\n{err}")
            self.assertEqual(r.returncode, EXIT_BADMODEL,
                             f"{cmd}: exit status {r.returncode}\n{err}")
            self.assertEqual(r.stdout, b"", f"{cmd}: wrote to stdout")
            lines = err.splitlines()
            self.assertEqual(len(lines), 1, f"{cmd}: stderr is not one "
                             f"line:\n{err}")
            self.assertIn(path, lines[0], f"{cmd}: error does not name "
                          "the file")
            # the phrase must be in what the message says, not in the
            # file name (the corpus names files after their defect)
            said = lines[0].replace(path, "")
            self.assertTrue(re.search(phrase, said, re.I),
                            f"{cmd}: error {lines[0]!r} does not match "
                            f"/{phrase}/")
        return lines[0]

    def test_valid_file_loads(self):
        for argv in commands(_valid.path):
            r = run(argv)
            self.assertEqual(r.returncode, 0,
                             f"{' '.join(argv)}: {r.stderr.decode()}")

    def test_corpus(self):
        with open(_valid.path, "rb") as f:
            blob = f.read()
        header, data = split(blob)
        seen = []
        for name, (make, phrase) in CASES.items():
            with self.subTest(case=name):
                path = os.path.join(_tmp, f"bad-{name}.bin")
                with open(path, "wb") as f:
                    f.write(make(blob, header, data))
                seen.append(f"{name}: {self.check_rejected(path, phrase)}")
        if os.environ.get("TXL_BADFILES_REPORT"):
            print("\n" + "\n".join(seen), file=sys.stderr)

    def test_directory(self):
        self.check_rejected(_tmp, r"director|regular file|not a file")

    def test_fifo(self):
        # opened before it was checked, a FIFO without a writer made
        # txlgen wait forever
        fifo = os.path.join(_tmp, "model.fifo")
        os.mkfifo(fifo)
        self.check_rejected(fifo, r"not a regular file \(a FIFO\)",
                            timeout=20)

    def test_device(self):
        self.check_rejected("/dev/zero", r"not a regular file \(a "
                            r"character device\)", timeout=20)

    def test_nonexistent(self):
        self.check_rejected(os.path.join(_tmp, "no-such-model.bin"),
                            r"no such file|not found|does not exist")


class TestOverflow(unittest.TestCase):
    """Finite weights whose products overflow (a BF16 matrix at its
    largest magnitude, the signs mixed so that no sum cancels): no weight
    to refuse at load, but logits NaN or inf.
    Generation (greedy, sampled, --ignore-eos), --score and --kl-ref
    (the file either side) stop with one line naming the file, exit 1,
    and never print nan as a result."""

    def test_overflow_is_an_error(self):
        with open(_valid.path, "rb") as f:
            blob = f.read()
        header, data = split(blob)
        path = os.path.join(_tmp, "overflow.bin")
        with open(path, "wb") as f:
            f.write(_edit(_floats("BF16", "layers.0.pos_ff.CoreNet.0.weight",
                                  fill=lambda i: 0x7f7f | (i % 3 == 0) <<
                                  15))(blob, header, data))
        gen, score = commands(path)
        for argv in (gen, score, gen + ["--temp", "0"],
                     gen + ["--ignore-eos"],
                     score + ["--kl-ref", _valid.path],
                     commands(_valid.path)[1] + ["--kl-ref", path]):
            with self.subTest(argv=argv[3:]):
                r = run(argv)
                err = r.stderr.decode(errors="replace")
                self.assertEqual(r.returncode, 1, err)
                self.assertNotIn(b"nan", r.stdout.lower())
                lines = err.splitlines()
                self.assertEqual(len(lines), 1, err)
                self.assertIn(path, lines[0])
                self.assertIn("the model produced non-finite values",
                              lines[0])


class TestQ4K(unittest.TestCase):
    """Q4_K's blocks (128 values in 72 bytes: a half scale d, the
    sub-blocks' 6-bit scales and zero points, the values) in a model whose
    rows are a multiple of 128 long: it loads and scores; a non-finite or
    negative d, or a tensor a block short, is refused by txlgen and by
    loadable.py alike."""
    NAME = "layers.0.pos_ff.CoreNet.0.weight"

    def test_q4_k_blocks(self):
        from txlgen import loadable
        m = mrm.build(os.path.join(_tmp, "model-128"), n_layer=1,
                      d_model=128, n_head=2, d_head=64, d_inner=128)
        good = os.path.join(_tmp, "q4_k.bin")
        txlfile.restore(m.path, good, "Q4_K")
        for argv in commands(good):
            r = run(argv + ["--json"])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertNotIn(b"nan", r.stdout.lower())
        with open(good, "rb") as f:
            header, data = split(f.read())
        t = header[self.NAME]
        self.assertEqual(t["dtype"], "Q4_K")
        b, e = t["data_offsets"]
        self.assertEqual(e - b, 128 * 128 // 128 * 72)
        cases = {
            "nan": (5, 0x7e00, r"is Q4_K with a non-finite scale \(NaN\) "
                    r"in block 5"),
            "inf": (0, 0xfc00, r"is Q4_K with a non-finite scale \(inf\) "
                    r"in block 0"),
            "negative": (127, 0xb800, r"is Q4_K with a scale out of range "
                         r"in block 127"),
        }
        for name, (blk, d, phrase) in cases.items():
            with self.subTest(case=name):
                o = b + 72 * blk
                bad = data[:o] + struct.pack("<H", d) + data[o + 2:]
                path = os.path.join(_tmp, f"bad-q4_k-{name}.bin")
                with open(path, "wb") as f:
                    f.write(assemble(header, bad))
                self.check(path, phrase)
        # a block short: the tensor's bytes do not match its shape
        h = json.loads(json.dumps(header))
        h[self.NAME]["data_offsets"] = [b, e - 72]
        h["__pad__.997"] = {"dtype": "U8", "shape": [72],
                            "data_offsets": [e - 72, e]}
        path = os.path.join(_tmp, "bad-q4_k-short.bin")
        with open(path, "wb") as f:
            f.write(assemble(h, data))
        TestBadFiles.check_rejected(self, path, r"CoreNet.0.weight' has "
                                    r"9144 bytes, its shape and dtype need "
                                    r"9216")
        with self.assertRaisesRegex(txlfile.ModelFileError, r"9144 bytes"):
            txlfile.check_file(path)

    def check(self, path, phrase):
        TestBadFiles.check_rejected(self, path, phrase)
        from txlgen import loadable
        with self.assertRaisesRegex(loadable.NotLoadable, phrase):
            txlfile.check_file(path)


class TestValidVariants(unittest.TestCase):
    def test_finite_block_scales_load(self):
        """The files of the q*_scale_* cases with every scale finite
        load and generate: what they are refused for is the scale."""
        with open(_valid.path, "rb") as f:
            blob = f.read()
        header, data = split(blob)
        for dtype in ("Q4_0", "Q8_0"):
            path = os.path.join(_tmp, f"finite-{dtype}.bin")
            with open(path, "wb") as f:
                f.write(_edit(_blocked_scales(
                    dtype, "layers.0.dec_attn.qkv_net.weight"))(
                        blob, header, data))
            for argv in commands(path):
                r = run(argv + ["--json"])
                self.assertEqual(r.returncode, 0,
                                 f"{dtype}: {r.stderr.decode()}")
                self.assertNotIn(b"null", r.stdout)
                self.assertNotIn(b"nan", r.stdout.lower())

    def test_unaligned_file_scores_the_same(self):
        """A safetensors file as other tools write it (no alignment, no
        padding tensors) is valid; the library copies what it cannot map
        in place and gives the same numbers."""
        with open(_valid.path, "rb") as f:
            blob = unaligned(f.read())
        (n,) = struct.unpack("<Q", blob[:8])
        self.assertNotEqual((8 + n) % 4, 0, "test file is aligned anyway")
        path = os.path.join(_tmp, "unaligned.bin")
        with open(path, "wb") as f:
            f.write(blob)
        ids = os.path.join(_tmp, "ids.txt")
        with open(ids, "w") as f:
            f.write(" ".join(map(str, mrm.random_ids(40, 320, 5))))
        # compared exactly: the same computation on the same bytes, only
        # held elsewhere (the copy is 64-byte aligned like the mapping),
        # so OpenBLAS runs the same kernels in the same order
        outs = []
        for model in (_valid.path, path):
            r = run([TXLGEN, "--model", model, "--score", ids, "--ids",
                     "--json", "--seg-len", "4"])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            outs.append(r.stdout)
        self.assertEqual(outs[0], outs[1])


if __name__ == "__main__":
    unittest.main()
