#!/usr/bin/python3
"""txlgen as a user meets it: options, config, pipes, scoring, state, REPL.

Drives the real binary: $TXLGEN (default build/cmd/txlgen) with the model
$TXLGEN_TEST_MODEL; without that variable a small random-weight model is
built with tests/make_random_model.py.  The REPL is driven through a
pseudo-terminal (pty) as a person would, and as a script through a pipe.
Run: TXLGEN=build/cmd/txlgen /usr/bin/python3 tests/test_cli.py
"""

import codecs
import ctypes
import fcntl
import json
import math
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
import unittest

import srctree  # noqa: F401 (models/ on sys.path)
import clitest
from clitest import MODEL, ROOT, TXLGEN
from txlgen.conventions import number_types

# txlgen keeps an ignored SIGHUP ignored (as nohup asks): the hangup tests
# need its default in the programs they start, whatever ran the tests
signal.signal(signal.SIGHUP, signal.SIG_DFL)

TMP = None

TEXT = ("The state of the Union is strong. We will build a better future "
        "for our children and for the nation.\n"
        "My fellow citizens, tonight I come before you to speak of work, "
        "of hope, and of the years ahead.\n") * 3


def setUpModule():
    global MODEL, TMP
    MODEL, TMP = clitest.model_and_tmp(MODEL, "txlgen-cli-")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def env(**kw):
    e = dict(os.environ)
    e.pop("TXLGEN_MODEL", None)
    e.pop("NO_COLOR", None)
    e["TXLGEN_HISTFILE"] = ""
    e.update(kw)
    return e


def run(*args, input=None, model=True, stdin=subprocess.DEVNULL,
        environ=None, timeout=60):
    """Run txlgen; returns (rc, stdout bytes, stderr text).  Its stdin is
    empty unless given: never the terminal the tests were started from (a
    run without a prompt would start the REPL and wait)."""
    argv = [TXLGEN] + (["-m", MODEL] if model else []) + list(args)
    if input is not None and isinstance(input, str):
        input = input.encode()
    p = subprocess.run(argv, input=input,
                       stdin=stdin if input is None else None,
                       capture_output=True, env=environ or env(),
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


# Every process a test starts ends with the test, passed or failed: most
# of those started in the background generate without end (-n -1) or wait
# for input until a signal comes, and one left behind would run forever.

def popen(test, argv, **kw):
    """subprocess.Popen(argv), killed and reaped when @test ends.  In a
    new session, so that a shell's children go with it."""
    kw.setdefault("env", env())
    kw.setdefault("stdin", subprocess.DEVNULL)
    p = subprocess.Popen(argv, start_new_session=True, **kw)
    test.addCleanup(reap, p)
    return p


def reap(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for f in (p.stdin, p.stdout, p.stderr):
        if f:
            try:
                f.close()
            except OSError:
                pass
    p.wait(timeout=30)


def run_shell(test, script, timeout=60):
    """A bash command line; (returncode, stdout, stderr) as bytes.  On a
    timeout its whole process group is killed, not only the shell."""
    p = popen(test, ["/bin/bash", "-c", script], stdout=subprocess.PIPE,
              stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def other_thread(pid, sig):
    """A thread of process @pid, not its main one, that would run the
    handler of @sig (one that does not block it), or None."""
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
        if tid == pid:
            continue
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            blk = next(int(line.split()[1], 16) for line in f
                       if line.startswith("SigBlk:"))
        if not blk & (1 << (sig - 1)):
            return tid
    return None


def tmpfile(name, content):
    path = os.path.join(TMP, name)
    with open(path, "wb" if isinstance(content, bytes) else "w") as f:
        f.write(content)
    return path


def jsonl(out):
    return [json.loads(line) for line in out.decode().splitlines()]


def with_metadata(src, dst, **meta):
    """Copy the model file src to dst with extra __metadata__ strings:
    the safetensors header rewritten, padded with spaces so that the data
    still starts at a multiple of 64 bytes (offsets are relative to it)."""
    with open(src, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    header["__metadata__"].update(meta)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 64)
    with open(dst, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)
    return dst


def model_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))


def max_rss_kb(argv, input_path, timeout=120):
    """Run argv with stdin from input_path; (rc, peak RSS in KiB).  Under
    AddressSanitizer, freed memory is reused at once (no quarantine), so
    that the peak is that of live memory there too."""
    e = env()
    e["ASAN_OPTIONS"] = (e.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"
                         ":thread_local_quarantine_size_kb=0").lstrip(":")
    with open(input_path, "rb") as f:
        p = subprocess.Popen(argv, stdin=f, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=e)
    end = time.time() + timeout
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.time() > end:
            p.kill()
            p.wait()
            raise AssertionError(f"{argv} still running after {timeout} s")
        time.sleep(0.05)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, usage.ru_maxrss


def one_line_text(nbytes):
    words = TEXT.split()
    out, n, i = [], 0, 0
    while n < nbytes:
        w = words[i % len(words)]
        out.append(w)
        n += len(w) + 1
        i += 1
    return " ".join(out)[:nbytes]


def wait_for_size(path, size, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and os.path.getsize(path) >= size:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {size} bytes")


class Options(unittest.TestCase):
    def test_help_and_version(self):
        rc, out, err = run("--help", model=False)
        self.assertEqual((rc, err), (0, ""))
        self.assertIn(b"Usage: txlgen", out)
        rc, out, err = run("--version", model=False)
        self.assertEqual(rc, 0)
        self.assertRegex(out.decode(), r"^txlgen \d+\.\d+\.\d+ \(libtxl ")

    def test_version_names_commit_kernels_and_blas(self):
        rc, out, err = run("--version", model=False)
        self.assertEqual((rc, err), (0, ""))
        first, kernels, blas = out.decode().splitlines()
        commit = re.match(r"txlgen \d+\.\d+\.\d+ \(libtxl \d+\.\d+\.\d+\), "
                          r"commit (\S+)", first).group(1)
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=60)
        if shutil.which("git") and head.returncode == 0:
            # git describe: [TAG-N-g]HASH[-dirty]
            short = re.sub(r"-dirty$", "", commit).rsplit("-g", 1)[-1]
            self.assertGreaterEqual(len(short), 7)
            self.assertTrue(head.stdout.startswith(short), (commit, head))
        self.assertRegex(kernels, r"^kernels: (scalar|avx2|avxvnni|avx512|"
                         r"avx512vnni|avx512bf16) ")
        self.assertRegex(blas, r"^BLAS: OpenBLAS \d+\.\d+\.\d+ .*\(core \w+\)$")
        # TXL_ISA caps the kernels; OPENBLAS_CORETYPE chooses OpenBLAS's
        out = run("--version", model=False, environ=env(TXL_ISA="scalar"))[1]
        self.assertIn("kernels: scalar (the best this CPU runs, at most "
                      "TXL_ISA=scalar)", out.decode())
        # without it, no variable's name taken for its value
        self.assertNotIn("$", kernels)
        # --file, which takes the prompt file as --prompt does, is said
        _, out, _ = run("--help", model=False)
        self.assertRegex(out.decode(), r"--prompt FILE .*\n.*--file FILE")
        if "DYNAMIC_ARCH" in blas:
            out = run("--version", model=False,
                      environ=env(OPENBLAS_CORETYPE="Prescott"))[1]
            self.assertIn("(core Prescott)", out.decode())

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
                       "--ids", "--interactive", "--prompt", "--file",
                       "--config",
                       "--prime", "--state-in", "--state-out", "--model",
                       "--tokenize", "--info", "--score-stride",
                       "--list-models", "--list-types", "--list-options",
                       "--score-docs",
                       "--field", "--strict", "--first-line", "--streams",
                       "--kl-ref", "--kl-ref-kv-type", "--kl-ref-compute",
                       "--html", "--part", "--score-merge"):
                continue
            arg = values.get(opt, opt)
            argv = [arg]
            if opt in ("--text", "--stop"):
                argv.append("x")
            elif opt == "--logit-bias":
                argv.append("3=-1.5")
            elif opt in ("--n-predict", "--top-k", "--repeat-last-n",
                         "--seed", "--mem-len", "--seg-len", "--clamp-len",
                         "--threads", "--n-samples"):
                argv.append("3")
            elif opt in ("--temp", "--top-p", "--min-p",
                         "--repeat-penalty", "--adapt",
                         "--frequency-penalty", "--presence-penalty",
                         "--typical", "--mirostat-tau", "--mirostat-eta"):
                argv.append("0.5")
            elif opt == "--kv-type":
                argv.append("f16")
            elif opt == "--compute":
                argv.append("f32")
            elif opt == "--mem-init":
                argv.append("zeros")
            rc, out, err = run(*argv, "--print-config")
            self.assertEqual(rc, 0, f"{argv}: {err}")
            json.loads(out)

    @staticmethod
    def list_options():
        """--list-options: {spelling: (the spelling --help lists, kind,
        values)}."""
        rc, out, err = run("--list-options", model=False)
        assert (rc, err) == (0, ""), (rc, err)
        got = {}
        for line in out.decode().splitlines():
            spellings, kind, *values = line.split(" ")
            names = spellings.split(",")
            for name in names:
                got[name] = (names[0], kind, values)
        return got

    def test_list_options_is_the_table_of_help(self):
        # --help and --list-options come from the one table: the same
        # options, with the same short forms and kinds of argument
        _, out, _ = run("--help", model=False)
        helped = {}
        for m in re.finditer(r"(?m)^  (?:-(\w), )?\s*--([a-z-]+)"
                             r"(\[=\w+\]| [A-Z]+)?", out.decode()):
            helped["--" + m.group(2)] = (m.group(1), m.group(3))
        listed = self.list_options()
        firsts = {first for first, _, _ in listed.values()}
        self.assertEqual({f for f in firsts if not f.startswith("--no-")},
                         set(helped))
        for name, (short, arg) in helped.items():
            kind = listed[name][1]
            self.assertEqual(kind == "flag", arg is None, name)
            if short:
                self.assertEqual(listed["-" + short][0], name)
            # a --no- form exactly for the flags that set something
            self.assertEqual("--no-" + name[2:] in listed,
                             kind == "flag" and name not in (
                                 "--help", "--version", "--print-config",
                                 "--info", "--list-models", "--list-types",
                                 "--list-options") or name == "--color",
                             name)
        # every spelling is one the parser takes
        for name, (first, kind, values) in listed.items():
            argv = [name] if kind == "flag" else [
                name, values[0] if values else "1"]
            if first in ("--help", "--version", "--list-types",
                         "--list-options", "--interactive", "--info",
                         "--list-models", "--print-config", "--config",
                         "--model", "--kl-ref"):
                continue
            rc, _, err = run(*argv, "--print-config")
            self.assertNotIn("unknown option", err, argv)
            self.assertNotIn("needs an argument", err, argv)
            self.assertNotIn("takes no value", err, argv)
        # what the enumerations take, --list-types' types among them
        self.assertEqual(listed["--kv-type"][1:], ("choice", run(
            "--list-types", model=False)[1].decode().split()))
        self.assertEqual(listed["--colour"], ("--color", "choice",
                                              ["auto", "always", "never"]))

    def test_help_gives_the_defaults_the_run_uses(self):
        # "(default 40; ...)" in --help is the value --print-config gives
        # where nothing else set it
        _, out, _ = run("--help", model=False)
        rc, cfg, err = run("--print-config")
        self.assertEqual(rc, 0, err)
        cfg = json.loads(cfg)
        said = {}
        for m in re.finditer(r"(?ms)^  (?:-\w, )?\s*--([a-z-]+)(.*?)(?=^  \S|"
                             r"^  (?:-\w, )?\s*--|\n\n)", out.decode()):
            d = re.search(r"\(default (-?\d[\d.]*|[A-Z]\w*)\b", m.group(2))
            if d:
                said[m.group(1).replace("-", "_")] = d.group(1)
        self.assertGreaterEqual(len(said), 10, said)
        for key, value in said.items():
            if key not in cfg:
                continue        # an option of the command line only
            self.assertEqual(cfg["sources"][key], "default", key)
            got = cfg[key]
            self.assertEqual(got if isinstance(got, str) else float(got),
                             value if isinstance(got, str) else float(value),
                             key)

    def test_each_config_key_is_its_option(self):
        # every key of the config file is an option of the same name with
        # '-' for '_', of the same type: each value --print-config shows,
        # given as the option or in a config file, reads back the same
        rc, out, err = run("--print-config")
        self.assertEqual(rc, 0, err)
        defaults = json.loads(out)
        del defaults["sources"]
        listed = self.list_options()
        # values other than the defaults, where one would change nothing
        others = {"model": MODEL, "text": "abc", "seed": 7, "mem_len": 5,
                  "seg_len": 9, "clamp_len": 3, "same_length": True,
                  "prompt": None, "score_stride": None, "state_in": None,
                  "state_out": None, "stop": ["x", "y"], "prime": [],
                  "kv_type": "BF16", "mem_init": "zeros",
                  "color": "never", "kl_ref_kv_type": "F16",
                  "kl_ref_compute": "bf16", "n_predict": 17, "top_k": 3,
                  "temp": 0.25, "threads": 2, "adapt": 0.5}
        self.assertLessEqual(set(others), set(defaults))
        text = tmpfile("key-text.txt", TEXT)
        for key, default in defaults.items():
            name = "--" + key.replace("_", "-")
            self.assertIn(name, listed, key)
            value = others.get(key, default)
            if isinstance(value, bool) and key not in others:
                value = not value
            if value is None or value == []:
                continue        # a file to read, or a job of its own
            if isinstance(value, bool):
                argv = [name if value else "--no-" + name[2:]]
            elif isinstance(value, list):
                argv = [a for v in value for a in (name, v)]
            else:
                argv = [name, str(value)]
            cfg = tmpfile(f"key-{key}.json", json.dumps({key: value}))
            # the options these go with
            with_ = (["--score", text, "--kl-ref", MODEL]
                     if key.startswith("kl_ref_") else [])
            got = []
            for how in (argv, ["-c", cfg]):
                # (run()'s -m would be the command line's model)
                rc, out, err = run(*how, *with_, "--print-config",
                                   model=key != "model")
                self.assertEqual(rc, 0, (how, err))
                got.append(json.loads(out))
            self.assertEqual(got[0][key], value, key)
            self.assertEqual(got[1][key], value, key)
            self.assertEqual((got[0]["sources"][key], got[1]["sources"][key]),
                             ("command line", "config file"), key)
        # and no option of the command line only is a key
        for name in ("n_samples", "score", "config", "interactive"):
            cfg = tmpfile(f"cli-{name}.json", json.dumps({name: 1}))
            rc, _, err = run("-c", cfg, "-p", "x")
            self.assertEqual(rc, 3)
            self.assertIn(f"unknown key '{name}'", err)

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
                 (["--score-stride", "2"], "--score-stride needs --score"),
                 (["--score-stride", "0"], "--score-stride: 0 is out of"),
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
                           "--print-config")
        self.assertEqual((rc, err), (0, ""))
        got = json.loads(out)
        self.assertEqual(got["temp"], 0.5)             # config
        self.assertEqual(got["top_k"], 9)              # command line
        self.assertEqual(got["top_p"], 0.95)           # default
        self.assertEqual(got["stop"], ["\n\n", "END"])
        self.assertEqual((got["prompt"], got["text"]), ("p.txt", None))
        self.assertEqual(got["seg_len"], int(           # the model's
            model_header(MODEL)["__metadata__"]["tgt_len"]))
        self.assertEqual(got["sources"]["temp"], "config file")
        self.assertEqual(got["sources"]["top_k"], "command line")
        self.assertEqual(got["sources"]["top_p"], "default")
        # what --print-config writes, --config reads back (its "sources"
        # then say "config file")
        again = tmpfile("again.json", out)
        rc, out2, _ = run("--config", again, "--print-config")
        self.assertEqual(rc, 0)
        got2 = json.loads(out2)
        self.assertEqual({k: v for k, v in got2.items() if k != "sources"},
                         {k: v for k, v in got.items() if k != "sources"})
        self.assertEqual({v for k, v in got2["sources"].items()
                          if k != "model"}, {"config file"})   # -m MODEL
        rc, out3, _ = run("-c", cfg, "--stop", "X", "--no-same-length",
                          "--print-config")
        got = json.loads(out3)
        self.assertEqual(got["stop"], ["X"])
        self.assertIs(got["same_length"], False)

    def test_print_config_resolves_what_the_run_uses(self):
        # the model file, the model's values and the seed picked, as
        # numbers a config can hold; their sources stay where they came
        # from
        meta = model_header(MODEL)["__metadata__"]
        name_dir = tempfile.mkdtemp(dir=TMP)
        shutil.copy(MODEL, os.path.join(name_dir, "named.bin"))
        rc, out, err = run("-m", "named", "--print-config", model=False,
                           environ=env(TXLGEN_MODEL_PATH=name_dir))
        self.assertEqual((rc, err), (0, ""))
        got = json.loads(out)
        self.assertEqual(got["model"], os.path.join(name_dir, "named.bin"))
        self.assertEqual((got["mem_len"], got["seg_len"]),
                         (int(meta["mem_len"]), int(meta["tgt_len"])))
        self.assertIsInstance(got["seed"], int)
        self.assertEqual(got["sources"]["seed"], "default")
        # a config of it gives the run it describes: same seed, same text
        cfg = tmpfile("resolved.json", out)
        a = run("-c", cfg, "-p", "x", "-n", "8", model=False)
        b = run("-m", MODEL, "--seed", str(got["seed"]), "-p", "x", "-n",
                "8", model=False)
        self.assertEqual((a[0], a[2]), (0, ""))
        self.assertEqual(a[1], b[1])

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


    def test_integers_are_read_as_written(self):
        # cJSON keeps a double: 2^63 - 1 was echoed as 9.22337203685478e+18
        # and 2^53 + 1 as 2^53
        for text, msg in (
                ('{"n_predict": 9223372036854775807}',
                 "key 'n_predict': 9223372036854775807 is out of range "
                 "(-1 .. 2147483647)"),
                ('{"seed": 9007199254740993}',
                 "key 'seed': 9007199254740993 is out of range (0 .. "
                 "9007199254740991"),
                ('{"top_k": 123456789012345678901234567890}',
                 "key 'top_k': 123456789012345678901234567890 is out of "
                 "range"),
                ('{"top_k": 10.5e0}', "key 'top_k': expected an integer, "
                 "got 10.5e0"),
                ('{"top_k": 1e-400}', "key 'top_k': expected an integer, "
                 "got 1e-400")):
            path = tmpfile("int.json", text)
            rc, out, err = run("--config", path, "-p", "x", "-n", "1")
            self.assertEqual((rc, out), (3, b""), text)
            self.assertTrue(err.startswith(f"txlgen: {path}: {msg}"), err)
            self.assertEqual(len(err.splitlines()), 1, err)
        # whole numbers however written, and the largest seed exactly
        path = tmpfile("int.json", '{"n_predict": 3e0, "top_k": 500.00e-2,'
                       ' "seed": 9007199254740991}')
        rc, out, err = run("--config", path, "--print-config")
        self.assertEqual((rc, err), (0, ""))
        conf = json.loads(out)
        self.assertEqual((conf["n_predict"], conf["top_k"], conf["seed"]),
                         (3, 5, 9007199254740991))
        self.assertIn(b'"seed": 9007199254740991', out)
        for argv, msg in ((["-n", "9223372036854775807"],
                           "-n: 9223372036854775807 is out of range"),
                          (["--seed", "9007199254740993"],
                           "--seed: 9007199254740993 is out of range")):
            rc, out, err = run(*argv, "-p", "x")
            self.assertEqual(rc, 2)
            self.assertIn(f"txlgen: {msg} (", err)

    def test_a_nul_in_a_string_is_refused(self):
        # "\u0000hi" used to become an empty prompt
        for text in ('{"text": "\\u0000hi"}', '{"stop": ["a", "b\\u0000"]}',
                     '{"model\\u0000x": "m.bin"}'):
            path = tmpfile("nul.json", text)
            rc, out, err = run("--config", path, "-n", "1")
            self.assertEqual((rc, out), (3, b""), text)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertRegex(err, rf"^txlgen: {re.escape(path)}: line 1, "
                             r"column \d+: a string holds \\u0000")
        # an escaped backslash before u0000 is no NUL
        path = tmpfile("nul.json", '{"text": "a\\\\u0000"}')
        rc, out, err = run("--config", path, "--print-config")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(json.loads(out)["text"], "a\\u0000")


