"""A model's hyperparameters, with the original code's names: what a
txlgen model file records (HPARAM_NAMES) and the configuration the
converter, the reference model and the trainer share (TxlConfig); the
adaptive-span family's (SpanConfig).  Standard library only: the
converter runs without PyTorch.
"""

from dataclasses import dataclass, field, asdict

from .conventions import (ABS_LEARNED, ADAPTIVE_SPAN, DEFAULT_LAYER_NORM_EPS,
                          DEFAULT_SAME_LENGTH_MASK, NO_MEMORY_KINDS,
                          ORIGINAL_KINDS, REL_PARTIAL, SAME_LENGTH_MASKS,
                          TABLE_KINDS)
from .errors import describe


# The hyperparameters a txlgen model file records, with the original names
# (max_klen only for the kinds with position tables, see
# TxlConfig.hparams).
HPARAM_NAMES = ("n_token n_layer n_head d_model d_head d_inner d_embed div_val "
                "cutoffs tie_weight tie_projs pre_lnorm attn_type tgt_len "
                "ext_len mem_len clamp_len same_length untie_r "
                "max_klen layer_norm_eps same_length_mask emb_scale "
                "proj_same_dim").split()

# How the code that wrote a checkpoint computes, where the TensorFlow code
# (and Hugging Face's port of it) differs from the PyTorch code: the
# LayerNorm epsilon and the same_length mask (conventions.py).  A model
# file records them only where they differ from the PyTorch code's
# (DEFAULT_COMPUTE).
# dwdb/transformer-xl (TF 2 Keras) does not scale its embedding by
# sqrt(d_model) (emb_scale false) and projects it to d_model and back even
# where d_embed = d_model (proj_same_dim true, with div_val 1).
DEFAULT_COMPUTE = {"layer_norm_eps": DEFAULT_LAYER_NORM_EPS,
                   "same_length_mask": DEFAULT_SAME_LENGTH_MASK,
                   "emb_scale": True, "proj_same_dim": False}
# The format version of a file that records any of these: readers of
# version 1 would compute it otherwise, and refuse it so.
V2_HPARAMS = ("emb_scale", "proj_same_dim")


# Their types: integers, booleans (true/false, or 0/1 as some configs
# write them), a list of integers, a list of booleans.  d_embed may be
# None or -1 (= d_model), max_klen None (= what the original builds).
INT_HPARAMS = ("n_token n_layer n_head d_model d_head d_inner d_embed "
               "div_val attn_type tgt_len ext_len mem_len clamp_len "
               "max_klen").split()
BOOL_HPARAMS = ("tie_weight pre_lnorm same_length untie_r emb_scale "
                "proj_same_dim").split()


def as_float32(arr):
    """A float32 numpy array of an array or a torch tensor (without
    importing torch)."""
    import numpy as np
    if hasattr(arr, "detach"):
        return arr.detach().cpu().float().numpy()
    return np.asarray(arr, np.float32)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def as_bool(key, v):
    """v as a boolean: true/false, or 0/1; else ValueError naming key."""
    if isinstance(v, bool):
        return v
    if is_int(v) and v in (0, 1):
        return bool(v)
    raise ValueError(f"{key} is {describe(v)}, expected true or false")


def typed(raw):
    """raw hyperparameters (the original names) with each value checked
    for its type (bools of 0/1 made bools): ValueError naming the first
    key that has the wrong type.  Keys of no hyperparameter pass as they
    are."""
    out = dict(raw)
    for k, v in raw.items():
        if k in INT_HPARAMS:
            if not is_int(v) and not (v is None and k in ("d_embed",
                                                          "max_klen")):
                raise ValueError(f"{k} is {describe(v)}, expected an "
                                 "integer")
        elif k in BOOL_HPARAMS:
            out[k] = as_bool(k, v)
        elif k == "cutoffs":
            if not isinstance(v, (list, tuple)) or \
                    not all(is_int(c) for c in v):
                raise ValueError(f"cutoffs is {describe(v)}, expected a "
                                 "list of integers")
            out[k] = list(v)
        elif k == "tie_projs":
            if not isinstance(v, (list, tuple)):
                raise ValueError(f"tie_projs is {describe(v)}, expected a "
                                 "list of true/false")
            out[k] = [as_bool("tie_projs", t) for t in v]
        elif k == "layer_norm_eps":
            out[k] = layer_norm_eps(v)
        elif k == "same_length_mask" and v not in SAME_LENGTH_MASKS:
            raise ValueError(f"same_length_mask is {describe(v)}, expected "
                             f"one of {', '.join(SAME_LENGTH_MASKS)}")
    return out


