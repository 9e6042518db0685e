"""Convert a Transformer-XL or adaptive-span checkpoint to a txlgen model file.

  convert.py --weights PATH [--config CFG.json]
             (--tokenizer SPM.model | --vocab VOCAB [--dataset NAME]) -o m.bin
  convert.py --weights CHECKPOINT.pt --vocab-corpus DATA/train.txt
             [--dataset enwik8|text8] [--span-ramp 32] -o m.bin

PATH is any of (txlgen/checkpoint.py reads them without running code
from the pickles):
  - a whole-model pickle, torch.save(model) of the original code's
    MemTransformerLM (its train.py's model.pt);
  - a Hugging Face TransfoXL directory (config.json, pytorch_model.bin or
    model.safetensors, and its vocabulary vocab.pkl / vocab.bin);
  - a bare state_dict, torch.save(model.state_dict()) of the original
    MemTransformerLM or of txlgen/txl_ref.py (same names);
  - a checkpoint of txlgen's own train.py (last.pt, best.pt), which holds
    its configuration and tokenizer: nothing else is given, and the file
    is the one `train.py --out DIR --export-only --export m.bin` writes;
  - a checkpoint of the authors' TensorFlow code (txlgen/tf_convert.py):
    a directory as tf/sota/download.sh lays it out (data/cache.pkl,
    data/corpus-info.json, model/checkpoint, model/model.ckpt-N.*), or
    the prefix .../model.ckpt-N with --vocab .../cache.pkl.  Its sizes
    come from the tensors' shapes and corpus-info.json, its evaluation
    settings from its data set (recorded as recommended settings).
  - a checkpoint of dwdb/transformer-xl, a TensorFlow 2 Keras
    Transformer-XL (txlgen/dwdb_convert.py): the directory its run.py's
    CheckpointManager writes (checkpoint, xl-ckpt-N.index and its
    shards) or a prefix, its object graph read, with vocab.pkl beside it
    or --vocab; its sizes from the tensors' shapes, run.py's lengths
    (--tgt-len, --mem-len: 50 and 50) and its greedy inference recorded
    (origin dwdb).
Hyperparameters come from the checkpoint where it has them (the whole
model's attributes, HF's config.json); CFG.json (the original names:
n_token n_layer n_head d_model d_head d_inner d_embed div_val cutoffs
tie_weight tie_projs pre_lnorm attn_type tgt_len ext_len mem_len
clamp_len same_length, and untie_r for per-layer relative biases;
layer_norm_eps and same_length_mask "tf" for a model that computes as
the TensorFlow code does) is needed for a bare state_dict and otherwise
overrides.  A Hugging Face directory is computed as Hugging Face's code
computes it (its tail clusters in the TF code's order, its config
defaults, its LayerNorm epsilon; the memory recommended to start as zero
states); every file records converter_version and origin.

The tokenizer is a SentencePiece model (--tokenizer), or the original
vocabulary (--vocab, txlgen/vocab.py): the corpus cache cache.pt of the
original code (cache.pkl of its TF code), HF's vocab.pkl / vocab.bin, or a file of one symbol per
line; --dataset (wt103 wt2 ptb lm1b enwik8 text8) gives the dataset's
conventions where the vocabulary does not say (cache.pt does).  An HF
directory brings its own vocabulary.

An adaptive-span checkpoint (facebookresearch/adaptive-span, Sukhbaatar
et al. 2019: the dict its trainer saves, {iter_no, model, logger,
optimizer, scheduler_iter}, or the model's state_dict) becomes a model of
attn_type 4 (txlgen/span_convert.py): its hyperparameters from the
tensors' shapes, the ramp of its soft mask from --span-ramp (not stored;
the original's default 32).  Its vocabulary is rebuilt from the prepared
training corpus (--vocab-corpus: the train.txt its data.Dictionary read,
enwik8's byte values or text8's characters), and raw text is read as that
corpus was made: text8's letters with '_' for a space, enwik8's bytes, a
newline being <eos>.

Every model the original code builds: attn_type 0 to 3, adaptive input and
softmax (cutoffs, div_val, tie_projs); attn_type 1 and 3 also take
"max_klen", the rows of their position tables, when the model was built
with other lengths than tgt_len + ext_len + mem_len.  attn_type 2 and 3
run without memory: their model file says mem_len 0.  What does not fit is
refused with a message.
On success it says on stderr what it wrote, in one line ("convert.py:
wrote m.bin (12.3 MB, F32)"); on a terminal, a progress line shows the
tensors being made meanwhile.
Exit status: 0 ok, 1 a runtime error (a file that cannot be written; a
python3 without numpy or SentencePiece, which it names), 2 a usage
error, 3 bad input (one line on stderr that names the file and the
problem).  Standard library, numpy and SentencePiece only: no PyTorch.
"""

