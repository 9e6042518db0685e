"""Adaptive-span checkpoints (facebookresearch/adaptive-span) as txlgen
model files of attn_type 4.

The original's trainer saves torch.save({"iter_no", "model": the
state_dict of the DataParallel-wrapped TransformerSeq, every name
prefixed "module.", "logger", "optimizer", "scheduler_iter"}); its
checkpoints are mostly optimizer state (Adagrad's), which is never read
(txlgen.checkpoint reads a storage only for a tensor that is used).  The
hyperparameters come from the tensors' shapes; the ramp of the soft mask
is not stored (span_ramp: the original's --adapt-span-ramp, default 32).

  in_emb.weight [n_token, d_model]        word_emb.emb_layers.0.weight
  out_emb.weight, .bias                   crit.out_layers.0.weight, .bias
  key_pe [1, d_head, attn_span]           key_pe
  layers.N.attn.proj_query, proj_key, proj_val .weight
                                          layers.N.dec_attn.qkv_net.weight
                                          (stacked in that order)
  layers.N.attn.proj_out.weight           layers.N.dec_attn.o_net.weight
  layers.N.attn.attn.adaptive_span._mask.current_val [n_head, 1, 1]
                                          layers.N.dec_attn.current_val
  layers.N.norm1, .ff.fc1, .ff.fc2, .norm2
                                          layers.N.dec_attn.layer_norm,
                                          pos_ff.CoreNet.0, .3, pos_ff.layer_norm

A model trained without --adapt-span has no current_val: every head
attends to the whole span, which current_val 1 says.  Persistent memory
(the all-attention models) and the adaptive input and output (its
word-level models) are refused.  Standard library and numpy only.
"""

import re

import numpy as np

from . import loadable, txlfile
from .errors import InputError
from .hparams import SpanConfig


class SpanError(InputError):
    pass


def is_span_checkpoint(state):
    """Whether a state_dict (its names, "module." already stripped) is the
    adaptive-span code's TransformerSeq."""
    return "key_pe" in state and any(k.startswith("layers.0.attn.proj_")
                                     for k in state)


def _shape(state, name, path):
    if name not in state:
        raise SpanError(f"{path}: missing tensor {name!r} (an "
                        "adaptive-span TransformerSeq has it)")
    return tuple(np.shape(state[name]))


def span_config(state, path, ramp=32, block_size=512):
    """The SpanConfig of a TransformerSeq state_dict, from its shapes."""
    if any(".persistent_memory." in k for k in state):
        raise SpanError(f"{path}: a model with persistent memory (the "
                        "all-attention network) is not supported")
    if "in_emb.weight" not in state or "out_emb.weight" not in state:
        raise SpanError(f"{path}: no in_emb.weight / out_emb.weight: a "
                        "model with adaptive input and output (--adapt-io) "
                        "is not supported")
    emb = _shape(state, "in_emb.weight", path)
    if len(emb) != 2:
        raise SpanError(f"{path}: in_emb.weight has shape {list(emb)}, "
                        "expected [n_token, d_model]")
    n_token, d_model = emb
    pe = _shape(state, "key_pe", path)
    if len(pe) != 3 or pe[0] != 1 or pe[1] < 1 or pe[2] < 1:
        raise SpanError(f"{path}: key_pe has shape {list(pe)}, expected "
                        "[1, d_head, attn_span]")
    d_head, attn_span = pe[1], pe[2]
    if d_model % d_head:
        raise SpanError(f"{path}: d_model {d_model} is not a multiple of "
                        f"key_pe's d_head {d_head}")
    layers = set()
    for k in state:
        m = re.match(r"layers\.(\d+)\.", k)
        if m:
            layers.add(int(m.group(1)))
    n_layer = len(layers)
    if not n_layer or layers != set(range(n_layer)):
        raise SpanError(f"{path}: layers numbered {sorted(layers)[:8]}, "
                        "expected 0, 1, ...")
    fc1 = _shape(state, "layers.0.ff.fc1.weight", path)
    if len(fc1) != 2:
        raise SpanError(f"{path}: layers.0.ff.fc1.weight has shape "
                        f"{list(fc1)}, expected [d_inner, d_model]")
    if not isinstance(ramp, int) or ramp < 1:
        raise SpanError(f"--span-ramp {ramp}: must be a positive integer")
    cfg = SpanConfig(n_token=n_token, n_layer=n_layer,
                     n_head=d_model // d_head, d_model=d_model,
                     d_inner=fc1[0], attn_span=attn_span, span_ramp=ramp,
                     block_size=block_size)
    try:
        loadable.check_hparams(cfg.hparams())
    except loadable.NotLoadable as e:
        raise SpanError(f"{path}: txlgen would refuse the model: {e}")
    return cfg


