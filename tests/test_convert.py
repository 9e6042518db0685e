#!/usr/bin/python3
"""models/convert.py on every variant of the model (tests/make_random_model
VARIANTS): the file it writes holds the model (read back into txl_ref, the
same log-probs as the model it came from, tied tensors stored once), and a
checkpoint that does not fit its configuration is refused, naming what
does not fit.

Run: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tests/test_convert.py
"""

import json
import os
import shutil
import tempfile
import unittest

import torch

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import convert, random_model as mrm, txl_ref, txlfile
from txlgen.conventions import TABLE_KINDS

TMP = None


def setUpModule():
    global TMP
    TMP = tempfile.mkdtemp(prefix="txl-convert-")
    unittest.addModuleCleanup(shutil.rmtree, TMP, ignore_errors=True)


def build(name, **kw):
    kw = dict(mrm.VARIANTS[name], **kw) if name in mrm.VARIANTS else kw
    return mrm.build(os.path.join(TMP, name), do_convert=False, **kw)


def convert_state(rm, hp, state):
    """convert.py's mapping of state under the configuration hp."""
    path = os.path.join(TMP, "cfg.json")
    with open(path, "w") as f:
        json.dump(hp, f)
    cfg = convert.load_config(path)
    return convert.gather_tensors(cfg, state, "state.pt")


def convert_file(rm):
    """convert.py's work in this process (the CLI is slow to start)."""
    cfg = convert.load_config(rm.config)
    with open(rm.tokenizer, "rb") as f:
        proto = f.read()
    convert.convert(cfg, torch.load(rm.state), proto, rm.path,
                    wpath=rm.state)


class RoundTrip(unittest.TestCase):
    def test_every_variant_reads_back(self):
        for name in mrm.VARIANTS:
            rm = build(name)
            convert_file(rm)
            meta, tensors = txlfile.read(rm.path)
            cfg = rm.cfg
            self.assertEqual(json.loads(meta["attn_type"]), cfg.attn_type)
            self.assertEqual(json.loads(meta["cutoffs"]), cfg.cutoffs)
            self.assertEqual(len(json.loads(meta["tie_projs"])),
                             len(cfg.cutoffs) + 1, name)
            self.assertEqual("max_klen" in meta, cfg.attn_type in TABLE_KINDS)
            if cfg.tie_weight:
                self.assertNotIn("crit.out_layers.0.weight", tensors, name)
            for i, tied in enumerate(cfg.tie_projs):
                self.assertEqual(f"crit.out_projs.{i}" in tensors,
                                 cfg.has_proj() and not tied, f"{name} {i}")
            back = txl_ref.from_tensors(*txlfile.read(rm.path))
            ids = mrm.random_ids(60, cfg.n_token, 2)
            want = rm.score(ids)
            got = txl_ref.score_ids(back, ids, *rm.settings()).tolist()
            self.assertEqual(got, want, name)     # the same weights

    def test_vanilla_transformer_file_has_no_memory(self):
        # built with mem_len 6: tables of tgt_len + 6 rows, run without
        rm = build("a3mem", attn_type=3, tgt_len=8, mem_len=6)
        mrm.convert(rm.config, rm.state, rm.tokenizer, rm.path)   # the CLI
        meta, tensors = txlfile.read(rm.path)
        self.assertEqual(meta["mem_len"], "0")
        self.assertEqual(meta["max_klen"], "14")
        self.assertEqual(list(tensors["r_emb"].shape), [2, 14, 2, 16])
        with self.assertRaisesRegex(ValueError, "mem_len 0 only"):
            txl_ref.score_ids(rm.model, [1, 2, 3], 2, mem_len=4)


