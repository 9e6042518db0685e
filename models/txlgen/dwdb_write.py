"""Checkpoints of dwdb/transformer-xl's TransformerXL written as
TensorFlow 2.3 writes them, without TensorFlow, for the tests.

tf.train.Checkpoint(model=model) saved by a CheckpointManager
(checkpoint_name "xl-ckpt", max_to_keep 3) is, for save N, xl-ckpt-N.index
and its data shards (txlgen/tfwrite.py's bundle), keys the object paths
of the variables from the checkpoint's root:

  model/embedding, model/projection, model/rw_bias, model/logit_bias
  model/multihead_layers/I/rel_multihead_attn/{w_head,r_head,dense}/kernel
  model/multihead_layers/I/ffn/layer_with_weights-{0,1}/{kernel,bias}
  model/multihead_layers/I/layer_norm{1,2}/{gamma,beta}

each + "/.ATTRIBUTES/VARIABLE_VALUE", with save_counter (int64) and
_CHECKPOINTABLE_OBJECT_GRAPH, the serialized TrackableObjectGraph: its
nodes in breadth-first order from the root, each with its children in
the order Keras tracks them (the attributes as __init__ assigns them; a
Sequential's layers as layer_with_weights-K, then layer-K) and, for a
variable, the attribute VARIABLE_VALUE naming its key.  The "checkpoint"
file names the saves kept, the last one first.  model.save_weights(PATH)
in TF format (save_weights=True here) has the model as its root: the
same keys without "model/", and no save_counter.
"""

import os

import numpy as np

from . import tfwrite
from .proto import field

VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


class Node:
    """A trackable: its children (local name, Node) in tracking order,
    and, for a variable, its full name."""

    def __init__(self, children=(), variable=None):
        self.children, self.variable = list(children), variable


def dense(name, bias):
    kids = [("kernel", Node(variable=f"{name}/kernel"))]
    if bias:
        kids.append(("bias", Node(variable=f"{name}/bias")))
    return Node(kids)


def model_graph(n_layer):
    """The TransformerXL's trackables, as model.py's __init__s assign
    them (Dropout layers hold nothing but are tracked)."""
    layers = []
    for i in range(n_layer):
        s = "" if i == 0 else f"_{i}"
        p = f"transformer_layer{s}"
        attn = Node([("w_head", dense(f"{p}/rel_multi_head_attention/dense",
                                      False)),
                     ("r_head", dense(f"{p}/rel_multi_head_attention/dense_1",
                                      False)),
                     ("dense", dense(f"{p}/rel_multi_head_attention/dense_2",
                                     False)),
                     ("dropout1", Node()), ("dropout2", Node())])
        ffn1, ffn2 = dense(f"{p}/sequential/ffn1", True), \
            dense(f"{p}/sequential/ffn2", True)
        ffn = Node([("layer_with_weights-0", ffn1), ("layer-0", ffn1),
                    ("layer_with_weights-1", ffn2), ("layer-1", ffn2)])
        norms = [(f"layer_norm{k}", Node([
            ("gamma", Node(variable=f"{p}/layer_normalization{'' if k == 1 else '_1'}/gamma")),
            ("beta", Node(variable=f"{p}/layer_normalization{'' if k == 1 else '_1'}/beta"))]))
            for k in (1, 2)]
        layers.append((str(i), Node([("rel_multihead_attn", attn),
                                     ("ffn", ffn)] + norms +
                                    [("dropout1", Node()),
                                     ("dropout2", Node())])))
    return Node([("embedding", Node(variable="embedding")),
                 ("projection", Node(variable="projection")),
                 ("dropout1", Node()),
                 ("rw_bias", Node(variable="rw_bias")),
                 ("logit_bias", Node(variable="logit_bias")),
                 ("multihead_layers", Node(layers))])


def serialize(root):
    """(TrackableObjectGraph bytes, [checkpoint keys of its variables]):
    nodes numbered breadth first, each key the first path found to its
    variable."""
    order, ids, paths = [root], {id(root): 0}, {id(root): ()}
    i = 0
    while i < len(order):
        node = order[i]
        for name, child in node.children:
            if id(child) not in ids:
                ids[id(child)] = len(order)
                paths[id(child)] = paths[id(node)] + (name,)
                order.append(child)
        i += 1
    out, keys = b"", []
    for node in order:
        body = b"".join(field(1, field(1, ids[id(c)]) + field(2, name))
                        for name, c in node.children)
        if node.variable is not None:
            key = "/".join(paths[id(node)]) + VALUE
            keys.append(key)
            body += field(2, field(1, "VARIABLE_VALUE") +
                          field(2, node.variable) + field(3, key))
        out += field(1, body)
    return out, keys


