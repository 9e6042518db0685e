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
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
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
    pfail, n_modules = check_python(root)
    fail |= pfail
    if fail:
        sys.exit(1)
    print(f"ok: {len(rooms)} rooms on {len(LAYERS)} layers, "
          f"{len(edges)} uses, no cycle, none reaching up; "
          f"{n_modules} Python modules, no import cycle")


if __name__ == "__main__":
    main()