class Refusals(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.div2 = build("div2")
        cls.adaptive = build("adaptive")
        cls.attn1 = build("attn1")

    def refused(self, rm, pattern, state=None, hp=None, **changes):
        """rm's checkpoint (or state) under its configuration (or hp) with
        changes is refused with a message matching pattern."""
        state = torch.load(rm.state) if state is None else state
        hp = dict(hp or rm.cfg.hparams(), **changes)
        with self.assertRaisesRegex(convert.ConvertError, pattern):
            convert_state(rm, hp, state)

    def test_config_without_the_checkpoints_clusters(self):
        self.refused(self.div2, r"'word_emb.emb_layers.0.weight' has shape "
                     r"\[40, 48\], expected \[320, 48\].*div_val 1",
                     div_val=1)
        self.refused(self.adaptive, "'crit.cluster_weight' has no place",
                     cutoffs=[], tie_projs=[False])

    def test_tied_copy_must_equal(self):
        state = torch.load(self.div2.state)       # tied: one tensor
        state["crit.out_layers.1.weight"] = \
            state["crit.out_layers.1.weight"] + 1
        self.refused(self.div2, "'crit.out_layers.1.weight' differs from "
                     "'word_emb.emb_layers.1.weight'.*tie_weight", state)
        self.refused(self.div2, r"'crit.out_projs.0' differs from "
                     r"'word_emb.emb_projs.0'.*tie_projs\[0\]",
                     tie_projs=[True, True, True])

    def test_position_tables_must_fit(self):
        hp = self.attn1.cfg.hparams()
        del hp["max_klen"]
        self.refused(self.attn1, r"r_emb has 16 rows per layer, the config "
                     r"max_klen 28.*\"max_klen\": 16", hp=hp, mem_len=20)
        self.refused(self.attn1, r"'r_w_bias' has shape \[2, 2, 16\], "
                     r"expected \[2, 16\].*attn_type 0", attn_type=0)
        self.refused(self.attn1, "'r_emb' has no place.*attn_type 0",
                     attn_type=0, untie_r=True,
                     state=dict(torch.load(self.attn1.state),
                                r_r_bias=torch.zeros(2, 2, 16),
                                **{f"layers.{i}.dec_attn.r_net.weight":
                                   torch.zeros(32, 32) for i in range(2)}))

    def test_impossible_configs(self):
        for hp, pattern in [
                (dict(cutoffs=[40, 20]), "must increase strictly"),
                (dict(cutoffs=[40, 320]), "must increase strictly"),
                (dict(attn_type=4), "attn_type 4 does not exist"),
                (dict(attn_type=3, d_head=10), "must equal d_model"),
                (dict(div_val=8, cutoffs=[10, 20], d_embed=32),
                 r"8\*\*2 is 0"),
                (dict(tie_projs=[False, True], cutoffs=[]),
                 "2 entries, the model has 1 clusters"),
                (dict(attn_type=2, same_length=True, mem_len=0),
                 "masks every key")]:
            self.refused(self.attn1, pattern, **dict(dict(attn_type=0),
                                                     **hp))



class TestQ4Weights(unittest.TestCase):
    """txlfile.quantize_q4_0_weights, the rounding of Q4_0 weight files:
    the scale of least squared error among its candidates."""

    def test_error_below_the_simple_rule(self):
        """On N(0, 1) blocks, and on blocks with an outlier, the squared
        error is below quantize_q4_0's (d = m / -8) by at least 5% (the
        default model's weights: 11%), and no block does worse than 1.05
        times the simple rule's (one of the candidates is close to it)."""
        import numpy as np
        rng = np.random.default_rng(1)
        x = rng.standard_normal((4096, 32)).astype(np.float32)
        x[::7, 3] *= 6                              # outliers
        shape = x.shape

        def err(blocks):
            y = txlfile.dequantize_q4_0(blocks.tobytes(), shape)
            return ((y.astype(np.float64) - x) ** 2).sum(axis=1)

        best = err(txlfile.quantize_q4_0_weights(x))
        simple = err(txlfile.quantize_q4_0(x))
        self.assertLess(best.sum(), 0.95 * simple.sum())
        self.assertTrue((best <= 1.05 * simple + 1e-12).all())

    def test_zero_and_bad_blocks(self):
        """A zero block is stored with d = +0 and every q 8; a weight that
        is NaN, inf or past an F16 scale's range is refused."""
        import numpy as np
        b = txlfile.quantize_q4_0_weights(np.zeros(32, np.float32))
        self.assertEqual(b["d"].view(np.uint16)[0], 0)
        self.assertTrue((b["qs"] == 0x88).all())
        for bad in (np.nan, np.inf, 65504.0 * 8 * 2):
            x = np.ones(32, np.float32)
            x[5] = bad
            with self.assertRaisesRegex(ValueError,
                                        "too large|NaN or infinite"):
                txlfile.quantize_q4_0_weights(x)


class TestQ4K(unittest.TestCase):
    """txlfile.quantize_q4_k and txlfile.gptq_q4_k, the roundings of
    Q4_K weight files, and txlfile.py --calibrate."""

    def test_error_below_q4_0(self):
        """On N(0, 1) rows with outliers, Q4_K's squared error is below
        Q4_0's (same bits per weight); the fields are in range and the
        blocks decode as lib/txl-dtype.h says (dequantize_q4_k)."""
        import numpy as np
        rng = np.random.default_rng(2)
        x = rng.standard_normal((64, 384)).astype(np.float32)
        x[::5, 17] *= 6
        k = txlfile.quantize_q4_k(x)
        self.assertEqual(k.nbytes, x.size // 128 * 72)
        self.assertFalse((k["d"].view(np.uint16) & 0x8000).any())
        y = txlfile.dequantize_q4_k(k.tobytes(), x.shape)
        q0 = txlfile.dequantize_q4_0(
            txlfile.quantize_q4_0_weights(x).tobytes(), x.shape)
        self.assertLess(((y - x) ** 2).sum(), 0.9 * ((q0 - x) ** 2).sum())
        # by hand: sub-block 1 of block 0, value 3
        b = k[0]
        sz = b["sz"]
        sc, z = sz[1] & 63, (sz[1] >> 6) | ((sz[4] >> 4) & 15) << 2
        q = b["qs"][16 + 3] & 15
        u = np.float32(b["d"]) * np.float32(sc) / 4
        self.assertEqual(y[0, 35], u * (4 * int(q) - int(z)))

    def test_gptq_beats_rounding_on_correlated_inputs(self):
        """With inputs whose columns correlate, the output error
        (W - Q) X of GPTQ's blocks is below that of the nearest values'."""
        import numpy as np
        rng = np.random.default_rng(3)
        w = rng.standard_normal((32, 256)).astype(np.float32)
        base = rng.standard_normal((2048, 16))
        xs = base @ rng.standard_normal((16, 256)) + \
            0.1 * rng.standard_normal((2048, 256))
        g = txlfile.gptq_q4_k(w, xs.T @ xs)
        r = txlfile.quantize_q4_k(w)

        def out_err(blocks):
            v = txlfile.dequantize_q4_k(blocks.tobytes(), w.shape)
            return (((w - v).astype(np.float64) @ xs.T) ** 2).sum()
        self.assertLess(out_err(g), 0.8 * out_err(r))

    def test_calibrate_metadata(self):
        """--calibrate TEXT: the text's name, size and sha256 in the
        metadata, and a file txlgen's checks (loadable.py) take."""
        import hashlib
        rm = mrm.build(os.path.join(TMP, "row128"), n_layer=1, d_model=128,
                       n_head=2, d_head=64, d_inner=128)
        text = os.path.join(TMP, "calib.txt")
        data = "the cat sat on the mat. " * 40
        with open(text, "w") as f:
            f.write(data)
        out = os.path.join(TMP, "q4_k.bin")
        txlfile.restore(rm.path, out, "Q4_K", calibrate=text)
        txlfile.check_file(out)
        meta, t = txlfile.read(out)
        self.assertEqual(meta["calibration_text"], "calib.txt")
        self.assertEqual(meta["calibration_bytes"], str(len(data)))
        self.assertEqual(meta["calibration_sha256"],
                         hashlib.sha256(data.encode()).hexdigest())
        with self.assertRaisesRegex(txlfile.ModelFileError, "Q4_K"):
            txlfile.restore(rm.path, out, "Q4_0", calibrate=text)


if __name__ == "__main__":
    unittest.main()
