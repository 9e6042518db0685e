#!/usr/bin/python3
"""The installation, as a user makes it: configure with a prefix of one's
own, build, `meson install`; then the installed txlgen runs from another
directory with its installed default model, and a C program built with
nothing but `pkg-config --cflags --libs txl` runs against the installed
libtxl, without LD_LIBRARY_PATH.

Needs $MESON_SOURCE_ROOT (meson test sets it in tests/meson.build), meson,
ninja, pkg-config and a C compiler.  Run:
MESON_SOURCE_ROOT=. /usr/bin/python3 tests/test_install.py
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("MESON_SOURCE_ROOT", os.path.dirname(HERE))

PROGRAM = r"""
#include <stdio.h>
#include <txl.h>

int
main(int argc, char **argv)
{
	struct txl_model *m;
	int32_t ids[64];
	int n;

	if (argc < 2 || txl_model_load(argv[1], &m) != TXL_OK) {
		fprintf(stderr, "%s\n", txl_last_error());
		return 1;
	}
	n = txl_tokenize(m, "Hello world", 11, ids, 64);
	printf("libtxl %s: %d layers, %d tokens\n", txl_version(),
	       txl_model_hparams(m)->n_layer, n);
	txl_model_free(m);
	return n > 0 ? 0 : 1;
}
"""


def clean_env():
    e = dict(os.environ)
    for k in ("LD_LIBRARY_PATH", "TXLGEN_MODEL", "PKG_CONFIG_PATH"):
        e.pop(k, None)
    return e


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("meson", "ninja", "pkg-config", "cc"):
            if not shutil.which(tool):
                raise unittest.SkipTest(f"{tool} is not installed")
        cls.tmp = tempfile.mkdtemp(prefix="txlgen-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        build = os.path.join(cls.tmp, "build")
        env = clean_env()

        def step(*argv):
            p = subprocess.run(argv, capture_output=True, env=env,
                               timeout=900)
            if p.returncode:
                raise RuntimeError(f"{argv}: {p.stdout.decode()[-2000:]}"
                                   f"{p.stderr.decode()[-2000:]}")
        step("meson", "setup", build, SOURCE, "--prefix", cls.prefix)
        # what an installation needs; the tests and benchmarks are not
        step("ninja", "-C", build, "cmd/txlgen")
        step("meson", "install", "-C", build, "--no-rebuild", "--quiet")
        libdir = subprocess.run(
            ["meson", "introspect", "--buildoptions", build],
            capture_output=True, text=True, check=True, timeout=60).stdout

        cls.libdir = os.path.join(cls.prefix, next(
            o["value"] for o in json.loads(libdir) if o["name"] == "libdir"))
        cls.elsewhere = os.path.join(cls.tmp, "elsewhere")
        os.mkdir(cls.elsewhere)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_layout(self):
        for path in ("bin/txlgen", "include/txl/txl.h",
                     "share/man/man1/txlgen.1", "share/man/man5/txlgen-model.5",
                     "share/bash-completion/completions/txlgen"):
            self.assertTrue(os.path.exists(os.path.join(self.prefix, path)),
                            path)
        self.assertFalse(os.path.exists(os.path.join(self.prefix, "include",
                                                     "txl.h")))
        self.assertTrue(os.path.exists(os.path.join(self.libdir, "pkgconfig",
                                                    "txl.pc")))

    def test_installed_txlgen_runs_with_its_model(self):
        txlgen = os.path.join(self.prefix, "bin", "txlgen")
        p = subprocess.run([txlgen, "--version"], capture_output=True,
                           text=True, cwd=self.elsewhere, env=clean_env(),
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("txlgen "))
        model = os.path.join(self.prefix, "share", "txlgen", "sotu.bin")
        if not os.path.exists(os.path.join(SOURCE, "models", "sotu.bin")):
            self.skipTest("models/sotu.bin does not ship in this tree")
        self.assertTrue(os.path.exists(model))
        # the installed model, not the source tree's
        p = subprocess.run([txlgen, "--info", "--json"], capture_output=True,
                           text=True, cwd=self.elsewhere, env=clean_env(),
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)

        self.assertEqual(os.path.realpath(json.loads(p.stdout)["model"]),
                         os.path.realpath(model))
        p = subprocess.run([txlgen, "-p", "Fellow citizens", "-n", "8",
                            "--seed", "1"], capture_output=True,
                           cwd=self.elsewhere, env=clean_env(), timeout=60)
        self.assertEqual((p.returncode, p.stderr), (0, b""))
        self.assertTrue(p.stdout.strip())

    def test_installed_txlgen_get_finds_its_converter(self):
        # txlgen-get runs the convert.py installed beside it in
        # libexec/txlgen, found from its own directory
        get = os.path.join(self.prefix, "bin", "txlgen-get")
        env = clean_env()
        env.pop("TXLGEN_CONVERT", None)
        p = subprocess.run([get, "--check"], capture_output=True, text=True,
                           cwd=self.elsewhere, env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        conv = re.match(r"converter: (\S+) ", p.stdout).group(1)
        self.assertEqual(os.path.realpath(conv), os.path.realpath(
            os.path.join(self.prefix, "libexec", "txlgen", "convert.py")))
        self.assertIn("transformer-xl: yes", p.stdout)
        self.assertTrue(os.path.islink(os.path.join(
            self.prefix, "share", "bash-completion", "completions",
            "txlgen-get")))

    def test_c_program_with_pkg_config(self):
        env = clean_env()
        env["PKG_CONFIG_PATH"] = os.path.join(self.libdir, "pkgconfig")
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "txl"],
                               capture_output=True, text=True, env=env,
                               check=True, timeout=60).stdout.split()
        src = os.path.join(self.elsewhere, "prog.c")
        exe = os.path.join(self.elsewhere, "prog")
        with open(src, "w") as f:
            f.write(PROGRAM)
        p = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", src, "-o",
                            exe] + flags, capture_output=True, text=True,
                           env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        model = os.environ.get("TXLGEN_TEST_MODEL") or os.path.join(
            self.prefix, "share", "txlgen", "sotu.bin")
        if not os.path.exists(model):
            self.skipTest("no model to load")
        p = subprocess.run([exe, model], capture_output=True, text=True,
                           cwd=self.elsewhere, env=clean_env(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"^libtxl \d+\.\d+\.\d+: \d+ layers, "
                         r"[1-9]\d* tokens")


if __name__ == "__main__":
    unittest.main(verbosity=2)
