#!/usr/bin/python3
"""Files that change or are not what they seem, through the real txlgen
binary; the library's side is in tests/unit/test-session.c, the
broken model files in tests/test_badfiles.py.

- A mapped model file cut short while txlgen reads it (`cp` onto it, or
  `truncate`) ends the run with one line naming the file and exit status
  1, not SIGBUS; with --no-mmap the run does not notice and scores what it
  would have.
- --state-in and --state-out refuse what is not a regular file: a FIFO
  without waiting for a writer, a directory with the real reason (it used
  to be a stale errno, "Inappropriate ioctl for device"), a device node
  (as root `--state-out /dev/null` used to rename the temporary file over
  the device) left as it was.  The device node is a copy of /dev/null's
  made in a scratch directory, so that a regression cannot replace the
  real one.

The txlgen binary: $TXLGEN (set by meson test), else build/cmd/txlgen;
the model: $TXLGEN_TEST_MODEL (a small random one).
"""

import json
import os
import pty
import select
import shutil
import stat
import subprocess
import tempfile
import time
import unittest

from txlgen import random_model as mrm

TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")
MODEL = os.environ.get("TXLGEN_TEST_MODEL")
TMP = None

# Scored twice, once by a mapped model and once by one read into memory:
# the same computation on the same bytes held at other (equally aligned)
# addresses.  Should OpenBLAS still sum in another order there, a log-prob
# of the test model (|x| < 20, sums of a few hundred float32 products)
# moves by ~1e-6; 1e-5 stays far below what a wrong weight would change.
TOL = 1e-5

FIRST = b"hello world, this is a text to score " * 10 + b"\n"
MORE = b"and more text that comes after the model file changed " * 40 + b"\n"


def setUpModule():
    global TMP
    if TXLGEN is None or not MODEL or not os.path.exists(MODEL):
        raise unittest.SkipTest("no txlgen or test model (set TXLGEN, "
                                "TXLGEN_TEST_MODEL)")
    TMP = tempfile.mkdtemp(prefix="txl-hardening-")


def tearDownModule():
    if TMP:
        shutil.rmtree(TMP, ignore_errors=True)


def env():
    e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    e.pop("TXLGEN_MODEL", None)
    return e


