"""Training of adaptive-span models (txlgen's attn_type 4; Sukhbaatar et
al. 2019) for models/train.py: span_ref's model, batched, with dropout,
the span's auxiliary loss and its clamping.

The parameters are span_ref.AdaptiveSpanLM's (the adaptive-span code's
names), so a checkpoint's state_dict converts with span_convert as a
checkpoint of that code does, and span_ref evaluates it.  What training
computes is what span_ref and libtxl evaluate: the query at position t
attends to t - x, x = 1 .. W (W the layer's window after the trimming of
span_ref.layer_window, which follows the heads' spans as they are
learned), never to itself, with the score (q . k + q . key_pe[:, S - x])
/ sqrt(d_head), the softmax over the W keys, each head's soft mask
span_ref.span_mask (the ramp), the weights divided by their sum + 1e-8.
Each layer keeps its last S inputs (S = attn_span) as the next segment's
cache, a stream's first from S zero states, as evaluation starts.

Here the scores are computed for a segment of M queries against all
W + M keys at once and each query's W keys, a band, cut out by a
reshape (row i of the [M, W + M] products shifted left by i), instead of
span_ref's key-by-key gathering: one matrix product per head, the
memory of a batch of streams.

The spans (current_val, fractions of attn_span, 0 to 1) start at
--span-init and are learned with the rest; --span-loss c adds
c * attn_span * mean(current_val) per layer to the loss (what keeps the
spans short where a long one does not pay), and after each step they are
clamped to [0, 1].
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .span_ref import AdaptiveSpanLM, span_mask


def band(scores, width):
    """[..., M, W + M] -> [..., M, W]: row i's columns i .. i + W - 1 (the
    W keys before query i, the oldest first)."""
    *lead, m, n = scores.shape
    flat = F.pad(scores.reshape(*lead, m * n), (0, m))
    return flat.view(*lead, m, n + 1)[..., :width]


def unband(weights, n):
    """The inverse placement: [..., M, W] -> [..., M, n] with row i's W
    values at columns i .. i + W - 1 and zeros elsewhere (n = W + M)."""
    *lead, m, w = weights.shape
    flat = F.pad(weights, (0, n + 1 - w)).reshape(*lead, m * (n + 1))
    return flat[..., :m * n].view(*lead, m, n)


class SpanTrainLM(AdaptiveSpanLM):
    """AdaptiveSpanLM with a batched training pass (nll), the interface
    train.py's loop uses."""

    def __init__(self, cfg, dropout=0.0, dropatt=0.0, span_init=0.0,
                 span_loss=0.0):
        super().__init__(cfg)
        self.drop = nn.Dropout(dropout)
        self.dropatt = nn.Dropout(dropatt)
        self.span_init = span_init
        self.span_loss = span_loss

    def init_weights(self, std=0.02, generator=None):
        """Normal(0, std) for matrices and key_pe, zero biases, LayerNorm
        gains 1, every span span_init."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("current_val"):
                    p.fill_(self.span_init)
                elif "norm" in name and name.endswith("weight"):
                    p.fill_(1.0)
                elif name.endswith("bias"):
                    p.zero_()
                else:
                    p.normal_(0.0, std, generator=generator)

    def spans(self):
        return [layer.attn.current_val for layer in self.layers]

    def aux_loss(self):
        S = self.cfg.attn_span
        return sum(self.span_loss * S * cv.mean() for cv in self.spans())

    def clamp_spans(self):
        with torch.no_grad():
            for cv in self.spans():
                cv.clamp_(0.0, 1.0)

    def _attend(self, attn, h, cache):
        """h [B, M, d], cache [B, W, d] (the window's states before h)."""
        cfg = self.cfg
        B, M, _ = h.shape
        W, H, D, S = cache.size(1), cfg.n_head, cfg.d_head, cfg.attn_span
        all_h = torch.cat([cache, h], dim=1)
        L = W + M
        q = attn.proj_query(h).view(B, M, H, D).transpose(1, 2)
        k = attn.proj_key(all_h).view(B, L, H, D).transpose(1, 2)
        v = attn.proj_val(all_h).view(B, L, H, D).transpose(1, 2)
        # column j of a row: the key at distance W - j
        score = band(q @ k.transpose(-1, -2), W) + \
            q @ self.key_pe[0, :, S - W:].to(q.dtype)
        prob = F.softmax(score.float() / math.sqrt(D), dim=-1)
        m = span_mask(attn.current_val, S, cfg.span_ramp,
                      torch.arange(W, 0, -1, device=h.device))
        prob = prob * m[None, :, None, :]
        prob = prob / (prob.sum(-1, keepdim=True) + attn.renorm_eps)
        prob = self.dropatt(prob).to(v.dtype)
        out = (unband(prob, L) @ v).transpose(1, 2).reshape(B, M, H * D)
        return attn.proj_out(out)

    def nll(self, x, y, mems):
        """x, y [M, B] (train.py's layout): (NLL [M, B], the next caches:
        each layer's last attn_span inputs, gradient stopped)."""
        cfg = self.cfg
        x, y = x.t(), y.t()
        B = x.size(0)
        if mems is None:
            mems = [torch.zeros(B, cfg.attn_span, cfg.d_model,
                                device=x.device) for _ in self.layers]
        h = self.drop(self.in_emb(x))
        nxt = []
        for layer, c in zip(self.layers, mems):
            nxt.append(torch.cat([c.to(h.dtype), h], dim=1)
                       [:, -cfg.attn_span:].detach().float())
            a = layer.attn
            h = layer.norm1(h + self._attend(a, h, c[:, c.size(1) -
                                                      a.window():]))
            ff = layer.ff
            h = layer.norm2(h + ff.fc2(self.drop(F.relu(ff.fc1(h)))))
        lp = F.log_softmax(self.out_emb(self.drop(h)).float(), dim=-1)
        return -lp.gather(-1, y[..., None])[..., 0].t(), nxt