import json
import os
import sys

import numpy as np

from . import (checkpoint, dwdb_convert, loadable, span_convert, tf_convert,
               txlfile)
from . import vocab as vocabulary
from .conventions import (ORIGINS, REL_LEARNED, REL_PARTIAL, TABLE_KINDS,
                          ZERO_MEMORY_ORIGINS)
from .errors import (InputError, OneLineParser, describe, open_input,
                     run_tool)
from .hparams import (HPARAM_NAMES, INT_HPARAMS, SpanConfig, TxlConfig,
                      as_bool, is_int, typed)
from .proto import spm_strip_paths

REQUIRED = "n_token n_layer n_head d_model d_head d_inner".split()
FF_TENSORS = ("pos_ff.CoreNet.0.weight pos_ff.CoreNet.0.bias "
              "pos_ff.CoreNet.3.weight pos_ff.CoreNet.3.bias "
              "pos_ff.layer_norm.weight pos_ff.layer_norm.bias").split()
# The attention's tensors of each layer, by attn_type (plus
# dec_attn.layer_norm.weight and .bias for every type).
ATTN_TENSORS = {0: ("qkv_net", "r_net", "o_net"), 1: ("qkv_net", "o_net"),
                2: ("q_net", "kv_net", "o_net"), 3: ("q_net", "kv_net",
                                                     "o_net")}
# Buffers of a state_dict that a model file does not store.
IGNORED = {"pos_emb.inv_freq"}


class ConvertError(InputError):
    pass


# The version of this converter's mapping, recorded in every model file it
# writes (metadata converter_version; files without it are version 1).
# 2: the tail clusters of checkpoints of TensorFlow origin (Hugging Face's
# port) in the PyTorch order; their LayerNorm epsilon; mem_init zeros
# recommended for them.
CONVERTER_VERSION = 2
# Where checkpoints come from (metadata origin): conventions.ORIGINS.


def provenance(origin, pre_lnorm=False, recommended=None):
    """The metadata a converted file records about where it came from:
    converter_version, origin (one of ORIGINS) and, for checkpoints whose
    code starts the memory as zero states, recommended {"mem_init":
    "zeros"} (merged into `recommended`, a dict of other recommended
    settings, if given) -- but for a pre-LayerNorm model, whose zero
    states libtxl does not compute (their keys are not 0)."""
    if origin not in ORIGINS:
        raise ValueError(f"origin {origin!r} is not one of {ORIGINS}")
    meta = {"converter_version": str(CONVERTER_VERSION), "origin": origin}
    rec = dict(recommended or {})
    if origin in ZERO_MEMORY_ORIGINS and not pre_lnorm:
        rec.setdefault("mem_init", "zeros")
    if rec:
        meta["recommended"] = json.dumps(rec, sort_keys=True)
    return meta


def load_config(path):
    return check_config(checkpoint.read_json(path), path)


def check_config(raw, path):
    """A TxlConfig from the original hyperparameter names, each of its
    type; path names where they came from in messages."""
    raw = dict(raw)
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise ConvertError(f"{path}: missing {', '.join(missing)}")
    unknown = [k for k in raw if k not in HPARAM_NAMES and k not in
               ("dropout", "dropatt", "sample_softmax", "adapt_inp")]
    if unknown:
        raise ConvertError(f"{path}: unknown key {describe(unknown[0])}")
    try:
        raw = typed(raw)
        # training settings: no part of the file, but of their types
        for k in ("dropout", "dropatt"):
            v = raw.get(k, 0.0)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"{k} is {describe(v)}, expected a number")
        as_bool("adapt_inp", raw.get("adapt_inp", False))
        ss = raw.get("sample_softmax", -1)
        if not is_int(ss):
            raise ValueError(f"sample_softmax is {describe(ss)}, expected "
                             "an integer")
        if ss > 0:
            raise ValueError("sample_softmax is not supported")
        # far past what txlgen loads: refused before any arithmetic
        for k in INT_HPARAMS:
            if raw.get(k) is not None and abs(raw[k]) > 2 ** 31:
                raise ValueError(f"{k} {describe(raw[k])} is out of range")
        most = loadable.limits()["TXL_MAX_CLUSTERS"]
        for k in ("cutoffs", "tie_projs"):
            if len(raw.get(k, ())) > most:
                raise ValueError(f"{k} has more than {most} entries")
        if raw.get("d_embed") in (None, -1):
            raw["d_embed"] = raw["d_model"]
        cfg = TxlConfig.from_dict(raw)
        cfg.check_supported()
    except ValueError as e:
        raise ConvertError(f"{path}: {e}")
    try:
        loadable.check_hparams(cfg.hparams())
    except loadable.NotLoadable as e:
        raise ConvertError(f"{path}: txlgen would refuse the model: {e}")
    return cfg