def span_tensors(cfg, state, path):
    """The tensors of the model file, each shape checked, every tensor of
    the state_dict used (the masks' templates checked and dropped)."""
    M, H, I, S = cfg.d_model, cfg.n_head, cfg.d_inner, cfg.attn_span
    used = set()

    def take(name, shape):
        got = _shape(state, name, path)
        if got != tuple(shape):
            raise SpanError(f"{path}: tensor {name!r} has shape "
                            f"{list(got)}, expected {list(shape)} "
                            f"({cfg.n_layer} layers, d_model {M}, "
                            f"{H} heads)")
        used.add(name)
        return txlfile.as_float32(state[name])

    out = {"word_emb.emb_layers.0.weight": take("in_emb.weight",
                                                (cfg.n_token, M)),
           "crit.out_layers.0.weight": take("out_emb.weight",
                                            (cfg.n_token, M)),
           "crit.out_layers.0.bias": take("out_emb.bias", (cfg.n_token,)),
           "key_pe": take("key_pe", (1, cfg.d_head, S))}
    template = np.arange(1 - S, 1, dtype=np.float32)
    for i in range(cfg.n_layer):
        s, f = f"layers.{i}.", f"layers.{i}."
        out[f + "dec_attn.qkv_net.weight"] = np.concatenate(
            [take(s + f"attn.proj_{p}.weight", (M, M))
             for p in ("query", "key", "val")])
        out[f + "dec_attn.o_net.weight"] = take(s + "attn.proj_out.weight",
                                                (M, M))
        mask = s + "attn.attn.adaptive_span._mask."
        if mask + "current_val" in state:
            cv = take(mask + "current_val", (H, 1, 1)).reshape(H)
            if mask + "mask_template" in state:
                t = take(mask + "mask_template", (S,))
                if not np.array_equal(t, template):
                    raise SpanError(f"{path}: {mask}mask_template is not "
                                    f"the mask's ramp {1 - S} .. 0")
        else:
            # trained without --adapt-span: every head sees the span
            cv = np.ones(H, np.float32)
        if not np.isfinite(cv).all():
            raise SpanError(f"{path}: {mask}current_val holds NaN or "
                            "infinity")
        out[f + "dec_attn.current_val"] = cv
        for src, dst, shape in (
                ("norm1.weight", "dec_attn.layer_norm.weight", (M,)),
                ("norm1.bias", "dec_attn.layer_norm.bias", (M,)),
                ("ff.fc1.weight", "pos_ff.CoreNet.0.weight", (I, M)),
                ("ff.fc1.bias", "pos_ff.CoreNet.0.bias", (I,)),
                ("ff.fc2.weight", "pos_ff.CoreNet.3.weight", (M, I)),
                ("ff.fc2.bias", "pos_ff.CoreNet.3.bias", (M,)),
                ("norm2.weight", "pos_ff.layer_norm.weight", (M,)),
                ("norm2.bias", "pos_ff.layer_norm.bias", (M,))):
            out[f + dst] = take(s + src, shape)
    extra = [k for k in state if k not in used]
    if extra:
        raise SpanError(f"{path}: tensor {extra[0]!r} has no place in an "
                        f"adaptive-span model of {cfg.n_layer} layers")
    return out
