"""The txlgen Python package (models/txlgen) as a package:

- every script of tools/, bench/ and tests/fuzz/ that imports it finds it
  from its own file (srctree.py beside it): run from another folder with
  PYTHONPATH unset, its --help comes, not an ImportError;
- `pip install --no-build-isolation --no-index ./models` into a virtual
  environment with the system's packages (offline, as models/README.md
  says) installs the package with lib/'s headers inside it and its
  commands: the installed txlgen-txlfile re-stores the test model as
  Q8_0 with a description, checked by the installed package's own
  loader rules, and txlgen loads the file.

Run: TXLGEN=build/cmd/txlgen TXLGEN_TEST_MODEL=build/tests/unit/m.bin \\
     /usr/bin/python3 tests/test_package.py
"""

import glob
import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import loadable, random_model as mrm

ROOT = mrm.ROOT
TXLGEN = os.environ.get("TXLGEN", os.path.join(ROOT, "build", "cmd",
                                               "txlgen"))
MODEL = os.environ.get("TXLGEN_TEST_MODEL")
PYTHON = mrm.PYTHON


def no_pythonpath():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def scripts():
    """The scripts outside models/ that import the package."""
    out = []
    for pattern in ("tools/*.py", "bench/*.py", "tests/fuzz/*.py"):
        for p in sorted(glob.glob(os.path.join(ROOT, pattern))):
            with open(p, encoding="utf-8") as f:
                text = f.read()
            if "from txlgen" in text and os.path.basename(p) != "srctree.py":
                out.append(p)
    return out


class Scripts(unittest.TestCase):
    def test_scripts_find_the_package_without_pythonpath(self):
        found = scripts()
        names = {os.path.relpath(p, ROOT) for p in found}
        # the list is the tree's, not empty by a wrong pattern
        for must in ("tools/check_checkpoints.py", "bench/bench_tf.py",
                     "tests/fuzz/make-seeds.py"):
            self.assertIn(must, names)
        with tempfile.TemporaryDirectory(prefix="txl-pkg-") as cwd:
            for p in found:
                with self.subTest(script=os.path.relpath(p, ROOT)):
                    r = subprocess.run([PYTHON, p, "--help"], cwd=cwd,
                                       env=no_pythonpath(),
                                       capture_output=True, text=True,
                                       timeout=300)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertIn("usage:", r.stdout)
                    self.assertNotIn("Error", r.stderr)


class Install(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="txl-pkg-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def run_ok(self, argv, **kw):
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=600, env=no_pythonpath(), **kw)
        self.assertEqual(r.returncode, 0, f"{argv}: {r.stdout}{r.stderr}")
        return r.stdout

    def test_pip_installs_offline_into_a_venv(self):
        # a copy of what the build reads (models/, lib/, meson.build), so
        # that the source tree gets no build folders
        src = os.path.join(self.tmp, "src")
        shutil.copytree(os.path.join(ROOT, "models"),
                        os.path.join(src, "models"),
                        ignore=shutil.ignore_patterns(
                            "build", "*.egg-info", "__pycache__", "data",
                            "runs", "*.bin"))
        shutil.copytree(os.path.join(ROOT, "lib"), os.path.join(src, "lib"),
                        ignore=shutil.ignore_patterns("*.c", "*.cc"))
        shutil.copy(os.path.join(ROOT, "meson.build"), src)
        venv = os.path.join(self.tmp, "venv")
        self.run_ok([PYTHON, "-m", "venv", "--system-site-packages", venv])
        bin_ = os.path.join(venv, "bin")
        self.run_ok([os.path.join(bin_, "pip"), "install", "--quiet",
                     "--no-build-isolation", "--no-index", "./models"],
                    cwd=src)

        # the installed package, not the source tree's, with the headers
        out = self.run_ok([os.path.join(bin_, "python"), "-c",
                           "import txlgen, txlgen.loadable as l; "
                           "print(txlgen.__file__); print(l.LIB); "
                           "print(l.read_limits()['TXL_MAX_LAYERS'])"],
                          cwd=self.tmp)
        pkg, lib, max_layers = out.split("\n")[:3]
        self.assertTrue(pkg.startswith(venv + os.sep), pkg)
        self.assertEqual(lib, os.path.join(os.path.dirname(pkg), "lib"))
        self.assertEqual(int(max_layers),
                         loadable.read_limits()["TXL_MAX_LAYERS"])

        for name in ("txlgen-convert", "txlgen-txlfile", "txlgen-vocab",
                     "txlgen-train", "txlgen-sampling"):
            self.assertTrue(os.access(os.path.join(bin_, name), os.X_OK),
                            name)

        # the binding of the installed package, on the build tree's
        # libtxl ($TXLGEN_LIBTXL), imports neither torch nor NumPy
        lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
            TXLGEN))), "lib", "libtxl.so.1")
        if os.path.exists(lib) and os.environ.get("TXLGEN_SANITIZE",
                                                  "none") == "none":
            code = ("import sys; from txlgen import Model; "
                    "m = Model(sys.argv[1], n_threads=1); "
                    "print(sys.modules['txlgen.api'].__file__); "
                    "print(m.tokenize('Hello world')); "
                    "print(sorted(k for k in ('numpy', 'torch') "
                    "if k in sys.modules))")
            r = subprocess.run([os.path.join(bin_, "python"), "-c", code,
                                os.path.abspath(MODEL or os.path.join(
                                    ROOT, "models", "sotu.bin"))],
                               capture_output=True, text=True, timeout=120,
                               cwd=self.tmp,
                               env=dict(no_pythonpath(), TXLGEN_LIBTXL=lib))
            self.assertEqual(r.returncode, 0, r.stderr)
            api, ids, heavy = r.stdout.split("\n")[:3]
            self.assertTrue(api.startswith(venv + os.sep), api)
            self.assertRegex(ids, r"^\[\d+(, \d+)*\]$")
            self.assertEqual(heavy, "[]")

        # an installed command at work
        model = MODEL
        if not model:
            self.run_ok([PYTHON, os.path.join(ROOT, "tests",
                                              "make_random_model.py"),
                         "-o", self.tmp, "--seed", "11"])
            model = os.path.join(self.tmp, "m.bin")
        q8 = os.path.join(self.tmp, "q8.bin")
        self.run_ok([os.path.join(bin_, "txlgen-txlfile"), model, q8,
                     "--dtype", "Q8_0", "--set", "description=from the venv"],
                    cwd=self.tmp)
        with open(q8, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        self.assertEqual(header["__metadata__"]["description"],
                         "from the venv")
        self.assertIn("Q8_0", {t["dtype"] for k, t in header.items()
                               if k != "__metadata__"})
        if os.access(TXLGEN, os.X_OK):
            out = self.run_ok([TXLGEN, "--model", q8, "--info"])
            self.assertIn("description: from the venv", out)
            self.assertIn("Q8_0:", out)


if __name__ == "__main__":
    unittest.main()
