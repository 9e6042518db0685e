#!/usr/bin/python3
"""txlgen as a user meets it: options, config, pipes, scoring, state, REPL.

Drives the real binary: $TXLGEN (default build/cmd/txlgen) with the model
$TXLGEN_TEST_MODEL; without that variable a small random-weight model is
built with tests/make_random_model.py.  The REPL is driven through a
pseudo-terminal (pty) as a person would, and as a script through a pipe.
Run: TXLGEN=build/cmd/txlgen /usr/bin/python3 tests/test_cli.py
"""

import json
import math
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TXLGEN = os.environ.get("TXLGEN", os.path.join(ROOT, "build", "cmd",
                                               "txlgen"))
MODEL = os.environ.get("TXLGEN_TEST_MODEL")
TMP = None

TEXT = ("The state of the Union is strong. We will build a better future "
        "for our children and for the nation.\n"
        "My fellow citizens, tonight I come before you to speak of work, "
        "of hope, and of the years ahead.\n") * 3


def setUpModule():
    global MODEL, TMP
    TMP = tempfile.mkdtemp(prefix="txlgen-cli-")
    if not MODEL:
        subprocess.run([sys.executable, os.path.join(HERE,
                        "make_random_model.py"), "-o", TMP, "--seed", "11"],
                       check=True, stdout=subprocess.DEVNULL)
        MODEL = os.path.join(TMP, "m.bin")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def env(**kw):
    e = dict(os.environ)
    e.pop("TXLGEN_MODEL", None)
    e.pop("NO_COLOR", None)
    e["TXLGEN_HISTFILE"] = ""
    e.update(kw)
    return e


