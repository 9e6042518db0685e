"""Checkpoints of dwdb/transformer-xl (a TensorFlow 2.3 Keras
Transformer-XL: model.py's TransformerXL, trained by run.py) onto the
names and conventions of txlgen's model files.

Where they are: the directory a CheckpointManager writes (checkpoint,
which names the latest save, and xl-ckpt-N.index with its
.data-SSSSS-of-NNNNN shards), or a checkpoint prefix; vocab.pkl beside it
or --vocab.  A TF 2 object-based checkpoint: keys are object paths
(txlgen/dwdb_write.py lists them), under "model/" for
tf.train.Checkpoint(model=...), without it for model.save_weights(); its
_CHECKPOINTABLE_OBJECT_GRAPH (a TrackableObjectGraph) must name exactly
the bundle's variables, and the model's must be TransformerXL's, of one
shape.  save_counter and an optimizer's variables are left unread.

The mapping (kernels are [in, out]: transposed):
  embedding [n_vocab, d_embed]      word_emb.emb_layers.0.weight (tied out)
  projection [d_embed, d_model]     word_emb.emb_projs.0 (transposed; tied
                                    out: x @ projection^T @ embedding^T)
  logit_bias [n_vocab]              crit.out_layers.0.bias
  rw_bias [2, n_layer or 1, ...]    r_w_bias, r_r_bias (untie_r: n_layer)
  I/rel_multihead_attn/w_head       qkv_net (q, k, v in that order, each
                                    n_head x d_head, as it splits them)
  I/rel_multihead_attn/r_head       r_net
  I/rel_multihead_attn/dense        o_net
  I/ffn/layer_with_weights-{0,1}    pos_ff.CoreNet.{0,3}
  I/layer_norm1, layer_norm2        dec_attn.layer_norm, pos_ff.layer_norm
with emb_scale false, proj_same_dim true and layer_norm_eps 1e-6.  The
lengths are not in the checkpoint: run.py's SEQ_LEN and MEM_LEN (50, 50;
--tgt-len, --mem-len) become tgt_len and mem_len, and its position table
of tgt_len + mem_len rows (distances up to tgt_len + mem_len - 1, past
which it fails) becomes clamp_len tgt_len + mem_len - 1.
"""

import collections
import collections.abc
import os
import re

import numpy as np

from . import checkpoint, tfckpt
from .conventions import LAYER_NORM_EPS, REL_PARTIAL
from .checkpoint import CheckpointError
from .proto import ProtoError, fields as proto_fields
from . import vocab as vocabulary

VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
OBJECT_GRAPH = tfckpt.OBJECT_GRAPH
# run.py's SEQ_LEN and MEM_LEN
TGT_LEN, MEM_LEN = 50, 50
MAX_LAYERS = 1 << 12
FLOAT_DTYPES = {1, 2, 14, 19}
# Variables beside the model's that are not read: the checkpoint's save
# counter, an optimizer tracked with it and its slots.
NOT_MODEL = re.compile(r"^(save_counter/|optimizer/)|/\.OPTIMIZER_SLOT/")
# run.py's inference: greedy, at most max_len 64 characters
RECOMMENDED = {"temp": 0, "n_predict": 64}


def _index_has_graph(prefix):
    try:
        table = tfckpt.Table(prefix + ".index")
    except CheckpointError:
        return False
    return any(k == OBJECT_GRAPH.encode() for k, _ in table.entries)


def is_dwdb_checkpoint(path):
    """Whether path is a TF 2 object-based checkpoint: a directory with a
    checkpoint file or *.index files (and no model/ of the TF 1 code's
    layout), or a prefix whose index holds an object graph."""
    if os.path.isdir(path):
        if os.path.isdir(os.path.join(path, "model")):
            return False
        return os.path.exists(os.path.join(path, "checkpoint")) or \
            any(n.endswith(".index") for n in os.listdir(path))
    return os.path.isfile(path + ".index") and _index_has_graph(path)


def find_files(weights, vocab=None):
    """(checkpoint prefix, vocab.pkl) of a directory or a prefix."""
    if os.path.isdir(weights):
        prefix = tfckpt.latest_prefix(weights)
        where = weights
    else:
        prefix, where = weights, os.path.dirname(weights) or "."
    path = vocab or os.path.join(where, "vocab.pkl")
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: no such file (the vocabulary "
                              "vocab.pkl: give --vocab)")
    return prefix, path


