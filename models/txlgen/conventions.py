"""The model's conventions, said once for the Python side: the attention
kinds (enum txl_attn_type of lib/include/txl.h, with what each one is),
how the code that wrote a model computes (LayerNorm epsilon, the
same_length mask, how the memory starts) and the storage types, read
from lib/'s one list of them (TXL_DTYPES of txl-dtype.h) rather than
copied.  Standard library only, and nothing read at import: the ctypes
binding (api.py) and the torch-free converter both use it.
tests/test_conventions.py holds it to the C side.
"""

import glob
import os
import re
from typing import NamedTuple


# ---------------------------------------------------------------------------
# The attention kinds

class AttnKind(NamedTuple):
    number: int          # attn_type: the model file's, enum txl_attn_type's
    name: str            # TXL_ATTN_<NAME> in upper case
    relative: bool       # positions as distances in every layer (else
                         # absolute positions added to the inputs)
    memory: bool         # sessions keep a memory of past states; else they
                         # recompute a window (no mem_len, no same_length)
    sinusoid: bool       # positions are sinusoids (else learned tables)
    position_table: bool  # learned tables of max_klen rows (recorded)
    adaptive_span: bool  # each head learns its span (attn_span, span_ramp)
    origin: str          # the code that builds it (one of ORIGINS)


# Where checkpoints come from (a model file's metadata origin): the code
# whose computation the model file reproduces.  "pytorch" is
# kimiyoung/transformer-xl's MemTransformerLM, "tensorflow" the same
# authors' TF code, "huggingface" its port (TransfoXLLMHeadModel),
# "adaptive-span" facebookresearch's TransformerSeq, "dwdb"
# dwdb/transformer-xl (TF 2 Keras).
ORIGINS = ("pytorch", "huggingface", "tensorflow", "adaptive-span", "dwdb")

ATTN_KINDS = (
    AttnKind(0, "rel_partial", True, True, True, False, False,
             "pytorch"),
    AttnKind(1, "rel_learned", True, True, False, True, False,
             "pytorch"),
    AttnKind(2, "abs_sinusoid", False, False, True, False, False,
             "pytorch"),
    AttnKind(3, "abs_learned", False, False, False, True, False,
             "pytorch"),
    AttnKind(4, "adaptive_span", True, True, False, False, True,
             "adaptive-span"),
)
REL_PARTIAL, REL_LEARNED, ABS_SINUSOID, ABS_LEARNED, ADAPTIVE_SPAN = \
    (k.number for k in ATTN_KINDS)

# the numbers of the kinds with a property
ORIGINAL_KINDS = tuple(k.number for k in ATTN_KINDS
                       if k.origin == "pytorch")
MEMORY_KINDS = tuple(k.number for k in ATTN_KINDS if k.memory)
NO_MEMORY_KINDS = tuple(k.number for k in ATTN_KINDS if not k.memory)
TABLE_KINDS = tuple(k.number for k in ATTN_KINDS if k.position_table)
SINUSOID_KINDS = tuple(k.number for k in ATTN_KINDS if k.sinusoid)


def attn_kind(number):
    """The AttnKind of attn_type @number; ValueError for none."""
    for k in ATTN_KINDS:
        if k.number == number and type(number) is int:
            return k
    raise ValueError(f"attn_type {number!r} is no attention kind "
                     f"(0 to {ATTN_KINDS[-1].number})")


# ---------------------------------------------------------------------------
# How the code that wrote a model computes

# The LayerNorm epsilon of each origin: nn.LayerNorm's 1e-5 (the PyTorch
# code, the adaptive-span code, and Hugging Face's TransfoXLConfig where
# its config has no layer_norm_epsilon), TensorFlow's
# tf.contrib.layers.layer_norm 1e-12, dwdb's Keras LayerNormalization
# 1e-6.  A model file records layer_norm_eps only where it is not the
# default (the loader's: txl-model.c).
LAYER_NORM_EPS = {"pytorch": 1e-5, "huggingface": 1e-5, "tensorflow": 1e-12,
                  "adaptive-span": 1e-5, "dwdb": 1e-6}
