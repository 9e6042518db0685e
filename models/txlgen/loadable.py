"""What txlgen's loader accepts, for the writer to refuse what it would
refuse: txlfile.write() checks every file against it before writing, so
that a file the converter writes is a file txlgen loads.

The rules are the loader's (lib/model/txl-file.c: the container;
txl-params.c: the hyperparameters; txl-bind.c: every tensor they call
for; txl-tokenizer.c and txl-spm.cc: the tokenizer), in the same order
and with the same messages; the limits are not copied but read from
lib/'s headers (the TXL_ integer macros, lib/base/txl-limits.h among
them), so that both sides keep one list.  tests/test_loadable.py holds
the two to each other: every broken model file of tests/test_badfiles.py
is refused by both, converted files at the limits load, and files one
step past them are refused by both.
"""

import ast
import glob
import json
import os
import re

from . import conventions, proto
from .conventions import (ABS_LEARNED, ADAPTIVE_SPAN, ATTN_KINDS, REL_LEARNED,
                          REL_PARTIAL, attn_kind,
                          DEFAULT_LAYER_NORM_EPS, DEFAULT_SAME_LENGTH_MASK,
                          LIB, SAME_LENGTH_MASKS, TABLE_KINDS)
from .errors import InputError

# The file format's name and version in the metadata of every model file
FORMAT = "txlgen-model"
# 2: emb_scale and proj_same_dim (hparams.V2_HPARAMS); a reader of 2
# reads 1
FORMAT_VERSION = 2

INT32_MAX, INT_MIN = (1 << 31) - 1, -(1 << 31)


class NotLoadable(InputError):
    pass


# ---------------------------------------------------------------------------
# The limits, from lib/'s headers

_DEFINE = re.compile(r"^\s*#\s*define\s+(TXL_[A-Z0-9_]+)[ \t]+(.*?)\s*"
                     r"(?:/\*.*)?$")