def describe_config(cfg):
    """The configuration's output layer and attention, in words."""
    out = (f"cutoffs {cfg.cutoffs}, div_val {cfg.div_val}" if cfg.cutoffs
           else f"no cutoffs, div_val {cfg.div_val}")
    return f"attn_type {cfg.attn_type}, {out}, d_embed {cfg.d_embed}"


class _State:
    """A state_dict being mapped: tensors taken by name with their shapes
    checked, and a record of which were used."""

    def __init__(self, state, wpath, hint):
        self.state, self.wpath, self.hint = state, wpath, f" ({hint})"
        self.used = set(IGNORED)

    def take(self, name, shape):
        if name not in self.state:
            raise ConvertError(f"{self.wpath}: missing tensor {name!r}"
                               f"{self.hint}")
        self.used.add(name)
        shape_of = getattr(self.state, "shape_of", None)
        if shape_of is not None:
            # a state that knows its shapes before reading (a TF bundle):
            # the tensor is read when it is written, one at a time
            have = tuple(shape_of(name))
            if have != tuple(shape):
                raise ConvertError(f"{self.wpath}: tensor {name!r} has "
                                   f"shape {list(have)}, expected "
                                   f"{list(shape)}{self.hint}")
            state = self.state
            return txlfile.Lazy(have, lambda: txlfile.as_float32(
                state[name]))
        t = txlfile.as_float32(self.state[name])
        if tuple(t.shape) != tuple(shape):
            raise ConvertError(f"{self.wpath}: tensor {name!r} has shape "
                               f"{list(t.shape)}, expected {list(shape)}"
                               f"{self.hint}")
        return t

    def tied(self, name, to, tensor, why):
        """name is stored as `to` (tensor): a copy in the state must equal
        it."""
        if name not in self.state:
            return
        self.used.add(name)
        if not np.array_equal(txlfile.as_float32(self.state[name]), tensor):
            raise ConvertError(f"{self.wpath}: tensor {name!r} differs from "
                               f"{to!r}, which the config ties it to "
                               f"({why})")

    def check_all_used(self):
        extra = [k for k in self.state if k not in self.used]
        if extra:
            raise ConvertError(f"{self.wpath}: tensor {extra[0]!r} has no "
                               f"place in this configuration{self.hint}: "
                               "the config does not fit the checkpoint")


def gather_tensors(cfg, state, wpath):
    """Map a state_dict onto the tensors a txlgen file stores: those the
    configuration calls for, with the original's names, each shape
    checked; tied tensors once (a tied copy in the state must equal the
    tensor it is tied to); a tensor the configuration has no place for is
    refused (the config does not fit the checkpoint).  See
    man/txlgen-model.5."""
    st = _State(state, wpath,
                f"{describe_config(cfg)}, {cfg.n_layer} layers")
    out = input_tensors(cfg, st)
    out.update(output_tensors(cfg, st, out))
    out.update(position_tensors(cfg, st))
    out.update(layer_tensors(cfg, st))
    st.check_all_used()
    return out


def emb_shapes(cfg):
    """[rows, columns] of the embedding tables: one with div_val 1, else
    one per cluster."""
    if cfg.div_val == 1:
        return [(cfg.n_token, cfg.d_embed)]
    return [(hi - lo, cfg.d_emb(i))
            for i, (lo, hi) in enumerate(cfg.cluster_bounds())]


