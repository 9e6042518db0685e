#!/usr/bin/python3
"""Chinese text everywhere, with a character-level model (a checkpoint of
dwdb/transformer-xl, random weights, written as tests/test_dwdb.py writes
them and converted) and the default model's byte pieces:
- Cli: --stop of Chinese characters, -n and SIGINT through a pipe never
  cut a character, --json writes the characters themselves, --score's
  bits per character, the REPL on a pty typed in Chinese;
- Server: streamed events each whole characters that join into the
  completion, /tokenize and /detokenize of Chinese.

Run one class: `test_chinese.py Cli` (suite cli), `test_chinese.py
Server` (suite server).  Programs: $TXLGEN, $TXLGEN_SERVER, else build/.
"""

import json
import math
import os
import pickle
import select
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import dwdb_write, random_model as mrm

import test_cli
import test_server

TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")
TEXT = ("人间三月天，春风十里柳如烟。江山如画，一时多少豪杰！"
        "年年岁岁花相似，岁岁年年人不同。明月几时有？把酒问青天。")
TMP = None
MODEL = None
# hot enough that the random model's text varies
HOT = ("--temp", "5", "--ignore-eos", "--seed", "1")


def setUpModule():
    global TMP, MODEL
    TMP = tempfile.mkdtemp(prefix="txl-zh-")
    syms = ["<pad>", "<unk>", "<eos>"] + sorted(set(TEXT))
    t = dwdb_write.random_tensors(n_vocab=len(syms), d_embed=16, d_model=16,
                                  d_ff=32, n_head=2, n_layer=2,
                                  untie_rel_bias=True, seed=1)
    dwdb_write.write_dir(os.path.join(TMP, "ck"), t, pickle.dumps(syms),
                         saves=1)
    MODEL = os.path.join(TMP, "zh.bin")
    r = subprocess.run([mrm.PYTHON, mrm.CONVERT, "--weights",
                        os.path.join(TMP, "ck"), "-o", MODEL],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def txlgen(*args):
    """(exit code, stdout bytes, stderr) of txlgen on the Chinese model."""
    r = subprocess.run([TXLGEN, "--threads", "1", "-m", MODEL, *args],
                       capture_output=True, stdin=subprocess.DEVNULL,
                       timeout=120)
    return r.returncode, r.stdout, r.stderr.decode()


class Cli(unittest.TestCase):
    def text(self, *args):
        rc, out, err = txlgen(*args)
        self.assertEqual((rc, err), (0, ""))
        return out.decode("utf-8")          # strict: whole characters

    def test_stop_of_chinese_characters(self):
        full = self.text("-p", "人间", "-n", "40", "--no-final-newline",
                         *HOT)
        self.assertEqual(len(full), 40)     # one character a token
        stop = full[20:22]
        got = self.text("-p", "人间", "-n", "40", "--no-final-newline",
                        "--stop", stop, *HOT)
        self.assertEqual(got, full[:full.index(stop)])
        rc, out, _ = txlgen("-p", "人间", "-n", "40", "--stop", stop,
                            "--json", *HOT)
        rows = [json.loads(x) for x in out.decode().splitlines()]
        self.assertEqual(rows[-1]["end"], "stop")

    def test_length_through_a_pipe(self):
        full = self.text("-p", "人间", "-n", "30", "--no-final-newline",
                         *HOT)
        for n in (1, 2, 7, 29):
            self.assertEqual(self.text("-p", "人间", "-n", str(n),
                                       "--no-final-newline", *HOT),
                             full[:n])

    def test_sigint_through_a_pipe_leaves_whole_characters(self):
        # the byte-fallback default model spells rare characters a byte
        # a token; Ctrl-C whenever it comes ends on a whole character
        for model in (MODEL, test_server.MODEL):
            p = subprocess.Popen([TXLGEN, "--threads", "1", "-m", model,
                                  "-p", "人间三月天，", "-n", "-1",
                                  "--ignore-eos", "--temp", "1.5"],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL)
            # once it writes, whatever byte it is at
            ready = select.select([p.stdout], [], [], 60)[0]
            self.assertTrue(ready, "nothing written in 60 s")
            head = os.read(p.stdout.fileno(), 1)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 130, err)
            (head + out).decode("utf-8")    # strict

    def test_json_writes_the_characters(self):
        rc, out, err = txlgen("-p", "人间", "-n", "5", "--json", *HOT)
        self.assertEqual(rc, 0, err)
        self.assertNotIn(b"\\u", out)
        rows = [json.loads(x) for x in out.decode().splitlines()]
        texts = [r["text"] for r in rows if "id" in r]
        self.assertTrue(all(len(t) == 1 and t in TEXT for t in texts),
                        texts)
        for t in texts:
            self.assertIn(f'"text": "{t}"'.encode(), out)

    def test_score_bits_per_character(self):
        path = os.path.join(TMP, "poem.txt")
        lines = [TEXT[:14], TEXT[14:27], TEXT[27:]]
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        chars = len("\n".join(lines) + "\n")
        rc, out, err = txlgen("--score", path, "--json")
        self.assertEqual(rc, 0, err)
        self.assertNotIn(b"\\u", out)
        rows = [json.loads(x) for x in out.decode().splitlines()]
        s = rows[-1]
        self.assertEqual((s["chars"], s["bytes"]),
                         (chars, len(("\n".join(lines) + "\n").encode())))
        nll = -sum(r["logprob"] for r in rows[:-1])
        self.assertAlmostEqual(s["bpc"], nll / math.log(2) / chars,
                               delta=1e-6)
        self.assertAlmostEqual(s["bpc"], s["bpb"] * s["bytes"] / chars,
                               delta=1e-6)
        # a character a token (<eos> a newline): the rows' texts are
        # the text's characters
        self.assertEqual("".join(r["text"] for r in rows[:-1]),
                         ("\n".join(lines) + "\n")[1:])
        rc, out, err = txlgen("--score", path)
        self.assertEqual(rc, 0, err)
        summary = dict(x.split(" ", 1) for x in out.decode().splitlines())
        self.assertEqual(int(summary["chars"]), chars)
        self.assertAlmostEqual(float(summary["bpc"]), s["bpc"], delta=1e-5)


