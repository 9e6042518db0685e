#!/usr/bin/python3
"""Check that txlgen runs checkpoints made by the ORIGINAL Transformer-XL
code as that code does (not run in CI).

  tools/check_checkpoints.py --orig PATH/TO/transformer-xl \\
      [--txlgen build/cmd/txlgen] [--test-spm build/tests/test-spm]
      [--tol 1e-4] [--keep DIR]

For small word-level (wt103, ptb, lm1b) and character-level (text8, enwik8)
corpora written in the original datasets' layouts (train/valid/test.txt;
text8 made by the repository's own prep_text8.py from a text8.zip; enwik8
as getdata.sh's prep_enwik8.py writes it: each byte's decimal value, a
newline for a newline), it runs the original pytorch/train.py for a few
steps, which writes the whole-model model.pt (torch.save(model)) and the
corpus cache cache.pt, exactly as a user gets them.  wt103 and lm1b are
built as they were published, with adaptive input and softmax (--adaptive
--div_val 4; train.py's cutoffs, written for the full vocabularies, are
replaced by small ones in its source as it is run); a wt103 model
without them too.  From each model it
also writes a Hugging Face-layout directory (config.json with HF's keys,
HF's parameter names with per-layer relative biases (untie_r), vocab.pkl
or vocab.bin as HF's tokenizer pickles its __dict__; pytorch_model.bin in
the legacy torch.save format, or model.safetensors) and a bare state_dict.
Each form is converted with models/convert.py, the user's commands:

  convert.py --weights model.pt --vocab cache.pt -o m.bin
  convert.py --weights HFDIR [--dataset text8] -o m.bin
  convert.py --weights state.pt --config CFG.json --vocab cache.pt -o m.bin

Then, on raw text (not the prepared layout), for several run-time
settings, `txlgen --score RAW --json` must give
  - the ids the original Vocab gives (encode_file of the text in the
    dataset's layout, with the dataset's add_eos), and
  - every per-token log-prob within --tol of the original model's own
    evaluation of those ids (eval.py's protocol: segments of tgt_len,
    memory carried, model.reset_length, same_length, clamp_len);
generation from a prompt as a user types it, greedy and sampled, must
give every token the original model's log-prob (and greedy its most
likely token), and print text that the original Vocab reads back as the
ids generated; and txl_detokenize (through tests/test-spm) of txlgen's ids of each line
must give the text as the original joins the symbols (word level: words
joined by a space, <eos> a newline; text8: '_' a space; enwik8: the
bytes).  The raw text has words the vocabulary lacks: the datasets write
<unk> for them, as txlgen does; the original Vocab of wt103 and ptb has
no unk_idx and asserts, so unk_idx is set to <unk>'s id on it (as Hugging
Face's port does) before encoding.  A pickle that would run a command
is refused by convert.py.
Exit status 0 if everything holds, 1 otherwise.

The original code is run from its own folder, unmodified (put on sys.path
in a child process; torch.version.cuda is set first because
utils/proj_adaptive_softmax.py reads it at import time), and imported
here as txlgen.original does.
"""

import collections
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import zipfile

import torch

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import checkpoint, hf_ref, original, txl_ref
from txlgen.conventions import LAYER_NORM_EPS, REL_PARTIAL

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ENV = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")

# Runs the original train.py from its folder, unmodified but for the
# literal replacements given as JSON (the adaptive softmax's cutoffs, which
# train.py hard-codes for the full vocabularies).
RUNNER = """
import json, os, sys, warnings, torch
warnings.filterwarnings("ignore")
if torch.version.cuda is None:
    torch.version.cuda = "11.0"
replace, script = json.loads(sys.argv[1]), sys.argv[2]
sys.argv = sys.argv[2:]
os.chdir(os.path.dirname(script))
sys.path.insert(0, os.path.dirname(script))
src = open(script).read()
for old, new in replace:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
exec(compile(src, script, "exec"), {"__name__": "__main__",
                                    "__file__": script})
"""

