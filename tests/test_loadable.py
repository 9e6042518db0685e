#!/usr/bin/python3
"""What the converter accepts, txlgen loads: the writer's checks
(txlgen/loadable.py, the limits read from lib/base/txl-limits.h and lib/'s
other headers, not copied) held to the real loader.

- Every broken model file of tests/test_badfiles.py is refused by txlgen
  and by txlfile.check_file, and where the Python side refuses at the
  model (hyperparameters, tensors, tokenizer), it says what txlgen says.
- Each limit on the hyperparameters: one past it, both refuse with the
  same message (which names the limit); at it, both accept, or both
  refuse with the same later message.
- A --vocab symbol of 130 x "é" (260 bytes, 261 with its space: a file
  the converter used to write and txlgen refused, "tokenizer piece 10 is
  invalid or too long") is refused by the converter; 127 x "é" converts
  and loads; the file of 128 written without the checks is refused by
  txlgen: the converter's bound is the loader's.
- Random configurations (attn_type 0-3, adaptive softmax, div_val,
  tie_projs, every storage type, word and character vocabularies with
  symbols near the bound, SentencePiece tokenizers), converted from
  Hugging Face directories made here: every file the converter writes
  loads (txlgen --info).

Programs: $TXLGEN (meson sets it), else build/cmd/txlgen.
Run: /usr/bin/python3 tests/test_loadable.py
"""

import contextlib
import io
import json
import os
import pickle
import random
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import checkpoint, convert, loadable, random_model as mrm
from txlgen import proto, txlfile, vocab
from txlgen.conventions import ADAPTIVE_SPAN, REL_LEARNED, REL_PARTIAL
import test_badfiles as tb

TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")
TMP = None


def setUpModule():
    global TMP
    if TXLGEN is None:
        raise unittest.SkipTest("no txlgen binary (set TXLGEN)")
    TMP = tempfile.mkdtemp(prefix="txl-loadable-")
    tb.setUpModule()                   # the valid model of test_badfiles


def tearDownModule():
    tb.tearDownModule()
    shutil.rmtree(TMP, ignore_errors=True)


def path(name):
    return os.path.join(TMP, name)


