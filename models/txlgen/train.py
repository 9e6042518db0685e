"""Train a Transformer-XL language model (models/txlgen/txl_ref.py, any
attn_type, full or adaptive softmax) or an adaptive-span model
(--attn-type 4: txlgen/span_train.py) on text files and export it as a
txlgen model file.

  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 models/train.py \\
      --train data/train.txt --valid data/valid.txt --vocab-size 8000 \\
      --out runs/x --time-budget 60 --export m.bin

Training follows the original code (kimiyoung/transformer-xl): the token
stream is cut into --batch parallel streams (LMOrderedIterator), each step
trains on the next --seg-len tokens of every stream, and the memory of each
segment feeds the next one with its gradient stopped.  AdamW, linear warmup
then cosine decay, gradient-norm clipping, bfloat16 autocast (on the CPU
where it has AMX, or on a CUDA GPU with --device cuda).

Run with OMP_WAIT_POLICY=PASSIVE and without OPENBLAS_CORETYPE (both cost a
lot of speed on the CPUs this was written on).
"""

import argparse
import json
import math
import os
import random
import re
import sys
import time

import torch

from . import proto, span_ref, txlfile
from .conventions import (ADAPTIVE_SPAN, ATTN_KINDS, NO_MEMORY_KINDS,
                          REL_PARTIAL)
from .hparams import SpanConfig
from .span_train import SpanTrainLM
from .txl_ref import MemTransformerLM, TxlConfig, score_ids

# SentencePiece settings of txlgen's tokenizers (see models/README.md).
SPM_OPTIONS = dict(
    byte_fallback=True,                 # every UTF-8 input is representable
    normalization_rule_name="identity",  # decode(encode(t)) == t, exactly
    remove_extra_whitespaces=False,
    # txlgen tokenizes streams line by line; a dummy prefix would put a
    # space that is not in the text at the start of every line.
    add_dummy_prefix=False,
    max_sentence_length=100000,         # one paragraph per line in the corpus
    character_coverage=0.9999,
)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- tokens

def train_tokenizer(text_path, prefix, vocab_size, model_type):
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(
        input=text_path, model_prefix=prefix, vocab_size=vocab_size,
        model_type=model_type, num_threads=2, minloglevel=1, **SPM_OPTIONS)
    path = prefix + ".model"
    with open(path, "rb") as f:
        model = proto.spm_strip_paths(f.read())
    with open(path, "wb") as f:
        f.write(model)
    return path


def load_tokenizer(path):
    import sentencepiece as spm
    with open(path, "rb") as f:
        proto = f.read()
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto)
    return sp, proto


def read_text(path):
    with open(path, "rb") as f:
        raw = f.read()
    return raw.decode("utf-8"), len(raw)


def documents(text):
    """The addresses of a corpus file: corpus.sh joins them by one blank
    line, and paragraphs inside an address are single lines."""
    return text.split("\n\n")


def train_tail(text, fraction):
    """The most recent `fraction` of a chronological corpus, cut at an
    address boundary: the addresses from the first one that starts in the
    last `fraction` of the text's characters."""
    if fraction >= 1.0:
        return text
    docs = documents(text)
    cut, start = len(text) * (1.0 - fraction), 0
    for i, doc in enumerate(docs):
        if start >= cut:
            return "\n\n".join(docs[i:])
        start += len(doc) + 2
    return docs[-1]


# Typographic punctuation, as modern transcripts write it: an opening
# quote follows the start of a line, white space or an opening bracket or
# dash; every other quote closes (or is an apostrophe).
_OPEN_BEFORE = r"(^|(?<=[\s(\[{\u2014\u201c\u2018]))"


def typographic(doc):
    """One address rewritten with typographic punctuation: "..." becomes
    \u201c...\u201d, ' becomes \u2018 where it opens and \u2019
    (apostrophe, closing quote) elsewhere, and -- (with the spaces around
    it) becomes an unspaced em dash."""
    doc = re.sub(r" ?--+ ?", "\u2014", doc)
    doc = re.sub(_OPEN_BEFORE + '"', "\u201c", doc, flags=re.M)
    doc = doc.replace('"', "\u201d")
    doc = re.sub(_OPEN_BEFORE + "'", "\u2018", doc, flags=re.M)
    return doc.replace("'", "\u2019")