# data_utils.get_lm_corpus(DATA, DATASET): writes DATA/cache.pt
CACHE = """
import os, sys
sys.path.insert(0, sys.argv[1])
os.chdir(sys.argv[1])
import data_utils
data_utils.get_lm_corpus(sys.argv[2], sys.argv[3])
"""

WORDS = ("the of and in to a was is for on as with by he at from his that "
         "it an were which are this be first also new had one two city "
         "game after when during season released film album war = @-@ , "
         ". ( ) ; : ' \" <unk> 1 2 3 @,@ @.@ 000 <unk>").split()
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def wt_lines(rng, n, lower=False):
    out = [" \n"]
    for i in range(n):
        if rng.random() < 0.1:
            out.append(" \n")
            continue
        if rng.random() < 0.1:
            w = " = " + " ".join(rng.choice(WORDS[:30]) for _ in range(3))
            out.append(w + " = \n")
            continue
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 15))]
        if lower:
            words = [w for w in words if w not in ("=",)]
        out.append(" " + " ".join(words) + " \n")
    return "".join(out)


def char_text(rng, n, alphabet):
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
             for _ in range(60)]
    return " ".join(rng.choice(words) for _ in range(n))


def prep_enwik8(data):
    """getdata.sh's prep_enwik8.py (awd-lstm-lm): each byte as its decimal
    value between spaces, a newline byte as a newline."""
    return " ".join(str(c) if c != ord("\n") else "\n" for c in data)


# ---------------------------------------------------------------------------
# Datasets in the original layouts

def make_wt(d, rng, dataset):
    os.makedirs(d, exist_ok=True)
    lower = dataset == "ptb"
    for fn, n in (("train.txt", 400), ("valid.txt", 40), ("test.txt", 40)):
        with open(os.path.join(d, fn), "w") as f:
            f.write(wt_lines(rng, n, lower))


def make_lm1b(d, rng):
    """One Billion Word's layout: training shards, valid/test, and the
    vocabulary file (<S>, </S>, <UNK> first) that its Vocab reads."""
    shards = os.path.join(
        d, "1-billion-word-language-modeling-benchmark-r13output",
        "training-monolingual.tokenized.shuffled")
    os.makedirs(shards, exist_ok=True)

    def sentences(n):
        return "".join(" ".join(rng.choice(WORDS[:40]) for _ in
                                range(rng.randint(1, 12))) + "\n"
                       for _ in range(n))
    for i in range(2):
        with open(os.path.join(shards, f"news.en-0000{i}-of-00100"),
                  "w") as f:
            f.write(sentences(300))
    for fn in ("valid.txt", "test.txt"):
        with open(os.path.join(d, fn), "w") as f:
            f.write(sentences(40))
    counts = collections.Counter(w for w in WORDS[:36])
    with open(os.path.join(d, "1b_word_vocab.txt"), "w") as f:
        for w in ["<S>", "</S>", "<UNK>"] + [w for w, _ in
                                             counts.most_common()]:
            f.write(f"{w} 1\n")


def make_text8(d, rng, orig):
    os.makedirs(d, exist_ok=True)
    text = char_text(rng, 6000, LETTERS)
    with zipfile.ZipFile(os.path.join(d, "text8.zip"), "w") as z:
        z.writestr("text8", " " + text)
    # the repository's prep script, with its 5,000,000-character test and
    # valid splits made to fit the small text
    src = open(os.path.join(orig, "prep_text8.py")).read()
    src = src.replace("5000000", "3000")
    subprocess.run([sys.executable, "-c", src], cwd=d, check=True, env=ENV,
                   capture_output=True)


