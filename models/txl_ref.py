"""Reference Transformer-XL in PyTorch: the oracle for txlgen's numbers.

Written from the semantics of the original code (kimiyoung/transformer-xl,
pytorch/mem_transformer.py, attn_type 0, div_val 1, no cutoffs), with the
same parameter names, so that a state_dict of the original MemTransformerLM
loads here and a state_dict of this model converts like an original one.
It is also the model that models/train.py trains.

Tensors are time-major like the original: tokens [qlen, bsz], hidden
[qlen, bsz, d_model], mems a list of n_layer + 1 tensors [mlen, bsz, d_model]
holding the inputs of each layer (mems[0] = scaled embeddings).
"""

import math
from dataclasses import dataclass, field, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F

# The hyperparameters a txlgen model file records, with the original names.
HPARAM_NAMES = ("n_token n_layer n_head d_model d_head d_inner d_embed div_val "
                "cutoffs tie_weight tie_projs pre_lnorm attn_type tgt_len "
                "ext_len mem_len clamp_len same_length untie_r").split()


@dataclass
class TxlConfig:
    n_token: int
    n_layer: int
    n_head: int
    d_model: int
    d_head: int
    d_inner: int
    d_embed: int = None        # None = d_model
    div_val: int = 1
    cutoffs: list = field(default_factory=list)
    tie_weight: bool = True
    tie_projs: list = field(default_factory=lambda: [False])
    pre_lnorm: bool = False
    attn_type: int = 0
    tgt_len: int = 128
    ext_len: int = 0
    mem_len: int = 128
    clamp_len: int = -1        # <= 0: no clamping
    same_length: bool = False
    untie_r: bool = False      # one r_w_bias / r_r_bias pair per layer
    dropout: float = 0.0
    dropatt: float = 0.0

    def __post_init__(self):
        if self.d_embed is None:
            self.d_embed = self.d_model

    @classmethod
    def from_dict(cls, d):
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})

    def hparams(self):
        """The hyperparameters without training-only settings."""
        d = asdict(self)
        return {k: d[k] for k in HPARAM_NAMES}

    def check_supported(self):
        """Raise ValueError for what txlgen does not implement."""
        if self.attn_type != 0:
            raise ValueError(f"attn_type {self.attn_type} is not supported "
                             "(only 0, relative positions with learned biases)")
        if self.div_val != 1 or self.cutoffs:
            raise ValueError("adaptive softmax (cutoffs or div_val != 1) is "
                             "not supported")
        if self.ext_len != 0:
            raise ValueError("ext_len != 0 is not supported")
        if self.n_token <= 0 or self.n_layer <= 0 or self.n_head <= 0 or \
                self.d_model <= 0 or self.d_head <= 0 or self.d_inner <= 0 \
                or self.d_embed <= 0:
            raise ValueError("sizes must be positive")


class PositionalEmbedding(nn.Module):
    """Sinusoids of positions: [sin(p f), cos(p f)] concatenated."""

    def __init__(self, d_model):
        super().__init__()
        inv_freq = 1 / (10000 ** (torch.arange(0.0, d_model, 2.0) / d_model))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, pos_seq):
        angles = torch.outer(pos_seq, self.inv_freq)
        return torch.cat([angles.sin(), angles.cos()], dim=-1)