def input_tensors(cfg, st):
    out = {}
    for i, shape in enumerate(emb_shapes(cfg)):
        name = f"word_emb.emb_layers.{i}.weight"
        out[name] = st.take(name, shape)
        if cfg.has_proj():
            name = f"word_emb.emb_projs.{i}"
            out[name] = st.take(name, (cfg.d_model, shape[1]))
    return out


def output_tensors(cfg, st, inputs):
    """The adaptive softmax: its weights have the input's shapes (tied
    ones are the input's), a projection per cluster where the input has
    them, cluster logits with cutoffs."""
    out = {}
    if cfg.cutoffs:
        out["crit.cluster_weight"] = st.take("crit.cluster_weight",
                                             (len(cfg.cutoffs), cfg.d_embed))
        out["crit.cluster_bias"] = st.take("crit.cluster_bias",
                                           (len(cfg.cutoffs),))
    for i, shape in enumerate(emb_shapes(cfg)):
        name, emb = f"crit.out_layers.{i}.weight", \
            f"word_emb.emb_layers.{i}.weight"
        if cfg.tie_weight:
            st.tied(name, emb, inputs[emb], "tie_weight")
        else:
            out[name] = st.take(name, shape)
        name = f"crit.out_layers.{i}.bias"
        out[name] = st.take(name, shape[:1])
    if cfg.has_proj():
        for i in range(cfg.n_clusters):
            name = f"crit.out_projs.{i}"
            if cfg.tie_projs[i]:
                emb = f"word_emb.emb_projs.{0 if cfg.div_val == 1 else i}"
                st.tied(name, emb, inputs[emb], f"tie_projs[{i}]")
            else:
                out[name] = st.take(name, (cfg.d_model, cfg.d_emb(i)))
    return out


def position_tensors(cfg, st):
    L, H, D, K = cfg.n_layer, cfg.n_head, cfg.d_head, cfg.max_klen
    out = {}
    if cfg.attn_type == REL_PARTIAL:
        for b in ("r_w_bias", "r_r_bias"):
            per_layer = [f"layers.{i}.dec_attn.{b}" for i in range(L)]
            if cfg.untie_r:
                if b in st.state:
                    out[b] = st.take(b, (L, H, D))
                else:
                    out[b] = np.stack([st.take(n, (H, D))
                                       for n in per_layer])
                st.used.update(per_layer)
            else:
                if b not in st.state and per_layer[0] in st.state:
                    raise ConvertError(f"{st.wpath}: per-layer {b} found: "
                                       "set \"untie_r\": true in the config")
                out[b] = st.take(b, (H, D))
    if cfg.attn_type in TABLE_KINDS:
        r = st.state.get("r_emb")
        if r is not None and len(r.shape) == 4 and r.shape[1] != K:
            raise ConvertError(
                f"{st.wpath}: r_emb has {r.shape[1]} rows per layer, the "
                f"config max_klen {K} (by default tgt_len + ext_len + "
                f"mem_len, as the original sizes the tables): set "
                f"\"max_klen\": {r.shape[1]} in the config if the model "
                "was built with other lengths")
        out["r_emb"] = st.take("r_emb", (L, K, H, D))
    if cfg.attn_type == REL_LEARNED:
        out["r_w_bias"] = st.take("r_w_bias", (L, H, D))
        out["r_bias"] = st.take("r_bias", (L, K, H))
    return out


def layer_tensors(cfg, st):
    M, I, HD = cfg.d_model, cfg.d_inner, cfg.n_head * cfg.d_head
    shapes = {"qkv_net": (3 * HD, M), "r_net": (HD, M), "q_net": (HD, M),
              "kv_net": (2 * HD, M), "o_net": (M, HD),
              "pos_ff.CoreNet.0.weight": (I, M), "pos_ff.CoreNet.0.bias": (I,),
              "pos_ff.CoreNet.3.weight": (M, I)}
    out = {}
    for i in range(cfg.n_layer):
        for net in ATTN_TENSORS[cfg.attn_type]:
            name = f"layers.{i}.dec_attn.{net}.weight"
            out[name] = st.take(name, shapes[net])
        for t in ("dec_attn.layer_norm.weight", "dec_attn.layer_norm.bias",
                  *FF_TENSORS):
            name = f"layers.{i}.{t}"
            out[name] = st.take(name, shapes.get(t, (M,)))
    return out