def layer_norm_eps(v):
    """v as a LayerNorm epsilon: a finite number in (0, 1]; else
    ValueError."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or \
            not 0 < v <= 1:
        raise ValueError(f"layer_norm_eps is {describe(v)}, expected a "
                         "number in (0, 1]")
    return float(v)


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
    cutoffs: list = field(default_factory=list)   # without n_token
    tie_weight: bool = True
    tie_projs: list = field(default_factory=lambda: [False])
    pre_lnorm: bool = False
    attn_type: int = REL_PARTIAL
    tgt_len: int = 128
    ext_len: int = 0
    mem_len: int = 128
    clamp_len: int = -1        # <= 0: no clamping
    same_length: bool = False
    untie_r: bool = False      # one r_w_bias / r_r_bias pair per layer
    # rows of the position tables (conventions.TABLE_KINDS); None = what the
    # original builds: tgt_len + ext_len + mem_len at construction
    max_klen: int = None
    # the LayerNorm epsilon; the same_length mask, "pytorch" or "tf" (see
    # DEFAULT_COMPUTE)
    layer_norm_eps: float = DEFAULT_LAYER_NORM_EPS
    same_length_mask: str = DEFAULT_SAME_LENGTH_MASK
    emb_scale: bool = True     # the embedding times sqrt(d_model)
    proj_same_dim: bool = False  # projections where d_embed = d_model
    dropout: float = 0.0
    dropatt: float = 0.0

    def __post_init__(self):
        if self.d_embed is None or self.d_embed == -1:
            self.d_embed = self.d_model
        if self.max_klen is None:
            self.max_klen = self.tgt_len + self.ext_len + self.mem_len
        self.cutoffs = [int(c) for c in self.cutoffs]
        # The original ties out_projs[i] for each entry of its list and
        # leaves the rest untied: one entry per cluster here.  Extra False
        # entries do nothing there; extra True ones crash it (refused in
        # check_supported).
        tp = [bool(t) for t in self.tie_projs]
        n = self.n_clusters
        tp += [False] * (n - len(tp))
        self.tie_projs = tp[:n] if not any(tp[n:]) else tp

    @property
    def n_clusters(self):
        """Clusters of the adaptive input and softmax (1 without cutoffs)."""
        return len(self.cutoffs) + 1

    def cluster_bounds(self):
        """[(lo, hi)] token ids of each cluster, hi exclusive."""
        return cluster_bounds([0] + self.cutoffs + [self.n_token])

    def d_emb(self, i):
        """Embedding size of cluster i: d_embed // div_val**i."""
        return self.d_embed // self.div_val ** i

    def has_proj(self):
        """Whether each cluster projects between d_emb_i and d_model: always
        with div_val > 1, with div_val 1 when d_embed != d_model or
        proj_same_dim."""
        return self.div_val > 1 or self.d_embed != self.d_model or \
            self.proj_same_dim

    @classmethod
    def from_dict(cls, d):
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})

    def hparams(self):
        """The hyperparameters a model file records (no training-only
        settings).  The absolute kinds run without memory: their mem_len is
        0 there (the construction mem_len survives in max_klen); max_klen
        only for the types that have position tables; layer_norm_eps and
        same_length_mask where they are not the PyTorch code's."""
        d = asdict(self)
        hp = {k: d[k] for k in HPARAM_NAMES}
        for k, v in DEFAULT_COMPUTE.items():
            if hp[k] == v:
                del hp[k]
        if self.attn_type in NO_MEMORY_KINDS:
            hp["mem_len"] = 0
        if self.attn_type not in TABLE_KINDS:
            del hp["max_klen"]
        return hp

    def check_supported(self):
        """Raise ValueError for what txlgen does not implement (or the
        original could not build)."""
        if self.n_token <= 0 or self.n_layer <= 0 or self.n_head <= 0 or \
                self.d_model <= 0 or self.d_head <= 0 or self.d_inner <= 0 \
                or self.d_embed <= 0:
            raise ValueError("sizes must be positive")
        if self.attn_type not in ORIGINAL_KINDS:
            raise ValueError(f"attn_type {self.attn_type} does not exist "
                             f"({ORIGINAL_KINDS[0]} to {ORIGINAL_KINDS[-1]})")
        if self.ext_len != 0:
            raise ValueError("ext_len != 0 is not supported")
        if not isinstance(self.div_val, int) or self.div_val < 1:
            raise ValueError(f"div_val {self.div_val!r} must be an integer "
                             ">= 1")
        b = [0] + self.cutoffs + [self.n_token]
        if any(lo >= hi for lo, hi in zip(b[:-1], b[1:])):
            raise ValueError(f"cutoffs {self.cutoffs} must increase "
                             f"strictly inside (0, n_token {self.n_token})")
        if self.d_emb(self.n_clusters - 1) < 1:
            raise ValueError(f"d_embed {self.d_embed} // div_val "
                             f"{self.div_val}**{self.n_clusters - 1} is 0")
        if len(self.tie_projs) > self.n_clusters:
            raise ValueError(f"tie_projs has {len(self.tie_projs)} entries, "
                             f"the model has {self.n_clusters} clusters")
        if self.attn_type in TABLE_KINDS and self.max_klen < 1:
            raise ValueError(f"max_klen {self.max_klen} must be >= 1")
        if self.attn_type == ABS_LEARNED and \
                self.n_head * self.d_head != self.d_model:
            raise ValueError("attn_type 3 adds r_emb rows (n_head * d_head) "
                             "to d_model inputs: n_head * d_head must equal "
                             "d_model")
        if self.attn_type in NO_MEMORY_KINDS and self.same_length:
            raise ValueError(f"attn_type {self.attn_type} runs without "
                             "memory, and same_length without memory masks "
                             "every key")
        if self.same_length and self.mem_len == 0:
            raise ValueError("same_length with mem_len 0 masks every key")
        layer_norm_eps(self.layer_norm_eps)
        if self.same_length_mask not in SAME_LENGTH_MASKS:
            raise ValueError(f"same_length_mask {self.same_length_mask!r} "
                             f"is not one of {', '.join(SAME_LENGTH_MASKS)}")
        if self.proj_same_dim and self.div_val != 1:
            raise ValueError("proj_same_dim is for div_val 1 (with div_val "
                             f"{self.div_val} every cluster is projected)")