def make_enwik8(d, rng):
    os.makedirs(d, exist_ok=True)
    alphabet = LETTERS + "ABCDEFG0123<>/=&;[]|'" + "é€😀ü"
    lines = [char_text(rng, rng.randint(1, 40), alphabet)
             for _ in range(500)]
    data = "\n".join(lines).encode()
    k = len(data) // 10
    for fn, part in (("train.txt", data[:-2 * k]),
                     ("valid.txt", data[-2 * k:-k]),
                     ("test.txt", data[-k:])):
        with open(os.path.join(d, fn), "w") as f:
            f.write(prep_enwik8(part))


# (name, dataset, train.py options); wt103 and lm1b as they were
# published: adaptive input and softmax, div_val 4, with train.py's
# cutoffs scaled down to the small vocabularies (CUTOFFS)
MODELS = [
    ("wt103", "wt103", "--n_layer 2 --d_model 64 --n_head 2 --d_head 32 "
     "--d_inner 96 --adaptive --div_val 4 --tgt_len 8 --mem_len 8 "
     "--eval_tgt_len 8"),
    ("wt103-plain", "wt103", "--n_layer 2 --d_model 32 --n_head 2 "
     "--d_head 16 --d_inner 64 --d_embed 24 --tgt_len 8 --mem_len 8 "
     "--eval_tgt_len 8"),
    ("ptb", "ptb", "--n_layer 2 --d_model 32 --n_head 4 --d_head 8 "
     "--d_inner 48 --pre_lnorm --tgt_len 6 --mem_len 12 "
     "--eval_tgt_len 6"),
    ("lm1b", "lm1b", "--n_layer 2 --d_model 64 --n_head 2 --d_head 32 "
     "--d_inner 96 --adaptive --div_val 4 --tgt_len 8 --mem_len 8 "
     "--eval_tgt_len 8"),
    ("text8", "text8", "--n_layer 2 --d_model 32 --n_head 2 --d_head 16 "
     "--d_inner 64 --not_tied --tgt_len 16 --mem_len 16 "
     "--eval_tgt_len 16 --same_length --clamp_len 12"),
    ("enwik8", "enwik8", "--n_layer 3 --d_model 32 --n_head 2 --d_head 16 "
     "--d_inner 64 --tgt_len 12 --mem_len 12 --eval_tgt_len 12"),
]

CUTOFFS = {"wt103": [["cutoffs = [20000, 40000, 200000]",
                      "cutoffs = [6, 14, 30]"]],
           "lm1b": [["cutoffs = [60000, 100000, 640000]",
                     "cutoffs = [5, 12, 30]"]]}

# prompts as a user types them
PROMPTS = {"wt103": " = the city = \n the album was released in", "ptb":
           "The city was", "lm1b": "the game was", "text8":
           "the first city", "enwik8": "<title>ab"}

# run-time settings (seg_len, mem_len, same_length, clamp_len); None =
# the model's
SETTINGS = [(None, None, None, None), (1, 20, False, -1), (5, 0, False, -1),
            (7, 24, True, 10)]


def raw_text(name, rng):
    """Text as a user has it, and the same text in the dataset's layout."""
    if name in ("wt103", "wt103-plain", "ptb"):
        text = wt_lines(rng, 25)
        if name == "ptb":        # upper case, which ptb's Vocab lowers
            text = text.replace(" the ", " The ").replace(" city", " CITY")
        text += " unseenword another_unseen the\n"
        return text.encode(), text
    if name == "lm1b":
        text = "".join(" ".join(rng.choice(WORDS[:40]) for _ in
                                range(rng.randint(1, 12))) + "\n"
                       for _ in range(20))
        return text.encode(), text
    if name == "text8":
        text = char_text(rng, 120, LETTERS + "QZX")
        return text.encode(), " ".join("_" if c == " " else c
                                       for c in text.strip())
    lines = [char_text(rng, rng.randint(1, 12), LETTERS + "é€<>/")
             for _ in range(12)]
    data = "\n".join(lines).encode()
    return data, prep_enwik8(data)


# ---------------------------------------------------------------------------
# Other forms of the same model