def txlgen_loads(p):
    """None if txlgen loads model file p, else its message (after the
    file name)."""
    r = subprocess.run([TXLGEN, "--model", p, "--info"], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    if r.returncode == 0:
        return None
    line = r.stderr.strip()
    assert r.returncode == 3, f"{p}: exit {r.returncode}: {line}"
    return line.split(f"{p}: ", 1)[1] if f"{p}: " in line else line


def python_loads(p):
    """(None, None) if txlfile.check_file accepts p, else (the kind of
    refusal, the message without the file name)."""
    try:
        txlfile.check_file(p)
        return None, None
    except loadable.NotLoadable as e:
        return "model", str(e)
    except txlfile.ModelFileError as e:
        return "container", str(e).split(f"{p}: ", 1)[-1]


class SameRules(unittest.TestCase):
    def compare(self, name, blob):
        p = path(f"{name}.bin")
        with open(p, "wb") as f:
            f.write(blob)
        c = txlgen_loads(p)
        kind, py = python_loads(p)
        self.assertEqual(c is None, py is None, f"{name}: txlgen {c!r}, "
                         f"Python {py!r}")
        if kind == "model":
            self.assertEqual(py, c, name)
        return c, kind

    def test_broken_files(self):
        with open(tb._valid.path, "rb") as f:
            blob = f.read()
        header, data = tb.split(blob)
        self.assertEqual(self.compare("valid", blob), (None, None))
        kinds = {}
        for name, (make, _) in tb.CASES.items():
            with self.subTest(name):
                c, kind = self.compare(name, make(blob, header, data))
                self.assertIsNotNone(c)
                kinds[kind] = kinds.get(kind, 0) + 1
        # most are refused at the model, where the messages are compared
        self.assertGreater(kinds.get("model", 0), 30, kinds)

    def test_limits(self):
        L = loadable.limits()
        with open(tb._valid.path, "rb") as f:
            blob = f.read()
        header, data = tb.split(blob)
        ranges = {"n_token": (1, L["TXL_MAX_TOKENS"]),
                  "n_layer": (1, L["TXL_MAX_LAYERS"]),
                  "n_head": (1, L["TXL_MAX_HEADS"]),
                  "d_model": (1, L["TXL_MAX_DIM"]),
                  "d_head": (1, L["TXL_MAX_DIM"]),
                  "d_inner": (1, L["TXL_MAX_DIM"]),
                  "d_embed": (1, L["TXL_MAX_DIM"]),
                  "tgt_len": (1, L["TXL_SEG_LEN_MAX"]),
                  "mem_len": (0, L["TXL_MAX_DIM"]),
                  "clamp_len": (-2 ** 31, L["TXL_MAX_DIM"]),
                  "div_val": (1, L["TXL_MAX_DIM"]),
                  "attn_type": (0, 4)}
        cases = []
        for key, (lo, hi) in ranges.items():
            cases += [({key: str(v)}, f"{key}={v}")
                      for v in (lo - 1, lo, hi, hi + 1)]
        for v in (0, 1, L["TXL_MAX_KLEN"], L["TXL_MAX_KLEN"] + 1):
            cases.append(({"attn_type": str(REL_LEARNED),
                           "max_klen": str(v)},
                          f"max_klen={v}"))
        for key in ("attn_span", "span_ramp"):
            for v in (0, 1, L["TXL_MAX_SPAN"], L["TXL_MAX_SPAN"] + 1):
                m = {"attn_type": str(ADAPTIVE_SPAN), "attn_span": "64",
                     "span_ramp": "32"}
                m[key] = str(v)
                cases.append((m, f"{key}={v}"))
        n = L["TXL_MAX_CLUSTERS"]
        for k in (n - 1, n):
            cases.append(({"cutoffs": json.dumps(list(range(1, k + 1))),
                           "tie_projs": json.dumps([False] * (k + 1))},
                          f"{k} cutoffs"))
        refusals = 0
        for metas, name in cases:
            with self.subTest(name):
                c, _ = self.compare(name.replace("=", "_"),
                                    tb._edit(tb._metas(**metas))(
                                        blob, header, data))
                refusals += c is not None and "expected an integer in" in c
        self.assertGreaterEqual(refusals, 2 * len(ranges))


# ---------------------------------------------------------------------------
# Converting: Hugging Face directories made here, no torch

def hf_dir(name, hp, vocab=None, seed=0):
    """A Hugging Face directory of random weights for hyperparameters hp
    (the original names): config.json, model.safetensors with every
    tensor the file will hold (loadable.tensors), vocab.pkl of the
    symbols in vocab (if given)."""
    d = path(name)
    os.makedirs(d, exist_ok=True)
    full = dict(hp)
    full.setdefault("max_klen", hp["tgt_len"] + hp["mem_len"])
    full.setdefault("tie_projs", [False] * (len(hp["cutoffs"]) + 1))
    rng = np.random.default_rng(seed)
    tensors = {k: (rng.standard_normal(shape) * 0.1).astype(np.float32)
               for k, (shape, _) in loadable.tensors(full).items()}
    checkpoint.write_safetensors(os.path.join(d, "model.safetensors"),
                                 tensors)
    # HF's names: vocab_size, and tie_word_embeddings (which HF ties on)
    cfg = dict({k: v for k, v in hp.items()
                if k not in ("n_token", "tie_weight")},
               vocab_size=hp["n_token"],
               tie_word_embeddings=hp.get("tie_weight", True))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    if vocab is not None:
        with open(os.path.join(d, "vocab.pkl"), "wb") as f:
            pickle.dump({"idx2sym": vocab, "lower_case": False}, f)
    return d


def run_convert(*args):
    """(exit status, stderr) of convert.py's main, in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = convert.main(list(args))
    return status, err.getvalue()


BASE = dict(n_layer=1, n_head=2, d_model=8, d_head=4, d_inner=8, d_embed=8,
            div_val=1, cutoffs=[], tie_weight=True, pre_lnorm=False,
            attn_type=REL_PARTIAL, tgt_len=4, ext_len=0, mem_len=4,
            clamp_len=-1,
            same_length=False, untie_r=False)


def word_vocab(words):
    return ["<eos>", "<unk>"] + words


def replace_piece(model, old, new):
    """A SentencePiece model proto with piece old renamed new (what
    vocab.to_spm refuses to write)."""
    return proto.edit(model, 1, lambda piece: proto.edit(
        piece, 1, lambda p: new if p == old.encode() else p))


class ConverterAgrees(unittest.TestCase):
    def test_symbol_bytes(self):
        """The bound of a word's bytes is the loader's: 127 x "é" (254
        bytes, 255 with its space) loads; 128 x "é" is refused by the
        converter with a message naming the symbol, and by txlgen when
        written unchecked; 130 x "é" (the case of the report) too."""
        cap = loadable.limits()["TXL_MAX_PIECE_BYTES"]
        ok = (cap - 2) // 2                   # 127
        for n, loads in ((ok, True), (ok + 1, False), (130, False)):
            syms = word_vocab(["the", "cat", "a", "b", "c", "d", "e", "f",
                               "\u00e9" * n, "g"])
            d = hf_dir(f"e{n}", dict(BASE, n_token=len(syms)), syms)
            out = path(f"e{n}.bin")
            status, err = run_convert("--weights", d, "-o", out)
            if loads:
                self.assertEqual(status, 0, err)
                self.assertIsNone(txlgen_loads(out))
                continue
            self.assertEqual(status, 3)
            self.assertRegex(err, rf"^convert\.py: .*vocab\.pkl: symbol 10 "
                             rf"'é+'\.\.\. is {2 * n} bytes: txlgen takes "
                             rf"words of at most {cap - 1}\n$")
            self.assertFalse(os.path.exists(out))
        # the file of ok + 1 written without the checks: txlgen refuses it
        syms = word_vocab(["w%d" % i for i in range(8)] + ["x"])
        proto, meta = vocab.to_spm(vocab.Vocabulary(syms, False, None,
                                                    "wt103", 1, "test"))
        proto = replace_piece(proto, "\u2581x",
                              "\u2581" + "\u00e9" * (ok + 1))
        hp = dict(BASE, n_token=len(syms))
        full = dict(hp, tie_projs=[False], max_klen=8)
        t = {k: np.zeros(s, np.float32)
             for k, (s, _) in loadable.tensors(full).items()}
        with self.assertRaisesRegex(loadable.NotLoadable,
                                    "tokenizer piece 10 is invalid or too "
                                    "long"):
            txlfile.write(path("raw.bin"), hp, t, proto, extra=meta)
        txlfile.write(path("raw.bin"), hp, t, proto, extra=meta,
                      check=False)
        self.assertEqual(txlgen_loads(path("raw.bin")),
                         "tokenizer piece 10 is invalid or too long")

    def test_random_conversions(self):
        """Every file the converter writes from random configurations
        loads in txlgen."""
        rng = random.Random(24)
        written = refused = 0
        for k in range(60):
            hp, vocab_args, syms = self.random_case(rng)
            d = hf_dir(f"r{k}", hp, syms, seed=k)
            out = path(f"r{k}.bin")
            dtype = rng.choice(txlfile.DTYPES)
            status, err = run_convert("--weights", d, "-o", out, "--dtype",
                                      dtype, *vocab_args)
            with self.subTest(k=k, hp=hp, dtype=dtype):
                if status != 0:
                    self.assertEqual(status, 3, err)
                    self.assertEqual(len(err.splitlines()), 1, err)
                    refused += 1
                    continue
                written += 1
                self.assertIsNone(txlgen_loads(out), f"{hp} {dtype}")
        # the case is not vacuous: most configurations are valid
        self.assertGreater(written, 40, f"{refused} refused")

    def random_case(self, rng):
        """(hyperparameters, convert.py's vocabulary arguments, symbols
        for vocab.pkl or None)."""
        kind = rng.choice(("word", "word", "lm1b", "text8", "enwik8",
                           "spm"))
        if kind == "spm":
            n_token, syms, args = 320, None, ["--tokenizer",
                                              mrm.TOKENIZER]
        elif kind == "text8":
            syms = list("_abcdefghijklmnopqrstuvwxyz")
            n_token, args = len(syms), ["--dataset", "text8"]
        elif kind == "enwik8":
            syms = [str(b) for b in sorted(rng.sample(range(256), 40))]
            n_token, args = len(syms), ["--dataset", "enwik8"]
        else:
            # words up to 255 bytes (256 with the space before them: the
            # bound), one vocabulary in ten with one of 256
            words, most = set(), 256 if rng.random() < 0.1 else 255
            while len(words) < rng.randint(10, 60):
                n = rng.choice((1, 3, 8, 120, 127, 200, 254, 255))
                c = rng.choice(("a", "\u00e9", "\u4e2d", "z"))
                w = (c * n).encode()[:rng.choice((n, 254, 255, most))]
                words.add(w.decode(errors="ignore") or "x")
            syms = (["<S>", "<UNK>"] if kind == "lm1b" else
                    ["<eos>", "<unk>"]) + sorted(words)
            n_token = len(syms)
            args = ["--dataset", "lm1b"] if kind == "lm1b" else []
        at = rng.choice((0, 0, 1, 2, 3))
        n_head = rng.choice((1, 2))
        d_head = rng.choice((4, 8, 16, 32))
        d_model = n_head * d_head if at == 3 else rng.choice((8, 16, 32, 64))
        n_cut = rng.choice((0, 0, 1, 2, 3))
        cutoffs = sorted(rng.sample(range(1, n_token), min(n_cut,
                                                           n_token - 1)))
        div_val = rng.choice((1, 1, 2, 4)) if cutoffs else 1
        hp = dict(BASE, n_token=n_token, n_layer=rng.choice((1, 2)),
                  n_head=n_head, d_head=d_head, d_model=d_model,
                  d_inner=rng.choice((8, 32)),
                  d_embed=rng.choice((d_model, 16, 32)), div_val=div_val,
                  cutoffs=cutoffs,
                  tie_projs=[rng.random() < 0.5 for _ in
                             range(len(cutoffs) + 1)],
                  tie_weight=rng.random() < 0.7,
                  pre_lnorm=rng.random() < 0.5, attn_type=at,
                  tgt_len=rng.choice((1, 4, 8)),
                  mem_len=0 if at >= 2 else rng.choice((0, 4, 8)),
                  clamp_len=rng.choice((-1, 0, 3)),
                  same_length=at < 2 and rng.random() < 0.3,
                  untie_r=rng.random() < 0.5)
        return hp, args, syms


if __name__ == "__main__":
    unittest.main()
