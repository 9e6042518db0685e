#!/usr/bin/python3
"""The layering of libtxl and of the Python package models/txlgen.

libtxl: each job is a room, a source file and the header of the same
name (a kernel file of one instruction set, txl-kernels-avx2.c, and the
headers such files share belong to the room of their stem, txl-kernels).  Rooms live in the folders of lib/,
one folder a layer, listed below from the bottom up.  A room depends on
another when it includes its header or calls a function the other
defines.  The check fails on

  - a cycle between rooms (A uses B, B uses A, directly or around), and
  - a room that reaches up: a lower layer using a room of a higher one.

The public header (the folder include/) is the ABI that every layer may
see: it is no room.

The C code outside lib/: the programs' rooms are core/ (what txlgen and
txlgen-server share) below cmd/ (txlgen) and server/ (txlgen-server),
which never use each other; a room is again a source file and the header
of its stem, in its folder, and the rest (tests' and bench's C helpers)
are harnesses that may use any room but no program room uses.  A use is
an include, or a call of a function that another file defines, not
static (a static function of the same name in two files is no call).
The check fails on an include cycle, a call cycle, a cycle of both, and
on a room that reaches up or across.

Python: each module of models/, tools/, tests/ and bench/ (the package
models/txlgen and the scripts) is a room, and an import of any form
(relative, with `as`, inside a function or a try block) is a use; the
check fails on a cycle.

Usage: check-layers.py SOURCE_ROOT
"""

import ast
import collections
import os
import re
import sys

# lib/'s folders from the bottom up: a room may use its own layer's rooms
# and lower ones only.
LAYERS = ["base", "kernels", "model", "compute", "api"]
PUBLIC = "include"
ISA_SUFFIX = re.compile(r"-(avx2|avx512|avx512bf16|avxvnni|x86|simd|q4|q16)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# a definition: a line that starts with the name at column 0 (the style
# of lib/: return type on the line before), not static
DEFINITION = re.compile(r"^(txl_[a-z0-9_]+)\s*\(", re.M)
CALL = re.compile(r"\b(txl_[a-z0-9_]+)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def room_of(path):
    stem = os.path.splitext(os.path.basename(path))[0]
    return ISA_SUFFIX.sub("", stem)


def lib_rooms(lib):
    """room -> (layer, [files]); file name -> room."""
    rooms, by_name = {}, {}
    for layer in os.listdir(lib):
        folder = os.path.join(lib, layer)
        if not os.path.isdir(folder) or layer == PUBLIC:
            continue
        if layer not in LAYERS:
            sys.exit(f"check-layers: {folder}: a folder that is no layer "
                     f"(layers: {', '.join(LAYERS)}); add it to LAYERS")
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h", ".cc")):
                continue
            room = room_of(name)
            have = rooms.setdefault(room, (layer, []))
            if have[0] != layer:
                sys.exit(f"check-layers: room {room} is split between "
                         f"{have[0]}/ and {layer}/")
            have[1].append(os.path.join(folder, name))
            by_name[name] = room
    return rooms, by_name


def lib_edges(rooms, by_name):
    """(from room, to room) -> a reason, for every use between rooms."""
    texts = {f: COMMENT.sub(" ", open(f, encoding="utf-8").read())
             for _, files in rooms.values() for f in files}
    defined = {}
    for f, text in texts.items():
        if f.endswith((".c", ".cc")):
            for name in DEFINITION.findall(text):
                defined[name] = room_of(f)
    edges = {}
    for f, text in texts.items():
        src = room_of(f)
        for inc in INCLUDE.findall(text):
            dst = by_name.get(os.path.basename(inc))
            if dst and dst != src:
                edges.setdefault((src, dst), f"{f} includes {inc}")
        if f.endswith((".c", ".cc")):
            for name in CALL.findall(text):
                dst = defined.get(name)
                if dst and dst != src:
                    edges.setdefault((src, dst), f"{f} calls {name}()")
    return edges


# The Python modules: the package in models/ and the scripts of these
# folders (and their subfolders), each script's folder first on its path
# (Python puts it there), then models/ (srctree.py puts it there).
PY_FOLDERS = ["models", "tools", "tests", "bench"]
PY_PATH = "models"


def python_modules(root):
    """{dotted name as its importer sees it: path} per search folder, and
    the module name of every file: (by_folder, name_of).  A folder with
    __init__.py is a package, its files pkg.mod."""
    by_folder, name_of = collections.defaultdict(dict), {}
    for top in PY_FOLDERS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs
                             if d != "__pycache__" and not d.startswith("."))
            if os.path.exists(os.path.join(folder, "__init__.py")):
                continue            # a package: named from its parent
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    by_folder[folder][name[:-3]] = path
            for d in dirs:
                _python_package(os.path.join(folder, d), d,
                                by_folder[folder])
    for mods in by_folder.values():
        for dotted, path in mods.items():
            name_of.setdefault(path, dotted)
    return by_folder, name_of


def _python_package(folder, dotted, mods):
    if not os.path.exists(os.path.join(folder, "__init__.py")):
        return
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name == "__init__.py":
            mods[dotted] = path
        elif name.endswith(".py"):
            mods[f"{dotted}.{name[:-3]}"] = path
        elif os.path.isdir(path) and name != "__pycache__":
            _python_package(path, f"{dotted}.{name}", mods)


def python_imports(path):
    """[(level, module or None, [names])] of every import statement of
    the file, wherever it is (a function, a try block, a class): `import
    a.b as c` is (0, "a.b", []), `from ..m import (x, y as z)` (2, "m",
    ["x", "y"]); __import__("m") and importlib.import_module("m") with a
    literal name count as `import m`."""
    try:
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
    except SyntaxError as e:
        sys.exit(f"check-layers: {path}:{e.lineno}: {e.msg}")
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(0, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module,
                        [a.name for a in node.names]))
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str) and \
                ast.unparse(node.func) in ("__import__",
                                           "importlib.import_module"):
            out.append((0, node.args[0].value, []))
    return out


