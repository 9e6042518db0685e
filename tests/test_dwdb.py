#!/usr/bin/python3
"""Checkpoints of dwdb/transformer-xl (TensorFlow 2.3 Keras), written
without TensorFlow as TF 2.3 writes them (txlgen/dwdb_write.py: the
object-based bundle with its object graph and save_counter, one or two
data shards, two saves of different weights with "checkpoint" naming the
second; or model.save_weights' keys without "model/"), random weights
large enough that the outputs are far from flat, vocab.pkl a Python 3
pickle of the symbol list; converted with `models/convert.py --weights
DIR -o m.bin`.

Against txlgen/dwdb_ref.py, a transcription of dwdb's model.py,
data_utils.Vocab and run.py's inference() in NumPy (float64), on a
Chinese text with a character outside the vocabulary, a capital letter,
a line with spaces around it and an empty line:
- the ids of `txlgen --score` are those of its Vocab.encode_file, every
  log-prob within 1e-4 of its model's over the same segments;
- `txlgen -m m.bin -p 人间三月天，` (the model's recommended settings:
  greedy, 64 characters, <eos> ends) prints what inference() returns;
both with untie_rel_bias on and off, d_embed != d_model and d_embed =
d_model (projected all the same), run.py's lengths and others given at
conversion (--tgt-len, --mem-len).

Programs: $TXLGEN (set by meson test), else build/.
"""

import json
import os
import pickle
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import dwdb_ref, dwdb_write, random_model as mrm

TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")
TOL = 1e-4
PROMPT = "人间三月天，"
TEXT = ("人间三月天，春风十里柳如烟。\n"
        "  江山如画，一时多少豪杰！  \n"
        "\n"
        "年年岁岁花相似，岁岁年年人不同。\n"
        "明月几时有？把酒问青天。不知天上宫阙，今夕是何年。\n"
        "我欲乘风归去，又恐琼楼玉宇，高处不胜寒。Tang 龘\n"
        "起舞弄清影，何似在人间。\n")
OUTSIDE = "龘"


def symbols():
    """idx2sym as data_utils.Vocab.build_vocab orders it: <pad>, <unk>,
    <eos>, then the characters of the lines (a newline among them, and a
    space), lower-cased, by frequency; the character OUTSIDE left out."""
    counts = {}
    for ch in TEXT.lower():
        if ch != OUTSIDE:
            counts[ch] = counts.get(ch, 0) + 1
    rest = sorted(counts, key=lambda c: -counts[c])
    return ["<pad>", "<unk>", "<eos>"] + rest


def convert(*args):
    return subprocess.run([mrm.PYTHON, mrm.CONVERT] + list(args),
                          capture_output=True, text=True)


def txlgen(*args):
    r = subprocess.run([TXLGEN, "--threads", "1", *args],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


class TestDwdb(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="txl-dwdb-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.syms = symbols()
        cls.vocab = dwdb_ref.Vocab(cls.syms)
        cls.text = os.path.join(cls.tmp, "text.txt")
        with open(cls.text, "w", encoding="utf-8") as f:
            f.write(TEXT)

    def check(self, name, d_embed, d_model, untie, seed, num_shards=1,
              save_weights=False, lengths=None, prefix=False):
        V = len(self.syms)
        dims = dict(n_vocab=V, d_embed=d_embed, d_model=d_model, d_ff=48,
                    n_head=4, n_layer=3, untie_rel_bias=untie)
        t = dwdb_write.random_tensors(**dims, seed=seed)
        earlier = dwdb_write.random_tensors(**dims, seed=100 + seed)
        d = os.path.join(self.tmp, name)
        last = dwdb_write.write_dir(d, t, pickle.dumps(self.syms), saves=2,
                                    num_shards=num_shards,
                                    save_weights=save_weights,
                                    earlier=earlier)
        out = os.path.join(self.tmp, name + ".bin")
        args = ["--weights", last if prefix else d, "-o", out]
        q_len, m_len = lengths or (50, 50)
        if lengths:
            args += ["--tgt-len", str(q_len), "--mem-len", str(m_len)]
        r = convert(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        info = txlgen("-m", out, "--info")
        self.assertIn("origin: dwdb", info)
        # dwdb neither scales the embedding nor skips the projection
        self.assertIn("emb_scale: false", info)
        self.assertIn("proj_same_dim: true", info)

        ref = dwdb_ref.TransformerXL(t, q_len, m_len)
        # the ids of encode_file, the log-probs of evaluate()'s segments
        with open(self.text, encoding="utf-8") as f:
            ids = self.vocab.encode_lines(f)
        self.assertIn(1, ids)                    # <unk>: OUTSIDE
        recs = [json.loads(x) for x in txlgen(
            "-m", out, "--score", self.text, "--json").splitlines()]
        got = [x for x in recs if "pos" in x]
        self.assertEqual([x["id"] for x in got], ids[1:])
        want = dwdb_ref.logprobs(ref, ids, q_len)
        lp = np.array([x["logprob"] for x in got])
        self.assertGreater(np.std(want), 0.5)     # not flat
        self.assertLess(np.max(np.abs(lp - want)), TOL)

        # run.py's inference: no flag needed; --temp 0 the same
        text, seq = dwdb_ref.inference(ref, self.vocab, PROMPT, q_len, m_len)
        self.assertGreater(len(set(seq)), 1)
        for extra in ([], ["--temp", "0"]):
            gen = txlgen("-m", out, "-p", PROMPT, "--echo", *extra)
            self.assertEqual(gen.rstrip("\n"), text)
        return seq

    def test_untied_projected(self):
        """untie_rel_bias, d_embed 24 != d_model 16, two shards, two
        saves, the directory."""
        self.check("untied", 24, 16, True, 1, num_shards=2)

    def test_tied_same_dim(self):
        """one pair of biases, d_embed = d_model (still projected),
        model.save_weights' keys, the prefix with vocab.pkl beside it."""
        seq = self.check("tied", 16, 16, False, 3, save_weights=True,
                         prefix=True)
        # the vocabulary's newline symbol, generated: printed as dwdb
        # joins it
        self.assertIn(self.syms.index("\n"), seq)

    def test_lengths(self):
        """--tgt-len 8 --mem-len 16: segments of 8 with memory, a
        position table of 24 rows."""
        self.check("lengths", 20, 16, True, 0, lengths=(8, 16),
                   num_shards=2)


if __name__ == "__main__":
    unittest.main()
