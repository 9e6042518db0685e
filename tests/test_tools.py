#!/usr/bin/python3
"""The Python programs of models/ (convert.py, txlfile.py, train.py,
vocab.py) as a user runs them: one line on success naming what was
written and its size, a progress line only on a terminal, and a python3
that lacks NumPy, SentencePiece or PyTorch told so in one line (exit
status 1) with the python3 that has them.

Run: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tests/test_tools.py
"""

import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import unittest

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import random_model as mrm

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(os.path.dirname(HERE), "models")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable
TMP = None

# a sitecustomize that makes the modules of $TXLGEN_TEST_BLOCK (comma-
# separated) unimportable, as on a python3 without them
BLOCKER = """
import os, sys

class _Blocker:
    names = set(os.environ.get("TXLGEN_TEST_BLOCK", "").split(","))

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, _Blocker())
"""


def setUpModule():
    global TMP
    TMP = tempfile.mkdtemp(prefix="txl-tools-")
    unittest.addModuleCleanup(shutil.rmtree, TMP, ignore_errors=True)


def tool(name):
    return os.path.join(MODELS, name)


def env(**kw):
    e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    e.pop("PYTHONPATH", None)
    e.update(kw)
    return e


def run(*argv, python=PYTHON, flags=(), **kw):
    p = subprocess.run([python, *flags, *argv], capture_output=True,
                       text=True, env=env(**kw), timeout=300,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def run_on_tty(*argv):
    """(exit status, what stderr got) of a program whose stderr is a
    terminal (stdout a pipe)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([PYTHON, *argv], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=slave, env=env())
    os.close(slave)
    got = b""
    while True:
        r, _, _ = select.select([master], [], [], 300)
        if not r:
            p.kill()
            break
        try:
            b = os.read(master, 65536)
        except OSError:             # EIO: the program closed it
            break
        if not b:
            break
        got += b
    os.close(master)
    p.stdout.read()
    p.stdout.close()
    return p.wait(timeout=60), got.decode()


def size_of(path):
    return f"{os.path.getsize(path) / 1e6:.1f} MB" \
        if os.path.getsize(path) >= 1e6 else \
        f"{os.path.getsize(path) / 1e3:.1f} kB"


class Programs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # rows of 128: Q4_K takes them (the calibration's type)
        cls.rm = mrm.build(os.path.join(TMP, "m"), n_layer=1, d_model=128,
                           n_head=2, d_head=64, d_inner=128)
        cls.text = os.path.join(TMP, "calib.txt")
        with open(cls.text, "w") as f:
            f.write("the cat sat on the mat. " * 40)

    def convert_argv(self, out, *extra):
        rm = self.rm
        return [tool("convert.py"), "--weights", rm.state, "--config",
                rm.config, "--tokenizer", rm.tokenizer, "-o", out, *extra]

    def test_success_is_one_line(self):
        out = os.path.join(TMP, "c.bin")
        rc, stdout, err = run(*self.convert_argv(out))
        self.assertEqual((rc, stdout), (0, ""), err)
        self.assertEqual(err, f"convert.py: wrote {out} ({size_of(out)}, "
                         "F32)\n")
        q8 = os.path.join(TMP, "q8.bin")
        rc, stdout, err = run(tool("txlfile.py"), "--dtype", "q8_0", out, q8)
        self.assertEqual((rc, stdout), (0, ""), err)
        self.assertEqual(err, f"txlfile.py: wrote {q8} ({size_of(q8)}, "
                         "Q8_0)\n")
        # a failure is its line alone
        rc, _, err = run(tool("txlfile.py"), "--dtype", "F16",
                         os.path.join(TMP, "none.bin"), q8)
        self.assertEqual(rc, 3)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertNotIn("wrote", err)

    def test_progress_on_a_terminal(self):
        out = os.path.join(TMP, "tty.bin")
        rc, got = run_on_tty(*self.convert_argv(out))
        self.assertEqual(rc, 0, got)
        self.assertIn("\rconvert.py: writing tty.bin: tensor ", got)
        # the progress line cleared, then the line of success
        self.assertTrue(got.endswith(f"\r\x1b[Kconvert.py: wrote {out} ("
                                     f"{size_of(out)}, F32)\r\n"), got)
        q4 = os.path.join(TMP, "q4k.bin")
        rc, got = run_on_tty(tool("txlfile.py"), "--dtype", "Q4_K",
                             "--calibrate", self.text, out, q4)
        self.assertEqual(rc, 0, got)
        self.assertIn("\rtxlfile.py: calibrating on calib.txt: ", got)
        self.assertIn(" tokens (", got)
        self.assertIn("\rtxlfile.py: writing q4k.bin: tensor ", got)
        self.assertTrue(got.endswith(f"txlfile.py: wrote {q4} ("
                                     f"{size_of(q4)}, Q4_K)\r\n"), got)

    def test_a_python3_without_the_modules(self):
        # a python3 of its own, without Debian's dist-packages (-S): it
        # lacks NumPy, SentencePiece and PyTorch alike
        bare = os.path.join(TMP, "bin", "python3")
        os.makedirs(os.path.dirname(bare), exist_ok=True)
        if not os.path.exists(bare):
            os.symlink(os.path.realpath(PYTHON), bare)
        for prog, module, what, pkg in (
                ("convert.py", "numpy", "NumPy", "python3-numpy"),
                ("txlfile.py", "numpy", "NumPy", "python3-numpy"),
                ("train.py", "torch", "PyTorch", "python3-torch"),
                ("vocab.py", "sentencepiece", "SentencePiece",
                 "python3-sentencepiece")):
            with self.subTest(prog=prog):
                rc, out, err = run(tool(prog), "--help", python=bare,
                                   flags=("-S", "-E", "-s"))
                self.assertEqual((rc, out), (1, ""), err)
                self.assertEqual(err, (
                    f"{prog}: needs {what} (the Python module {module}), "
                    f"which {bare} cannot import: run it with "
                    f"/usr/bin/python3 (apt-get install {pkg})\n"))
        # /usr/bin/python3 itself without one: the package to install
        block = os.path.join(TMP, "block")
        os.makedirs(block, exist_ok=True)
        with open(os.path.join(block, "sitecustomize.py"), "w") as f:
            f.write(BLOCKER)
        for argv, module, pkg in (
                ([tool("convert.py"), "--help"], "sentencepiece",
                 "python3-sentencepiece"),
                ([tool("txlfile.py"), "--dtype", "Q4_K", "--calibrate",
                  self.text, self.rm.path, os.path.join(TMP, "x.bin")],
                 "torch", "python3-torch")):
            with self.subTest(argv=argv[0], module=module):
                rc, out, err = run(*argv, PYTHONPATH=block,
                                   TXLGEN_TEST_BLOCK=module)
                self.assertEqual((rc, out), (1, ""), err)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn(f"(the Python module {module}), which "
                              f"{PYTHON} cannot import: apt-get install "
                              f"{pkg}", err)
        self.assertFalse(os.path.exists(os.path.join(TMP, "x.bin")))


if __name__ == "__main__":
    unittest.main()