def check_tokenizer(path, n_token):
    try:
        with open_input(path) as f:
            proto = f.read()
    except OSError as e:
        raise ConvertError(f"{path}: {e.strerror}")
    sp = vocabulary.sentencepiece().SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(proto)
    except Exception as e:               # noqa: BLE001 (any parse failure)
        raise ConvertError(f"{path}: not a SentencePiece model "
                           f"({str(e)[:200]})")
    if sp.GetPieceSize() != n_token:
        raise ConvertError(f"{path}: vocabulary has {sp.GetPieceSize()} "
                           f"pieces, the model n_token {n_token}")
    return proto


def convert(cfg, state, tokenizer_proto, out_path, dtype="F32", wpath="",
            extra=None, prog=None):
    tensors = gather_tensors(cfg, state, wpath)
    hp = cfg.hparams()
    try:
        txlfile.write(out_path, hp, tensors, tokenizer_proto, dtype=dtype,
                      extra=extra, prog=prog)
    except ValueError as e:                 # a tensor's values
        raise ConvertError(f"{wpath}: {e}")
    except loadable.NotLoadable as e:      # (checked before: a backstop)
        raise ConvertError(f"{wpath}: txlgen would refuse the model: {e}")


def read_tokenizer(a, ck, n_token):
    """(SentencePiece proto, metadata) from --tokenizer, --vocab or the
    vocabulary an HF directory brings, as txlgen's loader takes it."""
    path = a.tokenizer or a.vocab
    if path is None and os.path.isdir(a.weights):
        path = next((os.path.join(a.weights, n) for n in ("vocab.pkl",
                                                          "vocab.bin")
                     if os.path.exists(os.path.join(a.weights, n))), None)
    proto, meta = find_tokenizer(a, path, n_token)
    try:
        loadable.tokenizer(meta, n_token, proto)
    except loadable.NotLoadable as e:
        raise ConvertError(f"{path}: txlgen would refuse the model: {e}")
    return proto, meta


def find_tokenizer(a, path, n_token):
    if a.tokenizer:
        return check_tokenizer(a.tokenizer, n_token), {}
    if path is None:
        raise ConvertError(f"{a.weights}: no vocabulary: give --vocab "
                           "(cache.pt, vocab.pkl, a symbol list) or "
                           "--tokenizer")
    v = vocabulary.read_vocab(path, a.dataset)
    if len(v.symbols) != n_token:
        raise ConvertError(f"{path}: {len(v.symbols)} symbols, the "
                           f"model n_token {n_token}")
    return vocabulary.to_spm(v)


def source_files(text):
    """--source-files as the metadata value: a JSON list of {name, url,
    size, sha256}, re-serialised; ValueError if it is not one."""
    files = json.loads(text)
    if not isinstance(files, list) or not all(
            isinstance(f, dict) and set(f) == {"name", "url", "size",
                                               "sha256"} and
            isinstance(f["name"], str) and isinstance(f["url"], str) and
            is_int(f["size"]) and f["size"] >= 0 and
            isinstance(f["sha256"], str) and len(f["sha256"]) == 64
            for f in files):
        raise ValueError("expected a JSON list of {name, url, size, "
                         "sha256}")
    return json.dumps(files)


PROG = "convert.py"


