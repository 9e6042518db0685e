#!/usr/bin/python3
"""Check txlgen and txlgen.span_ref against the ORIGINAL adaptive-span code
(facebookresearch/adaptive-span; not run in CI).

  tools/check_adaptive_span.py --orig PATH/TO/adaptive-span \\
      [--txlgen build/cmd/txlgen] [--tol 1e-4] [--only NAME,...] [--keep DIR]

For every configuration below (the text8 and the enwik8 layout; spans
that the original trims to windows of 64 to attn_span and heads that end
inside their soft mask's ramp) it

  - prepares a corpus as the original's prep_text8.py / prep_enwik8.py
    write train.txt and test.txt (txlgen.span_model's sample text), and
    takes the test ids from the original's own data.Dictionary and
    _tokenize;
  - builds the original's TransformerSeq inside DataParallel (as its
    main.py: adaptive span with --adapt-span-cache, dropout 0), every
    parameter random (txlgen.span_model.randomize: peaked attention; or
    the original's own initialisation, "init" configurations) and the
    spans set per layer and head;
  - saves the checkpoint with its utils.save_checkpoint (its Adagrad
    with clipping, its Logger; "legacy" configurations in torch's format
    before 1.6, as the published files of 2019);
  - converts it: models/convert.py --weights ckpt.pt --vocab-corpus
    train.txt --dataset D --span-ramp R -o m.bin;
  - checks that txlgen tokenizes the raw test text into the Dictionary's
    ids (the original adds <eos> at the end of the file's last line: the
    raw text does not end with a newline, the last id is left out);
  - scores the raw text with txlgen --score test.raw --json --seg-len B
    (blocks) and --seg-len 1 (token by token), and compares every log-prob
    with the original's evaluation (trainer.full_eval's loop with a batch
    of 1: the zero cache, blocks of B, the last partial block skipped; its
    own full_eval must give their mean), and txlgen.span_ref likewise.

Prints max |diff| per configuration and run; exit status 0 if every
difference is within --tol, 1 otherwise.  The original code cannot be
committed here (CC-BY-NC): give its checkout with --orig; it is imported
unmodified (txlgen.original.SpanOriginal).
"""

import json
import os
import subprocess
import sys

import torch

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import random_model as mrm, span_model, span_ref
from txlgen.hparams import SpanConfig
from txlgen.original import (OriginalError, SpanOriginal, checker_args,
                             finish, only_names, work_folder)

ROOT = mrm.ROOT

# (name, dataset, spans per layer and head, attn_span, ramp, d_model,
# heads, block, options): random weights unless "init", zip format unless
# "legacy"
CONFIGS = [
    ("text8", "text8", [[0.02, 0.1, 0.0, 0.05], [0.3, 0.6, 0.15, 0.9],
                        [1.0, 0.01, 0.45, 0.2]], 256, 16, 128, 64, ""),
    ("enwik8", "enwik8", [[0.0, 0.05], [0.1, 0.2], [0.5, 0.02],
                          [0.95, 0.3]], 512, 32, 64, 64, ""),
    ("enwik8_legacy", "enwik8", [[0.06, 0.6], [0.3, 0.0]], 384, 32, 64, 48,
     "legacy"),
    ("text8_init", "text8", [[0.05, 0.5], [0.2, 0.0], [0.9, 0.12]], 256, 32,
     64, 32, "init"),
    # spans from 0.02 to 1.0 in every layer; then the same with head 0 of
    # layers 0 and 1 scoring the keys past their spans far above their
    # own (span_model.favour_past): their masked weights sum to 1e-8 or
    # less, and the division by that sum + 1e-8 leaves them short of 1
    ("enwik8_wide", "enwik8", [[0.02, 0.3, 0.6, 1.0], [0.02, 0.1, 0.25, 0.4],
                               [0.05, 0.15, 0.5, 0.9]], 256, 32, 128, 64,
     ""),
    ("enwik8_past", "enwik8", [[0.02, 0.3, 0.6, 1.0], [0.02, 0.1, 0.25, 0.4],
                               [0.05, 0.15, 0.5, 0.9]], 256, 32, 128, 64,
     "past"),
]


