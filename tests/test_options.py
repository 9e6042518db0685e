#!/usr/bin/python3
"""The one option table of txlgen and txlgen-server (core/settings.c).

Each program's --help, --list-options, parser and man page name the same
options; each refuses the other's options with a line naming the program
that takes them, and other programs' habits (llama.cpp's server's above
all) with the option meant; a setting given to the server is the default
of its requests, sampled as txlgen samples it.

Run:  TXLGEN=build/cmd/txlgen TXLGEN_SERVER=build/server/txlgen-server \\
      /usr/bin/python3 tests/test_options.py -v
"""

import json
import os
import re
import subprocess
import tempfile
import unittest

from test_server import MODEL, ROOT, SERVER, TXLGEN, Server, txlgen

PROGS = {"txlgen": (TXLGEN, "txlgen.1"),
         "txlgen-server": (SERVER, "txlgen-server.1")}


def run(prog, *args, timeout=60):
    """(exit status, stdout, stderr) of PROG ARGS."""
    p = subprocess.run([PROGS[prog][0], *args], capture_output=True,
                       text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def help_options(prog):
    """{--long: short letter or None} of PROG --help's option lines."""
    rc, out, err = run(prog, "--help")
    assert (rc, err) == (0, ""), (rc, err)
    return {"--" + m.group(2): m.group(1) for m in re.finditer(
        r"(?m)^  (?:-(\w), )?\s*--([a-z][a-z-]*)", out)}


def man_options(page):
    """{--long: short letter or None} of the .TP entries of the man page's
    OPTIONS section (an entry's --no- form beside its option left out)."""
    with open(os.path.join(ROOT, "man", page)) as f:
        text = f.read()
    section = re.search(r"(?ms)^\.SH OPTIONS\n(.*?)^\.SH ", text).group(1)
    got = {}
    for tag in re.findall(r"(?m)^\.TP\n(\.B[IR]? .*)$", section):
        tag = tag.replace("\\-", "-")
        longs = re.findall(r"(?<![\w-])--([a-z][a-z-]*[a-z])", tag)
        shorts = re.findall(r"(?<![\w-])-([a-zA-Z])\b(?!-)", tag)
        for name in longs:
            if name.startswith("no-") and name[3:] in longs:
                continue
            got["--" + name] = shorts[0] if shorts else None
    return got


def list_options(prog):
    """{spelling: (the spelling --help lists, kind, values)}."""
    rc, out, err = run(prog, "--list-options")
    assert (rc, err) == (0, ""), (rc, err)
    got = {}
    for line in out.splitlines():
        spellings, kind, *values = line.split(" ")
        names = spellings.split(",")
        for name in names:
            got[name] = (names[0], kind, values)
    return got


def first_error(err):
    """The error line of a usage error (the 'Try ...' line after it)."""
    lines = err.splitlines()
    assert len(lines) == 2 and lines[1].startswith("Try '"), err
    return lines[0]


class OneTable(unittest.TestCase):

    def test_help_is_the_man_page(self):
        for prog, (_, page) in PROGS.items():
            helped, documented = help_options(prog), man_options(page)
            self.assertGreater(len(helped), 25, prog)
            self.assertEqual(set(helped) - set(documented), set(),
                             f"in {prog} --help, not in {page}")
            self.assertEqual(set(documented) - set(helped), set(),
                             f"in {page}, not in {prog} --help")
            for name, short in helped.items():
                self.assertEqual(documented[name], short, (page, name))

    def test_help_is_list_options_is_the_parser(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as cfg:
            cfg.write("{}")
            cfg.flush()
            for prog in PROGS:
                helped, listed = help_options(prog), list_options(prog)
                firsts = {first for first, _, _ in listed.values()}
                # (--no-api-key is an option, not a --no- form)
                self.assertEqual({f for f in firsts
                                  if not f.startswith("--no-") or
                                  "--" + f[5:] not in firsts},
                                 set(helped), prog)
                for name, short in helped.items():
                    if short:
                        self.assertEqual(listed["-" + short][0], name)
                # each spelling is taken: the error is the option after
                # it, or its value's (naming it)
                for name, (first, kind, values) in listed.items():
                    if first in ("--help", "--version", "--list-types",
                                 "--list-options"):
                        continue
                    value = [] if kind == "flag" else [
                        values[0] if values else
                        cfg.name if kind in ("file", "input", "model",
                                             "config") else "1"]
                    rc, _, err = run(prog, name, *value, "--frob")
                    self.assertEqual(rc, 2, (prog, name, err))
                    line = first_error(err)
                    self.assertTrue(
                        line == f"{prog}: unknown option '--frob'" or
                        line.startswith(f"{prog}: {name}: "), (prog, line))
                # and what is not listed is not taken
                rc, _, err = run(prog, "--frobnicate-all")
                self.assertEqual(rc, 2)
                self.assertIn("unknown option '--frobnicate-all'", err)

    def test_the_server_keeps_its_options_and_ranges(self):
        helped = help_options("txlgen-server")
        for name in ("--model", "--host", "--port", "--parallel",
                     "--api-key-file", "--no-api-key", "--session-dir",
                     "--max-sessions", "--max-body", "--max-prompt",
                     "--max-tokens", "--max-n", "--max-connections",
                     "--max-queue", "--timeout", "--grace", "--cors-origin",
                     "--threads", "--n-predict", "--stop", "--ignore-eos",
                     "--temp", "--top-k", "--top-p", "--min-p",
                     "--repeat-penalty", "--repeat-last-n", "--seed",
                     "--mem-len", "--seg-len", "--clamp-len",
                     "--same-length", "--kv-type", "--compute", "--mmap",
                     "--mem-init", "--help", "--version"):
            self.assertIn(name, helped)
        bad = [("--port", "65536"), ("--port", "-1"), ("--parallel", "0"),
               ("--parallel", "257"), ("--max-body", "63"),
               ("--max-body", str((1 << 30) + 1)), ("--max-n", "1025"),
               ("--timeout", "0"), ("--grace", "-1"),
               ("--max-sessions", str((1 << 20) + 1)),
               ("--max-connections", "65537"), ("--max-queue", "0"),
               ("--max-prompt", "0"), ("--max-tokens", "-1"),
               ("--port", "x"), ("--port=", ""), ("--temp", "-1")]
        for opt, value in bad:
            argv = [opt + value] if opt.endswith("=") else [opt, value]
            rc, _, err = run("txlgen-server", *argv)
            self.assertEqual(rc, 2, (argv, err))
            self.assertTrue(first_error(err).startswith(
                f"txlgen-server: {opt.rstrip('=')}: "), err)
        # the bounds themselves are taken, --opt=value as --opt value
        for argv in (["--max-body", "64"], ["--max-body=1073741824"],
                     ["--port=65535"], ["--parallel", "256"],
                     ["--grace=0"], ["--no-mmap"], ["--no-same-length"]):
            rc, _, err = run("txlgen-server", *argv, "--frob")
            self.assertEqual(first_error(err),
                             "txlgen-server: unknown option '--frob'", argv)

    def test_llama_server_habits(self):
        for argv, meant in [(["--api-key", "k"], "'--api-key-file'"),
                            (["--api-key=k"], "'--api-key-file'"),
                            (["-c", "4096"], "--mem-len 4096"),
                            (["--ctx-size", "512"], "'--mem-len'"),
                            (["-np", "4"], "'--parallel'"),
                            (["--n-parallel", "4"], "'--parallel'"),
                            (["-ngl", "99"], "runs on the CPU"),
                            (["--n-gpu-layers", "99"], "runs on the CPU"),
                            (["--slot-save-path", "d"], "'--session-dir'"),
                            (["-ctk", "q8_0"], "'--kv-type'"),
                            (["--cache-type-k", "q8_0"], "'--kv-type'"),
                            (["--batch-size", "64"], "'--seg-len'"),
                            (["--temperature", "0"], "'--temp'")]:
            rc, out, err = run("txlgen-server", *argv, "--port", "0")
            self.assertEqual(rc, 2, (argv, err))
            line = first_error(err)
            self.assertTrue(line.startswith("txlgen-server: "), line)
            self.assertIn(meant, line, argv)
            self.assertEqual(out, "")
        # -V is --version, as txlgen's
        rc, out, err = run("txlgen-server", "-V")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, run("txlgen-server", "--version")[1])
        self.assertTrue(out.startswith("txlgen-server "), out)

    def test_shared_settings_give_the_same_messages(self):
        # one row, one parser: the same words from both programs
        for argv in (["--temp", "-1"], ["--top-k", "x"], ["--seed", "-2"],
                     ["--kv-type", "u8"], ["--mem-len=1.5"],
                     ["--temperature", "1"], ["--ctx-size", "9"],
                     ["--top"], ["--repeat-penalty"], ["--mmap=1"],
                     ["--no-temp"], ["--threds", "2"]):
            lines = []
            for prog in PROGS:
                rc, _, err = run(prog, *argv, "-m", MODEL)
                self.assertEqual(rc, 2, (prog, argv, err))
                line = first_error(err)
                self.assertTrue(line.startswith(prog + ": "), line)
                lines.append(line[len(prog):])
            self.assertEqual(lines[0], lines[1], argv)

    def test_each_refuses_the_others_options(self):
        for prog, argv, other in [
                ("txlgen-server", ["--score", "f"], "--score"),
                ("txlgen-server", ["--prompt", "f"], "--prompt"),
                ("txlgen-server", ["-p", "x"], "-p/--text"),
                ("txlgen-server", ["--interactive"], "--interactive"),
                ("txlgen-server", ["--print-config"], "--print-config"),
                ("txlgen-server", ["--no-echo"], "--no-echo"),
                ("txlgen", ["--parallel", "2"], "--parallel"),
                ("txlgen", ["--port", "8080"], "--port"),
                ("txlgen", ["--host=::1"], "--host"),
                ("txlgen", ["--no-api-key"], "--no-api-key"),
                ("txlgen", ["--session-dir", "d"], "--session-dir"),
                ("txlgen", ["--api-key", "k"], "--api-key-file"),
                ("txlgen", ["-np", "2"], "--parallel")]:
            owner = "txlgen" if prog == "txlgen-server" else "txlgen-server"
            rc, _, err = run(prog, *argv, "-m", MODEL)
            self.assertEqual(rc, 2, (prog, argv, err))
            self.assertIn(f"{other} is an option of {owner}",
                          first_error(err), (prog, argv))
        # nor are they keys of the other's config file
        with tempfile.NamedTemporaryFile("w", suffix=".json") as cfg:
            cfg.write('{"port": 8081}')
            cfg.flush()
            rc, _, err = run("txlgen", "-c", cfg.name, "-p", "x")
            self.assertEqual(rc, 3, err)
            self.assertIn("unknown key 'port' (a setting of txlgen-server, "
                          "not of txlgen)", err)


class ServerDefaults(unittest.TestCase):
    """Settings of the server's command line and config file are the
    defaults of its requests, sampled as txlgen samples them."""

    PROMPT = "The state of the Union"

    def complete(self, srv, **body):
        status, r = srv.post("/v1/completions", dict(prompt=self.PROMPT,
                                                     **body))
        self.assertEqual(status, 200, r)
        return r["choices"][0]["text"]

    def test_settings_are_the_defaults_of_requests(self):
        settings = ["--temp", "1.3", "--seed", "3", "--top-k", "12",
                    "--repeat-penalty", "1.2", "-n", "14"]
        want = txlgen("-p", self.PROMPT, *settings).rstrip("\n")
        greedy = txlgen("-p", self.PROMPT, "-n", "14", "--temp", "0",
                        "--repeat-penalty", "1.2").rstrip("\n")
        seed4 = txlgen("-p", self.PROMPT, *settings,
                       "--seed", "4").rstrip("\n")
        self.assertNotEqual(want, greedy)
        self.assertNotEqual(want, seed4)
        srv = Server(*settings)
        try:
            self.assertEqual(self.complete(srv), want)
            # a request's fields go over them, as the options do
            self.assertEqual(self.complete(srv, seed=4), seed4)
            self.assertEqual(self.complete(srv, temperature=0), greedy)
            # each field in the range of its option
            for field, value in [("repeat_last_n", (1 << 20) + 1),
                                 ("top_k", 1.5), ("top_p", 0),
                                 ("temperature", 101), ("seed", -2),
                                 ("min_p", "x")]:
                status, r = srv.post("/v1/completions", {
                    "prompt": "x", field: value})
                self.assertEqual(status, 400, (field, r))
                self.assertIn(f"'{field}'", r["error"]["message"])
            status, r = srv.post("/v1/completions", {
                "prompt": "x", "max_tokens": 2, "seed": -1,
                "repeat_last_n": 1 << 20})
            self.assertEqual(status, 200, r)
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_config_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as cfg:
            json.dump({"temp": 0, "n_predict": 9, "max_n": 2}, cfg)
            cfg.flush()
            want = txlgen("-p", self.PROMPT, "-n", "9",
                          "--temp", "0").rstrip("\n")
            srv = Server("--config", cfg.name)
            try:
                self.assertEqual(self.complete(srv), want)
                status, r = srv.post("/v1/completions", dict(prompt="x",
                                                             n=3))
                self.assertEqual(status, 400, r)
                self.assertIn("'n'", r["error"]["message"])
            finally:
                self.assertEqual(srv.stop(), 0)
        with tempfile.NamedTemporaryFile("w", suffix=".json") as cfg:
            json.dump({"max_body": 10}, cfg)
            cfg.flush()
            rc, _, err = run("txlgen-server", "-c", cfg.name)
            self.assertEqual(rc, 3, err)
            self.assertIn("key 'max_body': 10 is out of range", err)


if __name__ == "__main__":
    unittest.main()