def python_edges(root):
    """(module, module) -> reason, for every import of one of the tree's
    Python modules by another; and the modules."""
    by_folder, name_of = python_modules(root)
    models = by_folder.get(os.path.join(root, PY_PATH), {})
    edges = {}
    for folder, mods in sorted(by_folder.items()):
        seen = dict(models, **mods)     # the script's folder first
        for dotted, path in sorted(mods.items()):
            src = os.path.relpath(path, root)
            pkg = dotted if path.endswith("__init__.py") else \
                dotted.rpartition(".")[0]
            for level, module, names in python_imports(path):
                if level:
                    base = pkg.split(".") if pkg else []
                    if level - 1 > len(base):
                        continue        # beyond the top: Python refuses it
                    base = base[:len(base) - (level - 1)]
                    module = ".".join(base + ([module] if module else []))
                targets = [f"{module}.{n}" for n in names
                           if f"{module}.{n}" in seen]
                if module in seen and (len(targets) < len(names) or
                                       not names):
                    targets.append(module)
                for t in targets:
                    dst = os.path.relpath(seen[t], root)
                    # a package runs before its modules: importing it
                    # from one of them (from . import name) is no use
                    if dst != src and not (pkg + ".").startswith(t + "."):
                        edges.setdefault((src, dst), f"{src} imports {t}")
    return edges, {os.path.relpath(p, root) for p in name_of}


def check_python(root):
    """Print each import cycle among the Python modules; (failed, number
    of modules)."""
    edges, mods = python_edges(root)
    return report_cycles("Python modules", cycles(mods, edges),
                         edges), len(mods)


def cycles(nodes, edges):
    """The strongly connected components of more than one node."""
    succ = collections.defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):                       # Tarjan, recursive: rooms are few
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def report_cycles(kind, comps, edges):
    for comp in comps:
        print(f"FAIL: a cycle between the {kind} {', '.join(comp)}:")
        for (a, b), why in sorted(edges.items()):
            if a in comp and b in comp:
                print(f"  {a} -> {b}: {why}")
    return bool(comps)


# ---- the C code outside lib/: core/ below cmd/ and server/ ----