def main(argv=None):
    ap = OneLineParser(prog=PROG,
                       description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True,
                    help="state_dict, whole-model pickle, HF directory, "
                    "an adaptive-span checkpoint, or a TF checkpoint (a "
                    "directory as tf/sota/download.sh lays it out, or the "
                    "prefix model.ckpt-N with --vocab cache.pkl), or a checkpoint of "
                    "dwdb/transformer-xl (its directory or prefix; vocab.pkl "
                    "beside it or --vocab)")
    ap.add_argument("--config", help="hyperparameters (JSON), needed for "
                    "a bare state_dict, else overrides")
    tok = ap.add_mutually_exclusive_group()
    tok.add_argument("--tokenizer", help="SentencePiece model")
    tok.add_argument("--vocab", help="the original's cache.pt (its TF "
                     "code's cache.pkl), HF's vocab.pkl / vocab.bin, or one "
                     "symbol per line")
    tok.add_argument("--vocab-corpus", metavar="TRAIN.txt",
                     help="adaptive-span checkpoints: the prepared training "
                     "corpus its vocabulary was built from (enwik8 or "
                     "text8 train.txt)")
    ap.add_argument("--dataset", choices=sorted(vocabulary.DATASETS),
                    help="the vocabulary's dataset conventions, where "
                    "--vocab or --vocab-corpus does not say")
    ap.add_argument("--span-ramp", type=int, default=32, metavar="R",
                    help="adaptive-span checkpoints: the ramp of the soft "
                    "mask they were trained with (--adapt-span-ramp; "
                    "default 32)")
    ap.add_argument("--tgt-len", type=int, metavar="N",
                    help="dwdb/transformer-xl checkpoints: the SEQ_LEN "
                    "run.py built the model with (default 50)")
    ap.add_argument("--mem-len", type=int, metavar="N",
                    help="dwdb/transformer-xl checkpoints: its MEM_LEN "
                    "(default 50)")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--dtype", default="F32", choices=txlfile.DTYPES,
                    type=txlfile.dtype_arg,
                    help="storage type of the weight matrices, any case "
                    "(default F32; every type is computed as stored, "
                    "models/txlfile.py says which tensors)")
    ap.add_argument("--description", default=None)
    ap.add_argument("--source-files", metavar="JSON", default=None,
                    help="what the checkpoint was made of, recorded as the "
                    "metadata source_files: a JSON list of objects with "
                    "name, url, size and sha256 (txlgen-get passes it for "
                    "files that no published digest checks)")
    a = ap.parse_args(argv)
    # numpy's floating-point warnings would be lines of their own; values
    # are checked where they matter (txlfile._check_values, the scales)
    np.seterr(all="ignore")
    if a.tokenizer and a.dataset:
        ap.error("--dataset goes with --vocab or --vocab-corpus")
    if a.tgt_len is not None and not 1 <= a.tgt_len <= 1 << 20:
        ap.error(f"--tgt-len {a.tgt_len}: must be 1 to {1 << 20}")
    if a.mem_len is not None and not 0 <= a.mem_len <= 1 << 20:
        ap.error(f"--mem-len {a.mem_len}: must be 0 to {1 << 20}")
    if a.span_ramp < 1:
        ap.error(f"--span-ramp {a.span_ramp}: must be at least 1")
    if a.source_files is not None:
        try:
            a.source_files = source_files(a.source_files)
        except ValueError as e:
            ap.error(f"--source-files: {e}")
    rc = run_tool(PROG, a.weights, run, a)
    if rc == 0:
        print(f"{PROG}: wrote {a.output} "
              f"({txlfile.wrote(a.output, a.dtype)})", file=sys.stderr)
    return rc


def run_span(a, ck):
    """An adaptive-span checkpoint: its tensors, the vocabulary of its
    training corpus (or --tokenizer)."""
    if a.config or a.vocab:
        raise ConvertError(f"{a.weights}: an adaptive-span checkpoint "
                           "takes neither --config nor --vocab: its sizes "
                           "are its tensors', its vocabulary "
                           "--vocab-corpus DATA/train.txt")
    cfg = span_convert.span_config(ck.state, a.weights, ramp=a.span_ramp)
    tensors = span_convert.span_tensors(cfg, ck.state, a.weights)
    if a.tokenizer:
        proto, meta = check_tokenizer(a.tokenizer, cfg.n_token), {}
        path = a.tokenizer
    else:
        path = a.vocab_corpus
        v = vocabulary.corpus_vocab(path, a.dataset, cfg.n_token)
        if len(v.symbols) != cfg.n_token:
            raise ConvertError(f"{path}: {len(v.symbols)} symbols, the "
                               f"checkpoint's vocabulary {cfg.n_token}: not "
                               "the corpus it was trained on")
        proto, meta = vocabulary.to_spm(v)
    try:
        loadable.tokenizer(meta, cfg.n_token, proto)
    except loadable.NotLoadable as e:
        raise ConvertError(f"{path}: txlgen would refuse the model: {e}")
    extra = dict(meta)
    extra.update(provenance("adaptive-span"))
    if a.description:
        extra["description"] = a.description
    if a.source_files:
        extra["source_files"] = a.source_files
    try:
        txlfile.write(a.output, cfg.hparams(), tensors, proto,
                      dtype=a.dtype, extra=extra or None, prog=PROG)
    except ValueError as e:                 # a tensor's values
        raise ConvertError(f"{a.weights}: {e}")
    except loadable.NotLoadable as e:      # (checked before: a backstop)
        raise ConvertError(f"{a.weights}: txlgen would refuse the model: {e}")


