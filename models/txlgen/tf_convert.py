"""Checkpoints of the Transformer-XL authors' TensorFlow code (tf/model.py,
tf/train_gpu.py) onto the PyTorch names txlgen's model files use.

Where they are: a directory as the authors' tf/sota/download.sh lays it
out (data/cache.pkl, data/corpus-info.json, model/checkpoint,
model/model.ckpt-N.index, .data-00000-of-00001, .meta), or the checkpoint
prefix .../model.ckpt-N with --vocab .../cache.pkl (corpus-info.json
beside it, if there).  The .meta graph is not read: the hyperparameters
come from the tensors' shapes and corpus-info.json (vocab_size, cutoffs,
dataset), the evaluation settings from the data set (RECOMMENDED: those
of tf/sota/*.sh), recorded as the model's recommended settings.

The names (tf/model.py; "transformer/" first):
  layer_N/rel_attn/{qkv,r,o}/kernel      [in, out]: transposed
  layer_N/rel_attn/LayerNorm/{gamma,beta}
  layer_N/ff/layer_{1,2}/{kernel,bias}   kernels transposed
  layer_N/ff/LayerNorm/{gamma,beta}
  r_w_bias, r_r_bias                     [n_head, d_head] shared by all
                                         layers, [n_layer, ...] untie_r
  adaptive_embed/lookup_table (+ proj_W) div_val 1: one table
  adaptive_embed/cutoff_i/lookup_table, proj_W  div_val > 1
  adaptive_softmax/bias                  no cutoffs
  adaptive_softmax/cutoff_i/{b, proj}    cutoffs; cutoff_0 also
                                         cluster_W, cluster_b
The softmax weights are always the embedding tables (tie_weight).  A
cluster's softmax projection that is absent uses the embedding's
(tie_projs: proj_share_all_but_first ties all but the first, as the wt103
run does) or none; an absent embedding projection of a cluster whose size
is d_model (proj_same_dim false, as the lm1b run) is the identity, which
the PyTorch layout stores.  Projections are stored [d_emb_i, d_model]
(the PyTorch code's are [d_model, d_emb_i]): transposed.  The tail
clusters' rows of cluster_W / cluster_b are reversed into the PyTorch
order (checkpoint.tf_cluster_rows_to_pytorch).  The TF code's LayerNorm
epsilon (1e-12), same_length mask and zero-state memory are recorded
(layer_norm_eps, same_length_mask "tf", recommended mem_init "zeros").
Everything else in the checkpoint (global_step, the Adam slots) is left
out unread; any other tensor is refused.
"""

import collections
import collections.abc
import os
import re

import numpy as np

from . import checkpoint, tfckpt
from .conventions import LAYER_NORM_EPS, REL_PARTIAL
from .checkpoint import CheckpointError

# The evaluation settings of each data set's published model
# (tf/sota/{enwik8,text8,wt103,lm1b}.sh: TEST_TGT_LEN, TEST_MEM_LEN,
# TEST_CLAMP_LEN, --same_length=True in all four).
RECOMMENDED = {
    "enwik8": dict(seg_len=128, mem_len=3800, clamp_len=1000,
                   same_length=True),
    "text8": dict(seg_len=128, mem_len=3800, clamp_len=1000,
                  same_length=True),
    "wt103": dict(seg_len=128, mem_len=1600, clamp_len=1000,
                  same_length=True),
    "lm1b": dict(seg_len=32, mem_len=128, clamp_len=-1, same_length=True),
}
MAX_LAYERS = 1 << 12


def is_tf_checkpoint(path):
    """Whether path is a checkpoint of the TF code: a directory with
    model/checkpoint or model/*.index, or a prefix with PREFIX.index."""
    if os.path.isdir(path):
        m = os.path.join(path, "model")
        return os.path.isdir(m) and (
            os.path.exists(os.path.join(m, "checkpoint")) or
            any(n.endswith(".index") for n in os.listdir(m)))
    return os.path.isfile(path + ".index")