# the programs' folders and their layers: a room may use rooms of its own
# folder and of lower layers only (cmd/ and server/, one layer, never use
# each other); the harnesses' folders are above them all
PROGRAM_LAYERS = {"core": 0, "cmd": 1, "server": 1}
HARNESS_TOPS = ["tests", "bench", "tools"]
C_SOURCE = (".c", ".cc")
C_FILES = C_SOURCE + (".h",)
# comments, and string and character literals (kept: includes are read
# from the text with comments removed, calls from the text without both)
C_TOKENS = re.compile(r'(/\*.*?\*/|//[^\n]*)|("(?:\\.|[^"\\\n])*"'
                      r"|'(?:\\.|[^'\\\n])*')", re.S)
# a function's name at column 0 (its return type on the line before, or
# before it on the same line), then its parameters: a definition when a
# body follows them
C_HEAD = re.compile(r"^((?:[A-Za-z_]\w*[\s*]+)*?)([A-Za-z_]\w*)\s*\(", re.M)
C_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
C_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do",
              "defined", "_Alignof", "_Static_assert", "alignof"}


def c_strip(text, strings):
    """@p text without comments (and without the contents of its string
    and character literals with @p strings)."""
    def sub(m):
        if m.group(1):
            return "\n" * m.group(1).count("\n") or " "
        return '""' if strings else m.group(2)
    return C_TOKENS.sub(sub, text)


def c_folders(root):
    """The folders outside lib/ that hold C, relative to @p root: the
    programs' and the harnesses' (build trees, with meson-private/ in
    them, and npm's node_modules/ left out)."""
    out = {}
    for top in sorted(PROGRAM_LAYERS) + HARNESS_TOPS:
        for d, subdirs, files in os.walk(os.path.join(root, top)):
            if "meson-private" in subdirs:
                subdirs[:] = []
                continue
            subdirs[:] = [s for s in subdirs if s != "node_modules"
                          and not s.startswith(".")]
            names = sorted(n for n in files if n.endswith(C_FILES))
            if names:
                out[os.path.relpath(d, root)] = names
    return out


def c_rooms(folders):
    """(folder, file name) -> its room, "folder/stem": a header of a
    room's part (engine-model.h beside engine.c) is the room's."""
    out = {}
    for d, names in folders.items():
        sources = {os.path.splitext(n)[0] for n in names
                   if n.endswith(C_SOURCE)}
        for n in names:
            stem = os.path.splitext(n)[0]
            parts = stem.split("-")
            for k in range(len(parts), 0, -1):
                if "-".join(parts[:k]) in sources:
                    stem = "-".join(parts[:k])
                    break
            out[(d, n)] = os.path.join(d, stem)
    return out


def c_definitions(text):
    """The names of the functions @p text (comments and strings removed)
    defines: {name: static?}."""
    out = {}
    for m in C_HEAD.finditer(text):
        name = m.group(2)
        if name in C_KEYWORDS:
            continue
        depth, i = 0, m.end() - 1
        while i < len(text):            # to the parameters' end
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        rest = text[i:].lstrip()
        if not rest.startswith("{"):
            continue                    # a prototype, a macro's use
        line_start = text.rfind("\n", 0, m.start() - 1) + 1
        before = m.group(1) or text[line_start:m.start()]
        out[name] = bool(re.search(r"\bstatic\b", before))
    return out


def c_resolve(folders, folder, inc):
    """The file (folder, name) that `#include "inc"` in @p folder reads,
    or None (lib/'s headers, generated ones)."""
    if "/" in inc:
        path = os.path.normpath(os.path.join(folder, inc))
        d, n = os.path.split(path)
        return (d, n) if n in folders.get(d, ()) else None
    if inc in folders.get(folder, ()):
        return folder, inc
    # the include path: the shared code first, then any folder holding it
    order = sorted(PROGRAM_LAYERS, key=PROGRAM_LAYERS.get) + sorted(folders)
    for d in order:
        if inc in folders.get(d, ()):
            return d, inc
    return None


