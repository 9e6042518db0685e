#!/usr/bin/python3
"""The shipped poetry model (models/poetry.bin): its held-out figures as
models/README.md gives them, and verse that ends where a ci ends.

Program: $TXLGEN, else build/.
"""

import os
import re
import subprocess
import unittest

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import random_model as mrm

TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")
HERE = os.path.dirname(os.path.abspath(__file__))
HELD_OUT = os.path.join(HERE, "data", "songci-test.txt")
README = os.path.join(HERE, "..", "models", "README.md")


def txlgen(*args):
    r = subprocess.run([TXLGEN, "-m", "poetry", *args], capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=300)
    return r.returncode, r.stdout.decode("utf-8"), r.stderr.decode()


class Poetry(unittest.TestCase):
    def test_held_out_figures_of_the_readme(self):
        with open(README, encoding="utf-8") as f:
            m = re.search(r"held-out ci: ([0-9.]+) bits per byte, "
                          r"([0-9.]+) bits per character", f.read())
        self.assertIsNotNone(m, "models/README.md lacks the figures")
        rc, out, err = txlgen("--score", HELD_OUT)
        self.assertEqual((rc, err), (0, ""))
        s = dict(line.split(" ", 1) for line in out.splitlines())
        self.assertEqual(int(s["bytes"]), os.path.getsize(HELD_OUT))
        self.assertAlmostEqual(float(s["bpb"]), float(m.group(1)), delta=0.01)
        self.assertAlmostEqual(float(s["bpc"]), float(m.group(2)),
                               delta=0.03)

    def test_a_ci_ends_at_its_line_break(self):
        # the recommended stop: one ci a line, so one ci is written
        for seed in (1, 2, 3, 4):
            rc, out, err = txlgen("-p", "人间三月天，", "-s", str(seed),
                                  "-n", "300")
            self.assertEqual((rc, err), (0, ""))
            self.assertNotIn("\n", out.rstrip("\n"))
            self.assertTrue(out.rstrip("\n").endswith(("。", "！", "？")),
                            f"seed {seed}: {out!r}")


if __name__ == "__main__":
    unittest.main()