def run_tf(a):
    """A checkpoint of the TF code (txlgen/tf_convert.py): a directory as
    tf/sota/download.sh lays it out, or a prefix with --vocab cache.pkl."""
    if a.vocab_corpus:
        raise ConvertError(f"{a.weights}: --vocab-corpus is for "
                           "adaptive-span checkpoints; a TF checkpoint's "
                           "vocabulary is its cache.pkl (--vocab)")
    prefix, cache, info_path = tf_convert.find_files(a.weights, a.vocab)
    info = tf_convert.read_corpus_info(info_path)
    hp, state = tf_convert.read_tf_checkpoint(prefix, info, info_path)
    index = prefix + ".index"
    dataset = a.dataset or (info or {}).get("dataset")
    if cache is None and not a.tokenizer:
        raise ConvertError(f"{a.weights}: no vocabulary: give --vocab "
                           "cache.pkl (the TF code's corpus cache)")
    v = None
    if not a.tokenizer:
        v = vocabulary.read_vocab(cache, dataset)
        dataset = dataset or v.dataset
    if dataset not in tf_convert.RECOMMENDED:
        raise ConvertError(f"{a.weights}: data set {describe(dataset)}: "
                           "give --dataset (enwik8 text8 wt103 lm1b), whose "
                           "evaluation settings the model file records")
    run = tf_convert.RECOMMENDED[dataset]
    hp.update(tgt_len=run["seg_len"], ext_len=0, mem_len=run["mem_len"],
              clamp_len=run["clamp_len"], same_length=run["same_length"])
    rec = tf_convert.recommended(dataset, hp)
    what = index
    if a.config:
        hp.update(checkpoint.read_json(a.config))
        what = a.config
    cfg = check_config(hp, what)
    if v is not None:
        if len(v.symbols) != cfg.n_token:
            raise ConvertError(f"{cache}: {len(v.symbols)} symbols, the "
                               f"model n_token {cfg.n_token}")
        proto, meta = vocabulary.to_spm(v)
        try:
            loadable.tokenizer(meta, cfg.n_token, proto)
        except loadable.NotLoadable as e:
            raise ConvertError(f"{cache}: txlgen would refuse the model: "
                               f"{e}")
    else:
        proto, meta = check_tokenizer(a.tokenizer, cfg.n_token), {}
    extra = dict(meta)
    extra.update(provenance("tensorflow", recommended=rec))
    if a.description:
        extra["description"] = a.description
    if a.source_files:
        extra["source_files"] = a.source_files
    convert(cfg, state, proto, a.output, a.dtype, index, extra, PROG)


def run_own(a, ck):
    """A checkpoint of txlgen's train.py (last.pt, best.pt): its
    configuration and tokenizer are its own; the file is what
    `train.py --export-only` writes of it."""
    if a.config or a.tokenizer or a.vocab or a.vocab_corpus:
        raise ConvertError(f"{a.weights}: a checkpoint of txlgen's train.py "
                           "holds its configuration and tokenizer: give "
                           "none of --config, --tokenizer, --vocab, "
                           "--vocab-corpus")
    tok = spm_strip_paths(ck.tokenizer)
    extra = {}
    if "attn_span" in ck.hparams:
        try:
            cfg = SpanConfig(**ck.hparams)
        except TypeError as e:
            raise ConvertError(f"{a.weights}: its configuration: {e}")
        hp = cfg.hparams()
    else:
        cfg = check_config({k: v for k, v in ck.hparams.items()
                            if k in HPARAM_NAMES}, a.weights)
        extra.update(provenance("pytorch", cfg.pre_lnorm))
    try:
        loadable.tokenizer({}, cfg.n_token, tok)
    except loadable.NotLoadable as e:
        raise ConvertError(f"{a.weights}: its tokenizer: txlgen would "
                           f"refuse the model: {e}")
    if a.description:
        extra["description"] = a.description
    if a.source_files:
        extra["source_files"] = a.source_files
    if "attn_span" not in ck.hparams:
        return convert(cfg, ck.state, tok, a.output, a.dtype, a.weights,
                       extra or None, PROG)
    tensors = span_convert.span_tensors(cfg, ck.state, a.weights)
    try:
        txlfile.write(a.output, hp, tensors, tok, dtype=a.dtype,
                      extra=extra or None, prog=PROG)
    except ValueError as e:                 # a tensor's values
        raise ConvertError(f"{a.weights}: {e}")


