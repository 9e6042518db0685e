"""txlgen from Python: libtxl's C API (txl.h) through ctypes.

    from txlgen import Model

    m = Model("sotu")                     # a name as txlgen -m takes it
    print(m.generate("Fellow citizens", n=50, seed=1))
    for piece in m.generate("We the people", n=50, stream=True):
        print(piece, end="", flush=True)
    r = m.score(open("speech.txt").read())  # log-probs, bits per byte
    s = m.session()                       # a memory kept between calls
    s.feed("Fellow citizens of the Senate")
    s.generate(n=20, temp=0)
    s.save("state.bin")                   # txlgen --state-in reads it

The numbers are txlgen's: generate() with the same prompt and settings
writes what `txlgen -m MODEL -p PROMPT` writes (without the final newline
txlgen adds to a text that has none), greedy or sampled with the same
seed; the defaults are the model's recommended settings ("recommended" in
its metadata) over txlgen's own, as txlgen applies them.  Its keywords
are txlgen's sampling options (temp, top_k, top_p, min_p, repeat_penalty,
repeat_last_n, frequency_penalty, presence_penalty, typical, mirostat_tau,
mirostat_eta, logit_bias, seed, stop, ignore_eos).  score() is
`txlgen --score FILE --json`: its rows and its summary.

No compiler is needed: the module loads the installed libtxl.so.1 and
declares each function it calls.  It is found, in this order, at
$TXLGEN_LIBTXL (a file), in the source tree's build/lib when this module
runs from txlgen's source tree, in the libdir of the installation this
module was installed with (meson install), and by
ctypes.util.find_library('txl') (the dynamic linker's path, ldconfig).

Threads: the library is loaded with ctypes.CDLL, so the GIL is released
during every call into it (a forward pass, a load): other Python threads
run meanwhile.  A Model may be shared by threads; a Session is used by one
thread at a time, as txl.h says.

Errors are TxlError (the library's one-line message, txl_last_error());
a model name found nowhere is ModelNotFoundError, also a
FileNotFoundError, naming the directories searched.

Only the standard library is needed (no NumPy, no torch).
"""

import ctypes
import ctypes.util
import json
import math
import os
import random
import threading
import warnings

from .conventions import MEM_INITS

__all__ = ["Model", "Session", "TxlError", "ModelNotFoundError",
           "library_path", "model_path", "find_model"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__))

# ------------------------------------------------------------------ #
# Errors