def _evaluate(expr, known):
    """An integer expression of a #define: numbers (with u/l suffixes),
    ( ), <<, >>, *, /, +, - and names already known; None if it is
    anything else (a string, a float, a function-like macro...)."""
    expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*\b", r"\1", expr)
    try:
        tree = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None
    ops = {ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
           ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
           ast.Div: lambda a, b: a // b, ast.Add: lambda a, b: a + b,
           ast.Sub: lambda a, b: a - b}

    def ev(n):
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.Name) and n.id in known:
            return known[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        raise ValueError
    try:
        return ev(tree)
    except (ValueError, ZeroDivisionError):
        return None


def header(lib, name):
    """The path of header @name in lib/ (conventions.header)."""
    return conventions.header(name, lib)


def read_limits(lib=LIB):
    """{name: value} of the TXL_ integer macros of lib/'s headers (in its
    layer folders, or side by side where they are installed)."""
    paths = sorted(glob.glob(os.path.join(lib, "**", "*.h"), recursive=True))
    if not any(p.endswith("txl-limits.h") for p in paths):
        raise NotLoadable(f"{lib}/txl-limits.h not found: the loader's "
                          "limits are read from txlgen's source tree")
    defines = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for line in f:
                m = _DEFINE.match(line)
                if m:
                    defines.append((m.group(1), m.group(2), p))
    known = {}
    # names may use names of other headers: evaluate until nothing changes
    for _ in range(len(defines)):
        more = False
        for name, expr, p in defines:
            v = _evaluate(expr, known)
            if v is None:
                continue
            if name in known and known[name] != v:
                raise NotLoadable(f"{p}: {name} defined twice, differently")
            if name not in known:
                known[name] = v
                more = True
        if not more:
            break
    return known


_types = None


def storage_types(lib=LIB):
    """{name: (values per block, bytes per block)} of the storage types,
    in the order of their numbers: lib/'s list (conventions.dtype_names)
    and each type's TXL_<NAME>_BLOCK and TXL_<NAME>_BYTES; read once."""
    global _types
    if _types is None or lib != LIB:
        try:
            names = conventions.dtype_names(lib)
        except conventions.ConventionError as e:
            raise NotLoadable(str(e))
        known = limits() if lib == LIB else read_limits(lib)
        got = {}
        for name in names:
            size = [known.get(f"TXL_{name}_{w}") for w in ("BLOCK", "BYTES")]
            if None in size:
                raise NotLoadable(f"{lib}: no TXL_{name}_BLOCK or "
                                  f"TXL_{name}_BYTES in the headers")
            got[name] = tuple(size)
        if lib != LIB:
            return got
        _types = got
    return _types


def number_types():
    """The storage types that hold numbers (conventions.number_types)."""
    return [n for n in storage_types() if n != conventions.BYTES_TYPE]


def _names(names):
    """'A, B or C', as the loader lists types (txl_dtype_names())."""
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 \
        else "".join(names)


NEEDED = ("TXL_MAX_HEADER TXL_MAX_DIM TXL_MAX_TOKENS TXL_MAX_LAYERS "
          "TXL_MAX_HEADS TXL_MAX_KLEN TXL_MAX_SPAN TXL_MAX_PIECE_BYTES TXL_MAX_CLUSTERS "
          "TXL_SEG_LEN_MAX TXL_MAX_DIMS TXL_QK").split()
_limits = None


def limits():
    """The loader's limits (read once): TXL_MAX_DIM ... as in lib/."""
    global _limits
    if _limits is None:
        got = read_limits()
        missing = [n for n in NEEDED if n not in got]
        if missing:
            raise NotLoadable(f"{LIB}: no {', '.join(missing)} in the "
                              "headers")
        _limits = got
    return _limits


# ---------------------------------------------------------------------------
# The hyperparameters (txl-params.c, txl_model_read_hparams)

_STRTOL = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")


def _int(meta, key, lo, hi):
    s = meta.get(key)
    if s is None:
        raise NotLoadable(f"metadata lacks '{key}'")
    if not _STRTOL.fullmatch(s) or not lo <= int(s) <= hi:
        raise NotLoadable(f"metadata '{key}' is '{s[:40]}', expected an "
                          f"integer in [{lo}, {hi}]")
    return int(s)


def _bool(meta, key):
    s = meta.get(key)
    if s is None:
        raise NotLoadable(f"metadata lacks '{key}'")
    if s not in ("true", "1", "false", "0"):
        raise NotLoadable(f"metadata '{key}' is '{s[:40]}', expected true "
                          "or false")
    return s in ("true", "1")


def _list(meta, key, bools, lo, hi, most):
    s = meta.get(key)
    if s is None:
        return []
    try:
        v = json.loads(s)
    except (ValueError, RecursionError):
        v = None
    if not isinstance(v, list):
        raise NotLoadable(f"metadata '{key}' is '{s[:40]}', expected a JSON "
                          f"list of {'true/false' if bools else 'integers'}")
    if len(v) > most:
        raise NotLoadable(f"metadata '{key}' has more than {most} entries")
    for k, x in enumerate(v):
        ok = isinstance(x, bool) if bools else \
            (isinstance(x, (int, float)) and not isinstance(x, bool) and
             lo <= x <= hi and x == int(x))
        if not ok:
            raise NotLoadable(f"metadata '{key}' is '{s[:40]}': entry {k} "
                              f"is not {'true or false' if bools else 'an integer in range'}")
    return [x if bools else int(x) for x in v]


def hparams(meta):
    """The hyperparameters the loader reads from a file's metadata
    (strings), checked as it checks them."""
    L = limits()
    fmt = meta.get("format")
    if fmt != "txlgen-model":
        said = f"'{fmt[:40]}'" if fmt is not None else "missing"
        raise NotLoadable(f"not a txlgen model (metadata 'format' is "
                          f"{said}, expected 'txlgen-model'); convert "
                          "checkpoints with models/convert.py")
    version = _int(meta, "format_version", 0, 2 ** 31 - 1)
    if not 1 <= version <= FORMAT_VERSION:
        raise NotLoadable(f"format version {version}, this txlgen reads "
                          f"versions 1 to {FORMAT_VERSION}")
    hp = {}
    for key, lo, hi in (("n_token", 1, L["TXL_MAX_TOKENS"]),
                        ("n_layer", 1, L["TXL_MAX_LAYERS"]),
                        ("n_head", 1, L["TXL_MAX_HEADS"]),
                        ("d_model", 1, L["TXL_MAX_DIM"]),
                        ("d_head", 1, L["TXL_MAX_DIM"]),
                        ("d_inner", 1, L["TXL_MAX_DIM"]),
                        ("d_embed", 1, L["TXL_MAX_DIM"]),
                        ("tgt_len", 1, L["TXL_SEG_LEN_MAX"]),
                        ("mem_len", 0, L["TXL_MAX_DIM"]),
                        ("clamp_len", INT_MIN, L["TXL_MAX_DIM"])):
        hp[key] = _int(meta, key, lo, hi)
    for key in ("same_length", "pre_lnorm", "tie_weight"):
        hp[key] = _bool(meta, key)
    if hp["n_head"] * hp["d_head"] > L["TXL_MAX_DIM"]:
        raise NotLoadable("n_head * d_head is too large")
    hp["untie_r"] = _bool(meta, "untie_r") if "untie_r" in meta else False
    # the attention
    hp["attn_type"] = _int(meta, "attn_type", ATTN_KINDS[0].number,
                           ATTN_KINDS[-1].number)
    hp["max_klen"] = 0
    hp["attn_span"] = hp["span_ramp"] = 0
    if hp["attn_type"] == ADAPTIVE_SPAN:
        hp["attn_span"] = _int(meta, "attn_span", 1, L["TXL_MAX_SPAN"])
        hp["span_ramp"] = _int(meta, "span_ramp", 1, L["TXL_MAX_SPAN"])
    if hp["attn_type"] in TABLE_KINDS:
        hp["max_klen"] = _int(meta, "max_klen", 1, L["TXL_MAX_KLEN"])
        if hp["n_layer"] * hp["max_klen"] * hp["n_head"] * hp["d_head"] > \
                INT32_MAX:
            raise NotLoadable(f"max_klen {hp['max_klen']} makes r_emb too "
                              "large")
    if hp["attn_type"] == ABS_LEARNED and \
            hp["n_head"] * hp["d_head"] != hp["d_model"]:
        raise NotLoadable(f"attn_type 3 needs n_head * d_head ({hp['n_head']}"
                          f" x {hp['d_head']}) equal to d_model "
                          f"{hp['d_model']}")
    # the clusters
    nc = L["TXL_MAX_CLUSTERS"]
    hp["div_val"] = _int(meta, "div_val", 1, L["TXL_MAX_DIM"])
    hp["cutoffs"] = _list(meta, "cutoffs", False, 1, hp["n_token"] - 1,
                          nc - 1)
    ties = _list(meta, "tie_projs", True, 0, 0, nc)
    c = hp["cutoffs"]
    for a, b in zip(c, c[1:]):
        if b <= a:
            raise NotLoadable(f"cutoffs {a} and {b} are not increasing")
    if "tie_projs" in meta and len(ties) != len(c) + 1:
        raise NotLoadable(f"tie_projs has {len(ties)} entries, expected "
                          f"one per cluster ({len(c) + 1})")
    hp["tie_projs"] = ties + [False] * (len(c) + 1 - len(ties))
    d = hp["d_embed"]
    for i in range(1, len(c) + 1):
        if hp["div_val"] == 1:
            break
        d //= hp["div_val"]
        if d < 1:
            raise NotLoadable(f"div_val {hp['div_val']} leaves cluster {i} "
                              f"of d_embed {hp['d_embed']} no dimension")
    if hp["attn_type"] == ADAPTIVE_SPAN and \
            (hp["same_length"] or hp["clamp_len"] > 0):
        raise NotLoadable("attn_type 4 (adaptive span) takes neither "
                          "same_length nor clamp_len")
    # how the checkpoint's code computes (txl-params.c, txl_model_read_compute)
    s = meta.get("layer_norm_eps")
    hp["layer_norm_eps"] = DEFAULT_LAYER_NORM_EPS
    if s is not None:
        try:
            v = float(s)
        except ValueError:
            v = None
        if v is None or s != s.strip() or not 0 < v <= 1:
            raise NotLoadable(f"metadata 'layer_norm_eps' is '{s[:40]}', "
                              "expected a number in (0, 1]")
        hp["layer_norm_eps"] = v
    s = meta.get("same_length_mask", DEFAULT_SAME_LENGTH_MASK)
    if s not in SAME_LENGTH_MASKS:
        raise NotLoadable(f"metadata 'same_length_mask' is '{s[:40]}', "
                          "expected 'pytorch' or 'tf'")
    hp["same_length_mask"] = s
    for key, default in (("emb_scale", True), ("proj_same_dim", False)):
        hp[key] = _bool(meta, key) if key in meta else default
    if hp["proj_same_dim"] and hp["div_val"] != 1:
        raise NotLoadable("proj_same_dim is for div_val 1 (with div_val "
                          f"{hp['div_val']} every cluster is projected)")
    if meta.get("ext_len", "0") != "0":
        raise NotLoadable(f"ext_len {meta['ext_len'][:20]} is not supported "
                          "(only 0)")
    # a session with the model's own settings, as txlgen opens one
    # (txl-session.c)
    if hp["same_length"] and hp["mem_len"] == 0:
        raise NotLoadable("same_length with mem_len 0 would mask every "
                          "position")
    if hp["attn_type"] == ABS_LEARNED and hp["tgt_len"] > hp["max_klen"]:
        raise NotLoadable(f"seg_len {hp['tgt_len']} is longer than the "
                          f"model's position table (max_klen "
                          f"{hp['max_klen']})")
    return hp


def meta_value(v):
    """Metadata values are strings: ints as decimal, bools as true/false,
    lists as JSON."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return json.dumps(list(v))
    return str(v)


def sentencepiece():
    """The sentencepiece module, or InputError saying how to install it."""
    try:
        import sentencepiece as spm
    except ImportError:
        raise InputError("tokenizers need SentencePiece's Python module: "
                         "apt-get install python3-sentencepiece")
    return spm


def format_version(values):
    """The version a file of hyperparameters values is written in: 1
    unless it needs what version 2 added."""
    from .hparams import V2_HPARAMS
    return 2 if any(k in values for k in V2_HPARAMS) else 1


def check_hparams(values):
    """hparams() of hyperparameter values (as TxlConfig.hparams() gives
    them) written as the writer writes them."""
    meta = {k: meta_value(v) for k, v in values.items()}
    meta.update(format=FORMAT, format_version=str(format_version(values)))
    return hparams(meta)


# ---------------------------------------------------------------------------
# The tensors the hyperparameters call for (txl-bind.c, txl_model_bind_all)

MATRIX, FLOATS = "matrix", "floats"     # stored in any type; F32/F16/BF16


def tensors(hp):
    """{name: (shape, kind)} of every tensor a file of hp holds, as the
    loader binds them: a weight MATRIX in any storage type, FLOATS in
    F32, F16 or BF16.  Tied tensors are absent."""
    M, E, V = hp["d_model"], hp["d_embed"], hp["n_token"]
    L, H, D, K = hp["n_layer"], hp["n_head"], hp["d_head"], hp["max_klen"]
    HD, inner = H * D, hp["d_inner"]
    c, dv = hp["cutoffs"], hp["div_val"]
    bounds = list(zip([0] + c, c + [V]))
    out = {}
    # the input
    if dv == 1:
        out["word_emb.emb_layers.0.weight"] = ((V, E), MATRIX)
        if E != M or hp.get("proj_same_dim"):
            out["word_emb.emb_projs.0"] = ((M, E), FLOATS)
    else:
        d = E
        for i, (lo, hi) in enumerate(bounds):
            out[f"word_emb.emb_layers.{i}.weight"] = ((hi - lo, d), MATRIX)
            out[f"word_emb.emb_projs.{i}"] = ((M, d), FLOATS)
            d //= dv
    # the output
    if dv == 1:
        if not hp["tie_weight"]:
            out["crit.out_layers.0.weight"] = ((V, E), MATRIX)
        out["crit.out_layers.0.bias"] = ((V,), FLOATS)
    d = E
    for i, (lo, hi) in enumerate(bounds):
        if dv == 1:
            if (E != M or hp.get("proj_same_dim")) and \
                    not hp["tie_projs"][i]:
                out[f"crit.out_projs.{i}"] = ((M, E), FLOATS)
            continue
        if not hp["tie_weight"]:
            out[f"crit.out_layers.{i}.weight"] = ((hi - lo, d), MATRIX)
        out[f"crit.out_layers.{i}.bias"] = ((hi - lo,), FLOATS)
        if not hp["tie_projs"][i]:
            out[f"crit.out_projs.{i}"] = ((M, d), FLOATS)
        d //= dv
    if c:
        out["crit.cluster_weight"] = ((len(c), E), MATRIX)
        out["crit.cluster_bias"] = ((len(c),), FLOATS)
    # the attention, then what every layer has, in the loader's order
    at = hp["attn_type"]
    relative = attn_kind(at).relative
    bias = (L, H, D) if hp["untie_r"] or at == REL_LEARNED else (H, D)
    if at == REL_PARTIAL:
        out["r_w_bias"] = out["r_r_bias"] = (bias, FLOATS)
    elif at == REL_LEARNED:
        out["r_emb"] = ((L, K, H, D), FLOATS)
        out["r_w_bias"] = ((L, H, D), FLOATS)
        out["r_bias"] = ((L, K, H), FLOATS)
    elif at == ABS_LEARNED:
        out["r_emb"] = ((L, K, H, D), FLOATS)
    elif at == ADAPTIVE_SPAN:
        out["key_pe"] = ((1, D, hp["attn_span"]), FLOATS)
    for i in range(L):
        p = f"layers.{i}.dec_attn."
        if relative:
            out[p + "qkv_net.weight"] = ((3 * HD, M), MATRIX)
        if at == ADAPTIVE_SPAN:
            out[p + "current_val"] = ((H,), FLOATS)
        if at == REL_PARTIAL:
            out[p + "r_net.weight"] = ((HD, M), MATRIX)
        if not relative:
            out[p + "q_net.weight"] = ((HD, M), MATRIX)
            out[p + "kv_net.weight"] = ((2 * HD, M), MATRIX)
    for i in range(L):
        p = f"layers.{i}."
        out[p + "dec_attn.o_net.weight"] = ((M, HD), MATRIX)
        out[p + "dec_attn.layer_norm.weight"] = ((M,), FLOATS)
        out[p + "dec_attn.layer_norm.bias"] = ((M,), FLOATS)
        out[p + "pos_ff.CoreNet.0.weight"] = ((inner, M), MATRIX)
        out[p + "pos_ff.CoreNet.0.bias"] = ((inner,), FLOATS)
        out[p + "pos_ff.CoreNet.3.weight"] = ((M, inner), MATRIX)
        out[p + "pos_ff.CoreNet.3.bias"] = ((M,), FLOATS)
        out[p + "pos_ff.layer_norm.weight"] = ((M,), FLOATS)
        out[p + "pos_ff.layer_norm.bias"] = ((M,), FLOATS)
    return out


def check_tensors(hp, specs):
    """specs: {name: (dtype, shape)} of a file: every tensor hp calls for,
    of its shape and a type the loader computes with, and nothing
    else."""
    want = tensors(hp)
    for name, (shape, kind) in want.items():
        if name not in specs:
            raise NotLoadable(f"missing tensor '{name}'")
        dt, got = specs[name]
        if tuple(got) != tuple(shape):
            raise NotLoadable(f"tensor '{name}' has shape {list(got)}, "
                              f"expected {list(shape)}")
        ok = [n for n in number_types()
              if kind != FLOATS or storage_types()[n][0] == 1]
        if dt not in ok:
            raise NotLoadable(f"tensor '{name}' has dtype {dt}, expected "
                              + _names(ok))
    for name, (dt, shape) in sorted(specs.items()):   # as the loader
        if name in want or name == "tokenizer.model":
            continue
        if name.startswith("__pad__.") and dt == "U8" and len(shape) == 1:
            continue
        raise NotLoadable(f"unexpected tensor '{name}' for these "
                          "hyperparameters")


# The bits of a float type's magnitude at which it is NaN or inf
_NONFINITE = {"F32": ("<u4", 0x7fffffff, 0x7f800000),
              "F16": ("<u2", 0x7fff, 0x7c00),
              "BF16": ("<u2", 0x7fff, 0x7f80)}


def check_scales(name, dt, raw):
    """A tensor's bytes: every value of a float type finite, every block's
    F16 scale (its first two bytes) of a block type, as the loader checks
    (txl-bind.c), since one NaN or inf makes the logits NaN."""
    import numpy as np
    if dt in _NONFINITE:
        kind, magnitude, inf = _NONFINITE[dt]
        v = np.frombuffer(raw, dtype=kind,
                          count=len(raw) // np.dtype(kind).itemsize)
        bad = np.flatnonzero((v & magnitude) >= inf)
        if bad.size:
            i = int(bad[0])
            what = "NaN" if v[i] & magnitude > inf else "inf"
            raise NotLoadable(f"tensor '{name}' is {dt} with a non-finite "
                              f"value ({what}) at element {i}: a damaged "
                              "file")
        return
    values, block = storage_types().get(dt, (1, 0))
    if values == 1 or len(raw) < block:
        return
    blocks = np.frombuffer(raw, dtype=np.uint8,
                           count=len(raw) // block * block)
    d = blocks.reshape(-1, block)[:, :2].copy().view("<u2")[:, 0]
    bad = np.flatnonzero((d & 0x7c00) == 0x7c00)
    neg = np.flatnonzero(d & 0x8000) if dt == "Q4_K" else bad[:0]
    if bad.size and (not neg.size or bad[0] <= neg[0]):
        i = int(bad[0])
        kind = "NaN" if d[i] & 0x3ff else "inf"
        raise NotLoadable(f"tensor '{name}' is {dt} with a non-finite "
                          f"scale ({kind}) in block {i}: a damaged file")
    if neg.size:    # Q4_K's scale is not negative (txl_q4_k_block_ok)
        raise NotLoadable(f"tensor '{name}' is {dt} with a scale out of "
                          f"range in block {int(neg[0])}: a damaged file")


# ---------------------------------------------------------------------------
# The tokenizer (txl-spm.cc, txl-tokenizer.c)

def fields(b, num=None):
    """[(field number, wire type, value)] of a protobuf message (the
    value: bytes of a length-delimited field, the value of a varint or a
    fixed field), those of number @num only if given; None if the message
    is malformed (as txl-spm.cc's each_field reads it)."""
    try:
        return [(n, wt, v) for n, wt, v, _ in proto.fields(b)
                if num is None or n == num]
    except proto.ProtoError:
        return None


def charsmap_problem(blob):
    """What is wrong with a precompiled normalisation table (txl-spm.cc,
    Charsmap::check), or None: every base reachable from the root has all
    of B ^ 0 .. B ^ 255 inside the units, every leaf and its value inside,
    each value followed by a NUL in the pool, no loop, no path through
    more than 32 leaves."""
    n_bytes = len(blob)
    if n_bytes == 0:
        return None
    if n_bytes <= 4:
        return "is truncated"
    size = int.from_bytes(blob[:4], "little")
    if size > n_bytes - 4 or size % 4:
        return "has a trie size past its end"
    n = size // 4
    pool = blob[4 + size:]
    last_nul = pool.rfind(b"\0")
    last_nul = len(pool) if last_nul < 0 else last_nul
    if n == 0:
        return "has an empty trie"
    units = [int.from_bytes(blob[4 + 4 * i:8 + 4 * i], "little")
             for i in range(n)]

    def offset(u):
        return (u >> 10) << ((u & (1 << 9)) >> 6)

    def label(u):
        return u & ((1 << 31) | 0xFF)

    root = offset(units[0])
    if (root | 0xFF) >= n:
        return "has a trie root past its end"
    kids = {}
    for p in range(n):
        b = label(units[p])
        if b <= 255 and (p ^ b) < n:
            kids.setdefault(p ^ b, []).append(p)
    state, most = {}, {}
    stack = [[root, 0, 0]]              # base, next kid, most leaves
    state[root] = 1
    while stack:
        f = stack[-1]
        ks = kids.get(f[0], [])
        if f[1] == len(ks):
            done, best = f[0], f[2]
            state[done], most[done] = 2, best
            stack.pop()
            if stack:
                up = stack[-1]
                u = units[kids[up[0]][up[1] - 1]]
                m = best + ((u >> 8) & 1)
                if m > 32:
                    return "has a path of more than 32 rules"
                up[2] = max(up[2], m)
            continue
        p = ks[f[1]]
        f[1] += 1
        u = units[p]
        nxt = p ^ offset(u)
        if (nxt | 0xFF) >= n:
            return "has a trie node past its end"
        if (u >> 8) & 1:
            v = units[nxt] & ((1 << 31) - 1)
            if last_nul == len(pool) or v > last_nul:
                return "has a rule past the end of its strings"
        s = state.get(nxt, 0)
        if s == 1:
            return "has a loop"
        if s == 2:
            m = most[nxt] + ((u >> 8) & 1)
            if m > 32:
                return "has a path of more than 32 rules"
            f[2] = max(f[2], m)
            continue
        state[nxt] = 1
        stack.append([nxt, 0, 0])
    return None


# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6


def _pieces(top):
    """[(piece bytes, type)] of a ModelProto's fields (a proto that
    SentencePiece loaded): for each repeated field 1, its fields 1 and 3,
    the last of each as protobuf reads them."""
    out = []
    for num, wt, v in top:
        if num == 1 and wt == 2:
            piece, ptype = b"", NORMAL
            for n2, w2, v2 in fields(v) or []:
                if n2 == 1 and w2 == 2:
                    piece = bytes(v2)
                elif n2 == 3 and w2 == 0:
                    ptype = v2
            out.append((piece, ptype))
    return out


def tokenizer(meta, n_token, proto):
    """The loader's checks of the SentencePiece model proto with the
    model's vocabulary metadata: its normalisation tables, SentencePiece
    loading it, the vocab_* metadata and the running-text bytes of every
    token (at most TXL_MAX_PIECE_BYTES)."""
    proto = bytes(proto)
    top = fields(proto)
    if top is not None:
        for spec in (3, 5):
            maps = [v for num, wt, v in top if num == spec and wt == 2]
            if maps:
                # protobuf merges repeated messages: the last table wins
                tables = [t for m in maps for t in (fields(m, 2) or [])
                          if t[1] == 2]
                why = charsmap_problem(bytes(tables[-1][2])) \
                    if tables else None
                if why:
                    raise NotLoadable("tensor 'tokenizer.model': its "
                                      "normalisation table (precompiled "
                                      f"charsmap) {why}")
    sp = sentencepiece().SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(proto)
    except Exception:                    # noqa: BLE001 (any parse failure)
        raise NotLoadable("tensor 'tokenizer.model' is not a valid "
                          "SentencePiece model")
    n = sp.GetPieceSize()
    kind, nl, unk = (meta.get("vocab_kind"), meta.get("vocab_newline"),
                     meta.get("vocab_unk"))
    eos, word = -1, False
    if kind is None and nl is None and unk is None:
        if n != n_token:
            raise NotLoadable(f"tokenizer has {n} pieces, the model "
                              f"n_token {n_token}")
    else:
        if kind not in ("word", "char"):
            raise NotLoadable("metadata 'vocab_kind' must be word or char")
        word = kind == "word"
        if nl not in ("eos", "double_eos", "drop", "strip_eos"):
            raise NotLoadable("metadata 'vocab_newline' must be eos, "
                              "double_eos, drop or strip_eos")
        if unk not in ("piece", "none"):
            raise NotLoadable("metadata 'vocab_unk' must be piece or none")
        if (n <= n_token or n > n_token + 257 or sp.unk_id() < n_token) \
                if unk == "none" else n != n_token:
            raise NotLoadable(f"tokenizer has {n} pieces, the model n_token "
                              f"{n_token} (vocab_unk {unk})")
        if nl in ("eos", "double_eos", "strip_eos"):
            eos = sp.eos_id()
            if not 0 <= eos < n_token:
                raise NotLoadable(f"vocab_newline {nl} but the tokenizer "
                                  "has no end-of-line control piece")
    pieces = _pieces(top)
    cap = limits()["TXL_MAX_PIECE_BYTES"]
    total = 0
    for i in range(n_token):
        raw, ptype = pieces[i]
        if i == eos:
            k = 1
        elif word and i == sp.unk_id():
            k = 1 + len(raw)
        elif nl == "strip_eos" and ptype in (CONTROL, UNKNOWN):
            k = len(raw)                 # the symbol itself
        elif ptype == CONTROL:
            k = 0
        elif ptype == BYTE:
            k = 1
        elif ptype == UNKNOWN:
            k = 5                        # " \u2047 "
        else:
            k = len(raw.replace("\u2581".encode(), b" "))
        if k > cap:
            raise NotLoadable(f"tokenizer piece {i} is invalid or too long "
                              f"({k} bytes of text, at most {cap})")
        total += k
    if total > 2 ** 32 - 1:
        raise NotLoadable("tokenizer too large")


# ---------------------------------------------------------------------------

def check(meta, specs, proto):
    """Raise NotLoadable unless txlgen loads a file of this metadata
    (strings), these tensors ({name: (dtype, shape)}, the container
    already valid) and this tokenizer."""
    for k, v in meta.items():
        if "\0" in k or "\0" in v:
            raise NotLoadable(f"metadata '{k[:40]}' holds a NUL character "
                              "(the loader would read less of it)")
    hp = hparams(meta)
    check_tensors(hp, specs)
    tokenizer(meta, hp["n_token"], proto)
    return hp