def original_hparams(model):
    """The hyperparameters of the original's model object, read from its
    attributes and from which of its parameters are shared."""
    emb, crit = model.word_emb, model.crit
    tie_projs = []
    for i in range(len(crit.cutoffs)):
        p = crit.out_projs[i] if i < len(crit.out_projs) else None
        e = emb.emb_projs[0 if emb.div_val == 1 else i] \
            if len(emb.emb_projs) else None
        tie_projs.append(p is not None and p is e)
    return {"n_token": model.n_token, "n_layer": model.n_layer,
            "n_head": model.n_head, "d_model": model.d_model,
            "d_head": model.d_head,
            "d_inner": model.layers[0].pos_ff.d_inner,
            "d_embed": model.d_embed, "div_val": emb.div_val,
            "cutoffs": list(crit.cutoffs[:-1]), "tie_projs": tie_projs,
            "tie_weight": crit.out_layers[0].weight is
            emb.emb_layers[0].weight,
            "pre_lnorm": model.layers[0].dec_attn.pre_lnorm,
            "tgt_len": model.tgt_len, "mem_len": model.mem_len,
            "clamp_len": model.clamp_len,
            "same_length": model.same_length}


def hf_dir(model, vocab, d, weights_format, vocab_name):
    """A Hugging Face TransfoXL directory of the original model."""
    os.makedirs(d, exist_ok=True)
    state = model.state_dict()
    hp = original_hparams(model)
    L = model.n_layer
    # untie_r: one pair of r biases per layer
    hf = hf_ref.from_original(state.items(), L, clone=True)
    share = hp["tie_projs"][1:]
    if len(set(share)) > 1:
        raise ValueError("HF's proj_share_all_but_first cannot say it")
    cfg = {"architectures": ["TransfoXLLMHeadModel"],
           "model_type": "transfo-xl", "vocab_size": model.n_token,
           "cutoffs": hp["cutoffs"], "d_model": model.d_model,
           "d_embed": model.d_embed, "n_head": model.n_head,
           "d_head": model.d_head, "d_inner": hp["d_inner"],
           "div_val": hp["div_val"], "pre_lnorm": hp["pre_lnorm"],
           "n_layer": L, "mem_len": model.mem_len,
           "clamp_len": model.clamp_len,
           "same_length": model.same_length,
           "proj_share_all_but_first": bool(share and share[0]),
           "attn_type": REL_PARTIAL, "sample_softmax": -1, "adaptive": True,
           "dropout": 0.0, "dropatt": 0.0, "untie_r": True,
           "init": "normal", "tie_word_embeddings": hp["tie_weight"],
           "layer_norm_epsilon": LAYER_NORM_EPS["huggingface"],
           "eos_token_id": 0,
           "tgt_len": model.tgt_len}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    if weights_format == "safetensors":
        # save_pretrained keeps one name of tensors that share memory:
        # the input's, as TransfoXL's _tied_weights_keys name the output's
        seen, kept = set(), collections.OrderedDict()
        for k, v in hf.items():
            key = (v.data_ptr(), tuple(v.shape))
            if key not in seen:
                seen.add(key)
                kept[k] = v
        checkpoint.write_safetensors(os.path.join(d, "model.safetensors"),
                                     kept)
    else:
        torch.save(hf, os.path.join(d, "pytorch_model.bin"),
                   _use_new_zipfile_serialization=False)
    # HF's TransfoXLTokenizer.save_vocabulary: pickle.dump(self.__dict__)
    vd = {k: getattr(vocab, k) for k in ("special", "min_freq", "max_size",
                                          "lower_case", "delimiter",
                                          "vocab_file", "idx2sym",
                                          "sym2idx", "counter")}
    vd["never_split"] = list(vocab.special)
    if hasattr(vocab, "eos_idx"):
        vd["eos_idx"] = vocab.eos_idx
    path = os.path.join(d, vocab_name)
    if vocab_name == "vocab.bin":
        torch.save(vd, path)
    else:
        with open(path, "wb") as f:
            pickle.dump(vd, f)