def augment_typographic(text, fraction, seed):
    """Rewrites a seeded random `fraction` of the addresses with
    typographic punctuation.  The older transcripts of the corpus are
    plain ASCII; later ones (and much text users bring) use \u2019 \u201c
    \u201d \u2014, which a model trained on ASCII only can spell with byte
    pieces but never learns to expect."""
    if fraction <= 0:
        return text
    rng = random.Random(seed)
    return "\n\n".join(typographic(d) if rng.random() < fraction else d
                         for d in documents(text))


def encode(sp, text):
    """Line by line, each line with its newline, as txlgen --score and
    spm_encode read files (with this tokenizer's settings it gives the same
    ids as encoding the whole text at once)."""
    ids = []
    for line in text.splitlines(keepends=True):
        ids.extend(sp.EncodeAsIds(line))
    return torch.tensor(ids, dtype=torch.long)


def batchify(ids, bsz):
    """The original LMOrderedIterator layout: [n_step, bsz], stream b is the
    b-th contiguous 1/bsz of the token stream."""
    n_step = ids.numel() // bsz
    return ids[:n_step * bsz].view(bsz, n_step).t().contiguous()


# ---------------------------------------------------------------- evaluation

def bits_per_byte(model, ids, nbytes, seg_len, mem_len):
    """The original eval.py protocol (txl_ref.score_ids; an adaptive-span
    model's: span_ref.score_ids) in float32: sum NLL / ln 2 / bytes of
    the text.  Returns (bpb, mean nll)."""
    if isinstance(model, span_ref.AdaptiveSpanLM):
        lp = span_ref.score_ids(model, ids, seg_len)
        nll = -lp.sum().item()
        return nll / math.log(2) / nbytes, nll / max(1, lp.numel())
    saved = model.mem_len, model.clamp_len, model.same_length
    try:
        lp = score_ids(model, ids, seg_len, mem_len=mem_len)
    finally:
        model.mem_len, model.clamp_len, model.same_length = saved
    nll = -lp.sum().item()
    return nll / math.log(2) / nbytes, nll / max(1, lp.numel())


# ---------------------------------------------------------------- schedule

def lr_at(a, step, progress):
    """Linear warmup over --warmup steps, then cosine decay to
    lr * min_lr_ratio as training progress (0..1) goes to 1."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    p = min(1.0, max(0.0, progress))
    return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) *
                   0.5 * (1 + math.cos(math.pi * p)))


def progress_of(a, step, train_time):
    """Fraction of the run done: by steps, or by training time when a time
    budget is given (whichever is further along)."""
    p = step / a.steps if a.steps else 0.0
    if a.time_budget:
        p = max(p, train_time / (a.time_budget * 60))
    return p


# ---------------------------------------------------------------- checkpoints

def load_checkpoint(path):
    """One of this program's own checkpoints (trusted: written by
    save_atomic below; they hold optimizer and RNG states besides
    tensors, which torch.load(weights_only=True) refuses)."""
    return torch.load(path, map_location="cpu", weights_only=False)


def load_init(path):
    """The weights to fine-tune from: a checkpoint of this program, or a
    txlgen model file (its hyperparameters must match the run's)."""
    with open(path, "rb") as f:
        magic = f.read(16)
    if magic[:2] == b"PK" or magic[:1] == b"\x80":   # zip or pickle
        return load_checkpoint(path)
    meta, tensors = txlfile.read(path)
    state = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()
             if k != "tokenizer.model"}
    if meta.get("tie_weight") == "true":
        state["crit.out_layers.0.weight"] = \
            state["word_emb.emb_layers.0.weight"]
    return {"model": state}


