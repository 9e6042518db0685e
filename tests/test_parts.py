#!/usr/bin/python3
"""One text scored in parts: txlgen --score --part K/N and --score-merge
against one --score run of the whole text, on the default model
(models/sotu.bin).

The parts' per-token lines, joined in order, are the whole run's (the
same positions, ids and texts, log-probs within 1e-6) with the memory
starting empty and as zero states; their merged summary is the whole
run's within 1e-9 relative; bad parts are refused.  Then the engines
that run the parts (GNU parallel as README.md shows it, Dask through
tools/dask_score.py on a LocalCluster of two workers), and the progress
line: on a terminal (a pty) and with --progress in a log, on stderr
only.

The text is made from tests/data/text.txt (written for the tests, not
in the model's training text): its sentences in an order drawn with a
fixed seed, about 60 kB.

Run:  TXLGEN=build/cmd/txlgen /usr/bin/python3 tests/test_parts.py -v
"""

import json
import os
import pty
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from clitest import HERE, ROOT, TXLGEN

MODEL = os.path.join(ROOT, "models", "sotu.bin")
DASK_SCRIPT = os.path.join(ROOT, "tools", "dask_score.py")
TMP = None


def make_text(path, size, seed):
    """About @size bytes of text.txt's sentences, in an order drawn with
    @seed, a paragraph of 8 a line."""
    with open(os.path.join(HERE, "data", "text.txt"), encoding="utf-8") as f:
        sentences = f.read().replace("\n", " ").split(". ")
    rng, out, n = random.Random(seed), [], 0
    while n < size:
        rng.shuffle(sentences)
        line = ". ".join(s.strip() for s in sentences[:8]) + ".\n"
        out.append(line)
        n += len(line.encode())
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(out))
    return path


def setUpModule():
    global TMP, TEXT, SMALL, TINY
    TMP = tempfile.mkdtemp(prefix="txlgen-parts-")
    TEXT = make_text(os.path.join(TMP, "text.txt"), 60000, 1)
    SMALL = make_text(os.path.join(TMP, "small.txt"), 12000, 2)
    TINY = os.path.join(TMP, "tiny.txt")
    with open(TINY, "w") as f:
        f.write("We the people\n")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def env():
    e = dict(os.environ)
    e.pop("TXLGEN_MODEL", None)
    e["TXLGEN"] = TXLGEN
    e["OMP_WAIT_POLICY"] = "PASSIVE"
    return e


def txlgen(*args, check=True, **kw):
    p = subprocess.run([TXLGEN, "-m", MODEL, "-t", "1", *args],
                       capture_output=True, env=env(), timeout=600,
                       stdin=subprocess.DEVNULL, **kw)
    if check:
        assert p.returncode == 0, (args, p.returncode, p.stderr)
    return p


def rows_and_summary(out):
    lines = [json.loads(l) for l in out.decode().splitlines()]
    return lines[:-1], lines[-1]


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