class Generation(unittest.TestCase):
    @staticmethod
    def token_texts(*argv, model=None):
        """The text of each token of a long run with argv (--json)."""
        rc, out, err = run(*argv, "-n", "80", "--ignore-eos", "--json",
                           *(["-m", model] if model else []),
                           model=model is None)
        assert rc == 0, err
        return [ev["text"] for ev in jsonl(out) if "id" in ev]

    def test_length_never_cuts_a_character(self):
        # byte tokens spell a character over several tokens: -n N that
        # ends inside one drops its first bytes where the model does not
        # complete it (the random model rarely does), never U+FFFD (which
        # only stands for the model's own stray bytes)
        argv = ("-p", "America", "--seed", "11")
        texts = self.token_texts(*argv)
        cuts = 0
        for n in range(1, 61):
            rc, out, err = run(*argv, "-n", str(n), "--ignore-eos")
            self.assertEqual((rc, err), (0, ""))
            text = out.decode("utf-8")            # strict
            head = "".join(texts[:n])
            if not head.endswith("\ufffd"):
                self.assertFalse(text.endswith("\ufffd"), (n, text[-10:]))
            self.assertTrue(text.startswith(head), n)
            self.assertLessEqual(len(text.encode()) - len(head.encode()), 4)
            cuts += texts[n - 1] == ""
        self.assertGreater(cuts, 0, "no -n ended inside a character")

    def test_length_completes_a_character_the_model_completes(self):
        # the default model spells rare characters in byte tokens: -n N
        # that ends inside one generates the tokens that complete it
        sotu = os.path.join(ROOT, "models", "sotu.bin")
        if not os.path.exists(sotu):
            self.skipTest("models/sotu.bin does not ship in this tree")
        for seed in ("11", "12", "13", "14"):
            argv = ("-p", "America", "--seed", seed)
            texts = self.token_texts(*argv, model=sotu)
            for n in range(1, len(texts) - 3):
                done = next(i for i in range(n - 1, len(texts))
                            if texts[i])
                if texts[n - 1] == "" and not texts[done].startswith(
                        "\ufffd") and done - n < 3:
                    break
            else:
                continue
            rc, out, err = run(*argv, "-n", str(n), "--ignore-eos", "-m",
                               sotu, "--no-final-newline", model=False)
            self.assertEqual((rc, err), (0, ""))
            self.assertEqual(out.decode("utf-8"), "".join(texts[:done + 1]))
            return
        self.skipTest("no character in byte tokens in these samples")

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
                                "--ignore-eos", "--no-final-newline")
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
        _, out, err = run_shell(self, f"'{TXLGEN}' -m '{MODEL}' -p Hi "
                                "-n -1 --ignore-eos | head -c 100; "
                                "echo \" rc=${PIPESTATUS[0]}\"")
        self.assertEqual(err, b"")
        self.assertTrue(out.endswith(b" rc=141\n"), out[-20:])
        self.assertEqual(len(out) - len(b" rc=141\n"), 100)

    def test_write_errors_are_reported(self):
        with open("/dev/full", "wb") as full:
            p = subprocess.run([TXLGEN, "-m", MODEL, "-p", "Hi", "-n", "3000",
                                "--ignore-eos"], stdout=full,
                               stderr=subprocess.PIPE, env=env(), timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"txlgen: writing output failed: No space left",
                      p.stderr)
        rc, _, err = run_shell(self, f"'{TXLGEN}' -m '{MODEL}' -p Hi "
                               "-n 3000 --ignore-eos >&-")
        self.assertEqual(rc, 1)
        self.assertIn(b"txlgen: writing output failed", err)

    def test_interrupt_exits_130(self):
        p = popen(self, [TXLGEN, "-m", MODEL, "-p", "Hi", "-n", "-1",
                         "--ignore-eos"], stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
        got = clitest.read_pipe(p.stdout, lambda b: len(b) >= 200)
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
        from txlgen import txlfile
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


class JsonStyle(unittest.TestCase):
    """Every JSON txlgen writes is in one style, Python's json.dumps:
    lines of records with ", " and ": ", documents indented by 2."""

    def assertLines(self, out):
        lines = out.decode().splitlines()
        self.assertTrue(lines)
        for line in lines:
            self.assertEqual(line, json.dumps(json.loads(line),
                                              ensure_ascii=False))

    def test_one_style(self):
        text = tmpfile("style.txt", "The state of the Union, é 日本\n")
        docs = tmpfile("style.jsonl", '{"id": {"a": [1, 2]}, "text": '
                       '"We are here"}\n')
        for argv in (["-p", "We", "-n", "3", "--json", "--echo"],
                     ["-p", "We", "-n", "3", "--json", "--n-samples", "2"],
                     ["--score", text, "--json"],
                     ["--score-docs", docs, "--field", "text"],
                     ["--tokenize", text, "--json"]):
            with self.subTest(argv=argv):
                rc, out, err = run(*argv)
                self.assertEqual(rc, 0, err)
                self.assertLines(out)
        rc, out, err = run("--list-models", "--json", model=False,
                           environ=env(TXLGEN_MODEL_PATH=os.path.dirname(
                               MODEL)))
        self.assertEqual(rc, 0, err)
        self.assertLines(out)
        for argv in (["--info", "--json"],
                     ["--print-config", "--stop", "a", "--stop", "b"]):
            with self.subTest(argv=argv):
                rc, out, err = run(*argv)
                self.assertEqual(rc, 0, err)
                self.assertEqual(out.decode(), json.dumps(
                    json.loads(out), indent=2, ensure_ascii=False) + "\n")


class FinalNewline(unittest.TestCase):
    """A text ends with a newline, on a terminal and in a pipe alike;
    --no-final-newline gives the generated bytes only."""

    def test_runs_in_a_row_stay_on_their_lines(self):
        # as printf 'We\nThe Congress\n' | xargs -I{} txlgen -p {} -n 10
        outs = []
        for prompt in ("We", "The Congress"):
            rc, out, err = run("-p", prompt, "-n", "10", "--seed", "1",
                               "--ignore-eos")
            self.assertEqual(rc, 0, err)
            outs.append(out)
        for out in outs:
            self.assertTrue(out.endswith(b"\n"), out)
        rc, exact, err = run("-p", "We", "-n", "10", "--seed", "1",
                             "--ignore-eos", "--no-final-newline")
        self.assertEqual(rc, 0, err)
        # the same text, without the newline added (unless it had one)
        self.assertEqual(exact + (b"" if exact.endswith(b"\n") else b"\n"),
                         outs[0])
        # the JSON of the same run: the tokens' text is the exact bytes
        rc, js, err = run("-p", "We", "-n", "10", "--seed", "1",
                          "--ignore-eos", "--json")
        self.assertEqual(rc, 0, err)
        text = "".join(e.get("text", "") for e in jsonl(js) if "id" in e)
        self.assertEqual(text.encode(), exact)
        # a config file may set it too
        cfg = tmpfile("no-final.json", '{"final_newline": false}')
        self.assertEqual(run("-c", cfg, "-p", "We", "-n", "10", "--seed",
                             "1", "--ignore-eos")[1], exact)


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

    def test_state_keeps_the_repeat_penalty_window(self):
        # the default model with its recommended repeat penalty: a text
        # saved and continued gives the tokens of one run over the same
        # text, and a state without the window (format 4) does not
        sotu = os.path.join(ROOT, "models", "sotu.bin")
        if not os.path.exists(sotu):
            self.skipTest("no models/sotu.bin")
        rc, out, _ = run("-m", sotu, "--print-config", model=False)
        self.assertEqual(rc, 0)
        cfg = json.loads(out)
        self.assertNotEqual(cfg["repeat_penalty"], 1)
        st = os.path.join(TMP, "window.state")
        a, b = "The state of the Union is", " We must"
        rc, first, err = run("-m", sotu, "-p", a, "-n", "30", "--temp", "0",
                             "--state-out", st, model=False)
        self.assertEqual((rc, err), (0, ""))
        rc, cont, err = run("-m", sotu, "--state-in", st, "-p", b, "-n",
                            "20", "--temp", "0", model=False)
        self.assertEqual((rc, err), (0, ""))
        whole = a + first.decode().rstrip("\n") + b
        rc, one, err = run("-m", sotu, "-p", whole, "-n", "20", "--temp",
                           "0", model=False)
        self.assertEqual((rc, err), (0, ""))
        self.assertTrue(one.strip())
        self.assertEqual(cont, one)
        # the same file as format 4 wrote it: no ids, padding 0, a
        # header of 64 bytes, every head's mem_len rows (zeros past the
        # fill; format 6 writes the filled ones only)
        with open(st, "rb") as f:
            data = bytearray(f.read())
        n_recent = struct.unpack_from("<I", data, 60)[0]
        # the text's 36 tokens or so, all within the window
        self.assertTrue(30 < n_recent <= cfg["repeat_last_n"], n_recent)
        self.assertEqual(struct.unpack_from("<I", data, 8)[0], 6)
        n_layer, _, _, n_head, d_head, mem_len, fill = struct.unpack_from(
            "<IQIIIII", data, 12)
        row = d_head * 4                    # F32, the default kv_type
        body = bytearray(data[:64])
        at = 72
        for _ in range(2 * n_layer * n_head):
            body += data[at:at + row * fill] + bytes(row * (mem_len - fill))
            at += row * fill
        body += data[at:len(data) - 8 - 4 * n_recent]
        struct.pack_into("<I", body, 8, 4)
        struct.pack_into("<I", body, 60, 0)
        h = 0xcbf29ce484222325
        for i in range(0, len(body) - len(body) % 8, 8):
            h = ((h ^ struct.unpack_from("<Q", body, i)[0]) *
                 0x100000001b3) % (1 << 64)
        for c in body[len(body) - len(body) % 8:]:
            h = ((h ^ c) * 0x100000001b3) % (1 << 64)
        old = tmpfile("window-v4.state", bytes(body) + struct.pack("<Q", h))
        rc, cont3, err = run("-m", sotu, "--state-in", old, "-p", b, "-n",
                             "20", "--temp", "0", model=False)
        self.assertEqual((rc, err), (0, ""))
        self.assertNotEqual(cont3, one)

    def test_a_state_brings_its_mem_len(self):
        # saved with a longer memory than the default (as the REPL's):
        # used as saved, unless --mem-len says otherwise
        st = os.path.join(TMP, "long.state")
        book = tmpfile("long.txt", TEXT * 4)
        rc, _, err = run("--mem-len", "300", "--prime", book, "-p", "",
                         "-n", "0", "--state-out", st)
        self.assertEqual((rc, err), (0, ""))
        rc, out, err = run("--state-in", st, "--print-config")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["mem_len"], 300)
        self.assertEqual(json.loads(out)["sources"]["mem_len"], "state file")
        a = run("--mem-len", "300", "--prime", book, "-p", "Chapter", "-n",
                "10", "--seed", "3")
        b = run("--state-in", st, "-p", "Chapter", "-n", "10", "--seed", "3")
        self.assertEqual(a[0], 0)
        self.assertEqual(a, b)
        rc, out, err = run("--state-in", st, "--mem-len", "16", "-p", "x")
        self.assertEqual((rc, out), (3, b""))
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("saved with mem_len 300", err)
        self.assertIn("leave --mem-len out", err)
        rc, _, err = run("--state-in", st, "--mem-len", "400", "-p", "x",
                         "-n", "1")
        self.assertEqual(rc, 0, err)

    def test_incompatible_state_is_refused(self):
        st = os.path.join(TMP, "s.state")
        self.assertEqual(run("-p", "Hi", "-n", "30", "--mem-len", "12",
                             "--ignore-eos", "--state-out", st)[0], 0)
        rc, out, err = run("--state-in", st, "--mem-len", "6", "-p", "x")
        self.assertEqual((rc, out), (3, b""))
        self.assertIn("s.state", err)
        self.assertIn("saved with mem_len 12", err)
        rc, _, err = run("--state-in", MODEL, "-p", "x")
        self.assertEqual(rc, 3)
        rc, _, err = run("--state-in", os.path.join(TMP, "no.state"),
                         "-p", "x")
        self.assertEqual(rc, 1)