def txlgen_run(txlgen, *argv):
    r = subprocess.run([txlgen, *argv], capture_output=True, text=True,
                       env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    if r.returncode != 0:
        raise RuntimeError(f"txlgen {' '.join(argv)}: exit {r.returncode}: "
                           f"{r.stderr.strip()}")
    return r.stdout


def check_config(k, conf, orig, a, work):
    name, ds, spans, S, R, M, B, opts = conf
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    # the corpus: train.txt and test.txt as the prep scripts write them
    raw = span_model.sample_text(ds, n=12000, seed=k)
    cut = len(raw) * 3 // 4
    # (the test text without what train.txt lacks: the Dictionary would
    # fail on it)
    if ds == "text8":
        text = raw.decode()
        train = span_model.prepare_text8(text[:cut])
        have = set(train.split())
        test_raw = "".join(c for c in text[cut:]
                           if ("_" if c == " " else c) in have).strip()
        test = span_model.prepare_text8(test_raw)
        test_raw = test_raw.encode()
    else:
        train = span_model.prepare_enwik8(raw[:cut])
        have = set(train.split())
        test_raw = bytes(b for b in raw[cut:] if b == 10 or str(b) in have)
        test_raw = test_raw.rstrip(b"\n")
        test = span_model.prepare_enwik8(test_raw)
    paths = {n: os.path.join(d, n) for n in ("train.txt", "test.txt",
                                             "test.raw", "ckpt.pt", "m.bin")}
    for n, v in (("train.txt", train), ("test.txt", test)):
        with open(paths[n], "w", encoding="utf-8") as f:
            f.write(v)
    with open(paths["test.raw"], "wb") as f:
        f.write(test_raw)
    dic = orig.Dictionary(paths["train.txt"])
    ids = orig.tokenize(paths["test.txt"], dic.word2idx).tolist()
    cfg = SpanConfig(n_token=len(dic), n_layer=len(spans),
                     n_head=len(spans[0]), d_model=M, d_inner=2 * M,
                     attn_span=S, span_ramp=R, block_size=B)
    torch.manual_seed(k)
    model = orig.model(cfg)
    if "init" in opts:
        span_model.set_spans(model.module, spans)
    else:
        span_model.randomize(model.module, spans, seed=k)
    if "past" in opts:
        span_model.favour_past(model.module, [(0, 0), (1, 0)], seed=k,
                               cfg=cfg)
    orig.save_checkpoint(model, paths["ckpt.pt"], legacy="legacy" in opts)
    conv = subprocess.run(
        [mrm.PYTHON, mrm.CONVERT, "--weights", paths["ckpt.pt"],
         "--vocab-corpus", paths["train.txt"], "--dataset", ds,
         "--span-ramp", str(R), "-o", paths["m.bin"]],
        capture_output=True, text=True)
    if conv.returncode != 0:
        return [f"{name}: convert.py: {conv.stderr.strip()}"], {}

    failures, worst = [], {}
    # the ids: txlgen's of the raw text, the Dictionary's of test.txt
    got_ids = [int(x) for x in txlgen_run(a.txlgen, "--model", paths["m.bin"],
                                          "--tokenize", paths["test.raw"])
               .split()]
    same = got_ids == ids[:-1] and dic.idx2word[ids[-1]] == "<eos>"
    print(f"{name:<14} ids: {len(got_ids)} from the raw text, "
          f"{'equal to' if same else 'NOT EQUAL to'} the Dictionary's "
          "(but its final <eos>)")
    if not same:
        failures.append(f"{name}: ids differ from the Dictionary's")
    ids = ids[:-1]
    # span_ref from the same weights
    ref = span_ref.AdaptiveSpanLM(cfg)
    ref.load_state_dict({k2[len("module."):]: v for k2, v in
                         model.state_dict().items()})
    for seg in (B, 1):
        want, mean = orig.logprobs(model, ids, seg)
        n = len(want)
        own = -sum(want) / n
        if abs(own - mean) > 1e-5:
            failures.append(f"{name} seg {seg}: the loop's mean NLL {own} "
                            f"is not full_eval's {mean}")
        out = txlgen_run(a.txlgen, "--model", paths["m.bin"], "--score",
                         paths["test.raw"], "--json", "--seg-len", str(seg))
        got = [float(json.loads(line)["logprob"])
               for line in out.splitlines() if '"pos"' in line][:n]
        r = span_ref.score_ids(ref, ids, seg).tolist()[:n]
        dtxl = max(abs(x - y) for x, y in zip(got, want))
        dref = max(abs(x - y) for x, y in zip(r, want))
        flag = ""
        for who, dv in (("txlgen", dtxl), ("span_ref", dref)):
            worst[who] = max(worst.get(who, 0.0), dv)
            if dv > a.tol:
                flag += f"   <-- FAIL ({who})"
                failures.append(f"{name} seg {seg}: {who} max diff {dv:.3g}")
        print(f"{name:<14} seg {seg:>3}: {n} log-probs (full_eval mean NLL "
              f"{mean:.4f}), txlgen {dtxl:.2e}, span_ref {dref:.2e}{flag}")
    return failures, worst


def main():
    a = checker_args(__doc__, "a checkout of facebookresearch/adaptive-span"
                     ).parse_args()
    try:
        orig = SpanOriginal(os.path.abspath(a.orig))
    except OriginalError as e:
        sys.exit(f"check_adaptive_span.py: {e}")
    torch.set_num_threads(1)
    work = work_folder(a.keep, "txl-span-orig-")
    only = only_names("check_adaptive_span.py", a.only,
                      [c[0] for c in CONFIGS])
    failures, summary = [], []
    for k, conf in enumerate(CONFIGS):
        if only and conf[0] not in only:
            continue
        f, worst = check_config(k, conf, orig, a, work)
        failures += f
        summary.append((conf[0], worst))
    print(f"\nworst |log-prob difference| from the original "
          f"(tolerance {a.tol}):")
    for name, worst in summary:
        print(f"  {name:<14} " + "  ".join(f"{w} {v:.2e}" for w, v in
                                           sorted(worst.items())))
    for f in failures:
        print(f, file=sys.stderr)
    return finish(work, a.keep, failures)


if __name__ == "__main__":
    sys.exit(main())