class TxlError(Exception):
    """An error of libtxl (its message, txl_last_error()) or of a
    setting.  .status: the enum txl_status, where the library gave one."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class ModelNotFoundError(TxlError, FileNotFoundError):
    """A model name that is no file and in no directory of the model
    path; the message lists the directories searched."""

    def __init__(self, message):
        TxlError.__init__(self, message)


# ------------------------------------------------------------------ #
# Where things are

def _source_root():
    """txlgen's source tree, when this module runs from it (not an
    installed copy)."""
    if os.path.exists(os.path.join(_PACKAGE, "_installed.py")):
        return None
    root = os.path.dirname(os.path.dirname(_PACKAGE))
    if (os.path.isfile(os.path.join(root, "lib", "include", "txl.h")) and
            os.path.isfile(os.path.join(root, "meson.build"))):
        return root
    return None


def _installed():
    """(libdirs, datadirs) of the installation this module came with:
    from its own place first (an installation moved keeps working), then
    the paths it was configured with; empty when not installed by meson."""
    try:
        from . import _installed as ins
    except ImportError:
        return [], []
    libdirs, datadirs = [], []
    if not os.path.isabs(ins.MODULE_DIR):
        prefix = _PACKAGE
        for _ in ins.MODULE_DIR.strip("/").split("/"):
            prefix = os.path.dirname(prefix)
        for rel, out in ((ins.LIBDIR, libdirs), (ins.DATADIR, datadirs)):
            if not os.path.isabs(rel):
                out.append(os.path.join(prefix, rel))
    for rel, out in ((ins.LIBDIR, libdirs), (ins.DATADIR, datadirs)):
        out.append(rel if os.path.isabs(rel) else
                   os.path.join(ins.PREFIX, rel))
    return libdirs, datadirs


SONAME = "libtxl.so.1"


def _library_candidates():
    env = os.environ.get("TXLGEN_LIBTXL")
    if env:
        return [("$TXLGEN_LIBTXL", env)]
    out = []
    root = _source_root()
    if root:
        lib = os.path.join(root, "build", "lib")
        out.append(("the build tree", os.path.join(lib, SONAME)))
        out.append(("the build tree", os.path.join(lib, "libtxl.so")))
    for d in _installed()[0]:
        out.append(("the installation", os.path.join(d, SONAME)))
    name = ctypes.util.find_library("txl")
    if name:
        out.append(("the dynamic linker", name))
    return out


def library_path():
    """The libtxl this module loads (or would): a path, or a name the
    dynamic linker finds."""
    cands = _library_candidates()
    for what, p in cands:
        if what in ("$TXLGEN_LIBTXL", "the dynamic linker") or \
                os.path.exists(p):
            return p
    tried = ", ".join(p for _, p in cands) or "no candidate"
    raise TxlError(f"libtxl not found (tried {tried}): set TXLGEN_LIBTXL "
                   f"to the path of {SONAME}, or install txlgen")


def _default_data_dirs(lib_file):
    """The data directories with the default model: the source tree's
    models/ (run from it), else the installation's share/txlgen, else
    the share/txlgen beside the libtxl loaded (a pip-installed module
    has no installation of its own)."""
    root = _source_root()
    if root:
        return [os.path.join(root, "models")]
    dirs = _installed()[1]
    if not dirs and lib_file and os.path.isabs(lib_file):
        d = os.path.dirname(os.path.realpath(lib_file))
        for _ in range(3):
            d = os.path.dirname(d)
            share = os.path.join(d, "share", "txlgen")
            if os.path.isdir(share):
                dirs.append(share)
                break
    return dirs


def model_path():
    """The directories a model name is looked for in, in order, as
    txlgen's: $TXLGEN_MODEL_PATH (colon-separated, empty entries
    ignored), the user's models directory ($XDG_DATA_HOME/txlgen/models,
    default ~/.local/share/txlgen/models), then the data directory with
    the default model (see _default_data_dirs)."""
    dirs = []

    def add(d):
        real = os.path.realpath(d) if os.path.exists(d) else d
        if real not in dirs:
            dirs.append(real)

    for d in os.environ.get("TXLGEN_MODEL_PATH", "").split(":"):
        if d:
            add(d)
    xdg, home = os.environ.get("XDG_DATA_HOME"), os.environ.get("HOME")
    if xdg and xdg.startswith("/"):
        add(os.path.join(xdg, "txlgen", "models"))
    elif home:
        add(os.path.join(home, ".local", "share", "txlgen", "models"))
    try:
        lib = _lib().path
    except TxlError:
        lib = None
    for d in _default_data_dirs(lib):
        add(d)
    return dirs


# the names txlgen-get installs (core/models.c's list)
_PUBLISHED = ("wt103", "enwik8", "text8", "enwik8-large", "text8-large",
              "xl-enwik8", "xl-text8", "xl-wt103", "xl-lm1b")


def find_model(spec=None):
    """The file of model @p spec as txlgen -m finds it: a path (anything
    with a '/', or a file that exists), else NAME.bin in the first
    directory of model_path() that has it.  None: $TXLGEN_MODEL, else
    the default model sotu."""
    what = "model"
    if spec is None:
        spec = os.environ.get("TXLGEN_MODEL") or "sotu"
    spec = os.fspath(spec)
    if "/" in spec or os.path.exists(spec):
        return spec
    if os.path.lexists(spec):
        try:
            os.stat(spec)
        except OSError as e:
            raise ModelNotFoundError(f"{what} {spec}: {e.strerror}") from None
    file = spec if len(spec) > 4 and spec.endswith(".bin") else spec + ".bin"
    dirs = model_path()
    for d in dirs:
        p = os.path.join(d, file)
        if os.path.exists(p) and not os.path.isdir(p):
            return p
    where = ", ".join(dirs) or "(no directory)"
    if spec in _PUBLISHED:
        raise ModelNotFoundError(
            f"{what} {spec}: not installed (no {file} in {where}); "
            f"'txlgen-get {spec}' downloads, converts and installs it")
    raise ModelNotFoundError(
        f"{what} {spec}: no such file, nor {file} in {where}; "
        "'txlgen --list-models' lists the installed ones")


# ------------------------------------------------------------------ #
# The C API

TXL_OK, TXL_ABORTED = 0, 1
TXL_LOGITS_NONE, TXL_LOGITS_LAST, TXL_LOGITS_ALL = 0, 1, 2
TXL_LOAD_NO_MMAP = 0x1
TXL_FROM_MODEL = -1
TXL_REPEAT_LAST_N_MAX = 1 << 20
_INT_MAX = 2**31 - 1
# spare room after each params struct the library returns by value, for
# the fields a newer libtxl adds at their end (it writes its own size)
_SPARE = 256

_c_int32_p = ctypes.POINTER(ctypes.c_int32)
_c_float_p = ctypes.POINTER(ctypes.c_float)


class _SessionParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("mem_len", ctypes.c_int),
                ("seg_len", ctypes.c_int), ("clamp_len", ctypes.c_int),
                ("same_length", ctypes.c_int), ("n_threads", ctypes.c_int),
                ("abort_cb", ctypes.c_void_p), ("abort_data", ctypes.c_void_p),
                ("stride", ctypes.c_int), ("kv_type", ctypes.c_int),
                ("mem_init", ctypes.c_int),
                ("_spare", ctypes.c_char * _SPARE)]


class _SamplerParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("temp", ctypes.c_float),
                ("top_k", ctypes.c_int), ("top_p", ctypes.c_float),
                ("min_p", ctypes.c_float), ("repeat_penalty", ctypes.c_float),
                ("repeat_last_n", ctypes.c_int), ("seed", ctypes.c_uint64),
                # since libtxl 1.5
                ("frequency_penalty", ctypes.c_float),
                ("presence_penalty", ctypes.c_float),
                ("typical_p", ctypes.c_float),
                ("mirostat_tau", ctypes.c_float),
                ("mirostat_eta", ctypes.c_float),
                ("logit_bias_ids", ctypes.POINTER(ctypes.c_int32)),
                ("logit_bias", ctypes.POINTER(ctypes.c_float)),
                ("n_logit_bias", ctypes.c_int),
                ("_spare", ctypes.c_char * _SPARE)]


class _HParams(ctypes.Structure):
    _fields_ = ([("size", ctypes.c_size_t)] +
                [(k, ctypes.c_int) for k in (
                    "n_token", "n_layer", "n_head", "d_model", "d_head",
                    "d_inner", "d_embed", "tgt_len", "mem_len", "clamp_len")] +
                [(k, ctypes.c_bool) for k in (
                    "same_length", "pre_lnorm", "tie_weight", "untie_r")] +
                [("attn_type", ctypes.c_int), ("max_klen", ctypes.c_int),
                 ("div_val", ctypes.c_int), ("n_cutoffs", ctypes.c_int),
                 ("cutoffs", ctypes.c_int * 15),
                 ("tie_projs", ctypes.c_bool * 16),
                 ("attn_span", ctypes.c_int), ("span_ramp", ctypes.c_int)])


def _used_size(struct, last):
    f = getattr(struct, last)
    return f.offset + f.size


_P, _I, _S = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
_SIGNATURES = {
    "txl_version": (_S, []),
    "txl_last_error": (_S, []),
    "txl_status_str": (_S, [_I]),
    "txl_model_load_flags": (_I, [_S, ctypes.c_uint, ctypes.POINTER(_P)]),
    "txl_model_free": (None, [_P]),
    "txl_model_hparams": (ctypes.POINTER(_HParams), [_P]),
    "txl_model_n_params": (ctypes.c_int64, [_P]),
    "txl_model_meta": (_S, [_P, _S]),
    "txl_model_has_memory": (ctypes.c_bool, [_P]),
    "txl_model_check_compute": (_I, [_P, _I]),
    "txl_tokenize": (_I, [_P, _S, ctypes.c_size_t, _c_int32_p, _I]),
    "txl_token_piece": (_I, [_P, ctypes.c_int32, _P, ctypes.c_size_t]),
    "txl_detokenize": (_I, [_P, _c_int32_p, _I, _P, ctypes.c_size_t]),
    "txl_token_bos": (ctypes.c_int32, [_P]),
    "txl_token_eos": (ctypes.c_int32, [_P]),
    "txl_token_unk": (ctypes.c_int32, [_P]),
    "txl_dtype_name": (_S, [_I]),
    "txl_dtype_from_name": (_I, [_S]),
    "txl_dtype_uses": (ctypes.c_uint, [_I]),
    "txl_session_params_default": (_SessionParams, []),
    "txl_session_params_resolve": (_I, [_P, ctypes.POINTER(_SessionParams),
                                        ctypes.POINTER(_SessionParams)]),
    "txl_session_new": (_I, [_P, ctypes.POINTER(_SessionParams),
                             ctypes.POINTER(_P)]),
    "txl_session_free": (None, [_P]),
    "txl_session_get_params": (_SessionParams, [_P]),
    "txl_session_set_compute": (_I, [_P, _I]),
    "txl_session_reset": (None, [_P]),
    "txl_session_eval": (_I, [_P, _c_int32_p, _I, _I]),
    "txl_session_skip": (_I, [_P, _c_int32_p, _I]),
    "txl_session_logits": (_c_float_p, [_P]),
    "txl_session_n_logits": (_I, [_P]),
    "txl_session_score": (_I, [_P, _c_int32_p, _I,
                               ctypes.POINTER(ctypes.c_double)]),
    "txl_session_mem_fill": (_I, [_P]),
    "txl_session_n_past": (ctypes.c_int64, [_P]),
    "txl_session_tail_start": (ctypes.c_int64,
                               [_P, ctypes.POINTER(_SessionParams),
                                ctypes.c_int64]),
    "txl_session_save_recent": (_I, [_P, _S, _c_int32_p, _I]),
    "txl_session_load_recent": (_I, [_P, _S, _c_int32_p, _I,
                                     ctypes.POINTER(_I)]),
    "txl_state_mem_len": (_I, [_S, ctypes.POINTER(_I)]),
    "txl_sampler_params_default": (_SamplerParams, []),
    "txl_sampler_new": (_P, [ctypes.POINTER(_SamplerParams), _I]),
    "txl_sampler_free": (None, [_P]),
    "txl_sampler_sample": (ctypes.c_int32, [_P, _c_float_p, _c_float_p]),
    "txl_session_sample": (ctypes.c_int32, [_P, _P, _c_float_p]),
    "txl_sampler_accept": (None, [_P, ctypes.c_int32]),
    "txl_sampler_keep_utf8": (_I, [_P, _P]),
    "txl_logsumexp": (ctypes.c_double, [_c_float_p, _I]),
}


class _Lib:
    """libtxl loaded, every function declared."""

    def __init__(self, path):
        try:
            # CDLL, not PyDLL: the GIL is released during each call
            self.dll = ctypes.CDLL(path)
        except OSError as e:
            raise TxlError(f"{path}: cannot load libtxl: {e}") from None
        self.path = path
        for name, (res, args) in _SIGNATURES.items():
            try:
                f = getattr(self.dll, name)
            except AttributeError:
                raise TxlError(f"{path}: libtxl has no {name} (a newer "
                               "libtxl is needed)") from None
            f.restype, f.argtypes = res, args
            setattr(self, name[4:], f)
        self.version = self.dll.txl_version().decode()
        sp = self.session_params_default()
        if sp.size < _used_size(_SessionParams, "mem_init"):
            raise TxlError(f"{path}: libtxl {self.version}'s session "
                           "settings lack mem_init (1.2 or later needed)")
        smp = self.sampler_params_default()
        if smp.size < _used_size(_SamplerParams, "seed"):
            raise TxlError(f"{path}: libtxl {self.version}: sampler "
                           "settings of another size")
        # the penalties, typical, mirostat and logit_bias (1.5)
        self.sampler_controls = smp.size >= _used_size(_SamplerParams,
                                                       "n_logit_bias")

    def error(self, status, what=None):
        msg = self.last_error()
        msg = msg.decode("utf-8", "replace") if msg else ""
        if not msg:
            s = self.status_str(status)
            msg = s.decode() if s else f"status {status}"
        if what:
            msg = f"{what}: {msg}"
        return TxlError(msg, status)

    def check(self, status, what=None):
        if status != TXL_OK:
            raise self.error(status, what)


_the_lib = None
_lib_lock = threading.Lock()


def _lib():
    global _the_lib
    with _lib_lock:
        if _the_lib is None:
            _the_lib = _Lib(library_path())
    return _the_lib


def _ids_array(ids):
    ids = list(ids)
    return (ctypes.c_int32 * max(len(ids), 1))(*ids), len(ids)


# ------------------------------------------------------------------ #
# Text: how txlgen reads and writes it

_CHUNK_MAX = 1 << 16  # core/input.h INPUT_CHUNK_MAX


def _cut_point(s):
    cut = _CHUNK_MAX
    while cut > 1 and s[cut - 1] not in b" \t":
        cut -= 1
    if cut > 1:
        return cut - 1
    for back in range(1, 5):
        c = s[_CHUNK_MAX - back]
        n = 1 if c >= 0xf8 else 4 if c >= 0xf0 else 3 if c >= 0xe0 else \
            2 if c >= 0xc0 else 1
        if (c & 0xc0) != 0x80:
            return _CHUNK_MAX - back if n > back else _CHUNK_MAX
    return _CHUNK_MAX


def _chunks(b):
    """The pieces txlgen tokenizes one at a time (core/input.c): lines,
    a line of over 64 KiB cut before a space."""
    i, n = 0, len(b)
    while i < n:
        lim = min(n - i, _CHUNK_MAX)
        nl = b.find(b"\n", i, i + lim)
        if nl >= 0:
            k = nl + 1 - i
        elif n - i >= _CHUNK_MAX:
            k = _cut_point(b[i:i + _CHUNK_MAX])
        else:
            k = n - i
        yield b[i:i + k]
        i += k


def _utf8(text, what="text"):
    if isinstance(text, str):
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise TxlError(f"{what}: not UTF-8 text ({e.reason})") from None
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"{what}: str or bytes expected, got "
                    f"{type(text).__name__}")


class _Utf8:
    """core/text.c's incremental repair: bytes held until their character
    is complete; what is no UTF-8 becomes U+FFFD."""

    REPL = "\ufffd".encode()

    def __init__(self):
        self.buf, self.need, self.lo, self.hi = b"", 0, 0x80, 0xbf

    def open(self):
        return self.need > 0

    def continues(self, piece):
        return self.need > 0 and len(piece) > 0 and \
            self.lo <= piece[0] <= self.hi

    def _lead(self, c):
        self.lo, self.hi = 0x80, 0xbf
        if 0xc2 <= c <= 0xdf:
            self.need = 1
        elif 0xe0 <= c <= 0xef:
            self.need = 2
            if c == 0xe0:
                self.lo = 0xa0
            elif c == 0xed:
                self.hi = 0x9f
        elif 0xf0 <= c <= 0xf4:
            self.need = 3
            if c == 0xf0:
                self.lo = 0x90
            elif c == 0xf4:
                self.hi = 0x8f
        else:
            return False
        self.buf = bytes([c])
        return True

    def feed(self, b):
        out = bytearray()
        for c in b:
            if self.need:
                if self.lo <= c <= self.hi:
                    self.buf += bytes([c])
                    self.lo, self.hi = 0x80, 0xbf
                    self.need -= 1
                    if self.need == 0:
                        out += self.buf
                        self.buf = b""
                    continue
                out += self.REPL
                self.need, self.buf = 0, b""
            if c < 0x80:
                out.append(c)
            elif not self._lead(c):
                out += self.REPL
        return bytes(out)

    def finish(self):
        out = self.REPL if self.need else b""
        self.need, self.buf = 0, b""
        return out

    def drop(self):
        self.need, self.buf = 0, b""


class _Output:
    """core/output.c for one generation: UTF-8 repaired, the text that
    could still become a stop string held back, a stop string never
    given out."""

    def __init__(self, stops):
        self.u8 = _Utf8()
        self.stops = [s for s in stops]
        self.hold = b""

    def token(self, piece):
        """The bytes @p piece releases, and whether a stop string
        completed."""
        tok = self.u8.feed(piece)
        if not self.stops:
            return tok, False
        self.hold += tok
        best, keep = -1, 0
        for st in self.stops:
            m = self.hold.find(st)
            if m >= 0 and (best < 0 or m < best):
                best = m
            if m >= 0:
                continue
            for k in range(min(len(st) - 1, len(self.hold)), keep, -1):
                if self.hold[len(self.hold) - k:] == st[:k]:
                    keep = k
                    break
        if best >= 0:
            out, self.hold = self.hold[:best], b""
            return out, True
        n = len(self.hold) - keep
        out, self.hold = self.hold[:n], self.hold[n:]
        return out, False

    def end(self, stopped):
        tail = self.u8.finish()
        out = b"" if stopped else self.hold + tail
        self.hold = b""
        return out


class _TextOut:
    """Bytes given out as str pieces: each piece whole characters."""

    def __init__(self):
        self.pending = b""

    def take(self, b):
        b = self.pending + b
        # the output is valid UTF-8 by construction; a piece may only end
        # inside a character held by _Utf8, never here, but be safe
        try:
            s, self.pending = b.decode("utf-8"), b""
        except UnicodeDecodeError as e:
            s, self.pending = b[:e.start].decode("utf-8"), b[e.start:]
        return s


# ------------------------------------------------------------------ #
# Settings: txlgen's defaults under a model's recommended ones

# txlgen's own defaults (core/settings.c options_init)
_DEFAULTS = {
    "n_predict": 256, "stop": [], "ignore_eos": False,
    "temp": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
    "repeat_penalty": 1.0, "repeat_last_n": 64,
    "frequency_penalty": 0.0, "presence_penalty": 0.0, "typical": 1.0,
    "mirostat_tau": 0.0, "mirostat_eta": 0.1,
    "mem_len": None, "seg_len": None, "clamp_len": None,
    "same_length": None, "mem_init": None,
}

# (kind, min, min exclusive, max, nullable): core/settings.c's ranges
_RANGES = {
    "n_predict": ("int", -1, False, _INT_MAX, False),
    "stop": ("list", 0, False, 0, True),
    "ignore_eos": ("bool", 0, False, 0, False),
    "temp": ("float", 0, False, 100, False),
    "top_k": ("int", 0, False, _INT_MAX, False),
    "top_p": ("float", 0, True, 1, False),
    "min_p": ("float", 0, False, 1, False),
    "repeat_penalty": ("float", 0, True, 100, False),
    "repeat_last_n": ("int", 0, False, TXL_REPEAT_LAST_N_MAX, False),
    "frequency_penalty": ("float", -2, False, 2, False),
    "presence_penalty": ("float", -2, False, 2, False),
    "typical": ("float", 0, True, 1, False),
    "mirostat_tau": ("float", 0, False, 100, False),
    "mirostat_eta": ("float", 0, True, 1, False),
    "mem_len": ("int", 0, False, 1 << 20, True),
    "seg_len": ("int", 1, False, 1 << 16, True),
    "clamp_len": ("int", 0, False, _INT_MAX, True),
    "same_length": ("bool", 0, False, 0, True),
    "mem_init": ("enum", 0, False, 0, True),
}
_SEED_MAX = (1 << 53) - 1


def _check_setting(key, v, where=None):
    """@p v as setting @p key takes it, checked as txlgen checks it;
    where: the metadata it comes from (None: an argument)."""
    kind, lo, lo_ex, hi, nullable = _RANGES[key]
    where = f"{where}: key '{key}'" if where else key
    if v is None:
        if nullable:
            return [] if kind == "list" else None
        raise TxlError(f"{where}: must not be null")
    if kind == "bool":
        if not isinstance(v, bool):
            raise TxlError(f"{where}: expected a boolean")
        return v
    if kind == "list":
        if isinstance(v, (str, bytes)):
            v = [v]
        if not isinstance(v, (list, tuple)) or \
                not all(isinstance(s, (str, bytes)) for s in v):
            raise TxlError(f"{where}: expected an array of "
                           "strings")
        return [s for s in v if s]
    if kind == "enum":
        if v not in MEM_INITS:
            raise TxlError(f"{where}: expected one of "
                           f"{', '.join(MEM_INITS)}, got {v!r}")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TxlError(f"{where}: expected a number, got "
                       f"{type(v).__name__}")
    if kind == "int":
        if isinstance(v, float) and not v.is_integer():
            raise TxlError(f"{where}: expected an integer, "
                           f"got {v}")
        v = int(v)
    low = not (v > lo) if lo_ex else not (v >= lo)
    if (isinstance(v, float) and math.isnan(v)) or low or v > hi:
        raise TxlError(f"{where}: {v} is out of range "
                       f"({'> ' if lo_ex else ''}{lo} .. {hi})")
    return v


def _recommended(text, where):
    """The settings a model's metadata 'recommended' sets (core/config.c):
    keys of no setting a model may choose are ignored with a warning, a
    bad value is an error."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise TxlError(f"{where}: malformed JSON ({e})") from None
    if not isinstance(obj, dict):
        raise TxlError(f"{where}: expected a JSON object")
    out = {}
    for k, v in obj.items():
        if k not in _RANGES:
            warnings.warn(f"{where}: key '{k}' ignored (not a setting a "
                          "model may choose)", stacklevel=4)
            continue
        out[k] = _check_setting(k, v, where)
    return out