def run(*args, input=None, model=True, stdin=None, environ=None,
        timeout=60):
    """Run txlgen; returns (rc, stdout bytes, stderr text)."""
    argv = [TXLGEN] + (["-m", MODEL] if model else []) + list(args)
    if input is not None and isinstance(input, str):
        input = input.encode()
    p = subprocess.run(argv, input=input,
                       stdin=stdin if input is None else None,
                       capture_output=True, env=environ or env(),
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def tmpfile(name, content):
    path = os.path.join(TMP, name)
    with open(path, "wb" if isinstance(content, bytes) else "w") as f:
        f.write(content)
    return path


def jsonl(out):
    return [json.loads(line) for line in out.decode().splitlines()]


class Options(unittest.TestCase):
    def test_help_and_version(self):
        rc, out, err = run("--help", model=False)
        self.assertEqual((rc, err), (0, ""))
        self.assertIn(b"Usage: txlgen", out)
        rc, out, err = run("--version", model=False)
        self.assertEqual(rc, 0)
        self.assertRegex(out.decode(), r"^txlgen \d+\.\d+\.\d+ \(libtxl ")

    def test_every_help_option_is_accepted_and_documented(self):
        _, out, _ = run("--help", model=False)
        longs = sorted(set(re.findall(r"--[a-z][a-z-]*[a-z]", out.decode()))
                       - {"--no"})
        self.assertGreater(len(longs), 30)
        with open(os.path.join(ROOT, "man", "txlgen.1")) as f:
            man = f.read().replace("\\-", "-")
        values = {"--color": "--color=never", "--model": None}
        for opt in longs:
            self.assertIn(opt, man, f"{opt} missing from txlgen(1)")
            if opt in ("--help", "--version", "--print-config", "--score",
                       "--ids", "--interactive", "--prompt", "--config",
                       "--prime", "--state-in", "--state-out", "--model"):
                continue
            arg = values.get(opt, opt)
            argv = [arg]
            if opt in ("--text", "--stop"):
                argv.append("x")
            elif opt in ("--n-predict", "--top-k", "--repeat-last-n",
                         "--seed", "--mem-len", "--seg-len", "--clamp-len",
                         "--threads"):
                argv.append("3")
            elif opt in ("--temp", "--top-p", "--min-p",
                         "--repeat-penalty", "--adapt"):
                argv.append("0.5")
            rc, out, err = run(*argv, "--print-config", model=False)
            self.assertEqual(rc, 0, f"{argv}: {err}")
            json.loads(out)

    def test_usage_errors_exit_2(self):
        cases = [(["--bogus"], "unknown option '--bogus'"),
                 (["-x"], "unknown option '-x'"),
                 (["--top-k"], "needs an argument"),
                 (["--top-k", "many"], "--top-k: 'many' is not an integer"),
                 (["--temp", "-1"], "--temp: -1 is out of range"),
                 (["--top-p", "0"], "--top-p: 0 is out of range"),
                 (["--seed", "1.5"], "not an integer"),
                 (["--color=pink"], "not one of auto, always, never"),
                 (["--mem-len", "x"], "--mem-len"),
                 (["stray"], "unexpected argument 'stray'"),
                 (["--ids"], "--ids needs --score"),
                 (["-p", "a", "-f", "b"], "cannot be used together")]
        for argv, msg in cases:
            rc, out, err = run(*argv)
            self.assertEqual(rc, 2, argv)
            self.assertEqual(out, b"", argv)
            self.assertTrue(err.startswith("txlgen: "), err)
            self.assertIn(msg, err)

    def test_library_refusal_is_usage_error(self):
        rc, _, err = run("--same-length", "--mem-len", "0", "-p", "a")
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("txlgen: "))

    def test_missing_model(self):
        rc, out, err = run("-m", os.path.join(TMP, "none.bin"), "-p", "a",
                           model=False)
        self.assertEqual((rc, out), (3, b""))
        self.assertIn("none.bin", err)
        bad = tmpfile("bad.bin", b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
        rc, _, err = run("-m", bad, "-p", "a", model=False)
        self.assertEqual(rc, 3)
        self.assertEqual(len(err.strip().splitlines()), 1)

    def test_default_model(self):
        # From the build tree, txlgen falls back to the source tree's
        # models/sotu.bin; TXLGEN_MODEL overrides it, and a missing one is
        # an error that names the variable's file.
        shipped = os.path.exists(os.path.join(ROOT, "models", "sotu.bin"))
        rc, out, err = run("-p", "a", "-n", "3", "--seed", "1", model=False)
        if shipped:
            self.assertEqual((rc, err), (0, ""))
            self.assertNotEqual(out, b"")
        else:
            self.assertEqual((rc, out), (3, b""))
            self.assertIn("--model", err)
        rc, out, err = run("-p", "a", "-n", "3", model=False,
                           environ=env(TXLGEN_MODEL=MODEL))
        self.assertEqual((rc, err), (0, ""))
        rc, out, err = run("-p", "a", "-n", "3", model=False,
                           environ=env(TXLGEN_MODEL=os.path.join(
                               TMP, "missing.bin")))
        self.assertEqual((rc, out), (3, b""))
        self.assertIn("missing.bin", err)


class Config(unittest.TestCase):
    def test_precedence_and_round_trip(self):
        cfg = tmpfile("c.json", json.dumps(
            {"temp": 0.5, "top_k": 7, "stop": ["\n\n", "END"],
             "mem_len": 16, "same_length": True, "text": "from config"}))
        rc, out, err = run("--config", cfg, "--top-k", "9", "-f", "p.txt",
                           "--print-config", model=False)
        self.assertEqual((rc, err), (0, ""))
        got = json.loads(out)
        self.assertEqual(got["temp"], 0.5)             # config
        self.assertEqual(got["top_k"], 9)              # command line
        self.assertEqual(got["top_p"], 0.95)           # default
        self.assertEqual(got["stop"], ["\n\n", "END"])
        self.assertEqual((got["prompt"], got["text"]), ("p.txt", None))
        self.assertIsNone(got["seg_len"])              # the model's
        self.assertEqual(got["sources"]["temp"], "config file")
        self.assertEqual(got["sources"]["top_k"], "command line")
        self.assertEqual(got["sources"]["top_p"], "default")
        # what --print-config writes, --config reads back (its "sources"
        # then say "config file")
        again = tmpfile("again.json", out)
        rc, out2, _ = run("--config", again, "--print-config", model=False)
        self.assertEqual(rc, 0)
        got2 = json.loads(out2)
        self.assertEqual({k: v for k, v in got2.items() if k != "sources"},
                         {k: v for k, v in got.items() if k != "sources"})
        self.assertEqual(set(got2["sources"].values()), {"config file"})
        rc, out3, _ = run("-c", cfg, "--stop", "X", "--no-same-length",
                          "--print-config", model=False)
        got = json.loads(out3)
        self.assertEqual(got["stop"], ["X"])
        self.assertIs(got["same_length"], False)

    def test_config_settings_take_effect(self):
        cfg = tmpfile("gen.json", json.dumps(
            {"text": "Hello", "n_predict": 6, "seed": 5, "json": True}))
        rc, out, err = run("-c", cfg)
        self.assertEqual((rc, err), (0, ""))
        events = jsonl(out)
        self.assertEqual(len(events), 7)
        self.assertEqual(events[-1]["seed"], 5)

    def test_errors_name_file_key_reason(self):
        cases = [('{"topk": 1}', "unknown key 'topk'"),
                 ('{"top_k": "x"}', "key 'top_k': expected an integer, "
                  "got a string"),
                 ('{"top_k": 1.5}', "key 'top_k': expected an integer"),
                 ('{"temp": -2}', "key 'temp': -2 is out of range"),
                 ('{"echo": 1}', "key 'echo': expected a boolean"),
                 ('{"stop": [1]}', "key 'stop': expected an array of "
                  "strings"),
                 ('{"color": "pink"}', "key 'color'"),
                 ('{"temp": 1, "temp": 2}', "key 'temp': given twice"),
                 ('{"temp": 1,}', "line 1, column"),
                 ('{\n"temp": 1\n', "line 3, column"),
                 ('[1, 2]', "expected a JSON object"),
                 ('{"n_predict": null}', "key 'n_predict': must not be "
                  "null"),
                 ('{"prompt": "a", "text": "b"}', "cannot be used "
                  "together")]
        for i, (text, msg) in enumerate(cases):
            path = tmpfile(f"bad{i}.json", text)
            rc, out, err = run("--config", path, "-p", "x", "-n", "1")
            self.assertEqual(rc, 3, text)
            self.assertEqual(out, b"")
            self.assertTrue(err.startswith(f"txlgen: {path}: "), err)
            self.assertIn(msg, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
        rc, _, err = run("--config", os.path.join(TMP, "nope.json"))
        self.assertEqual(rc, 3)
        self.assertIn("nope.json", err)


class Generation(unittest.TestCase):
    def test_same_seed_same_bytes(self):
        a = run("-p", "Hello", "-n", "40", "--seed", "3")
        b = run("-p", "Hello", "-n", "40", "--seed", "3")
        c = run("-p", "Hello", "-n", "40", "--seed", "4")
        self.assertEqual(a[0], 0)
        self.assertEqual(a, b)
        self.assertNotEqual(a[1], c[1])

    def test_stdin_prompt_equals_text(self):
        a = run("-p", "Hello there", "-n", "20", "--seed", "1")
        b = run("-n", "20", "--seed", "1", input="Hello there\n")
        c = run("-f", "-", "-n", "20", "--seed", "1", input="Hello there")
        p = tmpfile("prompt.txt", "Hello there\n")
        d = run("--prompt", p, "-n", "20", "--seed", "1")
        self.assertEqual(a, b)
        self.assertEqual(a, c)
        self.assertEqual(a, d)

    def test_output_is_valid_utf8_and_json_agrees(self):
        # a random model with byte-fallback pieces cuts characters often
        for seed in range(3):
            rc, text, err = run("-p", "Hé", "-n", "300", "--seed", str(seed),
                                "--ignore-eos")
            self.assertEqual((rc, err), (0, ""))
            text.decode("utf-8")       # strict: raises if invalid
            rc, out, _ = run("-p", "Hé", "-n", "300", "--seed", str(seed),
                             "--ignore-eos", "--json")
            events = jsonl(out)
            self.assertEqual(len(events), 301)
            self.assertEqual("".join(e["text"] for e in events[:-1]),
                             text.decode())
            for e in events[:-1]:
                self.assertLessEqual(e["logprob"], 0)
            s = events[-1]
            self.assertEqual((s["n_gen"], s["end"], s["seed"]),
                             (300, "length", seed))

    def test_empty_prompt_starts_a_text(self):
        rc, out, err = run("-n", "30", "--seed", "2", stdin=subprocess.DEVNULL)
        self.assertEqual((rc, err), (0, ""))
        self.assertFalse(out.startswith(b" "))
        rc, out2, err = run("-n", "30", "--seed", "2", "-p", "")
        self.assertEqual(out, out2)

    def test_echo_and_color(self):
        rc, out, _ = run("-p", "Hi", "--echo", "-n", "5", "--seed", "1")
        self.assertTrue(out.startswith(b"Hi"))
        self.assertNotIn(b"\033[", out)     # auto: no colour in a pipe
        rc, out, _ = run("-p", "Hi", "--echo", "-n", "5", "--seed", "1",
                         "--color=always")
        self.assertTrue(out.startswith(b"\033[1mHi\033[0m"))
        rc, out, _ = run("-p", "Hi", "--echo", "-n", "5", "--seed", "1",
                         "--color", "never")
        self.assertNotIn(b"\033[", out)

    def test_stop_string_is_not_printed(self):
        rc, full, _ = run("-p", "Hello", "-n", "200", "--seed", "9",
                          "--ignore-eos")
        text = full.decode()
        m = re.search(r"[A-Za-z,. ]{2}", text[5:])
        self.assertTrue(m, text)
        stop = m.group(0)
        rc, out, err = run("-p", "Hello", "-n", "200", "--seed", "9",
                           "--ignore-eos", "--stop", stop, "--stop", "\x01")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out.decode(), text[:text.index(stop)])
        rc, out, _ = run("-p", "Hello", "-n", "200", "--seed", "9",
                         "--ignore-eos", "--stop", stop, "--json")
        self.assertEqual(jsonl(out)[-1]["end"], "stop")

    def test_greedy_and_sampling_options(self):
        a = run("-p", "Hello", "-n", "20", "--temp", "0", "--seed", "1")
        b = run("-p", "Hello", "-n", "20", "--temp", "0", "--seed", "2")
        self.assertEqual(a, b)
        for extra in (["--top-k", "1"], ["--top-p", "0.5"],
                      ["--min-p", "0.2"], ["--repeat-penalty", "1.3",
                                           "--repeat-last-n", "16"],
                      ["-t", "1"], ["--unbuffered"],
                      ["--mem-len", "20", "--seg-len", "4",
                       "--clamp-len", "3", "--same-length"]):
            rc, out, err = run("-p", "Hello", "-n", "20", "--seed", "1",
                               *extra)
            self.assertEqual((rc, err), (0, ""), extra)
            self.assertTrue(out, extra)

    def test_stats_on_stderr_only(self):
        a = run("-p", "Hello", "-n", "20", "--seed", "1")
        rc, out, err = run("-p", "Hello", "-n", "20", "--seed", "1",
                           "--stats")
        self.assertEqual((rc, out), (0, a[1]))
        self.assertRegex(err, r"prompt: \d+ tokens .* tokens/s")
        self.assertRegex(err, r"generated: 20 tokens .* tokens/s")
        self.assertRegex(err, r"memory: \d+/\d+ positions")

    def test_pipe_to_head_is_quiet(self):
        p = subprocess.run(f"'{TXLGEN}' -m '{MODEL}' -p Hi -n -1 "
                           "--ignore-eos | head -c 100; "
                           "echo \" rc=${PIPESTATUS[0]}\"",
                           shell=True, executable="/bin/bash",
                           capture_output=True, env=env(), timeout=60)
        self.assertEqual(p.stderr, b"")
        self.assertTrue(p.stdout.endswith(b" rc=141\n"), p.stdout[-20:])
        self.assertEqual(len(p.stdout) - len(b" rc=141\n"), 100)

    def test_write_errors_are_reported(self):
        with open("/dev/full", "wb") as full:
            p = subprocess.run([TXLGEN, "-m", MODEL, "-p", "Hi", "-n", "3000",
                                "--ignore-eos"], stdout=full,
                               stderr=subprocess.PIPE, env=env(), timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"txlgen: writing output failed: No space left",
                      p.stderr)
        p = subprocess.run(f"'{TXLGEN}' -m '{MODEL}' -p Hi -n 3000 "
                           "--ignore-eos >&-", shell=True, env=env(),
                           stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"txlgen: writing output failed", p.stderr)

    def test_interrupt_exits_130(self):
        p = subprocess.Popen([TXLGEN, "-m", MODEL, "-p", "Hi", "-n", "-1",
                              "--ignore-eos"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env())
        got = os.read(p.stdout.fileno(), 200)
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 130)
        self.assertIn(b"interrupted", err)
        (got + rest).decode("utf-8")


class Scoring(unittest.TestCase):
    def score(self, *args, **kw):
        rc, out, err = run("--json", *args, **kw)
        self.assertEqual((rc, err), (0, ""))
        ev = jsonl(out)
        return ev[:-1], ev[-1]

    def test_score_protocol_and_summary(self):
        path = tmpfile("t.txt", TEXT)
        toks, s = self.score("--score", path, "--seg-len", "5")
        n = s["tokens"]
        self.assertEqual(len(toks), n - 1)
        self.assertEqual(s["predicted"], n - 1)
        self.assertEqual([t["pos"] for t in toks], list(range(1, n)))
        nll = -sum(t["logprob"] for t in toks)
        self.assertAlmostEqual(s["nll"], nll / (n - 1), places=5)
        self.assertAlmostEqual(s["ppl"], math.exp(nll / (n - 1)), places=2)
        self.assertEqual(s["bytes"], len(TEXT.encode()))
        self.assertAlmostEqual(s["bpb"], nll / math.log(2) / s["bytes"],
                               places=5)
        rc, out, err = run("--score", path, "--seg-len", "5")
        self.assertEqual(rc, 0)
        text = out.decode()
        self.assertRegex(text, r"nll \d+\.\d+\nppl \d+\.\d+\nbpb \d+\.\d+")

    def test_stream_equals_file_and_ids_equal_text(self):
        path = tmpfile("t2.txt", TEXT)
        a = self.score("--score", path)
        b = self.score("--score", "-", input=TEXT)
        self.assertEqual(a, b)
        ids = " ".join(str(t["id"]) for t in a[0])
        # the first token is never predicted: take it from greedy scoring
        first = self.first_id()
        idsfile = tmpfile("ids.txt", f"{first}\n{ids}\n")
        c = self.score("--score", idsfile, "--ids")
        for x, y in zip(a[0], c[0]):
            self.assertEqual(x["id"], y["id"])
            self.assertAlmostEqual(x["logprob"], y["logprob"], places=5)

    def first_id(self):
        sp = self.tokenizer()
        return sp.encode(TEXT)[0]

    def tokenizer(self):
        try:
            import sentencepiece as spm
        except ImportError:
            self.skipTest("python3-sentencepiece missing")
        sys.path.insert(0, os.path.join(ROOT, "models"))
        import txlfile
        proto = txlfile.read(MODEL)[1]["tokenizer.model"]
        sp = spm.SentencePieceProcessor()
        sp.LoadFromSerializedProto(bytes(proto))
        return sp

    def test_line_by_line_tokens_equal_whole_text(self):
        try:
            sp = self.tokenizer()
        except Exception as e:          # noqa: BLE001
            self.skipTest(f"no tokenizer from the model file: {e}")
        text = "  Leading spaces,\n\nblank lines\n\tand tabs \n" + TEXT
        path = tmpfile("t3.txt", text)
        toks, s = self.score("--score", path)
        want = sp.encode(text)
        self.assertEqual(s["tokens"], len(want))
        self.assertEqual([t["id"] for t in toks], want[1:])

    def test_empty_and_short_inputs_are_errors(self):
        rc, out, err = run("--score", "-", input="")
        self.assertEqual((rc, out), (1, b""))
        self.assertIn("nothing to score", err)
        rc, _, err = run("--score", "-", "--ids", input="5\n")
        self.assertEqual(rc, 1)
        self.assertIn("at least 2", err)
        rc, _, err = run("--score", "-", "--ids", input="1 2\n3 x\n")
        self.assertEqual(rc, 1)
        self.assertIn("line 2: 'x' is not a token id", err)
        rc, _, err = run("--score", "-", "--ids", input="1 99999\n")
        self.assertEqual(rc, 1)
        self.assertIn("out of range", err)
        rc, _, err = run("--score", os.path.join(TMP, "absent.txt"))
        self.assertEqual(rc, 1)
        self.assertIn("absent.txt", err)

    def test_no_progress_bar_on_a_pipe(self):
        big = tmpfile("big.txt", TEXT * 20)
        rc, out, err = run("--score", big)
        self.assertEqual((rc, err), (0, ""))

    def test_adapt(self):
        # --adapt learns while reading: --prime and prompt text adapt
        # exactly as --score of the same tokens does, so the next token's
        # log-prob after them equals the last one --score gives
        sp = self.tokenizer()
        text = TEXT + "\nAnd a second paragraph follows the first.\n"
        prime = tmpfile("adapt.txt", text)
        ids = [i for line in text.splitlines(keepends=True)
               for i in sp.encode(line)]
        self.assertGreater(len(ids), 24)     # several segments of 8
        last = {}
        for lr, how in (("0", ["--prime", prime, "-p", ""]),
                        ("0.5", ["--prime", prime, "-p", ""]),
                        ("0.5", ["-f", prime])):
            rc, out, err = run(*how, "--adapt", lr,
                               "-n", "1", "--temp", "1", "--top-k", "0",
                               "--top-p", "1", "--min-p", "0", "--seed",
                               "4", "--json", "--seg-len", "8")
            self.assertEqual((rc, err), (0, ""))
            tok = jsonl(out)[0]
            path = tmpfile("adapt.ids", " ".join(map(str, ids +
                                                     [tok["id"]])))
            toks, _ = self.score("--score", path, "--ids", "--adapt", lr,
                                 "--seg-len", "8")
            self.assertEqual(toks[-1]["id"], tok["id"])
            self.assertAlmostEqual(toks[-1]["logprob"], tok["logprob"],
                                   places=5)
            last[lr] = toks
        # and it changed the predictions
        self.assertGreater(max(abs(a["logprob"] - b["logprob"])
                               for a, b in zip(last["0"], last["0.5"])),
                           0.01)
        rc, out, err = run("--score", prime, "--adapt", "-1")
        self.assertEqual((rc, out), (2, b""))
        self.assertIn("--adapt", err)


class State(unittest.TestCase):
    def test_prime_then_state_continues_identically(self):
        book = tmpfile("book.txt", TEXT * 4)
        st = os.path.join(TMP, "book.state")
        rc, out, err = run("--prime", book, "-n", "0", "--state-out", st,
                           "-p", "")
        self.assertEqual((rc, err), (0, ""))
        size = os.path.getsize(st)
        a = run("--prime", book, "-p", "Chapter", "-n", "30", "--seed", "3")
        b = run("--state-in", st, "-p", "Chapter", "-n", "30", "--seed", "3")
        self.assertEqual(a[0], 0)
        self.assertEqual(a, b)
        # fixed size whatever the amount of text consumed
        small = tmpfile("small.txt", TEXT[:200])
        st2 = os.path.join(TMP, "small.state")
        run("--prime", small, "--prime", book, "-n", "0", "--state-out", st2,
            "-p", "")
        self.assertEqual(os.path.getsize(st2), size)

    def test_state_with_empty_prompt_continues_the_text(self):
        # the state holds the prediction after its text: continuing it
        # with no prompt equals generating right after that text
        st = os.path.join(TMP, "cont.state")
        prompt = "The state of the Union"
        self.assertEqual(run("-p", prompt, "-n", "0", "--state-out",
                             st)[0], 0)
        a = run("-p", prompt, "-n", "20", "--seed", "5", "--ignore-eos")
        b = run("--state-in", st, "-n", "20", "--seed", "5",
                "--ignore-eos", input=b"")
        self.assertEqual(a[0], 0)
        self.assertEqual(a[1], b[1])
        self.assertTrue(a[1])

    def test_incompatible_state_is_refused(self):
        st = os.path.join(TMP, "s.state")
        self.assertEqual(run("-p", "Hi", "-n", "30", "--mem-len", "12",
                             "--ignore-eos", "--state-out", st)[0], 0)
        rc, out, err = run("--state-in", st, "--mem-len", "6", "-p", "x")
        self.assertEqual((rc, out), (3, b""))
        self.assertIn("s.state", err)
        rc, _, err = run("--state-in", MODEL, "-p", "x")
        self.assertEqual(rc, 3)
        rc, _, err = run("--state-in", os.path.join(TMP, "no.state"),
                         "-p", "x")
        self.assertEqual(rc, 1)


class ScriptedRepl(unittest.TestCase):
    def test_line_by_line(self):
        st = os.path.join(TMP, "r.state")
        rc, out, err = run("-i", "-n", "8", "--seed", "1", input=(
            "Hello\n/mem\n/set n_predict 4\nagain\n/bogus\n"
            f"/save {st}\nnext\n"))
        # the session goes on after an error, but a script learns of it
        self.assertEqual(rc, 2)
        self.assertIn("unknown command '/bogus'", err)
        lines = out.decode().split("\n")
        self.assertRegex(lines[1], r"^memory: \d+/\d+ positions")
        self.assertEqual(len(lines), 5)          # 3 turns, /mem, final ""
        # /load in a new process continues identically
        rc, out2, _ = run("-i", "-n", "4", "--seed", "1",
                          input=f"/load {st}\nnext\n")
        self.assertEqual(out2.decode(), lines[3] + "\n")

    def test_show_set_reset(self):
        rc, out, err = run("-i", "-n", "3", "--seed", "1", input=(
            "/set temp 0\n/set mem_len 20\n/show\n/reset\n/mem\n"
            "/set model x\n/set top_k -1\n/set stop \\n\n/quit\nignored\n"))
        self.assertEqual(rc, 2)                 # the /set errors
        text = out.decode()
        shown = json.loads(text[:text.rindex("}") + 1])
        self.assertEqual((shown["temp"], shown["mem_len"]), (0, 20))
        self.assertIsInstance(shown["seg_len"], int)   # resolved
        self.assertEqual(shown["stop"], [])
        self.assertIn("memory: 0/20 positions", text)
        self.assertIn("'model' can only be set at start-up", err)
        self.assertIn("/set top_k: -1 is out of range", err)

    def test_set_keeps_memory(self):
        # /set mem_len keeps what the memory holds: the newest positions
        # when it shrinks, all of them when it grows
        rc, out, err = run("-i", "-n", "8", "--seed", "1", "--ignore-eos",
                           "--mem-len", "32", input=(
                               "Fellow citizens\n/mem\n/set mem_len 5\n"
                               "/mem\n/set mem_len 40\n/mem\n"))
        self.assertEqual((rc, err), (0, ""))
        mems = re.findall(r"memory: (\d+)/(\d+) positions .*?, "
                          r"(\d+) tokens consumed", out.decode())
        self.assertEqual(len(mems), 3)
        fill, consumed = int(mems[0][0]), mems[0][2]
        self.assertGreaterEqual(fill, 9)        # 8 generated + the prompt
        self.assertEqual(mems[1:], [("5", "5", consumed),
                                    ("5", "40", consumed)])


class PtyRepl(unittest.TestCase):
    """The REPL on a terminal, as a person uses it."""

    def spawn(self, *args, environ=None):
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(TXLGEN, [TXLGEN, "-m", MODEL] + list(args),
                      environ or env())
        self.pid, self.fd, self.buf = pid, fd, b""
        return pid

    def read_until(self, pattern, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            m = re.search(pattern, self.buf)
            if m:
                got, self.buf = self.buf[:m.end()], self.buf[m.end():]
                return got
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                try:
                    self.buf += os.read(self.fd, 65536)
                except OSError:
                    break
        self.fail(f"no {pattern!r} in {self.buf[-300:]!r}")

    def send(self, data):
        # libedit turns the terminal to raw mode only after drawing the
        # prompt: what is typed before that is echoed twice (typeahead)
        time.sleep(0.1)
        os.write(self.fd, data)

    def wait(self):
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def test_session(self):
        hist = os.path.join(TMP, "hist")
        st = os.path.join(TMP, "pty.state")
        self.spawn("-n", "-1", "--ignore-eos", "--seed", "1",
                   environ=env(TXLGEN_HISTFILE=hist))
        self.read_until(rb"/help for help.*\r\n> ")
        # Ctrl-C during generation stops it and returns to the prompt
        self.send(b"Hello there\r")
        self.read_until(rb"Hello there\r\n.{200}", timeout=20)
        self.send(b"\x03")
        self.read_until(rb"\(stopped\)\r\n> ")
        self.send(b"/set n_predict 10\r")
        self.read_until(rb"> ")
        self.send(b"/reset\r")
        self.read_until(rb"memory cleared\)\r\n> ")
        self.send(b"/mem\r")
        self.read_until(rb"memory: 0/\d+ positions.*\r\n> ")
        self.send(b"Once upon a time\r")
        self.read_until(rb"time\r\n")
        self.read_until(rb"\r\n> ")
        self.send(f"/save {st}\r".encode())
        self.read_until(rb"memory saved.*\r\n> ")
        self.send(b"and then\r")
        self.read_until(rb"and then\r\n")
        first = self.read_until(rb"\r\n> ")
        # Ctrl-D quits
        self.send(b"\x04")
        self.assertEqual(self.wait(), 0)
        with open(hist, "rb") as f:
            self.assertIn(b"Once\\040upon\\040a\\040time", f.read())
        # /load in a new process continues identically
        self.spawn("-n", "10", "--ignore-eos", "--seed", "1")
        self.read_until(rb"> ")
        self.send(f"/load {st}\r".encode())
        self.read_until(rb"memory loaded.*\r\n> ")
        self.send(b"and then\r")
        self.read_until(rb"and then\r\n")
        self.assertEqual(self.read_until(rb"\r\n> "), first)
        # text typed, then Ctrl-C: the line is dropped, on a line of its
        # own, and the session goes on
        self.send(b"abc")
        self.read_until(rb"abc")
        self.send(b"\x03")
        self.read_until(rb"^\^C\r\n> ")
        self.send(b"/mem\r")
        self.read_until(rb"memory: ")
        self.read_until(rb"> ")
        # Ctrl-C at an empty prompt asks for a second one, which ends the
        # program
        self.send(b"\x03")
        self.read_until(rb"Ctrl-C again or Ctrl-D to quit\)\r\n> ")
        self.send(b"\x03")
        self.assertEqual(self.wait(), 130)

    def test_color_on_a_terminal(self):
        self.spawn("-p", "Hi", "--echo", "-n", "3", "--seed", "1")
        out = self.read_until(rb"Hi")
        self.assertEqual(self.wait(), 0)
        self.assertIn(b"\033[1m", out)
        self.spawn("-p", "Hi", "--echo", "-n", "3", "--seed", "1",
                   environ=env(NO_COLOR="1"))
        out = self.read_until(rb"Hi")
        self.assertEqual(self.wait(), 0)
        self.assertNotIn(b"\033[", out)


class Manual(unittest.TestCase):
    def test_man_page_has_no_warnings(self):
        if not shutil.which("man"):
            self.skipTest("man-db is not installed")
        p = subprocess.run(["man", "--warnings", "-l",
                            os.path.join(ROOT, "man", "txlgen.1")],
                           capture_output=True, timeout=60,
                           env=dict(os.environ, MANWIDTH="80",
                                    MAN_KEEP_FORMATTING="0"))
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stderr.decode(), "")
        text = re.sub(r".\x08", "", p.stdout.decode())
        for section in ("EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES",
                        "CONFIGURATION FILE", "INTERACTIVE SESSION"):
            self.assertIn(section, text)
        for cmd in ("/help", "/reset", "/set", "/show", "/mem", "/save",
                    "/load", "/quit"):
            self.assertIn(cmd, text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
