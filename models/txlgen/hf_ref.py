"""Hugging Face's Transformer-XL, transcribed as a test oracle.

What Hugging Face's transformers computes with a TransfoXL directory
(config.json, pytorch_model.bin or model.safetensors), in its own layout,
written from reading its modeling_transfo_xl.py and
modeling_transfo_xl_utilities.py, not from txl_ref.py, so that converting
such a directory and scoring it with txlgen is checked against an
independent computation:

  - config.json read as TransfoXLConfig reads it: a key it lacks takes
    that class's default (HF_DEFAULTS: the wt103 model's sizes,
    same_length true, clamp_len 1000, mem_len 1600, untie_r true,
    layer_norm_epsilon 1e-5), tie_projs from proj_share_all_but_first
    unless given, the output weights tied on tie_word_embeddings (default
    true; a key tie_weight is not read);
  - the tensors under HF's names (transformer.word_emb..., per-layer
    transformer.layers.N.dec_attn.r_w_bias with untie_r, crit...), ties
    made as TransfoXLLMHeadModel.tie_weights() makes them (the embedding's
    tensors used, whatever the file holds under the tied names);
  - the memory started as init_mems() starts it: mem_len zero states per
    layer (mem_len 0: none);
  - ProjectedAdaptiveLogSoftmax reading tail cluster i (1-based) from the
    head's column cutoffs[0] + i - 1, as HF's (and the TF code) does;
  - the same_length mask of HF (the PyTorch code's), LayerNorm with
    layer_norm_epsilon, masked scores set to the type's lowest value.

Computed in float64.  Tensors are time-major as HF's TransfoXLModel
computes them internally.  For tests: needs PyTorch.
"""

import json
import math
import os

import torch
import torch.nn.functional as F

from .conventions import LAYER_NORM_EPS, REL_PARTIAL

# TransfoXLConfig's defaults (its __init__).
HF_DEFAULTS = dict(vocab_size=267735, cutoffs=[20000, 40000, 200000],
                   d_model=1024, d_embed=1024, n_head=16, d_head=64,
                   d_inner=4096, div_val=4, pre_lnorm=False, n_layer=18,
                   mem_len=1600, clamp_len=1000, same_length=True,
                   proj_share_all_but_first=True, attn_type=REL_PARTIAL,
                   sample_softmax=-1, adaptive=True, untie_r=True,
                   layer_norm_epsilon=LAYER_NORM_EPS["huggingface"],
                   tie_word_embeddings=True)


class HFConfig:
    """config.json as TransfoXLConfig holds it."""

    def __init__(self, raw):
        c = dict(HF_DEFAULTS)
        c.update(raw)
        for k, v in c.items():
            setattr(self, k, v)
        self.cutoffs = list(c["cutoffs"])
        if "tie_projs" not in raw:
            share = bool(c["proj_share_all_but_first"])
            self.tie_projs = [False] + [share] * len(self.cutoffs)
        if self.attn_type != REL_PARTIAL or self.sample_softmax > 0 or \
                not self.adaptive:
            raise ValueError("only attn_type 0 with an adaptive (or full) "
                             "softmax is transcribed")


def load_state(path):
    """name -> float64 tensor of pytorch_model.bin or model.safetensors
    (a test's own files: read with torch.load)."""
    st = os.path.join(path, "model.safetensors")
    if os.path.exists(st):
        from .checkpoint import read_safetensors
        return {k: torch.from_numpy(v.copy()).double()
                for k, v in read_safetensors(st).items()}
    sd = torch.load(os.path.join(path, "pytorch_model.bin"),
                    map_location="cpu", weights_only=True)
    return {k: v.double() for k, v in sd.items()}


def from_original(items, n_layer, clone=False):
    """The original's (name, tensor) @items (shared r biases) under
    Hugging Face's names: r_w_bias and r_r_bias once per layer (cloned
    with @clone), the tail clusters' rows of cluster_weight and
    cluster_bias in HF's order (the TF code's: cluster i at row i - 1,
    where the original has row C - i)."""
    out = {}
    for k, v in items:
        if k in ("r_w_bias", "r_r_bias"):
            for i in range(n_layer):
                out[f"transformer.layers.{i}.dec_attn.{k}"] = \
                    v.clone() if clone else v
        elif k in ("crit.cluster_weight", "crit.cluster_bias"):
            out[k] = v.flip(0)
        elif k.startswith("crit."):
            out[k] = v
        else:
            out["transformer." + k] = v
    return out


