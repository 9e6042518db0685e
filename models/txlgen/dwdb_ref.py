"""The Transformer-XL of dwdb/transformer-xl (TensorFlow 2.3, Keras) in
NumPy, for the tests: its model.py, data_utils.Vocab and run.py's
inference written again step by step over the checkpoint's own tensors
(as dwdb_convert.read_dwdb_checkpoint lists them, under their object
paths without "model/"), in float64.  TensorFlow is not needed; nothing
here is txlgen's own computation.

What the original does, as written there:
  x = embedding[ids] @ projection               (no sqrt(d_model) scale)
  per layer i (mems[i] holds the last m_len inputs of layer i):
    cat = [mems[i]; x]; k_len = len(cat)
    pos_emb = the table of q_len + m_len rows (distances q_len+m_len-1
              .. 0, [sin | cos]) sliced [-k_len:]
    w_heads = (cat @ w_head) reshaped (k_len, 3 * n_head, d_head), split
              in three along the heads: q, k, v; q the last q_len rows
    ac = (q + r_w_bias) . k,  bd = rel_shift((q + r_r_bias) . (pos_emb @
         r_head))
    score = (ac + bd) / sqrt(d_head), masked (score * m - 1e30 (1 - m),
            m the causal mask padded with m_len ones), softmax
    attn = (score . v) @ dense
    out1 = LN1(x + attn), x = LN2(out1 + ffn(out1))   (epsilon 1e-6)
  logits = x @ projection^T @ embedding^T + logit_bias
"""

import numpy as np

from .conventions import LAYER_NORM_EPS

LN_EPS = LAYER_NORM_EPS["dwdb"]


def positional_embedding(k_len, d_model):
    inv_freq = 1.0 / (10000 ** (np.arange(0, d_model, 2.0) / d_model))
    pos_seq = np.arange(k_len - 1, -1, -1.0)
    inp = np.einsum("i,j->ij", pos_seq, inv_freq)
    return np.concatenate([np.sin(inp), np.cos(inp)], -1)[None]


def relative_mask(q_len, m_len):
    mask = (np.arange(q_len)[None, :] <
            np.arange(1, q_len + 1)[:, None]).astype(np.float64)
    return np.pad(mask, [[0, 0], [m_len, 0]], constant_values=1)


def relative_shift(x):
    b, n, q, k = x.shape
    x = np.pad(x, [[0, 0], [0, 0], [0, 0], [1, 0]])
    x = x.reshape(b, n, k + 1, q)
    x = x[:, :, 1:, :]
    return x.reshape(b, n, q, k)


def layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + LN_EPS) * g + b


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


