"""Reference Transformer-XL in PyTorch: the oracle for txlgen's numbers.

Written from the semantics of the original code (kimiyoung/transformer-xl,
pytorch/mem_transformer.py and utils/proj_adaptive_softmax.py), with the
same parameter names, so that a state_dict of the original MemTransformerLM
loads here and a state_dict of this model converts like an original one.
It is also the model that models/train.py trains.  Every model the
original can build and evaluate:

  attn_type 0  relative positions: projected sinusoids, biases r_w_bias and
               r_r_bias (the Transformer-XL of the paper)
  attn_type 1  learnable relative positions in the manner of Shaw et al.:
               per layer r_emb, r_bias and r_w_bias
  attn_type 2  vanilla Transformer, absolute sinusoids added at the input
  attn_type 3  vanilla Transformer, learned absolute positions r_emb added
               to the input of every layer
  cutoffs, div_val, tie_projs: adaptive input and adaptive softmax.

How the code that wrote a checkpoint computes, where the TensorFlow code
(and Hugging Face's port) differs from the PyTorch code: cfg.layer_norm_eps
(tf.contrib.layers.layer_norm: 1e-12), cfg.same_length_mask "tf" (a query
sees the last mem_len + 1 positions), and score_ids(mem_init="zeros") (the
memory starts as mem_len zero states).

Types 2 and 3 run without memory (mem_len 0): the original adds their
positions in place into the memory tensors (it crashes for type 2, and
type 3 accumulates positions in the cached states), semantics it never
evaluated, so they are refused here rather than guessed at.

Tensors are time-major like the original: tokens [qlen, bsz], hidden
[qlen, bsz, d_model], mems a list of n_layer + 1 tensors [mlen, bsz, d_model]
holding the inputs of each layer (mems[0] = scaled embeddings).
"""

import math

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F

from .conventions import (ABS_LEARNED, ABS_SINUSOID, DEFAULT_MEM_INIT,
                          MEM_INITS, MEMORY_KINDS, NO_MEMORY_KINDS,
                          REL_LEARNED, REL_PARTIAL, SINUSOID_KINDS)
from .hparams import HPARAM_NAMES, TxlConfig, cluster_bounds   # noqa: F401


class PositionalEmbedding(nn.Module):
    """Sinusoids of positions: [sin(p f), cos(p f)] concatenated."""

    def __init__(self, d_model):
        super().__init__()
        inv_freq = 1 / (10000 ** (torch.arange(0.0, d_model, 2.0) / d_model))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, pos_seq):
        angles = torch.outer(pos_seq, self.inv_freq)
        return torch.cat([angles.sin(), angles.cos()], dim=-1)


# ---------------------------------------------------------------- attention

class Attention(nn.Module):
    """What every attention of the original shares: the masked softmax
    over keys, o_net, and the residual with its LayerNorm.  Subclasses
    make their input nets first, then call add_output() (the original's
    parameter order)."""

    def add_output(self, cfg):
        self.n_head, self.d_head = cfg.n_head, cfg.d_head
        self.pre_lnorm = cfg.pre_lnorm
        self.o_net = nn.Linear(cfg.n_head * cfg.d_head, cfg.d_model,
                               bias=False)
        self.layer_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)
        self.dropatt = nn.Dropout(cfg.dropatt)
        self.scale = 1 / math.sqrt(cfg.d_head)

    def heads(self, x, n):
        return x.view(n, x.size(1), self.n_head, self.d_head)

    def output(self, w, score, v, attn_mask):
        """score [qlen, klen, bsz, n_head] (scaled), v [klen, bsz, n_head,
        d_head] -> the layer's attention output for the inputs w."""
        qlen, bsz = w.size(0), w.size(1)
        score = score.float().masked_fill(attn_mask[:, :, None, None],
                                          float("-inf"))
        prob = self.dropatt(F.softmax(score, dim=1).type_as(v))
        vec = torch.einsum("ijbn,jbnd->ibnd", prob, v)
        out = self.drop(self.o_net(vec.reshape(qlen, bsz, -1)))
        return w + out if self.pre_lnorm else self.layer_norm(w + out)


