#!/usr/bin/python3
"""Checkpoints of the Transformer-XL authors' TensorFlow code, read
without TensorFlow: models the PyTorch reference builds (random weights),
written in the TF code's names and layouts as TensorFlow writes a
checkpoint (txlgen/tfwrite.py: the tensor bundle, its LevelDB-format
index with snappy blocks and crc32c, Adam's slots and global_step beside
the model) with a corpus cache as Python 2 pickles the TF code's
data_utils.Corpus (protocol 2, symbols as str, the corpus as numpy
arrays), in the directory layout of tf/sota/download.sh; converted with
`models/convert.py --weights DIR -o m.bin` and scored on raw text with
`txlgen --score --json`.

- The enwik8 layout (div_val 1, no cutoffs, one pair of r biases shared
  by all layers), the wt103 layout (adaptive input and softmax,
  div_val 4, three tail clusters, the projections tied as the TF wt103
  run ties them: all but the first; r biases per layer) and the lm1b
  layout (no projection tied, none for the first cluster: the identity;
  <S> around each sentence, an unknown word as <UNK>).
- The ids must be those of the TF code's Vocab (a transcription here of
  tokenize + get_idx over the pickled idx2sym), every log-prob within
  1e-4 of the reference computing as the TF code does: txl_ref with
  layer_norm_eps 1e-12 and the TF same_length mask, the memory started as
  mem_len zero states, and for the adaptive softmax a transcription here
  of tf/model.py's mask_adaptive_logsoftmax on the TF tensors as written
  (tail cluster i's log-prob from head column cutoffs[0] + i - 1).
- The model file records the TF conventions and the data set's
  evaluation settings as its recommended settings.

Programs: $TXLGEN (set by meson test), else build/.
"""

import collections
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import torch

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import random_model as mrm, tfwrite, txl_ref, txlfile
from txlgen.conventions import LAYER_NORM_EPS

TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = os.path.join(ROOT, "tests", "data", "text.txt")
TOL = 1e-4
# The run settings of the comparisons (the recommended ones of the real
# models are far longer than these texts)
SEG, MEM, CLAMP = 8, 16, 12


def convert(*args):
    return subprocess.run([mrm.PYTHON, mrm.CONVERT] + list(args),
                          capture_output=True, text=True)