class TransformerXL:
    """model.TransformerXL over tensors {object path: array} (paths
    without "model/", e.g. "embedding/.ATTRIBUTES/VARIABLE_VALUE"); q_len
    and m_len as run.py builds it (the position table's q_len + m_len
    rows), m_len then the memory's as inference() sets it."""

    def __init__(self, tensors, q_len=50, m_len=50):
        def t(name):
            return np.asarray(tensors[name + "/.ATTRIBUTES/VARIABLE_VALUE"],
                              np.float64)
        self.embedding = t("embedding")
        self.projection = t("projection")
        self.rw_bias = t("rw_bias")
        self.logit_bias = t("logit_bias")
        self.n_layer = 0
        while ("multihead_layers/%d/layer_norm1/gamma/.ATTRIBUTES/"
               "VARIABLE_VALUE" % self.n_layer) in tensors:
            self.n_layer += 1
        self.untie_rel_bias = self.rw_bias.shape[1] > 1 or self.n_layer == 1
        self.num_heads = self.rw_bias.shape[2]
        self.d_model = self.projection.shape[1]
        self.d_depth = self.d_model // self.num_heads
        self.layers = []
        for i in range(self.n_layer):
            p = f"multihead_layers/{i}/"
            self.layers.append(dict(
                w_head=t(p + "rel_multihead_attn/w_head/kernel"),
                r_head=t(p + "rel_multihead_attn/r_head/kernel"),
                dense=t(p + "rel_multihead_attn/dense/kernel"),
                ffn1_k=t(p + "ffn/layer_with_weights-0/kernel"),
                ffn1_b=t(p + "ffn/layer_with_weights-0/bias"),
                ffn2_k=t(p + "ffn/layer_with_weights-1/kernel"),
                ffn2_b=t(p + "ffn/layer_with_weights-1/bias"),
                ln1_g=t(p + "layer_norm1/gamma"),
                ln1_b=t(p + "layer_norm1/beta"),
                ln2_g=t(p + "layer_norm2/gamma"),
                ln2_b=t(p + "layer_norm2/beta")))
        self.q_len, self.m_len = q_len, m_len
        self.pos_emb = positional_embedding(q_len + m_len, self.d_model)

    def attention(self, ly, inputs, r_w_bias, r_r_bias, mems):
        b, q_len = inputs.shape[:2]
        cat = inputs if mems is None else np.concatenate([mems, inputs], 1)
        k_len = cat.shape[1]
        m_len = k_len - q_len
        pos_emb = self.pos_emb[:, -k_len:]
        if pos_emb.shape[1] != k_len:
            # tf.reshape of r_head(pos_emb) to (k_len, ...) fails there
            raise ValueError(f"a window of {k_len} positions, longer than "
                             f"the position table's {pos_emb.shape[1]}")
        n, d = self.num_heads, self.d_depth
        w_heads = (cat @ ly["w_head"]).reshape(b, k_len, 3 * n, d)
        q, k, v = np.split(w_heads, 3, axis=2)
        q = q[:, -q_len:]
        ac = np.einsum("bqnd,bknd->bnqk", q + r_w_bias, k)
        r_head_k = (pos_emb @ ly["r_head"]).reshape(k_len, n, d)
        bd = np.einsum("bqnd,knd->bnqk", q + r_r_bias, r_head_k)
        bd = relative_shift(bd)
        mask = relative_mask(q_len, m_len)
        score = (ac + bd) / (d ** 0.5)
        score = score * mask - 1e30 * (1.0 - mask)
        score = softmax(score)
        vec = np.einsum("bnqk,bknd->bqnd", score, v).reshape(
            b, q_len, self.d_model)
        return vec @ ly["dense"]

    def layer(self, ly, x, r_w_bias, r_r_bias, mems):
        out1 = layer_norm(x + self.attention(ly, x, r_w_bias, r_r_bias,
                                             mems), ly["ln1_g"], ly["ln1_b"])
        ff = np.maximum(out1 @ ly["ffn1_k"] + ly["ffn1_b"], 0.0)
        ff = ff @ ly["ffn2_k"] + ly["ffn2_b"]
        return layer_norm(out1 + ff, ly["ln2_g"], ly["ln2_b"])

    def cache_mems(self, cur, pre):
        if self.m_len is None or self.m_len <= 0:
            return None
        new = cur if pre is None else np.concatenate([pre, cur], 1)
        return new[:, -self.m_len:]

    def __call__(self, inputs, mems=None):
        """(logits [batch, len, n_vocab], new mems) of ids [batch, len]."""
        x = self.embedding[np.asarray(inputs)]
        x = x @ self.projection
        if mems is None:
            mems = [None] * self.n_layer
        new_mems = []
        for i, ly in enumerate(self.layers):
            new_mems.append(self.cache_mems(x, mems[i]))
            j = i if self.rw_bias.shape[1] > 1 else 0
            x = self.layer(ly, x, self.rw_bias[0][j], self.rw_bias[1][j],
                           mems[i])
        x = x @ self.projection.T
        return x @ self.embedding.T + self.logit_bias, new_mems


class Vocab:
    """data_utils.Vocab of an idx2sym list (lower_case True, as run.py
    makes it)."""

    def __init__(self, idx2sym, lower_case=True):
        self.idx2sym = list(idx2sym)
        self.sym2idx = dict(zip(self.idx2sym, range(len(self.idx2sym))))
        self.lower_case = lower_case
        self.unk, self.eos = "<unk>", "<eos>"

    def tokenize(self, text, add_eos=False):
        syms = [c.lower() for c in text] if self.lower_case else list(text)
        return syms + [self.eos] if add_eos else syms

    def get_index(self, sym):
        if self.lower_case:
            sym = sym.lower()
        return self.sym2idx.get(sym, self.sym2idx[self.unk])

    def get_indices(self, text):
        return [self.get_index(s) for s in self.tokenize(text)]

    def encode_lines(self, lines):
        """encode_file(ordered=True) of a file's lines."""
        out = []
        for line in lines:
            line = line.strip()
            if not line:
                continue
            out += [self.get_index(s) for s in self.tokenize(line, True)]
        return out

    def get_symbols(self, ids):
        return "".join(self.idx2sym[i] for i in ids)


def logprobs(model, ids, seg_len, mems=None):
    """The log-prob of each next id of ids, read in segments of seg_len
    as evaluate() reads its batches (memory carried): [len(ids) - 1]."""
    out = []
    for s in range(0, len(ids) - 1, seg_len):
        x = ids[s:s + seg_len + 1]
        logits, mems = model(np.array([x[:-1]]), mems)
        lg = logits[0]
        lg = lg - lg.max(-1, keepdims=True)
        lp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
        out += [lp[i, t] for i, t in enumerate(x[1:])]
    return np.array(out)


def inference(model, vocab, sentence, tgt_len=50, mem_len=50, max_len=64):
    """run.py's inference(sentence): the sentence's last q_len + m_len
    characters (those the model was built with) read at once, then greedy
    one character at a time until <eos> or max_len; what it returns (the
    sentence so cut, then the continuation)."""
    rel_len = model.q_len + model.m_len
    model.m_len, model.q_len = mem_len, tgt_len
    sentence = sentence[-rel_len:]
    x = vocab.get_indices(sentence)
    seq, mems = [], [None] * model.n_layer
    eos = vocab.get_index(vocab.eos)
    for _ in range(max_len):
        out, mems = model(np.array([x]), mems)
        x = [int(np.argmax(out[:, -1], -1)[0])]
        if x[0] == eos:
            break
        seq.append(x[0])
    return sentence + vocab.get_symbols(seq), seq