class ReplChinese(test_cli.PtyBase):
    """The REPL typed in Chinese on a pty, as a person types."""

    def test_typed_chinese_and_erased(self):
        want = txlgen("-p", "人间", "-n", "6", "--temp", "0",
                      "--ignore-eos", "--no-final-newline")[1].decode()
        test_cli.MODEL, old = MODEL, test_cli.MODEL
        try:
            self.spawn("-n", "6", "--temp", "0", "--ignore-eos",
                       "--color=never", "--threads", "1", cols=20)
        finally:
            test_cli.MODEL = old
        # the banner cut to 20 columns
        self.read_until(rb"/help for help.*\r\n> ")
        # a character too many, erased: one Backspace takes all 3 bytes
        self.send("人间三".encode())
        self.send(b"\x7f")
        self.send(b"\r")
        got = self.read_until(want.encode() + rb"\r\n> ")
        got.decode("utf-8")                 # strict
        self.send(b"\x04")
        self.assertEqual(self.wait(), 0)


class ReplWrap(unittest.TestCase):
    """A line of double-width characters longer than the terminal, edited
    in the REPL inside tmux (a terminal emulator that draws what txlgen
    writes): every row as wide as its characters, after inserts and
    deletes that move characters across the wrap."""

    COLS = 20
    PROMPT = "> "

    def setUp(self):
        if not shutil.which("tmux"):
            self.fail("tmux not installed (setup.sh installs it)")
        self.sock = os.path.join(TMP, "tmux-%d" % os.getpid())
        self.addCleanup(subprocess.run, self.tmux("kill-server"),
                        capture_output=True)

    def tmux(self, *args):
        return ["tmux", "-S", self.sock, "-f", "/dev/null", *args]

    def run_tmux(self, *args):
        subprocess.run(self.tmux(*args), check=True, timeout=30)

    def pane(self):
        return subprocess.run(self.tmux("capture-pane", "-p"), check=True,
                              capture_output=True, text=True,
                              timeout=30).stdout.splitlines()

    def rows_of(self, line):
        """The rows a terminal of COLS columns shows for the prompt and
        @line: a character that does not fit starts the next row."""
        rows, row = [], self.PROMPT
        for ch in line:
            if self.width(row + ch) > self.COLS:
                rows.append(row)
                row = ""
            row += ch
        return rows + [row]

    @staticmethod
    def width(text):
        # the test's characters: ASCII, or CJK of two columns
        return sum(2 if ord(c) > 127 else 1 for c in text)

    def wait_rows(self, line):
        """Polls the pane until the rows of @line are at its end."""
        want = [r.rstrip() for r in self.rows_of(line)]
        deadline = time.monotonic() + 30
        while True:
            got = [r.rstrip() for r in self.pane()]
            while got and not got[-1]:
                got.pop()
            if got[-len(want):] == want:
                return
            if time.monotonic() > deadline:
                self.fail(f"pane {got[-4:]}, want {want}")
            time.sleep(0.05)

    def test_long_line_edited_across_the_wrap(self):
        line = "春风十里柳如烟江山如画年岁花"
        self.assertEqual(self.width(self.PROMPT + line), 30)
        want = txlgen("-p", "人" + line[0] + line[2:], "-n", "4", "--temp",
                      "0", "--ignore-eos", "--no-final-newline")[1].decode()
        self.run_tmux("new-session", "-d", "-x", str(self.COLS), "-y", "12",
                      TXLGEN, "-i", "--threads", "1", "-m", MODEL, "-n", "4",
                      "--temp", "0", "--ignore-eos", "--color=never")
        self.wait_rows("")
        self.run_tmux("send-keys", "-l", line)
        self.wait_rows(line)
        # a character at the start pushes one across the wrap
        self.run_tmux("send-keys", "C-a")
        self.run_tmux("send-keys", "-l", "人")
        self.wait_rows("人" + line)
        # one deleted pulls one back
        self.run_tmux("send-keys", "Right", "Right", "BSpace")
        line = "人" + line[0] + line[2:]
        self.wait_rows(line)
        # the line sent is the line shown
        self.run_tmux("send-keys", "Enter")
        deadline = time.monotonic() + 60
        while want not in "".join(r.rstrip() for r in self.pane()):
            if time.monotonic() > deadline:
                self.fail(f"no {want!r} in {self.pane()}")
            time.sleep(0.05)


