#!/usr/bin/python3
"""Convert a Transformer-XL checkpoint of the original PyTorch code to a
txlgen model file.

  convert.py --config CFG.json --weights STATE.pt --tokenizer SPM.model -o m.bin

CFG.json holds the original hyperparameter names (n_token n_layer n_head
d_model d_head d_inner d_embed div_val cutoffs tie_weight tie_projs
pre_lnorm attn_type tgt_len ext_len mem_len clamp_len same_length, and
untie_r when the weights have per-layer relative biases).  STATE.pt is
torch.save(model.state_dict()) of the original MemTransformerLM (or of
models/txl_ref.py, which uses the same names).  Supported: attn_type 0,
div_val 1 without cutoffs; anything else is refused with a message.
Exit status: 0 ok, 1 error (the message names the file and the problem).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import txlfile                                   # noqa: E402
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


def load_config(path):
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        raise ConvertError(f"{path}: {e}")
    if not isinstance(raw, dict):
        raise ConvertError(f"{path}: expected a JSON object")
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--dtype", default="F32", choices=txlfile.DTYPES,
                    help="storage type of the weight matrices (default "
                    "F32; F16, BF16 and Q8_0 are computed as stored, "
                    "models/txlfile.py says which tensors)")
    ap.add_argument("--description", default=None)
    a = ap.parse_args()
    try:
        cfg = load_config(a.config)
        proto = check_tokenizer(a.tokenizer, cfg.n_token)
        import torch
        try:
            state = torch.load(a.weights, map_location="cpu")
        except Exception as e:           # noqa: BLE001
            raise ConvertError(f"{a.weights}: cannot load ({e})")
        if hasattr(state, "state_dict"):
            state = state.state_dict()
        if isinstance(state, dict) and "model" in state and \
                isinstance(state["model"], dict):
            state = state["model"]
        extra = {"description": a.description} if a.description else None
        convert(cfg, state, proto, a.output, a.dtype, a.weights, extra)
    except ConvertError as e:
        print(f"convert.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