class RelAttention(Attention):
    """Relative attention (types 0 and 1): one qkv_net over the window
    cat(mems, w), layer-normalised first with pre_lnorm."""

    def add_qkv(self, cfg):
        self.qkv_net = nn.Linear(cfg.d_model, 3 * cfg.n_head * cfg.d_head,
                                 bias=False)

    def qkv(self, w, mems):
        """q of the qlen new positions; k, v of the klen window."""
        qlen = w.size(0)
        cat = w if mems is None or mems.size(0) == 0 else \
            torch.cat([mems, w], 0)
        heads = self.qkv_net(self.layer_norm(cat) if self.pre_lnorm else cat)
        q, k, v = torch.chunk(heads, 3, dim=-1)
        return (self.heads(q[-qlen:], qlen), self.heads(k, cat.size(0)),
                self.heads(v, cat.size(0)))

    @staticmethod
    def rel_shift(bd):
        """bd[i, r] scores query i against R row r (distance klen-1-r);
        return x[i, j] = bd[i, j + qlen-1-i], the score at distance
        mlen+i-j.  Entries with j > mlen+i are garbage and must be masked."""
        qlen, klen = bd.size(0), bd.size(1)
        padded = F.pad(bd, (0, 0, 0, 0, 1, 0))          # [qlen, klen+1, ...]
        padded = padded.view(klen + 1, qlen, *bd.shape[2:])
        return padded[1:].view_as(bd)


class RelPartialLearnableMultiHeadAttn(RelAttention):
    """attn_type 0: positions are sinusoids of distances projected by
    r_net; content bias r_w_bias and position bias r_r_bias."""

    def __init__(self, cfg):
        super().__init__()
        self.add_qkv(cfg)
        self.r_net = nn.Linear(cfg.d_model, cfg.n_head * cfg.d_head,
                               bias=False)
        self.add_output(cfg)

    def forward(self, w, r, r_w_bias, r_r_bias, attn_mask, mems):
        q, k, v = self.qkv(w, mems)
        r_k = self.r_net(r).view(r.size(0), self.n_head, self.d_head)
        ac = torch.einsum("ibnd,jbnd->ijbn", q + r_w_bias, k)
        bd = self.rel_shift(torch.einsum("ibnd,jnd->ijbn", q + r_r_bias, r_k))
        return self.output(w, (ac + bd) * self.scale, v, attn_mask)


class RelLearnableMultiHeadAttn(RelAttention):
    """attn_type 1 (Shaw et al.): a learned embedding r_emb [klen, n_head,
    d_head] and bias r_bias [klen, n_head] per distance (row j for distance
    klen-1-j, see MemTransformerLM.learnable_positions), and the content
    bias r_w_bias; the position term has no bias of its own."""

    def __init__(self, cfg):
        super().__init__()
        self.add_qkv(cfg)
        self.add_output(cfg)

    def forward(self, w, r_emb, r_w_bias, r_bias, attn_mask, mems):
        q, k, v = self.qkv(w, mems)
        ac = torch.einsum("ibnd,jbnd->ijbn", q + r_w_bias, k)
        b = torch.einsum("ibnd,jnd->ijbn", q, r_emb)
        bd = self.rel_shift(b + r_bias[None, :, None])
        return self.output(w, (ac + bd) * self.scale, v, attn_mask)