class HFTransfoXL:
    """TransfoXLLMHeadModel's evaluation, from a directory or from a
    config dict and a state dict under HF's names."""

    def __init__(self, config, state):
        self.cfg = c = HFConfig(config)
        self.st = {k: v.double() for k, v in state.items()}
        self.n_token = c.vocab_size
        # cutoffs with n_token at the end, as HF's modules keep them
        self.ends = c.cutoffs + [self.n_token]
        self.bounds = list(zip([0] + c.cutoffs, self.ends))
        self.mem_len, self.clamp_len = c.mem_len, c.clamp_len
        self.same_length = c.same_length
        self.scale = 1 / math.sqrt(c.d_head)
        inv = self.st.get("transformer.pos_emb.inv_freq")
        if inv is None:
            inv = 1 / (10000 ** (torch.arange(0.0, c.d_model, 2.0,
                                              dtype=torch.float64) /
                                 c.d_model))
        self.inv_freq = inv

    @classmethod
    def from_dir(cls, path):
        with open(os.path.join(path, "config.json")) as f:
            return cls(json.load(f), load_state(path))

    # -- the tensors, ties resolved as tie_weights() does ----------------

    def emb_layer(self, i):
        return self.st[f"transformer.word_emb.emb_layers.{i}.weight"]

    def emb_proj(self, i):
        return self.st.get(f"transformer.word_emb.emb_projs.{i}")

    def out_weight(self, i):
        if self.cfg.tie_word_embeddings:
            return self.emb_layer(i)
        return self.st[f"crit.out_layers.{i}.weight"]

    def out_proj(self, i):
        c = self.cfg
        tied = i < len(c.tie_projs) and c.tie_projs[i]
        if tied and c.div_val == 1 and c.d_model != c.d_embed:
            return self.emb_proj(0)
        if tied and c.div_val != 1:
            return self.emb_proj(i)
        return self.st.get(f"crit.out_projs.{i}")

    def biases(self, i):
        c = self.cfg
        if c.untie_r:
            p = f"transformer.layers.{i}.dec_attn."
            return self.st[p + "r_w_bias"], self.st[p + "r_r_bias"]
        return self.st["transformer.r_w_bias"], self.st["transformer.r_r_bias"]

    # -- the forward pass -------------------------------------------------

    def init_mems(self, bsz=1):
        if self.mem_len <= 0:
            return None
        return [torch.zeros(self.mem_len, bsz, self.cfg.d_model,
                            dtype=torch.float64)
                for _ in range(self.cfg.n_layer)]

    def embed(self, x):
        """AdaptiveEmbedding: x [qlen, bsz] -> [qlen, bsz, d_model]."""
        c = self.cfg
        if c.div_val == 1:
            e = F.embedding(x, self.emb_layer(0))
            if c.d_model != c.d_embed:
                e = F.linear(e, self.emb_proj(0))
        else:
            flat = x.reshape(-1)
            e = torch.zeros(flat.numel(), c.d_model, dtype=torch.float64)
            for i, (lo, hi) in enumerate(self.bounds):
                m = (flat >= lo) & (flat < hi)
                idx = m.nonzero().squeeze(-1)
                if idx.numel() == 0:
                    continue
                ei = F.embedding(flat[idx] - lo, self.emb_layer(i))
                e[idx] = F.linear(ei, self.emb_proj(i))
            e = e.view(*x.shape, c.d_model)
        return e * c.d_model ** 0.5

    def layer_norm(self, x, name):
        return F.layer_norm(x, x.shape[-1:], self.st[name + ".weight"],
                            self.st[name + ".bias"],
                            self.cfg.layer_norm_epsilon)

    @staticmethod
    def rel_shift(x):
        pad = torch.zeros((x.size(0), 1) + x.shape[2:], dtype=x.dtype)
        xp = torch.cat([pad, x], 1).view((x.size(1) + 1, x.size(0)) +
                                         x.shape[2:])
        return xp[1:].view_as(x)

    def attention(self, i, w, r, mask, mem):
        c = self.cfg
        p = f"transformer.layers.{i}.dec_attn."
        qlen, bsz = w.size(0), w.size(1)
        cat = w if mem is None else torch.cat([mem, w], 0)
        src = self.layer_norm(cat, p + "layer_norm") if c.pre_lnorm \
            else cat
        heads = F.linear(src, self.st[p + "qkv_net.weight"])
        rk = F.linear(r, self.st[p + "r_net.weight"])
        q, k, v = torch.chunk(heads, 3, dim=-1)
        q = q[-qlen:]
        klen = k.size(0)
        q = q.view(qlen, bsz, c.n_head, c.d_head)
        k = k.view(klen, bsz, c.n_head, c.d_head)
        v = v.view(klen, bsz, c.n_head, c.d_head)
        rk = rk.view(r.size(0), c.n_head, c.d_head)
        rw, rr = self.biases(i)
        ac = torch.einsum("ibnd,jbnd->ijbn", q + rw, k)
        bd = self.rel_shift(torch.einsum("ibnd,jnd->ijbn", q + rr, rk))
        score = (ac + bd) * self.scale
        score = score.masked_fill(mask[:, :, None, None],
                                  torch.finfo(score.dtype).min)
        prob = F.softmax(score, dim=1)
        vec = torch.einsum("ijbn,jbnd->ibnd", prob, v)
        out = F.linear(vec.reshape(qlen, bsz, -1), self.st[p + "o_net.weight"])
        if c.pre_lnorm:
            return w + out
        return self.layer_norm(w + out, p + "layer_norm")

    def feed_forward(self, i, x):
        p = f"transformer.layers.{i}.pos_ff."

        def core(y):
            y = F.relu(F.linear(y, self.st[p + "CoreNet.0.weight"],
                                self.st[p + "CoreNet.0.bias"]))
            return F.linear(y, self.st[p + "CoreNet.3.weight"],
                            self.st[p + "CoreNet.3.bias"])
        if self.cfg.pre_lnorm:
            return x + core(self.layer_norm(x, p + "layer_norm"))
        return self.layer_norm(x + core(x), p + "layer_norm")

    def mask(self, qlen, mlen):
        klen = mlen + qlen
        ones = torch.ones(qlen, klen, dtype=torch.bool)
        if not self.same_length:
            return torch.triu(ones, diagonal=1 + mlen)
        mask_len = klen - self.mem_len
        shift = qlen - mask_len if mask_len > 0 else qlen
        return torch.triu(ones, 1 + mlen) | torch.tril(ones, -shift)

    def forward(self, x, mems):
        """x [qlen, bsz] -> (last hidden [qlen, bsz, d_model], new mems)."""
        qlen = x.size(0)
        mlen = mems[0].size(0) if mems is not None else 0
        klen = mlen + qlen
        h = self.embed(x)
        mask = self.mask(qlen, mlen)
        pos = torch.arange(klen - 1, -1, -1.0, dtype=torch.float64)
        if self.clamp_len > 0:
            pos = pos.clamp(max=self.clamp_len)
        ang = torch.outer(pos, self.inv_freq)
        r = torch.cat([ang.sin(), ang.cos()], -1)
        hids = []
        for i in range(self.cfg.n_layer):
            hids.append(h)
            h = self.attention(i, h, r, mask,
                               None if mems is None else mems[i])
            h = self.feed_forward(i, h)
        new = None
        if mems is not None:
            end = mlen + max(0, qlen)
            beg = max(0, end - self.mem_len)
            new = [torch.cat([m, hh], 0)[beg:end]
                   for m, hh in zip(mems, hids)]
        return h, new

    # -- the output layer -------------------------------------------------

    def logit(self, h, weight, bias, proj):
        if proj is not None:
            h = F.linear(h, proj.t())
        return F.linear(h, weight, bias)

    def cluster(self, i):
        """(weight, bias, projection) of cluster i's own tokens."""
        c = self.cfg
        if c.div_val == 1:
            lo, hi = self.bounds[i]
            w = self.out_weight(0)[lo:hi]
            b = self.st["crit.out_layers.0.bias"][lo:hi]
        else:
            w, b = self.out_weight(i), self.st[f"crit.out_layers.{i}.bias"]
        return w, b, self.out_proj(i)

    def log_prob(self, h, target):
        """The log-probability of each target (hidden [n, d_model], target
        [n]): ProjectedAdaptiveLogSoftmax.forward with labels, without its
        shift (the targets are the next tokens already)."""
        c = self.cfg
        if not c.cutoffs:
            w, b, proj = self.cluster(0)
            lp = F.log_softmax(self.logit(h, w, b, proj), -1)
            return lp.gather(1, target[:, None])[:, 0]
        w, b, proj = self.cluster(0)
        hw = torch.cat([w, self.st["crit.cluster_weight"]], 0)
        hb = torch.cat([b, self.st["crit.cluster_bias"]], 0)
        head = F.log_softmax(self.logit(h, hw, hb, proj), -1)
        out = torch.zeros(target.shape, dtype=torch.float64)
        for i, (lo, hi) in enumerate(self.bounds):
            m = (target >= lo) & (target < hi)
            idx = m.nonzero().squeeze(-1)
            if idx.numel() == 0:
                continue
            t = target[idx] - lo
            if i == 0:
                out[idx] = head[idx].gather(1, t[:, None])[:, 0]
                continue
            tail = F.log_softmax(self.logit(h[idx], *self.cluster(i)), -1)
            col = c.cutoffs[0] + i - 1      # the TF order
            out[idx] = head[idx, col] + tail.gather(1, t[:, None])[:, 0]
        return out

    @torch.no_grad()
    def score(self, ids, seg_len, mem_len=None, mems="init"):
        """Log-probs (float64 list) of ids[1:], in segments of seg_len
        inputs, the memory carried from init_mems() (mems "init", HF's
        start) or from no position (mems "empty")."""
        if mem_len is not None:
            self.mem_len = mem_len
        ids = torch.as_tensor(ids, dtype=torch.long)
        m = self.init_mems()
        if mems == "empty" and m is not None:
            m = [x[:0] for x in m]
        out = []
        for s in range(0, len(ids) - 1, seg_len):
            y = ids[s + 1:s + 1 + seg_len]
            x = ids[s:s + len(y)]
            h, m = self.forward(x[:, None], m)
            out.append(self.log_prob(h[:, 0], y))
        return torch.cat(out).tolist()