# ------------------------------------------------------------------ #
# Models and sessions

class Model:
    """A model file loaded (txl_model), its recommended settings, and the
    settings of its sessions.

    Model(model=None, *, n_threads=0, mmap=False, mem_len=None,
          seg_len=None, clamp_len=None, same_length=None, mem_init=None,
          kv_type=None, compute=None)

    model: a path or a name as txlgen -m takes it (find_model(); None:
    $TXLGEN_MODEL, else sotu).  The others are txlgen's options of the
    same names (None: the model's recommended value, else the model
    file's own); n_threads 0 is one thread per CPU (txlgen -t); mmap maps
    the file instead of reading it (txlgen --mmap).
    """

    def __init__(self, model=None, *, n_threads=0, mmap=False, mem_len=None,
                 seg_len=None, clamp_len=None, same_length=None,
                 mem_init=None, kv_type=None, compute=None):
        self._lib = lib = _lib()
        self._ptr = None
        self.path = find_model(model)
        ptr = ctypes.c_void_p()
        st = lib.model_load_flags(os.fsencode(self.path),
                                  0 if mmap else TXL_LOAD_NO_MMAP,
                                  ctypes.byref(ptr))
        if st != TXL_OK:
            e = lib.error(st)
            if not os.path.exists(self.path):
                raise ModelNotFoundError(str(e))
            raise e
        self._ptr = ptr
        hp = lib.model_hparams(ptr).contents
        self.n_vocab = hp.n_token
        self.n_layer = hp.n_layer
        self.n_cutoffs = hp.n_cutoffs
        self.has_memory = bool(lib.model_has_memory(ptr))
        self.eos = lib.token_eos(ptr)
        self.bos = lib.token_bos(ptr)
        self.unk = lib.token_unk(ptr)
        rec = self.meta("recommended")
        where = f"{self.path}: metadata 'recommended'"
        self.recommended = _recommended(rec, where) if rec else {}
        self.defaults = dict(_DEFAULTS)
        self.defaults.update(self.recommended)
        # the user's settings over the model's
        self._user_mem_len = mem_len is not None
        for k, v in (("mem_len", mem_len), ("seg_len", seg_len),
                     ("clamp_len", clamp_len), ("same_length", same_length),
                     ("mem_init", mem_init)):
            if v is not None:
                self.defaults[k] = _check_setting(k, v)
        if not isinstance(n_threads, int) or not 0 <= n_threads <= 1024:
            raise TxlError(f"n_threads: {n_threads!r} is out of range "
                           "(0 .. 1024)")
        self.n_threads = n_threads
        self.kv_type = 0
        if kv_type is not None:
            k = lib.dtype_from_name(os.fsencode(str(kv_type)))
            if k < 0 or not lib.dtype_uses(k) & 2:
                raise TxlError(f"kv_type: {kv_type!r}: not a type of the "
                               "memory")
            self.kv_type = k
        self.compute = {None: 0, "f32": 0, "bf16": 1}.get(
            compute.lower() if isinstance(compute, str) else compute, -1)
        if self.compute < 0:
            raise TxlError(f"compute: {compute!r}: f32 or bf16")
        lib.check(lib.model_check_compute(ptr, self.compute), "compute")

    def __del__(self):
        if getattr(self, "_ptr", None):
            self._lib.model_free(self._ptr)
            self._ptr = None

    def close(self):
        """Free the model now (after every session of it)."""
        self.__del__()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"Model({self.path!r})"

    def meta(self, key):
        """The value of @p key in the file's metadata, or None."""
        v = self._lib.model_meta(self._ptr, key.encode())
        return v.decode("utf-8", "replace") if v is not None else None

    # ---- tokens ----

    def _tokenize_bytes(self, b):
        if not b:
            return []
        cap = len(b) + 16
        for _ in range(2):
            buf = (ctypes.c_int32 * cap)()
            n = self._lib.tokenize(self._ptr, b, len(b), buf, cap)
            if n >= 0:
                return buf[:n]
            if n == -2**31:
                raise self._lib.error(-4, "tokenize")
            cap = -n
        raise TxlError("tokenize: the ids do not fit")

    def tokenize(self, text):
        """The token ids of @p text (str or UTF-8 bytes) as txlgen feeds
        and scores it, and as txlgen --tokenize lists it: line by line."""
        b = _utf8(text)
        ids = []
        for c in _chunks(b):
            ids += self._tokenize_bytes(c)
        return ids

    def piece(self, id):
        """The bytes token @p id stands for in running text (possibly
        part of a UTF-8 character)."""
        buf = ctypes.create_string_buffer(64)
        n = self._lib.token_piece(self._ptr, id, buf, len(buf))
        if n < 0 and n != -2**31:
            buf = ctypes.create_string_buffer(-n)
            n = self._lib.token_piece(self._ptr, id, buf, len(buf))
        if n < 0:
            raise self._lib.error(-4, f"token {id}")
        return buf.raw[:n]

    def detokenize(self, ids):
        """The text of @p ids as SentencePiece decodes it (the leading
        space dropped); str, U+FFFD for bytes of no character."""
        arr, n = _ids_array(ids)
        cap = 64 + 16 * n
        for _ in range(2):
            buf = ctypes.create_string_buffer(cap)
            k = self._lib.detokenize(self._ptr, arr, n, buf, cap)
            if k >= 0:
                return buf.raw[:k].decode("utf-8", "replace")
            if k == -2**31:
                raise self._lib.error(-4, "detokenize")
            cap = -k + 1
        raise TxlError("detokenize: the text does not fit")

    def _drops_space(self, id, piece):
        """core/engine.c engine_drops_space(): SentencePiece's leading
        space of a text that starts with this token."""
        if not piece or piece[:1] != b" ":
            return False
        d = ctypes.create_string_buffer(8)
        one = (ctypes.c_int32 * 1)(id)
        dl = self._lib.detokenize(self._ptr, one, 1, d, 8)
        return (0 <= dl < len(piece)) or (dl < 0 and dl != -2**31 and
                                          -dl < len(piece))

    # ---- sessions ----

    def _logit_bias(self, spec):
        """([ids], [biases]) of a logit_bias argument, as txlgen's
        --logit-bias makes them (engine_logit_bias())."""
        ids, bias = [], []
        if spec is None:
            return ids, bias
        if isinstance(spec, dict):
            spec = spec.items()
        try:
            pairs = [(k, v) for k, v in spec]
        except (TypeError, ValueError):
            raise TxlError("logit_bias: expected a dict of token id or "
                           "text to a bias") from None
        for key, b in pairs:
            what = f"logit_bias[{key!r}]"
            if isinstance(b, bool) or not isinstance(b, (int, float)) or \
                    math.isnan(b) or not (b == -math.inf or -100 <= b <= 100):
                raise TxlError(f"{what}: {b!r}: expected a bias from -100 "
                               "to 100, or -inf")
            if isinstance(key, int) and not isinstance(key, bool):
                if not 0 <= key < self.n_vocab:
                    raise TxlError(f"{what}: no token {key} (the model has "
                                   f"{self.n_vocab})")
                toks = [key]
            elif isinstance(key, str):
                toks = self._tokenize_bytes(_utf8(key, what)) if key else []
                if not toks:
                    raise TxlError(f"{what}: {key!r} has no tokens")
            else:
                raise TxlError(f"{what}: a key is a token id or a text")
            ids += toks
            bias += [float(b)] * len(toks)
        return ids, bias

    def _session_params(self, mem_len=None, seg_len=None, stride=None):
        lib = self._lib
        p = lib.session_params_default()
        d = self.defaults
        v = mem_len if mem_len is not None else d["mem_len"]
        p.mem_len = TXL_FROM_MODEL if v is None else v
        v = seg_len if seg_len is not None else d["seg_len"]
        p.seg_len = TXL_FROM_MODEL if v is None else v
        p.clamp_len = TXL_FROM_MODEL if d["clamp_len"] is None \
            else d["clamp_len"]
        p.same_length = TXL_FROM_MODEL if d["same_length"] is None \
            else int(d["same_length"])
        p.mem_init = TXL_FROM_MODEL if d["mem_init"] is None \
            else MEM_INITS[d["mem_init"]]
        p.n_threads = self.n_threads
        p.kv_type = self.kv_type
        if stride is not None:
            p.stride = stride
        return p

    def session(self, state=None, *, mem_len=None):
        """A Session of this model (its memory empty, or from the state
        file @p state, as txlgen --state-in: with the state's mem_len
        unless @p mem_len is given)."""
        return Session(self, state=state, mem_len=mem_len)

    def generate(self, prompt="", n=None, temp=None, top_k=None, top_p=None,
                 min_p=None, repeat_penalty=None, repeat_last_n=None,
                 seed=None, stop=None, ignore_eos=None, stream=False,
                 frequency_penalty=None, presence_penalty=None, typical=None,
                 mirostat_tau=None, mirostat_eta=None, logit_bias=None):
        """The continuation of @p prompt, as `txlgen -p PROMPT` writes it
        (no final newline added).  n: tokens (txlgen -n; -1: no limit);
        the sampling settings are txlgen's options of the same names
        (None: the model's recommended value, else txlgen's default);
        seed None or -1: a new one.  stop: strings the text ends before
        (never part of it).  stream=True: an iterator of str pieces as
        they are made, which join to the same text.  logit_bias: a dict
        (or pairs) of token id (int) or text (str: each of its tokens)
        to a bias from -100 to 100 or -math.inf (never), as txlgen's
        --logit-bias ID=BIAS and TEXT=BIAS."""
        s = Session(self)
        # the prompt's tokens in the repeat penalty's window, as txlgen's
        # sampler gets them
        if repeat_last_n is not None:
            s._keep = max(s._keep, _check_setting("repeat_last_n",
                                                  repeat_last_n))
        s.feed(prompt)
        return s.generate(n=n, temp=temp, top_k=top_k, top_p=top_p,
                          min_p=min_p, repeat_penalty=repeat_penalty,
                          repeat_last_n=repeat_last_n, seed=seed, stop=stop,
                          ignore_eos=ignore_eos, stream=stream,
                          frequency_penalty=frequency_penalty,
                          presence_penalty=presence_penalty, typical=typical,
                          mirostat_tau=mirostat_tau,
                          mirostat_eta=mirostat_eta, logit_bias=logit_bias,
                          _keep_memory=False)

    def score(self, text, *, stride=None):
        """The log-likelihood of @p text, as `txlgen --score FILE --json`:
        a dict of the summary's keys (tokens, predicted, bytes, chars,
        nll, ppl, bpb, bpc, nll_stderr, bpb_stderr, partial) and "rows", the --json lines
        of the tokens (dicts of pos, id, text, logprob): every token but
        the first, predicted from those before it, in segments of seg_len
        as the original eval.py.
        stride: models without memory only (txlgen --score-stride)."""
        return _score(self, text, stride)