# ---------------------------------------------------------------------------

def convert(args, out):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "models",
                                                     "convert.py")] + args +
                       ["-o", out], capture_output=True, text=True, env=ENV)
    if r.returncode:
        raise RuntimeError(f"convert.py {' '.join(args)}: {r.stderr}")


def txlgen_score(a, mbin, raw_path, seg, mem, same, clamp):
    # the original's evaluation starts with an empty memory (a Hugging
    # Face directory's model file recommends zero states, as HF starts)
    argv = [a.txlgen, "--model", mbin, "--score", raw_path, "--json",
            "--threads", "1", "--mem-init", "empty"]
    if seg is not None:
        argv += ["--seg-len", str(seg), "--mem-len", str(mem),
                 "--clamp-len", str(max(clamp, 0)),
                 "--same-length" if same else "--no-same-length"]
    r = subprocess.run(argv, capture_output=True, text=True, env=ENV)
    if r.returncode:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: "
                           f"{r.stderr.strip()}")
    recs = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    toks = [x for x in recs if "pos" in x]
    return ([x["id"] for x in toks], [float(x["logprob"]) for x in toks],
            recs[-1]["tokens"])


def detok_lines(a, mbin, lines):
    r = subprocess.run([a.test_spm, mbin], capture_output=True,
                       input=b"".join(t.hex().encode() + b"\n"
                                      for t in lines), env=ENV)
    if r.returncode:
        raise RuntimeError(f"test-spm {mbin}: {r.stderr.decode()}")
    out = r.stdout.decode().split("\n")
    n = int(out[0].split()[3])
    res = []
    for line in out[1 + n:1 + n + len(lines)]:
        ids, _, hx = line.partition("\t")
        res.append(None if ids == "error" else bytes.fromhex(hx))
    return res


def original_join(name, vocab, line):
    """The original's symbols of one line of raw text, joined as text."""
    if name == "lm1b":                 # the words between the <S>
        return " ".join(vocab.get_sym(i) for i in vocab.get_indices(
            vocab.tokenize(line))).encode()
    if name in ("wt103", "wt103-plain", "ptb"):
        syms = vocab.tokenize(line)
        ids = vocab.get_indices(syms)
        return " ".join(vocab.get_sym(i) for i in ids).encode()
    if name == "text8":
        prepped = " ".join("_" if c == " " else c for c in line)
        ids = vocab.get_indices(vocab.tokenize(prepped))
        return "".join(vocab.get_sym(i) for i in ids).replace("_", " ") \
            .encode()
    ids = vocab.get_indices(vocab.tokenize(prep_enwik8(line.encode())))
    return bytes(int(vocab.get_sym(i)) for i in ids)


@torch.no_grad()
def original_table(model, cfg, ids, clamp):
    """[position][token] log-probs of the original model over the whole
    context at once (no memory, same_length off): its forward with every
    token of the vocabulary as the target, one per batch column."""
    V = model.n_token
    model.reset_length(len(ids), 0, 0)
    model.clamp_len, model.same_length = clamp, False
    data = torch.as_tensor(ids, dtype=torch.long)[:, None].expand(-1, V)
    target = torch.arange(V)[None, :].expand(len(ids), -1).contiguous()
    loss = model(data.contiguous(), target)[0].reshape(-1)
    loss = original.in_token_order(loss, target.reshape(-1), cfg)
    return (-loss.double()).view(len(ids), V).tolist()


def read_text(name, vocab, text):
    """The ids of text (bytes) in the original's reading of its dataset:
    word level line by line, each line that ends ending in <eos> (lm1b:
    between <S> and <S>, the last line open), character level each
    character (text8) or byte (enwik8)."""
    if name == "enwik8":
        return vocab.get_indices(vocab.tokenize(prep_enwik8(text)))
    text = text.decode()
    if name == "text8":
        return vocab.get_indices(vocab.tokenize(
            " ".join("_" if c == " " else c for c in text)))
    lines, ids = text.split("\n"), []
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        if name == "lm1b":
            syms = vocab.tokenize(line, add_double_eos=True)
            ids += vocab.get_indices(syms[:-1] if last else syms)
        else:
            ids += vocab.get_indices(vocab.tokenize(line, add_eos=not last))
    return ids


