#!/usr/bin/python3
"""Broken checkpoints of dwdb/transformer-xl and hostile vocabularies:
models/convert.py refuses each with exactly one line on stderr that
names the file and the problem, exit status 3, nothing on stdout, no
output file, no traceback.

From a valid checkpoint directory (txlgen/dwdb_write.py, two shards; it
converts) each case changes one thing: the index truncated, a shard
truncated, a shard missing, a tensor's, a block's or the object graph's
crc32c wrong, the object graph and the bundle disagreeing, a Keras
checkpoint of another model, a TransformerXL of an inconsistent shape;
vocab.pkl absent, of another length, or a pickle that would call
os.system (nothing runs: the file it would create stays absent).

No torch: this runs where the converter runs.
"""

import os
import pickle
import shutil
import tempfile
import unittest

import numpy as np

import srctree  # noqa: F401 (models/ on sys.path)
import test_badcheckpoints as tbc
from txlgen import dwdb_write

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVERT = os.path.join(ROOT, "models", "convert.py")
SYMS = ["<pad>", "<unk>", "<eos>"] + list("人间三月天，春风十里")
VALUE = dwdb_write.VALUE


def tensors():
    return dwdb_write.random_tensors(len(SYMS), 12, 8, 16, 2, 2, True)


class Evil:
    """A pickle that calls os.system when loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


class TestDwdbBadFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="txl-dwdbbad-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)

    def make(self, name, t=None, vocab=None, **kw):
        d = os.path.join(self.tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        prefix = dwdb_write.write_dir(
            d, t or tensors(), pickle.dumps(SYMS) if vocab is None else vocab,
            saves=1, num_shards=kw.pop("num_shards", 2), **kw)
        return d, prefix

    def refused(self, d, phrase, named, *args):
        out = os.path.join(self.tmp, "out.bin")
        if os.path.exists(out):
            os.unlink(out)
        status, stdout, lines, _ = tbc.run(CONVERT, "--weights", d, "-o",
                                           out, *args, timeout=300)
        self.assertEqual(status, 3, lines)
        self.assertEqual(stdout, "")
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("convert.py: " + named), lines)
        self.assertRegex(lines[0], phrase)
        self.assertNotIn("Traceback", lines[0])
        self.assertFalse(os.path.exists(out))

    def test_valid_converts(self):
        d, _ = self.make("valid")
        out = os.path.join(self.tmp, "valid.bin")
        status, _, lines, _ = tbc.run(CONVERT, "--weights", d, "-o", out)
        self.assertEqual(status, 0, lines)
        self.assertTrue(os.path.exists(out))

    def test_truncated(self):
        d, prefix = self.make("trunc-index")
        with open(prefix + ".index", "rb") as f:
            raw = f.read()
        with open(prefix + ".index", "wb") as f:
            f.write(raw[:-10])
        self.refused(d, "no table magic.*truncated", prefix + ".index")
        d, prefix = self.make("trunc-shard")
        shard = prefix + ".data-00001-of-00002"
        os.truncate(shard, os.path.getsize(shard) - 3)
        self.refused(d, "past the shard's end.*truncated", shard)

    def test_missing_shard(self):
        d, prefix = self.make("no-shard")
        os.unlink(prefix + ".data-00000-of-00002")
        self.refused(d, "a missing shard", prefix + ".data-00000-of-00002")

    def test_crc(self):
        key = "model/projection" + VALUE
        d, prefix = self.make("tensor-crc", bad_tensor_crc=key)
        self.refused(d, "projection.*fails its crc32c", prefix + ".data-")
        d, prefix = self.make("graph-crc",
                              bad_tensor_crc=dwdb_write.OBJECT_GRAPH)
        self.refused(d, "string tensor '_CHECKPOINTABLE_OBJECT_GRAPH' "
                     "fails its crc32c", prefix + ".data-")
        d, prefix = self.make("block-crc", corrupt_block=0)
        self.refused(d, "data block at 0 fails its crc32c",
                     prefix + ".index")

    def test_graph_and_bundle_disagree(self):
        d = os.path.join(self.tmp, "disagree")
        os.makedirs(d, exist_ok=True)
        b = dwdb_write.bundle_tensors(tensors())
        del b["model/logit_bias" + VALUE]
        prefix = os.path.join(d, "xl-ckpt-1")
        from txlgen import tfwrite
        tfwrite.write_bundle(prefix, b)
        with open(os.path.join(d, "vocab.pkl"), "wb") as f:
            f.write(pickle.dumps(SYMS))
        self.refused(d, "the object graph names 'model/logit_bias",
                     prefix + ".index")

    def test_foreign_keras_model(self):
        # a Keras Sequential of two Dense layers, saved by a Checkpoint
        N = dwdb_write.Node
        d0 = dwdb_write.dense("d0", True)
        seq = N([("layer_with_weights-0", d0), ("layer-0", d0)])
        d = os.path.join(self.tmp, "foreign")
        os.makedirs(d, exist_ok=True)
        t = {"layer_with_weights-0/kernel" + VALUE: np.ones((4, 3),
                                                           np.float32),
             "layer_with_weights-0/bias" + VALUE: np.ones(3, np.float32)}
        b = dwdb_write.bundle_tensors(t, graph=seq)
        from txlgen import tfwrite
        prefix = os.path.join(d, "ckpt-1")
        tfwrite.write_bundle(prefix, b)
        with open(os.path.join(d, "vocab.pkl"), "wb") as f:
            f.write(pickle.dumps(SYMS))
        self.refused(d, "no tensor 'model/embedding.*not a checkpoint of "
                     "dwdb/transformer-xl", prefix + ".index")
        # save_weights of it: a root of neither model nor embedding
        b = dwdb_write.bundle_tensors(t, graph=seq, save_weights=True)
        tfwrite.write_bundle(prefix, b)
        self.refused(d, "root has layer-0, layer_with_weights-0: not a "
                     "checkpoint of dwdb", prefix + ".index")

    def test_inconsistent_shapes(self):
        t = tensors()
        k = "multihead_layers/1/rel_multihead_attn/w_head/kernel" + VALUE
        t[k] = t[k][:, :-2]
        d, prefix = self.make("shape", t)
        self.refused(d, r"w_head/kernel.*of shape \[8, 22\], expected "
                     r"\[8, 24\]", prefix + ".index")
        t = tensors()
        t["rw_bias" + VALUE] = t["rw_bias" + VALUE][:, :, :1]
        d, prefix = self.make("heads", t)
        self.refused(d, r"rw_bias of shape \[2, 2, 1, 4\]", prefix + ".index")

    def test_vocab(self):
        d, _ = self.make("no-vocab")
        os.unlink(os.path.join(d, "vocab.pkl"))
        self.refused(d, "no such file.*vocab.pkl: give --vocab",
                     os.path.join(d, "vocab.pkl"))
        d, _ = self.make("short-vocab", vocab=pickle.dumps(SYMS[:-1]))
        self.refused(d, f"{len(SYMS) - 1} symbols, the checkpoint's "
                     f"embedding {len(SYMS)} rows",
                     os.path.join(d, "vocab.pkl"))
        d, _ = self.make("dict-vocab", vocab=pickle.dumps({"a": 1}))
        self.refused(d, "not a pickled list of symbols",
                     os.path.join(d, "vocab.pkl"))
        witness = os.path.join(self.tmp, "ran")
        d, _ = self.make("evil-vocab", vocab=pickle.dumps(Evil(witness)))
        self.refused(d, "posix.system|os.system|not allowed|refus",
                     os.path.join(d, "vocab.pkl"))
        self.assertFalse(os.path.exists(witness))
        # --vocab elsewhere, a directory
        d, _ = self.make("vocab-dir")
        self.refused(d, "not a regular file", self.tmp, "--vocab", self.tmp)


if __name__ == "__main__":
    unittest.main()
