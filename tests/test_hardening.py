#!/usr/bin/python3
"""Files that change or are not what they seem, through the real txlgen
binary; the library's side is in tests/unit/test-session.c, the
broken model files in tests/test_badfiles.py.

- A model file mapped with --mmap and cut short while txlgen reads it
  (`cp` onto it, or `truncate`) ends the run with one line naming the
  file and exit status 1, not SIGBUS; read into memory (the default,
  --no-mmap) the run does not notice and scores what it would have.
- --state-in and --state-out refuse what is not a regular file: a FIFO
  without waiting for a writer, a directory with the real reason (it used
  to be a stale errno, "Inappropriate ioctl for device"), a device node
  (as root `--state-out /dev/null` used to rename the temporary file over
  the device) left as it was.  The device node is a copy of /dev/null's
  made in a scratch directory, so that a regression cannot replace the
  real one.

Hostile input, third round (2026-11-25):

- A model whose recommended settings hold 300,000 keys loads at once and
  warns about five of them, then counts the rest (the duplicate check
  compared every key with every other: minutes of CPU, 149,287 warning
  lines); SIGTERM, SIGINT and SIGHUP end a run while such a model loads
  (700,000 keys) at once, with their exit status and word; and a run
  whose output nobody reads any more 10 s after them.
- --state-out removes no file but its own abandoned temporary files
  (a.bin.tmpbackup and x.tmp.jsonl were deleted); an unusable target
  (a directory, a FIFO, a device, a missing directory, a read-only file
  system) is refused before anything is generated; SIGTERM while the
  state is written ends the run with status 143, the old file intact.
- A file and a pipe give the same ids for any text, whatever sizes the
  pipe delivers it in (a character was split at the 64 KiB chunks of a
  pipe, the byte after a full buffer read, and a token id longer than a
  chunk counted twice).

The txlgen binary: $TXLGEN (set by meson test), else build/cmd/txlgen;
the model: $TXLGEN_TEST_MODEL (a small random one).
"""

import fcntl
import json
import os
import pty
import random
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import termios
import threading
import time
import unittest

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import random_model as mrm

TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")

# txlgen keeps an ignored SIGHUP ignored (as nohup asks): the hangup tests
# need its default in the programs they start, whatever ran the tests
signal.signal(signal.SIGHUP, signal.SIG_DFL)
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
            try:
                p.stdin.write(MORE)
                p.stdin.close()
            except BrokenPipeError:
                pass    # it may have met the cut and ended already
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
        model, rc, _, err = self.score_and_cut("--mmap")
        self.assertGreaterEqual(rc, 0, f"killed by signal {-rc}: {err!r}")
        self.assertEqual(rc, 1, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn(model, err)
        self.assertRegex(err, r"cut short while in use.*leave out --mmap")

    def test_model_read_into_memory_survives(self):
        _, rc, out, err = self.score_and_cut()
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


def popen(test, argv, **kw):
    """subprocess.Popen(argv), killed when @test ends."""
    p = subprocess.Popen(argv, env=env(), **kw)

    def reap():
        if p.poll() is None:
            p.kill()
        p.communicate()
    test.addCleanup(reap)
    return p



# How a pipe delivers a text: odd sizes, and whole buffers of 64 KiB as
# `cat` writes them (the byte after those was read uninitialised)
ODD = (1, 7, 4093, 65535, 3, 65537, 131071, 2, 65536, 11)
CAT = (65536,)


def pieces(data, sizes):
    at, i = 0, 0
    while at < len(data):
        yield data[at:at + sizes[i % len(sizes)]]
        at += sizes[i % len(sizes)]
        i += 1


def feed_pieces(fd, data, sizes):
    """Write @data into the pipe @fd in pieces of @sizes (cycled), each
    once the one before has been read, so that every read() returns one
    piece."""
    try:
        for piece in pieces(data, sizes):
            while piece:
                piece = piece[os.write(fd, piece):]
            end = time.time() + 30
            while time.time() < end:
                left = fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4)
                if int.from_bytes(left, "little") == 0:
                    break
                time.sleep(0.001)
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


