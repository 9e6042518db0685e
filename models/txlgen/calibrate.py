"""Activation statistics of a calibration text for the quantizers of
txlfile.py (txlfile.py --calibrate TEXT): the model in PyTorch
(txl_ref.py) scores the text as txlgen --score does, and every product
with a weight matrix adds its inputs' x x^T to that matrix's sum, from
which Q4_K quantizes each matrix column by column (txlfile.gptq_q4_k)."""

import hashlib
import os


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
    model = txl_ref.from_tensors(meta, tensors)
    hp = model.cfg
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
            txl_ref.score_ids(model, ids, hp.tgt_len)
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
