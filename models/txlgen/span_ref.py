"""Reference adaptive-span Transformer in PyTorch: the oracle for txlgen's
attn_type 4.

Written from the semantics of Sukhbaatar et al. (2019), "Adaptive
Attention Span in Transformers", as facebookresearch/adaptive-span
evaluates its TransformerSeq (that code is not copied here, and is
checked against by tools/check_adaptive_span.py), with the same
parameter names, so that the state_dict of a checkpoint of that code
(without DataParallel's "module.") loads here:

  in_emb          embedding, not scaled
  layers.N        post-LayerNorm blocks: h = norm1(h + attn(h, [cache; h]));
                  h = norm2(h + ff(h)), ff = fc2(relu(fc1(h)))
    .attn         proj_query, proj_key, proj_val, proj_out (no biases)
    .attn.attn.adaptive_span._mask.current_val   (n_head, 1, 1): the
                  learned spans, as fractions of attn_span
  key_pe          (1, d_head, attn_span): one position table for every
                  layer and head
  out_emb         output layer with bias, then log-softmax

The query at position t attends to the positions t - x, x = 1 .. W_l
(not to itself; W_l is the layer's window: attn_span less what the
original trims for the layer's largest span, rounded down to a multiple
of 64), with the score (q . k + q . key_pe[:, attn_span - x]) /
sqrt(d_head); the softmax over those W_l keys is multiplied by each head's
soft mask m(x) = clamp((1 - x + z) / ramp + 1, 0, 1), z = current_val *
attn_span, in float32 as the original computes it, and divided by its
sum + 1e-8.  The softmax is the window's, also for a head whose mask is
0 on most of it: where such a head's scores favour the keys beyond its
span, the masked weights sum to little more than 1e-8 and the division
leaves them well short of 1 (SpanAttention.masses records those sums).
Each layer caches its input; an evaluation starts from a cache of zeros,
whose keys and values are 0 but still take part in the softmax through
their position scores.

Computed directly, key by key (keys gathered by distance), not by the
original's skewing of score matrices: a second, independent derivation.
A stream is one sequence (no batch).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .hparams import SpanConfig


def span_mask(current_val, attn_span, ramp, x):
    """m(x) of each head (rows) at distances x (a 1-D long tensor), in
    float32 as the original: (template + current_val * attn_span) / ramp
    + 1, clamped, the template's value at distance x being 1 - x."""
    z = current_val.reshape(-1, 1).float() * attn_span
    return (((1 - x).float()[None, :] + z) / ramp + 1).clamp(0, 1)


def layer_window(current_val, attn_span, ramp):
    """W: the distances 1 .. W a layer's heads see after the original's
    trimming (from its largest span, in double, rounded down to a multiple
    of 64: AdaptiveSpan.get_trim_len)."""
    size = math.ceil(float(current_val.max()) * attn_span) + ramp
    size = max(0, min(attn_span, size))
    trim = min(attn_span - 1, attn_span - size) // 64 * 64
    return attn_span - trim