def generate_check(a, name, vocab, model, cfg, mbin, prompt, n=24):
    """Generation from a prompt as a user writes it, greedy and sampled
    (temperature 1.5, no filter): every token's log-prob must be the
    original model's (its forward over the prompt and the tokens so far,
    within tol), a greedy token the original's most likely one (within
    tol: a near tie may go either way), and the text printed must read
    back, by the original Vocab, as the ids generated.  Returns a failure
    or None."""
    clamp = model.clamp_len
    # lm1b's <S> ends a generated text, and an untrained model picks it
    # first: --ignore-eos (the log-probs stay the full distribution's)
    eos = vocab.get_idx("<S>") if name == "lm1b" else None
    for how in (["--temp", "0"], ["--temp", "1.5", "--top-k", "0",
                                  "--top-p", "1", "--min-p", "0"]):
        argv = [a.txlgen, "--model", mbin, "--mem-init", "empty",
                "--text", prompt, "-n", str(n),
                "--seed", "1", "--threads", "1", "--mem-len", "256",
                "--no-same-length", "--clamp-len", str(max(clamp, 0))] + \
            how + (["--ignore-eos"] if eos is not None else [])
        r = subprocess.run(argv + ["--json"], capture_output=True,
                           text=True, env=ENV)
        plain = subprocess.run(argv, capture_output=True, env=ENV)
        if r.returncode or plain.returncode:
            return f"generation: exit {r.returncode}: {r.stderr.strip()}"
        gen = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
        gen = [x for x in gen if "id" in x]
        ctx = read_text(name, vocab, prompt.encode())
        ids = ctx + [x["id"] for x in gen]
        table = original_table(model, cfg, ids[:-1], clamp)
        if len(gen) != n:
            return f"generation {' '.join(how)}: {len(gen)} tokens"
        for k, x in enumerate(gen):
            row = table[len(ctx) - 1 + k]
            best = max(v for i, v in enumerate(row) if i != eos)
            if abs(row[x["id"]] - x["logprob"]) > a.tol or \
                    (how[1] == "0" and row[x["id"]] < best - a.tol):
                return (f"generation {' '.join(how)}: token {k} id "
                        f"{x['id']} logprob {x['logprob']:.6f}, the "
                        f"original's {row[x['id']]:.6f} (its best "
                        f"{best:.6f})")
        text = plain.stdout
        back = read_text(name, vocab, prompt.encode() + text)
        if back != ids:
            return (f"generation {' '.join(how)}: the text printed "
                    f"{text!r} reads back as {back[len(ctx):]}, generated "
                    f"{ids[len(ctx):]}")
        print(f"{name:<7} generation {' '.join(how[:2]):<10} {len(gen)} "
              f"tokens, log-probs the original's, text reads back: "
              f"{text[:50]!r}")
    return None


def malicious_pickle(work):
    """convert.py must refuse a model.pt whose unpickling would run a
    command, and not run it."""
    marker = os.path.join(work, "pwned")

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    path = os.path.join(work, "evil.pt")
    torch.save({"model": Evil()}, path)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "models",
                                                     "convert.py"),
                        "--weights", path, "--vocab", path, "-o",
                        os.path.join(work, "evil.bin")],
                       capture_output=True, text=True, env=ENV)
    ok = r.returncode == 1 and not os.path.exists(marker) and \
        "refused" in r.stderr and not os.path.exists(
            os.path.join(work, "evil.bin"))
    print(f"malicious pickle: exit {r.returncode}, command run: "
          f"{os.path.exists(marker)}: {r.stderr.strip()}")
    return ok