def run_dwdb(a):
    """A checkpoint of dwdb/transformer-xl (txlgen/dwdb_convert.py): its
    CheckpointManager's directory or a prefix, vocab.pkl beside it or
    --vocab."""
    if a.config or a.tokenizer or a.vocab_corpus or a.dataset:
        raise ConvertError(f"{a.weights}: a checkpoint of "
                           "dwdb/transformer-xl takes neither --config, "
                           "--tokenizer, --vocab-corpus nor --dataset: its "
                           "sizes are its tensors', its vocabulary "
                           "vocab.pkl (--vocab)")
    tgt = dwdb_convert.TGT_LEN if a.tgt_len is None else a.tgt_len
    mem = dwdb_convert.MEM_LEN if a.mem_len is None else a.mem_len
    prefix, vpath = dwdb_convert.find_files(a.weights, a.vocab)
    index = prefix + ".index"
    hp, makers, shapes, _ = dwdb_convert.read_dwdb_checkpoint(prefix, tgt,
                                                              mem)
    v = dwdb_convert.read_vocab(vpath)
    if len(v.symbols) != hp["n_token"]:
        raise ConvertError(f"{vpath}: {len(v.symbols)} symbols, the "
                           f"checkpoint's embedding {hp['n_token']} rows")
    cfg = check_config(hp, index)
    proto, meta = vocabulary.to_spm(v)
    try:
        loadable.tokenizer(meta, cfg.n_token, proto)
    except loadable.NotLoadable as e:
        raise ConvertError(f"{vpath}: txlgen would refuse the model: {e}")
    extra = dict(meta)
    extra.update(provenance("dwdb", recommended=dwdb_convert.RECOMMENDED))
    if a.description:
        extra["description"] = a.description
    if a.source_files:
        extra["source_files"] = a.source_files
    convert(cfg, dwdb_convert.State(makers, shapes), proto, a.output,
            a.dtype, index, extra, PROG)


def run(a):
    """The conversion main() asks for: InputError for what is wrong with
    the input."""
    if dwdb_convert.is_dwdb_checkpoint(a.weights):
        return run_dwdb(a)
    if a.tgt_len is not None or a.mem_len is not None:
        raise ConvertError(f"{a.weights}: --tgt-len and --mem-len are for "
                           "checkpoints of dwdb/transformer-xl (others "
                           "record their lengths or take --config)")
    if tf_convert.is_tf_checkpoint(a.weights):
        return run_tf(a)
    ck = checkpoint.read_checkpoint(a.weights)
    if ck.source == "train.py":
        return run_own(a, ck)
    if not a.tokenizer and not a.vocab and not a.vocab_corpus and \
            ck.source != "huggingface":
        raise ConvertError(f"{a.weights}: give --tokenizer, --vocab or "
                           "--vocab-corpus (only a Hugging Face directory "
                           "and a checkpoint of txlgen's train.py bring "
                           "their own)")
    if span_convert.is_span_checkpoint(ck.state):
        return run_span(a, ck)
    if a.vocab_corpus:
        raise ConvertError(f"{a.weights}: --vocab-corpus is for "
                           "adaptive-span checkpoints; this is a "
                           "Transformer-XL one (give --vocab or "
                           "--tokenizer)")
    raw = {k: v for k, v in ck.hparams.items() if k in HPARAM_NAMES}
    what = a.weights
    if a.config:
        raw.update(checkpoint.read_json(a.config))
        what = a.config
    elif not raw:
        raise ConvertError(f"{a.weights}: a bare state_dict has no "
                           "hyperparameters: give --config")
    cfg = check_config(raw, what)
    proto, meta = read_tokenizer(a, ck, cfg.n_token)
    extra = dict(meta)
    extra.update(provenance("huggingface" if ck.source == "huggingface"
                            else "pytorch", cfg.pre_lnorm))
    if a.description:
        extra["description"] = a.description
    if a.source_files:
        extra["source_files"] = a.source_files
    convert(cfg, ck.state, proto, a.output, a.dtype, a.weights,
            extra or None, PROG)
