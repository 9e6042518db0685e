#!/usr/bin/python3
"""Convert a Transformer-XL checkpoint to a txlgen model file.

  convert.py --weights PATH [--config CFG.json]
             (--tokenizer SPM.model | --vocab VOCAB [--dataset NAME]) -o m.bin

PATH is any of (models/checkpoint.py reads them without running code
from the pickles):
  - a whole-model pickle, torch.save(model) of the original code's
    MemTransformerLM (its train.py's model.pt);
  - a Hugging Face TransfoXL directory (config.json, pytorch_model.bin or
    model.safetensors, and its vocabulary vocab.pkl / vocab.bin);
  - a bare state_dict, torch.save(model.state_dict()) of the original
    MemTransformerLM or of models/txl_ref.py (same names).
Hyperparameters come from the checkpoint where it has them (the whole
model's attributes, HF's config.json); CFG.json (the original names:
n_token n_layer n_head d_model d_head d_inner d_embed div_val cutoffs
tie_weight tie_projs pre_lnorm attn_type tgt_len ext_len mem_len
clamp_len same_length, and untie_r for per-layer relative biases) is
needed for a bare state_dict and otherwise overrides.

The tokenizer is a SentencePiece model (--tokenizer), or the original
vocabulary (--vocab, models/vocab.py): the corpus cache cache.pt of the
original code, HF's vocab.pkl / vocab.bin, or a file of one symbol per
line; --dataset (wt103 wt2 ptb lm1b enwik8 text8) gives the dataset's
conventions where the vocabulary does not say (cache.pt does).  An HF
directory brings its own vocabulary.
Exit status: 0 ok, 1 error (the message names the file and the problem).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint                                # noqa: E402
import txlfile                                   # noqa: E402
import vocab as vocabulary                       # noqa: E402
from txl_ref import HPARAM_NAMES, TxlConfig      # noqa: E402

REQUIRED = "n_token n_layer n_head d_model d_head d_inner".split()
LAYER_TENSORS = ("dec_attn.qkv_net.weight dec_attn.r_net.weight "
                 "dec_attn.o_net.weight dec_attn.layer_norm.weight "
                 "dec_attn.layer_norm.bias pos_ff.CoreNet.0.weight "
                 "pos_ff.CoreNet.0.bias pos_ff.CoreNet.3.weight "
                 "pos_ff.CoreNet.3.bias pos_ff.layer_norm.weight "
                 "pos_ff.layer_norm.bias").split()


class ConvertError(Exception):
    pass


def read_json(path):
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        raise ConvertError(f"{path}: {e}")
    if not isinstance(raw, dict):
        raise ConvertError(f"{path}: expected a JSON object")
    return raw


def load_config(path):
    return check_config(read_json(path), path)


def check_config(raw, path):
    """A TxlConfig from the original hyperparameter names; path names
    where they came from in messages."""
    raw = dict(raw)
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise ConvertError(f"{path}: missing {', '.join(missing)}")
    unknown = [k for k in raw if k not in HPARAM_NAMES and k not in
               ("dropout", "dropatt", "sample_softmax", "adapt_inp")]
    if unknown:
        raise ConvertError(f"{path}: unknown key {unknown[0]!r}")
    if raw.get("sample_softmax", -1) > 0:
        raise ConvertError(f"{path}: sample_softmax is not supported")
    if raw.get("d_embed") in (None, -1):
        raw["d_embed"] = raw["d_model"]
    cfg = TxlConfig.from_dict(raw)
    try:
        cfg.check_supported()
    except ValueError as e:
        raise ConvertError(f"{path}: {e}")
    return cfg


def gather_tensors(cfg, state, wpath):
    """Map a state_dict onto the tensors a txlgen file stores."""
    def take(name, shape):
        if name not in state:
            raise ConvertError(f"{wpath}: missing tensor {name!r}")
        t = state[name].detach().float().cpu()
        if tuple(t.shape) != tuple(shape):
            raise ConvertError(f"{wpath}: tensor {name!r} has shape "
                               f"{list(t.shape)}, expected {list(shape)}")
        return t

    import torch
    V, L, H, D = cfg.n_token, cfg.n_layer, cfg.n_head, cfg.d_head
    M, E, I = cfg.d_model, cfg.d_embed, cfg.d_inner
    out = {"word_emb.emb_layers.0.weight":
           take("word_emb.emb_layers.0.weight", (V, E))}
    if E != M:
        out["word_emb.emb_projs.0"] = take("word_emb.emb_projs.0", (M, E))
    if not cfg.tie_weight:
        out["crit.out_layers.0.weight"] = take("crit.out_layers.0.weight",
                                               (V, E))
    out["crit.out_layers.0.bias"] = take("crit.out_layers.0.bias", (V,))
    tie_proj = bool(cfg.tie_projs and cfg.tie_projs[0])
    if E != M and not tie_proj:
        out["crit.out_projs.0"] = take("crit.out_projs.0", (M, E))

    for b in ("r_w_bias", "r_r_bias"):
        per_layer = [f"layers.{i}.dec_attn.{b}" for i in range(L)]
        if cfg.untie_r:
            if b in state:
                out[b] = take(b, (L, H, D))
            else:
                out[b] = torch.stack([take(n, (H, D)) for n in per_layer])
        else:
            if b not in state and per_layer[0] in state:
                raise ConvertError(f"{wpath}: per-layer {b} found: set "
                                   "\"untie_r\": true in the config")
            out[b] = take(b, (H, D))

    shapes = {"dec_attn.qkv_net.weight": (3 * H * D, M),
              "dec_attn.r_net.weight": (H * D, M),
              "dec_attn.o_net.weight": (M, H * D),
              "pos_ff.CoreNet.0.weight": (I, M), "pos_ff.CoreNet.0.bias": (I,),
              "pos_ff.CoreNet.3.weight": (M, I)}
    for i in range(L):
        for t in LAYER_TENSORS:
            name = f"layers.{i}.{t}"
            out[name] = take(name, shapes.get(t, (M,)))
    return out


def check_tokenizer(path, n_token):
    try:
        with open(path, "rb") as f:
            proto = f.read()
    except OSError as e:
        raise ConvertError(f"{path}: {e.strerror}")
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(proto)
    except Exception as e:               # noqa: BLE001 (any parse failure)
        raise ConvertError(f"{path}: not a SentencePiece model ({e})")
    if sp.GetPieceSize() != n_token:
        raise ConvertError(f"{path}: vocabulary has {sp.GetPieceSize()} "
                           f"pieces, the model n_token {n_token}")
    return proto


def convert(cfg, state, tokenizer_proto, out_path, dtype="F32", wpath="",
            extra=None):
    tensors = gather_tensors(cfg, state, wpath)
    hp = cfg.hparams()
    txlfile.write(out_path, hp, tensors, tokenizer_proto, dtype=dtype,
                  extra=extra)


def read_tokenizer(a, ck, n_token):
    """(SentencePiece proto, metadata) from --tokenizer, --vocab or the
    vocabulary an HF directory brings."""
    if a.tokenizer:
        return check_tokenizer(a.tokenizer, n_token), {}
    path = a.vocab
    if path is None and os.path.isdir(a.weights):
        for name in ("vocab.pkl", "vocab.bin"):
            if os.path.exists(os.path.join(a.weights, name)):
                path = os.path.join(a.weights, name)
                break
    if path is None:
        raise ConvertError(f"{a.weights}: no vocabulary: give --vocab "
                           "(cache.pt, vocab.pkl, a symbol list) or "
                           "--tokenizer")
    try:
        v = vocabulary.read_vocab(path, a.dataset)
        if len(v.symbols) != n_token:
            raise ConvertError(f"{path}: {len(v.symbols)} symbols, the "
                               f"model n_token {n_token}")
        return vocabulary.to_spm(v)
    except vocabulary.VocabError as e:
        raise ConvertError(str(e))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True,
                    help="state_dict, whole-model pickle or HF directory")
    ap.add_argument("--config", help="hyperparameters (JSON), needed for "
                    "a bare state_dict, else overrides")
    tok = ap.add_mutually_exclusive_group()
    tok.add_argument("--tokenizer", help="SentencePiece model")
    tok.add_argument("--vocab", help="the original's cache.pt, HF's "
                     "vocab.pkl / vocab.bin, or one symbol per line")
    ap.add_argument("--dataset", choices=sorted(vocabulary.DATASETS),
                    help="the vocabulary's dataset conventions, where "
                    "--vocab does not say")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"],
                    help="storage type of the weights (default F32)")
    ap.add_argument("--description", default=None)
    a = ap.parse_args()
    if a.tokenizer and a.dataset:
        ap.error("--dataset goes with --vocab")
    if not a.tokenizer and not a.vocab and not os.path.isdir(a.weights):
        ap.error("one of --tokenizer or --vocab is required")
    try:
        try:
            ck = checkpoint.read_checkpoint(a.weights)
        except checkpoint.CheckpointError as e:
            raise ConvertError(str(e))
        raw = {k: v for k, v in ck.hparams.items() if k in HPARAM_NAMES}
        what = a.weights
        if a.config:
            raw.update(read_json(a.config))
            what = a.config
        elif not raw:
            raise ConvertError(f"{a.weights}: a bare state_dict has no "
                               "hyperparameters: give --config")
        cfg = check_config(raw, what)
        proto, meta = read_tokenizer(a, ck, cfg.n_token)
        extra = dict(meta)
        if a.description:
            extra["description"] = a.description
        convert(cfg, ck.state, proto, a.output, a.dtype, a.weights,
                extra or None)
    except ConvertError as e:
        print(f"convert.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