class Parts(unittest.TestCase):
    def run_parts(self, text, n, *opts):
        """The whole run's (rows, summary), each part's (rows, summary)
        and the paths of the parts' outputs."""
        whole = rows_and_summary(txlgen("--score", text, "--json",
                                        *opts).stdout)
        parts, paths = [], []
        for k in range(1, n + 1):
            out = txlgen("--score", text, "--json", "--part", f"{k}/{n}",
                         *opts).stdout
            parts.append(rows_and_summary(out))
            paths.append(write(os.path.join(
                TMP, f"{os.path.basename(text)}{''.join(opts)}.{k}.json"),
                out))
        return whole, parts, paths

    def assertSameRows(self, whole_rows, parts):
        joined = [r for rows, _ in parts for r in rows]
        self.assertEqual(len(joined), len(whole_rows))
        for a, b in zip(joined, whole_rows):
            self.assertEqual((a["pos"], a["id"], a["text"], a["rank"]),
                             (b["pos"], b["id"], b["text"], b["rank"]))
            self.assertAlmostEqual(a["logprob"], b["logprob"], delta=1e-6)

    def assertMerged(self, paths, whole_summary):
        p = txlgen("--score-merge", *paths, "--json")
        merged = json.loads(p.stdout)
        self.assertEqual(merged.pop("parts"), len(paths))
        self.assertEqual(list(merged), list(whole_summary))
        for k, v in whole_summary.items():
            if isinstance(v, float):
                self.assertAlmostEqual(merged[k], v, delta=1e-9 * abs(v),
                                       msg=k)
            else:
                self.assertEqual(merged[k], v, k)
        return merged

    def check_shares(self, whole, parts, n):
        """Each part's tokens are [T(k-1)/n, Tk/n), its rows the
        predictions of those positions; the shares add up."""
        rows, summary = whole
        total = summary["tokens"]
        for k, (prows, ps) in enumerate(parts, 1):
            lo, hi = total * (k - 1) // n, total * k // n
            self.assertEqual(ps["tokens"], hi - lo)
            self.assertEqual([r["pos"] for r in prows],
                             list(range(max(lo, 1), hi)))
            self.assertEqual(ps["predicted"], len(prows))
            self.assertEqual(ps["part"], f"{k}/{n}")
            self.assertFalse(ps["partial"])
            self.assertAlmostEqual(ps["nll_sum"],
                                   -sum(r["logprob"] for r in prows),
                                   delta=1e-5)
        for key in ("tokens", "predicted", "bytes", "chars"):
            self.assertEqual(sum(ps[key] for _, ps in parts), summary[key])
        self.assertEqual(len({ps["fingerprint"] for _, ps in parts}), 1)

    def test_60kb_in_5_parts(self):
        whole, parts, paths = self.run_parts(TEXT, 5)
        self.assertGreater(whole[1]["bytes"], 59000)
        self.assertGreater(whole[1]["tokens"], 15000)
        self.check_shares(whole, parts, 5)
        self.assertSameRows(whole[0], parts)
        self.assertMerged(paths, whole[1])
        # in any order
        self.assertMerged(paths[::-1], whole[1])
        Parts.paths = paths

    def test_zero_state_memory(self):
        whole, parts, paths = self.run_parts(SMALL, 5, "--mem-init",
                                             "zeros")
        self.check_shares(whole, parts, 5)
        self.assertSameRows(whole[0], parts)
        self.assertMerged(paths, whole[1])
        # another run than the memory that starts empty
        plain = rows_and_summary(txlgen("--score", SMALL, "--json",
                                        "--part", "1/5").stdout)[1]
        self.assertNotEqual(plain["fingerprint"], parts[0][1]["fingerprint"])
        self.assertNotEqual(plain["nll_sum"], parts[0][1]["nll_sum"])

    def test_parts_of_no_prediction(self):
        """4 tokens in 5 parts: the first part has none, the second the
        first token, which predicts nothing; the merge is the whole
        run's."""
        whole, parts, paths = self.run_parts(TINY, 5)
        self.check_shares(whole, parts, 5)
        self.assertEqual(whole[1]["tokens"], 4, whole)
        self.assertEqual([(ps["tokens"], ps["predicted"])
                          for _, ps in parts],
                         [(0, 0), (1, 0), (1, 1), (1, 1), (1, 1)])
        self.assertSameRows(whole[0], parts)
        self.assertMerged(paths, whole[1])

    def test_text_summary_of_a_part(self):
        p = txlgen("--score", SMALL, "--part", "2/3")
        keys = [l.split(" ")[0] for l in p.stdout.decode().splitlines()]
        self.assertEqual(keys, ["tokens", "predicted", "bytes", "chars",
                                "nll", "ppl", "bpb", "bpc", "nll_stderr",
                                "bpb_stderr", "partial", "part",
                                "fingerprint"])
        self.assertIn("part 2/3\n", p.stdout.decode())

    def test_bad_parts(self):
        for bad in ("0/5", "6/5", "1/0", "-1/5", "a/b", "2", "1/5x", "/5",
                    "1/", "1/1000001", " 1/5", "1/ 5"):
            p = txlgen("--score", SMALL, "--part", bad, check=False)
            self.assertEqual(p.returncode, 2, (bad, p.stderr))
            line = p.stderr.decode().splitlines()[0]
            self.assertTrue(line.startswith("txlgen: --part: "), line)
            self.assertEqual(p.stdout, b"")
        for args in (["--part", "1/2"],
                     ["--score", SMALL, "--part", "1/2", "--adapt", "0.1"],
                     ["--score", SMALL, "--part", "1/2", "--html",
                      os.path.join(TMP, "p.html")],
                     ["--score-docs", SMALL, "--part", "1/2"]):
            p = txlgen(*args, check=False)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn("--part", p.stderr.decode().splitlines()[0])

    def test_merge_refuses(self):
        whole, parts, paths = self.run_parts(TINY, 3)
        _, zparts, zpaths = self.run_parts(TINY, 3, "--mem-init", "zeros")
        whole_out = write(os.path.join(TMP, "whole.json"),
                          txlgen("--score", TINY, "--json").stdout)

        def edited(i, **change):
            s = dict(parts[i][1], **change)
            return write(os.path.join(TMP, f"edited{i}.json"),
                         (json.dumps(s) + "\n").encode())

        cases = [
            ((paths[0], paths[2]), r"part 2/3 is missing"),
            ((paths[0], paths[1], paths[1], paths[2]), r"part 2/3 given "
             r"twice"),
            ((paths[0], zpaths[1], paths[2]), r"another run"),
            ((paths[0], paths[1], edited(2, partial=True)), r"interrupted"),
            ((paths[0], edited(1, part="2/4"), paths[2]), r"of 4 parts"),
            ((paths[0], paths[1], whole_out), r"not the summary of a part"),
            ((paths[0], os.path.join(TMP, "missing.json")), r"missing.json"),
        ]
        for files, why in cases:
            p = txlgen("--score-merge", *files, check=False)
            self.assertEqual(p.returncode, 1, (files, p.stderr))
            err = p.stderr.decode()
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertRegex(err, why)
            self.assertEqual(p.stdout, b"")
        # the parts themselves merge
        self.assertMerged(paths, whole[1])
        self.assertMerged(zpaths, rows_and_summary(txlgen(
            "--score", TINY, "--json", "--mem-init", "zeros").stdout)[1])

    def test_info_says_what_a_part_costs(self):
        for extra in ([], ["--mem-len", "64"], ["--seg-len", "100"]):
            info = json.loads(txlgen("--info", "--json", *extra).stdout)
            s, n_layer = info["session"], info["architecture"]["n_layer"]
            # by hand: from the last token before a segment far into a
            # text, each layer back to the start of its segment and its
            # memory before it, then to the start of that segment
            far = s["seg_len"] * 10000
            x = far - 1
            for _ in range(n_layer):
                x = x // s["seg_len"] * s["seg_len"] - s["mem_len"]
            context = far - x // s["seg_len"] * s["seg_len"]
            self.assertEqual(s["part_context"], context, extra)
            self.assertEqual(s["part_overhead"],
                             context + 2 * (s["seg_len"] - 1))
        self.assertEqual(json.loads(txlgen("--info", "--json").stdout)
                         ["session"]["part_context"], 1152)


