"""Activation statistics of a calibration text for the quantizers of
txlfile.py (txlfile.py --calibrate TEXT): the model in PyTorch
(txl_ref.py) scores the text as txlgen --score does, and every product
with a weight matrix adds its inputs' x x^T to that matrix's sum.  Q4_K
then quantizes each matrix column by column (GPTQ: Frantar et al., 2022),
each column's rounding error spread over the columns not yet quantized in
proportion to how the text's activations correlate them."""

import hashlib
import os

import numpy as np


def text_info(path):
    """(name, size in bytes, sha256 hex) of a calibration text."""
    with open(path, "rb") as f:
        data = f.read()
    return os.path.basename(path), len(data), hashlib.sha256(data).hexdigest()


def statistics(meta, tensors, text, max_tokens=16384, threads=2, prog=None):
    """{tensor name: (sum of x x^T over the products, count)} for the
    weight matrices of a model read by txlfile.read() (meta, tensors),
    from the first max_tokens tokens of the text at path `text`.  prog:
    the program whose progress line shows the tokens read, on a
    terminal."""
    from .progress import Progress
    import torch
    import torch.nn.functional as F
    from . import txl_ref, vocab

    torch.set_num_threads(threads)
    hp = {k: v if k == "same_length_mask" else __import__("json").loads(v)
          for k, v in meta.items() if k in txl_ref.HPARAM_NAMES}
    model = txl_ref.MemTransformerLM(txl_ref.TxlConfig.from_dict(hp))
    state = {k: torch.from_numpy(np.array(v, np.float32))
             for k, v in tensors.items()
             if k != "tokenizer.model" and isinstance(v, np.ndarray)}
    model.load_state_dict(state, strict=False)
    model.eval()
    sp = vocab.sentencepiece().SentencePieceProcessor()
    sp.LoadFromSerializedProto(bytes(tensors["tokenizer.model"]))
    with open(text, encoding="utf-8") as f:
        ids = sp.encode(f.read())[:max_tokens]
    sums = {}
    linear = F.linear
    bar = Progress(prog, f"calibrating on {os.path.basename(text)}:",
                   len(ids), " tokens") if prog else None
    # the first feed-forward matrix: its inputs are the tokens read
    ff = dict(model.named_parameters()).get("layers.0.pos_ff.CoreNet.0.weight")
    ff = ff.data_ptr() if ff is not None else None

    def hooked(x, w, b=None):
        x2 = x.detach().reshape(-1, x.shape[-1]).double()
        key = (w.data_ptr(), tuple(w.shape))
        s = sums.get(key)
        sums[key] = [x2.T @ x2 + (s[0] if s else 0),
                     x2.shape[0] + (s[1] if s else 0)]
        if bar and key[0] == ff:
            bar.update(min(sums[key][1], len(ids)))
        return linear(x, w, b)

    torch.nn.functional.linear = hooked
    try:
        with torch.no_grad():
            txl_ref.score_ids(model, ids, int(hp.get("tgt_len", 128)))
    finally:
        torch.nn.functional.linear = linear
        if bar:
            bar.done()
    own = dict(model.named_parameters())
    out = {}
    for name, arr in tensors.items():
        if name == "tokenizer.model" or getattr(arr, "ndim", 0) != 2:
            continue
        p = own.get(name)
        hit = [v for k, v in sums.items()
               if p is not None and k[0] == p.data_ptr()]
        if not hit:     # the output layer's copy (score_ids), by shape
            hit = [v for k, v in sums.items() if k[1] == tuple(arr.shape)]
        if len(hit) == 1:
            out[name] = (hit[0][0].numpy(), hit[0][1])
    return out


def gptq_q4_k(arr, xtx, damp=0.01):
    """Q4_K blocks of weight matrix arr (rows x cols, cols a multiple of
    128) given the sum of its inputs' x x^T (cols x cols): each
    super-block's scales and zero points from its columns as the earlier
    columns' errors left them (txlfile._q4_k_params, weighted by the
    inputs' mean squares), then column by column the nearest value, its
    error taken out of the later columns through the inverse Hessian's
    Cholesky factor (GPTQ)."""
    from . import txlfile as T

    W = np.array(arr, np.float64)
    rows, cols = W.shape
    H = np.array(xtx, np.float64)
    dead = np.diag(H) <= 0
    H[dead, dead] = 1
    H += damp * np.mean(np.diag(H)) * np.eye(cols)
    U = np.linalg.cholesky(np.linalg.inv(H)).T     # upper: Hinv = U^T U
    imp = np.diag(H)
    nb = cols // T.QKK
    d = np.empty((rows, nb), np.float16)
    sc = np.empty((rows, nb, 4), np.uint8)
    z = np.empty((rows, nb, 4), np.uint8)
    q = np.empty((rows, cols))
    for c0 in range(0, cols, T.QKK):
        b = c0 // T.QKK
        dd, s1, z1, u = T._q4_k_params(
            W[:, c0:c0 + T.QKK],
            np.broadcast_to(imp[c0:c0 + T.QKK], (rows, T.QKK)))
        d[:, b], sc[:, b], z[:, b] = dd, s1, z1
        for c in range(c0, c0 + T.QKK):
            j = (c - c0) // T.QK
            qc = T._q4_k_round(W[:, c], u[:, j], z1[:, j].astype(np.float64))
            q[:, c] = qc
            err = (W[:, c] - u[:, j] * (4 * qc - z1[:, j])) / U[c, c]
            W[:, c + 1:] -= np.outer(err, U[c, c + 1:])
    return T._q4_k_blocks(d.reshape(-1), sc.reshape(-1, 4),
                          z.reshape(-1, 4), q.reshape(-1, T.QKK))