def parse_graph(raw, what):
    """The checkpoint keys of a TrackableObjectGraph's variables, {key:
    path of local names from the root}, and the root's children's
    names."""
    nodes = []
    try:
        for num, wt, v, _ in proto_fields(raw):
            if num == 1 and wt == 2:
                kids, keys = [], []
                for n2, w2, v2, _ in proto_fields(v):
                    if n2 == 1 and w2 == 2:
                        ref = {n3: v3 for n3, _, v3, _ in proto_fields(v2)}
                        kids.append((ref.get(1, 0),
                                     bytes(ref.get(2, b"")).decode()))
                    elif n2 == 2 and w2 == 2:
                        att = {n3: v3 for n3, _, v3, _ in proto_fields(v2)}
                        keys.append(bytes(att.get(3, b"")).decode())
                nodes.append((kids, keys))
                if len(nodes) > tfckpt.MAX_ENTRIES:
                    raise ProtoError("too many nodes")
    except (ProtoError, UnicodeDecodeError, TypeError) as e:
        raise CheckpointError(f"{what}: a malformed object graph ({e})")
    if not nodes:
        raise CheckpointError(f"{what}: an empty object graph")
    keys, seen, queue = {}, {0}, collections.deque([(0, ())])
    while queue:
        i, path = queue.popleft()
        kids, own = nodes[i]
        for k in own:
            keys.setdefault(k, path)
        for j, name in kids:
            if not 0 <= j < len(nodes):
                raise CheckpointError(f"{what}: the object graph refers to "
                                      f"node {j} of {len(nodes)}")
            if j not in seen:
                seen.add(j)
                queue.append((j, path + (name,)))
    return keys, [name for _, name in nodes[0][0]]


def read_dwdb_checkpoint(prefix, tgt_len=TGT_LEN, mem_len=MEM_LEN):
    """(hyperparameters with the original names, {txlgen name: maker},
    {txlgen name: shape}, {object path without "model/": key}) of the
    checkpoint at prefix."""
    b = tfckpt.Bundle(prefix)
    index = prefix + ".index"
    if OBJECT_GRAPH not in b.strings:
        raise CheckpointError(f"{index}: no {OBJECT_GRAPH}: not a TF 2 "
                              "object-based checkpoint")
    graph, roots = parse_graph(b.string(OBJECT_GRAPH), index)
    have = set(b) | set(b.training) | (set(b.strings) - {OBJECT_GRAPH})
    for k in sorted(set(graph) ^ have):
        side = "the object graph names" if k in graph else \
            "the bundle holds"
        raise CheckpointError(f"{index}: {side} {k[:100]!r}, which the "
                              "other lacks")
    if "model" in roots:
        pre = "model/"
    elif "embedding" in roots and "multihead_layers" in roots:
        pre = ""                        # model.save_weights()
    else:
        raise CheckpointError(f"{index}: its object graph's root has "
                              f"{', '.join(sorted(roots)[:6]) or 'nothing'}"
                              ": not a checkpoint of dwdb/transformer-xl's "
                              "TransformerXL (no model, embedding, "
                              "multihead_layers)")
    model = {}
    for k in b:
        if NOT_MODEL.search(k):
            continue
        if not k.startswith(pre) or not k.endswith(VALUE):
            raise CheckpointError(f"{index}: tensor {k[:100]!r} has no "
                                  "place in dwdb's TransformerXL")
        model[k[len(pre):-len(VALUE)]] = k
    foreign = ("not a checkpoint of dwdb/transformer-xl's TransformerXL")
    used = set()

    def need(path, rank):
        if path not in model:
            raise CheckpointError(f"{index}: no tensor "
                                  f"{(pre + path + VALUE)[:100]!r}: "
                                  f"{foreign}")
        key = model[path]
        e = b.entries[key]
        if e.dtype not in FLOAT_DTYPES:
            raise CheckpointError(f"{index}: tensor {key[:100]!r} is "
                                  f"{tfckpt.DTYPES[e.dtype][0]}, not "
                                  "floating point")
        s = tuple(e.shape)
        if len(s) != rank or 0 in s:
            raise CheckpointError(f"{index}: tensor {key[:100]!r} of shape "
                                  f"{list(s)}, expected {rank} non-zero "
                                  "dimensions")
        used.add(path)
        return s

    V, E = need("embedding", 2)
    E2, M = need("projection", 2)
    if E2 != E:
        raise CheckpointError(f"{index}: projection of shape [{E2}, {M}] "
                              f"for an embedding of {E} columns")
    two, nb, H, D = need("rw_bias", 4)
    layers = sorted({int(m.group(1)) for p in model
                     for m in [re.match(r"multihead_layers/(\d+)/", p)]
                     if m})
    L = len(layers)
    if not L or layers != list(range(L)) or L > MAX_LAYERS:
        raise CheckpointError(f"{index}: layers {layers[:5]} are not "
                              f"multihead_layers/0 to N: {foreign}")
    if two != 2 or nb not in (1, L) or H * D != M:
        raise CheckpointError(f"{index}: rw_bias of shape "
                              f"[{two}, {nb}, {H}, {D}], expected [2, "
                              f"{L} or 1, n_head, d_model {M} / n_head]")
    (v2,) = need("logit_bias", 1)
    if v2 != V:
        raise CheckpointError(f"{index}: logit_bias of {v2} values for "
                              f"{V} embedding rows")
    F = need("multihead_layers/0/ffn/layer_with_weights-0/kernel", 2)[1]
    untie = nb == L and L > 1
    shapes = {}
    makers = collections.OrderedDict()

    def put(name, path, shape, transpose=False, fn=None):
        s = need(path, len(shape))
        if s != tuple(shape):
            raise CheckpointError(f"{index}: tensor "
                                  f"{model[path][:100]!r} of shape "
                                  f"{list(s)}, expected {list(shape)} "
                                  f"(d_model {M}, d_inner {F})")
        key = model[path]

        def make():
            a = b[key]
            if fn is not None:
                a = fn(a)
            return np.ascontiguousarray(a.T if transpose else a)
        makers[name] = make
        shapes[name] = tuple(reversed(shape)) if transpose else tuple(shape)

    put("word_emb.emb_layers.0.weight", "embedding", (V, E))
    put("word_emb.emb_projs.0", "projection", (E, M), transpose=True)
    put("crit.out_layers.0.bias", "logit_bias", (V,))
    for n, bname in enumerate(("r_w_bias", "r_r_bias")):
        put(bname, "rw_bias", (2, nb, H, D),
            fn=lambda a, n=n: a[n] if untie else a[n][0])
        shapes[bname] = (L, H, D) if untie else (H, D)
    for i in range(L):
        p = f"multihead_layers/{i}/"
        q = f"layers.{i}."
        for path, name, shape in (
                ("rel_multihead_attn/w_head/kernel",
                 "dec_attn.qkv_net.weight", (M, 3 * M)),
                ("rel_multihead_attn/r_head/kernel",
                 "dec_attn.r_net.weight", (M, M)),
                ("rel_multihead_attn/dense/kernel",
                 "dec_attn.o_net.weight", (M, M)),
                ("ffn/layer_with_weights-0/kernel",
                 "pos_ff.CoreNet.0.weight", (M, F)),
                ("ffn/layer_with_weights-1/kernel",
                 "pos_ff.CoreNet.3.weight", (F, M))):
            put(q + name, p + path, shape, transpose=True)
        for path, name, shape in (
                ("ffn/layer_with_weights-0/bias", "pos_ff.CoreNet.0.bias",
                 (F,)),
                ("ffn/layer_with_weights-1/bias", "pos_ff.CoreNet.3.bias",
                 (M,)),
                ("layer_norm1/gamma", "dec_attn.layer_norm.weight", (M,)),
                ("layer_norm1/beta", "dec_attn.layer_norm.bias", (M,)),
                ("layer_norm2/gamma", "pos_ff.layer_norm.weight", (M,)),
                ("layer_norm2/beta", "pos_ff.layer_norm.bias", (M,))):
            put(q + name, p + path, shape)
    extra = sorted(set(model) - used)
    if extra:
        raise CheckpointError(f"{index}: tensor {model[extra[0]][:100]!r} "
                              f"has no place in dwdb's TransformerXL")
    hp = dict(n_token=int(V), n_layer=L, n_head=int(H), d_model=int(M),
              d_head=int(D), d_inner=int(F), d_embed=int(E), div_val=1,
              cutoffs=[], tie_weight=True, tie_projs=[True],
              pre_lnorm=False, attn_type=REL_PARTIAL, untie_r=untie,
              tgt_len=tgt_len, ext_len=0, mem_len=mem_len,
              clamp_len=tgt_len + mem_len - 1, same_length=False,
              layer_norm_eps=LAYER_NORM_EPS["dwdb"], emb_scale=False,
              proj_same_dim=True)
    return hp, makers, shapes, model


