#!/usr/bin/python3
"""Broken checkpoints of the TF code and hostile corpus caches:
models/convert.py refuses each with exactly one line on stderr that names
the file and the problem, exit status 3 (convert.py's status for bad
input, as for every other checkpoint it reads), nothing on stdout, no
output file, no traceback, and within bounded memory (a parent reports
the child's peak resident memory).

From a valid checkpoint directory (txlgen/tfwrite.py; it converts) each
case changes one thing: the index truncated, a shard truncated, a
block's or a tensor's crc32c wrong, a tensor's offset past its shard's
end, a shape whose byte count overflows 64 bits, a dtype TF has but
txlgen does not read (string), a missing shard; a cache.pkl that names
os.system (nothing runs: the file it would create stays absent), one
whose array claims 2^40 values over a few bytes, one whose corpus is a
Python list too large to build.  And the other way: a cache.pkl whose
256 MB corpus array converts in a fraction of that memory (its bytes are
never read).

No torch: this runs where the converter runs.
"""

import collections
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

import srctree  # noqa: F401 (models/ on sys.path)
import test_badcheckpoints as tbc
from txlgen import checkpoint, tfckpt, tfwrite
from txlgen.proto import varint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVERT = os.path.join(ROOT, "models", "convert.py")
# Peak resident memory allowed (KiB): Python, numpy and SentencePiece
MAX_RSS = 120 << 10

SYMBOLS = ["<eos>"] + [f"w{i}" for i in range(39)]


def run(*args):
    """(exit status, stdout, stderr lines, peak RSS in KiB) of convert.py
    with args."""
    return tbc.run(CONVERT, *args, timeout=300)


def small_tensors():
    """The TF tensors of a 1-layer model of 40 words (div_val 1, no
    cutoffs, d_model 8, 2 heads of 4), random."""
    rng = np.random.default_rng(0)
    T = "transformer/"
    t = {T + "r_w_bias": (2, 4), T + "r_r_bias": (2, 4),
         T + "adaptive_embed/lookup_table": (40, 8),
         T + "adaptive_softmax/bias": (40,)}
    L = T + "layer_0/"
    t.update({L + "rel_attn/qkv/kernel": (8, 24), L + "rel_attn/r/kernel":
              (8, 8), L + "rel_attn/o/kernel": (8, 8),
              L + "rel_attn/LayerNorm/gamma": (8,),
              L + "rel_attn/LayerNorm/beta": (8,),
              L + "ff/layer_1/kernel": (8, 16), L + "ff/layer_1/bias": (16,),
              L + "ff/layer_2/kernel": (16, 8), L + "ff/layer_2/bias": (8,),
              L + "ff/LayerNorm/gamma": (8,), L + "ff/LayerNorm/beta": (8,)})
    out = {k: rng.standard_normal(s).astype(np.float32)
           for k, s in t.items()}
    out["global_step"] = np.array(7, np.int64)
    return out


def cache_pickle(train=None, obj=None):
    vocab = tfwrite.tf_vocab(SYMBOLS, special=["<eos>"])
    if obj is not None:
        return tfwrite.py2_pickle(obj)
    arrays = {"train": np.arange(100, dtype=np.int64) % 40 if train is None
              else train, "valid": np.zeros(3, np.int64),
              "test": np.zeros(3, np.int64)}
    return tfwrite.py2_pickle(tfwrite.tf_corpus("wt103", vocab, arrays, []))


INFO = {"vocab_size": 40, "cutoffs": [], "dataset": "wt103"}