def cluster_bounds(cutoff_ends):
    """[(lo, hi)] token ids of each cluster from [0, c0, ..., n_token]."""
    return list(zip(cutoff_ends[:-1], cutoff_ends[1:]))


@dataclass
class SpanConfig:
    """An adaptive-span Transformer (facebookresearch/adaptive-span's
    TransformerSeq; txlgen's attn_type 4): its sizes, its longest span
    (attn_span, the columns of key_pe) and the ramp of its soft mask,
    which its checkpoints do not store (the original's default: 32)."""
    n_token: int
    n_layer: int
    n_head: int
    d_model: int
    d_inner: int
    attn_span: int
    span_ramp: int = 32
    block_size: int = 512       # the segment of its evaluation

    @property
    def d_head(self):
        return self.d_model // self.n_head

    def hparams(self):
        """The metadata of a txlgen model file of the model (attn_type 4;
        the keys Transformer-XL files have take fixed values: a full
        softmax, untied, post-LayerNorm, no clamping; mem_len attn_span,
        tgt_len the block size)."""
        return dict(n_token=self.n_token, n_layer=self.n_layer,
                    n_head=self.n_head, d_model=self.d_model,
                    d_head=self.d_head, d_inner=self.d_inner,
                    d_embed=self.d_model, div_val=1, tie_weight=False,
                    pre_lnorm=False, attn_type=ADAPTIVE_SPAN,
                    tgt_len=self.block_size,
                    mem_len=self.attn_span, clamp_len=0, same_length=False,
                    attn_span=self.attn_span, span_ramp=self.span_ramp)