class MultiHeadAttn(Attention):
    """attn_types 2 and 3: plain attention, positions are in the inputs.
    As in the original, pre_lnorm normalises the window for k and v but q
    is computed from the un-normalised inputs."""

    def __init__(self, cfg):
        super().__init__()
        hd = cfg.n_head * cfg.d_head
        self.q_net = nn.Linear(cfg.d_model, hd, bias=False)
        self.kv_net = nn.Linear(cfg.d_model, 2 * hd, bias=False)
        self.add_output(cfg)

    def forward(self, h, attn_mask, mems):
        c = h if mems is None or mems.size(0) == 0 else \
            torch.cat([mems, h], 0)
        if self.pre_lnorm:
            c = self.layer_norm(c)
        q = self.heads(self.q_net(h), h.size(0))
        k, v = torch.chunk(self.kv_net(c), 2, dim=-1)
        score = torch.einsum("ibnd,jbnd->ijbn", q,
                             self.heads(k, c.size(0))) * self.scale
        return self.output(h, score, self.heads(v, c.size(0)), attn_mask)


ATTENTION = {REL_PARTIAL: RelPartialLearnableMultiHeadAttn,
             REL_LEARNED: RelLearnableMultiHeadAttn,
             ABS_SINUSOID: MultiHeadAttn, ABS_LEARNED: MultiHeadAttn}


class PositionwiseFF(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.pre_lnorm = cfg.pre_lnorm
        # Indices 0 and 3 carry the weights, as in the original Sequential.
        self.CoreNet = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_inner), nn.ReLU(inplace=True),
            nn.Dropout(cfg.dropout), nn.Linear(cfg.d_inner, cfg.d_model),
            nn.Dropout(cfg.dropout))
        self.layer_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)

    def forward(self, x):
        if self.pre_lnorm:
            return x + self.CoreNet(self.layer_norm(x))
        return self.layer_norm(x + self.CoreNet(x))


class DecoderLayer(nn.Module):
    """Attention of the model's attn_type, then the feed-forward block.
    pos: the attention's position arguments (none for types 2 and 3)."""

    def __init__(self, cfg):
        super().__init__()
        self.dec_attn = ATTENTION[cfg.attn_type](cfg)
        self.pos_ff = PositionwiseFF(cfg)

    def forward(self, x, pos, attn_mask, mems):
        return self.pos_ff(self.dec_attn(x, *pos, attn_mask, mems))


# ---------------------------------------------------------------- adaptive input and softmax



class _Clusters(nn.Module):
    """What the adaptive input and softmax share: the original's
    attributes (cutoffs with n_token, cutoff_ends with 0 too)."""

    def __init__(self, cfg):
        super().__init__()
        self.n_token, self.d_embed, self.d_proj = \
            cfg.n_token, cfg.d_embed, cfg.d_model
        self.div_val = cfg.div_val
        self.cutoffs = cfg.cutoffs + [cfg.n_token]
        self.cutoff_ends = [0] + self.cutoffs