class PipeEqualsFile(unittest.TestCase):
    """The ids of a text do not depend on how it arrives."""

    def both(self, data, *argv):
        """The output of txlgen ARGV FILE, and of txlgen ARGV - with the
        same bytes from a pipe, once for each way of delivering them."""
        path = os.path.join(TMP, "chunks.txt")
        with open(path, "wb") as f:
            f.write(data)
        rc, from_file, err = run("-m", MODEL, *argv, path)
        self.assertEqual((rc, err), (0, ""))
        outs = []
        for sizes in (ODD, CAT):
            r, w = os.pipe()
            p = popen(self, [TXLGEN, "-m", MODEL, *argv, "-"], stdin=r,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            os.close(r)
            writer = threading.Thread(target=feed_pieces,
                                      args=(w, data, sizes))
            writer.start()
            out, err = p.communicate(timeout=120)
            writer.join()
            self.assertEqual((p.returncode, err), (0, b""))
            outs.append(out)
        return from_file, outs

    def assert_same(self, from_file, from_pipes):
        for sizes, out in zip(("odd sizes", "64 KiB"), from_pipes):
            self.assertEqual(from_file, out, f"pieces of {sizes}")

    def test_texts_across_chunk_boundaries(self):
        k64 = 1 << 16
        emoji = "\U0001F642".encode()
        texts = {
            # no space anywhere: cut at a character boundary
            "cjk": "日本語の文章".encode() * 20000,
            # exactly one full buffer, and more: the byte after it
            "a_64k": b"a" * k64,
            "a_140k": b"a" * 140000,
            # a 4-byte character across the 64 KiB mark, at each offset
            "emoji_0": b"a" * (k64 - 1) + emoji * 4,
            "emoji_1": b"a" * (k64 - 2) + emoji * 4,
            "emoji_2": b"a" * (k64 - 3) + emoji * 4,
            "emoji_3": b"a" * k64 + emoji * 4,
            # long lines with spaces, a newline past 64 KiB, blank lines
            "lines": (b"word " * 20000 + b"\n\n" + b"x" * 70000 + b"\n" +
                      b"end\n") * 2,
            # not UTF-8
            "bytes": bytes(range(256)) * 1000,
        }
        for name, data in texts.items():
            with self.subTest(text=name):
                a, b = self.both(data, "--tokenize")
                self.assert_same(a, b)
                self.assertGreater(len(a.split()), 0)

    def test_cjk_scores_the_same(self):
        # 72,000 bytes: across the first 64 KiB
        a, b = self.both("日本語の文章".encode() * 4000, "--json",
                         "--seg-len", "64", "--score")
        for out in b:
            ra, rb = rows(a), rows(out)
            self.assertEqual([r["id"] for r in ra], [r["id"] for r in rb])
            for x, y in zip(ra, rb):
                self.assertLessEqual(abs(x["logprob"] - y["logprob"]), TOL)

    def test_an_id_longer_than_a_chunk(self):
        data = b"0" * 100000 + b"51 " + b"0" * 70000 + b"52\n"
        a, b = self.both(data, "--ids", "--json", "--tokenize")
        self.assert_same(a, b)
        self.assertEqual([r["id"] for r in map(json.loads, a.splitlines())
                          if "id" in r], [51, 52])


class NotText(unittest.TestCase):
    """Text inputs (--score, a prompt file or stdin, --prime) that are not
    UTF-8 text are refused with the file and the offset of the first bad
    byte: a binary scored at 29.8 bits per byte and Latin-1 read as
    U+FFFD, without a word."""

    def check(self, data, offset, what, argv):
        path = os.path.join(TMP, "not-text")
        with open(path, "wb") as f:
            f.write(data)
        for args in ([*argv, path] if argv[-1] != "--prime" else
                     [*argv, path, "-p", "x", "-n", "1"],):
            rc, out, err = run("-m", MODEL, *args)
            self.assertEqual((rc, out), (1, b""), (args, err))
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn(f"{path}: {what}", err)
            self.assertIn(f"at offset {offset}", err)

    def test_refused_where_text_is_read(self):
        latin1 = "Le café est très bon\n".encode("latin-1") * 3
        big = b"word " * 20000 + b"\xff"
        for argv in (["--score"], ["-f"], ["--prime"]):
            with self.subTest(argv=argv):
                self.check(latin1, 6, "not UTF-8 text (byte 0xE9", argv)
                # past the first 64 KiB chunk
                self.check(big, 100000, "not UTF-8 text (byte 0xFF", argv)
                # a character cut at the end, a binary's NUL
                self.check(b"ok \xe2\x82", 3, "not UTF-8 text", argv)
                self.check(b"\x7fELF\x02\x01\x01\x00", 7,
                           "not text (a NUL byte", argv)
                # random bytes are data, not Latin-1 to convert
                noise = random.Random(1).randbytes(4096).replace(b"\0",
                                                                 b"\1")
                try:
                    noise.decode()
                except UnicodeDecodeError as e:
                    first = e.start
                self.check(noise, first, "not text (binary data", argv)
        # the prompt from stdin: named as such
        p = subprocess.run([TXLGEN, "-m", MODEL, "-n", "1"], input=latin1,
                           capture_output=True, env=env(), timeout=60)
        self.assertEqual((p.returncode, p.stdout), (1, b""))
        self.assertIn(b"(stdin): not UTF-8 text (byte 0xE9 at offset 6)",
                      p.stderr)

    def test_a_text_file_is_not_a_model(self):
        # said first, not what its first 8 bytes would make of a header
        path = os.path.join(TMP, "passwd")
        with open(path, "w") as f:
            f.write("root:x:0:0:root:/root:/bin/bash\n" * 20)
        rc, out, err = run("-m", path, "-p", "hi", "-n", "1")
        self.assertEqual((rc, out), (3, b""), err)
        self.assertEqual(err, f"txlgen: {path}: not a txlgen model file "
                         "(no JSON header after the first 8 bytes)\n")

    def test_the_program_itself_is_not_scored(self):
        rc, out, err = run("-m", MODEL, "--score", TXLGEN)
        self.assertEqual((rc, out), (1, b""))
        self.assertIn(TXLGEN + ": not ", err)

    def test_utf8_text_is_still_read(self):
        path = os.path.join(TMP, "utf8.txt")
        with open(path, "wb") as f:
            f.write("Le café est très bon, 日本語 \U0001F642\n".encode() * 3)
        rc, out, err = run("-m", MODEL, "--score", path)
        self.assertEqual((rc, err), (0, ""))
        # --tokenize shows what any bytes become: not refused
        rc, out, err = run("-m", MODEL, "--tokenize", TXLGEN)
        self.assertEqual((rc, err), (0, ""))


def with_recommended(path, text):
    """The test model, its metadata 'recommended' set to @text, as @path
    (the header padded so that the data stays 64-byte aligned)."""
    with open(MODEL, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    header["__metadata__"]["recommended"] = text
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-(8 + len(raw)) % 64)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw + data)
    return path