def txlgen_score(mbin, text_path, *extra):
    r = subprocess.run([TXLGEN, "--model", mbin, "--score", text_path,
                        "--json", "--threads", "1", "--seg-len", str(SEG),
                        "--mem-len", str(MEM), "--clamp-len", str(CLAMP),
                        *extra], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    return [x["id"] for x in recs if "pos" in x], \
        [x["logprob"] for x in recs if "pos" in x]


def tf_encode(lines, sym2idx, add_eos=False, add_double_eos=False,
              lower_case=False):
    """The TF code's Vocab.encode_file(ordered=True) of the lines of a
    prepared text file: tokenize (strip, lower, split; <eos> or <S>
    around), then get_idx of each symbol (no unknown symbol here)."""
    out = []
    for line in lines:
        line = line.strip()
        if lower_case:
            line = line.lower()
        syms = line.split()
        if add_double_eos:
            syms = ["<S>"] + syms + ["<S>"]
        elif add_eos:
            syms = syms + ["<eos>"]
        out += [sym2idx[s] for s in syms]
    return out


def by_frequency(symbols, special=()):
    """Vocab.build_vocab: the specials, then the symbols most common
    first."""
    out = list(special)
    for s, _ in collections.Counter(symbols).most_common():
        if s not in out:
            out.append(s)
    return out


def tf_adaptive_logprobs(hidden, targets, tf, cutoffs, n_token, div_val):
    """log p(target) as tf/model.py's mask_adaptive_logsoftmax computes
    it from the TF tensors (dict of numpy arrays): head = cluster 0's
    logits then cluster_W's, tail cluster i (1-based) read from head
    column cutoffs[0] + i - 1; projections y = x @ proj.T ([d_emb,
    d_model]), tied ones the embedding's proj_W."""
    S, E = "transformer/adaptive_softmax/", "transformer/adaptive_embed/"
    h = hidden.astype(np.float64)
    ends = [0] + list(cutoffs) + [n_token]

    def logits(x, i, with_clusters=False):
        proj = tf.get(f"{S}cutoff_{i}/proj")
        if proj is None:
            proj = tf[f"{E}cutoff_{i}/proj_W"]           # tied
        W = tf[f"{E}cutoff_{i}/lookup_table"].astype(np.float64)
        b = tf[f"{S}cutoff_{i}/b"].astype(np.float64)
        if with_clusters:
            W = np.concatenate([W, tf[S + "cutoff_0/cluster_W"]], 0)
            b = np.concatenate([b, tf[S + "cutoff_0/cluster_b"]], 0)
        y = x @ proj.astype(np.float64).T
        return y @ W.T + b

    def log_softmax(z):
        z = z - z.max(-1, keepdims=True)
        return z - np.log(np.exp(z).sum(-1, keepdims=True))

    head = log_softmax(logits(h, 0, True))
    out = []
    for t, (row, hrow) in enumerate(zip(targets, h)):
        i = next(k for k in range(len(ends) - 1) if ends[k] <= row <
                 ends[k + 1])
        if i == 0:
            out.append(head[t, row])
        else:
            tail = log_softmax(logits(hrow[None], i))[0]
            out.append(head[t, ends[1] + i - 1] + tail[row - ends[i]])
    return out


def reference(model, ids, tf=None, cfg=None):
    """Log-probs of ids[1:] as the TF evaluation computes them: segments
    of SEG, memory of MEM started as MEM zero states, clamp_len CLAMP,
    same_length with the TF mask (model.cfg), the adaptive softmax by
    tf_adaptive_logprobs when tf is given."""
    model.eval()
    model.mem_len, model.clamp_len, model.same_length = MEM, CLAMP, True
    if tf is None:
        return txl_ref.score_ids(model, ids, SEG, MEM, CLAMP, True,
                                 mem_init="zeros").tolist()
    mems = txl_ref.init_mems(model)
    out = []
    t = torch.as_tensor(ids)
    with torch.no_grad():
        for s in range(0, len(ids) - 1, SEG):
            y = t[s + 1:s + 1 + SEG]
            x = t[s:s + len(y)]
            hidden, mems = model.forward(x[:, None], mems)
            out += tf_adaptive_logprobs(hidden[:, 0].double().numpy(),
                                        y.tolist(), tf, cfg.cutoffs,
                                        cfg.n_token, cfg.div_val)
    return out


def tf_model(cfg, seed):
    cfg.layer_norm_eps = LAYER_NORM_EPS["tensorflow"]
    cfg.same_length_mask = "tf"
    torch.manual_seed(seed)
    model = txl_ref.MemTransformerLM(cfg)
    mrm.randomize(model, seed=seed)
    state = {k: v.detach().numpy().copy()
             for k, v in model.state_dict().items()}
    return model, state


def without_adam(tensors):
    """The tensors of a TF checkpoint less Adam's slots."""
    return {k: v for k, v in tensors.items()
            if not k.endswith("Adam") and not k.endswith("Adam_1")}


@unittest.skipIf(TXLGEN is None, "txlgen not built")
class TestTFCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="txl-tfckpt-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)

    def path(self, *names):
        return os.path.join(self.tmp, *names)

    def converted(self, d, name):
        """convert.py of the TF checkpoint folder @d into NAME.bin: (its
        path, its metadata, its recommended settings)."""
        mbin = self.path(name + ".bin")
        r = convert("--weights", d, "-o", mbin)
        self.assertEqual(r.returncode, 0, r.stderr)
        meta = txlfile.read(mbin)[0]
        return mbin, meta, json.loads(meta["recommended"])

    def scored(self, mbin, text, ids):
        """txlgen's log-probs of the bytes @text in model file @mbin,
        which it reads as @ids (the first unscored)."""
        path = mbin[:-len(".bin")] + ".txt"
        with open(path, "wb") as f:
            f.write(text)
        got_ids, lps = txlgen_score(mbin, path)
        self.assertEqual(got_ids, ids[1:])
        return lps

    def test_enwik8_layout(self):
        """div_val 1, no adaptive softmax, shared r biases; the text's bytes
        as prep_enwik8.py writes them (decimal values, a newline a line
        break), without <eos>; non-ASCII bytes included."""
        with open(TEXT, "rb") as f:
            raw = f.read()
        raw = raw[:600] + "Zoë, naïve café – 東京\n".encode() + raw[600:900]
        prepared = [" ".join(str(c) for c in line)
                    for line in raw.split(b"\n")]
        symbols = by_frequency(s for line in prepared for s in line.split())
        sym2idx = {s: i for i, s in enumerate(symbols)}
        ids = tf_encode(prepared, sym2idx)
        cfg = mrm.make_config(n_layer=2, n_head=2, d_model=32, d_head=16,
                              d_inner=64, n_token=len(symbols),
                              untie_r=False, tgt_len=SEG, mem_len=MEM)
        model, state = tf_model(cfg, seed=3)
        tensors = tfwrite.tf_tensors(state, cfg)
        self.assertEqual(tensors["transformer/r_w_bias"].shape, (2, 16))
        vocab = tfwrite.tf_vocab(symbols, lower_case=True)
        arrays = {k: np.array(ids[:n], np.int64) for k, n in
                  (("train", 100000), ("valid", 50), ("test", 70))}
        corpus = tfwrite.tf_corpus("enwik8", vocab, arrays, [])
        d = self.path("tf_enwik8")
        tfwrite.write_tf_dir(d, tensors, tfwrite.py2_pickle(corpus),
                             {"vocab_size": len(symbols), "cutoffs": [],
                              "dataset": "enwik8"})
        mbin, meta, rec = self.converted(d, "enwik8")
        self.assertEqual((rec["seg_len"], rec["mem_len"], rec["clamp_len"],
                          rec["same_length"], rec["mem_init"]),
                         (128, 3800, 1000, True, "zeros"))
        self.assertEqual(meta["origin"], "tensorflow")
        self.assertEqual(json.loads(meta["layer_norm_eps"]),
                         LAYER_NORM_EPS["tensorflow"])
        self.assertEqual(meta["same_length_mask"], "tf")
        lps = self.scored(mbin, raw, ids)
        want = reference(model, ids)
        self.assertEqual(len(lps), len(want))
        diff = max(abs(a - b) for a, b in zip(lps, want))
        self.assertLess(diff, TOL)

    def test_wt103_layout(self):
        """Adaptive input and softmax, div_val 4, three tail clusters, the
        projections of all clusters but the first tied to the embedding's
        (proj_share_all_but_first), the first's square and its own; r
        biases per layer; <eos> after each line."""
        with open(TEXT) as f:
            lines = [x for x in f.read().split("\n") if x.strip()]
        words = [w for line in lines for w in line.split() + ["<eos>"]]
        symbols = by_frequency(words, special=["<eos>"])
        n = len(symbols)
        cutoffs = [n // 10, n // 4, n // 2]
        sym2idx = {s: i for i, s in enumerate(symbols)}
        ids = tf_encode(lines, sym2idx, add_eos=True)
        cfg = mrm.make_config(n_layer=2, n_head=4, d_model=64, d_head=16,
                              d_inner=96, n_token=n, untie_r=True,
                              div_val=4, cutoffs=cutoffs,
                              tie_projs=[False, True, True, True],
                              tgt_len=SEG, mem_len=MEM)
        model, state = tf_model(cfg, seed=5)
        tensors = tfwrite.tf_tensors(state, cfg)
        S = "transformer/adaptive_softmax/"
        self.assertIn(S + "cutoff_0/proj", tensors)
        self.assertNotIn(S + "cutoff_1/proj", tensors)
        self.assertEqual(tensors["transformer/r_r_bias"].shape, (2, 4, 16))
        vocab = tfwrite.tf_vocab(symbols, special=["<eos>"],
                                 counts=collections.Counter(words))
        arrays = {"train": np.array(ids * 40, np.int64),
                  "valid": np.array(ids[:30], np.int64),
                  "test": np.array(ids, np.int64)}
        corpus = tfwrite.tf_corpus("wt103", vocab, arrays,
                                   [0] + cutoffs + [n])
        d = self.path("tf_wt103")
        tfwrite.write_tf_dir(d, tensors, tfwrite.py2_pickle(corpus),
                             {"vocab_size": n, "cutoffs": [0] + cutoffs +
                              [n], "dataset": "wt103"})
        mbin, meta, rec = self.converted(d, "wt103")
        self.assertEqual((rec["seg_len"], rec["mem_len"], rec["clamp_len"],
                          rec["mem_init"]), (128, 1600, 1000, "zeros"))
        lps = self.scored(mbin, ("\n".join(lines) + "\n").encode(), ids)
        tf = without_adam(tensors)
        want = reference(model, ids, tf, cfg)
        self.assertEqual(len(lps), len(want))
        # every cluster is scored
        clusters = collections.Counter(
            sum(t >= c for c in cutoffs) for t in ids[1:])
        self.assertEqual(sorted(clusters), [0, 1, 2, 3])
        diff = max(abs(a - b) for a, b in zip(lps, want))
        self.assertLess(diff, TOL)
        # the TF code's reading equals the PyTorch code's on the PyTorch
        # weights (the rows of cluster_W reversed between the two; float32
        # against float64 arithmetic)
        pt = reference(model, ids)
        self.assertLess(max(abs(a - b) for a, b in zip(pt, want)), TOL)

    def test_lm1b_layout(self):
        """The lm1b run's layout: div_val 4, three tail clusters, no
        projection tied (proj_share_all_but_first off) and none for the
        first cluster (proj_same_dim off: its embedding has d_model
        values); r biases per layer; a vocabulary file's words with <S>
        and <UNK>, <S> before and after each sentence, an unknown word
        read as <UNK>; the corpus's train a list of file names."""
        with open(TEXT) as f:
            lines = [x for x in f.read().split("\n") if x.strip()]
        words = [w for line in lines for w in line.split()]
        symbols = ["<S>", "<UNK>"] + [w for w in by_frequency(words)
                                      if w != "home."]
        n = len(symbols)
        cutoffs = [n // 10, n // 4, n // 2]
        sym2idx = {s: i for i, s in enumerate(symbols)}
        ids = []
        for line in lines:
            ids += [0] + [sym2idx.get(w, 1) for w in line.split()] + [0]
        self.assertIn(1, ids)
        cfg = mrm.make_config(n_layer=2, n_head=4, d_model=64, d_head=16,
                              d_inner=96, n_token=n, untie_r=True,
                              div_val=4, cutoffs=cutoffs,
                              tie_projs=[False] * 4, tgt_len=SEG,
                              mem_len=MEM)
        model, _ = tf_model(cfg, seed=7)
        with torch.no_grad():
            model.word_emb.emb_projs[0].copy_(torch.eye(64))
            model.crit.out_projs[0].copy_(torch.eye(64))
        state = {k: v.detach().numpy().copy()
                 for k, v in model.state_dict().items()}
        tensors = tfwrite.tf_tensors(state, cfg, proj_same_dim=False)
        S, E = "transformer/adaptive_softmax/", "transformer/adaptive_embed/"
        self.assertNotIn(E + "cutoff_0/proj_W", tensors)
        self.assertNotIn(S + "cutoff_0/proj", tensors)
        self.assertIn(S + "cutoff_1/proj", tensors)
        vocab = tfwrite.tf_vocab(symbols, vocab_file="1b_word_vocab.txt")
        corpus = tfwrite.tf_corpus("lm1b", vocab, {
            "train": ["news.en-00001-of-00100", "news.en-00002-of-00100"],
            "valid": np.array(ids, np.int64),
            "test": np.array(ids, np.int64)}, [0] + cutoffs + [n])
        d = self.path("tf_lm1b")
        tfwrite.write_tf_dir(d, tensors, tfwrite.py2_pickle(corpus),
                             {"vocab_size": n, "cutoffs": [0] + cutoffs +
                              [n], "dataset": "lm1b"}, step=1191000)
        mbin, _, rec = self.converted(d, "lm1b")
        self.assertEqual((rec["seg_len"], rec["mem_len"]), (32, 128))
        self.assertNotIn("clamp_len", rec)
        lps = self.scored(mbin, ("\n".join(lines) + "\n").encode(), ids)
        tf = without_adam(tensors)
        for k in ("proj_W", "proj"):              # none: the identity
            tf[(E if k == "proj_W" else S) + "cutoff_0/" + k] = \
                np.eye(64, dtype=np.float32)
        want = reference(model, ids, tf, cfg)
        diff = max(abs(a - b) for a, b in zip(lps, want))
        self.assertLess(diff, TOL)

    def test_recommended_settings_load(self):
        """Each data set's recommended settings are ones txlgen takes, and
        give the session the evaluation's memory, segment and clamp
        (lm1b's "no clamp" is the file's clamp_len -1, txlgen's 0)."""
        from txlgen import tf_convert
        d = self.path("tf_enwik8")
        if not os.path.isdir(d):
            self.test_enwik8_layout()
        src = self.path("enwik8.bin")
        for ds, (seg, mem, clamp) in {"enwik8": (128, 3800, 1000),
                                      "text8": (128, 3800, 1000),
                                      "wt103": (128, 1600, 1000),
                                      "lm1b": (32, 128, 0)}.items():
            rec = tf_convert.recommended(ds, {})
            out = self.path(f"rec-{ds}.bin")
            r = subprocess.run([mrm.PYTHON, os.path.join(
                ROOT, "models", "txlfile.py"), "--dtype", "F32", "--set",
                "recommended=" + json.dumps(rec), "--set",
                "clamp_len=" + ("-1" if ds == "lm1b" else "1000"),
                src, out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run([TXLGEN, "-m", out, "--info", "--json"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            sess = json.loads(r.stdout)["session"]
            self.assertEqual((sess["seg_len"], sess["mem_len"],
                              sess["clamp_len"], sess["same_length"]),
                             (seg, mem, clamp, True), ds)

    def test_prefix_and_vocab(self):
        """The checkpoint prefix with --vocab cache.pkl (corpus-info.json
        beside it) converts to the same model as the directory."""
        d = self.path("tf_enwik8")
        if not os.path.isdir(d):
            self.test_enwik8_layout()
        a, b = self.path("dir.bin"), self.path("prefix.bin")
        r = convert("--weights", d, "-o", a)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = convert("--weights", os.path.join(d, "model", "model.ckpt-0"),
                    "--vocab", os.path.join(d, "data", "cache.pkl"), "-o", b)
        self.assertEqual(r.returncode, 0, r.stderr)
        ma, ta = txlfile.read(a)[:2]
        mb, tb = txlfile.read(b)[:2]
        self.assertEqual(ma, mb)
        self.assertEqual(sorted(ta), sorted(tb))
        for k in ta:
            self.assertTrue(np.array_equal(ta[k], tb[k]), k)


if __name__ == "__main__":
    unittest.main()