class AdaptiveEmbedding(_Clusters):
    """div_val 1: one table [n_token, d_embed], projected to d_model (P.e)
    when d_embed != d_model.  div_val > 1: cluster i has its own table
    [size_i, d_embed // div_val**i] and projection [d_model, d_emb_i].
    Scaled by sqrt(d_model) (unless emb_scale is false; proj_same_dim
    projects where d_embed = d_model too)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.emb_layers = nn.ModuleList()
        self.emb_projs = nn.ParameterList()
        if cfg.div_val == 1:
            self.emb_layers.append(nn.Embedding(cfg.n_token, cfg.d_embed))
            if cfg.has_proj():
                self.emb_projs.append(nn.Parameter(
                    torch.empty(cfg.d_model, cfg.d_embed)))
        else:
            for i, (lo, hi) in enumerate(cfg.cluster_bounds()):
                self.emb_layers.append(nn.Embedding(hi - lo, cfg.d_emb(i)))
                self.emb_projs.append(nn.Parameter(
                    torch.empty(cfg.d_model, cfg.d_emb(i))))
        self.emb_scale = cfg.d_model ** 0.5 if cfg.emb_scale else 1.0

    def forward(self, x):
        # The residual stream stays in the weights' type under autocast
        # (the LayerNorms want it so).
        if self.div_val == 1:
            e = self.emb_layers[0](x)
            if len(self.emb_projs):
                e = F.linear(e, self.emb_projs[0]).to(e.dtype)
            return e * self.emb_scale
        w = self.emb_layers[0].weight
        e = torch.zeros(*x.shape, self.d_proj, dtype=w.dtype,
                        device=w.device)
        for i, (lo, hi) in enumerate(cluster_bounds(self.cutoff_ends)):
            m = (x >= lo) & (x < hi)
            if m.any():
                e[m] = F.linear(self.emb_layers[i](x[m] - lo),
                                self.emb_projs[i]).to(e.dtype)
        return e * self.emb_scale


class ProjectedAdaptiveLogSoftmax(_Clusters):
    """The output layer.  Without cutoffs, a softmax over
    out_layers[0](h . P) (P = out_projs[0] where there is a projection).

    With cutoffs, a head over the shortlist [0, c0) and one logit per tail
    cluster (cluster_weight, cluster_bias, appended after the shortlist),
    and a softmax per tail cluster: log p(t) = head[t] in the shortlist,
    head[-i] + tail_i[t - lo_i] in tail cluster i, i.e. the tail clusters'
    logits are in REVERSE order (tail 1 uses the head's last column), as
    the original's head_logprob[:, -i].  Cluster i uses out_projs[i] (with
    div_val 1 too: every cluster has its own projection), and with div_val
    1 its weight and bias are rows lo_i..hi_i of out_layers[0]; the head
    weight is cat(cluster 0's weight, cluster_weight) with d_embed columns.
    Attributes as the original's: cutoffs with n_token, n_clusters the
    number of TAIL clusters.
    """

    def __init__(self, cfg):
        super().__init__(cfg)
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(cfg.cutoffs)
        if self.n_clusters:
            self.cluster_weight = nn.Parameter(
                torch.zeros(self.n_clusters, cfg.d_embed))
            self.cluster_bias = nn.Parameter(torch.zeros(self.n_clusters))
        self.out_layers = nn.ModuleList()
        self.out_projs = nn.ParameterList()
        if cfg.div_val == 1:
            self.out_layers.append(nn.Linear(cfg.d_embed, cfg.n_token))
        else:
            for i, (lo, hi) in enumerate(cfg.cluster_bounds()):
                self.out_layers.append(nn.Linear(cfg.d_emb(i), hi - lo))
        if cfg.has_proj():
            for i in range(cfg.n_clusters):
                self.out_projs.append(nn.Parameter(
                    torch.empty(cfg.d_model, cfg.d_emb(i))))

    def cluster(self, i):
        """(weight, bias, projection or None) of cluster i's own tokens."""
        proj = self.out_projs[i] if len(self.out_projs) else None
        if self.div_val > 1:
            return self.out_layers[i].weight, self.out_layers[i].bias, proj
        layer = self.out_layers[0]
        if not self.n_clusters:
            return layer.weight, layer.bias, proj
        lo, hi = self.cutoff_ends[i], self.cutoff_ends[i + 1]
        return layer.weight[lo:hi], layer.bias[lo:hi], proj

    @staticmethod
    def project_logits(h, weight, bias, proj):
        if proj is not None:
            h = F.linear(h, proj.t())                    # h . P
        return F.linear(h, weight, bias)

    def logits(self, hidden):
        """The logits of the full softmax (no cutoffs only)."""
        if self.n_clusters:
            raise ValueError("an adaptive softmax has no single logit "
                             "vector: use log_probs()")
        return self.project_logits(hidden, *self.cluster(0))

    def head_log_probs(self, hidden, dtype):
        weight, bias, proj = self.cluster(0)
        weight = torch.cat([weight, self.cluster_weight], 0)
        bias = torch.cat([bias, self.cluster_bias], 0)
        return F.log_softmax(self.project_logits(hidden, weight, bias, proj)
                             .to(dtype), dim=-1)

    def tail_log_probs(self, hidden, i, dtype):
        return F.log_softmax(self.project_logits(hidden, *self.cluster(i))
                             .to(dtype), dim=-1)

    def log_probs(self, hidden, dtype=None):
        """Log-probabilities of every token [..., n_token]; logits in the
        weights' type, the log-softmax in dtype (default that type)."""
        dtype = dtype or hidden.dtype
        if not self.n_clusters:
            return F.log_softmax(self.logits(hidden).to(dtype), dim=-1)
        head = self.head_log_probs(hidden, dtype)
        parts = [head[..., :self.shortlist_size]]
        for i in range(1, self.n_clusters + 1):
            parts.append(head[..., -i, None] +
                         self.tail_log_probs(hidden, i, dtype))
        return torch.cat(parts, -1)

    def log_prob(self, hidden, target, dtype=None):
        """Log-probability of each target: hidden [n, d_model], target [n]
        -> [n].  With cutoffs it computes the head and the target's own
        cluster only, as the original and txlgen --score do."""
        dtype = dtype or hidden.dtype
        if not self.n_clusters:
            return self.log_probs(hidden, dtype).gather(
                1, target[:, None])[:, 0]
        head = self.head_log_probs(hidden, dtype)
        lp = torch.zeros(target.shape, dtype=head.dtype, device=head.device)
        for i, (lo, hi) in enumerate(cluster_bounds(self.cutoff_ends)):
            m = (target >= lo) & (target < hi)
            if not m.any():
                continue
            t = (target[m] - lo)[:, None]
            if i == 0:
                lp[m] = head[m].gather(1, t)[:, 0]
            else:
                tail = self.tail_log_probs(hidden[m], i, dtype)
                lp[m] = head[m, -i] + tail.gather(1, t)[:, 0]
        return lp


# ---------------------------------------------------------------- the model

class MemTransformerLM(nn.Module):
    def __init__(self, cfg: TxlConfig):
        super().__init__()
        cfg.check_supported()
        self.cfg = cfg
        self.word_emb = AdaptiveEmbedding(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList([DecoderLayer(cfg)
                                     for _ in range(cfg.n_layer)])
        self.crit = ProjectedAdaptiveLogSoftmax(cfg)
        if cfg.tie_weight:
            for i, layer in enumerate(self.crit.out_layers):
                layer.weight = self.word_emb.emb_layers[i].weight
        # As the original: with div_val 1 every tied cluster shares the
        # one input projection; with div_val > 1 cluster i shares its own.
        for i, tied in enumerate(cfg.tie_projs):
            if tied and len(self.crit.out_projs):
                j = 0 if cfg.div_val == 1 else i
                self.crit.out_projs[i] = self.word_emb.emb_projs[j]
        L, K, H, D = cfg.n_layer, cfg.max_klen, cfg.n_head, cfg.d_head
        if cfg.attn_type in SINUSOID_KINDS:
            self.pos_emb = PositionalEmbedding(cfg.d_model)
        if cfg.attn_type == REL_PARTIAL:
            shape = (L, H, D) if cfg.untie_r else (H, D)
            self.r_w_bias = nn.Parameter(torch.zeros(shape))
            self.r_r_bias = nn.Parameter(torch.zeros(shape))
        elif cfg.attn_type == REL_LEARNED:
            self.r_emb = nn.Parameter(torch.zeros(L, K, H, D))
            self.r_w_bias = nn.Parameter(torch.zeros(L, H, D))
            self.r_bias = nn.Parameter(torch.zeros(L, K, H))
        elif cfg.attn_type == ABS_LEARNED:
            self.r_emb = nn.Parameter(torch.zeros(L, K, H, D))
        # Run-time settings, like the original's reset_length/clamp_len.
        # Types 2 and 3 run without memory (their mem_len only sized
        # max_klen at construction).
        self.mem_len = cfg.mem_len if cfg.attn_type in MEMORY_KINDS else 0
        self.clamp_len = cfg.clamp_len
        self.same_length = cfg.same_length

    def init_weights(self, std=0.02, generator=None):
        """Normal(0, std) for matrices and position tables, zero biases,
        LayerNorm gains near 1."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "layer_norm.weight" in name:
                    p.normal_(1.0, std, generator=generator)
                elif name.endswith("bias"):
                    p.zero_()
                else:
                    p.normal_(0.0, std, generator=generator)

    def _biases(self, i):
        if self.cfg.untie_r:
            return self.r_w_bias[i], self.r_r_bias[i]
        return self.r_w_bias, self.r_r_bias

    def attn_mask(self, qlen, mlen, device):
        """True where query i (window index mlen+i) must not see key j."""
        klen = mlen + qlen
        i = torch.arange(qlen, device=device)[:, None]
        j = torch.arange(klen, device=device)[None, :]
        mask = j > mlen + i
        if self.same_length:
            # Each query sees exactly the last mem_len positions, itself
            # included (the original's triu + tril mask); with the TF
            # code's mask (same_length_mask "tf") one more: its
            # _create_mask hides from query i only the keys j < i of the
            # first qlen, i.e. keys older than mlen positions before it
            # (the TF evaluation's memory always holds mlen = mem_len).
            extra = 1 if self.cfg.same_length_mask == "tf" else 0
            mask = mask | (j <= mlen + i - self.mem_len - extra)
        return mask

    def distances(self, n, device):
        """Sinusoid positions of a window of n: n-1, ..., 0 (the last
        position is 0), clamped to clamp_len when it is > 0."""
        pos_seq = torch.arange(n - 1, -1, -1.0, device=device)
        if self.clamp_len > 0:
            pos_seq = pos_seq.clamp(max=self.clamp_len)
        return pos_seq

    def learnable_positions(self, i, klen):
        """attn_type 1: layer i's (r_emb, r_w_bias, r_bias) for a window of
        klen keys, row j for distance d = klen-1-j.  Table row max_klen-1-d
        holds distance d.  As the original: clamp_len > 0 keeps only the
        last clamp_len rows of the tables, and a window longer than what is
        kept repeats its first row, so distance d reads row
        max_klen-1-min(d, n-1) with n the rows kept."""
        K = self.cfg.max_klen
        n = min(K, self.clamp_len) if self.clamp_len > 0 else K
        d = torch.arange(klen - 1, -1, -1, device=self.r_emb.device)
        rows = K - 1 - d.clamp(max=n - 1)
        return self.r_emb[i, rows], self.r_w_bias[i], self.r_bias[i, rows]

    def check_run(self, qlen, mlen):
        if self.same_length and self.mem_len == 0:
            raise ValueError("same_length with mem_len 0 masks every key")
        t = self.cfg.attn_type
        if t in NO_MEMORY_KINDS and (self.mem_len > 0 or mlen > 0):
            raise ValueError(f"attn_type {t} runs with mem_len 0 only (the "
                             "original adds positions into the memory in "
                             f"place); got mem_len {self.mem_len}")
        if t == ABS_LEARNED and qlen > self.cfg.max_klen:
            raise ValueError(f"attn_type 3: a segment of {qlen} tokens is "
                             f"longer than the r_emb table ({self.cfg.max_klen}"
                             " rows)")

    def forward(self, x, mems=None):
        """x [qlen, bsz] -> (hidden [qlen, bsz, d_model], new mems)."""
        qlen = x.size(0)
        mlen = mems[0].size(0) if mems else 0
        klen = mlen + qlen
        self.check_run(qlen, mlen)
        t = self.cfg.attn_type
        h = self.word_emb(x)
        if t == REL_PARTIAL:
            r = self.drop(self.pos_emb(self.distances(klen, h.device))
                          .to(h.dtype))
        elif t == ABS_SINUSOID:       # absolute sinusoids at the input
            h = h + self.pos_emb(self.distances(qlen, h.device)).to(
                h.dtype)[:, None]
        mask = self.attn_mask(qlen, mlen, h.device)
        h = self.drop(h)
        hids = [h]
        for i, layer in enumerate(self.layers):
            if t == REL_PARTIAL:
                pos = (r, *self._biases(i))
            elif t == REL_LEARNED:
                pos = self.learnable_positions(i, klen)
            else:
                pos = ()
            if t == ABS_LEARNED:  # learned absolute positions at every
                # layer, the last position of the segment on the table's last row
                h = h + self.r_emb[i, -qlen:].reshape(qlen, 1, -1)
            h = layer(h, pos, mask, mems[i] if mems else None)
            hids.append(h)
        h = self.drop(h)
        return h, self.update_mems(hids, mems)

    def update_mems(self, hids, mems):
        if self.mem_len <= 0:
            return None
        with torch.no_grad():
            new = []
            for i, hid in enumerate(hids):
                cat = hid if not mems else torch.cat([mems[i], hid], 0)
                new.append(cat[-self.mem_len:].detach())
        return new

    def logits(self, hidden):
        """Logits of the full softmax (not for an adaptive softmax)."""
        return self.crit.logits(hidden)

    def log_probs(self, hidden, dtype=None):
        """Log-probabilities of every token, for any output layer."""
        return self.crit.log_probs(hidden, dtype)

    def nll(self, x, y, mems=None):
        """Per-token negative log-likelihood [qlen, bsz] of targets y."""
        hidden, new_mems = self.forward(x, mems)
        if self.cfg.cutoffs:
            lp = self.crit.log_prob(hidden.reshape(-1, hidden.size(-1)),
                                    y.reshape(-1), torch.float32)
            return -lp.view_as(y), new_mems
        logits = self.logits(hidden).float()
        nll = F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1),
                              reduction="none").view_as(y)
        return nll, new_mems


# ---------------------------------------------------------------- scoring

def init_mems(model, bsz=1):
    """A memory of mem_len zero states for each layer's input (the TF
    evaluation's and Hugging Face's init_mems; txlgen --mem-init zeros),
    or None without memory."""
    if model.mem_len <= 0:
        return None
    p = next(model.parameters())
    return [torch.zeros(model.mem_len, bsz, model.cfg.d_model,
                        dtype=p.dtype, device=p.device)
            for _ in range(model.cfg.n_layer + 1)]


def _set_run(model, mem_len, clamp_len, same_length):
    model.eval()
    if mem_len is not None:
        model.mem_len = mem_len
    if clamp_len is not None:
        model.clamp_len = clamp_len
    if same_length is not None:
        model.same_length = same_length


@torch.no_grad()
def score_ids(model, ids, seg_len, mem_len=None, clamp_len=None,
              same_length=None, adapt_lr=0.0, mem_init=DEFAULT_MEM_INIT):
    """The original eval.py protocol on one stream of token ids:
    segments ids[s:s+seg_len] predicting ids[s+1:s+1+seg_len], memory
    carried.  Returns a float64 tensor of len(ids)-1 log-probs.
    mem_init "zeros" starts the memory as mem_len zero states (init_mems,
    as the TF evaluation does), "empty" (the PyTorch code's) with none.

    adapt_lr > 0 is dynamic evaluation of the output layer (txlgen
    --adapt): after scoring each segment, one gradient-descent step on its
    mean NLL changes a copy of the output weight and bias (the model, and
    a tied input embedding, stay as they are).  It is defined for the full
    softmax only: with an adaptive softmax (cutoffs) it is refused."""
    _set_run(model, mem_len, clamp_len, same_length)
    adaptive = bool(model.cfg.cutoffs)
    if adapt_lr > 0 and adaptive:
        raise ValueError("adapt_lr: dynamic evaluation adapts a full "
                         "softmax; this model has an adaptive softmax "
                         f"(cutoffs {model.cfg.cutoffs})")
    device = next(model.parameters()).device
    ids = torch.as_tensor(ids, dtype=torch.long, device=device)
    if not adaptive:
        weight, bias, proj = model.crit.cluster(0)
        weight, bias = weight.clone(), bias.clone()
    if mem_init not in MEM_INITS:
        raise ValueError(f"mem_init {mem_init!r}: {' or '.join(MEM_INITS)}")
    out, mems = [], init_mems(model) if mem_init == "zeros" else None
    for s in range(0, len(ids) - 1, seg_len):
        x = ids[s:s + seg_len]
        y = ids[s + 1:s + 1 + seg_len]
        x = x[:len(y)]
        hidden, mems = model.forward(x[:, None], mems)
        h = hidden[:, 0]
        if adaptive:
            out.append(model.crit.log_prob(h, y, torch.float64))
            continue
        if proj is not None:
            h = F.linear(h, proj.t())
        logits = F.linear(h, weight, bias)
        lp = F.log_softmax(logits.double(), dim=-1)
        out.append(lp.gather(1, y[:, None])[:, 0])
        if adapt_lr > 0:
            g = torch.softmax(logits.float(), dim=-1)
            g[torch.arange(len(y)), y] -= 1.0
            g *= adapt_lr / len(y)
            weight -= g.t() @ h
            bias -= g.sum(0)
    return torch.cat(out).cpu() if out else torch.zeros(0, dtype=torch.float64)


def windows(n, seg_len, stride):
    """The windows of the sliding-window protocol over n ids, as
    (beg, start, end): the window ids[beg:end] is computed from scratch
    (no memory) and its outputs for the inputs ids[start:end] give the
    log-probs of ids[start+1:end+1].  The inputs are taken in groups of
    `stride` from ids[0] (the last group shorter); a group's window is
    the group after the up to seg_len - stride ids before it."""
    if not 1 <= stride <= seg_len:
        raise ValueError(f"stride {stride} must be in 1..seg_len {seg_len}")
    for start in range(0, n - 1, stride):
        end = min(start + stride, n - 1)
        yield max(0, start - (seg_len - stride)), start, end


@torch.no_grad()
def score_windows(model, ids, seg_len, stride=1, clamp_len=None):
    """Sliding-window scoring without memory, the way the Transformer-XL
    paper evaluates the vanilla Transformer (attn_type 2 and 3; it works
    for any model): see windows().  stride 1: every target predicted from
    the up to seg_len ids before it, each in its own window, as
    token-by-token generation computes it (the paper's protocol); stride
    seg_len: independent segments, eval.py with mem_len 0.  Returns
    float64 log-probs of ids[1:]."""
    _set_run(model, 0, clamp_len, False)
    device = next(model.parameters()).device
    ids = torch.as_tensor(ids, dtype=torch.long, device=device)
    out = []
    for beg, start, end in windows(len(ids), seg_len, stride):
        hidden, _ = model.forward(ids[beg:end, None])
        out.append(model.crit.log_prob(hidden[start - beg:, 0],
                                       ids[start + 1:end + 1], torch.float64))
    return torch.cat(out).cpu() if out else torch.zeros(0, dtype=torch.float64)


def from_tensors(meta, tensors):
    """The MemTransformerLM (eval mode) of a txlgen model file read by
    txlfile.read(): the metadata's hyperparameters and the stored
    tensors, tied ones from what they are tied to.  For tests: what
    txlgen reads, in PyTorch (from_tensors(*txlfile.read(path)))."""
    import json
    hp = {k: v if k == "same_length_mask" else json.loads(v)
          for k, v in meta.items() if k in HPARAM_NAMES}
    model = MemTransformerLM(TxlConfig.from_dict(hp))
    state = {k: torch.from_numpy(np.array(v, np.float32))
             for k, v in tensors.items() if k != "tokenizer.model"}
    missing, unexpected = model.load_state_dict(state, strict=False)
    # A tied tensor is stored once, under one of its names.
    own = model.state_dict(keep_vars=True)
    missing = [k for k in missing if not k.endswith("inv_freq") and not
               any(p is own[k] for n, p in own.items() if n in state)]
    if missing or unexpected:
        raise ValueError(f"missing {missing}, unexpected {unexpected}")
    return model.eval()