def many_keys(n, last=""):
    return "{" + ",".join(f'"k{i}":{i}' for i in range(n)) + last + "}"


def wait_for(what, cond, timeout=30):
    end = time.time() + timeout
    while not cond():
        if time.time() > end:
            raise AssertionError(f"never saw {what}")
        time.sleep(0.001)


def read_in(pid, path):
    """Has process @pid read as many bytes as the file @path holds (is it
    checking what it read)?"""
    try:
        with open(f"/proc/{pid}/io") as f:
            rchar = int(f.read().split("rchar:")[1].split()[0])
        return rchar >= os.path.getsize(path)
    except FileNotFoundError:   # ended
        return True


class HostileRecommended(unittest.TestCase):
    def test_many_keys_warn_five_times_then_count(self):
        path = with_recommended(os.path.join(TMP, "keys300k.bin"),
                                many_keys(300000))
        rc, out, err = run("-m", path, "-p", "Hi", "-n", "1", "--seed", "1",
                           timeout=120)
        self.assertEqual(rc, 0, err[-500:])
        lines = err.splitlines()
        self.assertEqual(len(lines), 6, lines[:10])
        for i, line in enumerate(lines[:5]):
            self.assertEqual(line, f"txlgen: warning: {path}: metadata "
                             f"'recommended': key 'k{i}' ignored (not a "
                             f"setting of this version)")
        self.assertEqual(lines[5], f"txlgen: warning: {path}: metadata "
                         f"'recommended': 299995 more keys ignored")

    def test_a_key_given_twice_among_many(self):
        path = with_recommended(os.path.join(TMP, "keysdup.bin"),
                                many_keys(300000, ',"k123456":1'))
        rc, out, err = run("-m", path, "-p", "Hi", "-n", "1", timeout=120)
        self.assertEqual((rc, out), (3, b""), err[-500:])
        self.assertEqual(err, f"txlgen: {path}: metadata 'recommended': key "
                         f"'k123456': given twice\n")

    def test_signals_end_the_loading_at_once(self):
        # a header of 13 MB: its recommended settings take a while to
        # check however fast that is; the signal comes once the file is
        # read in, while the library checks it
        path = with_recommended(os.path.join(TMP, "keys700k.bin"),
                                many_keys(700000))
        for sig, status, word in ((signal.SIGTERM, 143, "terminated"),
                                  (signal.SIGINT, 130, "interrupted"),
                                  (signal.SIGHUP, 129, "hangup")):
            with self.subTest(signal=sig.name):
                p = popen(self, [TXLGEN, "-m", path, "-p", "Hi", "-n", "-1",
                                 "--ignore-eos"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
                wait_for("the model read", lambda: read_in(p.pid, path))
                p.send_signal(sig)
                # it used to go on checking keys for minutes
                out, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, status, err[-300:])
                self.assertEqual(err.decode(), f"txlgen: {word}\n")
                self.assertEqual(out, b"", "the signal came after loading")

    def test_nul_in_recommended_settings(self):
        path = with_recommended(os.path.join(TMP, "nul.bin"),
                                '{"stop": ["a\\u0000b"]}')
        rc, out, err = run("-m", path, "-p", "Hi", "-n", "1")
        self.assertEqual((rc, out), (3, b""), err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn(path, err)
        self.assertIn("\\u0000", err)


class BlockedOutput(unittest.TestCase):
    def test_a_signal_ends_a_run_whose_reader_stopped(self):
        # the write into a full pipe was restarted after the signal, for
        # ever; now the run gets SIGNALS_GRACE_S (10 s), then ends
        for sig, status, word in ((signal.SIGTERM, 143, "terminated"),
                                  (signal.SIGINT, 130, "interrupted")):
            with self.subTest(signal=sig.name):
                r, w = os.pipe()
                self.addCleanup(os.close, r)
                p = popen(self, [TXLGEN, "-m", MODEL, "-p", "Hi", "-n",
                                 "-1", "--ignore-eos"], stdout=w,
                          stderr=subprocess.PIPE)
                os.close(w)

                def full():
                    n = fcntl.ioctl(r, termios.FIONREAD, b"\0" * 4)
                    return int.from_bytes(n, "little") >= 65536
                wait_for("a full pipe", full, timeout=60)
                p.send_signal(sig)
                _, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, status, err)
                self.assertEqual(err.decode(), f"txlgen: {word} (still not "
                                 "done 10 s after the signal: the rest of "
                                 "the output is lost)\n")


class StateOut(unittest.TestCase):
    def dir(self, name):
        d = os.path.join(TMP, name)
        os.mkdir(d)
        return d

    def test_only_its_own_temporary_files_go(self):
        d = self.dir("neighbours")
        # names like the temporary files of a.bin and x, of the old form
        # (.tmpXXXXXX) and of the new (.txltmp.XXXXXX) but holding no
        # state
        keep = ["a.bin.tmpbackup", "a.bin.tmpAbC123", "a.bin.tmp.jsonl",
                "a.bin.txltmp.AbC123", "a.bin.txltmp.", "x.tmp.jsonl",
                "x.tmpbackup", "x.txltmp.precio"]
        for name in keep:
            with open(os.path.join(d, name), "w") as f:
                f.write("precious " * 20 + "\n")
        for target in ("a.bin", "x"):
            rc, _, err = run("-m", MODEL, "-p", "Hello", "-n", "1",
                             "--mem-len", "4", "--seed", "1",
                             "--state-out", os.path.join(d, target))
            self.assertEqual((rc, err), (0, ""))
        self.assertEqual(sorted(os.listdir(d)), sorted(keep + ["a.bin",
                                                               "x"]))
        for name in keep:
            with open(os.path.join(d, name)) as f:
                self.assertEqual(f.read(), "precious " * 20 + "\n")

    def assert_refused_first(self, target, phrase, pre=()):
        # -n 50: the generation would have written text before the error
        p = subprocess.run([*pre, TXLGEN, "-m", MODEL, "-p", "Hello", "-n",
                            "50", "--ignore-eos", "--state-out", target],
                           capture_output=True, env=env(),
                           stdin=subprocess.DEVNULL, timeout=30)
        rc, out, err = p.returncode, p.stdout, p.stderr.decode()
        self.assertEqual((rc, out), (1, b""), err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn(target, err)
        self.assertIn(phrase, err)

    def test_unusable_targets_are_refused_before_generating(self):
        d = self.dir("targets")
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        self.assert_refused_first(d, "not a regular file (a directory)")
        self.assert_refused_first(fifo, "not a regular file (a FIFO)")
        self.assert_refused_first("/dev/null", "not a regular file (a "
                                  "character device)")
        self.assert_refused_first(os.path.join(d, "no-such-dir", "s.bin"),
                                  "No such file or directory")
        os.symlink("no-such-file", os.path.join(d, "dangling"))
        self.assert_refused_first(os.path.join(d, "dangling"),
                                  "No such file or directory")
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))

    def test_read_only_file_system(self):
        # a read-only mount in a mount namespace of its own: root (or a
        # user namespace) needed, and unshare(1)
        d = self.dir("ro")
        probe = subprocess.run(["unshare", "-m", "sh", "-c",
                                f"mount -t tmpfs -o ro none {d}"],
                               capture_output=True)
        if probe.returncode != 0:
            self.skipTest("cannot mount a read-only file system here: "
                          f"{probe.stderr.decode().strip()}")
        self.assert_refused_first(
            os.path.join(d, "s.bin"), "Read-only file system",
            pre=("unshare", "-m", "sh", "-c", f'mount -t tmpfs -o ro none '
                 f'{d} && exec "$@"', "sh"))

    def test_sigterm_while_the_state_is_written(self):
        d = self.dir("saving")
        target = os.path.join(d, "s.bin")
        rc, _, err = run("-m", MODEL, "-p", "Hello", "-n", "1", "--mem-len",
                         "4", "--state-out", target)
        self.assertEqual((rc, err), (0, ""))
        with open(target, "rb") as f:
            old = f.read()
        # a memory of 200,000 positions, all of them held (zero states:
        # a file holds the rows filled): a state of 51 MB, being written
        # when its temporary file shows among the open files; stopped
        # there, so that the signal comes in the middle of the save
        p = popen(self, [TXLGEN, "-m", MODEL, "-p", "Hello", "-n", "2",
                         "--mem-len", "200000", "--mem-init", "zeros",
                         "--state-out", target],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def saving():
            try:
                fds = os.listdir(f"/proc/{p.pid}/fd")
            except FileNotFoundError:
                raise AssertionError("ended before saving")
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{p.pid}/fd/{fd}").startswith(
                            d + "/"):
                        return True
                except FileNotFoundError:
                    pass
            return False
        wait_for("the state being written", saving, timeout=60)
        p.send_signal(signal.SIGSTOP)
        p.send_signal(signal.SIGTERM)
        p.send_signal(signal.SIGCONT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 143, err)
        self.assertEqual(err.decode(), "txlgen: terminated\n")
        self.assertNotEqual(out, b"")
        with open(target, "rb") as f:
            self.assertEqual(f.read(), old)
        self.assertEqual(os.listdir(d), ["s.bin"])


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