def c_edges(root, folders):
    """The uses between the rooms outside lib/: (includes, calls), each
    {(from room, to room): a reason}."""
    room = c_rooms(folders)
    texts = {}
    for d, names in folders.items():
        for n in names:
            with open(os.path.join(root, d, n), encoding="utf-8",
                      errors="replace") as f:
                raw = f.read()
            texts[(d, n)] = (c_strip(raw, False), c_strip(raw, True))
    defined, local = collections.defaultdict(set), {}
    for (d, n), (_, bare) in texts.items():
        if n.endswith(C_SOURCE):
            defs = c_definitions(bare)
            local[(d, n)] = set(defs)
            for name, static in defs.items():
                if not static:
                    defined[name].add((d, n))
    includes, calls = {}, {}
    for (d, n), (code, bare) in texts.items():
        src = room[(d, n)]
        for inc in INCLUDE.findall(code):
            hit = c_resolve(folders, d, inc)
            if hit and room[hit] != src:
                includes.setdefault((src, room[hit]),
                                    f"{os.path.join(d, n)} includes {inc}")
        if not n.endswith(C_SOURCE):
            continue                    # a header's prototypes call nothing
        for name in C_CALL.findall(bare):
            if name in local[(d, n)]:
                continue                # its own (static or not)
            where = defined.get(name, set())
            if len(where) > 1:          # main(), or a harness's twin:
                where = {w for w in where if w[0] == d}  # its folder's
            if len(where) != 1:
                continue
            dst = room[next(iter(where))]
            if dst != src:
                calls.setdefault((src, dst),
                                 f"{os.path.join(d, n)} calls {name}()")
    return includes, calls


def c_folder(room):
    return os.path.dirname(room)


def check_programs(root):
    """The C code outside lib/: no include cycle, no call cycle, no cycle
    of both, no room using one it must not.  True on failure."""
    folders = c_folders(root)
    rooms = set(c_rooms(folders).values())
    includes, calls = c_edges(root, folders)
    uses = dict(calls)
    uses.update(includes)
    fail = False
    seen = []
    for kind, edges in (("an include cycle", includes),
                        ("a call cycle", calls),
                        ("a cycle of includes and calls", uses)):
        for comp in cycles(rooms, edges):
            if comp in seen:
                continue
            seen.append(comp)
            print(f"FAIL: {kind} between the C rooms {', '.join(comp)}:")
            for (a, b), why in sorted(edges.items()):
                if a in comp and b in comp:
                    print(f"  {a} -> {b}: {why}")
            fail = True
    for (a, b), why in sorted(uses.items()):
        fa, fb = c_folder(a), c_folder(b)
        if fa == fb or fa not in PROGRAM_LAYERS:
            continue                    # its own folder, or a harness
        if fb not in PROGRAM_LAYERS:
            print(f"FAIL: {a} ({fa}/) uses the harness {b} ({fb}/): {why}")
            fail = True
        elif PROGRAM_LAYERS[fb] == PROGRAM_LAYERS[fa]:
            print(f"FAIL: {a} ({fa}/) uses {b} ({fb}/) across: {fa}/ and "
                  f"{fb}/ never use each other: {why}")
            fail = True
        elif PROGRAM_LAYERS[fb] > PROGRAM_LAYERS[fa]:
            print(f"FAIL: {a} ({fa}/) reaches up to {b} ({fb}/): {why}")
            fail = True
    if not fail:
        print(f"ok: {len(rooms)} C rooms outside lib/ in {len(folders)} "
              f"folders, {len(includes)} includes and {len(calls)} calls "
              f"between them, no cycle, none reaching up or across")
    return fail



def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check-layers.py SOURCE_ROOT")
    root = sys.argv[1]
    rooms, by_name = lib_rooms(os.path.join(root, "lib"))
    edges = lib_edges(rooms, by_name)
    fail = report_cycles("rooms of lib/", cycles(rooms, edges), edges)
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    for (a, b), why in sorted(edges.items()):
        la, lb = rooms[a][0], rooms[b][0]
        if rank[la] < rank[lb]:
            print(f"FAIL: {a} ({la}/) reaches up to {b} ({lb}/): {why}")
            fail = True
    fail |= check_programs(root)
    pfail, n_modules = check_python(root)
    fail |= pfail
    if fail:
        sys.exit(1)
    print(f"ok: {len(rooms)} rooms on {len(LAYERS)} layers, "
          f"{len(edges)} uses, no cycle, none reaching up; "
          f"{n_modules} Python modules, no import cycle")


if __name__ == "__main__":
    main()