class ScriptedRepl(unittest.TestCase):
    def test_line_by_line(self):
        st = os.path.join(TMP, "r.state")
        # (greedy: the random stream goes on across turns, and a new
        # process starts it again)
        rc, out, err = run("-i", "-n", "8", "--temp", "0", input=(
            "Hello\n/mem\n/set n_predict 4\nagain\n/bogus\n"
            f"/save {st}\nnext\n"))
        # the session goes on after an error, but a script learns of it
        self.assertEqual(rc, 2)
        self.assertIn("unknown command '/bogus'", err)
        lines = out.decode().split("\n")
        self.assertRegex(lines[1], r"^memory: \d+/\d+ positions")
        self.assertEqual(len(lines), 5)          # 3 turns, /mem, final ""
        # /load in a new process continues identically
        rc, out2, _ = run("-i", "-n", "4", "--temp", "0",
                          input=f"/load {st}\nnext\n")
        self.assertEqual(out2.decode(), lines[3] + "\n")

    def test_load_of_a_longer_memory_says_what_to_set(self):
        st = os.path.join(TMP, "r300.state")
        book = tmpfile("r300.txt", TEXT * 4)
        self.assertEqual(run("--mem-len", "300", "--prime", book, "-p", "",
                             "-n", "0", "--state-out", st)[0], 0)
        rc, out, err = run("-i", "-n", "3", "--mem-len", "16", "--temp",
                           "0", input=f"/load {st}\n/set mem_len 300\n"
                           f"/load {st}\n/mem\n")
        self.assertEqual(rc, 3, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("'/set mem_len 300', then /load it", err)
        self.assertRegex(out.decode(), r"memory: 300/300 positions")

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

    def test_the_random_stream_goes_on_across_turns(self):
        # the same input after /reset is another sample, not the same one
        # again; a session with --seed is reproducible as a whole, and its
        # first turn is what a run with that seed gives
        script = "Fellow citizens\n/reset\nFellow citizens\n" * 2

        def turns(out):
            got, ids = [], []
            for ev in jsonl(out):
                if "id" in ev:
                    ids.append(ev["id"])
                elif "n_gen" in ev:
                    got.append(tuple(ids))
                    ids = []
            return got

        # (a flat distribution: a random model may prefer one token)
        argv = ("-n", "12", "--seed", "5", "--ignore-eos", "--json",
                "--temp", "5", "--top-k", "0", "--top-p", "1", "--min-p", "0",
                "--mem-len", "64")
        rc, out, err = run("-i", *argv, input=script)
        self.assertEqual((rc, err), (0, ""))
        got = turns(out)
        self.assertEqual(len(got), 4)
        self.assertEqual(len(set(got)), 4, got)
        self.assertEqual(turns(run("-i", *argv, input=script)[1]), got)
        rc, out, err = run("-p", "Fellow citizens", *argv)
        self.assertEqual(turns(out), got[:1])

    def test_memory_is_at_least_1024_positions(self):
        # the model's length, or 1024 positions if that is more, where no
        # number was given; a run without the REPL keeps the model's
        model_len = int(model_header(MODEL)["__metadata__"]["mem_len"])
        self.assertLess(model_len, 1024)

        def mems(*argv, model=MODEL):
            rc, out, err = run("-m", model, "-i", *argv, model=False,
                               input="/mem\n/set mem_len 7\n"
                               "/set mem_len null\n/mem\n")
            self.assertEqual((rc, err), (0, ""))
            return re.findall(r"memory: \d+/(\d+) positions", out.decode())

        self.assertEqual(mems(), ["1024", "1024"])
        self.assertEqual(mems("--mem-len", "20"), ["20", "1024"])
        cfg = tmpfile("mem-null.json", '{"mem_len": null}')
        self.assertEqual(mems("-c", cfg), ["1024", "1024"])
        # a model's recommended mem_len is the model's length
        for rec, want in ((2000, "2000"), (64, "1024")):
            m = with_metadata(MODEL, os.path.join(TMP, f"rec{rec}.bin"),
                              recommended=json.dumps({"mem_len": rec}))
            self.assertEqual(mems(model=m)[0], want)
        rc, out, err = run("-p", "x", "-n", "1", "--stats")
        self.assertIn(f"memory: 2/{model_len} positions", err)
        for argv, want in ((["-i"], 1024), ([], model_len)):
            rc, out, err = run(*argv, "--print-config")
            self.assertEqual(json.loads(out)["mem_len"], want)

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


class PtyBase(unittest.TestCase):
    """Drives txlgen on a pseudo-terminal, as a person uses it."""

    def setUp(self):
        self.reaped = set()

    def spawn(self, *args, environ=None, cols=80):
        pid, fd = pty.fork()
        if pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ,
                        struct.pack("HHHH", 24, cols, 0, 0))
            os.execve(TXLGEN, [TXLGEN, "-m", MODEL] + list(args),
                      environ or env())
        self.pid, self.fd, self.buf = pid, fd, b""
        self.addCleanup(self.end, pid, fd)
        return pid

    def end(self, pid, fd):
        # a test that failed half-way leaves its process running
        if pid not in self.reaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        try:
            os.close(fd)
        except OSError:
            pass

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

    def wait(self, timeout=30):
        # what it still writes is read meanwhile (a full pty would block
        # it), then the exit status
        end = time.time() + timeout
        while time.time() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.reaped.add(pid)
                return os.waitstatus_to_exitcode(status)
            if select.select([self.fd], [], [], 0.05)[0]:
                try:
                    self.buf += os.read(self.fd, 65536)
                except OSError:
                    time.sleep(0.05)
        self.fail(f"still running after {timeout} s: {self.buf[-300:]!r}")


