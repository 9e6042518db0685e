#!/usr/bin/python3
"""The shell scripts of models/ as models/README.md runs them, on a tiny
corpus: tokenizer.sh trains a tokenizer, retrain.sh with
TOKENIZER=models/sotu.bin runs its three stages a few steps each and
exports a model that txlgen loads, and retrain-span.sh, a few steps,
exports an adaptive-span model with the default model's tokenizer.

Run: TXLGEN=build/cmd/txlgen OMP_WAIT_POLICY=PASSIVE \\
     /usr/bin/python3 tests/test_scripts.py
(without TXLGEN the exported model is not run).
"""

import os
import random
import shutil
import subprocess
import tempfile
import unittest

import srctree  # noqa: F401 (models/ on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(os.path.dirname(HERE), "models")
from test_train import make_text  # noqa: E402

TMP = None


def setUpModule():
    global TMP
    TMP = tempfile.mkdtemp(prefix="txl-scripts-")
    rng = random.Random(5)
    with open(os.path.join(TMP, "train.txt"), "w") as f:
        f.write(make_text(rng, 150))
    with open(os.path.join(TMP, "valid.txt"), "w") as f:
        f.write(make_text(rng, 5))


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def sh(*args, env=None):
    p = subprocess.run(args, capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, **(env or {})))
    if p.returncode:
        raise AssertionError(f"{args} exited {p.returncode}:\n{p.stderr}")
    return p


class ScriptsTest(unittest.TestCase):
    def generate(self, model):
        """txlgen loads the model and generates from it."""
        txlgen = os.environ.get("TXLGEN")
        if not txlgen:
            self.skipTest("TXLGEN is not set: the export is not run")
        p = sh(txlgen, "-m", model, "-p", "The Congress", "-n", "3",
               "--temp", "0")
        self.assertTrue(p.stdout.strip())

    def test_tokenizer_sh(self):
        prefix = os.path.join(TMP, "spm")
        p = sh(os.path.join(MODELS, "tokenizer.sh"),
               os.path.join(TMP, "train.txt"), prefix, "300")
        self.assertEqual(p.stdout.strip(), prefix + ".model")
        self.assertTrue(os.path.getsize(prefix + ".model") > 0)
        self.assertTrue(os.path.isfile(prefix + ".vocab"))

    def test_retrain_sh_with_the_default_models_tokenizer(self):
        run = os.path.join(TMP, "run")
        shape = ("--layers 1 --d-model 16 --heads 2 --d-head 8 "
                 "--d-inner 32 --mem-len 8")
        sh(os.path.join(MODELS, "retrain.sh"), run, env={
            "DATA": TMP, "TOKENIZER": os.path.join(MODELS, "sotu.bin"),
            "SHAPE": shape, "DTYPE": "F32",
            "TRAIN_ARGS": "--steps 2 --batch 2 --seg-len 8 --threads 1 "
                          "--eval-every 2 --save-every 2 --log-every 1"})
        model = os.path.join(run, "sotu.bin")
        self.assertTrue(os.path.isfile(model))
        self.generate(model)

    def test_retrain_span_sh(self):
        run = os.path.join(TMP, "span")
        p = sh(os.path.join(MODELS, "retrain-span.sh"), run, env={
            "DATA": TMP,
            "TRAIN_ARGS": "--steps 2 --batch 2 --threads 1 --eval-every 2 "
                          "--save-every 2 --log-every 1"})
        model = os.path.join(run, "span-sotu.bin")
        self.assertEqual(p.stdout.split(), [p.stdout.split()[0], model])
        from txlgen import txlfile
        meta, tensors = txlfile.read(model)
        self.assertEqual((meta["attn_type"], meta["attn_span"]), ("4", "256"))
        _, sotu = txlfile.read(os.path.join(MODELS, "sotu.bin"))
        self.assertEqual(bytes(tensors["tokenizer.model"]),
                         bytes(sotu["tokenizer.model"]))
        self.generate(model)


if __name__ == "__main__":
    unittest.main()