DEFAULT_LAYER_NORM_EPS = LAYER_NORM_EPS["pytorch"]

# The same_length mask: "tf" (the TensorFlow code's): a query sees the
# last mem_len + 1 positions, itself included; "pytorch": the last mem_len.
SAME_LENGTH_MASKS = ("pytorch", "tf")
DEFAULT_SAME_LENGTH_MASK = "pytorch"

# How a session's memory starts (enum txl_mem_init): "empty" (the PyTorch
# code's), or "zeros": mem_len zero states (the TF evaluation's init_mems,
# and always for an adaptive-span model).
MEM_INITS = {"empty": 0, "zeros": 1}
DEFAULT_MEM_INIT = "empty"
# Origins whose code starts the evaluation's memory as mem_len zero
# states (the TF code's evaluation, Hugging Face's init_mems): their
# model files recommend mem_init zeros.
ZERO_MEMORY_ORIGINS = ("huggingface", "tensorflow")


# ---------------------------------------------------------------------------
# The storage types: lib/'s list

# lib/'s headers: the copy in the package that pip installs
# (models/setup.py), the one that meson installs beside the package
# (libexecdir/txlgen/{txlgen,lib}: models/meson.build), or lib/ of the
# source tree (models/txlgen/ is two folders below it)
_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_PARENT = os.path.dirname(_PACKAGE)
LIB = next((d for d in (os.path.join(_PACKAGE, "lib"),
                        os.path.join(_PACKAGE_PARENT, "lib"),
                        os.path.join(os.path.dirname(_PACKAGE_PARENT), "lib"))
            if glob.glob(os.path.join(d, "**", "txl-limits.h"),
                         recursive=True)),
           os.path.join(os.path.dirname(_PACKAGE_PARENT), "lib"))


def header(name, lib=LIB):
    """The path of header @name in lib/ (its layer folder in the source
    tree, lib/ itself where the headers are installed)."""
    found = glob.glob(os.path.join(lib, "**", name), recursive=True)
    return found[0] if found else os.path.join(lib, name)


# the X-macro list of txl-dtype.h (lib/dtype-enum.py writes enum txl_dtype
# from it): X(NAME, number)
_DTYPE_LIST = re.compile(r"#\s*define\s+TXL_DTYPES\(X\)"
                         r"((?:[^\n]*\\\n)*[^\n]*)")
_DTYPE_ENTRY = re.compile(r"\bX\(\s*([A-Z0-9_]+)\s*,\s*([0-9]+)\s*\)")
_dtypes = {}


class ConventionError(OSError):
    """lib/'s list of types is missing or unreadable."""


def storage_types(lib=LIB):
    """((name, number), ...) of the storage types in the order of their
    numbers, as TXL_DTYPES lists them; read once."""
    if lib not in _dtypes:
        path = header("txl-dtype.h", lib)
        try:
            with open(path, encoding="utf-8") as f:
                text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        except OSError as e:
            raise ConventionError(f"{path}: {e.strerror}") from None
        m = _DTYPE_LIST.search(text)
        if not m:
            raise ConventionError(f"{path}: no TXL_DTYPES")
        got = sorted(((n, int(v)) for n, v in
                      _DTYPE_ENTRY.findall(m.group(1))), key=lambda e: e[1])
        if not got:
            raise ConventionError(f"{path}: TXL_DTYPES lists no type")
        _dtypes[lib] = tuple(got)
    return _dtypes[lib]


def dtype_names(lib=LIB):
    """The storage types' names ("F32", "Q8_0", ...) by number."""
    return tuple(n for n, _ in storage_types(lib))


# the one type that holds bytes, not numbers: the tokenizer's and the
# padding (txl_dtype_uses() 0)
BYTES_TYPE = "U8"


def number_types(lib=LIB):
    """The storage types that hold numbers: all but BYTES_TYPE."""
    return tuple(n for n in dtype_names(lib) if n != BYTES_TYPE)