def run(*argv, timeout=60):
    p = subprocess.run([TXLGEN, *argv], capture_output=True, env=env(),
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def rows(out):
    lines = [json.loads(x) for x in out.decode().splitlines()]
    return [r for r in lines if "logprob" in r]


class ModelCutShort(unittest.TestCase):
    def score_and_cut(self, *opts):
        """--score - on a copy of the model, cut to nothing after the
        first rows came out and before the rest of the text is sent."""
        model = os.path.join(TMP, "cut.bin")
        shutil.copy(MODEL, model)
        p = subprocess.Popen([TXLGEN, "-m", model, "--score", "-", "--json",
                              "--seg-len", "4", *opts],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env())
        try:
            p.stdin.write(FIRST)
            p.stdin.flush()
            first = p.stdout.readline()     # the model is being read
            self.assertTrue(first.endswith(b"\n"), first)
            os.truncate(model, 0)
            p.stdin.write(MORE)
            p.stdin.close()
            out = first + p.stdout.read()
            err = p.stderr.read().decode("utf-8", "replace")
            p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        return model, p.returncode, out, err

    def test_mapped_model_cut_short_is_a_message(self):
        model, rc, _, err = self.score_and_cut()
        self.assertGreaterEqual(rc, 0, f"killed by signal {-rc}: {err!r}")
        self.assertEqual(rc, 1, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn(model, err)
        self.assertRegex(err, r"cut short while in use.*--no-mmap")

    def test_model_read_into_memory_survives(self):
        _, rc, out, err = self.score_and_cut("--no-mmap")
        self.assertEqual((rc, err), (0, ""))
        p = subprocess.run([TXLGEN, "-m", MODEL, "--score", "-", "--json",
                            "--seg-len", "4"], input=FIRST + MORE,
                           capture_output=True, env=env(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        got, want = rows(out), rows(p.stdout)
        self.assertEqual([r["id"] for r in got], [r["id"] for r in want])
        self.assertGreater(len(got), 100)
        for a, b in zip(got, want):
            self.assertLessEqual(abs(a["logprob"] - b["logprob"]), TOL)


class StateFiles(unittest.TestCase):
    def assert_refused(self, argv, phrase):
        rc, _, err = run("-m", MODEL, "-p", "x", "-n", "1", "--seed", "1",
                         *argv, timeout=30)      # a FIFO used to hang
        self.assertEqual(rc, 1, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn(argv[1], err)
        self.assertIn(phrase, err)
        self.assertNotIn("Inappropriate ioctl", err)

    def test_fifo(self):
        fifo = os.path.join(TMP, "state.fifo")
        os.mkfifo(fifo)
        self.assert_refused(["--state-in", fifo], "not a regular file "
                            "(a FIFO)")
        self.assert_refused(["--state-out", fifo], "not a regular file "
                            "(a FIFO)")
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))

    def test_directory(self):
        d = os.path.join(TMP, "state.dir")
        os.mkdir(d)
        self.assert_refused(["--state-in", d], "directory")
        self.assert_refused(["--state-out", d], "not a regular file "
                            "(a directory)")
        self.assertTrue(stat.S_ISDIR(os.lstat(d).st_mode))
        self.assertEqual(os.listdir(TMP).count("state.dir"), 1)
        self.assertEqual([n for n in os.listdir(TMP)
                          if n.startswith("state.dir.")], [])

    def test_device_node(self):
        dev = os.path.join(TMP, "null")
        try:
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            self.skipTest("making a device node needs root")
        self.assert_refused(["--state-out", dev], "not a regular file "
                            "(a character device)")
        sb = os.lstat(dev)
        self.assertTrue(stat.S_ISCHR(sb.st_mode))
        self.assertEqual(sb.st_rdev, os.makedev(1, 3))
        self.assertEqual([n for n in os.listdir(TMP)
                          if n.startswith("null.")], [])

    def test_state_round_trip_still_works(self):
        # the refusals above are not refusals of everything
        path = os.path.join(TMP, "ok.state")
        rc, _, err = run("-m", MODEL, "-p", "Hello", "-n", "2", "--seed",
                         "1", "--state-out", path)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        rc, _, err = run("-m", MODEL, "-p", "", "-n", "2", "--seed", "1",
                         "--state-in", path)
        self.assertEqual((rc, err), (0, ""))


class ReplFiles(unittest.TestCase):
    def test_fifo_history_and_editrc(self):
        fifo = os.path.join(TMP, "repl.fifo")
        os.mkfifo(fifo)
        ldd = subprocess.run(["ldd", TXLGEN], capture_output=True,
                             text=True).stdout
        # without libedit there is no .editrc to read
        for var in ("TXLGEN_HISTFILE", "EDITRC")[:2 if "libedit" in ldd
                                                 else 1]:
            with self.subTest(var=var):
                e = env()
                e.update(TXLGEN_HISTFILE="", EDITRC="")
                e[var] = fifo
                pid, fd = pty.fork()
                if pid == 0:
                    os.execve(TXLGEN, [TXLGEN, "-m", MODEL, "-n", "1"], e)
                buf, end = b"", time.time() + 30
                try:
                    while time.time() < end and b"\n> " not in buf:
                        if select.select([fd], [], [], 0.1)[0]:
                            try:
                                buf += os.read(fd, 65536)
                            except OSError:
                                break
                finally:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    os.close(fd)
                self.assertIn(b"\n> ", buf, f"no prompt (waiting on the "
                              f"FIFO?): {buf[-300:]!r}")
                self.assertIn(f"warning: {fifo}: not a regular file"
                              .encode(), buf)


if __name__ == "__main__":
    unittest.main()