class Session:
    """One text and its memory (txl_session): fed, continued, saved.

    s.feed(text) reads text into the memory; s.generate(...) continues
    the text so far (the tokens it makes stay in the memory, so the next
    feed or generate goes on after them); s.save(path) writes a state
    file (txlgen --state-out's), Session.load(model, path) or
    model.session(state=path) reads one (txlgen --state-in's); s.n_past:
    tokens fed; s.reset() forgets the text.  One thread at a time.
    """

    def __init__(self, model, state=None, mem_len=None, _stride=None):
        self.model = model
        lib = self._lib = model._lib
        self._ptr = None
        self._recent = []
        self._started = False
        self._have_logits = False
        self._keep = model.defaults["repeat_last_n"]
        if state is not None and mem_len is None and model.has_memory and \
                not model._user_mem_len:
            ml = ctypes.c_int()
            st = lib.state_mem_len(os.fsencode(state), ctypes.byref(ml))
            if st != TXL_OK:
                raise lib.error(st)
            mem_len = ml.value
        self._params = model._session_params(mem_len=mem_len, stride=_stride)
        ptr = ctypes.c_void_p()
        st = lib.session_new(model._ptr, ctypes.byref(self._params),
                             ctypes.byref(ptr))
        if st != TXL_OK:
            raise lib.error(st)
        self._ptr = ptr
        lib.check(lib.session_set_compute(ptr, model.compute))
        self._params = lib.session_get_params(ptr)
        if state is not None:
            self._load(state)

    @classmethod
    def load(cls, model, path, *, mem_len=None):
        """A session of @p model from the state file @p path."""
        return cls(model, state=path, mem_len=mem_len)

    def __del__(self):
        if getattr(self, "_ptr", None):
            self._lib.session_free(self._ptr)
            self._ptr = None

    def close(self):
        self.__del__()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def n_past(self):
        """Tokens fed since the session was made or reset."""
        return self._lib.session_n_past(self._ptr)

    @property
    def mem_fill(self):
        """Positions in the memory."""
        return self._lib.session_mem_fill(self._ptr)

    @property
    def mem_len(self):
        return self._params.mem_len

    @property
    def seg_len(self):
        return self._params.seg_len

    def reset(self):
        """Forget the text."""
        self._lib.session_reset(self._ptr)
        self._recent = []
        self._started = False
        self._have_logits = False

    def _note_fed(self, ids):
        keep = self._keep
        if keep <= 0:
            self._recent = []
            return
        self._recent += ids[-keep:]
        if len(self._recent) > 2 * keep:
            self._recent = self._recent[-keep:]

    def _eval(self, ids, want):
        if not ids:
            return
        arr, n = _ids_array(ids)
        st = self._lib.session_eval(self._ptr, arr, n, want)
        if st != TXL_OK:
            self._have_logits = False
            raise self._lib.error(st)
        self._note_fed(ids)
        self._have_logits = want != TXL_LOGITS_NONE

    def feed_ids(self, ids):
        """Feed token ids, as feed() feeds a text's (core/feed.c): the
        tokens before the text's receptive field counted, not computed
        (the same memory, bit for bit), the rest read."""
        ids = [int(i) for i in ids]
        if not ids:
            return
        lib, m = self._lib, self.model
        seg = self._params.seg_len
        if m.has_memory:
            start = lib.session_tail_start(m._ptr, ctypes.byref(self._params),
                                           len(ids))
            if start < 0:
                raise lib.error(-4)
            if start > 0:
                arr, _ = _ids_array(ids[:start])
                lib.check(lib.session_skip(self._ptr, arr, start))
                self._have_logits = False
                self._note_fed(ids[:start])
            self._eval(ids[start:], TXL_LOGITS_LAST)
        else:
            k = (len(ids) - 1) // seg * seg
            self._eval(ids[:k], TXL_LOGITS_NONE)
            self._eval(ids[k:], TXL_LOGITS_LAST)
        self._started = True

    def feed(self, text):
        """Read @p text (str or UTF-8 bytes) into the memory, as txlgen
        reads a prompt: line by line, as one text."""
        b = _utf8(text, "feed")
        self.feed_ids(self.model.tokenize(b))

    def _start(self):
        """With nothing fed, the token a text starts from (txlgen's)."""
        m = self.model
        t = m.eos if m.eos >= 0 else m.bos if m.bos >= 0 else \
            m.unk if m.unk >= 0 else 0
        arr, _ = _ids_array([t])
        st = self._lib.session_eval(self._ptr, arr, 1, TXL_LOGITS_LAST)
        if st != TXL_OK:
            raise self._lib.error(st)
        self._have_logits = True

    def _load(self, path):
        lib = self._lib
        cap = max(self._keep, 0)
        buf = (ctypes.c_int32 * max(cap, 1))()
        n = ctypes.c_int(0)
        st = lib.session_load_recent(self._ptr, os.fsencode(path), buf, cap,
                                     ctypes.byref(n))
        if st != TXL_OK:
            raise lib.error(st)
        self._recent = buf[:n.value]
        self._have_logits = lib.session_n_logits(self._ptr) > 0
        self._started = True

    def save(self, path):
        """Save the memory, and the last repeat_last_n tokens for the
        repeat penalty, to the state file @p path (txlgen --state-out's
        format: txlgen --state-in reads it, and this reads txlgen's)."""
        n = min(len(self._recent), max(self._keep, 0))
        arr, _ = _ids_array(self._recent[len(self._recent) - n:])
        self._lib.check(self._lib.session_save_recent(
            self._ptr, os.fsencode(path), arr, n))

    def _sampler(self, o, seed):
        lib = self._lib
        sp = lib.sampler_params_default()
        sp.temp = o["temp"]
        sp.top_k = o["top_k"]
        sp.top_p = o["top_p"]
        sp.min_p = o["min_p"]
        sp.repeat_penalty = o["repeat_penalty"]
        sp.repeat_last_n = o["repeat_last_n"]
        sp.seed = seed
        ids, bias = o["logit_bias"]
        controls = (o["frequency_penalty"], o["presence_penalty"],
                    o["typical"], o["mirostat_tau"], o["mirostat_eta"])
        if lib.sampler_controls:
            (sp.frequency_penalty, sp.presence_penalty, sp.typical_p,
             sp.mirostat_tau, sp.mirostat_eta) = controls
            # (the sampler copies the bias: the arrays may go after)
            sp.logit_bias_ids = (ctypes.c_int32 * len(ids))(*ids)
            sp.logit_bias = (ctypes.c_float * len(bias))(*bias)
            sp.n_logit_bias = len(ids)
        elif ids or controls != (0, 0, 1, 0, 0.1):
            raise TxlError(f"libtxl {lib.version} has no penalties, typical,"
                           " mirostat or logit_bias (1.5 or later needed)")
        smp = lib.sampler_new(ctypes.byref(sp), self.model.n_vocab)
        if not smp:
            raise lib.error(-4, "sampler")
        # as txlgen: never a lone byte token that breaks the text
        status = lib.sampler_keep_utf8(smp, self.model._ptr)
        if status != TXL_OK:
            lib.sampler_free(smp)
            lib.check(status, "sampler")
        n = min(len(self._recent), o["repeat_last_n"])
        for t in self._recent[len(self._recent) - n:]:
            lib.sampler_accept(smp, t)
        return smp

    def generate(self, n=None, temp=None, top_k=None, top_p=None, min_p=None,
                 repeat_penalty=None, repeat_last_n=None, seed=None,
                 stop=None, ignore_eos=None, stream=False,
                 frequency_penalty=None, presence_penalty=None, typical=None,
                 mirostat_tau=None, mirostat_eta=None, logit_bias=None,
                 _keep_memory=True):
        """Continue the text so far by up to @p n tokens (Model.generate's
        settings), returning the text (stream=True: an iterator of its
        pieces).  The tokens made stay in the memory."""
        d = self.model.defaults
        o = {}
        for k, v in (("n_predict", n), ("temp", temp), ("top_k", top_k),
                     ("top_p", top_p), ("min_p", min_p),
                     ("repeat_penalty", repeat_penalty),
                     ("repeat_last_n", repeat_last_n), ("stop", stop),
                     ("ignore_eos", ignore_eos),
                     ("frequency_penalty", frequency_penalty),
                     ("presence_penalty", presence_penalty),
                     ("typical", typical), ("mirostat_tau", mirostat_tau),
                     ("mirostat_eta", mirostat_eta)):
            o[k] = d[k] if v is None else _check_setting(k, v)
        o["logit_bias"] = self.model._logit_bias(logit_bias)
        if seed is None or seed == -1:
            seed = random.getrandbits(32)
        elif isinstance(seed, bool) or not isinstance(seed, int) or \
                not 0 <= seed <= _SEED_MAX:
            raise TxlError(f"seed: {seed!r} is out of range (0 .. "
                           f"{_SEED_MAX}, or -1 for a random seed)")
        self.seed = seed
        it = self._generate(o, seed, _keep_memory)
        if stream:
            return it
        return "".join(it)

    def _generate(self, o, seed, keep_memory):
        lib, m = self._lib, self.model
        stops = [_utf8(s, "stop") for s in o["stop"]]
        n_predict, ignore_eos = o["n_predict"], o["ignore_eos"]
        eos = m.eos
        # the text starts here: SentencePiece's leading space goes
        drop_space = not self._started
        if not self._have_logits:
            self._start()
        smp = self._sampler(o, seed)
        out, text = _Output(stops), _TextOut()
        lp = ctypes.c_float()
        work = (ctypes.c_float * m.n_vocab)() if ignore_eos and eos >= 0 \
            else None
        self.end = "length"
        i = 0
        try:
            while True:
                if n_predict >= 0 and i >= n_predict and not out.u8.open():
                    break
                if work is not None:
                    lg = lib.session_logits(self._ptr)
                    rows = lib.session_n_logits(self._ptr)
                    if not lg or rows < 1:
                        raise lib.error(-4)
                    ctypes.memmove(work, ctypes.addressof(lg.contents) +
                                   (rows - 1) * m.n_vocab * 4,
                                   m.n_vocab * 4)
                    work[eos] = -math.inf
                    tok = lib.sampler_sample(smp, work, ctypes.byref(lp))
                else:
                    tok = lib.session_sample(self._ptr, smp, ctypes.byref(lp))
                if tok < 0 or tok >= m.n_vocab:
                    raise lib.error(-4)
                piece = m.piece(tok)
                if n_predict >= 0 and i >= n_predict and \
                        not out.u8.continues(piece):
                    break
                i += 1
                self._started = True
                if tok == eos and not ignore_eos:
                    self.end = "eos"
                    if keep_memory:
                        self._eval([tok], TXL_LOGITS_LAST)
                    else:
                        self._have_logits = False
                    break
                if drop_space and piece:
                    drop_space = False
                    if m._drops_space(tok, piece):
                        piece = piece[1:]
                b, stopped = out.token(piece)
                s = text.take(b)
                if s:
                    yield s
                last = n_predict >= 0 and i >= n_predict and \
                    (not out.u8.open() or i >= n_predict + 3)
                if stopped:
                    self.end = "stop"
                if stopped or last:
                    if keep_memory:
                        self._eval([tok], TXL_LOGITS_LAST)
                    else:
                        self._have_logits = False
                    break
                self._eval([tok], TXL_LOGITS_LAST)
            if self.end == "length":
                out.u8.drop()
            s = text.take(out.end(self.end == "stop"))
            if s:
                yield s
        finally:
            lib.sampler_free(smp)


