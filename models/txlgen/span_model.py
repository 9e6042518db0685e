"""Random-weight adaptive-span models for txlgen's tests, saved as the
adaptive-span code's trainer saves its checkpoints.

    sm = build(outdir, dataset="text8", spans=[[0.02, 0.1], [0.6, 1.0]],
               attn_span=256, span_ramp=16)
    sm.path                 the converted model file (attn_type 4)
    sm.ids                  the test text's ids (sm.text: the raw text)
    span_ref.score_ids(sm.model, sm.ids, 64)

writes in outdir: train.txt (the corpus prepared as the original's
prep_text8.py / prep_enwik8.py write it, from tests/data/text.txt),
test.txt.raw (raw text for scoring), ckpt.pt (torch.save of {"iter_no",
"model": the state_dict under DataParallel's "module." names, "logger",
"optimizer": an Adagrad state as large as the model, "scheduler_iter"})
and m.bin, converted by models/convert.py --vocab-corpus train.txt run as
a user runs it.

Every parameter is random and the attention far from uniform; the spans
(current_val, fractions of attn_span) are given per layer and head, so
that the tests choose layers the original trims and heads whose ramp
cuts their keys.  For a compact storage type the weights are rounded to
their stored values first (the reference computes with what txlgen
reads).  Run with /usr/bin/python3 (python3-torch).
"""

import math
import os
import subprocess

import torch

from . import span_ref, txlfile, vocab
from .hparams import SpanConfig
from .random_model import CONVERT, DATA, PYTHON


def prepare_text8(text):
    """A text8 split as prep_text8.py writes it: stripped, '_' for a
    space, the characters separated by spaces, one line."""
    return " ".join("_" if c == " " else c for c in text.strip())


def prepare_enwik8(data):
    """An enwik8 split as prep_enwik8.py writes it: each byte as its
    decimal value, separated by spaces, a newline byte as a newline."""
    return " ".join(str(b) if b != 10 else "\n" for b in data)


def sample_text(dataset, n=9000, seed=0):
    """About n bytes of raw text of the dataset's kind, the same for a
    seed: sentences of the words of tests/data/text.txt, text8's lower-case
    letters and single spaces; for enwik8 lines of them between
    markup, with some characters of two and three bytes."""
    import random
    rng = random.Random(seed)
    with open(os.path.join(DATA, "text.txt"), encoding="utf-8") as f:
        words = "".join(c if c.isalpha() and c.isascii() else " "
                        for c in f.read().lower()).split()
    out = []
    while sum(map(len, out)) < n:
        s = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14)))
        if dataset == "enwik8":
            s = rng.choice(["<p>", "  <text>", "", "\u00e9t\u00e9 "]) + \
                s.capitalize() + rng.choice([".", ", \u2014 ok."]) + "\n"
        else:
            s += " "
        out.append(s)
    text = "".join(out)
    return text.encode() if dataset == "enwik8" else text.strip().encode()


def set_spans(model, spans):
    """spans[l][h] as head h's current_val in layer l (parameters named
    as the original's: this works on its TransformerSeq too)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("current_val"):
                layer = int(name.split(".")[1])
                p.copy_(torch.tensor(spans[layer], dtype=torch.float32)
                        .reshape(p.shape))


def randomize(model, spans, seed=0):
    """Every parameter random (attention far from uniform: the largest
    weight of a row 0.15 on average, where the spans hold 20 to 250
    keys), the spans given: spans[l][h] is head h's current_val.  By
    name, so that it works on the original's TransformerSeq too."""
    g = torch.Generator().manual_seed(seed)

    def normal(p, mean, std):
        p.copy_(torch.randn(p.shape, generator=g) * std + mean)

    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = p.shape[-1] if p.dim() >= 2 else 1
            if name.endswith("current_val"):
                continue
            if "norm" in name and name.endswith(".weight"):
                normal(p, 1.0, 0.3)
            elif "norm" in name:
                normal(p, 0.0, 0.3)
            elif name == "in_emb.weight":
                normal(p, 0.0, 1.0)
            elif name == "key_pe":
                normal(p, 0.0, 0.7)
            elif name.endswith(("proj_query.weight", "proj_key.weight")):
                # peaked attention, a head's softmax keeping a share of a
                # percent or more on its span (favour_past() makes heads
                # that do not)
                normal(p, 0.0, 1.0 / math.sqrt(fan_in))
            elif name == "out_emb.weight":
                normal(p, 0.0, 2.0 / math.sqrt(fan_in))
            elif name.endswith(".bias"):
                normal(p, 0.0, 0.5)
            else:                       # proj_val, proj_out, fc1, fc2
                normal(p, 0.0, 1.2 / math.sqrt(fan_in))
    set_spans(model, spans)


