#!/usr/bin/python3
"""check-layers.py fails where it should: on a copy of the tree with a
cycle between two rooms of one layer, with a low room reaching up, and
with an import cycle in the Python package; and passes on the copy as it
is (so that each failure is the injection's).

Usage: test-check-layers.py SOURCE_ROOT
"""

import os
import shutil
import subprocess
import sys
import tempfile

ROOT = sys.argv[1]
CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "check-layers.py")


def run(tree):
    return subprocess.run([sys.executable, CHECK, tree], capture_output=True,
                          text=True)


def inject(tree, path, line):
    with open(os.path.join(tree, path), "a", encoding="utf-8") as f:
        f.write(line)


def main():
    failures = 0
    cases = [
        ("a call cycle", "lib/kernels/txl-types.c",
         "\nstatic void f(void) { txl_blas_info(); }\n",
         "a cycle between the rooms"),
        ("a call reaching up", "lib/base/txl-alloc.c",
         "\nstatic void f(void) { txl_session_params_default(); }\n",
         "reaches up"),
        ("a room reaching up", "lib/base/txl-log.c",
         '\n#include "txl-session.h"\n', "reaches up"),
        ("an include cycle", "lib/kernels/txl-types.h",
         '\n#include "txl-products.h"\n', "a cycle between the rooms"),
        ("an import cycle", "models/txlgen/errors.py",
         "\nfrom . import hparams\n", "a cycle between the modules"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, line, expect in cases:
            tree = os.path.join(tmp, "tree")
            shutil.rmtree(tree, ignore_errors=True)
            os.makedirs(os.path.join(tree, "models"))
            shutil.copytree(os.path.join(ROOT, "lib"),
                            os.path.join(tree, "lib"))
            shutil.copytree(os.path.join(ROOT, "models", "txlgen"),
                            os.path.join(tree, "models", "txlgen"))
            clean = run(tree)
            if clean.returncode != 0:
                print(f"FAIL: the unchanged copy fails:\n{clean.stdout}")
                return 1
            inject(tree, path, line)
            r = run(tree)
            if r.returncode != 1 or expect not in r.stdout:
                print(f"FAIL: {name} ({path}) not found: exit "
                      f"{r.returncode}\n{r.stdout}{r.stderr}")
                failures += 1
            else:
                print(f"ok: {name} found: {r.stdout.splitlines()[0]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