class PtyRepl(PtyBase):
    """The REPL on a terminal, as a person uses it."""

    def test_prime_and_state_out_on_a_terminal_only_save(self):
        # no prompt and no -i: prime, save, exit; no session waits
        st = os.path.join(TMP, "tty-prime.state")
        book = tmpfile("tty-prime.txt", TEXT)
        if os.path.exists(st):
            os.unlink(st)
        self.spawn("--prime", book, "--state-out", st)
        self.assertEqual(self.wait(), 0)
        self.assertNotIn(b">", self.buf)
        ref = os.path.join(TMP, "tty-prime-ref.state")
        self.assertEqual(run("--prime", book, "-p", "", "-n", "0",
                             "--state-out", ref)[0], 0)
        with open(st, "rb") as a, open(ref, "rb") as b:
            self.assertEqual(a.read(), b.read())
        # -i asks for the session
        self.spawn("--prime", book, "--state-out", st, "-i")
        self.read_until(rb"> ")
        self.send(b"\x04")
        self.assertEqual(self.wait(), 0)

    def test_the_c_locale_keeps_what_is_typed(self):
        # LC_ALL=C names no character set: the line editor still takes
        # UTF-8 (it dropped every non-ASCII character typed)
        e = env(LC_ALL="C")
        e.pop("LANG", None)
        self.spawn("-n", "3", "--ignore-eos", environ=e)
        self.read_until(rb"/help for help.*\r\n> ")
        self.send("café 日本\r".encode())
        self.read_until("café 日本\r\n".encode())
        self.send(b"\x04")
        self.assertEqual(self.wait(), 0)

    def test_session(self):
        hist = os.path.join(TMP, "hist")
        st = os.path.join(TMP, "pty.state")
        # (greedy, for the /load below: the random stream goes on across
        # turns, and a new process starts it again)
        self.spawn("-n", "-1", "--ignore-eos", "--temp", "0",
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
        self.spawn("-n", "10", "--ignore-eos", "--temp", "0")
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

    def test_control_characters_on_a_terminal(self):
        # text quoted from a file or made of a model's pieces must not
        # drive the terminal: ESC, BEL, CR and C1's CSI become U+FFFD
        # there; a pipe gets the bytes as they are
        path = os.path.join(TMP, "controls.txt")
        text = b"Hi\x1b[2J\x07 there\r\xc2\x9b1m\tend"
        with open(path, "wb") as f:
            f.write(text)
        self.spawn("-f", path, "--echo", "-n", "1", "--seed", "1",
                   environ=env(NO_COLOR="1"))
        out = self.read_until(rb"end")
        self.assertEqual(self.wait(), 0)
        fffd = "\ufffd".encode()
        self.assertIn(b"Hi" + fffd + b"[2J" + fffd + b" there" + fffd +
                      fffd + b"1m\tend", out)
        for c in (b"\x1b", b"\x07", b"\xc2\x9b"):
            self.assertNotIn(c, out)
        rc, out, _ = run("-f", path, "--echo", "-n", "1", "--seed", "1")
        self.assertEqual(rc, 0)
        self.assertTrue(out.startswith(text), out)


class ReplHangup(PtyBase):
    def test_closed_terminal_saves_the_memory(self):
        # the terminal going away (its master side closed) sends SIGHUP:
        # it used to kill txlgen, which wrote no --state-out; SIGTERM did
        st = os.path.join(TMP, "hup.state")
        self.spawn("-n", "5", "--seed", "1", "--state-out", st)
        self.read_until(rb"> ")
        self.send(b"Hello\r")
        self.read_until(rb"Hello\r\n")
        self.read_until(rb"\r\n> ")
        os.close(self.fd)
        end = time.time() + 30
        while not (w := os.waitpid(self.pid, os.WNOHANG))[0]:
            self.assertLess(time.time(), end, "still running")
            time.sleep(0.05)
        self.reaped.add(self.pid)
        self.assertEqual(os.waitstatus_to_exitcode(w[1]), 129)
        # the memory was saved whole: it continues the text (in a
        # memory as long as the REPL's)
        rc, out, err = run("--state-in", st, "--mem-len", "1024", "-n", "3",
                           "--seed", "1", "-p", "")
        self.assertEqual((rc, err), (0, ""))


class Signals(unittest.TestCase):
    """SIGTERM ends a run as SIGINT does: output flushed, exit 143."""

    def signalled_into_file(self, name, start, sig, status, message):
        """start(file) generating JSON events into TMP/@name, sent @sig
        once 3 pages are written: it exits @status saying @message, the
        file's last event whole (the end, "interrupted", counting the
        events before it)."""
        out = os.path.join(TMP, name)
        with open(out, "wb") as f:
            p = start(f)
            wait_for_size(out, 3 * 4096)
            p.send_signal(sig)
            _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, status)
        self.assertEqual(err.decode(), message)
        with open(out, "rb") as f:
            events = jsonl(f.read())
        self.assertEqual(events[-1]["end"], "interrupted")
        self.assertEqual(events[-1]["n_gen"], len(events) - 1)

    def test_sigterm_flushes_what_was_generated(self):
        # a file is written through stdio's buffer: killed by SIGTERM,
        # the end of it (and the summary) used to be lost mid-line
        self.signalled_into_file("term.jsonl", self.generating,
                                 signal.SIGTERM, 143, "txlgen: terminated\n")

    def test_sigterm_into_a_pipe(self):
        p = popen(self, [TXLGEN, "-m", MODEL, "-p", "Hi", "-n", "-1",
                         "--ignore-eos", "--json"],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        got = clitest.read_pipe(p.stdout, lambda b: len(b) >= 2 * 4096)
        p.send_signal(signal.SIGTERM)
        rest, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 143)
        events = jsonl(got + rest)     # every line whole
        self.assertEqual(events[-1]["end"], "interrupted")

    def test_sigterm_ends_the_repl_and_saves_its_memory(self):
        st = os.path.join(TMP, "term.state")
        p = popen(self, [TXLGEN, "-m", MODEL, "-i", "-n", "5",
                         "--seed", "1", "--state-out", st],
                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
        p.stdin.write(b"Hello\n")
        p.stdin.flush()
        # the turn ends
        line = clitest.read_pipe(p.stdout, lambda b: b"\n" in b)
        self.assertTrue(line.endswith(b"\n"))
        p.send_signal(signal.SIGTERM)       # waiting for the next line
        _, err = clitest.wait_stdin_open(p)
        self.assertEqual(p.returncode, 143)
        self.assertIn(b"terminated", err)
        # the memory was saved whole: it continues the text (in a memory
        # as large as the REPL's)
        rc, out, err = run("--state-in", st, "-n", "3", "--seed", "1",
                           "-p", "", "--mem-len", "1024")
        self.assertEqual((rc, err), (0, ""))

    def test_a_signal_taken_by_another_thread_wakes_the_reader(self):
        # the kernel gives a process's signal to any thread that does not
        # block it; run on OpenBLAS's, the handler used to set the flag
        # while the main thread slept on in read(), until input came
        libc = ctypes.CDLL(None, use_errno=True)
        for argv, sig, status in (
                (["-i", "-n", "3"], signal.SIGTERM, 143),
                (["--score", "-", "--seg-len", "8"], signal.SIGINT, 130)):
            p = popen(self, [TXLGEN, "-m", MODEL, *argv],
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
            p.stdin.write(b"Hello\n")  # and no end: it waits for more
            p.stdin.flush()
            time.sleep(1)
            tid = other_thread(p.pid, sig)
            if tid is None:
                self.skipTest("no thread but the main one takes signals")
            self.assertEqual(libc.tgkill(p.pid, tid, sig), 0)
            _, err = clitest.wait_stdin_open(p, timeout=10)
            self.assertEqual(p.returncode, status, argv)
            self.assertIn(b"txlgen: ", err)

    def generating(self, stdout):
        """txlgen generating JSON events into @stdout until stopped."""
        return popen(self, [TXLGEN, "-m", MODEL, "-p", "Hi", "-n", "-1",
                            "--ignore-eos", "--json"], stdout=stdout,
                     stderr=subprocess.PIPE)

    def test_sighup_flushes_what_was_generated(self):
        # SIGHUP killed txlgen: 4,096 bytes in the file where SIGTERM left
        # them all, none into a pipe
        self.signalled_into_file("hup.jsonl", self.generating, signal.SIGHUP,
                                 129, "txlgen: hangup\n")

        p = self.generating(subprocess.PIPE)
        got = clitest.read_pipe(p.stdout, lambda b: len(b) >= 2 * 4096)
        p.send_signal(signal.SIGHUP)
        rest, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 129)
        events = jsonl(got + rest)
        self.assertEqual(events[-1]["end"], "interrupted")
        self.assertEqual(events[-1]["n_gen"], len(events) - 1)

    def test_nohup_keeps_sighup_ignored(self):
        p = popen(self, ["nohup", TXLGEN, "-m", MODEL, "-p", "Hi", "-n",
                         "-1", "--ignore-eos"], stdout=subprocess.PIPE,
                  stderr=subprocess.DEVNULL)
        clitest.read_pipe(p.stdout, lambda b: len(b) >= 4096)
        p.send_signal(signal.SIGHUP)
        p.send_signal(signal.SIGTERM)   # it only ends by this one
        p.communicate(timeout=30)
        self.assertEqual(p.returncode, 143)

    def test_stats_after_ctrl_c_in_the_prompt(self):
        # it said "prompt: 0 tokens" however much had been read
        p = popen(self, [TXLGEN, "-m", MODEL, "--stats", "-n", "5",
                         "--seg-len", "8"], stdin=subprocess.PIPE,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write(TEXT.encode())     # lines, and no end
        p.stdin.flush()
        end = time.time() + 30
        while int.from_bytes(fcntl.ioctl(p.stdin.fileno(), termios.FIONREAD,
                                         b"\0" * 4), "little"):
            self.assertLess(time.time(), end, "the prompt is not read")
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        out, err = clitest.wait_stdin_open(p)
        self.assertEqual((p.returncode, out), (130, b""), err)
        n = int(re.search(rb"txlgen: prompt: (\d+) tokens", err).group(1))
        rc, ids, _ = run("--tokenize", "-", input=TEXT)
        self.assertGreater(n, 0, err)
        self.assertLessEqual(n, len(ids.split()))

    def test_sigint_during_prime_says_so(self):
        p = popen(self, [TXLGEN, "-m", MODEL, "--prime", "-", "-p", "x"],
                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
        p.stdin.write(TEXT.encode())    # and no end: still reading
        p.stdin.flush()
        time.sleep(1)
        p.send_signal(signal.SIGINT)
        out, err = clitest.wait_stdin_open(p)
        self.assertEqual((p.returncode, out), (130, b""))
        self.assertEqual(err, b"txlgen: interrupted\n")


class SpecialFiles(unittest.TestCase):
    """Streams (pipes, FIFOs, character devices) are read wherever txlgen
    reads text; waiting for them ends with a signal."""

    def test_process_substitution_and_dev_stdin(self):
        text = os.path.join(ROOT, "tests", "data", "text.txt")
        # each way of reading text, from a file and from a pipe
        for opts in ("--score {} --json", "--tokenize {}",
                     "-f {} -n 5 --seed 1", "--prime {} -p x -n 5 --seed 1"):
            want = run_shell(self, f"{TXLGEN} -m {MODEL} "
                             + opts.format(text))
            self.assertEqual(want[0], 0, want)
            for src in (f"<(cat {text})", f"/dev/stdin < {text}"):
                got = run_shell(self, f"{TXLGEN} -m {MODEL} "
                                + opts.format(src))
                self.assertEqual(got, want, (opts, src))
        rc, out, err = run_shell(self, f"{TXLGEN} -m {MODEL} --config "
                                 "<(echo '{\"top_k\": 3}') --print-config")
        self.assertEqual((rc, err), (0, b""))
        self.assertEqual(json.loads(out)["top_k"], 3)

    def test_a_fifo_is_read_when_its_writer_comes(self):
        fifo = os.path.join(TMP, "fifo-late")
        os.mkfifo(fifo)
        p = popen(self, [TXLGEN, "-m", MODEL, "--tokenize", fifo],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.3)              # txlgen waits, not reads an end
        self.assertIsNone(p.poll())
        with open(fifo, "w") as f:
            f.write("one line\n")
        out, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, err), (0, b""))
        self.assertEqual(out, run("--tokenize", "-", input="one line\n")[1])

    def test_waiting_for_a_stream_ends_with_a_signal(self):
        fifo = os.path.join(TMP, "fifo-never")
        os.mkfifo(fifo)
        for argv, sig, code in ((["--score", fifo], signal.SIGINT, 130),
                                (["-f", fifo], signal.SIGTERM, 143),
                                (["--config", fifo, "-p", "x"],
                                 signal.SIGINT, 130)):
            p = popen(self, [TXLGEN, "-m", MODEL, *argv],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(0.3)
            self.assertIsNone(p.poll(), argv)
            p.send_signal(sig)
            out, err = p.communicate(timeout=30)
            self.assertEqual((p.returncode, out), (code, b""), argv)

    def test_what_is_not_a_file_or_stream_is_refused(self):
        rc, _, err = run("--score", TMP)
        self.assertEqual(rc, 1)
        self.assertIn("Is a directory", err)
        sock = os.path.join(TMP, "sock")
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.bind(sock)
        self.addCleanup(s.close)
        rc, out, err = run("--score", sock, timeout=20)
        self.assertEqual((rc, out), (1, b""))
        self.assertEqual(len(err.splitlines()), 1, err)
        # the model file stays a regular file (it is mapped)
        rc, _, err = run_shell(self, f"{TXLGEN} -m <(cat {MODEL}) -p x")
        self.assertEqual(rc, 3)


class TerminalSafeMessages(unittest.TestCase):
    """Messages that quote input are one line of printable text."""

    def run_raw(self, *argv, input=b""):
        p = subprocess.run([TXLGEN, "-m", MODEL, *argv], input=input,
                           capture_output=True, env=env(), timeout=60)
        return p.returncode, p.stderr

    def assertClean(self, err):
        for c in b"\x1b\x9b\x07\r":
            self.assertNotIn(c, err)
        self.assertEqual(err.count(b"\n"),
                         1 + err.count(b"Try 'txlgen --help'"), err)
        err.decode("utf-8")            # strict: valid UTF-8
        return err.decode()

    def test_quoted_input_is_cleaned(self):
        rc, err = self.run_raw("--score", "-", "--ids", input=b"12 \x1b[2J\n")
        self.assertEqual(rc, 1)
        self.assertIn("'?[2J' is not a token id", self.assertClean(err))
        cfg = tmpfile("esc.json", '{"\\u001b[31mred\\u009b1m\\r": 1}')
        rc, err = self.run_raw("--config", cfg, "-p", "x")
        self.assertEqual(rc, 3)
        self.assertIn("unknown key '?[31mred?1m?'", self.assertClean(err))
        rc, err = self.run_raw("-f", os.path.join(TMP, "no\x1b]0;t\x07.txt"))
        self.assertEqual(rc, 1)
        self.assertClean(err)
        rc, err = self.run_raw(b"--top-k", b"\xff\x9b2J\x1bc")
        self.assertEqual(rc, 2)
        self.assertIn("'??2J?c' is not an integer", self.assertClean(err))
        rc, err = self.run_raw("--te\x1b[2J")
        self.assertEqual(rc, 2)
        self.assertClean(err)


class LongPrompt(unittest.TestCase):
    def test_prompt_is_read_in_constant_memory(self):
        # a prompt of one long line: peak memory must not grow with it
        # (it used to be read whole and tokenized at once: +200 bytes of
        # RSS per byte of prompt, 48 MB more here).  Sizes kept small: with
        # a real model ($TXLGEN_TEST_MODEL=models/sotu.bin) the prompts
        # take some 20 s of CPU, and longer under AddressSanitizer.
        small = tmpfile("line-small.txt", one_line_text(60_000))
        big = tmpfile("line-big.txt", one_line_text(300_000))
        argv = [TXLGEN, "-m", MODEL, "-n", "1", "--seed", "1",
                "--seg-len", "64"]
        rc1, rss_small = max_rss_kb(argv, small)
        rc2, rss_big = max_rss_kb(argv, big)
        self.assertEqual((rc1, rc2), (0, 0))
        self.assertLess(rss_big - rss_small, 16 * 1024,
                        (rss_small, rss_big))

    def test_streamed_prompt_equals_the_whole(self):
        # fed chunk by chunk as it is read, the prompt gives what feeding
        # its tokens at once gives: the next token's log-prob as --score
        # computes it
        text = TEXT + "\n\n"
        path = tmpfile("stream-prompt.txt", text)
        rc, out, err = run("-f", path, "-n", "1", "--temp", "1", "--top-k",
                           "0", "--top-p", "1", "--min-p", "0", "--seed",
                           "2", "--json", "--seg-len", "8")
        self.assertEqual((rc, err), (0, ""))
        tok = jsonl(out)[0]
        rc, out, err = run("--tokenize", path)
        ids = [int(x) for x in out.decode().split()]
        ids_path = tmpfile("stream-prompt.ids",
                           " ".join(map(str, ids + [tok["id"]])))
        rc, out, err = run("--score", ids_path, "--ids", "--json",
                           "--seg-len", "8")
        rows = jsonl(out)[:-1]
        self.assertEqual(rows[-1]["id"], tok["id"])
        self.assertAlmostEqual(rows[-1]["logprob"], tok["logprob"], places=5)


def tail_start(n, keeps, seg):
    """Where the tail of a text of n tokens that determines the memory
    starts: the last token reads, in the last layer, that layer's input
    from the start of its memory before its segment (keeps[l] positions),
    those positions the layer's below from theirs, ...; from the start of
    the segment of the first token so reached."""
    x = n - 1
    for keep in reversed(keeps):
        if x <= 0:
            return 0
        x = x // seg * seg - keep
    return max(x, 0) // seg * seg


class ReadAll(unittest.TestCase):
    """Of a long prompt or --prime file only the tokens of its receptive
    field at its end are computed, from a segment's start; --read-all
    computes every one, to the same bytes."""

    @staticmethod
    def field(*opts):
        """n_layer x (mem_len + seg_len - 1) + 1, from --info; the memory
        of each layer; seg_len."""
        rc, out, err = run("--info", "--json", *opts)
        info = json.loads(out)
        ses = info["session"]
        L = info["architecture"]["n_layer"]
        return (L * (ses["mem_len"] + ses["seg_len"] - 1) + 1,
                [ses["mem_len"]] * L, ses["seg_len"])

    @staticmethod
    def computed(err):
        m = re.search(r"prompt: (\d+) tokens .*; the last (\d+) computed, "
                      r"the rest counted\)", err)
        return m and (int(m.group(1)), int(m.group(2)))

    def both(self, *argv):
        """The run of argv and of argv --read-all, each with --state-out:
        (stdout, state bytes, stderr) of each."""
        got = []
        for extra in ([], ["--read-all"]):
            st = os.path.join(TMP, "read-all.state")
            rc, out, err = run(*argv, "--state-out", st, "--stats", *extra)
            self.assertEqual(rc, 0, err)
            with open(st, "rb") as f:
                got.append((out, f.read(), err))
            os.unlink(st)
        return got

    def test_a_long_prompt_reads_its_field(self):
        path = tmpfile("long-prompt.txt", TEXT * 12)
        total = len(run("--tokenize", path)[1].split())
        for opts in ([], ["--seg-len", "5", "--mem-len", "11"],
                     ["--same-length"], ["--kv-type", "F16"],
                     ["--seg-len", "3", "--mem-len", "0"]):
            field, keeps, seg = self.field(*opts)
            self.assertGreater(total, field + 2 * seg)
            # greedy, and sampled with a repeat penalty that looks back
            # past the field (the sampler still gets every token)
            for how in (["--temp", "0"],
                        ["--seed", "4", "--repeat-penalty", "1.5",
                         "--repeat-last-n", str(4 * field)]):
                (o1, s1, e1), (o2, s2, e2) = self.both(
                    "-f", path, "-n", "25", "--ignore-eos", *opts, *how)
                self.assertEqual(o1, o2, opts + how)
                self.assertTrue(o1)
                self.assertEqual(s1, s2, opts + how)
                # the count of tokens fed is the whole prompt's
                self.assertIn(f"prompt: {total} tokens", e2)
                self.assertIsNone(self.computed(e2))
                n, read = self.computed(e1)
                self.assertEqual(n, total)
                # whole segments skipped, the text's tail left: at most
                # the field (whatever the length) and a segment
                self.assertEqual(total - read,
                                 tail_start(total, keeps, seg), opts)
                self.assertLess(read, field + seg)

    def test_prime_and_a_state_read_the_field(self):
        book = tmpfile("long-book.txt", TEXT * 10)
        (o1, s1, _), (o2, s2, _) = self.both("--prime", book, "-p", "",
                                             "-n", "0")
        self.assertEqual(s1, s2)
        # primed, then a short prompt, and a prompt after a state
        (o1, s1, _), (o2, s2, _) = self.both(
            "--prime", book, "--prime", book, "-p", "Chapter", "-n", "20",
            "--seed", "8", "--ignore-eos")
        self.assertEqual((o1, s1), (o2, s2))
        st = os.path.join(TMP, "before-long.state")
        self.assertEqual(run("-p", "Hi there", "-n", "10", "--ignore-eos",
                             "--state-out", st)[0], 0)
        (o1, s1, e1), (o2, s2, _) = self.both("--state-in", st, "-f", book,
                                              "-n", "20", "--temp", "0")
        self.assertEqual((o1, s1), (o2, s2))
        self.assertIsNotNone(self.computed(e1))

    def test_what_reads_every_token(self):
        path = tmpfile("long-prompt.txt", TEXT * 12)
        # fewer tokens than n_layer x mem_len + 1, the least a tail is
        short = tmpfile("short-prompt.txt", TEXT[:12])
        conf = tmpfile("read-all.json", '{"read_all": true}')
        for argv in (["-f", path, "--read-all"],
                     ["-f", path, "--config", conf],
                     # learning from every token
                     ["-f", path, "--adapt", "0.05"],
                     # shorter than any tail: nothing to skip
                     ["-f", short]):
            rc, out, err = run(*argv, "-n", "2", "--stats")
            self.assertEqual(rc, 0, err)
            self.assertIsNone(self.computed(err), argv)
        rc, out, err = run("-f", path, "--config", conf, "--no-read-all",
                           "-n", "2", "--stats")
        self.assertIsNotNone(self.computed(err))


class ForgivingOptions(unittest.TestCase):
    def usage(self, *argv):
        rc, out, err = run(*argv)
        self.assertEqual((rc, out), (2, b""), argv)
        self.assertTrue(err.startswith("txlgen: "), err)
        return err

    def test_prompt_is_a_file(self):
        rc, out, err = run("--prompt", "Hello world")
        self.assertEqual((rc, out), (1, b""))
        self.assertIn("Hello world: No such file or directory (--prompt "
                      "reads a file; use -p/--text for a string)", err)

    def test_c_with_a_number(self):
        err = self.usage("-c", "2048", "-p", "x")
        self.assertIn("--mem-len 2048", err)
        self.assertIn("llama.cpp's -cnv (conversation) is -i/--interactive",
                      self.usage("-cnv"))

    def test_ambiguous_abbreviations_list_candidates(self):
        self.assertIn("'--te' is ambiguous: --temp, --text",
                      self.usage("--te", "1"))
        err = self.usage("--top", "1")
        self.assertIn("'--top' is ambiguous", err)
        self.assertIn("--top-k", err)
        self.assertIn("--top-p", err)
        # a unique abbreviation is taken as getopt takes it
        rc, out, _ = run("--tem", "0.5", "--print-config")
        self.assertEqual(json.loads(out)["temp"], 0.5)

    def test_did_you_mean(self):
        cases = [(["--temperature", "0.5"], "did you mean '--temp'?"),
                 (["--top_k", "5"], "did you mean '--top-k'?"),
                 (["--ctx-size", "512"], "did you mean '--mem-len'?"),
                 (["--reverse-prompt", "x"], "did you mean '--stop'?"),
                 (["--repeat-penlty", "1.1"],
                  "did you mean '--repeat-penalty'?"),
                 (["-r", "x"], "did you mean --stop"),
                 (["--interactive-first"], "did you mean '--interactive'?"),
                 (["--echo=yes"], "'--echo' takes no value"),
                 (["--qwertyuiop"], "unknown option '--qwertyuiop'\n")]
        for argv, msg in cases:
            self.assertIn(msg, self.usage(*argv), argv)

    def test_the_e_hint_works_when_pasted(self):
        # -e's hint, pasted into bash, gives a newline as the stop string
        err = self.usage("-e")
        hint = re.search(r"did you mean (--stop \S+)", err).group(1)
        rc, out, err = run_shell(self, f"{TXLGEN} -m {MODEL} {hint} "
                                 "--print-config")
        self.assertEqual((rc, err), (0, b""))
        self.assertEqual(json.loads(out)["stop"], ["\n"])

    def test_did_you_mean_for_keys_and_commands(self):
        for key, want in (("topk", "top_k"), ("top-k", "top_k"),
                          ("temperature", "temp"), ("ctx_size", "mem_len"),
                          ("repeat_penalti", "repeat_penalty")):
            cfg = tmpfile("mistyped.json", json.dumps({key: 1}))
            rc, _, err = run("-c", cfg, "-p", "x")
            self.assertEqual(rc, 3)
            self.assertIn(f"unknown key '{key}'; did you mean '{want}'?",
                          err)
        cfg = tmpfile("mistyped.json", '{"qwertyuiop": 1}')
        self.assertNotIn("did you mean", run("-c", cfg, "-p", "x")[2])
        rc, out, err = run("-i", "-n", "1", input="/set topk 3\n/rset\n"
                           "/set temperature 0\n/qwertyuiop\n")
        self.assertEqual(rc, 2)
        self.assertEqual(err.splitlines(), [
            "txlgen: /set: unknown key 'topk'; did you mean 'top_k'?",
            "txlgen: unknown command '/rset'; did you mean '/reset'?",
            "txlgen: /set: unknown key 'temperature'; did you mean 'temp'?",
            "txlgen: unknown command '/qwertyuiop'; /help lists the "
            "commands"])

    def test_seed_minus_one_is_random(self):
        rc, out, _ = run("--seed", "5", "--seed", "-1", "--print-config")
        got = json.loads(out)        # the seed picked, not 5
        self.assertEqual(got["sources"]["seed"], "command line")
        self.assertIsInstance(got["seed"], int)
        self.assertNotEqual(got["seed"], 5)
        seeds = set()
        for _ in range(2):
            rc, out, err = run("-p", "Hi", "-n", "2", "--seed", "-1",
                               "--json")
            self.assertEqual((rc, err), (0, ""))
            seeds.add(jsonl(out)[-1]["seed"])
        self.assertEqual(len(seeds), 2)     # 2^-32 chance of a false alarm

    def test_limits_are_the_library_s_and_print_as_integers(self):
        for v in ("100000", "2000000"):
            self.assertIn(f"--seg-len: {v} is out of range (1 .. 65536)",
                          self.usage("--seg-len", v))
        self.assertIn("--repeat-last-n: 100000000 is out of range "
                      "(0 .. 1048576)",
                      self.usage("--repeat-last-n", "100000000"))
        err = self.usage("--seed", "9007199254740992")
        self.assertIn("(0 .. 9007199254740991, or -1", err)
        self.assertNotRegex(err, r"e\+")
        self.assertIn("(0 .. 1048576)", self.usage("--mem-len", "1048577"))
        # past what a long long holds is out of range too, not "not an
        # integer"; a bound of the int type is printed as one
        self.assertIn("--seed: 99999999999999999999 is out of range (0 .. "
                      "9007199254740991, or -1",
                      self.usage("--seed", "99999999999999999999"))
        self.assertIn("--top-k: 10000000000 is out of range "
                      "(0 .. 2147483647)", self.usage("--top-k",
                                                      "10000000000"))
        self.assertIn("-n: -2 is out of range (-1 .. 2147483647)",
                      self.usage("-n", "-2"))

    def test_every_boolean_has_a_no_form(self):
        cfg = tmpfile("bools.json", json.dumps(
            {"echo": True, "ignore_eos": True, "same_length": True,
             "json": True, "stats": True, "color": "always",
             "unbuffered": True}))
        rc, out, err = run("-c", cfg, "--no-echo", "--no-ignore-eos",
                           "--no-same-length", "--no-json", "--no-stats",
                           "--no-color", "--no-unbuffered", "--print-config")
        self.assertEqual((rc, err), (0, ""))
        got = json.loads(out)
        for k in ("echo", "ignore_eos", "same_length", "json", "stats",
                  "unbuffered"):
            self.assertIs(got[k], False, k)
            self.assertEqual(got["sources"][k], "command line")
        self.assertEqual(got["color"], "never")
        # the flags of the command line too
        path = tmpfile("noids.txt", TEXT)
        rc, out, err = run("--score", path, "--ids", "--no-ids")
        self.assertEqual((rc, err), (0, ""))
        rc, out, err = run("-i", "--no-interactive", "-p", "Hi", "-n", "3")
        self.assertEqual((rc, err), (0, ""))
        self.assertNotIn(b"memory", out)

    def test_color_takes_its_value_after_a_space(self):
        for argv, want in ((["--color", "never"], "never"),
                           (["--color=never"], "never"),
                           (["--color"], "always"),
                           (["--colour", "auto"], "auto")):
            rc, out, err = run(*argv, "--print-config")
            self.assertEqual((rc, err), (0, ""), argv)
            self.assertEqual(json.loads(out)["color"], want)

    def test_completion_offers_what_the_table_has(self):
        # the option table makes --help and --list-options, which the
        # completion reads: it offers every option of --help (and the
        # --no- form of every flag), and nothing else, and completes
        # files after the options that read one
        _, out, _ = run("--help", model=False)
        help_text = out.decode()
        longs = set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z-]+)", help_text))
        flags = set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z-]+)(?:\[=\w+\])?"
                               r"(?: {2,}|$)", help_text))
        negatable = flags - {"--help", "--version", "--print-config",
                             "--info", "--list-models", "--list-types",
                             "--list-options"}
        want = longs | {"--no-" + o[2:] for o in negatable}
        with open(os.path.join(ROOT, "cmd", "txlgen.bash-completion")) as f:
            comp = f.read()
        # the file's code names no option but those it asks txlgen with:
        # the options come from txlgen
        code = "\n".join(line for line in comp.split("\n_txlgen_get()")[0]
                         .splitlines() if not line.lstrip().startswith("#"))
        self.assertEqual(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", code)),
                         {"--list-options", "--list-models", "--json",
                          "--list-types"})
        bindir = tempfile.mkdtemp(dir=TMP)
        os.symlink(os.path.abspath(TXLGEN), os.path.join(bindir, "txlgen"))
        on_path = env(PATH=bindir + ":" + os.environ["PATH"])

        # what bash offers (bash-completion's helpers stubbed)
        def complete(*words, environ=on_path):
            stubs = ('_init_completion() { cur=${COMP_WORDS[COMP_CWORD]}; '
                     'prev=${COMP_WORDS[COMP_CWORD-1]}; }\n'
                     '_filedir() { COMPREPLY=(FILE); }\n'
                     'complete() { :; }\n'
                     'source "$0"; shift\n'
                     'COMP_WORDS=(txlgen "$@"); COMP_CWORD=$#; _txlgen\n'
                     'printf "%s\\n" "${COMPREPLY[@]}"\n')
            p = subprocess.run([shutil.which("bash"), "-c", stubs,
                                os.path.join(ROOT, "cmd",
                                             "txlgen.bash-completion"),
                                "x", *words],
                               capture_output=True, text=True, timeout=60,
                               env=environ)
            self.assertEqual(p.stderr, "")
            return set(p.stdout.split())
        # every option with a value completes its value, a file or not;
        # a flag, the options again
        with_value = set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z-]+)"
                                    r"(?: [A-Z]|\[=)", help_text))
        for name in longs:
            got = complete(name, "-")
            if name in with_value:
                self.assertNotIn("--help", got, name)
            else:
                self.assertIn("--help", got, name)
        for name in ("--prompt", "--file", "-f", "--prime", "--score",
                     "--score-docs", "--tokenize"):
            self.assertEqual(complete(name, ""), {"FILE", "-"}, name)
        for name in ("--state-in", "--state-out", "-c", "--config"):
            self.assertEqual(complete(name, ""), {"FILE"}, name)
        self.assertEqual(complete("--colour", ""), {"auto", "always",
                                                    "never"})
        self.assertEqual(complete("--no-color", "--no-col"), {"--no-color"})
        self.assertEqual(complete("--compute", ""), {"f32", "bf16"})
        self.assertEqual(complete("-n", ""), set())
        # a txlgen that is not there: nothing, and no error
        self.assertEqual(complete("--", environ=env(PATH="/nonexistent")),
                         set())
        self.assertEqual(complete("--"), want)
        self.assertEqual(complete("--color", ""), {"auto", "always", "never"})
        self.assertEqual(complete("--score", ""), {"FILE", "-"})
        self.assertEqual(complete("--temp", ""), set())
        # -m: files, and the names of the models txlgen finds
        models = tempfile.mkdtemp(dir=TMP)
        for name in ("zeta", "zebra"):
            shutil.copy(MODEL, os.path.join(models, name + ".bin"))
        self.assertEqual(complete("-m", "ze", environ=env(
            PATH=bindir + ":" + os.environ["PATH"],
            TXLGEN_MODEL_PATH=models)), {"FILE", "zeta", "zebra"})
        # --kv-type: the types txlgen --list-types prints
        self.assertEqual(complete("--kv-type", ""), set(number_types()))
        # ...and a short option as its long one
        for short, name in re.findall(r"(?m)^\s+-(\w), (--[a-z-]+) [A-Z]",
                                      help_text):
            self.assertEqual(complete("-" + short, ""), complete(name, ""),
                             name)