class Server(unittest.TestCase):
    def test_stream_of_chinese_characters(self):
        srv = test_server.Server("-m", MODEL, "--parallel", "1")
        self.addCleanup(srv.stop)
        body = dict(prompt="人间", max_tokens=24, temperature=5, seed=3,
                    ignore_eos=True)
        status, whole = srv.post("/v1/completions", body)
        self.assertEqual(status, 200, whole)
        text = whole["choices"][0]["text"]
        events, done = test_server.stream(srv.port, dict(body, stream=True))
        self.assertTrue(done)
        parts = [e["choices"][0]["text"] for e in events]
        self.assertEqual("".join(parts), text)
        for p in parts:
            self.assertNotIn("\ufffd", p)
        # the tokenizer: a character a token, and back
        status, tok = srv.post("/tokenize", {"prompt": "人间三月天"})
        self.assertEqual(status, 200, tok)
        self.assertEqual(len(tok["tokens"]), 5)
        status, back = srv.post("/detokenize", {"tokens": tok["tokens"]})
        self.assertEqual((status, back["prompt"]), (200, "人间三月天"))

    def test_stream_of_byte_pieces(self):
        # the default model spells Chinese a byte a token: no event ends
        # inside a character
        srv = test_server.Server("--parallel", "1")
        self.addCleanup(srv.stop)
        for seed in (1, 2, 3):
            body = dict(prompt="人间三月天，春风十里", max_tokens=16,
                        temperature=1.5, top_k=0, top_p=1, min_p=0,
                        seed=seed, stream=True)
            events, done = test_server.stream(srv.port, body)
            self.assertTrue(done)
            for e in events:
                self.assertNotIn("\ufffd", e["choices"][0]["text"])
        status, tok = srv.post("/tokenize", {"prompt": "人间三月天"})
        self.assertEqual(status, 200, tok)
        status, back = srv.post("/detokenize", {"tokens": tok["tokens"]})
        self.assertEqual((status, back["prompt"]), (200, "人间三月天"))


if __name__ == "__main__":
    unittest.main()