def save_atomic(obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def config_of(ckpt):
    """The model's configuration a checkpoint records."""
    d = ckpt["config"]
    return SpanConfig(**d) if "attn_span" in d else TxlConfig.from_dict(d)


def new_model(cfg, a=None):
    """The model of a configuration; a: train.py's options (dropout and
    the span's training settings), None for evaluation."""
    if isinstance(cfg, TxlConfig):
        return MemTransformerLM(cfg)
    if a is None:
        return SpanTrainLM(cfg)
    return SpanTrainLM(cfg, a.dropout, a.dropatt, a.span_init, a.span_loss)


def export(ckpt, path, dtype, description=None):
    from .convert import convert
    cfg = config_of(ckpt)
    extra = {"description": description} if description else None
    tok = proto.spm_strip_paths(ckpt["tokenizer"])
    if isinstance(cfg, SpanConfig):
        from . import span_convert
        tensors = span_convert.span_tensors(cfg, ckpt["model"], path)
        txlfile.write(path, cfg.hparams(), tensors, tok, dtype=dtype,
                      extra=extra, prog="train.py")
        return
    convert(cfg, ckpt["model"], tok, path, dtype=dtype, extra=extra,
            prog="train.py")


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_argument_group("data")
    g.add_argument("--train", help="training text (UTF-8)")
    g.add_argument("--valid", help="validation text (UTF-8)")
    g.add_argument("--tokenizer", help="existing SentencePiece .model; "
                   "without it one is trained on --train into --out")
    g.add_argument("--train-tail", type=float, default=1.0,
                   help="train on the most recent fraction of --train "
                   "(a chronological corpus), cut at an address boundary")
    g.add_argument("--typographic", type=float, default=0.0,
                   help="fraction of the training addresses rewritten with "
                   "typographic quotes, apostrophes and dashes (seeded)")
    g.add_argument("--vocab-size", type=int, default=8000)
    g.add_argument("--spm-type", default="unigram",
                   choices=["unigram", "bpe"])
    g = ap.add_argument_group("model")
    g.add_argument("--layers", type=int, default=6)
    g.add_argument("--d-model", type=int, default=384)
    g.add_argument("--heads", type=int, default=6)
    g.add_argument("--d-head", type=int, default=None,
                   help="default d_model / heads")
    g.add_argument("--d-inner", type=int, default=1536)
    g.add_argument("--seg-len", type=int, default=128)
    g.add_argument("--mem-len", type=int, default=None,
                   help="default 128; 0 (and only 0) for --attn-type 2, 3")
    g.add_argument("--eval-mem-len", type=int, default=None,
                   help="memory for evaluation and the exported model "
                   "(default --mem-len)")
    g.add_argument("--dropout", type=float, default=0.1)
    g.add_argument("--dropatt", type=float, default=0.0)
    g.add_argument("--untie-r", action="store_true")
    g.add_argument("--attn-type", type=int, default=REL_PARTIAL,
                   choices=[k.number for k in ATTN_KINDS],
                   help="0 relative (Transformer-XL, default), 1 learnable "
                   "relative (Shaw et al.), 2 absolute sinusoids, 3 learned "
                   "absolute positions (2 and 3 without memory), 4 "
                   "adaptive span (Sukhbaatar et al.; its memory is "
                   "--attn-span)")
    g.add_argument("--d-embed", type=int, default=None,
                   help="embedding size (default d_model; else projected)")
    g.add_argument("--cutoffs", type=_int_list, default=[],
                   help="adaptive input and softmax: comma-separated token "
                   "ids where the tail clusters start (a unigram "
                   "SentencePiece numbers pieces by score, roughly the most "
                   "frequent first)")
    g.add_argument("--div-val", type=int, default=1,
                   help="cluster i embeds in d_embed / div_val**i")
    g.add_argument("--tie-projs", type=_bool_list, default=None,
                   help="per cluster, comma-separated: share the output "
                   "projection with the input's (default false for the "
                   "first cluster, true for the others, as the original "
                   "for WikiText-103)")
    g = ap.add_argument_group("adaptive span (--attn-type 4)")
    for flag, kind, default, what in (
            ("--attn-span", int, 512, "the longest span (key_pe's "
             "columns), the positions each layer keeps"),
            ("--span-ramp", int, 32, "the soft mask's ramp"),
            ("--span-init", float, 0.0, "every head's span at the start, "
             "a fraction of --attn-span"),
            ("--span-loss", float, 0.0, "c in the loss's c * attn_span * "
             "mean span per layer")):
        g.add_argument(flag, type=kind, default=default,
                       help=f"{what} (default {default})")
    g = ap.add_argument_group("training")
    g.add_argument("--batch", type=int, default=16)
    g.add_argument("--lr", type=float, default=1e-3)
    g.add_argument("--min-lr-ratio", type=float, default=0.0)
    g.add_argument("--weight-decay", type=float, default=0.01)
    g.add_argument("--warmup", type=int, default=200)
    g.add_argument("--steps", type=int, default=0)
    g.add_argument("--epochs", type=float, default=0,
                   help="steps = epochs x segments per epoch")
    g.add_argument("--time-budget", type=float, default=0,
                   help="minutes of training (evaluation excluded); the "
                   "cosine decay follows elapsed time")
    g.add_argument("--clip", type=float, default=0.25)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--dtype-train", default="bf16", choices=["bf16", "f32"],
                   help="autocast type of the forward pass")
    g.add_argument("--threads", type=int, default=2)
    g.add_argument("--device", default="cpu",
                   help="cpu, cuda or cuda:N (training and evaluation)")
    g = ap.add_argument_group("evaluation and output")
    g.add_argument("--out", required=True, help="run directory")
    g.add_argument("--eval-every", type=int, default=500,
                   help="steps between validations (0: only at the end)")
    g.add_argument("--eval-tokens", type=int, default=20000,
                   help="validation prefix scored every --eval-every steps "
                   "(0: all); the final evaluation uses all of it")
    g.add_argument("--save-every", type=int, default=250)
    g.add_argument("--log-every", type=int, default=20)
    g.add_argument("--stop-at", type=int, default=0,
                   help="stop after this step as if interrupted "
                   "(checkpointed, schedule unchanged)")
    g.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its last.pt")
    g.add_argument("--init", help="checkpoint or txlgen model file to start "
                   "from (fine-tuning: "
                   "weights only, new optimizer and schedule)")
    g.add_argument("--export", help="write the best (else last) model "
                   "to this txlgen model file at the end")
    g.add_argument("--export-only", action="store_true",
                   help="only export (and evaluate) the checkpoint in --out")
    g.add_argument("--dtype", default="F32", choices=txlfile.DTYPES,
                   type=txlfile.dtype_arg,
                   help="storage type of the exported weight matrices "
                   "(models/txlfile.py says which are compact)")
    g.add_argument("--description", default=None)
    a = ap.parse_args(argv)
    if a.attn_type == ADAPTIVE_SPAN:
        if a.mem_len or a.eval_mem_len or a.cutoffs or a.d_embed or \
                a.untie_r or a.d_head not in (None, a.d_model // a.heads):
            ap.error("--attn-type 4 has no --mem-len (its memory is "
                     "--attn-span), --cutoffs, --d-embed, --untie-r, nor a "
                     "--d-head other than d_model / heads")
        if a.attn_span < 1 or a.span_ramp < 1 or not 0 <= a.span_init <= 1:
            ap.error("--attn-span and --span-ramp must be positive, "
                     "--span-init in [0, 1]")
        a.mem_len = 0
    if a.mem_len is None:
        a.mem_len = 0 if a.attn_type in NO_MEMORY_KINDS else 128
    if a.attn_type in NO_MEMORY_KINDS and (a.mem_len or a.eval_mem_len):
        ap.error(f"--attn-type {a.attn_type} trains and runs without memory: "
                 "give --mem-len 0")
    return a


def _int_list(s):
    return [int(x) for x in s.split(",") if x.strip()]


def _bool_list(s):
    words = {"1": True, "true": True, "0": False, "false": False}
    try:
        return [words[x.strip().lower()] for x in s.split(",")]
    except KeyError:
        raise argparse.ArgumentTypeError(f"not booleans: {s!r}")


def build_model(a, n_token):
    if getattr(a, "attn_type", REL_PARTIAL) == ADAPTIVE_SPAN:
        return SpanConfig(n_token=n_token, n_layer=a.layers,
                          n_head=a.heads, d_model=a.d_model,
                          d_inner=a.d_inner, attn_span=a.attn_span,
                          span_ramp=a.span_ramp, block_size=a.seg_len)
    # getattr: checkpoints written before these options lack them.
    cutoffs = getattr(a, "cutoffs", [])
    tie_projs = getattr(a, "tie_projs", None)
    if tie_projs is None:
        tie_projs = [False] + [True] * len(cutoffs)
    # attn_type 1 and 3: position tables of seg_len + mem_len rows, the
    # distances training sees (the original's max_klen), whatever
    # --eval-mem-len is.
    cfg = TxlConfig(n_token=n_token, n_layer=a.layers, n_head=a.heads,
                    d_model=a.d_model, d_head=a.d_head or a.d_model // a.heads,
                    d_inner=a.d_inner, tgt_len=a.seg_len,
                    mem_len=a.eval_mem_len or a.mem_len, untie_r=a.untie_r,
                    dropout=a.dropout, dropatt=a.dropatt,
                    attn_type=getattr(a, "attn_type", REL_PARTIAL),
                    d_embed=getattr(a, "d_embed", None), cutoffs=cutoffs,
                    div_val=getattr(a, "div_val", 1), tie_projs=tie_projs,
                    max_klen=a.seg_len + a.mem_len)
    try:
        cfg.check_supported()
    except ValueError as e:
        sys.exit(f"train.py: {e}")
    return cfg


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    last_path = os.path.join(a.out, "last.pt")
    best_path = os.path.join(a.out, "best.pt")

    if a.export_only:
        export_best(a, best_path, last_path)
        return 0

    ckpt = None
    if a.resume:
        ckpt = load_checkpoint(last_path)
        saved = ckpt["args"]
        # The run's settings come from the checkpoint; only where to stop,
        # how often to log/save and what to export may change.
        keep = {k: getattr(a, k) for k in ("stop_at", "export", "dtype",
                                           "description", "threads",
                                           "device", "log_every",
                                           "save_every")}
        # A new length (--steps, --epochs or --time-budget) replaces the
        # saved one; the schedule then follows the new length.
        if a.steps or a.epochs or a.time_budget:
            keep.update(steps=a.steps, epochs=a.epochs,
                        time_budget=a.time_budget)
        a = argparse.Namespace(**{**saved, **keep, "resume": True})
        log(f"resuming {last_path} at step {ckpt['step']}")

    # Tokenizer.
    if a.tokenizer is None:
        a.tokenizer = train_tokenizer(a.train, os.path.join(a.out, "spm"),
                                      a.vocab_size, a.spm_type)
        log(f"trained tokenizer {a.tokenizer}")
    sp, proto = load_tokenizer(a.tokenizer)
    if ckpt is not None:
        proto = ckpt["tokenizer"]
        sp.LoadFromSerializedProto(proto)

    text, _ = read_text(a.train)
    # getattr: checkpoints written before these options lack them.
    text = train_tail(text, getattr(a, "train_tail", 1.0))
    text = augment_typographic(text, getattr(a, "typographic", 0.0), a.seed)
    device = torch.device(getattr(a, "device", "cpu"))
    data = batchify(encode(sp, text), a.batch).to(device)
    del text
    n_step = data.size(0)
    seg_per_epoch = math.ceil((n_step - 1) / a.seg_len)
    if a.epochs and not a.steps:
        a.steps = int(a.epochs * seg_per_epoch)
    if not a.steps and not a.time_budget:
        sys.exit("train.py: give --steps, --epochs or --time-budget")
    valid = None
    if a.valid:
        vtext, vbytes = read_text(a.valid)
        vids = encode(sp, vtext)
        vpre = vids if a.eval_tokens <= 0 else vids[:a.eval_tokens]
        # Bytes of the prefix: the decoded prefix's UTF-8 length.
        pbytes = vbytes if vpre.numel() == vids.numel() else \
            len(sp.DecodeIds(vpre.tolist()).encode("utf-8"))
        valid = (vpre, pbytes)

    torch.manual_seed(a.seed)
    random.seed(a.seed)
    cfg = build_model(a, sp.GetPieceSize())
    model = new_model(cfg, a)
    model.init_weights(generator=torch.Generator().manual_seed(a.seed))
    model.to(device)
    nparam = sum(p.numel() for p in model.parameters())
    log(f"model: {nparam / 1e6:.2f}M parameters, {cfg.n_layer} layers, "
        + (f"attn_span {cfg.attn_span}, " if isinstance(cfg, SpanConfig)
           else "") +
        f"d_model {cfg.d_model}, {cfg.n_head} heads x {cfg.d_head}, "
        f"d_inner {cfg.d_inner}, vocab {cfg.n_token}; train "
        f"{data.numel()} tokens = {n_step} x {a.batch} streams, "
        f"{seg_per_epoch} segments per epoch")

    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() < 2 or "norm" in name or "bias" in name or
         name.endswith(("key_pe", "current_val")) else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.98), eps=1e-8)

    step, pos, epoch, train_time, best = 0, 0, 0, 0.0, float("inf")
    mems = None
    if a.init and ckpt is None:
        init = load_init(a.init)
        # a model file holds no buffers computed from the shape
        # (pos_emb.inv_freq): those keep the values the model was built with
        missing, unexpected = model.load_state_dict(init["model"],
                                                    strict=False)
        missing = set(missing) - {n for n, _ in model.named_buffers()}
        if missing or unexpected:
            sys.exit("train.py: %s: does not fit this shape (missing %s, "
                     "unexpected %s)" % (a.init, sorted(missing),
                                         sorted(unexpected)))
        log(f"initialized from {a.init}")
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        step, pos, epoch = ckpt["step"], ckpt["pos"], ckpt["epoch"]
        train_time, best = ckpt["train_time"], ckpt["best_bpb"]
        mems = ckpt["mems"]
        if mems is not None:
            mems = [m.to(device) for m in mems]
        torch.set_rng_state(ckpt["rng"]["torch"])
        if device.type == "cuda" and "cuda" in ckpt["rng"]:
            torch.cuda.set_rng_state(ckpt["rng"]["cuda"], device)
        random.setstate(ckpt["rng"]["python"])

    def checkpoint(resume=True):
        """What --resume needs (last.pt), or what --export-only and --init
        read (best.pt, resume False: the model alone, no optimizer,
        memory or random states)."""
        ck = {"model": model.state_dict(), "config": cfg.__dict__.copy(),
              "tokenizer": proto, "args": vars(a), "step": step,
              "best_bpb": best}
        if not resume:
            return ck
        # each memory a copy of its own: the slice update_mems keeps is
        # a view of the segment's whole states, which torch.save would
        # write whole (seg_len + mem_len rows of every layer)
        ck.update(optimizer=opt.state_dict(), pos=pos, epoch=epoch,
                  mems=None if mems is None else [m.clone() for m in mems],
                  train_time=train_time,
                  rng={"torch": torch.get_rng_state(),
                       "python": random.getstate(),
                       **({"cuda": torch.cuda.get_rng_state(device)}
                          if device.type == "cuda" else {})})
        return ck

    jlog = open(os.path.join(a.out, "train_log.jsonl"), "a")
    autocast = torch.autocast(device.type, dtype=torch.bfloat16,
                              enabled=a.dtype_train == "bf16")
    model.train()
    model.mem_len = a.mem_len
    t_log, tok_log, loss_sum, loss_n = time.time(), 0, 0.0, 0
    while True:
        progress = progress_of(a, step, train_time)
        if progress >= 1.0 or (a.stop_at and step >= a.stop_at):
            break
        t0 = time.time()
        if pos >= n_step - 1:              # next epoch: restart the streams
            pos, epoch, mems = 0, epoch + 1, None
        seq = min(a.seg_len, n_step - 1 - pos)
        x, y = data[pos:pos + seq], data[pos + 1:pos + 1 + seq]
        lr = lr_at(a, step, progress)
        for g in opt.param_groups:
            g["lr"] = lr
        with autocast:
            nll, mems = model.nll(x, y, mems)
            loss = nll.mean()
            if isinstance(model, SpanTrainLM):
                loss = loss + model.aux_loss()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        if isinstance(model, SpanTrainLM):
            model.clamp_spans()
        pos += seq
        step += 1
        dt = time.time() - t0
        train_time += dt
        loss_sum += loss.item()
        loss_n += 1
        tok_log += seq * a.batch
        jlog.write(json.dumps({"step": step, "loss": loss.item(),
                               "lr": lr}) + "\n")
        if step % a.log_every == 0:
            now = time.time()
            tps = tok_log / (now - t_log)
            p = progress_of(a, step, train_time)
            left = train_time * (1 - p) / p if p > 0 else 0
            log(f"step {step} epoch {epoch} loss {loss_sum / loss_n:.4f} "
                f"lr {lr:.2e} gnorm {gnorm:.2f} {tps:.0f} tok/s "
                f"elapsed {train_time / 60:.1f}m left {left / 60:.1f}m")
            jlog.flush()
            t_log, tok_log, loss_sum, loss_n = now, 0, 0.0, 0
        improved = False
        if valid is not None and a.eval_every and step % a.eval_every == 0:
            te = time.time()
            bpb, _ = bits_per_byte(model, valid[0], valid[1], a.seg_len,
                                   a.eval_mem_len or a.mem_len)
            model.train()
            model.mem_len = a.mem_len
            improved = bpb < best
            best = min(best, bpb)
            log(f"step {step} valid bpb {bpb:.4f} (best {best:.4f}) "
                f"[{time.time() - te:.0f}s]")
            jlog.write(json.dumps({"step": step, "valid_bpb": bpb}) + "\n")
            t_log = time.time()
        if improved:
            save_atomic(checkpoint(resume=False), best_path)
        if step % a.save_every == 0 or improved:
            save_atomic(checkpoint(), last_path)
    last_evaluated = a.eval_every and step % a.eval_every == 0
    if valid is not None and not last_evaluated and not (
            a.stop_at and step >= a.stop_at):
        # The last step counts too: the run may end between evaluations.
        bpb, _ = bits_per_byte(model, valid[0], valid[1], a.seg_len,
                               a.eval_mem_len or a.mem_len)
        log(f"step {step} valid bpb {bpb:.4f} (best {min(best, bpb):.4f})")
        jlog.write(json.dumps({"step": step, "valid_bpb": bpb}) + "\n")
        if bpb < best:
            best = bpb
            save_atomic(checkpoint(resume=False), best_path)
    save_atomic(checkpoint(), last_path)
    jlog.close()
    log(f"stopped at step {step}, {train_time / 60:.1f} min of training")
    if a.stop_at and step >= a.stop_at and progress_of(a, step,
                                                       train_time) < 1:
        return 0
    if valid is None:
        save_atomic(checkpoint(resume=False), best_path)
    export_best(a, best_path, last_path, a.seg_len, device)
    return 0