# ------------------------------------------------------------------ #
# Scoring (cmd/score.c)

def _score(model, text, stride):
    lib = model._lib
    b = _utf8(text, "score")
    if stride is not None and model.has_memory:
        raise TxlError("stride: the model has a memory; only models "
                       "without memory (attn_type 2, 3) are scored in "
                       "windows")
    s_stride = None
    if not model.has_memory:
        r = lib.session_params_default()
        p = model._session_params()
        lib.check(lib.session_params_resolve(model._ptr, ctypes.byref(p),
                                             ctypes.byref(r)))
        if stride is None:
            s_stride = r.seg_len
        elif not isinstance(stride, int) or not 1 <= stride <= r.seg_len:
            raise TxlError(f"stride {stride}: out of range (1 .. the "
                           f"{r.seg_len} tokens of a window)")
        else:
            s_stride = stride
    s = Session(model, _stride=s_stride)
    p = s._params
    seg = p.seg_len // p.stride * p.stride if p.stride > 0 else p.seg_len
    toks, ends = [], []
    nbytes = 0
    for c in _chunks(b):
        ids = model._tokenize_bytes(c)
        frm, to = nbytes, nbytes + len(c)
        k = len(ids)
        ends += [math.floor(frm + (to - frm) * (j + 1) / k)
                 for j in range(k)]
        toks += ids
        nbytes = to
    total = len(toks)
    if total < 2:
        raise TxlError("score: nothing to score: " + (
            "one token gives no prediction, at least 2 are needed"
            if total else "no text"))
    rows = []
    u8 = _Utf8()
    sum_nll = mean = m2 = 0.0
    n_pred = 0
    lp = (ctypes.c_double * seg)()
    base = 0
    while base < total - 1:
        n = min(seg, total - 1 - base)
        t = toks[base:base + n + 1]
        arr, _ = _ids_array(t)
        st = lib.session_eval(s._ptr, arr, n, TXL_LOGITS_ALL)
        if st != TXL_OK:
            raise lib.error(st)
        if base == 0:
            u8.feed(model.piece(t[0]))
        tg = (ctypes.c_int32 * n)(*t[1:])
        lib.check(lib.session_score(s._ptr, tg, n, lp))
        for i in range(n):
            x = lp[i]
            dlt = -x - mean
            sum_nll -= x
            n_pred += 1
            mean += dlt / n_pred
            m2 += dlt * (-x - mean)
            rows.append({"pos": base + i + 1, "id": t[i + 1],
                         "text": u8.feed(model.piece(t[i + 1])).decode(
                             "utf-8"),
                         "logprob": x})
        base += n
    s.close()
    nll = sum_nll / n_pred
    se = math.sqrt(m2 / (n_pred - 1) / n_pred) if n_pred > 1 else math.nan
    k = 1 / math.log(2.0) / nbytes if nbytes > 0 else 0
    # characters: code points, as bits per character counts them
    nchars = sum((c & 0xc0) != 0x80 for c in b)
    return {"tokens": total, "predicted": n_pred, "bytes": nbytes,
            "chars": nchars, "nll": nll, "ppl": math.exp(nll),
            "bpb": sum_nll * k,
            "bpc": sum_nll / math.log(2.0) / nchars if nchars else 0,
            "nll_stderr": se, "bpb_stderr": se * n_pred * k,
            "partial": False, "rows": rows}
