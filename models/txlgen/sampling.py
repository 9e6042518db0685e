"""Choose a model's recommended sampling settings by measurement.

  sampling.py --model M.bin --heldout VALID.txt --train TRAIN.txt
              [--txlgen PATH] [--samples 24] [--tokens 256] [--words 150]
              [--json OUT]

For each candidate setting, txlgen continues the same prompts (the first
40 words of paragraphs drawn at random from the held-out text) with the
same seeds, and the samples are compared with what the held-out text
itself says after each prompt: the rate of repeated word n-grams inside
one text (1 - distinct / all, n = 1 to 4, over the first --words words).
Loops ("the Labor Labor Labor") push the rates up, over-random sampling
pushes them below the text's, and also makes words that are no words
("willers"): the rate of words the training text never has (oov) is
compared with the held-out text's own.  The setting nearest the text
(the sum of absolute differences of rep2 to rep4 and of oov) is printed
last as the JSON object to store as the model's "recommended" metadata
(models/txlfile.py --set recommended=...).

Choose on validation text, never on the test split.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# the source tree's build, or (the package installed) txlgen on PATH
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TXLGEN = os.path.join(ROOT, "build", "cmd", "txlgen")
if not os.path.exists(TXLGEN):
    TXLGEN = "txlgen"

# (name, settings); every key given so that no default or earlier
# recommendation leaks in
BASE = dict(temp=0.8, top_k=40, top_p=0.95, min_p=0.05,
            repeat_penalty=1.0, repeat_last_n=64)
CANDIDATES = [
    ("greedy", dict(BASE, temp=0.0)),
    ("t0.7", dict(BASE, temp=0.7)),
    ("t0.8", dict(BASE)),
    ("t0.9", dict(BASE, temp=0.9)),
    ("t1.0", dict(BASE, temp=1.0)),
    ("t0.8 rp1.1", dict(BASE, repeat_penalty=1.1)),
    ("t0.8 rp1.2", dict(BASE, repeat_penalty=1.2)),
    ("t0.9 rp1.1", dict(BASE, temp=0.9, repeat_penalty=1.1)),
    ("t1.0 pure", dict(BASE, temp=1.0, top_k=0, top_p=1.0, min_p=0.0)),
]
NS = (1, 2, 3, 4)
PROMPT_WORDS = 40


def words(text):
    return re.findall(r"\w+|[^\w\s]", text.lower())


def rep_rates(ws):
    """1 - distinct/all word n-grams, for each n of NS."""
    out = []
    for n in NS:
        grams = [tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)]
        out.append(1 - len(set(grams)) / len(grams) if grams else 0.0)
    return out


def prompts(path, k, need, seed=1):
    """k (prompt, reference continuation) pairs from paragraph starts."""
    with open(path, encoding="utf-8") as f:
        paras = [p.strip() for p in f.read().split("\n\n")]
    text = "\n\n".join(paras)
    starts = [m.start() for m in re.finditer(r"(?:^|\n\n)(?=\S)", text)]
    rng = random.Random(seed)
    out = []
    for s in rng.sample(starts, len(starts)):
        toks = list(re.finditer(r"\S+", text[s:s + 20000]))
        if len(toks) < PROMPT_WORDS + need * 2:
            continue
        cut = s + toks[PROMPT_WORDS - 1].end()
        ref = text[cut:s + toks[-1].end()]
        if len(words(ref)) < need:
            continue
        out.append((text[s:cut].strip(), ref))
        if len(out) == k:
            break
    return out


def generate(txlgen, model, prompt, seed, n, settings):
    cmd = [txlgen, "-m", model, "-p", prompt, "-n", str(n), "--seed",
           str(seed), "--threads", "1"]
    for k, v in settings.items():
        cmd += ["--" + k.replace("_", "-"), str(v)]
    r = subprocess.run(cmd, capture_output=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"sampling.py: {' '.join(cmd)}: "
                 f"{r.stderr.decode(errors='replace').strip()}")
    return r.stdout.decode("utf-8", errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--heldout", required=True, help="validation text")
    ap.add_argument("--train", required=True,
                    help="training text (its words are the vocabulary)")
    ap.add_argument("--txlgen", default=TXLGEN)
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--words", type=int, default=150)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()

    with open(a.train, encoding="utf-8") as f:
        vocab = set(words(f.read()))

    def oov(ws):
        return sum(w not in vocab for w in ws) / max(1, len(ws))

    pairs = prompts(a.heldout, a.samples, a.words)
    ref_ws = [words(r)[:a.words] for _, r in pairs]
    ref = [rep_rates(w) for w in ref_ws]
    ref_mean = [sum(x[i] for x in ref) / len(ref) for i in range(len(NS))]
    ref_oov = sum(oov(w) for w in ref_ws) / len(ref_ws)
    head = "  ".join(f"rep{n}" for n in NS)
    print(f"{'setting':<12} {head}    oov  short  distance", flush=True)
    print(f"{'held-out':<12} " + "  ".join(f"{x:.3f}" for x in ref_mean) +
          f"  {ref_oov:.3f}")
    results = []
    for name, st in CANDIDATES:
        with ThreadPoolExecutor(a.jobs) as ex:
            texts = list(ex.map(
                lambda i: generate(a.txlgen, a.model, pairs[i][0], i + 1,
                                   a.tokens, st), range(len(pairs))))
        ws = [words(t)[:a.words] for t in texts]
        short = sum(len(w) < a.words for w in ws)
        rates = [rep_rates(w) for w in ws]
        mean = [sum(x[i] for x in rates) / len(rates)
                for i in range(len(NS))]
        o = sum(oov(w) for w in ws) / len(ws)
        dist = sum(abs(mean[i] - ref_mean[i]) for i in range(1, len(NS)))
        dist += abs(o - ref_oov)
        results.append(dict(name=name, settings=st, rep=mean, oov=o,
                            short=short, distance=dist, sample=texts[0]))
        print(f"{name:<12} " + "  ".join(f"{x:.3f}" for x in mean) +
              f"  {o:.3f}  {short:5d}  {dist:.3f}", flush=True)
    best = min((r for r in results if r["settings"]["temp"] > 0),
               key=lambda r: r["distance"])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(heldout=ref_mean, heldout_oov=ref_oov, ns=NS,
                           results=results,
                           best=best["name"]), f, indent=1)
    print(f"nearest the held-out text: {best['name']}")
    print(json.dumps(best["settings"]))
    return 0
