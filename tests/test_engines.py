#!/usr/bin/python3
"""--score-docs run by engines that split a corpus, as txlgen(1) shows
them (SCORING A CORPUS ON MANY MACHINES): GNU parallel --pipe, and Dask
distributed through tools/dask_score_docs.py on a LocalCluster of two
workers.  Their merged output is the single run's: the same documents,
lines, ids and token counts, and the same scores (to float rounding).
Nothing leaves this machine (Dask's cluster listens on 127.0.0.1).

Needs GNU parallel and python3-distributed (./setup.sh installs both);
a test whose engine is missing says so and is skipped.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import unittest

import clitest
from clitest import HERE, MODEL, ROOT, TXLGEN

DASK_SCRIPT = os.path.join(ROOT, "tools", "dask_score_docs.py")
TMP = None

with open(os.path.join(HERE, "data", "text.txt"), encoding="utf-8") as f:
    WORDS = f.read().split()


def setUpModule():
    global MODEL, TMP
    MODEL, TMP = clitest.model_and_tmp(MODEL, "txlgen-engines-")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def corpus(path, n, jsonl=False):
    """n documents of 3 to 60 words, a few malformed lines among them
    when JSON Lines."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            words = WORDS[(i * 17) % len(WORDS):][: 3 + (i * 13) % 58]
            text = " ".join(words)
            if not jsonl:
                f.write(text + "\n")
            elif i % 23 == 5:
                f.write("{broken\n")
            else:
                f.write(json.dumps({"id": f"d{i}", "text": text}) + "\n")
    return path


def env():
    e = dict(os.environ)
    e.pop("TXLGEN_MODEL", None)
    e["TXLGEN"] = TXLGEN
    e["OMP_WAIT_POLICY"] = "PASSIVE"
    return e


class Engines(unittest.TestCase):
    def single(self, path, *extra):
        p = subprocess.run([TXLGEN, "-m", MODEL, "--score-docs", path,
                            "--seg-len", "16", *extra], capture_output=True,
                           env=env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout, p.stderr

    def assertSameOutput(self, merged, single):
        a = [json.loads(l) for l in merged.decode().splitlines()]
        b = [json.loads(l) for l in single.decode().splitlines()]
        self.assertEqual(len(a), len(b))
        self.assertGreater(len(b), 50)
        for x, y in zip(a, b):
            self.assertEqual(list(x), list(y))
            for k in x:
                if k in ("nll", "ppl", "bpb"):
                    self.assertAlmostEqual(x[k], y[k],
                                           delta=1e-6 * abs(y[k]))
                else:
                    self.assertEqual(x[k], y[k], (x, y))

    def test_gnu_parallel_pipe(self):
        if not shutil.which("parallel"):
            self.skipTest("GNU parallel is not installed (Debian: "
                          "parallel)")
        path = corpus(os.path.join(TMP, "corpus.txt"), 120)
        single, _ = self.single(path)
        # txlgen(1)'s command: parts of 1000 lines there, 17 here, so
        # that the 120 lines make several parts run two at a time
        cmd = (f"parallel --will-cite --pipe -k -j 2 -N 17 {TXLGEN} -m "
               f"{MODEL} -t 1 --seg-len 16 --score-docs - --first-line "
               "'$(( ({#} - 1) * 17 + 1 ))' "
               f"< {path}")
        p = subprocess.run(["/bin/bash", "-c", cmd], capture_output=True,
                           env=env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertSameOutput(p.stdout, single)

    def test_dask_local_cluster(self):
        try:
            import distributed  # noqa: F401
        except ImportError:
            self.skipTest("Dask's distributed is not installed (Debian: "
                          "python3-distributed)")
        path = corpus(os.path.join(TMP, "corpus.jsonl"), 150, jsonl=True)
        single, single_err = self.single(path, "--field", "text")
        p = subprocess.run([sys.executable, DASK_SCRIPT, path,
                            "--workers", "2", "--parts", "5", "--",
                            "-m", MODEL, "--seg-len", "16", "--field",
                            "text"], capture_output=True, env=env(),
                           timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertSameOutput(p.stdout, single)
        # the malformed lines reported by the parts (their input is
        # "(stdin)"), with their numbers in the whole corpus
        def reports(err):
            return re.findall(r":(\d+: .*skipped)$", err.decode(), re.M)
        self.assertEqual(len(reports(single_err)), 7)
        self.assertEqual(reports(p.stderr), reports(single_err))

    def test_dask_reports_a_failed_part(self):
        try:
            import distributed  # noqa: F401
        except ImportError:
            self.skipTest("Dask's distributed is not installed")
        path = corpus(os.path.join(TMP, "corpus.txt"), 10)
        p = subprocess.run([sys.executable, DASK_SCRIPT, path,
                            "--workers", "1", "--", "-m",
                            os.path.join(TMP, "missing.bin")],
                           capture_output=True, env=env(), timeout=300)
        self.assertEqual(p.returncode, 1)
        self.assertIn("dask_score_docs: ", p.stderr.decode())
        self.assertIn("missing.bin", p.stderr.decode())


if __name__ == "__main__":
    unittest.main(verbosity=2)
