#!/usr/bin/python3
"""Tokenizer round trip: libtxl's tokenizer (the SentencePiece model stored
in the model file) against SentencePiece's own Python module.

tests/test-spm.c (path in $TEST_SPM, set by meson test) loads a model file
made by tests/make_random_model.py and prints the special ids, every
vocabulary piece as txl_token_piece() renders it, and for each text the
ids of txl_tokenize() and the bytes of txl_detokenize() of those ids.
Those must equal, for many texts (ASCII, accents, CJK, emoji, invalid
UTF-8, NUL, control characters, runs of spaces, empty, long):
  ids      == SentencePieceProcessor.encode(text)
  detok    == SentencePieceProcessor.decode(ids)
  piece(i) == the piece with '▁' as a space, <0xNN> as that byte, control
              tokens empty (the unknown token is not checked)
"""

import os
import shutil
import subprocess
import tempfile
import unittest

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import random_model as mrm


TEST_SPM = mrm.find_program("TEST_SPM", "tests", "test-spm")


def texts():
    with open(os.path.join(mrm.DATA, "text.txt"), "rb") as f:
        corpus = f.read()
    out = [line for line in corpus.split(b"\n") if line]
    out += [
        b"", b" ", b"a", b"hello", b"  leading and trailing  ",
        b"runs   of\t\tspaces\n\nand newlines\r\n", corpus,
        "Café naïve façade déjà vu — “quotes” ‘single’ …".encode(),
        "日本語のテキスト、中文文本，한국어 텍스트".encode(),
        "emoji 🙂🚀 and symbols ∑∫√ ≤ ≥ €".encode(),
        "ﬁ ligature, full-width ＡＢＣ １２３, ½ (NFKC)".encode(),
        b"invalid \xff\xfe utf-8 \xc3( and truncated \xe2\x82",
        b"nul \x00 byte and control \x01\x1b[0m chars",
        b"x" * 3000, ("word " * 700).encode(),
    ]
    return out


class TestTokenizer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if TEST_SPM is None:
            raise unittest.SkipTest("no test-spm helper (set TEST_SPM)")
        import sentencepiece as spm
        cls.tmp = tempfile.mkdtemp(prefix="txl-spm-")
        rm = mrm.build(os.path.join(cls.tmp, "m"), n_layer=1, d_model=16,
                       n_head=2, d_head=8, d_inner=16)
        cls.sp = spm.SentencePieceProcessor(model_file=mrm.TOKENIZER)
        cls.texts = texts()
        r = subprocess.run([TEST_SPM, rm.path], capture_output=True,
                           input=b"".join(t.hex().encode() + b"\n"
                                          for t in cls.texts), timeout=60)
        cls.rc, cls.err = r.returncode, r.stderr.decode(errors="replace")
        cls.out = r.stdout.decode().split("\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_helper_ok(self):
        self.assertEqual(self.rc, 0, self.err)

    def test_special_ids(self):
        sp = self.sp
        bos, eos, unk, n = map(int, self.out[0].split())
        self.assertEqual((bos, eos, unk, n),
                         (sp.bos_id(), sp.eos_id(), sp.unk_id(),
                          sp.get_piece_size()))

    def test_pieces(self):
        sp = self.sp
        n = sp.get_piece_size()
        got = self.out[1:1 + n]
        for i in range(n):
            p = sp.id_to_piece(i)
            if sp.is_unknown(i):
                continue
            if sp.is_control(i):
                want = b""
            elif sp.is_byte(i):
                want = bytes([int(p[3:5], 16)])
            else:
                want = p.replace("\u2581", " ").encode()
            self.assertEqual(bytes.fromhex(got[i]) if got[i] != "-"
                             else None, want, f"piece {i} {p!r}")

    def test_round_trip(self):
        n = self.sp.get_piece_size()
        lines = self.out[1 + n:]
        self.assertGreaterEqual(len(lines), len(self.texts))
        for k, text in enumerate(self.texts):
            ids_s, _, detok = lines[k].partition("\t")
            ids = [int(t) for t in ids_s.split()]
            label = repr(text[:60])
            self.assertEqual(ids, self.sp.encode(text), label)
            self.assertEqual(bytes.fromhex(detok),
                             self.sp.decode(ids).encode(), label)


if __name__ == "__main__":
    unittest.main()