class Completion(unittest.TestCase):
    def test_list_types_and_any_case(self):
        rc, out, err = run("--list-types", model=False)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out.decode().split(), list(number_types()))
        rc, out, err = run("--kv-type", "bf16", "--compute", "F32",
                           "--print-config")
        self.assertEqual(rc, 0, err)
        got = json.loads(out)
        self.assertEqual((got["kv_type"], got["compute"]), ("BF16", "f32"))
        rc, _, err = run("--kv-type", "u8", "-p", "x")
        self.assertEqual(rc, 2)
        self.assertIn("'u8' is not one of F32, F16, BF16, Q8_0, Q4_0", err)

    def test_completion_from_the_build_tree(self):
        # with bash-completion itself (setup.sh installs it), sourcing the
        # file completes options, and -m the models txlgen finds
        if not os.path.exists("/usr/share/bash-completion/bash_completion"):
            self.skipTest("bash-completion is not installed")
        script = ('. "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
                  'COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; '
                  '_txlgen "$1" "${COMP_WORDS[COMP_CWORD]}" '
                  '"${COMP_WORDS[COMP_CWORD-1]}"; '
                  'printf "%s\\n" "${COMPREPLY[@]}"')
        bindir = tempfile.mkdtemp(dir=TMP)
        os.symlink(os.path.abspath(TXLGEN), os.path.join(bindir, "txlgen"))
        models = tempfile.mkdtemp(dir=TMP)
        shutil.copy(MODEL, os.path.join(models, "zorro.bin"))
        e = env(PATH=bindir + ":" + os.environ["PATH"],
                TXLGEN_MODEL_PATH=models)

        def complete(*words):
            p = subprocess.run(["bash", "--norc", "-c", script, os.path.join(
                ROOT, "cmd", "txlgen.bash-completion"), "txlgen", *words],
                capture_output=True, text=True, env=e, cwd=models,
                timeout=60)
            self.assertEqual(p.stderr, "")
            return p.stdout.split()

        self.assertEqual(complete("--list-m"), ["--list-models"])
        self.assertEqual(complete("--kv-type", "Q"),
                         [n for n in number_types() if n.startswith("Q")])
        self.assertEqual(complete("--compute", "b"), ["bf16"])
        self.assertEqual(complete("--mem-init", ""), ["empty", "zeros"])
        self.assertIn("zorro", complete("-m", "zo"))