def favour_past(model, heads, boost=12.0, seed=0, cfg=None):
    """Make each head (layer, h) of heads score the keys beyond its span
    far above those within it: every input of its layer gets a common
    vector a e (layer 0: added to every embedding; later layers: to the
    bias of the previous layer's norm2), so that the head's queries all
    have a component of about 4 along v, the unit vector of its query
    projection of e; and v * boost * sqrt(d_head) / 4 is added to the
    position table's columns of the distances past the head's span.  The
    scores of those keys rise by about `boost` (half to one and a half
    times, with the queries' own component along v), so that the head's
    softmax over its layer's window puts almost all its mass where its
    mask is 0 and the original's division by the masked sum + 1e-8 leaves
    its weights short of 1.  By name, as randomize() (cfg: the model's
    SpanConfig, for a model without .cfg such as the original's)."""
    cfg = cfg or model.cfg
    S, D = cfg.attn_span, cfg.d_head
    g = torch.Generator().manual_seed(1000 + seed)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for layer, h in heads:
            e = torch.randn(cfg.d_model, generator=g)
            e /= e.norm()
            wq = params[f"layers.{layer}.attn.proj_query.weight"]
            u = wq[h * D:(h + 1) * D] @ e
            a = 4.0 / float(u.norm())
            if layer == 0:
                params["in_emb.weight"] += a * e
            else:
                params[f"layers.{layer - 1}.norm2.bias"] += a * e
            cv = params[f"layers.{layer}.attn.attn.adaptive_span."
                        "_mask.current_val"][h].reshape(1)
            x = torch.arange(1, S + 1)
            m = span_ref.span_mask(cv, S, cfg.span_ramp, x)[0]
            n = int(x[m > 0].max()) if bool((m > 0).any()) else 0
            past = S - x[n:]              # the columns of distances > n
            params["key_pe"][0][:, past] += \
                (u / u.norm() * boost * math.sqrt(D) / 4.0)[:, None]