class TestTable(unittest.TestCase):
    """The reader on a table assembled here byte by byte from the LevelDB
    format's description (not by txlgen/tfwrite.py): one uncompressed data
    block whose second key shares a prefix with the first, with two
    restart points; an empty metaindex; the index; the footer."""

    def test_hand_made_table(self):
        import crc32c
        self.assertEqual(crc32c.crc32c(b"123456789"), 0xE3069283)
        self.assertEqual(tfckpt.mask(0), 0xa282ead8)

        def block(body, restarts):
            raw = body + b"".join(struct.pack("<I", r) for r in restarts) \
                + struct.pack("<I", len(restarts))
            crc = crc32c.crc32c(raw + b"\0")
            crc = (((crc >> 15) | (crc << 17)) + 0xa282ead8) & 0xffffffff
            return raw + b"\0" + struct.pack("<I", crc), len(raw)
        # key "" -> b"HDR"; "ab/c" -> b"v1" shares nothing (a restart);
        # "ab/d" -> b"v22" shares "ab/" (3 bytes)
        body = (bytes([0, 0, 3]) + b"HDR" + bytes([0, 4, 2]) + b"ab/cv1" +
                bytes([3, 1, 3]) + b"dv22")
        data, n = block(body, [0, 6])
        meta, m = block(b"", [0])
        index_body = bytes([0, 4, 2]) + b"ab/d" + bytes([0, n])
        index, k = block(index_body, [0])
        footer = bytes([len(data), m, len(data) + len(meta), k])
        footer += bytes(40 - len(footer)) + struct.pack("<Q", tfckpt.MAGIC)
        p = os.path.join(tempfile.mkdtemp(prefix="txl-table-"), "t.index")
        with open(p, "wb") as f:
            f.write(data + meta + index + footer)
        t = tfckpt.Table(p)
        self.assertEqual(t.entries, [(b"", b"HDR"), (b"ab/c", b"v1"),
                                     (b"ab/d", b"v22")])
        shutil.rmtree(os.path.dirname(p))

    def test_block_checks(self):
        """Entries and restart points that disagree, keys out of order."""
        def refused(body, restarts, phrase):
            with self.assertRaisesRegex(checkpoint.CheckpointError,
                                        "^b: " + phrase):
                tfckpt.block_entries(block_bytes(body, restarts), "b")
        a, b = bytes([0, 2, 1]) + b"abX", bytes([1, 1, 1]) + b"cY"
        self.assertEqual(tfckpt.block_entries(block_bytes(a + b), "b"),
                         [(b"ab", b"X"), (b"ac", b"Y")])
        refused(a + b, [0, 6], "an entry at a restart point shares")
        refused(a + b, [0, 3], "a restart point inside an entry")
        refused(a + b, [6, 0], "restart points out of order")
        refused(a + b, [2], "restart points out of order")
        refused(a + bytes([1, 0, 1]) + b"Y", [0], r"keys out of order")
        refused(a + bytes([3, 1, 1]) + b"cY", [0], "an entry runs past")
        refused(a + bytes([0, 2, 1]) + b"abY", [0], r"keys out of order "
                r"\(b'ab', b'ab'\)")
        with self.assertRaisesRegex(checkpoint.CheckpointError,
                                    "keys out of order"):
            tfckpt.block_entries(block_bytes(a), "b", after=b"ab")
        big = bytes([0]) + varint(tfckpt.MAX_KEY + 1) + bytes([0]) + \
            b"k" * (tfckpt.MAX_KEY + 1)
        refused(big, [0], "a key of 65,537 bytes")


def block_bytes(body, restarts=(0,)):
    """A table block: entries' bytes, restart offsets, their count."""
    return body + b"".join(struct.pack("<I", r) for r in restarts) + \
        struct.pack("<I", len(restarts))


def header_entry():
    """The entry of key "" (the bundle header) at a block's start."""
    h = tfwrite.header_proto()
    return bytes([0, 0, len(h)]) + h


def hostile_index(path, blocks, refs=None):
    """Write a table of data blocks (the bytes of each, snappy-compressed
    here) whose index points at blocks[r] for each r of refs (each block
    once by default), under separator keys above any key of the tests."""
    import snappy
    out, handles = bytearray(), []

    def write(stored):
        handle = varint(len(out)) + varint(len(stored) - 1)
        out.extend(stored + struct.pack("<I",
                                        tfckpt.mask(tfckpt.crc32c(stored))))
        return handle
    for raw in blocks:
        handles.append(write(snappy.compress(raw) + b"\1"))
    index = tfwrite._Block(1)
    for j, r in enumerate(range(len(blocks)) if refs is None else refs):
        index.add(b"\xff" * 8 + j.to_bytes(4, "big"), handles[r])
    footer = write(block_bytes(b"") + b"\0") + write(index.finish() + b"\0")
    footer += bytes(40 - len(footer)) + struct.pack("<Q", tfckpt.MAGIC)
    with open(path, "wb") as f:
        f.write(out + footer)
    return len(out) + len(footer)


class TestTFBadFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="txl-tfbad-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)

    def make(self, name, cache=None, **kw):
        d = os.path.join(self.tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        prefix = tfwrite.write_tf_dir(d, kw.pop("tensors", small_tensors()),
                                      cache or cache_pickle(), INFO, **kw)
        return d, prefix

    def refused(self, d, phrase, named, max_rss=MAX_RSS):
        out = os.path.join(self.tmp, "out.bin")
        if os.path.exists(out):
            os.unlink(out)
        status, stdout, lines, rss = run("--weights", d, "-o", out)
        self.assertEqual(status, 3, lines)
        self.assertEqual(stdout, "")
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("convert.py: " + named), lines)
        self.assertRegex(lines[0], phrase)
        self.assertNotIn("Traceback", lines[0])
        self.assertLess(rss, max_rss)
        self.assertFalse(os.path.exists(out))

    def test_valid_converts(self):
        d, _ = self.make("valid")
        out = os.path.join(self.tmp, "valid.bin")
        status, _, lines, rss = run("--weights", d, "-o", out)
        self.assertEqual(status, 0, lines)
        self.assertTrue(os.path.exists(out))

    def test_index(self):
        d, prefix = self.make("trunc-index")
        with open(prefix + ".index", "rb") as f:
            raw = f.read()
        with open(prefix + ".index", "wb") as f:
            f.write(raw[:-10])
        self.refused(d, "no table magic.*truncated", prefix + ".index")
        # the footer kept, a block cut out of the middle
        with open(prefix + ".index", "wb") as f:
            f.write(raw[:20] + raw[-48:])
        self.refused(d, "past the end of the table", prefix + ".index")
        d, prefix = self.make("block-crc", corrupt_block=0)
        self.refused(d, "data block at 0 fails its crc32c", prefix + ".index")

    def test_index_bombs(self):
        """Indexes of a few MB that parse into tens of millions of
        entries or gigabytes of keys: each refused early, in bounded
        memory (refused() checks the child's peak RSS)."""
        d, prefix = self.make("bomb")
        index = prefix + ".index"
        # four blocks that each inflate to 64 MiB of 5-byte entries
        n = ((64 << 20) - 64) // 5
        big = block_bytes(header_entry() + b"\0\1\1kv" * n)
        size = hostile_index(index, [big] * 4)
        self.assertLess(size, 16 << 20)
        self.refused(d, "data block at 0 inflates to 67,108,8", index)
        # within a block's bound, a key repeated: refused at the third
        hostile_index(index, [block_bytes(header_entry() +
                                          b"\0\1\1kv" * 1000000)])
        self.refused(d, r"data block at 0: keys out of order \(b'k', b'k'\)",
                     index)
        # increasing keys, more entries than any bundle has: the million
        # kept before the limit trips take some 170 MB
        n = tfckpt.MAX_ENTRIES + 10
        body = b"".join(b"\0\4\0" + i.to_bytes(4, "big")
                        for i in range(1, n))
        hostile_index(index, [block_bytes(header_entry() + body)])
        self.refused(d, "more than 1,000,000 entries", index, 512 << 10)
        # 7-byte entries that each share a 60,000-byte prefix
        first = bytes([0]) + varint(60002) + bytes([0]) + b"k" * 60000 + \
            b"\0\0"
        shared = varint(60000) + bytes([2, 0])
        body = first + b"".join(shared + i.to_bytes(2, "big")
                                for i in range(1, 60000))
        hostile_index(index, [block_bytes(header_entry()), block_bytes(body)])
        self.refused(d, "more than 67,108,864 bytes of keys and values",
                     index)
        # one 16 MiB block named 17 times: refused before it is inflated
        n = (tfckpt.MAX_BLOCK - 64) // 5
        hostile_index(index, [block_bytes(header_entry() +
                                          b"\0\1\1kv" * n)], [0] * 17)
        self.refused(d, "data blocks of more than 268,435,456 bytes "
                     "inflated", index)

    def test_data(self):
        d, prefix = self.make("trunc-data")
        shard = prefix + ".data-00000-of-00001"
        with open(shard, "r+b") as f:
            f.truncate(os.path.getsize(shard) - 4)
        self.refused(d, "past the shard's end.*truncated", shard)
        d, prefix = self.make(
            "tensor-crc", bad_tensor_crc="transformer/layer_0/ff/layer_1/bias")
        self.refused(d, "'transformer/layer_0/ff/layer_1/bias' fails its "
                     "crc32c", prefix + ".data-00000-of-00001")
        d, prefix = self.make("no-shard")
        os.unlink(prefix + ".data-00000-of-00001")
        self.refused(d, "missing shard", prefix + ".data-00000-of-00001")

    def entries(self, d, prefix, change):
        """Rewrite the index with change(name, Entry) -> Entry applied."""
        t = tfckpt.Table(prefix + ".index")
        out = [t.entries[0]]
        for k, v in t.entries[1:]:
            e = tfckpt.parse_entry(k.decode(), v)
            e = change(e.name, e)
            out.append((k, tfwrite.entry_proto(e.dtype, e.shape, e.shard,
                                               e.offset, e.size, e.crc)))
        with open(prefix + ".index", "wb") as f:
            f.write(tfwrite.table(out))

    def test_entries(self):
        name = "transformer/layer_0/rel_attn/o/kernel"
        d, prefix = self.make("offset")
        self.entries(d, prefix, lambda n, e: e._replace(offset=1 << 40)
                     if n == name else e)
        self.refused(d, "at 1,099,511,627,776 of 256 bytes lies past the "
                     "shard's end", prefix + ".data-00000-of-00001")
        d, prefix = self.make("overflow")
        self.entries(d, prefix, lambda n, e: e._replace(
            shape=(1 << 40, 1 << 40, 1 << 40), size=256) if n == name else e)
        self.refused(d, "size overflows", prefix + ".index")
        d, prefix = self.make("dtype")
        self.entries(d, prefix, lambda n, e: e._replace(dtype=7)
                     if n == name else e)
        self.refused(d, "dtype 7 is none of float", prefix + ".index")

    def test_cache_runs_nothing(self):
        marker = os.path.join(self.tmp, "pwned")
        evil = tfwrite.Py2Reduce("posix", "system", (f"touch {marker}",))
        vocab = tfwrite.tf_vocab(SYMBOLS, special=["<eos>"])
        corpus = tfwrite.tf_corpus("wt103", vocab, {"train": evil}, [])
        d, _ = self.make("evil", cache=cache_pickle(obj=corpus))
        self.refused(d, "refused: the pickle names 'posix.system'",
                     os.path.join(d, "data", "cache.pkl"))
        self.assertFalse(os.path.exists(marker))

    def test_cache_arrays(self):
        # an array that claims 2^40 values over 800 bytes
        raw = cache_pickle(train=np.arange(100, dtype=np.int64))
        shape = b"Kd\x85"
        self.assertEqual(raw.count(shape), 1)
        raw = raw.replace(shape, b"\x8a\x06" + (1 << 40).to_bytes(6, "little")
                          + b"\x85")
        d, _ = self.make("claims", cache=raw)
        self.refused(d, r"shape \[1099511627776\] of i8 needs "
                     "8,796,093,022,208 bytes, the pickle holds 800",
                     os.path.join(d, "data", "cache.pkl"))
        # a corpus as a Python list, past what is built in memory
        vocab = tfwrite.tf_vocab(SYMBOLS, special=["<eos>"])
        corpus = tfwrite.tf_corpus("wt103", vocab,
                                   {"train": list(range(200000))}, [])
        p = os.path.join(self.tmp, "list.pkl")
        with open(p, "wb") as f:
            f.write(tfwrite.py2_pickle(corpus))
        with mock.patch.object(checkpoint, "MAX_CACHE_REST", 1 << 18):
            with self.assertRaisesRegex(checkpoint.CheckpointError,
                                        "list.pkl: more than 262,144 bytes of "
                                        "pickle besides its arrays' data"):
                checkpoint.load_corpus_cache(p)
        obj, py2 = checkpoint.load_corpus_cache(p)      # the real bound
        self.assertEqual(len(obj.train), 200000)

    def test_cache_amplifiers(self):
        """Pickles whose every byte makes an object: refused before any
        is made, by the converter in bounded memory (16 MB of EMPTY_SET
        took 3.8 GB), or in-process with the bound lowered."""
        cache = cache_pickle()
        self.assertEqual(cache[:2], b"\x80\x02")
        d, _ = self.make("sets", cache=b"\x80\x04" + b"\x8f" * (16 << 20) +
                         b".")
        self.refused(d, "a pickle of more than 1,048,576 dicts and sets",
                     os.path.join(d, "data", "cache.pkl"))
        # a protocol 2 pickle (the cache's own) with protocol 4's opcodes
        at = len(cache) - 1
        self.assertEqual(cache[at:], b".")
        d, _ = self.make("proto", cache=cache[:at] + b"\x8f0" + cache[at:])
        self.refused(d, r"not a readable pickle \(EMPTY_SET, of protocol 4, "
                     f"in a pickle of protocol 2 at byte {at}\)",
                     os.path.join(d, "data", "cache.pkl"))
        d, _ = self.make("proto3", cache=cache[:at] + b"C\x01x0" +
                         cache[at:])
        self.refused(d, "SHORT_BINBYTES, of protocol 3, in a pickle of "
                     "protocol 2", os.path.join(d, "data", "cache.pkl"))
        # lists: objects of a vocabulary, past what one holds
        p = os.path.join(self.tmp, "lists.pkl")
        with open(p, "wb") as f:
            f.write(cache[:at] + b"]0" * 2000 + cache[at:])
        with mock.patch.object(checkpoint, "MAX_OBJECTS", 1000):
            with self.assertRaisesRegex(checkpoint.CheckpointError,
                                        "lists.pkl: a pickle of more than "
                                        "1,000 objects$"):
                checkpoint.load_corpus_cache(p)
        obj, _ = checkpoint.load_corpus_cache(p)        # the real bound
        self.assertEqual(obj.vocab.idx2sym[:2], ["<eos>", "w0"])

    def test_python3_cache(self):
        """A corpus cache Python 3 wrote at protocol 2 (numpy's bytes as
        _codecs.encode of a latin-1 text, symbols as unicode): its
        vocabulary is read, its arrays' shapes checked, the long one
        skipped."""
        import pickle
        import types
        mods = {}
        for mod, cls in (("data_utils", "Corpus"), ("vocabulary", "Vocab")):
            m = types.ModuleType(mod)
            c = type(cls, (), {"__module__": mod})
            setattr(m, cls, c)
            mods[mod] = m
        with mock.patch.dict(sys.modules, mods):
            v = mods["vocabulary"].Vocab()
            v.idx2sym = ["<eos>", "été", "b"]
            v.sym2idx = collections.OrderedDict(
                (w, i) for i, w in enumerate(v.idx2sym))
            v.lower_case, v.delimiter = False, None
            c = mods["data_utils"].Corpus()
            c.vocab, c.dataset = v, "wt103"
            c.train = np.arange(50000, dtype=np.int64) + 200
            c.test = np.arange(3, dtype=np.int64)
            raw = pickle.dumps(c, protocol=2)
        p = os.path.join(self.tmp, "py3.pkl")
        with open(p, "wb") as f:
            f.write(raw)
        obj, py2 = checkpoint.load_corpus_cache(p)
        self.assertFalse(py2)
        self.assertEqual(obj.vocab.idx2sym, ["<eos>", "été", "b"])
        self.assertEqual((obj.train.shape, obj.test.shape),
                         ((50000,), (3,)))
        from txlgen import vocab
        self.assertEqual(vocab.read_vocab(p).symbols, ["<eos>", "été", "b"])

    def test_large_corpus_array_is_not_read(self):
        n = 32 << 20                                      # 256 MB of int64
        d, _ = self.make("large")
        cache = os.path.join(d, "data", "cache.pkl")
        head = cache_pickle(train=np.zeros(1, np.int64))
        one = b"U\x08" + bytes(8)
        self.assertEqual(head.count(one), 1)
        at = head.index(one)
        shape = b"K\x01\x85"
        before = head[:at].replace(shape, b"J" + struct.pack("<i", n) +
                                   b"\x85")
        with open(cache, "wb") as f:
            f.write(before + b"T" + struct.pack("<i", 8 * n))
            f.seek(8 * n, os.SEEK_CUR)                    # zeros, sparse
            f.write(head[at + len(one):])
        out = os.path.join(self.tmp, "large.bin")
        status, _, lines, rss = run("--weights", d, "-o", out)
        self.assertEqual(status, 0, lines)
        self.assertLess(rss, MAX_RSS)
        obj, _ = checkpoint.load_corpus_cache(cache)
        self.assertEqual((obj.train.shape, obj.train.nbytes), ((n,), 8 * n))


if __name__ == "__main__":
    unittest.main()