def random_tensors(n_vocab, d_embed, d_model, d_ff, n_head, n_layer,
                   untie_rel_bias, seed=0):
    """{object path without "model/": array} of a TransformerXL with
    random weights large enough that its outputs are far from flat."""
    rng = np.random.default_rng(seed)

    def r(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    d_head = d_model // n_head
    t = {"embedding": r(n_vocab, d_embed, scale=0.8),
         "projection": r(d_embed, d_model, scale=1.2 / d_embed ** 0.5),
         "rw_bias": r(2, n_layer if untie_rel_bias else 1, n_head, d_head,
                      scale=0.3),
         "logit_bias": r(n_vocab, scale=0.5)}
    for i in range(n_layer):
        p = f"multihead_layers/{i}/"
        t[p + "rel_multihead_attn/w_head/kernel"] = \
            r(d_model, 3 * d_model, scale=1.5 / d_model ** 0.5)
        t[p + "rel_multihead_attn/r_head/kernel"] = \
            r(d_model, d_model, scale=1.5 / d_model ** 0.5)
        t[p + "rel_multihead_attn/dense/kernel"] = \
            r(d_model, d_model, scale=1 / d_model ** 0.5)
        t[p + "ffn/layer_with_weights-0/kernel"] = \
            r(d_model, d_ff, scale=1 / d_model ** 0.5)
        t[p + "ffn/layer_with_weights-0/bias"] = r(d_ff, scale=0.1)
        t[p + "ffn/layer_with_weights-1/kernel"] = \
            r(d_ff, d_model, scale=1 / d_ff ** 0.5)
        t[p + "ffn/layer_with_weights-1/bias"] = r(d_model, scale=0.1)
        for k in (1, 2):
            t[p + f"layer_norm{k}/gamma"] = 1 + r(d_model, scale=0.2)
            t[p + f"layer_norm{k}/beta"] = r(d_model, scale=0.2)
    return {k + VALUE: v for k, v in t.items()}


def bundle_tensors(tensors, save_weights=False, save_counter=1, graph=None):
    """The bundle of a save: the model's tensors under their checkpoint
    keys, the object graph, save_counter (not with save_weights)."""
    n_layer = sum(1 for k in tensors
                  if k.endswith("/layer_norm1/gamma" + VALUE))
    model = graph or model_graph(n_layer)
    root = model if save_weights else Node(
        [("model", model), ("save_counter", Node(variable="save_counter"))])
    proto, keys = serialize(root)
    pre = "" if save_weights else "model/"
    out = {pre + k: v for k, v in tensors.items()}
    if not save_weights:
        out["save_counter" + VALUE] = np.array(save_counter, np.int64)
    missing = set(keys) - set(out)
    assert not missing, sorted(missing)[:3]
    out[OBJECT_GRAPH] = proto
    return out


def write_dir(path, tensors, vocab_pickle=None, saves=2, num_shards=1,
              save_weights=False, earlier=None, **bundle_kw):
    """A CheckpointManager's directory after `saves` saves of the same
    weights (xl-ckpt-1 ...; the last `saves` but three removed as
    max_to_keep 3 removes them), "checkpoint" naming the last, and
    vocab.pkl (bytes) beside them; the last save's prefix.  The saves
    before the last hold `earlier` (other tensors), if given.  With
    num_shards > 1 the tensors are spread over that many shards."""
    os.makedirs(path, exist_ok=True)
    names = []
    for n in range(1, saves + 1):
        name = "xl-ckpt" if save_weights else f"xl-ckpt-{n}"
        last = n == saves or save_weights
        b = bundle_tensors(tensors if last or earlier is None else earlier,
                           save_weights, save_counter=n)
        order = sorted(b)
        shard_of = None
        if num_shards > 1:
            def shard_of(k, order=order):
                return order.index(k) % num_shards
        tfwrite.write_bundle(os.path.join(path, name), b,
                             num_shards=num_shards, shard_of=shard_of,
                             **bundle_kw)
        names.append(name)
        if save_weights:
            break
    kept = names[-3:]
    for old in names[:-3]:
        for f in os.listdir(path):
            if f.startswith(old + "."):
                os.unlink(os.path.join(path, f))
    with open(os.path.join(path, "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{kept[-1]}"\n')
        for k in kept:
            f.write(f'all_model_checkpoint_paths: "{k}"\n')
        for i, k in enumerate(kept):
            f.write(f"all_model_checkpoint_timestamps: "
                    f"{1596989562.5 + i * 60:.6f}\n")
        f.write("last_preserved_timestamp: 1596989500.123456\n")
    if vocab_pickle is not None:
        with open(os.path.join(path, "vocab.pkl"), "wb") as f:
            f.write(vocab_pickle)
    return os.path.join(path, kept[-1])
