#!/usr/bin/python3
"""Several streams of one model from the command line: --n-samples and
--score-docs.

--n-samples: sample i is the same text whatever the number of samples,
and the text a run with its seed gives alone; the plain text shows the
samples in order between separator lines, --json tags each token and
summary with its sample; -n, --stop and Ctrl-C act on each sample as on
one run.

--score-docs: each document's numbers are those of --score on its text
alone (within 1e-5 bits per byte); the output keeps the input's order
and line numbers (or ids); malformed lines are reported and skipped, or
end the run with --strict; memory stays bounded whatever the input;
Ctrl-C writes what is done.

Drives $TXLGEN with the model $TXLGEN_TEST_MODEL (or a random one made
with tests/make_random_model.py).
"""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

import clitest
from clitest import HERE, MODEL, TXLGEN

TMP = None

with open(os.path.join(HERE, "data", "text.txt"), encoding="utf-8") as f:
    LINES = [l.strip() for l in f if l.strip()]


def setUpModule():
    global MODEL, TMP
    MODEL, TMP = clitest.model_and_tmp(MODEL, "txlgen-streams-")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def env():
    e = dict(os.environ)
    e.pop("TXLGEN_MODEL", None)
    e["TXLGEN_HISTFILE"] = ""
    return e


def run(*args, input=None, timeout=120):
    """txlgen with the test model: (returncode, stdout bytes, stderr)."""
    p = subprocess.run([TXLGEN, "-m", MODEL] + list(args),
                       input=input.encode() if isinstance(input, str)
                       else input,
                       stdin=subprocess.DEVNULL if input is None else None,
                       capture_output=True, env=env(), timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def popen(test, args, **kw):
    """txlgen in the background, killed and reaped when @test ends."""
    kw.setdefault("stdin", subprocess.DEVNULL)
    p = subprocess.Popen([TXLGEN, "-m", MODEL] + list(args), env=env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, **kw)

    def reap():
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=30)
    test.addCleanup(reap)
    return p


def json_lines(out):
    return [json.loads(l) for l in out.decode().splitlines()]


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


PROMPT = "The state of the Union"