def main():
    ap = original.checker_args(
        __doc__, "kimiyoung/transformer-xl checkout",
        only_help="comma-separated model names (wt103, ptb, lm1b, text8, "
        "enwik8)", keep_help="keep everything in this folder")
    ap.add_argument("--test-spm", default=os.path.join(ROOT, "build",
                                                       "tests", "test-spm"))
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    only = original.only_names("check_checkpoints.py", a.only,
                               [m[0] for m in MODELS])
    orig = os.path.abspath(a.orig)
    pyt = os.path.join(orig, "pytorch")
    try:
        # also what torch.load needs below: data_utils, utils.vocabulary
        original.import_original(pyt)
    except original.OriginalError as e:
        sys.exit(f"check_checkpoints.py: {e}")
    work = original.work_folder(a.keep, "txl-ckpt-")
    runner = os.path.join(work, "run_orig.py")
    with open(runner, "w") as f:
        f.write(RUNNER)
    failures, worst = [], 0.0
    if not malicious_pickle(work):
        failures.append("malicious pickle not refused")
    for k, (name, dataset, opts) in enumerate(MODELS):
        if only and name not in only:
            continue
        rng = random.Random(k)
        data = os.path.join(work, "data", name)
        if dataset in ("wt103", "ptb"):
            make_wt(data, rng, dataset)
            if dataset == "ptb":
                # train.py knows no ptb, but data_utils does: its cache,
                # which train.py then loads whatever --dataset says
                subprocess.run([sys.executable, "-c", CACHE, pyt, data,
                                dataset], check=True, env=ENV,
                               capture_output=True)
        elif dataset == "lm1b":
            make_lm1b(data, rng)
        elif dataset == "text8":
            make_text8(data, rng, orig)
        else:
            make_enwik8(data, rng)
        # train.py appends -DATASET and a time stamp to --work_dir
        run = os.path.join(work, "run", name)
        replace = CUTOFFS.get(dataset, []) if "--adaptive" in opts else []
        argv = [sys.executable, runner, json.dumps(replace),
                os.path.join(pyt, "train.py"),
                "--data", data, "--dataset",
                "wt103" if dataset == "ptb" else dataset, "--work_dir", run,
                "--batch_size", "4", "--max_step", str(a.steps),
                "--eval-interval", str(a.steps), "--log-interval",
                str(a.steps), "--lr", "0.01", "--seed", str(k)] + opts.split()
        r = subprocess.run(argv, capture_output=True, text=True, env=ENV)
        if r.returncode:
            sys.exit(f"{name}: the original train.py failed:\n{r.stderr}")
        model_pt = [os.path.join(dp, "model.pt") for dp, _, fs in
                    os.walk(run + "-" + ("wt103" if dataset == "ptb" else
                                         dataset)) if "model.pt" in fs][0]
        cache_pt = os.path.join(data, "cache.pt")
        # the original's own objects, loaded with the original code on
        # sys.path (our own files: trusted)
        model = torch.load(model_pt, map_location="cpu")
        model.eval()
        # the training settings (original_logprobs changes them)
        trained = (model.tgt_len, model.mem_len, model.same_length,
                   model.clamp_len)
        corpus = torch.load(cache_pt)
        vocab = corpus.vocab
        if "<unk>" in vocab.sym2idx and not hasattr(vocab, "unk_idx"):
            # wt103's and ptb's Vocab has no unk_idx: it asserts on an
            # unknown word; the datasets write <unk> for them, as txlgen
            # does (and Hugging Face's port)
            vocab.unk_idx = vocab.sym2idx["<unk>"]

        cfg = txl_ref.TxlConfig.from_dict(
            original_hparams(model))
        forms = {}
        d = os.path.join(work, "forms", name)
        os.makedirs(d, exist_ok=True)
        forms["model.pt"] = ["--weights", model_pt, "--vocab", cache_pt]
        hfa = os.path.join(d, "hf-bin")
        hf_dir(model, vocab, hfa, "bin",
               "vocab.bin" if k % 2 else "vocab.pkl")
        hfb = os.path.join(d, "hf-safetensors")
        hf_dir(model, vocab, hfb, "safetensors", "vocab.pkl")
        extra = [] if dataset in ("wt103", "ptb") else ["--dataset", dataset]
        forms["hf pytorch_model.bin"] = ["--weights", hfa] + extra
        forms["hf model.safetensors"] = ["--weights", hfb] + extra
        state = os.path.join(d, "state.pt")
        torch.save(model.state_dict(), state)
        ck = os.path.join(d, "CFG.json")
        hp = original_hparams(model)
        with open(ck, "w") as f:
            json.dump(hp, f)
        forms["state_dict"] = ["--weights", state, "--config", ck,
                               "--vocab", cache_pt]

        raw, layout = raw_text(name, random.Random(100 + k))
        raw_path = os.path.join(d, "raw.txt")
        with open(raw_path, "wb") as f:
            f.write(raw)
        lay_path = os.path.join(d, "layout.txt")
        with open(lay_path, "w", encoding="utf-8") as f:
            f.write(layout)
        want_ids = vocab.encode_file(
            lay_path, ordered=True, add_eos=dataset in ("wt103", "ptb"),
            add_double_eos=dataset == "lm1b").tolist()
        lines = raw.split(b"\n")
        want_join = [original_join(name, vocab, x.decode()) for x in lines]

        for form, args in forms.items():
            mbin = os.path.join(d, form.replace(" ", "_") + ".bin")
            try:
                convert(args, mbin)
            except RuntimeError as e:
                failures.append(f"{name} {form}: {e}")
                print(failures[-1])
                continue
            err = generate_check(a, name, vocab, model, cfg, mbin,
                                 PROMPTS.get(name, PROMPTS["wt103"]))
            if err:
                failures.append(f"{name} {form}: {err}")
                print(failures[-1])
            got_join = detok_lines(a, mbin, lines)
            bad = [i for i, (g, w) in enumerate(zip(got_join, want_join))
                   if g != w]
            if bad:
                failures.append(f"{name} {form}: detokenized line {bad[0]}"
                                f" {got_join[bad[0]]!r} != "
                                f"{want_join[bad[0]]!r}")
                print(failures[-1])
            for s in SETTINGS:
                seg, mem, same, clamp = (t if v is None else v
                                         for v, t in zip(s, trained))
                if same and mem == 0:
                    continue
                label = (f"{name:<7} {form:<21} seg {seg:>2} mem {mem:>2} "
                         f"same {int(same)} clamp {clamp:>2}")
                try:
                    ids, lps, ntok = txlgen_score(
                        a, mbin, raw_path, None if s[0] is None else seg,
                        mem, same, clamp)
                except RuntimeError as e:
                    failures.append(f"{label}: {e}")
                    print(failures[-1])
                    continue
                if ntok != len(want_ids) or ids != want_ids[1:]:
                    failures.append(f"{label}: ids differ ({ntok} tokens, "
                                    f"the original {len(want_ids)})")
                    print(failures[-1])
                    continue
                want = original.original_logprobs(
                    model, cfg, want_ids, seg, mem, clamp, same)
                diff = max(abs(x - y) for x, y in zip(lps, want))
                worst = max(worst, diff)
                flag = "" if diff <= a.tol else "   <-- FAIL"
                print(f"{label}  {len(want_ids):>4} ids equal, max "
                      f"|logprob diff| {diff:.2e}{flag}")
                if diff > a.tol:
                    failures.append(f"{label}: max diff {diff:.3g}")
    print(f"max |txlgen - original| {worst:.3g} (tolerance {a.tol}); "
          f"{len(failures)} failure(s)")
    for x in failures:
        print("FAIL", x, file=sys.stderr)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