class Engines(unittest.TestCase):
    """The parts on the engines README.md shows, against one run."""

    @classmethod
    def setUpClass(cls):
        cls.whole = rows_and_summary(txlgen("--score", SMALL,
                                            "--json").stdout)[1]

    def assertIsWhole(self, merged):
        self.assertEqual(merged.pop("parts"), 3)
        self.assertEqual(list(merged), list(self.whole))
        for k, v in self.whole.items():
            self.assertAlmostEqual(merged[k], v, delta=1e-9 * abs(v), msg=k)

    def test_gnu_parallel(self):
        if not shutil.which("parallel"):
            self.skipTest("GNU parallel is not installed (Debian: "
                          "parallel)")
        folder = tempfile.mkdtemp(dir=TMP)
        cmd = (f"parallel --will-cite -j 2 {os.path.abspath(TXLGEN)} "
               f"-m {MODEL} -t 1 "
               f"--score {SMALL} --part {{}}/3 --json '>' part.{{}}.json "
               "::: $(seq 3)")
        p = subprocess.run(["/bin/bash", "-c", cmd], capture_output=True,
                           env=env(), cwd=folder, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        merged = txlgen("--score-merge", *sorted(
            os.path.join(folder, f) for f in os.listdir(folder)), "--json")
        self.assertIsWhole(json.loads(merged.stdout))

    def test_dask_local_cluster(self):
        try:
            import distributed  # noqa: F401
        except ImportError:
            self.skipTest("Dask's distributed is not installed (Debian: "
                          "python3-distributed)")
        p = subprocess.run([sys.executable, DASK_SCRIPT, SMALL, "-m", MODEL,
                            "--parts", "3", "--workers", "2", "--json"],
                           capture_output=True, env=env(), timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIsWhole(json.loads(p.stdout))

    def test_dask_reports_a_failed_part(self):
        try:
            import distributed  # noqa: F401
        except ImportError:
            self.skipTest("Dask's distributed is not installed")
        p = subprocess.run([sys.executable, DASK_SCRIPT, SMALL, "-m",
                            os.path.join(TMP, "missing.bin"), "--parts", "2",
                            "--workers", "1"],
                           capture_output=True, env=env(), timeout=600)
        self.assertEqual(p.returncode, 1)
        self.assertIn("dask_score: part ", p.stderr.decode())
        self.assertIn("missing.bin", p.stderr.decode())
        self.assertEqual(p.stdout, b"")


PROGRESS = re.compile(r"\[[= ]{20}\] +\d+%  [\d.]+/[\d.]+ kB  \d+ tokens  "
                      r"\d+ tokens/s")


class Progress(unittest.TestCase):
    """The progress line: on stderr only, drawn on a terminal, a line
    every few seconds in a log with --progress."""

    @classmethod
    def setUpClass(cls):
        cls.plain = txlgen("--score", SMALL)
        assert cls.plain.stderr == b"", cls.plain.stderr

    def test_log_lines_with_progress(self):
        for extra in ([], ["--part", "2/3"], ["--json"]):
            plain = txlgen("--score", SMALL, *extra)
            p = txlgen("--score", SMALL, "--progress", *extra)
            self.assertEqual(p.stdout, plain.stdout)
            err = p.stderr.decode()
            lines = err.splitlines()
            self.assertGreaterEqual(len(lines), 1, err)
            self.assertTrue(err.endswith("\n"))
            self.assertNotIn("\r", err)
            self.assertNotIn("\033", err)
            for line in lines:
                self.assertRegex(line, PROGRESS)
            # the bits so far, once two predictions are in
            self.assertRegex(lines[-1], r"bpb \d\.\d{4} ± \d\.\d{4}$")

    def test_nothing_in_a_log_without_progress(self):
        self.assertEqual(txlgen("--score", SMALL, "--part", "1/2").stderr,
                         b"")

    def test_terminal(self):
        """stderr a pty, stdout a pipe: the line drawn in place on stderr,
        then erased; stdout the summary alone."""
        master, slave = pty.openpty()
        try:
            p = subprocess.Popen([TXLGEN, "-m", MODEL, "-t", "1", "--score",
                                  SMALL], stdout=subprocess.PIPE,
                                 stderr=slave, stdin=subprocess.DEVNULL,
                                 env=env())
            os.close(slave)
            slave = None
            err = b""
            while True:
                try:
                    b = os.read(master, 65536)
                except OSError:  # EIO: the last writer closed it
                    break
                if not b:
                    break
                err += b
            out = p.stdout.read()
            p.stdout.close()
            self.assertEqual(p.wait(timeout=600), 0)
        finally:
            os.close(master)
            if slave is not None:
                os.close(slave)
        self.assertEqual(out, self.plain.stdout)
        drawn = err.decode()
        self.assertIn("\r[", drawn)
        self.assertTrue(drawn.endswith("\r\033[K"), drawn[-80:])
        frames = [f for f in drawn.split("\r") if f.strip("\033[K")]
        self.assertGreater(len(frames), 0)
        for f in frames:
            self.assertRegex(f, PROGRESS)
            self.assertTrue(f.endswith("\033[K"))
        self.assertIn(" tokens/s", drawn)
        self.assertRegex(drawn, r"bpb \d\.\d{4} ± \d\.\d{4}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