def round_weights(model, dtype):
    """The weights as a file of dtype stores them (in place)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(txlfile.stored_values(
                name, p.detach().numpy(), dtype)))


def save_checkpoint(model, path, iter_no=1000, legacy=False):
    """torch.save of the dict the original's utils.save_checkpoint
    writes, for a model trained inside DataParallel: its state_dict under
    "module." names, and an Adagrad state (one step with learning rate 0:
    the weights unchanged, a sum per parameter).  legacy: in torch's
    format before 1.6, as the published files of 2019."""
    params = list(model.parameters())
    opt = torch.optim.Adagrad(params, lr=0.0)
    g = torch.Generator().manual_seed(iter_no)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g)
    opt.step()
    for p in params:
        p.grad = None
    state = {"module." + k: v for k, v in model.state_dict().items()}
    torch.save({"iter_no": iter_no, "model": state,
                "logger": {"step": [iter_no * 100], "train_bpc": [1.5],
                           "val_bpc": [1.6], "span_avg": [40.0],
                           "span_max": [float(model.cfg.attn_span)]},
                "optimizer": opt.state_dict(), "scheduler_iter": iter_no},
               path, _use_new_zipfile_serialization=not legacy)


def make_checkpoint(path, n_token, spans=((0.05, 0.3), (0.8, 0.02)),
                    attn_span=128, span_ramp=16, d_model=64, d_inner=128,
                    block_size=64, seed=0, dtype="F32", legacy=False,
                    past=()):
    """A random model of n_token symbols saved at path as the trainer
    saves it; returns the reference module (the stored weights).  past:
    heads (layer, h) whose scores favour the keys beyond their spans
    (favour_past())."""
    cfg = SpanConfig(n_token=n_token, n_layer=len(spans),
                     n_head=len(spans[0]), d_model=d_model, d_inner=d_inner,
                     attn_span=attn_span, span_ramp=span_ramp,
                     block_size=block_size)
    torch.manual_seed(seed)
    model = span_ref.AdaptiveSpanLM(cfg)
    randomize(model, spans, seed)
    if past:
        favour_past(model, past, seed=seed)
    round_weights(model, dtype)
    model.eval()
    save_checkpoint(model, path, legacy=legacy)
    return model


class SpanModel:
    """A built model: its reference module (the stored weights), the
    checkpoint, the corpus and the converted file."""

    def __init__(self, outdir, cfg, model, dataset, dtype, text, ids):
        self.dir, self.cfg, self.model = outdir, cfg, model
        self.dataset, self.dtype = dataset, dtype
        self.text, self.ids = text, ids
        self.checkpoint = os.path.join(outdir, "ckpt.pt")
        self.corpus = os.path.join(outdir, "train.txt")
        self.raw = os.path.join(outdir, "test.txt.raw")
        self.path = os.path.join(outdir, "m.bin")


def convert(sm, dtype="F32", out=None, extra=()):
    """models/convert.py on the checkpoint, as a user runs it; raise with
    its stderr."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    r = subprocess.run([PYTHON, CONVERT, "--weights", sm.checkpoint,
                        "--vocab-corpus", sm.corpus, "--dataset", sm.dataset,
                        "--span-ramp", str(sm.cfg.span_ramp), "--dtype", dtype,
                        "-o", out or sm.path, *extra],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"convert.py failed ({r.returncode}): "
                           f"{r.stderr.strip()}")


def build(outdir, dataset="text8", spans=((0.05, 0.3), (0.8, 0.02)),
          attn_span=128, span_ramp=16, d_model=64, d_inner=128,
          block_size=64, seed=0, dtype="F32", do_convert=True, past=()):
    """Build, save and convert a random model of len(spans) layers of
    len(spans[0]) heads (d_head d_model / heads) whose vocabulary is the
    one the original builds from the corpus made here; past: heads
    (layer, h) that favour the keys beyond their spans."""
    os.makedirs(outdir, exist_ok=True)
    raw = sample_text(dataset)
    split = len(raw) * 2 // 3
    train, test = raw[:split], raw[split:]
    prep = prepare_text8(train.decode()) if dataset == "text8" else \
        prepare_enwik8(train)
    with open(os.path.join(outdir, "train.txt"), "w",
              encoding="utf-8") as f:
        f.write(prep)
    with open(os.path.join(outdir, "test.txt.raw"), "wb") as f:
        f.write(test)
    syms = vocab.corpus_symbols(os.path.join(outdir, "train.txt"))
    index = {s: i for i, s in enumerate(syms)}
    # the test text's symbols, those the corpus lacks dropped
    if dataset == "text8":
        test = bytes(c for c in test if ("_" if c == 32 else chr(c))
                     in index)
        ids = [index["_" if c == " " else c] for c in test.decode()]
    else:
        test = bytes(b for b in test if b == 10 or str(b) in index)
        ids = [index["<eos>" if b == 10 else str(b)] for b in test]
    model = make_checkpoint(os.path.join(outdir, "ckpt.pt"), len(syms),
                            spans, attn_span, span_ramp, d_model, d_inner,
                            block_size, seed, dtype, past=past)
    sm = SpanModel(outdir, model.cfg, model, dataset, dtype, test, ids)
    if do_convert:
        convert(sm, dtype)
    return sm