class MemInit(unittest.TestCase):
    """--mem-init: the option, the configuration key, --info and
    --print-config; zeros changes the first scores, not the ids."""

    def test_option_and_key(self):
        rc, out, err = run("--mem-init", "zero", "-p", "x")
        self.assertEqual((rc, out), (2, b""))
        self.assertIn("--mem-init: 'zero' is not one of empty, zeros", err)
        rc, out, err = run("--print-config")    # the model's: empty
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["mem_init"], "empty")
        cfg = tmpfile("mem-init.json", '{"mem_init": "zeros"}')
        rc, out, err = run("-c", cfg, "--print-config")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["mem_init"], "zeros")
        cfg = tmpfile("mem-init-bad.json", '{"mem_init": 1}')
        rc, out, err = run("-c", cfg, "-p", "x")
        self.assertEqual((rc, out), (3, b""))
        self.assertIn("mem-init-bad.json", err)
        rc, out, err = run("--info", "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["session"]["mem_init"], "empty")

    def test_zeros_scores(self):
        path = tmpfile("mem-init.txt", TEXT)
        runs = {}
        for how in ("empty", "zeros"):
            rc, out, err = run("--score", path, "--json", "--mem-init",
                               how, "--threads", "1")
            if rc == 2 and "pre-LayerNorm" in err:
                self.skipTest("the test model is pre-LayerNorm")
            self.assertEqual(rc, 0, err)
            runs[how] = jsonl(out)[:-1]
        e, z = runs["empty"], runs["zeros"]
        self.assertEqual([r["id"] for r in e], [r["id"] for r in z])
        self.assertGreater(abs(e[0]["logprob"] - z[0]["logprob"]), 1e-4)


class ScoringReports(unittest.TestCase):
    def test_standard_error_and_row_text(self):
        path = tmpfile("se.txt", TEXT)
        rc, out, err = run("--score", path, "--json", "--seg-len", "6")
        self.assertEqual((rc, err), (0, ""))
        ev = jsonl(out)
        rows, s = ev[:-1], ev[-1]
        nll = [-r["logprob"] for r in rows]
        n = len(nll)
        mean = sum(nll) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in nll) / (n - 1))
        self.assertAlmostEqual(s["nll_stderr"], sd / math.sqrt(n), places=6)
        self.assertAlmostEqual(s["bpb_stderr"], s["nll_stderr"] * n /
                               math.log(2) / s["bytes"], places=6)
        self.assertIs(s["partial"], False)
        # each row carries the text of its token
        sp = Scoring.tokenizer(self)
        for r in rows:
            piece = sp.id_to_piece(r["id"])
            if not piece.startswith("<0x"):
                self.assertEqual(r["text"], piece.replace("\u2581", " "))
        rc, out, err = run("--score", path, "--seg-len", "6")
        text = out.decode()
        self.assertRegex(text, r"\nnll_stderr \d+\.\d+\nbpb_stderr "
                         r"\d+\.\d+\npartial false\n$")

    def interrupted_score(self, *extra):
        p = popen(self, [TXLGEN, "-m", MODEL, "--score", "-",
                         "--seg-len", "8", *extra],
                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
        data = (TEXT * 4).encode()
        p.stdin.write(data)     # and no end: it waits for more
        p.stdin.flush()
        time.sleep(1.5)
        p.send_signal(signal.SIGINT)
        out, err = clitest.wait_stdin_open(p)
        self.assertEqual(p.returncode, 130)
        self.assertIn(b"interrupted", err)
        return out, len(data)

    def test_ctrl_c_gives_the_partial_summary(self):
        out, sent = self.interrupted_score("--json")
        ev = jsonl(out)
        rows, s = ev[:-1], ev[-1]
        self.assertIs(s["partial"], True)
        self.assertEqual(s["predicted"], len(rows))
        self.assertGreater(len(rows), 8)
        self.assertAlmostEqual(s["nll"], -sum(r["logprob"] for r in rows) /
                               len(rows), places=6)
        self.assertTrue(0 < s["bytes"] <= sent)
        self.assertAlmostEqual(s["bpb"], s["nll"] * len(rows) / math.log(2)
                               / s["bytes"], places=6)
        out, _ = self.interrupted_score()
        self.assertIn(b"\npartial true\n", out)
        self.assertRegex(out.decode(), r"^tokens \d+\npredicted \d+\n")

    def test_progress_shows_time_left(self):
        # long enough to last over 1 s (in segments of 2), and under a
        # megabyte: shown in kB
        big = tmpfile("progress.txt", TEXT * 1500)
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        p = popen(self, [TXLGEN, "-m", MODEL, "--score", big,
                         "--seg-len", "2", "--mem-len", "64"],
                  stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        seen, end = b"", time.time() + 60
        while b" left" not in seen and time.time() < end:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
        self.assertRegex(seen, rb"\d+% .* tokens/s .*\d+s left .*bpb "
                         rb"\d+\.\d+ \xc2\xb1 \d+\.\d+")
        # in kB below a megabyte ("0.2/0.9 MB" said little)
        self.assertRegex(seen, rb"%  \d+\.\d/891\.0 kB  ")


class Tokenize(unittest.TestCase):
    TEXT = ("The state of the Union is strong.\n\n"
            "We will build a better future, for our children.\n"
            "Hé, naïve café!\n")

    def test_ids_per_line_as_sentencepiece_gives_them(self):
        sp = Scoring.tokenizer(self)
        path = tmpfile("tok.txt", self.TEXT)
        rc, out, err = run("--tokenize", path)
        self.assertEqual((rc, err), (0, ""))
        got = [[int(x) for x in line.split()]
               for line in out.decode().split("\n")[:-1]]
        self.assertEqual(got, [sp.encode(line)
                               for line in self.TEXT.split("\n")[:-1]])

    def test_json_gives_ids_and_text(self):
        sp = Scoring.tokenizer(self)
        rc, out, err = run("--tokenize", "-", "--json", input=self.TEXT)
        self.assertEqual((rc, err), (0, ""))
        ev = jsonl(out)
        rows, s = ev[:-1], ev[-1]
        ids = [i for line in self.TEXT.split("\n") for i in sp.encode(line)]
        self.assertEqual([r["id"] for r in rows], ids)
        self.assertEqual([r["pos"] for r in rows], list(range(len(ids))))
        self.assertEqual(s, {"tokens": len(ids),
                             "bytes": len(self.TEXT.encode())})
        # the texts add up to the lines, without their leading spaces
        self.assertEqual("".join(r["text"] for r in rows),
                         self.TEXT.replace("\n", ""))

    def test_ids_round_trip(self):
        path = tmpfile("rt.txt", self.TEXT)
        rc, ids, _ = run("--tokenize", path)
        ids_path = tmpfile("rt.ids", ids)
        rc, back, err = run("--tokenize", ids_path, "--ids")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(back.decode(), self.TEXT)
        # and the ids score as the text does
        a = jsonl(run("--score", path, "--json")[1])
        b = jsonl(run("--score", ids_path, "--ids", "--json")[1])
        self.assertEqual([r["id"] for r in a[:-1]], [r["id"] for r in b[:-1]])
        for x, y in zip(a[:-1], b[:-1]):
            self.assertAlmostEqual(x["logprob"], y["logprob"], places=5)

    def test_round_trip_is_byte_exact_where_newlines_are_tokens(self):
        # the default model's tokenizer keeps newlines (an identity
        # normaliser): text to ids and back through pipes gives every
        # byte back, blank lines, CRLF and a missing final newline too
        sotu = os.path.join(ROOT, "models", "sotu.bin")
        if not os.path.exists(sotu):
            self.skipTest("models/sotu.bin does not ship in this tree")
        for text in ("a\nb\n", "a\nb", "\n\nx\n\n\n", "one\r\ntwo\r\n",
                     "Hé, naïve café!\n\n  two  spaces\n", "no newline",
                     ""):
            rc, ids, err = run("-m", sotu, "--tokenize", "-", input=text,
                               model=False)
            self.assertEqual((rc, err), (0, ""))
            self.assertEqual(ids.count(b"\n"), text.count("\n") +
                             (not text.endswith("\n") and text != ""))
            rc, back, err = run("-m", sotu, "--tokenize", "-", "--ids",
                                input=ids, model=False)
            self.assertEqual((rc, err), (0, ""))
            self.assertEqual(back.decode(), text)

    def test_bad_ids(self):
        rc, out, err = run("--tokenize", "-", "--ids", input="1 2\n3 x\n")
        self.assertEqual(rc, 1)
        self.assertIn("line 2: 'x' is not a token id", err)
        # a NUL does not end the text silently, and is shown
        rc, out, err = run("--tokenize", "-", "--ids", input=b"1\0002\n")
        self.assertEqual(rc, 1)
        self.assertEqual(err, "txlgen: (stdin): line 1: '1\\02' is not a "
                         "token id (it holds a NUL byte)\n")
        rc, out, err = run("--tokenize", "-", "--ids", input=b"1 " +
                           b"0" * 70000 + b"99999999999\n")
        self.assertEqual(rc, 1)
        self.assertIn("line 1: token id 99999999999 is out of range", err)
        rc, out, err = run("--tokenize", "-", "-i")
        self.assertEqual(rc, 2)


class Info(unittest.TestCase):
    def test_info_describes_the_file(self):
        header = model_header(MODEL)
        meta = header.pop("__metadata__")
        tensors = {k: v for k, v in header.items()
                   if not k.startswith("__pad__")}
        rc, out, err = run("--info", "--json")
        self.assertEqual((rc, err), (0, ""))
        info = json.loads(out)
        self.assertEqual(info["model"], MODEL)
        self.assertEqual(info["file"]["bytes"], os.path.getsize(MODEL))
        weights = [v for k, v in tensors.items() if k != "tokenizer.model"]
        self.assertEqual(info["parameters"],
                         sum(math.prod(v["shape"]) for v in weights))
        self.assertEqual(info["file"]["dtypes"]["F32"]["tensors"],
                         len(weights))
        for k in ("n_layer", "n_head", "d_model", "d_head", "d_inner",
                  "d_embed"):
            self.assertEqual(info["architecture"][k], int(meta[k]), k)
        self.assertEqual(info["attention"]["attn_type"],
                         int(meta["attn_type"]))
        self.assertEqual(info["vocabulary"]["tokens"], int(meta["n_token"]))
        self.assertEqual(info["vocabulary"]["model_type"], "unigram")
        self.assertEqual(info["output_layer"]["kind"], "full softmax")
        self.assertEqual(info["metadata"], meta)
        self.assertIsNone(info["recommended"])
        # the memory of a session holds at least K and V of every layer
        ses = info["session"]
        self.assertEqual(ses["mem_len"], int(meta["mem_len"]))
        kv = 2 * 4 * int(meta["n_layer"]) * int(meta["n_head"]) * \
            int(meta["d_head"])
        self.assertGreaterEqual(ses["bytes"], kv * (ses["mem_len"] +
                                                    ses["seg_len"]))
        rc, out, _ = run("--info", "--json", "--mem-len", "1000")
        big = json.loads(out)["session"]
        self.assertEqual(big["mem_len"], 1000)
        self.assertGreaterEqual(big["bytes"] - ses["bytes"],
                                kv * (1000 - ses["mem_len"]))
        # the same as text
        rc, out, err = run("--info")
        self.assertEqual((rc, err), (0, ""))
        text = out.decode()
        self.assertIn(f"parameters: {info['parameters']}", text)
        self.assertIn(f"  n_layer: {meta['n_layer']}\n", text)
        self.assertIn("  kind: full softmax\n", text)

    def test_info_of_a_model_without_memory(self):
        # an absolute attention (attn_type 2) whose metadata names a
        # memory (as training's mem_len): its sessions have none, and
        # --info says what a session gets (the library's settings), not
        # the metadata
        d = os.path.join(TMP, "abs2")
        m = with_metadata(clitest.random_model(d, "--attn-type", "2", seed=3),
                          os.path.join(d, "mem8.bin"), mem_len="8")
        rc, out, err = run("-m", m, "--info", "--json", model=False)
        self.assertEqual((rc, err), (0, ""))
        info = json.loads(out)
        self.assertEqual(info["attention"]["kind"], "absolute sinusoidal "
                         "positions at the input (vanilla Transformer)")
        ses = info["session"]
        # what a prediction sees: its window
        self.assertEqual((ses["mem_len"], ses["receptive_field"]),
                         (0, ses["seg_len"]))

    def test_info_of_a_bad_model(self):
        rc, out, err = run("--info", "-m", os.path.join(TMP, "none.bin"),
                           model=False)
        self.assertEqual((rc, out), (3, b""))


class ComputeOption(unittest.TestCase):
    """--compute f32|bf16 (the config key compute): BF16 weights computed
    as stored in the products of segments."""

    @classmethod
    def setUpClass(cls):
        cls.bf16 = clitest.random_model(os.path.join(TMP, "bf16"),
                                        "--dtype", "BF16", seed=5)
        _, out, _ = run("--version", model=False)
        cls.native = "kernels: avx512bf16 " in out.decode()

    def score(self, *argv, environ=None):
        path = tmpfile("compute.txt", TEXT)
        rc, out, err = run("-m", self.bf16, "--score", path, "--json",
                           *argv, model=False, environ=environ)
        self.assertEqual((rc, err), (0, ""), argv)
        return [r["logprob"] for r in jsonl(out)[:-1]]

    def test_refused_without_bf16_weights(self):
        # the test model is F32: nothing to compute in BF16
        for argv in (["--compute", "bf16", "-p", "x", "-n", "1"],
                     ["--compute", "bf16", "--info"]):
            rc, out, err = run(*argv)
            self.assertEqual((rc, out), (2, b""), argv)
            self.assertIn(f"--compute bf16: {MODEL} stores none of its "
                          "weight matrices in BF16", err)
        rc, out, err = run("--compute", "bf15", "-p", "x")
        self.assertEqual((rc, out), (2, b""))
        self.assertIn("--compute: 'bf15' is not one of f32, bf16", err)
        cfg = tmpfile("compute-bad.json", '{"compute": "fp8"}')
        rc, out, err = run("-c", cfg, "-p", "x")
        self.assertEqual((rc, out), (3, b""))   # a bad config file
        self.assertIn("compute-bad.json", err)
        self.assertIn("'fp8' is not one of f32, bf16", err)

    def test_segments_round_activations(self):
        # segments of 40 tokens: the products of BF16 (all the weights
        # of this model) take BF16 activations, each within 2^-8 of
        # itself; a log-prob moves (the random model's peaked attention
        # amplifies: ~1e-2 measured), by far less than a wrong product
        # would (its scale: several nats)
        f32 = self.score("--seg-len", "40")
        bf16 = self.score("--seg-len", "40", "--compute", "bf16")
        self.assertEqual(len(f32), len(bf16))
        diffs = [abs(a - b) for a, b in zip(f32, bf16)]
        self.assertGreater(max(diffs), 0)
        self.assertLess(max(diffs), 0.2)
        self.assertLess(abs(sum(f32) - sum(bf16)) / len(f32), 0.02)
        # one token at a time: generation's kernels, in F32 either way
        # (the same computation: equal)
        self.assertEqual(self.score("--seg-len", "1"),
                         self.score("--seg-len", "1", "--compute", "bf16"))
        # the config key does what the option does
        cfg = tmpfile("compute.json", '{"compute": "bf16"}')
        self.assertEqual(self.score("--seg-len", "40", "-c", cfg), bf16)
        # without vdpbf16ps (the kernels capped below avx512bf16): the
        # same products widened, summed in another order, which may
        # round an activation to the BF16 value on the other side of
        # it (2^-8 apart): as far from F32, not closer
        wide = self.score("--seg-len", "40", "--compute", "bf16",
                          environ=env(TXL_ISA="avx512vnni"))
        diffs = [abs(a - b) for a, b in zip(f32, wide)]
        self.assertGreater(max(diffs), 0)
        self.assertLess(max(diffs), 0.2)

    def test_info_and_set(self):
        rc, out, err = run("-m", self.bf16, "--compute", "bf16", "--info",
                           "--json", model=False)
        self.assertEqual((rc, err), (0, ""))
        ses = json.loads(out)["session"]
        self.assertEqual((ses["compute"], ses["compute_native"]),
                         ("bf16", self.native))
        rc, out, err = run("-m", self.bf16, "--info", "--json",
                           model=False, environ=env(TXL_ISA="avx512"))
        ses = json.loads(out)["session"]
        self.assertEqual((ses["compute"], ses["compute_native"]),
                         ("f32", True))
        # /set: refused where meaningless, the setting kept
        rc, out, err = run("-i", input="/set compute bf16\n/show compute\n")
        self.assertEqual(rc, 2)                 # the /set error
        self.assertIn("stores none of its weight matrices in BF16", err)
        self.assertIn("compute", out.decode())
        self.assertIn("f32", out.decode())
        rc, out, err = run("-m", self.bf16, "-i", model=False,
                           input="/set compute bf16\n/show compute\n")
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("bf16", out.decode())


class ModelsByName(unittest.TestCase):
    """-m NAME along the model path, and --list-models."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=TMP)
        self.a, self.b = os.path.join(self.dir, "a"), os.path.join(self.dir,
                                                                   "b")
        self.xdg = os.path.join(self.dir, "xdg")
        self.user = os.path.join(self.xdg, "txlgen", "models")
        for d in (self.a, self.b, self.user):
            os.makedirs(d)
        with_metadata(MODEL, os.path.join(self.a, "twin.bin"),
                      description="the first twin")
        with_metadata(MODEL, os.path.join(self.b, "twin.bin"),
                      description="the second twin")
        with_metadata(MODEL, os.path.join(self.user, "mine.bin"),
                      description="fetched", source="https://example.org/m")

    def environ(self, path=None, **kw):
        e = env(**{"XDG_DATA_HOME": self.xdg, **kw})
        e["TXLGEN_MODEL_PATH"] = (path if path is not None
                                  else f"{self.a}:{self.b}")
        return e

    def used(self, *argv, environ=None, cwd=None):
        """The model file a run with argv uses (--info --json)."""
        p = subprocess.run([TXLGEN, *argv, "--info", "--json"],
                           capture_output=True, text=True, timeout=60,
                           env=environ or self.environ(), cwd=cwd,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        return os.path.realpath(os.path.join(cwd or "",
                                             json.loads(p.stdout)["model"]))

    def test_a_name_is_found_along_the_path(self):
        a, b = (os.path.join(d, "twin.bin") for d in (self.a, self.b))
        mine = os.path.join(self.user, "mine.bin")
        self.assertEqual(self.used("-m", "twin"), a)
        self.assertEqual(self.used("--model=twin.bin"), a)
        # empty entries count for nothing (not for the current directory)
        self.assertEqual(self.used("-m", "twin", environ=self.environ(
            f"::{self.b}:")), b)
        # the user's models directory, where txlgen-get installs
        self.assertEqual(self.used("-m", "mine"), mine)
        self.assertEqual(self.used(environ=self.environ(
            TXLGEN_MODEL="mine")), mine)
        cfg = tmpfile("model-by-name.json", '{"model": "mine"}')
        self.assertEqual(self.used("-c", cfg), mine)
        # ~/.local/share without XDG_DATA_HOME (and with a relative one)
        home = os.path.join(self.dir, "home")
        os.makedirs(os.path.join(home, ".local", "share", "txlgen"))
        os.symlink(self.xdg + "/txlgen/models",
                   os.path.join(home, ".local", "share", "txlgen", "models"))
        for xdg in ("", "relative/dir"):
            self.assertEqual(self.used("-m", "mine", environ=self.environ(
                HOME=home, XDG_DATA_HOME=xdg)), mine)
        # a file of that name is the file, not a name
        with_metadata(MODEL, os.path.join(self.dir, "twin"))
        self.assertEqual(self.used("-m", "twin", cwd=self.dir),
                         os.path.join(os.path.realpath(self.dir), "twin"))

    def test_a_missing_name_lists_where_it_was_looked_for(self):
        rc, out, err = run("-m", "nothere", "-p", "x", model=False,
                           environ=self.environ())
        self.assertEqual((rc, out), (3, b""))
        self.assertEqual(len(err.splitlines()), 1, err)
        for part in ("nothere.bin", self.a, self.b, self.user,
                     "txlgen --list-models", "txlgen-get --list",
                     "Transformer-XL", "txlgen-model(5)"):
            self.assertIn(part, err)
        # no advice to install what is not published
        self.assertNotIn("txlgen-get nothere", err)
        # a path is a path: its own error, no search
        rc, _, err = run("-m", "./nothere", "-p", "x", model=False,
                         environ=self.environ())
        self.assertEqual(rc, 3)
        self.assertIn("./nothere", err)
        self.assertNotIn(self.a, err)

    def test_a_misspelt_name_gets_a_suggestion(self):
        # an installed name, then a published one (with how to get it)
        for typed, meant in (("twim", "twin"), ("minee", "mine"),
                             ("text9", "text8"), ("wt1O3", "wt103")):
            rc, out, err = run("-m", typed, "-p", "x", model=False,
                               environ=self.environ())
            self.assertEqual((rc, out), (3, b""), typed)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn(f"did you mean '{meant}'?", err)
            if meant in ("text8", "wt103"):
                self.assertIn(f"txlgen-get {meant}' installs it", err)
            else:
                self.assertNotIn("txlgen-get", err)

    def test_a_published_name_says_how_to_install_it(self):
        rc, out, err = run("-m", "wt103", "-p", "x", model=False,
                           environ=self.environ())
        self.assertEqual((rc, out), (3, b""))
        self.assertIn("wt103: not installed", err)
        self.assertIn("txlgen-get wt103' downloads", err)
        # run from the build directory, the getter the build put beside
        # txlgen, by its path (only build/cmd is on README's PATH)
        path = re.search(r"'(\S*txlgen-get) wt103'", err).group(1)
        if os.path.basename(os.path.dirname(os.path.realpath(TXLGEN))) == \
                "cmd":
            self.assertEqual(os.path.realpath(path), os.path.join(
                os.path.dirname(os.path.realpath(TXLGEN)), "txlgen-get"))
            self.assertTrue(os.access(path, os.X_OK))

    def test_the_published_names_are_the_getters(self):
        getter = os.path.join(ROOT, "models", "txlgen-get")
        p = subprocess.run([sys.executable, getter, "--list"],
                           capture_output=True, text=True, timeout=60,
                           env=env(TXLGEN_CACHE=self.dir,
                                   XDG_DATA_HOME=self.xdg))
        self.assertEqual(p.returncode, 0, p.stderr)
        names = {ln.split()[0] for ln in p.stdout.splitlines()[1:]
                 if ln.strip() and not ln.startswith(" ")}
        self.assertIn("wt103", names)
        for name in names:
            rc, _, err = run("-m", name, "-p", "x", model=False,
                             environ=self.environ())
            self.assertEqual(rc, 3)
            self.assertIn(f"txlgen-get {name}' downloads", err)

    def test_other_model_kinds_are_named_as_such(self):
        # not GPT-2, llama or GGUF: said, with no advice that cannot work
        rc, out, err = run("-m", "gpt2", "-p", "x", model=False,
                           environ=self.environ())
        self.assertEqual((rc, out), (3, b""))
        self.assertIn("not GPT-2, llama or GGUF models", err)
        self.assertNotIn("txlgen-get gpt2", err)
        rc, out, err = run("-m", "llama-7b.gguf", "-p", "x", model=False,
                           environ=self.environ())
        self.assertEqual((rc, out), (3, b""))
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("a GGUF model (llama.cpp)", err)
        self.assertIn("txlgen runs only Transformer-XL model files", err)
        self.assertNotIn("txlgen-get", err)
        # a file that is one: the loader's error, and what the file is
        gguf = tmpfile("model.gguf", b"GGUF\3\0\0\0" + bytes(64))
        rc, out, err = run("-m", gguf, "-p", "x", model=False)
        self.assertEqual((rc, out), (3, b""))
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn(gguf, err)
        self.assertIn("it is a GGUF model (llama.cpp)", err)

    def test_a_link_loop_is_named(self):
        os.symlink("loop2", os.path.join(self.dir, "loop1"))
        os.symlink("loop1", os.path.join(self.dir, "loop2"))
        p = subprocess.run([TXLGEN, "-m", "loop1", "-p", "x"], cwd=self.dir,
                           capture_output=True, text=True, timeout=60,
                           env=self.environ(), stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 3)
        self.assertIn("loop1: Too many levels of symbolic links", p.stderr)
        self.assertNotIn("no such file", p.stderr)

    def test_list_models(self):
        bad = os.path.join(self.b, "broken.bin")
        with open(bad, "wb") as f:
            f.write(b"not a model at all")
        rc, out, err = run("--list-models", "--json", model=False,
                           environ=self.environ())
        self.assertEqual((rc, err), (0, ""))
        # (and the source tree's models/, for txlgen in its build tree)
        rows = [r for r in jsonl(out) if r["path"].startswith(self.dir)]
        self.assertEqual([(r["name"], os.path.dirname(r["path"]))
                          for r in rows],
                         [("twin", self.a), ("broken", self.b),
                          ("twin", self.b), ("mine", self.user)])
        self.assertEqual([r["shadowed"] for r in rows],
                         [False, False, True, False])
        self.assertIn("error", rows[1])
        header = model_header(MODEL)
        meta = header["__metadata__"]
        dtypes = {t["dtype"] for k, t in header.items()
                  if k != "__metadata__" and t["dtype"] != "U8"}
        for r in (rows[0], rows[3]):
            self.assertEqual(r["bytes"], os.path.getsize(r["path"]))
            self.assertEqual(r["n_token"], int(meta["n_token"]))
            self.assertEqual(r["vocabulary"], "SentencePiece")
            self.assertIn(r["weights"], dtypes)
        self.assertEqual((rows[0]["description"], rows[0]["source"]),
                         ("the first twin", None))
        self.assertEqual((rows[3]["description"], rows[3]["source"]),
                         ("fetched", "https://example.org/m"))
        # the table: a heading per directory, a line per model
        rc, out, err = run("--list-models", model=False,
                           environ=self.environ())
        self.assertEqual((rc, err), (0, ""))
        lines = out.decode().splitlines()
        self.assertRegex(lines[0], r"NAME +SIZE +WEIGHTS +VOCABULARY +"
                         r"DESCRIPTION")
        self.assertEqual(lines[1], self.a + ":")
        self.assertRegex(lines[2], r"^  twin +\d+\.\d kB +\w+ +SentencePiece "
                         rf"{meta['n_token']} +the first twin$")
        self.assertIn("(shadowed) the second twin", out.decode())
        self.assertIn("fetched (source: https://example.org/m)",
                      out.decode())

    def test_list_models_reads_only_headers(self):
        # a file cut short after its header lists as it is: the weights
        # are not read (a full load refuses it)
        with open(os.path.join(self.a, "twin.bin"), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            head = f.read(n)
        cut = os.path.join(self.b, "cut.bin")
        with open(cut, "wb") as f:
            f.write(n.to_bytes(8, "little") + head + b"\0" * 64)
        rc, out, err = run("--list-models", "--json", model=False,
                           environ=self.environ(path=self.b))
        self.assertEqual((rc, err), (0, ""))
        row = next(r for r in jsonl(out) if r["name"] == "cut")
        self.assertEqual(row["description"], "the first twin")
        self.assertEqual(run("-m", cut, "--info", model=False)[0], 3)


class Recommended(unittest.TestCase):
    def model(self, name, rec):
        return with_metadata(MODEL, os.path.join(TMP, name),
                             recommended=rec if isinstance(rec, str)
                             else json.dumps(rec))

    def config(self, *argv, model=None):
        rc, out, err = run("-m", model, *argv, "--print-config", model=False)
        self.assertEqual((rc, err), (0, ""))
        return json.loads(out)

    def test_sources_and_precedence(self):
        m = self.model("rec.bin", {"temp": 0.3, "top_k": 7, "stop": ["\n\n"],
                                   "mem_len": 24})
        got = self.config(model=m)
        self.assertEqual((got["temp"], got["top_k"], got["stop"],
                          got["mem_len"]), (0.3, 7, ["\n\n"], 24))
        src = got["sources"]
        self.assertEqual((src["temp"], src["top_k"], src["top_p"]),
                         ("model", "model", "default"))
        cfg = tmpfile("rec.json", json.dumps({"top_k": 9}))
        got = self.config("-c", cfg, "--temp", "0.9", model=m)
        self.assertEqual((got["temp"], got["top_k"], got["stop"]),
                         (0.9, 9, ["\n\n"]))
        self.assertEqual((got["sources"]["temp"], got["sources"]["top_k"],
                          got["sources"]["stop"]),
                         ("command line", "config file", "model"))
        # the info shows them too
        rc, out, _ = run("-m", m, "--info", "--json", model=False)
        self.assertEqual(json.loads(out)["recommended"]["top_k"], 7)

    def test_they_take_effect(self):
        m = self.model("greedy.bin", {"temp": 0})
        a = run("-m", m, "-p", "Hello", "-n", "20", "--seed", "1",
                model=False)
        b = run("-p", "Hello", "-n", "20", "--seed", "2", "--temp", "0")
        c = run("-p", "Hello", "-n", "20", "--seed", "1")
        self.assertEqual(a[0], 0)
        self.assertEqual(a, b)
        self.assertNotEqual(a[1], c[1])

    def test_bad_values_are_errors(self):
        for i, rec in enumerate(({"temp": -1}, {"top_k": "many"}, "{nope",
                                 "[1]")):
            m = self.model(f"bad-rec{i}.bin", rec)
            rc, out, err = run("-m", m, "-p", "x", "-n", "1", model=False)
            self.assertEqual((rc, out), (3, b""), rec)
            self.assertTrue(err.startswith(f"txlgen: {m}: metadata "
                                           "'recommended': "), err)
            self.assertEqual(len(err.splitlines()), 1)

    def test_unknown_and_forbidden_keys_are_ignored(self):
        out_file = os.path.join(TMP, "rec-state-out")
        m = self.model("odd-rec.bin", {"typical_p": 0.5,
                                       "state_out": out_file,
                                       "top_k": 3})
        rc, out, err = run("-m", m, "-p", "x", "-n", "2", model=False)
        self.assertEqual(rc, 0)
        self.assertIn("key 'typical_p' ignored (not a setting of this "
                      "version)", err)
        self.assertIn("key 'state_out' ignored (not a setting a model may "
                      "choose)", err)
        self.assertFalse(os.path.exists(out_file))
        rc, out, _ = run("-m", m, "--print-config", model=False)
        self.assertEqual(rc, 0)
        self.assertEqual(json.loads(out)["top_k"], 3)
        self.assertIsNone(json.loads(out)["state_out"])


class ReplPolish(PtyBase):
    def test_set_echoes_and_typed_keys_wait(self):
        self.spawn("-n", "-1", "--ignore-eos", "--seed", "1",
                   "--color=never")
        self.read_until(rb"Ctrl-D to quit\.\r\n> ")
        self.send(b"/set temp 0.5\r")
        self.read_until(rb"\(temp = 0\.5\)\r\n> ")
        self.send(b"/set mem_len default\r")
        self.read_until(rb"\(mem_len = \d+\)\r\n> ")
        # keys typed while the model writes are not echoed into its text,
        # and wait for the next prompt
        self.send(b"Hello\r")
        self.read_until(rb"Hello\r\n.{50}")
        self.send(b"typed-ahead")
        time.sleep(0.5)
        self.send(b"\x03")
        text = self.read_until(rb"\(stopped\)\r\n> ")
        self.assertNotIn(b"typed-ahead", text)
        self.read_until(rb"^typed-ahead")     # shown at the prompt
        self.send(b"\r")                     # and sent
        self.read_until(rb"^\r\n.{50}")
        self.send(b"\x03")
        self.read_until(rb"\(stopped\)\r\n> ")
        self.send(b"\x04")
        self.assertEqual(self.wait(), 0)

    def test_banner_says_the_model_continues_text(self):
        self.spawn("-n", "5", "--seed", "1")
        banner = self.read_until(rb"> ").decode()
        self.assertIn("memory 1024 positions", banner)
        self.assertIn("The model continues the text you type; it does not "
                      "chat", banner)
        self.send(b"\x04")
        self.assertEqual(self.wait(), 0)

    def test_model_text_in_colour_and_banner_fits(self):
        self.spawn("-n", "5", "--seed", "1", "--color=always", cols=40)
        banner = self.read_until(rb"> ")
        # (the terminal's modes, bracketed paste, take no column)
        for line in re.sub(rb"\x1b\[\??[0-9;]*[a-zA-Z]", b"",
                           banner).split(b"\r\n")[:-1]:
            self.assertLessEqual(len(line.decode()), 39, banner)
        self.send(b"Hello\r")
        self.read_until(rb"Hello\r\n")
        out = self.read_until(rb"\r\n> ")
        self.assertTrue(out.startswith(b"\033[36m"), out)
        self.assertIn(b"\033[0m", out)
        self.send(b"\x04")
        self.assertEqual(self.wait(), 0)


class Manual(unittest.TestCase):
    def render(self, page):
        if not shutil.which("man"):
            self.skipTest("man-db is not installed")
        p = subprocess.run(["man", "--warnings", "-l",
                            os.path.join(ROOT, "man", page)],
                           capture_output=True, timeout=60,
                           env=dict(os.environ, MANWIDTH="80",
                                    MAN_KEEP_FORMATTING="0"))
        self.assertEqual(p.returncode, 0)
        # groff warns of lines (tables) wider than the 80 columns
        self.assertEqual(p.stderr.decode(), "", page)
        return re.sub(r".\x08", "", p.stdout.decode())

    def test_man_page_has_no_warnings(self):
        text = self.render("txlgen.1")
        for section in ("EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES",
                        "CONFIGURATION FILE", "INTERACTIVE SESSION",
                        "RECOMMENDED SETTINGS", "READING FILES"):
            self.assertIn(section, text)
        for cmd in ("/help", "/reset", "/set", "/show", "/mem", "/save",
                    "/load", "/quit"):
            self.assertIn(cmd, text)
        for code in ("0", "1", "2", "3", "130", "143"):
            self.assertRegex(text, rf"(?m)^ +{code} ")

    def test_model_page_and_dates(self):
        self.assertIn("recommended", self.render("txlgen-model.5"))
        dates = set()
        for page in ("txlgen.1", "txlgen-model.5"):
            with open(os.path.join(ROOT, "man", page)) as f:
                th = next(line for line in f if line.startswith(".TH"))
            dates.add(th.split()[3])
        self.assertEqual(len(dates), 1, dates)

    @staticmethod
    def help_options():
        """{long name: (short letter or None, argument: None, "required"
        or "optional")} of the options --help lists."""
        _, out, _ = run("--help", model=False)
        got = {}
        for m in re.finditer(r"(?m)^  (?:-(\w), )?\s*--([a-z-]+)"
                             r"(\[=\w+\]| [A-Z]+)?", out.decode()):
            arg = m.group(3)
            got[m.group(2)] = (m.group(1), None if not arg else
                               "optional" if arg.startswith("[")
                               else "required")
        return got

    def test_man_page_lists_the_options_of_help(self):
        # each option of txlgen(1)'s OPTIONS is a .TP tag; they and --help
        # list the same options, with the same short forms and arguments
        with open(os.path.join(ROOT, "man", "txlgen.1")) as f:
            page = f.read()
        options = page.split("\n.SH OPTIONS\n")[1].split("\n.SH ")[0]
        tags = re.findall(r"\n\.TP\n(.*)", options)
        man = {}
        for tag in tags:
            tag = tag.replace("\\-", "-")
            short = re.search(r"(?<![-\w])-(\w)\b", tag)
            for name in re.findall(r"--([a-z-]+)", tag):
                if name.startswith("no-"):
                    continue        # the --no- forms: test above
                arg = (None if not re.search(r"=\\fI|\" [A-Z]", tag)
                       else "optional" if "[=" in tag else "required")
                man[name] = (short.group(1) if short else None, arg)
        self.assertEqual(man, self.help_options())
        # what the synopsis names exists
        synopsis = page.split("\n.SH SYNOPSIS\n")[1].split("\n.SH ")[0]
        shorts = {v[0] for v in man.values()}
        for name in re.findall(r"\\-\\-([a-z\\-]+)", synopsis):
            self.assertIn(name.replace("\\-", "-"), man)
        for letter in re.findall(r"\.RB? \[?\s*\\-(\w)\b", synopsis):
            self.assertIn(letter, shorts)

    def test_config_table_lists_the_settings(self):
        # txlgen(1)'s table of configuration keys: the keys --print-config
        # writes, in its order, each with an option of --help
        with open(os.path.join(ROOT, "man", "txlgen.1")) as f:
            page = f.read()
        table = page.split("\n.SH CONFIGURATION FILE\n")[1].split(
            "\n.TS\n")[1].split("\n.TE\n")[0]
        rows = [r.split("\t") for r in table.split("\n_\n")[1].split("\n")]
        _, out, _ = run("--print-config")
        keys = [k for k in json.loads(out) if k != "sources"]
        self.assertEqual([r[0] for r in rows], keys)
        opts = self.help_options()
        shorts = {v[0]: k for k, v in opts.items() if v[0]}
        for key, _, opt in rows:
            opt = opt.replace("\\-", "-")
            name = opt[2:] if opt.startswith("--") else shorts[opt[1:]]
            self.assertIn(name, opts, key)
            self.assertEqual(name.replace("-", "_"), key)

    def test_readme_uses_options_that_exist(self):
        # README's examples and its prose about the command line
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        using = readme.split("\n## Using it\n")[1].split("\n## ")[0]
        opts = self.help_options()
        shorts = {v[0] for v in opts.values()}
        # the options other tools spell differently that README quotes
        theirs = {"ctx-size", "temperature"}
        for name in set(re.findall(r"(?<![\w-])--([a-z][a-z-]*)", using)):
            if name in theirs:
                self.assertIn(f"'--{name}'", run(f"--{name}", "1")[2])
                continue
            self.assertIn(name[3:] if name.startswith("no-") else name,
                          opts, f"--{name}")
        # the short options of the examples' txlgen commands (up to the
        # next pipe, redirection or comment)
        code = "\n".join(re.findall(r"(?s)```sh\n(.*?)```", using))
        calls = re.findall(r"(?m)(?:^|\| )txlgen\b([^|>#\n]*)", code)
        self.assertGreater(len(calls), 10)
        for call in calls:
            for letter in re.findall(r"(?<![\w-])-([a-zA-Z])\b", call):
                self.assertIn(letter, shorts, call)

    def test_exit_codes_agree(self):
        # --help, txlgen(1) and README list the same exit codes
        _, out, _ = run("--help", model=False)
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        for code in ("0 ok", "1 runtime error", "2 usage", "3 bad model",
                     "130 interrupted", "143 terminated"):
            self.assertIn(code, " ".join(out.decode().split()))
            self.assertIn(code, " ".join(readme.split()))


class GenerationProgress(PtyBase):
    """Generation into a file shows how far it is on the terminal."""

    def run_on_pty(self, *args, out_path):
        """txlgen with stderr (and stdin) on a pty, stdout into a file;
        (exit status, what the terminal got)."""
        pid, fd = pty.fork()
        if pid == 0:
            out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.execve(TXLGEN, [TXLGEN, "-m", MODEL, *args], env())
        self.pid, self.fd, self.buf = pid, fd, b""
        self.addCleanup(self.end, pid, fd)
        return self.wait(), self.buf

    def test_progress_line_when_stdout_is_not_the_terminal(self):
        out = os.path.join(TMP, "progress.txt")
        rc, tty = self.run_on_pty("-p", "We", "-n", "300", "--ignore-eos",
                                  "--seed", "1", out_path=out)
        self.assertEqual(rc, 0, tty)
        self.assertRegex(tty, rb"\r\d+/300 tokens  \d+ tokens/s  \d+s")
        # cleared at the end: nothing after the erasing of the line
        self.assertTrue(tty.endswith(b"\r\x1b[K"), tty[-80:])
        self.assertEqual(open(out, "rb").read(),
                         run("-p", "We", "-n", "300", "--ignore-eos",
                             "--seed", "1")[1])
        # never when stderr is not a terminal (run() takes it in a pipe)
        rc, _, err = run("-p", "We", "-n", "300", "--ignore-eos")
        self.assertEqual((rc, err), (0, ""))

    def test_no_progress_line_into_a_pipe(self):
        # the reader of a pipe may draw on the terminal (less) or end the
        # run before the line is erased (head)
        pid, fd = pty.fork()
        if pid == 0:
            os.execve("/bin/sh", ["sh", "-c", f"'{TXLGEN}' -m '{MODEL}' -p We "
                                  "-n 300 --ignore-eos | cat > /dev/null"],
                      env())
        self.pid, self.fd, self.buf = pid, fd, b""
        self.addCleanup(self.end, pid, fd)
        self.assertEqual(self.wait(), 0)
        self.assertNotIn(b"tokens/s", self.buf)

    def test_no_progress_line_when_stdout_is_the_terminal(self):
        self.spawn("-p", "We", "-n", "50", "--ignore-eos", "--seed", "1")
        self.assertEqual(self.wait(), 0)
        self.assertNotIn(b"tokens/s", self.buf)


class Stats(unittest.TestCase):
    def test_counts_agree_with_their_nouns(self):
        rc, out, err = run("-p", "Hi", "-n", "1", "--stats", "--seed", "1")
        self.assertEqual(rc, 0)
        self.assertIn("generated: 1 token in", err)
        self.assertRegex(err, r"prompt: \d+ tokens? in")


class ValidText(unittest.TestCase):
    """A byte-fallback vocabulary lets a model sample a lone UTF-8 byte
    (the default model gave U+FFFD after an emoji for every seed); the
    sampler draws only tokens that keep the text valid, with one sample
    or many.  The random model's vocabulary is 256 bytes and 64 pieces:
    at temperature 1.5 it draws bytes all the time."""

    PROMPTS = ["I love this country \U0001F1FA\U0001F1F8 \u2764\ufe0f "
               "\U0001F600", "\u4eba\u95f4\u4e09\u6708\u5929\uff0c",
               "cafe\u0301 nai\u0308ve", "\u041f\u0440\u0438\u0432"
               "\u0435\u0442 \u65e5\u672c"]

    def valid(self, out, what):
        try:
            text = out.decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail(f"{what}: not UTF-8: {e}: {out!r}")
        self.assertNotIn("\ufffd", text, what)
        return text

    def test_default_model_after_emoji(self):
        sotu = os.path.join(ROOT, "models", "sotu.bin")
        for seed in range(1, 9):
            rc, out, err = run("-m", sotu, "-p", self.PROMPTS[0], "-n",
                               "5", "--seed", str(seed), model=False)
            self.assertEqual(rc, 0, err)
            self.valid(out, f"seed {seed}")

    def test_random_model_many_seeds_and_samples(self):
        for prompt in self.PROMPTS:
            for seed in (1, 2):
                what = f"{prompt!r} seed {seed}"
                rc, out, err = run("-p", prompt, "-n", "40", "--seed",
                                   str(seed), "--temp", "1.5",
                                   "--top-k", "0", "--top-p", "1",
                                   "--min-p", "0", "--n-samples", "4")
                self.assertEqual(rc, 0, err)
                self.valid(out, what)
                rc, out, err = run("-p", prompt, "-n", "40", "--seed",
                                   str(seed), "--temp", "1.5", "--json")
                self.assertEqual(rc, 0, err)
                # the pieces of the tokens, joined, are the text
                rows = [json.loads(x) for x in out.decode().splitlines()]
                ids = [r["id"] for r in rows if "id" in r]
                self.assertTrue(ids, what)
                rc, text, err = run("--tokenize", "-", "--ids",
                                    input=" ".join(map(str, ids)))
                self.assertEqual(rc, 0, err)
                # valid, but for a character the last token began
                try:
                    codecs.getincrementaldecoder("utf-8")().decode(
                        text, final=False)
                except UnicodeDecodeError as e:
                    self.fail(f"{what}: its ids are not UTF-8: {e}")


class ReplPaste(PtyBase):
    """A paste on a terminal is one input (bracketed paste), as lines
    between two \"\"\" lines are, not one turn a line."""

    LINES = [f"Line {i} of the address to the Congress." for i in
             range(1, 18)]

    def consumed(self, text):
        m = re.search(rb"memory: \d+/\d+ positions .*?, (\d+) tokens "
                      rb"consumed", text)
        self.assertTrue(m, text[-300:])
        return int(m.group(1))

    def test_seventeen_pasted_lines_are_one_turn(self):
        self.spawn("-n", "3", "--ignore-eos", "--temp", "0")
        banner = self.read_until(rb"/help for help.*\r\n> ")
        self.assertIn(b'"""', banner)
        self.send(b"\x1b[200~" + "\r".join(self.LINES).encode() +
                  b"\r\x1b[201~")
        got = self.read_until(rb"Line 17 of the address to the Congress\."
                              rb"\r\n")
        # shown as pasted, one line each, no prompt between them
        self.assertNotIn(b"> Line 2", got)
        self.assertNotIn(b"... ", got)
        after = self.read_until(rb"\r\n> ")
        self.send(b"/mem\r")
        mem = self.read_until(rb"tokens consumed.*\r\n> ")
        self.assertEqual(after.count(b"> "), 1, after)
        self.send(b"\x04")
        self.assertEqual(self.wait(), 0)
        # the same text between two \"\"\" lines, from a script
        rc, out, err = run("-i", "-n", "3", "--ignore-eos", "--temp", "0",
                           input='"""\n' + "\n".join(self.LINES) +
                           '\n"""\n/mem\n')
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.consumed(mem), self.consumed(out))


class ClosedPipe(unittest.TestCase):
    """Text into a pipe is block-buffered; a reader that goes away is
    noticed at the next token, not at the next flush kilobytes later."""

    def cpu(self, argv, close_at_once):
        p = subprocess.Popen(argv, stdout=subprocess.PIPE if close_at_once
                             else subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env())
        if close_at_once:
            p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        return p.returncode, ru.ru_utime + ru.ru_stime

    def test_endless_generation_stops_when_the_reader_leaves(self):
        # the default model: its tokens take long enough to count
        argv = [TXLGEN, "-m", os.path.join(ROOT, "models", "sotu.bin"),
                "-p", "We", "--ignore-eos", "--seed", "1", "-t", "1"]
        rc, ref = self.cpu(argv + ["-n", "1500"], False)
        self.assertEqual(rc, 0)
        rc, gone = self.cpu(argv + ["-n", "-1"], True)
        # killed by SIGPIPE at its first token's check: the model's load
        # and a token, where 4 kB of text (over a thousand tokens) would
        # have been made before a flush found the pipe closed
        self.assertEqual(rc, -signal.SIGPIPE)
        self.assertLess(gone, ref / 5, (gone, ref))


class SamplingControls(unittest.TestCase):
    """--logit-bias, the OpenAI penalties, --typical and mirostat 2 on
    the command line, in the config file and at /set (their arithmetic:
    tests/unit/test-sample.c, by hand)."""

    SOTU = os.path.join(ROOT, "models", "sotu.bin")
    PROMPT = "Fellow citizens"

    def ids(self, *args):
        rc, out, err = run("-m", self.SOTU, "-p", self.PROMPT, "-n", "8",
                           "--temp", "0", "--json", *args, model=False)
        self.assertEqual(rc, 0, err)
        return [json.loads(x)["id"] for x in out.decode().splitlines()
                if '"id"' in x]

    def test_logit_bias_bans_and_forces(self):
        plain = self.ids()
        first = plain[0]
        # banned by id, or by its text: another first token, never it
        for spec in (f"{first}=-inf", " of=-inf", f"{first}=-100"):
            banned = self.ids("--logit-bias", spec)
            self.assertNotIn(first, banned, spec)
        # forced: +100 outweighs any logit of this model
        self.assertEqual(self.ids("--logit-bias", "259=100"), [259] * 8)
        # in the config file, as a list
        cfg = tmpfile("bias.json", json.dumps({"logit_bias": [
            f"{first}=-inf"]}))
        self.assertNotIn(first, self.ids("--config", cfg))

    def test_bad_logit_bias_is_refused(self):
        for spec, what in (("99999=1", "no token 99999 (the model has "
                            "8000)"), ("foo", "not ID=BIAS"),
                           ("12=1000", "not ID=BIAS"),
                           ("12=nan", "not ID=BIAS")):
            rc, out, err = run("-m", self.SOTU, "-p", "x", "-n", "1",
                               "--logit-bias", spec, model=False)
            self.assertEqual((rc, out), (2, b""), err)
            self.assertEqual(err, f"txlgen: --logit-bias '{spec}': "
                             f"{what}" + err.split(what, 1)[1])
            self.assertEqual(len(err.splitlines()), 1, err)

    def test_ranges(self):
        for opt, bad in (("--frequency-penalty", "2.5"),
                         ("--presence-penalty", "-3"), ("--typical", "0"),
                         ("--mirostat-tau", "-1"), ("--mirostat-eta", "0")):
            rc, out, err = run("-p", "x", "-n", "1", opt, bad)
            self.assertEqual(rc, 2, (opt, err))
            self.assertIn(opt, err)

    def test_controls_change_the_text_and_set_takes_them(self):
        base = self.ids("--seed", "1", "--temp", "1")
        for args in (["--frequency-penalty", "2"], ["--presence-penalty",
                     "2"], ["--typical", "0.2"], ["--mirostat-tau", "1"]):
            self.assertNotEqual(self.ids("--seed", "1", "--temp", "1",
                                         *args), base, args)
        # the REPL's /set: the banned token never comes
        first = self.ids()[0]
        rc, out, err = run("-m", self.SOTU, "-i", "-n", "8", "--temp", "0",
                           "--json", model=False, input=(
                               f"/set logit_bias {first}=-inf\n"
                               f"{self.PROMPT}\n/set logit_bias 99999=1\n"))
        ids = [json.loads(x)["id"] for x in out.decode().splitlines()
               if '"id"' in x]
        self.assertEqual(len(ids), 8, out)
        self.assertNotIn(first, ids)
        # a bias the model cannot take is refused at /set, one line
        self.assertIn("--logit-bias '99999=1': no token 99999", err)


class OtherHabits(unittest.TestCase):
    """llama.cpp's conversation switches and Hugging Face generate()'s
    names get the option meant, or what to do instead: one line, exit 2."""

    def test_hints(self):
        for argv, hint in (
                (["-no-cnv"], "has no chat mode to turn off"),
                (["-ngl", "99"], "runs on the CPU"),
                (["--max-new-tokens", "5"], "did you mean '--n-predict'?"),
                (["--num-return-sequences", "2"],
                 "did you mean '--n-samples'?"),
                (["--do-sample"], "samples unless --temp 0"),
                (["--num-beams", "4"], "has no beam search")):
            rc, out, err = run(*argv, "-p", "x", "-n", "1")
            self.assertEqual((rc, out), (2, b""), (argv, err))
            first = err.splitlines()[0]
            self.assertIn(f"unknown option '{argv[0]}'; ", first)
            self.assertIn(hint, first)

    def test_stats_say_how_it_ended(self):
        rc, out, err = run("-p", "Hi", "-n", "2", "--ignore-eos", "--stats",
                           "--seed", "1")
        self.assertEqual(rc, 0, err)
        self.assertIn(", ended: length, seed 1", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