class _Mask(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.current_val = nn.Parameter(torch.zeros(cfg.n_head, 1, 1))
        # the original's buffer: the template over distances S .. 1
        self.register_buffer("mask_template", torch.arange(
            1 - cfg.attn_span, 1, dtype=torch.float32))


class _Span(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self._mask = _Mask(cfg)


class _Heads(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.adaptive_span = _Span(cfg)


class SpanAttention(nn.Module):
    # what the original adds to the sum of the masked weights
    renorm_eps = 1e-8

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        # None, or a list that each call appends its [H, M] sums of the
        # masked weights to (before the division)
        self.masses = None
        M = cfg.d_model
        self.attn = _Heads(cfg)
        self.proj_query = nn.Linear(M, M, bias=False)
        self.proj_out = nn.Linear(M, M, bias=False)
        self.proj_val = nn.Linear(M, M, bias=False)
        self.proj_key = nn.Linear(M, M, bias=False)

    @property
    def current_val(self):
        return self.attn.adaptive_span._mask.current_val

    def window(self):
        cfg = self.cfg
        return layer_window(self.current_val, cfg.attn_span, cfg.span_ramp)

    def forward(self, h, all_h, n_cache, key_pe):
        """h [M, d] the block's inputs, all_h [n_cache + M, d] the cache
        then h: the attention output [M, d]."""
        cfg = self.cfg
        M, H, D = h.size(0), cfg.n_head, cfg.d_head
        W = self.window()
        q = self.proj_query(h).view(M, H, D)
        k = self.proj_key(all_h).view(-1, H, D)
        v = self.proj_val(all_h).view(-1, H, D)
        x = torch.arange(1, W + 1)
        # key of query i at distance x: position n_cache + i - x; none
        # before the cache (an empty one: zeros=False)
        idx = n_cache + torch.arange(M)[:, None] - x[None, :]
        absent = idx < 0
        idx = idx.clamp(min=0)
        kk, vv = k[idx], v[idx]                       # [M, W, H, D]
        pe = key_pe[0][:, cfg.attn_span - x]           # [D, W]
        score = torch.einsum("ihd,ixhd->hix", q, kk) + \
            torch.einsum("ihd,dx->hix", q, pe)
        score = score.masked_fill(absent[None], -math.inf)
        prob = F.softmax(score / math.sqrt(D), dim=-1).nan_to_num(0.0)
        m = span_mask(self.current_val, cfg.attn_span, cfg.span_ramp, x)
        prob = prob * m[:, None, :]
        mass = prob.sum(-1, keepdim=True)
        if self.masses is not None:
            self.masses.append(mass[..., 0].detach().clone())
        prob = prob / (mass + self.renorm_eps)
        out = torch.einsum("hix,ixhd->ihd", prob, vv).reshape(M, H * D)
        return self.proj_out(out)


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d_model, cfg.d_inner)
        self.fc2 = nn.Linear(cfg.d_inner, cfg.d_model)

    def forward(self, h):
        return self.fc2(F.relu(self.fc1(h)))


class SpanLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attn = SpanAttention(cfg)
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.ff = FeedForward(cfg)
        self.norm2 = nn.LayerNorm(cfg.d_model)

    def forward(self, h, cache, key_pe):
        all_h = torch.cat([cache, h], dim=0)
        h = self.norm1(h + self.attn(h, all_h, cache.size(0), key_pe))
        return self.norm2(h + self.ff(h))


class AdaptiveSpanLM(nn.Module):
    def __init__(self, cfg: SpanConfig):
        super().__init__()
        self.cfg = cfg
        self.in_emb = nn.Embedding(cfg.n_token, cfg.d_model)
        self.out_emb = nn.Linear(cfg.d_model, cfg.n_token)
        self.key_pe = nn.Parameter(torch.zeros(1, cfg.d_head,
                                               cfg.attn_span))
        self.layers = nn.ModuleList(SpanLayer(cfg)
                                    for _ in range(cfg.n_layer))

    def windows(self):
        return [layer.attn.window() for layer in self.layers]

    def zero_cache(self, zeros=True):
        """The cache an evaluation starts from: per layer, its window of
        zero states (zeros=False: empty, no keys before the text)."""
        return [torch.zeros(w if zeros else 0, self.cfg.d_model)
                for w in self.windows()]

    def forward(self, ids, cache):
        """ids [M]: (log-probs [M, n_token] of the next tokens, the next
        cache: each layer's last inputs, at most its window)."""
        h = self.in_emb(ids)
        nxt = []
        for layer, c, w in zip(self.layers, cache, self.windows()):
            nxt.append(torch.cat([c, h], dim=0)[-w:])
            h = layer(h, c, self.key_pe)
        return F.log_softmax(self.out_emb(h), dim=-1), nxt


@torch.no_grad()
def score_ids(model, ids, block_size, zeros=True):
    """The original's evaluation (trainer.full_eval) of one stream: from
    the zero cache, blocks ids[p:p+B] predicting ids[p+1:p+B+1], the cache
    carried; the last block may be shorter (the original skips it).
    float64 log-probs of ids[1:].  zeros=False starts from an empty cache
    instead (what the original does not do)."""
    model.eval()
    ids = torch.as_tensor(ids, dtype=torch.long)
    cache, out = model.zero_cache(zeros), []
    for p in range(0, len(ids) - 1, block_size):
        y = ids[p + 1:p + 1 + block_size]
        lp, cache = model(ids[p:p + len(y)], cache)
        out.append(lp.double().gather(1, y[:, None])[:, 0])
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


@torch.no_grad()
def follow(model, ids):
    """Token by token from the zero cache: (log-probs [len(ids), n_token]
    of each next token), as generation computes them."""
    model.eval()
    cache, out = model.zero_cache(), []
    for t in torch.as_tensor(ids, dtype=torch.long):
        lp, cache = model(t[None], cache)
        out.append(lp[0].double())
    return torch.stack(out)


# The names of a txlgen file (man/txlgen-model.5) against the state_dict's.
def file_names(cfg):
    """{state_dict name: (file name, how)}: how is None (as it is),
    "flat" (current_val (H, 1, 1) as (H)), or "qkv" (stacked with the
    key and value projections)."""
    out = {"in_emb.weight": ("word_emb.emb_layers.0.weight", None),
           "out_emb.weight": ("crit.out_layers.0.weight", None),
           "out_emb.bias": ("crit.out_layers.0.bias", None),
           "key_pe": ("key_pe", None)}
    for i in range(cfg.n_layer):
        s, f = f"layers.{i}.", f"layers.{i}."
        out.update({
            s + "attn.proj_query.weight": (f + "dec_attn.qkv_net.weight",
                                           "qkv"),
            s + "attn.proj_out.weight": (f + "dec_attn.o_net.weight", None),
            s + "attn.attn.adaptive_span._mask.current_val":
                (f + "dec_attn.current_val", "flat"),
            s + "norm1.weight": (f + "dec_attn.layer_norm.weight", None),
            s + "norm1.bias": (f + "dec_attn.layer_norm.bias", None),
            s + "ff.fc1.weight": (f + "pos_ff.CoreNet.0.weight", None),
            s + "ff.fc1.bias": (f + "pos_ff.CoreNet.0.bias", None),
            s + "ff.fc2.weight": (f + "pos_ff.CoreNet.3.weight", None),
            s + "ff.fc2.bias": (f + "pos_ff.CoreNet.3.bias", None),
            s + "norm2.weight": (f + "pos_ff.layer_norm.weight", None),
            s + "norm2.bias": (f + "pos_ff.layer_norm.bias", None),
        })
    return out


def load_model_file(path):
    """A txlgen attn_type 4 model file back as an AdaptiveSpanLM (eval
    mode): what txlgen reads, in PyTorch."""
    from . import txlfile
    meta, tensors = txlfile.read(path)
    ints = {k: int(meta[k]) for k in ("n_token", "n_layer", "n_head",
                                      "d_model", "d_inner", "attn_span",
                                      "span_ramp", "tgt_len")}
    cfg = SpanConfig(ints["n_token"], ints["n_layer"], ints["n_head"],
                     ints["d_model"], ints["d_inner"], ints["attn_span"],
                     ints["span_ramp"], ints["tgt_len"])
    model = AdaptiveSpanLM(cfg)
    state = model.state_dict()
    M = cfg.d_model
    for name, (fname, how) in file_names(cfg).items():
        t = torch.from_numpy(tensors[fname].copy())
        if how == "qkv":
            q, k, v = t[:M], t[M:2 * M], t[2 * M:]
            state[name] = q
            state[name.replace("proj_query", "proj_key")] = k
            state[name.replace("proj_query", "proj_val")] = v
        elif how == "flat":
            state[name] = t.reshape(-1, 1, 1)
        else:
            state[name] = t
    model.load_state_dict(state)
    return model.eval()