class RelPartialLearnableMultiHeadAttn(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.d_head = cfg.n_head, cfg.d_head
        self.pre_lnorm = cfg.pre_lnorm
        hd = cfg.n_head * cfg.d_head
        self.qkv_net = nn.Linear(cfg.d_model, 3 * hd, bias=False)
        self.r_net = nn.Linear(cfg.d_model, hd, bias=False)
        self.o_net = nn.Linear(hd, cfg.d_model, bias=False)
        self.layer_norm = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.dropatt = nn.Dropout(cfg.dropatt)
        self.scale = 1 / math.sqrt(cfg.d_head)

    @staticmethod
    def rel_shift(bd):
        """bd[i, r] scores query i against R row r (distance klen-1-r);
        return x[i, j] = bd[i, j + qlen-1-i], the score at distance
        mlen+i-j.  Entries with j > mlen+i are garbage and must be masked."""
        qlen, klen = bd.size(0), bd.size(1)
        padded = F.pad(bd, (0, 0, 0, 0, 1, 0))          # [qlen, klen+1, ...]
        padded = padded.view(klen + 1, qlen, *bd.shape[2:])
        return padded[1:].view_as(bd)

    def forward(self, w, r, r_w_bias, r_r_bias, attn_mask, mems):
        qlen, bsz = w.size(0), w.size(1)
        cat = w if mems is None or mems.size(0) == 0 else torch.cat([mems, w], 0)
        klen = cat.size(0)
        heads = self.qkv_net(self.layer_norm(cat) if self.pre_lnorm else cat)
        q, k, v = torch.chunk(heads, 3, dim=-1)
        q = q[-qlen:].view(qlen, bsz, self.n_head, self.d_head)
        k = k.view(klen, bsz, self.n_head, self.d_head)
        v = v.view(klen, bsz, self.n_head, self.d_head)
        r_k = self.r_net(r).view(klen, self.n_head, self.d_head)

        ac = torch.einsum("ibnd,jbnd->ijbn", q + r_w_bias, k)
        bd = self.rel_shift(torch.einsum("ibnd,jnd->ijbn", q + r_r_bias, r_k))
        score = (ac + bd) * self.scale
        score = score.float().masked_fill(attn_mask[:, :, None, None],
                                          float("-inf"))
        prob = self.dropatt(F.softmax(score, dim=1).type_as(v))
        vec = torch.einsum("ijbn,jbnd->ibnd", prob, v)
        out = self.drop(self.o_net(vec.reshape(qlen, bsz, -1)))
        return w + out if self.pre_lnorm else self.layer_norm(w + out)


class PositionwiseFF(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.pre_lnorm = cfg.pre_lnorm
        # Indices 0 and 3 carry the weights, as in the original Sequential.
        self.CoreNet = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_inner), nn.ReLU(inplace=True),
            nn.Dropout(cfg.dropout), nn.Linear(cfg.d_inner, cfg.d_model),
            nn.Dropout(cfg.dropout))
        self.layer_norm = nn.LayerNorm(cfg.d_model)

    def forward(self, x):
        if self.pre_lnorm:
            return x + self.CoreNet(self.layer_norm(x))
        return self.layer_norm(x + self.CoreNet(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dec_attn = RelPartialLearnableMultiHeadAttn(cfg)
        self.pos_ff = PositionwiseFF(cfg)

    def forward(self, x, r, r_w_bias, r_r_bias, attn_mask, mems):
        return self.pos_ff(self.dec_attn(x, r, r_w_bias, r_r_bias, attn_mask,
                                         mems))


class AdaptiveEmbedding(nn.Module):
    """div_val 1 only: one table, projected to d_model if d_embed differs."""

    def __init__(self, cfg):
        super().__init__()
        self.emb_layers = nn.ModuleList([nn.Embedding(cfg.n_token,
                                                      cfg.d_embed)])
        self.emb_projs = nn.ParameterList()
        if cfg.d_embed != cfg.d_model:
            self.emb_projs.append(nn.Parameter(
                torch.empty(cfg.d_model, cfg.d_embed)))
        self.emb_scale = cfg.d_model ** 0.5

    def forward(self, x):
        e = self.emb_layers[0](x)
        if len(self.emb_projs):
            e = F.linear(e, self.emb_projs[0])
        return e * self.emb_scale


class ProjectedLogSoftmax(nn.Module):
    """The original ProjectedAdaptiveLogSoftmax without clusters."""

    def __init__(self, cfg):
        super().__init__()
        self.out_layers = nn.ModuleList([nn.Linear(cfg.d_embed, cfg.n_token)])
        self.out_projs = nn.ParameterList()
        if cfg.d_embed != cfg.d_model:
            self.out_projs.append(nn.Parameter(
                torch.empty(cfg.d_model, cfg.d_embed)))

    def logits(self, hidden):
        if len(self.out_projs):
            hidden = F.linear(hidden, self.out_projs[0].t())   # h . P
        return self.out_layers[0](hidden)


class MemTransformerLM(nn.Module):
    def __init__(self, cfg: TxlConfig):
        super().__init__()
        cfg.check_supported()
        self.cfg = cfg
        self.word_emb = AdaptiveEmbedding(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList([DecoderLayer(cfg)
                                     for _ in range(cfg.n_layer)])
        self.crit = ProjectedLogSoftmax(cfg)
        if cfg.tie_weight:
            self.crit.out_layers[0].weight = self.word_emb.emb_layers[0].weight
        if cfg.tie_projs and cfg.tie_projs[0] and len(self.crit.out_projs):
            self.crit.out_projs[0] = self.word_emb.emb_projs[0]
        self.pos_emb = PositionalEmbedding(cfg.d_model)
        shape = ((cfg.n_layer, cfg.n_head, cfg.d_head) if cfg.untie_r
                 else (cfg.n_head, cfg.d_head))
        self.r_w_bias = nn.Parameter(torch.zeros(shape))
        self.r_r_bias = nn.Parameter(torch.zeros(shape))
        # Run-time settings, like the original's reset_length/clamp_len.
        self.mem_len, self.clamp_len = cfg.mem_len, cfg.clamp_len
        self.same_length = cfg.same_length

    def init_weights(self, std=0.02, generator=None):
        """Normal(0, std) for matrices and biases, LayerNorm gains near 1."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "layer_norm.weight" in name:
                    p.normal_(1.0, std, generator=generator)
                elif name.endswith(".bias") or "r_w_bias" in name or \
                        "r_r_bias" in name:
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
            # included (the original's triu + tril mask).
            mask = mask | (j <= mlen + i - self.mem_len)
        return mask

    def forward(self, x, mems=None):
        """x [qlen, bsz] -> (hidden [qlen, bsz, d_model], new mems)."""
        if self.same_length and self.mem_len == 0:
            raise ValueError("same_length with mem_len 0 masks every key")
        qlen = x.size(0)
        mlen = mems[0].size(0) if mems else 0
        klen = mlen + qlen
        h = self.word_emb(x)
        pos_seq = torch.arange(klen - 1, -1, -1.0, device=h.device)
        if self.clamp_len > 0:
            pos_seq = pos_seq.clamp(max=self.clamp_len)
        r = self.drop(self.pos_emb(pos_seq).to(h.dtype))
        mask = self.attn_mask(qlen, mlen, h.device)
        h = self.drop(h)
        hids = [h]
        for i, layer in enumerate(self.layers):
            rw, rr = self._biases(i)
            h = layer(h, r, rw, rr, mask, mems[i] if mems else None)
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
        return self.crit.logits(hidden)

    def nll(self, x, y, mems=None):
        """Per-token negative log-likelihood [qlen, bsz] of targets y."""
        hidden, new_mems = self.forward(x, mems)
        logits = self.logits(hidden).float()
        nll = F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1),
                              reduction="none").view_as(y)
        return nll, new_mems


@torch.no_grad()
def score_ids(model, ids, seg_len, mem_len=None, clamp_len=None,
              same_length=None, adapt_lr=0.0):
    """The original eval.py protocol on one stream of token ids:
    segments ids[s:s+seg_len] predicting ids[s+1:s+1+seg_len], memory
    carried.  Returns a float64 tensor of len(ids)-1 log-probs.

    adapt_lr > 0 is dynamic evaluation of the output layer (txlgen
    --adapt): after scoring each segment, one gradient-descent step on its
    mean NLL changes a copy of the output weight and bias (the model, and
    a tied input embedding, stay as they are)."""
    model.eval()
    if mem_len is not None:
        model.mem_len = mem_len
    if clamp_len is not None:
        model.clamp_len = clamp_len
    if same_length is not None:
        model.same_length = same_length
    device = next(model.parameters()).device
    ids = torch.as_tensor(ids, dtype=torch.long, device=device)
    out_layer = model.crit.out_layers[0]
    weight, bias = out_layer.weight.clone(), out_layer.bias.clone()
    out, mems = [], None
    for s in range(0, len(ids) - 1, seg_len):
        x = ids[s:s + seg_len]
        y = ids[s + 1:s + 1 + seg_len]
        x = x[:len(y)]
        hidden, mems = model.forward(x[:, None], mems)
        h = hidden[:, 0]
        if len(model.crit.out_projs):
            h = F.linear(h, model.crit.out_projs[0].t())
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