class Samples(unittest.TestCase):
    """--n-samples"""

    def samples(self, n, *extra):
        """The samples of a --json run: {i: (text, summary)}."""
        rc, out, err = run("-p", PROMPT, "--seed", "11", "--n-samples",
                           str(n), "--json", *extra)
        self.assertEqual(rc, 0, err)
        texts, ends = {}, {}
        for ev in json_lines(out):
            # (one sample: no tags)
            i = ev.get("sample", 0) if n > 1 else 0
            self.assertEqual(n > 1, "sample" in ev or "prompt" in ev)
            if "id" in ev:
                texts[i] = texts.get(i, "") + ev["text"]
            elif "end" in ev:
                self.assertNotIn(i, ends)
                ends[i] = ev
        self.assertEqual(sorted(ends), list(range(n)))
        return {i: (texts.get(i, ""), ends[i]) for i in range(n)}

    def test_sample_i_is_the_same_whatever_n(self):
        two = self.samples(2, "-n", "24")
        five = self.samples(5, "-n", "24")
        def untimed(summary):
            return {k: v for k, v in summary.items()
                    if not k.endswith("_per_s")}
        for i in range(2):
            self.assertEqual(two[i][0], five[i][0])
            self.assertEqual(untimed(two[i][1]), untimed(five[i][1]))
        # the samples differ from one another
        self.assertEqual(len({five[i][0] for i in range(5)}), 5)
        # sample 0 is the plain run; sample i the run of its seed
        for i in (0, 3):
            seed = five[i][1]["seed"]
            self.assertLess(seed, 2 ** 53)
            rc, out, err = run("-p", PROMPT, "--seed", str(seed), "-n",
                               "24", "--no-final-newline")
            self.assertEqual(rc, 0, err)
            self.assertEqual(out.decode(), five[i][0])
        self.assertEqual(five[0][1]["seed"], 11)

    def test_plain_text_separates_the_samples(self):
        json_run = self.samples(3, "-n", "16")
        rc, out, err = run("-p", PROMPT, "--seed", "11", "--n-samples", "3",
                           "-n", "16")
        self.assertEqual(rc, 0, err)
        text = out.decode()
        # "--- sample I ---" on a line of its own before each sample,
        # each sample's text as --json gives it, a newline added where
        # it does not end with one
        want = ""
        for i in range(3):
            want += f"--- sample {i} ---\n" + json_run[i][0]
            want += "" if want.endswith("\n") else "\n"
        self.assertEqual(text, want)
        self.assertEqual(len(re.findall(r"^--- sample \d ---$", text,
                                        re.M)), 3)
        # the echoed prompt is sample 0's beginning, shown once
        rc, out, err = run("-p", PROMPT, "--seed", "11", "--n-samples", "3",
                           "-n", "16", "--echo")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.decode(), want.replace(
            "--- sample 0 ---\n", "--- sample 0 ---\n" + PROMPT, 1))

    def test_sessions_that_do_not_fit_show_nothing(self):
        # refused before the prompt, with no line of any sample
        for extra in ((), ("--json",)):
            rc, out, err = run("-p", PROMPT, "--n-samples", "1024",
                               "--mem-len", "1048576", "-n", "3", *extra)
            self.assertEqual((rc, out), (1, b""), err)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn("--n-samples 1024: 1023 more sessions need", err)
            self.assertIn("available", err)

    def test_json_tags_every_token_and_summary(self):
        rc, out, err = run("-p", PROMPT, "--seed", "3", "--n-samples", "3",
                           "-n", "5", "--json", "--echo")
        self.assertEqual(rc, 0, err)
        events = json_lines(out)
        # the prompt once, untagged, first
        self.assertEqual(events[0], {"prompt": PROMPT})
        self.assertEqual(sum("prompt" in e for e in events), 1)
        tokens = [e for e in events if "id" in e]
        self.assertEqual(len(tokens), 15)
        self.assertTrue(all(list(e)[0] == "sample" for e in events[1:]))
        self.assertEqual(sorted(e["sample"] for e in tokens),
                         [0] * 5 + [1] * 5 + [2] * 5)
        seeds = [e["seed"] for e in events if "end" in e]
        self.assertEqual(len(set(seeds)), 3)

    def test_length_and_stop_per_sample(self):
        n = 15
        got = self.samples(6, "-n", str(n), "--stop", "a", "--temp", "1.5")
        ends = {got[i][1]["end"] for i in got}
        # (the seed gives both kinds of end)
        self.assertEqual(ends, {"stop", "length"})
        for i, (text, summary) in got.items():
            alone = self.samples(1, "-n", str(n), "--stop", "a", "--temp",
                                 "1.5", "--seed", str(summary["seed"]))[0]
            self.assertEqual(alone[1]["end"], summary["end"])
            self.assertEqual(alone[1]["n_gen"], summary["n_gen"])
            if summary["end"] == "length":
                self.assertGreaterEqual(summary["n_gen"], n)
                self.assertLessEqual(summary["n_gen"], n + 3)
            else:
                self.assertLess(summary["n_gen"], n)
        # the stop string never shows in the text
        rc, out, err = run("-p", PROMPT, "--seed", "11", "--n-samples", "6",
                           "-n", str(n), "--stop", "a", "--temp", "1.5")
        self.assertEqual(rc, 0, err)
        parts = re.split(r"^--- sample \d ---\n", out.decode(), flags=re.M)
        self.assertEqual(parts[0], "")
        parts = parts[1:]
        self.assertEqual(len(parts), 6)
        for part, i in zip(parts, range(6)):
            # (--json lists the tokens of the stop string too)
            self.assertNotIn("a", part)
            self.assertEqual(part.rstrip("\n"),
                             got[i][0].split("a")[0].rstrip("\n"))

    def test_ctrl_c_ends_every_sample(self):
        for fmt in ("--json", "--no-json"):
            p = popen(self, ["-p", PROMPT, "--n-samples", "3", "-n", "-1",
                             "--ignore-eos", "-u", fmt])
            # sample 0 is on stdout as it is generated
            clitest.read_pipe(p.stdout, lambda b: len(b) > 200, timeout=60)
            time.sleep(0.2)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 130, err)
            self.assertIn("interrupted", err.decode())
            if fmt == "--json":
                ends = [e for e in json_lines(out) if "end" in e]
                self.assertEqual(sorted(e["sample"] for e in ends),
                                 [0, 1, 2])
                self.assertTrue(all(e["end"] == "interrupted"
                                    for e in ends))
                self.assertTrue(all(e["n_gen"] > 0 for e in ends))
            else:
                # the samples held are written, each after its line
                text = out.decode()
                self.assertIn("\n--- sample 1 ---\n", text)
                self.assertIn("\n--- sample 2 ---\n", text)
                self.assertGreater(len(text.split("--- sample 2 ---\n")
                                       [1]), 0)

    def test_usage(self):
        for args, msg in (
                (["--n-samples", "0"], "out of range (1 .. 1024)"),
                (["--n-samples", "x"], "is not an integer"),
                (["--n-samples", "2", "--score", "-"], "cannot be used"),
                (["--n-samples", "2", "-i"], "cannot be used"),
                (["--n-samples", "2", "--state-out", "s"], "--state-out")):
            rc, out, err = run(*args, "-p", "x", input="")
            self.assertEqual(rc, 2, args)
            self.assertIn(msg, err)
            self.assertEqual(out, b"")