def export_best(a, best_path, last_path, seg_len=None, device="cpu"):
    """--export and --valid of the best checkpoint (the last where there
    is no best), evaluated with segments of @seg_len (the checkpoint's
    tgt_len if None)."""
    path = best_path if os.path.exists(best_path) else last_path
    ckpt = load_checkpoint(path)
    if a.export:
        export(ckpt, a.export, a.dtype, a.description)
        log(f"exported {path} (step {ckpt['step']}) to {a.export} "
            f"({txlfile.wrote(a.export, a.dtype)})")
    if a.valid:
        final_eval(ckpt, a.valid, seg_len or ckpt["config"]["tgt_len"],
                   device)


def final_eval(ckpt, valid_path, seg_len, device="cpu"):
    """Bits per byte of the whole file, float32, like txlgen --score."""
    sp, _ = load_tokenizer_proto(ckpt["tokenizer"])
    cfg = config_of(ckpt)
    if isinstance(cfg, TxlConfig):
        cfg.dropout = cfg.dropatt = 0.0
    model = new_model(cfg)
    model.load_state_dict(ckpt["model"])
    model.to(device)
    text, nbytes = read_text(valid_path)
    bpb, nll = bits_per_byte(model, encode(sp, text), nbytes, seg_len,
                             getattr(cfg, "mem_len", 0))
    log(f"{valid_path}: step {ckpt['step']} bits per byte {bpb:.4f}, "
        f"mean nll {nll:.4f}, ppl {math.exp(nll):.2f}")
    return bpb


def load_tokenizer_proto(proto):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto)
    return sp, proto
