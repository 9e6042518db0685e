#!/usr/bin/python3
"""check-layers.py fails where it should: on a copy of the tree with a
cycle between two rooms of one layer, with a low room reaching up, and
with an import cycle among the Python modules made by each form of
import (plain, dotted with `as`, from-import with `as`, relative ones
of one and two dots, a parenthesised list, inside a function or a try
block, __import__, between scripts of tools/ and of bench/); in the C
code outside lib/, with an include cycle, a call cycle, server/
including a header of cmd/ and core/ including one from above; and
passes on the copy as it is (so that each failure is the injection's),
also with a static function of the name of another file's (no call of
it).

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
    path = os.path.join(tree, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)


# Python: errors.py is imported by hparams.py (from .errors import ...),
# so any import of hparams from errors closes a cycle.
PY_CYCLES = [
    ("a relative import", [("models/txlgen/errors.py",
                            "\nfrom . import hparams\n")]),
    ("a relative import with as", [("models/txlgen/errors.py",
                                    "\nfrom . import hparams as h\n")]),
    ("a from-import of a module", [("models/txlgen/errors.py",
                                    "\nfrom .hparams import TxlConfig\n")]),
    ("a parenthesised list", [("models/txlgen/errors.py",
                               "\nfrom .hparams import (TxlConfig,\n"
                               "                      is_int)\n")]),
    ("a dotted import with as, in a function",
     [("models/txlgen/errors.py",
       "\ndef f():\n    import txlgen.hparams as h\n    return h\n")]),
    ("an absolute from-import with as, in a try block",
     [("models/txlgen/errors.py",
       "\ntry:\n    from txlgen import hparams as h\n"
       "except ImportError:\n    h = None\n")]),
    ("__import__", [("models/txlgen/errors.py",
                     "\nh = __import__('txlgen.hparams')\n")]),
    ("two dots from a subpackage",
     [("models/txlgen/sub/__init__.py", ""),
      ("models/txlgen/sub/low.py", "from .. import hparams\n"),
      ("models/txlgen/errors.py", "\nfrom .sub import low as lw\n")]),
    ("scripts of tools/", [("tools/srctree.py",
                            "\ndef f():\n    import check_original\n")]),
    ("scripts of bench/", [("bench/machine.py",
                            "\nimport bench as b\n")]),
]


def copy_tree(tree):
    """lib/ whole, the Python files of the folders check-layers reads,
    and the C files outside lib/."""
    def others(folder, names):
        return [n for n in names if not n.endswith(".py") and
                not os.path.isdir(os.path.join(folder, n))]
    shutil.copytree(os.path.join(ROOT, "lib"), os.path.join(tree, "lib"))
    for top in ("models", "tools", "tests", "bench"):
        shutil.copytree(os.path.join(ROOT, top), os.path.join(tree, top),
                        ignore=others, dirs_exist_ok=True)
    copy_c_outside_lib(tree)


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
        # "//FILE" starts what goes into another file
        cases = [(name, [(path, line.split("\n//")[0])] +
                  [tuple(part.split("\n", 1))
                   for part in line.split("\n//")[1:]], expect)
                 for name, path, line, expect in cases]
        cases += [(f"an import cycle by {name}", edits,
                   "a cycle between the Python modules")
                  for name, edits in PY_CYCLES]
        # one copy, which passes; each case's edits are undone after it
        tree = os.path.join(tmp, "tree")
        copy_tree(tree)
        clean = run(tree)
        if clean.returncode != 0:
            print(f"FAIL: the unchanged copy fails:\n{clean.stdout}")
            return 1
        for name, edits, expect in cases:
            saved = {}
            for path, _ in edits:
                full = os.path.join(tree, path)
                if path not in saved:
                    saved[path] = open(full, encoding="utf-8").read() \
                        if os.path.exists(full) else None
            created = {os.path.dirname(p) for p in saved
                       if not os.path.isdir(os.path.join(tree,
                                                         os.path.dirname(p)))}
            for path, line in edits:
                inject(tree, path, line)
            r = run(tree)
            for path, text in saved.items():
                full = os.path.join(tree, path)
                if text is None:
                    os.remove(full)
                else:
                    with open(full, "w", encoding="utf-8") as f:
                        f.write(text)
            for folder in created:
                shutil.rmtree(os.path.join(tree, folder))
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
        # every edit undone: the copy passes again
        if run(tree).returncode != 0:
            print("FAIL: the copy fails after its edits were undone")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