class ScoreDocs(unittest.TestCase):
    """--score-docs"""

    # documents of 1 to 80 or so tokens, in segments of 8
    DOCS = [LINES[i % len(LINES)][: 12 + 37 * i % 300] for i in range(14)]

    def score_alone(self, text, *extra):
        path = write("alone.txt", text)
        rc, out, err = run("--score", path, "--json", "--seg-len", "8",
                           *extra)
        self.assertEqual(rc, 0, err)
        return json.loads(out.decode().splitlines()[-1])

    def assertSameScore(self, doc, alone):
        for k in ("tokens", "predicted", "bytes"):
            self.assertEqual(doc[k], alone[k], (doc, alone))
        self.assertAlmostEqual(doc["bpb"], alone["bpb"], delta=1e-5)
        self.assertAlmostEqual(doc["nll"], alone["nll"], delta=1e-5)

    def test_each_document_as_score_gives_it(self):
        path = write("docs.txt", "".join(d + "\n" for d in self.DOCS))
        for streams in ("1", "3"):
            rc, out, err = run("--score-docs", path, "--seg-len", "8",
                               "--streams", streams)
            self.assertEqual(rc, 0, err)
            docs = json_lines(out)
            self.assertEqual([d["line"] for d in docs],
                             list(range(1, len(self.DOCS) + 1)))
            self.assertGreater(max(d["predicted"] for d in docs), 40)
            for d, text in zip(docs, self.DOCS):
                self.assertSameScore(d, self.score_alone(text))
                self.assertEqual(d["bytes"], len(text.encode()))
                self.assertAlmostEqual(d["ppl"], math.exp(d["nll"]),
                                       delta=1e-6 * d["ppl"])

    def test_from_the_primed_memory(self):
        prime = write("prime.txt", LINES[0] + "\n" + LINES[1] + "\n")
        docs = self.DOCS[2:6]
        path = write("docs.txt", "".join(d + "\n" for d in docs))
        rc, out, err = run("--score-docs", path, "--seg-len", "8",
                           "--prime", prime, "--streams", "2")
        self.assertEqual(rc, 0, err)
        got = json_lines(out)
        rc, out, err = run("--score-docs", path, "--seg-len", "8")
        unprimed = json_lines(out)
        for d, u, text in zip(got, unprimed, docs):
            self.assertSameScore(d, self.score_alone(text, "--prime",
                                                     prime))
            self.assertNotAlmostEqual(d["nll"], u["nll"], delta=1e-4)

    def test_order_kept_and_line_numbers(self):
        # a long document first: the short ones after it finish first
        docs = [" ".join(LINES)[:2000]] + ["We will.", "", "A"] + \
            self.DOCS[:6]
        path = write("order.txt", "\r\n".join(docs) + "\r\n")
        rc, out, err = run("--score-docs", path, "--seg-len", "4",
                           "--streams", "3", "--first-line", "1001")
        self.assertEqual(rc, 0, err)
        got = json_lines(out)
        self.assertEqual([d["line"] for d in got],
                         list(range(1001, 1001 + len(docs))))
        self.assertEqual([d["bytes"] for d in got],
                         [len(d.encode()) for d in docs])
        # no prediction: null scores
        self.assertEqual(got[2]["tokens"], 0)
        self.assertEqual(got[2]["bytes"], 0)
        for d in got:
            if d["tokens"] < 2:
                self.assertEqual((d["predicted"], d["nll"], d["ppl"],
                                  d["bpb"]), (0, None, None, None))
            else:
                self.assertEqual(d["predicted"], d["tokens"] - 1)
        self.assertSameScore(got[0], self.score_alone(docs[0], "--seg-len",
                                                      "4"))

    def test_json_lines_field_and_ids(self):
        lines = [{"id": "a", "text": self.DOCS[0]},
                 {"text": self.DOCS[1], "meta": [1, 2]},
                 {"id": 7, "body": "x", "text": self.DOCS[2]},
                 {"id": {"k": [1, "é"]}, "text": self.DOCS[3]}]
        path = write("docs.jsonl", "".join(json.dumps(l) + "\n"
                                           for l in lines))
        rc, out, err = run("--score-docs", path, "--field", "text",
                           "--seg-len", "8")
        self.assertEqual(rc, 0, err)
        got = json_lines(out)
        self.assertEqual([d.get("id") for d in got],
                         ["a", None, 7, {"k": [1, "é"]}])
        self.assertNotIn("id", got[1])
        for d, l in zip(got, lines):
            self.assertSameScore(d, self.score_alone(l["text"]))
        # another field
        rc, out, err = run("--score-docs", path, "--field", "body")
        self.assertEqual(rc, 0, err)
        self.assertEqual([d["line"] for d in json_lines(out)], [3])
        self.assertEqual(err.count("skipped"), 3)

    def test_a_document_past_a_chunk_scores_as_score_does(self):
        # tokenized in the chunks --score reads (64 KiB, cut before a
        # space), not whole: the same tokens, in bounded memory
        text = " ".join(LINES) * (70000 // len(" ".join(LINES)) + 1)
        self.assertGreater(len(text.encode()), 1 << 16)
        path = write("long-doc.jsonl", json.dumps({"text": text}) + "\n")
        rc, out, err = run("--score-docs", path, "--field", "text",
                           "--seg-len", "64")
        self.assertEqual(rc, 0, err)
        doc, = json_lines(out)
        self.assertSameScore(doc, self.score_alone(text, "--seg-len", "64"))

    MALFORMED = [
        ('{"text": "We will build."}', None),
        ('{"text": "broken', 'not JSON'),
        ('["text"]', 'an array, not a JSON object'),
        ('{"id": 1}', 'no "text" in the object'),
        ('{"text": 12}', '"text" is a number, not a string'),
        ('', 'an empty line'),
        ('{"text": "ok"} trailing', 'not JSON'),
        ('{"id": "%s", "text": "x"}' % ("i" * 1030),
         'longer than 1024 bytes'),
        # blank is not empty, and says so
        (' \t  ', 'a blank line, not a JSON object'),
        # a NUL would end the text early (it scored "ab", 2 bytes)
        ('{"text": "ab\\u0000cd efgh"}', '\\u0000 (NUL) at byte 13'),
        ('{"text": "ab\x00cd efgh"}', 'a NUL byte at byte 13'),
        # an escaped backslash before u0000 is text
        ('{"text": "a path C:\\\\u0000 and more"}', None),
        # which of two values is meant: neither
        ('{"text": "a", "text": "b c d"}', '"text" twice in the object'),
        ('{"id": 1, "text": "b c d", "id": 2}', '"id" twice in the object'),
        ('{"text": "And the nation."}', None),
    ]

    def test_malformed_lines_are_reported_and_skipped(self):
        path = write("bad.jsonl", "".join(l + "\n"
                                          for l, _ in self.MALFORMED))
        rc, out, err = run("--score-docs", path, "--field", "text",
                           "--first-line", "5")
        self.assertEqual(rc, 0, err)
        docs = json_lines(out)
        self.assertEqual([d["line"] for d in docs],
                         [i + 5 for i, (_, m) in enumerate(self.MALFORMED)
                          if m is None])
        # the backslash and "u0000" as text: 31 bytes, all of them
        self.assertEqual(docs[1]["bytes"], len("a path C:\\u0000 and more"))
        msgs = err.splitlines()
        bad = [(i + 5, m) for i, (_, m) in enumerate(self.MALFORMED) if m]
        self.assertEqual(len(msgs), len(bad), err)
        for (line, why), msg in zip(bad, msgs):
            self.assertTrue(msg.startswith(f"txlgen: {path}:{line}: "), msg)
            self.assertIn(why, msg)
            self.assertTrue(msg.endswith("; skipped"), msg)

    def test_strict_ends_at_the_first_malformed_line(self):
        path = write("bad.jsonl", "".join(l + "\n"
                                          for l, _ in self.MALFORMED))
        rc, out, err = run("--score-docs", path, "--field", "text",
                           "--strict")
        self.assertEqual(rc, 1, err)
        self.assertEqual([d["line"] for d in json_lines(out)], [1])
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertRegex(err, "^txlgen: " + re.escape(path) + r":2: not JSON"
                         r" \(at byte \d+\); the run ends \(--strict\)\n$")
        # a NUL in the text ends a --strict run too (it scored 2 bytes)
        nul = write("nul.jsonl", '{"text": "ab\\u0000cd efgh"}\n')
        rc, out, err = run("--score-docs", nul, "--field", "text",
                           "--strict")
        self.assertEqual((rc, out), (1, b""), err)
        self.assertIn(":1: \\u0000 (NUL) at byte 13", err)
        # and a plain line too long for a document
        big = write("big.txt", "ok then\n" + "x " * (9 << 20) + "\nok\n")
        rc, out, err = run("--score-docs", big)
        self.assertEqual(rc, 0, err)
        self.assertEqual([d["line"] for d in json_lines(out)], [1, 3])
        self.assertIn(f"{big}:2: longer than 16 MiB; skipped", err)

    def test_memory_stays_bounded(self):
        """A long document holds the first place in the output while
        30000 documents after it are read, each with an id of 1 KiB: the
        results wait in a ring of fixed size, so the peak RSS is that of
        a run over 100 of them (30 MiB of ids, if held, would show)."""
        def peak(n):
            path = os.path.join(TMP, f"many{n}.jsonl")
            with open(path, "w") as f:
                f.write(json.dumps({"text": " ".join(LINES)[:3000]}) + "\n")
                line = json.dumps({"id": "i" * 1000, "text": ""}) + "\n"
                f.write(line * n)
            code = ("import os, resource, subprocess, sys\n"
                    "r = subprocess.run(sys.argv[1:], stdout=subprocess."
                    "PIPE, stderr=subprocess.DEVNULL)\n"
                    "print(r.returncode, r.stdout.count(b'\\n'), "
                    "resource.getrusage(resource.RUSAGE_CHILDREN)."
                    "ru_maxrss)\n")
            # (under AddressSanitizer freed memory is held in a
            # quarantine, which would count as growth: none here)
            e = env()
            e["ASAN_OPTIONS"] = ":".join(filter(None, (
                e.get("ASAN_OPTIONS"), "quarantine_size_mb=0")))
            p = subprocess.run([sys.executable, "-c", code, TXLGEN, "-m",
                                MODEL, "--score-docs", path, "--field",
                                "text", "--seg-len", "4", "--streams", "2"],
                               capture_output=True, env=e, timeout=300)
            rc, lines, rss = map(int, p.stdout.split())
            self.assertEqual(rc, 0, p.stderr)
            self.assertEqual(lines, n + 1)
            os.unlink(path)
            return rss
        small, large = peak(100), peak(30000)
        self.assertLess(large, small + 8 * 1024, (small, large))

    def test_ctrl_c_writes_what_is_done(self):
        p = popen(self, ["--score-docs", "-", "--streams", "2"],
                  stdin=subprocess.PIPE)
        p.stdin.write("".join(d + "\n" for d in self.DOCS[:5]).encode())
        p.stdin.flush()
        # the input stays open: txlgen waits for more after 5 documents
        got = clitest.read_pipe(p.stdout, lambda b: b.count(b"\n") == 5,
                                timeout=60)
        p.send_signal(signal.SIGINT)
        out, err = clitest.wait_stdin_open(p, timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertEqual(out, b"")
        self.assertEqual([d["line"] for d in json_lines(got)],
                         [1, 2, 3, 4, 5])
        self.assertIn("5 documents written; the next one read is line 6",
                      err.decode())

    def test_usage(self):
        for args, msg in (
                (["--field", "text"], "--field needs --score-docs"),
                (["--strict"], "--strict needs --score-docs"),
                (["--first-line", "3"], "--first-line needs --score-docs"),
                (["--score-docs", "-", "--score", "-"], "cannot be used"),
                (["--score-docs", "-", "--tokenize", "-"], "cannot be"),
                (["--score-docs", "-", "--adapt", "0.1"], "--adapt"),
                (["--score-docs", "-", "--state-out", "s"], "--state-out"),
                (["--score-docs", "-", "--streams", "0"], "out of range"),
                (["--score-docs", "-", "--first-line", "0"],
                 "out of range"),
                (["--score-docs", "-", "--first-line", "1e3"],
                 "is not an integer"),
                (["--score-docs", "-", "--prime", "-"], "reads stdin")):
            rc, out, err = run(*args, input="")
            self.assertEqual(rc, 2, (args, err))
            self.assertIn(msg, err)
            self.assertEqual(out, b"")


if __name__ == "__main__":
    unittest.main(verbosity=2)
