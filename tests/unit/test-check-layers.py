#!/usr/bin/python3
"""check-layers.py fails where it should: on a copy of the tree with a
cycle between two rooms of one layer, with a low room reaching up, and
with an import cycle in the Python package; in the C code outside lib/,
with an include cycle, a call cycle, server/ including a header of cmd/
and core/ including one from above; and passes on the copy as it is (so
that each failure is the injection's), also with a static function of
the name of another file's (no call of it).

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


def copy_c_outside_lib(tree):
    """The C files outside lib/ (core/, cmd/, server/, the tests' and
    bench's helpers) into @p tree, without build trees."""
    for top in ("core", "cmd", "server", "tests", "bench", "tools"):
        for d, subdirs, files in os.walk(os.path.join(ROOT, top)):
            if "meson-private" in subdirs:
                subdirs[:] = []
                continue
            subdirs[:] = [s for s in subdirs if s != "node_modules"]
            rel = os.path.relpath(d, ROOT)
            for n in files:
                if n.endswith((".c", ".cc", ".h")):
                    os.makedirs(os.path.join(tree, rel), exist_ok=True)
                    shutil.copy(os.path.join(d, n),
                                os.path.join(tree, rel, n))


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
        ("a C include cycle", "core/utf8.h", '\n#include "text.h"\n',
         "an include cycle between the C rooms"),
        # progress.c and suggest.c include nothing of each other: calls
        # alone make the cycle
        ("a C call cycle", "core/progress.c",
         "\nstatic void f(void) { suggest_closest(0, 0, 0); }\n"
         "\n//core/suggest.c\nstatic void g(void) { now_s(); }\n",
         "a call cycle between the C rooms"),
        ("a server/ -> cmd/ include", "server/job.c", '\n#include "repl.h"\n',
         "never use each other"),
        ("a cmd/ -> server/ call", "cmd/info.c",
         "\nstatic void f(void) { reqlog_write(0, 0, 0, 0, 0, 0, 0); }\n",
         "never use each other"),
        ("an upward include in core/", "core/progress.c",
         '\n#include "lineio.h"\n', "reaches up"),
        # text.h includes utf8.h: a call of text.c's strbuf_add() from
        # utf8.c would close a cycle, a static one of its own does not
        ("a static function of another file's name", "core/utf8.c",
         "\nstatic void strbuf_add(void) { }\n"
         "static void f(void) { strbuf_add(); }\n", None),
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
            copy_c_outside_lib(tree)
            clean = run(tree)
            if clean.returncode != 0:
                print(f"FAIL: the unchanged copy fails:\n{clean.stdout}")
                return 1
            # "//FILE" starts what goes into another file
            for k, part in enumerate(line.split("\n//")):
                if k:
                    path, part = part.split("\n", 1)
                inject(tree, path, part)
            r = run(tree)
            if expect is None:
                if r.returncode != 0:
                    print(f"FAIL: {name} ({path}) reported:\n{r.stdout}")
                    failures += 1
                else:
                    print(f"ok: {name} is no use")
            elif r.returncode != 1 or expect not in r.stdout:
                print(f"FAIL: {name} ({path}) not found: exit "
                      f"{r.returncode}\n{r.stdout}{r.stderr}")
                failures += 1
            else:
                found = [ln for ln in r.stdout.splitlines()
                         if ln.startswith("FAIL")]
                print(f"ok: {name} found: {found[0]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
