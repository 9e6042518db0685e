#!/usr/bin/python3
"""The installation, as a user makes it: configure with a prefix of one's
own, build, `meson install`; then the installed txlgen runs from another
directory with its installed default model, and a C program built with
nothing but `pkg-config --cflags --libs txl` runs against the installed
libtxl, without LD_LIBRARY_PATH, and without the -dev packages of
libtxl's own dependencies: `pkg-config --cflags txl` names libtxl's
include directory alone.

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
	/* enum txl_dtype, from the header txl.h includes */
	printf("%s is %d of %d types\n", txl_dtype_name(TXL_Q4_K),
	       (int)TXL_Q4_K, (int)TXL_N_DTYPES);
	txl_model_free(m);
	return n > 0 ? 0 : 1;
}
"""


def clean_env():
    e = dict(os.environ)
    for k in ("LD_LIBRARY_PATH", "TXLGEN_MODEL", "PKG_CONFIG_PATH"):
        e.pop(k, None)
    return e


BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"


class Setup(unittest.TestCase):
    """./setup.sh installs what each use needs: the whole set by default,
    txlgen's build and run time alone with --runtime.  Run with stand-ins
    for dpkg-query (nothing installed), apt-get, sudo, meson and ninja
    that record what they are asked."""

    def setup_sh(self, *args):
        tmp = tempfile.mkdtemp(prefix="txlgen-setup-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        log = os.path.join(tmp, "log")
        for tool, body in (("dpkg-query", "exit 0"),
                           ("apt-get", 'echo "apt-get $*" >> "$LOG"'),
                           ("sudo", '"$@"'),
                           ("meson", 'echo "meson $*" >> "$LOG"'),
                           ("ninja", 'echo "ninja $*" >> "$LOG"')):
            path = os.path.join(tmp, tool)
            with open(path, "w") as f:
                f.write(f"#!/bin/sh\n{body}\n")
            os.chmod(path, 0o755)
        env = dict(clean_env(), LOG=log,
                   PATH=tmp + ":" + os.environ["PATH"])
        p = subprocess.run(["sh", os.path.join(SOURCE, "setup.sh"), *args],
                           capture_output=True, text=True, env=env,
                           timeout=60)
        calls = []
        if os.path.exists(log):
            with open(log) as f:
                calls = f.read().splitlines()
        return p, calls

    def installed(self, calls):
        line = next(c for c in calls if c.startswith("apt-get install"))
        return set(line.split()) - {"apt-get", "install", "-y", "-q",
                                    "--no-install-recommends"}

    def test_runtime_installs_no_torch(self):
        p, calls = self.setup_sh("--runtime")
        self.assertEqual(p.returncode, 0, p.stderr)
        pkgs = self.installed(calls)
        self.assertTrue({"libopenblas-dev", "libsentencepiece-dev",
                         "libcjson-dev", "libedit-dev", "meson", "ninja-build",
                         "bash-completion", "python3-numpy",
                         "python3-sentencepiece"} <= pkgs, pkgs)
        self.assertNotIn("python3-torch", pkgs)
        self.assertIn("ninja -C build", calls)

    def test_default_installs_everything(self):
        p, calls = self.setup_sh()
        self.assertEqual(p.returncode, 0, p.stderr)
        pkgs = self.installed(calls)
        self.assertTrue({"python3-torch", "python3-sentencepiece",
                         "sentencepiece", "bash-completion",
                         "libopenblas-dev"} <= pkgs, pkgs)
        self.assertIn("ninja -C build", calls)
        # and says how to run it and have its completion
        self.assertIn("txlgen.bash-completion", p.stdout)

    def test_unknown_argument(self):
        p, calls = self.setup_sh("--bogus")
        self.assertEqual((p.returncode, calls), (2, []))
        self.assertIn("usage:", p.stderr)


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
        step("ninja", "-C", build, "cmd/txlgen", "server/txlgen-server")
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
        for path in ("bin/txlgen", "bin/txlgen-server", "include/txl/txl.h",
                     "include/txl/txl-dtype-enum.h",
                     "share/man/man1/txlgen.1",
                     "share/man/man1/txlgen-server.1",
                     "share/man/man5/txlgen-model.5",
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

    def test_man_page_names_the_prefix(self):
        # the installed txlgen(1) names this installation's paths, not
        # the default prefix's, and still renders without warnings
        page = os.path.join(self.prefix, "share", "man", "man1", "txlgen.1")
        with open(page) as f:
            text = f.read().replace("\\-", "-")
        for path in (os.path.join("share", "txlgen", "sotu.bin"),
                     os.path.join("share", "bash-completion", "completions",
                                  "txlgen")):
            self.assertTrue(os.path.join(self.prefix, path) in text,
                            f"{self.prefix}/{path} not in {page}")
            self.assertFalse("/usr/local/" + path in text,
                             f"/usr/local/{path} in {page}")
        if shutil.which("man"):
            # (wide: a temporary prefix makes paths longer than a line)
            p = subprocess.run(["man", "--warnings", "-l", page],
                               capture_output=True, timeout=60,
                               env=dict(clean_env(), MANWIDTH="200"))
            self.assertEqual((p.returncode, p.stderr), (0, b""))

    def test_bash_completion_finds_the_installed_file(self):
        # bash-completion loads completions from the share/ of the
        # prefixes in XDG_DATA_DIRS (/usr/local and /usr by default)
        if not os.path.exists(BASH_COMPLETION):
            self.skipTest("bash-completion is not installed")
        script = (f". {BASH_COMPLETION}\n"
                  "__load_completion txlgen && complete -p txlgen\n")
        env = dict(clean_env(), XDG_DATA_DIRS=os.path.join(self.prefix,
                                                           "share"),
                   HOME=self.elsewhere)
        env.pop("XDG_DATA_HOME", None)
        p = subprocess.run(["bash", "-c", script], capture_output=True,
                           text=True, env=env, timeout=60)
        self.assertEqual(p.stdout.strip(), "complete -F _txlgen txlgen",
                         p.stderr)

    def test_models_by_name(self):
        # the installed default model is found by name and listed
        if not os.path.exists(os.path.join(SOURCE, "models", "sotu.bin")):
            self.skipTest("models/sotu.bin does not ship in this tree")
        txlgen = os.path.join(self.prefix, "bin", "txlgen")
        env = dict(clean_env(), HOME=self.elsewhere)
        env.pop("XDG_DATA_HOME", None)
        env.pop("TXLGEN_MODEL_PATH", None)
        p = subprocess.run([txlgen, "--list-models", "--json"],
                           capture_output=True, text=True, env=env,
                           cwd=self.elsewhere, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [json.loads(line) for line in p.stdout.splitlines()]
        share = os.path.join(self.prefix, "share", "txlgen")
        model = os.path.join(share, "sotu.bin")
        # the two that ship, by name
        self.assertEqual([(r["name"], os.path.realpath(r["path"]))
                          for r in rows],
                         [(n, os.path.realpath(os.path.join(share, n + ".bin")))
                          for n in ("poetry", "sotu")])
        # -m NAME, and the message that lists where it looked
        p = subprocess.run([txlgen, "-m", "sotu", "--info", "--json"],
                           capture_output=True, text=True, env=env,
                           cwd=self.elsewhere, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(os.path.realpath(json.loads(p.stdout)["model"]),
                         os.path.realpath(model))
        p = subprocess.run([txlgen, "-m", "nothere", "-p", "x"],
                           capture_output=True, text=True, env=env,
                           cwd=self.elsewhere, timeout=60)
        self.assertEqual(p.returncode, 3)
        self.assertIn(os.path.join(self.elsewhere, ".local", "share",
                                   "txlgen", "models"), p.stderr)
        self.assertIn(os.path.realpath(os.path.dirname(model)), p.stderr)
        self.assertNotIn(os.path.join(SOURCE, "models"), p.stderr)

    def test_python_finds_the_installation(self):
        # from txlgen import Model with the installed package on
        # PYTHONPATH: the installed libtxl and default model, found from
        # the package's own place, write what the installed txlgen writes
        if not os.path.exists(os.path.join(SOURCE, "models", "sotu.bin")):
            self.skipTest("models/sotu.bin does not ship in this tree")
        env = dict(clean_env(), HOME=self.elsewhere,
                   PYTHONPATH=os.path.join(self.prefix, "libexec", "txlgen"))
        for k in ("XDG_DATA_HOME", "TXLGEN_MODEL_PATH", "TXLGEN_LIBTXL"):
            env.pop(k, None)
        code = ("import sys\n"
                "from txlgen import Model, api\n"
                "m = Model(n_threads=1)\n"
                "print(api.library_path()); print(m.path)\n"
                "sys.stdout.write(m.generate('Fellow citizens', n=8, seed=1))\n")
        p = subprocess.run(["/usr/bin/python3", "-c", code],
                           capture_output=True, text=True, env=env,
                           cwd=self.elsewhere, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        lib, model, text = p.stdout.split("\n", 2)
        self.assertEqual(os.path.realpath(lib), os.path.realpath(
            os.path.join(self.libdir, "libtxl.so.1")))
        self.assertEqual(os.path.realpath(model), os.path.realpath(
            os.path.join(self.prefix, "share", "txlgen", "sotu.bin")))
        cli = subprocess.run([os.path.join(self.prefix, "bin", "txlgen"),
                              "-t", "1", "-p", "Fellow citizens", "-n", "8",
                              "--seed", "1", "--no-final-newline"],
                             capture_output=True, text=True, env=env,
                             cwd=self.elsewhere, timeout=60)
        self.assertEqual((cli.returncode, cli.stdout), (0, text))

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

    def test_installed_txlfile_restores_a_model(self):
        # txlfile.py is installed beside convert.py, with the package
        tool = os.path.join(self.prefix, "libexec", "txlgen", "txlfile.py")
        self.assertTrue(os.access(tool, os.X_OK), tool)
        out = os.path.join(self.elsewhere, "sotu-q8.bin")
        p = subprocess.run(["/usr/bin/python3", tool, "--dtype", "Q8_0",
                            os.path.join(self.prefix, "share", "txlgen",
                                         "sotu.bin"), out],
                           capture_output=True, text=True, env=clean_env(),
                           cwd=self.elsewhere, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, f"txlfile.py: wrote {out} ("
                         f"{os.path.getsize(out) / 1e6:.1f} MB, Q8_0)\n")
        cli = subprocess.run([os.path.join(self.prefix, "bin", "txlgen"),
                              "-m", out, "-t", "1", "-p", "We", "-n", "4"],
                             capture_output=True, text=True, env=clean_env(),
                             cwd=self.elsewhere, timeout=60)
        self.assertEqual(cli.returncode, 0, cli.stderr)

    def pkg_config(self, *args):
        """pkg-config of the installation alone: PKG_CONFIG_LIBDIR hides
        the system's .pc files, as on a machine without the -dev packages
        of libtxl's own dependencies (OpenBLAS, SentencePiece, cJSON)."""
        env = clean_env()
        env["PKG_CONFIG_LIBDIR"] = os.path.join(self.libdir, "pkgconfig")
        p = subprocess.run(["pkg-config", *args, "txl"], capture_output=True,
                           text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.split()

    def test_pkg_config_needs_no_dependency(self):
        # txl.h includes standard headers only: the include directory of
        # libtxl and nothing else (no OpenBLAS, cJSON or SentencePiece)
        self.assertEqual(self.pkg_config("--cflags"),
                         ["-I" + os.path.join(self.prefix, "include", "txl")])
        self.assertEqual([f for f in self.pkg_config("--libs")
                          if not f.startswith("-Wl,-rpath,")],
                         ["-L" + self.libdir, "-ltxl"])
        # what a static link needs, as Libs.private
        static = self.pkg_config("--libs", "--static")
        for lib in ("-lopenblas", "-lsentencepiece", "-lcjson"):
            self.assertIn(lib, static)
        self.assertEqual(self.pkg_config("--modversion"),
                         [os.path.basename(os.path.realpath(os.path.join(
                             self.libdir, "libtxl.so")))[len("libtxl.so."):]])

    def test_soname(self):
        # the library's own version, its major the soname's
        lib = os.path.realpath(os.path.join(self.libdir, "libtxl.so"))
        self.assertRegex(os.path.basename(lib), r"^libtxl\.so\.\d+\.\d+\.\d+$")
        major = os.path.basename(lib).split(".")[2]
        self.assertEqual(os.path.realpath(os.path.join(
            self.libdir, "libtxl.so." + major)), lib)
        if shutil.which("objdump"):
            p = subprocess.run(["objdump", "-p", lib], capture_output=True,
                               text=True, check=True, timeout=60)
            self.assertIn("SONAME               libtxl.so." + major, p.stdout)

    def test_c_program_with_pkg_config(self):
        flags = self.pkg_config("--cflags", "--libs")
        src = os.path.join(self.elsewhere, "prog.c")
        exe = os.path.join(self.elsewhere, "prog")
        with open(src, "w") as f:
            f.write(PROGRAM)
        p = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", src, "-o",
                            exe] + flags, capture_output=True, text=True,
                           env=clean_env(), timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        model = os.environ.get("TXLGEN_TEST_MODEL") or os.path.join(
            self.prefix, "share", "txlgen", "sotu.bin")
        if not os.path.exists(model):
            self.skipTest("no model to load")
        p = subprocess.run([exe, model], capture_output=True, text=True,
                           cwd=self.elsewhere, env=clean_env(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"^libtxl \d+\.\d+\.\d+: \d+ layers, "
                         r"[1-9]\d* tokens\n")
        # a type's number never changes (the ABI)
        m = re.search(r"^Q4_K is 6 of (\d+) types$", p.stdout, re.M)
        self.assertIsNotNone(m, p.stdout)
        self.assertGreaterEqual(int(m.group(1)), 7)


if __name__ == "__main__":
    unittest.main(verbosity=2)