def find_files(weights, vocab=None):
    """(checkpoint prefix, cache.pkl or None, corpus-info.json or None)
    of a download.sh directory or a prefix."""
    if os.path.isdir(weights):
        prefix = tfckpt.latest_prefix(os.path.join(weights, "model"))
        ddir = os.path.join(weights, "data")
        cache = vocab or os.path.join(ddir, "cache.pkl")
        info = os.path.join(ddir, "corpus-info.json")
    else:
        prefix = weights
        cache = vocab
        info = os.path.join(os.path.dirname(vocab), "corpus-info.json") \
            if vocab else None
    if cache is not None and not os.path.exists(cache):
        raise CheckpointError(f"{cache}: no such file (the corpus cache "
                              "with the vocabulary)")
    if info is not None and not os.path.exists(info):
        info = None
    return prefix, cache, info


class TFState(collections.abc.Mapping):
    """PyTorch name -> array, each made from the bundle's tensor when it
    is used (transposed where TF stores [in, out])."""

    def __init__(self, bundle, makers, shapes):
        self.bundle, self.makers, self.shapes = bundle, makers, shapes

    def __getitem__(self, name):
        return self.makers[name]()

    def shape_of(self, name):
        return self.shapes[name]

    def __iter__(self):
        return iter(self.makers)

    def __len__(self):
        return len(self.makers)