class State(collections.abc.Mapping):
    """txlgen name -> array, each read when it is used."""

    def __init__(self, makers, shapes):
        self.makers, self.shapes = makers, shapes

    def __getitem__(self, name):
        return self.makers[name]()

    def shape_of(self, name):
        return self.shapes[name]

    def __iter__(self):
        return iter(self.makers)

    def __len__(self):
        return len(self.makers)


def read_vocab(path):
    """data_utils.Vocab's idx2sym from vocab.pkl (a pickle of the list,
    read by the restricted unpickler): a Vocabulary whose symbols are
    read one character at a time, lower-cased, a stripped line ending
    with <eos> (vocab.py, strip_eos)."""
    obj, _ = checkpoint.load_corpus_cache(path)
    if not isinstance(obj, list) or not obj or \
            not all(isinstance(s, str) for s in obj):
        raise vocabulary.VocabError(f"{path}: not a pickled list of "
                                    "symbols (data_utils.Vocab's idx2sym)")
    if len(set(obj)) != len(obj):
        raise vocabulary.VocabError(f"{path}: symbols repeat")
    for s in ("<unk>", "<eos>"):
        if s not in obj:
            raise vocabulary.VocabError(f"{path}: no {s} symbol")
    return vocabulary.Vocabulary(obj, True, None, None, None, path,
                                 "strip_eos")