def read_tf_checkpoint(prefix, info=None, info_path=None):
    """(hyperparameters with the original names, TFState) of the
    checkpoint at prefix; info: corpus-info.json's object, if any."""
    b = tfckpt.Bundle(prefix)
    index = prefix + ".index"
    names = set(b)
    used = set()
    makers = collections.OrderedDict()
    shapes = {}

    def shape(n):
        return b.shape(n) if n in names else None

    def need(n, rank=None):
        if n not in names:
            raise CheckpointError(f"{index}: no tensor {n!r}: not a "
                                  "checkpoint of the Transformer-XL TF code")
        s = b.shape(n)
        if rank is not None and len(s) != rank:
            raise CheckpointError(f"{index}: tensor {n!r} of shape "
                                  f"{list(s)}, expected {rank} dimensions")
        return s

    def put(torch_name, tf_name, transpose=False):
        used.add(tf_name)
        s = b.shape(tf_name)
        shapes[torch_name] = tuple(reversed(s)) if transpose else tuple(s)

        def make():
            a = b[tf_name]
            return np.ascontiguousarray(a.T) if transpose else a
        makers[torch_name] = make

    T = "transformer/"
    layers = sorted({int(m.group(1)) for n in names
                     for m in [re.match(r"transformer/layer_(\d+)/", n)]
                     if m})
    if not layers:
        raise CheckpointError(f"{index}: no transformer/layer_N tensors: "
                              "not a checkpoint of the Transformer-XL TF "
                              "code")
    n_layer = len(layers)
    if layers != list(range(n_layer)) or n_layer > MAX_LAYERS:
        raise CheckpointError(f"{index}: layers {layers[:5]}... are not "
                              "layer_0 to layer_N")
    rw = need(T + "r_w_bias")
    if len(rw) == 3:
        untie_r, (_, n_head, d_head) = True, rw
        if rw[0] != n_layer:
            raise CheckpointError(f"{index}: r_w_bias of shape {list(rw)} "
                                  f"for {n_layer} layers")
    elif len(rw) == 2:
        untie_r, (n_head, d_head) = False, rw
    else:
        raise CheckpointError(f"{index}: r_w_bias of shape {list(rw)}: "
                              "expected [n_head, d_head] or [n_layer, "
                              "n_head, d_head]")
    d_model = need(T + "layer_0/rel_attn/qkv/kernel", 2)[0]
    d_inner = need(T + "layer_0/ff/layer_1/kernel", 2)[1]
    for b_name in ("r_w_bias", "r_r_bias"):
        put(b_name, T + b_name)

    # the adaptive input
    E = T + "adaptive_embed/"
    if E + "lookup_table" in names:
        n_token, d_embed = need(E + "lookup_table", 2)
        div_val, tables = 1, [E + "lookup_table"]
        projs_in = [E + "proj_W" if E + "proj_W" in names else None]
    else:
        tables, projs_in = [], []
        while E + f"cutoff_{len(tables)}/lookup_table" in names:
            i = len(tables)
            tables.append(E + f"cutoff_{i}/lookup_table")
            p = E + f"cutoff_{i}/proj_W"
            projs_in.append(p if p in names else None)
        if not tables:
            raise CheckpointError(f"{index}: no adaptive_embed/lookup_table"
                                  " nor adaptive_embed/cutoff_0/"
                                  "lookup_table")
        rows = [need(t, 2) for t in tables]
        n_token, d_embed = sum(r[0] for r in rows), rows[0][1]
        div_val = rows[0][1] // rows[1][1] if len(rows) > 1 and \
            rows[1][1] else 1
    # the adaptive softmax: its clusters
    S = T + "adaptive_softmax/"
    n_clusters = 0
    while S + f"cutoff_{n_clusters}/b" in names:
        n_clusters += 1
    if n_clusters:
        sizes = [need(S + f"cutoff_{i}/b", 1)[0] for i in range(n_clusters)]
        ends = list(np.cumsum([0] + sizes))
        cutoffs = [int(x) for x in ends[1:-1]]
    else:
        need(S + "bias", 1)
        cutoffs = []
    if div_val > 1 and len(tables) != len(cutoffs) + 1:
        raise CheckpointError(f"{index}: {len(tables)} embedding tables and "
                              f"{len(cutoffs) + 1} softmax clusters")
    if info is not None:
        ic = info.get("cutoffs")
        if ic and list(ic[1:-1]) != cutoffs:
            raise CheckpointError(f"{info_path}: cutoffs {ic} differ from "
                                  f"the checkpoint's {cutoffs}")
        vs = info.get("vocab_size")
        if vs is not None and vs != n_token:
            raise CheckpointError(f"{info_path}: vocab_size {vs}, the "
                                  f"checkpoint's tables {n_token} rows")

    hp = dict(n_token=int(n_token), n_layer=n_layer, n_head=int(n_head),
              d_model=int(d_model), d_head=int(d_head),
              d_inner=int(d_inner), d_embed=int(d_embed),
              div_val=int(div_val), cutoffs=cutoffs, tie_weight=True,
              pre_lnorm=False, attn_type=REL_PARTIAL, untie_r=untie_r,
              layer_norm_eps=LAYER_NORM_EPS["tensorflow"],
              same_length_mask="tf")
    d_emb = [d_embed // div_val ** i for i in range(len(cutoffs) + 1)]
    has_proj = div_val > 1 or d_embed != d_model

    # embedding tables and their projections
    for i, t in enumerate(tables):
        put(f"word_emb.emb_layers.{i}.weight", t)
    if not has_proj and any(projs_in):
        raise CheckpointError(f"{index}: a projection {projs_in[0]!r} where "
                              f"d_embed {d_embed} is d_model")
    if has_proj:
        for i, p in enumerate(projs_in):
            if p is not None:
                put(f"word_emb.emb_projs.{i}", p, transpose=True)
            elif d_emb[i] == d_model:
                n = d_model
                makers[f"word_emb.emb_projs.{i}"] = \
                    lambda n=n: np.eye(n, dtype=np.float32)
                shapes[f"word_emb.emb_projs.{i}"] = (n, n)
            else:
                raise CheckpointError(f"{index}: no {tables[i][:-len('lookup_table')]}"
                                      f"proj_W for an embedding of "
                                      f"{d_emb[i]} values (d_model "
                                      f"{d_model})")
    # the softmax
    tie_projs = []
    if cutoffs:
        w, cb = S + "cutoff_0/cluster_W", S + "cutoff_0/cluster_b"
        need(w, 2)
        need(cb, 1)
        used.update((w, cb))
        pair = {}

        def rows():
            if "r" not in pair:
                pair["r"] = checkpoint.tf_cluster_rows_to_pytorch(b[w],
                                                                  b[cb])
            return pair["r"]
        makers["crit.cluster_weight"] = lambda: rows()[0]
        makers["crit.cluster_bias"] = lambda: rows()[1]
        shapes["crit.cluster_weight"] = tuple(b.shape(w))
        shapes["crit.cluster_bias"] = tuple(b.shape(cb))
        biases = [S + f"cutoff_{i}/b" for i in range(len(cutoffs) + 1)]
        if div_val == 1:
            used.update(biases)
            makers["crit.out_layers.0.bias"] = \
                lambda: np.concatenate([b[x] for x in biases])
            shapes["crit.out_layers.0.bias"] = (sum(b.shape(x)[0]
                                                    for x in biases),)
        else:
            for i, x in enumerate(biases):
                put(f"crit.out_layers.{i}.bias", x)
        for i in range(len(cutoffs) + 1):
            p = S + f"cutoff_{i}/proj"
            if p in names:
                if not has_proj:
                    raise CheckpointError(f"{index}: a projection {p!r} "
                                          f"where d_embed {d_embed} is "
                                          "d_model")
                put(f"crit.out_projs.{i}", p, transpose=True)
                tie_projs.append(False)
            else:
                tie_projs.append(True)
    else:
        put("crit.out_layers.0.bias", S + "bias")
        p = S + "proj"
        if p in names:
            put("crit.out_projs.0", p, transpose=True)
            tie_projs.append(False)
        else:
            tie_projs.append(True)
    hp["tie_projs"] = tie_projs

    # the layers
    for i in range(n_layer):
        L = f"{T}layer_{i}/"
        for tf_name, torch_name, tr in (
                ("rel_attn/qkv/kernel", "dec_attn.qkv_net.weight", True),
                ("rel_attn/r/kernel", "dec_attn.r_net.weight", True),
                ("rel_attn/o/kernel", "dec_attn.o_net.weight", True),
                ("rel_attn/LayerNorm/gamma", "dec_attn.layer_norm.weight",
                 False),
                ("rel_attn/LayerNorm/beta", "dec_attn.layer_norm.bias", False),
                ("ff/layer_1/kernel", "pos_ff.CoreNet.0.weight", True),
                ("ff/layer_1/bias", "pos_ff.CoreNet.0.bias", False),
                ("ff/layer_2/kernel", "pos_ff.CoreNet.3.weight", True),
                ("ff/layer_2/bias", "pos_ff.CoreNet.3.bias", False),
                ("ff/LayerNorm/gamma", "pos_ff.layer_norm.weight", False),
                ("ff/LayerNorm/beta", "pos_ff.layer_norm.bias", False)):
            need(L + tf_name)
            put(f"layers.{i}.{torch_name}", L + tf_name, tr)
    extra = sorted(names - used)
    if extra:
        raise CheckpointError(f"{index}: tensor {extra[0]!r} has no place "
                              "in a Transformer-XL of the TF code")
    return hp, TFState(b, makers, shapes)


def read_corpus_info(path):
    if path is None:
        return None
    info = checkpoint.read_json(path, "corpus-info.json")
    ds = info.get("dataset")
    if ds is not None and not isinstance(ds, str):
        raise CheckpointError(f"{path}: dataset is not a string")
    cut = info.get("cutoffs", [])
    if not isinstance(cut, list) or not all(checkpoint.is_int(c)
                                            for c in cut):
        raise CheckpointError(f"{path}: cutoffs is not a list of integers")
    vs = info.get("vocab_size")
    if vs is not None and not checkpoint.is_int(vs):
        raise CheckpointError(f"{path}: vocab_size is not an integer")
    return info


def recommended(dataset, hp):
    """The evaluation settings of the data set's published run, as the
    model file's recommended settings (mem_init zeros: the TF evaluation's
    memory starts as mem_len zero states)."""
    rec = dict(RECOMMENDED.get(dataset, {}))
    rec["mem_init"] = "zeros"
    if rec.get("clamp_len", 0) < 0:
        # no clamp (lm1b): the hyperparameter says so; txlgen's setting
        # has no value for it (0 is none)
        del rec["clamp_len"]
    return rec

